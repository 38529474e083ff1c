// The float64 reference decoder (spec/operator.md). Structure:
//   decode            validate, then one sequence at a time
//   decode_sequence   device-resident preconditions (spec/contract.md §4), the owned key span,
//                     its block-table entries, then one KV head at a time
//   KeyBlock          the owned keys of one (sequence, KV head), dequantised once
//   decode_row        logits, soft-cap, sink, max-shifted softmax, P.V, LSE and the statistics
//                     the tolerance bound needs (spec/tolerance.md)
// Owned data only, by construction (spec/contract.md §1): a block-table entry is read only for a
// page holding a key that some row of its sequence sees, and a K/V row (with its scales) only
// for such a key. Nothing else is ever addressed.
#include <pacts/reference/decode.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include "kv_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace pacts::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <class T>
T load(const pacts_view& view, int64_t index) {
  T x;
  std::memcpy(&x, static_cast<const uint8_t*>(view.data) + index * int64_t{sizeof(T)}, sizeof x);
  return x;
}

// Neumaier's compensated sum: the error of n additions is at most about u|sum| + n u^2 sum|x|
// instead of n u sum|x|, which keeps the reference's own error far below any kernel's. A
// non-finite running sum is returned as is (the compensation would turn Inf into NaN).
class CompensatedSum {
 public:
  void add(double x) {
    const double t = sum_ + x;
    if (std::abs(sum_) >= std::abs(x)) {
      comp_ += (sum_ - t) + x;
    } else {
      comp_ += (x - t) + sum_;
    }
    sum_ = t;
  }
  double value() const { return std::isfinite(sum_) ? sum_ + comp_ : sum_; }

 private:
  double sum_ = 0.0;
  double comp_ = 0.0;
};

// e^(a - b) without the rounding of a - b, which would cost u |a - b| relative (20u for a logit
// near 0 against a sink of 20): TwoSum gives a - b = hi + lo exactly, and
// e^(hi + lo) = e^hi (1 + lo) up to lo^2 <= u^2 (a - b)^2.
double exp_difference(double a, double b) {
  const double hi = a - b;
  if (!std::isfinite(hi)) return std::exp(hi);
  const double a_part = hi + b;
  const double lo = (a - a_part) - (b - (a_part - hi));
  const double e = std::exp(hi);
  return std::fma(e, lo, e);
}

// Keys [begin, end) of a sequence.
struct KeySpan {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return std::max<int64_t>(end - begin, 0); }
  bool empty() const { return end <= begin; }
};

// spec/operator.md §4: query token i sits at pos = ctx - L + i and sees 0 <= j <= pos, and with
// a window W only pos - W < j.
KeySpan visible_keys(const pacts_problem& p, int64_t ctx, int64_t i) {
  const int64_t pos = ctx - p.q_len + i;
  if (pos < 0) return {};
  const int64_t begin = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
  return {begin, pos + 1};
}

// The keys some row sees. Both ends of a row's span grow by at most one per row, so the union is
// the span from the first non-empty row's begin to ctx.
KeySpan owned_keys(const pacts_problem& p, int64_t ctx) {
  for (int64_t i = 0; i < p.q_len; ++i) {
    const KeySpan span = visible_keys(p, ctx, i);
    if (!span.empty()) return {span.begin, ctx};
  }
  return {};
}

// The owned keys of one (sequence, KV head), dequantised. K rows keep their common factor
// apart (see KvPool::load_row); V rows are complete (raw * factor is exact: <= 35 bits).
struct KeyBlock {
  int64_t first = 0;
  int64_t head_dim = 0;
  std::vector<double> k, k_factor, v;

  std::span<const double> k_row(int64_t j) const {
    return {k.data() + (j - first) * head_dim, static_cast<size_t>(head_dim)};
  }
  std::span<const double> v_row(int64_t j) const {
    return {v.data() + (j - first) * head_dim, static_cast<size_t>(head_dim)};
  }
};

struct Pools {
  detail::KvPool k, v;
};

KeyBlock load_keys(const pacts_problem& p, const Pools& pools, std::span<const int32_t> pages,
                   KeySpan keys, int64_t kv_head) {
  KeyBlock block;
  block.first = keys.begin;
  block.head_dim = p.head_dim;
  const auto n = static_cast<size_t>(keys.size());
  const auto d = static_cast<size_t>(p.head_dim);
  block.k.resize(n * d);
  block.k_factor.resize(n);
  block.v.resize(n * d);
  const int64_t first_column = keys.begin / p.page_size;
  std::vector<double> v_raw(d);
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    const int64_t page = pages[static_cast<size_t>(j / p.page_size - first_column)];
    const int64_t slot = j % p.page_size;
    const auto row = static_cast<size_t>(j - keys.begin);
    block.k_factor[row] =
        pools.k.load_row(page, kv_head, slot, std::span<double>(block.k).subspan(row * d, d));
    const double v_factor = pools.v.load_row(page, kv_head, slot, v_raw);
    for (size_t e = 0; e < d; ++e) block.v[row * d + e] = v_raw[e] * v_factor;
  }
  return block;
}

// Dense indices into Output.
struct RowIndex {
  size_t row;      // [B][L][Hq]
  size_t element;  // first element of the row in [B][L][Hq][D]
};

RowIndex row_index(const pacts_problem& p, int64_t b, int64_t i, int64_t h) {
  const auto row = static_cast<size_t>((b * p.q_len + i) * p.num_q_heads + h);
  return {row, row * static_cast<size_t>(p.head_dim)};
}

// Q row (b, i, h), dequantised: decode * q_scale, exact (<= 11 + 24 significant bits).
std::vector<double> load_query(const pacts_problem& p, const pacts_view& q, int64_t b, int64_t i,
                               int64_t h) {
  const int64_t base = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head;
  const bool wide = spec::element_bytes(p.q_format) == 2;
  std::vector<double> row(static_cast<size_t>(p.head_dim));
  for (int64_t d = 0; d < p.head_dim; ++d) {
    const uint32_t code = wide ? load<uint16_t>(q, base + d) : load<uint8_t>(q, base + d);
    row[static_cast<size_t>(d)] = spec::decode(p.q_format, code) * double{p.q_scale};
  }
  return row;
}

// Q row (b, i, h) requantised by the declared rule (spec/tolerance.md §2.1), with q_scale and
// softmax_scale folded in: decode(target, code_d) * 2^e, exact. It stands for softmax_scale * q.
std::vector<double> load_requantized_query(const pacts_problem& p, const pacts_view& q, int64_t b,
                                           int64_t i, int64_t h) {
  const int64_t base = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head;
  const bool wide = spec::element_bytes(p.q_format) == 2;
  std::vector<float> folded(static_cast<size_t>(p.head_dim));
  for (int64_t d = 0; d < p.head_dim; ++d) {
    const uint32_t code = wide ? load<uint16_t>(q, base + d) : load<uint8_t>(q, base + d);
    folded[static_cast<size_t>(d)] =
        spec::fold_query_fp32(p.q_format, code, p.q_scale, p.softmax_scale);
  }
  const pacts_format target = spec::requant_target(p.kv_format);
  const spec::RequantRow row = spec::requantize_row(folded, target);
  std::vector<double> values(folded.size());
  for (size_t d = 0; d < values.size(); ++d)
    values[d] = spec::requantized_value(target, row.codes[d], row.exponent);
  return values;
}

// One row: every visible key's logit, then the max-shifted softmax with the optional sink in the
// denominator, P.V, LSE (sink excluded) and the bound statistics (spec/operator.md §5-§7).
// `softmax_scale` is the problem's, or 1 for a requantised query that holds it already.
void decode_row(const pacts_problem& p, std::span<const double> q, double softmax_scale,
                const KeyBlock& keys, KeySpan span, std::optional<double> sink, RowIndex at,
                Output& out) {
  const auto n = static_cast<size_t>(span.size());
  const auto dims = static_cast<size_t>(p.head_dim);
  const double softcap = p.softcap;
  std::vector<double> logits(n);
  double logit_max = 0.0, abs_dot_max = 0.0, key_max = -kInf;
  for (size_t j = 0; j < n; ++j) {
    const int64_t key = span.begin + static_cast<int64_t>(j);
    const std::span<const double> k = keys.k_row(key);
    const double factor = keys.k_factor[static_cast<size_t>(key - keys.first)];
    CompensatedSum dot;
    double abs_dot = 0.0;
    for (size_t d = 0; d < dims; ++d) {
      const double product = q[d] * k[d];  // exact: <= 35 + 11 significant bits
      dot.add(product);
      abs_dot += std::abs(product);
    }
    double s = softmax_scale * (factor * dot.value());
    logit_max = std::max(logit_max, std::abs(s));
    abs_dot_max = std::max(abs_dot_max, softmax_scale * (std::abs(factor) * abs_dot));
    if (softcap > 0.0) s = softcap * std::tanh(s / softcap);
    logits[j] = s;
    if (std::isfinite(s)) key_max = std::max(key_max, s);
  }

  // The shift is the largest finite logit or sink; with none, every term is 0, Inf or NaN by
  // itself and any shift gives the same answer.
  double shift = key_max;
  if (sink && std::isfinite(*sink)) shift = std::max(shift, *sink);
  if (!std::isfinite(shift)) shift = 0.0;
  std::vector<double> weights(n);
  CompensatedSum denominator;
  for (size_t j = 0; j < n; ++j) {
    weights[j] = exp_difference(logits[j], shift);
    denominator.add(weights[j]);
  }
  if (sink) denominator.add(exp_difference(*sink, shift));
  const double den = denominator.value();

  std::vector<CompensatedSum> numerator(dims), abs_numerator(dims), sum_abs(dims);
  std::vector<double> max_abs(dims, 0.0), min_v(dims, kInf), max_v(dims, -kInf);
  for (size_t j = 0; j < n; ++j) {
    const std::span<const double> v = keys.v_row(span.begin + static_cast<int64_t>(j));
    for (size_t d = 0; d < dims; ++d) {
      numerator[d].add(weights[j] * v[d]);
      abs_numerator[d].add(weights[j] * std::abs(v[d]));
      sum_abs[d].add(std::abs(v[d]));
      max_abs[d] = std::max(max_abs[d], std::abs(v[d]));
      min_v[d] = std::min(min_v[d], v[d]);
      max_v[d] = std::max(max_v[d], v[d]);
    }
  }
  for (size_t d = 0; d < dims; ++d) {
    const size_t e = at.element + d;
    out.out[e] = numerator[d].value() / den;
    out.abs_weighted_v[e] = abs_numerator[d].value() / den;
    out.sum_abs_v[e] = sum_abs[d].value();
    out.max_abs_v[e] = max_abs[d];
    out.min_v[e] = min_v[d];
    out.max_v[e] = max_v[d];
  }

  // LSE has its own shift: with a dominant sink, sum_j e^(s_j - shift) may underflow.
  const double lse_shift = std::isfinite(key_max) ? key_max : 0.0;
  CompensatedSum z;
  for (size_t j = 0; j < n; ++j) z.add(exp_difference(logits[j], lse_shift));
  out.lse[at.row] = lse_shift + std::log(z.value());
  out.logit_max[at.row] = logit_max;
  out.logit_abs_dot[at.row] = abs_dot_max;
  out.sink_abs[at.row] = sink && std::isfinite(*sink) ? std::fabs(*sink) : 0.0;
  out.visible[at.row] = static_cast<int32_t>(n);
}

// spec/contract.md §4: every output element and the LSE of the sequence are NaN.
void invalidate_sequence(const pacts_problem& p, int64_t b, uint32_t error, Output& out) {
  out.device_error |= error;
  for (int64_t i = 0; i < p.q_len; ++i) {
    for (int64_t h = 0; h < p.num_q_heads; ++h) {
      const RowIndex at = row_index(p, b, i, h);
      std::fill_n(out.out.begin() + static_cast<std::ptrdiff_t>(at.element), p.head_dim, kNaN);
      out.lse[at.row] = kNaN;
      out.row_invalid[at.row] = 1;
    }
  }
}

void decode_sequence(const pacts_problem& p, const pacts_buffers& buf, const Pools& pools,
                     bool requantize, int64_t b, Output& out) {
  const int64_t ctx = load<int32_t>(buf.context_lens, b);
  if (ctx < 0 || ctx > int64_t{p.max_pages_per_seq} * p.page_size) {
    invalidate_sequence(p, b, PACTS_DEVERR_CONTEXT_LEN, out);
    return;
  }
  const KeySpan keys = owned_keys(p, ctx);
  if (keys.empty()) return;  // every row is empty: +0 and LSE -inf, already in place

  // The owned columns of the block table, and nothing else (spec/contract.md §1).
  const int64_t first_column = keys.begin / p.page_size;
  const int64_t last_column = (keys.end - 1) / p.page_size;
  std::vector<int32_t> pages;
  for (int64_t c = first_column; c <= last_column; ++c) {
    const int32_t page = load<int32_t>(buf.block_table, b * p.block_table_stride + c);
    if (page < 0 || page >= p.num_pages) {
      invalidate_sequence(p, b, PACTS_DEVERR_PAGE_ID, out);
      return;
    }
    pages.push_back(page);
  }

  const int64_t group = p.num_q_heads / p.num_kv_heads;
  for (int64_t kv_head = 0; kv_head < p.num_kv_heads; ++kv_head) {
    const KeyBlock block = load_keys(p, pools, pages, keys, kv_head);
    for (int64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
      std::optional<double> sink;
      if (p.has_sinks) sink = load<float>(buf.sinks, h);
      for (int64_t i = 0; i < p.q_len; ++i) {
        const KeySpan span = visible_keys(p, ctx, i);
        if (span.empty()) continue;
        if (requantize) {
          const std::vector<double> q = load_requantized_query(p, buf.q, b, i, h);
          decode_row(p, q, 1.0, block, span, sink, row_index(p, b, i, h), out);
        } else {
          const std::vector<double> q = load_query(p, buf.q, b, i, h);
          decode_row(p, q, p.softmax_scale, block, span, sink, row_index(p, b, i, h), out);
        }
      }
    }
  }
}

Output empty_output(const pacts_problem& p) {
  const auto rows = static_cast<size_t>(int64_t{p.batch} * p.q_len * p.num_q_heads);
  const size_t elements = rows * static_cast<size_t>(p.head_dim);
  Output out;
  out.out.assign(elements, 0.0);
  out.abs_weighted_v.assign(elements, 0.0);
  out.sum_abs_v.assign(elements, 0.0);
  out.max_abs_v.assign(elements, 0.0);
  out.min_v.assign(elements, 0.0);
  out.max_v.assign(elements, 0.0);
  out.lse.assign(rows, -kInf);
  out.logit_max.assign(rows, 0.0);
  out.logit_abs_dot.assign(rows, 0.0);
  out.sink_abs.assign(rows, 0.0);
  out.visible.assign(rows, 0);
  out.row_invalid.assign(rows, 0);
  return out;
}

}  // namespace

spec::Result<Output> decode(const pacts_problem& problem, const pacts_buffers& buffers) {
  return decode(problem, buffers, spec::QueryRequantRule{});
}

spec::Result<Output> decode(const pacts_problem& problem, const pacts_buffers& buffers,
                            const spec::QueryRequantRule& q_requant) {
  if (spec::Status status = spec::validate(problem, buffers); !status.is_ok()) return status;
  const Pools pools{
      detail::KvPool(problem, buffers.k, problem.k_layout, problem.k_scale_mode, buffers.k_scale,
                     problem.k_scale_layout, problem.k_scale),
      detail::KvPool(problem, buffers.v, problem.v_layout, problem.v_scale_mode, buffers.v_scale,
                     problem.v_scale_layout, problem.v_scale)};
  Output out = empty_output(problem);
  const bool requantize = spec::requantises(q_requant, problem.kv_format);
  for (int64_t b = 0; b < problem.batch; ++b)
    decode_sequence(problem, buffers, pools, requantize, b, out);
  return out;
}

spec::BoundInputs bound_inputs(const Output& ref, size_t row, size_t element) {
  spec::BoundInputs in;
  in.abs_weighted_v = ref.abs_weighted_v[element];
  in.sum_abs_v = ref.sum_abs_v[element];
  in.logit_abs_dot = ref.logit_abs_dot[row];
  in.visible = ref.visible[row];
  in.sink_abs = ref.sink_abs[row];
  return in;
}

}  // namespace pacts::reference
