// spec/tolerance.md as code. The derivation of each term is in the document; the comments here
// name the section.
#include <pacts/spec/formats.h>
#include <pacts/spec/requant.h>
#include <pacts/spec/tolerance.h>

#include <cmath>
#include <limits>

namespace pacts::spec {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kU32 = std::ldexp(1.0, -24);
const double kU64 = std::ldexp(1.0, -53);
const double kMinNormal32 = std::ldexp(1.0, -126);

// §3.4: absolute error of storing a value of magnitude below the output's normal range.
double output_floor(const NumericsProfile& prof, pacts_format out) {
  const FormatInfo* fi = format_info(out);
  if (fi == nullptr) return kInf;
  return prof.ftz ? fi->min_normal : fi->min_subnormal / 2;
}

}  // namespace

NumericsProfile reference_profile() {
  NumericsProfile p;
  p.name = "reference-binary64";
  p.u_logit = kU64;
  p.u_acc = kU64;
  p.eps_exp = 4 * kU64;
  p.eps_tanh = 4 * kU64;
  p.eps_log = 4 * kU64;
  return p;
}

NumericsProfile fp32_profile() {
  NumericsProfile p;
  p.name = "fp32";
  p.u_logit = kU32;
  p.u_p = kU32;
  p.u_acc = kU32;
  p.u_partial = kU32;
  p.eps_exp = 4 * kU32;
  p.eps_tanh = 4 * kU32;
  p.eps_log = 4 * kU32;
  return p;
}

double unit_roundoff(pacts_format f) {
  switch (f) {
    case PACTS_FORMAT_BF16: return std::ldexp(1.0, -8);
    case PACTS_FORMAT_FP16: return std::ldexp(1.0, -11);
    case PACTS_FORMAT_FP32: return kU32;
    default: return 0.0;
  }
}

double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu >= 1.0 ? kInf : nu / (1.0 - nu);
}

double eta_p_for(const NumericsProfile& prof, const pacts_problem& problem) {
  const bool listed = (prof.eta_p_formats.kv_formats & format_bit(problem.kv_format)) != 0;
  return listed ? std::fmax(prof.eta_p, prof.eta_p_formats.eta_p) : prof.eta_p;
}

double logit_error_bound(const NumericsProfile& prof, const pacts_problem& problem,
                         const BoundInputs& in) {
  const double s_abs = in.logit_abs_dot;
  // §3.1: the dot product over D terms plus the scale products and the final rounding.
  // A coefficient of 0 contributes 0 even when S is infinite (an Inf input): 0 * inf would be NaN.
  const auto times = [](double coefficient, double x) { return coefficient == 0 ? 0.0 : coefficient * x; };
  double delta = times(gamma_n(problem.head_dim + 4, prof.u_logit), s_abs) + times(prof.u_q, s_abs);
  // §3.1: exp(s - m): the shift m is the largest logit or the sink, so |s - m| <= S + max(S,
  // |sink|) and its rounding adds u times that; exp adds eps_exp.
  delta += times(prof.u_logit, s_abs + std::fmax(s_abs, in.sink_abs)) + prof.eps_exp;
  if (problem.softcap > 0) {
    // §3.1: tanh is 1-Lipschitz, so the error above passes through; tanh's own error and the
    // two roundings around it (s / c, c * t) are added at the scale c.
    delta += problem.softcap * (prof.eps_tanh + 2 * prof.u_logit);
  }
  if (prof.ftz) delta += (problem.head_dim + 2) * kMinNormal32 * 2;  // §3.5: flushed products
  return delta;
}

double underflow_term(const NumericsProfile& prof, double visible) {
  // §3.3: the accumulation's smallest subnormal, binary64's where u_acc says binary64, else
  // fp32's; (4n + 2) roundings of half of it.
  const double sigma = prof.u_acc <= 0x1p-53 ? 0x1p-1074 : 0x1p-149;
  return (4 * visible + 2) * sigma / 2;
}

double output_bound(const NumericsProfile& prof, const pacts_problem& problem,
                    const BoundInputs& in, double r) {
  if (in.visible == 0) return 0.0;  // §3.6: empty rows are exact
  const double n = static_cast<double>(in.visible);
  const double delta = logit_error_bound(prof, problem, in);
  // §3.2: softmax weights perturbed by at most a factor e^{+-2 delta}.
  const double weights = std::expm1(2 * delta);
  // §3.3: P rounding; accumulation of numerator and denominator, the division, split partials.
  double relative = weights + prof.u_p + 2 * gamma_n(n + 4, prof.u_acc) + 4 * prof.u_partial +
                    2 * prof.eps_exp;
  const double eta_p = eta_p_for(prof, problem);
  const double eta = prof.ftz ? std::fmax(eta_p, kMinNormal32) : eta_p;
  if (prof.p_rounded_in_denominator) relative += prof.u_p + n * eta;
  // §3.2: an infinite weight factor (a logit error too large for the weights to mean anything)
  // leaves the output anywhere in the hull of the visible V: an infinite term, even where A
  // underflowed to 0 in binary64 (inf * 0 would be a NaN bound that rejects every value), and 0
  // only when every visible V element is 0 (V1 = 0).
  const double weighted =
      std::isinf(relative) ? (in.sum_abs_v > 0 ? kInf : 0.0) : relative * in.abs_weighted_v;
  double err = weighted + eta * in.sum_abs_v + underflow_term(prof, n);
  if (prof.ftz) err += 2 * kMinNormal32;  // §3.5: flushed V elements and partial results
  // §3.4: one rounding to the output format.
  const double u_out = unit_roundoff(problem.out_format);
  return u_out * std::fabs(r) + (1 + u_out) * err + output_floor(prof, problem.out_format);
}

double lse_bound(const NumericsProfile& prof, const pacts_problem& problem,
                 const BoundInputs& in, double r) {
  if (in.visible == 0) return 0.0;
  const double n = static_cast<double>(in.visible);
  const double delta = logit_error_bound(prof, problem, in);
  // §4: relative error eps of the sum moves its log by at most eps / (1 - eps).
  const double eps = gamma_n(n + 2, prof.u_acc) + 2 * prof.u_partial + prof.eps_exp;
  const double log_err = eps >= 1 ? kInf : eps / (1 - eps);
  const double err = delta + log_err + prof.eps_log;
  return kU32 * std::fabs(r) + (1 + kU32) * err + (prof.ftz ? kMinNormal32 : 0.0);
}

bool within_bound(double value, double reference, double bound, double* ratio) {
  const auto set = [&](double x) {
    if (ratio != nullptr) *ratio = x;
  };
  if (std::isnan(reference)) {
    set(std::isnan(value) ? 0.0 : kInf);
    return std::isnan(value);
  }
  if (std::isinf(reference)) {
    set(value == reference ? 0.0 : kInf);
    return value == reference;
  }
  if (!std::isfinite(value)) {
    set(kInf);
    return false;
  }
  const double err = std::fabs(value - reference);
  if (err == 0) {
    set(0.0);
    return true;
  }
  set(bound > 0 ? err / bound : kInf);
  return err <= bound;
}

}  // namespace pacts::spec
