// The launch parameters of the HIP decode kernels: a plain struct, resolved once on the host from
// the plan and the device buffers and passed by value. Internal to kernels/hip/.
#pragma once

#include <pacts/problem.h>

#include <cstdint>

namespace pacts::kernels::hip::detail {

// A K or V pool (spec/operator.md §3.2-§3.4). Strides and the chunk count elements of the pool's
// format (bytes for e2m1: one byte holds two elements); scale strides count fp32 elements
// (PER_TOKEN) or bytes (MX_BLOCK).
struct PoolParams {
  const uint8_t* data = nullptr;
  int64_t s_page = 0, s_head = 0, s_tok = 0, s_chunk = 0;
  int32_t chunk = 0;                          // divides the row (D, or D / 2 bytes for e2m1)
  int32_t chunk_shift = 0;                    // log2(chunk): D is a power of two, so is chunk
  pacts_scale_mode scale_mode = PACTS_SCALE_NONE;
  pacts_nibble_order nibble_order = PACTS_NIBBLE_LOW_FIRST;
  float tensor_scale = 1.0f;
  const float* token_scales = nullptr;        // PER_TOKEN
  const uint8_t* mx_scales = nullptr;         // MX_BLOCK (e8m0 bytes)
  int64_t sc_page = 0, sc_head = 0, sc_tok = 0, sc_block = 0;
};

struct Params {
  // Shape and options.
  int32_t batch = 0, q_len = 0, num_kv_heads = 0, group = 0, head_dim = 0, page_size = 0, num_pages = 0,
          max_pages_per_seq = 0, window = 0;
  int64_t block_table_stride = 0;
  // log2(page_size) where the page size is a power of two (a key's block-table column by a
  // shift, not a division), else -1.
  int32_t page_shift = -1;
  float softmax_scale = 1.0f, q_scale = 1.0f, softcap = 0.0f;
  bool has_sinks = false, want_lse = false;
  pacts_format q_format = PACTS_FORMAT_BF16, kv_format = PACTS_FORMAT_BF16,
               out_format = PACTS_FORMAT_BF16;
  pacts_row_layout q_layout{}, out_layout{}, lse_layout{};

  // Plan geometry.
  int32_t rows = 0;            // G * L
  int32_t rows_per_item = 0;
  int32_t row_tiles = 0;
  int32_t partitions = 1;
  int64_t partition_size = 0;

  // Buffers (device memory).
  const uint8_t* q = nullptr;
  const int32_t* block_table = nullptr;
  const int32_t* context_lens = nullptr;
  const float* sinks = nullptr;
  uint8_t* out = nullptr;
  float* lse = nullptr;
  PoolParams k, v;
  // bf16 K and V without a scale whose every row is contiguous and 16-byte aligned: the bf16
  // tile kernel moves them a row per bulk copy (src/kernel_mma.h, stage_tile).
  bool rows_bulk = false;
  // The split kernels' raw stages likewise: every K and V row contiguous and 16-byte aligned,
  // whatever the format and scales (src/kernel_mma.h, issue_raw).
  bool raw_bulk = false;
  // bf16 K without a scale whose 8-element chunks of adjacent tokens are adjacent (vLLM's
  // x-packed K with x = 8: a chunk of 16 tokens is 256 contiguous bytes), 16-byte aligned: the
  // kVt kernels move a tile's chunks by bulk copies (src/kernel_mma.h, stage_k_chunks).
  bool k_chunks_bulk = false;
  // A V pool whose consecutive tokens are adjacent (dim-major V, s_tok == 1) with 16-byte
  // aligned runs of 16 tokens (data, page, head and dim strides): the split kernels load a
  // whole-page tile's dims by vector loads (src/kernel_mma.h, gather_v_dim_major).
  bool v_keys_vector = false;
  float* ws_acc = nullptr;   // [E][D]
  float* ws_m = nullptr;     // [E]
  float* ws_l = nullptr;     // [E]
  // A counter per (sequence, KV head, row tile), behind the partials, in the builds that merge
  // in-launch (the bench/ variant fused_merge): the tile blocks of a split item count themselves
  // there and the last merges (src/kernel.h merge_if_last). Zeroed by decode() before the launch.
  uint32_t* ws_count = nullptr;
  uint32_t* error_word = nullptr;
  uint64_t out_bytes = 0;  // the output view's bytes (the mutant hip_out_past_end only)
};

}  // namespace pacts::kernels::hip::detail
