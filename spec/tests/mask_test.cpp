// pacts::spec masks against the words of spec/operator.md §5-§6 and spec/contract.md §1.1,
// applied key by key.
#include <pacts/spec/mask.h>

#include <gtest/gtest.h>

#include <set>

namespace pacts::spec {
namespace {

// §5-§6, literally: key j is visible to query token i when 0 <= j <= pos and (W = 0 or
// j >= pos - W + 1), pos = n - L + i.
bool sees(int64_t n, int32_t L, int32_t W, int32_t i, int64_t j) {
  const int64_t pos = n - L + i;
  return j >= 0 && j <= pos && (W == 0 || j >= pos - W + 1);
}

std::set<int64_t> keys_of(KeyRange r) {
  std::set<int64_t> s;
  for (int64_t j = r.begin; j < r.end; ++j) s.insert(j);
  return s;
}

TEST(SpecMask, RowKeysAreTheKeysTheOperatorShows) {
  for (int64_t n = -3; n <= 40; ++n)
    for (int32_t L = 1; L <= 6; ++L)
      for (int32_t W = 0; W <= 12; ++W)
        for (int32_t i = 0; i < L; ++i) {
          std::set<int64_t> want;
          for (int64_t j = -2; j <= n + 2; ++j)
            if (sees(n, L, W, i, j)) want.insert(j);
          EXPECT_EQ(keys_of(row_keys(n, L, W, i)), want) << n << " " << L << " " << W << " " << i;
        }
}

TEST(SpecMask, SequenceKeysAndColumnsAreTheUnionOfTheRows) {
  for (int64_t n = -3; n <= 40; ++n)
    for (int32_t L = 1; L <= 6; ++L)
      for (int32_t W = 0; W <= 12; ++W)
        for (int32_t P : {8, 16}) {
          std::set<int64_t> keys, columns;
          for (int32_t i = 0; i < L; ++i)
            for (int64_t j : keys_of(row_keys(n, L, W, i))) {
              keys.insert(j);
              columns.insert(j / P);
            }
          const KeyRange u = sequence_keys(n, L, W);
          EXPECT_EQ(keys_of(u), keys) << n << " " << L << " " << W;
          EXPECT_EQ(keys_of(owned_columns(u, P)), columns) << n << " " << L << " " << W << " " << P;
        }
}

TEST(SpecMask, RangesAreHalfOpen) {
  const KeyRange r{3, 5};
  EXPECT_FALSE(r.empty());
  EXPECT_EQ(r.size(), 2);
  EXPECT_TRUE(r.contains(3));
  EXPECT_TRUE(r.contains(4));
  EXPECT_FALSE(r.contains(5));
  EXPECT_TRUE((KeyRange{5, 5}).empty());
  EXPECT_EQ((KeyRange{6, 5}).size(), 0);
}

}  // namespace
}  // namespace pacts::spec
