// MXFP4 elements to bf16 by table: the NVIDIA split kernels' decode of an e2m1 K or V segment
// (src/kernel_mma.h), host and device: tests/mx_table_test.cpp runs the same functions on the
// host against the scalar decode for every scale byte. Internal to kernels/hip/.
//
// A block of 32 elements shares one e8m0 scale, so an element's bf16 value is one of eight
// magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6 times the scale) and its sign. The table holds those
// eight bf16 magnitudes, each formed exactly as the scalar decode forms it (the fp32 product
// common::e2m1_to_float(i) * scale, rounded by the caller's bf16 pack: the same bits), split
// into their high and low bytes so that one byte permute (PRMT) looks up four elements by their
// nibbles. Eight elements then cost about fifteen integer instructions where the scalar decode
// spent about ten per element (nibble, e2m1 decode, product, rounding).
#pragma once

#include "common/dequant.h"
#include "common/hd.h"
#include "common/mutant.h"

#include <pacts/problem.h>

#include <cstdint>

namespace pacts::kernels::hip::detail {

// PRMT's default mode (CUDA's __byte_perm): byte n of the result is byte s_n of the eight bytes
// {b:a} (a the bytes 0-3), s_n the low three bits of selector nibble n. Every selector here has
// its nibbles' high bits clear, so PRMT's sign-replicating mode never applies.
PACTS_HD inline uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, s);
#else
  const uint64_t x = static_cast<uint64_t>(b) << 32 | a;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n)
    r |= static_cast<uint32_t>(x >> (8 * ((s >> (4 * n)) & 7u)) & 0xFFu) << (8 * n);
  return r;
#endif
}

// Below this a V element is "tiny" (src/kernel.h is_tiny): the split kernels add it on the CUDA
// cores, not through P.V.
inline constexpr float kMxTinyBelow = 0x1p-102f;

// The eight bf16 magnitudes of one block: byte i of hi[0]:hi[1] (lo[0]:lo[1]) is the high (low)
// byte of magnitude i. `tiny`: some non-zero magnitude is below kMxTinyBelow (V only: those
// entries are 0 in the table and their elements go the tiny path).
struct MxTable {
  uint32_t hi[2];
  uint32_t lo[2];
  bool tiny;
};

// The table of a block with fp32 scale `scale` (the e8m0 value as the kernel stores it: a positive
// power of two, 2^-127 included, or NaN; an unowned slot's byte is 0x7F, whose elements are the
// kernel's zeros). pack(lo, hi): two fp32 values rounded to a bf16x2 word (lo in
// the low half), as the scalar decode rounds them. kZeroTiny: V's tables (see MxTable::tiny).
template <bool kZeroTiny, typename Pack>
PACTS_HD inline MxTable mx_table(float scale, Pack pack) {
  float x[8];
  for (int i = 0; i < 8; ++i) x[i] = common::e2m1_to_float(static_cast<uint8_t>(i)) * scale;
  MxTable t{};
  t.tiny = false;
  if constexpr (kZeroTiny) {
    // The smallest non-zero magnitude is 0.5 * scale: some entry is tiny exactly when it is.
    t.tiny = x[1] > 0.0f && x[1] < kMxTinyBelow;
    for (int i = 1; i < 8; ++i) x[i] = x[i] < kMxTinyBelow ? 0.0f : x[i];  // NaN stays NaN
  }
  const uint32_t e01 = pack(x[0], x[1]), e23 = pack(x[2], x[3]);
  const uint32_t e45 = pack(x[4], x[5]), e67 = pack(x[6], x[7]);
  t.hi[0] = byte_perm(e01, e23, 0x7531u);
  t.lo[0] = byte_perm(e01, e23, 0x6420u);
  t.hi[1] = byte_perm(e45, e67, 0x7531u);
  t.lo[1] = byte_perm(e45, e67, 0x6420u);
  return t;
}

// Whether a segment's bytes hold element 2i in the high nibble of byte i (common::e2m1_nibble,
// with its mutant): such words are swapped to the low-first order before mx_decode8.
PACTS_HD inline bool mx_swap_nibbles(pacts_nibble_order order) {
  return (order != PACTS_NIBBLE_LOW_FIRST) != PACTS_MUTANT(nibbles_swapped);
}
PACTS_HD inline uint32_t mx_low_first(uint32_t w, bool swap) {
  return swap ? ((w >> 4) & 0x0F0F0F0Fu) | ((w << 4) & 0xF0F0F0F0u) : w;
}

// Elements 0-7 of word w (element k in nibble k, bits 4k..4k+3; low-first order) through table t,
// as four bf16x2 words: out[j] holds elements 2j (low half) and 2j + 1. The magnitude's bytes come
// from the table (selector: the nibble's three magnitude bits); the sign is the nibble's bit 3,
// moved to the high byte's bit 7 (every magnitude's high byte has it clear; a NaN stays a NaN).
PACTS_HD inline void mx_decode8(uint32_t w, const MxTable& t, uint32_t (&out)[4]) {
  const uint32_t m = w & 0x77777777u;  // magnitude indices
  const uint32_t u = w << 4;           // the even elements' signs at bit 7 of bytes 0-3
  for (int half = 0; half < 2; ++half) {
    const uint32_t sel = half == 0 ? m : m >> 16;
    // Signs of elements 4 half + {0, 1, 2, 3} at bit 7 of bytes 0-3: even ones from u, odd from w.
    const uint32_t sgn = byte_perm(u, w, half == 0 ? 0x5140u : 0x7362u);
    const uint32_t hi = byte_perm(t.hi[0], t.hi[1], sel) | (sgn & 0x80808080u);
    const uint32_t lo = byte_perm(t.lo[0], t.lo[1], sel);
    out[2 * half] = byte_perm(lo, hi, 0x5140u);      // elements 4 half, 4 half + 1
    out[2 * half + 1] = byte_perm(lo, hi, 0x7362u);  // elements 4 half + 2, 4 half + 3
  }
}

// The low (sel 0x5410) or high (0x7632) halves of two bf16x2 words as one: V's B fragment pairs
// element n of two keys.
PACTS_HD inline uint32_t mx_pair_halves(uint32_t a, uint32_t b, bool high) {
  return byte_perm(a, b, high ? 0x7632u : 0x5410u);
}

}  // namespace pacts::kernels::hip::detail
