// Runs a property with RapidCheck's generation and shrinking. RapidCheck's own check loop is
// used through its detail API (as its gtest integration does) so that the seed, the case budget
// and max_size are set per call rather than through RC_PARAMS, which a CI must never depend on.
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/random_case.h>
#include <pacts/conformance/runner.h>

#include "case_io.h"

#include <rapidcheck.h>
#include <rapidcheck/detail/Configuration.h>
#include <rapidcheck/detail/TestListenerAdapter.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <sstream>

namespace pacts::conformance {
namespace {

// What the testable sees across RapidCheck's calls: the main loop, then (after the first
// failure) the shrink steps. Statistics count the main loop only; the last failing call of the
// shrink phase is the minimal case.
struct Tracker {
  bool shrinking = false;
  std::optional<CaseSpec> last_failure;
  Verdict last_verdict = Verdict::kFail;
  std::string last_detail;
  bool interrupted = false;
  // The first failure had no low pages (CaseShape::low_pages), or failed the same way without
  // them: every shrink candidate is then run without them. Smaller candidates become eligible for
  // them (their pages fit kHighIdPoolBytes) and would otherwise build and run pools of up to
  // 128 MiB each, hundreds of times. The minimal case is the one that ran.
  bool without_low_pages = false;
};

std::string sanitize(const std::string& s) {
  std::string out;
  for (char ch : s) out += (std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
  return out;
}

// A property none of whose cases passed or failed: NotSupported where the backend refused a case
// (its reason is the row's), else NotApplicable where no case could exercise the property; never
// Pass (spec/properties.md §1).
Verdict without_a_pass(const PropertyStats& s) {
  if (s.passed > 0) return Verdict::kPass;
  if (s.not_supported > 0) return Verdict::kNotSupported;
  if (s.not_applicable > 0) return Verdict::kNotApplicable;
  return Verdict::kPass;
}

}  // namespace

Outcome check_case(const Property& property, Backend& backend, Backend& reference,
                   const CaseSpec& spec) {
  // The descriptor the case's data will be built for (its page counts do not matter here: the
  // capabilities are about formats, sizes, layouts and options).
  if (spec::Status s = check_capabilities(backend.capabilities(), shape_problem(spec.shape, 1, 1)); !s)
    return Outcome::not_supported(s.message());
  if (property.supports)
    if (std::optional<std::string> why = property.supports(backend)) return Outcome::not_supported(*why);
  PropertyContext ctx{backend, reference};
  return property.check(ctx, spec);
}

PropertyStats run_property(const Property& property, Backend& backend, Backend& reference,
                           const RunOptions& options) {
  PropertyStats stats;
  stats.id = property.id;
  stats.name = property.name;
  stats.backend = backend.name();
  Tracker tracker;
  const auto t0 = std::chrono::steady_clock::now();

  const GenLimits limits = restrict_to_capabilities(property.limits, backend.capabilities());
  const auto testable = [&]() {
    if (options.stop != nullptr && options.stop->load() != 0) {
      // Stopped: shrink candidates pass (the smallest failure so far stays); otherwise the run
      // ends here, before anything is generated, so RapidCheck has nothing to shrink.
      if (tracker.shrinking) return;
      tracker.interrupted = true;
      RC_FAIL("interrupted");
    }
    CaseSpec spec = *gen_case(limits);
    // After a timeout, shrinking would wait the timeout again on every smaller case that hangs:
    // the case that timed out is kept as it is (every shrink candidate is accepted as passing).
    if (tracker.shrinking && tracker.last_verdict == Verdict::kTimeout) return;
    if (tracker.shrinking && tracker.without_low_pages) spec.shape.low_pages = 0;
    const auto evaluate = [&](const CaseSpec& c) {
      try {
        return check_case(property, backend, reference, c);
      } catch (const std::exception& e) {
        // A check (or a backend) that throws fails the case, which then shrinks like any other.
        return Outcome::fail(std::string("threw: ") + e.what());
      }
    };
    Outcome o = evaluate(spec);
    if (!tracker.shrinking) {
      ++stats.cases;
      if (o.verdict == Verdict::kNotSupported) {
        ++stats.not_supported;
        if (stats.not_supported_reason.empty()) stats.not_supported_reason = o.detail;
      }
      if (o.verdict == Verdict::kNotApplicable) {
        ++stats.not_applicable;
        if (stats.not_applicable_reason.empty()) stats.not_applicable_reason = o.detail;
      }
      if (o.verdict == Verdict::kPass) ++stats.passed;
      if (o.verdict != Verdict::kNotSupported && o.verdict != Verdict::kNotApplicable) {
        ++stats.ran_per_kv_format[io::name_of(io::kFormatNames, spec.shape.kv_format)];
        ++stats.ran_per_layout[std::string(io::name_of(io::kPoolLayoutNames, spec.shape.k_layout)) + "/" +
                               io::name_of(io::kPoolLayoutNames, spec.shape.v_layout)];
      }
      if (!o.failed()) stats.worst_ratio = std::max(stats.worst_ratio, o.worst_ratio);
    }
    // A QualityWarning outcome shrinks like a failure (the minimal case is worth a case file)
    // but does not fail the run; a Fail outcome fails it whatever the property's level.
    if (o.failed() || o.verdict == Verdict::kQualityWarning) {
      if (!tracker.shrinking) stats.worst_ratio = std::max(stats.worst_ratio, o.worst_ratio);
      if (!tracker.shrinking && spec.shape.low_pages == 0) {
        tracker.without_low_pages = true;
      } else if (!tracker.shrinking && o.verdict != Verdict::kTimeout) {
        CaseSpec lean = spec;
        lean.shape.low_pages = 0;
        if (Outcome without = evaluate(lean); without.verdict == o.verdict) {
          tracker.without_low_pages = true;
          spec = std::move(lean);
          o = std::move(without);
        }
      }
      tracker.shrinking = true;
      tracker.last_failure = spec;
      tracker.last_detail = o.detail;
      tracker.last_verdict = o.verdict;
      RC_FAIL(o.detail);
    }
  };

  // RapidCheck reads its configuration once, at its first use, and prints it to std::cerr
  // ("Using configuration: seed=..."), which landed in the middle of the programs' tables. Its
  // seed is unused (ours is passed below): it is loaded here once with std::cerr silenced.
  static const bool configured = [&] {
    std::ostringstream sink;
    std::streambuf* const saved = std::cerr.rdbuf(sink.rdbuf());
    (void)rc::detail::configuration();
    std::cerr.rdbuf(saved);
    return true;
  }();
  (void)configured;
  rc::detail::TestParams params;
  params.seed = options.seed;
  params.maxSuccess = property.max_cases > 0 ? std::min(options.cases, property.max_cases)
                                             : options.cases;
  params.maxSize = 100;  // Debian's RapidCheck misbehaves above 100 (formats note §4)
  params.disableShrinking = !options.shrink;
  rc::detail::TestMetadata metadata;
  metadata.id = property.test_name();
  metadata.description = property.id;
  // A listener of our own: RapidCheck's global one would print an RC_PARAMS reproduce string at
  // exit, which is not how pacts replays a case (case files are).
  rc::detail::TestListenerAdapter listener;
  const rc::detail::TestResult result =
      rc::detail::checkProperty(rc::detail::toProperty(testable), metadata, params, listener);

  if (tracker.last_failure) {
    stats.failed = 1;
    stats.verdict = tracker.last_verdict;  // Fail, Crash, Timeout or QualityWarning (property.h)
    stats.failure = tracker.last_detail;
    stats.minimal = tracker.last_failure;
    if (!options.case_dir.empty()) {
      CaseFile file;
      file.property = property.id;
      file.backend = backend.name();
      file.device = backend.device();
      file.run_seed = options.seed;
      file.detail = tracker.last_detail;
      file.spec = *tracker.last_failure;
      const std::string path = (std::filesystem::path(options.case_dir) /
                                fitted_file_name(sanitize(property.id) + "-" + sanitize(backend.name()), ".json"))
                                   .string();
      if (write_case_file(path, file).is_ok()) {
        stats.case_file = path;
        stats.replay = "pacts case run " + path + " --backend " + backend.name();
      }
    }
  } else if (tracker.interrupted) {
    stats.interrupted = true;
    stats.verdict = without_a_pass(stats);
  } else if (rc::detail::FailureResult f; result.match(f)) {
    // A failure the check did not report itself (an exception escaped it).
    stats.failed = 1;
    stats.verdict = Verdict::kFail;
    stats.failure = "the check threw: " + f.description;
  } else if (rc::detail::Error e; result.match(e)) {
    stats.verdict = Verdict::kFail;
    stats.failure = "RapidCheck error: " + e.description;
  } else if (result.is<rc::detail::GaveUpResult>()) {
    stats.verdict = Verdict::kFail;
    stats.failure = "RapidCheck gave up: too many discarded cases";
  } else {
    stats.verdict = without_a_pass(stats);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace pacts::conformance
