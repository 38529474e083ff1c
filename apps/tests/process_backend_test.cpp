// The process backend (spec/process.md): a child behind the protocol computes what the same
// backend computes in process, bit for bit; a child that crashes, hangs, exits, answers garbage,
// lies about its capabilities, returns NaN or writes outside its outputs gets the failure the
// protocol names for that call and the run goes on; handshakes the loader would refuse are
// refused naming the field.
#include <pacts/backends/host.h>
#include <pacts/backends/process.h>
#include <pacts/backends/register.h>
#include <pacts/conformance/case_data.h>
#include <pacts/conformance/mustpass.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/registry.h>
#include <pacts/conformance/runner.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#if !defined(PACTS_CHILD_EXE) || !defined(PACTS_PLANTED_CHILD_EXE) || !defined(PACTS_MUSTPASS_DIR) || \
    !defined(PACTS_TEST_OUT)
#error "the build defines the children's paths, the mustpass set and the output folder"
#endif

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;
using backends::start_process_backend;

const bool registered = [] {
  backends::register_all();
  return true;
}();

std::unique_ptr<Backend> start(const std::string& command) {
  auto b = start_process_backend(command);
  EXPECT_TRUE(b.is_ok()) << b.status().to_string();
  return b.is_ok() ? std::move(b).value() : nullptr;
}

std::string planted(const std::string& fault, int on = 2, const std::string& backend = "host") {
  return std::string(PACTS_PLANTED_CHILD_EXE) + " --fault " + fault + " --on " +
         std::to_string(on) + " --backend " + backend;
}

// The mustpass cases the host backend computes (refusals and invalid tables included: their
// status and device error bits must cross the protocol too).
std::vector<CaseData> mustpass_cases() {
  auto m = load_mustpass(PACTS_MUSTPASS_DIR);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  std::vector<CaseData> cases;
  if (m.is_ok())
    for (const MustpassEntry& e : m.value().entries) cases.push_back(e.file.spec.build());
  return cases;
}

TEST(ProcessBackend, ComputesWhatTheHostBackendComputesBitForBit) {
  auto child = start(std::string(PACTS_CHILD_EXE) + " --backend host");
  ASSERT_NE(child, nullptr);
  auto host = backends::make_host_backend();
  EXPECT_EQ(child->name(), std::string("exec:") + PACTS_CHILD_EXE + " --backend host");
  EXPECT_EQ(child->profile().u_acc, host->profile().u_acc);
  EXPECT_EQ(child->profile().name, "host");
  EXPECT_EQ(child->capabilities().kv_formats, host->capabilities().kv_formats);
  EXPECT_EQ(child->capabilities().plan_replay, host->capabilities().plan_replay);
  EXPECT_EQ(child->capabilities().batch_invariant, host->capabilities().batch_invariant);
  int compared = 0;
  for (const CaseData& c0 : mustpass_cases()) {
    for (const PlanHint hint : {PlanHint::automatic(), PlanHint::partitions(3)}) {
      CaseData a = c0, b = c0;
      std::fill(a.out.begin(), a.out.end(), uint8_t{0xA5});
      std::fill(a.lse.begin(), a.lse.end(), uint8_t{0xA5});
      b.out = a.out;
      b.lse = a.lse;
      const RunResult ra = child->run(a.problem, a.buffers(), hint);
      const RunResult rb = host->run(b.problem, b.buffers(), hint);
      EXPECT_EQ(ra.status.code(), rb.status.code()) << ra.status.to_string();
      EXPECT_EQ(ra.status.message(), rb.status.message());
      EXPECT_EQ(ra.device_error, rb.device_error);
      EXPECT_EQ(ra.plan.variant, rb.plan.variant);
      EXPECT_EQ(ra.plan.max_partitions, rb.plan.max_partitions);
      EXPECT_EQ(a.out, b.out);  // the guard bytes of the gaps included
      EXPECT_EQ(a.lse, b.lse);
      ++compared;
    }
    // PACTS-DEV-3's replay crosses the protocol too.
    if (c0.problem.batch > 0) {
      CaseData a = c0, b = c0;
      std::vector<int32_t> replay(c0.context_lens.size());
      for (size_t i = 0; i < replay.size(); ++i) replay[i] = c0.context_lens[i] / 2;
      const RunResult ra = child->run_replayed(a.problem, a.buffers(), replay, PlanHint::automatic());
      const RunResult rb = host->run_replayed(b.problem, b.buffers(), replay, PlanHint::automatic());
      EXPECT_EQ(ra.status.code(), rb.status.code()) << ra.status.to_string();
      EXPECT_EQ(a.out, b.out);
      EXPECT_EQ(a.lse, b.lse);
    }
  }
  EXPECT_GE(compared, 50);
}

// One mustpass case the host computes, run three times: the call the fault hits fails with the
// protocol's word for it, the calls around it compute (the child restarted after a crash).
void expect_fails_once(const std::string& command, const std::string& words) {
  auto child = start(command);
  ASSERT_NE(child, nullptr);
  std::vector<CaseData> cases = mustpass_cases();
  ASSERT_FALSE(cases.empty());
  CaseData c = cases.front();
  for (int call = 1; call <= 3; ++call) {
    CaseData x = c;
    const auto t0 = std::chrono::steady_clock::now();
    const RunResult r = child->run(x.problem, x.buffers(), PlanHint::automatic());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (call == 2) {
      EXPECT_EQ(r.status.code(), spec::Code::kInternal) << r.status.to_string();
      EXPECT_NE(r.status.message().find(words), std::string::npos) << r.status.to_string();
      EXPECT_LT(s, 30.0);
    } else {
      EXPECT_TRUE(r.status.is_ok()) << "call " << call << ": " << r.status.to_string();
    }
  }
}

TEST(ProcessBackend, ACrashFailsItsCallAndTheChildIsRestarted) {
  expect_fails_once(planted("crash"), "crashed: exit status 134 (signal 6");
}

TEST(ProcessBackend, AnExitFailsItsCall) { expect_fails_once(planted("exit"), "crashed: exit status 0"); }

TEST(ProcessBackend, AHangIsKilledAfterTheTimeout) {
  setenv("PACTS_EXEC_TIMEOUT_S", "2", 1);
  expect_fails_once(planted("hang"), "timed out: no reply within 2 s");
  unsetenv("PACTS_EXEC_TIMEOUT_S");
}

TEST(ProcessBackend, GarbageRepliesFailTheirCall) {
  expect_fails_once(planted("garbage"), "answered garbage: reply to request 2: not JSON");
  expect_fails_once(planted("wrong-id"), "answered garbage: not a reply to request 2");
}

// A child's lines are checked as any JSON file is (spec/process.md §1.2): nesting 70,000 deep
// (a stack overflow where a document that deep is walked) and a key written twice (the last one
// won: an error reply followed by "status": "ok" was taken as done) fail their call.
TEST(ProcessBackend, DeepOrRepeatedKeyRepliesFailTheirCall) {
  expect_fails_once(planted("deep"), "answered garbage: reply to request 2: ");
  expect_fails_once(planted("deep"), "nested deeper than 64 levels");
  expect_fails_once(planted("duplicate-key"), "answered garbage: reply to request 2: ");
  expect_fails_once(planted("duplicate-key"), "duplicate key");
}

// spec/process.md §6: a prepared call's untimed first run computes what the host backend
// computes; time answers one positive figure per call; time_end releases it (a later time is
// refused); a child that declares no timed calls is never asked; a crash during a timed call
// loses the prepared call and says so, garbage times are named.
TEST(ProcessBackend, TimedCallsAreServedAndCheckedLikeCalls) {
  auto child = start(std::string(PACTS_CHILD_EXE) + " --backend host");
  ASSERT_NE(child, nullptr);
  EXPECT_TRUE(backends::child_timed_calls(*child));
  auto host = backends::make_host_backend();
  std::vector<CaseData> cases = mustpass_cases();
  ASSERT_FALSE(cases.empty());
  int prepared = 0;
  for (const CaseData& c0 : cases) {
    if (c0.problem.batch == 0) continue;
    CaseData a = c0, b = c0;
    const RunResult rb = host->run(b.problem, b.buffers(), PlanHint::automatic());
    if (!rb.status) continue;
    auto call = backends::child_prepare_timed(*child, a.problem, a.buffers(), 4096);
    ASSERT_TRUE(call.is_ok()) << call.status().to_string();
    EXPECT_EQ(call.value().plan.variant, rb.plan.variant);
    EXPECT_EQ(call.value().device_error, rb.device_error);
    EXPECT_NE(call.value().method.find("host clock"), std::string::npos);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.lse, b.lse);
    auto us = backends::child_time(*child, 3);
    ASSERT_TRUE(us.is_ok()) << us.status().to_string();
    ASSERT_EQ(us.value().size(), 3u);
    for (double t : us.value()) EXPECT_GT(t, 0.0);
    EXPECT_TRUE(backends::child_end_timed(*child).is_ok());
    if (++prepared == 3) break;
  }
  EXPECT_EQ(prepared, 3);
  auto after = backends::child_time(*child, 1);
  ASSERT_FALSE(after.is_ok());
  EXPECT_EQ(after.status().code(), spec::Code::kInvalidArgument);
  EXPECT_NE(after.status().message().find("no call prepared"), std::string::npos);
  EXPECT_EQ(backends::child_time(*child, 0).status().code(), spec::Code::kInvalidArgument);
  // Calls go on after timing.
  CaseData x = cases.front();
  EXPECT_EQ(child->run(x.problem, x.buffers(), PlanHint::automatic()).status.code(),
            host->run(x.problem, x.buffers(), PlanHint::automatic()).status.code());

  auto untimed = start(std::string(PACTS_CHILD_EXE) + " --backend reference");
  ASSERT_NE(untimed, nullptr);
  EXPECT_FALSE(backends::child_timed_calls(*untimed));
  CaseData y = cases.front();
  auto refused = backends::child_prepare_timed(*untimed, y.problem, y.buffers(), 0);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), spec::Code::kNotSupported);
  EXPECT_NE(refused.status().message().find("declares no timed calls"), std::string::npos);
  EXPECT_FALSE(backends::child_timed_calls(*host));

  CaseData z = cases.front();
  for (int i = 0; i < 2 && z.problem.batch == 0; ++i) z = cases[static_cast<size_t>(i + 1)];
  auto crash = start(planted("crash", 2));
  ASSERT_NE(crash, nullptr);
  ASSERT_TRUE(backends::child_prepare_timed(*crash, z.problem, z.buffers(), 0).is_ok());
  auto lost = backends::child_time(*crash, 2);
  ASSERT_FALSE(lost.is_ok());
  EXPECT_NE(lost.status().message().find("crashed"), std::string::npos) << lost.status().to_string();
  auto gone = backends::child_time(*crash, 1);
  EXPECT_NE(gone.status().message().find("its prepared call is lost"), std::string::npos)
      << gone.status().to_string();

  auto garbage = start(planted("time-garbage", 1000000));
  ASSERT_NE(garbage, nullptr);
  ASSERT_TRUE(backends::child_prepare_timed(*garbage, z.problem, z.buffers(), 0).is_ok());
  auto bad = backends::child_time(*garbage, 1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("answered garbage: times_us"), std::string::npos)
      << bad.status().to_string();
}

TEST(ProcessBackend, HandshakesALoaderWouldRefuseAreRefusedNamingTheField) {
  const auto refused = [](const std::string& command, const std::string& words) {
    auto b = start_process_backend(command);
    ASSERT_FALSE(b.is_ok()) << command;
    EXPECT_EQ(b.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(b.status().message().find(words), std::string::npos) << b.status().to_string();
  };
  refused(planted("bad-handshake"), "capabilities.max_page_size = 48: accepted: a power of two");
  refused(planted("deep-handshake"), "handshake: ");
  refused(planted("deep-handshake"), "nested deeper than 64 levels");
  refused("echo '{\"protocol\": \"pacts-process\", \"protocol\": \"pacts-process\"}'",
          "handshake: protocol: duplicate key");
  refused("echo hello", "handshake: not JSON");
  refused("echo '{\"protocol\": \"pacts-process\", \"version\": 2}'",
          "handshake.version = 2: this pacts implements process protocol version 1");
  refused("exit 3", "crashed before its handshake: exit status 3");
  refused("/no/such/program", "crashed before its handshake: exit status 127");
}

// pacts-child runs the backend on guarded copies of the buffers (backends/src/guard_zones.h): a
// write outside out and lse or into an input fails the call naming the buffer; a read or write
// that reaches a guard page ends the child, and the crash names the buffer. Without the guard
// zones, each of these children computes the right output.
TEST(ProcessBackend, AccessesOutsideTheBuffersAreCaughtAndNamed) {
  std::optional<CaseData> chosen;
  auto host = make_backend("host");
  for (CaseData& c : mustpass_cases()) {
    if (!c.problem.want_lse || c.k.empty() || c.q.empty()) continue;
    CaseData t = c;
    if (host->run(t.problem, t.buffers(), PlanHint{}).status.is_ok()) {
      chosen = std::move(c);
      break;
    }
  }
  ASSERT_TRUE(chosen.has_value()) << "no mustpass case with the LSE that the host backend computes";
  // A write lands in the canaries when the buffer's size leaves room before its guard pages (a
  // Fail naming it after the call), else on a guard page (a Crash naming it); a read far outside
  // always faults.
  enum class Lost { kNone, kCrash, kEither };
  struct Expect {
    const char* fault;
    const char* words;
    Lost lost;
  };
  for (const Expect& e : {Expect{"write-past-out", "past its end", Lost::kEither},
                          Expect{"write-before-lse", "lse: 4 bytes before its start were written", Lost::kNone},
                          Expect{"write-k", "k: 1 byte of this input was written", Lost::kNone},
                          Expect{"read-past-k", "k: an access 65536 bytes past its end", Lost::kCrash},
                          Expect{"read-before-q", "q: an access 8192 bytes before its start", Lost::kCrash}}) {
    auto child = start(planted(e.fault, 1));
    ASSERT_NE(child, nullptr);
    CaseData c = *chosen;
    const RunResult r = child->run(c.problem, c.buffers(), PlanHint{});
    const std::string& m = r.status.message();
    EXPECT_FALSE(r.status.is_ok()) << e.fault;
    EXPECT_NE(m.find(e.words), std::string::npos) << e.fault << ": " << m;
    if (std::string(e.fault) == "write-past-out") {
      EXPECT_TRUE(m.find("out: 8 bytes past its end were written") != std::string::npos ||
                  m.find("out: an access 0 bytes past its end") != std::string::npos) << m;
    }
    if (e.lost == Lost::kNone) {
      EXPECT_EQ(r.lost, RunResult::Lost::kNone) << e.fault << ": " << m;
    }
    if (e.lost == Lost::kCrash) {
      EXPECT_EQ(r.lost, RunResult::Lost::kCrash) << e.fault << ": " << m;
    }
    std::printf("%s: %s\n", e.fault, m.c_str());
  }
  // The same child with no fault computes the host backend's bytes through the guarded copies.
  auto healthy = start(planted("none", 1));
  ASSERT_NE(healthy, nullptr);
  CaseData a = *chosen, b = *chosen;
  ASSERT_TRUE(healthy->run(a.problem, a.buffers(), PlanHint{}).status.is_ok());
  ASSERT_TRUE(host->run(b.problem, b.buffers(), PlanHint{}).status.is_ok());
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
}

// Through the catalogue: the faults a kernel can have give the verdict the property gives any
// backend, and a crash in one property leaves the next to run.
TEST(ProcessBackend, PlantedChildrenFailTheirPropertiesAndTheRunGoesOn) {
  auto reference = make_reference_backend();
  const fs::path dir = fs::path(PACTS_TEST_OUT) / "process_backend";
  fs::remove_all(dir);
  RunOptions o;
  o.cases = 20;
  o.case_dir = dir.string();
  const auto verdict = [&](const std::string& command, const char* id) {
    auto child = start(command);
    EXPECT_NE(child, nullptr);
    if (!child) return PropertyStats{};
    const PropertyStats s = run_property(*find_property(id), *child, *reference, o);
    std::printf("%s on %s: %s (%s)\n", id, command.c_str(), verdict_name(s.verdict), s.failure.c_str());
    return s;
  };
  EXPECT_EQ(verdict(planted("nan", 1), "PACTS-ACC-1").verdict, Verdict::kFail);
  EXPECT_EQ(verdict(planted("drop-sinks", 1), "PACTS-ACC-1").verdict, Verdict::kFail);
  EXPECT_EQ(verdict(planted("none", 1, "host+output_gap_write"), "PACTS-EDGE-2").verdict,
            Verdict::kFail);
  // A crash at the 5th request: PACTS-ACC-1 fails on that case, with its case file; the same
  // child (restarted) then passes PACTS-ACC-2.
  auto child = start(planted("crash", 5));
  ASSERT_NE(child, nullptr);
  const PropertyStats acc1 = run_property(*find_property("PACTS-ACC-1"), *child, *reference, o);
  EXPECT_EQ(acc1.verdict, Verdict::kCrash);
  EXPECT_TRUE(is_failure(acc1.verdict));
  EXPECT_NE(acc1.failure.find("crashed: exit status 134 (signal 6"), std::string::npos) << acc1.failure;
  EXPECT_FALSE(acc1.case_file.empty());
  EXPECT_TRUE(fs::exists(acc1.case_file)) << acc1.case_file;
  const PropertyStats acc2 = run_property(*find_property("PACTS-ACC-2"), *child, *reference, o);
  EXPECT_EQ(acc2.verdict, Verdict::kPass) << acc2.failure;
  // A hang at the 3rd request: PACTS-ACC-2 times out (2 s here); the timed-out case is kept as
  // it is, not shrunk (each smaller case could hang as long again), so the property ends within a
  // few timeouts.
  setenv("PACTS_EXEC_TIMEOUT_S", "2", 1);
  auto hanging = start(planted("hang", 3));
  ASSERT_NE(hanging, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const PropertyStats acc2_hang = run_property(*find_property("PACTS-ACC-2"), *hanging, *reference, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("PACTS_EXEC_TIMEOUT_S");
  EXPECT_EQ(acc2_hang.verdict, Verdict::kTimeout) << acc2_hang.failure;
  EXPECT_NE(acc2_hang.failure.find("timed out: no reply within 2 s"), std::string::npos);
  EXPECT_LT(seconds, 10.0);
  EXPECT_FALSE(acc2_hang.case_file.empty());
  // The healthy child passes the same properties.
  auto healthy = start(planted("none", 1));
  ASSERT_NE(healthy, nullptr);
  for (const char* id : {"PACTS-ACC-1", "PACTS-EDGE-2"})
    EXPECT_EQ(run_property(*find_property(id), *healthy, *reference, o).verdict, Verdict::kPass) << id;
}

}  // namespace
}  // namespace pacts::conformance
