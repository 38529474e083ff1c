// pacts::kernels::host: the production algorithm on CPU threads (pacts/host.h).
//
// decode() validates, resolves the call once (call.h), then runs the plan's work items
// (kernel.h) on `threads` workers: phase 1 the (sequence, KV head, partition, row tile) items,
// and for a split plan phase 2 the merge items. Threads only schedule: every item writes its
// own output rows or workspace slots, and the merge reads the partitions in a fixed order, so
// the result is bitwise identical for any thread count (spec/operator.md §11).
#include <pacts/host.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include "host/call.h"
#include "host/kernel.h"
#include "src/plan_config.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace pacts::kernels::host {
namespace {

using detail::Call;

// Runs fn(item) for item = 0..count-1 on up to `threads` threads (the caller's included). A
// thread that cannot be started leaves its share to the others.
template <class Worker>
void run_parallel(int64_t count, int32_t threads, const Worker& worker) {
  if (count <= 0) return;
  std::atomic<int64_t> next{0};
  const auto body = [&] { worker(next, count); };
  const int64_t extra = std::min<int64_t>(std::max(threads, 1), count) - 1;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(extra));
  for (int64_t t = 0; t < extra; ++t) {
    try {
      pool.emplace_back(body);
    } catch (const std::system_error&) {
      break;
    }
  }
  body();
  for (std::thread& t : pool) t.join();
}

template <int D>
void run_items(const Call& c, int64_t count, int32_t threads) {
  run_parallel(count, threads, [&c](std::atomic<int64_t>& next, int64_t n) {
    detail::Scratch<D> scratch;  // this worker's, reused by all its items
    for (int64_t item = next++; item < n; item = next++) detail::run_item<D>(c, item, scratch);
  });
}

template <int D>
void merge_items(const Call& c, int64_t count, int32_t threads) {
  run_parallel(count, threads, [&c](std::atomic<int64_t>& next, int64_t n) {
    for (int64_t item = next++; item < n; item = next++) detail::merge_item<D>(c, item);
  });
}

template <int D>
void run_plan(const Call& c, int32_t threads) {
  const pacts_problem& p = *c.p;
  const int64_t units = int64_t{p.batch} * p.num_kv_heads * c.row_tiles;
  run_items<D>(c, units * c.partitions, threads);
  if (c.partitions > 1) merge_items<D>(c, units, threads);
}

// A plan that plan() did not make for this problem's shape is refused before anything runs:
// the scratch of the work items is sized by these fields.
spec::Status check_plan(const Plan& plan, uint64_t workspace_bytes, const void* workspace) {
  const pacts_problem& p = plan.problem;
  const int64_t rows = int64_t{p.q_len} * (p.num_q_heads / p.num_kv_heads);
  const int64_t max_keys = int64_t{p.max_pages_per_seq} * p.page_size;
  const auto bad = [](const std::string& what) {
    return spec::invalid_argument("plan: " + what + " (make plans with pacts::kernels::plan)");
  };
  if (plan.tile_keys != config::kHostTileKeys)
    return bad("tile_keys " + std::to_string(plan.tile_keys) + ": the host kernels use " +
               std::to_string(config::kHostTileKeys));
  if (plan.rows_per_item < 1 || plan.rows_per_item > config::kHostMaxRowsPerItem ||
      plan.rows_per_item > rows)
    return bad("rows_per_item " + std::to_string(plan.rows_per_item) + ": must be 1 to " +
               std::to_string(std::min<int64_t>(rows, config::kHostMaxRowsPerItem)));
  if (plan.partition_size < 1 || plan.partition_size % plan.tile_keys != 0 ||
      plan.num_partitions < 1 || int64_t{plan.partition_size} * plan.num_partitions < max_keys)
    return bad("partition_size " + std::to_string(plan.partition_size) + " x num_partitions " +
               std::to_string(plan.num_partitions) + ": must cover the key range of " +
               std::to_string(max_keys) + " keys in whole tiles");
  if (plan.num_partitions > 1) {
    uint64_t need = 0;
    if (!config::workspace_bytes_for(p, plan.num_partitions, &need)) need = UINT64_MAX;
    if (plan.workspace_bytes != need)
      return bad("workspace_bytes " + std::to_string(plan.workspace_bytes) + ": this plan needs " +
                 std::to_string(need));
    if (workspace_bytes < need || (need > 0 && workspace == nullptr))
      return spec::invalid_argument("workspace_bytes " + std::to_string(workspace_bytes) +
                                    ": the plan needs " + std::to_string(need) + " bytes");
    if (reinterpret_cast<uintptr_t>(workspace) % alignof(float) != 0)
      return spec::invalid_argument("workspace: must be aligned to 4 bytes");
  }
  return spec::Status::ok();
}

void fill_lut(pacts_format f, float* lut) {
  if (spec::element_bytes(f) != 1) return;
  for (uint32_t code = 0; code < 256; ++code) lut[code] = common::decode_code(f, code);
}

detail::Pool make_pool(const pacts_problem& p, const pacts_view& data,
                       const pacts_pool_layout& layout, pacts_scale_mode mode,
                       const pacts_view& scales, const pacts_scale_layout& scale_layout,
                       float tensor_scale, const float* lut) {
  detail::Pool pool;
  pool.data = static_cast<const uint8_t*>(data.data);
  pool.layout = layout;
  pool.format = p.kv_format;
  pool.nibble_order = p.nibble_order;
  pool.scale_mode = mode;
  pool.tensor_scale = tensor_scale;
  pool.scales = static_cast<const uint8_t*>(scales.data);
  pool.scale_layout = scale_layout;
  pool.lut = lut;
  return pool;
}

}  // namespace

DeviceInfo device(int32_t threads) {
  int32_t n = threads;
  if (n <= 0) n = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  DeviceInfo info;
  info.name = "cpu: " + std::to_string(n) + (n == 1 ? " thread" : " threads");
  info.multiprocessors = n;
  info.warp_size = 1;
  info.is_host = true;
  return info;
}

spec::Requirements requirements() { return config::host_requirements(); }

// spec/tolerance.md §2, what these kernels really do:
//   u_logit   fp32 dequantisation (one rounding per scaled element), q~ = (q * q_scale) * tau (two
//             roundings), fp32 products and a sequential fp32 sum over d: within gamma_{D+4}(2^-24);
//             the max-shifted exponent s - m is one fp32 subtraction (2 u_logit S)
//   u_q       0: Q is not requantised (its fp32 scaling roundings are counted in u_logit)
//   u_p       2^-24: P = expf(s - m) is kept in fp32 (its rounding is inside expf's error)
//   u_acc     2^-24: fp32 P.V and denominator, blocked per 16-key tile (common/softmax.h)
//   u_partial 2^-24: partials are stored in fp32 (exactly the fp32 running state) and merged in
//             binary64
//   eps_exp   4 * 2^-24: glibc expf (below 1 ulp; two_sum-corrected rescale factors)
//   eps_tanh  4 * 2^-24: glibc tanhf (below 2 ulp of a result <= 1, absolute)
//   eps_log   2^-40: ln l and the LSE are binary64 (one fp32 rounding of the LSE is the bound's
//             u_32 |r| term)
//   ftz       false: subnormal inputs, products and outputs are kept (no -ffast-math; x86-64 SSE
//             without DAZ/FTZ)
spec::NumericsProfile profile() {
  spec::NumericsProfile prof = spec::fp32_profile();
  prof.name = "host-fp32";
  prof.u_q = 0;
  prof.eps_log = std::ldexp(1.0, -40);
  prof.ftz = false;
  return prof;
}

spec::Status decode(const Plan& plan, const pacts_buffers& buffers, uint32_t* error_word,
                    void* workspace, uint64_t workspace_bytes, int32_t threads) {
  const pacts_problem& p = plan.problem;
  if (spec::Status s = spec::validate(p, buffers, requirements()); !s) return s;
  if (spec::Status s = check_plan(plan, workspace_bytes, workspace); !s) return s;
  if (p.batch == 0) return spec::Status::ok();

  Call c;
  c.p = &p;
  c.group = p.num_q_heads / p.num_kv_heads;
  c.rows = int64_t{p.q_len} * c.group;
  c.rows_per_item = plan.rows_per_item;
  c.row_tiles = (c.rows + c.rows_per_item - 1) / c.rows_per_item;
  c.partitions = plan.num_partitions;
  c.partition_size = plan.partition_size;
  c.q = static_cast<const uint8_t*>(buffers.q.data);
  c.block_table = static_cast<const uint8_t*>(buffers.block_table.data);
  c.context_lens = static_cast<const uint8_t*>(buffers.context_lens.data);
  c.sinks = static_cast<const uint8_t*>(buffers.sinks.data);
  c.out = static_cast<uint8_t*>(buffers.out.data);
  c.lse = static_cast<uint8_t*>(buffers.lse.data);
  c.q_bytes = spec::element_bytes(p.q_format);
  c.out_bytes = spec::element_bytes(p.out_format);
  fill_lut(p.q_format, c.q_lut);
  fill_lut(p.kv_format, c.kv_lut);
  c.k = make_pool(p, buffers.k, p.k_layout, p.k_scale_mode, buffers.k_scale, p.k_scale_layout,
                  p.k_scale, c.kv_lut);
  c.v = make_pool(p, buffers.v, p.v_layout, p.v_scale_mode, buffers.v_scale, p.v_scale_layout,
                  p.v_scale, c.kv_lut);
  if (plan.num_partitions > 1) {
    const int64_t slots = int64_t{p.batch} * p.num_kv_heads * plan.num_partitions * c.rows;
    c.ws_acc = static_cast<float*>(workspace);
    c.ws_m = c.ws_acc + slots * p.head_dim;
    c.ws_l = c.ws_m + slots;
  }
  c.error_word = error_word;

  const int32_t workers = threads > 0 ? threads : plan.workers;
  switch (p.head_dim) {
    case 64: run_plan<64>(c, workers); break;
    case 128: run_plan<128>(c, workers); break;
    default: run_plan<256>(c, workers); break;  // validate() admits 64, 128, 256 only
  }
  return spec::Status::ok();
}

}  // namespace pacts::kernels::host
