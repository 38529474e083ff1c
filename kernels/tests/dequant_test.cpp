// kernels/common/dequant.h against the spec's codecs (spec/formats.md): every code of every Q and
// KV format, every e8m0 byte, every e2m1 x e8m0 product, both nibble orders.
#include "common/dequant.h"

#include <pacts/spec/formats.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace pacts::kernels::common {
namespace {

// Exact agreement: NaN with NaN, otherwise the same binary64 value with the same sign (so +0 and
// -0 are told apart).
::testing::AssertionResult same_value(double want, float got, pacts_format f, uint32_t code) {
  const double g = got;
  const bool ok = std::isnan(want) ? std::isnan(g)
                                   : (g == want && std::signbit(g) == std::signbit(want));
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << spec::format_name(f) << " code 0x" << std::hex << code
                                       << std::dec << ": spec " << want << ", kernel " << g;
}

void check_every_code(pacts_format f) {
  const uint64_t codes = spec::code_count(f);
  ASSERT_GT(codes, 0u);
  for (uint32_t code = 0; code < codes; ++code) {
    const double want = spec::decode(f, code);
    ASSERT_TRUE(same_value(want, decode_code(f, code), f, code));
  }
}

TEST(Dequant, Bf16EveryCode) { check_every_code(PACTS_FORMAT_BF16); }
TEST(Dequant, Fp16EveryCode) { check_every_code(PACTS_FORMAT_FP16); }
TEST(Dequant, E4m3fnEveryCode) { check_every_code(PACTS_FORMAT_E4M3FN); }
TEST(Dequant, E4m3fnuzEveryCode) { check_every_code(PACTS_FORMAT_E4M3FNUZ); }
TEST(Dequant, E5m2EveryCode) { check_every_code(PACTS_FORMAT_E5M2); }
TEST(Dequant, E5m2fnuzEveryCode) { check_every_code(PACTS_FORMAT_E5M2FNUZ); }
TEST(Dequant, E2m1EveryNibble) { check_every_code(PACTS_FORMAT_E2M1); }
TEST(Dequant, E8m0EveryByte) { check_every_code(PACTS_FORMAT_E8M0); }

// The direct per-format entry points agree with the dispatcher (what the host's tables use).
TEST(Dequant, Fp8EntryPointsMatchDispatcher) {
  for (uint32_t c = 0; c < 256; ++c) {
    const auto byte = static_cast<uint8_t>(c);
    EXPECT_EQ(bits_of(e4m3fn_to_float(byte)), bits_of(decode_code(PACTS_FORMAT_E4M3FN, c)));
    EXPECT_EQ(bits_of(e4m3fnuz_to_float(byte)), bits_of(decode_code(PACTS_FORMAT_E4M3FNUZ, c)));
    EXPECT_EQ(bits_of(e5m2_to_float(byte)), bits_of(decode_code(PACTS_FORMAT_E5M2, c)));
    EXPECT_EQ(bits_of(e5m2fnuz_to_float(byte)), bits_of(decode_code(PACTS_FORMAT_E5M2FNUZ, c)));
  }
}

// The decode loops' decoders (kernels/hip decode_kv) give every code the same bits as the
// definitions (which the spec's codecs check above): NaN payloads and the sign of zero included.
TEST(Dequant, FastDecodersMatchEveryCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto half = static_cast<uint16_t>(c);
    ASSERT_EQ(bits_of(fp16_to_float_fast(half)), bits_of(fp16_to_float(half))) << "fp16 " << c;
    if (c > 255) continue;
    const auto byte = static_cast<uint8_t>(c);
    ASSERT_EQ(bits_of(e4m3fn_to_float_fast(byte)), bits_of(e4m3fn_to_float(byte))) << c;
    ASSERT_EQ(bits_of(e4m3fnuz_to_float_fast(byte)), bits_of(e4m3fnuz_to_float(byte))) << c;
    ASSERT_EQ(bits_of(e5m2_to_float_fast(byte)), bits_of(e5m2_to_float(byte))) << c;
    ASSERT_EQ(bits_of(e5m2fnuz_to_float_fast(byte)), bits_of(e5m2fnuz_to_float(byte))) << c;
  }
}

// spec/formats.md §1.9: 0x00 is 2^-127, an fp32 subnormal, never 0; 0xFF is NaN.
TEST(Dequant, E8m0Extremes) {
  EXPECT_EQ(bits_of(e8m0_to_float(0x00)), 0x00400000u);
  EXPECT_EQ(e8m0_to_float(0x00), std::ldexp(1.0f, -127));
  EXPECT_GT(e8m0_to_float(0x00), 0.0f);
  EXPECT_EQ(e8m0_to_float(0x7F), 1.0f);
  EXPECT_EQ(e8m0_to_float(0xFE), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_to_float(0xFF)));
}

// spec/formats.md §2: an MXFP4 element is the binary64 product, exact in fp32 whenever it fits
// (down to 0.5 * 2^-127 = 2^-128, a subnormal); the twelve values beyond fp32 give Inf (outside
// R1); scale 0xFF gives NaN even for a zero nibble.
TEST(Dequant, MxProductsEveryNibbleAndScale) {
  const double fp32_max = std::ldexp(2.0 - std::ldexp(1.0, -23), 127);
  int beyond_fp32 = 0;
  for (uint32_t scale = 0; scale < 256; ++scale) {
    for (uint32_t nibble = 0; nibble < 16; ++nibble) {
      const double want = spec::decode_e2m1(static_cast<uint8_t>(nibble)) *
                          spec::decode_e8m0(static_cast<uint8_t>(scale));
      const float got = mx_value(static_cast<uint8_t>(nibble), static_cast<uint8_t>(scale));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << nibble << " x " << scale;
      } else if (std::fabs(want) > fp32_max) {
        ++beyond_fp32;
        EXPECT_TRUE(std::isinf(got) && std::signbit(got) == std::signbit(want)) << nibble << " x " << scale;
      } else {
        EXPECT_TRUE(same_value(want, got, PACTS_FORMAT_E2M1, (scale << 4) | nibble));
      }
    }
  }
  EXPECT_EQ(beyond_fp32, 12);  // spec/formats.md §2
}

// spec/formats.md §2: which nibble holds the even element. An asymmetric byte tells the orders
// apart.
TEST(Dequant, NibbleOrders) {
  const uint8_t byte = 0x2B;  // low nibble 0xB (-1.5), high nibble 0x2 (1)
  EXPECT_EQ(e2m1_nibble(byte, 0, PACTS_NIBBLE_LOW_FIRST), 0xB);
  EXPECT_EQ(e2m1_nibble(byte, 1, PACTS_NIBBLE_LOW_FIRST), 0x2);
  EXPECT_EQ(e2m1_nibble(byte, 6, PACTS_NIBBLE_LOW_FIRST), 0xB);
  EXPECT_EQ(e2m1_nibble(byte, 0, PACTS_NIBBLE_HIGH_FIRST), 0x2);
  EXPECT_EQ(e2m1_nibble(byte, 1, PACTS_NIBBLE_HIGH_FIRST), 0xB);
  EXPECT_EQ(e2m1_nibble(byte, 7, PACTS_NIBBLE_HIGH_FIRST), 0xB);
  EXPECT_EQ(e2m1_to_float(0xB), -1.5f);
}

// spec/contract.md §2.1: q~ = (decode * q_scale) * softmax_scale, in that order. A Q of 2^-120
// against a K element of 6 * 2^123 (e8m0 byte 250, inside R1) gives a product near 1 with no
// intermediate beyond 2^126; the same factors applied after a raw product would not.
TEST(Dequant, FoldedQueryMeetsLargestE8m0WithoutOverflow) {
  const float q = fold_query(std::ldexp(1.0f, -100), std::ldexp(1.0f, -20), 0.125f);
  const float k = mx_value(0x7, 250);  // 6 * 2^123
  EXPECT_TRUE(std::isfinite(k));
  EXPECT_FLOAT_EQ(q * k, 6.0f * std::ldexp(1.0f, 123 - 120 - 3));
  EXPECT_TRUE(std::isfinite(q * k));
}

}  // namespace
}  // namespace pacts::kernels::common
