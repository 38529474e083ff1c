// pacts HIP platform layer, NVIDIA side: the subset of the HIP runtime API the kernels and the
// conformance adapter use, mapped onto the CUDA runtime. Debian's HIP headers for NVIDIA do not
// compile against CUDA 13 (docs/kernel-design.md, "Toolchains"), hence this header. Include
// "platform/gpu.h", never this file.
#pragma once

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;
using hipMemcpyKind = cudaMemcpyKind;

inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr hipMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr hipMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;

inline const char* hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
inline hipError_t hipGetLastError() { return cudaGetLastError(); }
inline hipError_t hipGetDevice(int* d) { return cudaGetDevice(d); }
inline hipError_t hipSetDevice(int d) { return cudaSetDevice(d); }
inline hipError_t hipGetDeviceCount(int* n) { return cudaGetDeviceCount(n); }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) {
  return cudaGetDeviceProperties(p, d);
}
inline hipError_t hipDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline hipError_t hipDriverGetVersion(int* v) { return cudaDriverGetVersion(v); }
inline hipError_t hipRuntimeGetVersion(int* v) { return cudaRuntimeGetVersion(v); }
inline hipError_t hipMalloc(void** p, size_t n) { return cudaMalloc(p, n); }
inline hipError_t hipFree(void* p) { return cudaFree(p); }
inline hipError_t hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind k) {
  return cudaMemcpy(d, s, n, k);
}
inline hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k,
                                 hipStream_t st) {
  return cudaMemcpyAsync(d, s, n, k, st);
}
inline hipError_t hipMemset(void* d, int v, size_t n) { return cudaMemset(d, v, n); }
// A __device__ variable's device copy, written from the host (HIP's C++ overload on a symbol).
template <class T>
inline hipError_t hipMemcpyToSymbol(const T& symbol, const void* src, size_t n, size_t offset = 0,
                                    hipMemcpyKind k = hipMemcpyHostToDevice) {
  return cudaMemcpyToSymbol(symbol, src, n, offset, k);
}
inline hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t st) {
  return cudaMemsetAsync(d, v, n, st);
}
inline hipError_t hipStreamCreate(hipStream_t* s) { return cudaStreamCreate(s); }
inline constexpr unsigned hipStreamNonBlocking = cudaStreamNonBlocking;
inline hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned flags) {
  return cudaStreamCreateWithFlags(s, flags);
}
using hipDeviceAttribute_t = cudaDeviceAttr;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeL2CacheSize = cudaDevAttrL2CacheSize;
inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  return cudaDeviceGetAttribute(value, attr, device);
}
inline hipError_t hipStreamDestroy(hipStream_t s) { return cudaStreamDestroy(s); }
inline hipError_t hipStreamSynchronize(hipStream_t s) { return cudaStreamSynchronize(s); }
inline hipError_t hipEventCreate(hipEvent_t* e) { return cudaEventCreate(e); }
inline hipError_t hipEventDestroy(hipEvent_t e) { return cudaEventDestroy(e); }
inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s = nullptr) {
  return cudaEventRecord(e, s);
}
inline hipError_t hipEventSynchronize(hipEvent_t e) { return cudaEventSynchronize(e); }
// The profiler's collection window (ncu --profile-from-start off): pacts-bench opens it around
// the timed calls only.
inline hipError_t hipProfilerStart() { return cudaProfilerStart(); }
inline hipError_t hipProfilerStop() { return cudaProfilerStop(); }
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) {
  return cudaEventElapsedTime(ms, a, b);
}
// Graphs (PACTS-DEV-3: capture once, replay with new context lengths).
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipStreamCaptureMode = cudaStreamCaptureMode;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeRelaxed =
    cudaStreamCaptureModeRelaxed;
inline hipError_t hipStreamBeginCapture(hipStream_t s, hipStreamCaptureMode m) {
  return cudaStreamBeginCapture(s, m);
}
inline hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t* g) {
  return cudaStreamEndCapture(s, g);
}
inline hipError_t hipGraphInstantiate(hipGraphExec_t* e, hipGraph_t g, void*, char*, size_t) {
  return cudaGraphInstantiate(e, g, 0);
}
inline hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* e, hipGraph_t g,
                                               unsigned long long flags) {
  return cudaGraphInstantiateWithFlags(e, g, flags);
}
inline hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s) { return cudaGraphLaunch(e, s); }
inline hipError_t hipGraphExecDestroy(hipGraphExec_t e) { return cudaGraphExecDestroy(e); }
inline hipError_t hipGraphDestroy(hipGraph_t g) { return cudaGraphDestroy(g); }
template <class F>
inline hipError_t hipFuncSetMaxDynamicSharedBytes(F* f, int bytes) {
  return cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

// Warp shuffles (portability trap 2): CUDA 13 has only the *_sync forms.
#define PACTS_SHFL_XOR(x, lane_mask) __shfl_xor_sync(0xFFFFFFFFu, (x), (lane_mask))
// Orders shared-memory accesses among the lanes of a warp (independent thread scheduling).
#define PACTS_WARP_SYNC() __syncwarp()

namespace pacts::gpu {
inline constexpr int kWarpSize = 32;  // trap 1: warpSize is no compile-time constant
inline constexpr const char* kVendor = "nvidia";
}  // namespace pacts::gpu
