// The reference's self-checks: what pacts-qualify runs on a machine where the reference is the
// only backend. Each check cites the spec it enforces and reports Pass / Fail with a reason.
#pragma once

#include <pacts/conformance/verdict.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pacts::conformance {

struct CheckResult {
  std::string id;        // spec ID or section, e.g. "PACTS-POISON-1"
  std::string name;
  std::string backend;
  Verdict verdict = Verdict::kPass;
  int64_t cases = 0;     // cases (or codes) checked
  int64_t not_applicable = 0;
  std::string detail;    // first failure: what, where, and how to reproduce
  double seconds = 0;
};

struct SelfCheckOptions {
  uint64_t seed = 20261129;  // fixed by default (CI); pacts-qualify --seed changes it
  int32_t cases = 60;        // random cases per randomized check
  // Called as each check starts (its ID and name) and ends (its result): a program's progress
  // lines, since the checks take seconds.
  std::function<void(const std::string& id, const std::string& name)> on_start;
  std::function<void(const CheckResult& result)> on_done;
};

std::vector<CheckResult> run_reference_self_checks(const SelfCheckOptions& options);

}  // namespace pacts::conformance
