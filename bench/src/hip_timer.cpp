// Timing of the HIP kernels on one GPU: every variant's decode() is captured once per
// shape into a graph on this timer's stream, and each replay is timed by device events recorded
// on that stream right around it: the merge kernel of a split plan is part of the graph, hence of
// the time. The variants' and the peers' replays are interleaved, one of each per round. Before
// every replay (outside the events) the L2 is flushed by a memset of a buffer
// far larger than it, as the peers were measured (docs/bench.md). Inputs are
// written on the device by the fill rule of kernels/hip/bench/bench_inputs.h; block tables and
// context lengths come from the host. The ceilings, a device-to-device copy and a read-only kernel
// over a large buffer, are measured the same way in the same process. Plain C++: the GPU
// operations are kernels/hip's (bench_timing.h, one runtime of their own); the kernels run in
// their own library (the gated one, linked, and the variants, loaded), all on this device's
// primary context, so this module's stream and events serve them.
#include "hip_kernels.h"
#include "internal.h"

#include "bench_timing.h"

#include <pacts/backends/plugin.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

namespace pacts::bench {
namespace {

using kernels::hip::timing::DeviceBuffer;
using kernels::hip::timing::Graph;
using kernels::hip::timing::Stream;
namespace gpu = kernels::hip::timing;

class HipTimer final : public Timer {
 public:
  HipTimer(int32_t ordinal, kernels::DeviceInfo device, std::vector<HipKernels> kernels,
           std::vector<std::string> notes)
      : ordinal_(ordinal), device_(std::move(device)), kernels_(std::move(kernels)),
        notes_(std::move(notes)) {}

  spec::Status init() {
    if (spec::Status s = stream_.open(ordinal_); !s) return s;
    const spec::Result<int64_t> l2 = gpu::l2_cache_bytes(ordinal_);
    if (!l2) return l2.status();
    // At least 512 MiB (the peers' flush) and 8 times the L2.
    const uint64_t flush =
        std::max<uint64_t>(uint64_t{512} << 20, uint64_t{8} * static_cast<uint64_t>(l2.value()));
    return flush_.allocate(flush);
  }

  std::string device() const override { return device_.name; }
  std::string driver() const override {
    const spec::Result<int> api = gpu::driver_api_version();
    return gpu::driver_description(api ? api.value() : -1);
  }
  std::string runtime() const override {
    const spec::Result<int> v = gpu::runtime_version();
    return v ? "runtime " + std::to_string(v.value()) : "";
  }
  std::string description() const override {
    return "device events around graph replays of decode (merge included), L2 flushed before "
           "each replay (" + std::to_string(flush_.bytes() >> 20) + " MiB memset), the variants' and "
           "peers' replays interleaved";
  }
  double datasheet_tbs() const override { return datasheet_tbs_for(device_.name); }
  std::vector<std::string> notes() const override { return notes_; }
  std::vector<std::string> variants() const override {
    std::vector<std::string> v;
    for (const HipKernels& k : kernels_) v.push_back(k.variant);
    return v;
  }

  spec::Result<Ceilings> ceilings(const Options& o) override {
    Ceilings c;
    c.bytes = (o.ceiling_bytes ? o.ceiling_bytes : uint64_t{2} << 30) / 16 * 16;
    DeviceBuffer src, dst, never;
    if (spec::Status s = src.allocate(c.bytes); !s) return s;
    if (spec::Status s = dst.allocate(c.bytes); !s) return s;
    if (spec::Status s = never.allocate(4); !s) return s;
    if (spec::Status s = fill(src, 0x01); !s) return s;
    std::vector<double> copy, read;
    const uint64_t n = c.bytes / 16;
    for (int32_t it = -o.warmup; it < o.repeats; ++it) {
      const spec::Result<double> t =
          time_op([&]() { return stream_.copy(dst.data(), src.data(), c.bytes); }, it);
      if (!t) return t.status();
      if (it >= 0) copy.push_back(t.value());
      const spec::Result<double> r = time_op([&]() {
        return stream_.read_only(src.data(), n * 16, reinterpret_cast<uint32_t*>(never.data()),
                                 device_.multiprocessors * 8);
      }, it);
      if (!r) return r.status();
      if (it >= 0) read.push_back(r.value());
    }
    c.copy = statistics(copy);
    c.read = statistics(read);
    c.copy_tbs = 2.0 * c.bytes / (c.copy.median_us * 1e-6) / 1e12;  // read + write bytes
    c.read_tbs = 1.0 * c.bytes / (c.read.median_us * 1e-6) / 1e12;
    return c;
  }

  // Every variant and every backend beside them is prepared first (plan, workspace, graph); then
  // they are timed in rounds, one replay of each per round, the first of a round rotating, so
  // that none is always timed first after the inputs' upload or right after a given other one;
  // then each runs once more on an output of NaN bytes and that output is checked.
  std::vector<Measurement> time(const Shape& shape, const Options& o,
                                const std::vector<Beside>& beside) override {
    const pacts_problem p = make_problem(shape);
    Inputs in;
    const spec::Status uploaded = upload(shape, p, o.data_seed, in);
    std::vector<std::unique_ptr<Timed>> all;
    for (const HipKernels& k : kernels_) {
      auto t = std::make_unique<Timed>();
      t->variant = k.variant;
      t->status = uploaded ? prepare_variant(k, p, in, o, *t) : uploaded;
      all.push_back(std::move(t));
    }
    std::optional<HostInputs> host;  // a child's inputs: the same values, in host memory
    for (const Beside& b : beside) {
      auto t = std::make_unique<Timed>();
      t->variant = b.variant;
      if (b.child && uploaded) {
        if (!host) host.emplace(make_host_inputs(shape, o.data_seed));
        t->child = std::make_unique<ChildTimed>(*b.backend, *host, flush_.bytes());
        t->status = t->child->status();
        t->plan = t->child->plan();
      } else {
        t->status = uploaded ? prepare_beside(b, p, in, *t) : uploaded;
      }
      all.push_back(std::move(t));
    }
    const int32_t n = static_cast<int32_t>(all.size());
    // Profilers started with collection off (ncu --profile-from-start off) see the timed calls
    // only, not the gate's.
    const spec::Status started = gpu::profiler_start();
    for (int32_t it = -o.warmup; it < o.repeats && started; ++it) {
      const int32_t first = ((it % n) + n) % n;
      for (int32_t j = 0; j < n; ++j) {
        Timed& t = *all[static_cast<size_t>((first + j) % n)];
        if (!t.status) continue;
        const spec::Result<double> us = t.child ? t.child->sample() : time_op(t.replay, it);
        if (!us) t.status = us.status();
        else if (it >= 0) t.samples.push_back(us.value());
      }
    }
    const spec::Status stopped = started ? gpu::profiler_stop() : started;
    std::vector<Measurement> out;
    for (std::unique_ptr<Timed>& t : all) {
      if (t->status && !stopped) t->status = stopped;
      if (t->status && !t->child) t->status = checked(p, in, *t);  // a child's: when prepared
      out.push_back(Measurement{t->variant, std::move(t->status), std::move(t->samples),
                                std::move(t->plan)});
    }
    return out;
  }

 private:
  struct Inputs {
    DeviceBuffer q, k, v, k_scale, v_scale, block_table, context_lens, sinks, out, error_word;
    pacts_buffers buffers{};
    std::vector<int32_t> host_table, host_lens;  // the host copies a plugin's planner reads
  };

  // One timed decode of a shape: what replays it (a captured graph, or direct calls where the
  // runtime or the plugin cannot capture), its plan, and the state both keep alive.
  struct Timed {
    std::string variant;
    spec::Status status;
    kernels::Plan plan;
    std::vector<double> samples;
    std::function<spec::Status()> replay;
    std::function<uint32_t()> device_error;  // the error word of the last completed call
    bool check_output = true;
    DeviceBuffer ws;
    Graph graph;
    std::optional<backends::PreparedCall> call;
    std::unique_ptr<ChildTimed> child;  // a child of the process backend (spec/process.md §6)
  };

  spec::Status fill(DeviceBuffer& b, int byte) { return stream_.memset(b.data(), byte, b.bytes()); }

  spec::Status fill_with(DeviceBuffer& b, pacts_format f, uint64_t seed) {
    return stream_.fill_inputs(b.data(), b.bytes(), f, seed);
  }

  // The device inputs of a shape: the same values as make_host_inputs (bench_inputs.h, same
  // seeds).
  spec::Status upload(const Shape& shape, const pacts_problem& p, uint64_t seed, Inputs& in) {
    const spec::RequiredExtents e = spec::required_extents(p);
    const std::initializer_list<std::pair<DeviceBuffer*, uint64_t>> sizes = {
        {&in.q, e.q}, {&in.k, e.k}, {&in.v, e.v}, {&in.k_scale, e.k_scale},
        {&in.v_scale, e.v_scale}, {&in.block_table, e.block_table},
        {&in.context_lens, e.context_lens}, {&in.sinks, e.sinks}, {&in.out, e.out},
        {&in.error_word, uint64_t{4}}};
    for (const auto& [b, bytes] : sizes)
      if (spec::Status s = b->allocate(bytes); !s) return s;
    const pacts_format scale_format =
        p.k_scale_mode == PACTS_SCALE_MX_BLOCK ? PACTS_FORMAT_E8M0 : PACTS_FORMAT_FP32;
    // Salts as make_host_inputs: distinct seeds per buffer, so K and V differ.
    const std::initializer_list<std::tuple<DeviceBuffer*, pacts_format, uint64_t>> fills = {
        {&in.q, p.q_format, 1},          {&in.k, p.kv_format, 2},
        {&in.v, p.kv_format, 3},         {&in.k_scale, scale_format, 4},
        {&in.v_scale, scale_format, 5},  {&in.sinks, PACTS_FORMAT_FP32, 6}};
    for (const auto& [b, f, salt] : fills)
      if (spec::Status s = fill_with(*b, f, seed * 16 + salt); !s) return s;
    in.host_table = block_table(p, seed);
    in.host_lens = context_lengths(shape, seed);
    const std::vector<int32_t>& table = in.host_table;
    const std::vector<int32_t>& lens = in.host_lens;
    if (spec::Status s = gpu::to_device(in.block_table.data(), table.data(), e.block_table); !s)
      return s;
    if (spec::Status s = gpu::to_device(in.context_lens.data(), lens.data(), e.context_lens); !s)
      return s;
    if (spec::Status s = stream_.synchronize(); !s) return s;
    in.buffers.q = in.q.view();
    in.buffers.k = in.k.view();
    in.buffers.v = in.v.view();
    in.buffers.k_scale = in.k_scale.view();
    in.buffers.v_scale = in.v_scale.view();
    in.buffers.block_table = in.block_table.view();
    in.buffers.context_lens = in.context_lens.view();
    in.buffers.sinks = in.sinks.view();
    in.buffers.out = in.out.view();
    return spec::Status::ok();
  }

  // Flush, then events around `op` (returning spec::Status) on the stream; microseconds.
  template <class Op>
  spec::Result<double> time_op(Op op, int32_t iteration) {
    if (spec::Status s = stream_.memset(flush_.data(), iteration & 0xFF, flush_.bytes()); !s)
      return s;
    if (spec::Status s = stream_.record_start(); !s) return s;
    if (spec::Status s = op(); !s) return s;
    if (spec::Status s = stream_.record_stop(); !s) return s;
    return stream_.elapsed_us();
  }

  // decode() captured on this timer's stream into `g`: a DeviceError when the runtime cannot
  // capture it, decode()'s refusal as it is.
  spec::Status capture(const HipKernels& k, const kernels::Plan& plan, const Inputs& in,
                       uint32_t* error_word, DeviceBuffer& ws, Graph& g) {
    // Relaxed: decode() may raise a kernel's shared-memory limit (not a stream operation) while
    // the stream is captured.
    if (spec::Status s = stream_.begin_capture(); !s) return s;
    const spec::Status captured =
        k.decode(plan, in.buffers, error_word, ws.data(), ws.bytes(), stream_.handle());
    const spec::Status ended = stream_.end_capture(g);
    if (!captured) return captured;
    if (!ended) return ended;
    return stream_.instantiate(g);
  }

  spec::Status prepare_variant(const HipKernels& k, const pacts_problem& p, Inputs& in,
                               const Options& o, Timed& t) {
    if (spec::Status s = k.select_device(ordinal_); !s) return s;
    spec::Result<kernels::Plan> made = k.plan(p, device_, o.partition_size, o.partitions, o.batch_invariant);
    if (!made) return made.status();
    t.plan = made.value();
    const kernels::Plan& plan = t.plan;
    if (spec::Status s = t.ws.allocate(kernels::workspace_size(plan)); !s) return s;
    if (spec::Status s = stream_.memset(in.error_word.data(), 0, 4); !s) return s;
    uint32_t* error_word = reinterpret_cast<uint32_t*>(in.error_word.data());
    // One call outside the capture loads the kernels' module and sets their attributes.
    if (spec::Status s =
            k.decode(plan, in.buffers, error_word, t.ws.data(), t.ws.bytes(), stream_.handle());
        !s)
      return s;
    if (spec::Status s = stream_.synchronize(); !s) return s;
    const spec::Status graph = capture(k, plan, in, error_word, t.ws, t.graph);
    if (!graph && graph.code() != spec::Code::kDeviceError) return graph;
    // Should a runtime refuse to capture, the row is still timed, by direct launches (which add
    // the launch latency a graph hides), and says so.
    if (!graph) {
      gpu::clear_last_error();  // the failed capture's error is not this module's next call's
      t.plan.variant += " [direct launches: " + graph.message() + "]";
    }
    t.replay = [this, &k, &t, &in, error_word]() -> spec::Status {
      if (!t.graph.instantiated())
        return k.decode(t.plan, in.buffers, error_word, t.ws.data(), t.ws.bytes(), stream_.handle());
      return stream_.launch(t.graph);
    };
    t.device_error = [error_word]() -> uint32_t {
      uint32_t word = 0;
      return gpu::to_host(&word, error_word, 4) ? word : ~uint32_t{0};
    };
    t.check_output = k.check_output;
    return spec::Status::ok();
  }

  // Once more on an output of NaN bytes and a cleared error word, then the output check: a call
  // that writes nothing fails it.
  spec::Status checked(const pacts_problem& p, Inputs& in, Timed& t) {
    if (spec::Status s = stream_.memset(in.out.data(), 0xFF, in.out.bytes()); !s) return s;
    if (spec::Status s = stream_.memset(in.error_word.data(), 0, 4); !s) return s;
    if (spec::Status s = t.replay(); !s) return s;
    if (spec::Status s = stream_.synchronize(); !s) return s;
    std::vector<uint8_t> host_out(in.out.bytes());
    if (spec::Status s = gpu::to_host(host_out.data(), in.out.data(), host_out.size()); !s)
      return s;
    return t.check_output ? check_timed_output(p, host_out, t.device_error()) : spec::Status::ok();
  }

  // A device-memory plugin's prepared call (backends/plugin.h) on the same device inputs, timed
  // as the variants are: prepared once (its uploads and layout copies are not timed), enqueue()
  // captured into a graph on this timer's stream where the plugin declares it capturable (else
  // timed by direct calls, and the plan says so), the L2 flushed before each replay.
  spec::Status prepare_beside(const Beside& b, const pacts_problem& p, Inputs& in, Timed& t) {
    if (!b.device_memory)
      return spec::not_supported("its timed calls take host memory: time it beside the host "
                                 "target (--backend host)");
    if (spec::Status s = stream_.synchronize(); !s) return s;
    spec::Result<backends::PreparedCall> prepared = backends::prepare_timed_call(
        *b.backend, p, in.buffers, in.host_table.data(), in.host_lens.data());
    if (!prepared) return prepared.status();
    t.call.emplace(std::move(prepared.value()));
    backends::PreparedCall& call = *t.call;
    t.plan = plan_of(call.plan());
    void* const stream = stream_.handle();
    // One call outside any capture: the plugin's first launch may load its modules.
    if (spec::Status s = call.enqueue(stream); !s) return s;
    if (spec::Status s = stream_.synchronize(); !s) return s;
    if (b.graph_capturable) {
      if (spec::Status s = stream_.begin_capture(); !s) return s;
      const spec::Status captured = call.enqueue(stream);
      const spec::Status ended = stream_.end_capture(t.graph);
      if (!captured) return captured;
      spec::Status graph = ended ? stream_.instantiate(t.graph) : ended;
      if (!graph) {
        if (graph.code() != spec::Code::kDeviceError) return graph;
        gpu::clear_last_error();
        t.plan.variant += " [direct launches: " + graph.message() + "]";
      }
    } else {
      t.plan.variant += " [direct launches: the plugin declares no graph capture]";
    }
    t.replay = [this, &t, stream]() -> spec::Status {
      return t.graph.instantiated() ? stream_.launch(t.graph) : t.call->enqueue(stream);
    };
    t.device_error = [&t]() { return t.call->device_error(); };
    return spec::Status::ok();
  }

  int32_t ordinal_;
  kernels::DeviceInfo device_;
  std::vector<HipKernels> kernels_;
  std::vector<std::string> notes_;
  Stream stream_;
  DeviceBuffer flush_;
};

}  // namespace

spec::Result<std::unique_ptr<Timer>> make_hip_timer(const Target& target, const Options& options) {
  const int32_t ordinal = target.ordinal;
  spec::Result<kernels::DeviceInfo> device = kernels::hip::device(ordinal);
  if (!device) return device.status();
  std::vector<HipKernels> kernels = {safe_hip_kernels()};
  std::vector<std::string> notes;
  if (options.unsafe) {
    spec::Result<HipKernels> unsafe = load_variant_hip_kernels("unsafe");
    if (unsafe) {
      kernels.push_back(unsafe.value());
      notes.push_back("variant 'unsafe': kernels/hip built with PACTS_UNSAFE_UNMASKED (owned-slot "
                      "masking compiled out); never gated, timed only to show what safety costs");
    } else {
      notes.push_back(unsafe.status().message());
    }
  }
  for (const std::string& name : options.variants) {
    if (name == "safe" || (name == "unsafe" && options.unsafe)) continue;
    spec::Result<HipKernels> v = load_variant_hip_kernels(name);
    if (!v) return v.status();  // asked for by name: its absence is an error, not a note
    kernels.push_back(v.value());
    notes.push_back("variant '" + name + "': an experiment build of kernels/hip (" +
                    variant_library(name) + "); never gated: NOT QUALIFIED figures" +
                    (v.value().check_output ? "" : ", its output unchecked"));
  }
  auto timer = std::make_unique<HipTimer>(ordinal, device.value(), std::move(kernels),
                                          std::move(notes));
  if (spec::Status s = timer->init(); !s) return s;
  return std::unique_ptr<Timer>(std::move(timer));
}

}  // namespace pacts::bench
