// Runs properties with RapidCheck: generation, shrinking to a minimal failing case, statistics.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/property.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace pacts::conformance {

struct RunOptions {
  uint64_t seed = 20261129;   // fixed in CI, printed; campaigns pass fresh ones
  int32_t cases = 100;        // generated cases per property (RapidCheck max_success)
  std::string case_dir;       // where minimal failing cases are saved ("" = do not save)
  bool shrink = true;
  // When set and non-zero (a program stores the number of a signal it caught), no further case
  // starts: the property ends early with PropertyStats::interrupted (a failure being shrunk keeps
  // the smallest case found so far).
  const std::atomic<int>* stop = nullptr;
};

// Per property and backend: what ran and what was found (spec/properties.md §1 result states).
struct PropertyStats {
  std::string id, name, backend;
  Verdict verdict = Verdict::kPass;   // Fail only for Mandatory properties
  int64_t cases = 0, passed = 0, not_supported = 0, failed = 0, not_applicable = 0;
  double worst_ratio = 0;
  std::string failure;                // the minimal case's outcome detail
  std::string not_supported_reason;   // the first NotSupported case's reason (Outcome::detail)
  std::string not_applicable_reason;  // the first NotApplicable case's reason
  std::optional<CaseSpec> minimal;    // the shrunk failing case
  std::string case_file;              // where it was saved
  std::string replay;                 // the command that replays it
  double seconds = 0;
  bool interrupted = false;           // RunOptions::stop ended it before its budget of cases
  // The generated cases the backend ran (NotSupported and NotApplicable ones left out), per KV
  // format ("e4m3fn")
  // and per K/V pool layout pair ("x_packed_k/dim_major_v"): what a release note reports per
  // format and layout.
  std::map<std::string, int64_t> ran_per_kv_format, ran_per_layout;
};

PropertyStats run_property(const Property& property, Backend& backend, Backend& reference,
                           const RunOptions& options);

// Checks one case (no generation): what `pacts case run/check`, the corpus replay and
// run_property use. First the supports step (spec/properties.md §1): the generated case's problem
// against the backend's declared capabilities, then Property::supports; a case outside them is
// NotSupported with the reason, and the property's body does not run.
Outcome check_case(const Property& property, Backend& backend, Backend& reference,
                   const CaseSpec& spec);

}  // namespace pacts::conformance
