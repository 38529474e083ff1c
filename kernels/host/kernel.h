// The host work items: the algorithm of pacts/decode.h, written as the GPU kernels will run it,
// on one CPU thread per item. Templated on the head dim (64, 128, 256) so that every inner loop
// has a compile-time trip count. Internal to kernels/host/.
//
//   run_item   (sequence, KV head, partition, row tile): for the item's query rows, the logits,
//              the online softmax and P.V over the partition's keys; the output directly (one
//              partition) or a partial state in the workspace (several).
//   merge_item (sequence, KV head, row tile) of a split plan: the partials of each row, in
//              partition order, into the output and the LSE.
//
// Poison-proof by construction (spec/contract.md §1, §5): an item reads the block-table entries,
// K/V rows and scales of OWNED keys only (the sequence's key range U_b, cut to the partition), so
// unowned bytes are never loaded, let alone multiplied; a row skips the keys of a tile it does not
// see (its range ends), and the K columns of tile slots outside the item's keys are zeroed by
// assignment, so their logits are finite and then never selected. Q is read for non-empty rows
// only, and a sink only for a non-empty row of its head.
#pragma once

#include "common/dequant.h"
#include "common/mask.h"
#include "common/mutant.h"
#include "common/round.h"
#include "common/softmax.h"
#include "host/call.h"
#include "src/plan_config.h"

#include <algorithm>
#include <atomic>

namespace pacts::kernels::host::detail {

using common::KeyRange;

inline constexpr int kTile = config::kHostTileKeys;
inline constexpr int kRows = config::kHostMaxRowsPerItem;

// Per-thread scratch: one item's query rows, accumulators and dequantised tiles. Fixed size (the
// GPU kernels' registers and shared memory), on the worker's stack: decode() allocates nothing.
template <int D>
struct Scratch {
  alignas(64) float q[kRows][D];     // q~ = decode(q) * q_scale * softmax_scale
  alignas(64) float acc[kRows][D];   // sum_j e^(s_j - m) v_j
  alignas(64) float kt[D][kTile];    // the K tile, transposed: logits vectorise over keys
  alignas(64) float v[kTile][D];     // the V tile
  common::SoftmaxState state[kRows];
  KeyRange visible[kRows];           // each row's keys within the item's partition
};

// --- loads -----------------------------------------------------------------------------------

// Visits the units (elements; bytes for e2m1) of one pool row in order: f(unit, offset).
template <int kUnits, class F>
inline void for_each_unit(const pacts_pool_layout& l, int64_t row, F&& f) {
  const int64_t chunk = l.chunk;
  for (int64_t u0 = 0; u0 < kUnits; u0 += chunk) {
    const int64_t base =
        PACTS_MUTANT(pool_chunks_ignored) ? row + u0 : row + (u0 / chunk) * l.s_chunk;
    for (int64_t e = 0; e < chunk; ++e) f(u0 + e, base + e);
  }
}

// Dequantises row (page, head, slot) of a pool into out[d * kStride], d = 0..D-1, each element
// scaled once in fp32 (common/dequant.h: the scale before any product with Q). The caller has
// proved the key owned, so the row and its scales are owned (spec/contract.md §1.1).
template <int D, int kStride>
inline void dequant_row(const Pool& pool, int64_t page, int64_t head, int64_t slot, float* out) {
  const pacts_pool_layout& l = pool.layout;
  const int64_t row = page * l.s_page + head * l.s_head + slot * l.s_tok;
  const pacts_scale_layout& sl = pool.scale_layout;
  const int64_t scale_at = page * sl.s_page + head * sl.s_head + slot * sl.s_tok;
  const uint8_t* data = pool.data;
  switch (pool.format) {
    case PACTS_FORMAT_E2M1: {
      float block[D / 32];
      for (int k = 0; k < D / 32; ++k) {
        // kStride != 1: the K tile (load_tile), where #7056's review found the rolled scales.
        const int kb = kStride != 1 && PACTS_MUTANT(k_block_scales_rolled) ? (k + 1) % (D / 32) : k;
        block[k] = common::e8m0_to_float(pool.scales[scale_at + kb * sl.s_block]);
      }
      for_each_unit<D / 2>(l, row, [&](int64_t u, int64_t at) {
        const uint8_t byte = data[at];
        for (int64_t d = 2 * u; d < 2 * u + 2; ++d)
          out[d * kStride] =
              common::e2m1_to_float(common::e2m1_nibble(byte, d, pool.nibble_order)) * block[d / 32];
      });
      return;  // MX_BLOCK is the only mode of e2m1
    }
    case PACTS_FORMAT_BF16:
      for_each_unit<D>(l, row, [&](int64_t d, int64_t at) {
        out[d * kStride] = common::bf16_to_float(load<uint16_t>(data, at));
      });
      break;
    case PACTS_FORMAT_FP16:
      for_each_unit<D>(l, row, [&](int64_t d, int64_t at) {
        out[d * kStride] = common::fp16_to_float(load<uint16_t>(data, at));
      });
      break;
    default:  // the fp8 formats, through the call's table of their 256 values
      for_each_unit<D>(l, row, [&](int64_t d, int64_t at) { out[d * kStride] = pool.lut[data[at]]; });
      break;
  }
  float scale = 1.0f;
  if (pool.scale_mode == PACTS_SCALE_PER_TENSOR) scale = pool.tensor_scale;
  if (pool.scale_mode == PACTS_SCALE_PER_TENSOR && kStride == 1 &&
      PACTS_MUTANT(v_tensor_scale_ignored))
    scale = 1.0f;
  if (pool.scale_mode == PACTS_SCALE_PER_TOKEN) scale = load<float>(pool.scales, scale_at);
  if (pool.scale_mode == PACTS_SCALE_PER_TOKEN && PACTS_MUTANT(per_token_scale_wrong_slot)) {
    // The neighbouring slot of the pair (pages hold a power of two >= 8 slots: same page).
    scale = load<float>(pool.scales, page * sl.s_page + head * sl.s_head + (slot ^ 1) * sl.s_tok);
  }
  if (pool.scale_mode == PACTS_SCALE_NONE) return;
  for (int d = 0; d < D; ++d) out[d * kStride] = common::scaled(out[d * kStride], scale);
}

// Mutants that let unowned V rows reach P.V (weighted by P = 0) instead of skipping them: the
// #7092 class. row_step then multiplies the whole tile.
// (A macro: in production it is a constant expression, folded before code generation.)
#define PACTS_HOST_PV_UNMASKED                                                                   \
  (PACTS_MUTANT(v_tail_unmasked) || PACTS_MUTANT(padding_entries_as_pages) ||                    \
   PACTS_MUTANT(v_scale_unowned_not_zeroed))

// Tile slot `col` (key j, outside the item's keys) under the mutants that load unowned rows:
// the tail of the sequence's last page (j >= n on its last owned column) and the keys of the
// padding columns after it. Other slots stay as the production code leaves them.
template <int D>
void load_unowned_slot(const Call& c, int64_t b, int64_t head, int64_t j, int64_t col,
                       Scratch<D>& s) {
  const pacts_problem& p = *c.p;
  const int64_t n = load<int32_t>(c.context_lens, b);
  if (n <= 0 || j < n || j >= int64_t{p.max_pages_per_seq} * p.page_size) return;
  const int64_t column = j / p.page_size;
  const bool tail = column == (n - 1) / p.page_size;
  const int64_t slot = j % p.page_size;
  const int64_t entry = load<int32_t>(c.block_table, b * p.block_table_stride + column);
  if (tail && PACTS_MUTANT(v_tail_unmasked)) {
    dequant_row<D, 1>(c.v, entry, head, slot, s.v[col]);
    return;
  }
  if (!tail && PACTS_MUTANT(padding_entries_as_pages)) {
    // #7092 pinned padding entries to page 0; a range check keeps this process alive.
    dequant_row<D, 1>(c.v, common::page_id_ok(static_cast<int32_t>(entry), p.num_pages) ? entry : 0,
                      head, slot, s.v[col]);
    return;
  }
  if (tail && PACTS_MUTANT(v_scale_unowned_not_zeroed)) {
    // The V bytes masked to code 0, the slot's own scale still multiplied in.
    const pacts_scale_layout& sl = c.v.scale_layout;
    const int64_t at = entry * sl.s_page + head * sl.s_head + slot * sl.s_tok;
    for (int d = 0; d < D; ++d) {
      float scale = 1.0f;
      if (c.v.scale_mode == PACTS_SCALE_PER_TOKEN) scale = load<float>(c.v.scales, at);
      if (c.v.scale_mode == PACTS_SCALE_MX_BLOCK)
        scale = common::e8m0_to_float(c.v.scales[at + (d / 32) * sl.s_block]);
      s.v[col][d] = common::scaled(0.0f, scale);
    }
    return;
  }
  if (tail && PACTS_MUTANT(k_unowned_in_tile_max))
    dequant_row<D, kTile>(c.k, entry, head, slot, &s.kt[0][col]);
}

// Loads the keys `keys` (all owned, inside one tile starting at key t0) of KV head `head`: K into
// the transposed tile, V into the V tile. Tile slots outside `keys` get zero K columns (by
// assignment: no unowned byte, no stale value) and are never selected by any row.
template <int D>
inline void load_tile(const Call& c, int64_t b, int64_t head, int64_t t0, KeyRange keys,
                      Scratch<D>& s) {
  const pacts_problem& p = *c.p;
  for (int64_t j = t0; j < t0 + kTile; ++j) {
    const int64_t col = j - t0;
    if (!keys.contains(j)) {
      for (int d = 0; d < D; ++d) s.kt[d][col] = 0.0f;
      if (PACTS_HOST_PV_UNMASKED || PACTS_MUTANT(k_unowned_in_tile_max)) {
        if (PACTS_HOST_PV_UNMASKED)
          for (int d = 0; d < D; ++d) s.v[col][d] = 0.0f;
        load_unowned_slot<D>(c, b, head, j, col, s);
      }
      continue;
    }
    int64_t page = load<int32_t>(c.block_table, b * p.block_table_stride + j / p.page_size);
    if (PACTS_MUTANT(page_id_16bit)) page = static_cast<uint16_t>(page);
    const int64_t slot = j % p.page_size;
    dequant_row<D, kTile>(c.k, page, head, slot, &s.kt[0][col]);
    dequant_row<D, 1>(c.v, page, head, slot, s.v[col]);
  }
}

// q~ of row (b, i, h): decode * q_scale * softmax_scale (common::fold_query).
template <int D>
inline void load_query(const Call& c, int64_t b, int64_t i, int64_t h, float* q) {
  const pacts_problem& p = *c.p;
  int64_t at = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head;
  if (PACTS_MUTANT(q_stride_contiguous)) at = ((b * p.q_len + i) * p.num_q_heads + h) * D;
  for (int d = 0; d < D; ++d) {
    float x;
    if (c.q_bytes == 2) {
      const uint16_t code = load<uint16_t>(c.q, at + d);
      x = p.q_format == PACTS_FORMAT_BF16 ? common::bf16_to_float(code) : common::fp16_to_float(code);
    } else {
      x = c.q_lut[c.q[at + d]];
    }
    q[d] = common::fold_query(x, p.q_scale, p.softmax_scale);
  }
}

// --- stores ----------------------------------------------------------------------------------

inline void store_code(uint8_t* base, int64_t element, int64_t bytes, uint32_t code) {
  std::memcpy(base + element * bytes, &code, static_cast<size_t>(bytes));  // little-endian
}

inline int64_t out_at(const pacts_problem& p, int64_t b, int64_t i, int64_t h) {
  if (PACTS_MUTANT(out_stride_contiguous))
    return ((b * p.q_len + i) * p.num_q_heads + h) * p.head_dim;
  return b * p.out_layout.s_batch + i * p.out_layout.s_tok + h * p.out_layout.s_head;
}

inline void store_lse(const Call& c, int64_t b, int64_t i, int64_t h, uint32_t bits) {
  const pacts_problem& p = *c.p;
  if (!p.want_lse) return;
  store_code(c.lse, b * p.lse_layout.s_batch + i * p.lse_layout.s_tok + h * p.lse_layout.s_head,
             4, bits);
}

// spec/operator.md §10: an empty row is +0 (all bits zero) with LSE -inf.
template <int D>
inline void store_empty_row(const Call& c, int64_t b, int64_t i, int64_t h) {
  if (PACTS_MUTANT(empty_row_unwritten)) return;
  const int64_t at = out_at(*c.p, b, i, h);
  for (int d = 0; d < D; ++d) store_code(c.out, at + d, c.out_bytes, 0u);
  store_lse(c, b, i, h, 0xFF800000u);
}

// spec/contract.md §4: every element of a row of an invalid sequence is NaN, and its LSE.
template <int D>
inline void store_invalid_row(const Call& c, int64_t b, int64_t i, int64_t h) {
  const int64_t at = out_at(*c.p, b, i, h);
  const uint32_t nan = PACTS_MUTANT(invalid_row_zero) ? 0u : common::output_nan(c.p->out_format);
  for (int d = 0; d < D; ++d) store_code(c.out, at + d, c.out_bytes, nan);
  store_lse(c, b, i, h, 0x7FC00000u);
}

// A non-empty row from its final state: o_d = acc_d * factor in binary64, rounded once.
template <int D, class Acc>
inline void store_row(const Call& c, int64_t b, int64_t i, int64_t h, const Acc* acc, double m,
                      double l) {
  const pacts_problem& p = *c.p;
  float sink = p.has_sinks ? load<float>(c.sinks, h) : 0.0f;  // owned: the row is non-empty
  bool has_sink = p.has_sinks != 0;
  if (PACTS_MUTANT(sink_times_softmax_scale)) sink *= p.softmax_scale;
  if (PACTS_MUTANT(sink_softcapped) && p.softcap > 0.0f) sink = common::soft_cap(sink, p.softcap);
  if (PACTS_MUTANT(sink_dropped_when_split) && c.partitions > 1) has_sink = false;
  const double factor = common::output_factor(m, l, has_sink, sink);
  const int64_t at = out_at(p, b, i, h);
  for (int d = 0; d < D; ++d)
    store_code(c.out, at + d, c.out_bytes,
               common::round_to_output(p.out_format, static_cast<double>(acc[d]) * factor));
  if (PACTS_MUTANT(out_row_overrun) && at < out_at(p, p.batch - 1, p.q_len - 1, p.num_q_heads - 1))
    store_code(c.out, at + D, c.out_bytes,  // element D: still inside the view, never past it
               common::round_to_output(p.out_format, static_cast<double>(acc[D - 1]) * factor));
  if (PACTS_MUTANT(lse_includes_sink) && has_sink) {
    store_lse(c, b, i, h, common::round_to_fp32(common::shift_of(m) +
                                                std::log(l + std::exp(sink - common::shift_of(m)))));
    return;
  }
  store_lse(c, b, i, h, common::round_to_fp32(common::log_sum_exp(m, l)));
}

inline void report(const Call& c, uint32_t error) {
  if (PACTS_MUTANT(device_error_not_reported)) return;
  if (c.error_word != nullptr && error != 0)
    std::atomic_ref<uint32_t>(*c.error_word).fetch_or(error, std::memory_order_relaxed);
}

// --- the online softmax of one row over one tile ---------------------------------------------

// Row `q` against the K/V tile, over the keys [ja, jb) of the tile (slots relative to its start):
// logits of the whole tile (a fixed-order dot product per key, vectorised over the 16 keys),
// soft-cap, then the step of common::SoftmaxState on the selected keys only. The sums run over
// local arrays, which the compiler can prove alias nothing, so that the loops vectorise at -O2.
template <int D>
inline void row_step(const pacts_problem& p, Scratch<D>& s, int r, int ja, int jb) {
  float logit[kTile] = {};
  const float* q = s.q[r];
  for (int d = 0; d < D; ++d) {
    const float qd = q[d];
    for (int j = 0; j < kTile; ++j) logit[j] += qd * s.kt[d][j];
  }
  if (PACTS_MUTANT(q_scale_after_dot))  // common::fold_query left q_scale out of q~
    for (int j = 0; j < kTile; ++j) logit[j] *= p.q_scale;
  if (PACTS_MUTANT(softcap_on_unscaled_logits) && p.softcap > 0.0f)  // capped before tau
    for (int j = 0; j < kTile; ++j)
      logit[j] = common::soft_cap(logit[j] / p.softmax_scale, p.softcap) * p.softmax_scale;
  if (p.softcap > 0.0f && !PACTS_MUTANT(softcap_on_unscaled_logits) &&
      !(PACTS_MUTANT(softcap_dropped_from_40) && p.softcap >= 40.0f))
    for (int j = ja; j < jb; ++j) logit[j] = common::soft_cap(logit[j], p.softcap);
  float tile_max = -INFINITY;
  for (int j = ja; j < jb; ++j) tile_max = common::max_finite(tile_max, logit[j]);
  if (PACTS_MUTANT(k_unowned_in_tile_max))  // the slots after the row's keys, unmasked
    for (int j = jb; j < kTile; ++j) tile_max = common::max_finite(tile_max, logit[j]);
  const common::TileStep step = s.state[r].begin_tile(tile_max);
  float tile_sum = 0.0f;
  for (int j = ja; j < jb; ++j) {
    logit[j] = expf(logit[j] - step.shift);
    tile_sum += logit[j];
  }
  // Blocked sum: the tile's P.V apart, then into the accumulator (common/softmax.h).
  float pv[D];
  if (PACTS_HOST_PV_UNMASKED) {
    // P.V over the whole tile, P = 0 outside the row's keys: 0 * NaN = NaN (#7092).
    for (int j = 0; j < kTile; ++j)
      if (j < ja || j >= jb) logit[j] = 0.0f;
    ja = 0;
    jb = kTile;
  }
  for (int d = 0; d < D; ++d) pv[d] = logit[ja] * s.v[ja][d];
  for (int j = ja + 1; j < jb; ++j) {
    const float pj = logit[j];
    for (int d = 0; d < D; ++d) pv[d] += pj * s.v[j][d];
  }
  float* acc = s.acc[r];
  for (int d = 0; d < D; ++d) acc[d] = acc[d] * step.alpha + pv[d];
  s.state[r].add(tile_sum);
}

// --- work items ------------------------------------------------------------------------------

// Row r (0 <= r < G * L) of a (sequence, KV head) item is query token r / G of query head
// kv_head * G + r % G: the heads of a KV head are consecutive (spec/operator.md §4).
inline int64_t row_token(const Call& c, int64_t r) { return r / c.group; }
inline int64_t row_head(const Call& c, int64_t kv_head, int64_t r) {
  if (PACTS_MUTANT(kv_head_interleaved)) return (r % c.group) * c.p->num_kv_heads + kv_head;
  return kv_head * c.group + r % c.group;
}

struct ItemIndex {
  int64_t b, kv_head, partition, row_tile;
};

inline ItemIndex item_index(const Call& c, int64_t item, int64_t partitions) {
  ItemIndex x;
  x.row_tile = item % c.row_tiles;
  item /= c.row_tiles;
  x.partition = item % partitions;
  item /= partitions;
  x.kv_head = item % c.p->num_kv_heads;
  x.b = item / c.p->num_kv_heads;
  return x;
}

// Workspace slot of (b, kv_head, partition, row).
inline int64_t slot_of(const Call& c, int64_t b, int64_t kv_head, int64_t z, int64_t r) {
  return ((b * c.p->num_kv_heads + kv_head) * c.partitions + z) * c.rows + r;
}

template <int D>
void run_item(const Call& c, int64_t item, Scratch<D>& s) {
  const pacts_problem& p = *c.p;
  const ItemIndex x = item_index(c, item, c.partitions);
  const int64_t r0 = x.row_tile * c.rows_per_item;
  const int rows = static_cast<int>(std::min(c.rows_per_item, c.rows - r0));
  const bool direct = c.partitions == 1;
  const Sequence seq = check_sequence(c, x.b);
  if (seq.error != 0) {
    if (!direct) return;  // the merge item of this row tile writes the NaN rows and reports
    for (int r = 0; r < rows; ++r)
      store_invalid_row<D>(c, x.b, row_token(c, r0 + r), row_head(c, x.kv_head, r0 + r));
    report(c, seq.error);
    return;
  }
  const KeyRange part =
      direct ? seq.keys
             : common::intersect(common::partition_keys(x.partition, c.partition_size), seq.keys);

  // Each row's keys in the partition; the item's keys are their union (all owned: inside U_b).
  KeyRange span{INT64_MAX, INT64_MIN};
  for (int r = 0; r < rows; ++r) {
    const int64_t i = row_token(c, r0 + r), h = row_head(c, x.kv_head, r0 + r);
    const int64_t mask_i = PACTS_MUTANT(rows_share_last_mask) ? p.q_len - 1 : i;
    s.visible[r] = common::intersect(common::row_keys(seq.context, p.q_len, p.window,
                                                      static_cast<int32_t>(mask_i)), part);
    s.state[r] = common::SoftmaxState{};
    if (s.visible[r].empty()) continue;
    if (PACTS_MUTANT(rows_token_major_q)) {  // rows taken as [head][token] for Q only
      load_query<D>(c, x.b, (r0 + r) % p.q_len, x.kv_head * c.group + (r0 + r) / p.q_len, s.q[r]);
    } else {
      load_query<D>(c, x.b, i, h, s.q[r]);
    }
    for (int d = 0; d < D; ++d) s.acc[r][d] = 0.0f;
    span.begin = std::min(span.begin, s.visible[r].begin);
    span.end = std::max(span.end, s.visible[r].end);
  }

  // Tiles are aligned to multiples of kTile in key space; partitions are whole tiles.
  for (int64_t t0 = span.begin - span.begin % kTile; t0 < span.end; t0 += kTile) {
    const KeyRange tile = common::intersect({t0, t0 + kTile}, span);
    load_tile<D>(c, x.b, x.kv_head, t0, tile, s);
    for (int r = 0; r < rows; ++r) {
      const KeyRange keys = common::intersect(s.visible[r], tile);
      if (keys.empty()) continue;
      row_step<D>(p, s, r, static_cast<int>(keys.begin - t0), static_cast<int>(keys.end - t0));
    }
  }

  for (int r = 0; r < rows; ++r) {
    const int64_t i = row_token(c, r0 + r), h = row_head(c, x.kv_head, r0 + r);
    const common::SoftmaxState& st = s.state[r];
    if (direct) {
      if (s.visible[r].empty()) {
        store_empty_row<D>(c, x.b, i, h);
      } else {
        store_row<D>(c, x.b, i, h, s.acc[r], st.m, st.l);
      }
      continue;
    }
    const int64_t e = slot_of(c, x.b, x.kv_head, x.partition, r0 + r);
    c.ws_m[e] = s.visible[r].empty() ? -INFINITY : st.m;
    c.ws_l[e] = s.visible[r].empty() ? 0.0f : st.l;
    if (!s.visible[r].empty()) std::memcpy(c.ws_acc + e * D, s.acc[r], sizeof(float) * D);
  }
}

// Merges the partials of a row tile in partition order (binary64, common::merge) and writes the
// output. Only the partitions the row has keys in are read: decided from n_b, L, W and the
// partition size, never from the workspace's contents, so stale bytes cannot leak (PACTS-POISON-5).
template <int D>
void merge_item(const Call& c, int64_t item) {
  const pacts_problem& p = *c.p;
  const ItemIndex x = item_index(c, item, 1);
  const int64_t r0 = x.row_tile * c.rows_per_item;
  const int rows = static_cast<int>(std::min(c.rows_per_item, c.rows - r0));
  const Sequence seq = check_sequence(c, x.b);
  double acc[D];
  for (int r = 0; r < rows; ++r) {
    const int64_t i = row_token(c, r0 + r), h = row_head(c, x.kv_head, r0 + r);
    if (seq.error != 0) {
      store_invalid_row<D>(c, x.b, i, h);
      continue;
    }
    const int64_t mask_i = PACTS_MUTANT(rows_share_last_mask) ? p.q_len - 1 : i;
    const KeyRange keys =
        common::row_keys(seq.context, p.q_len, p.window, static_cast<int32_t>(mask_i));
    if (keys.empty()) {
      store_empty_row<D>(c, x.b, i, h);
      continue;
    }
    // The mutant reads every partition of the sequence, the row's empty partials included.
    const KeyRange zs = common::partitions_of(PACTS_MUTANT(empty_partition_nan) ? seq.keys : keys,
                                              c.partition_size);
    common::MergeState state;
    for (int d = 0; d < D; ++d) acc[d] = 0.0;
    for (int64_t z = zs.begin; z < zs.end; ++z) {
      const int64_t e = slot_of(c, x.b, x.kv_head, z, r0 + r);
      const common::MergeWeights w = common::merge(state, c.ws_m[e], c.ws_l[e]);
      if (w.use_self)
        for (int d = 0; d < D; ++d) acc[d] *= w.self;
      if (w.use_other) {
        const float* part = c.ws_acc + e * D;
        for (int d = 0; d < D; ++d) acc[d] += w.other * static_cast<double>(part[d]);
      }
    }
    if (PACTS_MUTANT(sink_counted_per_partition) && p.has_sinks)  // once per partition merged
      state.l += static_cast<double>(zs.size()) *
                 std::exp(double{load<float>(c.sinks, h)} - common::shift_of(state.m));
    store_row<D>(c, x.b, i, h, acc, state.m, state.l);
  }
  report(c, seq.error);
}

}  // namespace pacts::kernels::host::detail
