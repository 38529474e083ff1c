// What the adapters of pacts' own kernels (host_backend.cpp, hip_backend.cpp) share: a PlanHint
// as the arguments of the kernels' plan(), and the chosen plan as the PlanUsed a RunResult reports.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/decode.h>

#include <cstdint>

namespace pacts::backends {

using conformance::PlanHint;
using conformance::PlanUsed;

// plan()'s fixed_partition_size, fixed_partitions (0: not fixed) and batch_invariant for a hint.
struct FixedSplit {
  int32_t partition_size = 0;
  int32_t partitions = 0;
  bool batch_invariant = false;
};

inline FixedSplit fixed_split(const PlanHint& hint) {
  FixedSplit f;
  if (hint.kind == PlanHint::Kind::kPartitionSize || hint.kind == PlanHint::Kind::kBatchInvariant)
    f.partition_size = hint.value;  // batch-invariant: 0 is the backend's default size
  if (hint.kind == PlanHint::Kind::kPartitions) f.partitions = hint.value;
  f.batch_invariant = hint.kind == PlanHint::Kind::kBatchInvariant;
  return f;
}

// The plan as reported: partition_size 0 when unsplit (backend.h PlanUsed).
inline PlanUsed plan_used(const kernels::Plan& plan) {
  PlanUsed used;
  used.partition_size = plan.num_partitions > 1 ? plan.partition_size : 0;
  used.max_partitions = plan.num_partitions;
  used.variant = plan.variant;
  return used;
}

}  // namespace pacts::backends
