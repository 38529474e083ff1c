// What the peer adapters (flashinfer_decode.cu, vllm_paged_attention.cu) share: a growing device
// buffer, the descriptor's device / driver / runtime strings, the ABI's text fields, and the host
// guard of the device-resident inputs that the peers do not check.
#pragma once

#include <pacts/problem.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace pacts_peer {

// NUL-terminated, truncated to the ABI field's capacity.
inline void set_text(char* dst, size_t capacity, const std::string& text) {
  std::snprintf(dst, capacity, "%s", text.c_str());
}

// A device allocation that grows to the largest request seen and is reused.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  cudaError_t reserve(size_t n) {
    if (n <= bytes) return cudaSuccess;
    if (ptr != nullptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    const cudaError_t e = cudaMalloc(&ptr, n);
    if (e == cudaSuccess) bytes = n;
    return e;
  }
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

inline std::string device_name() {
  cudaDeviceProp prop{};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
    return "no CUDA device";
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + "), " + std::to_string(prop.multiProcessorCount) + " SMs";
}

inline std::string driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) return "";
  return "CUDA driver " + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

inline std::string runtime_version() {
  return "CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string((CUDART_VERSION % 1000) / 10);
}

// The host copies of context_lens and block_table, where a peer would read through them: a
// context length outside [0, M * P] (spec/contract.md §4, P1) or, among the columns
// [0, ceil(n / P)) the peer reads, a page id outside [0, N) (P2). "" when the peer can be
// launched; else the message of a DeviceError ("not launched: ..."), naming the entry. `peer` is
// the kernel's name, `reads` what it reads ("reads every page of the context").
inline std::string unlaunchable(const pacts_problem& p, const pacts_buffers& b, const char* peer,
                                const char* reads) {
  const auto* lens = static_cast<const int32_t*>(b.context_lens.data);
  const auto* table = static_cast<const int32_t*>(b.block_table.data);
  const int64_t P = p.page_size, bound = int64_t{p.max_pages_per_seq} * P;
  for (int32_t s = 0; s < p.batch; ++s) {
    const int64_t n = lens[s];
    if (n < 0 || n > bound)
      return "not launched: context_lens[" + std::to_string(s) + "] = " + std::to_string(n) +
             " is outside [0, max_pages_per_seq * page_size = " + std::to_string(bound) + "]; " +
             peer + " does not check it (spec/contract.md §4) and would read past the block table";
    for (int64_t col = 0; col < (n + P - 1) / P; ++col) {
      const int32_t id = table[int64_t{s} * p.block_table_stride + col];
      if (id < 0 || id >= p.num_pages)
        return "not launched: block_table[" + std::to_string(s) + "][" + std::to_string(col) +
               "] = " + std::to_string(id) + " is outside [0, num_pages = " +
               std::to_string(p.num_pages) + "); " + peer + " " + reads +
               " and checks no page id (spec/contract.md §4)";
    }
  }
  return "";
}

}  // namespace pacts_peer
