// The MFMA tile kernel of the HIP decode for AMD (gfx942, gfx950: v_mfma_f32_16x16x16_bf16, wave64,
// bf16 operands, fp32 accumulation): the algorithm and the numerics of the NVIDIA tensor-core
// kernel (src/kernel_mma.h, docs/kernel-design.md) with AMD's operand layout
// (platform/matrix_amd.h). Selected by PACTS_HIP_MFMA (src/decode_hip.cpp). Internal to
// kernels/hip/. COMPILE-CHECKED ONLY (tools/amd_device_check.cpp): it has never run on an AMD GPU;
// its fragment index algebra is proven on the host by tests/mfma_layout_test.cpp.
//
//   split_kv_mfma_kernel  one block per work item (sequence, KV head, partition, row tile), as
//                         split_kv_kernel (src/kernel.h), whose merge kernel it shares.
//
// What is the same as the NVIDIA kernel (so that the results depend on the same things): the work
// item; the owned keys (span: the union of the rows' visible keys in the partition); tiles of 16
// keys, wave w taking tiles w, w + kWaves, ... (4 waves, D 256 1); Q~ = fold_query in fp32 with
// the per-row power-of-two rescale of PACTS-EDGE-6, rounded once to bf16 (kept in registers, D 256
// read from LDS per tile); K as stored (bf16 without a scale) or decoded and scaled in fp32
// (fetch8 / decode8) and rounded once to bf16; V as stored (bf16 without a scale: kSplitV false)
// or decoded and scaled in fp32 and fed as 1 or 3 exact bf16 parts, the "tiny" elements
// (< 2^-102) added on the vector ALUs in fp32 with the same bf16 P; common::SoftmaxState per row
// and wave; P = expf(s - shift) in fp32, summed in fp32 into l, rounded to bf16 as the operand of
// P.V; the waves merged in binary64 in wave order with common::merge; the output written directly
// or the partials to the workspace (merge_kernel).
//
// What differs: the instruction (16 x 16 x 16: S of a tile is one 16 x 16 product per 16 dims,
// P.V one per 16 dims) and its operand layout. Both products are computed transposed
// (S^T = K Q~^T, O^T += V^T P^T: matrix_amd.h), which puts one query row in each lane (lane % 16):
// the lane's 4 S registers are 4 consecutive keys of its row, its softmax state is that row's, the
// row max and sum are butterflies over lane ^ 16 and lane ^ 32, and P stays in the registers the
// second product reads. The fp32 sum of a tile's P is (p0 + p1) + (p2 + p3) per lane (keys 4g ..
// 4g + 3), then the butterfly: the same shape as the NVIDIA kernel's, over other key groups, so l
// can differ from NVIDIA's in its last bits (a fixed order all the same). Staging: plain global
// loads (a group issued before any is stored) and LDS stores, one stage per wave, no cp.async.
//
// Numerics: the profile of the NVIDIA kernel is declared ("hip-mfma-bf16", decode_hip.cpp
// profile(): u_q = u_p = (1 + 2^-8)^2 - 1, u_logit 2^-22, u_acc 2^-21, eta_p 2^-133, ftz false).
// Not measured (no AMD GPU): how v_mfma_f32_16x16x16_bf16 adds its 16 exact products to the fp32
// accumulator (NVIDIA: truncation, one unit of 2^-23 per addition; the declared terms hold if AMD
// rounds or truncates no worse), and whether it keeps bf16 subnormal inputs (a Q~ row is moved up
// out of that range by the EDGE-6 rescale; a scaled K or a P below 2^-126 is not: were such inputs
// flushed, ftz = false and eta_p would be wrong for them). expf / tanhf / exp / log are ROCm's
// (ocml), not CUDA's: the declared eps_* assume <= 2 ulp in fp32, 1 ulp in binary64.
//
// The requantising Q.K paths (platform/matrix_amd_fp8.h qk_path: by KV format and target, never
// by guessing the bytes): gfx942 with e4m3fnuz / e5m2fnuz K and gfx950 with e4m3fn / e5m2 K take
// v_mfma_f32_16x16x32_{fp8,bf8}_fp8; gfx950 with MXFP4 K takes the scaled
// v_mfma_scale_f32_16x16x128_f8f6f4. There the query is requantised by spec/tolerance.md §2.1
// (common/requant.h: per row, fold_query in fp32, the power-of-two exponent e, fp8 codes of the
// KV family's e4m3) instead of rounded to bf16, and K is staged as the pool stores it (codes, then
// the key's fp32 scale or its e8m0 bytes in the same LDS row). The logit is the raw product of
// the codes, accumulated in fp32, times one combined factor (spec/contract.md §2.1 order 3): fp8,
// ldexp(S * significand, exponent) of 2^e * K scale (logit_factor); MXFP4, the hardware applies
// K's e8m0 bytes and the query's byte 127 + e (clamped to [0, 254]) to each 32-dim block, the
// rest of 2^e follows with ldexp. The numerics profile declares the rule for exactly these
// formats of the device's target (decode_hip.cpp). Not measured (no AMD GPU): the fp32
// accumulation inside the fp8 instructions, and how the scaled one handles an e8m0 0xFF of an
// owned block (OCP: NaN) and subnormal fp8 inputs; the declared u_logit 2^-22 assumes rounding or
// truncation no worse than NVIDIA's tensor cores.
//
// Poison-proof by construction, as kernel_mma.h: a K/V slot is loaded only for an owned key of the
// item, block-table entries, rows, per-token scales and e8m0 bytes are read for those keys only,
// and every other slot of a stage is written with zeros by the kernel.
#pragma once

#include "src/kernel.h"

#include "common/requant.h"
#include "platform/matrix_amd.h"
#include "platform/matrix_amd_fp8.h"

namespace pacts::kernels::hip::detail {

template <int D, bool kSplitV>
struct MfmaShape {
  static constexpr int kWave = gpu::mfma::kWave;
  // D 256: one wave per block (the waves' final states, 16 x D fp32 each, share the LDS with the
  // stages), as the NVIDIA kernel's one warp; otherwise 4.
  static constexpr int kWaves = D == 256 ? 1 : 4;
  // Q~'s B fragments stay in registers for D 64 and 128 (D / 8 VGPRs); D 256 reads them from LDS
  // per tile (as the NVIDIA kernel): with them in registers it reached 256 VGPRs plus AGPRs and
  // scratch on gfx942.
  static constexpr bool kQInRegisters = D <= 128;
  static constexpr int kThreads = kWaves * kWave;
  static constexpr int kKeys = 16;  // keys per wave tile: the M of S^T, the K of O^T
  static constexpr int kChunks = D / 8;  // 8-element chunks of a row (one fetch8)
  // 16-bit rows of K, V (bf16) and Q~ in LDS, padded by 4 elements (8 bytes): the 8-byte
  // fragment reads of 16 keys and the 2-byte V^T reads of 4 keys x 16 dims spread over the banks.
  static constexpr int kStride = gpu::mfma::lds_stride(D);
  static constexpr int kVStride = gpu::mfma::lds_stride(D);  // fp32 V rows (split)
  static constexpr int kKElems = kKeys * kStride;
  static constexpr int kVAt = kKElems;  // the V tile (bf16, or fp32 when split) after K
  // Split: the fp32 P of the tile (16 x 16) after the fp32 V tile, for the tiny elements.
  static constexpr int kPAt = kVAt + 2 * kKeys * kVStride;
  static constexpr int kStageElems = kSplitV ? kPAt + 2 * kMaxRows * kKeys : 2 * kKElems;
  static constexpr int kLoads = kKeys * kChunks / kWave;  // chunks per lane and pool: D / 32
  // Loads in flight before the stores, per pool: 4 for the bf16 kernel at D 128, else 2 (gfx942,
  // clang 22: 4 at D 128 split went past 256 VGPRs into AGPRs).
  static constexpr int kGroup = D == 128 && !kSplitV ? 4 : 2;
  static constexpr int kKSteps = D / gpu::mfma::kK;        // products of S^T
  static constexpr int kDTiles = D / gpu::mfma::kM;        // products (and accumulators) of O^T
  static_assert(kKeys == gpu::mfma::kM && kKeys == gpu::mfma::kK && kMaxRows == gpu::mfma::kN);
  static_assert(kKeys * kChunks % kWave == 0 && kLoads % kGroup == 0);
};

template <int D, bool kSplitV>
struct MfmaSmem {
  using S = MfmaShape<D, kSplitV>;
  struct Final {  // after the key loop: each wave's state, then the binary64 merge weights
    float acc[S::kWaves][kMaxRows * D];
    float m[S::kWaves][kMaxRows], l[S::kWaves][kMaxRows];
    double other[S::kWaves][kMaxRows];  // the wave's weight (merge_warps_and_store)
    bool use_other[S::kWaves][kMaxRows];
    double factor[kMaxRows];
  };
  // Q~ (bf16): in the first stage before the loop where it moves to registers, else behind the
  // stages all along.
  static constexpr int kStagesElems = S::kWaves * S::kStageElems;
  static constexpr int kQElems = kMaxRows * S::kStride;
  static constexpr int kQAt = S::kQInRegisters ? 0 : kStagesElems;
  static constexpr int kBufElems =
      S::kQInRegisters ? (kStagesElems > kQElems ? kStagesElems : kQElems) : kStagesElems + kQElems;
  union {
    alignas(16) uint16_t buf[kBufElems];
    Final fin;
  } u;
  __device__ uint16_t* stage(int wave) { return u.buf + wave * S::kStageElems; }
  __device__ uint16_t* q() { return u.buf + kQAt; }
};

// Blocks of the tile kernel that gfx942's 64 KiB of LDS per compute unit holds at once (the plan's
// slots per multiprocessor; registers are not the limit: see amd_device_check's report), for the
// bf16 kernel or a split one.
template <int D, bool kSplitV>
inline constexpr int kMfmaBlocksPerCu = static_cast<int>(64 * 1024 / sizeof(MfmaSmem<D, kSplitV>));

namespace mfma_detail {

// The bf16 (RNE) codes of N fp32 values as N / 2 register pairs; with `keep`, the values are
// replaced by their residuals (the next part of a split V).
template <int N>
__device__ inline void round_pairs(float (&x)[N], uint32_t (&w)[N / 2], bool keep) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const uint16_t lo = gpu::mfma::bf16_rn_bits(gpu::mfma::float_bits(x[2 * i]));
    const uint16_t hi = gpu::mfma::bf16_rn_bits(gpu::mfma::float_bits(x[2 * i + 1]));
    w[i] = gpu::mfma::pack2(lo, hi);
    if (keep) {
      x[2 * i] = residual(x[2 * i], common::bf16_to_float(lo));
      x[2 * i + 1] = residual(x[2 * i + 1], common::bf16_to_float(hi));
    }
  }
}

// Two 32-bit words as one 8-byte LDS access (the low word first) and back.
__device__ inline uint64_t join(uint32_t lo, uint32_t hi) {
  return static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32);
}
__device__ inline void split(uint64_t w, uint32_t (&r)[2]) {
  r[0] = static_cast<uint32_t>(w);
  r[1] = static_cast<uint32_t>(w >> 32);
}

// 8 16-bit codes into a K / V row of the stage (8-byte aligned: rows are D + 4 elements).
__device__ inline void store8(uint16_t* dst, const uint4& w) {
  reinterpret_cast<uint64_t*>(dst)[0] = join(w.x, w.y);
  reinterpret_cast<uint64_t*>(dst)[1] = join(w.z, w.w);
}

// The wave's stores of tile [t0, t0 + kKeys) into `stage`, from the lanes' slot_entry values;
// unowned slots are zeros of the kernel's own. Returns, to every lane, whether the tile holds a
// tiny V element (split only). The values are those of kernel_mma.h's stage_tile:
//   K: bf16 codes without a scale as they are; otherwise decoded, scaled in fp32 and rounded once
//      to bf16 (profile: u_q).
//   V: without kSplitV the bf16 codes as they are; with it the scaled fp32 values (split into
//      bf16 parts when read, tiny ones apart).
// Lane -> (slot, 8 dims from col): gpu::mfma::stage_chunk.
// The requantising Q.K paths (matrix_amd_fp8.h qk_path) stage K as stored instead, in bytes:
// K row `key` of the stage at byte 2 kStride key holds the key's codes (fp8: D bytes; e2m1: D / 2
// bytes, the low nibble the even dim), then at byte D its fp32 scale (fp8: 1, the tensor's or
// the token's) as common::logit_factor's significand (fp32) and exponent (int32), computed once
// per key here, or its D / 32 e8m0 bytes (e2m1). An unowned slot gets zero codes and, by
// selection, factor 0 or e8m0 byte 127: its scale is never loaded (spec/contract.md §5).
template <int D>
__device__ inline uint8_t* k_bytes(uint16_t* stage, int key) {
  return reinterpret_cast<uint8_t*>(stage) + 2 * gpu::mfma::lds_stride(D) * key;
}
template <int D>
__device__ inline const uint8_t* k_bytes(const uint16_t* stage, int key) {
  return reinterpret_cast<const uint8_t*>(stage) + 2 * gpu::mfma::lds_stride(D) * key;
}

template <int D, pacts_format kFormat>
__device__ inline void store_raw_k(uint16_t* stage, int slot, int col, bool own,
                                   const Fetched8& f, pacts_nibble_order order) {
  uint8_t* row = k_bytes<D>(stage, slot);
  if constexpr (kFormat == PACTS_FORMAT_E2M1) {
    uint32_t w = own ? f.raw.x : 0u;
    // The scaled MFMA reads the even dim from the low nibble.
    if (order == PACTS_NIBBLE_HIGH_FIRST) w = ((w >> 4) & 0x0F0F0F0Fu) | ((w & 0x0F0F0F0Fu) << 4);
    *reinterpret_cast<uint32_t*>(row + col / 2) = w;
    if (col % 32 == 0) row[D + col / 32] = own ? f.mx : uint8_t{127};
  } else {
    *reinterpret_cast<uint64_t*>(row + col) = own ? join(f.raw.x, f.raw.y) : 0ull;
    if (col == 0) {  // the key's scale as significand and exponent (common::logit_factor)
      const common::LogitFactor k = own ? common::logit_factor(f.scale, 0) : common::LogitFactor{0.0f, 0};
      *reinterpret_cast<float*>(row + D) = k.significand;
      *reinterpret_cast<int*>(row + D + 4) = k.exponent;
    }
  }
}

template <int D, pacts_format kFormat, bool kSplitV>
__device__ bool stage_tile(const Params& p, int64_t kv_head, int64_t entry, uint16_t* stage,
                           int lane) {
  using S = MfmaShape<D, kSplitV>;
  static_assert(kSplitV || kFormat == PACTS_FORMAT_BF16);
  constexpr bool kRawK =
      gpu::mfma::qk_path(gpu::mfma::kDeviceTarget, kFormat) != gpu::mfma::QkPath::kBf16;
  const bool raw_k = kFormat == PACTS_FORMAT_BF16 && p.k.scale_mode == PACTS_SCALE_NONE;
  bool tiny = false;
#pragma unroll 1
  for (int g0 = 0; g0 < S::kLoads; g0 += S::kGroup) {
    Fetched8 kf[S::kGroup], vf[S::kGroup];
    bool own[S::kGroup];
#pragma unroll
    for (int i = 0; i < S::kGroup; ++i) {  // every load of the group in flight before a store
      const gpu::mfma::KeyDim at = gpu::mfma::stage_chunk(lane, g0 + i, D);
      const int slot = at.key, col = at.d;
      const int64_t e = gpu::mfma::shfl_i64(entry, slot);
      own[i] = e >= 0;
      if (!own[i]) continue;  // unowned: never an address
      const int64_t page = e >> 32, in_page = e & 0xFFFFFFFF;
      int64_t k_row = 0, v_row = 0;
      kv_rows<kFormat>(p, kv_head, page, in_page, col, k_row, v_row);
      if (raw_k)
        kf[i].raw = load_raw8<PACTS_FORMAT_BF16>(p.k, k_row, col);
      else
        kf[i] = fetch8<kFormat>(p, p.k, kv_head, page, in_page, k_row, col);
      if constexpr (kSplitV)
        vf[i] = fetch8<kFormat>(p, p.v, kv_head, page, in_page, v_row, col);
      else
        vf[i].raw = load_raw8<PACTS_FORMAT_BF16>(p.v, v_row, col);
    }
#pragma unroll
    for (int i = 0; i < S::kGroup; ++i) {
      const gpu::mfma::KeyDim at = gpu::mfma::stage_chunk(lane, g0 + i, D);
      const int slot = at.key, col = at.d;
      uint16_t* kd = stage + gpu::mfma::tile_at(slot, col, D);
      if constexpr (kRawK) store_raw_k<D, kFormat>(stage, slot, col, own[i], kf[i], p.k.nibble_order);
      if (!own[i]) {  // zeros of the kernel's own
        if constexpr (!kRawK) store8(kd, make_uint4(0, 0, 0, 0));
        if constexpr (kSplitV) {
          float* vd = reinterpret_cast<float*>(stage + S::kVAt) + gpu::mfma::tile_at(slot, col, D);
          reinterpret_cast<float4*>(vd)[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          reinterpret_cast<float4*>(vd)[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        } else {
          store8(stage + S::kVAt + gpu::mfma::tile_at(slot, col, D), make_uint4(0, 0, 0, 0));
        }
        continue;
      }
      if constexpr (!kRawK) {  // (a raw K was stored above, as the pool holds it)
        if (raw_k) {
          store8(kd, kf[i].raw);
        } else {  // decoded, scaled in fp32, rounded once to bf16
          float x[8];
          uint32_t w[4];
          decode8<kFormat>(p.k, kf[i], col, x);
          round_pairs<8>(x, w, false);
          store8(kd, make_uint4(w[0], w[1], w[2], w[3]));
        }
      }
      if constexpr (kSplitV) {
        float x[8];
        decode8<kFormat>(p.v, vf[i], col, x);
#pragma unroll
        for (int j = 0; j < 8; ++j) tiny |= is_tiny(x[j]);
        float* vd = reinterpret_cast<float*>(stage + S::kVAt) + gpu::mfma::tile_at(slot, col, D);
        reinterpret_cast<float4*>(vd)[0] = make_float4(x[0], x[1], x[2], x[3]);
        reinterpret_cast<float4*>(vd)[1] = make_float4(x[4], x[5], x[6], x[7]);
      } else {
        store8(stage + S::kVAt + gpu::mfma::tile_at(slot, col, D), vf[i].raw);
      }
    }
  }
  return gpu::mfma::wave_any(tiny);
}

}  // namespace mfma_detail

template <int D, pacts_format kFormat, bool kSplitV>
__global__ void __launch_bounds__((MfmaShape<D, kSplitV>::kThreads))
split_kv_mfma_kernel(const Params p) {
  using S = MfmaShape<D, kSplitV>;
  namespace mf = gpu::mfma;
  extern __shared__ float4 smem_raw[];
  MfmaSmem<D, kSplitV>& sm = *reinterpret_cast<MfmaSmem<D, kSplitV>*>(smem_raw);
  const WorkItem wi = work_item(p);
  const int64_t b = wi.b, kv_head = wi.kv_head, z = wi.z;
  const int32_t r0 = wi.r0, rows = wi.rows;
  const bool direct = p.partitions == 1;
  const int t = threadIdx.x, wave = t / S::kWave, lane = t % S::kWave;
  const int my_row = mf::lane_row(lane);  // the row of every S and O register of this lane

  const SeqCheck seq = check_sequence(p, b, checked_keys(p, wi.z, true));
  if (seq.error != 0) {
    if (!direct) return;  // the merge block of this row tile writes the NaN rows and reports
    store_special_rows<D>(p, b, kv_head, r0, rows, true, 0u);
    if (t == 0 && !PACTS_MUTANT(hip_direct_error_not_reported)) report(p, seq.error);
    return;
  }
  const KeyRange part =
      direct ? seq.keys
             : common::intersect(common::partition_keys(z, p.partition_size), seq.keys);
  const auto visible = [&](int r) -> KeyRange {
    if (r >= rows) return {0, 0};
    if (PACTS_MUTANT(hip_mask_rows_token_major))
      return common::intersect(
          common::row_keys(seq.context, p.q_len, p.window, (r0 + r) % p.q_len), part);
    return common::intersect(
        common::row_keys(seq.context, p.q_len, p.window, (r0 + r) / p.group), part);
  };
  KeyRange span{INT64_MAX, INT64_MIN};
  uint32_t nonempty = 0;
  for (int r = 0; r < rows; ++r) {
    const KeyRange v = visible(r);
    if (v.empty()) continue;
    nonempty |= 1u << r;
    span.begin = min(span.begin, v.begin);
    span.end = max(span.end, v.end);
  }
  const KeyRange vis = visible(my_row);

  // Q~ of the non-empty rows (common::fold_query in fp32, then bf16); zeros elsewhere.
  const auto q_pair = [&](int r, int d, float* x) {
    x[0] = x[1] = 0.0f;
    if (!((nonempty >> r) & 1u)) return;
    const int64_t i = (r0 + r) / p.group, h = kv_head * p.group + (r0 + r) % p.group;
    const int64_t at = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head + d;
    for (int e = 0; e < 2; ++e)
      x[e] = common::fold_query(load_q(p, at + e), p.q_scale, p.softmax_scale);
  };
  // The Q.K path of this (target, format): matrix_amd_fp8.h's qk_path.
  constexpr gpu::mfma::QkPath kQk = gpu::mfma::qk_path(gpu::mfma::kDeviceTarget, kFormat);
  constexpr bool kRequant = kQk != gpu::mfma::QkPath::kBf16;
  constexpr common::Fp8Target kTarget = common::requant_target(kFormat);
  // bf16 path, PACTS-EDGE-6 (kernel_mma.h): a Q~ row whose largest |value| is below 2^-100 is
  // moved up by an exact power of two before the bf16 rounding, its logits down by the same
  // factor after S. Requantising paths: the row maximum and exponent e of spec/tolerance.md §2.1
  // (common/requant.h), which move a tiny row up by themselves.
  __shared__ uint32_t row_max_bits[kMaxRows];
  __shared__ float row_up[kMaxRows];
  __shared__ int row_e[kMaxRows];
  if (t < kMaxRows) row_max_bits[t] = 0u;
  __syncthreads();
  const auto magnitude = [](float x) {
    return kRequant ? common::requant_magnitude(x) : mf::float_bits(__builtin_fabsf(x));
  };
  for (int idx = t; idx < kMaxRows * D / 2; idx += S::kThreads) {
    float x[2];
    q_pair(idx / (D / 2), 2 * (idx % (D / 2)), x);
    mf::atomic_max_shared(&row_max_bits[idx / (D / 2)], magnitude(x[0]));
    mf::atomic_max_shared(&row_max_bits[idx / (D / 2)], magnitude(x[1]));
  }
  __syncthreads();
  if (t < kMaxRows) {
    const float largest = mf::float_of(row_max_bits[t]);
    float up = 1.0f;
    while (!kRequant && largest > 0.0f && largest * up < 0x1p-100f) up *= 0x1p8f;
    if (PACTS_MUTANT(hip_q_rescale_dropped)) up = 1.0f;
    row_up[t] = up;
    row_e[t] = kRequant ? common::requant_exponent(row_max_bits[t], kTarget) : 0;
  }
  __syncthreads();
  uint16_t* const q_smem = sm.q();
  // Requantised Q' codes: row r's bytes at byte 2 kStride r (the bf16 tile's row starts).
  uint8_t* const q8 = reinterpret_cast<uint8_t*>(q_smem);
  for (int idx = t; idx < kMaxRows * D / 2; idx += S::kThreads) {
    const int r = idx / (D / 2), d = 2 * (idx % (D / 2));
    float x[2];
    q_pair(r, d, x);
    if constexpr (kRequant) {
      const int e = row_e[r];
      q8[2 * S::kStride * r + d] = common::requant_code(x[0], e, kTarget);
      q8[2 * S::kStride * r + d + 1] = common::requant_code(x[1], e, kTarget);
    } else {
      const float up = row_up[r];
      *reinterpret_cast<uint32_t*>(&q_smem[mf::tile_at(r, d, D)]) =
          mf::pack2(mf::bf16_rn_bits(mf::float_bits(x[0] * up)),
                    mf::bf16_rn_bits(mf::float_bits(x[1] * up)));
    }
  }
  const float logit_down = 1.0f / row_up[my_row];  // exact: a power of two
  const int q_e = row_e[my_row];                    // requantising paths: Q' = codes * 2^q_e
  const gpu::mfma::MxQueryScale mx_q = gpu::mfma::mx_query_scale(q_e);
  __syncthreads();
  // Q~ as the B operand of step kk of S^T = K Q~^T (registers 0..3: dims at.d .. at.d + 3):
  // loaded once into registers (D 64, 128) or per tile from LDS (D 256).
  const auto q_fragment = [&](int kk, uint32_t (&w)[2]) {
    const mf::RowDim at = mf::qk_b(lane, 0, kk);
    const uint64_t* at64 = reinterpret_cast<const uint64_t*>(&q_smem[mf::tile_at(at.row, at.d, D)]);
    mfma_detail::split(*at64, w);
  };
  // The requantising paths' B operands: 8 Q' codes of step kk (fp8, one 8-byte read), or the 32
  // of step kk of the scaled instruction (two stripes of 16 dims; dims past D are zeros).
  const auto q8_fragment = [&](int kk) {
    const mf::RowDim at = mf::qk8_b(lane, 0, kk);
    return *reinterpret_cast<const uint64_t*>(q8 + 2 * S::kStride * at.row + at.d);
  };
  const auto qmx_fragment = [&](int kk, uint32_t (&w)[8]) {
#pragma unroll
    for (int stripe = 0; stripe < 2; ++stripe) {
      const mf::RowDim at = mf::qkmx_b(lane, 16 * stripe, kk);
      const uint32_t* src = reinterpret_cast<const uint32_t*>(q8 + 2 * S::kStride * at.row + at.d);
#pragma unroll
      for (int x = 0; x < 4; ++x) w[4 * stripe + x] = at.d < D ? src[x] : 0u;
    }
  };
  constexpr int kQ8Steps = D / gpu::mfma::kK8;
  constexpr int kMxSteps = (D + gpu::mfma::kKMx - 1) / gpu::mfma::kKMx;
  constexpr int kQRegs = S::kQInRegisters ? 1 : 0;
  uint32_t qb[kQRegs && !kRequant ? S::kKSteps : 1][2];
  uint64_t qb8[kQRegs && kQk == gpu::mfma::QkPath::kFp8 ? kQ8Steps : 1];
  uint32_t qbm[kQRegs && kQk == gpu::mfma::QkPath::kMxScaled ? kMxSteps : 1][8];
  if constexpr (S::kQInRegisters) {
    if constexpr (kQk == gpu::mfma::QkPath::kFp8) {
#pragma unroll
      for (int kk = 0; kk < kQ8Steps; ++kk) qb8[kk] = q8_fragment(kk);
    } else if constexpr (kQk == gpu::mfma::QkPath::kMxScaled) {
#pragma unroll
      for (int kk = 0; kk < kMxSteps; ++kk) qmx_fragment(kk, qbm[kk]);
    } else {
#pragma unroll
      for (int kk = 0; kk < S::kKSteps; ++kk) q_fragment(kk, qb[kk]);
    }
    if (!PACTS_MUTANT(hip_q_barrier_dropped)) __syncthreads();  // the stages reuse Q~'s memory
  }

  // V parts fed to P.V (kernel_mma.h): one where V is exact in bf16 (fp8 without an fp32 scale,
  // MXFP4), three for any other split V. Tiny elements take the vector-ALU path either way.
  constexpr bool kByteFormat = !kIs16<kFormat>;
  const int v_parts = kByteFormat && (p.v.scale_mode == PACTS_SCALE_NONE ||
                                      p.v.scale_mode == PACTS_SCALE_MX_BLOCK)
                          ? 1
                          : (kSplitV ? 3 : 1);
  float acc[S::kDTiles][4];
#pragma unroll
  for (int n = 0; n < S::kDTiles; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;
  common::SoftmaxState state;  // row my_row

  const int64_t first = span.empty() ? 0 : span.begin / S::kKeys;
  const int64_t last = span.empty() ? 0 : (span.end + S::kKeys - 1) / S::kKeys;
  uint16_t* const stage = sm.stage(wave);
  const uint16_t* const kt = stage;
  for (int64_t tile = first + wave; tile < last; tile += S::kWaves) {
    const int64_t entry = slot_entry<S::kKeys>(p, b, tile * S::kKeys, span, lane);
    mf::wave_sync();  // every lane is done with the stage (the previous tile)
    [[maybe_unused]] const bool tiny =
        mfma_detail::stage_tile<D, kFormat, kSplitV>(p, kv_head, entry, stage, lane);
    mf::wave_sync();  // the tile's stores are visible to the whole wave

    // S^T = K Q~^T: one product per 16 dims; sc[r] = S[my_row][key s_c(lane, r).key]; then
    // logit(r), the logit of that register (the C / D layout is the same for every path).
    float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (kQk == gpu::mfma::QkPath::kFp8) {
      // Raw K codes x Q' codes, exact products accumulated in fp32 (spec/contract.md §2.1 order 3).
#pragma unroll
      for (int kk = 0; kk < kQ8Steps; ++kk) {
        const mf::KeyDim at = mf::qk8_a(lane, 0, kk);  // bytes 0..7: dims at.d .. at.d + 7
        const uint64_t ka = *reinterpret_cast<const uint64_t*>(mfma_detail::k_bytes<D>(kt, at.key) + at.d);
        const uint64_t qv = S::kQInRegisters ? qb8[S::kQInRegisters ? kk : 0] : q8_fragment(kk);
        mf::mfma_16x16x32_fp8<mf::k_operand_is_bf8(kFormat)>(sc, ka, qv);
      }
    } else if constexpr (kQk == gpu::mfma::QkPath::kMxScaled) {
      // e2m1 K with its e8m0 bytes x Q' codes with 2^e as far as an e8m0 byte holds it.
#pragma unroll
      for (int kk = 0; kk < kMxSteps; ++kk) {
        const mf::KeyDim at = mf::qkmx_a(lane, 0, kk);  // 32 dims at.d .. at.d + 31: one block
        uint32_t ka[4] = {0u, 0u, 0u, 0u};
        int scale_k = 127;
        if (at.d < D) {
          const uint8_t* row = mfma_detail::k_bytes<D>(kt, at.key);
          const uint32_t* src = reinterpret_cast<const uint32_t*>(row + at.d / 2);
#pragma unroll
          for (int x = 0; x < 4; ++x) ka[x] = src[x];
          scale_k = row[D + mf::qkmx_a_block(lane, kk)];
        }
        uint32_t qv[8];
        if constexpr (S::kQInRegisters) {
#pragma unroll
          for (int x = 0; x < 8; ++x) qv[x] = qbm[S::kQInRegisters ? kk : 0][x];
        } else {
          qmx_fragment(kk, qv);
        }
        mf::mfma_scale_16x16x128_e2m1_e4m3(sc, ka, qv, scale_k, mx_q.byte);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < S::kKSteps; ++kk) {
        const mf::KeyDim at = mf::qk_a(lane, 0, kk);  // registers 0..3: dims at.d .. at.d + 3
        uint32_t ka[2];
        mfma_detail::split(*reinterpret_cast<const uint64_t*>(kt + mf::tile_at(at.key, at.d, D)), ka);
        if constexpr (!S::kQInRegisters) q_fragment(kk, qb[0]);
        mf::mfma_16x16x16_bf16(sc, ka, qb[S::kQInRegisters ? kk : 0]);
      }
    }
    const auto logit = [&](int r) -> float {
      if constexpr (kQk == gpu::mfma::QkPath::kFp8) {
        // The combined factor 2^q_e * (K scale), as significand and exponent: no fp32
        // intermediate overflows whatever the size of Q (common/requant.h logit_factor).
        const uint8_t* row = mfma_detail::k_bytes<D>(kt, mf::s_c(lane, r).key);
        const float significand = *reinterpret_cast<const float*>(row + D);
        const int exponent = *reinterpret_cast<const int*>(row + D + 4);
        return __builtin_ldexpf(sc[r] * significand, exponent + q_e);
      } else if constexpr (kQk == gpu::mfma::QkPath::kMxScaled) {
        return __builtin_ldexpf(sc[r], mx_q.residual);
      } else {
        return sc[r] * logit_down;
      }
    };
    // Softmax step of the lane's row over its 4 keys; the row's other keys are in lane ^ 16,
    // lane ^ 32 and lane ^ 48.
    const int64_t t0 = tile * S::kKeys;
    const auto column = [&](int64_t j) {
      return static_cast<int>(j < t0 ? 0 : (j - t0 > S::kKeys ? S::kKeys : j - t0));
    };
    const int ja = column(vis.begin), jb = column(vis.end);
    float sv[4], pv[4];
    bool in[4];
    float tile_max = -INFINITY;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int key = mf::s_c(lane, r).key;
      in[r] = key >= ja && key < jb;
      sv[r] = logit(r);
      if (in[r] && p.softcap > 0.0f) sv[r] = common::soft_cap(sv[r], p.softcap);
      if (in[r]) tile_max = common::max_finite(tile_max, sv[r]);
    }
    tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, mf::kRowXor[0]));
    tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, mf::kRowXor[1]));
    const common::TileStep step = state.begin_tile(tile_max);
#pragma unroll
    for (int r = 0; r < 4; ++r) pv[r] = in[r] ? expf(sv[r] - step.shift) : 0.0f;  // select
    // The tile's sum in a fixed order; the butterfly leaves the same value in the row's lanes.
    float sum = (pv[0] + pv[1]) + (pv[2] + pv[3]);
    sum += PACTS_SHFL_XOR(sum, mf::kRowXor[0]);
    sum += PACTS_SHFL_XOR(sum, mf::kRowXor[1]);
    state.add(sum);
#pragma unroll
    for (int n = 0; n < S::kDTiles; ++n)
#pragma unroll
      for (int x = 0; x < 4; ++x) acc[n][x] *= step.alpha;
    // P in bf16, in place: B register r of O^T is S register r (matrix_amd.h, p_in_place).
    uint16_t pc[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) pc[r] = mf::bf16_rn_bits(mf::float_bits(pv[r]));
    const uint32_t pb[2] = {mf::pack2(pc[0], pc[1]), mf::pack2(pc[2], pc[3])};

    if constexpr (kSplitV) {
      const float* vf = reinterpret_cast<const float*>(stage + S::kVAt);
      // Tiny V elements: acc += P t on the vector ALUs with the same bf16 P, in key order.
      if (tiny) {
        float* pt = reinterpret_cast<float*>(stage + S::kPAt);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const mf::RowKey rk = mf::s_c(lane, r);
          pt[rk.row * S::kKeys + rk.key] = common::bf16_to_float(pc[r]);
        }
        mf::wave_sync();
        // Per accumulator element the fp32 sum over the keys in key order from 0, then added to
        // acc (kernel_mma.h's order); one 16-dim tile at a time (4 partial sums in registers).
#pragma unroll
        for (int n = 0; n < S::kDTiles; ++n) {  // unrolled: acc stays in registers
          float ts[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 1
          for (int k = 0; k < S::kKeys; ++k) {
            const float pk = pt[my_row * S::kKeys + k];  // every O register's row is my_row
#pragma unroll
            for (int x = 0; x < 4; ++x) {
              const float v = vf[mf::tile_at(k, mf::o_c(lane, x, n).d, D)];
              ts[x] += pk * (is_tiny(v) ? v : 0.0f);  // selection
            }
          }
#pragma unroll
          for (int x = 0; x < 4; ++x) acc[n][x] += ts[x];
        }
      }
      // O^T += V^T P^T per 16 dims, V as hi, mid, lo (or one part), tiny elements as 0.
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
        float x[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const mf::KeyDim at = mf::pv_a(lane, r, n);
          const float v = vf[mf::tile_at(at.key, at.d, D)];
          x[r] = is_tiny(v) ? 0.0f : v;
        }
#pragma unroll 1
        for (int part = 0; part < v_parts; ++part) {
          uint32_t va[2];
          mfma_detail::round_pairs<4>(x, va, true);
          mf::mfma_16x16x16_bf16(acc[n], va, pb);
        }
      }
    } else {
      // O^T += V^T P^T per 16 dims, V's bf16 codes as stored.
      const uint16_t* vt = stage + S::kVAt;
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
        uint16_t e[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const mf::KeyDim at = mf::pv_a(lane, r, n);
          e[r] = vt[mf::tile_at(at.key, at.d, D)];
        }
        const uint32_t va[2] = {mf::pack2(e[0], e[1]), mf::pack2(e[2], e[3])};
        mf::mfma_16x16x16_bf16(acc[n], va, pb);
      }
    }
  }
  // Every wave is done with the stages: they become the waves' final states.
  if (!PACTS_MUTANT(hip_final_barrier_dropped)) __syncthreads();

  typename MfmaSmem<D, kSplitV>::Final& fin = sm.u.fin;
#pragma unroll
  for (int n = 0; n < S::kDTiles; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const mf::RowDim o = mf::o_c(lane, x, n);
      fin.acc[wave][o.row * D + o.d] = acc[n][x];
    }
  if (lane < kMaxRows) {  // lanes 0..15 hold rows 0..15 (matrix_amd.h, one_row_per_lane)
    fin.m[wave][my_row] = state.m;
    fin.l[wave][my_row] = state.l;
  }
  __syncthreads();
  merge_warps_and_store<D, S::kWaves, S::kThreads>(p, fin, b, kv_head, z, r0, rows, nonempty, direct, t);
}

}  // namespace pacts::kernels::hip::detail
