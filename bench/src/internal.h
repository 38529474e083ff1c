// pacts-bench internals shared by its source files: the timers (one per kind of target), the
// inputs of a shape, the bytes model and the statistics. Not installed; bench.h is the API.
#pragma once

#include <pacts/bench/bench.h>
#include <pacts/decode.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pacts::conformance {
class Backend;
struct PlanUsed;
}

namespace pacts::bench {

// The host-memory inputs of one shape: every buffer filled by fill_host() from the data seed,
// the block table a seeded permutation of the pages, the context lengths context_lengths().
struct HostInputs {
  pacts_problem problem{};
  std::vector<uint8_t> q, k, v, k_scale, v_scale, block_table, context_lens, sinks, out;
  pacts_buffers buffers{};  // views of the vectors above
};
HostInputs make_host_inputs(const Shape& shape, uint64_t seed);

// Fills n bytes at `dst` with the codes of `format` by the rule of kernels/hip/bench/bench_inputs.h
// (n a multiple of the element size).
void fill_host(uint8_t* dst, uint64_t n, pacts_format format, uint64_t seed);

// The block table of a shape (int32, B x max_pages_per_seq): a seeded permutation of the pages.
std::vector<int32_t> block_table(const pacts_problem& problem, uint64_t seed);

// What one timed variant measured on one shape.
struct Measurement {
  std::string variant;           // "safe" / "unsafe"
  spec::Status status;           // Ok, or NotSupported / DeviceError / ... for this shape
  std::vector<double> samples_us;
  kernels::Plan plan;            // the plan that was timed
};

// A backend timed beside the target (Options::beside), gated: a plugin with timed calls, or a
// child of the process backend that declares them (spec/process.md §6).
struct Beside {
  std::string variant;                      // "peer:<name>"
  conformance::Backend* backend = nullptr;  // a plugin backend (backends/plugin.h) or a child
  bool device_memory = false;               // its timed calls take device memory
  bool graph_capturable = false;
  bool child = false;  // a process backend: it holds its own inputs and times itself
};

// A child's timed call (spec/process.md §6) on the host inputs of a shape: prepared in the child
// (which loads them onto its own device), its untimed first output checked as the variants' are;
// then `sample()` asks it for one timed call. Released on destruction.
class ChildTimed {
 public:
  ChildTimed(conformance::Backend& child, HostInputs& in, uint64_t flush_bytes);
  ~ChildTimed();
  ChildTimed(const ChildTimed&) = delete;
  ChildTimed& operator=(const ChildTimed&) = delete;
  const spec::Status& status() const { return status_; }
  const kernels::Plan& plan() const { return plan_; }
  spec::Result<double> sample();

 private:
  conformance::Backend& child_;
  spec::Status status_;
  kernels::Plan plan_;
  bool prepared_ = false;
};

// Times shapes on one device. Implementations: the host kernels (std::chrono) and the HIP
// kernels (device events around graph replays), with one or more variants of the kernels.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual std::string device() const = 0;
  virtual std::string description() const = 0;   // how time is taken, for the report
  virtual std::string driver() const { return ""; }   // GPU driver version, "" on the host
  virtual std::string runtime() const { return ""; }  // GPU runtime version, "" on the host
  virtual double datasheet_tbs() const = 0;      // 0 = unknown
  virtual std::vector<std::string> notes() const { return {}; }
  virtual std::vector<std::string> variants() const = 0;  // "safe" first, then "unsafe" if any
  virtual spec::Result<Ceilings> ceilings(const Options& options) = 0;
  // One measurement per variant of this timer, in a fixed order ("safe" first), then one per
  // backend of `beside` (in its order) on the same inputs: the plugin's prepared call timed by
  // the same method, its output checked as the variants' are. The GPU timer interleaves their
  // replays (docs/bench.md, "Method").
  virtual std::vector<Measurement> time(const Shape& shape, const Options& options,
                                        const std::vector<Beside>& beside) = 0;
};

// The plan a plugin reported (partitions, variant) as the kernels::Plan the rows and the bytes
// model read.
kernels::Plan plan_of(const conformance::PlanUsed& used);

std::unique_ptr<Timer> make_host_timer(const Options& options);
// The GPU of a "hip" target: hip_timer.cpp where the build has the HIP kernels (kernels/hip),
// else no_hip_timer.cpp's NotSupported.
spec::Result<std::unique_ptr<Timer>> make_hip_timer(const Target& target, const Options& options);

// Median (the mean of the middle two for an even count), min and max.
Stats statistics(const std::vector<double>& samples_us);

// Bytes one call moves (bench.h Bytes) for the given context lengths and plan.
Bytes bytes_moved(const pacts_problem& problem, const std::vector<int32_t>& context_lens,
                  const kernels::Plan& plan);

// Datasheet memory bandwidth of a device by name (TB/s), 0 when unknown.
double datasheet_tbs_for(const std::string& device_name);

}  // namespace pacts::bench

namespace pacts::bench {

// After timing: the output of the last timed call must be finite everywhere and the error word
// zero (finite inputs, valid tables): a timed call that computes garbage is an error, not a row.
spec::Status check_timed_output(const pacts_problem& problem, const std::vector<uint8_t>& out,
                                uint32_t error_word);

}  // namespace pacts::bench
