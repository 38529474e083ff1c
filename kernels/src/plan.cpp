// pacts::kernels::plan: the work split of pacts/decode.h. The plan depends on the problem's shape
// and the device's multiprocessor count only, never on context lengths (device memory), so a
// captured call replays correctly after they change.
#include <pacts/decode.h>
#include <pacts/spec/validate.h>

#include "src/plan_config.h"

#include <algorithm>
#include <string>

namespace pacts::kernels {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Keys per partition for `partitions` partitions of the key range, a whole number of tiles.
int64_t size_for(int64_t max_keys, int64_t partitions, int64_t tile) {
  return ceil_div(std::max<int64_t>(ceil_div(std::max<int64_t>(max_keys, 1), partitions), 1), tile) *
         tile;
}

// The automatic split: spec/operator.md §11 leaves it to the backend; this one keeps every worker
// busy. Units of work that exist anyway are (sequence, KV head, row tile); when there are fewer
// than kHostItemsPerWorker per worker, the key range is cut so that there are, but never into
// partitions shorter than kHostMinPartitionKeys (short contexts run unsplit) nor more than
// kHostMaxPartitions. Contexts below the key range leave trailing partitions empty: an empty
// item costs a context-length read and the row states it writes.
int64_t automatic_partitions(const pacts_problem& p, const DeviceInfo& device, int64_t row_tiles,
                             int64_t max_keys) {
  const int64_t units = int64_t{p.batch} * p.num_kv_heads * row_tiles;
  const int64_t target = config::kHostItemsPerWorker * std::max<int32_t>(device.multiprocessors, 1);
  if (units == 0 || units >= target || max_keys <= config::kHostMinPartitionKeys) return 1;
  return std::min({ceil_div(target, units), ceil_div(max_keys, config::kHostMinPartitionKeys),
                   config::kHostMaxPartitions});
}

}  // namespace

spec::Result<Plan> plan(const pacts_problem& problem, const DeviceInfo& device,
                        int32_t fixed_partition_size, int32_t fixed_partitions,
                        bool batch_invariant) {
  if (!device.is_host)
    return spec::not_supported("device " + device.name +
                               ": pacts::kernels::plan() plans the host kernels; a GPU takes "
                               "pacts::kernels::hip::plan() (pacts/hip.h)");
  if (spec::Status s = spec::validate_problem(problem, config::host_requirements()); !s) return s;
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

  const int64_t tile = config::kHostTileKeys;
  const int64_t rows = int64_t{problem.q_len} * (problem.num_q_heads / problem.num_kv_heads);
  const int64_t rows_per_item = std::min<int64_t>(rows, config::kHostMaxRowsPerItem);
  const int64_t row_tiles = ceil_div(rows, rows_per_item);
  const int64_t max_keys = int64_t{problem.max_pages_per_seq} * problem.page_size;  // <= 2^31 - 1

  int64_t size = 0;
  if (batch_invariant) {
    size = config::batch_invariant_split(max_keys, tile, fixed_partition_size).size;
  } else if (fixed_partition_size > 0) {
    size = ceil_div(fixed_partition_size, tile) * tile;
  } else {
    const int64_t wanted = fixed_partitions > 0
                               ? fixed_partitions
                               : automatic_partitions(problem, device, row_tiles, max_keys);
    size = size_for(max_keys, wanted, tile);
  }
  int64_t partitions = std::max<int64_t>(ceil_div(max_keys, size), 1);
  if (batch_invariant)
    partitions = config::batch_invariant_split(max_keys, tile, fixed_partition_size).partitions;
  else if (partitions == 1)
    size = size_for(max_keys, 1, tile);  // unsplit: the whole key range

  if (size > INT32_MAX)  // only when the key range is within a tile of 2^31
    return spec::out_of_range("max_pages_per_seq " + std::to_string(problem.max_pages_per_seq) +
                              " x page_size " + std::to_string(problem.page_size) +
                              ": the host kernels need the key range plus a tile below 2^31");
  Plan out;
  out.problem = problem;
  out.tile_keys = static_cast<int32_t>(tile);
  out.partition_size = static_cast<int32_t>(size);
  out.num_partitions = static_cast<int32_t>(partitions);  // <= key range / tile
  out.rows_per_item = static_cast<int32_t>(rows_per_item);
  out.workers = std::max<int32_t>(device.multiprocessors, 1);
  if (partitions > 1 && !config::workspace_bytes_for(problem, partitions, &out.workspace_bytes))
    return spec::out_of_range("workspace of " + std::to_string(partitions) +
                              " partitions: more than 2^63 bytes; give fewer partitions");
  out.variant = "host/d" + std::to_string(problem.head_dim) + "/tile" + std::to_string(tile) +
                "/rows" + std::to_string(rows_per_item) + (partitions > 1 ? "/split" : "/direct") +
                (batch_invariant ? "/invariant" : "");
  return out;
}

uint64_t workspace_size(const Plan& plan) { return plan.workspace_bytes; }

}  // namespace pacts::kernels
