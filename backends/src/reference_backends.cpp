// The reference as backends by name. The reference itself is the framework's
// (conformance::make_reference_backend: the judge of every property); here it gets its names.
#include <pacts/backends/register.h>
#include <pacts/conformance/registry.h>

#include <string>
#include <utility>

namespace pacts::backends {

void register_reference_backends() {
  conformance::BackendFactory reference;
  reference.name = "reference";
  reference.make = [](const std::string&) { return conformance::make_reference_backend(); };
  conformance::register_backend(std::move(reference));
  // What a requantising kernel must produce up to its own rounding: accepted, not listed.
  conformance::BackendFactory requant;
  requant.name = "reference-requant";
  requant.listed = false;
  requant.make = [](const std::string&) {
    return conformance::make_reference_backend(conformance::fp8_kv_requant_rule());
  };
  conformance::register_backend(std::move(requant));
}

}  // namespace pacts::backends
