// pacts HIP platform layer, AMD side: the fp8 matrix instructions of the MFMA tile kernel's Q.K
// (src/kernel_mfma.h), with the requantised query of spec/tolerance.md §2.1 as one operand and the
// K pool's raw codes as the other. COMPILE-CHECKED ONLY: nothing here has run on an AMD GPU.
//
// Which instruction takes Q.K is decided by the KV FORMAT and the compile target, never by
// guessing what the bytes mean (docs/kernel-design.md, portability trap 3):
//   gfx942 (CDNA3): v_mfma_f32_16x16x32_{fp8,bf8}_fp8 read FNUZ bytes: e4m3fnuz / e5m2fnuz K.
//   gfx950 (CDNA4): the same instructions read OCP bytes: e4m3fn / e5m2 K; MXFP4 K (e2m1 with an
//                   e8m0 byte per 32) takes v_mfma_scale_f32_16x16x128_f8f6f4, which applies the
//                   e8m0 bytes itself.
//   every other (target, format): the bf16 MFMA of matrix_amd.h, K decoded and rounded to bf16.
// qk_path() is that table, the one copy the device code (by target macro) and the host's
// numerics profile (by the device's gcnArchName) both read.
//
// Operand layouts, lane l = 16 g + i (i = l % 16, g = l / 16), byte / element r:
//   16x16x32 fp8/bf8 (A, B: 8 bytes a lane, byte r = bits 8r..8r+7 of the 64-bit operand):
//     A[i][8 g + r]   B[8 g + r][i]   C / D as the bf16 instruction (matrix_amd.h c_coord)
//   16x16x128 f8f6f4, scaled (A, B: 8 dwords; fp4 uses the first 4):
//     fp4 (e2m1): byte j holds k = 32 g + 2 j (low nibble) and 32 g + 2 j + 1 (high nibble):
//                 32 consecutive k, one MX block;
//     fp8:        byte r holds k = 16 g + (r & 15) + 64 (r >> 4): two stripes of 16;
//     scale:      lane l's byte (opsel 0) scales row / column i over k block g (k 32 g .. 32 g + 31),
//                 2^(byte - 127), applied to each 32-term block sum before accumulation.
// Sources, read 2026-12-01 (no AMD GPU here to probe them):
//   - llvm/llvm-project clang/include/clang/Basic/BuiltinsAMDGPU.def (signatures);
//   - ROCm/composable_kernel ck_tile warp_gemm_attribute_mfma_impl.hpp (16x16x32 fp8:
//     kABKLane 4, kABKPerLane 8) and test/mx_mfma_op (the 16x16x128 register tables and a
//     hardware probe of the scale-to-lane mapping);
//   - the CDNA4 ISA's scaled-MFMA lane table (lane 0: M 0, K 0..31; lane 16: M 0, K 32..63).
// tests/mfma_fp8_layout_test.cpp emulates both instructions on the host from these layouts (written
// out there on its own) and drives them through the functions below: the products must equal
// scalar loops, and the fp8 stripe order of the scaled instruction is one of its planted faults.
#pragma once

#include "platform/matrix_amd.h"

#include <pacts/problem.h>

#include <cstdint>

namespace pacts::gpu::mfma {

enum class AmdTarget { kGfx942, kGfx950, kOther };
enum class QkPath {
  kBf16,      // K decoded, scaled, rounded to bf16; Q~ in bf16 (matrix_amd.h)
  kFp8,       // requantised Q x raw fp8 K, 16x16x32; logit = raw * 2^e * K scale (requant.h)
  kMxScaled,  // requantised Q x raw e2m1 K with its e8m0 bytes, scaled 16x16x128
};

PACTS_MFMA_HD constexpr QkPath qk_path(AmdTarget target, pacts_format kv) {
  if (target == AmdTarget::kGfx942)
    return kv == PACTS_FORMAT_E4M3FNUZ || kv == PACTS_FORMAT_E5M2FNUZ ? QkPath::kFp8 : QkPath::kBf16;
  if (target == AmdTarget::kGfx950) {
    if (kv == PACTS_FORMAT_E4M3FN || kv == PACTS_FORMAT_E5M2) return QkPath::kFp8;
    if (kv == PACTS_FORMAT_E2M1) return QkPath::kMxScaled;
  }
  return QkPath::kBf16;
}

// The KV formats (bits 1u << pacts_format) whose query a target requantises: those whose Q.K is
// not the bf16 path. The host's numerics profile declares exactly these (decode_hip.cpp).
PACTS_MFMA_HD constexpr uint32_t requant_kv_formats(AmdTarget target) {
  const pacts_format formats[] = {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2,
                                  PACTS_FORMAT_E5M2FNUZ, PACTS_FORMAT_E2M1};
  uint32_t bits = 0;
  for (pacts_format f : formats)
    if (qk_path(target, f) != QkPath::kBf16) bits |= 1u << static_cast<unsigned>(f);
  return bits;
}

// The target of this device pass (kOther in the host pass and on NVIDIA).
#if defined(__HIP_DEVICE_COMPILE__) && defined(__gfx942__)
inline constexpr AmdTarget kDeviceTarget = AmdTarget::kGfx942;
#elif defined(__HIP_DEVICE_COMPILE__) && defined(__gfx950__)
inline constexpr AmdTarget kDeviceTarget = AmdTarget::kGfx950;
#else
inline constexpr AmdTarget kDeviceTarget = AmdTarget::kOther;
#endif

// A device's target from its gcnArchName ("gfx942:sramecc+:xnack-"), for the host's profile.
inline AmdTarget amd_target_of(const char* gcn_arch) {
  const auto starts = [&](const char* s) {
    int i = 0;
    for (; s[i] != '\0'; ++i)
      if (gcn_arch[i] != s[i]) return false;
    return gcn_arch[i] == '\0' || gcn_arch[i] == ':';
  };
  if (gcn_arch == nullptr) return AmdTarget::kOther;
  if (starts("gfx942")) return AmdTarget::kGfx942;
  if (starts("gfx950")) return AmdTarget::kGfx950;
  return AmdTarget::kOther;
}

// ---- 16x16x32 fp8: S^T = K Q'^T per 32 dims (kk), A = K (keys x dims), B = Q'^T ----
// A is read as bf8 (e5m2 of the target's family) for e5m2 / e5m2fnuz K, else as fp8 (e4m3); B,
// the requantised query, is always fp8.
PACTS_MFMA_HD constexpr bool k_operand_is_bf8(pacts_format kv) {
  return kv == PACTS_FORMAT_E5M2 || kv == PACTS_FORMAT_E5M2FNUZ;
}
inline constexpr int kK8 = 32;
inline constexpr int kBytes8 = 8;  // operand bytes per lane
PACTS_MFMA_HD constexpr Coord fp8_a_coord(int lane, int byte) {
  return {lane % 16, 8 * (lane / 16) + byte};
}
PACTS_MFMA_HD constexpr Coord fp8_b_coord(int lane, int byte) {
  return {8 * (lane / 16) + byte, lane % 16};
}
// The K element byte `byte` of a lane's A in step kk, and the Q' element of its B: 8 consecutive
// dims of one key / row (one 8-byte LDS read each).
PACTS_MFMA_HD constexpr KeyDim qk8_a(int lane, int byte, int kk) {
  return key_dim_of(fp8_a_coord(lane, byte), kK8 * kk);
}
PACTS_MFMA_HD constexpr RowDim qk8_b(int lane, int byte, int kk) {
  return row_dim_of(fp8_b_coord(lane, byte), kK8 * kk);
}

// ---- 16x16x128 scaled: A = K (e2m1), B = Q'^T (e4m3fn), per 128 dims (kk) ----
inline constexpr int kKMx = 128;
PACTS_MFMA_HD constexpr Coord fp4_a_coord(int lane, int element) {  // element 0..31
  return {lane % 16, 32 * (lane / 16) + element};
}
PACTS_MFMA_HD constexpr Coord fp8_b_coord_128(int lane, int byte) {  // byte 0..31
  return {16 * (lane / 16) + (byte & 15) + 64 * (byte >> 4), lane % 16};
}
PACTS_MFMA_HD constexpr KeyDim qkmx_a(int lane, int element, int kk) {
  return key_dim_of(fp4_a_coord(lane, element), kKMx * kk);
}
PACTS_MFMA_HD constexpr RowDim qkmx_b(int lane, int byte, int kk) {
  return row_dim_of(fp8_b_coord_128(lane, byte), kKMx * kk);
}
// The MX block (of 32 dims) whose e8m0 byte lane `lane` supplies as A's scale in step kk.
PACTS_MFMA_HD constexpr int qkmx_a_block(int lane, int kk) { return (kKMx * kk) / 32 + lane / 16; }

// The query's block scale byte for the scaled instruction and what is left of 2^e after it
// (spec/contract.md §2.1, order 3 with a matrix unit that applies e8m0 bytes itself).
struct MxQueryScale {
  int byte;      // 127 + e clamped to [0, 254] (never 0xFF, the NaN)
  int residual;  // e - (byte - 127), applied once to the product with ldexp
};
PACTS_MFMA_HD constexpr MxQueryScale mx_query_scale(int e) {
  const int byte = e + 127 < 0 ? 0 : (e + 127 > 254 ? 254 : e + 127);
  return {byte, e - (byte - 127)};
}

// Facts the kernel relies on: both fp8 operands are 8 consecutive dims; A of the scaled
// instruction is one whole MX block of one key (so its scale byte is that block's); B's two
// stripes are 16 consecutive dims each.
constexpr bool fp8_fragments_contiguous() {
  for (int l = 0; l < kWave; ++l)
    for (int r = 0; r < kBytes8; ++r) {
      if (qk8_a(l, r, 0).key != qk8_a(l, 0, 0).key || qk8_a(l, r, 0).d != qk8_a(l, 0, 0).d + r)
        return false;
      if (qk8_b(l, r, 0).row != qk8_b(l, 0, 0).row || qk8_b(l, r, 0).d != qk8_b(l, 0, 0).d + r)
        return false;
    }
  for (int l = 0; l < kWave; ++l) {
    for (int e = 0; e < 32; ++e)
      if (qkmx_a(l, e, 0).d != qkmx_a(l, 0, 0).d + e || qkmx_a(l, e, 0).d / 32 != qkmx_a_block(l, 0))
        return false;
    for (int r = 0; r < 32; ++r)
      if (qkmx_b(l, r, 0).d != qkmx_b(l, r & 16, 0).d + (r & 15)) return false;
  }
  return true;
}
static_assert(fp8_fragments_contiguous());

}  // namespace pacts::gpu::mfma

#if defined(__HIP__)
namespace pacts::gpu::mfma {

typedef int i32x8_t __attribute__((ext_vector_type(8)));

// c += A B, 16x16x32: A = 8 K codes (e4m3 or e5m2 of the target's family: kKIsE5m2 picks bf8),
// B = 8 requantised Q codes (e4m3 of the same family).
template <bool kKIsE5m2>
__device__ inline void mfma_16x16x32_fp8(float (&c)[4], uint64_t a, uint64_t b) {
#if defined(__HIP_DEVICE_COMPILE__) && (defined(__gfx942__) || defined(__gfx950__))
  const long av = static_cast<long>(a), bv = static_cast<long>(b);
  if constexpr (kKIsE5m2)
    store_acc(__builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8(av, bv, acc_vector(c), 0, 0, 0), c);
  else
    store_acc(__builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(av, bv, acc_vector(c), 0, 0, 0), c);
#elif defined(__HIP_DEVICE_COMPILE__)
  (void)c, (void)a, (void)b;
  __builtin_trap();  // qk_path never selects kFp8 on other targets
#else
  (void)c, (void)a, (void)b;
#endif
}

// c += (A 2^(scale_a - 127)) (B 2^(scale_b - 127)) per 32-dim block, 16x16x128: A = 32 e2m1 K
// elements (16 bytes, `a`), B = 32 e4m3fn Q' codes (`b`, the striped order), scale bytes as
// runtime values (a compile-time constant scale is misread by the hardware: LLVM forces VGPRs).
__device__ inline void mfma_scale_16x16x128_e2m1_e4m3(float (&c)[4], const uint32_t (&a)[4],
                                                      const uint32_t (&b)[8], int scale_a,
                                                      int scale_b) {
#if defined(__HIP_DEVICE_COMPILE__) && defined(__gfx950__)
  const i32x8_t av = {static_cast<int>(a[0]), static_cast<int>(a[1]), static_cast<int>(a[2]),
                      static_cast<int>(a[3]), 0, 0, 0, 0};
  const i32x8_t bv = {static_cast<int>(b[0]), static_cast<int>(b[1]), static_cast<int>(b[2]),
                      static_cast<int>(b[3]), static_cast<int>(b[4]), static_cast<int>(b[5]),
                      static_cast<int>(b[6]), static_cast<int>(b[7])};
  // cbsz 4: A is e2m1; blgp 0: B is e4m3; opsel 0: byte 0 of each scale register.
  store_acc(__builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(av, bv, acc_vector(c), 4, 0, 0,
                                                            scale_a, 0, scale_b),
            c);
#elif defined(__HIP_DEVICE_COMPILE__)
  (void)c, (void)a, (void)b, (void)scale_a, (void)scale_b;
  __builtin_trap();  // qk_path selects kMxScaled on gfx950 only
#else
  (void)c, (void)a, (void)b, (void)scale_a, (void)scale_b;
#endif
}

}  // namespace pacts::gpu::mfma
#endif  // __HIP__
