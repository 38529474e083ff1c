// External backends: a shared library implementing the C ABI of pacts/backend_abi.h, loaded with
// dlopen and presented as a conformance Backend, so a vendor qualifies its own kernel without
// recompiling pacts (`pacts-qualify --backend-lib PATH`, `pacts-conformance --backend-lib PATH`).
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/spec/status.h>

#include <memory>
#include <string>

namespace pacts::backends {

// What a plugin says about itself beyond the Backend interface (for the qualification report).
struct PluginInfo {
  std::string path;      // the library, as an absolute path
  std::string declared;  // the name the plugin declares ("acme-paged-decode")
  std::string driver, runtime, version;  // "" where the plugin cannot say
  uint32_t abi_version = 0;
};

// The prefix that makes a backend name a library path: make_backend("lib:/x/libp.so").
inline constexpr const char* kPluginPrefix = "lib:";

// Loads the library, checks its descriptor and makes one instance. Refusals (InvalidArgument
// unless the plugin's create() says otherwise) name the path and, as applicable, the symbol, the
// field and its value, and what is accepted: a file that is missing or not a loadable library,
// a missing entry symbol, an ABI version this pacts does not implement, a capability or numerics
// value outside its range, a missing function.
// The backend's name() is kPluginPrefix + the absolute path: what --backend accepts, so a saved
// case's replay command ("pacts case run FILE --backend lib:/x/libp.so") works as printed.
spec::Result<std::unique_ptr<conformance::Backend>> load_plugin_backend(const std::string& path);

// The plugin's own account of itself, or nullptr when `backend` is not a plugin backend.
const PluginInfo* plugin_info(const conformance::Backend& backend);

// Registers the prefix "lib:" in the conformance registry: make_backend("lib:PATH") loads PATH
// (a refusal is printed on stderr and makes no backend).
void register_plugin_backend();

}  // namespace pacts::backends
