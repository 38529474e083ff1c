// One configuration of TensorRT-LLM's XQA decode kernel as FlashInfer vendors it (csrc/xqa/mha.cu
// of the checkout named by -DPACTS_PEER_XQA_DIR), compiled as FlashInfer's JIT compiles it
// (flashinfer/jit/xqa.py gen_xqa_module: the configuration is macros) and exported to the adapter
// (xqa_decode.cu) as one launch function (xqa_launch.h).
//
// CMake compiles this file once per configuration, with HEAD_ELEMS, TOKENS_PER_PAGE, HEAD_GRP_SIZE
// and SLIDING_WINDOW of that configuration and the flags FlashInfer's JIT passes for a bf16 query,
// a bf16 cache and a bf16 output. The objects are linked into one module, so the names of external
// linkage that mha.cu defines must differ between them: its host launchers (launchMHA and
// launchMHAFlashInfer, the only functions mha.cu defines with external linkage; the kernel, its
// shared-memory size and its configureKernel are static) are renamed below by macros, before
// mha.cu is included, to names carrying the configuration. Without -rdc every object's device code
// is a module of its own, so the device functions of mha.cu's headers, whose bodies depend on the
// configuration, never meet across objects.
#if !defined(HEAD_ELEMS) || !defined(TOKENS_PER_PAGE) || !defined(HEAD_GRP_SIZE) || \
    !defined(SLIDING_WINDOW)
#error "xqa_config.cu needs HEAD_ELEMS, TOKENS_PER_PAGE, HEAD_GRP_SIZE and SLIDING_WINDOW"
#endif

#define PACTS_XQA_PASTE(name, d, p, g, w) name##_d##d##_p##p##_g##g##_w##w
#define PACTS_XQA_RENAME(name, d, p, g, w) PACTS_XQA_PASTE(name, d, p, g, w)
#define PACTS_XQA_THIS(name) \
  PACTS_XQA_RENAME(name, HEAD_ELEMS, TOKENS_PER_PAGE, HEAD_GRP_SIZE, SLIDING_WINDOW)

#define launchMHA PACTS_XQA_THIS(pacts_xqa_launchMHA)
#define launchMHAFlashInfer PACTS_XQA_THIS(pacts_xqa_launchMHAFlashInfer)

// XQA's kernel and launchers, unchanged (the checkout's csrc/xqa is on the include path).
#include <mha.cu>

#include "xqa_launch.h"

namespace pacts_xqa_peer {

// launchMHAFlashInfer (mha.cu:3101-3187) with the arguments FlashInfer's xqa_wrapper.cu
// (csrc/xqa/xqa_wrapper.cu:129-153) passes for this build: no query-scale or KV-scale tensor
// (qScalePtr, kvScalePtr nullptr), kvCacheScale 1 (read only for an int8 / fp8 cache).
cudaError_t PACTS_XQA_THIS(launch)(const Launch& a) {
  launchMHAFlashInfer(a.sm_count, a.num_kv_heads, a.window, a.q_scale, nullptr,
                      static_cast<OutputHead*>(a.out), static_cast<InputHead const*>(a.q), a.sinks,
                      static_cast<GMemCacheHead*>(a.k), static_cast<GMemCacheHead*>(a.v),
                      a.page_list, a.max_seq_len, a.seq_lens, a.batch, 1.0f, nullptr,
                      a.semaphores, a.scratch, a.pdl, a.stride_page, a.stride_token,
                      a.stride_head, a.stream);
  return cudaPeekAtLastError();
}

}  // namespace pacts_xqa_peer
