// The plugin loader: a library implementing pacts/backend_abi.h as a conformance Backend.
//
// Everything the plugin declares is checked when it is loaded, before any problem reaches it, so
// that a wrong declaration is a load refusal naming the field and never a confusing verdict later:
// a capability the spec does not define would turn Fail into NotSupported (or the reverse), and a
// numerics value out of range would make the tolerance bound meaningless (spec/tolerance.md §2).
#include "descriptor_checks.h"

#include <pacts/backend_abi.h>
#include <pacts/backends/plugin.h>
#include <pacts/conformance/registry.h>
#include <pacts/spec/formats.h>

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pacts::backends {
namespace {

using conformance::Backend;
using conformance::Capabilities;
using conformance::Job;
using conformance::PlanHint;
using conformance::RunResult;

using spec::Status;

using namespace detail;  // descriptor_checks.h

// The library handle, closed when the last user (the backend, after its instance) lets go.
using Library = std::shared_ptr<void>;

pacts_backend_plan_hint to_c(const PlanHint& hint) {
  switch (hint.kind) {
    case PlanHint::Kind::kPartitionSize: return {PACTS_HINT_PARTITION_SIZE, hint.value};
    case PlanHint::Kind::kPartitions: return {PACTS_HINT_PARTITIONS, hint.value};
    case PlanHint::Kind::kBatchInvariant: return {PACTS_HINT_BATCH_INVARIANT, hint.value};
    case PlanHint::Kind::kAutomatic: break;
  }
  return {PACTS_HINT_AUTOMATIC, 0};
}

class PluginBackend final : public Backend {
 public:
  PluginBackend(Library library, const pacts_backend_v1* api, pacts_backend_instance* instance,
                PluginInfo info, Capabilities caps, spec::NumericsProfile profile)
      : library_(std::move(library)), api_(api), instance_(instance), info_(std::move(info)),
        caps_(std::move(caps)), profile_(std::move(profile)), device_(api->device) {}
  ~PluginBackend() override {
    release_prepared();
    api_->destroy(instance_);
  }
  PluginBackend(const PluginBackend&) = delete;
  PluginBackend& operator=(const PluginBackend&) = delete;

  std::string name() const override { return kPluginPrefix + info_.path; }
  std::string device() const override { return device_; }
  const Capabilities& capabilities() const override { return caps_; }
  const spec::NumericsProfile& profile() const override { return profile_; }
  const PluginInfo& info() const { return info_; }
  const pacts_backend_v3_extension* timed() const { return timed_; }
  void set_timed(const pacts_backend_v3_extension* timed) { timed_ = timed; }

  // The timed calls (plugin.h prepare_timed_call): one prepared call at a time per instance.
  spec::Result<PreparedCall> prepare(const pacts_problem& problem, const pacts_buffers& buffers,
                                     const int32_t* host_table, const int32_t* host_lens,
                                     const PlanHint& hint) {
    if (timed_ == nullptr || timed_->timed_calls != 1)
      return spec::not_supported("backend library " + info_.path +
                                 ": no timed calls (backend ABI version 3, timed_calls 1)");
    release_prepared();
    const pacts_backend_plan_hint c_hint = to_c(hint);
    pacts_backend_result result{};
    pacts_backend_prepared* handle = nullptr;
    timed_->prepare(instance_, &problem, &buffers, host_table, host_lens, &c_hint, &handle,
                    &result);
    RunResult r = from_c(result, "prepare");
    if (r.status && r.device_error != 0)
      r.status = spec::Status(spec::Code::kDeviceError,
                              "backend library " + info_.path + ": prepare reported device error "
                              "bits " + std::to_string(r.device_error));
    if (!r.status) {
      if (handle != nullptr) timed_->release(handle);  // the plugin's bug; nothing leaks
      return r.status;
    }
    if (handle == nullptr)
      return spec::Status(spec::Code::kInternal, "backend library " + info_.path +
                                                     ": prepare returned PACTS_OK and no call");
    prepared_ = handle;
    ++generation_;
    return PreparedCall(this, generation_, r.plan);
  }
  spec::Status enqueue(uint64_t generation, void* stream) {
    if (generation != generation_ || prepared_ == nullptr)
      return spec::Status(spec::Code::kInternal, "a prepared call used after its release");
    char message[PACTS_BACKEND_MESSAGE_BYTES] = {};
    const pacts_status_code code = timed_->enqueue(prepared_, stream, message, sizeof message);
    if (code == PACTS_OK) return spec::Status::ok();
    const spec::Code c = code >= PACTS_INVALID_ARGUMENT && code <= PACTS_INTERNAL
                             ? static_cast<spec::Code>(code)
                             : spec::Code::kInternal;
    return spec::Status(c, "backend library " + info_.path + ": enqueue: " +
                               bounded(message, sizeof message));
  }
  uint32_t device_error(uint64_t generation) {
    return generation == generation_ && prepared_ != nullptr ? timed_->device_error(prepared_) : 0;
  }
  void release(uint64_t generation) {
    if (generation == generation_) release_prepared();
  }

  RunResult run(const pacts_problem& problem, const pacts_buffers& buffers,
                const PlanHint& hint) override {
    release_prepared();  // backend_abi.h: no prepared call outlives a run on its instance
    const pacts_backend_plan_hint c_hint = to_c(hint);
    pacts_backend_result result{};
    api_->run(instance_, &problem, &buffers, &c_hint, &result);
    return from_c(result, "run");
  }

  RunResult run_replayed(const pacts_problem& problem, const pacts_buffers& buffers,
                         std::span<const int32_t> replayed_context_lens,
                         const PlanHint& hint) override {
    if (api_->run_replayed == nullptr)  // plan_replay not declared: NotSupported
      return Backend::run_replayed(problem, buffers, replayed_context_lens, hint);
    release_prepared();
    const pacts_backend_plan_hint c_hint = to_c(hint);
    pacts_backend_result result{};
    api_->run_replayed(instance_, &problem, &buffers, replayed_context_lens.data(),
                       static_cast<int32_t>(replayed_context_lens.size()), &c_hint, &result);
    return from_c(result, "run_replayed");
  }

 private:
  // A status outside the enum is the plugin's bug: Internal, naming the value.
  RunResult from_c(const pacts_backend_result& r, const char* call) const {
    RunResult out;
    out.device_error = r.device_error;
    out.plan.partition_size = r.partition_size;
    out.plan.max_partitions = r.max_partitions;
    out.plan.variant = bounded(r.variant, sizeof r.variant);
    const std::string message = bounded(r.message, sizeof r.message);
    switch (r.status) {
      case PACTS_OK: break;
      case PACTS_INVALID_ARGUMENT:
      case PACTS_NOT_SUPPORTED:
      case PACTS_OUT_OF_RANGE:
      case PACTS_DEVICE_ERROR:
      case PACTS_INTERNAL:
        out.status = Status(static_cast<spec::Code>(r.status), message);
        break;
      default:
        out.status = Status(spec::Code::kInternal,
                            "backend library " + info_.path + ": " + call + " returned status " +
                                std::to_string(static_cast<int64_t>(r.status)) +
                                ": accepted: a pacts_status_code (0 to 5)");
    }
    return out;
  }

  void release_prepared() {
    if (prepared_ != nullptr) timed_->release(prepared_);
    prepared_ = nullptr;
  }

  Library library_;
  const pacts_backend_v1* api_;
  const pacts_backend_v3_extension* timed_ = nullptr;  // version 3 plugins
  pacts_backend_prepared* prepared_ = nullptr;
  uint64_t generation_ = 0;
  pacts_backend_instance* instance_;
  PluginInfo info_;
  Capabilities caps_;
  spec::NumericsProfile profile_;
  std::string device_;
};

}  // namespace

spec::Result<std::unique_ptr<Backend>> load_plugin_backend(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string absolute = fs::absolute(fs::path(path), ec).lexically_normal().string();
  const Checker c("backend library " + (ec ? path : absolute));
  if (!fs::is_regular_file(absolute, ec)) return c.refuse("no such file");

  dlerror();
  void* handle = dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return c.refuse(std::string("not a loadable library: ") + (why ? why : "dlopen failed"));
  }
  Library library(handle, [](void* h) { dlclose(h); });

  dlerror();
  void* symbol = dlsym(handle, PACTS_BACKEND_ENTRY_SYMBOL);
  if (symbol == nullptr)
    return c.refuse(std::string("symbol ") + PACTS_BACKEND_ENTRY_SYMBOL +
                    " not found: a pacts backend exports it (pacts/backend_abi.h)");
  pacts_backend_entry_fn entry;
  static_assert(sizeof entry == sizeof symbol);
  std::memcpy(&entry, &symbol, sizeof entry);  // POSIX: data and function pointers share a size
  const pacts_backend_v1* api = entry();
  if (api == nullptr)
    return c.refuse(std::string(PACTS_BACKEND_ENTRY_SYMBOL) + " returned NULL");

  // Only the two leading fields are read before the version is known (backend_abi.h).
  if (api->abi_version < 1 || api->abi_version > 3)
    return c.refuse("abi_version " + std::to_string(api->abi_version) +
                    ": this pacts implements backend ABI versions 1, 2 and 3");
  const size_t expected_bytes = api->abi_version == 1   ? sizeof(pacts_backend_v1)
                                : api->abi_version == 2 ? sizeof(pacts_backend_v2)
                                                        : sizeof(pacts_backend_v3);
  if (api->descriptor_bytes != expected_bytes)
    return c.refuse("descriptor_bytes " + std::to_string(api->descriptor_bytes) +
                    ": backend ABI version " + std::to_string(api->abi_version) + " has " +
                    std::to_string(expected_bytes));
  if (api->problem_abi_version != PACTS_ABI_VERSION)
    return c.refuse("problem_abi_version " + std::to_string(api->problem_abi_version) +
                    ": this pacts describes problems with version " +
                    std::to_string(PACTS_ABI_VERSION));
  if (api->reserved0 != 0)
    return c.refuse("reserved0 = " + std::to_string(api->reserved0) + ": accepted: 0");
  if (!valid_name(api->name))
    return c.refuse("name \"" + text_or_empty(api->name) +
                    "\": accepted: 1 to 64 characters of A-Z a-z 0-9 . _ -");
  if (api->device == nullptr || api->device[0] == '\0')
    return c.refuse("device: accepted: a non-empty string");
  for (const auto& [field, fn] : {std::pair{"create", reinterpret_cast<const void*>(api->create)},
                                  std::pair{"destroy", reinterpret_cast<const void*>(api->destroy)},
                                  std::pair{"run", reinterpret_cast<const void*>(api->run)}})
    if (fn == nullptr) return c.refuse(std::string(field) + " is NULL: accepted: a function");

  Capabilities caps;
  if (Status s = check_capabilities_of(c, api->capabilities, caps); !s) return s;
  if (caps.plan_replay != (api->run_replayed != nullptr))
    return c.refuse(std::string("capabilities.plan_replay = ") + (caps.plan_replay ? "1" : "0") +
                    " but run_replayed is " + (api->run_replayed ? "set" : "NULL") +
                    ": accepted: run_replayed set exactly when plan_replay is 1");
  spec::NumericsProfile profile;
  if (Status s = check_numerics_of(c, api->numerics, std::string(api->name), profile); !s) return s;
  if (api->abi_version >= 2) {
    // The version 1 descriptor is the first member of the version 2 one, which is the first
    // member of the version 3 one (backend_abi.h).
    const auto* v2 = reinterpret_cast<const pacts_backend_v2*>(api);
    if (Status s = check_v2_extension_of(c, v2->v2, profile, caps); !s) return s;
  }
  const pacts_backend_v3_extension* timed = nullptr;
  if (api->abi_version >= 3) {
    timed = &reinterpret_cast<const pacts_backend_v3*>(api)->v3;
    if (Status s = check_v3_extension_of(c, *timed); !s) return s;
  }

  PluginInfo info;
  info.path = absolute;
  info.declared = api->name;
  info.driver = text_or_empty(api->driver);
  info.runtime = text_or_empty(api->runtime);
  info.version = text_or_empty(api->version);
  info.abi_version = api->abi_version;

  char message[PACTS_BACKEND_MESSAGE_BYTES] = {};
  pacts_backend_instance* instance = nullptr;
  const pacts_status_code created = api->create(&instance, message, sizeof message);
  if (created != PACTS_OK || instance == nullptr) {
    if (instance != nullptr) api->destroy(instance);  // a failed create still owns what it made
    const spec::Code code = created >= PACTS_INVALID_ARGUMENT && created <= PACTS_INTERNAL
                                ? static_cast<spec::Code>(created)
                                : spec::Code::kInternal;
    return Status(code, "backend library " + absolute + ": create failed: " +
                            bounded(message, sizeof message));
  }
  auto backend = std::make_unique<PluginBackend>(std::move(library), api, instance, std::move(info),
                                                 std::move(caps), std::move(profile));
  backend->set_timed(timed);
  return std::unique_ptr<Backend>(std::move(backend));
}

const PluginInfo* plugin_info(const Backend& backend) {
  const auto* plugin = dynamic_cast<const PluginBackend*>(&backend);
  return plugin ? &plugin->info() : nullptr;
}

std::optional<TimedCalls> plugin_timed_calls(const Backend& backend) {
  const auto* plugin = dynamic_cast<const PluginBackend*>(&backend);
  if (plugin == nullptr || plugin->timed() == nullptr || plugin->timed()->timed_calls != 1)
    return std::nullopt;
  TimedCalls t;
  t.device_memory = plugin->timed()->memory == PACTS_BACKEND_MEMORY_DEVICE;
  t.graph_capturable = plugin->timed()->graph_capturable == 1;
  return t;
}

spec::Result<PreparedCall> prepare_timed_call(Backend& backend, const pacts_problem& problem,
                                              const pacts_buffers& buffers,
                                              const int32_t* host_block_table,
                                              const int32_t* host_context_lens,
                                              const PlanHint& hint) {
  auto* plugin = dynamic_cast<PluginBackend*>(&backend);
  if (plugin == nullptr)
    return spec::not_supported("backend " + backend.name() + ": not a plugin (timed calls are "
                               "the plugin ABI's, version 3)");
  return plugin->prepare(problem, buffers, host_block_table, host_context_lens, hint);
}

PreparedCall::PreparedCall(PreparedCall&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)), generation_(o.generation_), plan_(std::move(o.plan_)) {}

PreparedCall& PreparedCall::operator=(PreparedCall&& o) noexcept {
  if (this != &o) {
    if (owner_ != nullptr) static_cast<PluginBackend*>(owner_)->release(generation_);
    owner_ = std::exchange(o.owner_, nullptr);
    generation_ = o.generation_;
    plan_ = std::move(o.plan_);
  }
  return *this;
}

PreparedCall::~PreparedCall() {
  if (owner_ != nullptr) static_cast<PluginBackend*>(owner_)->release(generation_);
}

spec::Status PreparedCall::enqueue(void* stream) {
  if (owner_ == nullptr) return spec::Status(spec::Code::kInternal, "an empty prepared call");
  return static_cast<PluginBackend*>(owner_)->enqueue(generation_, stream);
}

uint32_t PreparedCall::device_error() {
  return owner_ == nullptr ? 0 : static_cast<PluginBackend*>(owner_)->device_error(generation_);
}

void register_plugin_backend() {
  conformance::BackendFactory f;
  f.name = kPluginPrefix;
  f.kind = conformance::NameKind::kPrefix;
  f.listed = false;
  // A refusal is printed, as the hip backend prints why it cannot open a device.
  f.make = [](const std::string& path) -> std::unique_ptr<Backend> {
    auto plugin = load_plugin_backend(path);
    if (plugin) return std::move(plugin).value();
    std::fprintf(stderr, "%s\n", plugin.status().to_string().c_str());
    return nullptr;
  };
  conformance::register_backend(std::move(f));
}

}  // namespace pacts::backends
