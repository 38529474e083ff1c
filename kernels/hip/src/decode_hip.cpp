// pacts::kernels::hip: plan, device query, profile and the launches (pacts/hip.h). Compiled as
// device code (nvcc on NVIDIA, hipcc/amdclang on AMD).
#include <pacts/hip.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include "platform/driver_version.h"
#include "platform/gpu.h"
#include "src/kernel.h"
#if PACTS_HIP_MATRIX_UNIT
#include "src/kernel_mma.h"
#endif
#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA  // AMD gfx942 / gfx950 (platform/matrix_amd.h)
#include "src/kernel_mfma.h"
#endif
#include "src/plan_config.h"
#include "src/plan_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#if defined(PACTS_MUTANTS)
#include "common/mutant.h"

#include <mutex>
#endif

namespace pacts::kernels::hip {
namespace {

using detail::Params;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The plan's tile: the keys of one warp tile of the matrix-unit kernel (src/kernel_mma.h), or of
// one block tile of the CUDA-core kernel (src/kernel.h) where the vendor has no matrix kernel.
int32_t tile_keys(int32_t head_dim) {
#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
  static_assert(detail::MfmaShape<64, false>::kKeys == detail::MfmaShape<256, true>::kKeys);
  (void)head_dim;
  return detail::MfmaShape<128, false>::kKeys;
#elif PACTS_HIP_MATRIX_UNIT
  static_assert(detail::MmaShape<64, false>::kKeys == detail::MmaShape<256, true>::kKeys);
  (void)head_dim;
  return detail::MmaShape<128, false>::kKeys;
#else
  switch (head_dim) {
    case 64: return detail::Shape<64>::kTile;
    case 128: return detail::Shape<128>::kTile;
    default: return detail::Shape<256>::kTile;
  }
#endif
}

// Whether the plan counts the slots of the split kernels (launch_format): every KV format but
// bf16. A bf16 pool takes the bf16 kernel, or a split one when V has a scale, and both get the
// bf16 kernel's plan: PACTS-ACC-4 needs the same partitions whatever V's scale (the merge's
// rounding would differ), at the cost of the split kernel's slots where they differ (D 64, 256).
bool split_slots(const pacts_problem& p) { return p.kv_format != PACTS_FORMAT_BF16; }

template <bool kSplit>
int64_t blocks_per_sm_of(int32_t head_dim) {
#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
  switch (head_dim) {  // by the LDS of gfx942 (64 KiB per compute unit): estimates, never run
    case 64: return detail::kMfmaBlocksPerCu<64, kSplit>;
    case 128: return detail::kMfmaBlocksPerCu<128, kSplit>;
    default: return detail::kMfmaBlocksPerCu<256, kSplit>;
  }
#elif PACTS_HIP_MATRIX_UNIT
  static_assert(detail::MmaShape<64, kSplit>::kBlocksPerSm == config::nvidia_blocks_per_sm(kSplit, 64) &&
                detail::MmaShape<128, kSplit>::kBlocksPerSm == config::nvidia_blocks_per_sm(kSplit, 128) &&
                detail::MmaShape<256, kSplit>::kBlocksPerSm == config::nvidia_blocks_per_sm(kSplit, 256),
                "the plan's slots (kernels/src/plan_rules.h) are the kernels' launch bounds");
  switch (head_dim) {
    case 64: return detail::MmaShape<64, kSplit>::kBlocksPerSm;
    case 128: return detail::MmaShape<128, kSplit>::kBlocksPerSm;
    default: return detail::MmaShape<256, kSplit>::kBlocksPerSm;
  }
#else
  (void)head_dim;
  return 4;
#endif
}

// bench/ variants ring*: whether the plan counts the ring kernel's slots (src/kernel_mma.h, kRing,
// an experiment; never in production builds): bf16 pools at D 64 and 128 with items of at most 8
// rows (the transposed form). The ring runs where the rows move by bulk copies (rows_bulk, a
// property of the buffers the plan does not see); other layouts and a scaled V run their kernels
// on the same plan, so that PACTS-ACC-4's scaled and unscaled runs take the same partitions.
bool ring_slots(const pacts_problem& p) {
#if PACTS_HIP_MATRIX_UNIT && defined(PACTS_EXPERIMENT_RING)
  const int64_t rows = int64_t{p.q_len} * (p.num_q_heads / std::max<int32_t>(p.num_kv_heads, 1));
  return p.kv_format == PACTS_FORMAT_BF16 && p.head_dim <= 128 && rows <= 8;
#else
  (void)p;
  return false;
#endif
}

// Blocks of the problem's tile kernel resident per multiprocessor: the plan's slots.
int64_t blocks_per_sm(const pacts_problem& p) {
#if PACTS_HIP_MATRIX_UNIT
  if (ring_slots(p)) return detail::MmaShape<128, false, true>::kBlocksPerSm;
#endif
  return split_slots(p) ? blocks_per_sm_of<true>(p.head_dim) : blocks_per_sm_of<false>(p.head_dim);
}

// The workspace of a split plan: the partials (config::workspace_bytes_for); in the builds that
// merge in-launch (the bench/ variant fused_merge), then one 32-bit counter per (sequence, KV
// head, row tile) (src/kernel.h merge_if_last; decode() zeroes them before the launch).
bool split_workspace_bytes(const pacts_problem& p, int64_t partitions, int64_t row_tiles,
                           uint64_t* bytes) {
  uint64_t partials = 0;
  if (!config::workspace_bytes_for(p, partitions, &partials)) return false;
#if defined(PACTS_EXPERIMENT_FUSED_MERGE)
  uint64_t counters = 0;
  return !__builtin_mul_overflow(uint64_t(p.batch) * uint64_t(p.num_kv_heads), uint64_t(row_tiles),
                                 &counters) &&
         !__builtin_mul_overflow(counters, sizeof(uint32_t), &counters) &&
         !__builtin_add_overflow(partials, counters, bytes) && *bytes <= (uint64_t{1} << 63);
#else
  (void)row_tiles;
  *bytes = partials;
  return true;
#endif
}

#if defined(PACTS_MUTANTS)
// The mutant build only (mutation/README.md, GPU part). The kernels of this translation unit read
// the active mutant from its own copy of common::mutant_device_id (common/mutant.h); it follows
// the host's common::host_mutant_id, copied to the current device whenever the two differ.
// plan() and decode() call this: plan() runs before a decode is captured into a graph, so a
// capture finds the copy made (a copy to a symbol is no operation a capture can hold).
spec::Status sync_device_mutant() {
  constexpr int kDevices = 64;
  static std::mutex lock;
  static int32_t on_device[kDevices] = {};  // 0 (`none`): what a freshly loaded module holds
  const std::lock_guard<std::mutex> hold(lock);
  int device = 0;
  PACTS_GPU_CHECK(hipGetDevice(&device));
  const int32_t id = common::host_mutant_id;
  const bool tracked = device >= 0 && device < kDevices;
  if (tracked && on_device[device] == id) return spec::Status::ok();
  PACTS_GPU_CHECK(hipMemcpyToSymbol(common::mutant_device_id, &id, sizeof id));
  if (tracked) on_device[device] = id;
  return spec::Status::ok();
}
#endif


detail::PoolParams pool_params(const pacts_view& data, const pacts_pool_layout& l,
                               pacts_scale_mode mode, pacts_nibble_order order,
                               float tensor_scale, const pacts_view& scales,
                               const pacts_scale_layout& sl) {
  detail::PoolParams pp;
  pp.data = static_cast<const uint8_t*>(data.data);
  pp.s_page = l.s_page;
  pp.s_head = l.s_head;
  pp.s_tok = l.s_tok;
  pp.s_chunk = l.s_chunk;
  pp.chunk = l.chunk;
  while ((int32_t{1} << pp.chunk_shift) < l.chunk) ++pp.chunk_shift;  // validated: a power of two
  pp.scale_mode = mode;
  pp.nibble_order = order;
  pp.tensor_scale = tensor_scale;
  if (mode == PACTS_SCALE_MX_BLOCK)
    pp.mx_scales = static_cast<const uint8_t*>(scales.data);
  else
    pp.token_scales = static_cast<const float*>(scales.data);
  pp.sc_page = sl.s_page;
  pp.sc_head = sl.s_head;
  pp.sc_tok = sl.s_tok;
  pp.sc_block = sl.s_block;
  return pp;
}

// kVCodes (NVIDIA split kernels): V enters P.V as its codes (no scale, or a deferred per-tensor
// scale), so the kernel holds that V path only (src/kernel_mma.h).
// kNarrow: the bf16 kernel's transposed form for items of at most 8 rows (src/kernel_mma.h).
// Whether a problem runs the split kernel with K as its codes and the K scale on the logit
// (src/kernel_mma.h, kKLogit): e4m3fn and e5m2 K without a scale or with a per-tensor scale in
// [2^-48, 1], in the kernels whose V enters as its codes (V without a scale or per tensor). The
// plan's variant names it, since it changes the rounding of K. Timing experiment only (bench/
// variant k_scaled): never, K scaled per element for every scale.
bool k_scale_on_logit(pacts_format kv, pacts_scale_mode k_mode, float k_scale,
                      pacts_scale_mode v_mode) {
#if PACTS_HIP_MATRIX_UNIT && !defined(PACTS_EXPERIMENT_K_SCALED)
  return (kv == PACTS_FORMAT_E4M3FN || kv == PACTS_FORMAT_E5M2) &&
         (v_mode == PACTS_SCALE_NONE || v_mode == PACTS_SCALE_PER_TENSOR) &&
         (k_mode == PACTS_SCALE_NONE ||
          (k_mode == PACTS_SCALE_PER_TENSOR && k_scale >= 0x1p-48f && k_scale <= 1.0f));
#else
  (void)kv, (void)k_mode, (void)k_scale, (void)v_mode;
  return false;
#endif
}

// kKLogit: the split kernels of e4m3fn and e5m2 with K as its codes and the K scale on the logit.
// kBulk: the bf16 kernel of calls whose rows all move by bulk copies (rows_bulk), compiled
// without the other copy paths (src/kernel_mma.h stage_tile).
template <int D, pacts_format kFormat, bool kSplitV, bool kVCodes = false, bool kNarrow = false,
          bool kKLogit = false, bool kRing = false, bool kBulk = false, bool kVt = false>
spec::Status launch(const Params& prm, int64_t items, int64_t merge_items, hipStream_t stream) {
  // Dynamic shared memory: above the 48 KiB a block gets by default on NVIDIA (trap 5) it must be
  // asked for. The AMD kernels stay within gfx942's 64 KiB of LDS; the NVIDIA split kernels'
  // raw stages take up to about 90 KiB (src/kernel_mma.h, RawShape).
#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
  constexpr int kSmem = static_cast<int>(sizeof(detail::MfmaSmem<D, kSplitV>));
  constexpr int kTileThreads = detail::MfmaShape<D, kSplitV>::kThreads;
  const auto tile_kernel = detail::split_kv_mfma_kernel<D, kFormat, kSplitV>;
#elif PACTS_HIP_MATRIX_UNIT
  constexpr int kSmem = static_cast<int>(sizeof(detail::MmaSmem<D, kSplitV, kFormat, kRing>));
  constexpr int kTileThreads = detail::MmaShape<D, kSplitV, kRing>::kThreads;
  const auto tile_kernel =
      detail::split_kv_mma_kernel<D, kFormat, kSplitV, kVCodes, kNarrow, kKLogit, kRing, kBulk, kVt>;
  static_assert(detail::kMmaSmemFits<D, kSplitV, kFormat, kRing>,
                "the plan's blocks per multiprocessor must fit the H200's shared memory");
#else
  static_assert(!kSplitV);
  constexpr int kSmem = static_cast<int>(sizeof(detail::Smem<D>));
  constexpr int kTileThreads = detail::kThreads;
  const auto tile_kernel = detail::split_kv_kernel<D, kFormat>;
#endif
#if !PACTS_HIP_MATRIX_UNIT
  static_assert(kSmem <= 64 * 1024, "the tile kernel must fit gfx942's 64 KiB of LDS");
#endif
#if PACTS_HIP_MATRIX_UNIT
  constexpr bool kFusedMerge = detail::MmaShape<D, kSplitV>::kFusedMerge;
#else
  constexpr bool kFusedMerge = false;
#endif
  if (kSmem > 48 * 1024) PACTS_GPU_CHECK(hipFuncSetMaxDynamicSharedBytes(tile_kernel, kSmem));
  // The row tiles' counters of the in-launch merge start at 0 in every call: the workspace's
  // prior contents never matter (spec/operator.md §11).
  if (kFusedMerge && prm.partitions > 1)
    PACTS_GPU_CHECK(hipMemsetAsync(prm.ws_count, 0, static_cast<size_t>(merge_items) * 4, stream));
  hipLaunchKernelGGL(tile_kernel, dim3(static_cast<uint32_t>(items)), dim3(kTileThreads), kSmem,
                     stream, prm);
  PACTS_GPU_CHECK(hipGetLastError());
  if (prm.partitions == 1 || kFusedMerge) return spec::Status::ok();
  const int64_t merge_blocks = merge_items * detail::merge_slices<D>(prm.rows_per_item);
  // The merge's early loads where the plan has enough partitions (src/kernel.h kMergePrefetch).
  const auto merge_kernel = detail::kMergePrefetch > 0 && prm.partitions >= detail::kMergePrefetch
                                ? detail::merge_kernel<D, true>
                                : detail::merge_kernel<D, false>;
#if !defined(PACTS_EXPERIMENT_NO_PDL)
  // A programmatic dependent of the tile kernel on NVIDIA (an ordinary launch elsewhere): its
  // blocks start (and check their sequence) while the tile kernel's last blocks run, and wait for
  // it before reading a partial (src/kernel.h merge_kernel). bench/ variant no_pdl launches it
  // after the tile kernel (docs/kernel-design.md, "Where the time goes").
  PACTS_GPU_CHECK(gpu::launch_dependent(merge_kernel, dim3(static_cast<uint32_t>(merge_blocks)),
                                        dim3(detail::kThreads), 0, stream, prm));
#else
  hipLaunchKernelGGL(merge_kernel, dim3(static_cast<uint32_t>(merge_blocks)),
                     dim3(detail::kThreads), 0, stream, prm);
  PACTS_GPU_CHECK(hipGetLastError());
#endif
  return spec::Status::ok();
}


// Whether a split kernel of an fp8, fp16 or MXFP4 pool runs the transposed form
// (src/kernel_mma.h, kNarrow): items of at most 8 rows at D 64 and 128, as the bf16 kernel. The
// same bits as the 16-row form. Timing experiments only: bench/ variant split_rows16 never runs
// it, nor do pv_bf16 and one_v_path.
#if PACTS_HIP_MATRIX_UNIT && !defined(PACTS_EXPERIMENT_SPLIT_ROWS16) && \
    !defined(PACTS_EXPERIMENT_PV_BF16) && !defined(PACTS_EXPERIMENT_ONE_V_PATH)
constexpr bool kSplitTransposed = true;
#else
constexpr bool kSplitTransposed = false;
#endif
template <int D>
constexpr bool split_transposed_built() { return kSplitTransposed && D <= 128; }

// fp16 and fp8 pools: on NVIDIA one kernel per V path, V as codes (no scale, or a per-tensor
// scale the kernel defers) or not (src/kernel_mma.h, kVCodes). kVDim: dim-major V loaded by
// vectors (src/kernel_mma.h, the split kernels' kVt), its own instantiations.
template <int D, pacts_format kFormat, bool kSplit, bool kVDim>
spec::Status launch_narrow(const Params& prm, int64_t items, int64_t merge_items,
                           hipStream_t stream) {
#if PACTS_HIP_MATRIX_UNIT
  if (prm.v.scale_mode == PACTS_SCALE_NONE || prm.v.scale_mode == PACTS_SCALE_PER_TENSOR) {
    if constexpr (kSplit && (kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E5M2))
      if (k_scale_on_logit(kFormat, prm.k.scale_mode, prm.k.tensor_scale, prm.v.scale_mode)) {
        if constexpr (split_transposed_built<D>())
          if (prm.rows_per_item <= 8)
            return launch<D, kFormat, kSplit, true, true, true, false, false, kVDim>(
                prm, items, merge_items, stream);
        return launch<D, kFormat, kSplit, true, false, true, false, false, kVDim>(
            prm, items, merge_items, stream);
      }
    if constexpr (kSplit && split_transposed_built<D>())
      if (prm.rows_per_item <= 8)
        return launch<D, kFormat, kSplit, true, true, false, false, false, kVDim>(
            prm, items, merge_items, stream);
    return launch<D, kFormat, kSplit, true, false, false, false, false, kVDim>(
        prm, items, merge_items, stream);
  }
  // Per-token V (fp8 pools only; its scale folded into P, src/kernel_mma.h kPFold): transposed
  // at <= 8 rows as well. Timing experiments only: bench/ variants token_rows16 (the 16-row form
  // for them) and token_before (three V parts, which the transposed form does not take).
#if !defined(PACTS_EXPERIMENT_TOKEN_ROWS16) && !defined(PACTS_EXPERIMENT_TOKEN_V_PARTS)
  if constexpr (kSplit && split_transposed_built<D>() && kFormat != PACTS_FORMAT_FP16)
    if (prm.rows_per_item <= 8)
      return launch<D, kFormat, kSplit, false, true, false, false, false, kVDim>(
          prm, items, merge_items, stream);
#endif
#endif
  return launch<D, kFormat, kSplit, false, false, false, false, false, kVDim>(prm, items,
                                                                             merge_items, stream);
}

// The split kernels of one format (fp16, fp8, a scaled bf16 pool): the kVt instantiations where V
// is dim-major and loads by vectors (Params::v_keys_vector), the others for every other layout.
template <int D, pacts_format kFormat, bool kSplit>
spec::Status launch_split(const Params& prm, int64_t items, int64_t merge_items,
                          hipStream_t stream) {
#if PACTS_HIP_MATRIX_UNIT
  if constexpr (kSplit && detail::kVGather<kFormat, true>)
    if (prm.v_keys_vector) {
      if constexpr (kFormat == PACTS_FORMAT_BF16)
        return launch<D, kFormat, kSplit, false, false, false, false, false, true>(
            prm, items, merge_items, stream);
      else
        return launch_narrow<D, kFormat, kSplit, true>(prm, items, merge_items, stream);
    }
#endif
  if constexpr (kFormat == PACTS_FORMAT_BF16)
    return launch<D, kFormat, kSplit>(prm, items, merge_items, stream);
  else
    return launch_narrow<D, kFormat, kSplit, false>(prm, items, merge_items, stream);
}

template <int D>
spec::Status launch_format(const Params& prm, int64_t items, int64_t merge_items,
                           hipStream_t stream) {
#if PACTS_HIP_MATRIX_UNIT || (defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA)
  // V reaches the MMA as the pool's bf16 codes only when it is bf16 without a scale; otherwise
  // as scaled fp32 values cut into bf16 parts (kSplitV, src/kernel_mma.h).
  constexpr bool kSplit = true;
  if (prm.kv_format == PACTS_FORMAT_BF16 && prm.v.scale_mode == PACTS_SCALE_NONE) {
#if PACTS_HIP_MATRIX_UNIT
    // V whose consecutive tokens are adjacent (dim-major V): staged as V^T (src/kernel_mma.h,
    // kVt), the transposed form at <= 8 rows as for the other layouts.
    if (detail::kVtAllowed && prm.v.s_tok == 1) {
#if !defined(PACTS_EXPERIMENT_NO_NARROW)
      if constexpr (D <= 128)
        if (prm.rows_per_item <= 8)
          return launch<D, PACTS_FORMAT_BF16, false, false, true, false, false, false, true>(
              prm, items, merge_items, stream);
#endif
      return launch<D, PACTS_FORMAT_BF16, false, false, false, false, false, false, true>(
          prm, items, merge_items, stream);
    }
#endif
#if PACTS_HIP_MATRIX_UNIT && !defined(PACTS_EXPERIMENT_NO_NARROW)  // the latter: a bench/ variant
    if constexpr (D <= 128)
      if (prm.rows_per_item <= 8) {
#if defined(PACTS_EXPERIMENT_RING)  // bench/ variants ring*: bulk rows through the block's ring
        if (prm.rows_bulk)
          return launch<D, PACTS_FORMAT_BF16, false, false, true, false, true>(prm, items,
                                                                             merge_items, stream);
#endif
#if !defined(PACTS_EXPERIMENT_GENERAL_ROWS)  // bench/ variant general_rows: one kernel for all rows
        if (prm.rows_bulk)
          return launch<D, PACTS_FORMAT_BF16, false, false, true, false, false, true>(
              prm, items, merge_items, stream);
#endif
        return launch<D, PACTS_FORMAT_BF16, false, false, true>(prm, items, merge_items, stream);
      }
#endif
#if PACTS_HIP_MATRIX_UNIT && !defined(PACTS_EXPERIMENT_GENERAL_ROWS)
    if (prm.rows_bulk)
      return launch<D, PACTS_FORMAT_BF16, false, false, false, false, false, true>(
          prm, items, merge_items, stream);
#endif
    return launch<D, PACTS_FORMAT_BF16, false>(prm, items, merge_items, stream);
  }
#else
  constexpr bool kSplit = false;
#endif
  switch (prm.kv_format) {
    case PACTS_FORMAT_BF16: return launch_split<D, PACTS_FORMAT_BF16, kSplit>(prm, items, merge_items, stream);
    case PACTS_FORMAT_FP16: return launch_split<D, PACTS_FORMAT_FP16, kSplit>(prm, items, merge_items, stream);
    case PACTS_FORMAT_E4M3FN:
      return launch_split<D, PACTS_FORMAT_E4M3FN, kSplit>(prm, items, merge_items, stream);
    case PACTS_FORMAT_E4M3FNUZ:
      return launch_split<D, PACTS_FORMAT_E4M3FNUZ, kSplit>(prm, items, merge_items, stream);
    case PACTS_FORMAT_E5M2: return launch_split<D, PACTS_FORMAT_E5M2, kSplit>(prm, items, merge_items, stream);
    case PACTS_FORMAT_E5M2FNUZ:
      return launch_split<D, PACTS_FORMAT_E5M2FNUZ, kSplit>(prm, items, merge_items, stream);
    default:
#if PACTS_HIP_MATRIX_UNIT
      if constexpr (kSplit && split_transposed_built<D>())
        if (prm.rows_per_item <= 8)
          return launch<D, PACTS_FORMAT_E2M1, kSplit, false, true>(prm, items, merge_items, stream);
#endif
      return launch<D, PACTS_FORMAT_E2M1, kSplit>(prm, items, merge_items, stream);
  }
}

}  // namespace

spec::Result<DeviceInfo> device(int32_t ordinal) {
  hipDeviceProp_t prop{};
  const hipError_t e = hipGetDeviceProperties(&prop, ordinal);
  if (e != hipSuccess)
    return spec::Status(spec::Code::kDeviceError,
                        "device " + std::to_string(ordinal) + ": " + hipGetErrorString(e));
  DeviceInfo info;
  info.name = std::string(prop.name) + " (" + gpu::kVendor + ", " +
              std::to_string(prop.multiProcessorCount) + " multiprocessors)";
  info.multiprocessors = prop.multiProcessorCount;
  info.warp_size = gpu::kWarpSize;
  info.is_host = false;
  {
    unsigned char bytes[16];
    static_assert(sizeof prop.uuid.bytes == sizeof bytes);
    std::memcpy(bytes, prop.uuid.bytes, sizeof bytes);
    info.uuid = format_gpu_uuid(bytes);
    int version = 0;
    info.driver = platform::driver_description(hipDriverGetVersion(&version) == hipSuccess ? version : -1);
    if (hipRuntimeGetVersion(&version) == hipSuccess) info.runtime = "runtime " + std::to_string(version);
  }
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
  info.arch = prop.gcnArchName;
#else
  info.arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
#endif
  return info;
}

spec::Requirements requirements() { return {}; }

// spec/tolerance.md §2, what these kernels really do.
//
// Matrix-unit kernel (src/kernel_mma.h, NVIDIA mma.sync bf16 -> fp32):
//   u_q       2^-7 + 2^-16 = (1 + 2^-8)^2 - 1: both operands of every Q.K product are rounded
//             once to bf16 (RNE): q~ = fold_query(q) in fp32, then bf16; a K element of an fp16
//             pool or with a scale is decoded, scaled in fp32 and then rounded to bf16 (a bf16
//             pool without a scale is used as stored: exact). The bound charges the worst case,
//             both operands rounded (spec/tolerance.md §2, u_q). bf16 has fp32's exponent range,
//             so inside the range contract neither rounding overflows (R1, R3: <= 2^126).
//   u_p       2^-8 would do: P = expf(s - shift) in fp32 rounded to bf16 (to fp16 of P * 2^15,
//             2^-11, on the fp16 P.V path); V is not rounded (bf16 codes as stored, fp16 / fp8
//             codes as fp16 on the fp16 P.V path, or a scaled element as the exact sum of two or
//             three bf16 parts, src/kernel_mma.h; a deferred per-tensor V scale multiplies the
//             merged sum once in binary64, which adds 2^-53 inside u_acc's slack). Declared 2^-7 + 2^-16 all the same, the same as u_q: one profile
//             per backend, and it leaves room for a V part below bf16's normal range (a scaled V
//             element under 2^-102 is not split: it takes the exact fp32 CUDA-core path).
//   eta_p     2^-133: P's absolute rounding below bf16's normal range is at most 2^-134 (half the
//             smallest subnormal), times 1 + u_V for a rounded V (spec/tolerance.md §3.3): 2^-133
//   eta_p_formats  2^-40 for fp16, e4m3fn and e5m2 pools: their split kernels compute P.V on the
//             fp16 matrix unit where V enters as its codes, with P as fp16 of P * 2^15
//             (src/kernel_mma.h, kPvF16; the merge multiplies by 2^-15 exactly): below fp16's
//             normal range (P < 2^-29) its absolute rounding is at most half the smallest
//             subnormal, 2^-25, which is 2^-40 in P's units; V is exact there. A per-token V
//             scale of those formats keeps bf16 P, within the larger floor
//   p_rounded_in_denominator  false: l sums the fp32 P, before its rounding
//   u_logit   2^-22, u_acc 2^-21: the tensor core adds the products of an MMA step to the fp32
//             accumulator with alignment to the largest exponent and truncation (Fasi, Higham,
//             Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021):
//             one unit of 2^-23 per addition, charged as 2^-22 (twice the fp32 roundoff) in the
//             gamma terms; a split V adds each key three times (hi, mid, lo): 2^-21. The scale
//             products of fold_query and the softmax arithmetic are plain fp32 and within it
//   u_partial 2^-24: partials stored in fp32; the warps' states and the partitions are merged in
//             binary64
//   eps_exp   4 * 2^-24: CUDA expf is within 2 ulp (Programming Guide, Table of single-precision
//             functions), the rescale difference is exact (two_sum)
//   eps_tanh  4 * 2^-24: CUDA tanhf within 2 ulp
//   eps_log   2^-40: log and exp in binary64 (1 ulp)
//   ftz       false: built without fast math (nvcc's default -ftz=false); the tensor cores keep
//             bf16 and fp16 subnormal inputs (the fp16 P.V path relies on it for V codes and for P
//             below 2^-29: PACTS-ACC-6 runs every V code, ACC-1 small weights on huge V)
//
// CUDA-core kernel (src/kernel.h, AMD until an MFMA kernel exists): the host kernels' numerics,
// with the device's libm: fp32 throughout (u_logit = u_p = u_acc = u_partial = 2^-24, u_q = 0),
// the same eps_* and ftz.
spec::NumericsProfile profile(const DeviceInfo& device) {
  spec::NumericsProfile prof = spec::fp32_profile();
  prof.name = "hip-fp32";
  prof.u_q = 0;
  prof.eps_exp = 4.0 * std::ldexp(1.0, -24);
  prof.eps_tanh = 4.0 * std::ldexp(1.0, -24);
  prof.eps_log = std::ldexp(1.0, -40);
  prof.ftz = false;
#if PACTS_HIP_MATRIX_UNIT || (defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA)
  const double u_bf16 = std::ldexp(1.0, -8);
  prof.name = "hip-mma-bf16";
  prof.u_q = (1 + u_bf16) * (1 + u_bf16) - 1;
  prof.u_p = (1 + u_bf16) * (1 + u_bf16) - 1;
  prof.eta_p = std::ldexp(1.0, -133);
#if PACTS_HIP_MATRIX_UNIT
  // The fp16 P.V path (above): for the KV formats it serves.
  prof.eta_p_formats.kv_formats =
      1u << PACTS_FORMAT_FP16 | 1u << PACTS_FORMAT_E4M3FN | 1u << PACTS_FORMAT_E5M2;
  prof.eta_p_formats.eta_p = std::ldexp(1.0, -40);
#endif
  prof.p_rounded_in_denominator = false;
  prof.u_logit = std::ldexp(1.0, -22);
  prof.u_acc = std::ldexp(1.0, -21);
#endif
#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
  // The MFMA kernel (src/kernel_mfma.h, never run): the same roundings (Q~, K, P to bf16 once,
  // V exact) and the same declared accumulation terms. What AMD's matrix cores do inside a
  // 16-term step (rounding or truncation, bf16 subnormal inputs kept or flushed) is not measured
  // (kernel_mfma.h, "Numerics").
  prof.name = "hip-mfma-bf16";
  // The requantising Q.K paths (platform/matrix_amd_fp8.h qk_path) of this device's target: the
  // query is requantised by spec/tolerance.md §2.1's rule for exactly those KV formats, and the
  // reference applies it too. Their logits: exact products of the codes accumulated in fp32, one
  // rounding of the combined factor's product (within u_logit); K is not rounded and Q' is the
  // problem's query, so the declared u_q (bf16 operands) only loosens their bound.
  prof.q_requant.kv_formats =
      gpu::mfma::requant_kv_formats(gpu::mfma::amd_target_of(device.arch.c_str()));
  if (prof.q_requant.kv_formats != 0) {
    prof.q_requant.kind = spec::QueryRequant::kFp8RowPow2;
    prof.name = "hip-mfma-bf16-fp8q";
  }
#else
  (void)device;
#endif
  return prof;
}

spec::Result<Plan> plan(const pacts_problem& problem, const DeviceInfo& dev,
                        int32_t fixed_partition_size, int32_t fixed_partitions,
                        bool batch_invariant) {
  if (dev.is_host)
    return spec::not_supported("device " + dev.name + ": the HIP kernels need a GPU");
#if defined(PACTS_MUTANTS)
  if (spec::Status s = sync_device_mutant(); !s) return s;
#endif
  // The plan of kernels/src/plan_rules.h with the GPU kernels' rules: their tile and row tile,
  // the resident slots of the problem's tile kernel, and their workspace.
  config::PlanRules rules;
  rules.variant = std::string(
#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
                      "hip-mfma"
#else
                      PACTS_HIP_MATRIX_UNIT ? "hip-mma" : "hip"
#endif
                      )
#if defined(PACTS_UNSAFE_UNMASKED)
                  + "-UNSAFE-unmasked"
#endif
      ;
  rules.kernels = "the HIP kernels";
  rules.requirements = requirements();
  rules.tile_keys = tile_keys(problem.head_dim);
  rules.max_rows_per_item = detail::kMaxRows;
  rules.automatic = [&](int64_t row_tiles, int64_t max_keys) {
    return config::gpu_automatic_partitions(problem, dev.multiprocessors, blocks_per_sm(problem),
                                            row_tiles, max_keys);
  };
  rules.workspace = [&](int64_t partitions, int64_t row_tiles, uint64_t* bytes) {
    return split_workspace_bytes(problem, partitions, row_tiles, bytes);
  };
  rules.items_below_2_31 = true;  // one block per item, grids of at most 2^31 - 1 blocks
  spec::Result<Plan> out = config::make_plan(problem, dev, fixed_partition_size, fixed_partitions,
                                             batch_invariant, rules);
  if (out && k_scale_on_logit(problem.kv_format, problem.k_scale_mode, problem.k_scale,
                              problem.v_scale_mode))
    out.value().variant += "/k-logit";
  return out;
}

spec::Status decode(const Plan& plan, const pacts_buffers& buffers, uint32_t* error_word,
                    void* workspace, uint64_t workspace_bytes, void* stream) {
  const pacts_problem& p = plan.problem;
  if (spec::Status s = spec::validate(p, buffers, requirements()); !s) return s;
  const int64_t rows = int64_t{p.q_len} * (p.num_q_heads / p.num_kv_heads);
  const int64_t max_keys = int64_t{p.max_pages_per_seq} * p.page_size;
  if (plan.tile_keys != tile_keys(p.head_dim) || plan.rows_per_item < 1 ||
      plan.rows_per_item > std::min<int64_t>(rows, detail::kMaxRows) || plan.num_partitions < 1 ||
      plan.partition_size < 1 || plan.partition_size % plan.tile_keys != 0 ||
      int64_t{plan.partition_size} * plan.num_partitions < max_keys)
    return spec::invalid_argument("plan: not made by pacts::kernels::hip::plan for this problem (" +
                                  plan.variant + ")");
  if (plan.num_partitions > 1) {
    uint64_t need = 0;
    if (!split_workspace_bytes(p, plan.num_partitions, ceil_div(rows, plan.rows_per_item), &need) ||
        plan.workspace_bytes != need)
      return spec::invalid_argument("plan: workspace_bytes " + std::to_string(plan.workspace_bytes) +
                                    " does not match the plan");
    if (workspace_bytes < need || (need > 0 && workspace == nullptr))  // batch 0 needs none
      return spec::invalid_argument("workspace_bytes " + std::to_string(workspace_bytes) +
                                    ": the plan needs " + std::to_string(need) + " bytes");
    if (reinterpret_cast<uintptr_t>(workspace) % alignof(float) != 0)
      return spec::invalid_argument("workspace: must be aligned to 4 bytes");
  }
  if (p.batch == 0) return spec::Status::ok();
#if defined(PACTS_MUTANTS)
  if (spec::Status s = sync_device_mutant(); !s) return s;
#endif

  Params prm;
  prm.batch = p.batch;
  prm.q_len = p.q_len;
  prm.num_kv_heads = p.num_kv_heads;
  prm.group = p.num_q_heads / p.num_kv_heads;
  prm.head_dim = p.head_dim;
  prm.page_size = p.page_size;
#if !defined(PACTS_EXPERIMENT_PAGE_DIVIDE)  // timing experiment only (bench/ variant page_divide)
  for (int shift = 0; shift < 31; ++shift)
    if (int64_t{1} << shift == p.page_size) prm.page_shift = shift;
#endif
  prm.num_pages = p.num_pages;
  prm.max_pages_per_seq = p.max_pages_per_seq;
  prm.window = p.window;
  prm.block_table_stride = p.block_table_stride;
  prm.softmax_scale = p.softmax_scale;
  prm.q_scale = p.q_scale;
  prm.softcap = p.softcap;
  prm.has_sinks = p.has_sinks != 0;
  prm.want_lse = p.want_lse != 0;
  prm.q_format = p.q_format;
  prm.kv_format = p.kv_format;
  prm.out_format = p.out_format;
  prm.q_layout = p.q_layout;
  prm.out_layout = p.out_layout;
  prm.lse_layout = p.lse_layout;
  prm.rows = static_cast<int32_t>(rows);
  prm.rows_per_item = plan.rows_per_item;
  prm.row_tiles = static_cast<int32_t>(ceil_div(rows, plan.rows_per_item));
  prm.partitions = plan.num_partitions;
  prm.partition_size = plan.partition_size;
  prm.q = static_cast<const uint8_t*>(buffers.q.data);
  prm.block_table = static_cast<const int32_t*>(buffers.block_table.data);
  prm.context_lens = static_cast<const int32_t*>(buffers.context_lens.data);
  prm.sinks = static_cast<const float*>(buffers.sinks.data);
  prm.out = static_cast<uint8_t*>(buffers.out.data);
  prm.out_bytes = buffers.out.bytes;
  prm.lse = static_cast<float*>(buffers.lse.data);
  prm.k = pool_params(buffers.k, p.k_layout, p.k_scale_mode, p.nibble_order, p.k_scale,
                      buffers.k_scale, p.k_scale_layout);
  prm.v = pool_params(buffers.v, p.v_layout, p.v_scale_mode, p.nibble_order, p.v_scale,
                      buffers.v_scale, p.v_scale_layout);
  {
    // Whether every row of a pool is one contiguous run of bytes, 16-byte aligned where it starts
    // (a row of D elements, D / 2 bytes of e2m1, in one chunk): one bulk copy per row. The bf16
    // kernel takes such rows when neither pool has a scale (rows_bulk), the split kernels
    // whatever the format and scales (raw_bulk).
    const int64_t unit_bytes =
        p.kv_format == PACTS_FORMAT_BF16 || p.kv_format == PACTS_FORMAT_FP16 ? 2 : 1;
    const int64_t row_units = p.kv_format == PACTS_FORMAT_E2M1 ? p.head_dim / 2 : p.head_dim;
    const auto rows_whole = [&](const detail::PoolParams& pool) {
      const bool contiguous = pool.chunk >= row_units || pool.s_chunk == pool.chunk;
      return contiguous && reinterpret_cast<uintptr_t>(pool.data) % 16 == 0 &&
             (pool.s_page * unit_bytes) % 16 == 0 && (pool.s_head * unit_bytes) % 16 == 0 &&
             (pool.s_tok * unit_bytes) % 16 == 0;
    };
    const bool whole = PACTS_HIP_MATRIX_UNIT && rows_whole(prm.k) && rows_whole(prm.v);
    prm.rows_bulk = whole && p.kv_format == PACTS_FORMAT_BF16 &&
                    prm.k.scale_mode == PACTS_SCALE_NONE && prm.v.scale_mode == PACTS_SCALE_NONE;
    prm.raw_bulk = whole;
    const detail::PoolParams& k = prm.k;
    prm.k_chunks_bulk = PACTS_HIP_MATRIX_UNIT && p.kv_format == PACTS_FORMAT_BF16 &&
                        k.scale_mode == PACTS_SCALE_NONE && k.chunk == 8 && k.s_tok == 8 &&
                        reinterpret_cast<uintptr_t>(k.data) % 16 == 0 && k.s_page % 8 == 0 &&
                        k.s_head % 8 == 0 && k.s_chunk % 8 == 0;
    const detail::PoolParams& v = prm.v;
    const int64_t run = 16 / unit_bytes;  // elements of 16 bytes
    prm.v_keys_vector = PACTS_HIP_MATRIX_UNIT && v.s_tok == 1 && v.chunk == 1 &&
                        reinterpret_cast<uintptr_t>(v.data) % 16 == 0 && v.s_page % run == 0 &&
                        v.s_head % run == 0 && v.s_chunk % run == 0;
#if defined(PACTS_EXPERIMENT_RAW_CP_ASYNC)  // timing experiment only (bench/ variant raw_cp_async)
    prm.raw_bulk = false;
#endif
  }
  if (plan.num_partitions > 1) {
    const int64_t slots = int64_t{p.batch} * p.num_kv_heads * plan.num_partitions * rows;
    prm.ws_acc = static_cast<float*>(workspace);
    prm.ws_m = prm.ws_acc + slots * p.head_dim;
    prm.ws_l = prm.ws_m + slots;
#if defined(PACTS_EXPERIMENT_FUSED_MERGE)
    prm.ws_count = reinterpret_cast<uint32_t*>(prm.ws_l + slots);
#endif
  }
  prm.error_word = error_word;

  const int64_t merge_items = int64_t{p.batch} * p.num_kv_heads * prm.row_tiles;
  const int64_t items = merge_items * plan.num_partitions;
  const auto s = static_cast<hipStream_t>(stream);
  switch (p.head_dim) {
    case 64: return launch_format<64>(prm, items, merge_items, s);
    case 128: return launch_format<128>(prm, items, merge_items, s);
    default: return launch_format<256>(prm, items, merge_items, s);
  }
}

}  // namespace pacts::kernels::hip
