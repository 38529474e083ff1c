// The result states of the catalogue (spec/properties.md §1): what a property, a case or a
// self-check reports. Pass: every case ran and held. Fail: a Mandatory criterion was violated.
// NotSupported: the case needs a capability the backend does not declare (never a failure; a
// property that ran no case reports it too, never Pass). QualityWarning: only a QualityWarning
// criterion was violated (never blocks conformance). Crash and Timeout: a backend that is a
// process of its own (spec/process.md) died or did not answer within its timeout on a case;
// failures like Fail, named for what happened. NotApplicable: the generated case cannot exercise
// its property whatever the backend (an "Inf" fill of a format without Inf, a batch with no key
// to carry a NaN): neither a Pass nor a refusal of the backend's, counted and listed apart.
#pragma once

namespace pacts::conformance {

enum class Verdict { kPass, kFail, kNotSupported, kQualityWarning, kCrash, kTimeout, kNotApplicable };
inline constexpr int kVerdicts = 7;

// "Pass", "Fail", "NotSupported", "QualityWarning", "Crash", "Timeout", "NotApplicable": the
// names the reports print.
const char* verdict_name(Verdict v);

// Fail, Crash or Timeout: the verdicts that block conformance.
constexpr bool is_failure(Verdict v) {
  return v == Verdict::kFail || v == Verdict::kCrash || v == Verdict::kTimeout;
}

}  // namespace pacts::conformance
