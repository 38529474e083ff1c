// The one plan() of pacts/decode.h: the host kernels (kernels/src/plan.cpp) and the GPU kernels
// (kernels/hip/src/decode_hip.cpp) make their plans here, each with its own rules (the tile, the
// row tile, the automatic split, the workspace). Internal to kernels/; host code only, so that
// the plan of either backend can be computed and tested on a machine without a GPU
// (kernels/tests/plan_rules_test.cpp).
#pragma once

#include <pacts/decode.h>
#include <pacts/spec/validate.h>

#include "src/plan_config.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

namespace pacts::kernels::config {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Keys per partition for `partitions` partitions of the key range, a whole number of tiles.
inline int64_t size_for(int64_t max_keys, int64_t partitions, int64_t tile) {
  return ceil_div(std::max<int64_t>(ceil_div(std::max<int64_t>(max_keys, 1), partitions), 1), tile) *
         tile;
}

// The host's automatic split: spec/operator.md §11 leaves it to the backend; this one keeps
// every worker busy. Units of work that exist anyway are (sequence, KV head, row tile); when there
// are fewer than kHostItemsPerWorker per worker, the key range is cut so that there are, but never
// into partitions shorter than kHostMinPartitionKeys (short contexts run unsplit) nor more than
// kHostMaxPartitions. Contexts below the key range leave trailing partitions empty: an empty item
// costs a context-length read and the row states it writes.
inline int64_t host_automatic_partitions(const pacts_problem& p, int32_t workers, int64_t row_tiles,
                                         int64_t max_keys) {
  const int64_t units = int64_t{p.batch} * p.num_kv_heads * row_tiles;
  const int64_t target = kHostItemsPerWorker * std::max<int32_t>(workers, 1);
  if (units == 0 || units >= target || max_keys <= kHostMinPartitionKeys) return 1;
  return std::min({ceil_div(target, units), ceil_div(max_keys, kHostMinPartitionKeys),
                   kHostMaxPartitions});
}

// The GPU's automatic split: the fewest partitions whose blocks fill at least 90 % of their last
// wave of resident slots (`blocks_per_sm` blocks of the problem's tile kernel per multiprocessor;
// a partial wave idles multiprocessors, and every extra partition costs a merge), partitions of at
// least kGpuMinPartitionKeys (a few tiles), at most kGpuMaxPartitions. A short context at a small
// batch takes as many partitions as its keys allow: its time is the chain of dependent tiles each
// warp computes, which more partitions shorten. Two corrections to "fill the resident slots",
// measured on the H200 with the bf16 kernel at 3 blocks per multiprocessor
// (docs/kernel-design.md, "The plan"): with units for under a quarter of the multiprocessors
// (batch 1), 2 slots each, so fewer and longer partitions (B1 ctx16k: 30 partitions 63 us, 45
// partitions 70 us); with a unit for every multiprocessor, partitions of at least
// kGpuMinBusyPartitionKeys (B32 ctx1024: unsplit 62 us, 3 partitions 82 us). Depends on the shape
// and the multiprocessor count only.
inline constexpr int64_t kGpuMinPartitionKeys = 64;
inline constexpr int64_t kGpuMinBusyPartitionKeys = 1024;
inline constexpr int64_t kGpuMaxPartitions = 64;
inline int64_t gpu_automatic_partitions(const pacts_problem& p, int32_t multiprocessors,
                                        int64_t blocks_per_sm, int64_t row_tiles,
                                        int64_t max_keys) {
  const int64_t units = int64_t{p.batch} * p.num_kv_heads * row_tiles;
  const int64_t sms = std::max<int32_t>(multiprocessors, 1);
  const int64_t per_sm = units * 4 < sms ? std::min<int64_t>(blocks_per_sm, 2) : blocks_per_sm;
  const int64_t min_keys = units >= sms ? kGpuMinBusyPartitionKeys : kGpuMinPartitionKeys;
  const int64_t slots = per_sm * sms;
  if (units == 0 || units >= slots || max_keys <= min_keys) return 1;
  const int64_t limit = std::min(ceil_div(max_keys, min_keys), kGpuMaxPartitions);
  for (int64_t parts = 1; parts < limit; ++parts) {
    const int64_t blocks = units * parts;
    if (blocks * 10 >= ceil_div(blocks, slots) * slots * 9) return parts;
  }
  return limit;
}

// Resident blocks per multiprocessor of the NVIDIA tile kernels at 228 KiB of shared memory and
// 64K registers: the bf16 kernel, and the split kernels (every other format, or a scaled V).
// kernels/hip/src/kernel_mma.h MmaShape::kBlocksPerSm is these (decode_hip.cpp asserts it).
inline constexpr int64_t nvidia_blocks_per_sm(bool split, int32_t head_dim) {
#if defined(PACTS_EXPERIMENT_SPLIT_BLOCKS2)  // timing experiment only (bench/ variant split_blocks2)
  return head_dim == 256 ? (split ? 4 : 5) : (split ? 2 : 3);
#else
  return head_dim == 256 ? (split ? 4 : 5) : (split ? (head_dim == 128 ? 3 : 2) : 3);
#endif
}

// What a backend's plans differ in.
struct PlanRules {
  std::string variant;   // the start of Plan::variant: "host", "hip-mma", ...
  std::string kernels;   // who needs the limits, in refusals: "the host kernels", ...
  spec::Requirements requirements;  // beyond the spec (spec/refusals.md §4)
  int64_t tile_keys = 16;
  int64_t max_rows_per_item = 16;
  // The automatic partition count of a validated problem: (row tiles, key range) -> partitions.
  std::function<int64_t(int64_t, int64_t)> automatic;
  // The workspace of a split plan: (partitions, row tiles, bytes) -> false when beyond 2^63.
  std::function<bool(int64_t, int64_t, uint64_t*)> workspace;
  bool items_below_2_31 = false;  // one launch: at most 2^31 - 1 work items
};

// The plan (pacts/decode.h plan()): validates the problem with the rules' requirements and the
// options, then cuts the key range. The batch-invariant plan takes batch_invariant_split's
// partitions; a fixed size or count is the caller's; otherwise the rules' automatic count.
inline spec::Result<Plan> make_plan(const pacts_problem& problem, const DeviceInfo& device,
                                    int32_t fixed_partition_size, int32_t fixed_partitions,
                                    bool batch_invariant, const PlanRules& rules) {
  if (spec::Status s = spec::validate_problem(problem, rules.requirements); !s) return s;
  if (fixed_partition_size < 0 || fixed_partitions < 0 ||
      (fixed_partition_size > 0 && fixed_partitions > 0))
    return spec::invalid_argument(
        "fixed_partition_size " + std::to_string(fixed_partition_size) + ", fixed_partitions " +
        std::to_string(fixed_partitions) + ": give at most one, and neither negative");
  if (batch_invariant && fixed_partitions > 0)
    return spec::invalid_argument(
        "batch_invariant with fixed_partitions " + std::to_string(fixed_partitions) +
        ": a partition count follows the key range; the batch-invariant plan takes a fixed "
        "partition size (fixed_partition_size, or its default) or nothing");

  const int64_t tile = rules.tile_keys;
  const int64_t rows = int64_t{problem.q_len} * (problem.num_q_heads / problem.num_kv_heads);
  const int64_t rows_per_item = std::min<int64_t>(rows, rules.max_rows_per_item);
  const int64_t row_tiles = ceil_div(rows, rows_per_item);
  const int64_t max_keys = int64_t{problem.max_pages_per_seq} * problem.page_size;  // < 2^31

  int64_t size = 0;
  if (batch_invariant) {
    size = batch_invariant_split(max_keys, tile, fixed_partition_size).size;
  } else if (fixed_partition_size > 0) {
    size = ceil_div(fixed_partition_size, tile) * tile;
  } else {
    const int64_t wanted =
        fixed_partitions > 0 ? fixed_partitions : rules.automatic(row_tiles, max_keys);
    size = size_for(max_keys, wanted, tile);
  }
  int64_t partitions = std::max<int64_t>(ceil_div(max_keys, size), 1);
  if (batch_invariant)
    partitions = batch_invariant_split(max_keys, tile, fixed_partition_size).partitions;
  else if (partitions == 1)
    size = size_for(max_keys, 1, tile);  // unsplit: the whole key range

  if (size > INT32_MAX)  // only when the key range is within a tile of 2^31
    return spec::out_of_range("max_pages_per_seq " + std::to_string(problem.max_pages_per_seq) +
                              " x page_size " + std::to_string(problem.page_size) + ": " +
                              rules.kernels + " need the key range plus a tile below 2^31");
  const int64_t items = int64_t{problem.batch} * problem.num_kv_heads * row_tiles * partitions;
  if (rules.items_below_2_31 && items > INT32_MAX)
    return spec::out_of_range("batch " + std::to_string(problem.batch) + " x num_kv_heads " +
                              std::to_string(problem.num_kv_heads) + " x " +
                              std::to_string(partitions) + " partitions: more than 2^31 - 1 blocks");
  Plan out;
  out.problem = problem;
  out.tile_keys = static_cast<int32_t>(tile);
  out.partition_size = static_cast<int32_t>(size);
  out.num_partitions = static_cast<int32_t>(partitions);  // <= key range / tile
  out.rows_per_item = static_cast<int32_t>(rows_per_item);
  out.workers = std::max<int32_t>(device.multiprocessors, 1);
  if (partitions > 1 && !rules.workspace(partitions, row_tiles, &out.workspace_bytes))
    return spec::out_of_range("workspace of " + std::to_string(partitions) +
                              " partitions: more than 2^63 bytes; give fewer partitions");
  out.variant = rules.variant + "/d" + std::to_string(problem.head_dim) + "/tile" +
                std::to_string(tile) + "/rows" + std::to_string(rows_per_item) +
                (partitions > 1 ? "/split" : "/direct") + (batch_invariant ? "/invariant" : "");
  return out;
}

}  // namespace pacts::kernels::config
