// pacts::kernels::plan: the work split of pacts/decode.h. The plan depends on the problem's shape
// and the device's multiprocessor count only, never on context lengths (device memory), so a
// captured call replays correctly after they change.
#include <pacts/decode.h>
#include <pacts/spec/validate.h>

#include "src/plan_rules.h"

namespace pacts::kernels {

spec::Result<Plan> plan(const pacts_problem& problem, const DeviceInfo& device,
                        int32_t fixed_partition_size, int32_t fixed_partitions,
                        bool batch_invariant) {
  if (!device.is_host)
    return spec::not_supported("device " + device.name +
                               ": pacts::kernels::plan() plans the host kernels; a GPU takes "
                               "pacts::kernels::hip::plan() (pacts/hip.h)");
  config::PlanRules rules;
  rules.variant = "host";
  rules.kernels = "the host kernels";
  rules.requirements = config::host_requirements();
  rules.tile_keys = config::kHostTileKeys;
  rules.max_rows_per_item = config::kHostMaxRowsPerItem;
  rules.automatic = [&](int64_t row_tiles, int64_t max_keys) {
    return config::host_automatic_partitions(problem, device.multiprocessors, row_tiles, max_keys);
  };
  rules.workspace = [&](int64_t partitions, int64_t, uint64_t* bytes) {
    return config::workspace_bytes_for(problem, partitions, bytes);
  };
  return config::make_plan(problem, device, fixed_partition_size, fixed_partitions,
                           batch_invariant, rules);
}

uint64_t workspace_size(const Plan& plan) { return plan.workspace_bytes; }

}  // namespace pacts::kernels
