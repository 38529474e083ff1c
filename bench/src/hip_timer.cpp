// Timing of the HIP kernels on one GPU: every variant's decode() is captured once per
// shape into a graph on this timer's stream, and each replay is timed by device events recorded
// on that stream right around it: the merge kernel of a split plan is part of the graph, hence of
// the time. Before every replay (outside the events) the L2 is flushed by a memset of a buffer
// far larger than it, as the peers were measured (docs/bench.md). Inputs are
// written on the device by fill.h's rule; block tables and context lengths come from the host.
// The ceilings, a device-to-device copy and a read-only kernel over a large buffer, are measured
// the same way in the same process. Compiled as device code (CUDA on NVIDIA); the kernels run in
// their own library (the gated one, linked, and the unsafe one, loaded), both on this device's
// primary context, so this module's stream and events serve them.
#include "fill.h"
#include "hip_kernels.h"
#include "internal.h"
#include "platform/gpu.h"

#include <pacts/spec/validate.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <initializer_list>
#include <tuple>
#include <utility>

namespace pacts::bench {
namespace {

__global__ void fill_inputs(uint8_t* dst, uint64_t elements, pacts_format format, uint64_t seed) {
  const int eb = input_element_bytes(format);
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < elements;
       i += uint64_t{gridDim.x} * blockDim.x)
    store_input(dst + i * eb, format, seed, i);
}

// Reads every 16 bytes of `src` once. The XOR of what a thread read is stored only when it equals
// a value the data never produces (src is filled with 0x01 bytes), so no load can be elided and
// nothing is written.
__global__ void read_only(const uint4* src, uint64_t n, uint32_t* never) {
  uint32_t acc = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0xDEADBEEFu) never[0] = acc;
}

// A device allocation released on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_) (void)hipFree(p_);
  }
  spec::Status allocate(uint64_t bytes) {
    bytes_ = bytes;
    if (bytes == 0) return spec::Status::ok();
    PACTS_GPU_CHECK(hipMalloc(&p_, bytes));
    return spec::Status::ok();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }
  uint64_t bytes() const { return bytes_; }
  pacts_view view() const { return {p_, bytes_}; }

 private:
  void* p_ = nullptr;
  uint64_t bytes_ = 0;
};

// A captured graph and its executable, destroyed on scope exit.
struct Captured {
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;
  ~Captured() {
    if (exec) (void)hipGraphExecDestroy(exec);
    if (graph) (void)hipGraphDestroy(graph);
  }
};

constexpr int kFillBlocks = 2048, kThreads = 256;

class HipTimer final : public Timer {
 public:
  HipTimer(int32_t ordinal, kernels::DeviceInfo device, std::vector<HipKernels> kernels,
           std::vector<std::string> notes)
      : ordinal_(ordinal), device_(std::move(device)), kernels_(std::move(kernels)),
        notes_(std::move(notes)) {}
  ~HipTimer() override {
    if (start_) (void)hipEventDestroy(start_);
    if (stop_) (void)hipEventDestroy(stop_);
    if (stream_) (void)hipStreamDestroy(stream_);
  }

  spec::Status init() {
    PACTS_GPU_CHECK(hipSetDevice(ordinal_));
    PACTS_GPU_CHECK(hipStreamCreateWithFlags(&stream_, hipStreamNonBlocking));
    PACTS_GPU_CHECK(hipEventCreate(&start_));
    PACTS_GPU_CHECK(hipEventCreate(&stop_));
    int l2 = 0;
    PACTS_GPU_CHECK(hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, ordinal_));
    // At least 512 MiB (the peers' flush) and 8 times the L2.
    const uint64_t flush =
        std::max<uint64_t>(uint64_t{512} << 20, uint64_t{8} * static_cast<uint64_t>(l2));
    return flush_.allocate(flush);
  }

  std::string device() const override { return device_.name; }
  std::string driver() const override {
    // The kernel module's version where the system says it (NVIDIA on Linux), then the driver
    // API version the runtime reports.
    std::string text;
    if (std::FILE* f = std::fopen("/proc/driver/nvidia/version", "r")) {
      char line[512] = {};
      if (std::fgets(line, sizeof line, f) != nullptr) text = line;
      std::fclose(f);
      // "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  580.159.04  ...": the
      // first word after "Module" that starts with a digit and holds a dot.
      const size_t module = text.find("Module");
      std::string version;
      if (module != std::string::npos) {
        std::istringstream words(text.substr(module + 6));
        for (std::string w; words >> w;)
          if (std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos) {
            version = w;
            break;
          }
      }
      text = version;
    }
    int api = 0;
    if (hipDriverGetVersion(&api) == hipSuccess)
      text += (text.empty() ? "" : ", ") + std::string("driver API ") + std::to_string(api);
    return text;
  }
  std::string runtime() const override {
    int v = 0;
    return hipRuntimeGetVersion(&v) == hipSuccess ? "runtime " + std::to_string(v) : "";
  }
  std::string description() const override {
    return "device events around graph replays of decode (merge included), L2 flushed before "
           "each replay (" + std::to_string(flush_.bytes() >> 20) + " MiB memset)";
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
      const spec::Result<double> t = time_op([&]() -> spec::Status {
        PACTS_GPU_CHECK(
            hipMemcpyAsync(dst.data(), src.data(), c.bytes, hipMemcpyDeviceToDevice, stream_));
        return spec::Status::ok();
      }, it);
      if (!t) return t.status();
      if (it >= 0) copy.push_back(t.value());
      const spec::Result<double> r = time_op([&]() -> spec::Status {
        hipLaunchKernelGGL(read_only, dim3(device_.multiprocessors * 8), dim3(kThreads), 0,
                           stream_, reinterpret_cast<const uint4*>(src.data()), n,
                           reinterpret_cast<uint32_t*>(never.data()));
        PACTS_GPU_CHECK(hipGetLastError());
        return spec::Status::ok();
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

  std::vector<Measurement> time(const Shape& shape, const Options& o) override {
    std::vector<Measurement> out;
    const pacts_problem p = make_problem(shape);
    Inputs in;
    const spec::Status uploaded = upload(shape, p, o.data_seed, in);
    for (const HipKernels& k : kernels_) {
      std::vector<double> samples;
      kernels::Plan plan;
      spec::Status status = uploaded ? time_variant(k, p, in, o, samples, plan) : uploaded;
      out.push_back(Measurement{k.variant, std::move(status), std::move(samples), std::move(plan)});
    }
    return out;
  }

 private:
  struct Inputs {
    DeviceBuffer q, k, v, k_scale, v_scale, block_table, context_lens, sinks, out, error_word;
    pacts_buffers buffers{};
  };

  spec::Status fill(DeviceBuffer& b, int byte) {
    PACTS_GPU_CHECK(hipMemsetAsync(b.data(), byte, b.bytes(), stream_));
    return spec::Status::ok();
  }

  spec::Status fill_with(DeviceBuffer& b, pacts_format f, uint64_t seed) {
    if (b.bytes() == 0) return spec::Status::ok();
    hipLaunchKernelGGL(fill_inputs, dim3(kFillBlocks), dim3(kThreads), 0, stream_, b.data(),
                       b.bytes() / input_element_bytes(f), f, seed);
    PACTS_GPU_CHECK(hipGetLastError());
    return spec::Status::ok();
  }

  // The device inputs of a shape: the same values as make_host_inputs (fill.h, same seeds).
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
    const std::vector<int32_t> table = block_table(p, seed);
    const std::vector<int32_t> lens = context_lengths(shape, seed);
    PACTS_GPU_CHECK(hipMemcpy(in.block_table.data(), table.data(), e.block_table,
                              hipMemcpyHostToDevice));
    PACTS_GPU_CHECK(hipMemcpy(in.context_lens.data(), lens.data(), e.context_lens,
                              hipMemcpyHostToDevice));
    PACTS_GPU_CHECK(hipStreamSynchronize(stream_));
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
    PACTS_GPU_CHECK(hipMemsetAsync(flush_.data(), iteration & 0xFF, flush_.bytes(), stream_));
    PACTS_GPU_CHECK(hipEventRecord(start_, stream_));
    if (spec::Status s = op(); !s) return s;
    PACTS_GPU_CHECK(hipEventRecord(stop_, stream_));
    PACTS_GPU_CHECK(hipEventSynchronize(stop_));
    float ms = 0;
    PACTS_GPU_CHECK(hipEventElapsedTime(&ms, start_, stop_));
    return 1e3 * static_cast<double>(ms);
  }

  // decode() captured on this timer's stream into `g`: a DeviceError when the runtime cannot
  // capture it, decode()'s refusal as it is.
  spec::Status capture(const HipKernels& k, const kernels::Plan& plan, const Inputs& in,
                       uint32_t* error_word, DeviceBuffer& ws, Captured& g) {
    // Relaxed: decode() may raise a kernel's shared-memory limit (not a stream operation) while
    // the stream is captured.
    PACTS_GPU_CHECK(hipStreamBeginCapture(stream_, hipStreamCaptureModeRelaxed));
    const spec::Status captured =
        k.decode(plan, in.buffers, error_word, ws.data(), ws.bytes(), stream_);
    const hipError_t ended = hipStreamEndCapture(stream_, &g.graph);
    if (!captured) return captured;
    PACTS_GPU_CHECK(ended);
    PACTS_GPU_CHECK(hipGraphInstantiateWithFlags(&g.exec, g.graph, 0));
    return spec::Status::ok();
  }

  spec::Status time_variant(const HipKernels& k, const pacts_problem& p, Inputs& in,
                            const Options& o, std::vector<double>& samples_us,
                            kernels::Plan& timed_plan) {
    if (spec::Status s = k.select_device(ordinal_); !s) return s;
    spec::Result<kernels::Plan> made = k.plan(p, device_, 0, o.partitions);
    if (!made) return made.status();
    const kernels::Plan& plan = made.value();
    timed_plan = plan;
    DeviceBuffer ws;
    if (spec::Status s = ws.allocate(kernels::workspace_size(plan)); !s) return s;
    PACTS_GPU_CHECK(hipMemsetAsync(in.error_word.data(), 0, 4, stream_));
    uint32_t* error_word = reinterpret_cast<uint32_t*>(in.error_word.data());
    // One call outside the capture loads the kernels' module and sets their attributes.
    if (spec::Status s = k.decode(plan, in.buffers, error_word, ws.data(), ws.bytes(), stream_); !s)
      return s;
    PACTS_GPU_CHECK(hipStreamSynchronize(stream_));
    Captured g;
    const spec::Status graph = capture(k, plan, in, error_word, ws, g);
    if (!graph && graph.code() != spec::Code::kDeviceError) return graph;
    // Should a runtime refuse to capture, the row is still timed, by direct launches (which add
    // the launch latency a graph hides), and says so.
    if (!graph) {
      (void)hipGetLastError();  // the failed capture's error is not this module's next call's
      timed_plan.variant += " [direct launches: " + graph.message() + "]";
    }
    const auto replay = [&]() -> spec::Status {
      if (!g.exec) return k.decode(plan, in.buffers, error_word, ws.data(), ws.bytes(), stream_);
      PACTS_GPU_CHECK(hipGraphLaunch(g.exec, stream_));
      return spec::Status::ok();
    };
    // Profilers started with collection off (ncu --profile-from-start off) see the timed calls
    // only, not the gate's.
    PACTS_GPU_CHECK(hipProfilerStart());
    for (int32_t it = -o.warmup; it < o.repeats; ++it) {
      const spec::Result<double> t = time_op(replay, it);
      if (!t) return t.status();
      if (it >= 0) samples_us.push_back(t.value());
    }
    PACTS_GPU_CHECK(hipProfilerStop());
    std::vector<uint8_t> host_out(in.out.bytes());
    uint32_t word = 0;
    PACTS_GPU_CHECK(
        hipMemcpy(host_out.data(), in.out.data(), host_out.size(), hipMemcpyDeviceToHost));
    PACTS_GPU_CHECK(hipMemcpy(&word, error_word, 4, hipMemcpyDeviceToHost));
    return k.check_output ? check_timed_output(p, host_out, word) : spec::Status::ok();
  }

  int32_t ordinal_;
  kernels::DeviceInfo device_;
  std::vector<HipKernels> kernels_;
  std::vector<std::string> notes_;
  hipStream_t stream_ = nullptr;
  hipEvent_t start_ = nullptr, stop_ = nullptr;
  DeviceBuffer flush_;
};

}  // namespace

spec::Result<std::unique_ptr<Timer>> make_hip_timer(int32_t ordinal, const Options& options) {
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
