// kernels/common/round.h against spec::encode(f, x, kNonSaturate): RNE from binary64 to bf16,
// fp16 and fp32, on every bf16/fp16 value and every midpoint between neighbours, their binary64
// neighbours, sampled fp32 values and midpoints, overflow thresholds, subnormals and specials.
#include "common/round.h"

#include <pacts/spec/formats.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

namespace pacts::kernels::common {
namespace {

uint32_t want(pacts_format f, double x) { return spec::encode(f, x, spec::Overflow::kNonSaturate); }

::testing::AssertionResult rounds_like_spec(pacts_format f, double x) {
  const uint32_t got = round_to_output(f, x), expected = want(f, x);
  if (got == expected) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << spec::format_name(f) << " of " << std::hexfloat << x
                                       << std::defaultfloat << ": kernel 0x" << std::hex << got
                                       << ", spec 0x" << expected;
}

// x, its binary64 neighbours, and the same for -x.
void check_around(pacts_format f, double x) {
  for (double s : {1.0, -1.0}) {
    const double y = s * x;
    ASSERT_TRUE(rounds_like_spec(f, y));
    ASSERT_TRUE(rounds_like_spec(f, std::nextafter(y, INFINITY)));
    ASSERT_TRUE(rounds_like_spec(f, std::nextafter(y, -INFINITY)));
  }
}

// Every finite non-negative code, and the exact midpoint to the next code (a tie: RNE must pick
// the even code), with binary64 neighbours of both.
void check_every_code_and_midpoint(pacts_format f) {
  const uint32_t codes = static_cast<uint32_t>(spec::code_count(f));
  const uint32_t half = codes / 2;  // positive codes
  for (uint32_t c = 0; c + 1 < half; ++c) {
    const double a = spec::decode(f, c), b = spec::decode(f, c + 1);
    if (!std::isfinite(a)) continue;
    check_around(f, a);
    if (std::isfinite(b)) check_around(f, a + (b - a) / 2);  // exact in binary64
  }
}

TEST(Round, Bf16EveryValueAndMidpoint) { check_every_code_and_midpoint(PACTS_FORMAT_BF16); }
TEST(Round, Fp16EveryValueAndMidpoint) { check_every_code_and_midpoint(PACTS_FORMAT_FP16); }

TEST(Round, Fp32SampledValuesAndMidpoints) {
  std::mt19937_64 rng(20261129);
  for (int n = 0; n < 200000; ++n) {
    const uint32_t c = static_cast<uint32_t>(rng()) & 0x7FFFFFFEu;
    const double a = spec::decode(PACTS_FORMAT_FP32, c), b = spec::decode(PACTS_FORMAT_FP32, c + 1);
    if (!std::isfinite(b)) continue;
    check_around(PACTS_FORMAT_FP32, a);
    check_around(PACTS_FORMAT_FP32, a + (b - a) / 2);
  }
  // Every fp32 subnormal step near the bottom, and the smallest codes.
  for (uint32_t c = 0; c < 4096; ++c) {
    const double a = spec::decode(PACTS_FORMAT_FP32, c), b = spec::decode(PACTS_FORMAT_FP32, c + 1);
    check_around(PACTS_FORMAT_FP32, a);
    check_around(PACTS_FORMAT_FP32, a + (b - a) / 2);
  }
}

// Random binary64 values over the whole exponent range, including binary64 subnormals, with
// arbitrary low bits (the sticky bits of the rounding).
TEST(Round, RandomBinary64AllFormats) {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 300000; ++n) {
    const uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    for (pacts_format f : {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_FP32})
      ASSERT_TRUE(rounds_like_spec(f, x));
    // Magnitudes where the formats live: exponent in [-160, 20].
    const double y = std::ldexp(1.0 + static_cast<double>(rng() >> 11) * 0x1p-53,
                                static_cast<int>(rng() % 181) - 160);
    for (pacts_format f : {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_FP32})
      check_around(f, y);
  }
}

// spec/formats.md §4: overflow thresholds (the midpoint above max finite overflows to Inf),
// half the smallest subnormal (rounds to zero), specials.
TEST(Round, ThresholdsAndSpecials) {
  for (pacts_format f : {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_FP32}) {
    const spec::FormatInfo* fi = spec::format_info(f);
    const double ulp_top = std::ldexp(1.0, std::ilogb(fi->max_finite) - fi->mantissa_bits);
    check_around(f, fi->max_finite);
    check_around(f, fi->max_finite + ulp_top / 2);
    check_around(f, fi->max_finite + ulp_top);
    check_around(f, fi->min_subnormal / 2);
    check_around(f, fi->min_subnormal);
    check_around(f, fi->min_subnormal * 1.5);
    check_around(f, fi->min_normal);
    check_around(f, fi->min_normal - fi->min_subnormal / 2);
    const double inf = std::numeric_limits<double>::infinity();
    for (double x : {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(),
                     -std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::denorm_min(), 1e300, -1e-300})
      EXPECT_TRUE(rounds_like_spec(f, x));
    EXPECT_EQ(round_to_output(f, std::numeric_limits<double>::quiet_NaN()), output_nan(f));
  }
  EXPECT_EQ(round_to_bf16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3F81u);  // §4
  EXPECT_EQ(round_to_fp32(-0.0), 0x80000000u);
}

}  // namespace
}  // namespace pacts::kernels::common
