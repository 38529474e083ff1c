// A peer kernel behind pacts' C ABI (pacts/backend_abi.h): vLLM's classic paged attention, the
// v1 and v2 decode kernels of csrc/attention/attention_kernels.cuh (paged_attention_v1_kernel,
// paged_attention_v2_kernel + paged_attention_v2_reduce_kernel), built from a vLLM checkout that
// this repository does not hold (-DPACTS_PEER_VLLM_DIR, docs/qualifications.md). Line numbers
// below are of that checkout's commit (PACTS_PEER_VLLM_VERSION); bare ones (:N) are of
// csrc/attention/attention_kernels.cuh, the others name their file under csrc/.
//
// Only the kernel templates are compiled. vLLM's launchers (csrc/attention/paged_attention_v1.cu
// and paged_attention_v2.cu) take torch::Tensor, and PyTorch is not a dependency of pacts: this
// file launches the templates itself with the grid, block and shared-memory sizes those launchers
// compute (mirrored in launch_v1 and launch_v2, which cite the lines). The headers still include
// three PyTorch headers; vllm_shim/ stands in for them with the one macro they use (TORCH_CHECK,
// in a host helper that is never called).
//
// The adapter translates and never corrects: it passes pacts' x-packed K and dim-major V pools,
// context lengths and block table to the kernels as they are (spec/operator.md §12: they are
// vLLM's key_cache, value_cache, seq_lens and block_tables), picks v1 or v2 by vLLM's own rule,
// and copies the output back. What the kernels cannot take it refuses with NotSupported; what
// they do with an input is what pacts judges.
//
// One exception keeps a run alive: the kernels check no device-resident input (spec/contract.md
// §4), so a context length above the block table or a page id outside the pool would make them
// read outside their buffers, and a fault on the device ends the process. The adapter looks at
// those host copies first and, where the kernels would read through them, launches nothing and
// answers DeviceError naming the entry: the properties of §4 then fail with that message, which
// is what they must do for a kernel without device checks.
//
// The timed calls (backend_abi.h, version 3) split the same work: prepare() checks as run() does,
// copies pools in another layout into vLLM's on the device and allocates v2's workspace; enqueue()
// is the v1 kernel, or v2's partition and reduce kernels, alone on pacts' stream, reading pacts'
// query, block table and context lengths in place and writing pacts' `out`.
#include <pacts/backend_abi.h>
#include <pacts/spec/validate.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "peer_cuda.h"

// vLLM's kernel templates (the csrc directory of the checkout is on the include path).
#include <attention/attention_kernels.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#ifndef PACTS_PEER_VLLM_VERSION
#define PACTS_PEER_VLLM_VERSION "unknown"
#endif

namespace pacts_vllm_peer {

using T = __nv_bfloat16;  // scalar_t = cache_t for a bf16 query with kv_cache_dtype "auto"
                          // (quant_utils.cuh:553-554, DISPATCH_BY_KV_CACHE_DTYPE)
constexpr auto kAuto = vllm::Fp8KVCacheDataType::kAuto;

// The launchers' constants: NUM_THREADS = 128 (paged_attention_v1.cu:45, paged_attention_v2.cu:45)
// and PARTITION_SIZE = 512 (paged_attention_v2.cu:45, and _PARTITION_SIZE of the Python dispatcher
// below, "should be the same as PARTITION_SIZE in paged_attention_v2_launcher").
constexpr int kNumThreads = 128;
constexpr int kNumWarps = kNumThreads / 32;  // WARP_SIZE 32 (cuda_compat.h)
constexpr int kPartitionSize = 512;
// x = 16 / sizeof(cache_t) (attention_kernels.cuh:195): K's packed chunk, in elements.
constexpr int64_t kX = 16 / sizeof(T);
// gridDim.y (sequences) is limited to 65535 by CUDA; gridDim.z (partitions) too, which
// kMaxReducePartitions keeps below.
constexpr int64_t kMaxGridY = 65535;
// The v2 reduce kernel's dynamic shared memory, 2 * max_num_partitions floats
// (paged_attention_v2.cu:91), is launched without raising the 48 KiB default, which it shares with
// its static red_smem of 2 * NUM_WARPS floats (attention_kernels.cuh:598).
constexpr int64_t kMaxReducePartitions =
    (48 * 1024 - 2 * kNumWarps * int64_t{sizeof(float)}) / (2 * int64_t{sizeof(float)});

using pacts_peer::DeviceBuffer;
using pacts_peer::set_text;

constexpr int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace pacts_vllm_peer

struct pacts_backend_instance {
  cudaStream_t stream = nullptr;
  pacts_peer::DeviceBuffer q, k, v, out, block_table, seq_lens, exp_sums, max_logits, tmp_out;
  uint64_t runs = 0;
  pacts_backend_prepared* prepared = nullptr;  // the timed call of this instance, if any
  ~pacts_backend_instance() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

namespace pacts_vllm_peer {

// The kernels' arguments, in vLLM's names (attention_kernels.cuh:497-513, 529-549).
struct Args {
  int num_seqs, num_heads, num_kv_heads;
  float scale;
  int max_seq_len;             // the launcher's max_seq_len: the longest context of the batch
  int max_num_blocks_per_seq;  // used by the kernel only as the block-table row stride (:202)
  int q_stride, kv_block_stride, kv_head_stride;
  T* out;
  const T* q;
  const T* k_cache;
  const T* v_cache;
  const int* block_tables;
  const int* seq_lens;
  float* exp_sums;
  float* max_logits;
  T* tmp_out;
  cudaStream_t stream;
};

// vLLM's defaults for the arguments pacts has no use for (vllm/_custom_ops.py paged_attention_v1
// and _v2: tp_rank 0, blocksparse_local_blocks 0, blocksparse_vert_stride 0,
// blocksparse_block_size 64, blocksparse_head_sliding_step 0; IS_BLOCK_SPARSE is
// blocksparse_vert_stride > 1, paged_attention_v1.cu:178). No ALiBi (alibi_slopes nullptr,
// attention_kernels.cuh:149-150), and no k_scale / v_scale: the kAuto path never reads them
// (:275-284, :406-414).
constexpr int kTpRank = 0, kBsLocalBlocks = 0, kBsVertStride = 0, kBsBlockSize = 64,
              kBsHeadSlidingStep = 0;

// Mirrors paged_attention_v1_launcher (paged_attention_v1.cu:43-125) for one HEAD_SIZE and
// BLOCK_SIZE: logits of the padded longest context or the cross-warp output reduction, whichever
// is larger, as dynamic shared memory (:77-84, raised with cudaFuncSetAttribute as
// LAUNCH_PAGED_ATTENTION_V1 does, :26-31), grid (num_heads, num_seqs, 1), 128 threads (:86-87).
template <int D, int BS>
cudaError_t launch_v1(const Args& a) {
  const int padded_max_seq_len = static_cast<int>(div_up(a.max_seq_len, BS) * BS);
  const int logits_size = padded_max_seq_len * static_cast<int>(sizeof(float));
  const int outputs_size = (kNumWarps / 2) * D * static_cast<int>(sizeof(float));
  const int shared_mem_size = std::max(logits_size, outputs_size);
  auto* kernel = &vllm::paged_attention_v1_kernel<T, T, D, BS, kNumThreads, kAuto, false>;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_mem_size);
  if (e != cudaSuccess) return e;
  const dim3 grid(a.num_heads, a.num_seqs, 1);
  const dim3 block(kNumThreads);
  kernel<<<grid, block, shared_mem_size, a.stream>>>(
      a.out, a.q, a.k_cache, a.v_cache, a.num_kv_heads, a.scale, a.block_tables, a.seq_lens,
      a.max_num_blocks_per_seq, /*alibi_slopes=*/nullptr, a.q_stride, a.kv_block_stride,
      a.kv_head_stride, /*k_scale=*/nullptr, /*v_scale=*/nullptr, kTpRank, kBsLocalBlocks,
      kBsVertStride, kBsBlockSize, kBsHeadSlidingStep);
  return cudaGetLastError();
}

// Mirrors paged_attention_v2_launcher (paged_attention_v2.cu:43-131): the partition kernel on grid
// (num_heads, num_seqs, max_num_partitions) with one partition's logits or the output reduction
// as shared memory (:81-88), then the reduce kernel on (num_heads, num_seqs) with
// 2 * max_num_partitions floats (:90-91), both with 128 threads, on one stream (:26-41).
template <int D, int BS>
cudaError_t launch_v2(const Args& a, int max_num_partitions) {
  const int logits_size = kPartitionSize * static_cast<int>(sizeof(float));
  const int outputs_size = (kNumWarps / 2) * D * static_cast<int>(sizeof(float));
  const int shared_mem_size = std::max(logits_size, outputs_size);
  const int reduce_shared_mem_size = 2 * max_num_partitions * static_cast<int>(sizeof(float));
  const dim3 grid(a.num_heads, a.num_seqs, max_num_partitions);
  const dim3 reduce_grid(a.num_heads, a.num_seqs);
  const dim3 block(kNumThreads);
  vllm::paged_attention_v2_kernel<T, T, D, BS, kNumThreads, kAuto, false, kPartitionSize>
      <<<grid, block, shared_mem_size, a.stream>>>(
          a.exp_sums, a.max_logits, a.tmp_out, a.q, a.k_cache, a.v_cache, a.num_kv_heads, a.scale,
          a.block_tables, a.seq_lens, a.max_num_blocks_per_seq, /*alibi_slopes=*/nullptr,
          a.q_stride, a.kv_block_stride, a.kv_head_stride, /*k_scale=*/nullptr,
          /*v_scale=*/nullptr, kTpRank, kBsLocalBlocks, kBsVertStride, kBsBlockSize,
          kBsHeadSlidingStep);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  vllm::paged_attention_v2_reduce_kernel<T, D, kNumThreads, kPartitionSize>
      <<<reduce_grid, block, reduce_shared_mem_size, a.stream>>>(
          a.out, a.exp_sums, a.max_logits, a.tmp_out, a.seq_lens, max_num_partitions);
  return cudaGetLastError();
}

// The head sizes pacts shares with vLLM's launchers (paged_attention_v1.cu:90-124: 32, 64, 80, 96,
// 112, 120, 128, 192, 256) and its block sizes (:142-158: 8, 16, 32).
template <int D>
cudaError_t launch_block(const Args& a, int page_size, bool v2, int max_num_partitions) {
  switch (page_size) {
    case 8: return v2 ? launch_v2<D, 8>(a, max_num_partitions) : launch_v1<D, 8>(a);
    case 16: return v2 ? launch_v2<D, 16>(a, max_num_partitions) : launch_v1<D, 16>(a);
    default: return v2 ? launch_v2<D, 32>(a, max_num_partitions) : launch_v1<D, 32>(a);
  }
}

cudaError_t launch(const Args& a, int head_dim, int page_size, bool v2, int max_num_partitions) {
  switch (head_dim) {
    case 64: return launch_block<64>(a, page_size, v2, max_num_partitions);
    case 128: return launch_block<128>(a, page_size, v2, max_num_partitions);
    default: return launch_block<256>(a, page_size, v2, max_num_partitions);
  }
}

pacts_backend_capabilities capabilities() {
  pacts_backend_capabilities c{};
  // A bf16 query with kv_cache_dtype "auto": scalar_t = cache_t = __nv_bfloat16, and the output
  // has the query's type (out is scalar_t*, attention_kernels.cuh:498). fp16 and the fp8 caches
  // are not instantiated: the fp8 conversions (quantization/w8a8/fp8/nvidia/quant_utils.cuh,
  // under ENABLE_FP8) need c10::Float8_e4m3fn, a PyTorch type this build does not have.
  c.num_q_formats = 1;
  c.q_formats[0] = PACTS_FORMAT_BF16;
  c.num_kv_formats = 1;
  c.kv_formats[0] = PACTS_FORMAT_BF16;
  c.num_out_formats = 1;
  c.out_formats[0] = PACTS_FORMAT_BF16;
  c.num_scale_modes = 1;
  c.scale_modes[0] = PACTS_SCALE_NONE;  // the kAuto path reads no k_scale / v_scale
  c.num_head_dims = 3;
  c.head_dims[0] = 64;
  c.head_dims[1] = 128;
  c.head_dims[2] = 256;
  c.min_page_size = 8;   // the launchers' block sizes 8, 16, 32 (paged_attention_v1.cu:142-158,
  c.max_page_size = 32;  // paged_attention_v2.cu:149-165)
  c.max_q_len = 1;       // query [num_seqs, num_heads, head_size]: one token per sequence
  // num_queries_per_kv = num_heads / num_kv_heads at run time (attention_kernels.cuh:147-148):
  // every group pacts defines.
  c.max_group = 64;
  // The kernels address x-packed K and dim-major V only (attention_kernels.cuh:268-277,
  // :397-407); pools in any other layout are copied into that one first (run: to_vllm_layout;
  // prepare: pacts_peer::gather_pool, on the device).
  c.chunked_layouts = 1;
  c.sinks = 0;    // no sink argument
  c.window = 0;   // no sliding window: every key of the context is attended (:222-223)
  c.softcap = 0;  // the logit is scale * q.k (+ ALiBi) only (:289-292)
  c.lse = 0;      // v1 and v2 return no LSE (v2's max_logits / exp_sums are per partition)
  c.deterministic = 1;  // no atomics; every reduction has a fixed order for a given variant
  c.split_plans = 0;  // vLLM's rule picks v1 or v2, PARTITION_SIZE is fixed: hints are ignored
  c.plan_replay = 0;
  c.large_buffers = 0;
  // The adapter stages every view into its own device allocation (256-byte aligned), so no host
  // base address needs more than element alignment. The kernels' 16-byte vector loads need the
  // strides between vectors aligned: the page and head strides of K and V and Q's sequence
  // stride, which unsupported() checks, naming the field. spec::validate's vector-width check
  // would also require it of the dim-major V's token stride (1 element by definition) and refuse
  // every vLLM layout, so it is not declared here.
  c.vector_alignment_bytes = 1;
  // Offsets are 32-bit int arithmetic (q: seq_idx * q_stride + head_idx * HEAD_SIZE, :174; the
  // block table: seq_idx * max_num_blocks_per_seq, :202; kv_head_idx * kv_head_stride, :270;
  // out and tmp_out, :480-482); only the page term is 64-bit (:252-253).
  c.max_element_offset = std::numeric_limits<int32_t>::max();
  return c;
}

// The numerics of the kernels as the source computes them, built with vLLM's own flags: torch's
// COMMON_NVCC_FLAGS plus -DENABLE_FP8 (cmake/utils.cmake:92-110), i.e. no --use_fast_math and no
// -ftz, -prec-div or -fmad changes; the fast operations are the intrinsics the source names.
// - Logits: Q and K bf16 -> fp32 exactly (bf1622float2), products exact in fp32 (8 x 8 bits) and
//   an fp32 fma/sum tree over d and the thread group (attention_utils.cuh:31-45,
//   dtype_bfloat16.cuh:374-391), times scale in fp32 (attention_kernels.cuh:289). The adapter
//   passes softmax_scale * q_scale as scale (one fp32 rounding). The logits stay fp32 in shared
//   memory (:188-189).
// - P = __expf(s - m) (:330): an fp32 subtraction, then mul.f32 by log2(e) and ex2.approx.f32
//   (what nvcc emits for __expf without -ftz); the denominator is an fp32 sum of those P (:329-
//   334) plus a constant 1e-6f, inverted with __fdividef (:337); P is normalised in fp32
//   (:338-340), rounded to bf16 (from_float, :394-395, __float22bfloat162_rn) and multiplied by V
//   in bf16: dot() is sum(mul<T, T, T>) (attention_generic.cuh:41-42), __hmul2 for bf16
//   (dtype_bfloat16.cuh:212-220, mul.bf16x2 in the PTX), so every p * v product is rounded to bf16 before the fp32 sum
//   (dtype_bfloat16.cuh:410-413) into the fp32 accumulators (:366-371, :426) and the fp32 warp and
//   block reductions (:431-476).
// - v2 stores each partition's normalised output as bf16 in tmp_out (:480-487) with fp32
//   max_logits / exp_sums (:344-352); the reduce kernel rescales with expf (accurate, :641), adds
//   1e-6f to the sum, inverts with __fdividef (:647) and accumulates in fp32 (:655-663).
pacts_backend_numerics numerics() {
  pacts_backend_numerics n{};
  // The fp32 dot product, the scale product, the host's softmax_scale * q_scale, and the shift
  // s - m together with __expf's argument scaling by log2(e): the shift term of the bound is
  // u_logit * 2S, and those two roundings plus log2(e)'s own rounding add about 2.5 * 2^-24 |s - m|.
  n.u_logit = std::ldexp(1.0, -22);
  n.u_q = 0.0;  // Q and K enter Q.K exactly (bf16 in fp32)
  // P rounded to bf16 and each p * v product rounded to bf16 again: (1 + 2^-8)^2 - 1.
  n.u_p = std::ldexp(1.0, -7) + std::ldexp(1.0, -16);
  // Below bf16's normal range P and the p * v products keep fewer bits (down to the 2^-133
  // subnormal spacing); the floor of a flushed value, as with ftz below.
  n.eta_p = std::ldexp(1.0, -126);
  // fp32 accumulation, plus the deliberate bias of the denominators: exp_sum + 1e-6f (:337 and, in
  // v2's merge, :647) with exp_sum >= 1 (the maximum's e^0), a relative error up to 1e-6, and
  // __fdividef's 2 ulp. 2 gamma_{n+4}(2^-22) >= 2.4e-6 covers both for n = 1; 2^-23 would not
  // with a margin.
  n.u_acc = std::ldexp(1.0, -22);
  n.u_partial = std::ldexp(1.0, -8);  // v2's tmp_out partials are bf16
  // ex2.approx.f32 (about 2^-22 relative, PTX ISA) in __expf, and expf's 2 ulp in the v2 merge,
  // with a margin of 2x.
  n.eps_exp = std::ldexp(1.0, -21);
  n.eps_tanh = 0.0;  // no soft-cap
  n.eps_log = 0.0;   // no LSE
  n.p_rounded_in_denominator = 0;  // the denominator sums the fp32 P, before the bf16 rounding
  // vLLM compiles without -ftz, so the fp32 steps keep subnormals; but the bf16 P and the bf16
  // p * v products lose their precision below 2^-126 (absolute error up to 2^-134 each, and a
  // product below 2^-134 becomes 0). The profile's only absolute floor for that is ftz's
  // (spec/tolerance.md §3.5), so it is declared.
  n.ftz = 1;
  return n;
}

pacts_status_code create(pacts_backend_instance** instance, char* message, uint32_t bytes) {
  *instance = nullptr;
  try {
    auto* self = new pacts_backend_instance;
    const cudaError_t e = cudaStreamCreateWithFlags(&self->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      set_text(message, bytes,
               std::string("vllm-paged-attention: create: ") + cudaGetErrorString(e));
      delete self;
      return PACTS_DEVICE_ERROR;
    }
    *instance = self;
    return PACTS_OK;
  } catch (const std::exception& ex) {
    set_text(message, bytes, std::string("vllm-paged-attention: create: ") + ex.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "vllm-paged-attention: create: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

void destroy(pacts_backend_instance* instance) { delete instance; }

// A stride the kernel multiplies only by 0 when the dimension has one index (validate() accepts
// any value there): pass 0, so that it always fits the kernel's int.
inline int64_t effective(int64_t stride, int64_t extent) { return extent > 1 ? stride : 0; }

inline std::string layout_text(const pacts_pool_layout& l) {
  return "(s_page " + std::to_string(l.s_page) + ", s_head " + std::to_string(l.s_head) +
         ", s_tok " + std::to_string(l.s_tok) + ", s_chunk " + std::to_string(l.s_chunk) +
         ", chunk " + std::to_string(l.chunk) + ")";
}

// NotSupported (what vLLM's kernels cannot take, beyond the declared capabilities), or "".
std::string unsupported(const pacts_problem& p) {
  const int64_t P = p.page_size;
  const pacts_pool_layout& k = p.k_layout;
  const pacts_pool_layout& v = p.v_layout;
  // K: [blocks, Hkv, D/x, block_size, x], read at page * kv_block_stride + head * kv_head_stride
  // + token * x + (d / x) * block_size * x + d % x (attention_kernels.cuh:268-277).
  if (k.chunk != kX || k.s_tok != kX || k.s_chunk != P * kX)
    return "k_layout " + layout_text(k) + ": vLLM's key_cache is x-packed, accepted: chunk " +
           std::to_string(kX) + ", s_tok " + std::to_string(kX) + ", s_chunk page_size * " +
           std::to_string(kX) + " = " + std::to_string(P * kX) + " (NHD / HND are not)";
  // V: [blocks, Hkv, D, block_size], read at page * kv_block_stride + head * kv_head_stride
  // + d * block_size + token (:397-407).
  if (v.chunk != 1 || v.s_tok != 1 || v.s_chunk != P)
    return "v_layout " + layout_text(v) + ": vLLM's value_cache is dim-major, accepted: chunk 1, "
           "s_tok 1, s_chunk page_size = " + std::to_string(P) + " (NHD / HND are not)";
  // One kv_block_stride and one kv_head_stride, both taken from key_cache
  // (paged_attention_v1.cu:59-60, paged_attention_v2.cu:60-61), address K and V.
  const int64_t kp = effective(k.s_page, p.num_pages), vp = effective(v.s_page, p.num_pages);
  const int64_t kh = effective(k.s_head, p.num_kv_heads), vh = effective(v.s_head, p.num_kv_heads);
  if (kp != vp || kh != vh)
    return "v_layout s_page " + std::to_string(v.s_page) + ", s_head " + std::to_string(v.s_head) +
           ": differ from k_layout's (" + std::to_string(k.s_page) + ", " +
           std::to_string(k.s_head) + "); vLLM addresses V with key_cache's kv_block_stride and "
           "kv_head_stride, accepted: equal page and head strides";
  constexpr int64_t kInt = std::numeric_limits<int32_t>::max();
  if (kp > kInt || kh > kInt)
    return "k_layout s_page " + std::to_string(k.s_page) + ", s_head " +
           std::to_string(k.s_head) + ": vLLM's kv_block_stride and kv_head_stride are int, "
           "accepted: <= 2^31 - 1";
  // V is read in 16-byte vectors at multiples of 8 elements inside a head (V_VEC_SIZE, :355,
  // :391, :403), K in vectors of up to 16 bytes: page and head strides of 16 bytes' multiples.
  if (kp % 8 != 0 || kh % 8 != 0)
    return "k_layout / v_layout s_page " + std::to_string(k.s_page) + ", s_head " +
           std::to_string(k.s_head) + ": vLLM's 16-byte K and V vector loads need page and head "
           "strides that are multiples of 8 bf16 elements";
  // Q: q + seq_idx * q_stride + head_idx * HEAD_SIZE (:174), read in vectors of VEC_SIZE
  // elements, VEC_SIZE = 16 bytes / (THREAD_GROUP_SIZE * 2), THREAD_GROUP_SIZE = 32 / block_size
  // (at least 1) (:133, :157).
  if (p.num_q_heads > 1 && p.q_layout.s_head != p.head_dim)
    return "q_layout.s_head " + std::to_string(p.q_layout.s_head) +
           ": vLLM's query rows of one sequence are contiguous (head_idx * HEAD_SIZE), accepted: "
           "head_dim " + std::to_string(p.head_dim);
  const int64_t qs = effective(p.q_layout.s_batch, p.batch);
  const int64_t q_vec = 16 / (std::max<int64_t>(32 / P, 1) * 2);
  if (qs > kInt)
    return "q_layout.s_batch " + std::to_string(p.q_layout.s_batch) +
           ": vLLM's q_stride is int, accepted: <= 2^31 - 1";
  if (qs % q_vec != 0)
    return "q_layout.s_batch " + std::to_string(p.q_layout.s_batch) + ": vLLM's query vectors of " +
           std::to_string(q_vec) + " elements at page_size " + std::to_string(P) +
           " need a sequence stride that is a multiple of " + std::to_string(q_vec);
  // Sequences are gridDim.y (paged_attention_v1.cu:86, paged_attention_v2.cu:87).
  if (p.batch > kMaxGridY)
    return "batch " + std::to_string(p.batch) +
           ": vLLM puts sequences on gridDim.y, accepted: <= 65535";
  return "";
}

// Whether the pools are already in vLLM's layout: x-packed K, dim-major V, one page stride and
// one head stride for both (the first checks of unsupported()).
bool vllm_layout(const pacts_problem& p) {
  const pacts_pool_layout& k = p.k_layout;
  const pacts_pool_layout& v = p.v_layout;
  const int64_t P = p.page_size;
  return k.chunk == kX && k.s_tok == kX && k.s_chunk == P * kX && v.chunk == 1 && v.s_tok == 1 &&
         v.s_chunk == P && effective(k.s_page, p.num_pages) == effective(v.s_page, p.num_pages) &&
         effective(k.s_head, p.num_kv_heads) == effective(v.s_head, p.num_kv_heads);
}

// vLLM's dense layouts replace the problem's: key_cache [N, Hkv, D/x, P, x], value_cache
// [N, Hkv, D, P].
void use_vllm_layout(pacts_problem& p) {
  const int64_t P = p.page_size, D = p.head_dim, H = p.num_kv_heads;
  p.k_layout = pacts_pool_layout{H * D * P, D * P, kX, P * kX, static_cast<int32_t>(kX), 0};
  p.v_layout = pacts_pool_layout{H * D * P, D * P, 1, P, 1, 0};
}

// Pools in another layout (NHD, HND, padded rows) are copied into vLLM's dense one, as an
// integrator would have to: key_cache [N, Hkv, D/x, P, x] and value_cache [N, Hkv, D, P]. Every
// element (page, head, slot, dim) is carried, the unowned ones with their bytes, so the poisons
// of spec/contract.md §1 reach the kernel; the problem's layouts are replaced by the copies'.
void to_vllm_layout(pacts_problem& p, const pacts_buffers& b, std::vector<uint8_t>& k_copy,
                    std::vector<uint8_t>& v_copy) {
  const pacts_problem given = p;
  const int64_t P = p.page_size, D = p.head_dim, H = p.num_kv_heads;
  use_vllm_layout(p);
  const size_t elems = size_t(p.num_pages) * H * D * P;
  k_copy.assign(elems * sizeof(T), 0);
  v_copy.assign(elems * sizeof(T), 0);
  const auto at = [](const pacts_pool_layout& l, int64_t pg, int64_t h, int64_t t, int64_t d) {
    return pg * l.s_page + h * l.s_head + t * l.s_tok + (d / l.chunk) * l.s_chunk + d % l.chunk;
  };
  const auto* ks = static_cast<const uint16_t*>(b.k.data);
  const auto* vs = static_cast<const uint16_t*>(b.v.data);
  auto* kd = reinterpret_cast<uint16_t*>(k_copy.data());
  auto* vd = reinterpret_cast<uint16_t*>(v_copy.data());
  for (int64_t pg = 0; pg < p.num_pages; ++pg)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < P; ++t)
        for (int64_t d = 0; d < D; ++d) {
          kd[at(p.k_layout, pg, h, t, d)] = ks[at(given.k_layout, pg, h, t, d)];
          vd[at(p.v_layout, pg, h, t, d)] = vs[at(given.v_layout, pg, h, t, d)];
        }
}

// Whether the query is in a layout vLLM's kernels take: one sequence stride, a sequence's heads
// contiguous (q + seq * q_stride + head * HEAD_SIZE, attention_kernels.cuh:174), the stride a
// multiple of the kernel's query vector (:133, :157) and an int.
bool vllm_query_layout(const pacts_problem& p) {
  const int64_t qs = effective(p.q_layout.s_batch, p.batch);
  const int64_t q_vec = 16 / (std::max<int64_t>(32 / p.page_size, 1) * 2);
  return (p.num_q_heads == 1 || p.q_layout.s_head == p.head_dim) && qs % q_vec == 0 &&
         qs <= std::numeric_limits<int32_t>::max();
}

// The dense query layout [B, Hq, D] replaces the problem's.
void use_dense_query(pacts_problem& p) {
  const int64_t H = p.num_q_heads, D = p.head_dim;
  p.q_layout = pacts_row_layout{H * D, H * D, D};
}

// A query in another layout (gaps between heads or rows, head-major rows) is copied into the
// dense [B, Hq, D] one, as a caller would make it contiguous; every element is carried.
void to_dense_query(pacts_problem& p, const pacts_buffers& b, std::vector<uint8_t>& q_copy) {
  const pacts_row_layout given = p.q_layout;
  const int64_t H = p.num_q_heads, D = p.head_dim;
  use_dense_query(p);
  q_copy.assign(size_t(p.batch) * H * D * sizeof(T), 0);
  const auto* src = static_cast<const uint16_t*>(b.q.data);
  auto* dst = reinterpret_cast<uint16_t*>(q_copy.data());
  for (int64_t s = 0; s < p.batch; ++s)
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(dst + (s * H + h) * D, src + s * given.s_batch + h * given.s_head,
                  size_t(D) * sizeof(T));
}

// The checks of run() and prepare() before any layout is looked at: validate() with the declared
// requirements, then what vLLM's kernels cannot take (NotSupported). True when `result` holds the
// refusal.
bool refused(const pacts_problem& p, const pacts_buffers& b, pacts_backend_result* result) {
  const auto caps = capabilities();
  pacts::spec::Requirements req;
  req.vector_alignment_bytes = caps.vector_alignment_bytes;
  req.max_element_offset = caps.max_element_offset;
  if (const pacts::spec::Status s = pacts::spec::validate(p, b, req); !s) {
    result->status = static_cast<pacts_status_code>(s.code());
    set_text(result->message, sizeof result->message, s.message());
    return true;
  }
  std::string why;
  if (p.q_format != PACTS_FORMAT_BF16) why = "q_format: accepted: bf16";
  else if (p.out_format != PACTS_FORMAT_BF16)
    why = "out_format: accepted: bf16 (vLLM writes the query's type)";
  else if (p.kv_format != PACTS_FORMAT_BF16)
    why = "kv_format: accepted: bf16 (kv_cache_dtype \"auto\"; the fp8 caches are not built)";
  else if (p.k_scale_mode != PACTS_SCALE_NONE || p.v_scale_mode != PACTS_SCALE_NONE)
    why = "k_scale_mode / v_scale_mode: accepted: none (the bf16 cache path applies no scale)";
  else if (p.q_len != 1) why = "q_len " + std::to_string(p.q_len) + ": accepted: 1";
  else if (p.has_sinks) why = "has_sinks 1: accepted: 0 (vLLM's paged attention has no sinks)";
  else if (p.window != 0)
    why = "window " + std::to_string(p.window) +
          ": accepted: 0 (vLLM's paged attention attends every key of the context)";
  else if (p.softcap != 0.0f) why = "softcap: accepted: 0 (vLLM's paged attention has no soft-cap)";
  else if (p.want_lse) why = "want_lse 1: accepted: 0 (vLLM's paged attention returns no LSE)";
  else if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    why = "head_dim " + std::to_string(p.head_dim) + ": accepted: 64, 128, 256";
  else if (p.page_size != 8 && p.page_size != 16 && p.page_size != 32)
    why = "page_size " + std::to_string(p.page_size) + ": accepted: 8, 16, 32";
  if (!why.empty()) {
    result->status = PACTS_NOT_SUPPORTED;
    set_text(result->message, sizeof result->message, why);
    return true;
  }
  return false;
}

// v1 or v2 for a batch whose longest context is max_seq_len, and v2's partitions.
struct Plan {
  bool use_v1 = true;
  int64_t max_seq_len = 0;
  int64_t max_num_partitions = 0;
  int64_t parts = 0;  // partitions v2 is launched with, 0 for v1
};

// v1 or v2, by vLLM's Python dispatcher (PagedAttention.forward_decode,
// vllm/attention/ops/paged_attn.py:126-136 before its removal in #28043):
//   max_num_partitions = (max_seq_len + 511) // 512
//   use_v1 = max_seq_len <= 8192 and (max_num_partitions == 1 or num_seqs * num_heads > 512)
// One case is read as max_num_partitions == 1: a batch of empty contexts, where the rule's
// max_num_partitions 0 would give v2 a zero-sized grid that CUDA refuses to launch (vLLM never
// decodes without tokens); v1 handles it and writes +0. False, with NotSupported in `result`,
// where v2 cannot be launched for the batch.
bool choose_plan(const pacts_problem& p, const int32_t* lens, Plan& plan,
                 pacts_backend_result* result) {
  int64_t max_seq_len = 0;
  for (int32_t s = 0; s < p.batch; ++s) {
    const int64_t n = lens[s];
    max_seq_len = std::max(max_seq_len, n);
  }
  const int64_t max_num_partitions = div_up(max_seq_len, kPartitionSize);
  const int64_t rows = int64_t{p.batch} * p.num_q_heads;
  const bool use_v1 = max_seq_len <= 8192 && (max_num_partitions <= 1 || rows > 512);
  if (!use_v1) {
    constexpr int64_t kInt = std::numeric_limits<int32_t>::max();
    std::string limit;
    if (max_num_partitions > kMaxReducePartitions)
      limit = "the reduce kernel's 2 * max_num_partitions floats of shared memory exceed the "
              "48 KiB it is launched with (paged_attention_v2.cu:91), accepted: contexts up to " +
              std::to_string(kMaxReducePartitions * kPartitionSize) + " keys";
    else if (rows * max_num_partitions * p.head_dim > kInt)
      limit = "tmp_out [num_seqs, num_heads, max_num_partitions, head_size] is addressed with "
              "int offsets (attention_kernels.cuh:480-482), accepted: at most 2^31 - 1 elements";
    if (!limit.empty()) {
      result->status = PACTS_NOT_SUPPORTED;
      set_text(result->message, sizeof result->message,
               "longest context_lens entry " + std::to_string(max_seq_len) + " (v2, " +
                   std::to_string(max_num_partitions) + " partitions of 512): " + limit);
      return false;
    }
  }
  plan.use_v1 = use_v1;
  plan.max_seq_len = max_seq_len;
  plan.max_num_partitions = max_num_partitions;
  plan.parts = use_v1 ? 0 : max_num_partitions;
  return true;
}

// The kernels' scalar arguments for the problem (its layouts as the kernels address them); the
// pointers and the stream are the caller's.
Args scalar_args(const pacts_problem& p, const Plan& plan) {
  Args a{};
  a.num_seqs = p.batch;
  a.num_heads = p.num_q_heads;
  a.num_kv_heads = p.num_kv_heads;
  // vLLM has no query scale; q_scale multiplies every Q element, so it joins the scale.
  a.scale = p.softmax_scale * p.q_scale;
  a.max_seq_len = static_cast<int>(plan.max_seq_len);
  // The row stride of the block table (the kernel's only use of max_num_blocks_per_seq).
  a.max_num_blocks_per_seq = static_cast<int>(effective(p.block_table_stride, p.batch));
  a.q_stride = static_cast<int>(effective(p.q_layout.s_batch, p.batch));
  a.kv_block_stride = static_cast<int>(effective(p.k_layout.s_page, p.num_pages));
  a.kv_head_stride = static_cast<int>(effective(p.k_layout.s_head, p.num_kv_heads));
  return a;
}

// The plan used and the variant, as run() reports them.
void report(const pacts_problem& p, const Plan& plan, pacts_backend_result* result) {
  // The plan used: v2's fixed partitions of 512 keys, or unsplit.
  if (plan.use_v1) {
    result->partition_size = 0;
    result->max_partitions = 1;
  } else {
    result->partition_size = kPartitionSize;
    result->max_partitions = static_cast<int32_t>(plan.max_num_partitions);
  }
  set_text(result->variant, sizeof result->variant,
           std::string("vllm-paged-attention ") + (plan.use_v1 ? "v1" : "v2") + " D" +
               std::to_string(p.head_dim) + " bs" + std::to_string(p.page_size));
}

void run(pacts_backend_instance* self, const pacts_problem* problem, const pacts_buffers* buffers,
         const pacts_backend_plan_hint* /*hint: vLLM's rule picks the plan*/,
         pacts_backend_result* result) {
  try {
    pacts_problem p = *problem;  // its pool layouts are replaced when the pools are copied
    const pacts_buffers& b = *buffers;
    if (refused(p, b, result)) return;
    std::vector<uint8_t> k_copy, v_copy;  // the pools in vLLM's layout, when they were not
    if (!vllm_layout(p)) to_vllm_layout(p, b, k_copy, v_copy);
    std::vector<uint8_t> q_copy;  // the query in the dense layout, when it was not
    if (!vllm_query_layout(p)) to_dense_query(p, b, q_copy);
    if (const std::string why = unsupported(p); !why.empty()) {
      result->status = PACTS_NOT_SUPPORTED;
      set_text(result->message, sizeof result->message, why);
      return;
    }
    result->status = PACTS_OK;
    result->partition_size = 0;
    result->max_partitions = 1;
    if (p.batch == 0) return;

    // The device-resident preconditions, from the host copies. Each sequence's kernel blocks read
    // block-table columns [0, ceil(n / P)): v1 all of them (start_block_idx 0, end_block_idx
    // num_seq_blocks, attention_kernels.cuh:116-125), v2 the partition's [partition * 512 / P,
    // ...) clipped to num_seq_blocks, whose union is the same; each read entry is a page address
    // (:252-253, :389-390). Nothing else of the table is read.
    if (const std::string why_not =
            pacts_peer::unlaunchable(p, b, "vLLM", "reads every page of the context");
        !why_not.empty()) {
      result->status = PACTS_DEVICE_ERROR;
      set_text(result->message, sizeof result->message, why_not);
      return;
    }
    Plan plan;
    if (!choose_plan(p, static_cast<const int32_t*>(b.context_lens.data), plan, result)) return;
    const bool use_v1 = plan.use_v1;
    const int64_t parts = plan.parts;
    const int64_t rows = int64_t{p.batch} * p.num_q_heads;

    const size_t out_elems = size_t(rows) * p.head_dim;
    const size_t out_bytes = out_elems * sizeof(T);
    const size_t ws_floats = size_t(rows) * size_t(parts);
    const size_t tmp_bytes = ws_floats * p.head_dim * sizeof(T);
    cudaError_t e = cudaSuccess;
    const auto step = [&](cudaError_t x) {
      if (e == cudaSuccess) e = x;
    };
    const void* const q_src = q_copy.empty() ? b.q.data : static_cast<const void*>(q_copy.data());
    const size_t q_bytes = q_copy.empty() ? b.q.bytes : q_copy.size();
    step(self->q.reserve(q_bytes));
    const bool copied = !k_copy.empty();
    const void* const k_src = copied ? static_cast<const void*>(k_copy.data()) : b.k.data;
    const void* const v_src = copied ? static_cast<const void*>(v_copy.data()) : b.v.data;
    const size_t k_bytes = copied ? k_copy.size() : b.k.bytes;
    const size_t v_bytes = copied ? v_copy.size() : b.v.bytes;
    step(self->k.reserve(k_bytes));
    step(self->v.reserve(v_bytes));
    step(self->out.reserve(out_bytes));
    step(self->block_table.reserve(std::max<size_t>(b.block_table.bytes, 4)));
    step(self->seq_lens.reserve(b.context_lens.bytes));
    if (!use_v1) {
      step(self->exp_sums.reserve(ws_floats * sizeof(float)));
      step(self->max_logits.reserve(ws_floats * sizeof(float)));
      step(self->tmp_out.reserve(tmp_bytes));
    }
    const cudaStream_t st = self->stream;
    // Whole views, byte for byte: the kernels address them with pacts' own strides.
    step(cudaMemcpyAsync(self->q.ptr, q_src, q_bytes, cudaMemcpyHostToDevice, st));
    // (The pools are empty only without pages, when every context is 0 and nothing reads them.)
    if (k_bytes > 0) step(cudaMemcpyAsync(self->k.ptr, k_src, k_bytes, cudaMemcpyHostToDevice, st));
    if (v_bytes > 0) step(cudaMemcpyAsync(self->v.ptr, v_src, v_bytes, cudaMemcpyHostToDevice, st));
    if (b.block_table.bytes > 0)
      step(cudaMemcpyAsync(self->block_table.ptr, b.block_table.data, b.block_table.bytes,
                           cudaMemcpyHostToDevice, st));
    step(cudaMemcpyAsync(self->seq_lens.ptr, b.context_lens.data, b.context_lens.bytes,
                         cudaMemcpyHostToDevice, st));
    // Poison what the kernels should overwrite, alternating between runs (backend_abi.h): the
    // output staging (NaN bytes, or a large finite value) and v2's workspace.
    const int poison = (self->runs++ % 2 == 0) ? 0xFF : 0x7E;
    step(cudaMemsetAsync(self->out.ptr, poison, out_bytes, st));
    if (!use_v1) {
      step(cudaMemsetAsync(self->exp_sums.ptr, poison, ws_floats * sizeof(float), st));
      step(cudaMemsetAsync(self->max_logits.ptr, poison, ws_floats * sizeof(float), st));
      step(cudaMemsetAsync(self->tmp_out.ptr, poison, tmp_bytes, st));
    }
    step(cudaStreamSynchronize(st));
    if (e == cudaSuccess) {
      Args a = scalar_args(p, plan);
      a.out = static_cast<T*>(self->out.ptr);
      a.q = static_cast<const T*>(self->q.ptr);
      a.k_cache = static_cast<const T*>(self->k.ptr);
      a.v_cache = static_cast<const T*>(self->v.ptr);
      a.block_tables = static_cast<const int*>(self->block_table.ptr);
      a.seq_lens = static_cast<const int*>(self->seq_lens.ptr);
      a.exp_sums = static_cast<float*>(self->exp_sums.ptr);
      a.max_logits = static_cast<float*>(self->max_logits.ptr);
      a.tmp_out = static_cast<T*>(self->tmp_out.ptr);
      a.stream = st;
      e = launch(a, p.head_dim, p.page_size, !use_v1, static_cast<int>(parts));
    }
    std::vector<uint16_t> out(out_elems);
    step(cudaMemcpyAsync(out.data(), self->out.ptr, out_bytes, cudaMemcpyDeviceToHost, st));
    step(cudaStreamSynchronize(st));
    step(cudaGetLastError());
    if (e != cudaSuccess) {
      result->status = PACTS_DEVICE_ERROR;
      set_text(result->message, sizeof result->message,
               std::string("vllm-paged-attention: CUDA: ") + cudaGetErrorString(e));
      return;
    }
    report(p, plan, result);
    // vLLM writes dense [num_seqs, num_heads, head_size]; pacts' layout may leave gaps, which are
    // not written.
    auto* dst = static_cast<uint16_t*>(b.out.data);
    for (int64_t s = 0; s < p.batch; ++s)
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        const size_t row = size_t(s) * p.num_q_heads + h;
        std::memcpy(dst + s * p.out_layout.s_batch + h * p.out_layout.s_head,
                    out.data() + row * p.head_dim, size_t(p.head_dim) * sizeof(T));
      }
  } catch (const std::exception& ex) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             std::string("vllm-paged-attention: ") + ex.what());
  } catch (...) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             "vllm-paged-attention: a non-standard exception");
  }
}

// What a timed call cannot do without a copy per call (NotSupported), or "": a query the kernels
// cannot address in place (run() copies it into the dense layout) and an output layout other
// than the dense one they write (run() copies the rows into it).
std::string timed_refusal(const pacts_problem& p) {
  if (!vllm_query_layout(p)) {
    const int64_t q_vec = 16 / (std::max<int64_t>(32 / p.page_size, 1) * 2);
    return "q_layout (s_batch " + std::to_string(p.q_layout.s_batch) + ", s_head " +
           std::to_string(p.q_layout.s_head) + "): vLLM's kernels read a sequence's heads "
           "contiguously at q + seq * q_stride + head * head_size, which timed calls address in "
           "place (run() copies the query, a copy per call), accepted: s_head head_dim = " +
           std::to_string(p.head_dim) + " and s_batch a multiple of " + std::to_string(q_vec) +
           " up to 2^31 - 1";
  }
  return pacts_peer::dense_out_refusal(p, "vLLM");
}

}  // namespace pacts_vllm_peer

// A prepared timed call (backend_abi.h, version 3): the kernels' arguments, the pools in vLLM's
// layout where pacts' were not, and v2's workspace, in the call's own device memory.
struct pacts_backend_prepared {
  pacts_backend_instance* owner = nullptr;
  pacts_vllm_peer::Args args{};
  int head_dim = 0, page_size = 0, parts = 0;
  bool v2 = false;
  bool has_work = false;  // false: batch 0, nothing to launch
  pacts_peer::DeviceBuffer k, v, exp_sums, max_logits, tmp_out;
};

namespace pacts_vllm_peer {

void prepare(pacts_backend_instance* self, const pacts_problem* problem,
             const pacts_buffers* buffers, const int32_t* host_block_table,
             const int32_t* host_context_lens,
             const pacts_backend_plan_hint* /*hint: vLLM's rule picks the plan*/,
             pacts_backend_prepared** prepared, pacts_backend_result* result) {
  *prepared = nullptr;
  try {
    pacts_problem p = *problem;  // its pool layouts are replaced when the pools are copied
    const pacts_buffers& b = *buffers;  // device memory
    if (self->prepared != nullptr) {
      result->status = PACTS_INTERNAL;
      set_text(result->message, sizeof result->message,
               "vllm-paged-attention: prepare: this instance still holds a prepared call; "
               "release it first (backend_abi.h: at most one per instance)");
      return;
    }
    if (refused(p, b, result)) return;
    const pacts_problem given = p;
    const bool copy_pools = !vllm_layout(p);
    if (copy_pools) use_vllm_layout(p);
    // run()'s remaining refusals, with the query as run() would pass it (copied into the dense
    // layout when the kernels cannot address it), then what only a timed call refuses.
    pacts_problem as_run = p;
    if (!vllm_query_layout(as_run)) use_dense_query(as_run);
    std::string why = unsupported(as_run);
    if (why.empty()) why = timed_refusal(p);
    if (!why.empty()) {
      result->status = PACTS_NOT_SUPPORTED;
      set_text(result->message, sizeof result->message, why);
      return;
    }
    auto call = std::make_unique<pacts_backend_prepared>();
    call->owner = self;
    result->status = PACTS_OK;
    result->partition_size = 0;
    result->max_partitions = 1;
    if (p.batch != 0) {
      // The device-resident preconditions, from the host copies (as run() checks them).
      const pacts_buffers host =
          pacts_peer::with_host_copies(b, host_block_table, host_context_lens);
      if (const std::string why_not =
              pacts_peer::unlaunchable(p, host, "vLLM", "reads every page of the context");
          !why_not.empty()) {
        result->status = PACTS_DEVICE_ERROR;
        set_text(result->message, sizeof result->message, why_not);
        return;
      }
      Plan plan;
      if (!choose_plan(p, host_context_lens, plan, result)) return;
      const int64_t rows = int64_t{p.batch} * p.num_q_heads;
      const size_t ws_floats = size_t(rows) * size_t(plan.parts);
      const size_t tmp_bytes = ws_floats * p.head_dim * sizeof(T);
      cudaError_t e = cudaSuccess;
      const auto step = [&](cudaError_t x) {
        if (e == cudaSuccess) e = x;
      };
      const cudaStream_t st = self->stream;
      // pacts filled its buffers on its own streams: they are complete before ours reads them.
      step(cudaDeviceSynchronize());
      const void* k_cache = b.k.data;
      const void* v_cache = b.v.data;
      if (copy_pools) {
        // The pools into vLLM's dense layout on the device (run: to_vllm_layout); every byte of
        // the copies is an element's.
        const size_t bytes = size_t(p.num_pages) * p.num_kv_heads * p.head_dim * p.page_size *
                             sizeof(T);
        step(call->k.reserve(bytes));
        step(call->v.reserve(bytes));
        if (e == cudaSuccess)
          step(pacts_peer::gather_pool(call->k.ptr, p.k_layout, b.k.data, given.k_layout, p,
                                       sizeof(T), st));
        if (e == cudaSuccess)
          step(pacts_peer::gather_pool(call->v.ptr, p.v_layout, b.v.data, given.v_layout, p,
                                       sizeof(T), st));
        k_cache = call->k.ptr;
        v_cache = call->v.ptr;
      }
      if (!plan.use_v1) {
        // v2's workspace, poisoned once (alternating between calls as run() does), not per
        // enqueue.
        const int poison = (self->runs++ % 2 == 0) ? 0xFF : 0x7E;
        step(call->exp_sums.reserve(ws_floats * sizeof(float)));
        step(call->max_logits.reserve(ws_floats * sizeof(float)));
        step(call->tmp_out.reserve(tmp_bytes));
        step(cudaMemsetAsync(call->exp_sums.ptr, poison, ws_floats * sizeof(float), st));
        step(cudaMemsetAsync(call->max_logits.ptr, poison, ws_floats * sizeof(float), st));
        step(cudaMemsetAsync(call->tmp_out.ptr, poison, tmp_bytes, st));
      }
      step(cudaStreamSynchronize(st));
      step(cudaGetLastError());
      if (e != cudaSuccess) {
        result->status = PACTS_DEVICE_ERROR;
        set_text(result->message, sizeof result->message,
                 std::string("vllm-paged-attention: prepare: CUDA: ") + cudaGetErrorString(e));
        return;
      }
      // pacts' query, block table and context lengths in place, its output written directly.
      Args& a = call->args;
      a = scalar_args(p, plan);
      a.out = static_cast<T*>(b.out.data);
      a.q = static_cast<const T*>(b.q.data);
      a.k_cache = static_cast<const T*>(k_cache);
      a.v_cache = static_cast<const T*>(v_cache);
      a.block_tables = static_cast<const int*>(b.block_table.data);
      a.seq_lens = static_cast<const int*>(b.context_lens.data);
      a.exp_sums = static_cast<float*>(call->exp_sums.ptr);
      a.max_logits = static_cast<float*>(call->max_logits.ptr);
      a.tmp_out = static_cast<T*>(call->tmp_out.ptr);
      a.stream = nullptr;  // enqueue's
      call->head_dim = p.head_dim;
      call->page_size = p.page_size;
      call->v2 = !plan.use_v1;
      call->parts = static_cast<int>(plan.parts);
      call->has_work = true;
      report(p, plan, result);
    }
    *prepared = call.release();
    self->prepared = *prepared;
  } catch (const std::exception& ex) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             std::string("vllm-paged-attention: prepare: ") + ex.what());
  } catch (...) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             "vllm-paged-attention: prepare: a non-standard exception");
  }
}

// The kernel launches alone on pacts' stream: v1, or v2's partition and reduce kernels (each
// after the shared-memory attribute vLLM's launcher sets); no allocation, copy or
// synchronisation.
pacts_status_code enqueue(pacts_backend_prepared* prepared, void* stream, char* message,
                          uint32_t bytes) {
  try {
    if (!prepared->has_work) return PACTS_OK;  // batch 0: nothing to compute
    Args a = prepared->args;
    a.stream = static_cast<cudaStream_t>(stream);
    const cudaError_t e =
        launch(a, prepared->head_dim, prepared->page_size, prepared->v2, prepared->parts);
    if (e != cudaSuccess) {
      set_text(message, bytes, std::string("vllm-paged-attention: enqueue: CUDA: ") +
                                   cudaGetErrorString(e));
      return PACTS_DEVICE_ERROR;
    }
    return PACTS_OK;
  } catch (const std::exception& ex) {
    set_text(message, bytes, std::string("vllm-paged-attention: enqueue: ") + ex.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "vllm-paged-attention: enqueue: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

// vLLM's kernels check no device-resident input (spec/contract.md §4).
uint32_t device_error(pacts_backend_prepared* /*prepared*/) { return 0; }

void release(pacts_backend_prepared* prepared) {
  if (prepared == nullptr) return;
  if (prepared->owner != nullptr && prepared->owner->prepared == prepared)
    prepared->owner->prepared = nullptr;
  delete prepared;
}

pacts_backend_v3 make_descriptor() {
  static const std::string device = pacts_peer::device_name();
  static const std::string driver = pacts_peer::driver_version();
  static const std::string runtime = pacts_peer::runtime_version();
  pacts_backend_v3 d{};
  d.v2.v1.abi_version = PACTS_BACKEND_ABI_VERSION;
  d.v2.v1.descriptor_bytes = sizeof(pacts_backend_v3);
  d.v2.v1.problem_abi_version = PACTS_ABI_VERSION;
  d.v2.v1.name = "vllm-paged-attention";
  d.v2.v1.device = device.c_str();
  d.v2.v1.driver = driver.c_str();
  d.v2.v1.runtime = runtime.c_str();
  d.v2.v1.version = "vLLM " PACTS_PEER_VLLM_VERSION;
  d.v2.v1.capabilities = capabilities();
  d.v2.v1.numerics = numerics();
  d.v2.v1.create = create;
  d.v2.v1.destroy = destroy;
  d.v2.v1.run = run;
  d.v2.v1.run_replayed = nullptr;
  d.v2.v2.q_requant = PACTS_Q_REQUANT_NONE;
  d.v2.v2.batch_invariant = 0;  // v1 or v2 depends on the batch (num_seqs * num_heads > 512)
  d.v3.timed_calls = 1;
  d.v3.memory = PACTS_BACKEND_MEMORY_DEVICE;
  // enqueue() sets the kernels' shared-memory attribute and launches them on the given stream,
  // nothing else: no allocation, copy or synchronisation, so it can be captured (as vLLM's
  // decode is captured in its CUDA graphs).
  d.v3.graph_capturable = 1;
  d.v3.prepare = prepare;
  d.v3.enqueue = enqueue;
  d.v3.device_error = device_error;
  d.v3.release = release;
  return d;
}

}  // namespace pacts_vllm_peer

extern "C" PACTS_BACKEND_EXPORT const pacts_backend_v1* pacts_backend_entry(void) {
  static const pacts_backend_v3 descriptor = pacts_vllm_peer::make_descriptor();
  return &descriptor.v2.v1;
}
