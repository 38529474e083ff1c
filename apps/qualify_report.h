// The qualification report of pacts-qualify: what ran on which backend, and the verdicts, as
// Markdown for people, JSON and JUnit XML for machines (README "main job").
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/provenance.h>
#include <pacts/conformance/self_checks.h>  // CheckResult
#include <pacts/conformance/verdict.h>
#include <pacts/spec/status.h>
#include <pacts/spec/tolerance.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pacts::conformance::report {

// Case counts of one source (mustpass or generated) per result state (spec/properties.md §1).
struct Counts {
  int64_t pass = 0, fail = 0, not_supported = 0, quality_warning = 0, not_applicable = 0;
  int64_t total() const { return pass + fail + not_supported + quality_warning + not_applicable; }
};

// One property on one backend.
struct PropertyRow {
  std::string id, name;
  bool mandatory = true;           // the property's level (a Fail verdict is mandatory anyway)
  Verdict verdict = Verdict::kPass;
  Counts mustpass, generated;
  double worst_ratio = 0;          // worst error/bound ratio seen (0 for bitwise checks)
  double seconds = 0;
  std::vector<std::string> failing_case_files;  // mustpass files, then the shrunk generated case
  std::string detail;              // the first failure or warning
  std::string not_supported_reason;  // why the backend refused the property's cases (NotSupported)
  std::string not_applicable_reason;  // why a case could not exercise the property (NotApplicable)
  std::string replay;              // the command that replays the generated failure
};

struct BackendSection {
  std::string name, device, driver, runtime;
  std::string device_uuid;  // a GPU's, where the backend reports it ("" otherwise)
  std::string plugin_path, plugin_name, plugin_version;  // external backends only
  std::string plugin_isolation;  // where an external backend ran: in process, or in a child
  Capabilities capabilities;
  spec::NumericsProfile profile;
  std::vector<PropertyRow> rows;
  std::string bench;               // the bench sets' tables (Markdown), or why there are none
  std::vector<std::string> bench_json;  // bench/'s JSON report of each set that ran
  // The plot of each set that ran (bench/'s SVG): written as plots/<file> beside the report and
  // shown in report.md's bench section.
  struct Plot {
    std::string file, svg;
  };
  std::vector<Plot> bench_plots;
};

struct Report {
  std::string suite_version, compiler, build_type;
  std::string started_utc;  // ISO 8601 UTC, "2026-01-02T03:04:05Z"
  std::string hostname;     // the machine the run ran on
  double seconds = 0;       // the run's wall time
  uint64_t seed = 0;
  int32_t cases_per_property = 0;
  std::string mustpass_dir;
  int mustpass_version = 0;
  int64_t mustpass_files = 0;
  std::vector<CheckResult> self_checks;   // the reference's self-checks
  std::vector<BackendSection> backends;
  std::vector<std::string> compile_only;  // e.g. "gfx942": compiled for, nothing ran
  std::vector<std::string> notes;         // backends that could not be opened, and why
  // The signal that stopped the run ("SIGTERM"), "" for a complete run. An interrupted run is
  // never qualified: the property in progress was abandoned and those after it did not run.
  std::string interrupted;
  // A qualification run (docs/usage.md "A qualification run"): every property, the whole
  // committed mustpass set, at least kQualificationCases generated cases per property, a clean
  // build that is not a Debug one. `not_qualification` says what this run lacked (empty: it was
  // one). Only a complete qualification run without a Mandatory failure is "qualified".
  std::vector<std::string> not_qualification;
  // Provenance: the command line as given, the SHA-256 of the executable and of every pacts
  // library and plugin it ran (in process or in pacts-child), of the mustpass set, and the machine.
  std::vector<std::string> command_line;
  std::vector<FileHash> files;
  std::string mustpass_sha256;
  MachineInfo machine;
};

// Generated cases per property a qualification run needs at least (pacts-qualify's default).
inline constexpr int32_t kQualificationCases = 40;

// What keeps a run from being a qualification run: the reasons, empty when it is one.
struct RunScope {
  bool every_property = true, default_mustpass = true;
  int32_t cases = kQualificationCases;
  std::string suite_version, build_type;
};
std::vector<std::string> not_a_qualification_run(const RunScope& scope);

// Qualified: complete, a qualification run, and no Mandatory failure.
bool qualified(const Report& report);

// Fail > QualityWarning > Pass > NotSupported > NotApplicable: the verdict of a row from its case
// counts (a row that executed nothing is NotSupported, spec/properties.md §1).
Verdict combine(const Counts& mustpass, const Counts& generated);

// True when anything Mandatory failed: a property row or a self-check.
bool mandatory_failure(const Report& report);

nlohmann::json to_json(const Report& report);
std::string to_markdown(const Report& report);
// JUnit XML: one testsuite per backend (and one for the reference's self-checks), each with
// `time`, `timestamp` and `hostname`; one testcase per property, classname
// `pacts.qualify.<backend>` (junit_class_part of the backend's declared name, never a path) and
// name the property ID.
std::string to_junit(const Report& report);

// The name a backend is known by in JUnit and tables: an external backend's declared name
// (its plugin or child's own), else the backend's name.
std::string declared_name(const BackendSection& backend);

// Writes report.md, report.json, report.junit.xml, the bench plots (plots/*.svg) and report.sha256
// (their SHA-256 in sha256sum's format) into `dir` (created if needed), all or none
// (conformance/out_dir.h): a failed write leaves no file cut short.
spec::Status write_report(const Report& report, const std::string& dir);

}  // namespace pacts::conformance::report
