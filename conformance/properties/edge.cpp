// PACTS-EDGE: boundaries (spec/properties.md §7): empty rows, the exact write set, convexity,
// NaN propagation and the edges of the range contract.
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/property.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/tolerance.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

constexpr uint32_t kLseOfEmptyRow = 0xFF800000u;  // fp32 -inf (spec/operator.md §10)

std::string hex(uint32_t code) {
  std::ostringstream os;
  os << "0x" << std::hex << code;
  return os.str();
}

std::string fmt(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

uint32_t load_code(const std::vector<uint8_t>& bytes, int64_t element, int element_bytes) {
  uint32_t code = 0;
  std::memcpy(&code, bytes.data() + element * element_bytes, static_cast<size_t>(element_bytes));
  return code;
}

void store_code(std::vector<uint8_t>& bytes, int64_t element, int element_bytes, uint32_t code) {
  std::memcpy(bytes.data() + element * element_bytes, &code, static_cast<size_t>(element_bytes));
}

float load_float(const std::vector<uint8_t>& bytes, int64_t element) {
  float x;
  std::memcpy(&x, bytes.data() + element * 4, 4);
  return x;
}

int64_t row_offset(const pacts_row_layout& l, int64_t b, int64_t i, int64_t h) {
  return b * l.s_batch + i * l.s_tok + h * l.s_head;
}

bool sequence_valid(const pacts_problem& p, int64_t n) {
  return n >= 0 && n <= int64_t{p.max_pages_per_seq} * p.page_size;
}

int32_t context(const CaseData& c, int64_t b) { return c.context_lens[static_cast<size_t>(b)]; }

// spec/operator.md §10: row (b, i) of a valid sequence is empty when pos = n - L + i < 0.
bool row_empty(const CaseData& c, int64_t b, int64_t i) {
  const int32_t n = context(c, b);
  return sequence_valid(c.problem, n) && n - c.problem.q_len + i < 0;
}

// The keys row (b, i) sees (spec/operator.md §5-§6, spec::row_keys): half-open, empty when none.
spec::KeyRange row_keys(const pacts_problem& p, int64_t n, int64_t i) {
  return spec::row_keys(n, p.q_len, p.window, static_cast<int32_t>(i));
}

PlanHint split_hint(const CaseSpec& spec) {
  return (spec.seed & 1) ? PlanHint::partitions(4) : PlanHint::automatic();
}

Outcome with_detail(Outcome o, const std::string& detail) {
  o.detail = o.detail.empty() ? detail : o.detail + "; " + detail;
  return o;
}

// --- reading K and V without the reference (spec/operator.md §3.2-§3.4, §7) ------------------

class PoolReader {
 public:
  PoolReader(const CaseData& c, bool is_k)
      : p_(c.problem),
        data_(is_k ? c.k : c.v),
        scales_(is_k ? c.k_scale : c.v_scale),
        layout_(is_k ? c.problem.k_layout : c.problem.v_layout),
        mode_(is_k ? c.problem.k_scale_mode : c.problem.v_scale_mode),
        scale_layout_(is_k ? c.problem.k_scale_layout : c.problem.v_scale_layout),
        tensor_scale_(is_k ? c.problem.k_scale : c.problem.v_scale) {}

  // Element d of (page, KV head, slot), decoded and scaled: exact in binary64.
  double value(int64_t page, int64_t head, int64_t slot, int64_t d) const {
    const pacts_pool_layout& l = layout_;
    const bool e2m1 = p_.kv_format == PACTS_FORMAT_E2M1;
    const int64_t unit = e2m1 ? d / 2 : d;
    const int64_t at = page * l.s_page + head * l.s_head + slot * l.s_tok +
                       (unit / l.chunk) * l.s_chunk + unit % l.chunk;
    double x = 0;
    if (e2m1) {
      const uint8_t byte = data_[static_cast<size_t>(at)];
      const bool low = (d % 2 == 0) == (p_.nibble_order == PACTS_NIBBLE_LOW_FIRST);
      x = spec::decode_e2m1(static_cast<uint8_t>(low ? byte & 0xF : byte >> 4));
    } else {
      const int eb = spec::element_bytes(p_.kv_format);
      x = spec::decode(p_.kv_format, load_code(data_, at, eb));
    }
    return x * scale(page, head, slot, d);
  }

 private:
  double scale(int64_t page, int64_t head, int64_t slot, int64_t d) const {
    const pacts_scale_layout& l = scale_layout_;
    const int64_t at = page * l.s_page + head * l.s_head + slot * l.s_tok;
    switch (mode_) {
      case PACTS_SCALE_PER_TENSOR: return tensor_scale_;
      case PACTS_SCALE_PER_TOKEN: return load_float(scales_, at);
      case PACTS_SCALE_MX_BLOCK:
        return spec::decode_e8m0(scales_[static_cast<size_t>(at + (d / 32) * l.s_block)]);
      default: return 1.0;
    }
  }

  const pacts_problem& p_;
  const std::vector<uint8_t>& data_;
  const std::vector<uint8_t>& scales_;
  pacts_pool_layout layout_;
  pacts_scale_mode mode_;
  pacts_scale_layout scale_layout_;
  double tensor_scale_;
};

// Decoded rows [key - keys.begin][d] of keys [keys.begin, keys.end) of sequence b, KV head h.
// Reads owned data only; the caller ensures the sequence is valid with in-range entries.
std::vector<double> load_rows(const CaseData& c, const PoolReader& pool, int64_t b, int64_t h,
                              spec::KeyRange keys) {
  const pacts_problem& p = c.problem;
  std::vector<double> rows;
  if (keys.empty()) return rows;
  rows.reserve(static_cast<size_t>(keys.size() * p.head_dim));
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    const int32_t page = c.block_table[static_cast<size_t>(b * p.block_table_stride + j / p.page_size)];
    for (int64_t d = 0; d < p.head_dim; ++d) rows.push_back(pool.value(page, h, j % p.page_size, d));
  }
  return rows;
}

bool entries_in_range(const CaseData& c, int64_t b, spec::KeyRange keys) {
  const pacts_problem& p = c.problem;
  const spec::KeyRange cols = spec::owned_columns(keys, p.page_size);
  for (int64_t col = cols.begin; col < cols.end; ++col) {
    const int32_t page = c.block_table[static_cast<size_t>(b * p.block_table_stride + col)];
    if (page < 0 || page >= p.num_pages) return false;
  }
  return true;
}

// --- EDGE-1 ----------------------------------------------------------------------------------

// Every empty row: every output element +0 (all bits zero) and the LSE -inf.
Outcome judge_empty_rows(const CaseData& c, const Observed& got, int64_t& empty_rows) {
  const pacts_problem& p = c.problem;
  const size_t D = static_cast<size_t>(p.head_dim);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i) {
      if (!row_empty(c, b, i)) continue;
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        ++empty_rows;
        const size_t row = static_cast<size_t>((b * p.q_len + i) * p.num_q_heads + h);
        for (size_t d = 0; d < D; ++d)
          if (got.out_codes[row * D + d] != 0)
            return Outcome::fail(element_name(p, row * D + d, false) + " of an empty row (n " +
                                 std::to_string(context(c, b)) + ", L " + std::to_string(p.q_len) +
                                 ") = " + fmt(got.out_values[row * D + d]) + " (" +
                                 hex(got.out_codes[row * D + d]) + "), must be +0 (0x0)");
        if (p.want_lse && got.lse_codes[row] != kLseOfEmptyRow)
          return Outcome::fail(element_name(p, row, true) + " of an empty row = " +
                               fmt(got.lse_values[row]) + " (" + hex(got.lse_codes[row]) +
                               "), must be -inf (0xff800000)");
      }
    }
  return Outcome::pass();
}

// The twin of a case that certainly has empty rows: one sequence with n = 0 and, for L > 1,
// one with 0 < n < L; sinks toggled (so every case is checked with and without sinks).
CaseSpec empty_twin(const CaseSpec& spec, const CaseData& built, bool sinks_supported) {
  CaseSpec s = spec;
  CaseShape& sh = s.shape;
  sh.contexts = built.context_lens;  // explicit, also when the spec let make_case draw them
  if (sh.batch > 0) {
    const auto b0 = static_cast<size_t>(spec.seed % static_cast<uint64_t>(sh.batch));
    const int32_t short_n = sh.q_len > 1 ? 1 + static_cast<int32_t>((spec.seed >> 8) % (sh.q_len - 1)) : 0;
    sh.contexts[b0] = (sh.batch == 1 && (spec.seed & 4)) ? short_n : 0;
    if (sh.batch > 1) sh.contexts[(b0 + 1) % sh.contexts.size()] = short_n;
  }
  sh.sinks = sinks_supported && !spec.shape.sinks;
  return s;
}

// Q of empty rows and unowned sinks are NaN (they must not be read); one owned sink is -inf,
// the sink whose naive merge gives 0/0 (spec/operator.md §10).
void poison_empty_rows(CaseData& c, uint64_t seed) {
  const pacts_problem& p = c.problem;
  const int qb = spec::element_bytes(p.q_format);
  const uint32_t nan = spec::encode(p.q_format, NAN, spec::Overflow::kNonSaturate);
  bool any_row = false;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i) {
      if (!row_empty(c, b, i)) {
        any_row = any_row || sequence_valid(p, context(c, b));
        continue;
      }
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        for (int64_t d = 0; d < p.head_dim; ++d)
          store_code(c.q, row_offset(p.q_layout, b, i, h) + d, qb, nan);
    }
  if (!p.has_sinks) return;
  const float sink = any_row ? -INFINITY : NAN;  // sinks are owned as soon as one row has a key
  const int64_t h0 = static_cast<int64_t>(seed % static_cast<uint64_t>(p.num_q_heads));
  for (int64_t h = 0; h < p.num_q_heads; ++h)
    if (!any_row || h == h0) std::memcpy(&c.sinks[static_cast<size_t>(h) * 4], &sink, 4);
}

Outcome empty_rows(PropertyContext& ctx, const CaseSpec& spec) {
  const PlanHint hint = split_hint(spec);
  int64_t rows = 0;
  const CaseData c = spec.build();
  const Observed got = observe(ctx.backend, c, hint);
  if (auto o = run_failed(got, "the case as generated")) return *o;
  if (Outcome o = judge_empty_rows(c, got, rows); o.failed()) return with_detail(o, "case as generated");
  if (c.problem.batch == 0) return {Verdict::kPass, "B = 0: the call succeeded", 0};

  CaseData twin = empty_twin(spec, c, ctx.backend.capabilities().sinks).build();
  poison_empty_rows(twin, spec.seed);
  if (auto o = unsupported(ctx.backend, twin.problem)) return *o;
  const Observed got2 = observe(ctx.backend, twin, hint);
  if (auto o = run_failed(got2, "the empty-row twin")) return *o;
  if (Outcome o = judge_empty_rows(twin, got2, rows); o.failed())
    return with_detail(o, std::string("twin with forced empty rows, NaN Q in them, ") +
                              (twin.problem.has_sinks ? "sinks (one -inf)" : "no sinks"));
  return {Verdict::kPass, std::to_string(rows) + " empty rows exact", 0};
}

// --- EDGE-2 ----------------------------------------------------------------------------------

// Guard bytes after the last element of the output and LSE views (spec/contract.md §1.3).
constexpr size_t kGuardTail = 64;

struct GuardedRun {
  RunResult run;
  std::vector<uint8_t> out, lse;
  std::string input_written;  // the first read view the call modified, if any
};

GuardedRun run_guarded(Backend& backend, const CaseData& c0, const PlanHint& hint, uint8_t guard) {
  CaseData c = c0;
  if (!c.out.empty()) c.out.resize(c.out.size() + kGuardTail);
  if (!c.lse.empty()) c.lse.resize(c.lse.size() + kGuardTail);
  std::fill(c.out.begin(), c.out.end(), guard);
  std::fill(c.lse.begin(), c.lse.end(), guard);
  GuardedRun r;
  r.run = backend.run(c.problem, c.buffers(), hint);
  const std::pair<const char*, bool> inputs[] = {
      {"q", c.q == c0.q},           {"k", c.k == c0.k},
      {"v", c.v == c0.v},           {"k_scale", c.k_scale == c0.k_scale},
      {"v_scale", c.v_scale == c0.v_scale}, {"sinks", c.sinks == c0.sinks},
      {"block_table", c.block_table == c0.block_table},
      {"context_lens", c.context_lens == c0.context_lens}};
  for (const auto& [name, same] : inputs)
    if (!same && r.input_written.empty()) r.input_written = name;
  r.out = std::move(c.out);
  r.lse = std::move(c.lse);
  return r;
}

// Flags the bytes of the output (or LSE) view: D (or 1) elements per row at the layout's offsets.
std::vector<uint8_t> view_bytes(const pacts_problem& p, const pacts_row_layout& l, int64_t inner,
                                int element_bytes, size_t size) {
  std::vector<uint8_t> in_view(size, 0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        std::fill_n(in_view.begin() + row_offset(l, b, i, h) * element_bytes,
                    inner * element_bytes, uint8_t{1});
  return in_view;
}

std::optional<Outcome> written_outside(const std::string& run, const std::vector<uint8_t>& bytes,
                                       const std::vector<uint8_t>& in_view, uint8_t guard,
                                       const char* view, size_t view_end) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if ((i < in_view.size() && in_view[i]) || bytes[i] == guard) continue;
    std::ostringstream os;
    os << run << view << " byte " << i << " outside the view ("
       << (i >= view_end ? "after its last element" : "in a gap between rows") << ") was written: "
       << hex(bytes[i]) << ", guard " << hex(guard);
    return Outcome::fail(os.str());
  }
  return std::nullopt;
}

// The out_gap of a case that has none (so that gaps exist), for half of those cases.
CaseSpec with_gaps(const CaseSpec& spec) {
  CaseSpec s = spec;
  if (s.shape.out_gap == 0 && (spec.seed & 2)) s.shape.out_gap = 3 + static_cast<int32_t>(spec.seed % 5);
  return s;
}

Outcome exact_write_set(PropertyContext& ctx, const CaseSpec& spec0) {
  const CaseSpec spec = with_gaps(spec0);
  const CaseData c = spec.build();
  const pacts_problem& p = c.problem;
  if (auto o = unsupported(ctx.backend, p)) return *o;
  const PlanHint hint = split_hint(spec);
  constexpr uint8_t kGuards[2] = {0xA5, 0x5A};
  GuardedRun runs[2] = {run_guarded(ctx.backend, c, hint, kGuards[0]),
                        run_guarded(ctx.backend, c, hint, kGuards[1])};
  const int ob = spec::element_bytes(p.out_format);
  const std::vector<uint8_t> out_view = view_bytes(p, p.out_layout, p.head_dim, ob, c.out.size());
  const std::vector<uint8_t> lse_view =
      p.want_lse ? view_bytes(p, p.lse_layout, 1, 4, c.lse.size()) : std::vector<uint8_t>{};
  for (int r = 0; r < 2; ++r) {
    const GuardedRun& g = runs[r];
    const std::string run = "run with guard " + hex(kGuards[r]) + ": ";
    if (!g.run.status.is_ok()) {
      if (g.run.status.code() == spec::Code::kNotSupported)
        return Outcome::not_supported(g.run.status.message());
      return Outcome::fail(run + "the backend refused a valid problem: " + g.run.status.to_string());
    }
    if (!g.input_written.empty())
      return Outcome::fail(run + "the read view buffers." + g.input_written + " was modified");
    if (auto o = written_outside(run, g.out, out_view, kGuards[r], "out", c.out.size())) return *o;
    if (auto o = written_outside(run, g.lse, lse_view, kGuards[r], "lse", c.lse.size())) return *o;
  }
  // Every element of the views was written: deterministic backends give identical codes in both
  // runs; otherwise an element that holds its guard in both runs was not written.
  const bool deterministic = ctx.backend.capabilities().deterministic;
  const auto check_view = [&](const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                              const pacts_row_layout& l, int64_t inner, int eb,
                              bool per_row) -> std::optional<Outcome> {
    uint32_t guard_code[2] = {0, 0};
    for (int i = 0; i < eb; ++i)
      for (int r = 0; r < 2; ++r) guard_code[r] |= uint32_t{kGuards[r]} << (8 * i);
    size_t dense = 0;
    for (int64_t bi = 0; bi < p.batch; ++bi)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h)
          for (int64_t d = 0; d < inner; ++d, ++dense) {
            const int64_t at = row_offset(l, bi, i, h) + d;
            const uint32_t x = load_code(a, at, eb), y = load_code(b, at, eb);
            const bool unwritten = x == guard_code[0] && y == guard_code[1];
            if (unwritten || (deterministic && x != y))
              return Outcome::fail(element_name(p, dense, per_row) +
                                   (unwritten ? " was not written (holds the guard in both runs)"
                                              : " differs between two runs of one plan: " +
                                                    hex(x) + " vs " + hex(y)));
          }
    return std::nullopt;
  };
  if (auto o = check_view(runs[0].out, runs[1].out, p.out_layout, p.head_dim, ob, false)) return *o;
  if (p.want_lse)
    if (auto o = check_view(runs[0].lse, runs[1].lse, p.lse_layout, 1, 4, true)) return *o;
  return {Verdict::kPass,
          deterministic ? std::string{} : "elements checked as written, not as identical (not deterministic)",
          0};
}

// --- EDGE-3 ----------------------------------------------------------------------------------

// The largest value of format f that is <= x (x not NaN).
double floor_in(pacts_format f, double x) {
  const double r = spec::round_to(f, x);
  if (r <= x) return r;
  if (r == 0) return -spec::format_info(f)->min_subnormal;
  const uint32_t code = spec::encode(f, r, spec::Overflow::kNonSaturate);
  return spec::decode(f, r > 0 ? code - 1 : code + 1);  // sign-magnitude codes
}

double ceil_in(pacts_format f, double x) { return -floor_in(f, -x); }

// Statistics of visible V values for one dim of one row.
struct Hull {
  double lo = INFINITY, hi = -INFINITY, max_abs = 0, sum_abs = 0;
};

// spec/properties.md PACTS-EDGE-3: the hull of the visible V values (with 0 when there is a sink),
// widened by (u_p + gamma_acc) max|v| + eta_p sum|v|, then by the output rounding (u_out, tau_out),
// and rounded outward to out_format.
std::pair<double, double> widened(const spec::NumericsProfile& prof, const pacts_problem& p,
                                  const Hull& hull, int64_t visible) {
  double lo = hull.lo, hi = hull.hi;
  if (p.has_sinks) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  const double gamma_acc = 2 * spec::gamma_n(double(visible + 4), prof.u_acc) +
                           4 * prof.u_partial + 2 * prof.eps_exp;
  double w = (prof.u_p + gamma_acc) * hull.max_abs + spec::eta_p_for(prof, p) * hull.sum_abs;
  if (prof.ftz) w += 2 * 0x1p-126;  // spec/tolerance.md §3.5
  lo -= w;
  hi += w;
  const spec::FormatInfo* out = spec::format_info(p.out_format);
  const double u_out = spec::unit_roundoff(p.out_format);
  const double tau_out = prof.ftz ? out->min_normal : out->min_subnormal / 2;
  lo -= u_out * std::fabs(lo) + tau_out;
  hi += u_out * std::fabs(hi) + tau_out;
  return {floor_in(p.out_format, lo), ceil_in(p.out_format, hi)};
}

// Reference-free: it reads V itself (PoolReader), so it serves shapes too big for the reference.
Outcome convexity(PropertyContext& ctx, const CaseSpec& spec) {
  const CaseData c = spec.build();
  const pacts_problem& p = c.problem;
  const Observed got = observe(ctx.backend, c, split_hint(spec));
  if (auto o = run_failed(got, "PACTS-EDGE-3")) return *o;
  const PoolReader v_pool(c, false);
  const spec::NumericsProfile& prof = ctx.backend.profile();
  const int64_t D = p.head_dim, group = p.num_q_heads / p.num_kv_heads;
  int64_t checked = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int32_t n = context(c, b);
    if (!sequence_valid(p, n)) continue;
    const spec::KeyRange all = visible_keys(p, n);
    if (all.empty() || !entries_in_range(c, b, all)) continue;
    for (int64_t g = 0; g < p.num_kv_heads; ++g) {
      const std::vector<double> v = load_rows(c, v_pool, b, g, all);
      for (int64_t i = 0; i < p.q_len; ++i) {
        const spec::KeyRange keys = row_keys(p, n, i);
        if (keys.empty()) continue;  // empty row: PACTS-EDGE-1
        std::vector<Hull> hulls(static_cast<size_t>(D));
        for (int64_t j = keys.begin; j < keys.end; ++j)
          for (int64_t d = 0; d < D; ++d) {
            const double x = v[static_cast<size_t>((j - all.begin) * D + d)];
            Hull& hl = hulls[static_cast<size_t>(d)];
            hl.lo = std::min(hl.lo, x);
            hl.hi = std::max(hl.hi, x);
            hl.max_abs = std::max(hl.max_abs, std::fabs(x));
            hl.sum_abs += std::fabs(x);
          }
        const int64_t visible = keys.size();
        for (int64_t h = g * group; h < (g + 1) * group; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const auto e = static_cast<size_t>(((b * p.q_len + i) * p.num_q_heads + h) * D + d);
            const auto [lo, hi] = widened(prof, p, hulls[static_cast<size_t>(d)], visible);
            const double x = got.out_values[e];
            ++checked;
            if (x >= lo && x <= hi) continue;
            return Outcome::fail(element_name(p, e, false) + " = " + fmt(x) +
                                 " is outside the hull of its " + std::to_string(visible) +
                                 " visible V values" + (p.has_sinks ? " and 0 (sink)" : "") +
                                 ", widened to [" + fmt(lo) + ", " + fmt(hi) + "]");
          }
      }
    }
  }
  return {Verdict::kPass, std::to_string(checked) + " elements inside their hulls", 0};
}

// --- EDGE-4 ----------------------------------------------------------------------------------

bool finite_code(pacts_format f, uint32_t code) { return std::isfinite(spec::decode(f, code)); }

// Sequences whose rows read a non-finite owned value (spec/contract.md §3): a Q element of one of
// their non-empty rows, a K or V element or its scale, or an owned sink (every sequence with a
// key reads every head's sink).
std::vector<uint8_t> tainted_sequences(const CaseData& c) {
  const pacts_problem& p = c.problem;
  std::vector<uint8_t> tainted(static_cast<size_t>(p.batch), 0);
  bool bad_sink = false;  // R4 allows -inf: only NaN and +inf are outside it
  for (size_t h = 0; h * 4 < c.sinks.size(); ++h) {
    const float s = load_float(c.sinks, static_cast<int64_t>(h));
    bad_sink = bad_sink || std::isnan(s) || s == INFINITY;
  }
  const PoolReader k_pool(c, true), v_pool(c, false);
  const int qb = spec::element_bytes(p.q_format);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int32_t n = context(c, b);
    const spec::KeyRange keys = visible_keys(p, n);
    if (!sequence_valid(p, n) || keys.empty() || !entries_in_range(c, b, keys)) continue;
    bool bad = bad_sink;
    for (int64_t i = 0; i < p.q_len && !bad; ++i) {
      if (row_empty(c, b, i)) continue;
      for (int64_t h = 0; h < p.num_q_heads && !bad; ++h)
        for (int64_t d = 0; d < p.head_dim && !bad; ++d)
          bad = !finite_code(p.q_format, load_code(c.q, row_offset(p.q_layout, b, i, h) + d, qb));
    }
    for (int64_t g = 0; g < p.num_kv_heads && !bad; ++g)
      for (const PoolReader* pool : {&k_pool, &v_pool}) {
        const std::vector<double> rows = load_rows(c, *pool, b, g, keys);
        bad = bad || std::any_of(rows.begin(), rows.end(), [](double x) { return !std::isfinite(x); });
      }
    tainted[static_cast<size_t>(b)] = bad ? 1 : 0;
  }
  return tainted;
}

// One NaN at an owned position, chosen from the seed (spec/properties.md PACTS-EDGE-4,
// generation): a Q element, a K or V element, a per-token scale or e8m0 0xFF, or a sink. MXFP4
// data has no NaN: its NaN is an e8m0 byte.
std::optional<Override> owned_nan(const CaseData& c, uint64_t seed) {
  const pacts_problem& p = c.problem;
  using T = Override::Tensor;
  std::vector<T> tensors = {T::kQ};
  if (p.kv_format != PACTS_FORMAT_E2M1) tensors.insert(tensors.end(), {T::kK, T::kV});
  const auto pooled = [](pacts_scale_mode m) {
    return m == PACTS_SCALE_PER_TOKEN || m == PACTS_SCALE_MX_BLOCK;
  };
  if (pooled(p.k_scale_mode)) tensors.push_back(T::kKScale);
  if (pooled(p.v_scale_mode)) tensors.push_back(T::kVScale);
  if (p.has_sinks) tensors.push_back(T::kSink);
  std::optional<int32_t> seq;
  for (int64_t k = 0; k < p.batch && !seq; ++k) {
    const auto b = static_cast<int32_t>((seed + static_cast<uint64_t>(k)) % static_cast<uint64_t>(p.batch));
    const int32_t n = context(c, b);
    if (sequence_valid(p, n) && n > 0) seq = b;
  }
  if (!seq) return std::nullopt;
  Override o;
  o.tensor = tensors[seed % tensors.size()];
  o.seq = *seq;
  const uint64_t r = seed >> 8;
  const int32_t n = context(c, *seq);
  const spec::KeyRange keys = visible_keys(p, n);
  const bool query = o.tensor == T::kQ, sink = o.tensor == T::kSink;
  if (query) {
    const int32_t first_row = std::max(0, p.q_len - n);  // rows before it are empty
    o.pos = first_row + static_cast<int32_t>(r % static_cast<uint64_t>(p.q_len - first_row));
  } else {
    o.pos = static_cast<int32_t>(keys.begin + static_cast<int64_t>(r % static_cast<uint64_t>(keys.size())));
  }
  o.head = static_cast<int32_t>((r >> 16) % static_cast<uint64_t>(query || sink ? p.num_q_heads : p.num_kv_heads));
  const bool scale = o.tensor == T::kKScale || o.tensor == T::kVScale;
  const int32_t dims = scale ? std::max(p.head_dim / 32, 1) : p.head_dim;
  o.dim = static_cast<int32_t>((r >> 32) % static_cast<uint64_t>(dims));
  const pacts_scale_mode mode = o.tensor == T::kKScale ? p.k_scale_mode : p.v_scale_mode;
  if (query) o.code = spec::encode(p.q_format, NAN, spec::Overflow::kNonSaturate);
  else if (sink || (scale && mode == PACTS_SCALE_PER_TOKEN)) o.code = 0x7FC00000u;
  else if (scale) o.code = 0xFF;
  else o.code = spec::encode(p.kv_format, NAN, spec::Overflow::kNonSaturate);
  return o;
}


Outcome nan_propagates(PropertyContext& ctx, const CaseSpec& spec0) {
  CaseSpec spec = spec0;
  CaseData c = spec.build();
  std::vector<uint8_t> tainted = tainted_sequences(c);
  std::string placed;
  if (std::none_of(tainted.begin(), tainted.end(), [](uint8_t t) { return t != 0; })) {
    const std::optional<Override> nan = owned_nan(c, spec.seed);
    if (!nan) return Outcome::not_applicable("no sequence has a key to carry a NaN");
    spec.overrides.push_back(*nan);
    c = spec.build();
    tainted = tainted_sequences(c);
    static const char* const kTensor[] = {"Q", "K", "V", "K scale", "V scale", "sink"};
    placed = std::string("placed a NaN in ") + kTensor[static_cast<int>(nan->tensor)] + " (seq " +
             std::to_string(nan->seq) + ", pos " + std::to_string(nan->pos) + ", head " +
             std::to_string(nan->head) + ", dim/block " + std::to_string(nan->dim) + ")";
  }
  const pacts_problem& p = c.problem;
  const Observed got = observe(ctx.backend, c, split_hint(spec));
  if (auto o = run_failed(got, "PACTS-EDGE-4")) return *o;
  const reference::Output ref = reference_answer(c, ctx.backend);
  const spec::NumericsProfile& prof = ctx.backend.profile();
  const size_t D = static_cast<size_t>(p.head_dim);
  const size_t rows_per_seq = static_cast<size_t>(p.q_len) * static_cast<size_t>(p.num_q_heads);
  std::optional<Outcome> warning;
  double worst = 0;
  // Returns a Fail for a clean sequence (Mandatory, spec/contract.md §2.3); records the first
  // violation in a tainted one (QualityWarning, spec/contract.md §3).
  const auto judge = [&](double value, double r, double bound, size_t index, size_t row,
                         bool per_row) -> std::optional<Outcome> {
    // An Inf input makes S infinite, and the bound's 0 * S terms NaN: no finite bound exists
    // there, so any finite value of a finite reference is accepted (never a non-finite one).
    if (std::isnan(bound)) bound = INFINITY;
    double ratio = 0;
    if (spec::within_bound(value, r, bound, &ratio)) {
      if (std::isfinite(ratio)) worst = std::max(worst, ratio);
      return std::nullopt;
    }
    const bool clean = !tainted[row / rows_per_seq];
    std::string what = element_name(p, index, per_row) + " = " + fmt(value) + ", reference " +
                       fmt(r) + ", bound " + fmt(bound);
    if (clean) return Outcome::fail(what + ": a sequence without non-finite data was affected" +
                                    (placed.empty() ? "" : " (" + placed + ")"), ratio);
    if (!warning)
      warning = Outcome{Verdict::kQualityWarning,
                        what + (std::isnan(r) ? ": NaN did not propagate" : ": NaN spread too far") +
                            (placed.empty() ? "" : " (" + placed + ")"),
                        ratio};
    return std::nullopt;
  };
  for (size_t e = 0; e < got.out_values.size(); ++e) {
    const size_t row = e / D;
    const double r = ref.row_invalid[row] ? NAN : ref.out[e];
    if (auto o = judge(got.out_values[e], r, spec::output_bound(prof, p, reference::bound_inputs(ref, row, e), r), e, row, false))
      return *o;
  }
  for (size_t row = 0; row < got.lse_values.size(); ++row) {
    const double r = ref.row_invalid[row] ? NAN : ref.lse[row];
    if (auto o = judge(got.lse_values[row], r, spec::lse_bound(prof, p, reference::bound_inputs(ref, row, row * D), r), row, row, true))
      return *o;
  }
  if (warning) return *warning;
  return {Verdict::kPass, placed, worst};
}

// --- EDGE-5 ----------------------------------------------------------------------------------

// Largest |decoded code| of every element of a buffer in format f (0 when empty).
double max_abs_code(const std::vector<uint8_t>& bytes, pacts_format f) {
  const int eb = spec::element_bytes(f);
  double m = 0;
  for (size_t i = 0; eb > 0 && i + static_cast<size_t>(eb) <= bytes.size(); i += static_cast<size_t>(eb)) {
    const double x = spec::decode(f, load_code(bytes, static_cast<int64_t>(i / static_cast<size_t>(eb)), eb));
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  }
  return m;
}

int ceil_log2(double x) { return x > 0 ? static_cast<int>(std::ceil(std::log2(x))) : 0; }

// A power of two 2^e with e lowered from `want` until `fits(e)` holds; nullopt when none does
// within 64 steps.
template <class Fits>
std::optional<int> fitting_exponent(int want, Fits fits) {
  for (int e = want; e > want - 64; --e)
    if (fits(e)) return e;
  return std::nullopt;
}

enum class Extreme {
  kAsGenerated, kMxKeyScales, kHugeKey, kHugeQuery, kHugeValues, kHugeLogits, kNegativeLogits,
  kTinyValues
};

const char* extreme_name(Extreme x) {
  switch (x) {
    case Extreme::kAsGenerated: return "e8m0 extremes as generated";
    case Extreme::kMxKeyScales: return "e8m0 K bytes up to 250 with a tiny Q";
    case Extreme::kHugeKey: return "K near 2^120 through k_scale, Q tiny through q_scale";
    case Extreme::kHugeQuery: return "Q near 2^120 through q_scale, K tiny through k_scale";
    case Extreme::kHugeValues: return "V near 2^94";
    case Extreme::kHugeLogits: return "logits near 2^62 through softmax_scale, sinks +-2^64";
    case Extreme::kNegativeLogits:
      return "every logit of a row far below -5e4 (finite; a sentinel maximum misses them)";
    case Extreme::kTinyValues:
      return "V near 2^-100 (per-token V scales of fp8 pools, a per-tensor scale; MXFP4: K and V "
             "e8m0 bytes 0 to 6 with a query near 2^119)";
  }
  return "?";
}

// Structural half of an extreme (spec/properties.md PACTS-EDGE-5, cases). Overrides are dropped:
// special codes next to extreme scales would leave the range contract.
CaseSpec extreme_spec(const CaseSpec& spec, Extreme x) {
  CaseSpec s = spec;
  CaseShape& sh = s.shape;
  const bool mx = sh.kv_format == PACTS_FORMAT_E2M1;
  if (x == Extreme::kAsGenerated) return s;
  s.overrides.clear();
  switch (x) {
    case Extreme::kMxKeyScales: {
      const int32_t high = 240 + static_cast<int32_t>((spec.seed >> 8) % 11);  // <= 250: R1
      sh.kv_format = PACTS_FORMAT_E2M1;
      sh.k_scale_mode = sh.v_scale_mode = PACTS_SCALE_MX_BLOCK;
      sh.k_e8m0_lo = high - 2;
      sh.k_e8m0_hi = high;
      sh.q_exponent = 127 - high - 2;
      sh.v_e8m0_lo = static_cast<int32_t>((spec.seed >> 16) % 3) * 50;
      sh.v_e8m0_hi = sh.v_e8m0_lo + 100;  // <= 200: |v| <= 6 * 2^73 (R2)
      if (sh.out_format == PACTS_FORMAT_FP16) {
        sh.v_e8m0_lo = std::min(sh.v_e8m0_lo, 100);
        sh.v_e8m0_hi = 139;  // |v| <= 6 * 2^12 < 2^15 (R2 with an fp16 output)
      }
      break;
    }
    case Extreme::kHugeKey:
    case Extreme::kHugeQuery:
      if (!mx) sh.k_scale_mode = PACTS_SCALE_PER_TENSOR;
      break;
    case Extreme::kHugeValues:
      if (mx) {
        sh.v_e8m0_lo = 190;
        sh.v_e8m0_hi = 194;  // 6 * 2^67
      } else {
        sh.v_scale_mode = PACTS_SCALE_PER_TENSOR;
      }
      if (sh.out_format == PACTS_FORMAT_FP16) sh.out_format = PACTS_FORMAT_FP32;  // R2: fp16 <= 2^15
      break;
    case Extreme::kHugeLogits: break;
    case Extreme::kTinyValues: {
      // The V values of every key near 2^-100, below what an fp8 code times a per-token scale
      // can give through a kernel's matrix path (kernels/hip: its tiny keys, on the CUDA cores):
      // per-token scales for the fp8 formats, a per-tensor one for the others; for MXFP4, K and V
      // e8m0 bytes 0 to 6 and a query near 2^119 (outputs deep in fp32's subnormal range:
      // spec/tolerance.md §3.3's tau_acc). An fp32 output: fp16 has no value there.
      const bool fp8 = sh.kv_format == PACTS_FORMAT_E4M3FN || sh.kv_format == PACTS_FORMAT_E4M3FNUZ ||
                       sh.kv_format == PACTS_FORMAT_E5M2 || sh.kv_format == PACTS_FORMAT_E5M2FNUZ;
      if (mx) {
        sh.k_e8m0_lo = sh.v_e8m0_lo = 0;
        sh.k_e8m0_hi = sh.v_e8m0_hi = 6;
        sh.q_exponent = 127 - 6 - 2;  // |q k| near 2^-6 x code products: R1 and R3 hold
      } else {
        sh.v_scale_mode = fp8 ? PACTS_SCALE_PER_TOKEN : PACTS_SCALE_PER_TENSOR;
      }
      if (sh.out_format == PACTS_FORMAT_FP16) sh.out_format = PACTS_FORMAT_FP32;
      break;
    }
    case Extreme::kNegativeLogits: {
      // K's dim 0 is +1 and Q's dim 0 is -128 at every position, so that q . k is dominated by
      // -128 k-scale and every logit of a row is negative; apply_extreme then scales them far
      // below -5e4. No sink or soft-cap: either would keep the row's largest logit near 0.
      sh.sinks = false;
      sh.softcap = 0;
      if (mx) break;  // an MXFP4 element's scale varies by block: not placed (apply_extreme)
      const uint32_t one = spec::encode(sh.kv_format, 1.0, spec::Overflow::kNonSaturate);
      const uint32_t minus = spec::encode(sh.q_format, -128.0, spec::Overflow::kNonSaturate);
      for (int32_t b = 0; b < sh.batch; ++b) {
        const int32_t n = b < static_cast<int32_t>(sh.contexts.size()) ? sh.contexts[static_cast<size_t>(b)] : 0;
        for (int32_t h = 0; h < sh.num_kv_heads; ++h)
          for (int32_t j = 0; j < n; ++j)
            s.overrides.push_back({Override::Tensor::kK, b, j, h, 0, one});
        for (int32_t i = 0; i < sh.q_len; ++i)
          for (int32_t h = 0; h < sh.num_q_heads; ++h)
            s.overrides.push_back({Override::Tensor::kQ, b, i, h, 0, minus});
      }
      break;
    }
    case Extreme::kAsGenerated: break;
  }
  return s;
}

// Numeric half: scalars moved to the edges, keeping every exact logit (or the structure) the same.
// Returns false when the case cannot take the extreme.
bool apply_extreme(CaseData& c, Extreme x, uint64_t seed) {
  pacts_problem& p = c.problem;
  const bool mx = p.kv_format == PACTS_FORMAT_E2M1;
  switch (x) {
    case Extreme::kHugeKey:
    case Extreme::kHugeQuery: {
      if (mx) return false;
      // q_scale * k_scale stays the same power-of-two product: every logit is unchanged.
      const double product = double{p.q_scale} * double{p.k_scale};
      const bool key = x == Extreme::kHugeKey;
      const double code_max = key ? max_abs_code(c.k, p.kv_format) : max_abs_code(c.q, p.q_format);
      if (code_max == 0) return false;
      const auto e = fitting_exponent(120 - ceil_log2(code_max), [&](int k) {
        return std::isnormal(static_cast<float>(std::ldexp(product, -k)));
      });
      if (!e) return false;
      const float big = std::ldexp(1.0f, *e), small = static_cast<float>(std::ldexp(product, -*e));
      p.k_scale = key ? big : small;
      p.q_scale = key ? small : big;
      // R3: softmax_scale * |q_d| <= 2^126.
      return double{p.softmax_scale} * max_abs_code(c.q, p.q_format) * p.q_scale <= 0x1p126;
    }
    case Extreme::kHugeValues: {
      if (mx) return true;
      const double code_max = max_abs_code(c.v, p.kv_format);
      if (code_max == 0) return false;
      p.v_scale = std::ldexp(1.0f, 94 - ceil_log2(code_max));
      return true;
    }
    case Extreme::kHugeLogits: {
      const reference::Output ref = reference_answer(c);
      double s_max = 0;
      for (double s : ref.logit_abs_dot) s_max = std::max(s_max, s);
      if (s_max == 0) return false;
      const double q_max = max_abs_code(c.q, p.q_format) * p.q_scale;
      const auto e = fitting_exponent(62 - ceil_log2(s_max), [&](int k) {
        const double tau = std::ldexp(double{p.softmax_scale}, k);
        return std::isnormal(static_cast<float>(tau)) && tau * q_max <= 0x1p126 &&
               std::ldexp(s_max, k) <= 0x1p63;
      });
      if (!e) return false;
      p.softmax_scale = std::ldexp(p.softmax_scale, *e);
      for (size_t h = 0; h * 4 < c.sinks.size(); ++h) {
        const float sink = ((seed >> (h % 64)) & 1) ? 0x1p64f : -0x1p64f;  // R4
        std::memcpy(&c.sinks[h * 4], &sink, 4);
      }
      return true;
    }
    case Extreme::kNegativeLogits: {
      if (mx) return false;
      // The most negative row LSE (an upper bound of its every logit) moved below -2^17 by a
      // power of two on softmax_scale, within R3; placed only when some row ends below -6e4.
      reference::Output ref = reference_answer(c);
      double most = 0;
      for (double l : ref.lse)
        if (std::isfinite(l)) most = std::min(most, l);
      if (most >= 0) return false;
      const double q_max = max_abs_code(c.q, p.q_format) * p.q_scale;
      double dot_max = 0;
      for (double d : ref.logit_abs_dot) dot_max = std::max(dot_max, d);
      const auto e = fitting_exponent(ceil_log2(0x1p17 / -most), [&](int k) {
        const double tau = std::ldexp(double{p.softmax_scale}, k);
        return std::isnormal(static_cast<float>(tau)) && tau * q_max <= 0x1p126 &&
               std::ldexp(dot_max, k) <= 0x1p63;
      });
      if (!e) return false;
      p.softmax_scale = std::ldexp(p.softmax_scale, *e);
      ref = reference_answer(c);
      for (double l : ref.lse)
        if (std::isfinite(l) && l < -6e4) return true;
      return false;
    }
    case Extreme::kTinyValues: {
      if (mx) return true;
      const double code_max = max_abs_code(c.v, p.kv_format);
      if (code_max == 0) return false;
      if (p.v_scale_mode == PACTS_SCALE_PER_TENSOR) {
        p.v_scale = std::ldexp(1.0f, -100 - ceil_log2(code_max));
        return true;
      }
      if (p.v_scale_mode != PACTS_SCALE_PER_TOKEN) return false;
      // Every per-token scale times the same power of two, so that code_max times the largest
      // lands at or below 2^-100 (a scale may become an fp32 subnormal or 0: R2 allows it).
      std::vector<float> s(c.v_scale.size() / 4);
      std::memcpy(s.data(), c.v_scale.data(), s.size() * 4);
      double s_max = 0;
      for (float scale : s)
        if (std::isfinite(scale)) s_max = std::max(s_max, std::fabs(double{scale}));
      if (s_max == 0) return false;
      const int down = ceil_log2(code_max * s_max) + 100;
      for (float& scale : s)
        if (std::isfinite(scale)) scale = std::ldexp(scale, -down);
      std::memcpy(c.v_scale.data(), s.data(), s.size() * 4);
      return true;
    }
    case Extreme::kMxKeyScales:
    case Extreme::kAsGenerated: return true;
  }
  return false;
}

// R2 and R3 (spec/contract.md §2), from the reference's statistics: |v| <= 2^96 (2^15 with an
// fp16 output), A_j <= 2^64 and tau * A_j <= 2^64 for every visible key. A case outside them is
// not a test of the backend but a generator defect.
std::optional<std::string> outside_contract(const pacts_problem& p, const reference::Output& ref) {
  const double v_limit = p.out_format == PACTS_FORMAT_FP16 ? 0x1p15 : 0x1p96;
  for (size_t e = 0; e < ref.max_abs_v.size(); ++e)
    if (ref.max_abs_v[e] > v_limit)
      return "R2: " + element_name(p, e, false) + " sees |v| = " + fmt(ref.max_abs_v[e]) +
             " > " + fmt(v_limit);
  for (size_t row = 0; row < ref.logit_abs_dot.size(); ++row) {
    const double tau_a = ref.logit_abs_dot[row];
    if (tau_a > 0x1p64 || tau_a / double{p.softmax_scale} > 0x1p64)
      return "R3: " + element_name(p, row, true) + ": softmax_scale * sum |q k| = " + fmt(tau_a);
  }
  return std::nullopt;
}

// One extreme placed in the case and judged: ACC-1 and ACC-2, every value finite and within its
// bound (the LSE when requested).
Outcome judge_extreme(PropertyContext& ctx, const CaseSpec& spec0, Extreme x) {
  const CaseSpec spec = extreme_spec(spec0, x);
  CaseData c = spec.build();
  if (!apply_extreme(c, x, spec.seed))
    return Outcome::not_applicable(std::string(extreme_name(x)) + " cannot be placed in this case");
  if (auto o = unsupported(ctx.backend, c.problem)) return *o;
  const reference::Output ref = reference_answer(c, ctx.backend);
  if (auto why = outside_contract(c.problem, ref))
    return Outcome::not_applicable(std::string(extreme_name(x)) +
                                   ": the case leaves the range contract, a generator defect: " + *why);
  const Observed got = observe(ctx.backend, c, split_hint(spec));
  if (auto o = run_failed(got, "PACTS-EDGE-5")) return *o;
  return with_detail(within_tolerance(ctx.backend, c.problem, got, ref), extreme_name(x));
}

Outcome range_extremes(PropertyContext& ctx, const CaseSpec& spec0) {
  const CaseShape& sh0 = spec0.shape;
  const bool generated_extreme =
      sh0.kv_format == PACTS_FORMAT_E2M1 && (sh0.k_e8m0_hi > 200 || sh0.q_exponent != 0);
  static constexpr Extreme kChoices[] = {Extreme::kMxKeyScales, Extreme::kHugeKey,
                                         Extreme::kHugeQuery, Extreme::kHugeValues,
                                         Extreme::kHugeLogits};
  Extreme x = generated_extreme ? Extreme::kAsGenerated : kChoices[spec0.seed % 5];
  if (sh0.kv_format == PACTS_FORMAT_E2M1 && (x == Extreme::kHugeKey || x == Extreme::kHugeQuery))
    x = Extreme::kMxKeyScales;  // MXFP4 has no per-tensor scale: its K extremes are e8m0 bytes
  const Outcome first = judge_extreme(ctx, spec0, x);
  if (first.failed() || generated_extreme) return first;
  // Every case also places very negative logits (flashinfer #4450: a finite sentinel maximum)
  // and values near the bottom of R2 (a kernel that drops or flushes tiny values).
  const Outcome second = judge_extreme(ctx, spec0, Extreme::kNegativeLogits);
  if (second.failed()) return second;
  const Outcome third = judge_extreme(ctx, spec0, Extreme::kTinyValues);
  if (third.failed()) return third;
  if (first.verdict == Verdict::kPass || second.verdict == Verdict::kNotApplicable) return first;
  return second;
}

// --- EDGE-6 ----------------------------------------------------------------------------------

// K at the top of R1: k_scale is raised to the largest power of two that keeps every scaled K
// element <= 2^126 (spec/contract.md §2, R1), and q_scale lowered by the same power of two, so
// every exact logit is unchanged. A kernel that defers a factor far below 1 (the Q scale, as
// #7056 deferred its Q quantisation scale) past the Q.K accumulation holds the logit divided by
// that factor, which overflows here; spec/contract.md §2.1 forbids any overflow inside the
// contract. MXFP4 K reaches the top of R1 through e8m0 bytes instead: EDGE-5's K extremes.
Outcome top_of_range_keys(PropertyContext& ctx, const CaseSpec& spec0) {
  CaseSpec spec = spec0;
  spec.overrides.clear();  // special codes next to extreme scales would leave R1-R3
  if (spec.shape.kv_format == PACTS_FORMAT_E2M1)
    return Outcome::not_applicable("MXFP4 K has no per-tensor scale (EDGE-5 places its e8m0 K "
                                   "bytes up to 250)");
  spec.shape.k_scale_mode = PACTS_SCALE_PER_TENSOR;
  CaseData c = spec.build();
  pacts_problem& p = c.problem;
  const double code_max = max_abs_code(c.k, p.kv_format);
  if (code_max == 0) return Outcome::not_applicable("every K code is zero");
  const double product = double{p.q_scale} * double{p.k_scale};
  const auto e = fitting_exponent(126 - ceil_log2(code_max), [&](int k) {
    return std::isnormal(static_cast<float>(std::ldexp(product, -k)));
  });
  if (!e) return Outcome::not_applicable("no normal q_scale keeps the logits");
  p.k_scale = std::ldexp(1.0f, *e);
  p.q_scale = static_cast<float>(std::ldexp(product, -*e));
  if (auto o = unsupported(ctx.backend, p)) return *o;
  const reference::Output ref = reference_answer(c, ctx.backend);
  if (auto why = outside_contract(p, ref))
    return Outcome::not_applicable("K at 2^" + std::to_string(*e) +
                                   ": the case leaves the range contract, a generator defect: " + *why);
  const Observed got = observe(ctx.backend, c, split_hint(spec));
  if (auto o = run_failed(got, "PACTS-EDGE-6")) return *o;
  return with_detail(within_tolerance(ctx.backend, p, got, ref),
                     "K scaled to 2^" + std::to_string(*e) + " x codes, q_scale " + fmt(p.q_scale));
}

}  // namespace

std::vector<Property> edge_properties() {
  GenLimits empty_rows_limits;  // batches that mix n = 0, n < L and ordinary sequences
  empty_rows_limits.max_reference_work = int64_t{1} << 20;
  GenLimits write_set_limits;
  write_set_limits.max_reference_work = int64_t{1} << 20;
  GenLimits convexity_limits;  // reference-free: longer contexts
  convexity_limits.long_context = 4096;
  GenLimits nan_limits;
  nan_limits.non_finite = true;
  GenLimits extreme_limits;
  extreme_limits.e8m0_extremes = true;
  extreme_limits.special_values = false;  // special codes next to extreme scales leave R1-R3
  return {
      make_property("PACTS-EDGE-1", "EmptyRows", Level::kMandatory, true, empty_rows_limits, empty_rows),
      make_property("PACTS-EDGE-2", "ExactWriteSet", Level::kMandatory, true, write_set_limits, exact_write_set),
      make_property("PACTS-EDGE-3", "Convexity", Level::kMandatory, false, convexity_limits, convexity),
      make_property("PACTS-EDGE-4", "NanPropagates", Level::kQualityWarning, false, nan_limits, nan_propagates),
      make_property("PACTS-EDGE-5", "RangeExtremes", Level::kMandatory, false, extreme_limits, range_extremes),
      make_property("PACTS-EDGE-6", "TopOfRangeKeys", Level::kMandatory, false, extreme_limits, top_of_range_keys),
  };
}

}  // namespace pacts::conformance
