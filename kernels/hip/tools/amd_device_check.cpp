// AMD compile check (no ROCm here): instantiates every kernel of src/kernel.h for one gfx target.
//   clang++-22 -x hip --offload-arch=gfx942 --offload-device-only -nogpuinc -nogpulib -O3
//     -std=c++20 -DPACTS_AMD_DEVICE_CHECK -I kernels -I kernels/hip -I kernels/include
//     -I spec/include -c kernels/hip/tools/amd_device_check.cpp
// Compile-checked only: nothing here has run on an AMD GPU. With -DPACTS_HIP_MFMA=1 (the CMake
// target passes it) also every instantiation of the MFMA tile kernel (src/kernel_mfma.h) that the
// dispatch launches (decode_hip.cpp launch_format): bf16 without a V scale as stored, and every
// format with the split V. Each target's pass compiles its own Q.K path per format
// (platform/matrix_amd_fp8.h qk_path): on gfx942 the fnuz fp8 formats take the fp8 MFMA, on gfx950
// the OCP fp8 formats the fp8 MFMA and MXFP4 the scaled MFMA; the rest the bf16 MFMA.
#include "src/kernel.h"
#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
#include "src/kernel_mfma.h"
#endif

namespace pacts::kernels::hip::detail {

// Every KV format the host side launches (decode_hip.cpp launch_format), for every head dim.
#define PACTS_AMD_CHECK_FORMAT(F)                                   \
  template __global__ void split_kv_kernel<64, PACTS_FORMAT_##F>(Params);  \
  template __global__ void split_kv_kernel<128, PACTS_FORMAT_##F>(Params); \
  template __global__ void split_kv_kernel<256, PACTS_FORMAT_##F>(Params);
PACTS_AMD_CHECK_FORMAT(BF16)
PACTS_AMD_CHECK_FORMAT(FP16)
PACTS_AMD_CHECK_FORMAT(E4M3FN)
PACTS_AMD_CHECK_FORMAT(E4M3FNUZ)
PACTS_AMD_CHECK_FORMAT(E5M2)
PACTS_AMD_CHECK_FORMAT(E5M2FNUZ)
PACTS_AMD_CHECK_FORMAT(E2M1)
#undef PACTS_AMD_CHECK_FORMAT
template __global__ void merge_kernel<64, false>(Params);
template __global__ void merge_kernel<128, false>(Params);
template __global__ void merge_kernel<256, false>(Params);
template __global__ void merge_kernel<64, true>(Params);
template __global__ void merge_kernel<128, true>(Params);
template __global__ void merge_kernel<256, true>(Params);

// The tile kernel's LDS must fit gfx942's 64 KiB (docs/kernel-design.md, portability trap 5).
static_assert(sizeof(Smem<256>) <= 64 * 1024 && sizeof(Smem<128>) <= 64 * 1024);

#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
#define PACTS_AMD_CHECK_MFMA_D(D)                                                   \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_BF16, false>(Params); \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_BF16, true>(Params);  \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_FP16, true>(Params);  \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_E4M3FN, true>(Params); \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_E4M3FNUZ, true>(Params); \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_E5M2, true>(Params);  \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_E5M2FNUZ, true>(Params); \
  template __global__ void split_kv_mfma_kernel<D, PACTS_FORMAT_E2M1, true>(Params);  \
  static_assert(sizeof(MfmaSmem<D, false>) <= 64 * 1024 && sizeof(MfmaSmem<D, true>) <= 64 * 1024);
PACTS_AMD_CHECK_MFMA_D(64)
PACTS_AMD_CHECK_MFMA_D(128)
PACTS_AMD_CHECK_MFMA_D(256)
#undef PACTS_AMD_CHECK_MFMA_D
#endif

}  // namespace pacts::kernels::hip::detail
