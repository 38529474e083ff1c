// Split plans whose merge runs inside the tile kernel's launch (src/kernel.h merge_if_last): the
// row tiles' counters live in the plan's workspace, so two decodes in flight on two streams (each
// with its own workspace), a graph replayed after the context lengths changed, and a workspace
// full of garbage must all give the bits of an eager call on the same data. Exit 0 pass, 1 fail,
// 77 no GPU (ctest: skipped).
//   pacts_hip_streams_test (kernels/hip/tests/hip_streams_test.cpp)
#include <pacts/hip.h>
#include <pacts/spec/validate.h>

#include "platform/gpu.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

namespace hip = pacts::kernels::hip;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::printf("FAIL %s\n", what.c_str());
}

#define CHECK(call)                                                                   \
  do {                                                                                \
    const hipError_t e_ = (call);                                                     \
    if (e_ != hipSuccess) {                                                           \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call,                   \
                  hipGetErrorString(e_));                                             \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

void ok_or_exit(const pacts::spec::Status& s, const char* what) {
  if (s) return;
  std::printf("FAIL %s: %s\n", what, s.to_string().c_str());
  std::exit(1);
}

uint16_t bf16_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<uint16_t>(bits >> 16);  // values of [-1, 1) with 8 bits: exact
}

// One decode's problem and device buffers: bf16, D 128, NHD, random pages and data; the plan
// splits the keys into `partitions` (fixed) or as the planner likes (0).
struct Decode {
  pacts_problem p{};
  pacts::kernels::Plan plan;
  pacts_buffers buf{};
  std::vector<void*> owned;
  void* ws = nullptr;
  uint32_t* err = nullptr;
  std::vector<int32_t> lens;

  Decode(const pacts::kernels::DeviceInfo& dev, int batch, int group, int max_ctx, int page, int partitions,
         uint32_t seed) {
    const int hkv = 4, d = 128, per_seq = (max_ctx + page - 1) / page;
    p = pacts::spec::make_problem(batch, 1, hkv * group, hkv, d, page, batch * per_seq, per_seq);
    p.softmax_scale = 0.08838834764831845f;
    p.want_lse = 1;
    auto made = hip::plan(p, dev, 0, partitions);
    ok_or_exit(made.status(), "plan");
    plan = made.value();
    const pacts::spec::RequiredExtents ext = pacts::spec::required_extents(p);
    std::mt19937 rng(seed);
    const auto fill = [&](uint64_t bytes) {
      std::vector<uint16_t> h(bytes / 2);
      std::uniform_int_distribution<int> u(-128, 127);
      for (uint16_t& c : h) c = bf16_of(static_cast<float>(u(rng)) / 128.0f);
      return h;
    };
    const auto device = [&](uint64_t bytes, const void* host) {
      auto a = hip::memory::allocate(bytes);
      ok_or_exit(a.status(), "allocate");
      owned.push_back(a.value());
      if (host != nullptr) ok_or_exit(hip::memory::to_device(a.value(), host, bytes), "to_device");
      return a.value();
    };
    const auto q = fill(ext.q), k = fill(ext.k), v = fill(ext.v);
    std::vector<int32_t> table(static_cast<size_t>(p.num_pages));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    lens.resize(static_cast<size_t>(batch));
    std::uniform_int_distribution<int> len(1, max_ctx);
    for (int32_t& n : lens) n = len(rng);
    lens[0] = max_ctx;
    buf.q = {device(ext.q, q.data()), ext.q};
    buf.k = {device(ext.k, k.data()), ext.k};
    buf.v = {device(ext.v, v.data()), ext.v};
    buf.block_table = {device(ext.block_table, table.data()), ext.block_table};
    buf.context_lens = {device(ext.context_lens, lens.data()), ext.context_lens};
    buf.out = {device(ext.out, nullptr), ext.out};
    buf.lse = {device(ext.lse, nullptr), ext.lse};
    err = static_cast<uint32_t*>(device(4, nullptr));
    ok_or_exit(hip::memory::fill(err, 0, 4), "fill");
    if (plan.workspace_bytes > 0) ws = device(plan.workspace_bytes, nullptr);
    poison();
  }
  ~Decode() {
    for (void* a : owned) hip::memory::release(a);
  }
  Decode(const Decode&) = delete;
  Decode& operator=(const Decode&) = delete;

  // Output, LSE and workspace full of 0xFF bytes (NaN): a result must not depend on them.
  void poison() {
    ok_or_exit(hip::memory::fill(buf.out.data, 0xFF, buf.out.bytes), "fill");
    ok_or_exit(hip::memory::fill(buf.lse.data, 0xFF, buf.lse.bytes), "fill");
    if (ws != nullptr) ok_or_exit(hip::memory::fill(ws, 0xFF, plan.workspace_bytes), "fill");
  }
  void set_lens(const std::vector<int32_t>& n) {
    lens = n;
    ok_or_exit(hip::memory::to_device(buf.context_lens.data, lens.data(), lens.size() * 4),
               "to_device");
  }
  pacts::spec::Status run(hipStream_t s) const {
    return hip::decode(plan, buf, err, ws, plan.workspace_bytes, s);
  }
  // The output and the LSE as bytes.
  std::vector<uint8_t> result() const {
    ok_or_exit(hip::memory::synchronize(), "synchronize");
    std::vector<uint8_t> r(buf.out.bytes + buf.lse.bytes);
    ok_or_exit(hip::memory::to_host(r.data(), buf.out.data, buf.out.bytes), "to_host");
    ok_or_exit(hip::memory::to_host(r.data() + buf.out.bytes, buf.lse.data, buf.lse.bytes),
               "to_host");
    return r;
  }
  uint32_t error_word() const {
    uint32_t e = 0;
    ok_or_exit(hip::memory::to_host(&e, err, 4), "to_host");
    return e;
  }
};

// An eager call on the default stream, after poisoning: the bits every other way must give.
std::vector<uint8_t> eager(Decode& x) {
  x.poison();
  ok_or_exit(x.run(nullptr), "decode");
  return x.result();
}

// Two decodes in flight at once on two streams, 16 rounds with no synchronisation between them:
// each round's result must be the eager one (a counter or partial shared between the two, or
// one left behind by a round, changes the bits).
void two_streams(const pacts::kernels::DeviceInfo& dev, int partitions) {
  Decode a(dev, 3, 8, 3000, 16, partitions, 11), b(dev, 5, 1, 2000, 64, partitions, 12);
  const std::string name = "two streams, partitions " + std::to_string(partitions) + " (" +
                           a.plan.variant + " and " + b.plan.variant + ")";
  expect(a.plan.num_partitions > 1 && b.plan.num_partitions > 1, name + ": split plans");
  const std::vector<uint8_t> ea = eager(a), eb = eager(b);
  hipStream_t s1, s2;
  CHECK(hipStreamCreateWithFlags(&s1, hipStreamNonBlocking));
  CHECK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));
  a.poison();
  b.poison();
  for (int round = 0; round < 16; ++round) {
    ok_or_exit(a.run(s1), "decode");
    ok_or_exit(b.run(s2), "decode");
  }
  expect(a.result() == ea, name + ": stream 1 differs from the eager call");
  expect(b.result() == eb, name + ": stream 2 differs from the eager call");
  expect(a.error_word() == 0 && b.error_word() == 0, name + ": error word set");
  CHECK(hipStreamDestroy(s1));
  CHECK(hipStreamDestroy(s2));
}

// A graph captured once and replayed after the context lengths changed in device memory
// (shorter, 0, one past the plan's keys: invalid), each replay against an eager call on the
// same data, and replays back to back with no change.
void graph_replay(const pacts::kernels::DeviceInfo& dev) {
  Decode x(dev, 4, 8, 4096, 16, 0, 21);
  const std::string name = "graph replay (" + x.plan.variant + ")";
  expect(x.plan.num_partitions > 1, name + ": a split plan");
  const int max_keys = x.p.max_pages_per_seq * x.p.page_size;
  const std::vector<std::vector<int32_t>> steps = {
      x.lens, {4096, 17, 1, 300}, {0, 4000, 2048, 16}, {max_keys + 1, 5, 4096, 0}, x.lens};
  std::vector<std::vector<uint8_t>> expected;
  std::vector<uint32_t> errors;
  for (const auto& lens : steps) {
    x.set_lens(lens);
    ok_or_exit(hip::memory::fill(x.err, 0, 4), "fill");
    expected.push_back(eager(x));
    errors.push_back(x.error_word());
  }
  x.set_lens(steps[0]);
  auto captured = hip::CapturedDecode::capture(x.plan, x.buf, x.err, x.ws, x.plan.workspace_bytes);
  ok_or_exit(captured.status(), "capture");
  x.poison();
  for (size_t i = 0; i < steps.size(); ++i) {
    x.set_lens(steps[i]);
    ok_or_exit(hip::memory::fill(x.err, 0, 4), "fill");
    for (int again = 0; again < 3; ++again) {
      ok_or_exit(captured.value().replay(), "replay");
      expect(x.result() == expected[i], name + ": step " + std::to_string(i) + " replay " +
                                            std::to_string(again) + " differs from the eager call");
    }
    expect(x.error_word() == errors[i], name + ": step " + std::to_string(i) + " error word");
  }
  expect(errors[3] != 0 && errors[0] == 0, name + ": the invalid length sets the error word");
}

}  // namespace

int main() {
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  auto dev = hip::device(0);
  ok_or_exit(dev.status(), "device");
  two_streams(dev.value(), 7);
  two_streams(dev.value(), 0);
  graph_replay(dev.value());
  std::printf("%s (%d failures)\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
