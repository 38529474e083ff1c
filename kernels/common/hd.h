// pacts kernels, shared math: what every header of kernels/common/ builds on.
//
// kernels/common/ is the one copy of the decode math that the host backend (kernels/host/) and the
// HIP kernels (kernels/hip/) run (docs/architecture.md). Every function here is therefore written
// as device code: marked PACTS_HD, no GPU header, no std container, no exception, no allocation, no
// dependence on the floating-point environment (rounding to storage formats is integer bit
// manipulation, round.h). Only <cmath> functions that CUDA and HIP also provide in device code
// (expf, tanhf, exp, log) and memcpy are used.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define PACTS_HD __host__ __device__
#else
#define PACTS_HD
#endif

// The mutant build (common/mutant.h) compiles this math with other bodies: its copies live in an
// inline namespace of their own, so a binary that also holds production objects compiled from
// these headers links two distinct sets of functions instead of picking one copy of each at
// random (an ODR violation that would silently switch mutants off, or on). Empty in production.
#if defined(PACTS_MUTANTS)
#define PACTS_COMMON_ABI_BEGIN inline namespace mutant_build {
#define PACTS_COMMON_ABI_END }
#else
#define PACTS_COMMON_ABI_BEGIN
#define PACTS_COMMON_ABI_END
#endif

namespace pacts::kernels::common {

// Bit casts through memcpy: well defined in C++ and in device code alike.
PACTS_HD inline float f32_from_bits(uint32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

PACTS_HD inline uint32_t bits_of(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}

PACTS_HD inline uint64_t bits_of(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}

PACTS_HD inline float f32_inf() { return f32_from_bits(0x7F800000u); }
PACTS_HD inline float f32_nan() { return f32_from_bits(0x7FC00000u); }

// 2^e as an fp32, exactly, for e in [-149, 127] (normal and subnormal powers of two).
PACTS_HD inline float f32_pow2(int e) {
  if (e >= -126) return f32_from_bits(static_cast<uint32_t>(e + 127) << 23);
  return f32_from_bits(1u << (e + 149));
}

// The running maximum of FINITE logits: m stays -inf or finite. Inside the range contract every
// logit is finite; outside it (an owned Inf or NaN, spec/contract.md §3) a non-finite logit must
// not become the shift of the row (e^(inf - inf) = NaN would replace the +inf LSE the reference
// gives); it still reaches l and acc through its own e^(s - m) = inf or NaN.
PACTS_HD inline float max_finite(float m, float x) { return (x > m && x < INFINITY) ? x : m; }

}  // namespace pacts::kernels::common
