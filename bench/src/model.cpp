// The inputs of a shape, the bytes model and the statistics of pacts-bench.
#include "internal.h"

#include "bench_inputs.h"

#include <pacts/conformance/rng.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace pacts::bench {

void fill_host(uint8_t* dst, uint64_t n, pacts_format format, uint64_t seed) {
  namespace inputs = kernels::bench;
  const int eb = inputs::input_element_bytes(format);
  for (uint64_t i = 0; i < n / eb; ++i) inputs::store_input(dst + i * eb, format, seed, i);
}

std::vector<int32_t> block_table(const pacts_problem& p, uint64_t seed) {
  std::vector<int32_t> pages(static_cast<size_t>(p.num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  conformance::Rng rng(seed);
  rng.shuffle(pages);
  std::vector<int32_t> table(static_cast<size_t>(p.batch) * p.block_table_stride, 0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t j = 0; j < p.max_pages_per_seq; ++j)
      table[static_cast<size_t>(b * p.block_table_stride + j)] =
          pages[static_cast<size_t>(b * p.max_pages_per_seq + j)];
  return table;
}

HostInputs make_host_inputs(const Shape& shape, uint64_t seed) {
  HostInputs in;
  in.problem = make_problem(shape);
  const pacts_problem& p = in.problem;
  const spec::RequiredExtents e = spec::required_extents(p);
  const pacts_format scale_format =
      p.k_scale_mode == PACTS_SCALE_MX_BLOCK ? PACTS_FORMAT_E8M0 : PACTS_FORMAT_FP32;
  // Distinct seeds per buffer, so K and V differ.
  const auto filled = [&](uint64_t bytes, pacts_format f, uint64_t salt) {
    std::vector<uint8_t> v(bytes);
    fill_host(v.data(), bytes, f, seed * 16 + salt);
    return v;
  };
  in.q = filled(e.q, p.q_format, 1);
  in.k = filled(e.k, p.kv_format, 2);
  in.v = filled(e.v, p.kv_format, 3);
  in.k_scale = filled(e.k_scale, scale_format, 4);
  in.v_scale = filled(e.v_scale, scale_format, 5);
  in.sinks = filled(e.sinks, PACTS_FORMAT_FP32, 6);
  in.out.assign(e.out, 0);
  const std::vector<int32_t> table = block_table(p, seed);
  const std::vector<int32_t> lens = context_lengths(shape, seed);
  in.block_table.resize(table.size() * 4);
  std::memcpy(in.block_table.data(), table.data(), in.block_table.size());
  in.context_lens.resize(lens.size() * 4);
  std::memcpy(in.context_lens.data(), lens.data(), in.context_lens.size());
  const auto view = [](std::vector<uint8_t>& v) {
    return pacts_view{v.empty() ? nullptr : v.data(), v.size()};
  };
  in.buffers.q = view(in.q);
  in.buffers.k = view(in.k);
  in.buffers.v = view(in.v);
  in.buffers.k_scale = view(in.k_scale);
  in.buffers.v_scale = view(in.v_scale);
  in.buffers.block_table = view(in.block_table);
  in.buffers.context_lens = view(in.context_lens);
  in.buffers.sinks = view(in.sinks);
  in.buffers.out = view(in.out);
  return in;
}

Stats statistics(const std::vector<double>& samples_us) {
  Stats s;
  if (samples_us.empty()) return s;
  std::vector<double> v(samples_us.begin(), samples_us.end());
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median_us = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min_us = v.front();
  s.max_us = v.back();
  s.samples = static_cast<int32_t>(n);
  return s;
}

Bytes bytes_moved(const pacts_problem& p, const std::vector<int32_t>& context_lens,
                  const kernels::Plan& plan) {
  const uint64_t hkv = static_cast<uint64_t>(p.num_kv_heads);
  const uint64_t row = p.kv_format == PACTS_FORMAT_E2M1
                           ? static_cast<uint64_t>(p.head_dim / 2)
                           : static_cast<uint64_t>(p.head_dim) * spec::element_bytes(p.kv_format);
  uint64_t scale_row = 0;  // scale bytes per token and KV head, for K (and again for V)
  if (p.k_scale_mode == PACTS_SCALE_PER_TOKEN) scale_row = 4;
  if (p.k_scale_mode == PACTS_SCALE_MX_BLOCK) scale_row = static_cast<uint64_t>(p.head_dim / 32);
  const uint64_t rows_per_head = static_cast<uint64_t>(p.num_q_heads / p.num_kv_heads) * p.q_len;
  Bytes b;
  uint64_t other = 0;
  for (const int32_t n : context_lens) {
    if (n <= 0) continue;
    // Keys some query row sees (spec/operator.md §5): the causal rows of the last L positions
    // see [0, n); a window of W keys ending at each row's position narrows that to the last
    // W + L - 1 keys.
    const int64_t lo = p.window > 0 ? std::max<int64_t>(0, int64_t{n} - p.q_len - p.window + 1) : 0;
    const uint64_t keys = static_cast<uint64_t>(n - lo);
    b.kv += 2 * keys * hkv * row;
    other += 2 * keys * hkv * scale_row;
    other += 4 * static_cast<uint64_t>((n - 1) / p.page_size - lo / p.page_size + 1);
    if (plan.num_partitions > 1) {
      // Partials of the partitions with keys: D floats and (max, sum) per row, written and read.
      const int64_t ps = plan.partition_size;
      const uint64_t parts = static_cast<uint64_t>((n - 1) / ps - lo / ps + 1);
      other += 2 * parts * hkv * rows_per_head * (static_cast<uint64_t>(p.head_dim) + 2) * 4;
    }
  }
  const uint64_t q_rows = static_cast<uint64_t>(p.batch) * p.q_len * p.num_q_heads;
  other += q_rows * p.head_dim * spec::element_bytes(p.q_format);
  other += q_rows * p.head_dim * spec::element_bytes(p.out_format);
  if (p.want_lse) other += q_rows * 4;
  other += 4 * static_cast<uint64_t>(p.batch);           // context lengths
  if (p.has_sinks) other += 4 * static_cast<uint64_t>(p.num_q_heads);
  b.all = b.kv + other;
  return b;
}

spec::Status check_timed_output(const pacts_problem& p, const std::vector<uint8_t>& out,
                                uint32_t error_word) {
  if (error_word != 0)
    return spec::Status(spec::Code::kInternal, "timed call set error word " +
                                                   std::to_string(error_word) +
                                                   " on valid inputs (spec/contract.md §4)");
  const int eb = spec::element_bytes(p.out_format);
  for (size_t i = 0; i + eb <= out.size(); i += eb) {
    uint32_t code = 0;
    std::memcpy(&code, out.data() + i, static_cast<size_t>(eb));
    if (!std::isfinite(spec::decode(p.out_format, code)))
      return spec::Status(spec::Code::kInternal,
                          "timed call wrote a non-finite output (element " +
                              std::to_string(i / eb) + ") from finite inputs");
  }
  return spec::Status::ok();
}

double datasheet_tbs_for(const std::string& name) {
  // Vendor datasheets, HBM bandwidth.
  struct Entry {
    const char* part;
    double tbs;
  };
  static constexpr Entry kTable[] = {{"H200", 4.8},   {"H100", 3.35},   {"MI300X", 5.3},
                                     {"MI325X", 6.0}, {"MI355X", 8.0}, {"MI350X", 8.0}};
  for (const Entry& e : kTable)
    if (name.find(e.part) != std::string::npos) return e.tbs;
  return 0;
}

}  // namespace pacts::bench
