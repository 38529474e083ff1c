// The HIP kernels as pacts-bench times them: the entry points of one build of kernels/hip, so
// the same timing code runs the gated library (linked) and the variant builds (loaded by name).
// Plain C++: no GPU header.
#pragma once

#include <pacts/hip.h>

#include <string>

namespace pacts::bench {

struct HipKernels {
  std::string variant;  // "safe" (the gated library), "unsafe", or an experiment's name
  // Whether the timed call's output is checked (finite, no error word). The unsafe build computes
  // the operator on valid inputs, so it is; an ablation (copy-only, compute-only) computes
  // nothing meaningful, so it is not.
  bool check_output = true;
  spec::Result<kernels::Plan> (*plan)(const pacts_problem&, const kernels::DeviceInfo&, int32_t,
                                      int32_t) = nullptr;
  spec::Status (*decode)(const kernels::Plan&, const pacts_buffers&, uint32_t*, void*, uint64_t,
                         void*) = nullptr;
  spec::Status (*select_device)(int32_t) = nullptr;
};

// The library pacts-bench links (libpacts_kernels_hip), the one the gate judges.
HipKernels safe_hip_kernels();

// A variant build of kernels/hip, never gated and never shipped: "unsafe" (PACTS_UNSAFE_UNMASKED,
// the owned-slot masking compiled out; the cost of safety) or an experiment
// (bench/CMakeLists.txt lists them). Loaded from libpacts_bench_<name>.so next to the
// executable, else through the loader's search path. NotSupported with the loader's reason when
// absent.
std::string variant_library(const std::string& name);
spec::Result<HipKernels> load_variant_hip_kernels(const std::string& name);

}  // namespace pacts::bench

// The one symbol a variant library exports (bench/src/variant_entry.cpp).
extern "C" void pacts_bench_variant_kernels(pacts::bench::HipKernels* out);
