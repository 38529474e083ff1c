// The host backend through the conformance catalogue: every property of
// conformance::catalogue() against the "host" adapter (backends/src/host_backend.cpp), fixed
// seed, 30 generated cases each, no Fail allowed; PACTS-META-3 with 1, 2 and many partitions;
// and every fault of the fault-injecting backend, planted around the host backend, caught.
#include <pacts/backends/host.h>
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/random_case.h>
#include <pacts/conformance/runner.h>

#include <gtest/gtest.h>

#include <pacts/spec/tolerance.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

namespace pacts::conformance {
namespace {

using backends::make_host_backend;

constexpr uint64_t kSeed = 20261129;  // fixed in CI (docs/conventions.md), printed with each result
constexpr int32_t kCases = 30;

class HostCatalogue : public ::testing::TestWithParam<std::string> {};

TEST_P(HostCatalogue, NoFail) {
  const Property* property = find_property(GetParam());
  ASSERT_NE(property, nullptr);
  std::unique_ptr<Backend> host = make_host_backend(2);
  std::unique_ptr<Backend> reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = kCases;
  const PropertyStats s = run_property(*property, *host, *reference, options);
  std::printf("%s %s on %s (%s), seed %llu: %s, %lld cases, %lld passed, %lld not supported, "
              "worst error/bound %.3g\n",
              s.id.c_str(), s.name.c_str(), s.backend.c_str(), host->device().c_str(),
              static_cast<unsigned long long>(kSeed), verdict_name(s.verdict),
              static_cast<long long>(s.cases), static_cast<long long>(s.passed),
              static_cast<long long>(s.not_supported), s.worst_ratio);
  EXPECT_NE(s.verdict, Verdict::kFail)
      << s.failure << "\nminimal case: " << (s.minimal ? describe(*s.minimal) : "none")
      << "\nreplay: " << (s.replay.empty() ? "run this test with the seed above" : s.replay);
}

std::vector<std::string> property_ids() {
  std::vector<std::string> ids;
  for (const Property& p : catalogue()) ids.push_back(p.id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, HostCatalogue, ::testing::ValuesIn(property_ids()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return find_property(param.param)->test_name();
                         });

// PACTS-META-3 with the three plan classes named explicitly: unsplit (1 partition), 2
// partitions, and as many as the tile allows (16 keys each). Each run is within tolerance of the
// reference, the plan the backend reports is the one asked for, and the automatic plan equals
// the one-partition plan bitwise whenever it is unsplit.
TEST(HostSplit, PACTS_META_3_SplitInvariance_OneTwoMany) {
  std::unique_ptr<Backend> host = make_host_backend(2);
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const CaseData c = make_case(random_shape(seed * 31, 500), seed);
    const pacts_problem& p = c.problem;
    const int64_t keys = int64_t{p.max_pages_per_seq} * p.page_size;
    const reference::Output ref = reference_answer(c);
    const Observed one = observe(*host, c, PlanHint::partitions(1));
    ASSERT_TRUE(one.run.status.is_ok()) << one.run.status.to_string();
    EXPECT_EQ(one.run.plan.partition_size, 0);
    EXPECT_EQ(one.run.plan.max_partitions, 1);
    const Observed two = observe(*host, c, PlanHint::partitions(2));
    EXPECT_EQ(two.run.plan.max_partitions, keys > 16 ? 2 : 1) << "seed " << seed;
    const Observed many = observe(*host, c, PlanHint::partition_size(16));
    EXPECT_EQ(many.run.plan.max_partitions, (keys + 15) / 16 > 1 ? (keys + 15) / 16 : 1);
    for (const Observed* o : {&one, &two, &many}) {
      const Outcome v = within_tolerance(*host, p, *o, ref);
      EXPECT_FALSE(v.failed()) << "seed " << seed << ", " << o->run.plan.max_partitions
                               << " partitions: " << v.detail;
    }
    const Observed automatic = observe(*host, c);
    if (automatic.run.plan.partition_size == 0) {
      EXPECT_FALSE(same_bits(one, automatic, "automatic unsplit vs one partition").failed());
    }
  }
}

// The self-test's faults applied to the host backend must all be caught. Each
// fault wraps the host backend; the catalogue runs in order (small shapes, 20 cases, no
// shrinking) until a Mandatory property fails. Which property catches which fault is the
// self-test's business (conformance/tests/selftest_test.cpp); here any Mandatory Fail counts.
class HostFaults : public ::testing::TestWithParam<Fault> {};

TEST_P(HostFaults, FaultIsCaught) {
  const Fault fault = GetParam();
  // Only PACTS-META-4's batch-invariant runs reach it, and the small shapes of this sweep seldom
  // cross a partition boundary: its own test below runs META-4 on full-size cases.
  if (fault == Fault::kInvariantPlanFromBatch)
    GTEST_SKIP() << fault_name(fault) << ": HostFaults.InvariantPlanFromBatchIsCaught";
  std::unique_ptr<Backend> faulty = make_fault_backend(make_host_backend(2), fault);
  std::unique_ptr<Backend> reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = 20;
  options.shrink = false;
  std::string caught;
  for (const Property& p : catalogue()) {
    Property small = p;
    small.limits.max_reference_work = std::min<int64_t>(small.limits.max_reference_work, 1 << 16);
    small.limits.max_batch = std::min(small.limits.max_batch, 8);
    small.limits.long_context = std::min(small.limits.long_context, 300);
    const PropertyStats s = run_property(small, *faulty, *reference, options);
    if (s.verdict == Verdict::kFail) {
      caught = p.id + " after " + std::to_string(s.cases) + " cases: " + s.failure.substr(0, 200);
      break;
    }
  }
  std::printf("%s on host (seed %llu): %s\n", fault_name(fault),
              static_cast<unsigned long long>(kSeed), caught.empty() ? "NOT CAUGHT" : caught.c_str());
  EXPECT_FALSE(caught.empty()) << fault_name(fault) << " planted in the host backend is caught by no "
                               << "Mandatory property (seed " << kSeed << ", 20 cases each)";
}

INSTANTIATE_TEST_SUITE_P(Faults, HostFaults, ::testing::ValuesIn(all_faults()),
                         [](const ::testing::TestParamInfo<Fault>& param) {
                           return std::string(fault_name(param.param));
                         });

// PACTS-META-4 bites on the batch-invariant plan (spec/operator.md §11.1): the host backend
// with its batch-invariant plan answered by a split count from the batch size (the fault
// invariant_plan_from_batch, which the self-test cannot plant in the unsplit reference) fails
// the property, and the clean host backend passes it on the same cases.
TEST(HostFaults, InvariantPlanFromBatchIsCaught) {
  const Property& meta4 = *find_property("PACTS-META-4");
  std::unique_ptr<Backend> reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = 40;
  std::unique_ptr<Backend> host = make_host_backend(2);
  ASSERT_TRUE(host->capabilities().batch_invariant);
  const PropertyStats clean = run_property(meta4, *host, *reference, options);
  EXPECT_EQ(clean.verdict, Verdict::kPass) << clean.failure;
  std::unique_ptr<Backend> faulty =
      make_fault_backend(make_host_backend(2), Fault::kInvariantPlanFromBatch);
  const PropertyStats s = run_property(meta4, *faulty, *reference, options);
  EXPECT_EQ(s.verdict, Verdict::kFail) << "a batch-dependent \"batch-invariant\" plan passed META-4";
  std::printf("invariant_plan_from_batch on host: %s after %lld cases: %s\n  minimal case: %s\n",
              verdict_name(s.verdict), static_cast<long long>(s.cases), s.failure.c_str(),
              s.minimal ? describe(*s.minimal).c_str() : "none");
}

// PACTS-DEV-3 bites: a replay that keeps the context lengths it was first run with (a graph that
// baked them in) must fail the property.
class StaleReplay final : public Backend {
 public:
  StaleReplay() : host_(make_host_backend(2)) {}
  std::string name() const override { return "host+stale_replay"; }
  std::string device() const override { return host_->device(); }
  const Capabilities& capabilities() const override { return host_->capabilities(); }
  const spec::NumericsProfile& profile() const override { return host_->profile(); }
  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint& h) override {
    return host_->run(p, b, h);
  }
  RunResult run_replayed(const pacts_problem& p, const pacts_buffers& b,
                         std::span<const int32_t>, const PlanHint& h) override {
    return host_->run(p, b, h);  // the new lengths never reach the second run
  }

 private:
  std::unique_ptr<Backend> host_;
};

TEST(HostReplay, PACTS_DEV_3_StaleReplayIsCaught) {
  StaleReplay stale;
  std::unique_ptr<Backend> reference = make_reference_backend();
  RunOptions options;
  options.seed = kSeed;
  options.cases = 30;
  const PropertyStats s = run_property(*find_property("PACTS-DEV-3"), stale, *reference, options);
  EXPECT_EQ(s.verdict, Verdict::kFail) << "a stale replay passed PACTS-DEV-3";
  std::printf("stale replay: %s after %lld cases: %s\n", verdict_name(s.verdict),
              static_cast<long long>(s.cases), s.failure.c_str());
}

}  // namespace
}  // namespace pacts::conformance

namespace pacts::conformance {
namespace {

// spec/tolerance.md §3.3, tau_acc: an exact fp32 kernel (the host backend) on MXFP4 K and V with
// e8m0 bytes 0 to 6, a query near 2^123 and an fp32 output, whose outputs lie deep in fp32's
// subnormal range. Every element is within the bound; without the underflow term some are not
// (the false Fail the term fixes: up to 4.6 times that bound at seed 166).
TEST(HostTolerance, SubnormalOutputsOfAnExactKernelAreWithinTheBound) {
  std::unique_ptr<Backend> host = make_host_backend(2);
  const spec::NumericsProfile& prof = host->profile();
  int64_t outside_old = 0, outside_new = 0, subnormal_outputs = 0;
  double worst_old = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    CaseShape sh = random_shape(seed * 7919, 200);
    sh.kv_format = PACTS_FORMAT_E2M1;
    sh.k_scale_mode = sh.v_scale_mode = PACTS_SCALE_MX_BLOCK;
    sh.head_dim = 64;
    sh.out_format = PACTS_FORMAT_FP32;
    sh.q_format = PACTS_FORMAT_BF16;
    sh.k_e8m0_lo = 0, sh.k_e8m0_hi = 6, sh.v_e8m0_lo = 0, sh.v_e8m0_hi = 6;
    sh.q_exponent = 100 + static_cast<int32_t>(seed % 24);
    sh.softcap = 0;
    const CaseData c = make_case(sh, seed);
    const pacts_problem& p = c.problem;
    const reference::Output ref = reference_answer(c);
    const Observed o = observe(*host, c);
    ASSERT_TRUE(o.run.status.is_ok()) << "seed " << seed << ": " << o.run.status.to_string();
    const Outcome v = within_tolerance(*host, p, o, ref);
    EXPECT_FALSE(v.failed()) << "seed " << seed << ": " << v.detail;
    const size_t D = static_cast<size_t>(p.head_dim);
    for (size_t e = 0; e < o.out_values.size(); ++e) {
      const size_t row = e / D;
      if (ref.row_invalid[row] || ref.visible[row] == 0) continue;
      const double r = ref.out[e];
      const double bound = spec::output_bound(prof, p, reference::bound_inputs(ref, row, e), r);
      const double u_out = spec::unit_roundoff(p.out_format);
      const double old = bound - (1 + u_out) * spec::underflow_term(prof, ref.visible[row]);
      const double err = std::fabs(o.out_values[e] - r);
      subnormal_outputs += r != 0 && std::fabs(r) < 0x1p-126;
      outside_new += err > bound;
      if (err > old) {
        ++outside_old;
        worst_old = std::max(worst_old, err / old);
      }
    }
  }
  std::printf("subnormal outputs %lld; outside the bound %lld; outside it without tau_acc %lld "
              "(worst %.3g x)\n", static_cast<long long>(subnormal_outputs),
              static_cast<long long>(outside_new), static_cast<long long>(outside_old), worst_old);
  EXPECT_GT(subnormal_outputs, 1000);
  EXPECT_EQ(outside_new, 0);
  EXPECT_GT(outside_old, 0);  // the old bound's false Fail
}

}  // namespace
}  // namespace pacts::conformance
