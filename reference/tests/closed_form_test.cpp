// Closed-form checks of the float64 reference (spec/operator.md): cases whose answer is known by
// hand, layout and format equivalences, owned-data-only poison runs (spec/contract.md §1) and the
// device-resident preconditions (spec/contract.md §4).
#include <gtest/gtest.h>

#include "case_builder.h"

#include <pacts/reference/decode.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pacts::reference {
namespace {

using testing::Case;
using testing::Fill;
using testing::Pool;

constexpr double kInf = std::numeric_limits<double>::infinity();

// --- building problems ------------------------------------------------------------------------

// make_problem's contiguous NHD bf16 problem; num_pages = batch * max_pages.
pacts_problem shape(int32_t batch, int32_t q_len, int32_t hq, int32_t hkv, int32_t d,
                    int32_t page, int32_t max_pages) {
  return spec::make_problem(batch, q_len, hq, hkv, d, page, batch * max_pages, max_pages);
}

// Sets the KV format and scale modes, with contiguous layouts for e2m1 (bytes) and the scale
// pools: per-token [page][tok][head], e8m0 [page][tok][head][block].
void set_kv_format(pacts_problem& p, pacts_format f, pacts_scale_mode k_mode,
                   pacts_scale_mode v_mode) {
  p.kv_format = f;
  p.k_scale_mode = k_mode;
  p.v_scale_mode = v_mode;
  if (f == PACTS_FORMAT_E2M1) {
    const int64_t row = p.head_dim / 2;
    const pacts_pool_layout nhd{p.page_size * p.num_kv_heads * row, row, p.num_kv_heads * row,
                                row, static_cast<int32_t>(row), 0};
    p.k_layout = nhd;
    p.v_layout = nhd;
  }
  const auto scale_layout = [&](pacts_scale_mode mode) {
    const int64_t blocks = mode == PACTS_SCALE_MX_BLOCK ? p.head_dim / 32 : 1;
    return pacts_scale_layout{p.page_size * p.num_kv_heads * blocks, blocks,
                              p.num_kv_heads * blocks, 1};
  };
  p.k_scale_layout = scale_layout(k_mode);
  p.v_scale_layout = scale_layout(v_mode);
}

// Allocates, writes the context lengths and gives sequence b's column c page b*max_pages + c.
Case paged_case(const pacts_problem& p, const std::vector<int32_t>& ctx, Fill fill = Fill::kZero) {
  Case c(p);
  c.allocate(fill);
  for (int64_t b = 0; b < p.batch; ++b) {
    c.set_context(b, ctx.at(static_cast<size_t>(b)));
    for (int64_t col = 0; col < p.max_pages_per_seq; ++col)
      c.set_page(b, col, static_cast<int32_t>(b * p.max_pages_per_seq + col));
  }
  return c;
}

Output run(Case& c) {
  spec::Result<Output> r = c.run();
  if (!r.is_ok()) throw std::runtime_error("reference refused: " + r.status().to_string());
  return std::move(r).value();
}

size_t row_of(const pacts_problem& p, int64_t b, int64_t i, int64_t h) {
  return static_cast<size_t>((b * p.q_len + i) * p.num_q_heads + h);
}
size_t elem_of(const pacts_problem& p, int64_t b, int64_t i, int64_t h, int64_t d) {
  return row_of(p, b, i, h) * static_cast<size_t>(p.head_dim) + static_cast<size_t>(d);
}

// Deterministic test data: a multiple of 1/32 in [-2, 2), exact in every 16-bit format and
// rounded by the fp8/fp4 encoders (tests compare against the decoded code, never against this).
double data_value(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^
               (c + 17) * 0x94D049BB133111EBull ^ (d + 101) * 0xD6E8FEB86659FD93ull;
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<double>(static_cast<int64_t>(x % 128) - 64) / 32.0;
}

// Writes data_value K/V for keys [first, ctx) of every sequence and every Q row; per-token
// scales and e8m0 bytes of those keys get fixed non-trivial values.
void write_data(Case& c, const std::vector<int32_t>& ctx, const std::vector<int32_t>& first,
                uint64_t seed = 1) {
  const pacts_problem& p = c.problem;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t j = first.at(static_cast<size_t>(b)); j < ctx.at(static_cast<size_t>(b)); ++j) {
      const int32_t page = c.page_of(b, j / p.page_size);
      const int64_t slot = j % p.page_size;
      for (int64_t h = 0; h < p.num_kv_heads; ++h) {
        for (int64_t d = 0; d < p.head_dim; ++d) {
          c.set_kv(Pool::kK, page, h, slot, d, data_value(seed, b * 1000 + j, h, d));
          c.set_kv(Pool::kV, page, h, slot, d, data_value(seed + 7, b * 1000 + j, h, d));
        }
        if (p.k_scale_mode == PACTS_SCALE_PER_TOKEN)
          c.set_token_scale(Pool::kK, page, h, slot, 0.75f + 0.125f * static_cast<float>(j % 5));
        if (p.v_scale_mode == PACTS_SCALE_PER_TOKEN)
          c.set_token_scale(Pool::kV, page, h, slot, 1.5f - 0.0625f * static_cast<float>(j % 7));
        for (int64_t blk = 0; blk < p.head_dim / 32; ++blk) {
          if (p.k_scale_mode == PACTS_SCALE_MX_BLOCK)
            c.set_block_scale(Pool::kK, page, h, slot, blk, static_cast<uint8_t>(125 + (j + blk) % 4));
          if (p.v_scale_mode == PACTS_SCALE_MX_BLOCK)
            c.set_block_scale(Pool::kV, page, h, slot, blk, static_cast<uint8_t>(124 + (j * 3 + blk) % 7));
        }
      }
    }
  }
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        for (int64_t d = 0; d < p.head_dim; ++d)
          c.set_q(b, i, h, d, data_value(seed + 3, b * 100 + i, h, d));
}

// Keys some row of a sequence sees start at the first row's window (spec/operator.md §4).
int32_t first_owned_key(const pacts_problem& p, int32_t ctx) {
  return p.window > 0 ? std::max(0, ctx - p.q_len - p.window + 1) : 0;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void expect_bitwise_equal(const Output& a, const Output& b) {
  EXPECT_TRUE(same_bits(a.out, b.out)) << "out";
  EXPECT_TRUE(same_bits(a.lse, b.lse)) << "lse";
  EXPECT_TRUE(same_bits(a.abs_weighted_v, b.abs_weighted_v)) << "abs_weighted_v";
  EXPECT_TRUE(same_bits(a.sum_abs_v, b.sum_abs_v)) << "sum_abs_v";
  EXPECT_TRUE(same_bits(a.max_abs_v, b.max_abs_v)) << "max_abs_v";
  EXPECT_TRUE(same_bits(a.min_v, b.min_v)) << "min_v";
  EXPECT_TRUE(same_bits(a.max_v, b.max_v)) << "max_v";
  EXPECT_TRUE(same_bits(a.logit_max, b.logit_max)) << "logit_max";
  EXPECT_TRUE(same_bits(a.logit_abs_dot, b.logit_abs_dot)) << "logit_abs_dot";
  EXPECT_EQ(a.visible, b.visible);
  EXPECT_EQ(a.row_invalid, b.row_invalid);
  EXPECT_EQ(a.device_error, b.device_error);
}

// The dequantised V element the reference must reproduce for a one-key row.
double dequantised_v(const Case& c, int64_t page, int64_t head, int64_t tok, int64_t d) {
  const pacts_problem& p = c.problem;
  const pacts_pool_layout& l = p.v_layout;
  const int64_t row = page * l.s_page + head * l.s_head + tok * l.s_tok;
  double x = 0;
  if (p.kv_format == PACTS_FORMAT_E2M1) {
    const int64_t bi = d / 2;
    const uint8_t byte = c.v.at(static_cast<size_t>(row + (bi / l.chunk) * l.s_chunk + bi % l.chunk));
    const bool low = (d % 2 == 0) == (p.nibble_order == PACTS_NIBBLE_LOW_FIRST);
    x = spec::decode_e2m1(static_cast<uint8_t>(low ? byte & 0xF : byte >> 4));
  } else {
    const int64_t e = row + (d / l.chunk) * l.s_chunk + d % l.chunk;
    uint32_t code = c.v.at(static_cast<size_t>(e * spec::element_bytes(p.kv_format)));
    if (spec::element_bytes(p.kv_format) == 2) code |= uint32_t{c.v.at(static_cast<size_t>(2 * e + 1))} << 8;
    x = spec::decode(p.kv_format, code);
  }
  const pacts_scale_layout& s = p.v_scale_layout;
  const int64_t srow = page * s.s_page + head * s.s_head + tok * s.s_tok;
  switch (p.v_scale_mode) {
    case PACTS_SCALE_PER_TENSOR: return x * double{p.v_scale};
    case PACTS_SCALE_PER_TOKEN: {
      float f = 0;
      std::memcpy(&f, &c.v_scale.at(static_cast<size_t>(4 * srow)), 4);
      return x * double{f};
    }
    case PACTS_SCALE_MX_BLOCK:
      return x * spec::decode_e8m0(c.v_scale.at(static_cast<size_t>(srow + (d / 32) * s.s_block)));
    default: return x;
  }
}

// --- one visible key --------------------------------------------------------------------------

struct KvCase {
  const char* name;
  pacts_format format;
  pacts_scale_mode k_mode, v_mode;
};

void PrintTo(const KvCase& c, std::ostream* os) { *os << c.name; }

class OneVisibleKey : public ::testing::TestWithParam<KvCase> {};

// spec/operator.md §6: with one visible key and no sink the weight is e^0 / e^0 = 1 exactly.
TEST_P(OneVisibleKey, OutputIsThatVRowExactly) {
  const KvCase kc = GetParam();
  for (const int32_t window : {0, 1}) {
    pacts_problem p = shape(2, 1, 2, 1, 64, 16, 3);
    set_kv_format(p, kc.format, kc.k_mode, kc.v_mode);
    if (kc.k_mode == PACTS_SCALE_PER_TENSOR) p.k_scale = 0.3f;
    if (kc.v_mode == PACTS_SCALE_PER_TENSOR) p.v_scale = 1.7f;
    p.window = window;
    // Sequence 0 has one key; sequence 1 has 40 keys, of which a window of 1 leaves one.
    const std::vector<int32_t> ctx = {1, window == 1 ? 40 : 1};
    Case c = paged_case(p, ctx);
    write_data(c, ctx, {0, 0});
    const Output o = run(c);
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t key = ctx[static_cast<size_t>(b)] - 1;
      const int32_t page = c.page_of(b, key / p.page_size);
      for (int64_t d = 0; d < p.head_dim; ++d) {
        const double want = dequantised_v(c, page, 0, key % p.page_size, d);
        for (int64_t h = 0; h < 2; ++h) {
          EXPECT_EQ(o.out[elem_of(p, b, 0, h, d)], want) << kc.name << " b " << b << " d " << d;
          EXPECT_EQ(o.abs_weighted_v[elem_of(p, b, 0, h, d)], std::abs(want));
        }
      }
      EXPECT_EQ(o.visible[row_of(p, b, 0, 0)], 1);
      // LSE of one key is its logit s, and logit_max is |s|.
      EXPECT_EQ(std::abs(o.lse[row_of(p, b, 0, 0)]), o.logit_max[row_of(p, b, 0, 0)]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, OneVisibleKey,
    ::testing::Values(KvCase{"bf16", PACTS_FORMAT_BF16, PACTS_SCALE_NONE, PACTS_SCALE_NONE},
                      KvCase{"fp16_per_tensor", PACTS_FORMAT_FP16, PACTS_SCALE_PER_TENSOR,
                             PACTS_SCALE_PER_TENSOR},
                      KvCase{"e4m3fn_per_token", PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TOKEN,
                             PACTS_SCALE_PER_TOKEN},
                      KvCase{"e5m2fnuz_per_token", PACTS_FORMAT_E5M2FNUZ, PACTS_SCALE_PER_TENSOR,
                             PACTS_SCALE_PER_TOKEN},
                      KvCase{"mxfp4", PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK,
                             PACTS_SCALE_MX_BLOCK}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// --- softmax by hand ----------------------------------------------------------------------------

// Two keys whose logits are chosen exactly: q = e_0, k_j = a_j e_0, softmax_scale 1.
struct TwoKeys {
  pacts_problem p;
  Case c;
};

TwoKeys two_keys(double a, double b, float softcap = 0) {
  pacts_problem p = shape(1, 1, 1, 1, 64, 8, 1);
  p.softcap = softcap;
  Case c = paged_case(p, {2});
  c.set_q(0, 0, 0, 0, 1.0);
  c.set_key(Pool::kK, 0, 0, 0, 0, a);
  c.set_key(Pool::kK, 0, 1, 0, 0, b);
  for (int64_t d = 0; d < 64; ++d) {
    c.set_key(Pool::kV, 0, 0, 0, d, data_value(5, 0, 0, d));
    c.set_key(Pool::kV, 0, 1, 0, d, data_value(5, 1, 0, d));
  }
  return {p, c};
}

TEST(SoftmaxByHand, TwoKeysWeightedByTheirLogits) {
  const double a = 1.5, b = -0.75;
  TwoKeys t = two_keys(a, b);
  const Output o = run(t.c);
  const long double wa = std::exp(static_cast<long double>(a));
  const long double wb = std::exp(static_cast<long double>(b));
  for (int64_t d = 0; d < 64; ++d) {
    const long double va = data_value(5, 0, 0, d), vb = data_value(5, 1, 0, d);
    const long double want = (wa * va + wb * vb) / (wa + wb);
    const long double want_abs = (wa * std::fabs(va) + wb * std::fabs(vb)) / (wa + wb);
    EXPECT_NEAR(o.out[static_cast<size_t>(d)], static_cast<double>(want), 4e-16 * 2) << d;
    EXPECT_NEAR(o.abs_weighted_v[static_cast<size_t>(d)], static_cast<double>(want_abs), 8e-16);
    EXPECT_EQ(o.sum_abs_v[static_cast<size_t>(d)], static_cast<double>(std::fabs(va) + std::fabs(vb)));
    EXPECT_EQ(o.max_abs_v[static_cast<size_t>(d)], static_cast<double>(std::max(std::fabs(va), std::fabs(vb))));
    EXPECT_EQ(o.min_v[static_cast<size_t>(d)], static_cast<double>(std::min(va, vb)));
    EXPECT_EQ(o.max_v[static_cast<size_t>(d)], static_cast<double>(std::max(va, vb)));
  }
  EXPECT_NEAR(o.lse[0], static_cast<double>(std::log(wa + wb)), 4e-16);
  EXPECT_EQ(o.logit_max[0], 1.5);
  EXPECT_EQ(o.logit_abs_dot[0], 1.5);
  EXPECT_EQ(o.visible[0], 2);
}

TEST(SoftmaxByHand, LogitStatisticsSeeCancellation) {
  // q = (1, -1), k = (2, 3): s = -1, but sum |q k| = 5; softmax_scale 0.5.
  pacts_problem p = shape(1, 1, 1, 1, 64, 8, 1);
  p.softmax_scale = 0.5f;
  Case c = paged_case(p, {1});
  c.set_q(0, 0, 0, 0, 1.0);
  c.set_q(0, 0, 0, 1, -1.0);
  c.set_key(Pool::kK, 0, 0, 0, 0, 2.0);
  c.set_key(Pool::kK, 0, 0, 0, 1, 3.0);
  const Output o = run(c);
  EXPECT_EQ(o.logit_max[0], 0.5);
  EXPECT_EQ(o.logit_abs_dot[0], 2.5);
  EXPECT_EQ(o.lse[0], -0.5);
}

TEST(SoftmaxByHand, EqualLogitsGiveTheMeanOfV) {
  // Both ways to equal logits: q = 0 (every logit 0), and identical keys with a large logit.
  for (const bool identical_keys : {false, true}) {
    pacts_problem p = shape(1, 1, 1, 1, 64, 16, 4);
    Case c = paged_case(p, {53});
    for (int64_t j = 0; j < 53; ++j) {
      for (int64_t d = 0; d < 64; ++d) {
        c.set_key(Pool::kK, 0, j, 0, d, identical_keys ? data_value(9, 0, 0, d) : data_value(9, j, 0, d));
        c.set_key(Pool::kV, 0, j, 0, d, data_value(11, j, 0, d));
      }
    }
    for (int64_t d = 0; d < 64; ++d) c.set_q(0, 0, 0, d, identical_keys ? data_value(13, 0, 0, d) : 0.0);
    const Output o = run(c);
    for (int64_t d = 0; d < 64; ++d) {
      long double sum = 0, sum_abs = 0;
      for (int64_t j = 0; j < 53; ++j) {
        sum += data_value(11, j, 0, d);
        sum_abs += std::fabs(data_value(11, j, 0, d));
      }
      const double mean = static_cast<double>(sum / 53), mean_abs = static_cast<double>(sum_abs / 53);
      EXPECT_NEAR(o.out[static_cast<size_t>(d)], mean, 1e-15 * mean_abs) << d;
      EXPECT_NEAR(o.abs_weighted_v[static_cast<size_t>(d)], mean_abs, 1e-15 * mean_abs) << d;
    }
  }
}

TEST(SoftmaxByHand, LseOfEqualLogitsIsLogitPlusLogN) {
  pacts_problem p = shape(1, 1, 1, 1, 64, 8, 2);
  Case c = paged_case(p, {13});
  c.set_q(0, 0, 0, 0, 1.0);
  for (int64_t j = 0; j < 13; ++j) c.set_key(Pool::kK, 0, j, 0, 0, 2.5);
  const Output o = run(c);
  EXPECT_NEAR(o.lse[0], 2.5 + std::log(13.0), 1e-15 * 5);
  EXPECT_EQ(o.visible[0], 13);
}

TEST(SoftmaxByHand, SinkJoinsTheDenominatorOnly) {
  const double s = 1.25;
  const float t = 0.5f;
  pacts_problem p = shape(1, 1, 2, 1, 64, 8, 1);
  p.has_sinks = 1;
  Case c = paged_case(p, {1});
  for (int64_t h = 0; h < 2; ++h) c.set_q(0, 0, h, 0, 1.0);
  c.set_key(Pool::kK, 0, 0, 0, 0, s);
  for (int64_t d = 0; d < 64; ++d) c.set_key(Pool::kV, 0, 0, 0, d, data_value(3, 0, 0, d));
  c.set_sink(0, t);
  c.set_sink(1, -std::numeric_limits<float>::infinity());  // no sink at all
  const Output o = run(c);
  const long double weight = 1.0L / (1.0L + std::exp(static_cast<long double>(t) - s));
  for (int64_t d = 0; d < 64; ++d) {
    const double v = data_value(3, 0, 0, d);
    EXPECT_NEAR(o.out[elem_of(p, 0, 0, 0, d)], static_cast<double>(v * weight), 4e-16 * std::abs(v));
    EXPECT_NEAR(o.abs_weighted_v[elem_of(p, 0, 0, 0, d)], static_cast<double>(std::abs(v) * weight),
                4e-16 * std::abs(v));
    EXPECT_EQ(o.out[elem_of(p, 0, 0, 1, d)], v);
  }
  // LSE excludes the sink; logits are not scaled or capped by it.
  EXPECT_EQ(o.lse[row_of(p, 0, 0, 0)], s);
  EXPECT_EQ(o.lse[row_of(p, 0, 0, 1)], s);
}

TEST(SoftmaxByHand, SoftcapAppliesCTanhSOverC) {
  const double a = 3.0, b = -1.0;
  const float cap = 2.0f;
  TwoKeys t = two_keys(a, b, cap);
  const Output o = run(t.c);
  const long double ca = 2.0L * std::tanh(a / 2.0L), cb = 2.0L * std::tanh(b / 2.0L);
  const long double wa = std::exp(ca), wb = std::exp(cb);
  for (int64_t d = 0; d < 64; ++d) {
    const long double want = (wa * data_value(5, 0, 0, d) + wb * data_value(5, 1, 0, d)) / (wa + wb);
    EXPECT_NEAR(o.out[static_cast<size_t>(d)], static_cast<double>(want), 1e-15) << d;
  }
  EXPECT_NEAR(o.lse[0], static_cast<double>(std::log(wa + wb)), 1e-15);
  EXPECT_EQ(o.logit_max[0], 3.0);  // before the cap
}

// --- masks ------------------------------------------------------------------------------------

TEST(Masks, CausalRowIEqualsAOneTokenProblemOverAShorterContext) {
  const int32_t ctx = 21;
  pacts_problem p = shape(1, 4, 2, 1, 64, 8, 3);
  Case c = paged_case(p, {ctx});
  write_data(c, {ctx}, {0});
  const Output o = run(c);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(o.visible[row_of(p, 0, i, 0)], ctx - 3 + i);
    const pacts_problem p1 = shape(1, 1, 2, 1, 64, 8, 3);
    const int32_t ctx1 = ctx - static_cast<int32_t>(3 - i);
    Case c1 = paged_case(p1, {ctx1});
    write_data(c1, {ctx1}, {0});
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 64; ++d) c1.set_q(0, 0, h, d, data_value(4, i, h, d));
    const Output o1 = run(c1);
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(o.lse[row_of(p, 0, i, h)], o1.lse[row_of(p1, 0, 0, h)]);
      for (int64_t d = 0; d < 64; ++d)
        EXPECT_EQ(o.out[elem_of(p, 0, i, h, d)], o1.out[elem_of(p1, 0, 0, h, d)]) << i << " " << d;
    }
  }
}

TEST(Masks, WindowVisibleCounts) {
  const int32_t ctx = 20;
  struct Want {
    int32_t window;
    std::vector<int32_t> visible;  // rows 0..2 see pos = 17, 18, 19
  };
  for (const Want& w : {Want{1, {1, 1, 1}}, Want{2, {2, 2, 2}}, Want{19, {18, 19, 19}},
                        Want{20, {18, 19, 20}}, Want{25, {18, 19, 20}}, Want{0, {18, 19, 20}}}) {
    pacts_problem p = shape(1, 3, 1, 1, 64, 8, 3);
    p.window = w.window;
    Case c = paged_case(p, {ctx});
    write_data(c, {ctx}, {0});
    const Output o = run(c);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(o.visible[row_of(p, 0, i, 0)], w.visible[static_cast<size_t>(i)])
          << "window " << w.window << " row " << i;
    if (w.window == 1) {  // each row is exactly its own key's V
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t d = 0; d < 64; ++d)
          EXPECT_EQ(o.out[elem_of(p, 0, i, 0, d)], data_value(8, 17 + i, 0, d));
    }
  }
}

TEST(Masks, RowsWithoutKeysAreExactZerosWithLseMinusInfinity) {
  for (const int32_t sinks : {0, 1}) {
    // Sequence 0: ctx 0. Sequence 1: ctx 2 with L = 4, so rows 0 and 1 have pos < 0.
    pacts_problem p = shape(2, 4, 2, 1, 64, 8, 2);
    p.has_sinks = sinks;
    p.want_lse = 1;
    Case c = paged_case(p, {0, 2});
    write_data(c, {0, 2}, {0, 0});
    if (sinks) {
      c.set_sink(0, 3.0f);
      c.set_sink(1, -2.0f);
    }
    const Output o = run(c);
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < 4; ++i) {
        const bool empty = b == 0 || i < 2;
        for (int64_t h = 0; h < 2; ++h) {
          const size_t r = row_of(p, b, i, h);
          EXPECT_EQ(o.visible[r], empty ? 0 : static_cast<int32_t>(i - 1));
          if (!empty) continue;
          EXPECT_EQ(o.lse[r], -kInf);
          EXPECT_EQ(o.logit_max[r], 0.0);
          EXPECT_EQ(o.logit_abs_dot[r], 0.0);
          EXPECT_EQ(o.row_invalid[r], 0);
          for (int64_t d = 0; d < 64; ++d) {
            const size_t e = elem_of(p, b, i, h, d);
            EXPECT_EQ(o.out[e], 0.0);
            EXPECT_FALSE(std::signbit(o.out[e]));
            EXPECT_EQ(o.abs_weighted_v[e], 0.0);
            EXPECT_EQ(o.sum_abs_v[e], 0.0);
            EXPECT_EQ(o.max_abs_v[e], 0.0);
            EXPECT_EQ(o.min_v[e], 0.0);
            EXPECT_EQ(o.max_v[e], 0.0);
          }
        }
      }
    }
    EXPECT_EQ(o.device_error, 0u);
  }
}

// --- heads and layouts -----------------------------------------------------------------------

TEST(Heads, QueryHeadHReadsKvHeadHOverG) {
  for (const int32_t hkv : {1, 2, 4}) {
    pacts_problem p = shape(1, 1, 8, hkv, 64, 8, 1);
    Case c = paged_case(p, {1});
    for (int64_t g = 0; g < hkv; ++g)
      for (int64_t d = 0; d < 64; ++d)
        c.set_key(Pool::kV, 0, 0, g, d, static_cast<double>(g + 1) + (d % 16) / 16.0);
    const Output o = run(c);
    const int64_t group = 8 / hkv;
    for (int64_t h = 0; h < 8; ++h)
      for (int64_t d = 0; d < 64; ++d)
        EXPECT_EQ(o.out[elem_of(p, 0, 0, h, d)], static_cast<double>(h / group + 1) + (d % 16) / 16.0)
            << "Hkv " << hkv << " head " << h;
  }
}

TEST(Heads, GroupsReadTheirOwnKeys) {
  // Two keys; KV head g makes key g the larger logit, so heads of group g lean to V row g.
  pacts_problem p = shape(1, 1, 4, 2, 64, 8, 1);
  Case c = paged_case(p, {2});
  for (int64_t h = 0; h < 4; ++h) c.set_q(0, 0, h, 0, 1.0);
  for (int64_t g = 0; g < 2; ++g) {
    c.set_key(Pool::kK, 0, g, g, 0, 4.0);
    c.set_key(Pool::kK, 0, 1 - g, g, 0, 0.0);
    for (int64_t j = 0; j < 2; ++j) c.set_key(Pool::kV, 0, j, g, 0, j == 0 ? 1.0 : -1.0);
  }
  const Output o = run(c);
  const double lean = std::tanh(2.0);  // (e^4 - 1) / (e^4 + 1)
  EXPECT_NEAR(o.out[elem_of(p, 0, 0, 0, 0)], lean, 1e-15);
  EXPECT_NEAR(o.out[elem_of(p, 0, 0, 1, 0)], lean, 1e-15);
  EXPECT_NEAR(o.out[elem_of(p, 0, 0, 2, 0)], -lean, 1e-15);
  EXPECT_NEAR(o.out[elem_of(p, 0, 0, 3, 0)], -lean, 1e-15);
}

enum class Layout { kNhd, kHnd, kPackedKDimMajorV, kStridedRows };

// Pool strides count elements, or bytes for e2m1 (spec/operator.md §3): `u` is a row's units.
// Call after set_kv_format.
pacts_problem with_layout(pacts_problem p, Layout layout) {
  const int64_t d = p.head_dim, pg = p.page_size, hkv = p.num_kv_heads;
  const bool fp4 = p.kv_format == PACTS_FORMAT_E2M1;
  const int64_t u = fp4 ? d / 2 : d;
  const int32_t x = fp4 ? 16 : 16 / spec::element_bytes(p.kv_format);  // 16-byte chunks
  const pacts_pool_layout hnd{hkv * pg * u + 16, pg * u, u, u, static_cast<int32_t>(u), 0};
  switch (layout) {
    case Layout::kNhd: break;
    case Layout::kHnd:
      p.k_layout = hnd;
      p.v_layout = hnd;
      break;
    case Layout::kPackedKDimMajorV:
      // K [page][head][u/x][tok][x] (x-packed); V [page][head][u][tok] (dim-major).
      p.k_layout = {hkv * pg * u, pg * u, x, pg * x, x, 0};
      p.v_layout = {hkv * u * pg + 8, u * pg, 1, pg, 1, 0};
      break;
    case Layout::kStridedRows:
      // Q [B][Hq][L][D + 8]; output [L][B][Hq][D] + padding; LSE [Hq][B][L].
      p.q_layout = {p.num_q_heads * p.q_len * (d + 8), d + 8, p.q_len * (d + 8)};
      p.out_layout = {p.num_q_heads * (d + 4), p.batch * p.num_q_heads * (d + 4), d + 4};
      p.lse_layout = {p.q_len, 1, p.batch * p.q_len};
      p.block_table_stride = p.max_pages_per_seq + 3;
      break;
  }
  return p;
}

TEST(Layouts, EveryLayoutOfTheSameLogicalDataGivesTheSameAnswer) {
  const std::vector<int32_t> ctx = {29, 7};
  pacts_problem base = shape(2, 2, 4, 2, 64, 8, 4);
  base.want_lse = 1;
  Output first;
  for (const Layout layout : {Layout::kNhd, Layout::kHnd, Layout::kPackedKDimMajorV,
                              Layout::kStridedRows}) {
    const pacts_problem p = with_layout(base, layout);
    Case c = paged_case(p, ctx, Fill::kPoison);
    write_data(c, ctx, {0, 0});
    const Output o = run(c);
    if (layout == Layout::kNhd) {
      first = o;
      continue;
    }
    SCOPED_TRACE(static_cast<int>(layout));
    expect_bitwise_equal(o, first);
  }
}

TEST(Layouts, PerTokenScalesFollowTheirOwnLayout) {
  // Scale pools [page][head][tok] with padding; every (page, head, tok) scale distinct. A window
  // of 1 gives row i exactly key pos_i, so each output is v * its own token's V scale, and each
  // logit is q.k * its own token's K scale.
  pacts_problem p = shape(1, 4, 2, 2, 64, 8, 3);
  set_kv_format(p, PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TOKEN, PACTS_SCALE_PER_TOKEN);
  p.k_scale_layout = p.v_scale_layout = {2 * 8 + 5, 8 + 2, 1, 0};
  p.window = 1;
  const int32_t ctx = 19;  // rows see keys 15, 16 (page 1) and 17, 18 (page 2)
  Case c = paged_case(p, {ctx});
  const auto k_scale_of = [](int64_t j, int64_t h) { return 0.5f + 0.0625f * static_cast<float>(j + 8 * h); };
  const auto v_scale_of = [](int64_t j, int64_t h) { return 2.0f - 0.03125f * static_cast<float>(j + 5 * h); };
  for (int64_t j = 0; j < ctx; ++j) {
    const int32_t page = c.page_of(0, j / 8);
    for (int64_t h = 0; h < 2; ++h) {
      c.set_token_scale(Pool::kK, page, h, j % 8, k_scale_of(j, h));
      c.set_token_scale(Pool::kV, page, h, j % 8, v_scale_of(j, h));
      c.set_kv(Pool::kK, page, h, j % 8, 0, 1.0);
      for (int64_t d = 0; d < 64; ++d) c.set_kv(Pool::kV, page, h, j % 8, d, 1.0 + d % 8);
    }
  }
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t h = 0; h < 2; ++h) c.set_q(0, i, h, 0, 1.0);
  const Output o = run(c);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t key = ctx - 4 + i;
      EXPECT_EQ(o.lse[row_of(p, 0, i, h)], double{k_scale_of(key, h)}) << i << " " << h;
      for (int64_t d = 0; d < 64; ++d)
        EXPECT_EQ(o.out[elem_of(p, 0, i, h, d)], (1.0 + d % 8) * double{v_scale_of(key, h)});
    }
  }
}

// --- MXFP4 ----------------------------------------------------------------------------------

TEST(Mxfp4, NibbleOrderPicksTheHalfOfTheByte) {
  for (const pacts_nibble_order order : {PACTS_NIBBLE_LOW_FIRST, PACTS_NIBBLE_HIGH_FIRST}) {
    pacts_problem p = shape(1, 1, 1, 1, 64, 8, 1);
    set_kv_format(p, PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK, PACTS_SCALE_MX_BLOCK);
    p.nibble_order = order;
    Case c = paged_case(p, {1});
    // Byte bi of page 0, token 0 holds low nibble lo(bi) and high nibble hi(bi), never equal.
    for (int64_t bi = 0; bi < 32; ++bi) {
      const auto lo = static_cast<uint8_t>(bi % 16), hi = static_cast<uint8_t>((bi * 7 + 3) % 16);
      ASSERT_NE(lo, hi);
      c.v.at(static_cast<size_t>(bi)) = static_cast<uint8_t>(hi << 4 | lo);
    }
    c.set_block_scale(Pool::kV, 0, 0, 0, 0, 127);
    c.set_block_scale(Pool::kV, 0, 0, 0, 1, 127);
    c.set_block_scale(Pool::kK, 0, 0, 0, 0, 127);
    c.set_block_scale(Pool::kK, 0, 0, 0, 1, 127);
    const Output o = run(c);
    for (int64_t d = 0; d < 64; ++d) {
      const int64_t bi = d / 2;
      const auto lo = static_cast<uint8_t>(bi % 16), hi = static_cast<uint8_t>((bi * 7 + 3) % 16);
      const bool even = d % 2 == 0;
      const uint8_t nibble = (order == PACTS_NIBBLE_LOW_FIRST) == even ? lo : hi;
      EXPECT_EQ(o.out[static_cast<size_t>(d)], spec::decode_e2m1(nibble)) << "order " << order << " d " << d;
    }
  }
}

TEST(Mxfp4, NibbleOrdersAgreeOnTheSameLogicalData) {
  Output low;
  for (const pacts_nibble_order order : {PACTS_NIBBLE_LOW_FIRST, PACTS_NIBBLE_HIGH_FIRST}) {
    pacts_problem p = shape(1, 2, 2, 1, 64, 8, 3);
    set_kv_format(p, PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK, PACTS_SCALE_MX_BLOCK);
    p.nibble_order = order;
    Case c = paged_case(p, {19}, Fill::kPoison);
    write_data(c, {19}, {0});
    const Output o = run(c);
    if (order == PACTS_NIBBLE_LOW_FIRST) {
      low = o;
    } else {
      expect_bitwise_equal(o, low);
    }
  }
}

TEST(Mxfp4, EachBlockOf32UsesItsOwnScaleAndE8m0ZeroIsTwoToMinus127) {
  pacts_problem p = shape(1, 1, 1, 1, 128, 8, 1);
  set_kv_format(p, PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK, PACTS_SCALE_MX_BLOCK);
  Case c = paged_case(p, {1});
  const uint8_t v_scales[4] = {0x7C, 0x85, 0x00, 0xFE};
  const uint8_t k_scales[4] = {126, 127, 128, 129};  // 0.5, 1, 2, 4
  for (int64_t blk = 0; blk < 4; ++blk) {
    c.set_block_scale(Pool::kV, 0, 0, 0, blk, v_scales[blk]);
    c.set_block_scale(Pool::kK, 0, 0, 0, blk, k_scales[blk]);
    c.set_q(0, 0, 0, blk * 32, 1.0);
    c.set_kv_code(Pool::kK, 0, 0, 0, blk * 32, 0x2);  // 1.0
  }
  for (int64_t d = 0; d < 128; ++d) c.set_kv_code(Pool::kV, 0, 0, 0, d, static_cast<uint32_t>(d % 16));
  const Output o = run(c);
  for (int64_t d = 0; d < 128; ++d) {
    const double want = spec::decode_e2m1(static_cast<uint8_t>(d % 16)) *
                        std::ldexp(1.0, int{v_scales[d / 32]} - 127);
    EXPECT_EQ(o.out[static_cast<size_t>(d)], want) << d;
  }
  // Block 2's scale is 0x00: code 7 (6.0) is 6 * 2^-127, not 0.
  EXPECT_EQ(o.out[64 + 7], std::ldexp(6.0, -127));
  EXPECT_EQ(o.logit_max[0], 0.5 + 1 + 2 + 4);
}

// --- owned data only (spec/contract.md §1) -------------------------------------------------------

struct PoisonCase {
  const char* name;
  pacts_format format;
  pacts_scale_mode k_mode, v_mode;
  int32_t q_len, page, window, sinks;
  Layout layout;
  std::vector<int32_t> ctx;
};

void PrintTo(const PoisonCase& c, std::ostream* os) { *os << c.name; }

class Poison : public ::testing::TestWithParam<PoisonCase> {};

// The same owned data in a zero-filled and a poisoned allocation must give bitwise the same
// answer: unowned pool rows, the tail of the last page, unowned per-token scales and e8m0 bytes,
// padding block-table entries (-1, INT32_MAX, INT32_MIN, num_pages, ids of poisoned pages).
TEST_P(Poison, UnownedBytesNeverReachTheAnswer) {
  const PoisonCase pc = GetParam();
  const int32_t max_ctx = *std::max_element(pc.ctx.begin(), pc.ctx.end());
  const int32_t columns = (max_ctx + pc.page - 1) / pc.page + 2;  // two padding columns at least
  const auto batch = static_cast<int32_t>(pc.ctx.size());
  pacts_problem p =
      spec::make_problem(batch, pc.q_len, 4, 2, 64, pc.page, batch * columns + 3, columns);
  set_kv_format(p, pc.format, pc.k_mode, pc.v_mode);
  p = with_layout(p, pc.layout);
  if (pc.k_mode == PACTS_SCALE_PER_TENSOR) p.k_scale = 0.625f;
  if (pc.v_mode == PACTS_SCALE_PER_TENSOR) p.v_scale = 3.0f;
  p.window = pc.window;
  p.has_sinks = pc.sinks;
  p.want_lse = 1;
  std::vector<int32_t> first;
  for (const int32_t n : pc.ctx) first.push_back(first_owned_key(p, n));

  Output clean;
  for (const Fill fill : {Fill::kZero, Fill::kPoison}) {
    Case c(p);
    c.allocate(fill);
    const int32_t junk[] = {-1, std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min(), p.num_pages, p.num_pages - 1,
                            p.num_pages - 2};
    int junk_next = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const int32_t n = pc.ctx[static_cast<size_t>(b)];
      const int64_t first_col = first[static_cast<size_t>(b)] / pc.page;
      const int64_t last_col = n == 0 ? -1 : (n - 1) / pc.page;
      c.set_context(b, n);
      for (int64_t col = 0; col < columns; ++col) {
        const bool owned = n > 0 && col >= first_col && col <= last_col;
        // Owned columns use pages in reverse order (never the identity); the clean run's
        // padding points at page 0, a valid page.
        const int32_t page = static_cast<int32_t>(batch * columns - 1 - (b * columns + col));
        c.set_page(b, col, owned ? page : fill == Fill::kZero ? 0 : junk[junk_next++ % 6]);
      }
    }
    if (p.has_sinks)
      for (int64_t h = 0; h < 4; ++h) c.set_sink(h, static_cast<float>(h) - 1.5f);
    write_data(c, pc.ctx, first);
    const Output o = run(c);
    EXPECT_EQ(o.device_error, 0u);
    if (fill == Fill::kZero) {
      clean = o;
      continue;
    }
    expect_bitwise_equal(o, clean);
    for (const double x : o.out) ASSERT_FALSE(std::isnan(x));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, Poison,
    ::testing::Values(
        PoisonCase{"bf16", PACTS_FORMAT_BF16, PACTS_SCALE_NONE, PACTS_SCALE_NONE, 4, 16, 0, 0,
                   Layout::kNhd, {37, 16, 5, 0}},
        PoisonCase{"bf16_window_sinks_hnd", PACTS_FORMAT_BF16, PACTS_SCALE_NONE, PACTS_SCALE_NONE,
                   3, 8, 9, 1, Layout::kHnd, {70, 9, 2}},
        PoisonCase{"fp16_per_tensor_packed", PACTS_FORMAT_FP16, PACTS_SCALE_PER_TENSOR,
                   PACTS_SCALE_PER_TENSOR, 2, 8, 0, 1, Layout::kPackedKDimMajorV, {33, 1}},
        PoisonCase{"e4m3fn_per_token_window", PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TOKEN,
                   PACTS_SCALE_PER_TOKEN, 4, 8, 11, 0, Layout::kStridedRows, {70, 12, 3}},
        PoisonCase{"e5m2_per_token", PACTS_FORMAT_E5M2, PACTS_SCALE_PER_TOKEN,
                   PACTS_SCALE_PER_TOKEN, 1, 32, 0, 1, Layout::kNhd, {45, 31}},
        PoisonCase{"mxfp4_window", PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK, PACTS_SCALE_MX_BLOCK,
                   2, 16, 20, 0, Layout::kNhd, {50, 17, 0}},
        PoisonCase{"mxfp4_sinks", PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK, PACTS_SCALE_MX_BLOCK,
                   3, 8, 0, 1, Layout::kHnd, {27, 8}}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// --- device-resident preconditions (spec/contract.md §4) -----------------------------------------

struct Preconditions : ::testing::Test {
  // Three sequences; the middle one is the one a test breaks.
  static constexpr int32_t kMaxPages = 3, kPage = 8;
  const std::vector<int32_t> ctx = {20, 13, 24};

  static pacts_problem problem() {
    pacts_problem p = shape(3, 2, 2, 1, 64, kPage, kMaxPages);
    p.want_lse = 1;
    return p;
  }

  // Runs with sequence 1 modified by `edit` and checks the outcome.
  Output run_with(const std::function<void(Case&)>& edit) {
    Case c = paged_case(problem(), ctx);
    write_data(c, ctx, {0, 0, 0});
    edit(c);
    return run(c);
  }

  void expect_sequence_invalid(const Output& o, uint32_t error) {
    const pacts_problem p = problem();
    EXPECT_EQ(o.device_error, error);
    for (int64_t i = 0; i < p.q_len; ++i) {
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        EXPECT_EQ(o.row_invalid[row_of(p, 1, i, h)], 1);
        EXPECT_TRUE(std::isnan(o.lse[row_of(p, 1, i, h)]));
        for (int64_t d = 0; d < p.head_dim; ++d) EXPECT_TRUE(std::isnan(o.out[elem_of(p, 1, i, h, d)]));
      }
    }
  }

  // Sequences 0 and 2 must match the untouched run bitwise.
  void expect_others_intact(const Output& o) {
    const Output clean = run_with([](Case&) {});
    const pacts_problem p = problem();
    for (const int64_t b : {0, 2}) {
      for (int64_t i = 0; i < p.q_len; ++i) {
        for (int64_t h = 0; h < p.num_q_heads; ++h) {
          const size_t r = row_of(p, b, i, h);
          EXPECT_EQ(o.row_invalid[r], 0);
          EXPECT_EQ(std::memcmp(&o.lse[r], &clean.lse[r], sizeof(double)), 0);
          EXPECT_EQ(std::memcmp(&o.out[r * 64], &clean.out[r * 64], 64 * sizeof(double)), 0);
        }
      }
    }
  }
};

TEST_F(Preconditions, ContextBeyondTheBlockTableInvalidatesOnlyItsSequence) {
  const Output o = run_with([](Case& c) { c.set_context(1, kMaxPages * kPage + 1); });
  expect_sequence_invalid(o, PACTS_DEVERR_CONTEXT_LEN);
  expect_others_intact(o);
}

TEST_F(Preconditions, NegativeContextInvalidatesOnlyItsSequence) {
  const Output o = run_with([](Case& c) { c.set_context(1, -1); });
  expect_sequence_invalid(o, PACTS_DEVERR_CONTEXT_LEN);
  expect_others_intact(o);
}

TEST_F(Preconditions, FullBlockTableIsValid) {
  const Output o = run_with([](Case& c) {
    c.set_context(1, kMaxPages * kPage);
    for (int64_t j = 13; j < kMaxPages * kPage; ++j)
      for (int64_t d = 0; d < 64; ++d) c.set_key(Pool::kV, 1, j, 0, d, 1.0);
  });
  EXPECT_EQ(o.device_error, 0u);
  EXPECT_EQ(o.visible[row_of(problem(), 1, 1, 0)], kMaxPages * kPage);
}

TEST_F(Preconditions, OwnedPageIdOutOfRangeInvalidatesOnlyItsSequence) {
  for (const int32_t bad : {-1, 9, std::numeric_limits<int32_t>::max()}) {
    // Column 1 holds keys 8..12 of sequence 1 (ctx 13): owned.
    const Output o = run_with([bad](Case& c) { c.set_page(1, 1, bad); });
    expect_sequence_invalid(o, PACTS_DEVERR_PAGE_ID);
    expect_others_intact(o);
  }
}

TEST_F(Preconditions, PaddingPageIdOutOfRangeIsNoError) {
  // Column 2 of sequence 1 (ctx 13) is padding.
  const Output o = run_with([](Case& c) { c.set_page(1, 2, -7); });
  EXPECT_EQ(o.device_error, 0u);
  for (const uint8_t invalid : o.row_invalid) EXPECT_EQ(invalid, 0);
  expect_others_intact(o);
}

TEST(PreconditionsWindow, PageBeforeEveryWindowIsPaddingToo) {
  // ctx 24, L 2, window 5: rows see keys 18..22 and 19..23, so column 0 and 1 are unowned.
  pacts_problem p = shape(1, 2, 1, 1, 64, 8, 3);
  p.window = 5;
  Case c = paged_case(p, {24});
  write_data(c, {24}, {0});
  const Output clean = run(c);
  c.set_page(0, 0, -1);
  c.set_page(0, 1, std::numeric_limits<int32_t>::max());
  const Output o = run(c);
  EXPECT_EQ(o.device_error, 0u);
  expect_bitwise_equal(o, clean);
  c.set_page(0, 2, 3);  // owned and out of range (num_pages 3)
  const Output bad = run(c);
  EXPECT_EQ(bad.device_error, uint32_t{PACTS_DEVERR_PAGE_ID});
  EXPECT_TRUE(std::isnan(bad.out[0]));
}

// --- refusals ----------------------------------------------------------------------------------

TEST(Refusals, ValidatorsStatusIsReturnedUnchanged) {
  pacts_problem p = shape(1, 1, 1, 1, 64, 8, 1);
  Case c = paged_case(p, {1});
  c.problem.head_dim = 48;
  const spec::Status want = spec::validate(c.problem, c.buffers());
  ASSERT_FALSE(want.is_ok());
  const spec::Result<Output> got = c.run();
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), want.code());
  EXPECT_EQ(got.status().message(), want.message());

  Case missing = paged_case(shape(1, 1, 1, 1, 64, 8, 1), {1});
  missing.k.clear();
  EXPECT_FALSE(missing.run().is_ok());
}

}  // namespace
}  // namespace pacts::reference
