// The host kernels (pacts/host.h) presented as a conformance backend named "host": the
// production algorithm on CPU threads, the backend a machine without a GPU qualifies.
#pragma once

#include <pacts/conformance/backend.h>

#include <cstdint>
#include <memory>

namespace pacts::conformance {

// `threads` worker threads (0 = all hardware threads). Results never depend on it.
std::unique_ptr<Backend> make_host_backend(int32_t threads = 0);

}  // namespace pacts::conformance
