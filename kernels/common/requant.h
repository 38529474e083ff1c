// pacts kernels, shared math: the query requantisation rule "fp8-row-pow2" (spec/tolerance.md
// §2.1), the copy that kernels run (host and device alike), and the combined logit factor of
// spec/contract.md §2.1 order 3 that goes with it.
//
// The rule, per non-empty row: q~_d = common::fold_query(...) in fp32 (the caller's); a = max |q~_d|
// over the non-NaN elements; e = the smallest integer with a * 2^-e <= max_finite(T) (0 when a is
// 0 or not finite); code_d = RNE_T(q~_d * 2^-e), exact scaling, NaN -> T's NaN. T = e4m3fnuz for
// the fnuz KV formats, else e4m3fn. The row's requantised element is decode_T(code_d) * 2^e.
// Integer arithmetic on the fp32 bits and exact binary64 scaling: the result does not depend on
// the floating-point environment or on FMA contraction, so host, NVIDIA and AMD get the same
// codes. kernels/tests/requant_test.cpp checks it bit for bit against pacts::spec::requantize_row.
#pragma once

#include "common/hd.h"
#include "common/round.h"

#include <pacts/problem.h>

#include <stdint.h>

namespace pacts::kernels::common {
PACTS_COMMON_ABI_BEGIN

// The fp8 format a rule targets, by the KV format (spec::requant_target).
struct Fp8Target {
  bool fnuz;          // e4m3fnuz (bias 8, no -0, NaN 0x80), else e4m3fn (bias 7, NaN 0x7F)
  int max_exponent;   // ilogb of the largest finite value: 448 = 1.75 * 2^8, 240 = 1.875 * 2^7
  uint32_t max_mantissa;  // its 23 fp32 mantissa bits: 0.75 and 0.875
  uint8_t nan_code;
};
PACTS_HD constexpr Fp8Target requant_target(pacts_format kv_format) {
  return kv_format == PACTS_FORMAT_E4M3FNUZ || kv_format == PACTS_FORMAT_E5M2FNUZ
             ? Fp8Target{true, 7, 0x700000u, 0x80u}
             : Fp8Target{false, 8, 0x600000u, 0x7Fu};
}

// The 31 magnitude bits of |x| for a running maximum over non-NaN elements: the magnitude bits of
// finite and infinite fp32 values order like their values; a NaN counts as 0.
PACTS_HD inline uint32_t requant_magnitude(float x) {
  const uint32_t m = bits_of(x) & 0x7FFFFFFFu;
  return m > 0x7F800000u ? 0u : m;
}

// A finite non-zero fp32 magnitude (its bits) as 2^exponent * (1 + mantissa / 2^23), subnormals
// included: ilogb and the fraction bits.
struct Normalized {
  int exponent;
  uint32_t mantissa;
};
PACTS_HD inline Normalized normalized(uint32_t magnitude_bits) {
  if ((magnitude_bits >> 23) != 0)
    return {static_cast<int>(magnitude_bits >> 23) - 127, magnitude_bits & 0x7FFFFFu};
  int exp = -126;
  uint32_t mantissa = magnitude_bits;
  while ((mantissa & 0x800000u) == 0) {  // the leading 1 moves up to bit 23
    mantissa <<= 1;
    --exp;
  }
  return {exp, mantissa & 0x7FFFFFu};
}

// e of the rule from a's magnitude bits (step 3): ilogb(a) - ilogb(max) plus one when a's
// significand exceeds max's (then a * 2^(ilogb(max) - ilogb(a)) > max).
PACTS_HD inline int requant_exponent(uint32_t a_bits, Fp8Target t) {
  if (a_bits == 0 || a_bits >= 0x7F800000u) return 0;
  const Normalized n = normalized(a_bits);
  return n.exponent - t.max_exponent + (n.mantissa > t.max_mantissa ? 1 : 0);
}

// 2^k as a binary64, exactly, for |k| <= 1022.
PACTS_HD inline double f64_pow2(int k) {
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

// code_d of the rule (step 4): q~ * 2^-e is exact in binary64 and at most max_finite(T) in
// magnitude, rounded once to nearest even. Beyond it (only in a row whose maximum is infinite, e
// = 0: outside the contract) the code saturates, as spec::requantize_row's encode does.
PACTS_HD inline uint8_t requant_code(float folded, int e, Fp8Target t) {
  if ((bits_of(folded) & 0x7FFFFFFFu) > 0x7F800000u) return t.nan_code;
  const double scaled = static_cast<double>(folded) * f64_pow2(-e);
  const double max = t.fnuz ? 240.0 : 448.0;
  if (scaled > max || scaled < -max)  // the largest finite code, with the sign
    return static_cast<uint8_t>((scaled < 0 ? 0x80u : 0u) | (t.fnuz ? 0x7Fu : 0x7Eu));
  const uint32_t code = t.fnuz ? round_binary64<4, 3, 8, false>(scaled)
                               : round_binary64<4, 3, 7, false>(scaled);
  // fnuz has no -0: its 0x80 is the NaN, so a negative value that rounds to zero is +0.
  if (t.fnuz && (code & 0x7Fu) == 0) return 0;
  return static_cast<uint8_t>(code);
}

// spec/contract.md §2.1 order 3: the factor a raw fp8 x fp8 (or fp8 x e2m1) product is multiplied
// by once, 2^e times the key's scale, held as an fp32 significand in [1, 2) and an integer
// exponent, so that neither a tiny Q (large -e) nor a large scale makes an fp32 intermediate
// overflow: the logit is ldexp(raw * significand, exponent), and raw * significand <= 2^41.
struct LogitFactor {
  float significand;
  int exponent;
};
PACTS_HD inline LogitFactor logit_factor(float k_scale, int e) {
  const uint32_t bits = bits_of(k_scale) & 0x7FFFFFFFu;
  if (bits == 0) return {0.0f, 0};
  if (bits >= 0x7F800000u) return {k_scale, e};  // outside the contract (R1): pass it through
  const Normalized n = normalized(bits);
  return {f32_from_bits((bits_of(k_scale) & 0x80000000u) | 0x3F800000u | n.mantissa),
          n.exponent + e};
}

PACTS_COMMON_ABI_END
}  // namespace pacts::kernels::common
