// pacts kernels, shared math: rounding a binary64 result ONCE, round to nearest even, to the
// output formats (spec/operator.md §9, spec/formats.md §4, non-saturating: overflow gives Inf).
//
// Integer bit manipulation only, so the result does not depend on the floating-point
// environment (rounding mode, flush-to-zero, x87 precision) of the host or the device.
// kernels/tests/round_test.cpp checks it against pacts::spec::encode(f, x, kNonSaturate).
#pragma once

#include "common/hd.h"
#include "common/mutant.h"

#include <pacts/problem.h>

namespace pacts::kernels::common {
PACTS_COMMON_ABI_BEGIN

// RNE of x to an IEEE-style binary format with kExpBits exponent and kManBits mantissa bits
// (bias 2^(kExpBits-1) - 1, Inf and NaN at the top exponent): the format's code. NaN gives the
// canonical quiet NaN (sign dropped, spec/formats.md §4); zeros keep their sign; magnitudes up
// to half the smallest subnormal round to zero (the tie goes to the even zero).
//
// kIeeeTop false: a format without Inf whose top exponent holds finite values (e4m3fn, e4m3fnuz,
// with bias kBias), for an x the caller has already brought within the largest finite magnitude
// and checked not to be NaN (spec/tolerance.md §2.1's requantisation): no overflow test.
template <int kExpBits, int kManBits, int kBias = (1 << (kExpBits - 1)) - 1, bool kIeeeTop = true>
PACTS_HD inline uint32_t round_binary64(double x) {
  constexpr uint32_t kExpAll = (1u << kExpBits) - 1;
  constexpr uint32_t kInfCode = kExpAll << kManBits;
  const uint64_t bits = bits_of(x);
  const uint32_t sign = static_cast<uint32_t>(bits >> 63) << (kExpBits + kManBits);
  const uint64_t magnitude = bits & 0x7FFFFFFFFFFFFFFFull;
  const int e64 = static_cast<int>(magnitude >> 52);
  if (kIeeeTop && e64 == 0x7FF) {
    if ((magnitude & 0xFFFFFFFFFFFFFull) != 0) return kInfCode | (1u << (kManBits - 1));  // NaN
    return sign | kInfCode;
  }
  if (magnitude == 0) return sign;
  // x = sig * 2^(exp - 52), sig < 2^53 (a binary64 subnormal has no implicit bit).
  const uint64_t sig = e64 == 0 ? (magnitude & 0xFFFFFFFFFFFFFull)
                                : ((magnitude & 0xFFFFFFFFFFFFFull) | (1ull << 52));
  const int exp = (e64 == 0 ? 1 : e64) - 1023;
  // The unbiased exponent of the result's normal range starts at 1 - kBias; below it the
  // spacing stays 2^(1 - kBias - kManBits) (subnormals).
  const int target_exp = exp < 1 - kBias ? 1 - kBias : exp;
  const int shift = 52 - kManBits + (target_exp - exp);
  // A binary64 subnormal can have its leading bit far below bit 52: it is still below half the
  // smallest subnormal of every output format, so it rounds to zero like any shift >= 54.
  if (shift >= 54 + 52) return sign;
  uint64_t q;
  if (shift >= 64) {
    q = 0;  // sig < 2^53 <= 2^(shift - 11): far below half an ulp
  } else {
    q = sig >> shift;
    const uint64_t rest = sig & ((1ull << shift) - 1);
    const uint64_t half = 1ull << (shift - 1);
    const bool truncate = kExpBits == 8 && kManBits == 7 && PACTS_MUTANT(bf16_truncated);
    if (!truncate && (rest > half || (rest == half && (q & 1)))) ++q;
  }
  // q holds the significand with its implicit bit at kManBits (normal) or below (subnormal).
  // Adding it to the exponent field minus one carries a rounded-up significand of 2^(kManBits+1)
  // into the next binade, and a subnormal that rounds up to 2^kManBits into the smallest normal.
  const uint64_t biased = exp < 1 - kBias ? 0 : static_cast<uint64_t>(target_exp + kBias - 1);
  const uint64_t code = exp < 1 - kBias ? q : (biased << kManBits) + q;
  if (kIeeeTop && code >= kInfCode) return sign | kInfCode;  // overflow: non-saturating
  return sign | static_cast<uint32_t>(code);
}

// The output formats (spec/formats.md §1.1-1.3): the code to store.
PACTS_HD inline uint32_t round_to_bf16(double x) { return round_binary64<8, 7>(x); }
PACTS_HD inline uint32_t round_to_fp16(double x) { return round_binary64<5, 10>(x); }
PACTS_HD inline uint32_t round_to_fp32(double x) { return round_binary64<8, 23>(x); }

PACTS_HD inline uint32_t round_to_output(pacts_format out, double x) {
  switch (out) {
    case PACTS_FORMAT_BF16: return round_to_bf16(x);
    case PACTS_FORMAT_FP16: return round_to_fp16(x);
    default: return round_to_fp32(x);
  }
}

// The canonical NaN of an output format (spec/formats.md §1): what a row whose sequence failed
// a device-resident precondition is written as (spec/contract.md §4).
PACTS_HD inline uint32_t output_nan(pacts_format out) {
  switch (out) {
    case PACTS_FORMAT_BF16: return 0x7FC0u;
    case PACTS_FORMAT_FP16: return 0x7E00u;
    default: return 0x7FC00000u;
  }
}

PACTS_COMMON_ABI_END
}  // namespace pacts::kernels::common
