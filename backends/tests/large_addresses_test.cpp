// PACTS-DEV-2's case transform, at a small threshold so it runs on the CPU: the spread case is
// valid, has the same reference answer, puts every owned page / last row past the threshold,
// and the bytes a wrapped offset would reach are NaN, so a wrap makes ACC-1 fail (the property's
// planted fault). The GPU runs it at 2^31 (spec/properties.md PACTS-DEV-2).
#include <pacts/backends/host.h>
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/large_addresses.h>
#include <pacts/conformance/random_case.h>
#include <pacts/spec/validate.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace pacts::conformance {
namespace {

using backends::make_host_backend;

constexpr int64_t kThreshold = int64_t{1} << 16;
constexpr uint64_t kSeeds = 60;

bool same_answer(const reference::Output& a, const reference::Output& b) {
  if (a.out.size() != b.out.size()) return false;
  for (size_t e = 0; e < a.out.size(); ++e)
    if (!(a.out[e] == b.out[e] || (std::isnan(a.out[e]) && std::isnan(b.out[e])))) return false;
  return true;
}

TEST(LargeAddresses, SpreadCasesAreValidKeepTheAnswerAndPassOnHost) {
  auto host = make_host_backend(2);
  int spread[3] = {0, 0, 0};
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const CaseShape shape = random_shape(seed, 40);
    const CaseData small = make_case(shape, seed);
    const reference::Output want = reference_answer(small);
    for (int v = 0; v < 3; ++v) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " variant " + std::to_string(v));
      CaseData c = small;
      const auto variant = static_cast<LargeAddressVariant>(v);
      if (spread_to_large_addresses(c, variant, kThreshold)) continue;  // not applicable
      ++spread[v];
      ASSERT_TRUE(spec::validate(c.problem, c.buffers()).is_ok());
      const pacts_problem& p = c.problem;
      if (variant == LargeAddressVariant::kPools) {
        const int64_t shift = large_address_page_shift(small.problem, kThreshold);
        EXPECT_EQ(p.num_pages, small.problem.num_pages + shift);
        EXPECT_GE(shift * std::min(p.k_layout.s_page, p.v_layout.s_page), kThreshold);
      } else {
        const pacts_row_layout& l = v == 1 ? p.q_layout : p.out_layout;
        EXPECT_GE((p.batch - 1) * l.s_batch, kThreshold);
      }
      EXPECT_TRUE(same_answer(reference_answer(c), want));
      const Outcome o = within_tolerance(*host, p, observe(*host, c), want);
      EXPECT_FALSE(o.failed()) << o.detail;
    }
  }
  std::printf("spread cases (pools, Q view, output view): %d %d %d of %llu seeds\n", spread[0],
              spread[1], spread[2], static_cast<unsigned long long>(kSeeds));
  EXPECT_GT(spread[0], 10);
  EXPECT_GT(spread[1], 10);
  EXPECT_GT(spread[2], 10);
}

// A kernel that forms page offsets in too few bits reads the low pages, which the spread filled
// with NaN. Emulated by wrapping the owned block-table entries' offsets at the threshold.
TEST(LargeAddresses, AWrappedPageOffsetFailsAccuracy) {
  auto host = make_host_backend(2);
  int caught = 0, tried = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const CaseData small = make_case(random_shape(seed, 40), seed);
    CaseData c = small;
    if (spread_to_large_addresses(c, LargeAddressVariant::kPools, kThreshold)) continue;
    const pacts_problem& p = c.problem;
    bool any_owned = false;
    for (int32_t b = 0; b < p.batch; ++b) {
      const spec::KeyRange cols = spec::owned_columns(
          visible_keys(p, c.context_lens[static_cast<size_t>(b)]), p.page_size);
      if (cols.empty()) continue;
      any_owned = true;
      for (int64_t col = cols.begin; col < cols.end; ++col) {
        int32_t& e = c.block_table[static_cast<size_t>(b * p.block_table_stride + col)];
        e = static_cast<int32_t>((int64_t{e} * p.k_layout.s_page % kThreshold) / p.k_layout.s_page);
      }
    }
    if (!any_owned) continue;
    ++tried;
    const Outcome o = within_tolerance(*host, p, observe(*host, c), reference_answer(small));
    caught += o.failed();
  }
  std::printf("wrapped page offsets caught in %d of %d cases\n", caught, tried);
  EXPECT_GT(tried, 10);
  EXPECT_EQ(caught, tried);
}

}  // namespace
}  // namespace pacts::conformance
