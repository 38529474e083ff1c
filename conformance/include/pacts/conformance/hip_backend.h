// The HIP kernels (pacts/hip.h) presented as a conformance backend named "hip": one GPU.
#pragma once

#include <pacts/conformance/backend.h>

#include <cstdint>
#include <memory>

namespace pacts::conformance {

// GPU `ordinal`. nullptr (with the reason on stderr) when no GPU can be used.
std::unique_ptr<Backend> make_hip_backend(int32_t ordinal = 0);

}  // namespace pacts::conformance
