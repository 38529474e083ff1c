// Building blocks of property checks: run a backend with guarded outputs, read the outputs back
// through their layouts, compare bitwise or against the reference within spec/tolerance.md.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/case_data.h>
#include <pacts/conformance/property.h>
#include <pacts/reference/decode.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pacts::conformance {

// One run of a backend on a case, as observed from the outside.
struct Observed {
  RunResult run;
  std::vector<uint8_t> out, lse;    // the raw output allocations after the run (gaps included)
  std::vector<uint32_t> out_codes;  // dense [B][L][Hq][D] storage codes read through out_layout
  std::vector<uint32_t> lse_codes;  // dense [B][L][Hq] fp32 bits read through lse_layout
  std::vector<double> out_values;   // decoded out_codes
  std::vector<double> lse_values;   // decoded lse_codes (empty when the problem has no LSE)
};

// Runs `backend` on `c` with out and lse pre-filled with `guard` bytes (c is not modified).
Observed observe(Backend& backend, const CaseData& c, const PlanHint& hint = {},
                 uint8_t guard = 0xA5);

// Backend::run_replayed on a copy of `c` (out and lse pre-filled with `guard`): the observed
// result is the second run's, after the context lengths were replaced by `replayed`.
Observed observe_replayed(Backend& backend, const CaseData& c, std::span<const int32_t> replayed,
                          const PlanHint& hint = {}, uint8_t guard = 0xA5);

// The output and LSE allocations `c.out` / `c.lse` as they are (written by a tool outside pacts,
// exchange.h load_results), read back through their layouts; its run is Ok.
Observed observe_written(const CaseData& c);

// NotSupported when the problem is outside the backend's capabilities.
std::optional<Outcome> unsupported(const Backend& backend, const pacts_problem& problem);

// A refusal or device error of a run that should have succeeded, as a failure.
std::optional<Outcome> run_failed(const Observed& o, const char* what);

// Every output element and LSE within the tolerance of spec/tolerance.md for the backend's
// declared profile, against the reference answer `ref` of the same case. Rows the reference
// marks invalid must be NaN. The outcome's worst_ratio is the worst error/bound ratio.
Outcome within_tolerance(const Backend& backend, const pacts_problem& problem,
                         const Observed& got, const reference::Output& ref);
// The same for a profile given directly (a kernel judged from its written results).
Outcome within_tolerance(const spec::NumericsProfile& profile, const pacts_problem& problem,
                         const Observed& got, const reference::Output& ref);

// The poison relation between two cases over the same owned data (PACTS-POISON-*): InvalidArgument
// when their problems or any owned input byte differ (naming the buffer and the byte); else
// same_bits of their written outputs.
spec::Result<Outcome> same_owned_then_same_bits(const CaseData& a, const CaseData& b);

// For relations between two runs of the backend over the same rows (a metamorphic pair): each
// run is within one bound of the reference `ref`, so the two must agree within twice that bound.
Outcome within_two_bounds(const Backend& backend, const pacts_problem& problem,
                          const Observed& a, const Observed& b, const reference::Output& ref);

// Bitwise equality of the output codes, LSE bits and device error word of two runs.
Outcome same_bits(const Observed& a, const Observed& b, const std::string& what);

// same_bits of a backend's run `got` against the reference's `want`, except that where the
// backend's profile declares flushing (`ftz`) an output element may be ±0 where the exact value
// lies below fp32's normal range, |v| < 2^-126 (spec/properties.md PACTS-ACC-3, ACC-6).
Outcome same_bits_or_flushed(const Observed& got, const Observed& want, bool ftz,
                             const std::string& what);

// The reference answer of a case (the case must be valid).
reference::Output reference_answer(const CaseData& c);
// The answer `backend` is judged against: the reference with the query requantisation its
// numerics profile declares (spec/tolerance.md §2.1), the plain reference when it declares none.
reference::Output reference_answer(const CaseData& c, const Backend& backend);

// PACTS-ACC-4: whether an output value x (rounded to `format`) and its run with V scaled by 2^k
// can be held to exact scaling: x finite, and x and 2^k x both of magnitude strictly above the
// format's smallest normal and 2^k x at most its largest finite value. The smallest normal itself
// is left out: a value just below it rounds on the subnormal grid, one bit coarser than the
// normal grid, and can land exactly on it, while 2^k times that value rounds on the finer grid
// (fp16: 2^-14 - 1.5 x 2^-26 gives 2^-14, and x 8 gives 2^-11 - 2^-22, not 2^-11).
bool exact_scaling_comparable(double x, int k, pacts_format format);

// Index helpers for the dense [B][L][Hq][D] / [B][L][Hq] arrays.
std::string element_name(const pacts_problem& p, size_t dense_index, bool per_row);

}  // namespace pacts::conformance
