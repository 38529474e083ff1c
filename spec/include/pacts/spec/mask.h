// pacts::spec masks: the executable definition of which keys a query row sees (spec/operator.md
// §5-§6) and which keys and block-table columns a sequence owns (spec/contract.md §1.1), as
// half-open key ranges. The conformance framework takes its ownership from here; the kernels keep
// a device copy (kernels/common/mask.h) that their unit tests compare with this one, and the
// reference decides visibility on its own (reference/), so that two independent versions meet.
#pragma once

#include <cstdint>

namespace pacts::spec {

// Keys [begin, end); empty when end <= begin.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;

  bool empty() const { return end <= begin; }
  int64_t size() const { return end > begin ? end - begin : 0; }
  bool contains(int64_t j) const { return begin <= j && j < end; }
};

// spec/operator.md §5-§6: query token i of a sequence of n keys (n counts the L new tokens) sits
// at pos = n - L + i and sees max(0, pos - W + 1) <= j <= pos, W = 0 meaning no window; nothing
// when pos < 0 (§10). 64-bit: n may be any int32 a device holds.
KeyRange row_keys(int64_t n, int32_t q_len, int32_t window, int32_t i);

// spec/contract.md §1.1: U_b, the union of the sequence's rows' visible keys, [lo_b, n) with
// lo_b = 0 without a window and max(0, n - L - W + 1) with one; empty when n <= 0.
KeyRange sequence_keys(int64_t n, int32_t q_len, int32_t window);

// spec/contract.md §1.1: the owned block-table columns of `keys`, those whose page holds at least
// one of them: [keys.begin / P, (keys.end - 1) / P + 1); empty for empty keys.
KeyRange owned_columns(KeyRange keys, int32_t page_size);

}  // namespace pacts::spec
