// A peer kernel behind pacts' C ABI (pacts/backend_abi.h): TensorRT-LLM's XQA decode kernel as
// FlashInfer vendors it (csrc/xqa/mha.cu, the generic mma.sync kernel that FlashInfer's xqa() and
// trtllm_batch_decode_with_kv_cache(backend="xqa") run for a bf16 or fp16 cache on SM90;
// mha_sm90.cu serves only an fp8 cache there, flashinfer/xqa.py:386-393), built from a FlashInfer
// checkout that this repository does not hold (-DPACTS_PEER_XQA_DIR, docs/qualifications.md).
// Line numbers below are of that checkout's commit (PACTS_PEER_XQA_VERSION); bare ones (:N) are of
// csrc/xqa/mha.cu, the others name their file.
//
// XQA is configured by compile-time macros (flashinfer/jit/xqa.py gen_xqa_module). Each
// configuration is its own object (xqa_config.cu, once per entry of PACTS_XQA_CONFIGS in
// xqa_launch.h: head dims 128 and 256, pages of 16 and 64 tokens, groups 1 and 8, with and without
// the sliding window); the adapter picks the one the problem needs and refuses the others.
//
// The adapter translates and never corrects: it passes pacts' block table, context lengths, query,
// pools and sinks to XQA's launcher as they are where XQA can address them (spec/operator.md §12:
// they are xqa()'s page_table, seq_lens, q, k_cache / v_cache and sinks), its window as
// sliding_win_size and softmax_scale * q_scale as q_scale * sqrt(head_dim), as FlashInfer's
// wrapper does (flashinfer/decode.py:3771, 3811-3813). A pool XQA cannot address is copied into a
// layout it can. What XQA cannot take it refuses with NotSupported; what XQA does with an input is
// what pacts judges.
//
// The timed calls (backend_abi.h, version 3) split the same work: prepare() checks as run() does,
// copies a pool in a layout XQA cannot address on the device and poisons the workspace; enqueue()
// is XQA's launch alone (one kernel, whose last CTA per sequence also merges the multi-block
// partials), reading pacts' device buffers in place and writing pacts' `out`.
//
// One exception keeps a run alive: XQA checks no device-resident input (spec/contract.md §4), so a
// context length above the block table or a page id beyond the pool would make it read outside
// its buffers, and a fault on the device ends the process. The adapter looks at those host copies
// first and, where XQA would read through them, launches nothing and answers DeviceError naming
// the entry. Where XQA does not read through a value, it launches: the columns of the tiles a
// window skips whole are never read, and a page id with the sign bit set is XQA's "no page"
// (HeadPtr, csrc/xqa/mhaUtils.cuh:80-87), whose rows it loads as zeros (the copy of size 0,
// mhaUtils.cuh:145-155) instead of reading them.
#include <pacts/backend_abi.h>
#include <pacts/spec/validate.h>

#include <cuda_runtime.h>

#include "peer_cuda.h"
#include "xqa_launch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef PACTS_PEER_XQA_VERSION
#define PACTS_PEER_XQA_VERSION "unknown"
#endif

namespace pacts_xqa_peer {

using pacts_peer::DeviceBuffer;
using pacts_peer::set_text;

// The configurations of xqa_launch.h, looked up by (head dim, page size, group, window).
struct Config {
  int32_t head_dim, page_size, group, window;
  LaunchFn launch;
};
#define PACTS_XQA_ENTRY(d, p, g, w) Config{d, p, g, w, &PACTS_XQA_LAUNCH_NAME(d, p, g, w)},
constexpr Config kConfigs[] = {PACTS_XQA_CONFIGS(PACTS_XQA_ENTRY)};
#undef PACTS_XQA_ENTRY

constexpr int32_t kHeadDims[] = {128, 256};
constexpr int32_t kPageSizes[] = {16, 64};
constexpr int32_t kGroups[] = {1, 8};

// ctaTile.x: the keys one CTA takes per step, warpTile.x 64 (:89) times ctaShapeInWarps.x 4 (:76,
// :100-102). The multi-block plan splits a sequence into these tiles.
constexpr int64_t kTileKeys = 256;
// FlashInfer's wrapper takes one zero-initialised workspace and reserves its first 8 MiB for the
// semaphores, the rest being the scratch (flashinfer/decode.py:3656, 3768-3769); its tests and
// benchmarks pass 128 MiB.
constexpr size_t kWorkspaceBytes = size_t{128} << 20;
constexpr size_t kSemaphoreBytes = size_t{8} << 20;
constexpr size_t kScratchBytes = kWorkspaceBytes - kSemaphoreBytes;
// enable_pdl: FlashInfer's default, device_support_pdl(), is true from SM90 on
// (flashinfer/xqa.py:322, flashinfer/utils.py:828-832).
constexpr bool kPdl = true;

LaunchFn find_launch(int32_t head_dim, int32_t page_size, int32_t group, bool window) {
  for (const Config& c : kConfigs)
    if (c.head_dim == head_dim && c.page_size == page_size && c.group == group &&
        c.window == (window ? 1 : 0))
      return c.launch;
  return nullptr;
}

template <size_t N>
bool listed(const int32_t (&values)[N], int32_t x) {
  return std::find(values, values + N, x) != values + N;
}

template <size_t N>
std::string list_text(const int32_t (&values)[N]) {
  std::string s;
  for (size_t i = 0; i < N; ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s;
}

}  // namespace pacts_xqa_peer

struct pacts_backend_instance {
  cudaStream_t stream = nullptr;
  int sm_count = 0;
  pacts_peer::DeviceBuffer q, k, v, out, table, lens, sinks, semaphores, scratch;
  uint64_t runs = 0;
  pacts_backend_prepared* prepared = nullptr;  // the timed call that uses the workspace
  ~pacts_backend_instance() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

namespace pacts_xqa_peer {

// How one problem maps onto XQA.
struct Translation {
  LaunchFn launch = nullptr;
  pacts_pool_layout kv{};     // the layout XQA addresses both pools in: K's, or dense NHD
  bool copy_k = false;        // K (V) is copied into kv first
  bool copy_v = false;
  uint64_t kv_bytes = 0;      // the extent of a copy in kv
  uint64_t strides[3] = {};   // kv's page, token and head strides as XQA takes them (elements)
  bool dense_q = false;       // the query is [batch, num_q_heads, head_dim], XQA's layout
  uint32_t table_width = 0;   // the page list's row width (maxSeqLen / page size)
  uint32_t sub_seqs = 1;      // nbSubSeqPerSeq: CTAs per (sequence, KV head)
  float q_scale = 1.0f;
};

// A stride that XQA multiplies only by 0 when the dimension has one index (validate() accepts any
// value there): 0.
inline int64_t effective(int64_t stride, int64_t extent) { return extent > 1 ? stride : 0; }

// Whether XQA can address a pool in place, and its strides as XQA takes them. XQA reads a head's
// head_dim elements as one contiguous row (GMemCacheHead, csrc/xqa/mha.h:63-64) and addresses rows
// by page, token and head strides counted in whole heads: launchMHAFlashInfer divides the element
// strides by head_dim, discarding any remainder, into uint32_t (:3145-3152), and HeadPtr forms
// page * stride_page + token * stride_token + head * stride_head in 32-bit arithmetic
// (mhaUtils.cuh:80-87).
bool addressable(const pacts_pool_layout& l, const pacts_problem& p, uint64_t (&strides)[3]) {
  if (l.chunk != p.head_dim) return false;
  const int64_t s[3] = {effective(l.s_page, p.num_pages), effective(l.s_tok, p.page_size),
                        effective(l.s_head, p.num_kv_heads)};
  for (int i = 0; i < 3; ++i) {
    if (s[i] % p.head_dim != 0 || s[i] / p.head_dim > std::numeric_limits<uint32_t>::max())
      return false;
    strides[i] = static_cast<uint64_t>(s[i]);
  }
  return true;
}

// XQA's multi-block plan (launchMHAFlashInfer, :3123-3129): nbSubSeqPerSeq = min(max(1,
// SMs / (batch * nbKHeads)), divUp(maxSeqLen, ctaTile.x)) CTAs per (sequence, KV head).
uint32_t sub_seqs(const pacts_problem& p, int sm_count, uint64_t max_seq_len) {
  const int64_t heads = int64_t{p.batch} * p.num_kv_heads;
  const int64_t by_sms = std::max<int64_t>(1, sm_count / std::max<int64_t>(heads, 1));
  const int64_t by_len = (static_cast<int64_t>(max_seq_len) + kTileKeys - 1) / kTileKeys;
  return static_cast<uint32_t>(std::min(by_sms, by_len));
}

// NotSupported (what this build of XQA cannot take, beyond the declared capabilities), or "";
// on "" `t` holds the translation.
std::string translate(const pacts_problem& p, int sm_count, Translation& t) {
  if (p.q_format != PACTS_FORMAT_BF16) return "q_format: accepted: bf16 (built with INPUT_FP16=0)";
  if (p.out_format != PACTS_FORMAT_BF16)
    return "out_format: accepted: bf16 (XQA writes the query's type, LOW_PREC_OUTPUT=0)";
  if (p.kv_format != PACTS_FORMAT_BF16)
    return "kv_format: accepted: bf16 (CACHE_ELEM_ENUM=0; an fp8 cache runs mha_sm90.cu on SM90, "
           "which is not built)";
  if (p.k_scale_mode != PACTS_SCALE_NONE || p.v_scale_mode != PACTS_SCALE_NONE)
    return "k_scale_mode / v_scale_mode: accepted: none (a bf16 cache takes no KV scale: "
           "kvCacheScale is read only for an int8 or fp8 cache, :1816-1818)";
  if (p.q_len != 1)
    return "q_len " + std::to_string(p.q_len) + ": accepted: 1 (built with SPEC_DEC=0)";
  if (p.softcap != 0.0f) return "softcap: accepted: 0 (XQA has no soft-cap)";
  if (p.want_lse) return "want_lse 1: accepted: 0 (XQA returns no LSE)";
  if (!listed(kHeadDims, p.head_dim))
    return "head_dim " + std::to_string(p.head_dim) + ": accepted: " + list_text(kHeadDims) +
           " (the HEAD_ELEMS built)";
  if (p.k_layout.chunk != p.head_dim || p.v_layout.chunk != p.head_dim)
    return "k_layout.chunk / v_layout.chunk: accepted: head_dim (XQA reads a head's elements as "
           "one contiguous row)";
  const int32_t g = p.num_q_heads / p.num_kv_heads;
  if (!listed(kGroups, g))
    return "num_q_heads / num_kv_heads " + std::to_string(g) + ": accepted: " + list_text(kGroups) +
           " (the HEAD_GRP_SIZE built)";
  if (!listed(kPageSizes, p.page_size))
    return "page_size " + std::to_string(p.page_size) + ": accepted: " + list_text(kPageSizes) +
           " (the TOKENS_PER_PAGE built)";
  // The grid is (nbSubSeqPerSeq, nbKHeads, batch) (:3134).
  if (p.batch > 65535)
    return "batch " + std::to_string(p.batch) + ": XQA puts sequences on gridDim.z, accepted: "
           "<= 65535";
  if (p.num_kv_heads > 65535)
    return "num_kv_heads " + std::to_string(p.num_kv_heads) +
           ": XQA puts KV heads on gridDim.y, accepted: <= 65535";
  // The page list: XQA reads row b at kvCachePageList[maxNbPagesPerSeq * b + column], in 32-bit
  // arithmetic (getPage, mhaUtils.cuh:288-301), with maxNbPagesPerSeq = maxSeqLen / page size
  // (:3138); FlashInfer's wrapper passes maxSeqLen = page_table.shape[-1] * page_size
  // (flashinfer/xqa.py:362-363). pacts' table is read in place: its row stride is that width.
  const int64_t width = p.batch > 1 ? p.block_table_stride : p.max_pages_per_seq;
  constexpr int64_t kU32 = std::numeric_limits<uint32_t>::max();
  if (p.batch > 0 && width == 0)
    return "max_pages_per_seq 0: XQA launches divUp(maxSeqLen, 256) CTAs per sequence with "
           "maxSeqLen = the page list's width * page_size, none for a table without columns, "
           "accepted: >= 1";
  if (width * p.page_size > kU32 ||
      (p.batch > 0 && (int64_t{p.batch} - 1) * width + p.max_pages_per_seq > kU32))
    return "block_table_stride " + std::to_string(p.block_table_stride) +
           ": XQA's maxSeqLen and page-list offsets are 32-bit, accepted: page_size * stride and "
           "(batch - 1) * stride + max_pages_per_seq <= 2^32 - 1";
  // The scale: XQA multiplies Q.K by qScale * rsqrtf(head dim) (:1816-1818, :2051), and
  // FlashInfer's wrapper passes q_scale = bmm1_scale * sqrt(head_dim) (decode.py:3771).
  const double scale = double{p.softmax_scale} * double{p.q_scale} *
                       std::sqrt(static_cast<double>(p.head_dim));
  if (!(scale <= std::numeric_limits<float>::max()) ||
      !(scale >= std::numeric_limits<float>::min()))
    return "softmax_scale * q_scale * sqrt(head_dim) = " + std::to_string(scale) +
           ": XQA takes it as its fp32 qScale, accepted: within fp32's normal range";

  t.launch = find_launch(p.head_dim, p.page_size, g, p.window > 0);
  if (t.launch == nullptr)
    return "head_dim " + std::to_string(p.head_dim) + ", page_size " + std::to_string(p.page_size) +
           ", group " + std::to_string(g) + ", window " + std::to_string(p.window) +
           ": this configuration is not built";
  t.q_scale = static_cast<float>(scale);
  t.table_width = static_cast<uint32_t>(width);
  t.sub_seqs = sub_seqs(p, sm_count, static_cast<uint64_t>(width) * p.page_size);
  // Pools: in place where XQA can address them. XQA addresses V with K's strides
  // (launchMHAFlashInfer takes one kv_stride_page / token / head, :3101-3117, and FlashInfer's
  // wrapper reads them from k_cache, xqa_wrapper.cu:73-75): a V pool in another layout is copied
  // into K's; pools XQA cannot address are copied into the dense NHD layout [pages, page_size,
  // num_kv_heads, head_dim], xqa()'s default, to which it transposes HND (flashinfer/xqa.py:203,
  // 378-382).
  uint64_t k_strides[3] = {}, v_strides[3] = {};
  const bool k_ok = addressable(p.k_layout, p, k_strides);
  const bool v_ok = addressable(p.v_layout, p, v_strides);
  const int64_t H = p.num_kv_heads, P = p.page_size, D = p.head_dim;
  if (k_ok) {
    t.kv = p.k_layout;
    std::copy(k_strides, k_strides + 3, t.strides);
    t.kv_bytes = pacts::spec::required_extents(p).k;
  } else {
    t.kv = pacts_pool_layout{P * H * D, D, H * D, D, static_cast<int32_t>(D), 0};
    t.strides[0] = p.num_pages > 1 ? static_cast<uint64_t>(P * H * D) : 0;
    t.strides[1] = static_cast<uint64_t>(H * D);
    t.strides[2] = H > 1 ? static_cast<uint64_t>(D) : 0;
    t.kv_bytes = static_cast<uint64_t>(p.num_pages) * P * H * D * 2;
  }
  t.copy_k = !k_ok;
  t.copy_v = !(v_ok && std::equal(v_strides, v_strides + 3, t.strides));
  // The query: q + (num_q_heads * batch_index + head) heads (:1760), one dense row per head.
  t.dense_q = (p.num_q_heads <= 1 || p.q_layout.s_head == p.head_dim) &&
              (p.batch <= 1 || p.q_layout.s_batch == int64_t{p.num_q_heads} * p.head_dim);
  return "";
}

// What the device-resident inputs let XQA do, from their host copies: the message of a
// DeviceError where XQA would read through a context length or page id outside the buffers
// (spec/contract.md §4), else "". And the most 256-key tiles a sequence has to run (the plan).
struct Scan {
  std::string unlaunchable;
  int64_t max_tiles = 0;
};

// The block-table columns XQA reads for a context of n keys: [first, ceil(n / P)). Without a
// window, first is 0. With one, XQA skips the whole tiles of 256 keys before the window,
// nbSkipLeadingTiles = (n - W) / 256 when n > W (:1786, :1792), and reads the pages of the tiles
// from there on (idxPageBeg = nbPagesPerCtaTile * seqIterInit + ..., :1850, :2193-2194, with
// seqIterInit = nbSkipLeadingTiles + the CTA's index, :1804); getPage reads only columns below
// ceil(n / P) (mhaUtils.cuh:296-299).
Scan scan(const pacts_problem& p, const int32_t* lens, const int32_t* table) {
  Scan s;
  const int64_t P = p.page_size, bound = int64_t{p.max_pages_per_seq} * P;
  for (int32_t b = 0; b < p.batch; ++b) {
    const int64_t n = lens[b];
    if (n < 0 || n > bound) {
      s.unlaunchable = "not launched: context_lens[" + std::to_string(b) + "] = " +
                       std::to_string(n) + " is outside [0, max_pages_per_seq * page_size = " +
                       std::to_string(bound) + "]; XQA does not check it (spec/contract.md §4) "
                       "and would read past the block table";
      return s;
    }
    const int64_t skipped = p.window > 0 && n > p.window ? (n - p.window) / kTileKeys : 0;
    s.max_tiles = std::max(s.max_tiles, (n + kTileKeys - 1) / kTileKeys - skipped);
    for (int64_t col = skipped * (kTileKeys / P); col < (n + P - 1) / P; ++col) {
      const int32_t id = table[int64_t{b} * p.block_table_stride + col];
      if (id >= p.num_pages) {
        s.unlaunchable = "not launched: block_table[" + std::to_string(b) + "][" +
                         std::to_string(col) + "] = " + std::to_string(id) +
                         " is outside [0, num_pages = " + std::to_string(p.num_pages) +
                         "); XQA reads this column as a page address and checks no page id "
                         "(spec/contract.md §4; a negative id is its \"no page\" and is read as "
                         "zeros)";
        return s;
      }
    }
  }
  return s;
}

// The plan and the variant, in the result: unsplit, or XQA's multi-block plan, which deals a
// sequence's 256-key tiles round-robin to nbSubSeqPerSeq CTAs (seqIter = seqIterInit + k *
// nbSubSeqPerSeq, :1804, :1969, :2409) and merges their partials in the last CTA to finish
// (:2757-2871).
// Reported as partitions of the keys one CTA covers in the longest sequence.
void report_plan(const pacts_problem& p, const Translation& t, const Scan& s,
                 pacts_backend_result& result) {
  const bool split = t.sub_seqs > 1;
  if (split) {
    const int64_t tiles = std::max<int64_t>(1, (s.max_tiles + t.sub_seqs - 1) / t.sub_seqs);
    result.partition_size = static_cast<int32_t>(tiles * kTileKeys);
    result.max_partitions = static_cast<int32_t>(t.sub_seqs);
  } else {
    result.partition_size = 0;
    result.max_partitions = 1;
  }
  set_text(result.variant, sizeof result.variant,
           "xqa-decode mha.cu D" + std::to_string(p.head_dim) + " P" +
               std::to_string(p.page_size) + " G" +
               std::to_string(p.num_q_heads / p.num_kv_heads) + (p.window > 0 ? " window" : "") +
               (split ? " multi-block" : ""));
}

// XQA's launch arguments for the problem; the buffers are filled in by the caller.
Launch make_launch(const pacts_problem& p, const Translation& t, pacts_backend_instance& self) {
  Launch a;
  a.sm_count = static_cast<uint32_t>(self.sm_count);
  a.num_kv_heads = static_cast<uint32_t>(p.num_kv_heads);
  a.window = static_cast<uint32_t>(p.window);
  a.q_scale = t.q_scale;
  a.max_seq_len = t.table_width * static_cast<uint32_t>(p.page_size);
  a.batch = static_cast<uint32_t>(p.batch);
  a.semaphores = static_cast<uint32_t*>(self.semaphores.ptr);
  a.scratch = self.scratch.ptr;
  a.pdl = kPdl;
  a.stride_page = t.strides[0];
  a.stride_token = t.strides[1];
  a.stride_head = t.strides[2];
  return a;
}

// XQA's launcher reports a failed launch by throwing std::runtime_error with the error's name
// (checkCuda, csrc/xqa/utils.h:37-42): DeviceError, with that name.
pacts_status_code launch(LaunchFn fn, const Launch& a, std::string& message) {
  try {
    const cudaError_t e = fn(a);
    if (e == cudaSuccess) return PACTS_OK;
    message = std::string("xqa-decode: CUDA: ") + cudaGetErrorString(e);
  } catch (const std::runtime_error& ex) {
    message = std::string("xqa-decode: CUDA: ") + ex.what();
  }
  return PACTS_DEVICE_ERROR;
}

// The multi-block scratch a launch uses (:2702-2729): per (sequence, KV head, CTA) a row maximum
// and a row sum (SMemWarpRowMax, 128 bytes for up to 32 rows) and the CTA's bf16 output of
// group * head_dim elements, each segment aligned to its type. Within the workspace: when split,
// nbSubSeqPerSeq * batch * nbKHeads <= the SM count.
bool scratch_fits(const pacts_problem& p, const Translation& t) {
  if (t.sub_seqs <= 1) return true;
  const uint64_t subs = uint64_t{t.sub_seqs} * static_cast<uint64_t>(p.batch) *
                        static_cast<uint64_t>(p.num_kv_heads);
  const uint64_t each = 2 * 128 + 2 * static_cast<uint64_t>(p.num_q_heads / p.num_kv_heads) *
                                      static_cast<uint64_t>(p.head_dim);
  return subs * each + 3 * 1024 <= kScratchBytes;
}

pacts_backend_capabilities capabilities() {
  pacts_backend_capabilities c{};
  // INPUT_FP16=0 (bf16 query and output, defines.h:48-59), CACHE_ELEM_ENUM=0 (the cache has the
  // input type, defines.h:203-212), LOW_PREC_OUTPUT=0 (the output has the input type,
  // mha.h:79), as flashinfer/jit/xqa.py builds it for a bf16 query, cache and output.
  c.num_q_formats = 1;
  c.q_formats[0] = PACTS_FORMAT_BF16;
  c.num_kv_formats = 1;
  c.kv_formats[0] = PACTS_FORMAT_BF16;
  c.num_out_formats = 1;
  c.out_formats[0] = PACTS_FORMAT_BF16;
  c.num_scale_modes = 1;
  c.scale_modes[0] = PACTS_SCALE_NONE;
  c.num_head_dims = 2;  // HEAD_ELEMS built: 128, 256 (64 is not: see numerics, u_partial)
  c.head_dims[0] = kHeadDims[0];
  c.head_dims[1] = kHeadDims[1];
  c.min_page_size = 16;  // TOKENS_PER_PAGE built: 16, 64 (XQA takes 16, 32, 64, 128,
  c.max_page_size = 64;  // flashinfer/jit/xqa.py:82-85); 32 is refused at run time
  c.max_q_len = 1;       // SPEC_DEC=0: one query token per sequence (mha.h:50-52)
  c.max_group = 8;       // HEAD_GRP_SIZE built: 1, 8; the others are refused at run time
  c.chunked_layouts = 0;  // a head's elements are one contiguous row (mha.h:63-64)
  // attentionSinks [num_q_heads], natural-log logits added to the softmax denominator only,
  // not scaled (addAttentionSinks, :1519-1528, unsplit :2615-2625, merged :2852-2861): §8.
  c.sinks = 1;
  // SLIDING_WINDOW=1 builds: the keys [n - W, n) of a context of n (nbTotalSkipTokens = n - W
  // when n > W, :1786, masked from there, :2101-2114): spec/operator.md §6 with W =
  // sliding_win_size, as FlashInfer maps window_left to window_left + 1 (decode.py:3813).
  c.window = 1;
  c.softcap = 0;
  // No LSE output (FlashInfer refuses return_lse for backend "xqa", decode.py:3373-3376).
  c.lse = 0;
  // No atomics on data: the CTAs of a split sequence store their partials in the scratch and the
  // last one to finish (the semaphore's atom.inc, :2757-2764) merges all of them in a fixed order
  // (sub-sequence n = warp group, += warp groups, :2813), whichever CTA that is; the row maximum
  // handed back to the gemm0 warps is barrier-protected (CTA_ROW_MAX_BACKWARD_METHOD 1, :56).
  c.deterministic = 1;
  c.split_plans = 0;  // XQA picks nbSubSeqPerSeq itself: hints are not honoured
  c.plan_replay = 0;
  c.large_buffers = 0;
  // 16-byte cp.async loads of Q, K and V rows and 16-byte output stores (grainBytes,
  // copyPartialHeadsAsync mhaUtils.cuh:101-158, copyOutputToGlobalMem :853-909).
  c.vector_alignment_bytes = 16;
  // Offsets are 32-bit: Q and output heads (TinyPtr's uint32_t offset, utils.h:189-216), pool rows
  // in heads (mhaUtils.cuh:80-87), the page list (mhaUtils.cuh:298).
  c.max_element_offset = std::numeric_limits<int32_t>::max();
  return c;
}

// The numerics of mha.cu as built here, with FlashInfer's flags (flashinfer/jit/core.py:542-566:
// -use_fast_math, -O3, -DNDEBUG), for a bf16 query, cache and output on SM90:
// - Logits: Q and K enter mma.sync m16n8k16 bf16 -> fp32 (mma.cuh:44, smemQKPartGemm :1000-1141)
//   unrounded (u_q = 0); the fp32 accumulators are multiplied by qkScale = qScale *
//   rsqrtf(HEAD_ELEMS) (:1816-1818, :2051), qScale being the adapter's fp32 rounding of
//   softmax_scale * q_scale * sqrt(head_dim).
// - P = exp2f(s * log2e - m * log2e) in fp32 (:585; ex2.approx.ftz.f32 under -use_fast_math), m
//   the running maximum or the CTA's hint (:2056-2059); P is rounded to bf16 before P.V (toFp16,
//   :596-618). The denominator sums those bf16 P (computeRowSum, an MMA of the bf16 P with ones in
//   fp32, :646-686). Where the tile's maximum is below the running one, the bf16 P is multiplied in
//   bf16 by the rescale factor rounded to bf16 (:1188, :1238), while the denominator takes
//   the fp32 factor (:2523-2524): a weight in P.V is rounded up to three times.
// - P.V: mma.sync bf16 -> fp32 (smemXVPartGemm :1369), V unrounded; the accumulators are
//   rescaled in fp32 by expf (:2514-2521) and normalised by __frcp_rn of the row sum (:2627).
// - The gemm1 warps form warp groups that take alternate tiles: two for head_dim 128, one for 256
//   (gemm1NbWarpGrps, :95-98). Their row states are merged in fp32 (:2583-2611), then each group's
//   normalised output is rounded to bf16 and the groups' outputs are summed in bf16
//   (mergeAndSaveOutTile, :2637-2659, smemFp16ArraySum<false> :1444-1483: __hadd2_rn).
// - Multi-block: each CTA stores its normalised output as bf16 with an fp32 row max and sum
//   (:2712-2729); the last CTA rescales them with expf in fp32, sums, normalises with __frcp_rn,
//   rounds to bf16 per warp group and sums the groups in bf16 again (:2813-2866).
// The constants:
pacts_backend_numerics numerics() {
  pacts_backend_numerics n{};
  // The tensor core adds an MMA step's products to the fp32 accumulator with alignment and
  // truncation (one unit of 2^-23 per addition, as pacts' own mma.sync kernel declares it,
  // kernels/hip/src/decode_hip.cpp profile()); the qScale rounding, rsqrt.approx (2^-22.9
  // relative, PTX ISA) and the two fp32 products of the scale lie within the "+4" of
  // gamma_{D+4}; the FMA s * log2e - m * log2e rounds once relative to its terms.
  n.u_logit = std::ldexp(1.0, -22);
  n.u_q = 0.0;
  // Up to three bf16 roundings of a weight: P, the bf16 rescale factor and their bf16 product.
  const double u_bf16 = std::ldexp(1.0, -8);
  n.u_p = (1 + u_bf16) * (1 + u_bf16) * (1 + u_bf16) - 1;
  n.eta_p = std::ldexp(1.0, -126);  // ftz: a P below fp32's normal range is flushed
  n.u_acc = std::ldexp(1.0, -22);   // the MMA accumulation (as u_logit) and the fp32 rescales
  // The bf16 partial outputs, relative to sum_j p_j |v_jd|: head_dim 128 unsplit, each warp
  // group's output (the groups' bf16 sum is the output's own rounding): 2^-8; split, also each
  // CTA's stored sum and each merged group's output: 3 * 2^-8; head_dim 256 (one group): 2^-8
  // when split. 4 u_partial (spec/tolerance.md §3) covers 3 * 2^-8 and its second-order terms.
  // Head dim 64 is not built: its four warp groups would add two bf16 sums at each level,
  // 7 * 2^-8 when split, which would need u_partial 2^-7 for every head dim.
  n.u_partial = u_bf16;
  // ex2.approx.ftz.f32 (exp2f and expf under -use_fast_math; about 2^-22 relative, PTX ISA), with
  // a margin of 2x; the rescales multiply numerator and denominator by the same computed factor.
  n.eps_exp = std::ldexp(1.0, -21);
  n.eps_tanh = 0.0;  // no soft-cap
  n.eps_log = 0.0;   // no LSE
  n.p_rounded_in_denominator = 1;  // the row sum is of the bf16 P (computeRowSum)
  n.ftz = 1;                       // -use_fast_math: -ftz=true
  return n;
}

pacts_status_code create(pacts_backend_instance** instance, char* message, uint32_t bytes) {
  *instance = nullptr;
  try {
    auto self = std::make_unique<pacts_backend_instance>();
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&self->sm_count, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&self->stream, cudaStreamNonBlocking);
    // The semaphores start at zero, as FlashInfer requires of its workspace (decode.py:3656). XQA
    // leaves them at zero after every launch: the last CTA of a sequence wraps its semaphore
    // back to 0 (atom.inc with limit nbSubSeqPerSeq - 1, :2757-2764), so they are zeroed once,
    // here, and never poisoned.
    if (e == cudaSuccess) e = self->semaphores.reserve(kSemaphoreBytes);
    if (e == cudaSuccess) e = self->scratch.reserve(kScratchBytes);
    if (e == cudaSuccess)
      e = cudaMemsetAsync(self->semaphores.ptr, 0, kSemaphoreBytes, self->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(self->stream);
    if (e != cudaSuccess) {
      set_text(message, bytes, std::string("xqa-decode: create: ") + cudaGetErrorString(e));
      return PACTS_DEVICE_ERROR;
    }
    *instance = self.release();
    return PACTS_OK;
  } catch (const std::exception& ex) {
    set_text(message, bytes, std::string("xqa-decode: create: ") + ex.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "xqa-decode: create: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

void destroy(pacts_backend_instance* instance) { delete instance; }

// Validation, the refusals and the translation, shared by run() and prepare(): false with the
// result filled in when the problem is refused.
bool admit(const pacts_backend_instance& self, const pacts_problem& p, const pacts_buffers& b,
           Translation& t, pacts_backend_result& result) {
  const auto caps = capabilities();
  pacts::spec::Requirements req;
  req.vector_alignment_bytes = caps.vector_alignment_bytes;
  req.max_element_offset = caps.max_element_offset;
  if (const pacts::spec::Status s = pacts::spec::validate(p, b, req); !s) {
    result.status = static_cast<pacts_status_code>(s.code());
    set_text(result.message, sizeof result.message, s.message());
    return false;
  }
  std::string why = translate(p, self.sm_count, t);
  if (why.empty() && !scratch_fits(p, t))
    why = "batch " + std::to_string(p.batch) + " x num_kv_heads " +
          std::to_string(p.num_kv_heads) + ": the multi-block partials exceed the " +
          std::to_string(kScratchBytes >> 20) + " MiB scratch";
  if (!why.empty()) {
    result.status = PACTS_NOT_SUPPORTED;
    set_text(result.message, sizeof result.message, why);
    return false;
  }
  return true;
}

// A pool in a layout XQA cannot address, copied on the host into `to`, as an integrator would
// have to: every element (page, head, slot, dim) is carried, the unowned ones with their bytes,
// and the copy's bytes that no element reaches are filled with `poison`. Both layouts hold a
// head's elements as one row (translate() refused any other).
std::vector<uint8_t> pool_copy(const pacts_problem& p, const void* src,
                               const pacts_pool_layout& from, const pacts_pool_layout& to,
                               uint64_t bytes, int poison) {
  std::vector<uint8_t> out(bytes, static_cast<uint8_t>(poison));
  const auto* s = static_cast<const uint8_t*>(src);
  const size_t row = size_t(p.head_dim) * 2;
  for (int64_t pg = 0; pg < p.num_pages; ++pg)
    for (int64_t h = 0; h < p.num_kv_heads; ++h)
      for (int64_t t = 0; t < p.page_size; ++t)
        std::memcpy(out.data() + pacts_peer::pool_offset(to, pg, h, t, 0) * 2,
                    s + pacts_peer::pool_offset(from, pg, h, t, 0) * 2, row);
  return out;
}

// A query in another layout (gaps between heads or sequences, head-major rows), copied into the
// dense [batch, num_q_heads, head_dim] one, as a caller would make it contiguous.
std::vector<uint8_t> dense_query(const pacts_problem& p, const pacts_buffers& b) {
  const int64_t H = p.num_q_heads, D = p.head_dim;
  std::vector<uint8_t> out(size_t(p.batch) * H * D * 2);
  const auto* src = static_cast<const uint16_t*>(b.q.data);
  auto* dst = reinterpret_cast<uint16_t*>(out.data());
  for (int64_t s = 0; s < p.batch; ++s)
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(dst + (s * H + h) * D, src + s * p.q_layout.s_batch + h * p.q_layout.s_head,
                  size_t(D) * 2);
  return out;
}

void run(pacts_backend_instance* self, const pacts_problem* problem, const pacts_buffers* buffers,
         const pacts_backend_plan_hint* /*hint: XQA plans itself*/,
         pacts_backend_result* result) {
  try {
    const pacts_problem& p = *problem;
    const pacts_buffers& b = *buffers;
    Translation t;
    if (!admit(*self, p, b, t, *result)) return;
    result->status = PACTS_OK;
    result->partition_size = 0;
    result->max_partitions = 1;
    if (p.batch == 0) return;
    const Scan s = scan(p, static_cast<const int32_t*>(b.context_lens.data),
                        static_cast<const int32_t*>(b.block_table.data));
    if (!s.unlaunchable.empty()) {
      result->status = PACTS_DEVICE_ERROR;
      set_text(result->message, sizeof result->message, s.unlaunchable);
      return;
    }

    const int poison = (self->runs++ % 2 == 0) ? 0xFF : 0x7E;
    std::vector<uint8_t> q_copy, k_copy, v_copy;
    if (!t.dense_q) q_copy = dense_query(p, b);
    if (t.copy_k) k_copy = pool_copy(p, b.k.data, p.k_layout, t.kv, t.kv_bytes, poison);
    if (t.copy_v) v_copy = pool_copy(p, b.v.data, p.v_layout, t.kv, t.kv_bytes, poison);
    const void* const q_src = t.dense_q ? b.q.data : static_cast<const void*>(q_copy.data());
    const size_t q_bytes = t.dense_q ? b.q.bytes : q_copy.size();
    const void* const k_src = t.copy_k ? static_cast<const void*>(k_copy.data()) : b.k.data;
    const size_t k_bytes = t.copy_k ? k_copy.size() : b.k.bytes;
    const void* const v_src = t.copy_v ? static_cast<const void*>(v_copy.data()) : b.v.data;
    const size_t v_bytes = t.copy_v ? v_copy.size() : b.v.bytes;

    const size_t rows = size_t(p.batch) * p.num_q_heads;
    const size_t out_bytes = rows * p.head_dim * 2;
    cudaError_t e = cudaSuccess;
    const auto step = [&](cudaError_t x) {
      if (e == cudaSuccess) e = x;
    };
    const cudaStream_t st = self->stream;
    const auto upload = [&](DeviceBuffer& dst, const void* src, size_t bytes) {
      step(dst.reserve(std::max<size_t>(bytes, 4)));
      if (bytes > 0) step(cudaMemcpyAsync(dst.ptr, src, bytes, cudaMemcpyHostToDevice, st));
    };
    // Whole views, byte for byte, where XQA reads them in place.
    upload(self->q, q_src, q_bytes);
    upload(self->k, k_src, k_bytes);
    upload(self->v, v_src, v_bytes);
    upload(self->table, b.block_table.data, b.block_table.bytes);
    upload(self->lens, b.context_lens.data, b.context_lens.bytes);
    if (p.has_sinks) upload(self->sinks, b.sinks.data, b.sinks.bytes);
    step(self->out.reserve(out_bytes));
    // Poison what XQA should overwrite, alternating between runs (backend_abi.h): the output
    // staging (NaN bytes, or a large finite value) and the multi-block scratch. The semaphores
    // are XQA's state and stay zero (create).
    step(cudaMemsetAsync(self->out.ptr, poison, out_bytes, st));
    step(cudaMemsetAsync(self->scratch.ptr, poison, self->scratch.bytes, st));
    step(cudaStreamSynchronize(st));
    std::string failure;
    if (e == cudaSuccess) {
      Launch a = make_launch(p, t, *self);
      a.out = self->out.ptr;
      a.q = self->q.ptr;
      a.sinks = p.has_sinks ? static_cast<const float*>(self->sinks.ptr) : nullptr;
      a.k = self->k.ptr;
      a.v = self->v.ptr;
      a.page_list = static_cast<const int32_t*>(self->table.ptr);
      a.seq_lens = static_cast<const uint32_t*>(self->lens.ptr);
      a.stream = st;
      if (launch(t.launch, a, failure) != PACTS_OK) {
        result->status = PACTS_DEVICE_ERROR;
        set_text(result->message, sizeof result->message, failure);
        cudaStreamSynchronize(st);
        return;
      }
    }
    std::vector<uint16_t> out(rows * p.head_dim);
    step(cudaMemcpyAsync(out.data(), self->out.ptr, out_bytes, cudaMemcpyDeviceToHost, st));
    step(cudaStreamSynchronize(st));
    step(cudaGetLastError());
    if (e != cudaSuccess) {
      result->status = PACTS_DEVICE_ERROR;
      set_text(result->message, sizeof result->message,
               std::string("xqa-decode: CUDA: ") + cudaGetErrorString(e));
      return;
    }
    report_plan(p, t, s, *result);
    // XQA writes dense [batch, num_q_heads, head_dim]; pacts' layout may leave gaps, which are
    // not written.
    auto* dst = static_cast<uint16_t*>(b.out.data);
    for (int64_t q = 0; q < p.batch; ++q)
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        std::memcpy(dst + q * p.out_layout.s_batch + h * p.out_layout.s_head,
                    out.data() + (size_t(q) * p.num_q_heads + h) * p.head_dim,
                    size_t(p.head_dim) * 2);
  } catch (const std::exception& ex) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message, std::string("xqa-decode: ") + ex.what());
  } catch (...) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message, "xqa-decode: a non-standard exception");
  }
}

}  // namespace pacts_xqa_peer

// A prepared timed call: XQA's launch on pacts' device buffers, the copies of pools XQA cannot
// address in place, and the instance's workspace.
struct pacts_backend_prepared {
  pacts_backend_instance* self = nullptr;
  pacts_xqa_peer::LaunchFn launch = nullptr;
  pacts_xqa_peer::Launch args;
  bool empty = false;  // a batch of 0: nothing to launch
  pacts_peer::DeviceBuffer k_copy, v_copy;
};

namespace pacts_xqa_peer {

// The query of a timed call is read in place: a copy into XQA's dense layout would be timed with
// the call. "" when it is dense, else the NotSupported message.
std::string dense_q_refusal(const pacts_problem& p) {
  const int64_t d = p.head_dim, row = int64_t{p.num_q_heads} * p.head_dim;
  return "q_layout (s_batch " + std::to_string(p.q_layout.s_batch) + ", s_head " +
         std::to_string(p.q_layout.s_head) +
         "): XQA reads a dense [batch, num_q_heads, head_dim] query, which timed calls read in "
         "place (a copy into it would be timed with the call), accepted: s_batch num_q_heads * "
         "head_dim = " + std::to_string(row) + ", s_head head_dim = " + std::to_string(d);
}

void prepare(pacts_backend_instance* self, const pacts_problem* problem,
             const pacts_buffers* buffers, const int32_t* host_block_table,
             const int32_t* host_context_lens, const pacts_backend_plan_hint* /*hint*/,
             pacts_backend_prepared** prepared, pacts_backend_result* result) {
  *prepared = nullptr;
  try {
    const pacts_problem& p = *problem;
    const pacts_buffers& b = *buffers;
    Translation t;
    if (!admit(*self, p, b, t, *result)) return;
    std::string why;
    if (!t.dense_q) why = dense_q_refusal(p);
    if (why.empty()) why = pacts_peer::dense_out_refusal(p, "XQA");
    if (!why.empty()) {
      result->status = PACTS_NOT_SUPPORTED;
      set_text(result->message, sizeof result->message, why);
      return;
    }
    result->status = PACTS_OK;
    result->partition_size = 0;
    result->max_partitions = 1;
    auto call = std::make_unique<pacts_backend_prepared>();
    call->self = self;
    call->launch = t.launch;
    if (p.batch == 0) {
      call->empty = true;
      set_text(result->variant, sizeof result->variant, "xqa-decode (empty batch)");
      self->prepared = call.get();
      *prepared = call.release();
      return;
    }
    const Scan s = scan(p, host_context_lens, host_block_table);
    if (!s.unlaunchable.empty()) {
      result->status = PACTS_DEVICE_ERROR;
      set_text(result->message, sizeof result->message, s.unlaunchable);
      return;
    }
    cudaError_t e = cudaSuccess;
    const auto step = [&](cudaError_t x) {
      if (e == cudaSuccess) e = x;
    };
    const cudaStream_t st = self->stream;
    const int poison = (self->runs++ % 2 == 0) ? 0xFF : 0x7E;
    // The pools XQA cannot address, copied once on the device as an integrator would (every
    // element carried, the copy's other bytes poisoned).
    const auto copy = [&](DeviceBuffer& dst, const void* src, const pacts_pool_layout& from) {
      step(dst.reserve(std::max<uint64_t>(t.kv_bytes, 4)));
      step(cudaMemsetAsync(dst.ptr, poison, t.kv_bytes, st));
      step(pacts_peer::gather_pool(dst.ptr, t.kv, src, from, p, 2, st));
    };
    if (t.copy_k) copy(call->k_copy, b.k.data, p.k_layout);
    if (t.copy_v) copy(call->v_copy, b.v.data, p.v_layout);
    // The scratch is poisoned once, here (backend_abi.h); the semaphores stay zero (create).
    step(cudaMemsetAsync(self->scratch.ptr, poison, self->scratch.bytes, st));
    step(cudaStreamSynchronize(st));
    if (e != cudaSuccess) {
      result->status = PACTS_DEVICE_ERROR;
      set_text(result->message, sizeof result->message,
               std::string("xqa-decode: prepare: CUDA: ") + cudaGetErrorString(e));
      return;
    }
    Launch& a = call->args;
    a = make_launch(p, t, *self);
    a.out = b.out.data;
    a.q = b.q.data;
    a.sinks = p.has_sinks ? static_cast<const float*>(b.sinks.data) : nullptr;
    a.k = t.copy_k ? call->k_copy.ptr : b.k.data;
    a.v = t.copy_v ? call->v_copy.ptr : b.v.data;
    a.page_list = static_cast<const int32_t*>(b.block_table.data);
    a.seq_lens = static_cast<const uint32_t*>(b.context_lens.data);
    report_plan(p, t, s, *result);
    self->prepared = call.get();
    *prepared = call.release();
  } catch (const std::exception& ex) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             std::string("xqa-decode: prepare: ") + ex.what());
  } catch (...) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message,
             "xqa-decode: prepare: a non-standard exception");
  }
}

// XQA's launch alone on the caller's stream: one cudaLaunchKernelEx and cudaPeekAtLastError
// (:3137, :3163-3186), nothing else. Graph-capturable: no allocation, copy, memset or
// synchronisation, and no per-launch reset of the semaphores, which XQA leaves at zero itself
// (create). The launch carries FlashInfer's programmatic-stream-serialisation attribute
// (enable_pdl, hostUtils.h:4-12), which a captured graph keeps as a programmatic edge.
pacts_status_code enqueue(pacts_backend_prepared* call, void* stream, char* message,
                          uint32_t bytes) {
  try {
    if (call->empty) return PACTS_OK;
    Launch a = call->args;
    a.stream = static_cast<cudaStream_t>(stream);
    std::string failure;
    const pacts_status_code s = launch(call->launch, a, failure);
    if (s != PACTS_OK) set_text(message, bytes, failure);
    return s;
  } catch (const std::exception& ex) {
    set_text(message, bytes, std::string("xqa-decode: enqueue: ") + ex.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "xqa-decode: enqueue: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

uint32_t device_error(pacts_backend_prepared* /*call: XQA checks nothing on the device*/) {
  return 0;
}

void release(pacts_backend_prepared* call) {
  if (call == nullptr) return;
  if (call->self != nullptr && call->self->prepared == call) call->self->prepared = nullptr;
  delete call;
}

pacts_backend_v3 make_descriptor() {
  static const std::string device = pacts_peer::device_name();
  static const std::string driver = pacts_peer::driver_version();
  static const std::string runtime = pacts_peer::runtime_version();
  pacts_backend_v3 d{};
  pacts_backend_v1& v1 = d.v2.v1;
  v1.abi_version = PACTS_BACKEND_ABI_VERSION;
  v1.descriptor_bytes = sizeof(pacts_backend_v3);
  v1.problem_abi_version = PACTS_ABI_VERSION;
  v1.name = "xqa-decode";
  v1.device = device.c_str();
  v1.driver = driver.c_str();
  v1.runtime = runtime.c_str();
  v1.version = "TensorRT-LLM XQA (csrc/xqa/mha.cu) from FlashInfer " PACTS_PEER_XQA_VERSION;
  v1.capabilities = capabilities();
  v1.numerics = numerics();
  v1.create = create;
  v1.destroy = destroy;
  v1.run = run;
  v1.run_replayed = nullptr;
  d.v2.v2.q_requant = PACTS_Q_REQUANT_NONE;
  // The plan depends on the batch: nbSubSeqPerSeq = SMs / (batch * num_kv_heads), capped by the
  // table's width (sub_seqs).
  d.v2.v2.batch_invariant = 0;
  d.v3.timed_calls = 1;
  d.v3.memory = PACTS_BACKEND_MEMORY_DEVICE;
  d.v3.graph_capturable = 1;
  d.v3.prepare = prepare;
  d.v3.enqueue = enqueue;
  d.v3.device_error = device_error;
  d.v3.release = release;
  return d;
}

}  // namespace pacts_xqa_peer

extern "C" PACTS_BACKEND_EXPORT const pacts_backend_v1* pacts_backend_entry(void) {
  static const pacts_backend_v3 descriptor = pacts_xqa_peer::make_descriptor();
  return &descriptor.v2.v1;
}
