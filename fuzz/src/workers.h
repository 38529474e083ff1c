// Which backends a campaign runs and how many workers each gets (fuzz/README.md, "Workers").
// Backends are not thread-safe, so every worker owns its backend instance (and its reference).
#pragma once

#include <pacts/conformance/backend.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pacts::fuzz {

// GPUs the hip backend can use (0 when no hip backend is registered, or on a machine without a
// GPU), and whether one is registered (pacts/conformance/registry.h).
int32_t hip_device_count();
bool hip_registered();

struct WorkerPlan {
  std::string backend;       // the name one worker's backend is made from: "host", "hip:1+...", ...
  int32_t host_threads = 0;  // threads of a host backend (0: all)
  int32_t device = -1;       // the GPU it shares with other workers (-1: none)
};

struct WorkerRequest {
  std::string backend = "auto";  // auto: hip on every GPU found, else host
  std::string devices = "all";   // hip only: "all" or "0,2"
  int32_t jobs = 0;              // host-side workers (0: hardware threads)
  int32_t workers_per_device = 0;  // hip only (0: hardware threads / devices, at least 1)
};

// The workers of a campaign, or InvalidArgument naming the option, its value and what is accepted.
spec::Result<std::vector<WorkerPlan>> plan_workers(const WorkerRequest& request);

// One worker's backend; nullptr when the name is unknown or the device cannot be used.
std::unique_ptr<conformance::Backend> make_worker_backend(const WorkerPlan& plan);

// What `--backend` accepts, for messages.
std::string accepted_backends();

// A backend that forwards to another and adds up the time spent inside it (what bounds a
// campaign: fuzz/README.md, "Throughput"). With `device_lock`, every call holds it: the workers
// of one GPU take turns on the device while their host-side work (building cases, the reference,
// comparisons) overlaps. That also keeps one worker's graph capture (PACTS-DEV-3) free of another
// worker's launches and copies on the legacy default stream, which would invalidate the capture.
class TimedBackend final : public conformance::Backend {
 public:
  TimedBackend(std::unique_ptr<conformance::Backend> inner, std::mutex* device_lock)
      : inner_(std::move(inner)), device_lock_(device_lock) {}
  ~TimedBackend() override;
  std::string name() const override { return inner_->name(); }
  std::string device() const override { return inner_->device(); }
  const conformance::Capabilities& capabilities() const override { return inner_->capabilities(); }
  const spec::NumericsProfile& profile() const override { return inner_->profile(); }
  conformance::RunResult run(const pacts_problem& problem, const pacts_buffers& buffers,
                             const conformance::PlanHint& hint) override;
  conformance::RunResult run_replayed(const pacts_problem& problem, const pacts_buffers& buffers,
                                      std::span<const int32_t> replayed,
                                      const conformance::PlanHint& hint) override;
  std::vector<conformance::RunResult> run_many(std::span<const conformance::Job> jobs) override;

  double seconds() const { return static_cast<double>(nanoseconds_.load()) * 1e-9; }
  int64_t calls() const { return calls_.load(); }

 private:
  std::unique_ptr<conformance::Backend> inner_;
  std::mutex* device_lock_;
  std::atomic<int64_t> nanoseconds_{0}, calls_{0};
};

}  // namespace pacts::fuzz
