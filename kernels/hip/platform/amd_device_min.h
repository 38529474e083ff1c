// pacts HIP platform layer, AMD compile-check only: the few device declarations the kernels use,
// for `clang++ -x hip --offload-device-only -nogpuinc -nogpulib -c` on a machine without ROCm
// (docs/kernel-design.md, "Toolchains"). Real AMD builds use <hip/hip_runtime.h>; gpu.h picks this
// header only when PACTS_AMD_DEVICE_CHECK is defined. Device code only: no runtime API.
#pragma once

#include <cstddef>
#include <cstdint>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))

struct pacts_thread_idx {
  __declspec(property(get = get_x)) unsigned x;
  __device__ unsigned get_x() const { return __builtin_amdgcn_workitem_id_x(); }
};
struct pacts_block_idx {
  __declspec(property(get = get_x)) unsigned x;
  __device__ unsigned get_x() const { return __builtin_amdgcn_workgroup_id_x(); }
};
struct pacts_block_dim {
  __declspec(property(get = get_x)) unsigned x;
  __device__ unsigned get_x() const { return __builtin_amdgcn_workgroup_size_x(); }
};
extern const __device__ pacts_thread_idx threadIdx;
extern const __device__ pacts_block_idx blockIdx;
extern const __device__ pacts_block_dim blockDim;

struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
__device__ inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
__device__ inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

__device__ inline void __syncthreads() { __builtin_amdgcn_s_barrier(); }
__device__ inline int __syncthreads_or(int p) {
  __shared__ int flag;
  if (__builtin_amdgcn_workitem_id_x() == 0) flag = 0;
  __syncthreads();
  if (p) __hip_atomic_fetch_or(&flag, 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __syncthreads();
  const int r = flag;
  __syncthreads();
  return r;
}
__device__ inline float __shfl_xor(float v, int mask) {
  const int lane = __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  const int src = lane ^ mask;
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src << 2, __builtin_bit_cast(int, v)));
}
__device__ inline double __shfl_xor(double v, int mask) {
  const unsigned long long bits = __builtin_bit_cast(unsigned long long, v);
  const float lo = __shfl_xor(__builtin_bit_cast(float, static_cast<unsigned>(bits)), mask);
  const float hi = __shfl_xor(__builtin_bit_cast(float, static_cast<unsigned>(bits >> 32)), mask);
  return __builtin_bit_cast(double, static_cast<unsigned long long>(__builtin_bit_cast(unsigned, hi)) << 32 |
                                        __builtin_bit_cast(unsigned, lo));
}
__device__ inline unsigned atomicOr(unsigned* p, unsigned v) {
  return __hip_atomic_fetch_or(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
__device__ inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
__device__ inline void __threadfence() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
__device__ inline void* memcpy(void* dst, const void* src, size_t n) {
  return __builtin_memcpy(dst, src, n);
}
template <class T> __device__ inline T min(T a, T b) { return a < b ? a : b; }
template <class T> __device__ inline T max(T a, T b) { return a > b ? a : b; }

// Math the kernels call. Compile-check stand-ins, never run: a real ROCm build takes these from
// the device libraries (ocml), whose code differs; register and LDS figures are estimates.
__device__ inline float expf(float x) { return __builtin_expf(x); }
// binary64 exp/log have no native instruction (ocml computes them in software): fp32 stand-ins,
// so these figures undercount the merge's and the direct store's registers a little.
__device__ inline double exp(double x) { return __builtin_expf(static_cast<float>(x)); }
__device__ inline double log(double x) { return __builtin_logf(static_cast<float>(x)); }
__device__ inline float tanhf(float x) {
  const float e = __builtin_expf(-2.0f * __builtin_fabsf(x));
  return __builtin_copysignf((1.0f - e) / (1.0f + e), x);
}

using hipError_t = int;
