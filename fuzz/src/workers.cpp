#include "workers.h"

#include <pacts/backends/host.h>
#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/registry.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

namespace pacts::fuzz {
namespace {

int32_t hardware_threads() {
  return static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
}

// "0,2" -> {0, 2}; each ordinal must name one of the `count` devices.
spec::Result<std::vector<int32_t>> parse_devices(const std::string& text, int32_t count) {
  std::vector<int32_t> all;
  for (int32_t i = 0; i < count; ++i) all.push_back(i);
  if (text == "all") return all;
  const std::string accepted = "expected 'all' or a comma-separated list of device ordinals 0.." +
                               std::to_string(count - 1);
  std::vector<int32_t> out;
  std::set<int32_t> seen;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    int32_t n = -1;
    const auto [p, ec] = std::from_chars(text.data() + at, text.data() + end, n);
    if (ec != std::errc() || p != text.data() + end || n < 0 || n >= count || !seen.insert(n).second)
      return spec::invalid_argument("--devices '" + text + "': " + accepted);
    out.push_back(n);
    at = end + 1;
  }
  return out;
}

}  // namespace

bool hip_registered() { return conformance::find_backend("hip") != nullptr; }

int32_t hip_device_count() {
  const conformance::BackendFactory* hip = conformance::find_backend("hip");
  return hip != nullptr && hip->device_count ? hip->device_count() : 0;
}

std::string accepted_backends() {
  std::string s = "auto";
  for (const std::string& n : conformance::backend_names()) s += ", " + n;
  if (hip_registered()) s += ", hip:N";
  return s + ", and <backend>+<fault> with a fault of the self-test (e.g. host+v_tail_leak)";
}

spec::Result<std::vector<WorkerPlan>> plan_workers(const WorkerRequest& r) {
  if (r.jobs < 0 || r.jobs > 4096)
    return spec::invalid_argument("--jobs " + std::to_string(r.jobs) +
                                  ": expected an integer from 1 to 4096 (0: hardware threads)");
  if (r.workers_per_device < 0 || r.workers_per_device > 256)
    return spec::invalid_argument("--workers-per-device " + std::to_string(r.workers_per_device) +
                                  ": expected an integer from 1 to 256 (0: automatic)");
  std::string name = r.backend;
  const int32_t gpus = hip_device_count();
  if (name == "auto") name = gpus > 0 ? "hip" : "host";
  const size_t plus = name.find('+');
  const std::string base = name.substr(0, plus);
  const std::string fault = plus == std::string::npos ? "" : name.substr(plus);

  std::vector<WorkerPlan> plans;
  if (base == "hip") {
    // One backend per device, and several workers per device so that the host-side work of a
    // check (building the case, the reference, the comparison) overlaps the GPU's.
    if (gpus == 0)
      return spec::invalid_argument(
          "--backend " + r.backend + ": no GPU " +
          (hip_registered() ? "found" : "backend in this build (configure with -DPACTS_ENABLE_CUDA=ON)") +
          "; accepted here: " + accepted_backends());
    auto devices = parse_devices(r.devices, gpus);
    if (!devices) return devices.status();
    const int32_t per = r.workers_per_device > 0
                            ? r.workers_per_device
                            : std::max<int32_t>(1, hardware_threads() /
                                                       static_cast<int32_t>(devices.value().size()));
    for (int32_t d : devices.value())
      for (int32_t k = 0; k < per; ++k) plans.push_back({"hip:" + std::to_string(d) + fault, 0, d});
    return plans;
  }
  if (r.devices != "all")
    return spec::invalid_argument("--devices '" + r.devices + "': only the hip backend has devices; "
                                  "--backend " + name + " runs on --jobs host workers");
  const int32_t jobs = r.jobs > 0 ? r.jobs : hardware_threads();
  // Workers run in parallel, so a host backend gets one thread each (its results never depend on
  // the thread count, spec/operator.md §11) unless it is the only worker.
  // A named device ("hip:1") is shared by every worker like any GPU.
  int32_t device = -1;
  if (base.rfind("hip:", 0) == 0) device = std::atoi(base.c_str() + 4);
  for (int32_t k = 0; k < jobs; ++k) plans.push_back({name, jobs > 1 ? 1 : 0, device});
  return plans;
}

std::unique_ptr<conformance::Backend> make_worker_backend(const WorkerPlan& plan) {
  const size_t plus = plan.backend.find('+');
  const std::string base = plan.backend.substr(0, plus);
  if (base != "host") return conformance::make_backend(plan.backend);
  // The host backend with this worker's thread count; a fault wraps it as make_backend would.
  auto host = backends::make_host_backend(plan.host_threads);
  if (plus == std::string::npos) return host;
  const auto fault = conformance::fault_from_name(plan.backend.substr(plus + 1));
  if (!fault) return nullptr;
  return conformance::make_fault_backend(std::move(host), *fault);
}

namespace {
// Holds the device lock (if any) for a call and adds the time inside it to the total.
class Stopwatch {
 public:
  Stopwatch(std::mutex* lock, std::atomic<int64_t>& total, std::atomic<int64_t>& calls)
      : lock_(lock ? std::unique_lock<std::mutex>(*lock) : std::unique_lock<std::mutex>()),
        total_(total) {
    ++calls;
  }
  ~Stopwatch() {
    total_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  std::unique_lock<std::mutex> lock_;
  std::atomic<int64_t>& total_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};
}  // namespace

TimedBackend::~TimedBackend() {
  // A device backend frees its device memory: not while another worker uses the device.
  std::unique_lock<std::mutex> lock =
      device_lock_ ? std::unique_lock<std::mutex>(*device_lock_) : std::unique_lock<std::mutex>();
  inner_.reset();
}

conformance::RunResult TimedBackend::run(const pacts_problem& problem, const pacts_buffers& buffers,
                                         const conformance::PlanHint& hint) {
  Stopwatch w(device_lock_, nanoseconds_, calls_);
  return inner_->run(problem, buffers, hint);
}

conformance::RunResult TimedBackend::run_replayed(const pacts_problem& problem,
                                                  const pacts_buffers& buffers,
                                                  std::span<const int32_t> replayed,
                                                  const conformance::PlanHint& hint) {
  Stopwatch w(device_lock_, nanoseconds_, calls_);
  return inner_->run_replayed(problem, buffers, replayed, hint);
}

std::vector<conformance::RunResult> TimedBackend::run_many(std::span<const conformance::Job> jobs) {
  Stopwatch w(device_lock_, nanoseconds_, calls_);
  return inner_->run_many(jobs);
}

}  // namespace pacts::fuzz
