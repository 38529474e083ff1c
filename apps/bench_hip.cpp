// A first speed figure of the HIP kernels (not a test): one problem, device events around each
// launch, the L2 flushed (a 512 MiB memset) before each launch, median of the repeats.
//   pacts-bench-hip [B ctx G page_size repeats partitions]   (defaults: 32 16384 8 64 30 0)
// bf16 Q/K/V/out, D 128, 8 KV heads, L 1, NHD pool, random pages (a permutation), random data.
// TB/s = K+V bytes of the context (2 * B * ctx * Hkv * D * 2 B) / time, as in docs/bench.md.
#include <pacts/hip.h>
#include <pacts/spec/validate.h>

#include "platform/gpu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

namespace {

__global__ void fill_bf16(uint16_t* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float v = (static_cast<float>(h & 0xFFFF) / 65536.0f) * 2.0f - 1.0f;  // [-1, 1)
    uint32_t bits;
    memcpy(&bits, &v, 4);
    x[i] = static_cast<uint16_t>(bits >> 16);
  }
}

#define CHECK(call)                                                                   \
  do {                                                                                \
    const hipError_t e_ = (call);                                                     \
    if (e_ != hipSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,               \
                   hipGetErrorString(e_));                                            \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

void check(const pacts::spec::Status& s, const char* what) {
  if (s) return;
  std::fprintf(stderr, "%s: %s\n", what, s.to_string().c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int B = arg(1, 32), ctx = arg(2, 16384), G = arg(3, 8), page = arg(4, 64);
  const int repeats = std::max(arg(5, 30), 1), parts = arg(6, 0);
  const int Hkv = 8, D = 128;
  const int pages_per_seq = (ctx + page - 1) / page;
  const int num_pages = B * pages_per_seq;

  pacts_problem p = pacts::spec::make_problem(B, 1, Hkv * G, Hkv, D, page, num_pages, pages_per_seq);
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(D));
  const pacts::spec::RequiredExtents ext = pacts::spec::required_extents(p);

  auto dev = pacts::kernels::hip::device(0);
  check(dev.status(), "device");
  auto plan = pacts::kernels::hip::plan(p, dev.value(), 0, parts);
  check(plan.status(), "plan");

  uint8_t *q, *k, *v, *out, *bt, *cl, *ws = nullptr, *flush;
  uint32_t* err;
  CHECK(hipMalloc(reinterpret_cast<void**>(&q), ext.q));
  CHECK(hipMalloc(reinterpret_cast<void**>(&k), ext.k));
  CHECK(hipMalloc(reinterpret_cast<void**>(&v), ext.v));
  CHECK(hipMalloc(reinterpret_cast<void**>(&out), ext.out));
  CHECK(hipMalloc(reinterpret_cast<void**>(&bt), ext.block_table));
  CHECK(hipMalloc(reinterpret_cast<void**>(&cl), ext.context_lens));
  CHECK(hipMalloc(reinterpret_cast<void**>(&err), 4));
  const size_t flush_bytes = size_t{512} << 20;
  CHECK(hipMalloc(reinterpret_cast<void**>(&flush), flush_bytes));
  const uint64_t wsb = pacts::kernels::workspace_size(plan.value());
  if (wsb) CHECK(hipMalloc(reinterpret_cast<void**>(&ws), wsb));
  hipLaunchKernelGGL(fill_bf16, dim3(4096), dim3(256), 0, nullptr, reinterpret_cast<uint16_t*>(q),
                     static_cast<int64_t>(ext.q / 2), 1u);
  hipLaunchKernelGGL(fill_bf16, dim3(4096), dim3(256), 0, nullptr, reinterpret_cast<uint16_t*>(k),
                     static_cast<int64_t>(ext.k / 2), 2u);
  hipLaunchKernelGGL(fill_bf16, dim3(4096), dim3(256), 0, nullptr, reinterpret_cast<uint16_t*>(v),
                     static_cast<int64_t>(ext.v / 2), 3u);
  CHECK(hipGetLastError());
  std::vector<int32_t> table(static_cast<size_t>(num_pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));
  std::vector<int32_t> lens(static_cast<size_t>(B), ctx);
  CHECK(hipMemcpy(bt, table.data(), ext.block_table, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(cl, lens.data(), ext.context_lens, hipMemcpyHostToDevice));
  CHECK(hipMemset(err, 0, 4));
  CHECK(hipMemset(out, 0xFF, ext.out));  // poison: every element must be written

  pacts_buffers buf{};
  buf.q = {q, ext.q};
  buf.k = {k, ext.k};
  buf.v = {v, ext.v};
  buf.block_table = {bt, ext.block_table};
  buf.context_lens = {cl, ext.context_lens};
  buf.out = {out, ext.out};

  hipEvent_t start, stop;
  CHECK(hipEventCreate(&start));
  CHECK(hipEventCreate(&stop));
  std::vector<float> ms;
  for (int it = -3; it < repeats; ++it) {
    CHECK(hipMemsetAsync(flush, it & 0xFF, flush_bytes, nullptr));
    CHECK(hipEventRecord(start, nullptr));
    check(pacts::kernels::hip::decode(plan.value(), buf, err, ws, wsb, nullptr), "decode");
    CHECK(hipEventRecord(stop, nullptr));
    CHECK(hipEventSynchronize(stop));
    float t = 0;
    CHECK(hipEventElapsedTime(&t, start, stop));
    if (it >= 0) ms.push_back(t);
  }
  CHECK(hipDeviceSynchronize());
  std::vector<uint16_t> o(ext.out / 2);
  CHECK(hipMemcpy(o.data(), out, ext.out, hipMemcpyDeviceToHost));
  size_t bad = 0;
  for (uint16_t c : o) bad += (c & 0x7F80) == 0x7F80;  // NaN/Inf or the 0xFFFF poison
  uint32_t e = 0;
  CHECK(hipMemcpy(&e, err, 4, hipMemcpyDeviceToHost));

  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  const double bytes = 2.0 * B * double(ctx) * Hkv * D * 2;
  std::printf("B=%d ctx=%d G=%d page=%d D=%d Hkv=%d bf16 plan=%s partitions=%d | median %.1f us "
              "(min %.1f, p10 %.1f, p90 %.1f, max %.1f, n=%zu) -> %.2f TB/s (min-time %.2f) | "
              "non-finite outputs %zu, error word %u, device %s\n",
              B, ctx, G, page, D, Hkv, plan.value().variant.c_str(), plan.value().num_partitions,
              med * 1e3, ms.front() * 1e3, ms[ms.size() / 10] * 1e3, ms[ms.size() * 9 / 10] * 1e3,
              ms.back() * 1e3, ms.size(), bytes / (med * 1e-3) / 1e12,
              bytes / (ms.front() * 1e-3) / 1e12, bad, e, dev.value().name.c_str());
  return bad != 0 || e != 0;
}
