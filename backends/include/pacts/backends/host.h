// The host kernels (pacts/host.h) presented as a conformance backend named "host": the
// production algorithm on CPU threads, the backend a machine without a GPU qualifies.
#pragma once

#include <pacts/conformance/backend.h>

#include <cstdint>
#include <memory>

namespace pacts::backends {

// `threads` worker threads (0 = all hardware threads). Results never depend on it.
std::unique_ptr<conformance::Backend> make_host_backend(int32_t threads = 0);

// Registers "host" (all hardware threads) in the conformance registry.
void register_host_backend();

}  // namespace pacts::backends
