// spec/tolerance.md §2.1: the query requantisation rule "fp8-row-pow2", checked against an
// independent model of its definition (the exponent by search, each code as the nearest of all
// 256 codes with ties to the even code) on rows built from raw fp32 bit patterns.
#include <pacts/spec/formats.h>
#include <pacts/spec/requant.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace pacts::spec {
namespace {

float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// The definition, by search: the smallest e with a * 2^-e <= max.
int model_exponent(const std::vector<float>& row, pacts_format t) {
  double a = 0;
  for (float x : row)
    if (!std::isnan(x)) a = std::fmax(a, std::fabs(static_cast<double>(x)));
  if (a == 0 || !std::isfinite(a)) return 0;
  const double max = format_info(t)->max_finite;
  for (int e = -400; e < 400; ++e)
    if (std::ldexp(a, -e) <= max) return e;
  return 999;
}

// The nearest finite code to x (ties: the code whose mantissa is even); NaN -> the NaN code.
uint8_t model_code(double x, pacts_format t) {
  if (std::isnan(x)) return static_cast<uint8_t>(encode(t, x, Overflow::kSaturate));
  int best = -1;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    if (is_nan_code(t, static_cast<uint32_t>(c))) continue;
    const double v = decode(t, static_cast<uint32_t>(c));
    const double err = std::fabs(v - x);
    const bool even = (c & 1) == 0;
    // A zero result keeps x's sign where the format has -0 (RNE of a signed value).
    const bool sign_ok = !(v == 0 && std::signbit(v) != std::signbit(x) &&
                           format_info(t)->has_negative_zero);
    if (!sign_ok) continue;
    if (err < best_err || (err == best_err && even)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

// A row of D fp32 values: random bit patterns in a random exponent window (normals, subnormals,
// zeros, exact ties of the fp8 grid), with a NaN now and then.
std::vector<float> random_row(std::mt19937_64& rng, int D) {
  std::vector<float> row(static_cast<size_t>(D));
  const int top = static_cast<int>(rng() % 254);  // biased fp32 exponent of the row's largest
  const int spread = static_cast<int>(rng() % 40);
  for (float& x : row) {
    const uint32_t sign = static_cast<uint32_t>(rng() & 1) << 31;
    const int exp = std::max(0, top - static_cast<int>(rng() % (spread + 1)));
    uint32_t mantissa = static_cast<uint32_t>(rng()) & 0x7FFFFFu;
    if (rng() % 4 == 0) mantissa &= 0x7C0000u | (1u << (rng() % 23));  // near the fp8 grid / ties
    x = from_bits(sign | (static_cast<uint32_t>(exp) << 23) | mantissa);
    if (rng() % 50 == 0) x = 0.0f;
    if (rng() % 200 == 0) x = from_bits(0x7FC00000u);
  }
  return row;
}

TEST(Requant, RowsMatchTheDefinitionByExhaustiveSearch) {
  std::mt19937_64 rng(20261201);
  for (pacts_format t : {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ}) {
    for (int n = 0; n < 3000; ++n) {
      const int D = n % 3 == 0 ? 64 : 16;
      const std::vector<float> row = random_row(rng, D);
      const RequantRow got = requantize_row(row, t);
      const int e = model_exponent(row, t);
      ASSERT_EQ(got.exponent, e) << format_name(t) << " row " << n;
      for (int d = 0; d < D; ++d) {
        const uint8_t want = model_code(std::ldexp(static_cast<double>(row[d]), -e), t);
        ASSERT_EQ(got.codes[static_cast<size_t>(d)], want)
            << format_name(t) << " row " << n << " d " << d << " x " << row[d];
      }
    }
  }
}

TEST(Requant, TheLargestElementUsesTheTopBinade) {
  // e is the smallest exponent: with e - 1 the largest element would exceed the format's max,
  // so it lies above half of max before rounding (nothing of the fp8 range is wasted).
  std::mt19937_64 rng(7);
  for (pacts_format t : {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ}) {
    const double max = format_info(t)->max_finite;
    for (int n = 0; n < 2000; ++n) {
      std::vector<float> row = random_row(rng, 32);
      for (float& x : row)
        if (std::isnan(x)) x = 1.0f;
      const RequantRow got = requantize_row(row, t);
      double top = 0;
      for (uint8_t c : got.codes) top = std::fmax(top, std::fabs(decode(t, c)));
      bool all_zero = true;
      for (float x : row) all_zero = all_zero && x == 0;
      if (all_zero) continue;
      double a = 0;
      for (float x : row) a = std::fmax(a, std::fabs(static_cast<double>(x)));
      EXPECT_LE(top, max);
      EXPECT_GT(std::ldexp(a, -got.exponent), max / 2) << format_name(t) << " row " << n;
      EXPECT_GE(top, max / 2) << format_name(t) << " row " << n;  // RNE may land on max / 2
    }
  }
}

TEST(Requant, PowerOfTwoScalingOfTheRowShiftsOnlyTheExponent) {
  // The rule commutes with exact power-of-two scaling: the codes stay, e moves (what keeps
  // PACTS-ACC-4 and EDGE-6 exact for a requantising backend).
  std::mt19937_64 rng(11);
  for (int n = 0; n < 2000; ++n) {
    std::vector<float> row(64);
    for (float& x : row) x = from_bits(static_cast<uint32_t>(rng() % 0x3F800000u) + 0x20000000u);
    const int k = static_cast<int>(rng() % 40) - 20;
    std::vector<float> scaled(row.size());
    for (size_t d = 0; d < row.size(); ++d) scaled[d] = std::ldexp(row[d], k);
    const RequantRow a = requantize_row(row, PACTS_FORMAT_E4M3FN);
    const RequantRow b = requantize_row(scaled, PACTS_FORMAT_E4M3FN);
    EXPECT_EQ(b.exponent, a.exponent + k);
    EXPECT_EQ(b.codes, a.codes);
  }
}

TEST(Requant, SpecialRows) {
  const std::vector<float> zeros(16, 0.0f);
  const RequantRow z = requantize_row(zeros, PACTS_FORMAT_E4M3FNUZ);
  EXPECT_EQ(z.exponent, 0);
  for (uint8_t c : z.codes) EXPECT_EQ(c, 0);
  // fnuz has no -0 (0x80 is its NaN): a negative element that rounds to zero is 0x00.
  const std::vector<float> tiny_negative = {1.0f, -1e-30f};
  EXPECT_EQ(requantize_row(tiny_negative, PACTS_FORMAT_E4M3FNUZ).codes[1], 0x00);
  EXPECT_EQ(requantize_row(tiny_negative, PACTS_FORMAT_E4M3FN).codes[1], 0x80);
  // NaN propagates as the target's NaN code and does not enter the row maximum.
  const std::vector<float> with_nan = {from_bits(0x7FC00000u), 3.0f};
  const RequantRow n = requantize_row(with_nan, PACTS_FORMAT_E4M3FN);
  EXPECT_EQ(n.codes[0], 0x7F);
  EXPECT_EQ(requantized_value(PACTS_FORMAT_E4M3FN, n.codes[1], n.exponent), 3.0);
  EXPECT_EQ(requantize_row(with_nan, PACTS_FORMAT_E4M3FNUZ).codes[0], 0x80);
  // 448 = 1.75 * 2^8 fits e4m3fn with e = 0; 449 needs e = 1; 240 fits e4m3fnuz, 241 does not.
  EXPECT_EQ(requantize_row(std::vector<float>{448.0f}, PACTS_FORMAT_E4M3FN).exponent, 0);
  EXPECT_EQ(requantize_row(std::vector<float>{449.0f}, PACTS_FORMAT_E4M3FN).exponent, 1);
  EXPECT_EQ(requantize_row(std::vector<float>{240.0f}, PACTS_FORMAT_E4M3FNUZ).exponent, 0);
  EXPECT_EQ(requantize_row(std::vector<float>{241.0f}, PACTS_FORMAT_E4M3FNUZ).exponent, 1);
  // The smallest fp32 subnormal is a row's largest element: e = -149 - 8.
  EXPECT_EQ(requantize_row(std::vector<float>{from_bits(1)}, PACTS_FORMAT_E4M3FN).exponent, -157);
}

TEST(Requant, RuleAppliesToTheDeclaredKvFormatsAndTargetsByFamily) {
  QueryRequantRule rule{QueryRequant::kFp8RowPow2,
                        format_bit(PACTS_FORMAT_E4M3FNUZ) | format_bit(PACTS_FORMAT_E5M2FNUZ)};
  EXPECT_TRUE(requantises(rule, PACTS_FORMAT_E4M3FNUZ));
  EXPECT_TRUE(requantises(rule, PACTS_FORMAT_E5M2FNUZ));
  EXPECT_FALSE(requantises(rule, PACTS_FORMAT_E4M3FN));
  EXPECT_FALSE(requantises(rule, PACTS_FORMAT_BF16));
  EXPECT_FALSE(requantises(QueryRequantRule{QueryRequant::kNone, ~0u}, PACTS_FORMAT_E4M3FN));
  EXPECT_EQ(requant_target(PACTS_FORMAT_E5M2FNUZ), PACTS_FORMAT_E4M3FNUZ);
  EXPECT_EQ(requant_target(PACTS_FORMAT_E5M2), PACTS_FORMAT_E4M3FN);
  EXPECT_EQ(requant_target(PACTS_FORMAT_E2M1), PACTS_FORMAT_E4M3FN);
  // fold: (decode * q_scale) * softmax_scale, each product rounded to fp32.
  const float q = fold_query_fp32(PACTS_FORMAT_BF16, 0x3FC0u, 3.0f, 0.1f);  // 1.5
  EXPECT_EQ(q, (1.5f * 3.0f) * 0.1f);
}

}  // namespace
}  // namespace pacts::spec
