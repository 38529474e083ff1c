// A peer kernel behind pacts' C ABI (pacts/backend_abi.h): FlashInfer's batch decode over a paged
// KV cache (include/flashinfer/attention/decode.cuh, the CUDA-core "FA2" decode that FlashInfer's
// BatchDecodeWithPagedKVCacheWrapper runs without use_tensor_cores), built from a FlashInfer
// checkout that this repository does not hold (-DPACTS_PEER_FLASHINFER_DIR, docs/qualifications.md).
//
// The adapter translates and never corrects: it converts pacts' block table into FlashInfer's page
// list (spec/operator.md §12), its window into window_left and its LSE from base 2, copies a V
// pool whose strides differ from K's into K's layout (FlashInfer addresses V through K's strides),
// runs FlashInfer's own planner and kernels, and copies the results back. What FlashInfer cannot take
// it refuses with NotSupported; what FlashInfer does with an input is what pacts judges.
//
// The timed calls (backend_abi.h, version 3) split the same work: prepare() checks as run() does,
// uploads the page list, copies a V pool in another layout into K's on the device and runs the
// planner; enqueue() is FlashInfer's decode launch alone (the decode kernel and, when split, its
// merge), reading pacts' device buffers in place and writing pacts' `out`.
//
// One exception keeps a run alive: FlashInfer checks no device-resident input (spec/contract.md
// §4), so a context length above the block table or a page id outside the pool would make it read
// outside its buffers, and a fault on the device ends the process. The adapter looks at those
// host copies first and, where FlashInfer would read through them, launches nothing and answers
// DeviceError naming the entry: the properties of §4 then fail with that message, which is what
// they must do for a kernel without device checks.
#include <pacts/backend_abi.h>
#include <pacts/spec/validate.h>

#include <cuda_runtime.h>

#include "peer_cuda.h"

#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#ifndef PACTS_PEER_FLASHINFER_VERSION
#define PACTS_PEER_FLASHINFER_VERSION "unknown"
#endif

namespace pacts_flashinfer_peer {

constexpr int32_t kHeadDims[] = {64, 128, 256};
constexpr int32_t kGroups[] = {1, 2, 3, 4, 6, 8};  // FlashInfer's DISPATCH_GQA_GROUP_SIZE
constexpr size_t kFloatWorkspace = size_t{128} << 20;  // the Python wrapper's default
constexpr size_t kIntWorkspace = size_t{8} << 20;

using pacts_peer::DeviceBuffer;
using pacts_peer::set_text;

}  // namespace pacts_flashinfer_peer

struct pacts_backend_instance {
  cudaStream_t stream = nullptr;
  pacts_peer::DeviceBuffer q, k, v, out, lse, indptr, indices, last_len, float_ws, int_ws;
  void* pinned = nullptr;
  uint64_t runs = 0;
  pacts_backend_prepared* prepared = nullptr;  // the timed call that holds the workspaces
  ~pacts_backend_instance() {
    if (pinned != nullptr) cudaFreeHost(pinned);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

namespace pacts_flashinfer_peer {

// What one call needs from the problem, in FlashInfer's terms.
struct Call {
  const pacts_problem* p;
  int32_t group;
  int32_t window_left;  // -1: none
  float sm_scale, soft_cap;
  std::vector<int32_t> indptr, indices, last_len;
  int64_t max_context = 0;
};

using IdType = int32_t;

// The device memory one decode launch reads and writes, and FlashInfer's plan for it: the
// instance's staging copies for run(), pacts' buffers and the prepared call's own for enqueue().
struct Launch {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  IdType* indices = nullptr;
  IdType* indptr = nullptr;
  IdType* last_len = nullptr;
  void* float_ws = nullptr;
  void* int_ws = nullptr;
  flashinfer::DecodePlanInfo plan;
};

// The decode launch of one instantiation (decode<D, KV, kWindow, kSoftCap> below).
using DecodeFn = cudaError_t (*)(const Call&, const Launch&, cudaStream_t);

template <typename KV>
struct KvName;
template <>
struct KvName<nv_bfloat16> {
  static constexpr const char* kName = "bf16";
};
template <>
struct KvName<__nv_fp8_e4m3> {
  static constexpr const char* kName = "e4m3fn";
};
template <>
struct KvName<__nv_fp8_e5m2> {
  static constexpr const char* kName = "e5m2";
};

// One FlashInfer instantiation: head dim, KV type, window and soft-cap variants (as FlashInfer's
// JIT specialises them: use_sliding_window = window_left >= 0, use_logits_soft_cap = cap > 0).
template <uint32_t D, typename KV, bool kWindow, bool kSoftCap>
struct Kernel {
  using Variant = flashinfer::DefaultAttention<false, kWindow, kSoftCap, false>;
  using Params = flashinfer::BatchDecodeParams<nv_bfloat16, KV, nv_bfloat16, IdType>;
};

// FlashInfer's decode launch on `stream`: the kernel and, with a split plan, the merge.
template <uint32_t D, typename KV, bool kWindow, bool kSoftCap>
cudaError_t decode(const Call& c, const Launch& l, cudaStream_t stream) {
  using flashinfer::PosEncodingMode;
  using Variant = typename Kernel<D, KV, kWindow, kSoftCap>::Variant;
  using Params = typename Kernel<D, KV, kWindow, kSoftCap>::Params;
  const pacts_problem& p = *c.p;
  const uint32_t batch = static_cast<uint32_t>(p.batch);
  const uint32_t hq = static_cast<uint32_t>(p.num_q_heads);
  // FlashInfer's NHD stride order: page, token, head (the last dim contiguous).
  const int64_t k_strides[3] = {p.k_layout.s_page, p.k_layout.s_tok, p.k_layout.s_head};
  const int64_t* const v_strides = k_strides;  // V in K's layout (run, v_in_k_layout)
  flashinfer::paged_kv_t<KV, IdType> kv(
      static_cast<uint32_t>(p.num_kv_heads), static_cast<uint32_t>(p.page_size), D, batch,
      flashinfer::QKVLayout::kNHD, static_cast<KV*>(l.k), static_cast<KV*>(l.v), k_strides,
      v_strides, l.indices, l.indptr, l.last_len);
  Params params(static_cast<nv_bfloat16*>(l.q), nullptr, kv, static_cast<nv_bfloat16*>(l.out),
                l.lse, nullptr, hq, static_cast<IdType>(p.q_layout.s_batch),
                static_cast<IdType>(p.q_layout.s_head), c.window_left, c.soft_cap, c.sm_scale,
                1.0f, 1.0e4f);
  const flashinfer::DecodePlanInfo& plan = l.plan;
  char* ib = static_cast<char*>(l.int_ws);
  params.request_indices = reinterpret_cast<IdType*>(ib + plan.request_indices_offset);
  params.kv_tile_indices = reinterpret_cast<IdType*>(ib + plan.kv_tile_indices_offset);
  params.o_indptr = reinterpret_cast<IdType*>(ib + plan.o_indptr_offset);
  params.kv_chunk_size_ptr = reinterpret_cast<IdType*>(ib + plan.kv_chunk_size_ptr_offset);
  params.padded_batch_size = static_cast<uint32_t>(plan.padded_batch_size);
  nv_bfloat16* tmp_v = nullptr;
  float* tmp_s = nullptr;
  if (plan.split_kv) {
    tmp_v = reinterpret_cast<nv_bfloat16*>(static_cast<char*>(l.float_ws) + plan.v_offset);
    tmp_s = reinterpret_cast<float*>(static_cast<char*>(l.float_ws) + plan.s_offset);
  }
  return flashinfer::BatchDecodeWithPagedKVCacheDispatched<D, PosEncodingMode::kNone, Variant>(
      params, tmp_v, tmp_s, false, stream);
}

// FlashInfer's planner (DecodePlan, on the instance's workspaces, pinned buffer and stream), then
// either the decode on the instance's staging copies (run: timed == nullptr) or, for a timed call,
// the plan and the launch recorded in *timed and *fn for enqueue(). The result names the plan and
// the variant.
template <uint32_t D, typename KV, bool kWindow, bool kSoftCap>
cudaError_t launch(pacts_backend_instance& self, Call& c, pacts_backend_result& result,
                   Launch* timed, DecodeFn* fn) {
  using flashinfer::PosEncodingMode;
  using Variant = typename Kernel<D, KV, kWindow, kSoftCap>::Variant;
  using Params = typename Kernel<D, KV, kWindow, kSoftCap>::Params;
  const pacts_problem& p = *c.p;
  const uint32_t batch = static_cast<uint32_t>(p.batch);
  const uint32_t hq = static_cast<uint32_t>(p.num_q_heads);
  flashinfer::DecodePlanInfo plan;
  cudaError_t status = cudaErrorInvalidValue;
  DISPATCH_GQA_GROUP_SIZE(static_cast<uint32_t>(c.group), GROUP_SIZE, {
    auto estimate = flashinfer::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<
        GROUP_SIZE, D, PosEncodingMode::kNone, Variant, Params>;
    status = flashinfer::DecodePlan<D, PosEncodingMode::kNone, Variant, Params>(
        self.float_ws.ptr, self.float_ws.bytes, self.int_ws.ptr, self.pinned, kIntWorkspace, plan,
        c.indptr.data(), batch, hq, static_cast<uint32_t>(p.page_size), false, self.stream,
        estimate);
  });
  if (status != cudaSuccess) return status;
  if (timed == nullptr) {
    Launch l;
    l.q = self.q.ptr;
    l.k = self.k.ptr;
    l.v = self.v.ptr;
    l.out = self.out.ptr;
    l.lse = static_cast<float*>(self.lse.ptr);
    l.indices = static_cast<IdType*>(self.indices.ptr);
    l.indptr = static_cast<IdType*>(self.indptr.ptr);
    l.last_len = static_cast<IdType*>(self.last_len.ptr);
    l.float_ws = self.float_ws.ptr;
    l.int_ws = self.int_ws.ptr;
    l.plan = plan;
    status = decode<D, KV, kWindow, kSoftCap>(c, l, self.stream);
    if (status != cudaSuccess) return status;
  } else {
    timed->float_ws = self.float_ws.ptr;
    timed->int_ws = self.int_ws.ptr;
    timed->plan = plan;
    *fn = &decode<D, KV, kWindow, kSoftCap>;
  }
  // The plan used: the chunk FlashInfer split the contexts into (the pinned copy of what the plan
  // uploaded), or unsplit.
  const IdType chunk = *reinterpret_cast<const IdType*>(static_cast<const char*>(self.pinned) +
                                                        plan.kv_chunk_size_ptr_offset);
  if (plan.split_kv && chunk > 0) {
    result.partition_size = chunk;
    result.max_partitions = static_cast<int32_t>(
        std::max<int64_t>(1, (c.max_context + chunk - 1) / chunk));
  } else {
    result.partition_size = 0;
    result.max_partitions = 1;
  }
  set_text(result.variant, sizeof result.variant,
           std::string("flashinfer-decode D") + std::to_string(D) + " kv-" + KvName<KV>::kName +
               (kWindow ? " window" : "") + (kSoftCap ? " softcap" : "") +
               (plan.split_kv ? " split" : ""));
  return cudaSuccess;
}

template <uint32_t D, typename KV>
cudaError_t launch_variant(pacts_backend_instance& self, Call& c, pacts_backend_result& r,
                           Launch* timed, DecodeFn* fn) {
  const bool window = c.window_left >= 0, cap = c.soft_cap > 0.0f;
  if (window && cap) return launch<D, KV, true, true>(self, c, r, timed, fn);
  if (window) return launch<D, KV, true, false>(self, c, r, timed, fn);
  if (cap) return launch<D, KV, false, true>(self, c, r, timed, fn);
  return launch<D, KV, false, false>(self, c, r, timed, fn);
}

// run() with timed == nullptr; prepare() with the prepared call's Launch and DecodeFn.
template <uint32_t D>
cudaError_t launch_kv(pacts_backend_instance& self, Call& c, pacts_backend_result& r,
                      Launch* timed, DecodeFn* fn) {
  switch (c.p->kv_format) {
    case PACTS_FORMAT_BF16: return launch_variant<D, nv_bfloat16>(self, c, r, timed, fn);
    case PACTS_FORMAT_E4M3FN: return launch_variant<D, __nv_fp8_e4m3>(self, c, r, timed, fn);
    default: return launch_variant<D, __nv_fp8_e5m2>(self, c, r, timed, fn);
  }
}

// The kernels are compiled in one translation unit per head dim (CMake builds this file once
// with each PACTS_PEER_HEAD_DIM, and once without for the rest): FlashInfer's templates are slow
// to compile, and the parts build in parallel.
#if defined(PACTS_PEER_HEAD_DIM)
template cudaError_t launch_kv<PACTS_PEER_HEAD_DIM>(pacts_backend_instance&, Call&,
                                                    pacts_backend_result&, Launch*, DecodeFn*);
}  // namespace pacts_flashinfer_peer
#else
extern template cudaError_t launch_kv<64>(pacts_backend_instance&, Call&, pacts_backend_result&,
                                          Launch*, DecodeFn*);
extern template cudaError_t launch_kv<128>(pacts_backend_instance&, Call&, pacts_backend_result&,
                                           Launch*, DecodeFn*);
extern template cudaError_t launch_kv<256>(pacts_backend_instance&, Call&, pacts_backend_result&,
                                           Launch*, DecodeFn*);

pacts_backend_capabilities capabilities() {
  pacts_backend_capabilities c{};
  c.num_q_formats = 1;
  c.q_formats[0] = PACTS_FORMAT_BF16;
  c.num_kv_formats = 3;
  c.kv_formats[0] = PACTS_FORMAT_BF16;
  c.kv_formats[1] = PACTS_FORMAT_E4M3FN;
  c.kv_formats[2] = PACTS_FORMAT_E5M2;
  c.num_out_formats = 1;
  c.out_formats[0] = PACTS_FORMAT_BF16;
  c.num_scale_modes = 1;
  c.scale_modes[0] = PACTS_SCALE_NONE;
  c.num_head_dims = 3;
  for (int i = 0; i < 3; ++i) c.head_dims[i] = kHeadDims[i];
  c.min_page_size = 8;
  c.max_page_size = 256;
  c.max_q_len = 1;   // the decode kernel: one query token per sequence
  c.max_group = 8;   // 1, 2, 3, 4, 6, 8 only: 5 and 7 are refused at run time (see run)
  c.chunked_layouts = 0;
  c.sinks = 0;
  c.window = 1;
  c.softcap = 1;
  c.lse = 1;
  c.deterministic = 1;
  c.split_plans = 0;  // FlashInfer's planner picks the split; hints are not honoured
  c.plan_replay = 0;
  c.large_buffers = 0;
  c.vector_alignment_bytes = 16;  // 16-byte vector loads of Q, K, V rows and output stores
  // Q strides and FlashInfer's page strides are 32-bit (IdType, uint32_t).
  c.max_element_offset = std::numeric_limits<int32_t>::max();
  return c;
}

// The numerics of the CUDA-core decode as the source computes it (decode.cuh, state.cuh,
// cascade.cuh, math.cuh):
// - Q and K are loaded into fp32 exactly; the logit is an fp32 dot product, then multiplied by
//   sm_scale * log2(e) (fp32); with a soft-cap by sm_scale * rcp.approx(c), tanh.approx.f32 and
//   c * log2(e). The adapter passes softmax_scale * q_scale as sm_scale (one fp32 rounding).
// - P = ex2.approx.ftz.f32 of the base-2 logit minus the running maximum, in fp32; P.V and the
//   denominator accumulate in fp32 on the CUDA cores; subnormal results are flushed.
// - A split plan stores each chunk's normalised output in the output type (bf16) and merges them
//   with ex2.approx in fp32; the LSE is m + lg2.approx(d), in base 2 (the adapter multiplies by
//   ln 2 in binary64 and rounds once).
// The constants are what those operations allow (PTX ISA: ex2.approx.ftz.f32 and lg2.approx.f32
// within about 2^-22 relative, tanh.approx.f32 within about 2^-11), with a margin of 2x where the
// ISA states an approximate figure.
pacts_backend_numerics numerics() {
  pacts_backend_numerics n{};
  n.u_logit = std::ldexp(1.0, -22);   // the fp32 dot product and three fp32 multiplications
  n.u_q = 0.0;                        // Q is not rounded before Q.K
  n.u_p = std::ldexp(1.0, -24);       // P stays fp32
  n.eta_p = std::ldexp(1.0, -126);    // ftz: a P below fp32's normal range is flushed
  n.u_acc = std::ldexp(1.0, -23);     // fp32 accumulation and the per-tile rescale
  n.u_partial = std::ldexp(1.0, -8);  // split partials stored as bf16
  n.eps_exp = std::ldexp(1.0, -21);   // ex2.approx.ftz.f32
  n.eps_tanh = std::ldexp(1.0, -10);  // tanh.approx.f32
  n.eps_log = std::ldexp(1.0, -20);   // lg2.approx.f32
  n.p_rounded_in_denominator = 0;
  n.ftz = 1;
  return n;
}

pacts_status_code create(pacts_backend_instance** instance, char* message, uint32_t bytes) {
  *instance = nullptr;
  try {
    auto* self = new pacts_backend_instance;
    cudaError_t e = cudaStreamCreateWithFlags(&self->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = self->float_ws.reserve(kFloatWorkspace);
    if (e == cudaSuccess) e = self->int_ws.reserve(kIntWorkspace);
    if (e == cudaSuccess) e = cudaMallocHost(&self->pinned, kIntWorkspace);
    if (e != cudaSuccess) {
      set_text(message, bytes, std::string("flashinfer-decode: create: ") + cudaGetErrorString(e));
      delete self;
      return PACTS_DEVICE_ERROR;
    }
    *instance = self;
    return PACTS_OK;
  } catch (const std::exception& ex) {
    set_text(message, bytes, std::string("flashinfer-decode: create: ") + ex.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "flashinfer-decode: create: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

void destroy(pacts_backend_instance* instance) { delete instance; }

// NotSupported (what FlashInfer's decode cannot take, beyond the declared capabilities), or "".
std::string unsupported(const pacts_problem& p) {
  const int32_t g = p.num_q_heads / p.num_kv_heads;
  bool group_ok = false;
  for (int32_t x : kGroups) group_ok = group_ok || x == g;
  if (!group_ok)
    return "num_q_heads / num_kv_heads " + std::to_string(g) +
           ": FlashInfer's decode is built for groups 1, 2, 3, 4, 6 and 8";
  const auto u32 = [](int64_t s) { return s >= 0 && s <= std::numeric_limits<uint32_t>::max(); };
  for (const pacts_pool_layout* l : {&p.k_layout, &p.v_layout})
    if (!u32(l->s_page) || !u32(l->s_tok) || !u32(l->s_head))
      return "pool strides (" + std::to_string(l->s_page) + ", " + std::to_string(l->s_head) +
             ", " + std::to_string(l->s_tok) + "): FlashInfer's page strides are 32-bit";
  return "";
}

bool same_strides(const pacts_pool_layout& a, const pacts_pool_layout& b) {
  return a.s_page == b.s_page && a.s_head == b.s_head && a.s_tok == b.s_tok;
}

// FlashInfer's decode addresses V through K's strides (decode.cuh takes one offset for both; its
// Python binding refuses K and V strides that differ). A V pool in another layout is therefore
// copied into K's layout, as an integrator would have to: every element (page, head, slot, dim)
// is carried, the unowned ones with their bytes, and the copy's bytes that no element reaches are
// filled with `poison`. The copy spans K's extent (the same shape and element size).
std::vector<uint8_t> v_in_k_layout(const pacts_problem& p, const pacts_buffers& b, int poison) {
  const size_t esz = p.kv_format == PACTS_FORMAT_BF16 ? 2 : 1;
  std::vector<uint8_t> out(pacts::spec::required_extents(p).k, static_cast<uint8_t>(poison));
  const auto* src = static_cast<const uint8_t*>(b.v.data);
  for (int64_t pg = 0; pg < p.num_pages; ++pg)
    for (int64_t h = 0; h < p.num_kv_heads; ++h)
      for (int64_t t = 0; t < p.page_size; ++t) {
        const int64_t from = pg * p.v_layout.s_page + h * p.v_layout.s_head + t * p.v_layout.s_tok;
        const int64_t to = pg * p.k_layout.s_page + h * p.k_layout.s_head + t * p.k_layout.s_tok;
        std::memcpy(out.data() + to * esz, src + from * esz, size_t(p.head_dim) * esz);
      }
  return out;
}

// The checks of run() and prepare(): validate() with the declared requirements, then what
// FlashInfer's decode cannot take (NotSupported, beyond the declared capabilities). True when
// `result` holds the refusal.
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
  else if (p.out_format != PACTS_FORMAT_BF16) why = "out_format: accepted: bf16";
  else if (p.kv_format != PACTS_FORMAT_BF16 && p.kv_format != PACTS_FORMAT_E4M3FN &&
           p.kv_format != PACTS_FORMAT_E5M2)
    why = "kv_format: accepted: bf16, e4m3fn, e5m2";
  else if (p.k_scale_mode != PACTS_SCALE_NONE || p.v_scale_mode != PACTS_SCALE_NONE)
    why = "k_scale_mode / v_scale_mode: accepted: none (FlashInfer's decode kernel takes no KV scale)";
  else if (p.q_len != 1) why = "q_len " + std::to_string(p.q_len) + ": accepted: 1";
  else if (p.has_sinks) why = "has_sinks 1: accepted: 0";
  else if (p.k_layout.chunk != p.head_dim || p.v_layout.chunk != p.head_dim)
    why = "chunk: accepted: head_dim (NHD / HND rows)";
  else if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    why = "head_dim " + std::to_string(p.head_dim) + ": accepted: 64, 128, 256";
  else why = unsupported(p);
  if (!why.empty()) {
    result->status = PACTS_NOT_SUPPORTED;
    set_text(result->message, sizeof result->message, why);
    return true;
  }
  return false;
}

// The call in FlashInfer's terms, with its page list (spec/operator.md §12) from the host copies
// of the device-resident inputs in `b`. False, with DeviceError in `result`, where FlashInfer
// would read through an entry outside its buffers (pacts_peer::unlaunchable).
bool make_call(const pacts_problem& p, const pacts_buffers& b, Call& c,
               pacts_backend_result* result) {
  c.p = &p;
  c.group = p.num_q_heads / p.num_kv_heads;
  c.window_left = p.window > 0 ? p.window - 1 : -1;
  c.sm_scale = p.softmax_scale * p.q_scale;
  c.soft_cap = p.softcap;
  if (const std::string why_not = pacts_peer::unlaunchable(
          p, b, "FlashInfer", "reads every page of the context (a window masks, it does not skip)");
      !why_not.empty()) {
    result->status = PACTS_DEVICE_ERROR;
    set_text(result->message, sizeof result->message, why_not);
    return false;
  }
  const auto* lens = static_cast<const int32_t*>(b.context_lens.data);
  const auto* table = static_cast<const int32_t*>(b.block_table.data);
  const int64_t P = p.page_size;
  c.indptr.push_back(0);
  for (int32_t s = 0; s < p.batch; ++s) {
    const int64_t n = lens[s];
    const int64_t pages = (n + P - 1) / P;
    for (int64_t col = 0; col < pages; ++col)
      c.indices.push_back(table[int64_t{s} * p.block_table_stride + col]);
    c.indptr.push_back(static_cast<int32_t>(c.indices.size()));
    c.last_len.push_back(static_cast<int32_t>(pages == 0 ? 0 : n - (pages - 1) * P));
    c.max_context = std::max(c.max_context, n);
  }
  return true;
}

cudaError_t launch_dim(pacts_backend_instance& self, Call& c, pacts_backend_result& result,
                       Launch* timed, DecodeFn* fn) {
  switch (c.p->head_dim) {
    case 64: return launch_kv<64>(self, c, result, timed, fn);
    case 128: return launch_kv<128>(self, c, result, timed, fn);
    default: return launch_kv<256>(self, c, result, timed, fn);
  }
}

void run(pacts_backend_instance* self, const pacts_problem* problem, const pacts_buffers* buffers,
         const pacts_backend_plan_hint* /*hint: FlashInfer plans itself*/,
         pacts_backend_result* result) {
  try {
    const pacts_problem& p = *problem;
    const pacts_buffers& b = *buffers;
    if (refused(p, b, result)) return;
    result->status = PACTS_OK;
    result->partition_size = 0;
    result->max_partitions = 1;
    if (p.batch == 0) return;

    // The page list (spec/operator.md §12), from the host copies of the device-resident inputs.
    Call c;
    if (!make_call(p, b, c, result)) return;

    const size_t rows = size_t(p.batch) * p.num_q_heads;
    const size_t out_bytes = rows * p.head_dim * 2;
    cudaError_t e = cudaSuccess;
    const auto step = [&](cudaError_t x) {
      if (e == cudaSuccess) e = x;
    };
    step(self->q.reserve(b.q.bytes));
    step(self->k.reserve(b.k.bytes));
    step(self->v.reserve(b.v.bytes));
    step(self->out.reserve(out_bytes));
    step(self->lse.reserve(rows * sizeof(float)));
    step(self->indptr.reserve(c.indptr.size() * sizeof(int32_t)));
    step(self->indices.reserve(std::max<size_t>(1, c.indices.size()) * sizeof(int32_t)));
    step(self->last_len.reserve(c.last_len.size() * sizeof(int32_t)));
    const cudaStream_t st = self->stream;
    step(cudaMemcpyAsync(self->q.ptr, b.q.data, b.q.bytes, cudaMemcpyHostToDevice, st));
    step(cudaMemcpyAsync(self->k.ptr, b.k.data, b.k.bytes, cudaMemcpyHostToDevice, st));
    const int poison = (self->runs++ % 2 == 0) ? 0xFF : 0x7E;
    std::vector<uint8_t> v_copy;
    if (same_strides(p.k_layout, p.v_layout)) {
      step(cudaMemcpyAsync(self->v.ptr, b.v.data, b.v.bytes, cudaMemcpyHostToDevice, st));
    } else {
      v_copy = v_in_k_layout(p, b, poison);
      step(self->v.reserve(v_copy.size()));
      step(cudaMemcpyAsync(self->v.ptr, v_copy.data(), v_copy.size(), cudaMemcpyHostToDevice, st));
    }
    step(cudaMemcpyAsync(self->indptr.ptr, c.indptr.data(), c.indptr.size() * 4,
                         cudaMemcpyHostToDevice, st));
    if (!c.indices.empty())
      step(cudaMemcpyAsync(self->indices.ptr, c.indices.data(), c.indices.size() * 4,
                           cudaMemcpyHostToDevice, st));
    step(cudaMemcpyAsync(self->last_len.ptr, c.last_len.data(), c.last_len.size() * 4,
                         cudaMemcpyHostToDevice, st));
    // Poison what FlashInfer should overwrite, alternating between runs (backend_abi.h): the
    // output and LSE staging (NaN bytes, or a large finite value) and the split workspace.
    step(cudaMemsetAsync(self->out.ptr, poison, out_bytes, st));
    step(cudaMemsetAsync(self->lse.ptr, poison, rows * sizeof(float), st));
    step(cudaMemsetAsync(self->float_ws.ptr, poison, self->float_ws.bytes, st));
    step(cudaStreamSynchronize(st));
    if (e == cudaSuccess) e = launch_dim(*self, c, *result, nullptr, nullptr);
    std::vector<uint16_t> out(rows * p.head_dim);
    std::vector<float> lse(rows);
    step(cudaMemcpyAsync(out.data(), self->out.ptr, out_bytes, cudaMemcpyDeviceToHost, st));
    step(cudaMemcpyAsync(lse.data(), self->lse.ptr, rows * sizeof(float), cudaMemcpyDeviceToHost,
                         st));
    step(cudaStreamSynchronize(st));
    step(cudaGetLastError());
    if (e != cudaSuccess) {
      result->status = PACTS_DEVICE_ERROR;
      set_text(result->message, sizeof result->message,
               std::string("flashinfer-decode: CUDA: ") + cudaGetErrorString(e));
      return;
    }
    // FlashInfer writes dense [B, Hq, D] and [B, Hq]; pacts' layouts may leave gaps, which are
    // not written.
    auto* dst = static_cast<uint16_t*>(b.out.data);
    auto* dst_lse = static_cast<float*>(b.lse.data);
    for (int64_t s = 0; s < p.batch; ++s)
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        const size_t row = size_t(s) * p.num_q_heads + h;
        std::memcpy(dst + s * p.out_layout.s_batch + h * p.out_layout.s_head,
                    out.data() + row * p.head_dim, size_t(p.head_dim) * 2);
        if (p.want_lse) {
          const float base2 = lse[row];
          dst_lse[s * p.lse_layout.s_batch + h * p.lse_layout.s_head] =
              static_cast<float>(static_cast<double>(base2) * 0.69314718055994530942);
        }
      }
  } catch (const std::exception& ex) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message, std::string("flashinfer-decode: ") + ex.what());
  } catch (...) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message, "flashinfer-decode: a non-standard exception");
  }
}

// What a timed call cannot do without a copy or a conversion per call (NotSupported), or "".
std::string timed_refusal(const pacts_problem& p) {
  if (p.want_lse)
    return "want_lse 1: timed calls accept 0 (FlashInfer's LSE is base 2; run() converts it to "
           "the natural log on the host, a step per call that the timed decode would include)";
  return pacts_peer::dense_out_refusal(p, "FlashInfer");
}

}  // namespace pacts_flashinfer_peer

// A prepared timed call (backend_abi.h, version 3): the page list in its own device memory, V in
// K's layout where pacts' V layout differs, FlashInfer's plan in the instance's workspaces, and
// the launch of the instantiation that the problem selects.
struct pacts_backend_prepared {
  pacts_backend_instance* owner = nullptr;
  pacts_problem problem{};
  pacts_flashinfer_peer::Call call;  // call.p = &problem
  pacts_flashinfer_peer::Launch launch;
  pacts_flashinfer_peer::DecodeFn decode = nullptr;  // nullptr: nothing to launch (batch 0)
  pacts_peer::DeviceBuffer indptr, indices, last_len, v;
};

namespace pacts_flashinfer_peer {

void prepare(pacts_backend_instance* self, const pacts_problem* problem,
             const pacts_buffers* buffers, const int32_t* host_block_table,
             const int32_t* host_context_lens,
             const pacts_backend_plan_hint* /*hint: FlashInfer plans itself*/,
             pacts_backend_prepared** prepared, pacts_backend_result* result) {
  *prepared = nullptr;
  try {
    const pacts_problem& p = *problem;
    const pacts_buffers& b = *buffers;  // device memory
    if (self->prepared != nullptr) {
      result->status = PACTS_INTERNAL;
      set_text(result->message, sizeof result->message,
               "flashinfer-decode: prepare: this instance still holds a prepared call; release "
               "it first (backend_abi.h: at most one per instance)");
      return;
    }
    if (refused(p, b, result)) return;
    if (const std::string why = timed_refusal(p); !why.empty()) {
      result->status = PACTS_NOT_SUPPORTED;
      set_text(result->message, sizeof result->message, why);
      return;
    }
    auto call = std::make_unique<pacts_backend_prepared>();
    call->owner = self;
    call->problem = p;
    Call& c = call->call;
    c.p = &call->problem;
    result->status = PACTS_OK;
    result->partition_size = 0;
    result->max_partitions = 1;
    if (p.batch != 0) {
      const pacts_buffers host =
          pacts_peer::with_host_copies(b, host_block_table, host_context_lens);
      if (!make_call(call->problem, host, c, result)) return;

      cudaError_t e = cudaSuccess;
      const auto step = [&](cudaError_t x) {
        if (e == cudaSuccess) e = x;
      };
      const cudaStream_t st = self->stream;
      // pacts filled its buffers on its own streams: they are complete before ours reads them.
      step(cudaDeviceSynchronize());
      // The page list in the call's own device memory.
      step(call->indptr.reserve(c.indptr.size() * sizeof(IdType)));
      step(call->indices.reserve(std::max<size_t>(1, c.indices.size()) * sizeof(IdType)));
      step(call->last_len.reserve(c.last_len.size() * sizeof(IdType)));
      step(cudaMemcpyAsync(call->indptr.ptr, c.indptr.data(), c.indptr.size() * sizeof(IdType),
                           cudaMemcpyHostToDevice, st));
      if (!c.indices.empty())
        step(cudaMemcpyAsync(call->indices.ptr, c.indices.data(),
                             c.indices.size() * sizeof(IdType), cudaMemcpyHostToDevice, st));
      step(cudaMemcpyAsync(call->last_len.ptr, c.last_len.data(),
                           c.last_len.size() * sizeof(IdType), cudaMemcpyHostToDevice, st));
      Launch& l = call->launch;
      l.q = b.q.data;
      l.k = b.k.data;
      l.out = b.out.data;
      l.lse = nullptr;  // want_lse 0 (timed_refusal)
      l.indices = static_cast<IdType*>(call->indices.ptr);
      l.indptr = static_cast<IdType*>(call->indptr.ptr);
      l.last_len = static_cast<IdType*>(call->last_len.ptr);
      // The poison of this call's scratch bytes, alternating between calls as run() does
      // (backend_abi.h): written once here, not per enqueue.
      const int poison = (self->runs++ % 2 == 0) ? 0xFF : 0x7E;
      if (same_strides(p.k_layout, p.v_layout)) {
        l.v = b.v.data;
      } else {
        // V into K's layout on the device (run: v_in_k_layout), the bytes that no element
        // reaches poisoned.
        const size_t bytes = pacts::spec::required_extents(p).k;
        const size_t esz = p.kv_format == PACTS_FORMAT_BF16 ? 2 : 1;
        step(call->v.reserve(bytes));
        if (bytes > 0) step(cudaMemsetAsync(call->v.ptr, poison, bytes, st));
        if (e == cudaSuccess)
          step(pacts_peer::gather_pool(call->v.ptr, p.k_layout, b.v.data, p.v_layout, p, esz, st));
        l.v = call->v.ptr;
      }
      step(cudaMemsetAsync(self->float_ws.ptr, poison, self->float_ws.bytes, st));
      step(cudaStreamSynchronize(st));
      // FlashInfer's planner, whose tables it uploads into the instance's int workspace.
      if (e == cudaSuccess) e = launch_dim(*self, c, *result, &l, &call->decode);
      step(cudaStreamSynchronize(st));
      step(cudaGetLastError());
      if (e != cudaSuccess) {
        result->status = PACTS_DEVICE_ERROR;
        set_text(result->message, sizeof result->message,
                 std::string("flashinfer-decode: prepare: CUDA: ") + cudaGetErrorString(e));
        return;
      }
      // The host page list is no longer needed (the planner read it; the device has its copy).
      c.indptr = {};
      c.indices = {};
      c.last_len = {};
    }
    *prepared = call.release();
    self->prepared = *prepared;
  } catch (const std::exception& ex) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             std::string("flashinfer-decode: prepare: ") + ex.what());
  } catch (...) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             "flashinfer-decode: prepare: a non-standard exception");
  }
}

// FlashInfer's decode launch alone on pacts' stream: no allocation, copy or synchronisation.
pacts_status_code enqueue(pacts_backend_prepared* prepared, void* stream, char* message,
                          uint32_t bytes) {
  try {
    if (prepared->decode == nullptr) return PACTS_OK;  // batch 0: nothing to compute
    const cudaError_t e =
        prepared->decode(prepared->call, prepared->launch, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      set_text(message, bytes, std::string("flashinfer-decode: enqueue: CUDA: ") +
                                   cudaGetErrorString(e));
      return PACTS_DEVICE_ERROR;
    }
    return PACTS_OK;
  } catch (const std::exception& ex) {
    set_text(message, bytes, std::string("flashinfer-decode: enqueue: ") + ex.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "flashinfer-decode: enqueue: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

// FlashInfer's decode checks no device-resident input (spec/contract.md §4).
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
  d.v2.v1.name = "flashinfer-decode";
  d.v2.v1.device = device.c_str();
  d.v2.v1.driver = driver.c_str();
  d.v2.v1.runtime = runtime.c_str();
  d.v2.v1.version = "FlashInfer " PACTS_PEER_FLASHINFER_VERSION;
  d.v2.v1.capabilities = capabilities();
  d.v2.v1.numerics = numerics();
  d.v2.v1.create = create;
  d.v2.v1.destroy = destroy;
  d.v2.v1.run = run;
  d.v2.v1.run_replayed = nullptr;
  d.v2.v2.q_requant = PACTS_Q_REQUANT_NONE;
  d.v2.v2.batch_invariant = 0;
  d.v3.timed_calls = 1;
  d.v3.memory = PACTS_BACKEND_MEMORY_DEVICE;
  // enqueue() launches FlashInfer's kernels (and sets their shared-memory attribute) on the given
  // stream and nothing else: no allocation, copy or synchronisation, so it can be captured.
  d.v3.graph_capturable = 1;
  d.v3.prepare = prepare;
  d.v3.enqueue = enqueue;
  d.v3.device_error = device_error;
  d.v3.release = release;
  return d;
}

}  // namespace pacts_flashinfer_peer

extern "C" PACTS_BACKEND_EXPORT const pacts_backend_v1* pacts_backend_entry(void) {
  static const pacts_backend_v3 descriptor = pacts_flashinfer_peer::make_descriptor();
  return &descriptor.v2.v1;
}
#endif  // PACTS_PEER_HEAD_DIM
