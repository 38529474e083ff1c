// pacts kernels: the public API of the paged-attention decode kernels. This is the only header a
// user of the kernels includes. The problem is described by the spec's C-compatible descriptor
// (spec/include/pacts/problem.h); the operator is spec/operator.md.
//
//   auto p = pacts::kernels::plan(problem, device);          // host only, no device access
//   std::vector<std::byte> ws(pacts::kernels::workspace_size(p.value()));
//   pacts::kernels::decode(p.value(), buffers, error_word, ws.data(), ws.size(), stream);
//
// decode() neither allocates nor synchronises, so it can be captured in a CUDA/HIP graph and
// replayed after the context lengths (device memory) change: the plan depends on the shape only,
// never on the context lengths.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/status.h>

#include <cstdint>
#include <string>

namespace pacts::kernels {

// Where a plan will run. For the host backend, `multiprocessors` is the number of worker threads
// the plan should keep busy; results never depend on it (spec/operator.md §11).
struct DeviceInfo {
  std::string name;
  int32_t multiprocessors = 1;
  int32_t warp_size = 32;
  bool is_host = true;
  // The GPU's architecture: gcnArchName on AMD ("gfx942:sramecc+:xnack-"), "sm_XY" on NVIDIA,
  // empty for the host. The HIP numerics profile depends on it on AMD (hip.h profile()).
  std::string arch;
  // GPUs: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi's form), the driver API and runtime
  // versions as the runtime reports them ("13000"); empty for the host.
  std::string uuid, driver, runtime;
};

// The UUID form nvidia-smi prints, from the device's 16 bytes.
inline std::string format_gpu_uuid(const unsigned char (&b)[16]) {
  static const char* const kHex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += kHex[b[i] >> 4];
    s += kHex[b[i] & 15];
  }
  return s;
}

// The work split (spec/operator.md §11: for a fixed plan the output is bitwise reproducible).
//
// The algorithm both backends run: every sequence's key range [0, max_pages_per_seq * page_size)
// is cut into partitions of `partition_size` keys (a multiple of `tile_keys`); a work item is
// (sequence, KV head, partition, row tile) and computes, for the G * L query rows of that KV head
// in the row tile, the logits, the online softmax and P.V over the partition's visible keys,
// storing a partial (max, sum, accumulator) in the workspace; a merge combines the partials of
// each row into the output and the LSE. With one partition the work item writes the output
// directly and no workspace is used. Partitions past a sequence's context are empty and merge as
// nothing, which is what lets a captured graph replay with new context lengths.
//
// Query rows of one KV head are numbered r = i * G + g (query token i, head h = kv_head * G + g):
// rows of one token are adjacent, so a row tile shares one causal/window mask as far as possible.
//
// The workspace (num_partitions > 1 only) holds, for every (sequence, KV head, partition, row)
// with index e = ((b * Hkv + kv_head) * num_partitions + z) * (G * L) + r:
//   float acc[E][D]  at byte 0            (written only for partitions the row has keys in)
//   float m[E]       after acc            (running max; -inf when the row has no key there)
//   float l[E]       after m              (sum of e^(s - m); 0 when the row has no key there)
// E = B * Hkv * num_partitions * G * L. It must be aligned to 4 bytes. Its prior contents never
// matter: the merge reads a partial only where the masks (context length, L, W) say the row has
// keys in that partition, and every such partial is written by the same call.
struct Plan {
  pacts_problem problem{};       // the problem this plan was made for (validated)
  int32_t tile_keys = 0;         // keys per tile (the unit of masking and of P.V)
  int32_t partition_size = 0;    // keys per partition; when unsplit, the whole key range
                                 // max_pages_per_seq * page_size rounded up to a tile (>= 1 tile)
  int32_t num_partitions = 1;    // partitions per sequence (for the longest possible context)
  int32_t rows_per_item = 0;     // query rows (of G * L) per work item
  int32_t workers = 1;           // DeviceInfo::multiprocessors the plan was made for (the host's
                                 // default thread count); never changes the result
  uint64_t workspace_bytes = 0;  // partials: (max, sum) and D floats per row and partition
  std::string variant;           // the kernel variant the plan selects (for reports)
};

// Chooses the plan. `fixed_partition_size` > 0 forces keys per partition (rounded up to a
// multiple of the tile); `fixed_partitions` > 0 forces the number of partitions (the partition
// size is the key range divided by it, rounded up to a tile, so fewer partitions may result).
// Giving both, or a negative value, is InvalidArgument. One partition is the unsplit plan.
// Validates the problem (spec::validate_problem with the backend's requirements): a refusal is
// returned as is. A workspace beyond 2^63 bytes is OutOfRange.
//
// The automatic choice depends on the shape and device.multiprocessors only: a problem with
// enough (sequence, KV head, row tile) units to keep every worker busy, or a short key range,
// runs unsplit; otherwise the key range is split into enough partitions of at least a minimum
// length to give every worker several items (kernels/src/plan_rules.h: the one plan of both
// backends, with each one's rules and constants).
//
// `batch_invariant` (spec/operator.md §11.1): partitions of a constant size, as many as the key
// range needs, whatever the batch, the other sequences and the device: `fixed_partition_size`
// keys when given, else 1024 (rounded up to a tile); a sequence's output is then bitwise the same
// alone and in any batch (unsplit alone, its one partial merged with empty ones in a batch with
// a wider block table: the same bits). Giving it with `fixed_partitions` is InvalidArgument.
spec::Result<Plan> plan(const pacts_problem& problem, const DeviceInfo& device,
                        int32_t fixed_partition_size = 0, int32_t fixed_partitions = 0,
                        bool batch_invariant = false);

uint64_t workspace_size(const Plan& plan);

}  // namespace pacts::kernels
