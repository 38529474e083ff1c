// pacts kernels, shared math: storage codes to fp32 values (spec/formats.md) and the scale modes
// (spec/formats.md §3, spec/operator.md §7).
//
// Every finite code of every Q and KV format is exactly an fp32 number (at most 11 significant
// bits, exponents within [-24, 15] for fp16 and the fp8 formats, bf16 is the upper half of an
// fp32), so these decoders are exact: kernels/tests/dequant_test.cpp checks every code of every
// format against pacts::spec::decode. NaN codes decode to a NaN and Inf codes to the infinity of
// their sign.
//
// Scaled values are formed in fp32 as (decoded element) * (its scale), one rounding, BEFORE any
// product with Q (spec/contract.md §2.1, order 1/2: "dequantise first"): under R1 every scaled K
// element is at most 2^126, so nothing here overflows inside the contract, whatever the e8m0
// byte (an e8m0 byte of 0xFA with |m| <= 6 gives 6 * 2^123).
#pragma once

#include "common/hd.h"
#include "common/mutant.h"

#include <pacts/problem.h>

namespace pacts::kernels::common {
PACTS_COMMON_ABI_BEGIN

// bf16 is the upper half of an fp32.
PACTS_HD inline float bf16_to_float(uint16_t code) {
  return f32_from_bits(static_cast<uint32_t>(code) << 16);
}

// IEEE binary16. Subnormals (M * 2^-24) are normal fp32 numbers.
PACTS_HD inline float fp16_to_float(uint16_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x8000u) << 16;
  const uint32_t e = (code >> 10) & 0x1Fu;
  const uint32_t m = code & 0x3FFu;
  if (e == 0x1F) return f32_from_bits(sign | 0x7F800000u | (m << 13));  // Inf, NaN (payload kept)
  if (e != 0) return f32_from_bits(sign | ((e - 15 + 127) << 23) | (m << 13));
  if (PACTS_MUTANT(fp16_subnormals_flushed)) return f32_from_bits(sign);
  const float magnitude = static_cast<float>(m) * f32_pow2(-24);  // exact: m < 2^10
  return sign ? -magnitude : magnitude;
}

// The four fp8 formats share S1 E(4|5) M(3|2) and differ in bias and special codes
// (spec/formats.md §1.4-1.7, §1.10). `kFnuz`: the only NaN is 0x80 and there is no -0 or Inf.
// `kByScaling`: the decode loops' variant (the *_fast decoders below), the same value.
template <int kExpBits, int kManBits, int kBias, bool kFnuz, bool kByScaling = false>
PACTS_HD inline float minifloat_to_float(uint8_t code) {
  constexpr uint32_t kExpMask = (1u << kExpBits) - 1;
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t e = (code >> kManBits) & kExpMask;
  const uint32_t m = code & ((1u << kManBits) - 1);
  if (kFnuz && code == 0x80) return f32_nan();
  if (!kFnuz && e == kExpMask) {
    if (kExpBits == 5) return f32_from_bits(sign | (m == 0 ? 0x7F800000u : 0x7FC00000u));  // e5m2
    if (m == (1u << kManBits) - 1) return f32_nan();  // e4m3fn: S.1111.111 only
  }
  if constexpr (kByScaling) {
    return f32_from_bits(sign | (static_cast<uint32_t>(code & 0x7Fu) << (23 - kManBits))) *
           f32_pow2(127 - kBias);
  } else {
    if (e != 0) return f32_from_bits(sign | ((e - kBias + 127) << 23) | (m << (23 - kManBits)));
    const float magnitude = static_cast<float>(m) * f32_pow2(1 - kBias - kManBits);  // exact
    return sign ? -magnitude : magnitude;
  }
}

PACTS_HD inline float e4m3fn_to_float(uint8_t c) {
  if (PACTS_MUTANT(e4m3fn_read_as_fnuz)) return minifloat_to_float<4, 3, 8, true>(c);
  return minifloat_to_float<4, 3, 7, false>(c);
}
PACTS_HD inline float e4m3fnuz_to_float(uint8_t c) { return minifloat_to_float<4, 3, 8, true>(c); }
PACTS_HD inline float e5m2_to_float(uint8_t c) { return minifloat_to_float<5, 2, 15, false>(c); }
PACTS_HD inline float e5m2fnuz_to_float(uint8_t c) { return minifloat_to_float<5, 2, 16, true>(c); }

// The same decoders for the GPU's K/V decode loops (kernels/hip: decode_kv): the same value for
// every code, bit for bit (tests Dequant.FastDecodersMatchEveryCode, and common_gpu_test on the
// GPU), in fewer instructions: the code's exponent and mantissa fields are placed under fp32's
// and one multiply by 2^(127 - bias) rebiases them, exactly (a product with a power of two; a
// subnormal code is an fp32 subnormal there and comes out normal: no kernel of pacts flushes fp32
// subnormals, the profiles say ftz false). Only the special codes take a select. The definitions
// above stay what the rest uses (the query's decode among them: the bf16 kernel's code, and its
// speed on the H200, did not move with these).
PACTS_HD inline float fp16_to_float_fast(uint16_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x8000u) << 16;
  const uint32_t e = (code >> 10) & 0x1Fu;
  if (e == 0x1F) return f32_from_bits(sign | 0x7F800000u | ((code & 0x3FFu) << 13));
  if (e == 0 && PACTS_MUTANT(fp16_subnormals_flushed)) return f32_from_bits(sign);
  return f32_from_bits(sign | (static_cast<uint32_t>(code & 0x7FFFu) << 13)) * f32_pow2(127 - 15);
}

PACTS_HD inline float e4m3fn_to_float_fast(uint8_t c) {
  if (PACTS_MUTANT(e4m3fn_read_as_fnuz)) return minifloat_to_float<4, 3, 8, true, true>(c);
  return minifloat_to_float<4, 3, 7, false, true>(c);
}
PACTS_HD inline float e4m3fnuz_to_float_fast(uint8_t c) { return minifloat_to_float<4, 3, 8, true, true>(c); }
PACTS_HD inline float e5m2_to_float_fast(uint8_t c) { return minifloat_to_float<5, 2, 15, false, true>(c); }
PACTS_HD inline float e5m2fnuz_to_float_fast(uint8_t c) { return minifloat_to_float<5, 2, 16, true, true>(c); }

// e2m1 (OCP MX FP4): one nibble; 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (0x8 is -0).
PACTS_HD inline float e2m1_to_float(uint8_t nibble) {
  const uint32_t e = (nibble >> 1) & 0x3u;
  const uint32_t m = nibble & 0x1u;
  // Subnormal (e = 0): m * 0.5; normal: 2^(e-1) * (1 + m/2). Both exact in fp32 bits.
  const uint32_t magnitude = e == 0 ? (m ? 0x3F000000u : 0u)  // 0.5 or 0
                                    : ((e - 1 + 127) << 23) | (m << 22);
  return f32_from_bits((static_cast<uint32_t>(nibble & 0x8u) << 28) | magnitude);
}

// e8m0 (OCP MX scale): 2^(byte - 127). Byte 0x00 is 2^-127, an fp32 SUBNORMAL (bits 0x00400000),
// never zero (spec/formats.md §1.9); kernels that flush subnormals must declare it (ftz). 0xFF is
// NaN: every element of its block is NaN.
PACTS_HD inline float e8m0_to_float(uint8_t byte) {
  if (byte == 0xFF) return PACTS_MUTANT(e8m0_ff_not_nan) ? f32_pow2(127) : f32_nan();
  if (byte == 0x00) return PACTS_MUTANT(e8m0_zero_as_zero) ? 0.0f : f32_from_bits(0x00400000u);
  return f32_from_bits(static_cast<uint32_t>(byte) << 23);
}

// The nibble of element d of an e2m1 byte (spec/operator.md §3.3, spec/formats.md §2).
PACTS_HD inline uint8_t e2m1_nibble(uint8_t byte, int64_t d, pacts_nibble_order order) {
  const bool even = (d & 1) == 0;
  const bool low = (even == (order == PACTS_NIBBLE_LOW_FIRST)) != PACTS_MUTANT(nibbles_swapped);
  return static_cast<uint8_t>(low ? (byte & 0x0Fu) : (byte >> 4));
}

// An MXFP4 element: e2m1 value times its block's e8m0 scale. The fp32 product is exact whenever
// it is finite (2 significant bits times a power of two, down to 2^-128 = 0.5 * 2^-127, an fp32
// subnormal); it overflows only for the twelve values beyond fp32 (|m| >= 2 at 0xFE, |m| >= 4 at
// 0xFD), which R1 puts outside the contract.
PACTS_HD inline float mx_value(uint8_t nibble, uint8_t scale_byte) {
  return e2m1_to_float(nibble) * e8m0_to_float(scale_byte);
}

// Any byte-or-halfword Q or KV code (not e2m1, which needs its nibble and block scale).
PACTS_HD inline float decode_code(pacts_format f, uint32_t code) {
  switch (f) {
    case PACTS_FORMAT_BF16: return bf16_to_float(static_cast<uint16_t>(code));
    case PACTS_FORMAT_FP16: return fp16_to_float(static_cast<uint16_t>(code));
    case PACTS_FORMAT_E4M3FN: return e4m3fn_to_float(static_cast<uint8_t>(code));
    case PACTS_FORMAT_E4M3FNUZ: return e4m3fnuz_to_float(static_cast<uint8_t>(code));
    case PACTS_FORMAT_E5M2: return e5m2_to_float(static_cast<uint8_t>(code));
    case PACTS_FORMAT_E5M2FNUZ: return e5m2fnuz_to_float(static_cast<uint8_t>(code));
    case PACTS_FORMAT_E2M1: return e2m1_to_float(static_cast<uint8_t>(code & 0xFu));
    case PACTS_FORMAT_E8M0: return e8m0_to_float(static_cast<uint8_t>(code));
    default: return f32_nan();
  }
}

// One scaled K or V element (spec/operator.md §7): the decoded element times the scale of its
// mode, rounded once to fp32. NONE passes 1 (exact), PER_TENSOR the problem's k_scale / v_scale,
// PER_TOKEN the slot's fp32 scale. MX_BLOCK elements come from mx_value() instead.
//
// Poison rule (spec/contract.md §5): callers form a scaled element only for an OWNED key; the
// scale of an unowned slot is never loaded, so it cannot enter any product.
PACTS_HD inline float scaled(float decoded, float scale) { return decoded * scale; }

// Q with both host scalars folded in, in this order (spec/contract.md §2.1, order 2):
//   q~_d = (decode(q_d) * q_scale) * softmax_scale,
// each product <= 2^126 by R1 and R3, so q~_d . k_j needs no further scale and every partial
// sum of products is <= softmax_scale * A_j <= 2^64 (R3): no overflow for any e8m0 byte that R1
// admits, whatever the size of Q. aiter applied the scales after the product and overflowed at
// byte 249 (docs/bug-classes.md, #7056).
PACTS_HD inline float fold_query(float decoded, float q_scale, float softmax_scale) {
  if (PACTS_MUTANT(q_scale_ignored)) return decoded * softmax_scale;
  // The kernel then multiplies each logit by q_scale (kernels/host/kernel.h row_step).
  if (PACTS_MUTANT(q_scale_after_dot)) return decoded * softmax_scale;
  return (decoded * q_scale) * softmax_scale;
}

PACTS_COMMON_ABI_END
}  // namespace pacts::kernels::common
