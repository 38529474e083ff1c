// pacts kernels, shared math: which keys a row sees, which keys and block-table entries a
// sequence owns, and the device-resident preconditions (spec/operator.md §5-§6,
// spec/contract.md §1 and §4).
//
// Masks are key RANGES, decided from n_b, L, W and P only (never from data, spec/contract.md §5):
// a kernel iterates over the intersection of a row's range with the keys it holds, so a masked
// key is skipped, never multiplied by a zero weight (0 * NaN = NaN was #7092). Positions are
// 64-bit: n_b is any int32 a device may hold, and pos = n_b - L + i may be negative.
#pragma once

#include "common/hd.h"
#include "common/mutant.h"

namespace pacts::kernels::common {
PACTS_COMMON_ABI_BEGIN

// Keys [begin, end); empty when end <= begin.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;

  PACTS_HD bool empty() const { return end <= begin; }
  PACTS_HD int64_t size() const { return end > begin ? end - begin : 0; }
  PACTS_HD bool contains(int64_t j) const { return begin <= j && j < end; }
};

PACTS_HD inline KeyRange intersect(KeyRange a, KeyRange b) {
  return {a.begin > b.begin ? a.begin : b.begin, a.end < b.end ? a.end : b.end};
}

// spec/operator.md §5-§6: query token i of a sequence with context n sits at pos = n - L + i and
// sees max(0, pos - W + 1) <= j <= pos (W = 0: no window); nothing when pos < 0 (§10).
PACTS_HD inline KeyRange row_keys(int64_t n, int32_t q_len, int32_t window, int32_t i) {
  const int64_t pos = n - q_len + i;
  if (pos < 0) return {0, 0};
  int64_t begin = 0;
  if (window > 0 && pos - window + 1 > 0) begin = pos - window + 1;
  if (window > 0 && PACTS_MUTANT(window_one_short) && pos - window + 2 > 0)
    begin = pos - window + 2;
  if (window > 0 && PACTS_MUTANT(window_one_long) && pos - window >= 0) begin = pos - window;
  if (PACTS_MUTANT(causal_sees_next_key) && pos + 1 < n) return {begin, pos + 2};
  return {begin, pos + 1};
}

// spec/contract.md §1.1: U_b, the union of the rows' visible ranges, = [lo_b, n_b) with
// lo_b = max(0, n_b - L - W + 1) under a window; empty when no row sees a key (n_b = 0). Both
// ends of a row's range grow by at most one per token, so the union is contiguous.
PACTS_HD inline KeyRange sequence_keys(int64_t n, int32_t q_len, int32_t window) {
  if (n <= 0) return {0, 0};
  int64_t begin = 0;
  if (window > 0 && n - q_len - window + 1 > 0) begin = n - q_len - window + 1;
  // The W + 1 convention applied consistently: its extra key is owned (and P2-checked) too.
  if (window > 0 && PACTS_MUTANT(window_one_long) && n - q_len - window >= 0)
    begin = n - q_len - window;
  return {begin, n};
}

// Block-table columns [begin, end) holding at least one key of `keys`: the owned entries
// (spec/contract.md §1.1). Every other column is padding or pre-window and is never an address.
PACTS_HD inline KeyRange owned_columns(KeyRange keys, int32_t page_size) {
  if (keys.empty()) return {0, 0};
  return {keys.begin / page_size, (keys.end - 1) / page_size + 1};
}

// P1 (spec/contract.md §4): 0 <= n_b <= M * P, in 64-bit arithmetic.
PACTS_HD inline bool context_len_ok(int64_t n, int32_t max_pages_per_seq, int32_t page_size) {
  if (PACTS_MUTANT(context_len_bound_exclusive))
    return n >= 0 && n < int64_t{max_pages_per_seq} * page_size;
  return n >= 0 && n <= int64_t{max_pages_per_seq} * page_size;
}

// P2 (spec/contract.md §4): an owned block-table entry names a page in [0, N).
PACTS_HD inline bool page_id_ok(int32_t page, int32_t num_pages) {
  return page >= 0 && page < num_pages;
}

// Partitions of `partition_size` keys, [z * size, (z + 1) * size).
PACTS_HD inline KeyRange partition_keys(int64_t z, int64_t partition_size) {
  if (PACTS_MUTANT(partition_overlap)) return {z * partition_size, (z + 1) * partition_size + 1};
  return {z * partition_size, (z + 1) * partition_size};
}

// The partitions [first, last + 1) that hold at least one key of a non-empty range.
PACTS_HD inline KeyRange partitions_of(KeyRange keys, int64_t partition_size) {
  if (keys.empty()) return {0, 0};
  return {keys.begin / partition_size, (keys.end - 1) / partition_size + 1};
}

PACTS_COMMON_ABI_END
}  // namespace pacts::kernels::common
