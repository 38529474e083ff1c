// The host kernels' view of one decode call: the problem, the buffers as byte pointers, the
// plan's geometry and the per-call decode tables, resolved once in decode() and shared read-only
// by every worker thread. Internal to kernels/host/.
#pragma once

#include <pacts/decode.h>

#include "common/dequant.h"
#include "common/mask.h"
#include "common/mutant.h"

#include <cstdint>
#include <cstring>

namespace pacts::kernels::host::detail {

template <class T>
inline T load(const uint8_t* base, int64_t index) {
  T x;
  std::memcpy(&x, base + index * int64_t{sizeof(T)}, sizeof x);
  return x;
}

// One K or V pool with its scale mode (spec/operator.md §3.2-§3.4, spec/formats.md §3).
struct Pool {
  const uint8_t* data = nullptr;
  pacts_pool_layout layout{};
  pacts_format format = PACTS_FORMAT_INVALID;
  pacts_nibble_order nibble_order = PACTS_NIBBLE_LOW_FIRST;
  pacts_scale_mode scale_mode = PACTS_SCALE_NONE;
  float tensor_scale = 1.0f;
  const uint8_t* scales = nullptr;
  pacts_scale_layout scale_layout{};
  const float* lut = nullptr;  // 256 decoded values for the fp8 formats
};

struct Call {
  const pacts_problem* p = nullptr;

  // Geometry (pacts/decode.h Plan).
  int64_t group = 0;           // G
  int64_t rows = 0;            // G * L rows per (sequence, KV head)
  int64_t rows_per_item = 0;
  int64_t row_tiles = 0;
  int64_t partitions = 1;
  int64_t partition_size = 0;

  // Buffers.
  const uint8_t* q = nullptr;
  const uint8_t* block_table = nullptr;
  const uint8_t* context_lens = nullptr;
  const uint8_t* sinks = nullptr;
  uint8_t* out = nullptr;
  uint8_t* lse = nullptr;
  Pool k, v;
  int64_t q_bytes = 0, out_bytes = 0;
  float q_lut[256] = {};
  float kv_lut[256] = {};

  // Workspace (split plans): acc [E][D], then m [E], then l [E].
  float* ws_acc = nullptr;
  float* ws_m = nullptr;
  float* ws_l = nullptr;

  uint32_t* error_word = nullptr;
};

// The state of a sequence as far as the device-resident preconditions go (spec/contract.md §4).
struct Sequence {
  uint32_t error = 0;      // PACTS_DEVERR_* bit; 0 when valid
  int64_t context = 0;     // n_b
  common::KeyRange keys;   // U_b: the owned keys
};

// Reads n_b and the owned block-table entries of sequence b, and nothing else: P1 first (a bad
// n_b makes every entry's ownership meaningless, so no entry is read), then P2 over the owned
// columns only. Padding and pre-window entries are never read here, never checked (they must not
// set PACTS_DEVERR_PAGE_ID) and never used as addresses anywhere.
inline Sequence check_sequence(const Call& c, int64_t b) {
  const pacts_problem& p = *c.p;
  Sequence s;
  s.context = load<int32_t>(c.context_lens, b);
  if (!common::context_len_ok(s.context, p.max_pages_per_seq, p.page_size)) {
    s.error = PACTS_DEVERR_CONTEXT_LEN;
    return s;
  }
  s.keys = common::sequence_keys(s.context, p.q_len, p.window);
  common::KeyRange columns = common::owned_columns(s.keys, p.page_size);
  if (PACTS_MUTANT(padding_checked_as_page_ids)) columns = {0, p.max_pages_per_seq};
  if (PACTS_MUTANT(page_id_unchecked)) columns = {0, 0};
  for (int64_t col = columns.begin; col < columns.end; ++col) {
    if (!common::page_id_ok(load<int32_t>(c.block_table, b * p.block_table_stride + col),
                            p.num_pages)) {
      s.error = PACTS_DEVERR_PAGE_ID;
      return s;
    }
  }
  return s;
}

}  // namespace pacts::kernels::host::detail
