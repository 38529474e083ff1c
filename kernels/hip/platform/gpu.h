// pacts HIP platform layer: the one header that knows the vendor. Everything else in
// kernels/hip/ includes this and speaks HIP: on AMD the real ROCm <hip/hip_runtime.h>, on NVIDIA
// our own mapping onto the CUDA runtime (platform/cuda_map.h). Also the project's answers to the
// portability traps of docs/kernel-design.md ("Toolchains"): a compile-time warp size, one shuffle
// macro, checked API calls.
#pragma once

#if defined(PACTS_AMD_DEVICE_CHECK)
#include "platform/amd_device_min.h"
#define PACTS_SHFL_XOR(x, lane_mask) __shfl_xor((x), (lane_mask))
#define PACTS_WARP_SYNC() __builtin_amdgcn_wave_barrier()
// PACTS_HIP_MATRIX_UNIT names the NVIDIA matrix kernel only; AMD's MFMA kernel is selected by
// PACTS_HIP_MFMA (src/kernel_mfma.h, platform/matrix_amd.h), the CUDA-core kernel otherwise.
#define PACTS_HIP_MATRIX_UNIT 0
namespace pacts::gpu {
inline constexpr int kWarpSize = 64;
}  // namespace pacts::gpu
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#include <hip/hip_runtime.h>
#define PACTS_HIP_MATRIX_UNIT 0  // as above
#define PACTS_SHFL_XOR(x, lane_mask) __shfl_xor((x), (lane_mask))
#define PACTS_WARP_SYNC() __builtin_amdgcn_wave_barrier()
namespace pacts::gpu {
inline constexpr int kWarpSize = 64;  // gfx90a, gfx942, gfx950: wave64
inline constexpr const char* kVendor = "amd";
template <class F>
inline hipError_t hipFuncSetMaxDynamicSharedBytes(F* f, int bytes) {
  return hipFuncSetAttribute(reinterpret_cast<const void*>(f),
                             hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
}  // namespace pacts::gpu
using pacts::gpu::hipFuncSetMaxDynamicSharedBytes;
#else
#include "platform/cuda_map.h"
#include "platform/matrix_nvidia.h"
#endif

#include <string>
#include <utility>

namespace pacts::gpu {
// A load of global memory that another block of the same launch wrote (the tile kernel that
// merges the partials of its row tile, src/kernel.h merge_partials): past the multiprocessor's
// L1, which is not coherent between blocks. A plain load where no kernel merges in-launch.
template <class T>
__device__ inline T load_cross_block(const T* at) {
#if PACTS_HIP_MATRIX_UNIT
  return __ldcg(at);
#else
  return *at;
#endif
}

// A hint that the line holding `at` will be read soon: fetched into L2 without waiting for it
// (sm_90 prefetch.global.L2; nothing elsewhere). Only for addresses inside a declared view: a
// prefetch reads like a load.
template <class T>
__device__ inline void prefetch_l2(const T* at) {
#if PACTS_HIP_MATRIX_UNIT && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
#else
  (void)at;
#endif
}

// Programmatic dependent launch (sm_90): a kernel launched with launch_dependent (below) may
// start before the kernel ahead of it in the stream has finished, once every block of that one
// has called allow_dependents() or exited; it must call wait_for_prior_grid() before it reads
// anything the earlier kernel writes (that wait returns when the earlier grid has completed and
// its writes are visible). Both are no-ops where there is no such launch (AMD), and
// wait_for_prior_grid() returns at once after an ordinary launch.
__device__ inline void allow_dependents() {
#if PACTS_HIP_MATRIX_UNIT && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ inline void wait_for_prior_grid() {
#if PACTS_HIP_MATRIX_UNIT && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
}  // namespace pacts::gpu

#if !defined(PACTS_AMD_DEVICE_CHECK)
namespace pacts::gpu {

// Launches `kernel` as a programmatic dependent of the stream's previous kernel (above) on
// NVIDIA; an ordinary launch elsewhere.
template <class... Params, class... Args>
inline hipError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                   hipStream_t stream, Args&&... args) {
#if PACTS_HIP_MATRIX_UNIT
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
#else
  hipLaunchKernelGGL(kernel, grid, block, smem, stream, std::forward<Args>(args)...);
  return hipGetLastError();
#endif
}

// "hipMalloc(out): out of memory": the call and the runtime's words, for a DeviceError status.
inline std::string describe(const char* what, hipError_t e) {
  return std::string(what) + ": " + hipGetErrorString(e);
}

}  // namespace pacts::gpu

// Checked call inside a function returning spec::Status (or Result): a failure becomes
// DeviceError naming the call. Every GPU call goes through this (docs/conventions.md).
#define PACTS_GPU_CHECK(call)                                                  \
  do {                                                                         \
    const hipError_t pacts_gpu_err_ = (call);                                  \
    if (pacts_gpu_err_ != hipSuccess)                                          \
      return ::pacts::spec::Status(::pacts::spec::Code::kDeviceError,               \
                                   ::pacts::gpu::describe(#call, pacts_gpu_err_));     \
  } while (0)
#endif  // !PACTS_AMD_DEVICE_CHECK
