// A campaign's result (fuzz/README.md, "What --out holds"): summary.json and junit.xml, written
// at the end, on SIGINT/SIGTERM and at checkpoints; `pacts-fuzz merge` adds shard summaries up.
#pragma once

#include "case_stream.h"
#include "coverage.h"

#include <pacts/spec/status.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pacts::fuzz {

inline constexpr int kSummaryVersion = 1;

struct PropertyCounts {
  std::string id, name, test_name;
  int64_t cases = 0, passed = 0, not_supported = 0, failed = 0, quality_warnings = 0;
  int64_t not_applicable = 0;  // cases that could not exercise the property (spec/properties.md §1)
  int64_t skipped = 0;     // indices not run: a costly property's turn was taken or its cap hit
  int64_t discarded = 0;   // indices whose case the generator could not produce (GenerationFailure)
  double worst_ratio = 0;  // worst error/bound ratio over every case checked (0: bitwise only)
  double seconds = 0;      // worker time spent on its cases, shrinking included
  std::string not_supported_reason;  // the first NotSupported case's reason (the backend's own)
  std::string not_applicable_reason;  // the first NotApplicable case's reason
};

// One distinct minimal failure. `signature` identifies it: property, backend and the case's
// structure and overrides (the data seed excluded: fuzz/README.md, "Deduplication").
struct FailureRecord {
  std::string signature, property, backend, device, verdict, detail;
  std::string case_file;       // relative to the directory of the summary
  uint64_t campaign_seed = 0;  // with shard and index: regenerates the case before shrinking
  Shard shard;
  int64_t index = 0;
  int32_t size = 0;
  int32_t shrink_steps = 0, shrink_tries = 0;
  bool shrink_bounded = false;
  std::string original, minimal;  // describe() of the case as generated and as shrunk
  int64_t occurrences = 1;         // failing cases that shrank to this signature
  // false: found by `merge` as a case file that no summary names (a shard killed before its
  // summary, a retried shard's older files): its verdict is unknown until it is replayed, and
  // the counts of the properties do not include it. Written as "summarised": false.
  bool summarised = true;
};

struct CampaignRecord {
  std::string suite_version;          // the pacts-fuzz that ran it ("" in summaries before it was kept)
  uint64_t seed = 0;
  Shard shard;
  std::string backend;                // as requested ("auto" resolved)
  std::vector<std::string> workers;   // "<name> on <device>", one per worker
  double seconds_budget = 0;          // 0: none
  int64_t cases_budget = 0;           // 0: none
  std::string started_utc;
  double elapsed_s = 0;
  int64_t cases = 0;
  bool interrupted = false;
  std::string stop_reason;            // "seconds", "cases", "SIGINT", "SIGTERM", "first failure"
  // Worker time by phase, summed over workers (what bounds the throughput).
  double generate_s = 0, check_s = 0, backend_s = 0, shrink_s = 0;
};

struct Summary {
  std::vector<CampaignRecord> campaigns;  // one; several after merge
  std::vector<PropertyCounts> properties;
  std::vector<FailureRecord> failures;
  Coverage coverage;                      // cases the backend ran (NotSupported excluded)
  bool complete = true;                   // false for a checkpoint written mid-campaign
  // What `merge` could not add up, one line per shard ("incomplete" in summary.json).
  std::vector<std::string> incomplete;

  int64_t cases() const;
  int64_t failed() const;   // Fail verdicts (QualityWarnings are not failures)
  int64_t unsummarised() const;  // failure records found as case files only (summarised false)
  nlohmann::json to_json() const;
  std::string junit_xml() const;
};

// InvalidArgument naming the key path and the value.
spec::Result<Summary> summary_from_json(const nlohmann::json& doc);

// Adds `part` into `into`: counts, worst ratios, coverage and campaigns add up; failures with one
// signature become one record whose occurrences add up.
void merge_into(Summary& into, const Summary& part);

// Writes summary.json and junit.xml into `dir` atomically (temporary file, then rename).
spec::Status write_summary(const std::string& dir, const Summary& summary);

}  // namespace pacts::fuzz
