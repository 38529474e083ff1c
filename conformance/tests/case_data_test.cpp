// Case data, ownership and poison fills: the machinery every poison property relies on. If
// owned_bytes() marked too much, poison checks could not fail; too little, they would fail a
// correct kernel.
#include <pacts/conformance/case_data.h>
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/random_case.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace pacts::conformance {
namespace {

TEST(VisibleKeys, CausalAndWindowUnion) {
  pacts_problem p = spec::make_problem(1, 1, 1, 1, 64, 8, 4, 4);
  EXPECT_EQ(visible_keys(p, 10).begin, 0);
  EXPECT_EQ(visible_keys(p, 10).end, 10);
  p.q_len = 2;
  p.window = 3;  // rows at pos 8 (keys 6..8) and 9 (keys 7..9)
  EXPECT_EQ(visible_keys(p, 10).begin, 6);
  EXPECT_EQ(visible_keys(p, 10).end, 10);
  EXPECT_TRUE(visible_keys(p, 0).empty());
  p.window = 100;
  EXPECT_EQ(visible_keys(p, 10).begin, 0);
}

CaseShape small_shape() {
  CaseShape s;
  s.batch = 2;
  s.page_size = 8;
  s.max_context = 20;
  s.kv_format = PACTS_FORMAT_E4M3FN;
  s.k_scale_mode = PACTS_SCALE_PER_TOKEN;
  return s;
}

TEST(OwnedBytes, CountsExactlyTheVisibleRows) {
  CaseShape s = small_shape();
  s.contexts = {13, 0};
  CaseData c = make_case(s, 7);
  const Ownership own = owned_bytes(c);
  const auto count = [](const std::vector<uint8_t>& f) { return std::accumulate(f.begin(), f.end(), 0); };
  const int rows = 13 * c.problem.num_kv_heads;
  EXPECT_EQ(count(own.k), rows * c.problem.head_dim);  // e4m3: one byte per element
  EXPECT_EQ(count(own.v), rows * c.problem.head_dim);
  EXPECT_EQ(count(own.k_scale), rows * 4);             // one fp32 per row
  EXPECT_EQ(count(own.v_scale), 0);                    // V has no per-token scales here
  EXPECT_EQ(count(own.block_table), 2);                // pages 0 and 1 of sequence 0
}

TEST(Poison, OverwritesEveryUnownedByteAndNothingElse) {
  CaseShape s = small_shape();
  s.contexts = {13, 3};
  CaseData c = make_case(s, 11);
  CaseData dirty = c;
  ASSERT_TRUE(poison_unowned(dirty, Poison::kNaN, 5));
  const Ownership own = owned_bytes(c);
  for (size_t i = 0; i < c.k.size(); ++i) {
    if (own.k[i]) {
      ASSERT_EQ(dirty.k[i], c.k[i]) << "owned K byte " << i << " changed";
    } else {
      ASSERT_EQ(dirty.k[i], 0x7F) << "unowned K byte " << i << " not poisoned with e4m3fn NaN";
    }
  }
  const uint8_t fp32_nan[4] = {0x00, 0x00, 0xC0, 0x7F};  // 0x7FC00000, little endian
  for (size_t i = 0; i < c.k_scale.size(); ++i) {
    if (own.k_scale[i]) {
      ASSERT_EQ(dirty.k_scale[i], c.k_scale[i]) << "owned scale byte " << i << " changed";
    } else {
      ASSERT_EQ(dirty.k_scale[i], fp32_nan[i % 4]) << "unowned scale byte " << i;
    }
  }
  for (size_t i = 0; i < c.block_table.size(); ++i) {
    if (own.block_table[i]) {
      EXPECT_EQ(dirty.block_table[i], c.block_table[i]);
    }
  }
}

TEST(Poison, InfFillOfAFormatWithoutInfIsNotApplicable) {
  CaseData c = make_case(small_shape(), 3);
  CaseData dirty = c;
  EXPECT_FALSE(poison_unowned(dirty, Poison::kInf, 1));  // e4m3fn has no Inf (#7092)
  EXPECT_EQ(dirty.k, c.k);
  CaseShape s = small_shape();
  s.kv_format = PACTS_FORMAT_E5M2;
  CaseData e5 = make_case(s, 3);
  EXPECT_TRUE(poison_unowned(e5, Poison::kInf, 1));
}

TEST(RandomCase, EveryGeneratedCaseIsValid) {
  for (uint64_t seed = 0; seed < 400; ++seed) {
    CaseData c = make_case(random_shape(seed), seed);
    const spec::Status s = spec::validate(c.problem, c.buffers());
    ASSERT_TRUE(s.is_ok()) << "seed " << seed << ": " << s.to_string();
  }
}

// case_problem (the shrinkers validate their candidates with it, without building their data) is
// make_case's problem, byte for byte: contexts drawn from the seed or given, q_scale of a tiny
// query, the low pages' count. The shapes without contexts draw them from the case's seed.
TEST(RandomCase, CaseProblemIsTheBuiltCasesProblem) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    CaseShape s = random_shape(seed);
    if (seed % 3 == 0) s.contexts.clear();
    if (seed % 5 == 0) s.q_exponent = -40;
    // Compared byte for byte with the one padding gap (before q_layout) cleared.
    const auto bytes_of = [](pacts_problem p) {
      const size_t from = offsetof(pacts_problem, want_lse) + sizeof p.want_lse;
      std::memset(reinterpret_cast<unsigned char*>(&p) + from, 0, offsetof(pacts_problem, q_layout) - from);
      return p;
    };
    const pacts_problem want = bytes_of(make_case(s, seed).problem);
    const pacts_problem got = bytes_of(case_problem(s, seed));
    ASSERT_EQ(std::memcmp(&want, &got, sizeof want), 0) << "seed " << seed;
  }
}

// Page ids past 16 bits (spec/case_files.md §3.1, aiter #3062): with low_pages every owned page
// id is at least low_pages (a shared first page included), the pages below are owned by nobody
// and keep zero bytes, and the owned pages hold data.
TEST(RandomCase, LowPagesPutEveryOwnedIdAboveThem) {
  CaseShape s;
  s.batch = 3;
  s.num_kv_heads = 1;
  s.num_q_heads = 2;
  s.page_size = 8;
  s.kv_format = PACTS_FORMAT_E4M3FN;
  s.contexts = {9, 0, 17};
  s.share_pages = true;
  s.low_pages = kLowPages;
  CaseData c = make_case(s, 5);
  const pacts_problem& p = c.problem;
  ASSERT_TRUE(spec::validate(p, c.buffers()).is_ok());
  EXPECT_EQ(p.num_pages, 2 + 0 + 3 + s.extra_pages + kLowPages);
  int owned = 0;
  for (int32_t b = 0; b < p.batch; ++b)
    for (int32_t col = 0; col * p.page_size < c.context_lens[static_cast<size_t>(b)]; ++col, ++owned) {
      const int32_t id = c.block_table[static_cast<size_t>(b * p.block_table_stride + col)];
      EXPECT_GE(id, kLowPages);
      EXPECT_LT(id, p.num_pages);
    }
  EXPECT_EQ(owned, 5);
  const auto page_bytes = [&](const std::vector<uint8_t>& pool, int64_t page) {
    const int64_t n = p.k_layout.s_page;  // e4m3fn: one byte an element; K and V alike here
    return std::vector<uint8_t>(pool.begin() + page * n, pool.begin() + (page + 1) * n);
  };
  const std::vector<uint8_t> zeros(static_cast<size_t>(p.k_layout.s_page), 0);
  for (int64_t page : {int64_t{0}, int64_t{12345}, int64_t{kLowPages} - 1}) {
    EXPECT_EQ(page_bytes(c.k, page), zeros) << "page " << page;
    EXPECT_EQ(page_bytes(c.v, page), zeros) << "page " << page;
  }
  EXPECT_NE(page_bytes(c.k, c.block_table[0]), zeros);
}

TEST(RandomCase, SameSeedSameBytes) {
  const CaseData a = make_case(random_shape(42), 42);
  const CaseData b = make_case(random_shape(42), 42);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.block_table, b.block_table);
}

}  // namespace
}  // namespace pacts::conformance

namespace pacts::conformance {
namespace {

// Generation follows a backend's capabilities (a GPU run spends its cases on what it claims);
// REFUSE-2's opt-out keeps the whole space; a backend claiming everything is unchanged.
TEST(Generators, FollowCapabilities) {
  Capabilities narrow;
  narrow.q_formats = {PACTS_FORMAT_FP16};
  narrow.kv_formats = {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16};
  narrow.out_formats = {PACTS_FORMAT_FP32};
  narrow.head_dims = {128};
  narrow.chunked_layouts = false;
  const GenLimits lim = restrict_to_capabilities(GenLimits{}, narrow);
  GenLimits opted_out;
  opted_out.follow_capabilities = false;
  opted_out = restrict_to_capabilities(opted_out, narrow);
  const GenLimits all = restrict_to_capabilities(GenLimits{}, Capabilities::everything());
  int outside = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const CaseShape s = gen_case(lim)(rc::Random(seed), 50).value().shape;
    EXPECT_EQ(s.q_format, PACTS_FORMAT_FP16);
    EXPECT_TRUE(s.kv_format == PACTS_FORMAT_BF16 || s.kv_format == PACTS_FORMAT_FP16);
    EXPECT_EQ(s.out_format, PACTS_FORMAT_FP32);
    EXPECT_EQ(s.head_dim, 128);
    EXPECT_NE(s.k_layout, PoolLayout::kXPackedK);
    EXPECT_NE(s.v_layout, PoolLayout::kDimMajorV);
    const CaseShape o = gen_case(opted_out)(rc::Random(seed), 50).value().shape;
    outside += check_capabilities(narrow, make_case(o, 1).problem).is_ok() ? 0 : 1;
    const CaseSpec a = gen_case(all)(rc::Random(seed), 50).value();
    const CaseSpec b = gen_case(GenLimits{})(rc::Random(seed), 50).value();
    EXPECT_EQ(describe(a), describe(b));
  }
  EXPECT_GT(outside, 30);
}

// A backend as narrow as a peer decode kernel (one query token, no sinks, no scales, groups up
// to 8, pages 16 to 64, no LSE): every generated case is inside its capabilities, so its runs
// are judged rather than NotSupported. Without the shape limits of restrict_to_capabilities
// (L, G, pages, scale modes, options) most of these cases would be outside.
TEST(Generators, FollowShapeLimitsAndOptions) {
  Capabilities narrow = Capabilities::everything();
  narrow.q_formats = {PACTS_FORMAT_BF16};
  narrow.kv_formats = {PACTS_FORMAT_BF16, PACTS_FORMAT_E4M3FN};
  narrow.out_formats = {PACTS_FORMAT_BF16};
  narrow.scale_modes = {PACTS_SCALE_NONE};
  narrow.max_q_len = 1;
  narrow.max_group = 8;
  narrow.min_page_size = 16;
  narrow.max_page_size = 64;
  narrow.sinks = false;
  narrow.softcap = false;
  narrow.lse = false;
  narrow.chunked_layouts = false;
  const GenLimits lim = restrict_to_capabilities(GenLimits{}, narrow);
  GenLimits wants_l2;  // a property that needs L > 1 meets NotSupported, as before
  wants_l2.min_q_len = 2;
  wants_l2 = restrict_to_capabilities(wants_l2, narrow);
  GenLimits opted_out;
  opted_out.follow_capabilities = false;
  opted_out = restrict_to_capabilities(opted_out, narrow);
  int outside = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const CaseSpec c = gen_case(lim)(rc::Random(seed), 50).value();
    const spec::Status s = check_capabilities(narrow, c.build().problem);
    EXPECT_TRUE(s.is_ok()) << describe(c) << ": " << s.message();
    EXPECT_FALSE(c.shape.lse) << describe(c);
    EXPECT_GE(gen_case(wants_l2)(rc::Random(seed), 50).value().shape.q_len, 2);
    outside += check_capabilities(narrow, gen_case(opted_out)(rc::Random(seed), 50).value().build().problem)
                       .is_ok()
                   ? 0
                   : 1;
  }
  EXPECT_GT(outside, 150);
}

// High page ids are drawn last, for about three in four cases whose 2^16 unowned pages fit
// kHighIdPoolBytes (measured on the built cases), and never when a property turns them off.
TEST(Generators, DrawHighPageIdsWhereTheyFit) {
  GenLimits off;
  off.high_page_ids = false;
  int high = 0, fits = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const CaseSpec c = gen_case()(rc::Random(seed), 50).value();
    CaseShape low = c.shape;
    low.low_pages = 0;
    const uint64_t page = case_buffer_bytes(shape_problem(low, 2, 1)) -
                          case_buffer_bytes(shape_problem(low, 1, 1));
    const bool fit = page * kLowPages <= kHighIdPoolBytes;
    fits += fit ? 1 : 0;
    if (c.shape.low_pages != 0) {
      ++high;
      EXPECT_EQ(c.shape.low_pages, kLowPages) << describe(c);
      // What the low pages take in the case make_case builds, against the same case without them.
      CaseSpec without = c;
      without.shape.low_pages = 0;
      const uint64_t extra =
          case_buffer_bytes(c.build().problem) - case_buffer_bytes(without.build().problem);
      EXPECT_LE(extra, kHighIdPoolBytes) << describe(c);
      EXPECT_GT(extra, uint64_t{0}) << describe(c);
    }
    EXPECT_EQ(gen_case(off)(rc::Random(seed), 50).value().shape.low_pages, 0);
  }
  std::printf("high page ids: %d of 400 generated cases, %d of which fit\n", high, fits);
  EXPECT_GT(high, fits / 2) << fits << " cases fit";
  EXPECT_LT(high, fits) << fits << " cases fit";
}

}  // namespace
}  // namespace pacts::conformance

namespace pacts::conformance {
namespace {

// PACTS-ACC-4's guard (check_util.h): the smallest normal is not comparable, because a value
// rounded on the subnormal grid can land on it. The fp16 case the H200 met, worked by hand:
// v = 2^-14 - 1.5 x 2^-26 rounds to 2^-14 in fp16 (subnormal spacing 2^-24), and 8 v =
// 2^-11 - 1.5 x 2^-23 rounds to 2^-11 - 2^-22 (spacing 2^-22 below 2^-11), not to 8 x 2^-14.
TEST(ExactScaling, SmallestNormalIsNotComparable) {
  const double min16 = std::ldexp(1.0, -14);
  EXPECT_EQ(spec::round_to(PACTS_FORMAT_FP16, min16 - 1.5 * std::ldexp(1.0, -26)), min16);
  EXPECT_EQ(spec::round_to(PACTS_FORMAT_FP16, 8 * (min16 - 1.5 * std::ldexp(1.0, -26))),
            std::ldexp(1.0, -11) - std::ldexp(1.0, -22));
  EXPECT_FALSE(exact_scaling_comparable(min16, 3, PACTS_FORMAT_FP16));
  EXPECT_FALSE(exact_scaling_comparable(-min16, 3, PACTS_FORMAT_FP16));
  // Scaled down onto the smallest normal: the same, from the other side.
  EXPECT_FALSE(exact_scaling_comparable(8 * min16, -3, PACTS_FORMAT_FP16));
  // One step above it, both ways, and ordinary values: comparable.
  const double above = min16 + std::ldexp(1.0, -24);
  EXPECT_TRUE(exact_scaling_comparable(above, 3, PACTS_FORMAT_FP16));
  EXPECT_TRUE(exact_scaling_comparable(-0.75, -3, PACTS_FORMAT_FP16));
  EXPECT_TRUE(exact_scaling_comparable(0.5, 3, PACTS_FORMAT_BF16));
  // Subnormal, overflowing or non-finite: not comparable.
  EXPECT_FALSE(exact_scaling_comparable(std::ldexp(1.0, -20), 3, PACTS_FORMAT_FP16));
  EXPECT_FALSE(exact_scaling_comparable(60000.0, 1, PACTS_FORMAT_FP16));
  EXPECT_FALSE(exact_scaling_comparable(INFINITY, 1, PACTS_FORMAT_FP32));
  EXPECT_FALSE(exact_scaling_comparable(std::ldexp(1.0, -126), 2, PACTS_FORMAT_FP32));
  EXPECT_TRUE(exact_scaling_comparable(std::ldexp(1.0, -125), 2, PACTS_FORMAT_FP32));
}

}  // namespace
}  // namespace pacts::conformance
