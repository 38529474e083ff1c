// kernels/common/mask.h against brute-force definitions (spec/operator.md §5-§6,
// spec/contract.md §1.1 and §4).
#include "common/mask.h"

#include <pacts/spec/mask.h>

#include <gtest/gtest.h>

#include <climits>
#include <set>

namespace pacts::kernels::common {
namespace {

// spec/operator.md §5-§6, literally: key j is visible to query token i when
// 0 <= j <= pos and (W = 0 or j >= pos - W + 1), pos = n - L + i.
bool sees(int64_t n, int32_t L, int32_t W, int32_t i, int64_t j) {
  const int64_t pos = n - L + i;
  return j >= 0 && j <= pos && (W == 0 || j >= pos - W + 1);
}

std::set<int64_t> as_set(KeyRange r) {
  std::set<int64_t> s;
  for (int64_t j = r.begin; j < r.end; ++j) s.insert(j);
  return s;
}

TEST(Mask, RowKeysMatchTheDefinition) {
  for (int64_t n = -3; n <= 40; ++n)
    for (int32_t L = 1; L <= 6; ++L)
      for (int32_t W = 0; W <= 12; ++W)
        for (int32_t i = 0; i < L; ++i) {
          std::set<int64_t> want;
          for (int64_t j = -2; j < 45; ++j)
            if (sees(n, L, W, i, j)) want.insert(j);
          ASSERT_EQ(as_set(row_keys(n, L, W, i)), want) << "n " << n << " L " << L << " W " << W << " i " << i;
        }
}

// spec/contract.md §1.1: U_b is the union of the rows' visible sets, and the owned block-table
// columns are exactly those holding a key of U_b.
TEST(Mask, SequenceKeysAndOwnedColumnsMatchTheUnion) {
  for (int64_t n = 0; n <= 70; ++n)
    for (int32_t L = 1; L <= 5; ++L)
      for (int32_t W : {0, 1, 2, 3, 7, 8, 9, 16, 100})
        for (int32_t P : {8, 16}) {
          std::set<int64_t> keys, columns;
          for (int32_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < n; ++j)
              if (sees(n, L, W, i, j)) {
                keys.insert(j);
                columns.insert(j / P);
              }
          const KeyRange u = sequence_keys(n, L, W);
          ASSERT_EQ(as_set(u), keys) << "n " << n << " L " << L << " W " << W;
          ASSERT_EQ(as_set(owned_columns(u, P)), columns) << "n " << n << " L " << L << " W " << W << " P " << P;
        }
}

// The device copy equals the spec's executable definition (pacts/spec/mask.h) range for range.
TEST(Mask, DeviceCopyEqualsTheSpecDefinition) {
  const auto same = [](KeyRange a, spec::KeyRange b) {
    return a.empty() ? b.empty() : a.begin == b.begin && a.end == b.end;
  };
  for (int64_t n = -3; n <= 70; ++n)
    for (int32_t L = 1; L <= 16; ++L)
      for (int32_t W = 0; W <= 20; ++W) {
        const KeyRange u = sequence_keys(n, L, W);
        const spec::KeyRange su = spec::sequence_keys(n, L, W);
        EXPECT_TRUE(same(u, su)) << n << " " << L << " " << W;
        for (int32_t P : {8, 16, 256})
          EXPECT_TRUE(same(owned_columns(u, P), spec::owned_columns(su, P)))
              << n << " " << L << " " << W << " " << P;
        for (int32_t i = 0; i < L; ++i)
          EXPECT_TRUE(same(row_keys(n, L, W, i), spec::row_keys(n, L, W, i)))
              << n << " " << L << " " << W << " " << i;
      }
}

TEST(Mask, PartitionsOfARange) {
  for (int64_t b = 0; b < 50; ++b)
    for (int64_t e = b; e < 60; ++e)
      for (int64_t size : {16, 32, 48}) {
        std::set<int64_t> want;
        for (int64_t j = b; j < e; ++j) want.insert(j / size);
        ASSERT_EQ(as_set(partitions_of({b, e}, size)), want);
        for (int64_t z : want) EXPECT_FALSE(intersect(partition_keys(z, size), {b, e}).empty());
      }
}

// spec/contract.md §4, P1 and P2, at their boundaries (64-bit arithmetic).
TEST(Mask, DevicePreconditions) {
  EXPECT_TRUE(context_len_ok(0, 4, 16));
  EXPECT_TRUE(context_len_ok(64, 4, 16));
  EXPECT_FALSE(context_len_ok(65, 4, 16));
  EXPECT_FALSE(context_len_ok(-1, 4, 16));
  EXPECT_FALSE(context_len_ok(INT32_MIN, 4, 16));
  EXPECT_FALSE(context_len_ok(INT32_MAX, 4, 16));
  EXPECT_TRUE(context_len_ok(2147483392, 8388607, 256));  // M * P = 2^31 - 256
  EXPECT_FALSE(context_len_ok(2147483393, 8388607, 256));
  EXPECT_TRUE(context_len_ok(0, 0, 16));  // no columns: only the empty sequence is valid
  EXPECT_FALSE(context_len_ok(1, 0, 16));
  EXPECT_TRUE(page_id_ok(0, 1));
  EXPECT_FALSE(page_id_ok(1, 1));
  EXPECT_FALSE(page_id_ok(-1, 10));
  EXPECT_FALSE(page_id_ok(INT32_MIN, 10));
  EXPECT_FALSE(page_id_ok(INT32_MAX, 10));
  EXPECT_FALSE(page_id_ok(0, 0));
  // The extreme rows: pos = n - L + i never overflows in 64 bits.
  EXPECT_TRUE(row_keys(INT32_MIN, 16, 0, 0).empty());
  EXPECT_EQ(row_keys(INT32_MAX, 1, 5, 0).size(), 5);
}

}  // namespace
}  // namespace pacts::kernels::common
