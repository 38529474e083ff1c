// A conformance property (spec/properties.md): an ID, a level, a generator configuration and a
// check of one case against one backend. The catalogue lists every property in ID order.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/verdict.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pacts::conformance {

enum class Level { kMandatory, kQualityWarning };

// The result of checking one case. A check returns kQualityWarning for what its property makes
// a quality matter (e.g. NaN propagation, spec/contract.md §3) and kFail for what is mandatory,
// whatever the property's level: the runner keeps the check's verdict.
struct Outcome {
  Verdict verdict = Verdict::kPass;
  std::string detail;       // for a failure: what differed, where, the values and the bound
  double worst_ratio = 0;   // worst error/bound ratio of the case (0 for bitwise checks)

  static Outcome pass(double ratio = 0) { return {Verdict::kPass, {}, ratio}; }
  static Outcome fail(std::string why, double ratio = 0) { return {Verdict::kFail, std::move(why), ratio}; }
  static Outcome not_supported(std::string why) { return {Verdict::kNotSupported, std::move(why), 0}; }
  // The case cannot exercise the property (verdict.h): `why` says what it lacks.
  static Outcome not_applicable(std::string why) { return {Verdict::kNotApplicable, std::move(why), 0}; }
  bool failed() const { return is_failure(verdict); }
};

// What a check may use: the backend under test and the reference backend (which defines the
// answer and, through reference::decode, the inputs of the bound).
struct PropertyContext {
  Backend& backend;
  Backend& reference;
};

struct Property {
  std::string id;        // "PACTS-POISON-1"
  std::string name;      // "UnownedRowsDoNotLeak"
  Level level = Level::kMandatory;
  bool bitwise = false;
  GenLimits limits;      // what the generator may produce for this property
  // Most generated cases per run, whatever the run's budget (0: the budget). For properties
  // whose every case is costly (PACTS-DEV-2 moves gigabytes per case).
  int32_t max_cases = 0;
  std::function<Outcome(PropertyContext&, const CaseSpec&)> check;
  // What the property needs of a backend beyond the generated case's problem (a declared
  // capability such as determinism or plan replay): the reason it cannot run there, or nothing.
  // The runner's supports step (check_case) asks it, after checking the generated case's problem
  // against the backend's capabilities, before `check` runs; `check` itself checks only the
  // problems it derives from the case (an LSE turned on, a V scaled, a twin with empty rows).
  std::function<std::optional<std::string>(const Backend&)> supports;

  // "PACTS_POISON_1_UnownedRowsDoNotLeak": the test name (spec/properties.md §1).
  std::string test_name() const;
};

Property make_property(std::string id, std::string name, Level level, bool bitwise,
                       GenLimits limits,
                       std::function<Outcome(PropertyContext&, const CaseSpec&)> check);

// Every property, in ID order.
const std::vector<Property>& catalogue();
const Property* find_property(std::string_view id);

// The families, one file each under conformance/properties/.
std::vector<Property> acc_properties();
std::vector<Property> poison_properties();
std::vector<Property> meta_properties();
std::vector<Property> edge_properties();
std::vector<Property> refuse_properties();
std::vector<Property> dev_properties();

}  // namespace pacts::conformance
