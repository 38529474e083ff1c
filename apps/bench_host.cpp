// pacts-bench-host: throughput of the host kernels on one problem (not a test: speed is never
// asserted by ctest, docs/conventions.md). Reports KV tokens per second, B * context per call, over
// 5 runs of `calls` decode calls each: median, min and max.
//
//   bench_host [threads=2] [batch=8] [q_heads=32] [kv_heads=8] [head_dim=128] [context=2048]
//              [page=16] [calls=10]
//
// bf16 Q, K, V and output, NHD pools, random pages, no scales or options, automatic plan.
#include <pacts/decode.h>
#include <pacts/host.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace {

int32_t arg(int argc, char** argv, int i, int32_t fallback) {
  return argc > i ? static_cast<int32_t>(std::atoi(argv[i])) : fallback;
}

std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) {
    const float f = normal(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x = static_cast<uint16_t>(bits >> 16);  // truncation is fine for bench data
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace k = pacts::kernels;
  const int32_t threads = arg(argc, argv, 1, 2), batch = arg(argc, argv, 2, 8),
                hq = arg(argc, argv, 3, 32), hkv = arg(argc, argv, 4, 8),
                dim = arg(argc, argv, 5, 128), context = arg(argc, argv, 6, 2048),
                page = arg(argc, argv, 7, 16), calls = arg(argc, argv, 8, 10);
  const int32_t pages_per_seq = (context + page - 1) / page;
  pacts_problem p = pacts::spec::make_problem(batch, 1, hq, hkv, dim, page, batch * pages_per_seq,
                                              pages_per_seq);
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(dim));
  p.want_lse = 1;

  std::mt19937_64 rng(1);
  const pacts::spec::RequiredExtents e = pacts::spec::required_extents(p);
  std::vector<uint16_t> q = random_bf16(e.q / 2, rng), kv_k = random_bf16(e.k / 2, rng),
                        kv_v = random_bf16(e.v / 2, rng), out(e.out / 2);
  std::vector<float> lse(e.lse / 4);
  std::vector<int32_t> table(static_cast<size_t>(batch) * pages_per_seq);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<int32_t> lens(static_cast<size_t>(batch), context);
  pacts_buffers b{};
  b.q = {q.data(), e.q};
  b.k = {kv_k.data(), e.k};
  b.v = {kv_v.data(), e.v};
  b.block_table = {table.data(), e.block_table};
  b.context_lens = {lens.data(), e.context_lens};
  b.out = {out.data(), e.out};
  b.lse = {lse.data(), e.lse};

  auto plan = k::plan(p, k::host::device(threads));
  if (!plan) {
    std::fprintf(stderr, "plan refused: %s\n", plan.status().to_string().c_str());
    return 1;
  }
  std::vector<float> workspace((k::workspace_size(plan.value()) + 3) / 4);
  uint32_t error = 0;
  const auto call = [&] {
    const pacts::spec::Status s = k::host::decode(plan.value(), b, &error, workspace.data(),
                                                  k::workspace_size(plan.value()), threads);
    if (!s) {
      std::fprintf(stderr, "decode refused: %s\n", s.to_string().c_str());
      std::exit(1);
    }
  };
  call();  // warm-up: pages the buffers in
  call();

  std::vector<double> rates;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int32_t c = 0; c < calls; ++c) call();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(double(batch) * context * calls / seconds);
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  std::printf("host decode: B %d, Hq %d, Hkv %d, D %d, context %d, page %d, bf16, %d threads; "
              "plan %s (%d partitions)\n",
              batch, hq, hkv, dim, context, page, threads, plan.value().variant.c_str(),
              plan.value().num_partitions);
  // K and V bytes the call must read (every KV head of every token once), for a bandwidth view.
  const double kv_bytes_per_token = 2.0 * hkv * dim * 2;
  std::printf("KV tokens/s over 5 runs of %d calls: median %.4g, min %.4g, max %.4g "
              "(spread %.1f%%); median KV read rate %.3g GB/s; runs:",
              calls, sorted[2], sorted[0], sorted[4], 100.0 * (sorted[4] - sorted[0]) / sorted[2],
              sorted[2] * kv_bytes_per_token / 1e9);
  for (double r : rates) std::printf(" %.4g", r);
  std::printf("\n");
  return error == 0 ? 0 : 2;
}
