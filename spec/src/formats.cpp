// Format codecs (spec/formats.md). decode() is exact: every finite value of every format is a
// small integer times a power of two, built with std::ldexp. encode() rounds to nearest, ties to
// even, straight from binary64 (never through float, which would round twice), then applies the
// range check to the rounded magnitude (spec/formats.md §4).
#include <pacts/spec/formats.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

namespace pacts::spec {

namespace {

// How a format spends its special codes (spec/formats.md §1).
enum class Specials {
  kIeee,      // all-ones exponent: Inf (mantissa 0) or NaN (bf16, fp16, fp32, e5m2)
  kE4M3Fn,    // only S.1111.111 is NaN; no Inf
  kFnuz,      // only 0x80 is NaN; no Inf, no -0
  kNone,      // every code is finite (e2m1)
  kExponent,  // unsigned, exponent only, 0xFF is NaN (e8m0)
};

struct Codec {
  FormatInfo info;
  Specials specials;
  uint32_t nan_code;  // canonical NaN that encode() writes (e2m1: +6, it has no NaN)
  uint32_t max_code;  // positive largest finite
  uint32_t inf_code;  // positive Inf; unused without Inf
};

constexpr double kQuietNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Indexed by pacts_format - 1.
constexpr std::array<Codec, 9> kCodecs = {{
    {{PACTS_FORMAT_BF16, "bf16", 16, 8, 7, 127, true, true, true, true, 0x1.fep127, 0x1p-126,
      0x1p-133},
     Specials::kIeee, 0x7FC0, 0x7F7F, 0x7F80},
    {{PACTS_FORMAT_FP16, "fp16", 16, 5, 10, 15, true, true, true, true, 65504.0, 0x1p-14, 0x1p-24},
     Specials::kIeee, 0x7E00, 0x7BFF, 0x7C00},
    {{PACTS_FORMAT_FP32, "fp32", 32, 8, 23, 127, true, true, true, true, 0x1.fffffep127,
      0x1p-126, 0x1p-149},
     Specials::kIeee, 0x7FC00000, 0x7F7FFFFF, 0x7F800000},
    {{PACTS_FORMAT_E4M3FN, "e4m3fn", 8, 4, 3, 7, false, true, true, true, 448.0, 0x1p-6, 0x1p-9},
     Specials::kE4M3Fn, 0x7F, 0x7E, 0},
    {{PACTS_FORMAT_E4M3FNUZ, "e4m3fnuz", 8, 4, 3, 8, false, true, false, true, 240.0, 0x1p-7,
      0x1p-10},
     Specials::kFnuz, 0x80, 0x7F, 0},
    // e5m2 NaN 0x7E: the top byte of fp16's canonical quiet NaN 0x7E00 (as ml_dtypes).
    {{PACTS_FORMAT_E5M2, "e5m2", 8, 5, 2, 15, true, true, true, true, 57344.0, 0x1p-14, 0x1p-16},
     Specials::kIeee, 0x7E, 0x7B, 0x7C},
    {{PACTS_FORMAT_E5M2FNUZ, "e5m2fnuz", 8, 5, 2, 16, false, true, false, true, 57344.0, 0x1p-15,
      0x1p-17},
     Specials::kFnuz, 0x80, 0x7F, 0},
    {{PACTS_FORMAT_E2M1, "e2m1", 4, 2, 1, 1, false, false, true, true, 6.0, 1.0, 0.5},
     Specials::kNone, 0x7, 0x7, 0},
    {{PACTS_FORMAT_E8M0, "e8m0", 8, 8, 0, 127, false, true, false, false, 0x1p127, 0x1p-127,
      0x1p-127},
     Specials::kExponent, 0xFF, 0xFE, 0},
}};

const Codec* codec_of(pacts_format f) {
  const int i = static_cast<int>(f);
  if (i < 1 || i > static_cast<int>(kCodecs.size())) return nullptr;
  return &kCodecs[static_cast<size_t>(i - 1)];
}

uint32_t code_mask(const FormatInfo& info) {
  return info.bits == 32 ? 0xFFFFFFFFu : (1u << info.bits) - 1u;
}

uint32_t sign_bit(const FormatInfo& info) { return 1u << (info.bits - 1); }

// Nearest integer to y >= 0, ties to even. y - floor(y) is exact for every double, so this does
// not depend on the floating-point environment's rounding mode.
uint64_t round_half_even(double y) {
  const double whole = std::floor(y);
  const double frac = y - whole;
  auto n = static_cast<uint64_t>(whole);
  if (frac > 0.5 || (frac == 0.5 && (n & 1u) != 0)) ++n;
  return n;
}

uint32_t zero_code(const Codec& c, bool negative) {
  // fnuz formats have no -0: 0x80 is their NaN (spec/formats.md §1).
  if (c.specials == Specials::kFnuz || !negative) return 0;
  return sign_bit(c.info);
}

uint32_t overflow_code(const Codec& c, bool negative, Overflow overflow) {
  const uint32_t sign = negative ? sign_bit(c.info) : 0u;
  // e2m1 has neither Inf nor NaN: it always saturates (ONNX, OCP MX).
  if (overflow == Overflow::kSaturate || c.specials == Specials::kNone) return sign | c.max_code;
  switch (c.specials) {
    case Specials::kIeee: return sign | c.inf_code;
    case Specials::kE4M3Fn: return sign | c.nan_code;  // 0x7F / 0xFF, as PyTorch eager
    default: return c.nan_code;                         // fnuz: the single NaN 0x80
  }
}

bool is_nan_signed(const Codec& c, uint32_t code) {
  const FormatInfo& info = c.info;
  const uint32_t magnitude = code & (code_mask(info) >> 1);
  const uint32_t exponent = magnitude >> info.mantissa_bits;
  const uint32_t mantissa = magnitude & ((1u << info.mantissa_bits) - 1u);
  const uint32_t all_ones = (1u << info.exponent_bits) - 1u;
  switch (c.specials) {
    case Specials::kIeee: return exponent == all_ones && mantissa != 0;
    case Specials::kE4M3Fn: return magnitude == 0x7Fu;
    case Specials::kFnuz: return code == 0x80u;
    default: return false;
  }
}

double decode_signed(const Codec& c, uint32_t code) {
  const FormatInfo& info = c.info;
  if (is_nan_signed(c, code)) return kQuietNaN;
  const bool negative = (code & sign_bit(info)) != 0;
  const uint32_t magnitude = code & (code_mask(info) >> 1);
  const uint32_t exponent = magnitude >> info.mantissa_bits;
  const uint32_t mantissa = magnitude & ((1u << info.mantissa_bits) - 1u);
  double value = 0.0;
  if (c.specials == Specials::kIeee && exponent == (1u << info.exponent_bits) - 1u) {
    value = kInf;
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - info.bias - info.mantissa_bits);
  } else {
    const uint32_t significand = (1u << info.mantissa_bits) | mantissa;
    value = std::ldexp(static_cast<double>(significand),
                       static_cast<int>(exponent) - info.bias - info.mantissa_bits);
  }
  return negative ? -value : value;
}

uint32_t encode_signed(const Codec& c, double x, Overflow overflow) {
  const FormatInfo& info = c.info;
  if (std::isnan(x)) return c.nan_code;
  const bool negative = std::signbit(x);
  if (std::isinf(x)) return overflow_code(c, negative, overflow);
  const double a = std::fabs(x);
  if (a == 0.0) return zero_code(c, negative);

  // Quantum of the binade holding a (or of the subnormal range): a / 2^(e - m) is exact and lies
  // in [0, 2^(m+1)), so rounding it to an integer is the format's RNE.
  const int m = info.mantissa_bits;
  const int min_exponent = 1 - info.bias;
  int frexp_exponent = 0;
  std::frexp(a, &frexp_exponent);
  int e = std::max(frexp_exponent - 1, min_exponent);
  uint64_t n = round_half_even(std::ldexp(a, m - e));
  if (n == 0) return zero_code(c, negative);
  if (n >> (m + 1) != 0) {  // rounded up into the next binade
    n >>= 1;
    ++e;
  }
  // Range check on the rounded magnitude (OCP OFP8 §5.2).
  if (std::ldexp(static_cast<double>(n), e - m) > info.max_finite) {
    return overflow_code(c, negative, overflow);
  }
  const uint64_t hidden = uint64_t{1} << m;
  const uint32_t sign = negative ? sign_bit(info) : 0u;
  if (n < hidden) return sign | static_cast<uint32_t>(n);  // subnormal: exponent field 0
  const auto exponent_field = static_cast<uint32_t>(e + info.bias);
  return sign | (exponent_field << m) | static_cast<uint32_t>(n - hidden);
}

// e8m0 (spec/formats.md §4): the power of two nearest to x, a tie 1.5 * 2^k going to the even
// code; rounded results above 2^127 overflow, results below 2^-127 clamp to 0x00 (no zero).
uint32_t encode_e8m0(double x, Overflow overflow) {
  constexpr uint32_t kNaN = 0xFF;
  constexpr uint32_t kMax = 0xFE;
  constexpr int kBias = 127;
  if (std::isnan(x)) return kNaN;
  if (x <= 0.0) return overflow == Overflow::kSaturate ? 0u : kNaN;
  if (std::isinf(x)) return overflow == Overflow::kSaturate ? kMax : kNaN;
  int frexp_exponent = 0;
  const double fraction = 2.0 * std::frexp(x, &frexp_exponent);  // x = fraction * 2^k, [1, 2)
  int code = frexp_exponent - 1 + kBias;
  if (fraction > 1.5 || (fraction == 1.5 && (code & 1) != 0)) ++code;
  if (code > static_cast<int>(kMax)) return overflow == Overflow::kSaturate ? kMax : kNaN;
  return code < 0 ? 0u : static_cast<uint32_t>(code);
}

}  // namespace

const FormatInfo* format_info(pacts_format f) {
  const Codec* c = codec_of(f);
  return c == nullptr ? nullptr : &c->info;
}

std::string_view format_name(pacts_format f) {
  if (const Codec* c = codec_of(f)) return c->info.name;
  return "invalid";
}

int element_bytes(pacts_format f) {
  const Codec* c = codec_of(f);
  if (c == nullptr || c->info.bits < 8) return 0;
  return c->info.bits / 8;
}

uint64_t code_count(pacts_format f) {
  const Codec* c = codec_of(f);
  if (c == nullptr) return 0;
  return uint64_t{1} << c->info.bits;
}

double decode(pacts_format f, uint32_t code) {
  const Codec* c = codec_of(f);
  if (c == nullptr) return kQuietNaN;
  code &= code_mask(c->info);
  if (c->specials == Specials::kExponent) {
    if (code == 0xFFu) return kQuietNaN;
    return std::ldexp(1.0, static_cast<int>(code) - c->info.bias);  // 0x00 is 2^-127, not 0
  }
  return decode_signed(*c, code);
}

bool is_nan_code(pacts_format f, uint32_t code) {
  const Codec* c = codec_of(f);
  if (c == nullptr) return true;  // consistent with decode(): no value
  code &= code_mask(c->info);
  if (c->specials == Specials::kExponent) return code == 0xFFu;
  return is_nan_signed(*c, code);
}

uint32_t encode(pacts_format f, double x, Overflow overflow) {
  const Codec* c = codec_of(f);
  if (c == nullptr) return 0;
  if (c->specials == Specials::kExponent) return encode_e8m0(x, overflow);
  return encode_signed(*c, x, overflow);
}

double round_to(pacts_format f, double x) {
  return decode(f, encode(f, x, Overflow::kNonSaturate));
}

}  // namespace pacts::spec
