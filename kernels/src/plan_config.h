// The constants of the plans pacts::kernels::plan() makes, shared with the kernels that run them
// (their scratch is sized by these). Internal to kernels/.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/validate.h>

#include <cstdint>

namespace pacts::kernels::config {

// Host backend (kernels/host/).
// Keys per tile: the unit of K/V dequantisation and of one online-softmax step. 16 keys keep a
// tile of K (transposed) and V at D = 256 within 32 KiB, and make the smallest partition the
// conformance suite asks for (16 keys) a whole number of tiles.
inline constexpr int32_t kHostTileKeys = 16;
// Query rows per work item: every row of the item reuses the item's dequantised tiles. 16 rows
// (the MFMA row tile of the GPU kernels) keep the item's accumulators within 16 KiB at D = 256.
inline constexpr int32_t kHostMaxRowsPerItem = 16;
// Automatic plans: split only when fewer than this many items per worker exist unsplit, ...
inline constexpr int64_t kHostItemsPerWorker = 4;
// ... never into partitions shorter than this (the merge and per-item setup then stay small
// next to the keys an item processes), ...
inline constexpr int64_t kHostMinPartitionKeys = 256;
// ... and into at most this many partitions.
inline constexpr int64_t kHostMaxPartitions = 64;

// The batch-invariant plan (pacts/decode.h, plan's `batch_invariant`), host and GPU alike: keys
// per partition a constant (the caller's fixed_partition_size, or this default), so that the
// partitioning of a sequence's keys depends neither on the batch nor on the other sequences.
// A sequence whose keys fit one partition is unsplit alone and split in a batch whose block
// table is wider (its trailing partitions empty): every kernel's unsplit output is bitwise the
// merge of its one partial (the merge selects empty partials away, weighs the one left e^0 = 1,
// and the unsplit store rounds l and the accumulator to fp32 as a partial does), so both paths
// give the same bits. docs/kernel-design.md has the figures the default was chosen by.
inline constexpr int64_t kBatchInvariantPartitionKeys = 1024;

struct Split {
  int64_t size = 0;        // keys per partition
  int64_t partitions = 0;  // partitions per sequence
};
// `requested` > 0: the caller's partition size; 0: the default.
inline Split batch_invariant_split(int64_t max_keys, int64_t tile, int64_t requested) {
  const int64_t keys = requested > 0 ? requested : kBatchInvariantPartitionKeys;
  const int64_t size = (keys + tile - 1) / tile * tile;
  const int64_t parts = (max_keys + size - 1) / size;
  return {size, parts < 1 ? 1 : parts};
}

// What the host kernels accept beyond the spec (spec/refusals.md §4): element alignment only
// (every load is a memcpy of one element) and 64-bit offsets everywhere.
inline spec::Requirements host_requirements() { return {}; }

// Bytes of the workspace of a split plan (pacts/decode.h Plan): B * Hkv * partitions * (G * L)
// rows of D + 2 floats. False when the product does not fit below 2^63.
inline bool workspace_bytes_for(const pacts_problem& p, int64_t partitions, uint64_t* bytes) {
  const uint64_t factors[] = {static_cast<uint64_t>(p.batch), static_cast<uint64_t>(p.num_kv_heads),
                              static_cast<uint64_t>(partitions),
                              static_cast<uint64_t>(p.q_len) * static_cast<uint64_t>(p.num_q_heads / p.num_kv_heads),
                              static_cast<uint64_t>(p.head_dim) + 2, sizeof(float)};
  uint64_t total = 1;
  for (uint64_t f : factors)
    if (__builtin_mul_overflow(total, f, &total) || total > (uint64_t{1} << 63)) return false;
  *bytes = total;
  return true;
}

// The largest head dim of the operator (spec/operator.md §2).
inline constexpr int32_t kMaxHeadDim = 256;

}  // namespace pacts::kernels::config
