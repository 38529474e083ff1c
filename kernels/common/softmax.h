// pacts kernels, shared math: soft-cap, the online-softmax state, the partition merge, sinks
// and the final normalisation (spec/operator.md §7-§10).
//
// Numerics (declared in host::profile(), spec/tolerance.md §2):
//   - logits, P = e^(s - m) and the P.V / denominator sums are fp32 (P is not rounded below fp32);
//   - a tile's P.V and P sums are formed apart and then added to the running state (blocked
//     summation): every key's term sees at most (tile - 1) additions inside its tile plus two
//     roundings and one rescale per later tile, within gamma_{n+4} (spec/tolerance.md §3.3);
//   - rescale factors e^(m_old - m_new) use an exact difference (two_sum), so the running max
//     adds no logit-sized error of its own;
//   - the merge of partitions and the final normalisation (sink, 1/l, LSE) are binary64: one
//     rounding of the output (round.h), no fp32 underflow of e^(m - sigma) against a sink of up
//     to 2^64 (R4), and no error from the order of the merge worth a bound term.
#pragma once

#include "common/hd.h"
#include "common/mutant.h"

namespace pacts::kernels::common {
PACTS_COMMON_ABI_BEGIN

// spec/operator.md §7: s <- c * tanh(s / c) for c > 0, after the softmax scale. tanh is bounded,
// so s / c overflowing to +-inf (tiny c) still gives +-c.
PACTS_HD inline float soft_cap(float s, float c) { return c * tanhf(s / c); }

// e^(a - b) for fp32 a, b with the difference taken exactly: two_sum gives a - b = hi + lo, and
// e^(hi + lo) = e^hi (1 + lo) up to lo^2 <= (2^-24 |hi|)^2. A plain fp32 difference would add a
// relative error of 2^-24 |a - b| to the weight. Needs IEEE evaluation of the additions (no
// -ffast-math or reassociation); contracting e + e * lo into an fma is harmless.
PACTS_HD inline float exp_diff(float a, float b) {
  const float hi = a - b;
  if (!(hi - hi == 0.0f)) return expf(hi);  // +-inf or NaN: nothing to correct
  const float a_part = hi + b;
  const float lo = (a - a_part) - (b - (a_part - hi));
  const float e = expf(hi);
  return e + e * lo;
}

// The exponent origin of a state's sums: its max m, or 0 while it has no finite logit (then its
// sums hold only non-finite terms, e^(+inf - 0) = inf or NaN, outside the contract). Every
// rescale, merge and LSE below uses it, so such a state keeps the values the binary64 reference
// gives it (+inf LSE, NaN output) instead of e^(-inf - -inf) = NaN.
PACTS_HD inline float shift_of(float m) { return m == -INFINITY ? 0.0f : m; }
PACTS_HD inline double shift_of(double m) { return m == -INFINITY ? 0.0 : m; }

// The online-softmax state of one row over the keys processed so far:
//   m = the largest finite logit (-inf when none), l = sum_j e^(s_j - shift_of(m));
// the caller holds the accumulator acc_d = sum_j e^(s_j - shift_of(m)) v_jd (fp32, D elements).
//
// Per tile of keys, the caller:
//   1. computes the logits of the row's visible keys in the tile, and their largest finite value
//      (max_finite, from -inf);
//   2. step = state.begin_tile(tile_max): rescales l and gives `alpha` (multiply acc by it) and
//      `shift` (the exponent origin of this tile's weights);
//   3. forms p_j = expf(s_j - shift) for the visible keys only, their sum and sum_j p_j v_j;
//   4. acc_d = acc_d * alpha + (sum_j p_j v_jd); state.add(sum_j p_j).
// Masked keys never appear in step 3: they are skipped, not weighted by zero.
struct TileStep {
  float alpha;  // factor for the accumulator: e^(shift_old - shift_new); 0 when nothing was held
  float shift;  // p_j = e^(s_j - shift)
};

struct SoftmaxState {
  float m = -INFINITY;
  float l = 0.0f;

  // Nothing held: acc is exactly 0 and must stay so (alpha 0 also keeps e^(0 - shift) = inf
  // for a very negative shift out of 0 * inf).
  PACTS_HD bool empty() const { return l == 0.0f && m == -INFINITY; }

  PACTS_HD TileStep begin_tile(float tile_max) {
    float m_new = max_finite(m, tile_max);
    if (PACTS_MUTANT(max_sentinel_finite) && !(m_new > -5e4f)) m_new = -5e4f;
    const float shift = shift_of(m_new);
    // Rescale factor with an exact difference of the origins (exp_diff). An owned NaN held in l
    // stays NaN through the product, the propagation spec/contract.md §3 prefers.
    const float alpha = empty() ? 0.0f : exp_diff(shift_of(m), shift);
    l *= alpha;
    m = m_new;
    if (PACTS_MUTANT(rescale_skipped)) return {alpha == 0.0f ? 0.0f : 1.0f, shift};
    return {alpha, shift};
  }

  PACTS_HD void add(float tile_sum) { l += tile_sum; }
};

// The merge of two partial states over disjoint key sets (spec/operator.md §9), in binary64:
// m = max(m_a, m_b), l = l_a e^(m_a - m) + l_b e^(m_b - m), acc = acc_a e^(m_a - m) + ...
// (with shift_of for the origins). An empty state (m = -inf, l = 0: a partition past the context,
// or one whose keys the row does not see) merges as nothing: it is SELECTED away
// (use_other = false), so its accumulator is never read or multiplied, and two empty states give
// an empty state, never NaN.
struct MergeState {
  double m = -INFINITY;
  double l = 0.0;

  PACTS_HD bool empty() const { return l == 0.0 && m == -INFINITY; }
};

struct MergeWeights {
  bool use_self;    // multiply the held accumulator by `self` (false: it is empty, leave it 0)
  bool use_other;   // add the other accumulator times `other` (false: do not read it)
  double self;
  double other;
};

// The merge of a row's partials all at once (spec/operator.md §9), as a GPU merges many
// partitions (kernels/hip/src/kernel.h merge_partials), in binary64: the origin `top` is the
// largest m of the non-empty partials (merge_top over them in partition order, from -inf); each
// non-empty partial z weighs w_z = e^(shift_of(m_z) - shift_of(top)) (merge_weight); l is
// sum_z w_z l_z and each accumulator sum_z w_z acc_z, in a fixed order. In exact arithmetic that
// is merge() taken partial after partial (each of its rescales multiplies into the same
// e^(m_z - top)); the binary64 roundings differ from it only in order (header: no bound term).
// An empty partial is selected away (merge_uses false): its accumulator is never read or
// multiplied, so a row whose partials are all empty stays (m -inf, l 0, acc 0).
PACTS_HD inline bool merge_uses(double m, double l) { return !(l == 0.0 && m == -INFINITY); }

// `top` after one more non-empty partial with origin m (partition order).
PACTS_HD inline float merge_top(float top, float m) {
  // Mutant: the origin of the first non-empty partial, never raised by a later larger one.
  if (PACTS_MUTANT(merge_wrong_max)) return top == -INFINITY ? m : top;
  return m > top ? m : top;
}

PACTS_HD inline double merge_weight(double m, double top) { return exp(shift_of(m) - shift_of(top)); }

// Merges `other` into `state` and returns how the accumulators combine:
//   acc = (use_self ? acc * self : acc) + (use_other ? acc_other * other : 0).
PACTS_HD inline MergeWeights merge(MergeState& state, double m_other, double l_other) {
  const bool state_empty = state.empty(), other_empty = l_other == 0.0 && m_other == -INFINITY;
  if (PACTS_MUTANT(empty_partition_nan)) {
    // Every partial weighted by e^(m_z - m), the empty one included: its weight is 0, and 0 times
    // its unwritten accumulator is read (spec/operator.md §10: it must be selected away).
    const double m = m_other > state.m ? m_other : state.m;
    const MergeWeights w{!state_empty, true, state_empty ? 0.0 : exp(state.m - m), exp(m_other - m)};
    state.l = state.l * w.self + l_other * w.other;
    state.m = m;
    return w;
  }
  if (other_empty) return {false, false, 1.0, 0.0};
  if (state_empty) {
    state.m = m_other;
    state.l = l_other;
    return {false, true, 1.0, 1.0};
  }
  const double m = PACTS_MUTANT(merge_wrong_max) ? state.m : (m_other > state.m ? m_other : state.m);
  const MergeWeights w{true, true, exp(shift_of(state.m) - shift_of(m)), exp(shift_of(m_other) - shift_of(m))};
  state.l = state.l * w.self + l_other * w.other;
  state.m = m;
  return w;
}

// The final normalisation of a non-empty row (spec/operator.md §8-§9), in binary64. The output
// element is acc_d * factor, rounded once to the output format:
//   no sink:  factor = 1 / l
//   sink s:   factor = e^(m - M) / (l e^(m - M) + e^(s - M)),  M = max(m, s),
// so neither exponential can overflow, and a sink far above every logit scales the output down
// in binary64 (down to e^-745) instead of flushing it in fp32. The sink is never multiplied by
// the softmax scale nor soft-capped (§8), and it is excluded from the LSE. A sink of -inf is no
// sink (e^-inf = 0); a NaN sink makes the row NaN (spec/contract.md §3).
PACTS_HD inline double output_factor(double m, double l, bool has_sink, float sink) {
  if (!has_sink) return 1.0 / l;
  const double s = sink;
  const double origin = shift_of(m);
  const double top = (s > origin && s < INFINITY) ? s : origin;  // the larger finite origin
  const double a = exp(origin - top);
  return a / (l * a + exp(s - top));
}

// spec/operator.md §9: lambda = ln sum_j e^(s_j) = shift_of(m) + ln l over the keys (sink
// excluded), rounded once to fp32 by the caller (round.h).
PACTS_HD inline double log_sum_exp(double m, double l) {
  if (PACTS_MUTANT(lse_base2)) return (shift_of(m) + log(l)) / log(2.0);
  return shift_of(m) + log(l);
}

PACTS_COMMON_ABI_END
}  // namespace pacts::kernels::common
