// The "hip" backend: pacts::kernels::hip behind the conformance Backend interface, on one GPU.
//
// Capabilities: everything the spec defines (the kernels refuse only what spec::validate refuses):
// every Q, KV and output format, every scale mode (MXFP4 included), every pool layout (NHD, HND,
// x-packed K, dim-major V, padded), D 64/128/256, page sizes 8..256, L up to 16, any G, sinks, window,
// soft-cap, LSE; deterministic (fixed reduction orders); honours plan hints; replays one captured
// graph with new context lengths (PACTS-DEV-3).
// The numerics profile is pacts::kernels::hip::profile().
//
// Each run uploads every buffer, the output and LSE allocations included (so bytes the kernels
// must not write keep the caller's poison), runs, and downloads the WHOLE output and LSE
// allocations. Device copies keep the host pointers' offset modulo 256, so alignment cases reach
// the kernels as the suite built them. The workspace is filled before every run with a poison
// that alternates between runs (NaN bytes, then a large finite value), as for the host backend.
// Guard zones: every device allocation holds 4 KiB before the view (and the alignment slack) and
// 4 KiB after it, filled with a canary pattern at upload and compared after the call; a byte
// changed there fails the run with a message naming the buffer and the offset (spec/properties.md
// PACTS-EDGE-2: a write outside the declared views; compute-sanitizer cannot see a write that
// stays inside an allocation).
#include <pacts/backends/hip.h>
#include <pacts/conformance/registry.h>
#include <pacts/hip.h>

#include "guard_zones.h"
#include "kernel_adapter.h"

#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pacts::backends {
namespace {

using conformance::Backend;
using conformance::Capabilities;
using conformance::RunResult;

constexpr uint64_t kGuardBytes = 4096;

// The guard zones' canaries, those of pacts-child's host guard zones (guard_zones.h).
const std::vector<uint8_t>& canary() {
  static const std::vector<uint8_t> bytes = [] {
    std::vector<uint8_t> c(kGuardBytes + 256);
    for (size_t i = 0; i < c.size(); ++i) c[i] = detail::guard_canary(i);
    return c;
  }();
  return bytes;
}

// One device allocation of a host view, offset like the host pointer modulo 256, between two
// guard zones.
class DeviceView {
 public:
  DeviceView() = default;
  DeviceView(const DeviceView&) = delete;
  DeviceView& operator=(const DeviceView&) = delete;
  ~DeviceView() { kernels::hip::memory::release(base_); }

  spec::Status upload(const pacts_view& host) {
    view_ = {nullptr, host.bytes};
    before_ = 0;
    if (host.data == nullptr) return spec::Status::ok();
    const uint64_t offset = reinterpret_cast<uintptr_t>(host.data) % 256;
    const uint64_t need = kGuardBytes + offset + host.bytes + kGuardBytes;
    if (capacity_ < need) {
      kernels::hip::memory::release(base_);
      base_ = nullptr;
      capacity_ = 0;
      spec::Result<void*> fresh = kernels::hip::memory::allocate(need);
      if (!fresh) return fresh.status();
      base_ = static_cast<uint8_t*>(fresh.value());
      capacity_ = need;
    }
    before_ = kGuardBytes + offset;
    view_.data = base_ + before_;
    if (spec::Status s = kernels::hip::memory::to_device(base_, canary().data(), before_); !s) return s;
    if (spec::Status s = kernels::hip::memory::to_device(base_ + before_ + host.bytes, canary().data(),
                                                         kGuardBytes);
        !s)
      return s;
    if (host.bytes == 0) return spec::Status::ok();
    return kernels::hip::memory::to_device(view_.data, host.data, host.bytes);
  }

  // The guard zones after a call: a changed byte is a write outside the view `name`.
  spec::Status check_guards(const char* name) const {
    if (view_.data == nullptr) return spec::Status::ok();
    std::vector<uint8_t> zone(before_ > kGuardBytes ? before_ : kGuardBytes);
    const std::vector<uint8_t>& want = canary();
    const auto changed = [&](uint64_t n, int64_t* first, uint64_t* count) {
      *count = 0;
      for (uint64_t i = 0; i < n; ++i)
        if (zone[i] != want[i] && (*count)++ == 0) *first = static_cast<int64_t>(i);
    };
    int64_t first = 0;
    uint64_t count = 0;
    if (spec::Status s = kernels::hip::memory::to_host(zone.data(), base_, before_); !s) return s;
    changed(before_, &first, &count);
    if (count > 0)
      return spec::Status(spec::Code::kInternal,
                          std::string("hip backend: guard zone: the kernels wrote outside `") + name +
                              "`: " + std::to_string(count) + " byte(s) before its first byte, the first " +
                              std::to_string(before_ - static_cast<uint64_t>(first)) + " bytes before it");
    if (spec::Status s =
            kernels::hip::memory::to_host(zone.data(), base_ + before_ + view_.bytes, kGuardBytes);
        !s)
      return s;
    changed(kGuardBytes, &first, &count);
    if (count > 0)
      return spec::Status(spec::Code::kInternal,
                          std::string("hip backend: guard zone: the kernels wrote outside `") + name +
                              "`: " + std::to_string(count) + " byte(s) past its end, the first at +" +
                              std::to_string(first));
    return spec::Status::ok();
  }

  spec::Status download(const pacts_view& host) const {
    if (host.data == nullptr || host.bytes == 0) return spec::Status::ok();
    return kernels::hip::memory::to_host(host.data, view_.data, host.bytes);
  }

  const pacts_view& view() const { return view_; }

  // Gives back an allocation above `keep` bytes (PACTS-DEV-2's multi-GiB views must not stay
  // allocated for the cases after them).
  void trim(uint64_t keep) {
    if (capacity_ <= keep) return;
    kernels::hip::memory::release(base_);
    base_ = nullptr;
    capacity_ = 0;
    view_ = {};
  }

 private:
  uint8_t* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t before_ = 0;  // bytes of the allocation before the view (the zone and the slack)
  pacts_view view_{};
};

class HipBackend final : public Backend {
 public:
  HipBackend(kernels::DeviceInfo device, int32_t ordinal)
      : device_(std::move(device)), ordinal_(ordinal), profile_(kernels::hip::profile(device_)) {
    // Every format, scale mode and layout of the spec (fp8 and MXFP4 KV, fp8 Q, x-packed K and
    // dim-major V included).
    const Capabilities all = Capabilities::everything();
    caps_.q_formats = all.q_formats;
    caps_.kv_formats = all.kv_formats;
    caps_.out_formats = all.out_formats;
    caps_.scale_modes = all.scale_modes;
    caps_.head_dims = all.head_dims;
    caps_.min_page_size = 8;
    caps_.max_page_size = 256;
    caps_.max_q_len = 16;
    caps_.max_group = 1 << 30;  // G is a runtime value: rows are tiled 16 at a time
    caps_.chunked_layouts = true;
    caps_.sinks = caps_.window = caps_.softcap = caps_.lse = true;
    caps_.deterministic = true;
    caps_.split_plans = true;
    caps_.batch_invariant = true;
    caps_.plan_replay = true;   // CapturedDecode: one graph, replayed with new context lengths
    caps_.large_buffers = true;  // 64-bit offsets (requirements()); PACTS-DEV-2 needs ~8 GiB
    caps_.requirements = kernels::hip::requirements();
  }

  ~HipBackend() override {
    kernels::hip::memory::release(workspace_);
    kernels::hip::memory::release(error_word_);
  }

  // What --backend accepts for this GPU: "hip" for the first, "hip:N" for the others.
  std::string name() const override {
    return ordinal_ == 0 ? "hip" : "hip:" + std::to_string(ordinal_);
  }
  std::string device() const override { return device_.name; }
  std::string driver() const override { return device_.driver; }
  std::string runtime() const override { return device_.runtime; }
  std::string device_uuid() const override { return device_.uuid; }
  const Capabilities& capabilities() const override { return caps_; }
  const spec::NumericsProfile& profile() const override { return profile_; }

  RunResult run(const pacts_problem& problem, const pacts_buffers& buffers,
                const PlanHint& hint) override {
    return run_plan(problem, buffers, hint, {});
  }

  // PACTS-DEV-3: the decode is captured into a graph once and replayed twice, the second time
  // after the new context lengths were copied into the device buffer the graph reads.
  RunResult run_replayed(const pacts_problem& problem, const pacts_buffers& buffers,
                         std::span<const int32_t> replayed_context_lens,
                         const PlanHint& hint) override {
    if (replayed_context_lens.size_bytes() > buffers.context_lens.bytes) {
      RunResult result;
      result.status = spec::invalid_argument(
          "replayed_context_lens: " + std::to_string(replayed_context_lens.size()) +
          " entries, more than the context_lens view holds");
      return result;
    }
    return run_plan(problem, buffers, hint, replayed_context_lens);
  }

 private:
  RunResult run_plan(const pacts_problem& problem, const pacts_buffers& buffers,
                     const PlanHint& hint, std::span<const int32_t> replay) {
    RunResult result;
    // Validated on the caller's pointers first: the device copies are separate allocations, so
    // aliasing between the caller's buffers would be invisible after the upload.
    if (spec::Status s = spec::validate(problem, buffers, caps_.requirements); !s) {
      result.status = s;
      return result;
    }
    const FixedSplit split = fixed_split(hint);
    spec::Result<kernels::Plan> plan =
        kernels::hip::plan(problem, device_, split.partition_size, split.partitions,
                           split.batch_invariant);
    if (!plan) {
      result.status = plan.status();
      return result;
    }
    const kernels::Plan& chosen = plan.value();
    result.plan = plan_used(chosen);
    result.status = execute(chosen, buffers, &result.device_error, replay);
    return result;
  }

  spec::Status execute(const kernels::Plan& plan, const pacts_buffers& host, uint32_t* error,
                       std::span<const int32_t> replay) {
    namespace mem = kernels::hip::memory;
    if (spec::Status s = mem::select_device(ordinal_); !s) return s;
    const pacts_view* in[] = {&host.q,     &host.k,           &host.v,
                              &host.k_scale, &host.v_scale,   &host.block_table,
                              &host.context_lens, &host.sinks, &host.out, &host.lse};
    for (int n = 0; n < 10; ++n)
      if (spec::Status s = views_[n].upload(*in[n]); !s) return s;
    pacts_buffers dev;
    pacts_view* out[] = {&dev.q,     &dev.k,           &dev.v,     &dev.k_scale, &dev.v_scale,
                         &dev.block_table, &dev.context_lens, &dev.sinks, &dev.out, &dev.lse};
    for (int n = 0; n < 10; ++n) *out[n] = views_[n].view();

    const uint64_t bytes = kernels::workspace_size(plan);
    if (bytes > workspace_bytes_) {
      mem::release(workspace_);
      workspace_ = nullptr;
      workspace_bytes_ = 0;
      spec::Result<void*> fresh = mem::allocate(bytes);
      if (!fresh) return fresh.status();
      workspace_ = fresh.value();
      workspace_bytes_ = bytes;
    }
    if (error_word_ == nullptr) {
      spec::Result<void*> word = mem::allocate(sizeof(uint32_t));
      if (!word) return word.status();
      error_word_ = static_cast<uint32_t*>(word.value());
    }
    // Before every run: a fresh poison in the workspace and a clear error word.
    const auto prepare = [&]() -> spec::Status {
      const int fill = (runs_++ % 2 == 0) ? 0xFF : 0x5A;  // NaN floats, then ~1.5e16
      if (bytes > 0)
        if (spec::Status s = mem::fill(workspace_, fill, bytes); !s) return s;
      return mem::fill(error_word_, 0, sizeof(uint32_t));
    };
    void* ws = bytes ? workspace_ : nullptr;
    if (spec::Status s = prepare(); !s) return s;
    if (replay.empty()) {
      if (spec::Status s = kernels::hip::decode(plan, dev, error_word_, ws, bytes, nullptr); !s)
        return s;
    } else {
      spec::Result<kernels::hip::CapturedDecode> graph =
          kernels::hip::CapturedDecode::capture(plan, dev, error_word_, ws, bytes);
      if (!graph) return graph.status();
      if (spec::Status s = graph.value().replay(); !s) return s;
      // As a serving loop does: new lengths written in place, the same graph launched again.
      std::memcpy(host.context_lens.data, replay.data(), replay.size_bytes());
      if (spec::Status s = mem::to_device(dev.context_lens.data, replay.data(), replay.size_bytes());
          !s)
        return s;
      if (spec::Status s = prepare(); !s) return s;
      if (spec::Status s = graph.value().replay(); !s) return s;
    }
    if (spec::Status s = mem::synchronize(); !s) return s;
    if (spec::Status s = mem::to_host(error, error_word_, sizeof(uint32_t)); !s) return s;
    static constexpr const char* kNames[10] = {"q",           "k",            "v",     "k_scale",
                                               "v_scale",     "block_table",  "context_lens",
                                               "sinks",       "out",          "lse"};
    for (int n = 0; n < 10; ++n)
      if (spec::Status s = views_[n].check_guards(kNames[n]); !s) return s;
    if (spec::Status s = views_[8].download(host.out); !s) return s;
    if (spec::Status s = views_[9].download(host.lse); !s) return s;
    for (DeviceView& v : views_) v.trim(kKeepBytes);
    return spec::Status::ok();
  }

  static constexpr uint64_t kKeepBytes = uint64_t{1} << 30;

  kernels::DeviceInfo device_;
  int32_t ordinal_;
  Capabilities caps_;
  spec::NumericsProfile profile_;
  DeviceView views_[10];
  void* workspace_ = nullptr;
  uint64_t workspace_bytes_ = 0;
  uint32_t* error_word_ = nullptr;
  uint64_t runs_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_hip_backend(int32_t ordinal) {
  spec::Result<kernels::DeviceInfo> dev = kernels::hip::device(ordinal);
  if (!dev) {
    std::fprintf(stderr, "hip backend: %s\n", dev.status().to_string().c_str());
    return nullptr;
  }
  return std::make_unique<HipBackend>(dev.value(), ordinal);
}

int32_t hip_device_count() {
  // pacts/hip.h has no count: probe ordinals until the runtime refuses one (DeviceError).
  int32_t n = 0;
  while (n < 64 && kernels::hip::device(n).is_ok()) ++n;
  return n;
}

void register_hip_backend() {
  conformance::BackendFactory f;
  f.name = "hip";
  f.kind = conformance::NameKind::kDevices;
  f.make = [](const std::string& ordinal) { return make_hip_backend(std::stoi(ordinal)); };
  f.device_count = hip_device_count;
  conformance::register_backend(std::move(f));
}

}  // namespace pacts::backends
