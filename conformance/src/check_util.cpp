#include <pacts/conformance/check_util.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/tolerance.h>

#include <cmath>
#include <cstring>
#include <sstream>

namespace pacts::conformance {
namespace {

uint32_t load_code(const std::vector<uint8_t>& buf, int64_t element, int bytes) {
  uint32_t code = 0;
  std::memcpy(&code, buf.data() + element * bytes, static_cast<size_t>(bytes));
  return code;
}

int64_t row_offset(const pacts_row_layout& l, int64_t b, int64_t i, int64_t h) {
  return b * l.s_batch + i * l.s_tok + h * l.s_head;
}

std::string fmt(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}


}  // namespace

bool exact_scaling_comparable(double x, int k, pacts_format format) {
  const spec::FormatInfo* fi = spec::format_info(format);
  const double scaled = std::ldexp(x, k);
  return fi != nullptr && std::isfinite(x) && std::fabs(x) > fi->min_normal &&
         std::fabs(scaled) > fi->min_normal && std::fabs(scaled) <= fi->max_finite;
}

std::string element_name(const pacts_problem& p, size_t index, bool per_row) {
  const size_t D = per_row ? 1 : static_cast<size_t>(p.head_dim);
  const size_t d = index % D, row = index / D;
  const size_t h = row % static_cast<size_t>(p.num_q_heads);
  const size_t i = row / static_cast<size_t>(p.num_q_heads) % static_cast<size_t>(p.q_len);
  const size_t b = row / static_cast<size_t>(p.num_q_heads) / static_cast<size_t>(p.q_len);
  std::ostringstream os;
  os << (per_row ? "lse" : "out") << "[b " << b << ", i " << i << ", h " << h;
  if (!per_row) os << ", d " << d;
  os << "]";
  return os.str();
}

namespace {

// Runs `run` on a copy of `c0` whose out and lse hold `guard` bytes, then reads the outputs back
// through their layouts.
template <class RunFn>
Observed observe_with(const CaseData& c0, uint8_t guard, RunFn run) {
  CaseData c = c0;
  std::fill(c.out.begin(), c.out.end(), guard);
  std::fill(c.lse.begin(), c.lse.end(), guard);
  Observed o;
  o.run = run(c);
  const pacts_problem& p = c.problem;
  const int ob = spec::element_bytes(p.out_format);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        const int64_t at = row_offset(p.out_layout, b, i, h);
        for (int64_t d = 0; d < p.head_dim; ++d) {
          const uint32_t code = load_code(c.out, at + d, ob);
          o.out_codes.push_back(code);
          o.out_values.push_back(spec::decode(p.out_format, code));
        }
        if (p.want_lse) {
          const uint32_t code = load_code(c.lse, row_offset(p.lse_layout, b, i, h), 4);
          o.lse_codes.push_back(code);
          o.lse_values.push_back(spec::decode(PACTS_FORMAT_FP32, code));
        }
      }
  o.out = std::move(c.out);
  o.lse = std::move(c.lse);
  return o;
}

}  // namespace

Observed observe_written(const CaseData& c) {
  // observe_with fills out and lse with the guard first: hand it the written bytes back.
  return observe_with(c, 0, [&](CaseData& copy) {
    copy.out = c.out;
    copy.lse = c.lse;
    return RunResult{};
  });
}

Observed observe(Backend& backend, const CaseData& c0, const PlanHint& hint, uint8_t guard) {
  return observe_with(c0, guard, [&](CaseData& c) { return backend.run(c.problem, c.buffers(), hint); });
}

Observed observe_replayed(Backend& backend, const CaseData& c0, std::span<const int32_t> replayed,
                          const PlanHint& hint, uint8_t guard) {
  return observe_with(c0, guard, [&](CaseData& c) {
    return backend.run_replayed(c.problem, c.buffers(), replayed, hint);
  });
}

std::optional<Outcome> unsupported(const Backend& backend, const pacts_problem& problem) {
  const spec::Status s = check_capabilities(backend.capabilities(), problem);
  if (s.is_ok()) return std::nullopt;
  return Outcome::not_supported(s.message());
}

std::optional<Outcome> run_failed(const Observed& o, const char* what) {
  if (o.run.status.is_ok()) return std::nullopt;
  if (o.run.status.code() == spec::Code::kNotSupported)
    return Outcome::not_supported(std::string(what) + ": " + o.run.status.message());
  if (o.run.lost == RunResult::Lost::kCrash)
    return Outcome{Verdict::kCrash, std::string(what) + ": " + o.run.status.message(), 0};
  if (o.run.lost == RunResult::Lost::kTimeout)
    return Outcome{Verdict::kTimeout, std::string(what) + ": " + o.run.status.message(), 0};
  return Outcome::fail(std::string(what) + ": the backend refused a valid problem: " +
                       o.run.status.to_string());
}

namespace {
// The elements outside their bounds: a Fail names the worst of them (the largest error/bound
// ratio, NaN counted as infinite) and says how many there were.
struct Misses {
  size_t count = 0;
  double ratio = -1;
  std::string worst;
  template <typename Describe>
  void add(double r, Describe describe) {
    ++count;
    const double key = std::isnan(r) ? INFINITY : r;
    if (key > ratio) {
      ratio = key;
      worst = describe();
    }
  }
  Outcome outcome(double worst_pass) const {
    if (count == 0) return Outcome::pass(worst_pass);
    return Outcome::fail(worst + (count > 1 ? " (the worst of " + std::to_string(count) +
                                                   " elements outside their bounds)"
                                            : std::string()),
                         ratio);
  }
};
}  // namespace

Outcome within_tolerance(const Backend& backend, const pacts_problem& p, const Observed& got,
                         const reference::Output& ref) {
  return within_tolerance(backend.profile(), p, got, ref);
}

Outcome within_tolerance(const spec::NumericsProfile& prof, const pacts_problem& p,
                         const Observed& got, const reference::Output& ref) {
  const size_t D = static_cast<size_t>(p.head_dim);
  double worst = 0;
  Misses misses;
  for (size_t e = 0; e < got.out_values.size(); ++e) {
    const size_t row = e / D;
    const double r = ref.row_invalid[row] ? NAN : ref.out[e];
    const double bound = spec::output_bound(prof, p, reference::bound_inputs(ref, row, e), r);
    double ratio = 0;
    if (!spec::within_bound(got.out_values[e], r, bound, &ratio)) {
      misses.add(ratio, [&] {
        return element_name(p, e, false) + " = " + fmt(got.out_values[e]) + ", reference " + fmt(r) +
               ", bound " + fmt(bound) + " (" + std::to_string(ref.visible[row]) + " visible keys)";
      });
      continue;
    }
    worst = std::fmax(worst, ratio);
  }
  for (size_t row = 0; row < got.lse_values.size(); ++row) {
    const double r = ref.row_invalid[row] ? NAN : ref.lse[row];
    const double bound = spec::lse_bound(prof, p, reference::bound_inputs(ref, row, row * D), r);
    double ratio = 0;
    if (!spec::within_bound(got.lse_values[row], r, bound, &ratio)) {
      misses.add(ratio, [&] {
        return element_name(p, row, true) + " = " + fmt(got.lse_values[row]) + ", reference " +
               fmt(r) + ", bound " + fmt(bound);
      });
      continue;
    }
    worst = std::fmax(worst, ratio);
  }
  return misses.outcome(worst);
}

Outcome within_two_bounds(const Backend& backend, const pacts_problem& p, const Observed& a,
                          const Observed& b, const reference::Output& ref) {
  const spec::NumericsProfile& prof = backend.profile();
  const size_t D = static_cast<size_t>(p.head_dim);
  double worst = 0;
  Misses misses;
  for (size_t e = 0; e < a.out_values.size(); ++e) {
    const size_t row = e / D;
    const double r = ref.row_invalid[row] ? NAN : ref.out[e];
    const double bound = 2 * spec::output_bound(prof, p, reference::bound_inputs(ref, row, e), r);
    double ratio = 0;
    // b stands in for the reference: same class rules, twice the bound.
    const bool ok = std::isnan(r) ? std::isnan(a.out_values[e]) && std::isnan(b.out_values[e])
                                  : spec::within_bound(a.out_values[e], b.out_values[e], bound, &ratio);
    if (!ok) {
      misses.add(std::isnan(r) ? INFINITY : ratio, [&] {
        return element_name(p, e, false) + ": " + fmt(a.out_values[e]) + " vs " +
               fmt(b.out_values[e]) + ", allowed " + fmt(bound);
      });
      continue;
    }
    worst = std::fmax(worst, ratio);
  }
  for (size_t row = 0; row < a.lse_values.size() && row < b.lse_values.size(); ++row) {
    const double r = ref.row_invalid[row] ? NAN : ref.lse[row];
    const double bound = 2 * spec::lse_bound(prof, p, reference::bound_inputs(ref, row, row * D), r);
    double ratio = 0;
    const bool ok = std::isnan(r) ? std::isnan(a.lse_values[row]) && std::isnan(b.lse_values[row])
                                  : spec::within_bound(a.lse_values[row], b.lse_values[row], bound, &ratio);
    if (!ok) {
      misses.add(std::isnan(r) ? INFINITY : ratio, [&] {
        return element_name(p, row, true) + ": " + fmt(a.lse_values[row]) + " vs " +
               fmt(b.lse_values[row]) + ", allowed " + fmt(bound);
      });
      continue;
    }
    worst = std::fmax(worst, ratio);
  }
  return misses.outcome(worst);
}

Outcome same_bits(const Observed& a, const Observed& b, const std::string& what) {
  if (a.run.device_error != b.run.device_error)
    return Outcome::fail(what + ": device error word " + std::to_string(a.run.device_error) +
                         " vs " + std::to_string(b.run.device_error));
  for (size_t e = 0; e < a.out_codes.size() && e < b.out_codes.size(); ++e)
    if (a.out_codes[e] != b.out_codes[e])
      return Outcome::fail(what + ": output element " + std::to_string(e) + " differs: " +
                           fmt(a.out_values[e]) + " vs " + fmt(b.out_values[e]));
  for (size_t r = 0; r < a.lse_codes.size() && r < b.lse_codes.size(); ++r)
    if (a.lse_codes[r] != b.lse_codes[r])
      return Outcome::fail(what + ": LSE of row " + std::to_string(r) + " differs: " +
                           fmt(a.lse_values[r]) + " vs " + fmt(b.lse_values[r]));
  if (a.out_codes.size() != b.out_codes.size() || a.lse_codes.size() != b.lse_codes.size())
    return Outcome::fail(what + ": the runs have different shapes");
  return Outcome::pass();
}

Outcome same_bits_or_flushed(const Observed& got, const Observed& want, bool ftz,
                             const std::string& what) {
  if (!ftz) return same_bits(got, want, what);
  Observed flushed = want;  // the reference's codes, with the flushed zero put where allowed
  for (size_t e = 0; e < got.out_codes.size() && e < want.out_codes.size(); ++e)
    if (got.out_values[e] == 0.0 && std::fabs(want.out_values[e]) < 0x1p-126) {
      flushed.out_codes[e] = got.out_codes[e];
      flushed.out_values[e] = got.out_values[e];
    }
  return same_bits(got, flushed, what + " (the profile flushes: +-0 accepted below 2^-126)");
}

spec::Result<Outcome> same_owned_then_same_bits(const CaseData& a, const CaseData& b) {
  if (std::memcmp(&a.problem, &b.problem, sizeof a.problem) != 0)
    return spec::invalid_argument("the two cases have different problems: the poison relation "
                                  "compares one problem over two fills of its unowned bytes");
  const auto whole = [](const char* name, const auto& x, const auto& y) -> spec::Status {
    if (x == y) return spec::Status::ok();
    return spec::invalid_argument(std::string(name) + ": differs between the two cases; only "
                                  "unowned bytes of K, V, their scales and the block table may");
  };
  for (const spec::Status& s : {whole("query", a.q, b.q), whole("sinks", a.sinks, b.sinks),
                                whole("context_lens", a.context_lens, b.context_lens)})
    if (!s) return s;
  const Ownership own = owned_bytes(a);
  const auto owned = [](const char* name, const std::vector<uint8_t>& mask, const uint8_t* x,
                        const uint8_t* y, size_t unit) -> spec::Status {
    for (size_t i = 0; i < mask.size(); ++i)
      if (mask[i] && std::memcmp(x + i * unit, y + i * unit, unit) != 0)
        return spec::invalid_argument(std::string(name) + ": owned " + (unit == 1 ? "byte " : "entry ") +
                                      std::to_string(i) + " differs between the two cases");
    return spec::Status::ok();
  };
  const auto* bt_a = reinterpret_cast<const uint8_t*>(a.block_table.data());
  const auto* bt_b = reinterpret_cast<const uint8_t*>(b.block_table.data());
  for (const spec::Status& s :
       {owned("k_pages", own.k, a.k.data(), b.k.data(), 1), owned("v_pages", own.v, a.v.data(), b.v.data(), 1),
        owned("k_scale", own.k_scale, a.k_scale.data(), b.k_scale.data(), 1),
        owned("v_scale", own.v_scale, a.v_scale.data(), b.v_scale.data(), 1),
        owned("block_table", own.block_table, bt_a, bt_b, sizeof(int32_t))})
    if (!s) return s;
  return same_bits(observe_written(a), observe_written(b), "the two fills of unowned bytes");
}

reference::Output reference_answer(const CaseData& c0) {
  CaseData c = c0;
  auto r = reference::decode(c.problem, c.buffers());
  return r.is_ok() ? std::move(r).value() : reference::Output{};
}

reference::Output reference_answer(const CaseData& c0, const Backend& backend) {
  CaseData c = c0;
  auto r = reference::decode(c.problem, c.buffers(), backend.profile().q_requant);
  return r.is_ok() ? std::move(r).value() : reference::Output{};
}

}  // namespace pacts::conformance
