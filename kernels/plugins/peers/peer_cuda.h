// What the peer adapters (flashinfer_decode.cu, vllm_paged_attention.cu) share: a growing device
// buffer, the descriptor's device / driver / runtime strings, the ABI's text fields, the host
// guard of the device-resident inputs that the peers do not check, and the device copy of a pool
// into another layout that the timed calls (backend_abi.h, version 3) make once in prepare().
#pragma once

#include <pacts/problem.h>

#include <cuda_runtime.h>

#include <algorithm>
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

// The element offset of (page, KV head, slot, dim) in a pool layout (spec/operator.md §3.2).
__host__ __device__ inline int64_t pool_offset(const pacts_pool_layout& l, int64_t page,
                                               int64_t head, int64_t slot, int64_t dim) {
  return page * l.s_page + head * l.s_head + slot * l.s_tok + (dim / l.chunk) * l.s_chunk +
         dim % l.chunk;
}

// One thread per element (page, head, slot, dim) of the pool, dim fastest: the element at its
// offset in `from` is stored at its offset in `to`. Elem is the storage type (1 or 2 bytes).
template <typename Elem>
__global__ void gather_pool_kernel(Elem* __restrict__ dst, pacts_pool_layout to,
                                   const Elem* __restrict__ src, pacts_pool_layout from,
                                   int64_t heads, int64_t slots, int64_t dims, int64_t total) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t dim = e % dims;
    int64_t rest = e / dims;
    const int64_t slot = rest % slots;
    rest /= slots;
    const int64_t head = rest % heads;
    const int64_t page = rest / heads;
    dst[pool_offset(to, page, head, slot, dim)] = src[pool_offset(from, page, head, slot, dim)];
  }
}

// Copies every element (page, head, slot, dim) of a K or V pool of the problem's shape from
// layout `from` (at src, device memory) into layout `to` (at dst, device memory), on `stream`,
// as an integrator would once to hand a cache to a kernel that addresses another layout. The
// unowned elements are carried with their bytes; bytes of dst that no element reaches are left
// as they are (the caller fills them first). elem_bytes: 1 (fp8) or 2 (bf16, fp16).
inline cudaError_t gather_pool(void* dst, const pacts_pool_layout& to, const void* src,
                               const pacts_pool_layout& from, const pacts_problem& p,
                               size_t elem_bytes, cudaStream_t stream) {
  const int64_t total =
      int64_t{p.num_pages} * p.num_kv_heads * p.page_size * int64_t{p.head_dim};
  if (total == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t{1} << 20);
  const dim3 grid(static_cast<unsigned>(blocks));
  if (elem_bytes == 1)
    gather_pool_kernel<uint8_t><<<grid, kThreads, 0, stream>>>(
        static_cast<uint8_t*>(dst), to, static_cast<const uint8_t*>(src), from, p.num_kv_heads,
        p.page_size, p.head_dim, total);
  else if (elem_bytes == 2)
    gather_pool_kernel<uint16_t><<<grid, kThreads, 0, stream>>>(
        static_cast<uint16_t*>(dst), to, static_cast<const uint16_t*>(src), from,
        p.num_kv_heads, p.page_size, p.head_dim, total);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

// `buffers` with the block table and context lengths replaced by the host copies that prepare()
// receives, so that unlaunchable() can read them (the device buffers cannot be read on the host).
inline pacts_buffers with_host_copies(const pacts_buffers& device, const int32_t* host_block_table,
                                      const int32_t* host_context_lens) {
  pacts_buffers b = device;
  b.block_table.data = const_cast<int32_t*>(host_block_table);
  b.context_lens.data = const_cast<int32_t*>(host_context_lens);
  return b;
}

// "" when the output layout is the dense [B, Hq, D] one that the peers write (strides of a
// dimension with one index are never multiplied and may be anything); else the NotSupported
// message of a timed call, which writes the peer's output in place.
inline std::string dense_out_refusal(const pacts_problem& p, const char* peer) {
  const int64_t d = p.head_dim, row = int64_t{p.num_q_heads} * p.head_dim;
  const bool head_ok = p.num_q_heads <= 1 || p.out_layout.s_head == d;
  const bool batch_ok = p.batch <= 1 || p.out_layout.s_batch == row;
  if (head_ok && batch_ok) return "";
  return "out_layout (s_batch " + std::to_string(p.out_layout.s_batch) + ", s_head " +
         std::to_string(p.out_layout.s_head) + "): " + peer +
         " writes a dense [batch, num_q_heads, head_dim] output, which timed calls write in place "
         "(a copy into another layout would be timed with the call), accepted: s_batch "
         "num_q_heads * head_dim = " + std::to_string(row) + ", s_head head_dim = " +
         std::to_string(d);
}

}  // namespace pacts_peer
