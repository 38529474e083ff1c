// pacts::spec format codecs (spec/formats.md): exact decode of every code to binary64, and
// round-to-nearest-even encode from binary64 with saturating or non-saturating overflow.
// Every finite value of every format is exact in binary64, so decode() is exact.
#pragma once

#include <pacts/problem.h>

#include <cstdint>
#include <string_view>

namespace pacts::spec {

struct FormatInfo {
  pacts_format format;
  std::string_view name;   // "bf16", "fp16", "fp32", "e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "e2m1", "e8m0"
  int bits;                // storage bits per element (4 for e2m1)
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_inf;
  bool has_nan;
  bool has_negative_zero;
  bool is_signed;          // false only for e8m0
  double max_finite;       // largest finite magnitude
  double min_normal;       // smallest positive normal (e8m0: 2^-127)
  double min_subnormal;    // smallest positive value (== min_normal when no subnormals)
};

// Information for every storage format; PACTS_FORMAT_INVALID or unknown values return nullptr.
const FormatInfo* format_info(pacts_format f);
std::string_view format_name(pacts_format f);  // "invalid" for unknown values

// Size of one element in bytes for the byte-addressed formats; 0 for e2m1 (half a byte).
int element_bytes(pacts_format f);

// Number of distinct codes (2^bits; 2^32 for fp32); 0 for unknown values.
uint64_t code_count(pacts_format f);

// Exact value of a code. NaN codes give a quiet NaN, Inf codes +-infinity, -0 gives -0.0.
// Only the low `bits` bits of `code` are used. fp32 codes are decoded too (exactly).
double decode(pacts_format f, uint32_t code);
bool is_nan_code(pacts_format f, uint32_t code);

enum class Overflow {
  kSaturate,     // |x| beyond max_finite (after rounding) -> +-max_finite; +-inf -> +-max_finite
  kNonSaturate,  // overflow -> +-inf where the format has it, else its NaN code
};

// Round-to-nearest-even encode of x (spec/formats.md §4). NaN input gives the format's canonical
// NaN (e2m1 has none: NaN encodes as +6 per ONNX; e8m0: 0xFF). Values below half the smallest
// subnormal become a zero of the same sign (fnuz formats: +0, they have no -0).
// e8m0 encodes |x|'s nearest power of two (ties to the even exponent code); x <= 0 gives 0xFF
// under kNonSaturate and 0x00 under kSaturate.
uint32_t encode(pacts_format f, double x, Overflow overflow);

// Convenience: decoded MXFP4 pieces.
inline double decode_e8m0(uint8_t byte) { return decode(PACTS_FORMAT_E8M0, byte); }
inline double decode_e2m1(uint8_t nibble) { return decode(PACTS_FORMAT_E2M1, nibble & 0xFu); }

// Round a binary64 value to fp32/bf16/fp16 and back (RNE, non-saturating): the value a kernel
// stores. Used by the reference's exact-one-key rule and the tolerance model.
double round_to(pacts_format f, double x);

}  // namespace pacts::spec
