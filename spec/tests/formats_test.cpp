// Tests of the format codecs (spec/formats.md). Expected values come from the bit fields and the
// tables of spec/formats.md §1 (OCP OFP8, OCP MX, IEEE binary16), from hardware conversions (fp32,
// _Float16), or from a nearest-value search over a table the test builds itself; never from the
// code under test. Every sweep over codes is exhaustive except fp32, which is sampled with fixed
// seeds.
#include <pacts/spec/formats.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace pacts::spec {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kDenormMin = std::numeric_limits<double>::denorm_min();
constexpr Overflow kModes[] = {Overflow::kSaturate, Overflow::kNonSaturate};
constexpr uint64_t kSeed = 0x70AC75F0u;  // fixed: CI is deterministic; printed on failure

// ---------------------------------------------------------------------------------------------
// Test-side description of the formats, from the tables of spec/formats.md §1.

enum class NanRule { kIeee, kE4M3Fn, kOnly0x80, kNone };

struct Layout {
  pacts_format format;
  const char* name;
  int bits;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  NanRule nan;
};

constexpr Layout kBf16{PACTS_FORMAT_BF16, "bf16", 16, 8, 7, 127, NanRule::kIeee};
constexpr Layout kFp16{PACTS_FORMAT_FP16, "fp16", 16, 5, 10, 15, NanRule::kIeee};
constexpr Layout kFp32{PACTS_FORMAT_FP32, "fp32", 32, 8, 23, 127, NanRule::kIeee};
constexpr Layout kE4M3Fn{PACTS_FORMAT_E4M3FN, "e4m3fn", 8, 4, 3, 7, NanRule::kE4M3Fn};
constexpr Layout kE4M3Fnuz{PACTS_FORMAT_E4M3FNUZ, "e4m3fnuz", 8, 4, 3, 8, NanRule::kOnly0x80};
constexpr Layout kE5M2{PACTS_FORMAT_E5M2, "e5m2", 8, 5, 2, 15, NanRule::kIeee};
constexpr Layout kE5M2Fnuz{PACTS_FORMAT_E5M2FNUZ, "e5m2fnuz", 8, 5, 2, 16, NanRule::kOnly0x80};
constexpr Layout kE2M1{PACTS_FORMAT_E2M1, "e2m1", 4, 2, 1, 1, NanRule::kNone};

// The signed formats whose every code the tests enumerate.
constexpr Layout kEnumerable[] = {kBf16, kFp16, kE4M3Fn, kE4M3Fnuz, kE5M2, kE5M2Fnuz, kE2M1};

bool is_fnuz(const Layout& l) { return l.nan == NanRule::kOnly0x80; }

// 2^k by repeated doubling or halving: exact for every k of binary64, including subnormals.
double pow2(int k) {
  double p = 1.0;
  for (; k > 0; --k) p *= 2.0;
  for (; k < 0; ++k) p *= 0.5;
  return p;
}

uint32_t field(uint32_t code, int shift, int width) {
  return (code >> shift) & static_cast<uint32_t>((uint64_t{1} << width) - 1u);
}

bool reference_is_nan(const Layout& l, uint32_t code) {
  const uint32_t exponent = field(code, l.mantissa_bits, l.exponent_bits);
  const uint32_t mantissa = field(code, 0, l.mantissa_bits);
  const uint32_t all_ones = (1u << l.exponent_bits) - 1u;
  switch (l.nan) {
    case NanRule::kIeee: return exponent == all_ones && mantissa != 0;
    case NanRule::kE4M3Fn: return exponent == all_ones && mantissa == all_ones >> 1;
    case NanRule::kOnly0x80: return code == 0x80u;
    case NanRule::kNone: return false;
  }
  return false;
}

// (-1)^S * 2^(E - bias) * (1 + M / 2^m), or (-1)^S * 2^(1 - bias) * (M / 2^m) when E = 0.
double reference_value(const Layout& l, uint32_t code) {
  if (reference_is_nan(l, code)) return kNaN;
  const bool negative = field(code, l.bits - 1, 1) != 0;
  const uint32_t exponent = field(code, l.mantissa_bits, l.exponent_bits);
  const double fraction = field(code, 0, l.mantissa_bits) * pow2(-l.mantissa_bits);
  double magnitude = 0.0;
  if (l.nan == NanRule::kIeee && exponent == (1u << l.exponent_bits) - 1u) {
    magnitude = kInf;
  } else if (exponent == 0) {
    magnitude = fraction * pow2(1 - l.bias);
  } else {
    magnitude = (1.0 + fraction) * pow2(static_cast<int>(exponent) - l.bias);
  }
  return negative ? -magnitude : magnitude;
}

// Same value, with NaN equal to NaN and -0 distinct from +0.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

std::string show(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%.17g)", x, x);
  return buf;
}

std::string hex(uint32_t code) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%X", code);
  return buf;
}

const char* mode_name(Overflow mode) {
  return mode == Overflow::kSaturate ? "saturate" : "non-saturate";
}

// Collects mismatches of a sweep and keeps the first few for the failure message.
struct Mismatches {
  int count = 0;
  std::string first;
  void add(const std::string& message) {
    if (count++ < 10) first += "  " + message + "\n";
  }
};

float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// fp32 codes for sampled sweeps: every sign and exponent with edge mantissas, then random codes.
std::vector<uint32_t> fp32_sample_codes() {
  std::vector<uint32_t> codes;
  const uint32_t mantissas[] = {0u, 1u, 2u, 3u, 0x3FFFFFu, 0x400000u, 0x400001u, 0x7FFFFEu,
                                0x7FFFFFu};
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t exponent = 0; exponent < 256; ++exponent) {
      for (uint32_t mantissa : mantissas) codes.push_back(sign << 31 | exponent << 23 | mantissa);
    }
  }
  std::mt19937_64 rng(kSeed);
  for (int i = 0; i < (1 << 20); ++i) codes.push_back(static_cast<uint32_t>(rng()));
  return codes;
}

// Finite values of one sign of a format, by increasing magnitude, with their codes. The negative
// side of a fnuz format starts at +0 (code 0x00): it has no -0.
struct Side {
  std::vector<double> magnitudes;
  std::vector<uint32_t> codes;
};

Side build_side(const Layout& l, bool negative) {
  std::vector<std::pair<double, uint32_t>> entries;
  if (negative && is_fnuz(l)) entries.emplace_back(0.0, 0u);
  for (uint32_t code = 0; code < (1u << l.bits); ++code) {
    const double v = reference_value(l, code);
    if (!std::isfinite(v) || std::signbit(v) != negative) continue;
    entries.emplace_back(std::fabs(v), code);
  }
  std::sort(entries.begin(), entries.end());
  Side side;
  for (const auto& [magnitude, code] : entries) {
    side.magnitudes.push_back(magnitude);
    side.codes.push_back(code);
  }
  return side;
}

// Nearest entry of `side` to a (0 <= a <= largest magnitude), ties to the even code. Compares
// against exact midpoints, so no subtraction can round.
uint32_t nearest_code(const Side& side, double a) {
  const auto it = std::lower_bound(side.magnitudes.begin(), side.magnitudes.end(), a);
  const auto hi = static_cast<size_t>(it - side.magnitudes.begin());
  if (side.magnitudes[hi] == a || hi == 0) return side.codes[hi];
  const size_t lo = hi - 1;
  const double mid = (side.magnitudes[lo] + side.magnitudes[hi]) / 2;
  if (a < mid) return side.codes[lo];
  if (a > mid) return side.codes[hi];
  return (side.codes[lo] & 1u) == 0 ? side.codes[lo] : side.codes[hi];
}

// ---------------------------------------------------------------------------------------------
// format_info, format_name, element_bytes, code_count

struct ExpectedInfo {
  pacts_format format;
  const char* name;
  int bits, exponent_bits, mantissa_bits, bias;
  bool has_inf, has_nan, has_negative_zero, is_signed;
  double max_finite, min_normal, min_subnormal;
  int element_bytes;
  uint64_t code_count;
};

constexpr ExpectedInfo kExpectedInfo[] = {
    {PACTS_FORMAT_BF16, "bf16", 16, 8, 7, 127, true, true, true, true, 0x1.fep127, 0x1p-126,
     0x1p-133, 2, 65536},
    {PACTS_FORMAT_FP16, "fp16", 16, 5, 10, 15, true, true, true, true, 65504.0, 0x1p-14, 0x1p-24,
     2, 65536},
    // 2^32 codes do not fit the uint32_t return: documented as wrapping to 0.
    {PACTS_FORMAT_FP32, "fp32", 32, 8, 23, 127, true, true, true, true, 0x1.fffffep127, 0x1p-126,
     0x1p-149, 4, uint64_t{1} << 32},
    {PACTS_FORMAT_E4M3FN, "e4m3fn", 8, 4, 3, 7, false, true, true, true, 448.0, 0x1p-6, 0x1p-9, 1,
     256},
    {PACTS_FORMAT_E4M3FNUZ, "e4m3fnuz", 8, 4, 3, 8, false, true, false, true, 240.0, 0x1p-7,
     0x1p-10, 1, 256},
    {PACTS_FORMAT_E5M2, "e5m2", 8, 5, 2, 15, true, true, true, true, 57344.0, 0x1p-14, 0x1p-16, 1,
     256},
    {PACTS_FORMAT_E5M2FNUZ, "e5m2fnuz", 8, 5, 2, 16, false, true, false, true, 57344.0, 0x1p-15,
     0x1p-17, 1, 256},
    {PACTS_FORMAT_E2M1, "e2m1", 4, 2, 1, 1, false, false, true, true, 6.0, 1.0, 0.5, 0, 16},
    {PACTS_FORMAT_E8M0, "e8m0", 8, 8, 0, 127, false, true, false, false, 0x1p127, 0x1p-127,
     0x1p-127, 1, 256},
};

TEST(FormatInfo, FieldsMatchTheNotesTableForEveryFormat) {
  for (const ExpectedInfo& e : kExpectedInfo) {
    SCOPED_TRACE(e.name);
    const FormatInfo* info = format_info(e.format);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->format, e.format);
    EXPECT_EQ(info->name, e.name);
    EXPECT_EQ(info->bits, e.bits);
    EXPECT_EQ(info->exponent_bits, e.exponent_bits);
    EXPECT_EQ(info->mantissa_bits, e.mantissa_bits);
    EXPECT_EQ(info->bits, e.exponent_bits + e.mantissa_bits + (e.is_signed ? 1 : 0));
    EXPECT_EQ(info->bias, e.bias);
    EXPECT_EQ(info->has_inf, e.has_inf);
    EXPECT_EQ(info->has_nan, e.has_nan);
    EXPECT_EQ(info->has_negative_zero, e.has_negative_zero);
    EXPECT_EQ(info->is_signed, e.is_signed);
    EXPECT_EQ(info->max_finite, e.max_finite);
    EXPECT_EQ(info->min_normal, e.min_normal);
    EXPECT_EQ(info->min_subnormal, e.min_subnormal);
  }
}

TEST(FormatInfo, InvalidAndUnknownFormatsHaveNoInfo) {
  EXPECT_EQ(format_info(PACTS_FORMAT_INVALID), nullptr);
  EXPECT_EQ(format_info(static_cast<pacts_format>(10)), nullptr);
  EXPECT_EQ(format_info(static_cast<pacts_format>(15)), nullptr);
}

TEST(FormatInfo, MaxAndMinSubnormalAreTheValuesOfTheExtremeCodes) {
  // Ties the table to the codec: the largest finite code decodes to max_finite, the smallest
  // positive code to min_subnormal.
  const std::pair<pacts_format, uint32_t> max_codes[] = {
      {PACTS_FORMAT_BF16, 0x7F7F},   {PACTS_FORMAT_FP16, 0x7BFF},   {PACTS_FORMAT_FP32, 0x7F7FFFFF},
      {PACTS_FORMAT_E4M3FN, 0x7E},   {PACTS_FORMAT_E4M3FNUZ, 0x7F}, {PACTS_FORMAT_E5M2, 0x7B},
      {PACTS_FORMAT_E5M2FNUZ, 0x7F}, {PACTS_FORMAT_E2M1, 0x7},      {PACTS_FORMAT_E8M0, 0xFE}};
  for (const auto& [format, max_code] : max_codes) {
    SCOPED_TRACE(std::string(format_name(format)));
    const FormatInfo* info = format_info(format);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(decode(format, max_code), info->max_finite);
    const uint32_t smallest = format == PACTS_FORMAT_E8M0 ? 0x00u : 0x01u;
    EXPECT_EQ(decode(format, smallest), info->min_subnormal);
  }
}

TEST(FormatName, NamesEveryFormatAndMarksUnknownValuesInvalid) {
  for (const ExpectedInfo& e : kExpectedInfo) EXPECT_EQ(format_name(e.format), e.name);
  EXPECT_EQ(format_name(PACTS_FORMAT_INVALID), "invalid");
  EXPECT_EQ(format_name(static_cast<pacts_format>(12)), "invalid");
}

TEST(ElementBytes, IsTheStorageSizeAndZeroForHalfByteE2M1) {
  for (const ExpectedInfo& e : kExpectedInfo) {
    EXPECT_EQ(element_bytes(e.format), e.element_bytes) << e.name;
  }
  EXPECT_EQ(element_bytes(PACTS_FORMAT_INVALID), 0);
}

TEST(CodeCount, IsTwoToTheBits) {
  for (const ExpectedInfo& e : kExpectedInfo) {
    EXPECT_EQ(code_count(e.format), e.code_count) << e.name;
  }
  EXPECT_EQ(code_count(PACTS_FORMAT_INVALID), 0u);
}

// ---------------------------------------------------------------------------------------------
// decode

TEST(Decode, EveryCodeOfEverySmallFormatMatchesItsBitFields) {
  for (const Layout& l : kEnumerable) {
    SCOPED_TRACE(l.name);
    Mismatches bad;
    for (uint32_t code = 0; code < (1u << l.bits); ++code) {
      const double want = reference_value(l, code);
      const double got = decode(l.format, code);
      if (!same(got, want)) bad.add(hex(code) + ": decode " + show(got) + ", want " + show(want));
      if (is_nan_code(l.format, code) != reference_is_nan(l, code)) {
        bad.add(hex(code) + ": is_nan_code disagrees with the bit fields");
      }
    }
    EXPECT_EQ(bad.count, 0) << bad.first;
  }
}

TEST(Decode, FiniteCodeCountsMatchTheNotesTable) {
  const std::pair<pacts_format, int> counts[] = {
      {PACTS_FORMAT_BF16, 65280},   {PACTS_FORMAT_FP16, 63488}, {PACTS_FORMAT_E4M3FN, 254},
      {PACTS_FORMAT_E4M3FNUZ, 255}, {PACTS_FORMAT_E5M2, 248},   {PACTS_FORMAT_E5M2FNUZ, 255},
      {PACTS_FORMAT_E2M1, 16},      {PACTS_FORMAT_E8M0, 255}};
  for (const auto& [format, want] : counts) {
    int finite = 0;
    for (uint32_t code = 0; code < code_count(format); ++code) {
      if (std::isfinite(decode(format, code))) ++finite;
    }
    EXPECT_EQ(finite, want) << format_name(format);
  }
}

TEST(Decode, OnlyTheLowBitsOfTheCodeAreUsed) {
  for (const Layout& l : {kE4M3Fn, kE4M3Fnuz, kE5M2, kE5M2Fnuz, kE2M1, kBf16}) {
    SCOPED_TRACE(l.name);
    Mismatches bad;
    for (uint32_t code = 0; code < (1u << l.bits); ++code) {
      const uint32_t noisy = code | (0xA5A5A5A5u << l.bits);
      if (!same(decode(l.format, noisy), reference_value(l, code))) bad.add(hex(noisy));
      if (is_nan_code(l.format, noisy) != reference_is_nan(l, code)) bad.add("nan " + hex(noisy));
    }
    EXPECT_EQ(bad.count, 0) << bad.first;
  }
  EXPECT_EQ(decode(PACTS_FORMAT_E8M0, 0x17F), 1.0);
  EXPECT_TRUE(is_nan_code(PACTS_FORMAT_E8M0, 0x3FF));
  EXPECT_EQ(decode_e2m1(0xF3), 1.5);
}

TEST(Decode, Bf16IsTheUpperHalfOfAnFp32) {
  Mismatches bad;
  for (uint32_t code = 0; code < 65536; ++code) {
    const double want = float_of(code << 16);
    const double got = decode(PACTS_FORMAT_BF16, code);
    if (!same(got, want)) bad.add(hex(code) + ": " + show(got) + " want " + show(want));
  }
  EXPECT_EQ(bad.count, 0) << bad.first;
}

// _Float16 (a compiler extension) converts in hardware or libgcc: an fp16 oracle independent
// of the code under test. Tests that need it skip where the compiler lacks it.
#if defined(__FLT16_MANT_DIG__)
double float16_value(uint16_t bits) { return std::bit_cast<_Float16>(bits); }
uint16_t float16_bits(double x) { return std::bit_cast<uint16_t>(static_cast<_Float16>(x)); }
#endif

TEST(Decode, Fp16MatchesTheCompilersFloat16) {
#if !defined(__FLT16_MANT_DIG__)
  GTEST_SKIP() << "_Float16 is not supported by this compiler";
#else
  Mismatches bad;
  for (uint32_t code = 0; code < 65536; ++code) {
    const double want = float16_value(static_cast<uint16_t>(code));
    const double got = decode(PACTS_FORMAT_FP16, code);
    if (!same(got, want)) bad.add(hex(code) + ": " + show(got) + " want " + show(want));
  }
  EXPECT_EQ(bad.count, 0) << bad.first;
#endif
}

TEST(Decode, E5M2IsTheUpperByteOfAnFp16) {
  // Same sign, exponent width and bias as fp16, two mantissa bits: the OCP E5M2 design.
  Mismatches bad;
  for (uint32_t code = 0; code < 256; ++code) {
    const double want = reference_value(kFp16, code << 8);
    const double got = decode(PACTS_FORMAT_E5M2, code);
    if (!same(got, want)) bad.add(hex(code) + ": " + show(got) + " want " + show(want));
  }
  EXPECT_EQ(bad.count, 0) << bad.first;
}

TEST(Decode, Fp32SampledCodesAndSpecialClassesMatchHardwareFloat) {
  Mismatches bad;
  for (uint32_t code : fp32_sample_codes()) {
    const double want = float_of(code);
    const double got = decode(PACTS_FORMAT_FP32, code);
    if (!same(got, want) || !same(got, reference_value(kFp32, code))) {
      bad.add(hex(code) + ": " + show(got) + " want " + show(want));
    }
    if (is_nan_code(PACTS_FORMAT_FP32, code) != std::isnan(want)) bad.add("nan " + hex(code));
  }
  EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed << ")";
  EXPECT_TRUE(std::signbit(decode(PACTS_FORMAT_FP32, 0x80000000u)));
  EXPECT_EQ(decode(PACTS_FORMAT_FP32, 0x00000001u), 0x1p-149);
  EXPECT_EQ(decode(PACTS_FORMAT_FP32, 0x00800000u), 0x1p-126);
  EXPECT_EQ(decode(PACTS_FORMAT_FP32, 0xFF800000u), -kInf);
  EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_FP32, 0x7F800001u)));
  EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_FP32, 0xFFFFFFFFu)));
}

TEST(Decode, HazardCodesOfOcpAndFnuzFp8) {
  // e4m3fn: 0x7E is the maximum, S.1111.111 the only NaNs, 0x80 is -0.
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FN, 0x7E), 448.0);
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FN, 0xFE), -448.0);
  EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_E4M3FN, 0x7F)));
  EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_E4M3FN, 0xFF)));
  EXPECT_TRUE(same(decode(PACTS_FORMAT_E4M3FN, 0x80), -0.0));
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FN, 0x78), 256.0);  // exponent 1111 is finite in e4m3fn
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FN, 0x08), 0x1p-6);
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FN, 0x07), 0.875 * 0x1p-6);
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FN, 0x01), 0x1p-9);
  // e4m3fnuz: 0x80 is the only NaN, 0x7F is 240.
  EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_E4M3FNUZ, 0x80)));
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FNUZ, 0x7F), 240.0);
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FNUZ, 0xFF), -240.0);
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FNUZ, 0x01), 0x1p-10);
  // e5m2: Inf 0x7C/0xFC, NaN 0x7D..0x7F, max 0x7B.
  EXPECT_EQ(decode(PACTS_FORMAT_E5M2, 0x7C), kInf);
  EXPECT_EQ(decode(PACTS_FORMAT_E5M2, 0xFC), -kInf);
  for (uint32_t code : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu}) {
    EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_E5M2, code))) << hex(code);
  }
  EXPECT_EQ(decode(PACTS_FORMAT_E5M2, 0x7B), 57344.0);
  EXPECT_EQ(decode(PACTS_FORMAT_E5M2, 0x01), 0x1p-16);
  // e5m2fnuz: no Inf; 0x7C is finite, 0x80 the only NaN.
  EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_E5M2FNUZ, 0x80)));
  EXPECT_EQ(decode(PACTS_FORMAT_E5M2FNUZ, 0x7C), 32768.0);
  EXPECT_EQ(decode(PACTS_FORMAT_E5M2FNUZ, 0x7F), 57344.0);
  EXPECT_EQ(decode(PACTS_FORMAT_E5M2FNUZ, 0x01), 0x1p-17);
  // The same byte means half as much in fnuz.
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FN, 0x40), 2.0);
  EXPECT_EQ(decode(PACTS_FORMAT_E4M3FNUZ, 0x40), 1.0);
}

TEST(Decode, FnuzValueIsHalfTheOcpValueOfTheSameByteOutsideSpecialCodes) {
  const struct {
    pacts_format ocp, fnuz;
    std::vector<uint32_t> differing;  // codes special in one of the two formats
  } pairs[] = {
      {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ, {0x7F, 0x80, 0xFF}},
      {PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ,
       {0x7C, 0x7D, 0x7E, 0x7F, 0x80, 0xFC, 0xFD, 0xFE, 0xFF}},
  };
  for (const auto& p : pairs) {
    SCOPED_TRACE(std::string(format_name(p.fnuz)));
    std::vector<uint32_t> differing;
    for (uint32_t code = 0; code < 256; ++code) {
      const double ocp = decode(p.ocp, code);
      const double fnuz = decode(p.fnuz, code);
      if (!std::isfinite(ocp) || std::isnan(fnuz) || (ocp == 0 && std::signbit(ocp))) {
        differing.push_back(code);
        continue;
      }
      EXPECT_EQ(fnuz, ocp / 2) << hex(code);
    }
    EXPECT_EQ(differing, p.differing);
  }
}

TEST(Decode, E8M0IsTwoToTheCodeMinus127AndNeverZero) {
  for (uint32_t code = 0; code < 255; ++code) {
    EXPECT_EQ(decode(PACTS_FORMAT_E8M0, code), pow2(static_cast<int>(code) - 127)) << hex(code);
    EXPECT_FALSE(is_nan_code(PACTS_FORMAT_E8M0, code)) << hex(code);
  }
  EXPECT_EQ(decode_e8m0(0x00), 0x1p-127);
  EXPECT_GT(decode_e8m0(0x00), 0.0);
  EXPECT_EQ(decode_e8m0(0x7F), 1.0);
  EXPECT_EQ(decode_e8m0(0xFE), 0x1p127);
  EXPECT_TRUE(std::isnan(decode_e8m0(0xFF)));
  EXPECT_TRUE(is_nan_code(PACTS_FORMAT_E8M0, 0xFF));
}

TEST(Decode, E2M1CodesAreTheOnnxTable) {
  const double table[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  for (uint32_t code = 0; code < 16; ++code) {
    const double want = code < 8 ? table[code] : -table[code - 8];
    EXPECT_TRUE(same(decode(PACTS_FORMAT_E2M1, code), want)) << hex(code);
    EXPECT_FALSE(is_nan_code(PACTS_FORMAT_E2M1, code)) << hex(code);
  }
  EXPECT_TRUE(std::signbit(decode_e2m1(0x8)));
}

TEST(Decode, InvalidFormatHasNoValue) {
  EXPECT_TRUE(std::isnan(decode(PACTS_FORMAT_INVALID, 0)));
  EXPECT_TRUE(is_nan_code(PACTS_FORMAT_INVALID, 0));
  EXPECT_TRUE(std::isnan(decode(static_cast<pacts_format>(14), 0x3C00)));
}

// ---------------------------------------------------------------------------------------------
// encode: round trips, midpoints, nearest values

TEST(Encode, EveryFiniteCodeRoundTripsInBothModes) {
  for (const Layout& l : kEnumerable) {
    SCOPED_TRACE(l.name);
    Mismatches bad;
    for (uint32_t code = 0; code < (1u << l.bits); ++code) {
      const double v = reference_value(l, code);
      if (!std::isfinite(v)) continue;
      for (Overflow mode : kModes) {
        const uint32_t got = encode(l.format, v, mode);
        if (got != code) bad.add(hex(code) + " -> " + hex(got) + " (" + mode_name(mode) + ")");
      }
    }
    EXPECT_EQ(bad.count, 0) << bad.first;
  }
  for (uint32_t code = 0; code < 255; ++code) {
    for (Overflow mode : kModes) {
      EXPECT_EQ(encode(PACTS_FORMAT_E8M0, pow2(static_cast<int>(code) - 127), mode), code);
    }
  }
}

TEST(Encode, Fp32SampledFiniteCodesRoundTrip) {
  Mismatches bad;
  for (uint32_t code : fp32_sample_codes()) {
    const float f = float_of(code);
    if (!std::isfinite(f)) continue;
    for (Overflow mode : kModes) {
      const uint32_t got = encode(PACTS_FORMAT_FP32, f, mode);
      if (got != code) bad.add(hex(code) + " -> " + hex(got));
    }
  }
  EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed << ")";
}

// For adjacent finite values lo < hi of one sign: the exact midpoint goes to the code with the
// even mantissa, its neighbouring doubles to the nearer code. A kernel that truncates, rounds
// ties away from zero, or rounds through fp32 (double rounding) fails here.
void expect_midpoints_round_to_even(pacts_format format, const Side& side, bool negative,
                                    Mismatches& bad) {
  const double sign = negative ? -1.0 : 1.0;
  for (size_t i = 0; i + 1 < side.magnitudes.size(); ++i) {
    const double lo = side.magnitudes[i];
    const double hi = side.magnitudes[i + 1];
    const double mid = (lo + hi) / 2;  // exact: both have few significant bits
    if (!(lo < mid && mid < hi)) {
      bad.add("midpoint not between neighbours at " + show(lo));
      continue;
    }
    const uint32_t even = (side.codes[i] & 1u) == 0 ? side.codes[i] : side.codes[i + 1];
    const struct {
      double x;
      uint32_t want;
    } cases[] = {{mid, even},
                 {std::nextafter(mid, lo), side.codes[i]},
                 {std::nextafter(mid, hi), side.codes[i + 1]}};
    for (const auto& c : cases) {
      for (Overflow mode : kModes) {
        const uint32_t got = encode(format, sign * c.x, mode);
        if (got != c.want) {
          bad.add(show(sign * c.x) + " -> " + hex(got) + ", want " + hex(c.want) + " (" +
                  mode_name(mode) + ")");
        }
      }
    }
  }
}

TEST(Encode, MidpointsGoToTheEvenCodeAndTheirNeighboursToTheNearerCode) {
  for (const Layout& l : kEnumerable) {
    SCOPED_TRACE(l.name);
    Mismatches bad;
    for (bool negative : {false, true}) {
      expect_midpoints_round_to_even(l.format, build_side(l, negative), negative, bad);
    }
    EXPECT_EQ(bad.count, 0) << bad.first;
  }
}

TEST(Encode, E8M0MidpointsGoToTheEvenCodeAndTheirNeighboursToTheNearerCode) {
  Side side;
  for (uint32_t code = 0; code < 255; ++code) {
    side.magnitudes.push_back(pow2(static_cast<int>(code) - 127));
    side.codes.push_back(code);
  }
  Mismatches bad;
  expect_midpoints_round_to_even(PACTS_FORMAT_E8M0, side, false, bad);
  EXPECT_EQ(bad.count, 0) << bad.first;
  // Literal ties: 3 = 1.5 * 2^1 lies between codes 0x80 (2) and 0x81 (4); 6 between 0x81 and 0x82.
  EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 3.0, Overflow::kSaturate), 0x80u);
  EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 6.0, Overflow::kSaturate), 0x82u);
  EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 1.4, Overflow::kSaturate), 0x7Fu);
  EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 1.6, Overflow::kSaturate), 0x80u);
}

TEST(Encode, Fp32SampledMidpointsGoToTheEvenCodeAndNeighboursToTheNearer) {
  std::mt19937_64 rng(kSeed + 1);
  Mismatches bad;
  for (int i = 0; i < (1 << 19); ++i) {
    const auto lo_code = static_cast<uint32_t>(rng() % 0x7F7FFFFFu);  // lo and lo+1 finite
    const uint32_t sign = (rng() & 1u) << 31;
    const double lo = float_of(lo_code);
    const double hi = float_of(lo_code + 1);
    const double mid = (lo + hi) / 2;
    const double s = sign != 0 ? -1.0 : 1.0;
    const uint32_t even = (lo_code & 1u) == 0 ? lo_code : lo_code + 1;
    const struct {
      double x;
      uint32_t want;
    } cases[] = {{mid, even},
                 {std::nextafter(mid, lo), lo_code},
                 {std::nextafter(mid, hi), lo_code + 1}};
    for (const auto& c : cases) {
      const uint32_t got = encode(PACTS_FORMAT_FP32, s * c.x, Overflow::kNonSaturate);
      if (got != (sign | c.want)) bad.add(show(s * c.x) + " -> " + hex(got));
    }
  }
  EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed + 1 << ")";
}

// A double with a full 53-bit significand and a magnitude spread over the format's range.
double random_double(std::mt19937_64& rng, int min_exponent, int max_exponent) {
  std::uniform_int_distribution<int> exponent(min_exponent, max_exponent);
  const double significand = 1.0 + static_cast<double>(rng() >> 12) * 0x1p-52;
  const double magnitude = std::ldexp(significand, exponent(rng));
  return (rng() & 1u) != 0 ? -magnitude : magnitude;
}

TEST(Encode, RandomDoublesGoToTheNearestCodeOfATableSearch) {
  for (const Layout& l : kEnumerable) {
    SCOPED_TRACE(l.name);
    const Side positive = build_side(l, false);
    const Side negative = build_side(l, true);
    const double max = positive.magnitudes.back();
    int max_exponent = 0;
    std::frexp(max, &max_exponent);
    const int min_exponent = std::ilogb(positive.magnitudes[1]) - 3;
    std::mt19937_64 rng(kSeed + 2);
    Mismatches bad;
    for (int i = 0; i < 200000; ++i) {
      const double x = random_double(rng, min_exponent, max_exponent - 1);
      if (std::fabs(x) > max) continue;  // overflow is tested separately
      const uint32_t want = nearest_code(std::signbit(x) ? negative : positive, std::fabs(x));
      for (Overflow mode : kModes) {
        const uint32_t got = encode(l.format, x, mode);
        if (got != want) bad.add(show(x) + " -> " + hex(got) + ", want " + hex(want));
      }
    }
    EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed + 2 << ")";
  }
}

TEST(Encode, Fp32MatchesTheHardwareDoubleToFloatConversion) {
  // cvtsd2ss rounds binary64 to binary32 once, to nearest even: an independent oracle for
  // doubles that fp32 cannot represent. Kept within +-FLT_MAX (beyond is the overflow test's).
  std::mt19937_64 rng(kSeed + 3);
  Mismatches bad;
  for (int i = 0; i < (1 << 21); ++i) {
    const double x = random_double(rng, -155, 127);
    if (std::fabs(x) > std::numeric_limits<float>::max()) continue;
    const uint32_t want = std::bit_cast<uint32_t>(static_cast<float>(x));
    for (Overflow mode : kModes) {
      const uint32_t got = encode(PACTS_FORMAT_FP32, x, mode);
      if (got != want) bad.add(show(x) + " -> " + hex(got) + ", want " + hex(want));
    }
  }
  EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed + 3 << ")";
}

TEST(Encode, Fp16MatchesTheCompilersDoubleToFloat16Conversion) {
#if !defined(__FLT16_MANT_DIG__)
  GTEST_SKIP() << "_Float16 is not supported by this compiler";
#else
  std::mt19937_64 rng(kSeed + 4);
  Mismatches bad;
  for (int i = 0; i < (1 << 20); ++i) {
    const double x = random_double(rng, -28, 15);
    if (std::fabs(x) > 65504.0) continue;
    const uint32_t want = float16_bits(x);
    const uint32_t got = encode(PACTS_FORMAT_FP16, x, Overflow::kNonSaturate);
    if (got != want) bad.add(show(x) + " -> " + hex(got) + ", want " + hex(want));
  }
  EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed + 4 << ")";
#endif
}

TEST(Encode, Bf16MatchesTheAddRoundingBiasMethodOnFp32Inputs) {
  // PyTorch's round_to_nearest_even: add 0x7FFF plus the kept LSB, truncate. Exact on fp32
  // inputs, including the carry into Inf at the top.
  const auto add_bias = [](uint32_t u) { return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16; };
  std::vector<uint32_t> codes;
  const uint32_t low_halves[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000};
  for (uint32_t high = 0; high < 65536; ++high) {
    for (uint32_t low : low_halves) codes.push_back(high << 16 | low);
  }
  std::mt19937_64 rng(kSeed + 5);
  for (int i = 0; i < (1 << 22); ++i) codes.push_back(static_cast<uint32_t>(rng()));
  Mismatches bad;
  for (uint32_t u : codes) {
    const float f = float_of(u);
    if (std::isnan(f)) continue;
    const uint32_t got = encode(PACTS_FORMAT_BF16, f, Overflow::kNonSaturate);
    if (got != add_bias(u)) bad.add(hex(u) + " -> " + hex(got) + ", want " + hex(add_bias(u)));
  }
  EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed + 5 << ")";
}

// ---------------------------------------------------------------------------------------------
// encode: overflow, underflow, NaN

struct OverflowCase {
  pacts_format format;
  double max_finite;
  double threshold;     // midpoint between max_finite and the next value the format would have
  bool tie_overflows;   // the next would-be value has the even mantissa
  uint32_t max_code;    // positive
  uint32_t nonsat_pos;  // +overflow under kNonSaturate
  uint32_t nonsat_neg;  // -overflow under kNonSaturate
  uint32_t sign_bit;
};

constexpr OverflowCase kOverflowCases[] = {
    {PACTS_FORMAT_E4M3FN, 448.0, 464.0, false, 0x7E, 0x7F, 0xFF, 0x80},
    {PACTS_FORMAT_E4M3FNUZ, 240.0, 248.0, true, 0x7F, 0x80, 0x80, 0x80},
    {PACTS_FORMAT_E5M2, 57344.0, 61440.0, true, 0x7B, 0x7C, 0xFC, 0x80},
    {PACTS_FORMAT_E5M2FNUZ, 57344.0, 61440.0, true, 0x7F, 0x80, 0x80, 0x80},
    {PACTS_FORMAT_BF16, 0x1.fep127, 0x1.ffp127, true, 0x7F7F, 0x7F80, 0xFF80, 0x8000},
    {PACTS_FORMAT_FP16, 65504.0, 65520.0, true, 0x7BFF, 0x7C00, 0xFC00, 0x8000},
    {PACTS_FORMAT_FP32, 0x1.fffffep127, 0x1.ffffffp127, true, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
     0x80000000},
    {PACTS_FORMAT_E2M1, 6.0, 7.0, true, 0x7, 0x7, 0xF, 0x8},  // e2m1 always saturates
};

TEST(Encode, OverflowIsDecidedAfterRoundingAtTheMidpointAboveMax) {
  for (const OverflowCase& c : kOverflowCases) {
    SCOPED_TRACE(std::string(format_name(c.format)));
    for (bool negative : {false, true}) {
      const double s = negative ? -1.0 : 1.0;
      const uint32_t max = (negative ? c.sign_bit : 0u) | c.max_code;
      for (Overflow mode : kModes) {
        SCOPED_TRACE(std::string(mode_name(mode)) + (negative ? " negative" : " positive"));
        const uint32_t over =
            mode == Overflow::kSaturate ? max : (negative ? c.nonsat_neg : c.nonsat_pos);
        EXPECT_EQ(encode(c.format, s * c.max_finite, mode), max);
        EXPECT_EQ(encode(c.format, s * std::nextafter(c.threshold, 0.0), mode), max);
        EXPECT_EQ(encode(c.format, s * c.threshold, mode), c.tie_overflows ? over : max);
        EXPECT_EQ(encode(c.format, s * std::nextafter(c.threshold, kInf), mode), over);
        EXPECT_EQ(encode(c.format, s * 2 * c.threshold, mode), over);
        EXPECT_EQ(encode(c.format, s * 1e300, mode), over);
        EXPECT_EQ(encode(c.format, s * std::numeric_limits<double>::max(), mode), over);
        EXPECT_EQ(encode(c.format, s * kInf, mode), over);
      }
    }
  }
}

TEST(Encode, E4M3FnNonSaturatingOverflowStartsAbove464AsPyTorchEager) {
  EXPECT_EQ(encode(PACTS_FORMAT_E4M3FN, 464.0, Overflow::kNonSaturate), 0x7Eu);
  EXPECT_EQ(encode(PACTS_FORMAT_E4M3FN, 465.0, Overflow::kNonSaturate), 0x7Fu);
  EXPECT_EQ(encode(PACTS_FORMAT_E4M3FN, -465.0, Overflow::kNonSaturate), 0xFFu);
  EXPECT_EQ(encode(PACTS_FORMAT_E4M3FN, 465.0, Overflow::kSaturate), 0x7Eu);
  EXPECT_EQ(encode(PACTS_FORMAT_E4M3FNUZ, 247.99, Overflow::kNonSaturate), 0x7Fu);
  EXPECT_EQ(encode(PACTS_FORMAT_E4M3FNUZ, 248.0, Overflow::kNonSaturate), 0x80u);
  EXPECT_EQ(encode(PACTS_FORMAT_E4M3FNUZ, -248.0, Overflow::kSaturate), 0xFFu);
}

TEST(Encode, E8M0OverflowsAbove2To127AfterRoundingAndClampsBelow2ToMinus127) {
  const double tie_top = 1.5 * 0x1p127;
  for (Overflow mode : kModes) {
    SCOPED_TRACE(mode_name(mode));
    const uint32_t over = mode == Overflow::kSaturate ? 0xFEu : 0xFFu;
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 0x1p127, mode), 0xFEu);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, tie_top, mode), 0xFEu);  // tie: even code 0xFE
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, std::nextafter(tie_top, kInf), mode), over);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 0x1p128, mode), over);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 1e300, mode), over);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, kInf, mode), over);
    // No zero code: everything positive below 2^-127 clamps to 0x00.
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 0x1p-127, mode), 0x00u);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 1.5 * 0x1p-127, mode), 0x00u);  // tie: even code 0x00
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, std::nextafter(1.5 * 0x1p-127, 1.0), mode), 0x01u);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 0x1.fffp-128, mode), 0x00u);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, 0x1p-200, mode), 0x00u);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, kDenormMin, mode), 0x00u);
  }
}

TEST(Encode, E8M0NonPositiveAndNaNInputs) {
  for (double x : {0.0, -0.0, -1.0, -0x1p-127, -kInf}) {
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, x, Overflow::kSaturate), 0x00u) << show(x);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, x, Overflow::kNonSaturate), 0xFFu) << show(x);
  }
  for (Overflow mode : kModes) {
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, kNaN, mode), 0xFFu);
    EXPECT_EQ(encode(PACTS_FORMAT_E8M0, -kNaN, mode), 0xFFu);
  }
}

struct UnderflowCase {
  const Layout* layout;
  double min_subnormal;
};

TEST(Encode, UnderflowGivesSignedZeroUpToHalfTheMinSubnormalInclusive) {
  const UnderflowCase cases[] = {{&kE4M3Fn, 0x1p-9},    {&kE4M3Fnuz, 0x1p-10}, {&kE5M2, 0x1p-16},
                                 {&kE5M2Fnuz, 0x1p-17}, {&kBf16, 0x1p-133},    {&kFp16, 0x1p-24},
                                 {&kFp32, 0x1p-149},    {&kE2M1, 0.5}};
  for (const UnderflowCase& c : cases) {
    const Layout& l = *c.layout;
    SCOPED_TRACE(l.name);
    const double half = c.min_subnormal / 2;
    for (bool negative : {false, true}) {
      const double s = negative ? -1.0 : 1.0;
      const uint32_t sign = negative ? 1u << (l.bits - 1) : 0u;
      const uint32_t zero = is_fnuz(l) ? 0u : sign;  // fnuz has no -0: 0x80 is its NaN
      for (Overflow mode : kModes) {
        SCOPED_TRACE(std::string(mode_name(mode)) + (negative ? " negative" : " positive"));
        EXPECT_EQ(encode(l.format, s * 0.0, mode), zero);
        EXPECT_EQ(encode(l.format, s * kDenormMin, mode), zero);
        EXPECT_EQ(encode(l.format, s * std::nextafter(half, 0.0), mode), zero);
        EXPECT_EQ(encode(l.format, s * half, mode), zero);  // tie: zero has the even mantissa
        EXPECT_EQ(encode(l.format, s * std::nextafter(half, 1.0), mode), sign | 1u);
        EXPECT_EQ(encode(l.format, s * c.min_subnormal, mode), sign | 1u);
        EXPECT_EQ(std::signbit(decode(l.format, zero)), negative && !is_fnuz(l));
      }
    }
  }
}

TEST(Encode, NaNGivesTheCanonicalNaNCodeInBothModes) {
  const std::pair<pacts_format, uint32_t> canonical[] = {
      {PACTS_FORMAT_BF16, 0x7FC0},   {PACTS_FORMAT_FP16, 0x7E00},   {PACTS_FORMAT_FP32, 0x7FC00000},
      {PACTS_FORMAT_E4M3FN, 0x7F},   {PACTS_FORMAT_E4M3FNUZ, 0x80}, {PACTS_FORMAT_E5M2, 0x7E},
      {PACTS_FORMAT_E5M2FNUZ, 0x80}, {PACTS_FORMAT_E2M1, 0x7},      {PACTS_FORMAT_E8M0, 0xFF}};
  const double nans[] = {kNaN, -kNaN, std::numeric_limits<double>::signaling_NaN(),
                         std::bit_cast<double>(uint64_t{0x7FF0000000000001u}),
                         std::bit_cast<double>(uint64_t{0xFFFFFFFFFFFFFFFFu})};
  for (const auto& [format, want] : canonical) {
    for (double nan : nans) {
      for (Overflow mode : kModes) {
        EXPECT_EQ(encode(format, nan, mode), want) << format_name(format) << " " << mode_name(mode);
      }
    }
    if (format != PACTS_FORMAT_E2M1) {
      EXPECT_TRUE(is_nan_code(format, want)) << format_name(format);
    } else {
      EXPECT_EQ(decode(format, want), 6.0) << "e2m1 has no NaN: NaN encodes as +6 (ONNX)";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// round_to

TEST(RoundTo, RoundsOnceToNearestEvenAndOverflowsToInfinity) {
  EXPECT_EQ(round_to(PACTS_FORMAT_FP32, 1.0 + 0x1p-24), 1.0);                  // tie, even below
  EXPECT_EQ(round_to(PACTS_FORMAT_FP32, 1.0 + 3 * 0x1p-24), 1.0 + 0x1p-22);    // tie, even above
  EXPECT_EQ(round_to(PACTS_FORMAT_FP32, 1.0 + 0x1p-24 + 0x1p-50), 1.0 + 0x1p-23);
  EXPECT_EQ(round_to(PACTS_FORMAT_BF16, 1.0 + 0x1p-8), 1.0);
  EXPECT_EQ(round_to(PACTS_FORMAT_BF16, 1.0 + 3 * 0x1p-8), 1.0 + 0x1p-6);
  // Via fp32 this would round to the tie 1 + 2^-8 first and then to 1.0: double rounding.
  EXPECT_EQ(round_to(PACTS_FORMAT_BF16, 1.0 + 0x1p-8 + 0x1p-40), 1.0 + 0x1p-7);
  EXPECT_EQ(round_to(PACTS_FORMAT_FP16, 1.0 + 0x1p-11 + 0x1p-40), 1.0 + 0x1p-10);
  EXPECT_EQ(round_to(PACTS_FORMAT_FP16, 65519.0), 65504.0);
  EXPECT_EQ(round_to(PACTS_FORMAT_FP16, 65520.0), kInf);
  EXPECT_EQ(round_to(PACTS_FORMAT_BF16, -1e39), -kInf);
  EXPECT_EQ(round_to(PACTS_FORMAT_FP32, 1e39), kInf);
  EXPECT_EQ(round_to(PACTS_FORMAT_FP32, 0x1p-150), 0.0);
  EXPECT_EQ(round_to(PACTS_FORMAT_FP32, std::nextafter(0x1p-150, 1.0)), 0x1p-149);
  EXPECT_TRUE(same(round_to(PACTS_FORMAT_FP16, -1e-10), -0.0));
  EXPECT_TRUE(std::isnan(round_to(PACTS_FORMAT_FP32, kNaN)));
  EXPECT_TRUE(std::isnan(round_to(PACTS_FORMAT_E4M3FN, 500.0)));
  EXPECT_EQ(round_to(PACTS_FORMAT_E5M2, 1e6), kInf);
}

TEST(RoundTo, EqualsDecodeOfTheNonSaturatingEncode) {
  std::mt19937_64 rng(kSeed + 6);
  Mismatches bad;
  for (const ExpectedInfo& e : kExpectedInfo) {
    for (int i = 0; i < 20000; ++i) {
      const double x = random_double(rng, -160, 140);
      const double want = decode(e.format, encode(e.format, x, Overflow::kNonSaturate));
      if (!same(round_to(e.format, x), want)) bad.add(std::string(e.name) + " " + show(x));
    }
  }
  EXPECT_EQ(bad.count, 0) << bad.first << "(seed " << kSeed + 6 << ")";
}

}  // namespace
}  // namespace pacts::spec
