// Per-token fp8 V scales in the split kernels (src/kernel_mma.h, kPFold), host and device:
// the scale folded into P, and the keys whose V goes to the CUDA cores. tests/token_scales_test.cpp
// proves both on the host (every code of the four fp8 formats; the fold's bound).
//
// The fold. Key j's scale s = m 2^e is cut by its bits into the significand m in [1, 2) and the
// power of two 2^e (fold_scale): V enters P.V as code * 2^e, one exact bf16 part (at most 4
// significant bits), and P as the two bf16 parts hi and lo of fp32(p m) (fold_parts: 16
// significant bits, within (2^-17 + 2^-24) p m of p m, plus 2^-134 below bf16's normal range).
// spec/tolerance.md §3.3 states what the fold may do.
//
// The tiny keys. The split kernels feed V to P.V exactly only at |v| >= 2^-102 (every bf16 part
// normal or 0); a non-zero |v| below that is "tiny" and is added on the CUDA cores instead
// (src/kernel.h is_tiny). An fp8 element with a per-token scale s is RN_fp32(code * s). Its
// smallest non-zero magnitude is the format's smallest subnormal code (2^-9 e4m3fn, 2^-10
// e4m3fnuz, 2^-16 e5m2, 2^-17 e5m2fnuz) times s, and rounding to nearest never takes a product
// below a power of two it is at or above. So at |s| >= 2^-102 / smallest code no element of the
// key is tiny, and the kernels test each key's scale once per tile instead of each element: a key
// with 0 < |s| below the bound takes the CUDA-core path for all its elements (its V enters the
// MMAs as 0, its P factor is 1), every other key the MMAs (where code * 2^e is at least half of
// |code * s|, a normal bf16). A zero, infinite or NaN scale stays V's factor: a NaN reaches every
// row that sees the key (spec/contract.md §3).
#pragma once

#include "common/hd.h"

#include <cstdint>

#include <pacts/problem.h>

namespace pacts::kernels::hip::detail {

// log2 of the smallest non-zero magnitude of an fp8 format's codes (its smallest subnormal).
template <pacts_format kFormat>
PACTS_HD constexpr int smallest_code_log2() {
  static_assert(kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E4M3FNUZ ||
                    kFormat == PACTS_FORMAT_E5M2 || kFormat == PACTS_FORMAT_E5M2FNUZ,
                "the fp8 formats");
  return kFormat == PACTS_FORMAT_E4M3FN     ? -9
         : kFormat == PACTS_FORMAT_E4M3FNUZ ? -10
         : kFormat == PACTS_FORMAT_E5M2     ? -16
                                            : -17;
}

// The smallest |s| at which no element of a key can be tiny: 2^(-102 - smallest_code_log2).
template <pacts_format kFormat>
PACTS_HD constexpr float tiny_key_bound() {
  float b = 1.0f;
  for (int e = -102 - smallest_code_log2<kFormat>(); e < 0; ++e) b *= 0.5f;  // exact
  return b;
}

// Whether a key's per-token V scale may make one of its elements tiny.
template <pacts_format kFormat>
PACTS_HD inline bool tiny_key(float s) {
  return s != 0.0f && (s < 0.0f ? -s : s) < tiny_key_bound<kFormat>();
}

// A key's per-token V scale as P's factor and V's factor in the MMAs.
struct FoldedScale {
  float p, v;
};
template <pacts_format kFormat>
PACTS_HD inline FoldedScale fold_scale(float s) {
  namespace common = pacts::kernels::common;
  if (tiny_key<kFormat>(s)) return {1.0f, 0.0f};  // the CUDA cores' (subnormal scales among them)
  const uint32_t b = common::bits_of(s), e = b & 0x7F800000u;
  if (e == 0u || e == 0x7F800000u) return {1.0f, s};  // zero, infinite, NaN
  return {common::f32_from_bits((b & 0x807FFFFFu) | 0x3F800000u), common::f32_from_bits(e)};
}

// fp32 x0, x1 (p m of two keys) as two bf16 parts each, packed in pairs by `pack` (the device's
// round-to-nearest-even instruction, or the host's): hi = bf16(x), lo = bf16(x - hi), where x - hi
// is exact in fp32.
template <class Pack>
PACTS_HD inline void fold_parts(float x0, float x1, Pack pack, uint32_t& hi, uint32_t& lo) {
  namespace common = pacts::kernels::common;
  hi = pack(x0, x1);
  lo = pack(x0 - common::f32_from_bits(hi << 16), x1 - common::f32_from_bits(hi & 0xFFFF0000u));
}

}  // namespace pacts::kernels::hip::detail
