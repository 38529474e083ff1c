// The input values pacts-bench times the kernels on, one rule for its host fill and the device
// fill (bench_timing.cpp) alike: element i of a buffer is a finite code derived
// from (seed, i) by a hash. Timing does not depend on the values,
// but non-finite inputs would make every output NaN and hide a broken timed call, so codes are
// drawn from raw bit patterns (docs/conventions.md) with the bits that reach NaN/Inf masked off.
#pragma once

#include <pacts/problem.h>

#include "common/hd.h"

#include <cstdint>

namespace pacts::kernels::bench {

// splitmix64's finalizer of seed ^ i (a stateless hash, so device threads fill independently).
PACTS_HD inline uint64_t input_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull ^ (i + 0x632be59bd9b4e019ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Bytes per stored element of a bench buffer (e2m1: one byte holds two elements).
PACTS_HD inline int input_element_bytes(pacts_format f) {
  switch (f) {
    case PACTS_FORMAT_BF16:
    case PACTS_FORMAT_FP16: return 2;
    case PACTS_FORMAT_FP32: return 4;
    default: return 1;
  }
}

// The code of element i (spec/formats.md encodings):
//  bf16, fp16: the top exponent bit cleared, so |x| < 2 and never Inf/NaN;
//  fp8 formats: bit 6 (the top exponent bit) cleared, and 0x80 (the fnuz NaN) mapped to 0;
//  e2m1: any byte (all sixteen nibbles are finite);
//  fp32 (per-token scales, sinks): 0.5 + U[0, 1) on a 2^-24 grid;
//  e8m0 (MX block scales): 2^-7 .. 2^7.
PACTS_HD inline uint32_t input_code(pacts_format f, uint64_t seed, uint64_t i) {
  const uint64_t h = input_hash(seed, i);
  switch (f) {
    case PACTS_FORMAT_BF16:
    case PACTS_FORMAT_FP16: return static_cast<uint32_t>(h & 0xBFFFu);
    case PACTS_FORMAT_FP32: {
      const float x = 0.5f + static_cast<float>(h >> 40) * 0x1.0p-24f;
      uint32_t bits;
      memcpy(&bits, &x, 4);
      return bits;
    }
    case PACTS_FORMAT_E2M1: return static_cast<uint32_t>(h & 0xFFu);
    case PACTS_FORMAT_E8M0: return 120u + static_cast<uint32_t>(h % 15u);
    default: {
      const uint32_t c = static_cast<uint32_t>(h & 0xBFu);
      return c == 0x80u ? 0u : c;
    }
  }
}

// Stores element i of the rule at `dst` (input_element_bytes(f) bytes, little endian).
PACTS_HD inline void store_input(uint8_t* dst, pacts_format f, uint64_t seed, uint64_t i) {
  const uint32_t code = input_code(f, seed, i);
  const int eb = input_element_bytes(f);
  for (int b = 0; b < eb; ++b) dst[b] = static_cast<uint8_t>(code >> (8 * b));
}

}  // namespace pacts::kernels::bench
