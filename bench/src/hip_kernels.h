// The HIP kernels as pacts-bench times them: the entry points of one build of kernels/hip, so
// the same timing code runs the gated library (linked) and the unsafe build (loaded by name).
// Plain C++: no GPU header.
#pragma once

#include <pacts/hip.h>

#include <string>

namespace pacts::bench {

struct HipKernels {
  std::string variant;  // "safe" or "unsafe"
  spec::Result<kernels::Plan> (*plan)(const pacts_problem&, const kernels::DeviceInfo&, int32_t,
                                      int32_t) = nullptr;
  spec::Status (*decode)(const kernels::Plan&, const pacts_buffers&, uint32_t*, void*, uint64_t,
                         void*) = nullptr;
  spec::Status (*select_device)(int32_t) = nullptr;
};

// The library pacts-bench links (libpacts_kernels_hip), the one the gate judges.
HipKernels safe_hip_kernels();

// The unsafe build (kernels/hip NOTES.md, PACTS_UNSAFE_UNMASKED: the owned-slot masking compiled
// out), loaded from kUnsafeLibrary next to the executable, else through the loader's search path.
// It is never gated and never shipped. NotSupported with the loader's reason when absent.
inline constexpr const char* kUnsafeLibrary = "libpacts_bench_unsafe.so";
spec::Result<HipKernels> load_unsafe_hip_kernels();

}  // namespace pacts::bench

// The one symbol the unsafe library exports (bench/src/unsafe_entry.cpp).
extern "C" void pacts_bench_unsafe_kernels(pacts::bench::HipKernels* out);
