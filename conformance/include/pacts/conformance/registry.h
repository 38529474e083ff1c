// The backend registry: the names `--backend` accepts and what makes each one. The framework links
// no backend: each backend library (backends/) registers its name and factory when a program
// calls its registration (pacts::backends::register_all(), made once at the top of main()), and
// make_backend() looks names up here. A program that registers nothing knows only the
// "<backend>+<fault>" composition, over nothing.
#pragma once

#include <pacts/conformance/backend.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pacts::conformance {

// How a registered name is matched.
enum class NameKind {
  kExact,    // the name itself: "host", "reference"
  kDevices,  // one backend per device: "hip" (device 0) and "hip:N" (device N, 1 to 4 digits)
  kPrefix,   // the name followed by an argument: "lib:PATH" (no '+', which composes a fault)
};

struct BackendFactory {
  std::string name;  // "host", "hip", "lib:"
  NameKind kind = NameKind::kExact;
  // Listed by backend_names() (what a usage message offers); a hidden name is accepted all the
  // same ("reference-requant").
  bool listed = true;
  // Makes one instance, or nullptr with the reason on stderr. The argument is "" (kExact), the
  // device ordinal in decimal (kDevices: "0" for "hip", "3" for "hip:3"), or what follows the
  // prefix (kPrefix).
  std::function<std::unique_ptr<Backend>(const std::string& argument)> make;
  // kDevices: how many devices this machine has (0 when none can be opened).
  std::function<int32_t()> device_count;
};

// Adds a factory; one registered under the same name before is replaced, so registering twice
// changes nothing. Registration order is the order of backend_names().
void register_backend(BackendFactory factory);

// The factory registered under `name` (the registered name: "hip", not "hip:1"), or nullptr.
const BackendFactory* find_backend(std::string_view name);

// The listed names, in registration order.
std::vector<std::string> backend_names();

// The devices of a kDevices backend: {"hip", "hip:1", ...}, one per device its device_count()
// reports; empty when `name` is not such a backend or the machine has none.
std::vector<std::string> device_instances(std::string_view name);

// A backend by name: a registered name (as NameKind says), or "<backend>+<fault>", a registered
// backend with a planted fault of the self-test (fault_backend.h). nullptr for anything else, or
// when the factory cannot make one (it says why on stderr).
std::unique_ptr<Backend> make_backend(const std::string& name);

}  // namespace pacts::conformance
