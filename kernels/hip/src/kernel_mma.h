// The matrix-unit tile kernel of the HIP decode (NVIDIA mma.sync m16n8k16, bf16 operands, fp32
// accumulation): the algorithm of pacts/decode.h with the math of kernels/common/, for the
// vendors whose platform layer sets PACTS_HIP_MATRIX_UNIT (platform/matrix_nvidia.h). Internal to
// kernels/hip/; docs/kernel-design.md has the design and the numerics.
//
//   split_kv_mma_kernel  one block per work item (sequence, KV head, partition, row tile), as
//                        split_kv_kernel (src/kernel.h), whose merge kernel it shares.
//
// Structure. The item's rows (G * L of them, at most 16) are the M = 16 of the MMA; Q~ (fold_query,
// rounded once to bf16) stays in registers as A fragments (the bf16 kernel at D 128 and D 256:
// read from shared memory per tile). The partition's keys are cut into
// tiles of kKeys = 16 keys; warp w takes tiles w, w + kWarps, ... and keeps its own online-softmax
// state (m, l per row) and accumulator (16 x D fp32 in C fragments). A warp streams its tiles
// through its own shared-memory stages. bf16 kernel: K and V rows stay bf16 there, each row padded
// by 16 bytes so that ldmatrix reads are conflict-free; kStages stages (the next kStages - 1
// tiles in flight while one is computed); contiguous, aligned rows move by one bulk copy each,
// completing on the stage's transaction barrier, other layouts by 16-byte cp.async; a scaled K
// with an unscaled V is decoded (stage_tile). Split kernels (fp16, fp8, MXFP4 or a scaled V): the
// raw rows are staged as stored (rows of at least 256 bytes by bulk copies) and the fragments
// decoded from them (issue_raw), K rounded once to bf16 after the scale (common::scaled: the scale
// before any product with Q, spec/contract.md §2.1 order 2) or, for e4m3fn / e5m2 (kKLogit), fed
// as its exact codes with the scale on the logit (order 4); V fed as exact bf16 parts, or as its
// fp16 codes to the fp16 MMA (kPvF16). Per tile: S = Q~ K^T (2 x D/16 MMAs), soft-cap, the row
// max over the quad, common::SoftmaxState, P = expf(s - shift) in fp32 (summed in fp32 into l), P
// rounded to bf16 (fp16 of P * 2^15 on the fp16 path) as the A operand of P.V (D/8 MMAs, up to x3
// split). No block-wide barrier in the loop. At the end the warps' states are combined in binary64, in warp order, with
// common::merge (the partition merge's math): the result depends on the plan only (PACTS-META-2).
//
// Poison-proof by construction (spec/contract.md §1, §5): a K/V slot is loaded only for an owned
// key of the item (the span: the union of the rows' visible keys in the partition), block-table
// entries are read for those keys only, and every other slot of a stage is written with zeros by
// the kernel, so its P (0 by selection) meets a zero, never unowned bytes. A key that one row of
// the tile sees and another does not is owned data: its P is 0 by selection for the row that does
// not see it (finite owned values give exact zeros; an owned NaN there is outside the contract,
// §2.3, and can reach that row through 0 * NaN: docs/kernel-design.md).
//
// PACTS_UNSAFE_UNMASKED (never in a production target, docs/kernel-design.md): every slot of a tile
// is loaded through its block-table entry, owned or not, and no slot is zero-filled. Only for
// timing the cost of the masking on valid inputs (pacts-bench's cost of safety).
#pragma once

#include "src/kernel.h"
#include "src/mx_table.h"
#include "src/split_order.h"
#include "src/token_scales.h"

namespace pacts::kernels::hip::detail {

// kSplitV: K and V reach the MMA decoded and scaled in fp32 (the pool is fp16, fp8 or MXFP4, or
// scaled): K rounded once to bf16, V as one or three exact bf16 parts; otherwise both are the
// pool's own bf16 codes. Both keep the same warps and the same key-to-warp assignment, so scaling
// V by 2^k through a scale gives exactly 2^k times the unscaled result (PACTS-ACC-4: the parts mid
// and lo of such values are 0).
// kRing (timing experiment only, bench/ variants ring*: PACTS_EXPERIMENT_RING = blocks per
// multiprocessor): the bf16 kernel's transposed form with one more warp per block, a producer that
// fills a ring of kRingStages stages shared by the block's computing warps (whole rows by bulk
// copies; the host launches it where rows are contiguous and aligned, rows_bulk), instead of two
// stages per computing warp.
template <int D, bool kSplitV, bool kRing = false>
struct MmaShape {
  // Where Q~'s MMA fragments live: in registers (D 64, and the split kernels at D 128), or read
  // from shared memory per tile. D 256: one warp per block (its fragments and the 16 x 256
  // accumulator do not both fit in registers). The bf16 kernel at D 128: the 32 registers of Q~
  // let 3 blocks share a multiprocessor (168 registers, no spill) instead of 2 (208): on the H200
  // 12 warps instead of 8 hide more of each warp's latency, 15-20 % off B8-B128 ctx16k
  // (docs/kernel-design.md, "Where the time goes"). The split kernels' 16-bit raw stages of
  // 3 blocks would pass the 228 KiB.
  static constexpr bool kQInRegisters = D < 128 || (D == 128 && kSplitV);
  static constexpr int kWarps = D == 256 ? 1 : 4;  // the warps that compute
  static constexpr int kThreads = (kWarps + (kRing ? 1 : 0)) * gpu::kWarpSize;
  // Blocks that share a multiprocessor of the H200 (registers, shared memory): the plan's slots.
  // Split kernels: D 256, the raw stages (RawShape) of 5 blocks would pass the 228 KiB; D 64, the
  // fragment decoding needs more than the 168 registers of 3 blocks (ptxas spilled up to 176
  // bytes); D 128, 3 (below).
#if defined(PACTS_EXPERIMENT_RING)
  static constexpr int kRingBlocks = PACTS_EXPERIMENT_RING;
#else
  static constexpr int kRingBlocks = 2;
#endif
  // Split kernels at D 128: 3 blocks (registers bounded to 168, 3 raw stages of fp8 / e2m1): on
  // an H100 the formats set took 0.91x the time of 2 blocks (geomean; the multi-part V paths
  // spill a little, e4m3fnuz per token 2 % slower). Timing experiment only (bench/ variant
  // split_blocks2): 2 blocks of 4 stages.
#if defined(PACTS_EXPERIMENT_SPLIT_BLOCKS2)
  static constexpr int kSplitBlocks = 2;
#else
  static constexpr int kSplitBlocks = D == 128 ? 3 : 2;
#endif
  static constexpr int kBlocksPerSm =
      kRing ? kRingBlocks : D == 256 ? (kSplitV ? 4 : 5) : kSplitV ? kSplitBlocks : 3;
  // Timing experiment only (bench/ variant fused_merge, never gated): a split plan's merge in
  // the tile kernel's launch, by the block that finishes a row tile last (merge_if_last), at D 64
  // and 128. On the H200 it made batch 1 2.4x slower than the merge kernel
  // (docs/kernel-design.md, "Where the time goes"); production launches merge_kernel.
#if defined(PACTS_EXPERIMENT_FUSED_MERGE)
  static constexpr bool kFusedMerge = kWarps >= 4;
#else
  static constexpr bool kFusedMerge = false;
#endif
  static constexpr int kKeys = 16;        // keys per warp tile: the K of P.V, two N-tiles of Q.K^T
  // bf16 kernel (kSplitV false): kStages stages of bf16 K and V tiles per warp, the next
  // kStages - 1 tiles in flight while one is computed. On the H200 a third stage gained nothing
  // at large batches (B32 ctx16k: 690.7 us with three, 690.1 with two) and cost 5-10 % at batch
  // 1 (the prologue's copies): two.
#if defined(PACTS_EXPERIMENT_BF16_STAGES)  // timing experiments only (bench/ variants)
  static constexpr int kStages = D == 256 ? 2 : PACTS_EXPERIMENT_BF16_STAGES;
#else
  static constexpr int kStages = 2;
#endif
  static constexpr int kChunks = D / 8;   // 16-byte chunks of a row
  // A staged row: D elements and 16 bytes of padding, so that the 8 rows an ldmatrix phase reads
  // at one column fall in 8 distinct 16-byte bank groups, and a row is one contiguous bulk copy.
  static constexpr int kRowPad = D + 8;
  static constexpr int kTileElems = kKeys * kRowPad;
  static constexpr int kStageElems = 2 * kTileElems;
  static constexpr int kLoads = kKeys * kChunks / gpu::kWarpSize;  // chunks per lane per pool
  // kRing: the ring's stages, as many as the multiprocessor's 228 KiB leave to each block after
  // Q~ (at D 128), the barriers and 2 KiB (its reserved 1 KiB and the small shared variables).
  static constexpr int kRingStages =
      kRing ? (228 * 1024 / kBlocksPerSm - 2048 - kMaxRows * D * 2 - 512) / (kStageElems * 2) : 0;
  static_assert(!kRing || (kRingStages >= 2 * kWarps && kRingStages <= 32));
  static constexpr int kKSteps = D / 16;  // MMAs along d for Q.K^T
  static constexpr int kDTiles = D / 8;   // N-tiles of P.V
  static_assert(kKeys * kChunks % gpu::kWarpSize == 0 && kChunks >= 8);
};

// The split kernels' stages (kSplitV): a warp's tile of K and V rows exactly as the pool stores
// them, moved by one bulk copy per row where a row of at least 256 bytes is contiguous and aligned
// (kBulkRows, p.raw_bulk), else by 16-byte cp.async copies where the layout keeps 16 bytes
// together (the loads of load_raw8 otherwise), rows padded by 16 bytes so that the fragment reads of a warp hit distinct
// banks; then the keys' fp32 scales (one per key, or per key and block of 32 for MXFP4, the e8m0
// byte decoded). The MMA fragments are decoded from there (k_pair, v_elem): nothing decoded is
// stored. kStages tiles in flight per warp: 2 of 16-bit codes, 4 of fp8 / e2m1 (3 at D 128, where
// 3 blocks share a multiprocessor).
template <int D, pacts_format kFormat>
struct RawShape {
  static constexpr int kKeys = 16;
  static constexpr bool kFp4 = kFormat == PACTS_FORMAT_E2M1;
  static constexpr int kUnitBytes = kIs16<kFormat> ? 2 : 1;     // bytes of a unit (e2m1: a byte)
  static constexpr int kRowBytes = kFp4 ? D / 2 : D * kUnitBytes;
  static constexpr int kRowStride = kRowBytes + 16;
  static constexpr int kCopies = kRowBytes / 16;                 // 16-byte copies per row
  static constexpr int kCopyUnits = 16 / kUnitBytes;
  static constexpr int kCopyElems = kFp4 ? 32 : kCopyUnits;     // elements of a copy
  static constexpr int kLoads = kKeys * kCopies / gpu::kWarpSize;  // copies per lane per pool
  static constexpr int kCarry = kFp4 ? D / 32 : 1;               // scales per key
  static constexpr int kCarryWords = kFp4 ? (kCarry + 3) / 4 : 1;  // issue_raw's carry
  static constexpr int kScaleFloats = kKeys * kCarry;            // per pool
  static constexpr int kPoolBytes = kKeys * kRowStride;
  static constexpr int kStageBytes = 2 * kPoolBytes + 2 * kScaleFloats * 4;
#if defined(PACTS_EXPERIMENT_SPLIT_BLOCKS2)
  static constexpr int kStages = kIs16<kFormat> ? 2 : 4;
#else  // D 128: 3 blocks of 4 stages would pass the 228 KiB
  static constexpr int kStages = kIs16<kFormat> ? 2 : D == 128 ? 3 : 4;
#endif
  // Rows of at least 256 bytes move by one bulk copy each where the host allows it (p.raw_bulk):
  // on an H100 that took fp16 at D 128 from 1353 to 969 us (B32 ctx16k, with the fp16 P.V),
  // while 128-byte fp8 rows took 2 % longer and 64-byte MXFP4 rows 9 % (docs/kernel-design.md).
  static constexpr bool kBulkRows = kRowBytes >= 256;
  static_assert(kKeys * kCopies % gpu::kWarpSize == 0 && kStageBytes % 16 == 0);
};

template <int D, bool kSplitV, pacts_format kFormat, bool kRing = false>
struct MmaSmem {
  using S = MmaShape<D, kSplitV, kRing>;
  using R = RawShape<D, kFormat>;
  struct Final {  // after the key loop: each warp's state, then the binary64 merge weights
    float acc[S::kWarps][kMaxRows * D];
    float m[S::kWarps][kMaxRows], l[S::kWarps][kMaxRows];
    double other[S::kWarps][kMaxRows];  // the warp's weight (merge_warps_and_store)
    bool use_other[S::kWarps][kMaxRows];
    double factor[kMaxRows];
  };
  // Per warp: its stages (bf16 tiles, or raw tiles and the fp32 P tile of the tiny path); Q~
  // (bf16) behind them when it is read from shared memory all along, else in the first stage
  // before the loop.
  static constexpr int kWarpBytes = kSplitV ? R::kStages * R::kStageBytes + kMaxRows * S::kKeys * 4
                                            : S::kStages * S::kStageElems * 2;
  static constexpr int kStagesBytes =
      kRing ? S::kRingStages * S::kStageElems * 2 : S::kWarps * kWarpBytes;
  static constexpr int kQAt = S::kQInRegisters ? 0 : kStagesBytes;
  static_assert(kStagesBytes >= kMaxRows * D * 2 && kWarpBytes % 16 == 0);
  union {
    alignas(16) uint16_t buf[(kStagesBytes + (S::kQInRegisters ? 0 : kMaxRows * D * 2)) / 2];
    Final fin;
    MergeScratch merge;  // the in-launch merge (kFusedMerge, an experiment), after the store
  } u;
  // Bulk rows: one barrier per warp stage (the bf16 kernel's stages, or the split kernels' raw
  // stages).
  static constexpr int kBars = kSplitV ? R::kStages : S::kStages;
  uint64_t bar[S::kWarps][kBars];
  uint64_t ring_bar[kRing ? 2 * S::kRingStages : 1];  // kRing: full[kRingStages], then empty
  __device__ uint16_t* stage(int warp) { return u.buf + warp * (kWarpBytes / 2); }
  __device__ uint16_t* ring_stage(int i) { return u.buf + i * S::kStageElems; }
  __device__ uint8_t* warp_area(int warp) { return reinterpret_cast<uint8_t*>(stage(warp)); }
  __device__ uint16_t* q() { return u.buf + kQAt / 2; }
};
// Shared memory of all blocks of a multiprocessor, with the 1 KiB each block reserves, within the
// H200's 228 KiB.
template <int D, bool kSplitV, pacts_format kFormat, bool kRing = false>
inline constexpr bool kMmaSmemFits =
    MmaShape<D, kSplitV, kRing>::kBlocksPerSm *
        (sizeof(MmaSmem<D, kSplitV, kFormat, kRing>) + 1024) <=
    228 * 1024;

// Element offset of (row, chunk) in a 16-bit tile of rows of D elements: the chunk is XORed with
// row % 8, so the 8 rows an ldmatrix phase reads (and 8 consecutive chunks of a row that a store
// phase writes) fall in 8 distinct 16-byte bank groups.
template <int D>
__device__ inline int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// The bf16 (RNE) codes of two fp32 values as one register, and the values replaced by their
// residuals (the next part of a split V).
__device__ inline uint32_t round_pair(float& x0, float& x1) {
  const uint32_t w = gpu::pack_bf16x2_rn(x0, x1);
  x0 = residual(x0, common::bf16_to_float(static_cast<uint16_t>(w & 0xFFFFu)));
  x1 = residual(x1, common::bf16_to_float(static_cast<uint16_t>(w >> 16)));
  return w;
}

// The same for 8 values (a 16-byte row chunk).
__device__ inline uint4 round8(float (&x)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = round_pair(x[2 * i], x[2 * i + 1]);
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

// The bf16 kernel's copies of tile [t0, t0 + kKeys) into `stage` (two K and V tiles of bf16, rows
// padded to kRowPad), from the lanes' slot_entry values. Slots outside the owned keys are zeroed by the
// kernel (their entries and rows are never read). V is bf16 without a scale (the host picks
// kSplitV otherwise): copied as stored, by cp.async where a row's 16 bytes are aligned and in one
// chunk (asynchronous: the next tile is in flight while this one is computed), by loads
// elsewhere. K likewise when it has no scale; a scaled K (per-tensor or per-token, V unscaled) is
// decoded, scaled in fp32 and rounded once to bf16 (profile: u_q).
//
// Bulk rows (p.rows_bulk: K and V bf16 without a scale, every row contiguous and 16-byte
// aligned, set by the host): lane l copies the K row (l < 16) or the V row (l >= 16) of slot
// l % 16 with one bulk copy completing on the stage's barrier `bar`, whose one arrival (lane 0)
// announces the owned rows' bytes; an unowned slot's row is zeroed by its lane.
// Timing experiment only (bench/ variant rows_cp_async, never gated): the whole-row path copies a
// lane's row by 16-byte cp.async instead of one bulk copy.
#if defined(PACTS_EXPERIMENT_ROWS_CP_ASYNC)
inline constexpr bool kRowsByCpAsync = true;
#else
inline constexpr bool kRowsByCpAsync = false;
#endif

// kVt: the bf16 kernel of a V pool whose consecutive tokens are adjacent for every dim
// (s_tok == 1: vLLM's and aiter's dim-major V, spec/operator.md §3.2), chosen by the host. Its V
// stage holds V^T: element (key, d) at vt_at(d, key), dim rows of 16 keys (32 bytes), the key
// half XORed with bit 2 of the dim so that the 8 dim rows an ldmatrix phase reads fall in 8
// distinct 16-byte bank groups. Keys are adjacent in the pool where a row's dims are not, so the
// 8 keys of a half tile move by one 16-byte cp.async per dim (asynchronous, as row chunks are in
// the other layouts), where a row-major stage would load each element alone. The P.V fragments
// are then read by ldmatrix without .trans. Timing experiment only (bench/ variant vt_before):
// never, dim-major V staged row by row as before.
#if defined(PACTS_EXPERIMENT_NO_VT)
inline constexpr bool kVtAllowed = false;
#else
inline constexpr bool kVtAllowed = true;
#endif
__device__ inline int vt_at(int d, int key) {
  return d * 16 + (((key >> 3) ^ ((d >> 2) & 1)) << 3) + (key & 7);
}

// V^T of the tile of the lanes' slot_entry values into `vt`: where both halves of the tile are 8
// owned keys in a row of one page (every interior tile at pages of 8 keys or more), each lane
// copies its dims' halves by cp.async (16 bytes aligned; loads otherwise); a tile with an unowned
// key or a page boundary inside a half goes key by key, the unowned keys' elements zeros of the
// kernel's own (their entries and rows are never read: spec/contract.md §5).
template <int D>
__device__ void stage_vt(const Params& p, int64_t kv_head, int64_t entry, uint16_t* vt, int lane) {
  constexpr int kKeys = MmaShape<D, false>::kKeys;
  const uint16_t* const pool = reinterpret_cast<const uint16_t*>(p.v.data);
  const uint32_t owned = __ballot_sync(0xFFFFFFFFu, lane < kKeys && entry >= 0) & 0xFFFFu;
  const int64_t e0 = PACTS_SHFL(entry, 0), e7 = PACTS_SHFL(entry, 7);
  const int64_t e8 = PACTS_SHFL(entry, 8), e15 = PACTS_SHFL(entry, 15);
  if (owned == 0xFFFFu && e7 == e0 + 7 && e15 == e8 + 7) {
    int64_t r0 = 0, r8 = 0, unused = 0;
    kv_rows<PACTS_FORMAT_BF16>(p, kv_head, e0 >> 32, e0 & 0xFFFFFFFF, 0, unused, r0);
    kv_rows<PACTS_FORMAT_BF16>(p, kv_head, e8 >> 32, e8 & 0xFFFFFFFF, 0, unused, r8);
#pragma unroll
    for (int n = 0; n < 2 * D / gpu::kWarpSize; ++n) {
      const int idx = lane + n * gpu::kWarpSize, d = idx >> 1, half = idx & 1;
      const uint16_t* src = pool + (half ? r8 : r0) + chunk_offset(p.v, d);
      uint16_t* dst = vt + vt_at(d, 8 * half);
      if ((reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
        gpu::cp_async16(dst, src);
      } else {
        uint16_t x[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) x[i] = src[i];
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(x);
      }
    }
    return;
  }
#pragma unroll 1
  for (int key = 0; key < kKeys; ++key) {
    const int64_t e = PACTS_SHFL(entry, key);
    int64_t row = 0, unused = 0;
    if (e >= 0) kv_rows<PACTS_FORMAT_BF16>(p, kv_head, e >> 32, e & 0xFFFFFFFF, 0, unused, row);
#pragma unroll
    for (int i = 0; i < D / gpu::kWarpSize; ++i) {
      const int d = lane + i * gpu::kWarpSize;
      uint16_t x = 0;
      if (e >= 0) x = pool[row + chunk_offset(p.v, d)];  // unowned: never an address
      vt[vt_at(d, key)] = x;
    }
  }
}

// The kVt kernels' K stage is chunk-major (kKChunks): element (key, d) at k_at(key, d / 8) + d % 8,
// the 16 keys' 8-element chunk c one block of 256 bytes, as vLLM's x-packed K (x = 8) stores a
// chunk of 16 adjacent tokens. Where a tile is 16 owned adjacent keys of one page and the pool's
// chunks are so stored (p.k_chunks_bulk), each chunk moves by one bulk copy, D / 8 of them per tile
// instead of 16 16-byte cp.async per lane each with its own address arithmetic; the 8 keys an
// ldmatrix phase reads at one chunk are 128 contiguous bytes (distinct bank groups). Other tiles
// and pools go chunk by chunk (cp.async or loads), zeros for unowned keys. Timing experiment only
// (bench/ variant kchunks_before): the row-major K stage of the other layouts, 16-byte copies.
#if defined(PACTS_EXPERIMENT_NO_K_CHUNKS)
inline constexpr bool kKChunksAllowed = false;
#else
inline constexpr bool kKChunksAllowed = true;
#endif
template <bool kVt>
inline constexpr bool kKChunks = kVt && kKChunksAllowed;

// Element offset of (key, chunk) in a K tile: chunk-major (kChunkMajor) or rows padded to kRowPad.
template <int D, bool kChunkMajor>
__device__ inline int k_at(int key, int chunk) {
  using S = MmaShape<D, false>;
  return kChunkMajor ? chunk * (S::kKeys * 8) + key * 8 : key * S::kRowPad + chunk * 8;
}

// The K tile of the lanes' slot_entry values into `kt`, chunk-major (kKChunks): by D / 8 bulk
// copies completing on `bar` where the tile is 16 owned adjacent keys of one page and
// p.k_chunks_bulk holds, else chunk by chunk (lanes of consecutive keys at one chunk: adjacent in
// x-packed K) with zeros for unowned keys (never addressed). Every call arrives once on `bar`,
// announcing the bulk copies' bytes or none. A scaled K is decoded and rounded to bf16 as in
// stage_tile.
template <int D>
__device__ void stage_k_chunks(const Params& p, int64_t kv_head, int64_t entry, uint16_t* kt,
                               uint64_t* bar, int lane) {
  using S = MmaShape<D, false>;
  constexpr pacts_format kFormat = PACTS_FORMAT_BF16;
  const uint32_t owned = __ballot_sync(0xFFFFFFFFu, lane < S::kKeys && entry >= 0) & 0xFFFFu;
  const int64_t e0 = PACTS_SHFL(entry, 0), e15 = PACTS_SHFL(entry, S::kKeys - 1);
  const bool bulk = p.k_chunks_bulk && owned == 0xFFFFu && e15 == e0 + (S::kKeys - 1);
  // This stage was last read (ldmatrix) or written as ordinary memory: before the bulk writes.
  gpu::fence_proxy_async_shared();
  PACTS_WARP_SYNC();
  if (lane == 0) gpu::mbarrier_arrive_expect_tx(bar, bulk ? S::kKeys * D * 2u : 0u);
  if (bulk) {
    int64_t k_row = 0, unused = 0;
    kv_rows<kFormat>(p, kv_head, e0 >> 32, e0 & 0xFFFFFFFF, 0, k_row, unused);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(p.k.data) + k_row;
#pragma unroll
    for (int c = lane; c < S::kChunks; c += gpu::kWarpSize)
      gpu::cp_async_bulk_row(kt + k_at<D, true>(0, c), src + c * p.k.s_chunk, S::kKeys * 16u, bar);
    return;
  }
  const bool raw_k = p.k.scale_mode == PACTS_SCALE_NONE;
#pragma unroll 2
  for (int n = 0; n < S::kLoads; ++n) {
    const int idx = lane + n * gpu::kWarpSize;
    const int slot = idx % S::kKeys, chunk = idx / S::kKeys, col = chunk * 8;
    uint16_t* kd = kt + k_at<D, true>(slot, chunk);
    const int64_t e = PACTS_SHFL(entry, slot);
    if (e < 0) {  // unowned: never an address; zeros of the kernel's own
      *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
      continue;
    }
    const int64_t page = e >> 32, in_page = e & 0xFFFFFFFF;
    int64_t k_row = 0, unused = 0;
    kv_rows<kFormat>(p, kv_head, page, in_page, col, k_row, unused);
    if (raw_k) {
      copy_bf16x8(p.k, k_row, col, chunk_offset(p.k, col), kd);
    } else {
      float x[8];
      decode8<kFormat>(p.k, fetch8<kFormat>(p, p.k, kv_head, page, in_page, k_row, col), col, x);
      *reinterpret_cast<uint4*>(kd) = round8(x);
    }
  }
}

// kBulk: the instantiation the host launches only where every row moves by a bulk copy
// (p.rows_bulk): the other copy paths are not compiled into it.
// kVt: V^T from a pool of adjacent tokens (stage_vt), K chunk-major (stage_k_chunks) or as in the
// general path.
template <int D, bool kBulk = false, bool kVt = false>
__device__ void stage_tile(const Params& p, int64_t kv_head, int64_t entry, uint16_t* stage,
                           uint64_t* bar, int lane) {
  using S = MmaShape<D, false>;
  constexpr pacts_format kFormat = PACTS_FORMAT_BF16;
  if constexpr (kKChunks<kVt>) {
    stage_k_chunks<D>(p, kv_head, entry, stage, bar, lane);
    stage_vt<D>(p, kv_head, entry, stage + S::kTileElems, lane);
    return;
  }
  if (!kVt && (kBulk || p.rows_bulk)) {
    const int slot = lane % S::kKeys;
    const bool v_lane = lane >= S::kKeys;
    const int64_t e = PACTS_SHFL(entry, slot);
    const uint32_t owned = __ballot_sync(0xFFFFFFFFu, lane < S::kKeys && entry >= 0);
    uint16_t* dst = stage + (v_lane ? S::kTileElems : 0) + slot * S::kRowPad;
    // This stage was last read (ldmatrix) or zeroed as ordinary memory: those accesses come
    // before the bulk copies' writes.
#if !defined(PACTS_EXPERIMENT_NO_PROXY_FENCE)  // timing experiment only (bench/ variants)
    gpu::fence_proxy_async_shared();
#endif
    PACTS_WARP_SYNC();
    if (lane == 0 && !kRowsByCpAsync)
      gpu::mbarrier_arrive_expect_tx(bar, __popc(owned) * 2u * D * 2u);
    if (e < 0) {  // unowned: never an address; zeros of the kernel's own
#pragma unroll
      for (int c = 0; c < S::kChunks; ++c)
        *reinterpret_cast<uint4*>(dst + c * 8) = make_uint4(0, 0, 0, 0);
      return;
    }
    int64_t k_row = 0, v_row = 0;
    kv_rows<kFormat>(p, kv_head, e >> 32, e & 0xFFFFFFFF, 0, k_row, v_row);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(v_lane ? p.v.data : p.k.data) +
                          (v_lane ? v_row : k_row);
    if constexpr (kRowsByCpAsync) {
#pragma unroll
      for (int c = 0; c < S::kChunks; ++c) gpu::cp_async16(dst + c * 8, src + c * 8);
    } else {
      gpu::cp_async_bulk_row(dst, src, D * 2, bar);
    }
    return;
  }
  const bool raw_k = p.k.scale_mode == PACTS_SCALE_NONE;
  // A lane copies the same chunk of every row it copies (the warp covers kWarpSize / kChunks
  // rows per step), so the chunk's offsets in K and V rows are computed once, not per load
  // (on the H200 that took 1.6 % off the bf16 kernel's NHD time at D 128). Not for D 64:
  // its 168 registers (3 blocks per SM) cannot also hold them (ptxas spilled 80 bytes).
  static_assert(gpu::kWarpSize % S::kChunks == 0);
  constexpr bool kHoist = D >= 128;
  const int64_t k_col0 = kHoist ? chunk_offset(p.k, lane % S::kChunks * 8) : 0;
  const int64_t v_col0 = kHoist ? chunk_offset(p.v, lane % S::kChunks * 8) : 0;
#pragma unroll 2
  for (int n = 0; n < S::kLoads; ++n) {
    const int idx = lane + n * gpu::kWarpSize;
    const int slot = idx / S::kChunks, chunk = idx % S::kChunks, col = chunk * 8;
    uint16_t* kd = stage + slot * S::kRowPad + chunk * 8;
    uint16_t* vd = kd + S::kTileElems;
    const int64_t e = PACTS_SHFL(entry, slot);
    if (e < 0) {  // unowned: never an address; zeros of the kernel's own
      *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
      if constexpr (!kVt) *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
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
    if constexpr (!kVt) copy_bf16x8(p.v, v_row, col, kHoist ? v_col0 : chunk_offset(p.v, col), vd);
  }
  if constexpr (kVt) stage_vt<D>(p, kv_head, entry, stage + S::kTileElems, lane);
}

// The ring's copies of a tile (kRing, bulk rows only): as stage_tile's bulk rows, by the producer
// warp into a ring stage, completing on the stage's barrier `full` (32 arrivals, one per lane
// after its copy is issued or its zeros stored, and the owned rows' bytes).
template <int D>
__device__ void ring_tile(const Params& p, int64_t kv_head, int64_t entry, uint16_t* stage,
                          uint64_t* full, int lane) {
  using S = MmaShape<D, false>;
  constexpr pacts_format kFormat = PACTS_FORMAT_BF16;
  const int slot = lane % S::kKeys;
  const bool v_lane = lane >= S::kKeys;
  const int64_t e = PACTS_SHFL(entry, slot);
  const uint32_t owned = __ballot_sync(0xFFFFFFFFu, lane < S::kKeys && entry >= 0);
  uint16_t* dst = stage + (v_lane ? S::kTileElems : 0) + slot * S::kRowPad;
  // The stage was last read (ldmatrix) by the computing warp whose arrival on its empty barrier
  // this warp waited for, or written here as ordinary memory: both before the bulk writes.
#if !defined(PACTS_EXPERIMENT_NO_PROXY_FENCE)  // timing experiment only (bench/ variants)
  gpu::fence_proxy_async_shared();
#endif
  if (lane == 0) gpu::mbarrier_expect_tx(full, __popc(owned) * 2u * D * 2u);
  PACTS_WARP_SYNC();
  if (e < 0) {  // unowned: never an address; zeros of the kernel's own
#pragma unroll
    for (int c = 0; c < S::kChunks; ++c)
      *reinterpret_cast<uint4*>(dst + c * 8) = make_uint4(0, 0, 0, 0);
  } else {
    int64_t k_row = 0, v_row = 0;
    kv_rows<kFormat>(p, kv_head, e >> 32, e & 0xFFFFFFFF, 0, k_row, v_row);
    const uint16_t* src = reinterpret_cast<const uint16_t*>(v_lane ? p.v.data : p.k.data) +
                          (v_lane ? v_row : k_row);
    gpu::cp_async_bulk_row(dst, src, D * 2, full);
  }
  gpu::mbarrier_arrive(full);
}

// 16-byte copy c of an owned key's row (units [c * kCopyUnits, +kCopyUnits)) into `dst` (shared):
// one cp.async where the pool's chunk keeps the 16 bytes together (`vector`) and they are
// aligned, the loads of load_raw8 otherwise (x-packed K with a small x, dim-major V, odd strides:
// spec/refusals.md §4, alignment 1), stored by the lane. `row`: the key's row offset in units.
template <int D, pacts_format kFormat>
__device__ inline void copy_raw16(const PoolParams& pool, int64_t row, int c, bool vector,
                                  uint8_t* dst) {
  using R = RawShape<D, kFormat>;
  const uint8_t* src = pool.data + (row + chunk_offset(pool, int64_t{c} * R::kCopyUnits)) * R::kUnitBytes;
  if (vector && (reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
    gpu::cp_async16(dst, src);
    return;
  }
  constexpr int kGroups = R::kCopyElems / 8, kBytes = 16 / kGroups;  // load_raw8: 8 elements
  uint4 r[kGroups];
#pragma unroll
  for (int i = 0; i < kGroups; ++i) r[i] = load_raw8<kFormat>(pool, row, c * R::kCopyElems + 8 * i);
#pragma unroll
  for (int i = 0; i < kGroups; ++i) memcpy(dst + i * kBytes, &r[i], kBytes);
}

// Dim-major V in the split kernels (kVGather): where a tile is 16 owned adjacent keys of one
// page starting at a multiple of 16 and the pool keeps a dim's keys adjacent and 16-byte aligned
// (p.v_keys_vector: s_tok == 1), a dim's 16 codes are one or two 16-byte loads, and the lane
// writes them into the stage's V rows (the stage layout of the other layouts: the fragments and
// numerics do not change), a 32-bit word of 2 dims (16-bit formats) or 4 dims (fp8) per key:
// D / 8 or D / 4 loads per tile where each element was loaded alone. Synchronous (the loads land
// before the stores), in the tile issued kStages - 1 ahead. Not e2m1 (two elements a byte).
// Compiled only into the split kernels' kVt instantiations, which the host launches for such
// pools alone (decode_hip.cpp), so the kernels of every other layout carry none of its code.
// Timing experiment only (bench/ variant vgather_before): each element loaded alone, as before.
#if defined(PACTS_EXPERIMENT_NO_V_GATHER)
inline constexpr bool kVGatherAllowed = false;
#else
inline constexpr bool kVGatherAllowed = true;
#endif
template <pacts_format kFormat, bool kVDim>
inline constexpr bool kVGather = kVGatherAllowed && kVDim && kFormat != PACTS_FORMAT_E2M1;

template <int D, pacts_format kFormat>
__device__ void gather_v_dim_major(const Params& p, int64_t kv_head, int64_t e0, uint8_t* vstage,
                                   int lane) {
  using R = RawShape<D, kFormat>;
  int64_t unused = 0, v_row = 0;
  kv_rows<kFormat>(p, kv_head, e0 >> 32, e0 & 0xFFFFFFFF, 0, unused, v_row);
  const uint8_t* const base = p.v.data + v_row * R::kUnitBytes;
  const auto load16 = [](const uint8_t* at) { return *reinterpret_cast<const uint4*>(at); };
  const auto word = [](const uint4& x, int j) { return j == 0 ? x.x : j == 1 ? x.y : j == 2 ? x.z : x.w; };
  if constexpr (R::kUnitBytes == 2) {
#pragma unroll
    for (int i = 0; i < D / 64; ++i) {  // dims d, d + 1: 16 keys each, 32 bytes
      const int d = 2 * (lane + i * gpu::kWarpSize);
      const uint8_t* a = base + chunk_offset(p.v, d) * 2;
      const uint8_t* b = base + chunk_offset(p.v, d + 1) * 2;
      const uint4 a0 = load16(a), a1 = load16(a + 16), b0 = load16(b), b1 = load16(b + 16);
#pragma unroll
      for (int j = 0; j < 8; ++j) {  // keys 2 j, 2 j + 1
        const uint32_t x = word(j < 4 ? a0 : a1, j % 4), y = word(j < 4 ? b0 : b1, j % 4);
        uint8_t* row = vstage + (2 * j) * R::kRowStride + 2 * d;
        *reinterpret_cast<uint32_t*>(row) = __byte_perm(x, y, 0x5410);
        *reinterpret_cast<uint32_t*>(row + R::kRowStride) = __byte_perm(x, y, 0x7632);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < (D + 127) / 128; ++i) {  // dims d .. d + 3: 16 keys each, 16 bytes
      const int d = 4 * (lane + i * gpu::kWarpSize);
      if (d >= D) break;
      uint4 v[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) v[x] = load16(base + chunk_offset(p.v, d + x));
#pragma unroll
      for (int j = 0; j < 4; ++j) {  // keys 4 j .. 4 j + 3
        const uint32_t w0 = word(v[0], j), w1 = word(v[1], j), w2 = word(v[2], j), w3 = word(v[3], j);
        const uint32_t lo01 = __byte_perm(w0, w1, 0x5140), hi01 = __byte_perm(w0, w1, 0x7362);
        const uint32_t lo23 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
        uint8_t* row = vstage + (4 * j) * R::kRowStride + d;
        *reinterpret_cast<uint32_t*>(row) = __byte_perm(lo01, lo23, 0x5410);
        *reinterpret_cast<uint32_t*>(row + R::kRowStride) = __byte_perm(lo01, lo23, 0x7632);
        *reinterpret_cast<uint32_t*>(row + 2 * R::kRowStride) = __byte_perm(hi01, hi23, 0x5410);
        *reinterpret_cast<uint32_t*>(row + 3 * R::kRowStride) = __byte_perm(hi01, hi23, 0x7632);
      }
    }
  }
}

// kRawRows: whole rows shorter than a bulk copy's worth (p.raw_bulk without RawShape::kBulkRows)
// copied by 16-byte cp.async straight from the row's address, where the general path took each
// copy through the layout's chunk arithmetic and an alignment test. Not compiled into the
// dim-major-V kernels (kVDim), whose pools never have whole rows: there the extra path cost
// registers and spills (an H100 measured per-token e4m3fnuz 28 % slower in vLLM's layout). A
// lane pair per key with each row's address once per tile was measured too: 5 % slower for
// e4m3fn / e5m2 with a per-tensor scale, where this keeps the copies' coalescing. Timing
// experiment only (bench/ variant raw_chunks): the general path for them, as before.
#if defined(PACTS_EXPERIMENT_RAW_CHUNKS)
inline constexpr bool kRawRowsAllowed = false;
#else
inline constexpr bool kRawRowsAllowed = true;
#endif
template <class R, bool kVDim>
inline constexpr bool kRawRows = kRawRowsAllowed && !R::kBulkRows && !kVDim;

// The split kernels' copies of a tile into `stage` (RawShape), from the lanes' slot_entry values:
// the K and V rows of owned keys as stored; zeros of the kernel's own in every other slot (their
// block-table entries, rows and scales are never read: spec/contract.md §5). The scales are
// loaded here into the lane's `carry` (lane l: pool l / 16, key l % 16; the fp32 scale's bits,
// 0 for an unowned key, or the MXFP4 key's e8m0 bytes, 4 to a word, 0x7F for an unowned key:
// its elements are the kernel's zeros) and stored by store_scales one iteration later, when the
// loads have landed: a store now would wait for them.
//
// Bulk rows (p.raw_bulk: every K and V row contiguous and 16-byte aligned, set by the host): as the
// bf16 kernel's stage_tile, lane l copies the K row (l < 16) or the V row (l >= 16) of slot l % 16
// with one bulk copy completing on the stage's barrier `bar`, whose one arrival (lane 0) announces
// the owned rows' bytes; an unowned slot's row is zeroed by its lane.
template <int D, pacts_format kFormat, bool kVDim = false>
__device__ void issue_raw(const Params& p, int64_t kv_head, int64_t entry, uint8_t* stage,
                          int lane, uint32_t (&carry)[RawShape<D, kFormat>::kCarryWords],
                          uint64_t* bar) {
  using R = RawShape<D, kFormat>;
  const bool bulk = R::kBulkRows && p.raw_bulk;
  if (bulk) {
    const int slot = lane % R::kKeys;
    const bool v_lane = lane >= R::kKeys;
    const int64_t e = PACTS_SHFL(entry, slot);
    const uint32_t owned = __ballot_sync(0xFFFFFFFFu, lane < R::kKeys && entry >= 0);
    uint8_t* dst = stage + (v_lane ? R::kPoolBytes : 0) + slot * R::kRowStride;
    // This stage was last read (fragment loads) or zeroed as ordinary memory: those accesses
    // come before the bulk copies' writes.
    gpu::fence_proxy_async_shared();
    PACTS_WARP_SYNC();
    if (lane == 0) gpu::mbarrier_arrive_expect_tx(bar, __popc(owned) * 2u * R::kRowBytes);
    if (e < 0) {  // unowned: never an address; zeros of the kernel's own
#pragma unroll
      for (int c = 0; c < R::kCopies; ++c)
        *reinterpret_cast<uint4*>(dst + c * 16) = make_uint4(0, 0, 0, 0);
    } else {
      int64_t k_row = 0, v_row = 0;
      kv_rows<kFormat>(p, kv_head, e >> 32, e & 0xFFFFFFFF, 0, k_row, v_row);
      const uint8_t* src = (v_lane ? p.v.data : p.k.data) + (v_lane ? v_row : k_row) * R::kUnitBytes;
      gpu::cp_async_bulk_row(dst, src, R::kRowBytes, bar);
    }
  }
  // Rows as whole but shorter than kBulkRows (fp8 at D <= 128, e2m1; kRawRows): the copies below
  // go straight to the row's address plus the chunk's 16 bytes, without the layout's chunk
  // arithmetic and the per-copy alignment tests (raw_bulk holds both for every row).
  const bool rows = kRawRows<R, kVDim> && !bulk && p.raw_bulk;
  const bool k_vector = p.k.chunk % R::kCopyUnits == 0, v_vector = p.v.chunk % R::kCopyUnits == 0;
  bool v_gather = false;
  int64_t e0 = 0;
  if constexpr (kVGather<kFormat, kVDim>) {
    if (!bulk && p.v_keys_vector) {  // dim-major V: a whole-page tile's dims by vector loads
      const uint32_t owned = __ballot_sync(0xFFFFFFFFu, lane < R::kKeys && entry >= 0) & 0xFFFFu;
      e0 = PACTS_SHFL(entry, 0);
      const int64_t e15 = PACTS_SHFL(entry, R::kKeys - 1);
      v_gather = owned == 0xFFFFu && e15 == e0 + (R::kKeys - 1) && (e0 & (R::kKeys - 1)) == 0;
    }
  }
#pragma unroll
  for (int n = 0; n < (bulk ? 0 : R::kLoads); ++n) {
    const int idx = lane + n * gpu::kWarpSize;
    const int slot = idx / R::kCopies, c = idx % R::kCopies;
    uint8_t* kd = stage + slot * R::kRowStride + c * 16;
    uint8_t* vd = kd + R::kPoolBytes;
    const int64_t e = PACTS_SHFL(entry, slot);
    if (e < 0) {  // unowned: never an address
      *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
      continue;
    }
    const int64_t page = e >> 32, in_page = e & 0xFFFFFFFF;
    int64_t k_row = 0, v_row = 0;
    kv_rows<kFormat>(p, kv_head, page, in_page, c * R::kCopyElems, k_row, v_row);
    if constexpr (kRawRows<R, kVDim>) {
      if (rows) {
        gpu::cp_async16(kd, p.k.data + (k_row * R::kUnitBytes + c * 16));
        gpu::cp_async16(vd, p.v.data + (v_row * R::kUnitBytes + c * 16));
        continue;
      }
    }
    copy_raw16<D, kFormat>(p.k, k_row, c, k_vector, kd);
    if (!v_gather) copy_raw16<D, kFormat>(p.v, v_row, c, v_vector, vd);
  }
  if constexpr (kVGather<kFormat, kVDim>)
    if (v_gather) gather_v_dim_major<D, kFormat>(p, kv_head, e0, stage + R::kPoolBytes, lane);
  const int key = lane % R::kKeys;
  const PoolParams& pool = lane < R::kKeys ? p.k : p.v;
  const int64_t e = PACTS_SHFL(entry, key);
  const int64_t page = e >> 32, in_page = e & 0xFFFFFFFF;
  if constexpr (R::kFp4) {
#pragma unroll
    for (int w = 0; w < R::kCarryWords; ++w) carry[w] = 0u;
#pragma unroll
    for (int blk = 0; blk < R::kCarry; ++blk) {
      int block = blk;
      if (lane < R::kKeys && PACTS_MUTANT(hip_mx_k_scales_rolled)) block = (block + 1) % R::kCarry;
      const uint32_t byte = e < 0 ? 0x7Fu
                                  : pool.mx_scales[page * pool.sc_page + kv_head * pool.sc_head +
                                                   in_page * pool.sc_tok + block * pool.sc_block];
      carry[blk / 4] |= byte << (8 * (blk % 4));
    }
  } else {
    carry[0] = e < 0 ? 0u : __float_as_uint(key_scale(pool, kv_head, page, in_page));
  }
}

// The carried scales of issue_raw into the stage they belong to, as fp32 (e8m0 bytes decoded:
// common::e8m0_to_float).
template <int D, pacts_format kFormat>
__device__ inline void store_scales(uint8_t* stage, int lane,
                                    const uint32_t (&carry)[RawShape<D, kFormat>::kCarryWords]) {
  using R = RawShape<D, kFormat>;
  float* at = reinterpret_cast<float*>(stage + 2 * R::kPoolBytes) +
              (lane / R::kKeys) * R::kScaleFloats + (lane % R::kKeys) * R::kCarry;
  if constexpr (R::kFp4) {
#pragma unroll
    for (int i = 0; i < R::kCarry; ++i)
      at[i] = common::e8m0_to_float(static_cast<uint8_t>(carry[i / 4] >> (8 * (i % 4))));
  } else {
    at[0] = __uint_as_float(carry[0]);
  }
}

// Element d of a raw K or V row from its code (e2m1: the byte holding it), decoded
// (common/dequant.h, exact) and times `scale` (common::scaled: the scale before any product with Q,
// spec/contract.md §2.1 order 2; an MXFP4 element is e2m1 times its block's e8m0 value, which is
// common::mx_value with the scale decoded once).
template <pacts_format kFormat>
__device__ inline float elem_of(uint32_t code, int d, float scale, pacts_nibble_order order) {
  if constexpr (kFormat == PACTS_FORMAT_E2M1)
    return common::e2m1_to_float(common::e2m1_nibble(static_cast<uint8_t>(code), d, order)) * scale;
  else
    return common::scaled(decode_kv<kFormat>(code), scale);
}

// Two elements (dims d0, d1) from their codes, as elem_of each, with their scales; the fp8 pair
// through decode_kv2.
template <pacts_format kFormat>
__device__ inline float2 pair_of(uint32_t c0, uint32_t c1, int d0, int d1, float s0, float s1,
                                 pacts_nibble_order order) {
  if constexpr (kFormat == PACTS_FORMAT_E2M1) {
    return make_float2(elem_of<kFormat>(c0, d0, s0, order), elem_of<kFormat>(c1, d1, s1, order));
  } else {
    float x0 = 0.0f, x1 = 0.0f;
    decode_kv2<kFormat>(c0, c1, x0, x1);
    return make_float2(common::scaled(x0, s0), common::scaled(x1, s1));
  }
}

// Element d of raw row `row` (a stage's V row), as elem_of.
template <pacts_format kFormat>
__device__ inline float raw_elem(const uint8_t* row, int d, float scale,
                                 pacts_nibble_order order) {
  if constexpr (kFormat == PACTS_FORMAT_E2M1) return elem_of<kFormat>(row[d / 2], d, scale, order);
  if constexpr (kIs16<kFormat>)
    return elem_of<kFormat>(reinterpret_cast<const uint16_t*>(row)[d], d, scale, order);
  return elem_of<kFormat>(row[d], d, scale, order);
}

// bf16 pools keep the natural order of Q~ K^T in their split kernel (scaled V): it must compute S
// exactly as the bf16 kernel does, which PACTS-ACC-4 compares it with (V unscaled vs scaled).
// Every other split kernel takes split_order.h's orders.
template <pacts_format kFormat>
inline constexpr bool kSplitKOrder = kFormat != PACTS_FORMAT_BF16;

// P.V on the fp16 matrix unit (the split kernels of fp16, e4m3fn and e5m2 pools whose V enters
// as its codes, kVCodes): every such code is an fp16 value, so V is fed as stored (fp16), or
// through one exact conversion instruction per pair (e4m3fn), or as the high byte of an fp16
// (e5m2), where the bf16 path decodes each element to fp32 and feeds it as exact bf16 parts (one
// for fp8, two for fp16). P enters as fp16 of P * 2^15 instead of bf16 of P (P <= 1, so at most
// 2^15 < 65504; relative rounding 2^-11, absolute 2^-40 in P's units below fp16's normal range),
// and the merge takes the 2^-15 back exactly in binary64 with the deferred V scale
// (spec/tolerance.md §3.3; the hip profile's eta_p_formats). The fnuz formats keep the bf16 path
// (their bytes are no fp16 conversion's). Timing experiments only (bench/ variants pv_bf16 and
// one_v_path): the bf16 path for every format.
#if defined(PACTS_EXPERIMENT_PV_BF16) || defined(PACTS_EXPERIMENT_ONE_V_PATH)
inline constexpr bool kPvF16Allowed = false;
#else
inline constexpr bool kPvF16Allowed = true;
#endif
template <pacts_format kFormat, bool kSplitV, bool kVCodes>
inline constexpr bool kPvF16 =
    kPvF16Allowed && kSplitV && kVCodes &&
    (kFormat == PACTS_FORMAT_FP16 || kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E5M2);
// Per-token V scales of fp8 pools (the split kernels with kVCodes false: kPFold): the scale's
// significand folded into P, which enters P.V in two bf16 parts, and V as its code times the
// scale's power of two, one exact part (src/token_scales.h). So V is decoded once, as one part,
// and P.V takes two MMAs per N-tile, where three exact V parts took three and a test per element.
// A row with one key gets p = 1 and hi + lo = m: PACTS-ACC-3's scales keep 12 significant bits,
// and its output code * m * 2^e is the sum of two exact products, which the accumulator holds.
// Every element of a key with a tiny scale is added on the CUDA cores. spec/tolerance.md §3.3
// states the rounding; the hip profile is unchanged. Timing experiment only (bench/ variant
// token_before): three exact V parts, a test per element, the 16-row form, as before the fold.
#if defined(PACTS_EXPERIMENT_TOKEN_V_PARTS)
inline constexpr bool kPFoldAllowed = false;
#else
inline constexpr bool kPFoldAllowed = true;
#endif
template <pacts_format kFormat, bool kSplitV, bool kVCodes>
inline constexpr bool kPFold =
    kPFoldAllowed && kSplitV && !kVCodes &&
    (kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E4M3FNUZ || kFormat == PACTS_FORMAT_E5M2 ||
     kFormat == PACTS_FORMAT_E5M2FNUZ);
// MXFP4 K and V decoded by table (src/mx_table.h: the eight bf16 magnitudes of a block looked up
// by byte permutes, the same bits as the scalar decode). Timing experiment only (bench/ variant
// mx_scalar): the scalar decode, element by element.
#if defined(PACTS_EXPERIMENT_MX_SCALAR)
inline constexpr bool kMxTable = false;
#else
inline constexpr bool kMxTable = true;
#endif
// The bf16 pack the tables are formed with: the scalar decode's rounding.
struct PackBf16 {
  __device__ uint32_t operator()(float lo, float hi) const { return gpu::pack_bf16x2_rn(lo, hi); }
};

// The exact power of two P is scaled by on that path, and its inverse.
inline constexpr float kPvF16Up = 0x1p15f;
inline constexpr double kPvF16Down = 0x1p-15;

// Two V codes of the lane's pair of keys (the first in the low half) as the fp16 B-fragment word
// of the fp16 P.V (kPvF16), exactly.
template <pacts_format kFormat>
__device__ inline uint32_t v_codes_f16x2(uint32_t c0, uint32_t c1) {
  if constexpr (kFormat == PACTS_FORMAT_FP16) {
    if (PACTS_MUTANT(fp16_subnormals_flushed))  // the mutant's decoder, as decode_kv's
      return gpu::pack_f16x2_rn(decode_kv<kFormat>(c0), decode_kv<kFormat>(c1));
    return c0 | c1 << 16;
  } else if constexpr (kFormat == PACTS_FORMAT_E5M2) {
    return c0 << 8 | c1 << 24;  // an e5m2 code is the high byte of the fp16 of the same value
  } else {
    if (PACTS_MUTANT(e4m3fn_read_as_fnuz)) {  // the mutant's decoder, as decode_kv2's
      float x0 = 0.0f, x1 = 0.0f;
      decode_kv2<kFormat>(c0, c1, x0, x1);
      return gpu::pack_f16x2_rn(x0, x1);
    }
    return gpu::e4m3x2_to_f16x2(c0 | c1 << 8);
  }
}

// Timing experiment only (bench/ variant byte_pairs): fp8 code pairs taken apart byte by byte and
// joined again before their conversion, as before decode_kv_half and v_codes_f16x2_of_words.
#if defined(PACTS_EXPERIMENT_BYTE_PAIRS)
inline constexpr bool kBytePairs = true;
#else
inline constexpr bool kBytePairs = false;
#endif

// kKLogit's K (e4m3fn, e5m2): codes e and e + 1 of a segment chunk, e even, are one 16-bit half
// of a word (the high one where `high`), decoded as decode_kv2 decodes the two codes, with the
// half as the conversion's operand: taking the bytes apart and joining them again cost about
// three instructions per pair (bench/ variant byte_pairs keeps that).
template <pacts_format kFormat>
__device__ inline void decode_kv_half(uint32_t word, bool high, float& x0, float& x1) {
  static_assert(kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E5M2);
  if (!kBytePairs && (kFormat == PACTS_FORMAT_E5M2 || !PACTS_MUTANT(e4m3fn_read_as_fnuz))) {
    const float2 x = gpu::f16x2_to_float2(kFormat == PACTS_FORMAT_E5M2 ? gpu::e5m2x2_half_to_f16x2(word, high)
                                                                        : gpu::e4m3x2_half_to_f16x2(word, high));
    x0 = x.x;
    x1 = x.y;
    return;
  }
  const uint32_t pair = high ? word >> 16 : word & 0xFFFFu;
  decode_kv2<kFormat>(pair & 0xFFu, pair >> 8, x0, x1);
}

// The V codes of element i of two keys' segment chunks (words w0, w1; one byte each, fp8) as the
// fp16 B-fragment word of the fp16 P.V (v_codes_f16x2 of the two codes): one byte permute joins
// the two codes where shifts and masks took each apart first.
template <pacts_format kFormat>
__device__ inline uint32_t v_codes_f16x2_of_words(uint32_t w0, uint32_t w1, int i) {
  if constexpr (kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E5M2) {
    if (!kBytePairs && (kFormat == PACTS_FORMAT_E5M2 || !PACTS_MUTANT(e4m3fn_read_as_fnuz))) {
      const uint32_t b = static_cast<uint32_t>(i % 4);
      const uint32_t pair = __byte_perm(w0, w1, b | (4u + b) << 4);  // code 0 | code 1 << 8
      if constexpr (kFormat == PACTS_FORMAT_E5M2) return __byte_perm(pair, 0u, 0x1404);  // c0 << 8 | c1 << 24
      else return gpu::e4m3x2_half_to_f16x2(pair, false);
    }
  }
  return v_codes_f16x2<kFormat>(segment_code<kFormat>(&w0, i % 4), segment_code<kFormat>(&w1, i % 4));
}

// A lane's segment of a raw row, read 16 bytes at a time (less when the segment is shorter);
// the code of element i of a chunk: segment_code (split_order.h).
template <pacts_format kFormat, int kSegElems>
struct SplitSegment {
  static constexpr bool kFp4 = kFormat == PACTS_FORMAT_E2M1;
  static constexpr int kBytes = kFp4 ? kSegElems / 2 : kSegElems * (kIs16<kFormat> ? 2 : 1);
  static constexpr int kChunkBytes = kBytes < 16 ? kBytes : 16;
  static constexpr int kChunks = kBytes / kChunkBytes;
  static constexpr int kChunkElems = kSegElems / kChunks;
  static constexpr int kWords = kChunkBytes / 4;
  static_assert(kBytes % kChunkBytes == 0 && kChunkBytes % 4 == 0);
  __device__ static void load(const uint8_t* seg, int chunk, uint32_t (&w)[kWords]) {
    const uint8_t* at = seg + chunk * kChunkBytes;
    if constexpr (kWords == 4) {
      const uint4 x = *reinterpret_cast<const uint4*>(at);
      w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
    } else if constexpr (kWords == 2) {
      const uint2 x = *reinterpret_cast<const uint2*>(at);
      w[0] = x.x, w[1] = x.y;
    } else {
      w[0] = *reinterpret_cast<const uint32_t*>(at);
    }
  }
};

// kVCodes (split kernels of fp16 and fp8): the host launches this instantiation exactly when V
// enters P.V as its codes (no scale, or a per-tensor scale deferred to the merge), so each
// kernel holds one V path: on the H200 the second path in the same kernel cost the per-token
// rows 5-6 % (12 % in the vLLM layout).
//
// kNarrow (the bf16 kernel at D 64 and 128, an item of at most 8 rows; and the split kernels
// there whose V enters as one part, from the same fragment words: qk_step, pv_step's feed): both
// products are computed transposed, S^T = K Q~^T (M = 16 keys, N = 8 rows) and O^T += V^T P^T,
// so no MMA row is padding: half the MMAs, half the accumulator (Q~ back in registers) and
// half the exp of the 16-row form. A lane holds rows 2 q4 and 2 q4 + 1 (keys g and g + 8); P moves from S^T's C
// layout to P^T's B layout by two movmatrix transposes. Every output element is the same sum of
// the same products in the same k order, and l sums the tile's P in the 16-row form's tree
// (softmax_step_t), so the two forms give the same bits: PACTS-ACC-4 compares this kernel with
// the split kernel of a scaled bf16 V, which keeps the 16-row form.
//
// kKLogit (split kernels of e4m3fn and e5m2 pools whose K has no scale or a per-tensor scale in
// [2^-48, 1] and whose V enters as its codes, chosen by the host: decode_hip.cpp
// k_scale_on_logit): K enters Q~ K^T as its codes, which are exact in bf16 (at most
// 4 significant bits, within bf16's range), and the logit is multiplied once by the K scale in fp32
// before the row's logit_down: S = (Q~ codes^T) k_scale, spec/contract.md §2.1. The scale <= 1
// keeps every product at least as large as q~ times the scaled key (no new underflow), and
// >= 2^-48 keeps the sum of D products within fp32 (R3: sum |q~ k| <= 2^64, so sum |q~ code| <=
// 2^112). K is then not rounded at all (the declared u_q only loosens the bound) and the product
// by the scale is a rounding the "+4" of gamma_{D+4}(u_logit) holds.
//
// kVt in the split kernels: V is dim-major with whole-page tiles loaded by vectors
// (p.v_keys_vector, gather_v_dim_major), chosen by the host; the stage and the math are the
// other layouts' (the bf16 kernel's kVt stages V^T instead: stage_tile).
template <int D, pacts_format kFormat, bool kSplitV, bool kVCodes = false, bool kNarrow = false,
          bool kKLogit = false, bool kRing = false, bool kBulk = false, bool kVt = false>
__global__ void __launch_bounds__(MmaShape<D, kSplitV, kRing>::kThreads,
                                  MmaShape<D, kSplitV, kRing>::kBlocksPerSm)
split_kv_mma_kernel(const Params p) {
  using S = MmaShape<D, kSplitV, kRing>;
  static_assert(!kRing || kNarrow, "the ring: the bf16 kernel's transposed form");
  static_assert(!kBulk || (!kSplitV && !kRing), "bulk rows only: the bf16 kernel's per-warp stages");
  static_assert(!kVt || (!kRing && !kBulk), "V^T stages / dim-major V: the per-warp stages' general path");
  static_assert(!kVt || !kSplitV || kFormat != PACTS_FORMAT_E2M1, "dim-major V: no gather of e2m1");
  static_assert(!kNarrow || D <= 128, "the transposed form: D <= 128");
  static_assert(!kKLogit || (kSplitV && (kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E5M2)),
                "K as its codes: e4m3fn and e5m2, whose codes are exact in bf16");
  extern __shared__ float4 smem_raw[];
  using Smem = MmaSmem<D, kSplitV, kFormat, kRing>;
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const WorkItem wi = work_item(p);
  const int64_t b = wi.b, kv_head = wi.kv_head, z = wi.z;
  const int32_t r0 = wi.r0, rows = wi.rows;
  const bool direct = p.partitions == 1;
  const int t = threadIdx.x, warp = t / gpu::kWarpSize, lane = t % gpu::kWarpSize;
  const int g = lane / 4, q4 = lane % 4;  // fragment row and column pair (matrix_nvidia.h)

#if !defined(PACTS_EXPERIMENT_NO_PDL)  // bench/ variant no_pdl: the merge kernel after this one
  // The merge kernel of a split plan may be launched now (decode_hip.cpp: a programmatic
  // dependent launch); it waits for this grid before it reads a partial.
  gpu::allow_dependents();
#endif
#if defined(PACTS_EXPERIMENT_PREFETCH)  // timing experiment only (bench/ variant prefetch)
  prefetch_prologue(p, b, kv_head, z, r0, rows, direct);
#endif
  // The in-launch merge (kFusedMerge) is done by whichever block counts last: every block checks
  // the whole sequence there.
  const SeqCheck seq = check_sequence(p, b, checked_keys(p, z, !S::kFusedMerge));
  if (seq.error != 0) {
    if (!direct) {  // the merge of this row tile writes the NaN rows and reports
      if constexpr (S::kFusedMerge) merge_if_last<D, S::kThreads>(p, sm.u.merge, seq, b, kv_head, r0);
      return;
    }
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
  // The rows of the lane's softmax states: g and g + 8 (C fragments of S), or 2 q4 and 2 q4 + 1
  // (kNarrow: columns of S^T's C fragments).
  const int lrow[2] = {kNarrow ? 2 * q4 : g, kNarrow ? 2 * q4 + 1 : g + 8};
  const KeyRange vis[2] = {visible(lrow[0]), visible(lrow[1])};
  // The same ranges in 32 bits, from the start of the first tile (key_base), clamped below at it:
  // a tile's visible columns then cost 32-bit instructions. Every key index is below 2^31 + 16
  // (validation keeps max_pages_per_seq x page_size below 2^31; a tile passes it by less than
  // 16), so these differences fit an unsigned 32-bit word; a bound below key_base gives the same
  // columns as key_base for every tile.
  const int64_t key_base = span.empty() ? 0 : span.begin / S::kKeys * S::kKeys;
  const auto rel = [&](int64_t j) { return static_cast<uint32_t>(j > key_base ? j - key_base : 0); };
  const uint32_t vis_r[2][2] = {{rel(vis[0].begin), rel(vis[0].end)}, {rel(vis[1].begin), rel(vis[1].end)}};
  // The row's visible keys as columns [ja, jb) of the tile starting at key t0 (clamped to it).
  const auto columns = [&](int r, int64_t t0, int& ja, int& jb) {
#if defined(PACTS_EXPERIMENT_PAGE_DIVIDE)  // timing experiment only (bench/ variant page_divide)
    const auto column = [&](int64_t j) {
      return static_cast<int>(j < t0 ? 0 : (j - t0 > S::kKeys ? S::kKeys : j - t0));
    };
    ja = column(vis[r].begin), jb = column(vis[r].end);
#else
    const uint32_t t0r = static_cast<uint32_t>(t0 - key_base);
    const auto column = [&](uint32_t j) {
      return static_cast<int>(j <= t0r ? 0u : min(j - t0r, static_cast<uint32_t>(S::kKeys)));
    };
    ja = column(vis_r[r][0]), jb = column(vis_r[r][1]);
#endif
  };

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
    // Position at (of the MMA's k) holds dim d: the same in the bf16 kernel, split_k_dim's order
    // in the split kernels (a pair of positions holds a pair of dims).
    const int r = idx / (D / 2), at = 2 * (idx % (D / 2));
    const int d = kSplitV && kSplitKOrder<kFormat> ? split_k_dim<D>(at / 16, at % 16) : at;
    float x[2];
    q_pair(r, d, x);
    const float up = row_up[r];
    *reinterpret_cast<uint32_t*>(&q_smem[swz<D>(r, at / 8) + at % 8]) =
        gpu::pack_bf16x2_rn(x[0] * up, x[1] * up);
  }
  // exact: powers of two
  const float logit_down[2] = {1.0f / row_up[lrow[0]], 1.0f / row_up[lrow[1]]};
  // kKLogit: the K scale, applied to the logit (1 without a scale).
  const float k_logit = !kKLogit || p.k.scale_mode != PACTS_SCALE_PER_TENSOR ||
                                PACTS_MUTANT(hip_k_tensor_scale_dropped)
                            ? 1.0f
                            : p.k.tensor_scale;
  __syncthreads();
  const int q_row = lane % 8 + ((lane / 8) % 2) * 8, q_chunk = lane / 16;
  uint32_t qa[S::kQInRegisters ? S::kKSteps : 1][4];
  // kNarrow: Q~^T as the B fragments of S^T (rows 0-7; dims 16 kk + 2 q4 + {0, 1} of row g in
  // qb[kk][0], + 8 in qb[kk][1]), two k-steps per ldmatrix, in registers all along.
  uint32_t qb[kNarrow ? S::kKSteps : 1][2];
  if constexpr (kNarrow) {
#pragma unroll
    for (int kk = 0; kk < S::kKSteps; kk += 2) {
      uint32_t r[4];
      gpu::ldmatrix_x4(r, &q_smem[swz<D>(lane % 8, 2 * kk + lane / 8)]);
      qb[kk][0] = r[0], qb[kk][1] = r[1], qb[kk + 1][0] = r[2], qb[kk + 1][1] = r[3];
    }
  }
  if constexpr (S::kQInRegisters || kNarrow) {
    if constexpr (!kNarrow) {
#pragma unroll
      for (int kk = 0; kk < S::kKSteps; ++kk)
        gpu::ldmatrix_x4(qa[kk], &q_smem[swz<D>(q_row, 2 * kk + q_chunk)]);
    }
    // Bulk copies may overwrite Q~ (the bf16 kernel's stages; the split kernels' bulk rows fence
    // in issue_raw, after this barrier, before their first copy).
    if constexpr (!kSplitV) gpu::fence_proxy_async_shared();
    if (!PACTS_MUTANT(hip_q_barrier_dropped)) __syncthreads();  // the stages reuse Q~'s memory
  }

  // The accumulator in C fragments: O (16 rows x D: N-tiles of 8 dims), or O^T (kNarrow: M-tiles
  // of 16 dims x 8 rows).
  constexpr int kAccTiles = kNarrow ? D / 16 : S::kDTiles;
  float acc[kAccTiles][4];
#pragma unroll
  for (int n = 0; n < kAccTiles; ++n)
#pragma unroll
    for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;
  common::SoftmaxState state[2];  // rows lrow[0] and lrow[1]
  // kPFold: the tile's V scales (set before the softmax step, which folds them into P), and the
  // low bf16 parts of P it writes beside pa / pb (the same layout).
  const float* fold_vs = nullptr;
  uint32_t p_lo[4] = {0u, 0u, 0u, 0u};
  const auto fold_p = [&](int key) -> float {
    if constexpr (kPFold<kFormat, kSplitV, kVCodes>) return fold_scale<kFormat>(fold_vs[key]).p;
    else return 1.0f;
  };

  const int64_t first = span.empty() ? 0 : span.begin / S::kKeys;
  const int64_t last = span.empty() ? 0 : (span.end + S::kKeys - 1) / S::kKeys;
  int64_t tile = first + warp;
  const auto entry_of = [&](int64_t tl) {
    if (PACTS_MUTANT(hip_v_tail_unmasked) || PACTS_MUTANT(hip_padding_entries_as_pages))
      return tl < last ? unowned_slot_entry<S::kKeys>(p, b, tl * S::kKeys, span, seq.context, lane)
                       : int64_t{-1};
    return tl < last ? slot_entry<S::kKeys>(p, b, tl * S::kKeys, span, lane) : int64_t{-1};
  };
  // S = Q~ K^T for one k-step (16 dims): two N-tiles of 8 keys, K's B fragments in bk.
  // kNarrow (the split kernels' transposed form): S^T = K Q~^T in sc[0]; K's A fragment holds the
  // same words as its B fragments (keys g, g + 8 x positions 2 q4.., 2 q4 + 8..), reordered.
  const auto qk_step = [&](int kk, const uint32_t (&bk)[4], float (&sc)[2][4]) {
    if constexpr (kNarrow) {
      const uint32_t ka[4] = {bk[0], bk[2], bk[1], bk[3]};
      gpu::mma_bf16_16816(sc[0], ka, qb[kk][0], qb[kk][1]);
      return;
    }
    const int qk = S::kQInRegisters ? kk : 0;
    if constexpr (!S::kQInRegisters) gpu::ldmatrix_x4(qa[0], &q_smem[swz<D>(q_row, 2 * kk + q_chunk)]);
    gpu::mma_bf16_16816(sc[0], qa[qk], bk[0], bk[1]);
    gpu::mma_bf16_16816(sc[1], qa[qk], bk[2], bk[3]);
  };
  // The softmax step of the tile of keys [t0, t0 + kKeys) per row half h (row g + 8 h; keys
  // nt * 8 + 2 q4 + e of the tile): soft-cap, the row max over the quad, common::SoftmaxState,
  // P = expf(s - shift) for the row's visible keys and exactly 0 (select) for the others, acc
  // rescaled; P rounded to bf16 as the A fragment of P.V.
  const auto softmax_step = [&](const float (&sc)[2][4], int64_t t0, uint32_t (&pa)[4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int ja = 0, jb = 0;  // the row's visible keys as tile columns [ja, jb)
      columns(h, t0, ja, jb);
      float sv[4], pv[4];
      bool in[4];
      float tile_max = -INFINITY;
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int nt = x / 2, e = x % 2, col = nt * 8 + 2 * q4 + e;
        in[x] = col >= ja && col < jb;
        sv[x] = (kKLogit ? sc[nt][2 * h + e] * k_logit : sc[nt][2 * h + e]) * logit_down[h];
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
      // The rescale, unless no lane's row moved its origin (alpha 1: x * 1 is x, bit for bit).
      if (PACTS_ANY(step.alpha != 1.0f)) {
#pragma unroll
        for (int n = 0; n < kAccTiles; ++n) {
          acc[n][2 * h] *= step.alpha;
          acc[n][2 * h + 1] *= step.alpha;
        }
      }
      if constexpr (kPvF16<kFormat, kSplitV, kVCodes>) {  // fp16 of P * 2^15 (exact product)
        pa[h] = gpu::pack_f16x2_rn(pv[0] * kPvF16Up, pv[1] * kPvF16Up);
        pa[2 + h] = gpu::pack_f16x2_rn(pv[2] * kPvF16Up, pv[3] * kPvF16Up);
      } else if constexpr (kPFold<kFormat, kSplitV, kVCodes>) {  // P m in two bf16 parts
        const int k0 = 2 * q4;  // keys k0, k0 + 1, k0 + 8, k0 + 9
        fold_parts(pv[0] * fold_p(k0), pv[1] * fold_p(k0 + 1), PackBf16{}, pa[h], p_lo[h]);
        fold_parts(pv[2] * fold_p(k0 + 8), pv[3] * fold_p(k0 + 9), PackBf16{}, pa[2 + h], p_lo[2 + h]);
      } else {
        pa[h] = gpu::pack_bf16x2_rn(pv[0], pv[1]);      // a0 / a1: keys 2 q4.., rows g / g + 8
        pa[2 + h] = gpu::pack_bf16x2_rn(pv[2], pv[3]);  // a2 / a3: keys 8 + 2 q4..
      }
    }
  };
  // The same step in the transposed form (kNarrow): st holds S^T's C fragment, st[2 hk + e] the
  // logit of key g + 8 hk for row 2 q4 + e. The row max over the 8 lanes of a column (xor 4, 8,
  // 16); the tile's sum in softmax_step's tree: that sum is ((s0 + s1) + (s2 + s3)) with
  // s_q = (P[2q] + P[2q + 1]) + (P[2q + 8] + P[2q + 9]), and lane g holds keys g and g + 8, so
  // xor 4 pairs keys 2q and 2q + 1, xor 8 and 16 pair the s_q. P^T for P.V: pb[hk] holds keys
  // 8 hk + 2 q4 + {0, 1} of row g (B fragments), from the C layout by movmatrix.
  // pb[2] and pb[3] keep the words before the transposes (P of keys g, g + 8 for rows 2 q4..,
  // the tiny path's). On the fp16 P.V path (kPvF16) P enters as fp16 of P * 2^15, as in
  // softmax_step.
  const auto softmax_step_t = [&](const float (&st)[4], int64_t t0, uint32_t (&pb)[4]) {
    float pv[4];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      int ja = 0, jb = 0;
      columns(e, t0, ja, jb);
      float sv[2];
      bool in[2];
      float tile_max = -INFINITY;
#pragma unroll
      for (int hk = 0; hk < 2; ++hk) {
        const int col = g + 8 * hk;
        in[hk] = col >= ja && col < jb;
        sv[hk] = (kKLogit ? st[2 * hk + e] * k_logit : st[2 * hk + e]) * logit_down[e];
        if (in[hk] && p.softcap > 0.0f) sv[hk] = common::soft_cap(sv[hk], p.softcap);
        if (in[hk]) tile_max = common::max_finite(tile_max, sv[hk]);
      }
      tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, 4));
      tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, 8));
      tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, 16));
      const common::TileStep step = state[e].begin_tile(tile_max);
      float pk[2];
#pragma unroll
      for (int hk = 0; hk < 2; ++hk) pk[hk] = in[hk] ? expf(sv[hk] - step.shift) : 0.0f;  // select
      const float lo = pk[0] + PACTS_SHFL_XOR(pk[0], 4);  // P[2q] + P[2q + 1]
      const float hi = pk[1] + PACTS_SHFL_XOR(pk[1], 4);  // P[2q + 8] + P[2q + 9]
      float sum = lo + hi;
      sum += PACTS_SHFL_XOR(sum, 8);
      sum += PACTS_SHFL_XOR(sum, 16);
      state[e].add(sum);
      if (PACTS_ANY(step.alpha != 1.0f)) {
#pragma unroll
        for (int m = 0; m < kAccTiles; ++m) {
          acc[m][e] *= step.alpha;
          acc[m][2 + e] *= step.alpha;
        }
      }
      pv[e] = pk[0];
      pv[2 + e] = pk[1];
    }
    if constexpr (kPvF16<kFormat, kSplitV, kVCodes>) {
      pb[2] = gpu::pack_f16x2_rn(pv[0] * kPvF16Up, pv[1] * kPvF16Up);
      pb[3] = gpu::pack_f16x2_rn(pv[2] * kPvF16Up, pv[3] * kPvF16Up);
    } else if constexpr (kPFold<kFormat, kSplitV, kVCodes>) {  // P m in two bf16 parts
      const float m0 = fold_p(g), m1 = fold_p(g + 8);
      fold_parts(pv[0] * m0, pv[1] * m0, PackBf16{}, pb[2], p_lo[2]);
      fold_parts(pv[2] * m1, pv[3] * m1, PackBf16{}, pb[3], p_lo[3]);
      p_lo[0] = gpu::movmatrix_trans(p_lo[2]);
      p_lo[1] = gpu::movmatrix_trans(p_lo[3]);
    } else {
      pb[2] = gpu::pack_bf16x2_rn(pv[0], pv[1]);
      pb[3] = gpu::pack_bf16x2_rn(pv[2], pv[3]);
    }
    pb[0] = gpu::movmatrix_trans(pb[2]);  // keys 0-7
    pb[1] = gpu::movmatrix_trans(pb[3]);  // keys 8-15
  };

  if constexpr (kRing) {
    // The ring (an experiment, MmaShape::kRing): warp kWarps copies the item's tiles in order
    // into kRingStages stages; computing warp w takes tiles w, w + kWarps, ... as the per-warp
    // stages do. Stage k % kRingStages holds the k-th tile; full[s] completes a phase when the
    // tile's rows have landed (the producer's 32 arrivals and the bulk copies' bytes), empty[s]
    // when the computing warp is done with the stage.
    constexpr int kR = S::kRingStages;
    uint64_t* const full = sm.ring_bar;
    uint64_t* const empty = sm.ring_bar + kR;
    if (t == 0) {
      for (int i = 0; i < kR; ++i) {
        gpu::mbarrier_init(&full[i], gpu::kWarpSize);
        gpu::mbarrier_init(&empty[i], 1);
      }
      gpu::fence_mbarrier_init();
    }
    __syncthreads();
    const int32_t n_tiles = static_cast<int32_t>(last - first);
    if (warp == S::kWarps) {  // the producer
      // The block-table entries of the next 4 tiles in flight (a chain of one load per tile
      // would bound the block to a tile per load latency).
      const auto produce = [&](int32_t k, int64_t entry) {
        if (k >= n_tiles) return;
        const int s = k % kR;
        if (k >= kR) gpu::mbarrier_wait_parity(&empty[s], static_cast<uint32_t>(k / kR - 1) & 1u);
        ring_tile<D>(p, kv_head, entry, sm.ring_stage(s), &full[s], lane);
      };
      int64_t e0 = entry_of(first), e1 = entry_of(first + 1), e2 = entry_of(first + 2),
              e3 = entry_of(first + 3);
      for (int32_t k = 0; k < n_tiles; k += 4) {
        produce(k, e0);
        e0 = entry_of(first + k + 4);
        produce(k + 1, e1);
        e1 = entry_of(first + k + 5);
        produce(k + 2, e2);
        e2 = entry_of(first + k + 6);
        produce(k + 3, e3);
        e3 = entry_of(first + k + 7);
      }
    } else {
      const int va_row = lane % 8 + (lane / 16) * 8, va_chunk = (lane / 8) % 2;
      for (int32_t k = warp; k < n_tiles; k += S::kWarps) {
        const int s = k % kR;
        if (!PACTS_MUTANT(hip_cp_async_wait_skipped))
          gpu::mbarrier_wait_parity(&full[s], static_cast<uint32_t>(k / kR) & 1u);
        const uint16_t* kt = sm.ring_stage(s);
        const uint16_t* vt = kt + S::kTileElems;
        float st[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < S::kKSteps; ++kk) {
          uint32_t ka[4];
          gpu::ldmatrix_x4(ka, kt + (lane % 16) * S::kRowPad + (2 * kk + lane / 16) * 8);
          gpu::mma_bf16_16816(st, ka, qb[kk][0], qb[kk][1]);
        }
        uint32_t pb[4];
        softmax_step_t(st, (first + k) * S::kKeys, pb);
#pragma unroll
        for (int m = 0; m < kAccTiles; ++m) {
          uint32_t va[4];
          gpu::ldmatrix_x4_trans(va, vt + va_row * S::kRowPad + (2 * m + va_chunk) * 8);
          gpu::mma_bf16_16816(acc[m], va, pb[0], pb[1]);
        }
        PACTS_WARP_SYNC();  // every lane's reads of the stage are done
        if (lane == 0) gpu::mbarrier_arrive(&empty[s]);
      }
    }
  } else if constexpr (!kSplitV) {
    // bf16 K and V: kStages stages of bf16 tiles with padded rows (stage_tile).
    uint16_t* const stages = sm.stage(warp);
    uint64_t* const bars = sm.bar[warp];
    const int k_row = (lane / 16) * 8 + lane % 8, k_chunk = (lane / 8) % 2;
    const int v_row = lane % 8 + ((lane / 8) % 2) * 8, v_chunk = lane / 16;
#if defined(PACTS_EXPERIMENT_ABLATE)
    // Timing experiments only (bench/ variants, never gated): 1 skips the math (copy-only: one
    // word per lane and tile is folded into the output), 2 copies the first kStages - 1 tiles
    // only (the math runs on stale stages).
    constexpr int kAblate = PACTS_EXPERIMENT_ABLATE;
#else
    constexpr int kAblate = 0;
#endif
    uint32_t fold = 0;
    constexpr bool kKc = kKChunks<kVt>;
    if (kKc || (!kVt && (kBulk || p.rows_bulk))) {
      if (lane == 0)
        for (int i = 0; i < S::kStages; ++i) gpu::mbarrier_init(&bars[i], 1);
      gpu::fence_mbarrier_init();
      PACTS_WARP_SYNC();
    }
    // The block-table entries of a tile are loaded one tile before its copies are issued, and
    // the copies kStages - 1 tiles before it is computed. The warp's i-th tile: stage i % kStages
    // (its barrier's phase i / kStages).
    int64_t entry = entry_of(tile);
#pragma unroll
    for (int i = 0; i + 1 < S::kStages; ++i) {
      if (tile + i * S::kWarps < last)
        stage_tile<D, kBulk, kVt>(p, kv_head, entry, stages + i * S::kStageElems, &bars[i], lane);
      gpu::cp_async_commit();
      entry = entry_of(tile + (i + 1) * S::kWarps);
    }
    int sc_at = 0, sa_at = S::kStages - 1;  // stages of the tile computed and the tile issued
    uint32_t phase = 0;
    for (; tile < last; tile += S::kWarps) {
      const int64_t ahead = tile + (S::kStages - 1) * S::kWarps;
      if (ahead < last && (kAblate != 2)) {  // tiles ahead in flight while this one is computed
        PACTS_WARP_SYNC();  // every lane is done with stage sa_at (an earlier tile)
        stage_tile<D, kBulk, kVt>(p, kv_head, entry, stages + sa_at * S::kStageElems, &bars[sa_at], lane);
      }
      gpu::cp_async_commit();
      entry = entry_of(ahead + S::kWarps);
      if (kAblate != 2 && !PACTS_MUTANT(hip_cp_async_wait_skipped)) {
        if constexpr (kKc) {  // V^T by cp.async, K's bulk chunks (or none) on the barrier
          gpu::cp_async_wait<S::kStages - 1>();
          gpu::mbarrier_wait_parity(&bars[sc_at], phase);
        } else if (!kVt && (kBulk || p.rows_bulk) && !kRowsByCpAsync) {
          gpu::mbarrier_wait_parity(&bars[sc_at], phase);
        } else {
          gpu::cp_async_wait<S::kStages - 1>();
        }
      }
      PACTS_WARP_SYNC();  // the tile's copies and stores are visible to the whole warp
      const uint16_t* kt = stages + sc_at * S::kStageElems;
      const uint16_t* vt = kt + S::kTileElems;
      sa_at = sc_at;
      if (++sc_at == S::kStages) sc_at = 0, phase ^= 1u;
      if constexpr (kAblate == 1) {
        fold ^= *reinterpret_cast<const uint32_t*>(kt + lane * 8) ^
                *reinterpret_cast<const uint32_t*>(vt + lane * 8);
        continue;
      }
      if constexpr (kNarrow) {
        // S^T = K Q~^T: K's A fragments (keys lane % 16, dim chunk 2 kk + lane / 16).
        float st[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < S::kKSteps; ++kk) {
          uint32_t ka[4];
          gpu::ldmatrix_x4(ka, kt + k_at<D, kKc>(lane % 16, 2 * kk + lane / 16));
          gpu::mma_bf16_16816(st, ka, qb[kk][0], qb[kk][1]);
        }
        uint32_t pb[4];
        softmax_step_t(st, tile * S::kKeys, pb);
        // O^T += V^T P^T: V^T's A fragments by ldmatrix.trans (dims 16 m.., keys 0-7 then 8-15).
        // kVt: V^T staged, A fragments without .trans (dims 16 m + 8 (l / 8 % 2) + l % 8, keys
        // half l / 16).
        const int va_row = lane % 8 + (lane / 16) * 8, va_chunk = (lane / 8) % 2;
#pragma unroll
        for (int m = 0; m < kAccTiles; ++m) {
          uint32_t va[4];
          if constexpr (kVt)
            gpu::ldmatrix_x4(va, vt + vt_at(16 * m + 8 * va_chunk + lane % 8, 8 * (lane / 16)));
          else
            gpu::ldmatrix_x4_trans(va, vt + va_row * S::kRowPad + (2 * m + va_chunk) * 8);
          gpu::mma_bf16_16816(acc[m], va, pb[0], pb[1]);
        }
      } else {
        float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
        for (int kk = 0; kk < S::kKSteps; ++kk) {
          uint32_t bk[4];
          gpu::ldmatrix_x4(bk, kt + k_at<D, kKc>(k_row, 2 * kk + k_chunk));
          qk_step(kk, bk, sc);
        }
        uint32_t pa[4];
        softmax_step(sc, tile * S::kKeys, pa);
        // acc += P V: V^T fragments by ldmatrix.trans, two N-tiles of 8 dims per load.
        // kVt: V^T staged, read without .trans (dims 16 dp + 8 (l / 16) + l % 8, keys half
        // l / 8 % 2).
#pragma unroll
        for (int dp = 0; dp < S::kDTiles / 2; ++dp) {
          uint32_t bv[4];
          if constexpr (kVt)
            gpu::ldmatrix_x4(bv, vt + vt_at(16 * dp + 8 * (lane / 16) + lane % 8, 8 * ((lane / 8) % 2)));
          else
            gpu::ldmatrix_x4_trans(bv, vt + v_row * S::kRowPad + (2 * dp + v_chunk) * 8);
          gpu::mma_bf16_16816(acc[2 * dp], pa, bv[0], bv[1]);
          gpu::mma_bf16_16816(acc[2 * dp + 1], pa, bv[2], bv[3]);
        }
      }
    }
    if (kAblate == 1 && fold == 0x9E3779B9u) acc[0][0] += 1.0f;  // keeps the copies' reads
  } else {
    // Decoded formats (fp16, fp8, MXFP4, or a scale): kStages raw stages per warp (RawShape),
    // the tiles ahead in flight by cp.async while one is computed; the fragments are decoded
    // from the raw rows. Stage of the warp's i-th tile: i % kStages.
    using R = RawShape<D, kFormat>;
    uint8_t* const area = sm.warp_area(warp);
    const auto stage_at = [&](int i) { return area + (i % R::kStages) * R::kStageBytes; };
    float* const pt = reinterpret_cast<float*>(area + R::kStages * R::kStageBytes);  // tiny path
    const bool raw_k = kFormat == PACTS_FORMAT_BF16 && p.k.scale_mode == PACTS_SCALE_NONE;
    const pacts_nibble_order k_order = p.k.nibble_order, v_order = p.v.nibble_order;
    // V parts fed to P.V (exact: each is the residual of the parts before it): an fp8 code
    // without an fp32 scale (at most 4 significant bits) or an MXFP4 element (2 bits times a
    // power of two) is exact in bf16, one part; an fp16 code without a scale (11 bits) two; any
    // other V three (24 bits; every part a normal bf16 or 0 for |v| >= 2^-102). A non-zero
    // |v| < 2^-102 ("tiny", down to the fp32 subnormals) takes the CUDA-core path instead (below).
    // Per-token fp8 V instead folds its scale's significand into P (kPFold): V one part, P two.
    // So P.V sees V unrounded (PACTS-ACC-3: a single key's output is RNE(v) exactly).
    // A per-tensor V scale of a narrow format (fp16, fp8: |code| <= 2^16) is deferred: P.V sums
    // the codes (one part for fp8, two for fp16) and the merge multiplies the sum once by the
    // scale in binary64 (merge_warps_and_store's v_factor), which is the same value up to the
    // accumulation's own roundings (spec/contract.md §2.1: the unscaled sum is at most n 2^16,
    // no headroom lost). Without a scale, or deferred, no V element can be tiny (the smallest
    // code is 2^-24), so the tiny test is skipped. Which of these paths a kernel takes is its
    // instantiation's (kVCodes, below); the host launches the one the V scale mode needs.
    const bool v_deferred = kFormat != PACTS_FORMAT_BF16 && p.v.scale_mode == PACTS_SCALE_PER_TENSOR;
    uint64_t* const bars = sm.bar[warp];  // bulk rows: the barrier of stage i % kStages
    const bool bulk = R::kBulkRows && p.raw_bulk;
    if (bulk) {
      if (lane == 0)
        for (int i = 0; i < R::kStages; ++i) gpu::mbarrier_init(&bars[i], 1);
      gpu::fence_mbarrier_init();
      PACTS_WARP_SYNC();
    }
    // The scales of the tile issued last, stored one iteration later (issue_raw).
    uint32_t carry[R::kCarryWords];
    int64_t entry = entry_of(tile);
#pragma unroll 1
    for (int i = 0; i < R::kStages - 1; ++i) {  // the first tiles, their scales stored at once
      if (tile + i * S::kWarps < last) {
        issue_raw<D, kFormat, kVt>(p, kv_head, entry, stage_at(i), lane, carry, &bars[i]);
        store_scales<D, kFormat>(stage_at(i), lane, carry);
      }
      gpu::cp_async_commit();
      entry = entry_of(tile + (i + 1) * S::kWarps);
    }
    bool carried = false;
#pragma unroll 1
    for (int i = 0; tile < last; tile += S::kWarps, ++i) {
      const int64_t ahead = tile + (R::kStages - 1) * S::kWarps;
      PACTS_WARP_SYNC();  // every lane is done with the previous tile's stage, which ahead takes
      if (carried) store_scales<D, kFormat>(stage_at(i + R::kStages - 2), lane, carry);
      carried = ahead < last;
      if (carried)
        issue_raw<D, kFormat, kVt>(p, kv_head, entry, stage_at(i + R::kStages - 1), lane, carry,
                              &bars[(i + R::kStages - 1) % R::kStages]);
      gpu::cp_async_commit();
      entry = entry_of(ahead + S::kWarps);
      if (!PACTS_MUTANT(hip_cp_async_wait_skipped)) {
        if (bulk)  // tile i: stage i % kStages, its barrier's phase (i / kStages) % 2
          gpu::mbarrier_wait_parity(&bars[i % R::kStages], static_cast<uint32_t>(i / R::kStages) & 1u);
        else
          gpu::cp_async_wait<R::kStages - 1>();
      }
      PACTS_WARP_SYNC();  // the tile's copies, stores and scales are visible to the whole warp
      const uint8_t* kr = stage_at(i);
      const uint8_t* vr = kr + R::kPoolBytes;
      const float* ks = reinterpret_cast<const float*>(kr + 2 * R::kPoolBytes);
      const float* vs = ks + R::kScaleFloats;

      // S = Q~ K^T: K decoded, scaled in fp32 and rounded once to bf16 (profile: u_q); bf16 codes
      // without a scale (raw_k) as they are. Other formats in split_k_dim's order: the lane's B
      // fragments are keys g and g + 8, dims q4 * D / 4 + 4 kk + {0, 1} (b0) and + {2, 3} (b1).
      float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      if constexpr (!kSplitKOrder<kFormat>) {
        // bf16 (natural order, as the bf16 kernel): keys g and g + 8, dims 16 kk + 2 q4 + {0, 1}
        // (b0) and + 8 (b1), one word each.
#pragma unroll
        for (int kk = 0; kk < S::kKSteps; ++kk) {
          uint32_t bk[4];
#pragma unroll
          for (int f = 0; f < 4; ++f) {
            const int key = g + 8 * (f / 2), d = 16 * kk + 2 * q4 + 8 * (f % 2);
            const uint32_t w = *reinterpret_cast<const uint32_t*>(kr + key * R::kRowStride + 2 * d);
            bk[f] = raw_k ? w
                          : gpu::pack_bf16x2_rn(
                                elem_of<kFormat>(w & 0xFFFFu, d, ks[key], k_order),
                                elem_of<kFormat>(w >> 16, d + 1, ks[key], k_order));
          }
          qk_step(kk, bk, sc);
        }
      } else {
        using Seg = SplitSegment<kFormat, D / 4>;
        const int kd0 = k_segment<D>(q4);
        const uint8_t* seg[2] = {kr + g * R::kRowStride + q4 * Seg::kBytes,
                                 kr + (g + 8) * R::kRowStride + q4 * Seg::kBytes};
#pragma unroll
        for (int c = 0; c < Seg::kChunks; ++c) {
          uint32_t w[2][Seg::kWords];
          float scale[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            Seg::load(seg[h], c, w[h]);
            scale[h] = ks[(g + 8 * h) * R::kCarry + (R::kFp4 ? (kd0 + c * Seg::kChunkElems) / 32 : 0)];
          }
          if constexpr (R::kFp4 && kMxTable) {
            // A chunk lies in one block of 32 dims: one table per key; a word holds 8 elements,
            // the B fragment words of two k-steps.
            const bool swap = mx_swap_nibbles(k_order);
            const MxTable tk[2] = {mx_table<false>(scale[0], PackBf16{}),
                                   mx_table<false>(scale[1], PackBf16{})};
#pragma unroll
            for (int j = 0; j < Seg::kWords; ++j) {
              uint32_t out[2][4];
#pragma unroll
              for (int h = 0; h < 2; ++h) mx_decode8(mx_low_first(w[h][j], swap), tk[h], out[h]);
              const int kk = (c * Seg::kChunkElems + 8 * j) / 4;  // k_segment_elem(kk, f) = 4 kk + 2 f
#pragma unroll
              for (int s2 = 0; s2 < 2; ++s2) {
                const uint32_t bk[4] = {out[0][2 * s2], out[0][2 * s2 + 1], out[1][2 * s2],
                                        out[1][2 * s2 + 1]};
                qk_step(kk + s2, bk, sc);
              }
            }
          } else {
#pragma unroll
            for (int i = 0; i < Seg::kChunkElems; i += 4) {
              const int kk = (c * Seg::kChunkElems + i) / 4;
              uint32_t bk[4];
#pragma unroll
              for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int f = 0; f < 2; ++f) {
                  const int at = k_segment_elem(kk, f), e = at - c * Seg::kChunkElems;  // in chunk
                  if constexpr (kKLogit) {  // the codes, exact in bf16 (the scale is the logit's)
                    float x0 = 0.0f, x1 = 0.0f;
                    decode_kv_half<kFormat>(w[h][e / 4], e % 4 == 2, x0, x1);
                    bk[2 * h + f] = gpu::pack_bf16x2_rn(x0, x1);
                    continue;
                  }
                  const float2 x = pair_of<kFormat>(segment_code<kFormat>(w[h], e), segment_code<kFormat>(w[h], e + 1),
                                                    kd0 + at, kd0 + at + 1, scale[h], scale[h], k_order);
                  bk[2 * h + f] = gpu::pack_bf16x2_rn(x.x, x.y);
                }
              qk_step(kk, bk, sc);
            }
          }
        }
      }
      // kNarrow: pa holds P^T's B fragments (pa[0], pa[1]) and the words before the transposes.
      // kPFold: the keys' V scales folded into P there, the low parts in p_lo.
      if constexpr (kPFold<kFormat, kSplitV, kVCodes>) fold_vs = vs;
      uint32_t pa[4];
      if constexpr (kNarrow) softmax_step_t(sc[0], tile * S::kKeys, pa);
      else softmax_step(sc, tile * S::kKeys, pa);

      // acc += P V (split_v_dim's order): the lane's B fragment values are keys 2 q4, 2 q4 + 1
      // (b0) and 2 q4 + 8, 2 q4 + 9 (b1) of dim g * D / 8 + n for N-tile n, fed as their parts in
      // order, tiny elements as 0.
      // One (parts, tiny test) pair per kernel, so that neither is a branch inside the unrolled
      // loop: fp8 (1, no test) with kVCodes, else (1, a test per key, P in two parts: kPFold);
      // fp16 (2, no test) with kVCodes, else (3, test); MXFP4 (1, test); a scaled bf16 (3, test).
      const auto pv_step = [&](auto parts_c, auto tiny_c) -> bool {
        constexpr int kParts = decltype(parts_c)::value;
        constexpr bool kTinyTest = decltype(tiny_c)::value;
        static_assert(!kNarrow || kParts == 1 || kPvF16<kFormat, kSplitV, kVCodes>,
                      "the transposed form: V as one part");
        bool tiny = false;
        // N-tile n's B fragment words (b0: keys 2 q4, 2 q4 + 1; b1: + 8, + 9; column g) into the
        // product. kNarrow: N-tiles 2 m and 2 m + 1 are rows g and g + 8 of V^T's A fragment for
        // M-tile m (the same words), held until the second arrives; O^T += V^T P^T.
        uint32_t held[2] = {0u, 0u};
        const auto feed = [&](int n, uint32_t b0, uint32_t b1, auto f16_c) {
          constexpr bool kF16 = decltype(f16_c)::value;
          if constexpr (kNarrow) {
            if (n % 2 == 0) {
              held[0] = b0, held[1] = b1;
              return;
            }
            const uint32_t a[4] = {held[0], b0, held[1], b1};
            if constexpr (kF16) gpu::mma_f16_16816(acc[n / 2], a, pa[0], pa[1]);
            else gpu::mma_bf16_16816(acc[n / 2], a, pa[0], pa[1]);
            if constexpr (kPFold<kFormat, kSplitV, kVCodes>) gpu::mma_bf16_16816(acc[n / 2], a, p_lo[0], p_lo[1]);
          } else {
            if constexpr (kF16) gpu::mma_f16_16816(acc[n], pa, b0, b1);
            else gpu::mma_bf16_16816(acc[n], pa, b0, b1);
            if constexpr (kPFold<kFormat, kSplitV, kVCodes>) gpu::mma_bf16_16816(acc[n], p_lo, b0, b1);
          }
        };
        using Seg = SplitSegment<kFormat, D / 8>;
        const int vd0 = v_segment<D>(g);
        const int vkey[4] = {2 * q4, 2 * q4 + 1, 2 * q4 + 8, 2 * q4 + 9};
        float vscale[4];
#pragma unroll
        for (int x = 0; x < 4; ++x)  // one block of 32 dims holds the lane's D / 8
          vscale[x] = v_deferred ? 1.0f : vs[vkey[x] * R::kCarry + (R::kFp4 ? vd0 / 32 : 0)];
        if constexpr (kPFold<kFormat, kSplitV, kVCodes>) {  // V's factor; a tiny key's V: the cores'
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            tiny |= tiny_key<kFormat>(vscale[x]);
            vscale[x] = fold_scale<kFormat>(vscale[x]).v;
          }
        }
        // Chunk c of the four keys' V segments, as 32-bit words.
        const auto load_v_chunk = [&](int c, uint32_t (&w)[4][Seg::kWords]) {
#pragma unroll
          for (int x = 0; x < 4; ++x) Seg::load(vr + vkey[x] * R::kRowStride + g * Seg::kBytes, c, w[x]);
        };
        if constexpr (R::kFp4 && kMxTable) {
          // One table per key (the lane's D / 8 dims lie in one block); element n of the four
          // keys' segments gives N-tile n's B fragment words (keys 2 q4, 2 q4 + 1 | + 8, + 9).
          static_assert(kParts == 1 && kTinyTest);
          static_assert(Seg::kChunks * Seg::kWords * 8 == S::kDTiles, "8 elements a word, one per N-tile");
          const bool swap = mx_swap_nibbles(v_order);
          MxTable tv[4];
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            tv[x] = mx_table<true>(vscale[x], PackBf16{});
            tiny |= tv[x].tiny;
          }
#pragma unroll
          for (int c = 0; c < Seg::kChunks; ++c) {
            uint32_t w[4][Seg::kWords];
            load_v_chunk(c, w);
#pragma unroll
            for (int j = 0; j < Seg::kWords; ++j) {
              uint32_t out[4][4];
#pragma unroll
              for (int x = 0; x < 4; ++x) mx_decode8(mx_low_first(w[x][j], swap), tv[x], out[x]);
#pragma unroll
              for (int e = 0; e < 8; ++e) {
                const int n = c * Seg::kChunkElems + 8 * j + e;
                const bool high = e % 2 == 1;
                const uint32_t b0 = mx_pair_halves(out[0][e / 2], out[1][e / 2], high);
                const uint32_t b1 = mx_pair_halves(out[2][e / 2], out[3][e / 2], high);
                feed(n, b0, b1, std::false_type{});
              }
            }
          }
        } else {
#pragma unroll
          for (int c = 0; c < Seg::kChunks; ++c) {
            uint32_t w[4][Seg::kWords];
            load_v_chunk(c, w);
#pragma unroll
            for (int i = 0; i < Seg::kChunkElems; ++i) {
              const int n = c * Seg::kChunkElems + i;
              if constexpr (kPvF16<kFormat, kSplitV, kVCodes>) {  // the codes as fp16, one MMA
                uint32_t b0 = 0, b1 = 0;
                if constexpr (kIs16<kFormat>) {
                  b0 = v_codes_f16x2<kFormat>(segment_code<kFormat>(w[0], i), segment_code<kFormat>(w[1], i));
                  b1 = v_codes_f16x2<kFormat>(segment_code<kFormat>(w[2], i), segment_code<kFormat>(w[3], i));
                } else {  // fp8: element i is byte i % 4 of word i / 4
                  b0 = v_codes_f16x2_of_words<kFormat>(w[0][i / 4], w[1][i / 4], i);
                  b1 = v_codes_f16x2_of_words<kFormat>(w[2][i / 4], w[3][i / 4], i);
                }
                feed(n, b0, b1, std::true_type{});
                continue;
              }
              float v[4];
#pragma unroll
              for (int x = 0; x < 4; x += 2) {
                const float2 y = pair_of<kFormat>(segment_code<kFormat>(w[x], i), segment_code<kFormat>(w[x + 1], i), vd0 + n,
                                                  vd0 + n, vscale[x], vscale[x + 1], v_order);
                v[x] = y.x;
                v[x + 1] = y.y;
              }
              if constexpr (kTinyTest) {
#pragma unroll
                for (int x = 0; x < 4; ++x) {
                  const bool t_x = is_tiny(v[x]);
                  tiny |= t_x;
                  if (t_x) v[x] = 0.0f;
                }
              }
              uint32_t b0 = 0, b1 = 0;
#pragma unroll
              for (int part = 0; part < kParts; ++part) {
                if (part > 0) {  // the residuals of the parts fed so far
                  v[0] = residual(v[0], common::bf16_to_float(static_cast<uint16_t>(b0 & 0xFFFFu)));
                  v[1] = residual(v[1], common::bf16_to_float(static_cast<uint16_t>(b0 >> 16)));
                  v[2] = residual(v[2], common::bf16_to_float(static_cast<uint16_t>(b1 & 0xFFFFu)));
                  v[3] = residual(v[3], common::bf16_to_float(static_cast<uint16_t>(b1 >> 16)));
                }
                b0 = gpu::pack_bf16x2_rn(v[0], v[1]);
                b1 = gpu::pack_bf16x2_rn(v[2], v[3]);
                feed(n, b0, b1, std::false_type{});
              }
            }
          }
        }
        return tiny;
      };
      using One = std::integral_constant<int, 1>;
      using Two = std::integral_constant<int, 2>;
      using Three = std::integral_constant<int, 3>;
      bool tiny = false;
#if defined(PACTS_EXPERIMENT_ONE_V_PATH)  // timing experiment only (bench/ variant one_v_path):
      tiny = pv_step(Three{}, std::true_type{});  // one V path per kernel, three parts (exact)
#else
      if constexpr (kFormat == PACTS_FORMAT_E2M1) {
        tiny = pv_step(One{}, std::true_type{});
      } else if constexpr (kPFold<kFormat, kSplitV, kVCodes>) {
        tiny = pv_step(One{}, std::false_type{});
      } else if constexpr (kFormat == PACTS_FORMAT_BF16 || !kVCodes) {
        tiny = pv_step(Three{}, std::true_type{});
      } else if constexpr (kFormat == PACTS_FORMAT_FP16) {
        tiny = pv_step(Two{}, std::false_type{});
      } else {
        tiny = pv_step(One{}, std::false_type{});
      }
#endif
      // Tiny V elements (kPFold: every element of a tiny key): acc += P t on the CUDA cores with
      // the same bf16 P (kPFold: hi + lo, exact in fp32; a tiny key's P factor is 1), in a fixed
      // order over the tile's keys (rare: a warp vote). P goes through the warp's P tile.
      if (PACTS_ANY(tiny)) {
        if constexpr (kNarrow) {
#pragma unroll
          for (int x = 0; x < 2; ++x) {  // pa[2 + x]: key g + 8 x, rows 2 q4 + {0, 1}
            const int at = 2 * q4 * S::kKeys + g + 8 * x;
            pt[at] = common::bf16_to_float(static_cast<uint16_t>(pa[2 + x] & 0xFFFFu));
            pt[at + S::kKeys] = common::bf16_to_float(static_cast<uint16_t>(pa[2 + x] >> 16));
            if constexpr (kPFold<kFormat, kSplitV, kVCodes>) {
              pt[at] += common::bf16_to_float(static_cast<uint16_t>(p_lo[2 + x] & 0xFFFFu));
              pt[at + S::kKeys] += common::bf16_to_float(static_cast<uint16_t>(p_lo[2 + x] >> 16));
            }
          }
        } else {
#pragma unroll
          for (int x = 0; x < 4; ++x) {  // pa[x]: row g + 8 (x % 2), keys 8 (x / 2) + 2 q4 + {0, 1}
            const int at = (g + 8 * (x % 2)) * S::kKeys + 8 * (x / 2) + 2 * q4;
            pt[at] = common::bf16_to_float(static_cast<uint16_t>(pa[x] & 0xFFFFu));
            pt[at + 1] = common::bf16_to_float(static_cast<uint16_t>(pa[x] >> 16));
            if constexpr (kPFold<kFormat, kSplitV, kVCodes>) {
              pt[at] += common::bf16_to_float(static_cast<uint16_t>(p_lo[x] & 0xFFFFu));
              pt[at + 1] += common::bf16_to_float(static_cast<uint16_t>(p_lo[x] >> 16));
            }
          }
        }
        PACTS_WARP_SYNC();
        // A loop over the N-tiles (code and registers of one), each adding its sums through an
        // unrolled sweep of predicated adds (acc is indexed by constants: it stays in registers).
        // kNarrow: the accumulator's tiles are O^T's (kAccTiles), element x of tile n at row
        // 2 q4 + x % 2 and dim split_v_dim(2 n + x / 2, g).
#pragma unroll 1
        for (int n = 0; n < kAccTiles; ++n) {
          float add[4];
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const int r = kNarrow ? 2 * q4 + x % 2 : g + 8 * (x / 2);
            const int d = kNarrow ? split_v_dim<D>(2 * n + x / 2, g) : split_v_dim<D>(n, 2 * q4 + x % 2);
            float sum = 0.0f;
#pragma unroll 1
            for (int k = 0; k < S::kKeys; ++k) {
              const float scale = vs[k * R::kCarry + (R::kFp4 ? d / 32 : 0)];
              const float t_v = raw_elem<kFormat>(vr + k * R::kRowStride, d, scale, v_order);
              if constexpr (kPFold<kFormat, kSplitV, kVCodes>) {  // every element of a tiny key
                const bool on_cores = tiny_key<kFormat>(scale) && !PACTS_MUTANT(hip_tiny_keys_dropped);
                sum += pt[r * S::kKeys + k] * (on_cores ? t_v : 0.0f);  // selection
              } else {
                sum += pt[r * S::kKeys + k] * (is_tiny(t_v) ? t_v : 0.0f);  // selection
              }
            }
            add[x] = sum;
          }
#pragma unroll
          for (int m = 0; m < kAccTiles; ++m)
#pragma unroll
            for (int x = 0; x < 4; ++x)
              if (m == n) acc[m][x] += add[x];
        }
        PACTS_WARP_SYNC();  // the P tile is read before a later tile writes it
      }
    }
  }
  gpu::cp_async_wait<0>();
  // Every warp is done with the stages: they become the warps' final states.
  if (!PACTS_MUTANT(hip_final_barrier_dropped)) __syncthreads();

  typename Smem::Final& fin = sm.u.fin;
  if (kRing && warp == S::kWarps) {  // the producer holds no state
  } else if constexpr (kNarrow) {  // O^T: row 2 q4 + x % 2 (rows 0-7 only); N-tile 2 m + x / 2,
                                   // column g: dim 16 m + g + 8 (x / 2), or split_v_dim's
#pragma unroll
    for (int m = 0; m < kAccTiles; ++m)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        fin.acc[warp][(2 * q4 + x % 2) * D +
                      (kSplitV ? split_v_dim<D>(2 * m + x / 2, g) : 16 * m + g + 8 * (x / 2))] = acc[m][x];
  } else {
#pragma unroll
    for (int n = 0; n < S::kDTiles; ++n)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        fin.acc[warp][(g + 8 * (x / 2)) * D +
                      (kSplitV ? split_v_dim<D>(n, 2 * q4 + x % 2) : n * 8 + 2 * q4 + x % 2)] = acc[n][x];
  }
  // A row's state is the same in every lane that holds the row: one lane writes it.
  if ((kNarrow ? g == 0 : q4 == 0) && (!kRing || warp < S::kWarps)) {
    for (int h = 0; h < 2; ++h) {
      fin.m[warp][lrow[h]] = state[h].m;
      fin.l[warp][lrow[h]] = state[h].l;
    }
  }
  __syncthreads();
  double v_factor = 1.0;  // the deferred per-tensor V scale (split kernels, narrow formats)
  if constexpr (kSplitV)
    if (kFormat != PACTS_FORMAT_BF16 && p.v.scale_mode == PACTS_SCALE_PER_TENSOR &&
        !PACTS_MUTANT(hip_v_tensor_scale_dropped))
      v_factor = p.v.tensor_scale;
  if constexpr (kPvF16<kFormat, kSplitV, kVCodes>) v_factor *= kPvF16Down;  // exact: P's 2^15
  merge_warps_and_store<D, S::kWarps, S::kThreads>(p, fin, b, kv_head, z, r0, rows, nonempty, direct, t,
                                                   v_factor);
  // The sequence was valid (an invalid one returned above): its length is read again rather than
  // kept live through the key loop.
  if constexpr (S::kFusedMerge)
    if (!direct)
      merge_if_last<D, S::kThreads>(p, sm.u.merge, SeqCheck{0u, p.context_lens[b], KeyRange{0, 0}}, b,
                                    kv_head, r0);
}

}  // namespace pacts::kernels::hip::detail
