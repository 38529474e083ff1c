// The seam between the XQA adapter (xqa_decode.cu) and XQA's kernel (csrc/xqa/mha.cu of a
// FlashInfer checkout), which is configured by compile-time macros: one translation unit per
// configuration (xqa_config.cu, compiled once per entry of PACTS_XQA_CONFIGS with the macros of
// that entry), each exporting one launch function of the signature below under a name of its own.
// Nothing of XQA's is visible here, so the adapter compiles without the checkout's headers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pacts_xqa_peer {

// The arguments of XQA's launchMHAFlashInfer (mha.h, the entry FlashInfer's xqa_wrapper.cu calls)
// that vary between calls, in plain types. Pointers are device memory; the pool strides are in
// elements (launchMHAFlashInfer divides them by the head size).
struct Launch {
  uint32_t sm_count = 0;        // multiProcessorCount: the multi-block planner's SM count
  uint32_t num_kv_heads = 0;    // nbKHeads
  uint32_t window = 0;          // slidingWinSize (read by the SLIDING_WINDOW builds only)
  float q_scale = 1.0f;         // qScale: the kernel multiplies Q.K by qScale * rsqrtf(head dim)
  void* out = nullptr;          // OutputHead [batch][num_q_heads]
  const void* q = nullptr;      // InputHead [batch][num_q_heads]
  const float* sinks = nullptr;  // attentionSinks [num_q_heads], or none
  void* k = nullptr;            // GMemCacheHead pool
  void* v = nullptr;
  const int32_t* page_list = nullptr;  // KVCachePageIndex [batch][max_seq_len / page size]
  uint32_t max_seq_len = 0;            // maxSeqLen: the page list's row width times the page size
  const uint32_t* seq_lens = nullptr;  // seqLen [batch]
  uint32_t batch = 0;
  uint32_t* semaphores = nullptr;  // one per (sequence, KV head), zero before the first launch
  void* scratch = nullptr;         // the multi-block partials
  bool pdl = false;                // enable_pdl
  uint64_t stride_page = 0, stride_token = 0, stride_head = 0;
  cudaStream_t stream = nullptr;
};

// One configuration's launch: launchMHAFlashInfer of that build on a.stream. XQA reports a launch
// error by throwing std::runtime_error (checkCuda, utils.h); the caller catches it.
using LaunchFn = cudaError_t (*)(const Launch& a);

// The configurations built: X(head_dim, tokens_per_page, head_grp_size, sliding_window). CMake
// (kernels/plugins/peers/CMakeLists.txt, the XQA block) compiles xqa_config.cu once for each, with
// the same values; a mismatch leaves a launch function undefined and fails the link.
#define PACTS_XQA_CONFIGS(X)                                                                  \
  X(128, 16, 1, 0) X(128, 16, 1, 1) X(128, 16, 8, 0) X(128, 16, 8, 1) X(128, 64, 1, 0)        \
  X(128, 64, 1, 1) X(128, 64, 8, 0) X(128, 64, 8, 1) X(256, 16, 1, 0) X(256, 16, 1, 1)        \
  X(256, 16, 8, 0) X(256, 16, 8, 1) X(256, 64, 1, 0) X(256, 64, 1, 1) X(256, 64, 8, 0)        \
  X(256, 64, 8, 1)

#define PACTS_XQA_LAUNCH_NAME(d, p, g, w) launch_d##d##_p##p##_g##g##_w##w
#define PACTS_XQA_DECLARE(d, p, g, w) \
  cudaError_t PACTS_XQA_LAUNCH_NAME(d, p, g, w)(const Launch& a);
PACTS_XQA_CONFIGS(PACTS_XQA_DECLARE)
#undef PACTS_XQA_DECLARE

}  // namespace pacts_xqa_peer
