// The matrix-unit tile kernel of the HIP decode (NVIDIA mma.sync m16n8k16, bf16 operands, fp32
// accumulation): the algorithm of pacts/decode.h with the math of kernels/common/, for the
// vendors whose platform layer sets PACTS_HIP_MATRIX_UNIT (platform/matrix_nvidia.h). Internal to
// kernels/hip/; NOTES.md has the design, the numerics and the figures.
//
//   split_kv_mma_kernel  one block per work item (sequence, KV head, partition, row tile), as
//                        split_kv_kernel (src/kernel.h), whose merge kernel it shares.
//
// Structure. The item's rows (G * L of them, at most 16) are the M = 16 of the MMA; Q~ (fold_query,
// rounded once to bf16) stays in registers as A fragments (D 256: read from shared memory per
// tile). The partition's keys are cut into
// tiles of kKeys = 16 keys; warp w takes tiles w, w + kWarps, ... and keeps its own online-softmax
// state (m, l per row) and accumulator (16 x D fp32 in C fragments). A warp streams its tiles
// through its own shared-memory stages: K and V rows stay 16-bit (bf16) there, XOR-swizzled
// by 16-byte chunk so that ldmatrix and the 16-byte stores are conflict-free; bf16 pools without a
// scale move by cp.async, two stages (the next tile is in flight while the current one is
// computed). fp16 or scaled pools (one stage) are decoded and scaled in fp32 (common::scaled: the
// scale before any product with Q, spec/contract.md §2.1 order 2): K rounded once to bf16, V kept
// in fp32 and fed as three exact bf16 parts (stage_tile). Per tile: S = Q~ K^T (2 x D/16 MMAs),
// soft-cap, the row max over the quad, common::SoftmaxState, P = expf(s - shift) in fp32 (summed
// in fp32 into l), P rounded to bf16 as the A operand of P.V (D/8 MMAs, x3 split). No block-wide barrier in
// the loop. At the end the warps' states are combined in binary64, in warp order, with
// common::merge (the partition merge's math): the result depends on the plan only (PACTS-META-2).
//
// Poison-proof by construction (spec/contract.md §1, §5): a K/V slot is loaded only for an owned
// key of the item (the span: the union of the rows' visible keys in the partition), block-table
// entries are read for those keys only, and every other slot of a stage is written with zeros by
// the kernel, so its P (0 by selection) meets a zero, never unowned bytes. A key that one row of
// the tile sees and another does not is owned data: its P is 0 by selection for the row that does
// not see it (finite owned values give exact zeros; an owned NaN there is outside the contract,
// §2.3, and can reach that row through 0 * NaN: NOTES.md).
//
// PACTS_UNSAFE_UNMASKED (never in a production target, NOTES.md): every slot of a tile is loaded
// through its block-table entry, owned or not, and no slot is zero-filled. Only for timing the
// cost of the masking on valid inputs (issue 8).
#pragma once

#include "src/kernel.h"

namespace pacts::kernels::hip::detail {

// kSplitV: V is staged as scaled fp32 values and reaches the MMA as three bf16 parts (the pool
// is fp16 or scaled); otherwise V is the pool's own bf16 codes. Both keep the same warps and
// the same key-to-warp assignment, so scaling V by 2^k through a scale gives exactly 2^k times
// the unscaled result (PACTS-ACC-4: the parts mid and lo of such values are 0).
template <int D, bool kSplitV>
struct MmaShape {
  // D = 256: one warp per block, Q~ read from shared memory per tile (its fragments and the
  // 16 x 256 accumulator do not both fit in registers); otherwise Q~ stays in registers.
  static constexpr bool kQInRegisters = D <= 128;
  static constexpr int kWarps = D == 256 ? 1 : 4;
  static constexpr int kThreads = kWarps * gpu::kWarpSize;
  // Blocks that share a multiprocessor of the H200 (registers, shared memory): the plan's slots.
  static constexpr int kBlocksPerSm = D == 256 ? 5 : D == 128 ? 2 : 3;
  static constexpr int kKeys = 16;        // keys per warp tile: the K of P.V, two N-tiles of Q.K^T
  static constexpr int kVParts = kSplitV ? 3 : 1;
  // Two stages where the copies are asynchronous (cp.async); a converted tile is stored by the
  // warp itself before it is used, so one stage.
  static constexpr int kStages = kSplitV ? 1 : 2;
  static constexpr int kChunks = D / 8;   // 16-byte chunks of a row
  static constexpr int kTileElems = kKeys * D;
  // 16-bit elements of a stage: K, then V (bf16) or (split) V in fp32 with rows of kVStride
  // floats (padded: the fragment loads of a warp hit 32 distinct banks) and the fp32 P of the
  // tile (16 x 16).
  static constexpr int kVStride = D + 4;
  static constexpr int kPAt = kTileElems + 2 * kKeys * kVStride;
  static constexpr int kStageElems = kSplitV ? kPAt + 2 * kMaxRows * kKeys : 2 * kTileElems;
  static constexpr int kLoads = kKeys * kChunks / gpu::kWarpSize;  // chunks per lane per pool
  static constexpr int kKSteps = D / 16;  // MMAs along d for Q.K^T
  static constexpr int kDTiles = D / 8;   // N-tiles of P.V
  static_assert(kKeys * kChunks % gpu::kWarpSize == 0 && kChunks >= 8);
};

template <int D, bool kSplitV>
struct MmaSmem {
  using S = MmaShape<D, kSplitV>;
  struct Final {  // after the key loop: each warp's state, then the binary64 merge weights
    float acc[S::kWarps][kMaxRows * D];
    float m[S::kWarps][kMaxRows], l[S::kWarps][kMaxRows];
    double self[S::kWarps][kMaxRows], other[S::kWarps][kMaxRows];
    bool use_other[S::kWarps][kMaxRows];
    double factor[kMaxRows];
  };
  // Per warp and stage the K tile and the V part tiles (bf16); Q~ (bf16) behind them when it is
  // read from shared memory all along, else in the first stage before the loop.
  static constexpr int kStagesElems = S::kWarps * S::kStages * S::kStageElems;
  static constexpr int kQAt = S::kQInRegisters ? 0 : kStagesElems;
  union {
    alignas(16) uint16_t buf[kStagesElems + (S::kQInRegisters ? 0 : kMaxRows * D)];
    Final fin;
  } u;
  __device__ uint16_t* stage(int warp) { return u.buf + warp * S::kStages * S::kStageElems; }
  __device__ uint16_t* q() { return u.buf + kQAt; }
};

// Element offset of (row, chunk) in a 16-bit tile of rows of D elements: the chunk is XORed with
// row % 8, so the 8 rows an ldmatrix phase reads (and 8 consecutive chunks of a row that a store
// phase writes) fall in 8 distinct 16-byte bank groups.
template <int D>
__device__ inline int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// The bf16 (RNE) codes of 8 fp32 values, and the values replaced by their residuals.
__device__ inline uint4 round8(float (&x)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = gpu::pack_bf16x2_rn(x[2 * i], x[2 * i + 1]);
    x[2 * i] = residual(x[2 * i], common::bf16_to_float(static_cast<uint16_t>(w[i] & 0xFFFFu)));
    x[2 * i + 1] = residual(x[2 * i + 1], common::bf16_to_float(static_cast<uint16_t>(w[i] >> 16)));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Mutants hip_v_tail_unmasked and hip_padding_entries_as_pages (#7092, kernels/common/mutant.h):
// slot_entry's answer, except that a slot of the tile past n_b is loaded as well, through the
// block-table entry of its column: the last owned page's tail, or a padding column (page 0 where
// the entry is no page id, as #7092 pinned padding; the range check keeps the run alive). Its P is
// 0 by selection and meets the slot's bytes in the MMA. Mutant builds only reach it.
template <int kKeys>
__device__ inline int64_t unowned_slot_entry(const Params& p, int64_t b, int64_t t0,
                                             KeyRange owned, int64_t context, int lane) {
  const int64_t entry = slot_entry<kKeys>(p, b, t0, owned, lane);
  const int64_t j = t0 + lane;
  if (entry >= 0 || lane >= kKeys || context <= 0 || j < context ||
      j >= int64_t{p.max_pages_per_seq} * p.page_size)
    return entry;
  const int64_t column = j / p.page_size;
  const bool tail = column == (context - 1) / p.page_size;
  if (tail ? !PACTS_MUTANT(hip_v_tail_unmasked) : !PACTS_MUTANT(hip_padding_entries_as_pages))
    return entry;
  int64_t page = p.block_table[b * p.block_table_stride + column];
  if (!common::page_id_ok(static_cast<int32_t>(page), p.num_pages)) page = 0;
  return page << 32 | (j % p.page_size);
}

// 8 bf16 codes of a pool row by cp.async (16 B, aligned, one chunk) or by loads; `col_at` is
// chunk_offset(pool, col), which the caller may compute once per lane.
__device__ inline void copy_bf16x8(const PoolParams& pool, int64_t row, int col, int64_t col_at,
                                   uint16_t* dst) {
  const uint16_t* src = reinterpret_cast<const uint16_t*>(pool.data) + row + col_at;
  if (pool.chunk % 8 == 0 && (reinterpret_cast<uintptr_t>(src) & 15u) == 0)
    gpu::cp_async16(dst, src);
  else
    *reinterpret_cast<uint4*>(dst) = load_raw8<PACTS_FORMAT_BF16>(pool, row, col);
}

// The warp's stores of tile [t0, t0 + kKeys) into `stage`, from the lanes' slot_entry values.
// Slots outside the owned keys are zeroed by the kernel (their entries, rows and scales are never
// read). Returns, to every lane, whether the tile holds a tiny V element (split only).
//   K: bf16 codes without a scale as they are (cp.async when aligned); otherwise scaled in fp32
//      and rounded once to bf16 (profile: u_q).
//   V: without kSplitV the bf16 codes as they are; with it the scaled fp32 value v is stored as
//      v = hi + mid + lo, each bf16 (hi = RNE(v), mid = RNE(v - hi), lo = v - hi - mid), exact
//      for every fp32 v with |v| >= 2^-102 (24 significant bits = 3 x 8, every part a normal
//      bf16 or 0); a non-zero v below 2^-102 ("tiny", down to the fp32 subnormals) goes to an
//      fp32 tile instead and is added on the CUDA cores (mma_tile). So P.V sees V unrounded
//      (PACTS-ACC-3: a single key's output is RNE(v) exactly).
template <int D, pacts_format kFormat, bool kSplitV>
__device__ bool stage_tile(const Params& p, int64_t kv_head, int64_t entry, uint16_t* stage,
                           int lane) {
  using S = MmaShape<D, kSplitV>;
  const bool raw_k = kFormat == PACTS_FORMAT_BF16 && p.k.scale_mode == PACTS_SCALE_NONE;
  if constexpr (!kSplitV) {
    // bf16 V without a scale (the host picks kSplitV otherwise): copied as stored, by cp.async
    // where a row's 16 bytes are aligned and in one chunk (asynchronous: the next tile is in
    // flight while this one is computed), by loads elsewhere. K likewise when it has no scale;
    // a scaled K (per-tensor or per-token, V unscaled) is decoded, scaled and rounded to bf16.
    static_assert(kFormat == PACTS_FORMAT_BF16);
    // A lane copies the same chunk of every row it copies (the warp covers kWarpSize / kChunks
    // rows per step), so the chunk's offsets in K and V rows are computed once, not per load
    // (the general addressing of issue 6 cost the bf16 kernel 10% on the H200). Not for D 64:
    // its 168 registers (3 blocks per SM) cannot also hold them (ptxas spilled 80 bytes).
    static_assert(gpu::kWarpSize % S::kChunks == 0);
    constexpr bool kHoist = D >= 128;
    const int64_t k_col0 = kHoist ? chunk_offset(p.k, lane % S::kChunks * 8) : 0;
    const int64_t v_col0 = kHoist ? chunk_offset(p.v, lane % S::kChunks * 8) : 0;
#pragma unroll 2
    for (int n = 0; n < S::kLoads; ++n) {
      const int idx = lane + n * gpu::kWarpSize;
      const int slot = idx / S::kChunks, chunk = idx % S::kChunks, col = chunk * 8;
      uint16_t* kd = stage + swz<D>(slot, chunk);
      uint16_t* vd = kd + S::kTileElems;
      const int64_t e = PACTS_SHFL(entry, slot);
      if (e < 0) {  // unowned: never an address; zeros of the kernel's own
        *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
        continue;
      }
      const int64_t page = e >> 32, in_page = e & 0xFFFFFFFF;
      int64_t k_row = 0, v_row = 0;
      kv_rows<kFormat>(p, kv_head, page, in_page, col, k_row, v_row);
      if (raw_k) {
        copy_bf16x8(p.k, k_row, col, kHoist ? k_col0 : chunk_offset(p.k, col), kd);
      } else {
        float x[8];
        decode8<kFormat>(p.k, fetch8<kFormat>(p, p.k, kv_head, page, in_page, k_row, col), col, x);
        *reinterpret_cast<uint4*>(kd) = round8(x);
      }
      copy_bf16x8(p.v, v_row, col, kHoist ? v_col0 : chunk_offset(p.v, col), vd);
    }
    return false;
  } else {
    // Decoded formats: a group of loads is issued before the first is decoded (a load-use
    // chain per 8 elements left a warp waiting on one global latency after another: 7x the
    // bf16 time for fp8 on the H200), as many as the registers allow next to the accumulators
    // (ptxas, sm_90): D 128 4 loads of 16-bit codes or 8 of fp8 / e2m1 per pool; D 256 2 (e2m1
    // spills 8 bytes there); D 64 (168 registers for 3 blocks) 2, or 4 of e2m1.
    constexpr bool k16 = kIs16<kFormat>, kFp4 = kFormat == PACTS_FORMAT_E2M1;
    constexpr int kWant = D == 128 ? (k16 ? 4 : 8) : D == 256 ? 2 : (kFp4 ? 4 : 2);
    constexpr int kGroup = kWant < S::kLoads ? kWant : S::kLoads;
    static_assert(S::kLoads % kGroup == 0);
    bool tiny = false;
#pragma unroll 1
    for (int g0 = 0; g0 < S::kLoads; g0 += kGroup) {
      Fetched8 kf[kGroup], vf8[kGroup];
      bool own[kGroup];
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        const int idx = lane + (g0 + i) * gpu::kWarpSize;
        const int slot = idx / S::kChunks, chunk = idx % S::kChunks;
        const int64_t e = PACTS_SHFL(entry, slot);
        own[i] = e >= 0;
        if (!own[i]) continue;  // unowned: never an address (zeros are stored below)
        const int64_t page = e >> 32, in_page = e & 0xFFFFFFFF;
        const int col = chunk * 8;
        int64_t k_row = 0, v_row = 0;
        kv_rows<kFormat>(p, kv_head, page, in_page, col, k_row, v_row);
        if (raw_k)  // bf16 K without a scale next to a scaled V: stored as it is
          copy_bf16x8(p.k, k_row, col, chunk_offset(p.k, col), stage + swz<D>(slot, chunk));
        else
          kf[i] = fetch8<kFormat>(p, p.k, kv_head, page, in_page, k_row, col);
        vf8[i] = fetch8<kFormat>(p, p.v, kv_head, page, in_page, v_row, col);
      }
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        const int idx = lane + (g0 + i) * gpu::kWarpSize;
        const int slot = idx / S::kChunks, chunk = idx % S::kChunks;
        uint16_t* kd = stage + swz<D>(slot, chunk);
        float* vf = reinterpret_cast<float*>(stage + S::kTileElems) + slot * S::kVStride + chunk * 8;
        if (!own[i]) {  // unowned: zeros of the kernel's own
          *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<float4*>(vf) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          *reinterpret_cast<float4*>(vf + 4) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          continue;
        }
        const int col = chunk * 8;
        float x[8];
        if (!raw_k) {  // decoded, scaled in fp32, rounded once to bf16
          decode8<kFormat>(p.k, kf[i], col, x);
          *reinterpret_cast<uint4*>(kd) = round8(x);
        }
        decode8<kFormat>(p.v, vf8[i], col, x);
#pragma unroll
        for (int j = 0; j < 8; ++j) tiny |= is_tiny(x[j]);
        *reinterpret_cast<float4*>(vf) = make_float4(x[0], x[1], x[2], x[3]);
        *reinterpret_cast<float4*>(vf + 4) = make_float4(x[4], x[5], x[6], x[7]);
      }
    }
    return PACTS_ANY(tiny);
  }
}

template <int D, pacts_format kFormat, bool kSplitV>
__global__ void __launch_bounds__(MmaShape<D, kSplitV>::kThreads,
                                  MmaShape<D, kSplitV>::kBlocksPerSm)
split_kv_mma_kernel(const Params p) {
  using S = MmaShape<D, kSplitV>;
  extern __shared__ float4 smem_raw[];
  MmaSmem<D, kSplitV>& sm = *reinterpret_cast<MmaSmem<D, kSplitV>*>(smem_raw);
  const WorkItem wi = work_item(p);
  const int64_t b = wi.b, kv_head = wi.kv_head, z = wi.z;
  const int32_t r0 = wi.r0, rows = wi.rows;
  const bool direct = p.partitions == 1;
  const int t = threadIdx.x, warp = t / gpu::kWarpSize, lane = t % gpu::kWarpSize;
  const int g = lane / 4, q4 = lane % 4;  // fragment row and column pair (matrix_nvidia.h)

  const SeqCheck seq = check_sequence(p, b);
  if (seq.error != 0) {
    if (!direct) return;  // the merge block of this row tile writes the NaN rows and reports
    store_special_rows<D>(p, b, kv_head, r0, rows, true, 0u);
    if (t == 0 && !PACTS_MUTANT(hip_direct_error_not_reported)) report(p, seq.error);
    return;
  }
  const KeyRange part =
      direct ? seq.keys
             : common::intersect(common::partition_keys(z, p.partition_size), seq.keys);
  // The rows' visible keys in the partition (spec/operator.md §5-§6), the non-empty rows and
  // their union (the owned keys this item loads): from n_b, L, W and the plan only.
  const auto visible = [&](int r) -> KeyRange {
    if (r >= rows) return {0, 0};
    if (PACTS_MUTANT(hip_mask_rows_token_major))  // the row order [head][token] for the mask only
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
  const KeyRange vis[2] = {visible(g), visible(g + 8)};

  // Q~ of the non-empty rows (common::fold_query in fp32, then bf16); zeros elsewhere.
  const auto q_pair = [&](int r, int d, float* x) {
    x[0] = x[1] = 0.0f;
    if (!((nonempty >> r) & 1u)) return;
    const int64_t i = (r0 + r) / p.group, h = kv_head * p.group + (r0 + r) % p.group;
    const int64_t at = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head + d;
    for (int e = 0; e < 2; ++e)
      x[e] = common::fold_query(load_q(p, at + e), p.q_scale, p.softmax_scale);
  };
  // PACTS-EDGE-6: a tiny q_scale meeting huge K scales leaves a whole Q~ row near or below fp32's
  // normal range, where bf16 keeps a few bits at most (its relative rounding u_q would not hold).
  // Such a row is moved up by an exact power of two before the rounding (max |Q~| >= 2^-100) and
  // its logits down by the same factor after the MMA: exact both ways, so the declared profile
  // holds. Rows already in range keep factor 1.
  __shared__ uint32_t row_max_bits[kMaxRows];
  __shared__ float row_up[kMaxRows];
  if (t < kMaxRows) row_max_bits[t] = 0u;
  __syncthreads();
  for (int idx = t; idx < kMaxRows * D / 2; idx += S::kThreads) {
    float x[2];
    q_pair(idx / (D / 2), 2 * (idx % (D / 2)), x);
    // |x| as bits orders like the value (NaN above Inf, which leaves such a row alone).
    atomicMax(&row_max_bits[idx / (D / 2)], __float_as_uint(fabsf(x[0])));
    atomicMax(&row_max_bits[idx / (D / 2)], __float_as_uint(fabsf(x[1])));
  }
  __syncthreads();
  if (t < kMaxRows) {
    const float largest = __uint_as_float(row_max_bits[t]);
    float up = 1.0f;
    while (largest > 0.0f && largest * up < 0x1p-100f) up *= 0x1p8f;
    if (PACTS_MUTANT(hip_q_rescale_dropped)) up = 1.0f;
    row_up[t] = up;
  }
  __syncthreads();
  uint16_t* const q_smem = sm.q();
  for (int idx = t; idx < kMaxRows * D / 2; idx += S::kThreads) {
    const int r = idx / (D / 2), d = 2 * (idx % (D / 2));
    float x[2];
    q_pair(r, d, x);
    const float up = row_up[r];
    *reinterpret_cast<uint32_t*>(&q_smem[swz<D>(r, d / 8) + d % 8]) =
        gpu::pack_bf16x2_rn(x[0] * up, x[1] * up);
  }
  const float logit_down[2] = {1.0f / row_up[g], 1.0f / row_up[g + 8]};  // exact: powers of two
  __syncthreads();
  const int q_row = lane % 8 + ((lane / 8) % 2) * 8, q_chunk = lane / 16;
  uint32_t qa[S::kQInRegisters ? S::kKSteps : 1][4];
  if constexpr (S::kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < S::kKSteps; ++kk)
      gpu::ldmatrix_x4(qa[kk], &q_smem[swz<D>(q_row, 2 * kk + q_chunk)]);
    if (!PACTS_MUTANT(hip_q_barrier_dropped)) __syncthreads();  // the stages reuse Q~'s memory
  }

  // V parts fed to P.V: an fp8 code without an fp32 scale (at most 4 significant bits) or an
  // MXFP4 element (2 bits times a power of two) is exact in bf16, one part; any other split V
  // needs three (stage_tile). Tiny elements take the CUDA-core path either way.
  constexpr bool kByteFormat = !kIs16<kFormat>;
  const int v_parts = kByteFormat && (p.v.scale_mode == PACTS_SCALE_NONE ||
                                      p.v.scale_mode == PACTS_SCALE_MX_BLOCK)
                          ? 1
                          : S::kVParts;
  float acc[S::kDTiles][4];
#pragma unroll
  for (int n = 0; n < S::kDTiles; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;
  common::SoftmaxState state[2];  // rows g and g + 8

  const int64_t first = span.empty() ? 0 : span.begin / S::kKeys;
  const int64_t last = span.empty() ? 0 : (span.end + S::kKeys - 1) / S::kKeys;
  uint16_t* const stages = sm.stage(warp);  // stage s at stages + s * S::kStageElems
  int64_t tile = first + warp;
  int s = 0;
  bool tiny = false;
  const auto entry_of = [&](int64_t tl) {
    if (PACTS_MUTANT(hip_v_tail_unmasked) || PACTS_MUTANT(hip_padding_entries_as_pages))
      return tl < last ? unowned_slot_entry<S::kKeys>(p, b, tl * S::kKeys, span, seq.context, lane)
                       : int64_t{-1};
    return tl < last ? slot_entry<S::kKeys>(p, b, tl * S::kKeys, span, lane) : int64_t{-1};
  };
  // Two stages: the block-table entries of a tile are loaded one tile before its copies are
  // issued, and the copies one tile before it is computed.
  int64_t entry = entry_of(tile);
  if constexpr (S::kStages == 2) {
    if (tile < last) stage_tile<D, kFormat, kSplitV>(p, kv_head, entry, stages, lane);
    gpu::cp_async_commit();
    entry = entry_of(tile + S::kWarps);
  }
  const int k_row = (lane / 16) * 8 + lane % 8, k_chunk = (lane / 8) % 2;
  const int v_row = lane % 8 + ((lane / 8) % 2) * 8, v_chunk = lane / 16;
  for (; tile < last; tile += S::kWarps) {
    if constexpr (S::kStages == 2) {  // the next tile in flight while this one is computed
      if (tile + S::kWarps < last) {
        PACTS_WARP_SYNC();  // every lane is done with stage s ^ 1 (the previous tile)
        stage_tile<D, kFormat, kSplitV>(p, kv_head, entry, stages + (s ^ 1) * S::kStageElems,
                                        lane);
      }
      gpu::cp_async_commit();
      entry = entry_of(tile + 2 * S::kWarps);
      if (!PACTS_MUTANT(hip_cp_async_wait_skipped)) gpu::cp_async_wait<1>();
    } else {
      PACTS_WARP_SYNC();  // every lane is done with the stage (the previous tile)
      tiny = stage_tile<D, kFormat, kSplitV>(p, kv_head, entry, stages, lane);
      gpu::cp_async_commit();
      entry = entry_of(tile + S::kWarps);
      gpu::cp_async_wait<0>();
    }
    PACTS_WARP_SYNC();  // the tile's copies and stores are visible to the whole warp
    const uint16_t* kt = stages + s * S::kStageElems;
    const uint16_t* vt = kt + S::kTileElems;
    if constexpr (S::kStages == 2) s ^= 1;

    // S = Q~ K^T: two N-tiles of 8 keys.
    float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < S::kKSteps; ++kk) {
      uint32_t bk[4];
      gpu::ldmatrix_x4(bk, kt + swz<D>(k_row, 2 * kk + k_chunk));
      const int qk = S::kQInRegisters ? kk : 0;
      if constexpr (!S::kQInRegisters) gpu::ldmatrix_x4(qa[0], &q_smem[swz<D>(q_row, 2 * kk + q_chunk)]);
      gpu::mma_bf16_16816(sc[0], qa[qk], bk[0], bk[1]);
      gpu::mma_bf16_16816(sc[1], qa[qk], bk[2], bk[3]);
    }
    // Softmax step per row half h (row g + 8 h): keys nt * 8 + 2 q4 + e of the tile.
    const int64_t t0 = tile * S::kKeys;
    uint32_t pa[4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // The row's visible keys as tile columns [ja, jb) (clamped to the tile).
      const auto column = [&](int64_t j) {
        return static_cast<int>(j < t0 ? 0 : (j - t0 > S::kKeys ? S::kKeys : j - t0));
      };
      const int ja = column(vis[h].begin), jb = column(vis[h].end);
      float sv[4], pv[4];
      bool in[4];
      float tile_max = -INFINITY;
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int nt = x / 2, e = x % 2, col = nt * 8 + 2 * q4 + e;
        in[x] = col >= ja && col < jb;
        sv[x] = sc[nt][2 * h + e] * logit_down[h];
        if (in[x] && p.softcap > 0.0f) sv[x] = common::soft_cap(sv[x], p.softcap);
        if (in[x]) tile_max = common::max_finite(tile_max, sv[x]);
      }
      tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, 1));
      tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, 2));
      const common::TileStep step = state[h].begin_tile(tile_max);
#pragma unroll
      for (int x = 0; x < 4; ++x) pv[x] = in[x] ? expf(sv[x] - step.shift) : 0.0f;  // select
      // The tile's sum in a fixed order; the butterfly leaves the same value in the quad.
      float sum = (pv[0] + pv[1]) + (pv[2] + pv[3]);
      sum += PACTS_SHFL_XOR(sum, 1);
      sum += PACTS_SHFL_XOR(sum, 2);
      state[h].add(sum);
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
        acc[n][2 * h] *= step.alpha;
        acc[n][2 * h + 1] *= step.alpha;
      }
      pa[h] = gpu::pack_bf16x2_rn(pv[0], pv[1]);      // a0 / a1: keys 2 q4.., rows g / g + 8
      pa[2 + h] = gpu::pack_bf16x2_rn(pv[2], pv[3]);  // a2 / a3: keys 8 + 2 q4..
    }
    // Tiny V elements (split only, stage_tile): acc += P t on the CUDA cores, with the same bf16
    // P, in a fixed order over the tile's keys. P goes through the stage's P tile.
    if constexpr (kSplitV) {
      if (tiny) {
        float* pt = reinterpret_cast<float*>(const_cast<uint16_t*>(kt) + S::kPAt);
        const float* tt = reinterpret_cast<const float*>(vt);
#pragma unroll
        for (int x = 0; x < 4; ++x) {  // pa[x]: row g + 8 (x % 2), keys 8 (x / 2) + 2 q4 + {0, 1}
          const int at = (g + 8 * (x % 2)) * S::kKeys + 8 * (x / 2) + 2 * q4;
          pt[at] = common::bf16_to_float(static_cast<uint16_t>(pa[x] & 0xFFFFu));
          pt[at + 1] = common::bf16_to_float(static_cast<uint16_t>(pa[x] >> 16));
        }
        PACTS_WARP_SYNC();
#pragma unroll
        for (int n = 0; n < S::kDTiles; ++n)  // unrolled: acc stays in registers
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const int r = g + 8 * (x / 2), col = n * 8 + 2 * q4 + x % 2;
            float sum = 0.0f;
#pragma unroll 1
            for (int k = 0; k < S::kKeys; ++k) {
              const float v = tt[k * S::kVStride + col];
              sum += pt[r * S::kKeys + k] * (is_tiny(v) ? v : 0.0f);  // selection
            }
            acc[n][x] += sum;
          }
      }
    }
    // acc += P V. bf16 V: V^T fragments by ldmatrix.trans, two N-tiles of 8 dims per load.
    // Split V: each lane reads its B fragment values (keys 2 q4, 2 q4 + 1, 2 q4 + 8, 2 q4 + 9 of
    // dim n * 8 + g) in fp32 and feeds them as hi, mid and lo, in that order, tiny elements as 0.
    if constexpr (!kSplitV) {
#pragma unroll
      for (int dp = 0; dp < S::kDTiles / 2; ++dp) {
        uint32_t bv[4];
        gpu::ldmatrix_x4_trans(bv, vt + swz<D>(v_row, 2 * dp + v_chunk));
        gpu::mma_bf16_16816(acc[2 * dp], pa, bv[0], bv[1]);
        gpu::mma_bf16_16816(acc[2 * dp + 1], pa, bv[2], bv[3]);
      }
    } else {
      const float* vf = reinterpret_cast<const float*>(vt) + 2 * q4 * S::kVStride + g;
#pragma unroll
      for (int n = 0; n < S::kDTiles; ++n) {
        float x[8];  // round8 works on 8: the 4 values and 4 zeros
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float v = vf[((i / 2) * 8 + i % 2) * S::kVStride + n * 8];
          x[i] = is_tiny(v) ? 0.0f : v;
          x[4 + i] = 0.0f;
        }
#pragma unroll 1
        for (int part = 0; part < v_parts; ++part) {
          const uint4 w = round8(x);  // w.x: keys 2 q4, 2 q4 + 1 (b0); w.y: + 8 (b1)
          gpu::mma_bf16_16816(acc[n], pa, w.x, w.y);
        }
      }
    }
  }
  gpu::cp_async_wait<0>();
  // Every warp is done with the stages: they become the warps' final states.
  if (!PACTS_MUTANT(hip_final_barrier_dropped)) __syncthreads();

  typename MmaSmem<D, kSplitV>::Final& fin = sm.u.fin;
#pragma unroll
  for (int n = 0; n < S::kDTiles; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      fin.acc[warp][(g + 8 * (x / 2)) * D + n * 8 + 2 * q4 + x % 2] = acc[n][x];
  if (q4 == 0) {
    for (int h = 0; h < 2; ++h) {
      fin.m[warp][g + 8 * h] = state[h].m;
      fin.l[warp][g + 8 * h] = state[h].l;
    }
  }
  __syncthreads();
  merge_warps_and_store<D, S::kWarps, S::kThreads>(p, fin, b, kv_head, z, r0, rows, nonempty, direct, t);
}

}  // namespace pacts::kernels::hip::detail
