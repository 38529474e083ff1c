// The entry of libpacts_bench_unsafe.so: the kernels/hip sources built with PACTS_UNSAFE_UNMASKED
// plus this file, exporting nothing else (bench/unsafe.map), so its copies of the kernel API never
// meet the gated library's in the process that loads both (bench/src/hip_loader.cpp).
#include "hip_kernels.h"

#if !defined(PACTS_UNSAFE_UNMASKED)
#error "unsafe_entry.cpp belongs to the unsafe build only"
#endif

extern "C" __attribute__((visibility("default"))) void pacts_bench_unsafe_kernels(
    pacts::bench::HipKernels* out) {
  out->variant = "unsafe";
  out->plan = &pacts::kernels::hip::plan;
  out->decode = &pacts::kernels::hip::decode;
  out->select_device = &pacts::kernels::hip::memory::select_device;
}
