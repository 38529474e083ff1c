// The POISON, EDGE, REFUSE and DEV families (spec/properties.md §5, §7-§9) against the reference
// backend, and each property shown to bite: a small faulty backend plants the fault the property
// exists for, and the property must fail on some generated case.
//
// Cases are sampled from each property's own generator with a fixed seed (kSeed, printed with
// every failure) and a smaller reference budget, so that the whole file runs in seconds.
#include <gtest/gtest.h>

#include <pacts/conformance/backend.h>
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/runner.h>
#include <pacts/reference/decode.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

constexpr uint64_t kSeed = 20261129;
constexpr int kCases = 32;        // cases per property against the reference
constexpr int kBiteCases = 40;    // cases run against each faulty backend
constexpr int64_t kTestWork = int64_t{1} << 17;

// --- sampling and running --------------------------------------------------------------------

std::vector<CaseSpec> sample(GenLimits limits, int count, uint64_t seed) {
  limits.max_reference_work = std::min(limits.max_reference_work, kTestWork);
  limits.max_batch = std::min(limits.max_batch, 8);
  limits.long_context = std::min(limits.long_context, 600);
  const rc::Gen<CaseSpec> gen = gen_case(limits);
  std::vector<CaseSpec> cases;
  for (int i = 0; i < count; ++i)
    cases.push_back(gen(rc::Random(seed + static_cast<uint64_t>(i)), rc::kNominalSize).value());
  return cases;
}

const Property& find(const std::vector<Property>& family, const std::string& id) {
  for (const Property& p : family)
    if (p.id == id) return p;
  throw std::runtime_error("no property " + id);
}

const std::vector<Property>& all_properties() {
  static const std::vector<Property> all = [] {
    std::vector<Property> v;
    for (auto family : {poison_properties, edge_properties, refuse_properties, dev_properties})
      for (Property& p : family()) v.push_back(std::move(p));
    return v;
  }();
  return all;
}

const Property& property(const std::string& id) { return find(all_properties(), id); }

std::string reproduce(const Property& p, const CaseSpec& spec, int index) {
  std::ostringstream os;
  os << p.id << " case " << index << " (sample seed " << kSeed << " + " << index << "): "
     << describe(spec);
  return os.str();
}

struct Tally {
  int pass = 0, not_supported = 0, warning = 0, not_applicable = 0;
};

// Every case passes (or is NotSupported / NotApplicable) on the reference.
Tally expect_no_failure(const std::string& id) {
  const Property& p = property(id);
  auto reference = make_reference_backend();
  auto backend = make_reference_backend();
  Tally t;
  const std::vector<CaseSpec> cases = sample(p.limits, kCases, kSeed);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Outcome o = check_case(p, *backend, *reference, cases[i]);  // with the supports step
    switch (o.verdict) {
      case Verdict::kPass: ++t.pass; break;
      case Verdict::kNotSupported: ++t.not_supported; break;
      case Verdict::kQualityWarning: ++t.warning; break;
      case Verdict::kNotApplicable: ++t.not_applicable; break;
      case Verdict::kFail:
      case Verdict::kCrash:
      case Verdict::kTimeout: break;
    }
    EXPECT_FALSE(is_failure(o.verdict)) << reproduce(p, cases[i], static_cast<int>(i)) << "\n  " << o.detail;
    EXPECT_NE(o.verdict, Verdict::kQualityWarning) << reproduce(p, cases[i], static_cast<int>(i)) << "\n  " << o.detail;
  }
  std::cout << "[ " << id << " ] reference: " << t.pass << " pass, " << t.not_supported
            << " not supported, " << t.not_applicable << " not applicable, of " << cases.size()
            << "\n";
  return t;
}

// The property gives `want` (Fail by default) on some generated case against `faulty`.
void expect_bites(const std::string& id, Backend& faulty, Verdict want = Verdict::kFail) {
  const Property& p = property(id);
  auto reference = make_reference_backend();
  const std::vector<CaseSpec> cases = sample(p.limits, kBiteCases, kSeed ^ 0xb17eu);
  int caught = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Outcome o = check_case(p, faulty, *reference, cases[i]);
    if (o.verdict != want) continue;
    if (caught++ == 0)
      std::cout << "[ " << id << " ] caught " << faulty.name() << " first on case " << i << ": "
                << describe(cases[i]) << "\n    " << o.detail << "\n";
  }
  std::cout << "[ " << id << " ] " << faulty.name() << ": caught on " << caught << " of "
            << cases.size() << " cases\n";
  EXPECT_GT(caught, 0) << id << " never reported " << static_cast<int>(want) << " against "
                       << faulty.name() << " in " << cases.size() << " cases (sample seed "
                       << (kSeed ^ 0xb17eu) << ")";
}

// --- output and input access for the faults ----------------------------------------------------

int64_t row_offset(const pacts_row_layout& l, int64_t b, int64_t i, int64_t h) {
  return b * l.s_batch + i * l.s_tok + h * l.s_head;
}

uint32_t load(const void* base, int64_t element, int bytes) {
  uint32_t code = 0;
  std::memcpy(&code, static_cast<const uint8_t*>(base) + element * bytes, static_cast<size_t>(bytes));
  return code;
}

void store(void* base, int64_t element, int bytes, uint32_t code) {
  std::memcpy(static_cast<uint8_t*>(base) + element * bytes, &code, static_cast<size_t>(bytes));
}

// Applies f(value) to every output element of the rows of sequence b (all of them when b < 0).
void map_output(const pacts_problem& p, const pacts_buffers& buf, int64_t only_b,
                const std::function<double(double, int64_t, int64_t, int64_t)>& f) {
  const int ob = spec::element_bytes(p.out_format);
  for (int64_t b = 0; b < p.batch; ++b) {
    if (only_b >= 0 && b != only_b) continue;
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        for (int64_t d = 0; d < p.head_dim; ++d) {
          const int64_t at = row_offset(p.out_layout, b, i, h) + d;
          const double x = spec::decode(p.out_format, load(buf.out.data, at, ob));
          store(buf.out.data, at, ob,
                spec::encode(p.out_format, f(x, b, i, h), spec::Overflow::kNonSaturate));
        }
  }
}

int32_t context(const pacts_buffers& buf, int64_t b) {
  return static_cast<int32_t>(load(buf.context_lens.data, b, 4));
}

int32_t entry(const pacts_problem& p, const pacts_buffers& buf, int64_t b, int64_t col) {
  return static_cast<int32_t>(load(buf.block_table.data, b * p.block_table_stride + col, 4));
}

bool valid(const pacts_problem& p, int64_t n) {
  return n >= 0 && n <= int64_t{p.max_pages_per_seq} * p.page_size;
}

// Decoded V element d (no scale) of (page, KV head 0, slot).
double v_code_value(const pacts_problem& p, const pacts_buffers& buf, int64_t page, int64_t slot, int64_t d) {
  const pacts_pool_layout& l = p.v_layout;
  const bool e2m1 = p.kv_format == PACTS_FORMAT_E2M1;
  const int64_t unit = e2m1 ? d / 2 : d;
  const int64_t at = page * l.s_page + slot * l.s_tok + (unit / l.chunk) * l.s_chunk + unit % l.chunk;
  if (e2m1) return spec::decode_e2m1(static_cast<uint8_t>(load(buf.v.data, at, 1) & 0xF));
  return spec::decode(p.kv_format, load(buf.v.data, at, spec::element_bytes(p.kv_format)));
}

// --- faulty backends ---------------------------------------------------------------------------

class Faulty : public Backend {
 public:
  explicit Faulty(std::string fault) : ref_(make_reference_backend()), fault_(std::move(fault)) {}
  std::string name() const override { return "faulty backend (" + fault_ + ")"; }
  std::string device() const override { return ref_->device(); }
  const Capabilities& capabilities() const override { return ref_->capabilities(); }
  const spec::NumericsProfile& profile() const override { return ref_->profile(); }
  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint& h) override {
    before(p, b);
    RunResult r = ref_->run(p, b, h);
    if (r.status.is_ok()) after(p, b, r);
    return r;
  }

 protected:
  virtual void before(const pacts_problem&, const pacts_buffers&) {}
  virtual void after(const pacts_problem&, const pacts_buffers&, RunResult&) {}
  std::unique_ptr<Backend> ref_;

 private:
  std::string fault_;
};

// #7092: the first unowned V row of the last page enters P.V with P = 0 (0 * NaN = NaN).
class LeaksTailRow final : public Faulty {
 public:
  LeaksTailRow() : Faulty("P = 0 times the first unowned V row of the last page") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    for (int64_t b = 0; b < p.batch; ++b) {
      const int32_t n = context(buf, b);
      if (!valid(p, n) || n == 0 || n % p.page_size == 0) continue;
      const double v = v_code_value(p, buf, entry(p, buf, b, (n - 1) / p.page_size), n % p.page_size, 0);
      map_output(p, buf, b, [v](double x, int64_t, int64_t, int64_t) { return x + 0.0 * v; });
    }
  }
};

// #7092: the per-token V scale (or e8m0 byte) of the first unowned slot reaches P.V.
class LeaksTailScale final : public Faulty {
 public:
  LeaksTailScale() : Faulty("P = 0 times the V scale of the first unowned slot") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    if (p.v_scale_mode != PACTS_SCALE_PER_TOKEN && p.v_scale_mode != PACTS_SCALE_MX_BLOCK) return;
    for (int64_t b = 0; b < p.batch; ++b) {
      const int32_t n = context(buf, b);
      if (!valid(p, n) || n == 0 || n % p.page_size == 0) continue;
      const pacts_scale_layout& l = p.v_scale_layout;
      const int64_t at = entry(p, buf, b, (n - 1) / p.page_size) * l.s_page + (n % p.page_size) * l.s_tok;
      double s = 0;
      if (p.v_scale_mode == PACTS_SCALE_PER_TOKEN) {
        float f;
        std::memcpy(&f, static_cast<const uint8_t*>(buf.v_scale.data) + at * 4, 4);
        s = f;
      } else {
        s = spec::decode_e8m0(static_cast<uint8_t>(load(buf.v_scale.data, at, 1)));
      }
      map_output(p, buf, b, [s](double x, int64_t, int64_t, int64_t) { return x + 0.0 * s; });
    }
  }
};

// #7092: the first padding entry used as a page id (an out-of-range id loads garbage, NaN here).
class UsesPaddingEntry final : public Faulty {
 public:
  UsesPaddingEntry() : Faulty("first block-table padding entry used as a page id") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    for (int64_t b = 0; b < p.batch; ++b) {
      const int32_t n = context(buf, b);
      const int64_t col = n > 0 ? (n - 1) / p.page_size + 1 : 0;
      if (!valid(p, n) || col >= p.max_pages_per_seq) continue;
      const int32_t page = entry(p, buf, b, col);
      const double v = page < 0 || page >= p.num_pages ? NAN : v_code_value(p, buf, page, 0, 0);
      map_output(p, buf, b, [v](double x, int64_t, int64_t, int64_t) { return x + 0.0 * v; });
    }
  }
};

// A Q load that reads one element past D (the next element is a gap when s_head > D).
class ReadsQueryGap final : public Faulty {
 public:
  ReadsQueryGap() : Faulty("Q row read one element past D") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    const int qb = spec::element_bytes(p.q_format);
    const auto elements = static_cast<int64_t>(buf.q.bytes / static_cast<uint64_t>(qb));
    map_output(p, buf, -1, [&](double x, int64_t b, int64_t i, int64_t h) {
      const int64_t at = row_offset(p.q_layout, b, i, h) + p.head_dim;
      if (p.q_layout.s_head == p.head_dim || at >= elements) return x;
      return x + 0.0 * spec::decode(p.q_format, load(buf.q.data, at, qb));
    });
  }
};

// A kernel that accumulates into its output: the prior contents times 0.
class ReadsPriorOutput final : public Faulty {
 public:
  ReadsPriorOutput() : Faulty("output accumulated onto its prior contents") {}
  void before(const pacts_problem&, const pacts_buffers& buf) override {
    prior_.assign(static_cast<const uint8_t*>(buf.out.data),
                  static_cast<const uint8_t*>(buf.out.data) + buf.out.bytes);
  }
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    const int ob = spec::element_bytes(p.out_format);
    map_output(p, buf, -1, [&](double x, int64_t b, int64_t i, int64_t h) {
      const int64_t at = row_offset(p.out_layout, b, i, h);
      return x + 0.0 * spec::decode(p.out_format, load(prior_.data(), at, ob));
    });
  }

 private:
  std::vector<uint8_t> prior_;
};

bool row_empty(const pacts_problem& p, const pacts_buffers& buf, int64_t b, int64_t i) {
  const int32_t n = context(buf, b);
  return valid(p, n) && n - p.q_len + i < 0;
}

// Gluon-style empty rows: the sink merge 0 / (0 + e^sink) evaluated anyway (NaN for a -inf or
// NaN sink); without a sink, -0.
class NaiveEmptyRows final : public Faulty {
 public:
  NaiveEmptyRows() : Faulty("empty rows computed as 0 / (0 + e^sink), -0 without sinks") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    map_output(p, buf, -1, [&](double x, int64_t b, int64_t i, int64_t h) {
      if (!row_empty(p, buf, b, i)) return x;
      if (!p.has_sinks) return -0.0;
      float sink;
      std::memcpy(&sink, static_cast<const uint8_t*>(buf.sinks.data) + h * 4, 4);
      return 0.0 / (0.0 + std::exp(double{sink}));
    });
  }
};

// A strided store that writes one element into the gap after the first output row (or past the
// view's last element when rows have no gaps).
class WritesOutsideView final : public Faulty {
 public:
  WritesOutsideView() : Faulty("one element stored outside the output view") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    if (p.batch == 0) return;
    const int ob = spec::element_bytes(p.out_format);
    const int64_t at = p.out_layout.s_head > p.head_dim
                           ? p.head_dim
                           : static_cast<int64_t>(spec::required_extents(p).out) / ob;
    if ((at + 1) * ob <= static_cast<int64_t>(buf.out.bytes)) store(buf.out.data, at, ob, 0);
  }
};

// A tail the kernel forgets: the last element of the last row keeps its prior contents.
class SkipsLastElement final : public Faulty {
 public:
  SkipsLastElement() : Faulty("last output element never written") {}
  void before(const pacts_problem&, const pacts_buffers& buf) override {
    prior_.assign(static_cast<const uint8_t*>(buf.out.data),
                  static_cast<const uint8_t*>(buf.out.data) + buf.out.bytes);
  }
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    if (p.batch == 0) return;
    const int ob = spec::element_bytes(p.out_format);
    const int64_t at = row_offset(p.out_layout, p.batch - 1, p.q_len - 1, p.num_q_heads - 1) + p.head_dim - 1;
    std::memcpy(static_cast<uint8_t*>(buf.out.data) + at * ob, prior_.data() + at * ob, static_cast<size_t>(ob));
  }

 private:
  std::vector<uint8_t> prior_;
};

// Lost normalisation: the output is 1.25 times too large.
class ScalesOutput final : public Faulty {
 public:
  ScalesOutput() : Faulty("output multiplied by 1.25 (lost normalisation)") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    map_output(p, buf, -1, [](double x, int64_t, int64_t, int64_t) { return 1.25 * x; });
  }
};

// docs/bug-classes.md: fp8 kernels that turn NaN into finite values.
class SuppressesNan final : public Faulty {
 public:
  SuppressesNan() : Faulty("NaN outputs replaced by 0") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    map_output(p, buf, -1, [](double x, int64_t, int64_t, int64_t) { return std::isnan(x) ? 0.0 : x; });
  }
};

// NaN of one sequence leaking into the next one's rows (a shared reduction across sequences).
class NanCrossesSequences final : public Faulty {
 public:
  NanCrossesSequences() : Faulty("a NaN in one sequence spreads to the next") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    if (p.batch < 2) return;
    std::vector<uint8_t> has_nan(static_cast<size_t>(p.batch), 0);
    map_output(p, buf, -1, [&](double x, int64_t b, int64_t, int64_t) {
      if (std::isnan(x)) has_nan[static_cast<size_t>(b)] = 1;
      return x;
    });
    for (int64_t b = 0; b < p.batch; ++b)
      if (has_nan[static_cast<size_t>(b)])
        map_output(p, buf, (b + 1) % p.batch, [](double x, int64_t, int64_t, int64_t) { return x + NAN; });
  }
};

// A softmax without the max shift in fp32: e^s overflows for logits above ~88.7, giving an Inf
// LSE and NaN (Inf / Inf) outputs.
class UnshiftedSoftmax final : public Faulty {
 public:
  UnshiftedSoftmax() : Faulty("fp32 softmax without the max shift") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    const auto answer = reference::decode(p, buf);
    if (!answer) return;
    const std::vector<double>& lse = answer.value().lse;
    map_output(p, buf, -1, [&](double x, int64_t b, int64_t i, int64_t h) {
      const size_t row = static_cast<size_t>((b * p.q_len + i) * p.num_q_heads + h);
      return lse[row] > 88.72 ? NAN : x;
    });
    if (!p.want_lse) return;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h) {
          const size_t row = static_cast<size_t>((b * p.q_len + i) * p.num_q_heads + h);
          if (lse[row] > 88.72) {
            const float inf = INFINITY;
            std::memcpy(static_cast<uint8_t*>(buf.lse.data) + row_offset(p.lse_layout, b, i, h) * 4, &inf, 4);
          }
        }
  }
};

// A merge over the sequence's 16-key partitions that reads the partial slot of a row that sees
// no key of the last partition (mutant empty_partition_nan): the slot was never written, and on
// every other call it holds NaN bytes.
class ReadsInvisiblePartial final : public Faulty {
 public:
  ReadsInvisiblePartial() : Faulty("reads the unwritten partial of a row's invisible partition") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    if (calls_++ % 2 == 0) return;
    for (int64_t b = 0; b < p.batch; ++b) {
      const int32_t n = context(buf, b);
      if (!valid(p, n) || n <= 16) continue;
      const int64_t last_partition = 16 * ((n - 1) / 16);
      map_output(p, buf, b, [&](double x, int64_t, int64_t i, int64_t) {
        const int64_t pos = n - p.q_len + i;
        return pos >= 0 && pos < last_partition ? NAN : x;
      });
    }
  }

 private:
  int64_t calls_ = 0;
};

// #7056: the Q scale deferred past the Q.K product, so the fp32 accumulator holds the logit
// divided by q_scale (mutant q_scale_after_dot): a row whose tau * A / q_scale passes 2^128
// overflows and ends as NaN.
class DefersQueryScale final : public Faulty {
 public:
  DefersQueryScale() : Faulty("q_scale applied after the fp32 Q.K accumulation") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult&) override {
    const auto answer = reference::decode(p, buf);
    if (!answer) return;
    const std::vector<double>& s = answer.value().logit_abs_dot;
    map_output(p, buf, -1, [&](double x, int64_t b, int64_t i, int64_t h) {
      const size_t row = static_cast<size_t>((b * p.q_len + i) * p.num_q_heads + h);
      return s[row] / double{p.q_scale} >= 0x1p128 ? NAN : x;
    });
  }
};

// Clears the output before validating the call.
class WritesBeforeValidating final : public Faulty {
 public:
  WritesBeforeValidating() : Faulty("zeroes the output before validating") {}
  void before(const pacts_problem&, const pacts_buffers& buf) override {
    if (buf.out.data != nullptr) std::memset(buf.out.data, 0, buf.out.bytes);
  }
};

// Refuses with the wrong code: every InvalidArgument reported as NotSupported.
class WrongRefusalCode final : public Faulty {
 public:
  WrongRefusalCode() : Faulty("InvalidArgument reported as NotSupported") {}
  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint& h) override {
    RunResult r = ref_->run(p, b, h);
    if (r.status.code() == spec::Code::kInvalidArgument)
      r.status = spec::not_supported(r.status.message());
    return r;
  }
};

// Claims no fp8 KV formats but answers them anyway (#7092's pipelines without the fix).
class AnswersBeyondCapabilities final : public Faulty {
 public:
  AnswersBeyondCapabilities() : Faulty("declares no fp8 KV but answers fp8 problems") {
    caps_ = Capabilities::everything();
    caps_.kv_formats = {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E2M1};
  }
  const Capabilities& capabilities() const override { return caps_; }

 private:
  Capabilities caps_;
};

// Claims everything but refuses e5m2 KV as NotSupported.
class RefusesWithinCapabilities final : public Faulty {
 public:
  RefusesWithinCapabilities() : Faulty("declares e5m2 KV but refuses it") {}
  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint& h) override {
    if (p.kv_format == PACTS_FORMAT_E5M2) return {spec::not_supported("kv_format e5m2"), 0, {}};
    return ref_->run(p, b, h);
  }
};

// Forgets to report device-side precondition failures.
class ClearsErrorWord final : public Faulty {
 public:
  ClearsErrorWord() : Faulty("device error word never set") {}
  void after(const pacts_problem&, const pacts_buffers&, RunResult& r) override { r.device_error = 0; }
};

// Aborts the whole batch with NaN when one sequence is invalid.
class PoisonsWholeBatch final : public Faulty {
 public:
  PoisonsWholeBatch() : Faulty("an invalid sequence turns the whole batch NaN") {}
  void after(const pacts_problem& p, const pacts_buffers& buf, RunResult& r) override {
    if (r.device_error != 0)
      map_output(p, buf, -1, [](double, int64_t, int64_t, int64_t) { return NAN; });
  }
};

// --- the properties on the reference -------------------------------------------------------------

TEST(Families, CatalogueEntries) {
  const std::vector<std::pair<std::string, std::string>> want = {
      {"PACTS-POISON-1", "UnownedRowsDoNotLeak"},   {"PACTS-POISON-2", "UnownedScalesDoNotLeak"},
      {"PACTS-POISON-3", "BlockTablePaddingIsNotAnAddress"},
      {"PACTS-POISON-4", "QueryAndOutputGapsDoNotLeak"},
      {"PACTS-POISON-5", "WorkspaceContentsDoNotLeak"},
      {"PACTS-POISON-6", "InvisiblePartialsDoNotLeak"}, {"PACTS-EDGE-1", "EmptyRows"},
      {"PACTS-EDGE-2", "ExactWriteSet"},            {"PACTS-EDGE-3", "Convexity"},
      {"PACTS-EDGE-4", "NanPropagates"},            {"PACTS-EDGE-5", "RangeExtremes"},
      {"PACTS-EDGE-6", "TopOfRangeKeys"},
      {"PACTS-REFUSE-1", "RefusalsAreDocumented"},  {"PACTS-REFUSE-2", "UnsupportedIsNotWrong"},
      {"PACTS-DEV-1", "DevicePreconditions"},       {"PACTS-DEV-2", "Addressing64Bit"},
      {"PACTS-DEV-3", "GraphReplay"}};
  ASSERT_EQ(all_properties().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(all_properties()[i].id, want[i].first);
    EXPECT_EQ(all_properties()[i].name, want[i].second);
    EXPECT_TRUE(static_cast<bool>(all_properties()[i].check));
  }
  EXPECT_EQ(property("PACTS-EDGE-4").level, Level::kQualityWarning);
  EXPECT_TRUE(property("PACTS-EDGE-4").limits.non_finite);
}

TEST(Families, PACTS_POISON_1_UnownedRowsDoNotLeak) {
  EXPECT_GT(expect_no_failure("PACTS-POISON-1").pass, kCases / 2);
  LeaksTailRow fault;
  expect_bites("PACTS-POISON-1", fault);
}

TEST(Families, PACTS_POISON_2_UnownedScalesDoNotLeak) {
  EXPECT_GT(expect_no_failure("PACTS-POISON-2").pass, kCases / 2);
  LeaksTailScale fault;
  expect_bites("PACTS-POISON-2", fault);
}

TEST(Families, PACTS_POISON_3_BlockTablePaddingIsNotAnAddress) {
  EXPECT_GT(expect_no_failure("PACTS-POISON-3").pass, kCases / 2);
  UsesPaddingEntry fault;
  expect_bites("PACTS-POISON-3", fault);
}

TEST(Families, PACTS_POISON_4_QueryAndOutputGapsDoNotLeak) {
  EXPECT_GT(expect_no_failure("PACTS-POISON-4").pass, kCases / 2);
  ReadsQueryGap gap;
  expect_bites("PACTS-POISON-4", gap);
  ReadsPriorOutput prior;
  expect_bites("PACTS-POISON-4", prior);
}

TEST(Families, PACTS_POISON_5_WorkspaceContentsDoNotLeak) {
  EXPECT_GT(expect_no_failure("PACTS-POISON-5").pass, kCases / 2);
  ReadsPriorOutput fault;
  expect_bites("PACTS-POISON-5", fault);
}

TEST(Families, PACTS_POISON_6_InvisiblePartialsDoNotLeak) {
  EXPECT_GT(expect_no_failure("PACTS-POISON-6").pass, kCases / 2);
  ReadsInvisiblePartial fault;
  expect_bites("PACTS-POISON-6", fault);
}

TEST(Families, PACTS_EDGE_1_EmptyRows) {
  EXPECT_GT(expect_no_failure("PACTS-EDGE-1").pass, kCases / 2);
  NaiveEmptyRows fault;
  expect_bites("PACTS-EDGE-1", fault);
}

TEST(Families, PACTS_EDGE_2_ExactWriteSet) {
  EXPECT_GT(expect_no_failure("PACTS-EDGE-2").pass, kCases / 2);
  WritesOutsideView outside;
  expect_bites("PACTS-EDGE-2", outside);
  SkipsLastElement skip;
  expect_bites("PACTS-EDGE-2", skip);
}

TEST(Families, PACTS_EDGE_3_Convexity) {
  EXPECT_GT(expect_no_failure("PACTS-EDGE-3").pass, kCases / 2);
  ScalesOutput fault;
  expect_bites("PACTS-EDGE-3", fault);
}

TEST(Families, PACTS_EDGE_4_NanPropagates) {
  EXPECT_GT(expect_no_failure("PACTS-EDGE-4").pass, kCases / 2);
  SuppressesNan quiet;  // the preferred behaviour only: a QualityWarning
  expect_bites("PACTS-EDGE-4", quiet, Verdict::kQualityWarning);
  NanCrossesSequences leak;  // other sequences are Mandatory
  expect_bites("PACTS-EDGE-4", leak, Verdict::kFail);
}

TEST(Families, PACTS_EDGE_5_RangeExtremes) {
  EXPECT_GT(expect_no_failure("PACTS-EDGE-5").pass, kCases / 2);
  UnshiftedSoftmax fault;
  expect_bites("PACTS-EDGE-5", fault);
}

TEST(Families, PACTS_EDGE_6_TopOfRangeKeys) {
  EXPECT_GT(expect_no_failure("PACTS-EDGE-6").pass, kCases / 2);
  DefersQueryScale fault;
  expect_bites("PACTS-EDGE-6", fault);
}

TEST(Families, PACTS_REFUSE_1_RefusalsAreDocumented) {
  EXPECT_EQ(expect_no_failure("PACTS-REFUSE-1").pass, kCases);
  WritesBeforeValidating write;
  expect_bites("PACTS-REFUSE-1", write);
  WrongRefusalCode code;
  expect_bites("PACTS-REFUSE-1", code);
}

TEST(Families, PACTS_REFUSE_2_UnsupportedIsNotWrong) {
  EXPECT_EQ(expect_no_failure("PACTS-REFUSE-2").pass, kCases);
  AnswersBeyondCapabilities beyond;
  expect_bites("PACTS-REFUSE-2", beyond);
  RefusesWithinCapabilities within;
  expect_bites("PACTS-REFUSE-2", within);
}

TEST(Families, PACTS_DEV_1_DevicePreconditions) {
  EXPECT_GT(expect_no_failure("PACTS-DEV-1").pass, kCases / 2);
  ClearsErrorWord clears;
  expect_bites("PACTS-DEV-1", clears);
  PoisonsWholeBatch whole;
  expect_bites("PACTS-DEV-1", whole);
}

TEST(Families, PACTS_DEV_2_Addressing64Bit) {
  EXPECT_EQ(expect_no_failure("PACTS-DEV-2").not_supported, kCases);
}

TEST(Families, PACTS_DEV_3_GraphReplay) {
  EXPECT_EQ(expect_no_failure("PACTS-DEV-3").not_supported, kCases);
}

}  // namespace
}  // namespace pacts::conformance

namespace pacts::conformance {
namespace {

// PACTS-ACC-3 / ACC-6's exemption for flushing profiles (spec/properties.md): an output element
// may be +-0 where the exact value is below 2^-126 and the profile declares ftz; nowhere else.
TEST(Families, FlushedSubnormalsPassOnlyUnderAFlushingProfile) {
  Observed want;
  want.out_codes = {0x0001u, 0x3F80u, 0x0080u};  // bf16: 2^-133, 1.0, 2^-126 (the least normal)
  want.out_values = {0x1p-133, 1.0, 0x1p-126};
  Observed got = want;
  got.out_codes[0] = 0u;
  got.out_values[0] = 0.0;
  EXPECT_EQ(same_bits_or_flushed(got, want, true, "t").verdict, Verdict::kPass);
  EXPECT_EQ(same_bits_or_flushed(got, want, false, "t").verdict, Verdict::kFail);
  Observed normal_flushed = want;  // the least normal is no subnormal: never exempt
  normal_flushed.out_codes[2] = 0u;
  normal_flushed.out_values[2] = 0.0;
  EXPECT_EQ(same_bits_or_flushed(normal_flushed, want, true, "t").verdict, Verdict::kFail);
  Observed other = want;  // a subnormal turned into another nonzero value: never exempt
  other.out_codes[0] = 0x0002u;
  other.out_values[0] = 0x1p-132;
  EXPECT_EQ(same_bits_or_flushed(other, want, true, "t").verdict, Verdict::kFail);
}

// The catalogue's own inapplicable cases: PACTS-EDGE-6 places K at the top of R1 through a
// per-tensor scale, which MXFP4 K does not have.
TEST(Families, AnMxfp4CaseOfEdge6IsNotApplicable) {
  auto backend = make_reference_backend();
  auto reference = make_reference_backend();
  const Property& edge6 = property("PACTS-EDGE-6");
  GenLimits limits = edge6.limits;
  limits.kv_formats = {PACTS_FORMAT_E2M1};
  const std::vector<CaseSpec> cases = sample(limits, 3, kSeed);
  ASSERT_FALSE(cases.empty());
  for (const CaseSpec& c : cases) {
    ASSERT_EQ(c.shape.kv_format, PACTS_FORMAT_E2M1);
    PropertyContext ctx{*backend, *reference};
    const Outcome o = edge6.check(ctx, c);
    EXPECT_EQ(o.verdict, Verdict::kNotApplicable) << o.detail;
  }
}

}  // namespace
}  // namespace pacts::conformance
