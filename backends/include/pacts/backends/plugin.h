// External backends: a shared library implementing the C ABI of pacts/backend_abi.h, loaded with
// dlopen and presented as a conformance Backend, so a vendor qualifies its own kernel without
// recompiling pacts (`pacts-qualify --backend-lib PATH`, `pacts-conformance --backend-lib PATH`).
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/spec/status.h>

#include <cstdint>
#include <memory>
#include <optional>
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

// ---- Timed calls (backend ABI version 3): pacts-bench times a plugin's decode call alone ----

// What a plugin's timed calls take: buffers in device memory (a GPU plugin: pacts-bench's device
// allocations and stream) or host memory (a CPU plugin, stream NULL), and whether a graph may
// capture enqueue().
struct TimedCalls {
  bool device_memory = false;
  bool graph_capturable = false;
};
// nullopt when `backend` is not a plugin or declares no timed calls.
std::optional<TimedCalls> plugin_timed_calls(const conformance::Backend& backend);

// One prepared decode call of a plugin's instance (backend_abi.h: prepare, enqueue, release). It
// is released on destruction, or earlier when the backend runs anything else on that instance
// (then enqueue() answers Internal). It must not outlive the backend.
class PreparedCall {
 public:
  PreparedCall(void* owner, uint64_t generation, conformance::PlanUsed plan)
      : owner_(owner), generation_(generation), plan_(std::move(plan)) {}
  PreparedCall(PreparedCall&& o) noexcept;
  PreparedCall& operator=(PreparedCall&& o) noexcept;
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;
  ~PreparedCall();

  // The decode call on `stream` (a cudaStream_t / hipStream_t, or nullptr for host memory).
  spec::Status enqueue(void* stream);
  // The device error bits of the last completed call (spec/contract.md §4).
  uint32_t device_error();
  // The plan and variant that prepare() reported.
  const conformance::PlanUsed& plan() const { return plan_; }

 private:
  void* owner_;
  uint64_t generation_;
  conformance::PlanUsed plan_;
};

// prepare() of the plugin behind `backend` with these buffers (in the memory the plugin declares)
// and host copies of the block table and the context lengths. Its refusals as run() gives them
// (NotSupported, DeviceError for a precondition the plugin found, ...); NotSupported when the
// backend is no plugin or has no timed calls.
spec::Result<PreparedCall> prepare_timed_call(conformance::Backend& backend,
                                              const pacts_problem& problem,
                                              const pacts_buffers& buffers,
                                              const int32_t* host_block_table,
                                              const int32_t* host_context_lens,
                                              const conformance::PlanHint& hint = {});

// Registers the prefix "lib:" in the conformance registry: make_backend("lib:PATH") loads PATH
// (a refusal is printed on stderr and makes no backend).
void register_plugin_backend();

}  // namespace pacts::backends
