// pacts::spec tolerance model (spec/tolerance.md): the declared numerics profile of a backend and
// the per-element error bound a backend's output must meet against the reference.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/requant.h>

#include <cstdint>
#include <string>

namespace pacts::spec {

// A floor of P's rounding that holds only for some KV formats (spec/tolerance.md §2): a backend
// whose kernels round P into a narrower format for those formats declares it here, and the other
// formats keep the profile's eta_p. kv_formats holds spec::format_bit of each listed format.
struct FormatPFloor {
  uint32_t kv_formats = 0;
  double eta_p = 0;
};

// How a backend rounds what it computes (spec/tolerance.md §2). Every field is a unit roundoff
// (relative) or an absolute error; 0 means "exact / not done".
struct NumericsProfile {
  std::string name;
  double u_logit = 0;     // unit roundoff of the Q.K dot product and of the logit arithmetic
  double u_q = 0;         // relative rounding of the (scaled) query before Q.K (0: not rounded)
  double u_p = 0;         // relative rounding of P before P.V (bf16 P: 2^-8)
  double eta_p = 0;       // absolute per-key floor of that rounding (fp8 P: its subnormal floor)
  FormatPFloor eta_p_formats;  // a larger floor for the KV formats it lists (eta_p_for)
  bool p_rounded_in_denominator = false;  // the softmax denominator sums the rounded P
  double u_acc = 0;       // real precision of the P.V and denominator accumulation
  double u_partial = 0;   // rounding of stored partials (max, sum, accumulator) when split
  double eps_exp = 0;     // relative error of exp
  double eps_tanh = 0;    // absolute error of tanh (soft-cap)
  double eps_log = 0;     // absolute error of log (LSE)
  bool ftz = false;       // subnormal inputs, intermediates or outputs may be flushed to zero
  // spec/tolerance.md §2.1: the query requantisation the kernel applies, for the K formats it
  // names. The reference applies the same rule bit for bit (reference::decode), so the
  // requantised query is the problem's query and adds no tolerance term.
  QueryRequantRule q_requant;
};

// The float64 reference itself: binary64 throughout, correctly rounded output.
NumericsProfile reference_profile();
// A straightforward fp32 implementation: fp32 dot products, fp32 P, fp32 accumulation and
// partials, libm-accurate exp/tanh/log (a few ulp), subnormals kept. The host backend's baseline.
NumericsProfile fp32_profile();

// The reference's per-element and per-row quantities the bound needs (reference::Output holds
// them for every element).
struct BoundInputs {
  double abs_weighted_v = 0;  // A = sum_j p_j |v_j|
  double sum_abs_v = 0;       // sum_j |v_j| over visible keys
  double logit_abs_dot = 0;   // max_j softmax_scale * sum_i |q_i k_ji|
  int64_t visible = 0;        // n, visible keys of the row
  double sink_abs = 0;        // |sink| of the row when it has a finite sink, else 0
};

// Unit roundoff 2^-(mantissa bits + 1) of bf16/fp16/fp32; 0 for other formats.
double unit_roundoff(pacts_format f);

// gamma_n(u) = n u / (1 - n u), +inf when n u >= 1 (Higham §3.1).
double gamma_n(double n, double u);

// The floor of P's rounding that holds for `problem`: the profile's eta_p, or its per-format
// floor where the problem's kv_format is listed there and that floor is larger (§2).
double eta_p_for(const NumericsProfile& prof, const pacts_problem& problem);

// Delta: bound on the absolute error of every logit of the row (spec/tolerance.md §3.1).
double logit_error_bound(const NumericsProfile& prof, const pacts_problem& problem,
                         const BoundInputs& in);

// Bound on |o - r| for one output element whose reference value is r (spec/tolerance.md §3).
// §3.3's absolute term for results that underflow: (4 n + 2) roundings, each at most half the
// smallest subnormal of the accumulation (fp32's, or binary64's where u_acc <= 2^-53), for a row
// of n visible keys. output_bound includes it.
double underflow_term(const NumericsProfile& prof, double visible);

double output_bound(const NumericsProfile& prof, const pacts_problem& problem,
                    const BoundInputs& in, double r);

// Bound on |lse - r| for one row whose reference LSE is r (spec/tolerance.md §4).
double lse_bound(const NumericsProfile& prof, const pacts_problem& problem,
                 const BoundInputs& in, double r);

// The verdict for one value (spec/tolerance.md §5): a NaN reference (an invalid row) needs a
// NaN; an infinite reference needs the same infinity; a finite reference needs a finite value
// within `bound`. `ratio` receives |o - r| / bound (0 when both are equal, +inf when failed by
// class).
bool within_bound(double value, double reference, double bound, double* ratio = nullptr);

}  // namespace pacts::spec
