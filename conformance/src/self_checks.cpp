#include <pacts/conformance/case_data.h>
#include <pacts/conformance/random_case.h>
#include <pacts/conformance/self_checks.h>
#include <pacts/reference/decode.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

namespace pacts::conformance {
namespace {

using Clock = std::chrono::steady_clock;

CheckResult timed(const char* id, const char* name, const std::function<void(CheckResult&)>& body) {
  CheckResult r;
  r.id = id;
  r.name = name;
  r.backend = "reference";
  const auto t0 = Clock::now();
  body(r);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

void fail(CheckResult& r, const std::string& detail) {
  if (r.verdict == Verdict::kFail) return;  // keep the first failure
  r.verdict = Verdict::kFail;
  r.detail = detail;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

std::string replay_hint(uint64_t seed, int32_t index) {
  std::ostringstream os;
  os << "case " << index << " of seed " << seed << " (replay: pacts-qualify --seed " << seed
     << " --cases " << index + 1 << ")";
  return os.str();
}

// spec/formats.md: every code decodes and re-encodes to itself (NaN codes to a NaN).
void check_codecs(CheckResult& r) {
  const pacts_format formats[] = {PACTS_FORMAT_BF16,     PACTS_FORMAT_FP16,  PACTS_FORMAT_E4M3FN,
                                  PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2,  PACTS_FORMAT_E5M2FNUZ,
                                  PACTS_FORMAT_E2M1,     PACTS_FORMAT_E8M0};
  for (pacts_format f : formats) {
    for (uint32_t code = 0; code < spec::code_count(f); ++code) {
      ++r.cases;
      const double x = spec::decode(f, code);
      const uint32_t back = spec::encode(f, x, spec::Overflow::kNonSaturate);
      const bool ok = std::isnan(x) ? spec::is_nan_code(f, back) : back == code;
      if (!ok) {
        std::ostringstream os;
        os << spec::format_name(f) << " code 0x" << std::hex << code << " decodes to " << x
           << " and re-encodes to 0x" << back;
        fail(r, os.str());
      }
    }
  }
}

CaseData random_case(const SelfCheckOptions& o, int32_t i) {
  const uint64_t seed = o.seed * 1000003u + static_cast<uint64_t>(i);
  return make_case(random_shape(seed), seed ^ 0x9e3779b97f4a7c15ull);
}

// PACTS-POISON-1/2/3: the reference reads owned data only, so no fill of unowned data changes
// one bit of its answer.
void check_poison(CheckResult& r, const SelfCheckOptions& o) {
  for (int32_t i = 0; i < o.cases; ++i) {
    CaseData c = random_case(o, i);
    const auto clean = reference::decode(c.problem, c.buffers());
    if (!clean) return fail(r, replay_hint(o.seed, i) + ": refused: " + clean.status().to_string());
    for (Poison fill : {Poison::kNaN, Poison::kInf, Poison::kRandomBytes, Poison::kMaxFinite}) {
      CaseData dirty = c;
      if (!poison_unowned(dirty, fill, o.seed + static_cast<uint64_t>(i))) {
        ++r.not_applicable;
        continue;
      }
      ++r.cases;
      const auto got = reference::decode(dirty.problem, dirty.buffers());
      if (!got || !same_bits(got.value().out, clean.value().out) ||
          !same_bits(got.value().lse, clean.value().lse) ||
          got.value().device_error != clean.value().device_error)
        fail(r, replay_hint(o.seed, i) + ": output changed when unowned data was poisoned (fill " +
                    std::to_string(static_cast<int>(fill)) + ")");
    }
  }
}

// spec/operator.md §10 and §11: empty rows are exact zeros with LSE -inf; a second run is
// bitwise identical.
void check_empty_rows_and_determinism(CheckResult& r, const SelfCheckOptions& o) {
  for (int32_t i = 0; i < o.cases; ++i) {
    CaseData c = random_case(o, i);
    const auto a = reference::decode(c.problem, c.buffers());
    const auto b = reference::decode(c.problem, c.buffers());
    if (!a || !b) return fail(r, replay_hint(o.seed, i) + ": refused");
    ++r.cases;
    if (!same_bits(a.value().out, b.value().out) || !same_bits(a.value().lse, b.value().lse))
      fail(r, replay_hint(o.seed, i) + ": two runs differ");
    const auto& out = a.value();
    const size_t d = static_cast<size_t>(c.problem.head_dim);
    for (size_t row = 0; row < out.visible.size(); ++row) {
      if (out.visible[row] != 0 || out.row_invalid[row]) continue;
      bool zero = !(out.lse[row] > -INFINITY);
      for (size_t e = row * d; e < (row + 1) * d; ++e)
        zero = zero && out.out[e] == 0.0 && !std::signbit(out.out[e]);
      if (!zero) fail(r, replay_hint(o.seed, i) + ": an empty row is not exactly +0 / -inf");
    }
  }
}

// spec/refusals.md: the reference refuses what validate() refuses, with the same code.
void check_refusals(CheckResult& r) {
  struct Bad {
    const char* what;
    void (*change)(pacts_problem&);
    spec::Code code;
  };
  const Bad bad[] = {
      {"q_len 17", [](pacts_problem& p) { p.q_len = 17; }, spec::Code::kOutOfRange},
      {"head_dim 96", [](pacts_problem& p) { p.head_dim = 96; }, spec::Code::kNotSupported},
      {"page_size 48", [](pacts_problem& p) { p.page_size = 48; }, spec::Code::kNotSupported},
      {"softmax_scale 0", [](pacts_problem& p) { p.softmax_scale = 0; }, spec::Code::kInvalidArgument},
      {"overlapping K rows", [](pacts_problem& p) { p.k_layout.s_tok = 1; }, spec::Code::kInvalidArgument},
  };
  for (const Bad& b : bad) {
    ++r.cases;
    CaseData c = make_case(CaseShape{}, 1);
    b.change(c.problem);
    const auto got = reference::decode(c.problem, c.buffers());
    if (got.is_ok() || got.status().code() != b.code)
      fail(r, std::string(b.what) + ": expected " + spec::code_name(b.code) + ", got " +
                  got.status().to_string());
  }
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "Pass";
    case Verdict::kFail: return "Fail";
    case Verdict::kNotSupported: return "NotSupported";
    case Verdict::kQualityWarning: return "QualityWarning";
    case Verdict::kCrash: return "Crash";
    case Verdict::kTimeout: return "Timeout";
    case Verdict::kNotApplicable: return "NotApplicable";
  }
  return "?";
}

std::vector<CheckResult> run_reference_self_checks(const SelfCheckOptions& o) {
  std::vector<CheckResult> results;
  const auto run = [&](const char* id, const char* name, const std::function<void(CheckResult&)>& body) {
    if (o.on_start) o.on_start(id, name);
    results.push_back(timed(id, name, body));
    if (o.on_done) o.on_done(results.back());
  };
  run("formats.md", "codec round trip of every code", check_codecs);
  run("refusals.md", "refusals carry the documented code", check_refusals);
  run("PACTS-POISON-1..3", "unowned data never changes the answer", [&](CheckResult& r) { check_poison(r, o); });
  run("PACTS-EDGE-1, PACTS-META-2", "empty rows exact; runs reproducible",
      [&](CheckResult& r) { check_empty_rows_and_determinism(r, o); });
  return results;
}

}  // namespace pacts::conformance
