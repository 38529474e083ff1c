// The HIP decode kernels: the algorithm of pacts/decode.h (mirroring kernels/host/kernel.h) with
// the math of kernels/common/. Internal to kernels/hip/.
//
//   split_kv_kernel  one block per work item (sequence, KV head, partition, row tile): the item's
//                    query rows against the partition's keys, a tile of kTile keys at a time; the
//                    output directly (one partition) or a partial state in the workspace.
//                    Templated on D and the KV format (the only compile-time choices).
//   merge_kernel     one block per (sequence, KV head, row tile) of a split plan: the partials of
//                    each row, in partition order, in binary64, into the output and the LSE.
//
// Block-wide structure of a tile (256 threads): (1) K and V rows of the tile's OWNED keys are
// loaded with 16-byte loads, decoded and scaled once into fp32 shared memory (slots outside the
// item's keys are zeroed by assignment); (2) thread per (key, rows): the logits, fixed-order fp32
// dot products; (3) warp per row: soft-cap, tile max, the common::SoftmaxState step, P in fp32;
// (4) thread per (4 dims, rows): the tile's P.V over the row's visible keys only, into register
// accumulators. CUDA cores only: the AMD path until an MFMA kernel exists; NVIDIA runs the
// matrix-unit kernel of src/kernel_mma.h, which shares this file's helpers and merge_kernel.
//
// Poison-proof by construction (spec/contract.md §1, §5): block-table entries, K/V rows and scales
// are read for owned keys only (U_b cut to the partition); a row's P.V runs over its own visible
// range, so a masked key is never multiplied by a zero weight; Q and sinks are read for non-empty
// rows only; the merge reads every item's (max, sum) partials, which every tile block writes for
// each of its rows (an empty one as (-inf, 0)), and an accumulator partial only where the merge
// weights use it.
#pragma once

// The platform first: kernels/common's PACTS_HD needs the vendor's __host__ __device__.
#include "platform/gpu.h"

#include "common/dequant.h"
#include "common/mask.h"
#include "common/round.h"
#include "common/softmax.h"
#include "src/params.h"

#include <type_traits>

namespace pacts::kernels::hip::detail {

using common::KeyRange;

inline constexpr int kThreads = 256;
inline constexpr int kMaxRows = 16;  // query rows per work item (the MFMA / mma row tile)

// Compile-time shape of the tile kernel for head dim D. Work mappings (all threads busy):
//   load    16-byte loads: thread -> (slot, chunk of 8 codes), decoded and scaled once to fp32
//   logits  thread -> key j = t % kTile and rows t / kTile + kLogitRowGroups * m
//   P.V     thread -> 4 dims (quad t % kQuads) and rows t / kQuads + kPvRowGroups * m
template <int D>
struct Shape {
  static constexpr int kTile = D == 256 ? 16 : 32;   // keys per tile (<= the warp size)
  static constexpr int kVec = 8;                     // elements per load (fetch8)
  static constexpr int kStride = D + 4;              // fp32 smem row, padded: 16 B reads of
                                                     // consecutive rows hit distinct banks
  static constexpr int kLoads = kTile * D / kVec / kThreads;
  static constexpr int kLogitRowGroups = kThreads / kTile;
  static constexpr int kLogitRows = (kMaxRows + kLogitRowGroups - 1) / kLogitRowGroups;
  static constexpr int kQuads = D / 4;
  static constexpr int kPvRowGroups = kThreads / kQuads;
  static constexpr int kPvRows = kMaxRows / kPvRowGroups;
  static_assert(kLoads >= 1 && kTile * D / kVec % kThreads == 0);
  static_assert(kPvRows >= 1 && kMaxRows % kPvRowGroups == 0);
};

template <int D>
struct Smem {
  alignas(16) float k[Shape<D>::kTile * Shape<D>::kStride];  // scaled K elements (fp32)
  alignas(16) float v[Shape<D>::kTile * Shape<D>::kStride];  // scaled V elements (fp32)
  alignas(16) float q[kMaxRows * D];                         // q~
  float s[kMaxRows][Shape<D>::kTile];   // logits, then P
  common::SoftmaxState state[kMaxRows];
  KeyRange visible[kMaxRows];
  int32_t ja[kMaxRows], jb[kMaxRows];   // the row's keys in the current tile, slots
  float alpha[kMaxRows];
  double factor[kMaxRows];
  KeyRange span;
};

// One KV code of a byte-or-halfword format (not e2m1, whose element needs its nibble and block
// scale: mx8 below). Exact (common/dequant.h: the decoders of the decode loops).
template <pacts_format kFormat>
__device__ inline float decode_kv(uint32_t code) {
  if constexpr (kFormat == PACTS_FORMAT_BF16) return common::bf16_to_float(static_cast<uint16_t>(code));
  if constexpr (kFormat == PACTS_FORMAT_FP16) return common::fp16_to_float_fast(static_cast<uint16_t>(code));
  if constexpr (kFormat == PACTS_FORMAT_E4M3FN) return common::e4m3fn_to_float_fast(static_cast<uint8_t>(code));
  if constexpr (kFormat == PACTS_FORMAT_E4M3FNUZ) return common::e4m3fnuz_to_float_fast(static_cast<uint8_t>(code));
  if constexpr (kFormat == PACTS_FORMAT_E5M2) return common::e5m2_to_float_fast(static_cast<uint8_t>(code));
  return common::e5m2fnuz_to_float_fast(static_cast<uint8_t>(code));
}

// Two codes as decode_kv each, into x0 and x1; NVIDIA converts e4m3fn and e5m2 pairs with its
// exact fp8 instructions (platform/matrix_nvidia.h). Tests: common_gpu_test.
template <pacts_format kFormat>
__device__ inline void decode_kv2(uint32_t c0, uint32_t c1, float& x0, float& x1) {
#if PACTS_HIP_MATRIX_UNIT
  if constexpr (kFormat == PACTS_FORMAT_E4M3FN || kFormat == PACTS_FORMAT_E5M2) {
    if (kFormat == PACTS_FORMAT_E5M2 || !PACTS_MUTANT(e4m3fn_read_as_fnuz)) {
      const float2 x = kFormat == PACTS_FORMAT_E5M2 ? gpu::e5m2x2_to_float2(c0 | c1 << 8)
                                                    : gpu::e4m3x2_to_float2(c0 | c1 << 8);
      x0 = x.x;
      x1 = x.y;
      return;
    }
  }
#endif
  x0 = decode_kv<kFormat>(c0);
  x1 = decode_kv<kFormat>(c1);
}

template <pacts_format kFormat>
inline constexpr bool kIs16 = kFormat == PACTS_FORMAT_BF16 || kFormat == PACTS_FORMAT_FP16;

// A decoded Q element: bf16, fp16 (2 bytes) or one of the fp8 formats (1 byte), at element
// offset `at` of the query.
__device__ inline float load_q(const Params& p, int64_t at) {
  if (p.q_format == PACTS_FORMAT_BF16 || p.q_format == PACTS_FORMAT_FP16) {
    const uint16_t code = reinterpret_cast<const uint16_t*>(p.q)[at];
    return p.q_format == PACTS_FORMAT_FP16 ? common::fp16_to_float(code) : common::bf16_to_float(code);
  }
  return common::decode_code(p.q_format, p.q[at]);
}

// The work item of a tile-kernel block (blockIdx.x): sequence b, KV head, partition z and its
// row tile, rows [r0, r0 + rows) of the G * L (decode_hip.cpp numbers the items this way).
struct WorkItem {
  int64_t b, kv_head, z;
  int32_t r0, rows;
};

__device__ inline WorkItem work_item(const Params& p) {
  int64_t item = blockIdx.x;
  const int32_t row_tile = static_cast<int32_t>(item % p.row_tiles);
  item /= p.row_tiles;
  WorkItem w;
  w.z = item % p.partitions;
  item /= p.partitions;
  w.kv_head = item % p.num_kv_heads;
  w.b = item / p.num_kv_heads;
  w.r0 = row_tile * p.rows_per_item;
  w.rows = min(p.rows_per_item, p.rows - w.r0);
  return w;
}

// The item's sequence: n_b, P1 and P2 over the owned columns only (kernels/host/call.h
// check_sequence), or over the owned columns of the keys in `within` only: a split plan's tile
// block checks the columns its partition reads (it dereferences no other), and the merge block of
// the row tile checks the whole sequence and writes its NaN rows (spec/contract.md §4), so a long
// context's table is read once per merge block, not once per partition. Every thread of the
// block returns the same answer.
struct SeqCheck {
  uint32_t error;
  int64_t context;
  KeyRange keys;
};

__device__ inline SeqCheck check_sequence(const Params& p, int64_t b,
                                          KeyRange within = KeyRange{0, INT64_MAX}) {
  SeqCheck s{0, 0, {0, 0}};
  s.context = p.context_lens[b];
  if (!common::context_len_ok(s.context, p.max_pages_per_seq, p.page_size)) {
    s.error = PACTS_DEVERR_CONTEXT_LEN;
    return s;
  }
  s.keys = common::sequence_keys(s.context, p.q_len, p.window);
  const KeyRange cols = PACTS_MUTANT(hip_padding_checked_as_page_ids)
                            ? KeyRange{0, p.max_pages_per_seq}
                            : common::owned_columns(common::intersect(s.keys, within), p.page_size);
  int bad = 0;
#pragma unroll 4
  for (int64_t c = cols.begin + threadIdx.x; c < cols.end; c += blockDim.x)
    bad |= !common::page_id_ok(p.block_table[b * p.block_table_stride + c], p.num_pages);
  if (__syncthreads_or(bad)) s.error = PACTS_DEVERR_PAGE_ID;
  return s;
}

// The keys a tile block's check covers (check_sequence): its partition's in a split plan whose
// merge kernel checks the sequence, all of them otherwise.
__device__ inline KeyRange checked_keys(const Params& p, int64_t z, bool merge_checks) {
  return p.partitions > 1 && merge_checks ? common::partition_keys(z, p.partition_size)
                                          : KeyRange{0, INT64_MAX};
}

// A timing experiment (bench/ variant prefetch; measured, not taken: docs/kernel-design.md).
// The first reads of a tile block depend on one another (the context length, then the
// block-table entries it makes owned, then the query rows, then the K and V rows those entries
// name), and at batch 1 each would wait on DRAM in turn. This asks L2 for the first three at
// once before any is read: the context length, the block-table columns of the item's partition
// (all M columns when unsplit, at most 32 lines) and the item's query rows. Only addresses
// inside their views (columns below M, rows of the item); nothing is used as an address.
__device__ inline void prefetch_prologue(const Params& p, int64_t b, int64_t kv_head, int64_t z,
                                         int32_t r0, int32_t rows, bool direct) {
  const int t = threadIdx.x, n = blockDim.x;
  if (t == 0) gpu::prefetch_l2(p.context_lens + b);
  int64_t c0 = 0, c1 = p.max_pages_per_seq;  // columns [c0, c1)
  if (!direct) {
    c0 = min(c1, z * p.partition_size / p.page_size);
    c1 = min(c1, ((z + 1) * p.partition_size + p.page_size - 1) / p.page_size);
  }
  constexpr int kPerLine = 32;  // int32 entries per 128-byte line
  const int32_t* const row = p.block_table + b * p.block_table_stride;
  for (int64_t c = c0 + int64_t{t} * kPerLine; c < c1 && c < c0 + int64_t{n} * kPerLine;
       c += int64_t{n} * kPerLine)
    gpu::prefetch_l2(row + c);
  const int esz = p.q_format == PACTS_FORMAT_BF16 || p.q_format == PACTS_FORMAT_FP16 ? 2 : 1;
  const int lines = (p.head_dim * esz + 127) / 128;
  for (int x = t; x < rows * lines; x += n) {
    const int r = x / lines;
    const int64_t i = (r0 + r) / p.group, h = kv_head * p.group + (r0 + r) % p.group;
    const int64_t at = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head;
    gpu::prefetch_l2(p.q + at * esz + int64_t{x % lines} * 128);
  }
}

__device__ inline void store_out(const Params& p, int64_t element, uint32_t code) {
  if (PACTS_MUTANT(hip_out_past_end) && element == 0)  // 2 bytes just past the output view
    p.out[p.out_bytes] = p.out[p.out_bytes + 1] = static_cast<uint8_t>(code);
  if (p.out_format == PACTS_FORMAT_FP32) {
    reinterpret_cast<uint32_t*>(p.out)[element] = code;
  } else {
    reinterpret_cast<uint16_t*>(p.out)[element] = static_cast<uint16_t>(code);
  }
}

__device__ inline int64_t out_at(const Params& p, int64_t b, int64_t i, int64_t h) {
  if (PACTS_MUTANT(hip_out_token_stride_packed))
    return b * p.out_layout.s_batch + (i * p.num_kv_heads * p.group + h) * p.out_layout.s_head;
  return b * p.out_layout.s_batch + i * p.out_layout.s_tok + h * p.out_layout.s_head;
}

__device__ inline void store_lse(const Params& p, int64_t b, int64_t i, int64_t h, uint32_t bits) {
  if (!p.want_lse) return;
  const int64_t at = b * p.lse_layout.s_batch + i * p.lse_layout.s_tok + h * p.lse_layout.s_head;
  reinterpret_cast<uint32_t*>(p.lse)[at] = bits;
}

__device__ inline void report(const Params& p, uint32_t error) {
  if (p.error_word != nullptr && error != 0) atomicOr(p.error_word, error);
}

// spec/contract.md §4 (invalid sequence: NaN rows) and §10 (empty row: +0, LSE -inf), for the
// rows [r0, r0 + rows) of the item, cooperatively; bit r of `nonempty`: row r has keys (those rows
// are left alone unless `invalid`).
template <int D>
__device__ void store_special_rows(const Params& p, int64_t b, int64_t kv_head, int32_t r0,
                                   int32_t rows, bool invalid, uint32_t nonempty) {
  if (!invalid && PACTS_MUTANT(hip_empty_rows_unwritten)) return;
  const uint32_t code = invalid ? common::output_nan(p.out_format) : 0u;
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    if (!invalid && ((nonempty >> r) & 1u)) continue;
    const int64_t i = (r0 + r) / p.group, h = kv_head * p.group + (r0 + r) % p.group;
    store_out(p, out_at(p, b, i, h) + d, code);
    if (d == 0) store_lse(p, b, i, h, invalid ? 0x7FC00000u : 0xFF800000u);
  }
}

// The fp32 scale of an owned key's elements (spec/operator.md §7): 1, the tensor scale, or the
// token's own (MX_BLOCK scales are per block of 32: fetch8).
__device__ inline float key_scale(const PoolParams& pool, int64_t kv_head, int64_t page,
                                  int64_t slot) {
  if (pool.scale_mode == PACTS_SCALE_PER_TENSOR) return pool.tensor_scale;
  if (pool.scale_mode != PACTS_SCALE_PER_TOKEN) return 1.0f;
  return pool.token_scales[page * pool.sc_page + kv_head * pool.sc_head + slot * pool.sc_tok];
}

// Units (elements, or bytes for e2m1) of 8 consecutive elements of a row.
template <pacts_format kFormat>
inline constexpr int kUnits8 = kFormat == PACTS_FORMAT_E2M1 ? 4 : 8;
template <pacts_format kFormat>
inline constexpr int kUnitBytes = kIs16<kFormat> ? 2 : 1;

// Offset (units) of unit u of a row, through the chunk (spec/operator.md §3.2-§3.3). The chunk
// divides D or D / 2, powers of two (spec::validate), so a shift and a mask: no 64-bit division
// on the load path (it cost the bf16 kernel 1.7x on the H200).
__device__ inline int64_t chunk_offset(const PoolParams& pool, int64_t u) {
  if (PACTS_MUTANT(hip_chunks_ignored)) return u;
  return (u >> pool.chunk_shift) * pool.s_chunk + (u & (pool.chunk - 1));
}

// The raw bytes of elements [col, col + 8) of an owned key's row (col % 8 == 0) into `raw`
// (16, 8 or 4 bytes by format): one vector load where the chunk keeps them together and the
// address is aligned, unit loads otherwise (x-packed K with a small x, dim-major V, odd strides:
// spec/refusals.md §4, alignment 1). `row` is the row's offset in units. Only an owned key's
// row reaches here (spec/contract.md §5).
template <pacts_format kFormat>
__device__ inline uint4 load_raw8(const PoolParams& pool, int64_t row, int col) {
  constexpr int kUnits = kUnits8<kFormat>, kBytes = kUnits * kUnitBytes<kFormat>;
  const int64_t u0 = kFormat == PACTS_FORMAT_E2M1 ? col / 2 : col;
  uint4 r = make_uint4(0, 0, 0, 0);
  if (pool.chunk % kUnits == 0) {
    const uint8_t* src = pool.data + (row + chunk_offset(pool, u0)) * kUnitBytes<kFormat>;
    if ((reinterpret_cast<uintptr_t>(src) & (kBytes - 1)) == 0) {
      if constexpr (kBytes == 16) r = *reinterpret_cast<const uint4*>(src);
      if constexpr (kBytes == 8) {
        const uint64_t w = *reinterpret_cast<const uint64_t*>(src);
        r.x = static_cast<uint32_t>(w);
        r.y = static_cast<uint32_t>(w >> 32);
      }
      if constexpr (kBytes == 4) r.x = *reinterpret_cast<const uint32_t*>(src);
      return r;
    }
    uint8_t b[16];
#pragma unroll
    for (int x = 0; x < kBytes; ++x) b[x] = src[x];
    memcpy(&r, b, kBytes);
    return r;
  }
  uint8_t b[16];
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    const uint8_t* src = pool.data + (row + chunk_offset(pool, u0 + u)) * kUnitBytes<kFormat>;
#pragma unroll
    for (int x = 0; x < kUnitBytes<kFormat>; ++x) b[u * kUnitBytes<kFormat> + x] = src[x];
  }
  memcpy(&r, b, kBytes);
  return r;
}

__device__ inline int64_t row_offset(const PoolParams& pool, int64_t kv_head, int64_t page,
                                     int64_t slot) {
  return page * pool.s_page + kv_head * pool.s_head + slot * pool.s_tok;
}

// The loads of 8 elements of an owned key, not yet decoded: the raw bytes and the key's scale
// (fp32) or the e8m0 byte of their block. Split from the decode so that a caller can issue the
// loads of several groups before it waits for any (the loads are what a tile waits for).
struct Fetched8 {
  uint4 raw;
  float scale;
  uint8_t mx;
};

// The loads of elements [col, col + 8) of an owned key (page, slot); `row`: the key's row offset
// in units (row_offset). The scale of a key (per-token fp32 or the e8m0 byte of the block) is read
// only here, for an owned key: unowned scales are never loaded, like unowned data
// (spec/contract.md §5).
template <pacts_format kFormat>
__device__ inline Fetched8 fetch8(const Params& p, const PoolParams& pool, int64_t kv_head,
                                  int64_t page, int64_t slot, int64_t row, int col) {
  Fetched8 f{load_raw8<kFormat>(pool, row, col), 1.0f, 127};
  if constexpr (kFormat == PACTS_FORMAT_E2M1) {
    int64_t block = col / 32;
    if (&pool == &p.k && PACTS_MUTANT(hip_mx_k_scales_rolled)) block = (block + 1) % (p.head_dim / 32);
    f.mx = pool.mx_scales[page * pool.sc_page + kv_head * pool.sc_head + slot * pool.sc_tok +
                          block * pool.sc_block];
  } else {
    f.scale = key_scale(pool, kv_head, page, slot);
  }
  return f;
}

// The 8 scaled elements of a fetch8, decoded and scaled once in fp32 (common/dequant.h: the scale
// before any product with Q, spec/contract.md §2.1 order 2; an MXFP4 element is e2m1 x e8m0,
// exact).
template <pacts_format kFormat>
__device__ inline void decode8(const PoolParams& pool, const Fetched8& f, int col, float (&x)[8]) {
  if constexpr (kFormat == PACTS_FORMAT_E2M1) {
    uint8_t b[4];
    memcpy(b, &f.raw, sizeof b);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      x[i] = common::mx_value(common::e2m1_nibble(b[i / 2], col + i, pool.nibble_order), f.mx);
  } else {
    using Code = std::conditional_t<kIs16<kFormat>, uint16_t, uint8_t>;
    Code e[8];
    memcpy(e, &f.raw, sizeof e);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = common::scaled(decode_kv<kFormat>(e[i]), f.scale);
  }
}

// Shared by the matrix tile kernels (kernel_mma.h on NVIDIA, kernel_mfma.h on AMD).

// A non-zero V element below 2^-102: its bf16 parts could fall below bf16's normal range, so it
// takes the CUDA-core / vector-ALU path instead (stage_tile, split V only).
__device__ inline bool is_tiny(float v) { return v != 0.0f && __builtin_fabsf(v) < 0x1p-102f; }

// x - r for r = x rounded: exact in fp32. An infinite or NaN r (an owned Inf or NaN, outside the
// contract) leaves 0, so the value stays in the first part alone (no inf - inf = NaN).
__device__ inline float residual(float x, float r) { return r - r == 0.0f ? x - r : 0.0f; }

// The block-table entry and the in-page slot of key t0 + lane for lanes < kKeys, packed as
// (page << 32 | slot), or -1: a key outside `owned` (its entry is never read) or a lane >= kKeys.
// One load per lane and tile; stage_tile hands the entries to the lanes by shuffles.
template <int kKeys>
__device__ inline int64_t slot_entry(const Params& p, int64_t b, int64_t t0, KeyRange owned,
                                     int lane) {
  const int64_t j = t0 + lane;
#if defined(PACTS_UNSAFE_UNMASKED)
  owned.begin = t0 - t0 % kKeys;  // the whole tile of any key in the span: no ownership test
  owned.end = owned.end + kKeys - 1 - (owned.end - 1) % kKeys;
  // ... but within the block-table row: at page size 8 a rounded-up tile can pass column M - 1.
  owned.end = min(owned.end, int64_t{p.max_pages_per_seq} * p.page_size);
#endif
  if (lane >= kKeys || !owned.contains(j)) return -1;
  // 32-bit division: validation keeps max_pages_per_seq x page_size below 2^31, and j exceeds it
  // by less than a tile. A power-of-two page size takes a shift (the same quotient).
  const uint32_t ju = static_cast<uint32_t>(j), ps = static_cast<uint32_t>(p.page_size);
  const uint32_t column = p.page_shift >= 0 ? ju >> p.page_shift : ju / ps;
  int64_t page = p.block_table[b * p.block_table_stride + column];
  if (PACTS_MUTANT(hip_page_id_16bit)) page = static_cast<uint16_t>(page);
  return page << 32 | (ju - column * ps);
}

// Offsets of an owned slot's K and V rows (units), with the 32-bit mutant's wrap.
template <pacts_format kFormat>
__device__ inline void kv_rows(const Params& p, int64_t kv_head, int64_t page, int64_t in_page,
                               int col, int64_t& k_row, int64_t& v_row) {
  k_row = row_offset(p.k, kv_head, page, in_page);
  v_row = row_offset(p.v, kv_head, page, in_page);
  if (PACTS_MUTANT(hip_kv_offset_32bit)) {  // `int` offsets: wrap past 2^31 elements
    const int64_t u = kFormat == PACTS_FORMAT_E2M1 ? col / 2 : col;
    k_row = static_cast<int32_t>(k_row + chunk_offset(p.k, u)) - chunk_offset(p.k, u);
    v_row = static_cast<int32_t>(v_row + chunk_offset(p.v, u)) - chunk_offset(p.v, u);
  }
}

// The end of a matrix tile kernel (kernel_mma.h, kernel_mfma.h), after a barrier behind the
// warps' (waves') stores of their states and accumulators into `fin`: thread t < kMaxRows merges
// row t's states all at once in binary64 (common::merge_top, merge_uses, merge_weight: the
// partition merge's math, merge_partials), its warps' weights independent of one another, and
// the sums in warp order, so the result depends on the plan only (PACTS-META-2); then the block
// writes the output rows (an unsplit plan, with the LSE and the empty rows) or the partials to
// the workspace. An unsplit plan rounds l and the accumulator to fp32 as a partial stores them
// before it scales: its output is then bitwise the merge of that one partial (merge_partials:
// weight e^0 = 1, empty partials selected away), which the batch-invariant plan relies on (a
// sequence unsplit alone and split with empty trailing partitions in a batch, spec/operator.md
// §11.1).
// `v_factor`: a V scale the kernel deferred (kernel_mma.h: a per-tensor scale of a narrow V
// format), applied here once in binary64 to the merged accumulator; 1 otherwise.
template <int D, int kWarps, int kThreads, class Final>
__device__ inline void merge_warps_and_store(const Params& p, Final& fin, int64_t b,
                                             int64_t kv_head, int64_t z, int32_t r0, int32_t rows,
                                             uint32_t nonempty, bool direct, int t,
                                             double v_factor = 1.0) {
  if (t < kMaxRows && ((nonempty >> t) & 1u)) {
    float top = -INFINITY;
    for (int w = 0; w < kWarps; ++w)
      if (common::merge_uses(fin.m[w][t], fin.l[w][t])) top = common::merge_top(top, fin.m[w][t]);
    common::MergeState ms{top, 0.0};
    for (int w = 0; w < kWarps; ++w) {
      const bool use = common::merge_uses(fin.m[w][t], fin.l[w][t]);
      const double weight = use ? common::merge_weight(fin.m[w][t], top) : 0.0;
      fin.other[w][t] = weight;
      fin.use_other[w][t] = use;
      if (use) ms.l += weight * static_cast<double>(fin.l[w][t]);
    }
    const int64_t i = (r0 + t) / p.group, h = kv_head * p.group + (r0 + t) % p.group;
    if (direct) {
      const int64_t sink_head = PACTS_MUTANT(hip_sink_of_kv_head) ? kv_head : h;
      const float sink = p.has_sinks ? p.sinks[sink_head] : 0.0f;
      ms.l = static_cast<float>(ms.l);  // as a partial stores it (ms.m is an fp32 value already)
      fin.factor[t] = common::output_factor(ms.m, ms.l, p.has_sinks, sink);
      if (PACTS_MUTANT(hip_lse_first_warp)) ms = {fin.m[0][t], fin.l[0][t]};
      store_lse(p, b, i, h, common::round_to_fp32(common::log_sum_exp(ms.m, ms.l)));
    } else {
      const int64_t e = ((b * p.num_kv_heads + kv_head) * p.partitions + z) * p.rows + r0 + t;
      p.ws_m[e] = static_cast<float>(ms.m);  // the largest of the warps' fp32 maxima: exact
      p.ws_l[e] = static_cast<float>(ms.l);
    }
  } else if (t < rows && !direct) {
    const int64_t e = ((b * p.num_kv_heads + kv_head) * p.partitions + z) * p.rows + r0 + t;
    p.ws_m[e] = -INFINITY;
    p.ws_l[e] = 0.0f;
  }
  __syncthreads();
  for (int idx = t; idx < rows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    if (!((nonempty >> r) & 1u)) continue;
    double a = 0.0;
    for (int w = 0; w < kWarps; ++w)
      if (fin.use_other[w][r]) a += fin.other[w][r] * static_cast<double>(fin.acc[w][r * D + d]);
    a *= v_factor;
    if (direct) {
      const int64_t i = (r0 + r) / p.group, h = kv_head * p.group + (r0 + r) % p.group;
      const double a32 = static_cast<float>(a);  // as a partial stores it
      store_out(p, out_at(p, b, i, h) + d, common::round_to_output(p.out_format, a32 * fin.factor[r]));
    } else {
      const int64_t e = ((b * p.num_kv_heads + kv_head) * p.partitions + z) * p.rows + r0 + r;
      p.ws_acc[e * D + d] = static_cast<float>(a);  // element stores: 4-byte aligned workspace
    }
  }
  if (direct) store_special_rows<D>(p, b, kv_head, r0, rows, false, nonempty);
}

// Copies the tile's keys [t0, t0 + kTile) ∩ keys of one pool into shared memory, each element
// decoded and scaled once in fp32 (fetch8, decode8). Slots outside `keys` are zero by assignment: no
// unowned byte is loaded.
template <int D, pacts_format kFormat>
__device__ void load_pool_tile(const Params& p, const PoolParams& pool, int64_t b,
                               int64_t kv_head, int64_t t0, KeyRange keys, float* dst) {
  using S = Shape<D>;
  constexpr int kChunks = D / S::kVec;
  Fetched8 f[S::kLoads];
  bool owned[S::kLoads];
#pragma unroll
  for (int n = 0; n < S::kLoads; ++n) {  // every load of the tile in flight before any is used
    const int idx = threadIdx.x + n * kThreads;
    const int slot = idx / kChunks, chunk = idx % kChunks;
    const int64_t j = t0 + slot;
    owned[n] = keys.contains(j);
    if (!owned[n]) continue;  // unowned: never an address
    const int64_t page = p.block_table[b * p.block_table_stride + j / p.page_size];
    const int64_t in_page = j % p.page_size;
    f[n] = fetch8<kFormat>(p, pool, kv_head, page, in_page, row_offset(pool, kv_head, page, in_page),
                           chunk * S::kVec);
  }
#pragma unroll
  for (int n = 0; n < S::kLoads; ++n) {
    const int idx = threadIdx.x + n * kThreads;
    const int slot = idx / kChunks, chunk = idx % kChunks;
    float x[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (owned[n]) decode8<kFormat>(pool, f[n], chunk * S::kVec, x);
    float* row = dst + slot * S::kStride + chunk * S::kVec;
    *reinterpret_cast<float4*>(row) = make_float4(x[0], x[1], x[2], x[3]);
    *reinterpret_cast<float4*>(row + 4) = make_float4(x[4], x[5], x[6], x[7]);
  }
}

template <int D, pacts_format kFormat>
__global__ void __launch_bounds__(kThreads) split_kv_kernel(const Params p) {
  using S = Shape<D>;
  extern __shared__ float4 smem_raw[];
  Smem<D>& sm = *reinterpret_cast<Smem<D>*>(smem_raw);
  const WorkItem wi = work_item(p);
  const int64_t b = wi.b, kv_head = wi.kv_head, z = wi.z;
  const int32_t r0 = wi.r0, rows = wi.rows;
  const bool direct = p.partitions == 1;
  const int t = threadIdx.x;

  const SeqCheck seq = check_sequence(p, b, checked_keys(p, z, true));
  if (seq.error != 0) {
    if (!direct) return;  // the merge block of this row tile writes the NaN rows and reports
    store_special_rows<D>(p, b, kv_head, r0, rows, true, 0u);
    if (t == 0) report(p, seq.error);
    return;
  }
  const KeyRange part =
      direct ? seq.keys
             : common::intersect(common::partition_keys(z, p.partition_size), seq.keys);

  if (t < kMaxRows) {
    KeyRange vis{0, 0};
    if (t < rows)
      vis = common::intersect(
          common::row_keys(seq.context, p.q_len, p.window, (r0 + t) / p.group), part);
    sm.visible[t] = vis;
    sm.state[t] = common::SoftmaxState{};
  }
  __syncthreads();
  if (t == 0) {
    KeyRange span{INT64_MAX, INT64_MIN};
    for (int r = 0; r < rows; ++r) {
      if (sm.visible[r].empty()) continue;
      span.begin = min(span.begin, sm.visible[r].begin);
      span.end = max(span.end, sm.visible[r].end);
    }
    sm.span = span;
  }
  // q~ of the non-empty rows (common::fold_query); zeros elsewhere (never selected).
  for (int idx = t; idx < kMaxRows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    float x = 0.0f;
    if (r < rows && !sm.visible[r].empty()) {
      const int64_t i = (r0 + r) / p.group, h = kv_head * p.group + (r0 + r) % p.group;
      const int64_t at = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head + d;
      x = common::fold_query(load_q(p, at), p.q_scale, p.softmax_scale);
    }
    sm.q[idx] = x;
  }
  __syncthreads();
  const KeyRange span = sm.span;

  const int quad = t % S::kQuads;
  float acc[S::kPvRows][4];
#pragma unroll
  for (int m = 0; m < S::kPvRows; ++m)
#pragma unroll
    for (int x = 0; x < 4; ++x) acc[m][x] = 0.0f;

  const int warp = t / gpu::kWarpSize, lane = t % gpu::kWarpSize;
  constexpr int kWarps = kThreads / gpu::kWarpSize;

  for (int64_t t0 = span.begin - span.begin % S::kTile; t0 < span.end; t0 += S::kTile) {
    const KeyRange tile = common::intersect({t0, t0 + S::kTile}, span);
    // (1) K and V of the owned keys of the tile, scaled fp32.
    load_pool_tile<D, kFormat>(p, p.k, b, kv_head, t0, tile, sm.k);
    load_pool_tile<D, kFormat>(p, p.v, b, kv_head, t0, tile, sm.v);
    __syncthreads();
    // (2) Logits: per (row, key) a sequential fp32 dot product over d (fixed order).
    {
      const int j = t % S::kTile;
      const float* krow = sm.k + j * S::kStride;
#pragma unroll
      for (int m = 0; m < S::kLogitRows; ++m) {
        const int r = t / S::kTile + S::kLogitRowGroups * m;
        if (r >= rows) break;
        const float* q = sm.q + r * D;
        float s = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; d += 4) {
          const float4 kv = *reinterpret_cast<const float4*>(krow + d);
          const float4 qv = *reinterpret_cast<const float4*>(q + d);
          s += qv.x * kv.x;
          s += qv.y * kv.y;
          s += qv.z * kv.z;
          s += qv.w * kv.w;
        }
        sm.s[r][j] = s;
      }
    }
    __syncthreads();
    // (3) Warp per row: soft-cap, max, the online-softmax step, P (fp32) over visible keys only.
    for (int r = warp; r < rows; r += kWarps) {
      const KeyRange keys = common::intersect(sm.visible[r], tile);
      if (keys.empty()) {
        if (lane == 0) sm.jb[r] = sm.ja[r] = 0;
        continue;
      }
      const int ja = static_cast<int>(keys.begin - t0), jb = static_cast<int>(keys.end - t0);
      const bool in = lane >= ja && lane < jb;
      float s = in ? sm.s[r][lane] : -INFINITY;
      if (in && p.softcap > 0.0f) s = common::soft_cap(s, p.softcap);
      float tile_max = in ? common::max_finite(-INFINITY, s) : -INFINITY;
#pragma unroll
      for (int o = gpu::kWarpSize / 2; o > 0; o /= 2)
        tile_max = common::max_finite(tile_max, PACTS_SHFL_XOR(tile_max, o));
      common::SoftmaxState st = sm.state[r];
      const common::TileStep step = st.begin_tile(tile_max);
      const float pj = in ? expf(s - step.shift) : 0.0f;
      // Butterfly sum: every lane ends with the same value, in a fixed order (deterministic).
      float sum = pj;
#pragma unroll
      for (int o = gpu::kWarpSize / 2; o > 0; o /= 2) sum += PACTS_SHFL_XOR(sum, o);
      if (in) sm.s[r][lane] = pj;
      PACTS_WARP_SYNC();  // every lane has read sm.state[r] before lane 0 replaces it
      if (lane == 0) {
        st.add(sum);
        sm.state[r] = st;
        sm.alpha[r] = step.alpha;
        sm.ja[r] = ja;
        sm.jb[r] = jb;
      }
    }
    __syncthreads();
    // (4) Per (row, 4 dims): the tile's P.V apart, then into the accumulator (blocked sum).
#pragma unroll
    for (int m = 0; m < S::kPvRows; ++m) {
      const int r = t / S::kQuads + S::kPvRowGroups * m;
      if (r >= rows) break;
      const int ja = sm.ja[r], jb = sm.jb[r];
      if (jb <= ja) continue;
      const float* vcol = sm.v + quad * 4;
      float pj = sm.s[r][ja];
      float4 vj = *reinterpret_cast<const float4*>(vcol + ja * S::kStride);
      float pv[4] = {pj * vj.x, pj * vj.y, pj * vj.z, pj * vj.w};
      for (int j = ja + 1; j < jb; ++j) {
        pj = sm.s[r][j];
        vj = *reinterpret_cast<const float4*>(vcol + j * S::kStride);
        pv[0] += pj * vj.x;
        pv[1] += pj * vj.y;
        pv[2] += pj * vj.z;
        pv[3] += pj * vj.w;
      }
      const float alpha = sm.alpha[r];
#pragma unroll
      for (int x = 0; x < 4; ++x) acc[m][x] = acc[m][x] * alpha + pv[x];
    }
    __syncthreads();
  }

  if (!direct) {
#pragma unroll
    for (int m = 0; m < S::kPvRows; ++m) {
      const int r = t / S::kQuads + S::kPvRowGroups * m;
      if (r >= rows) break;
      const int64_t e = ((b * p.num_kv_heads + kv_head) * p.partitions + z) * p.rows + r0 + r;
      const bool empty = sm.visible[r].empty();
      if (!empty)  // element stores: the workspace is only 4-byte aligned (pacts/decode.h)
        for (int x = 0; x < 4; ++x) p.ws_acc[e * D + quad * 4 + x] = acc[m][x];
      if (quad == 0) {
        p.ws_m[e] = empty ? -INFINITY : sm.state[r].m;
        p.ws_l[e] = empty ? 0.0f : sm.state[r].l;
      }
    }
    return;
  }

  // Direct: rows with keys from their final state, the others empty (spec/operator.md §10).
  if (t < rows && !sm.visible[t].empty()) {
    const int64_t i = (r0 + t) / p.group, h = kv_head * p.group + (r0 + t) % p.group;
    const float sink = p.has_sinks ? p.sinks[h] : 0.0f;
    const common::SoftmaxState st = sm.state[t];
    sm.factor[t] = common::output_factor(st.m, st.l, p.has_sinks, sink);
    store_lse(p, b, i, h, common::round_to_fp32(common::log_sum_exp(st.m, st.l)));
  }
  __syncthreads();
#pragma unroll
  for (int m = 0; m < S::kPvRows; ++m) {
    const int r = t / S::kQuads + S::kPvRowGroups * m;
    if (r >= rows) break;
    if (sm.visible[r].empty()) continue;
    const int64_t i = (r0 + r) / p.group, h = kv_head * p.group + (r0 + r) % p.group;
    const int64_t at = out_at(p, b, i, h) + quad * 4;
    for (int x = 0; x < 4; ++x)
      store_out(p, at + x,
                common::round_to_output(p.out_format, static_cast<double>(acc[m][x]) * sm.factor[r]));
  }
  uint32_t nonempty = 0;
  for (int r = 0; r < rows; ++r) nonempty |= sm.visible[r].empty() ? 0u : 1u << r;
  store_special_rows<D>(p, b, kv_head, r0, rows, false, nonempty);
}

// The merge's blocks per (sequence, KV head, row tile): one output element per thread.
template <int D>
__host__ __device__ constexpr int merge_slices(int rows_per_item) {
  return (rows_per_item * D + kThreads - 1) / kThreads;
}
// Partitions whose merge weights a merge block holds at once (in shared memory).
inline constexpr int kMergeChunk = 64;
// A merge kernel thread's first partitions whose accumulator partials it loads before the
// weights are known, together with the (m, l) partials: at batch 1 the merge is a chain of
// dependent round trips, and these loads leave it. Only the merge kernels of plans of at least
// kMergePrefetch partitions (merge_kernel's kEarly, chosen by the host): the 16 values held
// across the weights' binary64 calls take registers and stack, which cost up to 3 % on plans of
// 3 to 6 partitions, where the chain is short. Timing experiment only (bench/ variant
// merge_serial): never, every accumulator partial loaded after the weights.
#if defined(PACTS_EXPERIMENT_MERGE_SERIAL)
inline constexpr int kMergePrefetch = 0;
#else
inline constexpr int kMergePrefetch = 16;
#endif

// What a block merging partials keeps in shared memory (merge_partials): per row its partitions,
// origin and sum; per chunk of kMergeChunk partitions the rows' (m, l) partials and weights.
struct MergeScratch {
  double w[kMaxRows][kMergeChunk];  // the partial's weight; 0 where it is not used
  uint8_t use[kMaxRows][kMergeChunk];  // whether the row's partial merges (common::merge_uses)
  double l_sum[kMaxRows];           // sum of w_z l_z over the chunks so far
  double row_factor[kMaxRows];
  int64_t z_begin[kMaxRows], z_end[kMaxRows];  // the row's partitions (trivial types: __shared__)
  float top[kMaxRows];                         // the row's origin (common::merge_top)
  float part_m[kMaxRows][kMergeChunk], part_l[kMaxRows][kMergeChunk];
};

// Merges the partials of one (sequence, KV head, row tile) all at once (common::merge_top,
// merge_uses, merge_weight: spec/operator.md §9): the block's kBlockThreads threads take elements
// first + t + kBlockThreads * k (k < kElems) of the item's rows x D outputs; the block with
// first == 0 writes the LSE and reports the sequence's error. Each row's origin is the largest m
// of its non-empty partials (a warp per row, over the (m, l) partials read into shared memory in
// parallel), each (row, partition)'s weight is computed once, by one thread, and then every sum is
// taken in a fixed order: l by a warp per row (a lane's partitions, then a butterfly), each
// output element by its thread in partition order, kBatch partials' loads in flight at a time. No
// step waits on another row's or partition's exponential: at batch 1 the merge is a few dependent
// round trips, not a chain per partition. For a fixed plan the bits do not depend
// on which block or thread runs it (PACTS-META-2). kCrossBlock: the partials were written by
// other blocks of this launch (gpu::load_cross_block).
template <int D, int kBlockThreads, int kElems, int kBatch, bool kCrossBlock, int kPrefetch = 0>
__device__ void merge_partials(const Params& p, MergeScratch& sh, const SeqCheck& seq, int64_t b,
                               int64_t kv_head, int32_t row_tile, int first) {
  static_assert(kBlockThreads % gpu::kWarpSize == 0 && kMergeChunk % gpu::kWarpSize == 0);
  constexpr int kBlockWarps = kBlockThreads / gpu::kWarpSize;
  const int32_t r0 = row_tile * p.rows_per_item;
  const int32_t rows = min(p.rows_per_item, p.rows - r0);
  const int t = threadIdx.x, warp = t / gpu::kWarpSize, lane = t % gpu::kWarpSize;
  const bool lead = first == 0;
  int er[kElems], ed[kElems];
  bool mine[kElems];
#pragma unroll
  for (int k = 0; k < kElems; ++k) {
    const int idx = first + t + kBlockThreads * k;
    er[k] = idx / D;
    ed[k] = idx % D;
    mine[k] = er[k] < rows;
  }
  const auto at_of = [&](int k) {
    const int64_t i = (r0 + er[k]) / p.group, h = kv_head * p.group + (r0 + er[k]) % p.group;
    return out_at(p, b, i, h) + ed[k];
  };
  const auto lse_of = [&](int k, uint32_t bits) {
    const int64_t i = (r0 + er[k]) / p.group, h = kv_head * p.group + (r0 + er[k]) % p.group;
    store_lse(p, b, i, h, bits);
  };
  if (seq.error != 0) {
#pragma unroll
    for (int k = 0; k < kElems; ++k) {
      if (!mine[k]) continue;
      store_out(p, at_of(k), common::output_nan(p.out_format));
      if (ed[k] == 0) lse_of(k, 0x7FC00000u);
    }
    if (t == 0 && lead) report(p, seq.error);
    return;
  }
  // Row q's partitions: those holding its keys.
  if (t < kMaxRows) {
    const int64_t iq = (r0 + t) / p.group;
    const KeyRange keys = common::row_keys(seq.context, p.q_len, p.window, static_cast<int32_t>(iq));
    const KeyRange z = t >= rows || keys.empty() ? KeyRange{0, 0}
                                                  : common::partitions_of(keys, p.partition_size);
    sh.z_begin[t] = z.begin;
    sh.z_end[t] = z.end;
    sh.top[t] = -INFINITY;
    sh.l_sum[t] = 0.0;
  }
  __syncthreads();
  const auto zs = [&](int k) {
    return mine[k] ? KeyRange{sh.z_begin[er[k]], sh.z_end[er[k]]} : KeyRange{0, 0};
  };
  const auto row_zs = [&](int q) { return KeyRange{sh.z_begin[q], sh.z_end[q]}; };
  const int64_t base = (b * p.num_kv_heads + kv_head) * p.partitions;
  const int64_t step = int64_t{p.rows} * D;  // from one partition's partial to the next
  const auto load = [](const float* at) {
    if constexpr (kCrossBlock) return gpu::load_cross_block(at);
    else return *at;
  };
  // The accumulator partials of the element's first kPrefetch partitions, loaded now, in flight
  // with the (m, l) partials below: only partitions of the element's row (its keys' partitions,
  // whose partials the tile kernel wrote), whatever their weight; folded in the same order as
  // the others (partition order), so the bits are those of loading them later.
  static_assert(kPrefetch == 0 || kElems == 1, "early loads: one element per thread");
  static_assert(kPrefetch <= kMergeChunk, "the early partitions are the first chunk's");
  float pre[kPrefetch > 0 ? kPrefetch : 1];
  if constexpr (kPrefetch > 0) {
    const KeyRange z = zs(0);
    const float* const part = p.ws_acc + (base * p.rows + r0 + er[0]) * D + ed[0];
#pragma unroll
    for (int j = 0; j < kPrefetch; ++j) {
      // (mutant empty_partition_nan, as `used` below: every partition's partial is read)
      const bool read = z.contains(j) || (PACTS_MUTANT(empty_partition_nan) && mine[0] && j < p.partitions);
      pre[j] = read ? load(part + j * step) : 0.0f;
    }
  }
  // The chunk's (m, l) partials of every row, read in parallel.
  const auto load_chunk = [&](int64_t c, int n) {
    for (int x = t; x < rows * kMergeChunk; x += kBlockThreads) {
      const int q = x / kMergeChunk, j = x % kMergeChunk;
      if (j >= n) continue;
      const int64_t e = (base + c + j) * p.rows + r0 + q;
      sh.part_m[q][j] = load(p.ws_m + e);
      sh.part_l[q][j] = load(p.ws_l + e);
    }
  };
  // Whether (row q, chunk position j) is a partial of the row that merges (not empty).
  const auto used = [&](int q, int64_t c, int j, int n) {
    // Mutant: every partition of the item merges into every row, the empty partials of a row
    // (past its last key, before its window) included: each is weighted (merge_weight) and its
    // unwritten accumulator read (spec/operator.md §10 says select them away).
    if (PACTS_MUTANT(empty_partition_nan)) return j < n;
    return j < n && row_zs(q).contains(c + j) && common::merge_uses(sh.part_m[q][j], sh.part_l[q][j]);
  };
  const int chunks = static_cast<int>((p.partitions + kMergeChunk - 1) / kMergeChunk);
  // (1) Each row's origin: the largest m of its non-empty partials, over every chunk (a warp per
  // row: a lane's partitions in order, then a butterfly in lane order).
  for (int ci = 0; ci < chunks; ++ci) {
    const int64_t c = int64_t{ci} * kMergeChunk;
    const int n = static_cast<int>(min(int64_t{kMergeChunk}, p.partitions - c));
    load_chunk(c, n);
    __syncthreads();
    for (int q = warp; q < rows; q += kBlockWarps) {
      float top = -INFINITY;
      for (int j = lane; j < kMergeChunk; j += gpu::kWarpSize)
        if (used(q, c, j, n)) top = common::merge_top(top, sh.part_m[q][j]);
#pragma unroll
      for (int s = 1; s < gpu::kWarpSize; s *= 2) {
        // the lower lane's value first: merge_top's order is the partitions' (mutant merge_wrong_max)
        const float other = PACTS_SHFL_XOR(top, s);
        top = (lane & s) ? common::merge_top(other, top) : common::merge_top(top, other);
      }
      if (lane == 0) sh.top[q] = common::merge_top(sh.top[q], top);
    }
    if (ci + 1 < chunks) __syncthreads();  // the chunk's partials are read before the next is
  }
  // (2) Per chunk: every used (row, partition)'s weight is computed once (0 where the partial is
  // not used), then the sums in partition order. The loops are kept short and rolled: a first
  // version unrolled over 32 partitions, its loads issued before the weights, took 7-11 us longer
  // per split call (docs/kernel-design.md, "Where the time goes").
  double acc[kElems];
#pragma unroll
  for (int k = 0; k < kElems; ++k) acc[k] = 0.0;
  for (int ci = 0; ci < chunks; ++ci) {
    const int64_t c = int64_t{ci} * kMergeChunk;
    const int n = static_cast<int>(min(int64_t{kMergeChunk}, p.partitions - c));
    if (chunks > 1) {  // one chunk: its partials are still in shared memory
      __syncthreads();  // the previous chunk's weights and partials are read
      load_chunk(c, n);
    }
    __syncthreads();  // the chunk's (m, l) and every row's origin are in shared memory
    for (int x = t; x < rows * kMergeChunk; x += kBlockThreads) {
      const int q = x / kMergeChunk, j = x % kMergeChunk;
      sh.use[q][j] = used(q, c, j, n);
      sh.w[q][j] = sh.use[q][j] ? common::merge_weight(sh.part_m[q][j], sh.top[q]) : 0.0;
    }
    __syncthreads();
    for (int q = warp; q < rows; q += kBlockWarps) {  // l: a warp per row, a fixed tree
      double part = 0.0;
      for (int j = lane; j < n; j += gpu::kWarpSize)
        if (sh.use[q][j]) part += sh.w[q][j] * static_cast<double>(sh.part_l[q][j]);
#pragma unroll
      for (int s = 1; s < gpu::kWarpSize; s *= 2) part += PACTS_SHFL_XOR(part, s);
      if (lane == 0) sh.l_sum[q] += part;
    }
#pragma unroll
    for (int k = 0; k < kElems; ++k) {
      if (!mine[k]) continue;
      const float* const part = p.ws_acc + (base * p.rows + r0 + er[k]) * D + ed[k];
      const uint8_t* const use = sh.use[er[k]];
      const double* const w = sh.w[er[k]];
      int j_first = 0;  // the first partition of the chunk not prefetched
      if constexpr (kPrefetch > 0) {
        if (ci == 0) {
#pragma unroll
          for (int j = 0; j < kPrefetch; ++j)
            if (j < n && use[j]) acc[k] += w[j] * static_cast<double>(pre[j]);
          j_first = kPrefetch;
        }
      }
#pragma unroll 1
      for (int j0 = j_first; j0 < n; j0 += kBatch) {
        float x[kBatch];  // kBatch partials' loads in flight before any is folded
#pragma unroll
        for (int q = 0; q < kBatch; ++q)
          x[q] = j0 + q < n && use[j0 + q] ? load(part + (c + j0 + q) * step) : 0.0f;
#pragma unroll
        for (int q = 0; q < kBatch; ++q)
          if (j0 + q < n && use[j0 + q]) acc[k] += w[j0 + q] * static_cast<double>(x[q]);
      }
    }
  }
  __syncthreads();  // every row's l is summed
  if (t < rows && !row_zs(t).empty()) {
    const int64_t it = (r0 + t) / p.group, ht = kv_head * p.group + (r0 + t) % p.group;
    const int64_t sink_head = PACTS_MUTANT(hip_sink_of_kv_head) ? kv_head : ht;
    const float sink = p.has_sinks ? p.sinks[sink_head] : 0.0f;
    const double m = sh.top[t], l = sh.l_sum[t];
    sh.row_factor[t] = common::output_factor(m, l, p.has_sinks, sink);
    if (lead) store_lse(p, b, it, ht, common::round_to_fp32(common::log_sum_exp(m, l)));
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kElems; ++k) {
    if (!mine[k]) continue;
    if (zs(k).empty()) {
      store_out(p, at_of(k), 0u);
      if (ed[k] == 0) lse_of(k, 0xFF800000u);
    } else {
      store_out(p, at_of(k), common::round_to_output(p.out_format, acc[k] * sh.row_factor[er[k]]));
    }
  }
}

// The end of a split item in a tile kernel that merges in-launch (kernel_mma.h, kFusedMerge: a
// timing experiment, bench/ variant fused_merge): after the item's partials are stored, the block
// counts itself on its row tile's counter (p.ws_count, in the plan's workspace, zeroed by
// decode() before the launch), and the block that counts last, whichever partition it computed,
// merges the row tile's partials in partition order (merge_partials: the same bits as the merge
// kernel) and writes the output, the LSE and the empty or invalid rows: one launch per decode
// call. Every thread fences its partial stores before the count; the merging block reads the
// partials past L1 (gpu::load_cross_block).
template <int D, int kBlockThreads>
__device__ void merge_if_last(const Params& p, MergeScratch& sh, const SeqCheck& seq, int64_t b,
                              int64_t kv_head, int32_t r0) {
  __shared__ bool last;
  const int32_t row_tile = r0 / p.rows_per_item;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int64_t item = (b * p.num_kv_heads + kv_head) * p.row_tiles + row_tile;
    const uint32_t before = atomicAdd(p.ws_count + item, 1u);
    const uint32_t others = static_cast<uint32_t>(p.partitions - 1);
    last = before == others;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  constexpr int kElems = (kMaxRows * D + kBlockThreads - 1) / kBlockThreads;
  merge_partials<D, kBlockThreads, kElems, 2, true>(p, sh, seq, b, kv_head, row_tile, 0);
}

// The merge of a split plan as a kernel of its own (the tile kernels that do not merge their
// row tiles in-launch): block (item, slice) writes elements [slice * kThreads, +kThreads) of the
// item's rows x D outputs, one per thread. kEarly: the accumulator partials of the first
// kMergePrefetch partitions loaded with the (m, l) partials (plans of at least that many).
template <int D, bool kEarly>
__global__ void __launch_bounds__(kThreads) merge_kernel(const Params p) {
  __shared__ MergeScratch sh;
  const int slices = merge_slices<D>(p.rows_per_item);
  int64_t item = blockIdx.x / slices;
  const int slice = static_cast<int>(blockIdx.x % slices);
  const int32_t row_tile = static_cast<int32_t>(item % p.row_tiles);
  item /= p.row_tiles;
  const int64_t kv_head = item % p.num_kv_heads;
  const int64_t b = item / p.num_kv_heads;
  const SeqCheck seq = check_sequence(p, b);
  // Launched as a programmatic dependent of the tile kernel (decode_hip.cpp): the check above reads
  // inputs only, the partials are read after the tile grid has completed.
  gpu::wait_for_prior_grid();
  merge_partials<D, kThreads, 1, 8, false, kEarly ? kMergePrefetch : 0>(p, sh, seq, b, kv_head,
                                                                        row_tile, slice * kThreads);
}

}  // namespace pacts::kernels::hip::detail
