// Timing of the host kernels (pacts/host.h): std::chrono::steady_clock around each decode call,
// the caches flushed before each by writing a buffer larger than the last-level cache, so every
// call reads its K/V from memory as a GPU call does after an L2 flush.
#include "internal.h"

#include <pacts/backends/plugin.h>
#include <pacts/host.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace pacts::bench {
namespace {

uint64_t flush_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  // Twice the last-level cache, within [8 MiB, 1 GiB] (a cloud VM may report the whole host's).
  if (l3 <= 0) return uint64_t{64} << 20;
  return std::clamp<uint64_t>(2 * static_cast<uint64_t>(l3), uint64_t{8} << 20, uint64_t{1} << 30);
}

// Runs f(thread, begin, end) over [0, n) split among `threads` threads.
template <class F>
void parallel(int32_t threads, uint64_t n, F f) {
  std::vector<std::thread> pool;
  const uint64_t step = (n + threads - 1) / threads;
  for (int32_t t = 0; t < threads; ++t) {
    const uint64_t lo = std::min(n, t * step), hi = std::min(n, lo + step);
    pool.emplace_back([=] { f(t, lo, hi); });
  }
  for (std::thread& t : pool) t.join();
}

double since_us(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

class HostTimer final : public Timer {
 public:
  explicit HostTimer(int32_t threads)
      : device_(kernels::host::device(threads)), flush_(flush_bytes()) {}

  std::string device() const override { return device_.name; }
  std::string description() const override {
    return "std::chrono::steady_clock around each host decode call (" +
           std::to_string(device_.multiprocessors) + " threads); caches flushed before each (" +
           std::to_string(flush_.size() >> 20) + " MiB written)";
  }
  double datasheet_tbs() const override { return 0; }
  std::vector<std::string> variants() const override { return {"safe"}; }

  spec::Result<Ceilings> ceilings(const Options& o) override {
    Ceilings c;
    c.bytes = o.ceiling_bytes ? o.ceiling_bytes : uint64_t{256} << 20;
    const uint64_t words = c.bytes / 8;
    std::vector<uint64_t> src(words, 1), dst(words, 0);
    std::vector<uint64_t> sums(static_cast<size_t>(device_.multiprocessors), 0);
    const int32_t t = device_.multiprocessors;
    std::vector<double> copy, read;
    for (int32_t it = -o.warmup; it < o.repeats; ++it) {
      flush();
      auto t0 = std::chrono::steady_clock::now();
      parallel(t, words, [&](int32_t, uint64_t lo, uint64_t hi) {
        std::memcpy(dst.data() + lo, src.data() + lo, (hi - lo) * 8);
      });
      if (it >= 0) copy.push_back(since_us(t0));
      flush();
      t0 = std::chrono::steady_clock::now();
      parallel(t, words, [&](int32_t thread, uint64_t lo, uint64_t hi) {
        uint64_t s = 0;
        for (uint64_t i = lo; i < hi; ++i) s += src[i];
        sums[static_cast<size_t>(thread)] = s;
      });
      if (it >= 0) read.push_back(since_us(t0));
    }
    c.copy = statistics(copy);
    c.read = statistics(read);
    c.copy_tbs = 2.0 * c.bytes / (c.copy.median_us * 1e-6) / 1e12;  // read + write bytes
    c.read_tbs = 1.0 * c.bytes / (c.read.median_us * 1e-6) / 1e12;
    if (std::all_of(sums.begin(), sums.end(), [](uint64_t s) { return s == 0; }) || dst[0] != 1)
      return spec::Status(spec::Code::kInternal, "host ceiling probes computed nothing");
    return c;
  }

  std::vector<Measurement> time(const Shape& shape, const Options& o,
                                const std::vector<Beside>& beside) override {
    HostInputs in = make_host_inputs(shape, o.data_seed);
    std::vector<Measurement> out = {time_kernels(in, o)};
    for (const Beside& b : beside) out.push_back(time_beside(in, o, b));
    return out;
  }

 private:
  Measurement time_kernels(HostInputs& in, const Options& o) {
    Measurement m;
    m.variant = "safe";
    spec::Result<kernels::Plan> plan = kernels::plan(in.problem, device_, o.partition_size, o.partitions,
                                                     o.batch_invariant);
    if (!plan) {
      m.status = plan.status();
      return {m};
    }
    m.plan = plan.value();
    const uint64_t ws_bytes = kernels::workspace_size(m.plan);
    std::vector<float> ws((ws_bytes + 3) / 4);
    uint32_t error_word = 0;
    for (int32_t it = -o.warmup; it < o.repeats; ++it) {
      flush();
      const auto t0 = std::chrono::steady_clock::now();
      const spec::Status s = kernels::host::decode(m.plan, in.buffers, &error_word, ws.data(),
                                                   ws_bytes, device_.multiprocessors);
      const double us = since_us(t0);
      if (!s) {
        m.status = s;
        return m;
      }
      if (it >= 0) m.samples_us.push_back(us);
    }
    m.status = check_timed_output(in.problem, in.out, error_word);
    return m;
  }

  // A host-memory plugin's prepared call on the same inputs, timed as the kernels are; its
  // output starts as NaN bytes, so a call that writes nothing fails the output check.
  Measurement time_beside(HostInputs& in, const Options& o, const Beside& b) {
    Measurement m;
    m.variant = b.variant;
    if (b.child) {  // spec/process.md §6: the child times its own calls
      ChildTimed call(*b.backend, in, flush_.size());
      m.plan = call.plan();
      for (int32_t it = -o.warmup; it < o.repeats && call.status(); ++it) {
        const spec::Result<double> us = call.sample();
        if (!us) {
          m.status = us.status();
          return m;
        }
        if (it >= 0) m.samples_us.push_back(us.value());
      }
      m.status = call.status();
      return m;
    }
    if (b.device_memory) {
      m.status = spec::not_supported("its timed calls take device memory: time it beside a GPU "
                                     "target (--backend hip)");
      return m;
    }
    std::fill(in.out.begin(), in.out.end(), uint8_t{0xFF});
    spec::Result<backends::PreparedCall> call = backends::prepare_timed_call(
        *b.backend, in.problem, in.buffers,
        reinterpret_cast<const int32_t*>(in.block_table.data()),
        reinterpret_cast<const int32_t*>(in.context_lens.data()));
    if (!call) {
      m.status = call.status();
      return m;
    }
    m.plan = plan_of(call.value().plan());
    for (int32_t it = -o.warmup; it < o.repeats; ++it) {
      flush();
      const auto t0 = std::chrono::steady_clock::now();
      const spec::Status s = call.value().enqueue(nullptr);
      const double us = since_us(t0);
      if (!s) {
        m.status = s;
        return m;
      }
      if (it >= 0) m.samples_us.push_back(us);
    }
    m.status = check_timed_output(in.problem, in.out, call.value().device_error());
    return m;
  }

  void flush() {
    for (size_t i = 0; i < flush_.size(); i += 64) flush_[i] = static_cast<uint8_t>(flush_[i] + 1);
  }

  kernels::DeviceInfo device_;
  std::vector<uint8_t> flush_;
};

}  // namespace

std::unique_ptr<Timer> make_host_timer(const Options& options) {
  return std::make_unique<HostTimer>(options.host_threads);
}

}  // namespace pacts::bench
