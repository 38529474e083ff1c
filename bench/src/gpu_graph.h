// The runtime calls pacts-bench's GPU timer needs beyond kernels/hip/platform/cuda_map.h's
// subset (streams with flags, stream capture, graphs), as small wrappers of the vendor's runtime
// in this module's own namespace: on AMD ROCm's HIP, on NVIDIA the CUDA runtime, chosen by the
// same test as platform/gpu.h. Include after "platform/gpu.h".
#pragma once

#include "platform/gpu.h"

namespace pacts::bench::gpu {

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
using Graph = hipGraph_t;
using GraphExec = hipGraphExec_t;
inline hipError_t create_stream(hipStream_t* s) {
  return hipStreamCreateWithFlags(s, hipStreamNonBlocking);
}
// Relaxed: decode() may raise a kernel's shared-memory limit (not a stream operation) while the
// stream is captured.
inline hipError_t begin_capture(hipStream_t s) {
  return hipStreamBeginCapture(s, hipStreamCaptureModeRelaxed);
}
inline hipError_t end_capture(hipStream_t s, Graph* g) { return hipStreamEndCapture(s, g); }
inline hipError_t instantiate(GraphExec* e, Graph g) {
  return hipGraphInstantiateWithFlags(e, g, 0);
}
inline hipError_t launch(GraphExec e, hipStream_t s) { return hipGraphLaunch(e, s); }
inline hipError_t destroy(Graph g) { return hipGraphDestroy(g); }
inline hipError_t destroy(GraphExec e) { return hipGraphExecDestroy(e); }
inline hipError_t l2_bytes(int device, int* bytes) {
  return hipDeviceGetAttribute(bytes, hipDeviceAttributeL2CacheSize, device);
}
#else
using Graph = cudaGraph_t;
using GraphExec = cudaGraphExec_t;
inline hipError_t create_stream(hipStream_t* s) {
  return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
}
inline hipError_t begin_capture(hipStream_t s) {
  return cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
}
inline hipError_t end_capture(hipStream_t s, Graph* g) { return cudaStreamEndCapture(s, g); }
inline hipError_t instantiate(GraphExec* e, Graph g) {
  return cudaGraphInstantiateWithFlags(e, g, 0);
}
inline hipError_t launch(GraphExec e, hipStream_t s) { return cudaGraphLaunch(e, s); }
inline hipError_t destroy(Graph g) { return cudaGraphDestroy(g); }
inline hipError_t destroy(GraphExec e) { return cudaGraphExecDestroy(e); }
inline hipError_t l2_bytes(int device, int* bytes) {
  return cudaDeviceGetAttribute(bytes, cudaDevAttrL2CacheSize, device);
}
#endif

}  // namespace pacts::bench::gpu
