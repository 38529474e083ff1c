// The result states of the catalogue (spec/properties.md §1): what a property, a case or a
// self-check reports. Pass: every case ran and held. Fail: a Mandatory criterion was violated.
// NotSupported: the case needs a capability the backend does not declare (never a failure; a
// property that ran no case reports it too, never Pass). QualityWarning: only a QualityWarning
// criterion was violated (never blocks conformance).
#pragma once

namespace pacts::conformance {

enum class Verdict { kPass, kFail, kNotSupported, kQualityWarning };

// "Pass", "Fail", "NotSupported", "QualityWarning": the names the reports print.
const char* verdict_name(Verdict v);

}  // namespace pacts::conformance
