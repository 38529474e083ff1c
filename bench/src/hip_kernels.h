// The HIP kernels as pacts-bench times them: the entry points of one build of kernels/hip, so
// the same timing code runs the gated library (linked) and the variant builds (loaded by name).
// Plain C++: no GPU header.
#pragma once

#include "bench_variant.h"

#include <string>

namespace pacts::bench {

// kernels/hip/bench/bench_variant.h: the struct a variant library fills.
using HipKernels = kernels::hip::VariantKernels;

// The library pacts-bench links (libpacts_kernels_hip), the one the gate judges.
HipKernels safe_hip_kernels();

// A variant build of kernels/hip, never gated and never shipped: "unsafe" (PACTS_UNSAFE_UNMASKED,
// the owned-slot masking compiled out; the cost of safety) or an experiment
// (kernels/hip/CMakeLists.txt lists them). Loaded from libpacts_bench_<name>.so next to the
// executable, else through the loader's search path. NotSupported with the loader's reason when
// absent.
std::string variant_library(const std::string& name);
spec::Result<HipKernels> load_variant_hip_kernels(const std::string& name);

}  // namespace pacts::bench
