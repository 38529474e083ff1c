// pacts::reference::decode: the float64 reference decoder. It defines the answer
// (spec/operator.md) and returns the inputs of the tolerance bound (spec/tolerance.md).
// It reads owned data only (spec/contract.md §1): unowned bytes, scales and block-table
// padding entries are never loaded.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/status.h>
#include <pacts/spec/tolerance.h>

#include <cstdint>
#include <vector>

namespace pacts::reference {

// All per-element vectors are dense [B][L][Hq][D]; all per-row vectors are dense [B][L][Hq].
struct Output {
  std::vector<double> out;          // the exact-as-binary64 answer (before output rounding)
  std::vector<double> lse;          // natural-log sum of exp over visible keys; -inf if none
  std::vector<double> abs_weighted_v;  // A = sum_j p_j |v_j| per element (p includes the sink)
  std::vector<double> sum_abs_v;    // sum_j |v_j| over visible keys, per element
  std::vector<double> max_abs_v;    // max_j |v_j| over visible keys, per element (0 if none)
  std::vector<double> min_v;        // min_j v_j over visible keys, per element (0 if none)
  std::vector<double> max_v;        // max_j v_j over visible keys, per element (0 if none)
  std::vector<double> logit_max;    // L_max = max_j |s_j| before soft-cap, per row
  std::vector<double> logit_abs_dot;  // max_j softmax_scale * sum_i |q_i k_ji| per row
  std::vector<double> sink_abs;     // |sink| of the row's head when finite, else 0, per row
  std::vector<int32_t> visible;     // number of visible keys per row
  std::vector<uint8_t> row_invalid; // 1 where a device-resident precondition failed (row is NaN)
  uint32_t device_error = 0;        // PACTS_DEVERR_* bits, as a kernel must report them
};

// The inputs of spec/tolerance.md's bound for output element `element` of row `row`.
spec::BoundInputs bound_inputs(const Output& ref, size_t row, size_t element);

// Validates (spec::validate with the reference's requirements) and then computes every row.
// Buffers are host pointers. Returns the validator's refusal unchanged when it refuses.
spec::Result<Output> decode(const pacts_problem& problem, const pacts_buffers& buffers);

// The same answer for a backend whose numerics profile requantises the query
// (spec/tolerance.md §2.1): where `q_requant` applies to the problem's K format, every non-empty
// row's query is replaced by its requantised values (softmax_scale and q_scale folded in, exact
// in binary64) before the logits; everything else is as above.
spec::Result<Output> decode(const pacts_problem& problem, const pacts_buffers& buffers,
                            const spec::QueryRequantRule& q_requant);

}  // namespace pacts::reference
