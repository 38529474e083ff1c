// The suite tests itself (spec/properties.md §1, "Every property must bite"): every
// fault of the fault-injecting backend, planted in the reference, must be caught by a Mandatory
// property, by the property named for it below in particular; every family must catch a fault;
// the clean reference must pass everything. Each caught fault is shrunk to a minimal case, whose
// case file must replay the failure. Fixed seed, printed; ctest label `selftest`.
#include <pacts/conformance/backend.h>
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/random_case.h>
#include <pacts/conformance/runner.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

constexpr uint64_t kSeed = 20261129;
constexpr int32_t kCases = 40;       // cases of a fault's named catcher, and of the clean run
constexpr int32_t kSweepCases = 12;  // cases of every other property per fault (informative)

// The self-test runs the catalogue about 17 times, so its cases are smaller than the
// conformance run's: less reference work per case and smaller batches. Every fault here shows on
// small shapes, and the properties' own generator flags are kept.
constexpr int64_t kWork = int64_t{1} << 16;
constexpr int32_t kMaxBatch = 8;
constexpr int32_t kLongContext = 300;

Property budgeted(const Property& p) {
  Property q = p;
  q.limits.max_reference_work = std::min(q.limits.max_reference_work, kWork);
  q.limits.max_batch = std::min(q.limits.max_batch, kMaxBatch);
  q.limits.long_context = std::min(q.limits.long_context, kLongContext);
  return q;
}

// The property that must catch each fault (its documented target), and the cases that catcher
// gets (raise it for a fault that needs more).
struct Expectation {
  Fault fault;
  const char* catcher;
  int32_t cases = kCases;
  // A fault that acts on plans, which the reference (unsplit) ignores: planted in a backend that
  // splits instead, by the test named here.
  const char* planted_elsewhere = nullptr;
};

const std::vector<Expectation>& expectations() {
  static const std::vector<Expectation> all = {
      {Fault::kVTailLeak, "PACTS-POISON-1"},
      {Fault::kPaddingEntryAsPage, "PACTS-POISON-3"},
      {Fault::kVScaleTailLeak, "PACTS-POISON-2"},
      {Fault::kCausalOffByOne, "PACTS-ACC-1"},
      {Fault::kWindowPlusOne, "PACTS-ACC-1", 3 * kCases},
      {Fault::kWindowMinusOne, "PACTS-ACC-1"},
      {Fault::kOutputTruncated, "PACTS-ACC-1"},
      {Fault::kMergeWrongMax, "PACTS-ACC-1"},
      {Fault::kLseBase2, "PACTS-ACC-2"},
      {Fault::kSinkScaled, "PACTS-ACC-1"},
      {Fault::kEmptyRowNegativeZero, "PACTS-EDGE-1"},
      {Fault::kOutputGapWrite, "PACTS-EDGE-2"},
      {Fault::kWriteBeforeValidate, "PACTS-REFUSE-1"},
      {Fault::kDeviceErrorDropped, "PACTS-DEV-1"},
      {Fault::kNeighbourStateLeak, "PACTS-META-4"},
      {Fault::kFalseNotSupported, "PACTS-REFUSE-2"},
      {Fault::kInvariantPlanFromBatch, "PACTS-META-4", kCases,
       "backends/tests/host_conformance_test.cpp (HostFaults.InvariantPlanFromBatchIsCaught)"},
      {Fault::kTinyVScalesFlushed, "PACTS-EDGE-5"},
      {Fault::kWindowPageEdge, "PACTS-ACC-1", 3 * kCases},
      {Fault::kNanCrossesSequences, "PACTS-EDGE-4"},
      {Fault::kGroupRowsAbove8Dropped, "PACTS-ACC-1"},
      {Fault::kNanAtSplitCount7, "PACTS-META-3"},
  };
  return all;
}

const Expectation& expectation(Fault fault) {
  for (const Expectation& e : expectations())
    if (e.fault == fault) return e;
  static const Expectation none{fault, ""};
  return none;
}

// "PACTS-POISON-1" -> "POISON".
std::string family_of(const std::string& id) {
  const size_t first = id.find('-'), last = id.rfind('-');
  return first == std::string::npos || last <= first ? id : id.substr(first + 1, last - first - 1);
}

std::string case_dir(const std::string& leaf) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "pacts-selftest" / leaf;
  std::filesystem::create_directories(dir);
  return dir.string();
}

// One line of the table: a fault, the properties that caught it with the cases each needed,
// and the minimal case of its named catcher.
struct Row {
  std::string fault;
  std::string catchers;  // "PACTS-ACC-1 (3), PACTS-EDGE-3 (12)"
  std::string minimal;   // describe() of the shrunk case
  double seconds = 0;
};

class SelfTest : public ::testing::TestWithParam<Fault> {
 public:
  static void SetUpTestSuite() {
    std::printf("pacts selftest: seed %llu; %d cases for a fault's named catcher, %d for every "
                "other property\n",
                static_cast<unsigned long long>(kSeed), kCases, kSweepCases);
  }
  static void TearDownTestSuite() {
    std::printf("\n%-26s | %-60s | %7s | minimal case of the named catcher\n", "fault",
                "caught by (cases needed)", "seconds");
    for (const Row& r : rows())
      std::printf("%-26s | %-60s | %7.1f | %s\n", r.fault.c_str(), r.catchers.c_str(), r.seconds,
                  r.minimal.c_str());
  }
  static std::vector<Row>& rows() {
    static std::vector<Row> all;
    return all;
  }
};

// Every fault is caught by its named catcher, a Mandatory property; the catcher's shrunk case
// is saved and its case file replays the failure. The rest of the catalogue then runs on a
// smaller budget to show what else catches the fault (informative: the table's other columns).
TEST_P(SelfTest, FaultIsCaught) {
  const Fault fault = GetParam();
  const Expectation& want = expectation(fault);
  ASSERT_STRNE(want.catcher, "") << fault_name(fault) << " has no expected catcher";
  const Property* catcher = find_property(want.catcher);
  ASSERT_NE(catcher, nullptr) << want.catcher << " is not in the catalogue";
  // A Mandatory property, or PACTS-EDGE-4, whose rows of other sequences are Mandatory (a Fail).
  ASSERT_TRUE(catcher->level == Level::kMandatory || want.catcher == std::string("PACTS-EDGE-4"))
      << want.catcher;
  if (want.planted_elsewhere != nullptr)
    GTEST_SKIP() << fault_name(fault) << " acts on plans, which the reference ignores; planted in "
                 << "the host backend by " << want.planted_elsewhere;

  const auto t0 = std::chrono::steady_clock::now();
  auto backend = make_fault_backend(make_reference_backend(), fault);
  auto reference = make_reference_backend();
  Row row;
  row.fault = fault_name(fault);

  RunOptions options;
  options.seed = kSeed;
  options.cases = want.cases;
  options.case_dir = case_dir(fault_name(fault));
  const PropertyStats stats = run_property(budgeted(*catcher), *backend, *reference, options);
  EXPECT_EQ(stats.verdict, Verdict::kFail)
      << fault_name(fault) << ": " << want.catcher << " does not catch it in " << want.cases
      << " cases (seed " << kSeed << ")";
  if (stats.minimal) {
    row.catchers = want.catcher + std::string(" (") + std::to_string(stats.cases) + ")";
    row.minimal = describe(*stats.minimal);
    std::printf("%s: %s fails after %lld cases and shrinks to: %s\n  %s\n  case file %s\n"
                "  replay: %s\n",
                fault_name(fault), want.catcher, static_cast<long long>(stats.cases),
                row.minimal.c_str(), stats.failure.c_str(), stats.case_file.c_str(),
                stats.replay.c_str());

    // The saved case file regenerates the failure.
    EXPECT_FALSE(stats.case_file.empty()) << "no case file was written";
    if (!stats.case_file.empty()) {
      const auto file = read_case_file(stats.case_file);
      ASSERT_TRUE(file.is_ok()) << file.status().to_string();
      EXPECT_EQ(file.value().property, want.catcher);
      EXPECT_TRUE(check_case(*catcher, *backend, *reference, file.value().spec).failed())
          << "the case file " << stats.case_file << " does not reproduce the failure";
    }

    // The #7092 poison fault shrinks to one sequence of at most one page plus a token.
    if (fault == Fault::kVTailLeak) {
      const CaseShape& s = stats.minimal->shape;
      EXPECT_EQ(s.batch, 1) << row.minimal;
      ASSERT_EQ(s.contexts.size(), 1u) << row.minimal;
      EXPECT_LE(s.contexts[0], s.page_size + 1) << row.minimal;
    }
  }

  RunOptions sweep;
  sweep.seed = kSeed;
  sweep.cases = kSweepCases;
  sweep.shrink = false;
  for (const Property& property : catalogue()) {
    if (property.id == want.catcher) continue;
    const PropertyStats other = run_property(budgeted(property), *backend, *reference, sweep);
    if (other.failed == 0) continue;
    row.catchers += (row.catchers.empty() ? "" : ", ") + property.id +
                    (other.verdict == Verdict::kFail ? "" : " QW") + " (" +
                    std::to_string(other.cases) + ")";
  }
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: caught by %s (%.1f s)\n", row.fault.c_str(),
              row.catchers.empty() ? "nothing" : row.catchers.c_str(), row.seconds);
  rows().push_back(row);
}

INSTANTIATE_TEST_SUITE_P(Faults, SelfTest, ::testing::ValuesIn(all_faults()),
                         [](const ::testing::TestParamInfo<Fault>& param) {
                           return std::string(fault_name(param.param));
                         });

// Every fault has a named catcher in the catalogue, and the named catchers cover every family;
// with FaultIsCaught requiring each catcher to fail, every family catches at least one fault.
TEST(SelfTestPlan, EveryFamilyCatchesAFault) {
  std::set<std::string> families, covered;
  for (const Property& p : catalogue()) families.insert(family_of(p.id));
  for (const std::string f : {"ACC", "POISON", "META", "EDGE", "REFUSE", "DEV"})
    EXPECT_TRUE(families.count(f)) << "the catalogue has no " << f << " family";
  for (Fault fault : all_faults()) {
    const Expectation& e = expectation(fault);
    ASSERT_STRNE(e.catcher, "") << fault_name(fault) << " has no expected catcher";
    EXPECT_NE(find_property(e.catcher), nullptr) << e.catcher << " is not in the catalogue";
    covered.insert(family_of(e.catcher));
  }
  for (const std::string& f : families)
    EXPECT_TRUE(covered.count(f)) << "no fault is expected to be caught by the " << f << " family";
  EXPECT_EQ(expectations().size(), all_faults().size());
}

// Names round-trip and are distinct snake_case.
TEST(SelfTestPlan, FaultNames) {
  std::set<std::string> names;
  for (Fault fault : all_faults()) {
    const std::string name = fault_name(fault);
    EXPECT_TRUE(std::all_of(name.begin(), name.end(),
                            [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }))
        << name;
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    EXPECT_EQ(fault_from_name(name), fault);
  }
  EXPECT_FALSE(fault_from_name("no_such_fault").has_value());
}

// The faults model bugs that show only on the inputs that trigger them: on clean data (unowned
// bytes zero, padding entries naming page 0, no dominant logit, no window) these faults change no
// bit, so a property that catches them catches the bug, not an artefact of the wrapper.
TEST(SelfTestPlan, FaultsAreSilentOnCleanData) {
  auto reference = make_reference_backend();
  for (Fault fault : {Fault::kVTailLeak, Fault::kPaddingEntryAsPage, Fault::kVScaleTailLeak,
                      Fault::kMergeWrongMax, Fault::kWriteBeforeValidate, Fault::kOutputGapWrite}) {
    auto backend = make_fault_backend(make_reference_backend(), fault);
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      CaseShape shape = random_shape(kSeed + seed);
      shape.window = 0;  // merge_wrong_max: a window can empty the first partition
      const CaseData c = make_case(shape, seed);
      const Observed want = observe(*reference, c), got = observe(*backend, c);
      ASSERT_TRUE(got.run.status.is_ok()) << fault_name(fault) << ": " << got.run.status.to_string();
      const Outcome same = same_bits(got, want, std::string(fault_name(fault)) + " on clean data");
      EXPECT_FALSE(same.failed()) << same.detail << " (random_shape seed " << kSeed + seed << ")";
    }
  }
}

// One sequence of `context` keys, one query head on one KV head (the shape's other fields default).
CaseShape one_head_sequence(int32_t context) {
  CaseShape shape;
  shape.batch = 1;
  shape.num_q_heads = shape.num_kv_heads = 1;
  shape.contexts = {context};
  return shape;
}

// window_page_edge acts only where a window is one key off a page multiple: W = 2P + 1 and 2P - 1
// inside the context change the output, W = 2P, 2P + 2 and a window beyond the context change no
// bit.
TEST(SelfTestPlan, WindowPageEdgeActsOnlyOneKeyOffAPageMultiple) {
  auto reference = make_reference_backend();
  auto backend = make_fault_backend(make_reference_backend(), Fault::kWindowPageEdge);
  CaseShape shape = one_head_sequence(40);
  shape.page_size = 8;
  for (int32_t w : {17, 15, 16, 18, 41, 47}) {
    shape.window = w;
    const CaseData c = make_case(shape, 7);
    const Observed want = observe(*reference, c), got = observe(*backend, c);
    ASSERT_TRUE(got.run.status.is_ok()) << got.run.status.to_string();
    const Outcome same = same_bits(got, want, "window " + std::to_string(w));
    const bool edge = (w == 17 || w == 15);  // 2 * 8 +- 1, inside the 40 keys
    EXPECT_EQ(same.failed(), edge) << "window " << w << ": " << same.detail;
  }
}

// merge_wrong_max without a window: a key in the second half with a logit about 512 above the
// rest overflows exp(lse2 - lse1) in fp32 (NaN output, LSE +inf); the same key in the first half
// is harmless, because there the first partition's maximum is the global one.
TEST(SelfTestPlan, MergeWrongMaxOverflowsOnADominantLateLogit) {
  auto reference = make_reference_backend();
  auto backend = make_fault_backend(make_reference_backend(), Fault::kMergeWrongMax);
  CaseShape shape = one_head_sequence(32);  // partitions [0, 16) and [16, 32)
  for (int32_t key : {20, 5}) {
    // q_0 = 1 (bf16 0x3F80), k_{key,0} = 4096 (bf16 0x4580): logit about 4096 / sqrt(64) = 512.
    const std::vector<Override> dominant = {
        {Override::Tensor::kQ, 0, 0, 0, 0, 0x3F80},
        {Override::Tensor::kK, 0, key, 0, 0, 0x4580},
    };
    const CaseData c = make_case(shape, kSeed, dominant);
    const Observed want = observe(*reference, c), got = observe(*backend, c);
    ASSERT_TRUE(std::isfinite(want.lse_values.at(0)));
    if (key >= 16) {
      EXPECT_TRUE(std::isnan(got.out_values.at(0))) << "dominant key " << key;
      EXPECT_EQ(got.lse_values.at(0), INFINITY) << "dominant key " << key;
    } else {
      EXPECT_FALSE(same_bits(got, want, "dominant key in the first half").failed());
    }
  }
}

// The sanity row: the clean reference passes every property (a property that fails the reference
// would make every catch above meaningless).
TEST(SelfTestPlan, CleanReferencePassesEverything) {
  const auto t0 = std::chrono::steady_clock::now();
  auto backend = make_reference_backend();
  auto reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = kCases;
  options.case_dir = case_dir("clean");
  std::printf("clean reference: seed %llu, %d cases per property\n",
              static_cast<unsigned long long>(kSeed), kCases);
  for (const Property& property : catalogue()) {
    const PropertyStats stats = run_property(budgeted(property), *backend, *reference, options);
    std::printf("clean reference: %-16s %-14s cases %3lld, passed %3lld, not supported %3lld, %5.2f s\n",
                stats.id.c_str(), verdict_name(stats.verdict), static_cast<long long>(stats.cases),
                static_cast<long long>(stats.passed), static_cast<long long>(stats.not_supported),
                stats.seconds);
    EXPECT_EQ(stats.failed, 0) << stats.id << " fails the clean reference: " << stats.failure
                               << (stats.minimal ? "\n  minimal case: " + describe(*stats.minimal) : "");
  }
  std::printf("clean reference: %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// spec/tolerance.md §2.1: a backend that requantises the query by the declared rule passes the
// whole catalogue (the rule commutes with every transformation the properties apply), and the
// accuracy properties bite when the declaration and the arithmetic disagree.
TEST(SelfTestPlan, RequantisingReferencePassesEverything) {
  auto backend = make_reference_backend(fp8_kv_requant_rule());
  auto reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = kCases;
  options.case_dir = case_dir("requant");
  for (const Property& property : catalogue()) {
    const PropertyStats stats = run_property(budgeted(property), *backend, *reference, options);
    EXPECT_EQ(stats.failed, 0) << stats.id << " fails the requantising reference: " << stats.failure
                               << (stats.minimal ? "\n  minimal case: " + describe(*stats.minimal) : "");
  }
}

// `inner`'s arithmetic under another backend's declared profile.
class DeclaredAs final : public Backend {
 public:
  DeclaredAs(std::unique_ptr<Backend> inner, const Backend& declared)
      : inner_(std::move(inner)), profile_(declared.profile()) {}
  std::string name() const override { return inner_->name() + "-declared-" + profile_.name; }
  std::string device() const override { return inner_->device(); }
  const Capabilities& capabilities() const override { return inner_->capabilities(); }
  const spec::NumericsProfile& profile() const override { return profile_; }
  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint& h) override {
    return inner_->run(p, b, h);
  }

 private:
  std::unique_ptr<Backend> inner_;
  spec::NumericsProfile profile_;
};

TEST(SelfTestPlan, RequantisationThatIsNotDeclaredOrNotDoneFailsAcc1) {
  const Property* acc1 = find_property("PACTS-ACC-1");
  ASSERT_NE(acc1, nullptr);
  auto reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = 200;
  options.case_dir = case_dir("requant-faults");
  const auto requantising = make_reference_backend(fp8_kv_requant_rule());
  // Requantises but declares nothing; declares the rule but keeps the exact query.
  DeclaredAs undeclared(make_reference_backend(fp8_kv_requant_rule()), *reference);
  DeclaredAs not_done(make_reference_backend(), *requantising);
  for (Backend* b : {static_cast<Backend*>(&undeclared), static_cast<Backend*>(&not_done)}) {
    const PropertyStats stats = run_property(*acc1, *b, *reference, options);
    EXPECT_GT(stats.failed, 0) << b->name() << ": PACTS-ACC-1 did not see the mismatch in "
                               << stats.cases << " cases";
  }
}

// run_property counts what the backend ran per KV format and per K/V layout pair (the release
// note's per-format figures, tools/gpu/catalogue_summary.py): every case that was neither
// NotSupported nor NotApplicable once in each map, and the generator's spread of formats visible in
// 60 cases.
TEST(Runner, CountsRanCasesPerKvFormatAndLayoutPair) {
  auto backend = make_reference_backend();
  auto reference = make_reference_backend();
  const Property* property = find_property("PACTS-ACC-1");
  ASSERT_NE(property, nullptr);
  RunOptions options;
  options.seed = kSeed;
  options.cases = 60;
  const PropertyStats s = run_property(*property, *backend, *reference, options);
  ASSERT_EQ(s.verdict, Verdict::kPass);
  int64_t per_format = 0, per_layout = 0;
  for (const auto& [name, n] : s.ran_per_kv_format) per_format += n;
  for (const auto& [name, n] : s.ran_per_layout) {
    per_layout += n;
    EXPECT_NE(name.find('/'), std::string::npos) << name;
  }
  EXPECT_EQ(per_format, s.cases - s.not_supported - s.not_applicable);
  EXPECT_EQ(per_layout, s.cases - s.not_supported - s.not_applicable);
  EXPECT_GE(s.ran_per_kv_format.size(), 5u);
  EXPECT_EQ(s.ran_per_kv_format.count("invalid"), 0u);
  EXPECT_EQ(s.ran_per_kv_format.count("e2m1"), 1u);  // a KV format only: not the query's
  for (const auto& [name, n] : s.ran_per_layout) {    // x-packed is K's only, dim-major V's only
    EXPECT_NE(name.rfind("dim_major_v/", 0), 0u) << name;
    EXPECT_EQ(name.find("/x_packed_k"), std::string::npos) << name;
  }
}

// The reference with fewer declared capabilities: no LSE and no determinism.
class Narrower final : public Backend {
 public:
  Narrower() : inner_(make_reference_backend()), caps_(inner_->capabilities()) {
    caps_.lse = false;
    caps_.deterministic = false;
  }
  std::string name() const override { return "narrower"; }
  std::string device() const override { return inner_->device(); }
  const Capabilities& capabilities() const override { return caps_; }
  const spec::NumericsProfile& profile() const override { return inner_->profile(); }
  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint& h) override {
    return inner_->run(p, b, h);
  }

 private:
  std::unique_ptr<Backend> inner_;
  Capabilities caps_;
};

// The supports step (check_case): a generated case outside the backend's declared capabilities,
// or a property whose Property::supports names a capability the backend lacks, is NotSupported
// with the reason, and the property's body never runs on it.
TEST(Runner, TheSupportsStepRunsBeforeTheBody) {
  Narrower narrower;
  auto reference = make_reference_backend();
  int bodies = 0;
  const Property counting = make_property(
      "PACTS-ACC-1", "Counting", Level::kMandatory, false, GenLimits{},
      [&](PropertyContext&, const CaseSpec&) { ++bodies; return Outcome::fail("the body ran"); });
  CaseSpec with_lse;
  with_lse.shape = random_shape(kSeed);
  with_lse.shape.lse = true;
  const Outcome a = check_case(counting, narrower, *reference, with_lse);
  EXPECT_EQ(a.verdict, Verdict::kNotSupported);
  EXPECT_NE(a.detail.find("want_lse"), std::string::npos) << a.detail;
  EXPECT_EQ(bodies, 0);
  CaseSpec plain = with_lse;
  plain.shape.lse = false;
  EXPECT_EQ(check_case(counting, narrower, *reference, plain).verdict, Verdict::kFail);
  EXPECT_EQ(bodies, 1);
  const Property* meta2 = find_property("PACTS-META-2");
  ASSERT_NE(meta2, nullptr);
  const Outcome b = check_case(*meta2, narrower, *reference, plain);
  EXPECT_EQ(b.verdict, Verdict::kNotSupported);
  EXPECT_NE(b.detail.find("determinism"), std::string::npos) << b.detail;
  EXPECT_EQ(check_case(*meta2, *reference, *reference, plain).verdict, Verdict::kPass);
}

// A case that cannot exercise its property is NotApplicable (spec/properties.md §1): counted
// apart, never a Pass, never the backend's NotSupported, and not among the cases it ran. A
// property whose every case was NotApplicable reports NotApplicable with the first reason.
TEST(Runner, NotApplicableIsNeitherAPassNorNotSupported) {
  auto backend = make_reference_backend();
  auto reference = make_reference_backend();
  const Property never = make_property(
      "PACTS-ACC-1", "Never", Level::kMandatory, false, GenLimits{},
      [](PropertyContext&, const CaseSpec&) { return Outcome::not_applicable("nothing to place"); });
  const Property half = make_property(
      "PACTS-ACC-1", "Half", Level::kMandatory, false, GenLimits{},
      [](PropertyContext&, const CaseSpec& c) {
        return c.seed % 2 ? Outcome::not_applicable("odd seed") : Outcome::pass();
      });
  RunOptions options;
  options.seed = kSeed;
  options.cases = 20;
  const PropertyStats a = run_property(never, *backend, *reference, options);
  EXPECT_EQ(a.verdict, Verdict::kNotApplicable);
  EXPECT_EQ(a.not_applicable, a.cases);
  EXPECT_EQ(a.passed + a.not_supported, 0);
  EXPECT_EQ(a.not_applicable_reason, "nothing to place");
  EXPECT_TRUE(a.ran_per_kv_format.empty());
  EXPECT_STREQ(verdict_name(a.verdict), "NotApplicable");
  const PropertyStats b = run_property(half, *backend, *reference, options);
  EXPECT_EQ(b.verdict, Verdict::kPass);
  EXPECT_GT(b.not_applicable, 0);
  EXPECT_GT(b.passed, 0);
  EXPECT_EQ(b.passed + b.not_applicable, b.cases);
  EXPECT_EQ(b.not_supported, 0);
}

// Shrinking and the 2^16 low pages of high-page-id cases (CaseShape::low_pages): a failure that
// does not need them shrinks through candidates without them (every candidate the check sees
// after the first failure has none, and so has the minimal case), while one that needs them keeps
// them to the end. Without the first rule a shrink that passes through candidates small enough for
// the low pages builds pools of up to 128 MiB each, hundreds of times.
TEST(Runner, ShrinkingKeepsTheLowPagesOnlyWhereTheFailureNeedsThem) {
  auto backend = make_reference_backend();
  auto reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = 200;
  bool failing = false;
  int64_t later_with_low_pages = 0, later = 0;
  const Property every = make_property(
      "PACTS-ACC-1", "EveryCase", Level::kMandatory, false, GenLimits{},
      [&](PropertyContext&, const CaseSpec& c) {
        if (failing) {
          ++later;
          later_with_low_pages += c.shape.low_pages != 0;
        }
        failing = true;
        return Outcome::fail("every case fails");
      });
  const PropertyStats a = run_property(every, *backend, *reference, options);
  ASSERT_EQ(a.verdict, Verdict::kFail);
  ASSERT_TRUE(a.minimal.has_value());
  EXPECT_EQ(a.minimal->shape.low_pages, 0);
  EXPECT_GT(later, 0);
  EXPECT_EQ(later_with_low_pages, 0);

  // Fails only with the low pages: the first failing case has them, and so does the minimal one.
  const Property high = make_property(
      "PACTS-ACC-1", "OnlyHighIds", Level::kMandatory, false, GenLimits{},
      [](PropertyContext&, const CaseSpec& c) {
        return c.shape.low_pages != 0 ? Outcome::fail("a page id past 16 bits") : Outcome::pass();
      });
  const PropertyStats b = run_property(high, *backend, *reference, options);
  ASSERT_EQ(b.verdict, Verdict::kFail) << "no generated case had the low pages";
  ASSERT_TRUE(b.minimal.has_value());
  EXPECT_EQ(b.minimal->shape.low_pages, kLowPages);
}

}  // namespace
}  // namespace pacts::conformance
