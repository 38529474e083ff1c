// The entry of a variant library libpacts_bench_<name>.so: the kernels/hip sources built again
// with a variant's compile definitions (kernels/hip/CMakeLists.txt, pacts_kernels_hip_variant)
// plus this file, exporting nothing else (variant.map), so its copies of the kernel API never meet
// the gated library's in the process that loads both (pacts-bench).
#include "bench_variant.h"

#if !defined(PACTS_BENCH_VARIANT)
#error "variant_entry.cpp belongs to a variant build only"
#endif

extern "C" __attribute__((visibility("default"))) void pacts_bench_variant_kernels(
    pacts::kernels::hip::VariantKernels* out) {
  out->variant = PACTS_BENCH_VARIANT;
  out->check_output = PACTS_BENCH_VARIANT_CHECKED != 0;
  out->plan = &pacts::kernels::hip::plan;
  out->decode = &pacts::kernels::hip::decode;
  out->select_device = &pacts::kernels::hip::memory::select_device;
}
