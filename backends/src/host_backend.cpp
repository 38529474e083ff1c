// The "host" backend: pacts::kernels::host behind the conformance Backend interface.
//
// Capabilities: everything the spec defines (every format, scale mode, layout including x-packed
// K and dim-major V, head dim, page size, L, G, sinks, window, soft-cap, LSE); deterministic;
// honours plan hints (split plans). The numerics profile is host::profile().
//
// The workspace is the adapter's, reused across runs. Before every run it is filled with a
// poison pattern that alternates between runs (NaN bytes, then a large finite value), so that a
// kernel reading a partial it did not write in the same call would change its output between
// two runs of one plan (PACTS-META-2, PACTS-POISON-5) or make it NaN (PACTS-ACC-1).
#include <pacts/backends/host.h>
#include <pacts/conformance/registry.h>
#include <pacts/decode.h>
#include <pacts/host.h>

#include "kernel_adapter.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace pacts::backends {
namespace {

using conformance::Backend;
using conformance::Capabilities;
using conformance::RunResult;

class HostBackend final : public Backend {
 public:
  explicit HostBackend(int32_t threads)
      : device_(kernels::host::device(threads)), profile_(kernels::host::profile()) {
    caps_ = Capabilities::everything();
    caps_.chunked_layouts = true;
    caps_.sinks = caps_.window = caps_.softcap = caps_.lse = true;
    caps_.deterministic = true;
    caps_.split_plans = true;
    caps_.batch_invariant = true;
    caps_.plan_replay = true;
    caps_.requirements = kernels::host::requirements();
  }

  std::string name() const override { return "host"; }
  std::string device() const override { return device_.name; }
  const Capabilities& capabilities() const override { return caps_; }
  const spec::NumericsProfile& profile() const override { return profile_; }

  RunResult run(const pacts_problem& problem, const pacts_buffers& buffers,
                const PlanHint& hint) override {
    return run_plan(problem, buffers, hint, {});
  }

  // One plan and one workspace for both runs: the plan depends on the shape only, so new context
  // lengths need no new plan (what lets a GPU graph be replayed, PACTS-DEV-3).
  RunResult run_replayed(const pacts_problem& problem, const pacts_buffers& buffers,
                         std::span<const int32_t> replayed_context_lens,
                         const PlanHint& hint) override {
    return run_plan(problem, buffers, hint, replayed_context_lens);
  }

 private:
  RunResult run_plan(const pacts_problem& problem, const pacts_buffers& buffers,
                     const PlanHint& hint, std::span<const int32_t> replay) {
    RunResult result;
    const FixedSplit split = fixed_split(hint);
    spec::Result<kernels::Plan> plan =
        kernels::plan(problem, device_, split.partition_size, split.partitions,
                      split.batch_invariant);
    if (!plan) {
      result.status = plan.status();
      return result;
    }
    const kernels::Plan& chosen = plan.value();
    const uint64_t bytes = kernels::workspace_size(chosen);
    if (workspace_.size() * sizeof(float) < bytes) workspace_.resize((bytes + 3) / 4);
    uint32_t error_word = 0;
    const auto decode_once = [&] {
      const uint8_t fill = (runs_++ % 2 == 0) ? 0xFF : 0x5A;  // NaN floats, then ~1.5e16
      if (bytes > 0) std::memset(workspace_.data(), fill, static_cast<size_t>(bytes));
      error_word = 0;
      return kernels::host::decode(chosen, buffers, &error_word,
                                   bytes ? workspace_.data() : nullptr, bytes);
    };
    result.status = decode_once();
    if (result.status.is_ok() && !replay.empty()) {
      if (replay.size() * sizeof(int32_t) > buffers.context_lens.bytes) {
        result.status = spec::invalid_argument("replayed_context_lens: more entries than the batch");
        return result;
      }
      std::memcpy(buffers.context_lens.data, replay.data(), replay.size() * sizeof(int32_t));
      result.status = decode_once();
    }
    result.device_error = error_word;
    result.plan = plan_used(chosen);
    return result;
  }

  kernels::DeviceInfo device_;
  Capabilities caps_;
  spec::NumericsProfile profile_;
  std::vector<float> workspace_;
  uint64_t runs_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend(int32_t threads) {
  return std::make_unique<HostBackend>(threads);
}

void register_host_backend() {
  conformance::BackendFactory f;
  f.name = "host";
  f.make = [](const std::string&) { return make_host_backend(); };
  conformance::register_backend(std::move(f));
}

}  // namespace pacts::backends
