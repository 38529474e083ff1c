// The HIP kernels (pacts/hip.h) presented as a conformance backend named "hip": one GPU. Built
// only where kernels/hip builds (-DPACTS_ENABLE_CUDA=ON).
#pragma once

#include <pacts/conformance/backend.h>

#include <cstdint>
#include <memory>

namespace pacts::backends {

// GPU `ordinal`. nullptr (with the reason on stderr) when no GPU can be used.
std::unique_ptr<conformance::Backend> make_hip_backend(int32_t ordinal = 0);

// The GPUs this process can open: ordinals are probed until the runtime refuses one.
int32_t hip_device_count();

// Registers "hip" (GPU 0) and "hip:N" (GPU N) in the conformance registry.
void register_hip_backend();

}  // namespace pacts::backends
