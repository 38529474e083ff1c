// The entry points of one build of the HIP kernels, as pacts-bench times them: the gated library
// (libpacts_kernels_hip, linked) and the variant builds (libpacts_bench_<name>.so: the same
// sources with a variant's compile definitions, loaded by name; kernels/hip/CMakeLists.txt,
// pacts_kernels_hip_variant). One definition for both sides of the dlopen boundary. Plain C++: no
// GPU header.
#pragma once

#include <pacts/hip.h>

#include <string>

namespace pacts::kernels::hip {

struct VariantKernels {
  std::string variant;  // "safe" (the gated library), "unsafe", or an experiment's name
  // Whether the timed call's output is checked (finite, no error word). The unsafe build computes
  // the operator on valid inputs, so it is; an ablation (copy-only, compute-only) computes
  // nothing meaningful, so it is not.
  bool check_output = true;
  spec::Result<Plan> (*plan)(const pacts_problem&, const DeviceInfo&, int32_t, int32_t, bool) = nullptr;
  spec::Status (*decode)(const Plan&, const pacts_buffers&, uint32_t*, void*, uint64_t,
                         void*) = nullptr;
  spec::Status (*select_device)(int32_t) = nullptr;
};

}  // namespace pacts::kernels::hip

// The one symbol a variant library exports (variant_entry.cpp, variant.map).
extern "C" void pacts_bench_variant_kernels(pacts::kernels::hip::VariantKernels* out);
