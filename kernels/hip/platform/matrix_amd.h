// pacts HIP platform layer, AMD side: the matrix instruction of the MFMA tile kernel
// (src/kernel_mfma.h), v_mfma_f32_16x16x16_bf16 (`__builtin_amdgcn_mfma_f32_16x16x16bf16_1k`,
// wave64, gfx942 and gfx950), its operand layout, and the few wave helpers that kernel needs. The
// only place that names the instruction. COMPILE-CHECKED ONLY: nothing here has run on an AMD GPU.
//
// Operand layout (one instruction: D = A B + C, A 16 x 16 (M x K), B 16 x 16 (K x N), C / D 16 x 16
// fp32; 64 lanes, 4 values per lane and operand), for lane l and register (element) r in 0..3:
//   A: A[l % 16][4 (l / 16) + r]   B: B[4 (l / 16) + r][l % 16]   C / D: D[4 (l / 16) + r][l % 16]
// Checked against two public sources (2026-11-29):
//   - ROCm/composable_kernel, include/ck_tile/ops/gemm/warp/warp_gemm_attribute_mfma_impl.hpp,
//     WarpGemmAttributeMfmaImplBf16Bf16F32M16N16K16 (kAMLane = kBNLane = 16, kABKLane = 4,
//     kABKPerLane = 4; kCMLane = 4, kCNLane = 16, kCM0PerLane = 1, kCM1PerLane = 4), with the
//     encodings of warp_gemm_attribute_mfma.hpp (WarpGemmAtrributeMfma: lane = K-lane * 16 + M
//     for A and B, lane = M-lane * 16 + N for C, the register index the fastest of K or of M);
//   - ggml-org/llama.cpp, ggml/src/ggml-cuda/mma.cuh, AMD_MFMA_AVAILABLE: tile<16, 8> (bf16 pairs)
//     get_i = lane % 16, get_j = 2 (lane / 16) + l for A and B (B held as N x K), C a
//     DATA_LAYOUT_J_MAJOR tile<16, 16, float>: row 4 (lane / 16) + l, column lane % 16.
// Register r of A and B is element r of the builtin's 4 x i16 vector: the low half of the first
// VGPR is r = 0 (the packing below). tests/mfma_layout_test.cpp emulates the instruction on the
// host from this documented layout (written out there on its own) and drives it through the
// functions below as the tile kernel does: the products must equal scalar loops.
//
// Host-compilable: the layout and the tile algebra are constexpr functions without any device
// builtin; the wrapper and the wave helpers exist only when compiling HIP (clang).
//
// PACTS_HIP_MFMA (a build definition, 0 when absent): 1 selects the MFMA tile kernel in the
// dispatch (src/decode_hip.cpp) on AMD. It must be set for the host and the device passes alike
// (the plan's tile and the numerics profile are host code), and only when every offload target has
// the instruction: a device pass for another target stops here.
#pragma once

#include <cstdint>

#if defined(PACTS_HIP_MFMA) && PACTS_HIP_MFMA
#if !(defined(__HIP__) || defined(PACTS_AMD_DEVICE_CHECK))
#error "PACTS_HIP_MFMA: the MFMA tile kernel is AMD code (HIP with clang)"
#endif
#if defined(__HIP_DEVICE_COMPILE__) && !(defined(__gfx942__) || defined(__gfx950__))
#error "PACTS_HIP_MFMA: gfx942 and gfx950 only (wave64 MFMA); build others with PACTS_HIP_MFMA=0"
#endif
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
#define PACTS_MFMA_HD __host__ __device__
#else
#define PACTS_MFMA_HD
#endif

namespace pacts::gpu::mfma {

inline constexpr int kWave = 64;  // wave64 (gfx942, gfx950); gpu::kWarpSize is 64 there too
inline constexpr int kM = 16, kN = 16, kK = 16;
inline constexpr int kRegs = 4;   // elements per lane of A, B (bf16) and C / D (fp32)

struct Coord {
  int row, col;
};

// (lane, register) -> (row, column) of the instruction's operands.
PACTS_MFMA_HD constexpr Coord a_coord(int lane, int reg) {
  return {lane % 16, 4 * (lane / 16) + reg};
}
PACTS_MFMA_HD constexpr Coord b_coord(int lane, int reg) {
  return {4 * (lane / 16) + reg, lane % 16};
}
PACTS_MFMA_HD constexpr Coord c_coord(int lane, int reg) {
  return {4 * (lane / 16) + reg, lane % 16};
}

// ---- The tile kernel's use of the instruction (src/kernel_mfma.h) ----
// Both products are computed transposed, so that every S and O register of a lane belongs to ONE
// query row (lane % 16) and P leaves the first product in the very registers the second one reads:
//   S^T = K Q~^T   per step kk of 16 dims: A = K (keys x dims), B = Q~^T (dims x rows),
//                  C = S^T (keys x rows)
//   O^T += V^T P^T per tile nt of 16 dims: A = V^T (dims x keys), B = P^T (keys x rows),
//                  C = O^T (dims x rows)
// Tile coordinates: keys 0..15 of the 16-key tile, rows 0..15 of the row tile, d / dim 0..D-1.
struct KeyDim {
  int key, d;
};
struct RowDim {
  int row, d;
};
struct RowKey {
  int row, key;
};
constexpr bool operator==(const RowKey& a, const RowKey& b) {
  return a.row == b.row && a.key == b.key;
}

// An A coordinate of S^T = K Q~^T (row: key, column: dim in the step) and a B coordinate (row:
// dim in the step, column: query row) as tile coordinates, for a step that starts at dim `first`.
PACTS_MFMA_HD constexpr KeyDim key_dim_of(Coord a, int first) { return {a.row, first + a.col}; }
PACTS_MFMA_HD constexpr RowDim row_dim_of(Coord b, int first) { return {b.col, first + b.row}; }
// The K element a lane feeds as register `reg` of A in step kk of S^T = K Q~^T.
PACTS_MFMA_HD constexpr KeyDim qk_a(int lane, int reg, int kk) {
  return key_dim_of(a_coord(lane, reg), kK * kk);
}
// The Q~ element a lane feeds as register `reg` of B in step kk.
PACTS_MFMA_HD constexpr RowDim qk_b(int lane, int reg, int kk) {
  return row_dim_of(b_coord(lane, reg), kK * kk);
}
// The logit S[row][key] a lane holds in register `reg` of the S^T accumulator.
PACTS_MFMA_HD constexpr RowKey s_c(int lane, int reg) {
  const Coord c = c_coord(lane, reg);
  return {c.col, c.row};
}
// The V element a lane feeds as register `reg` of A in dim tile nt of O^T += V^T P^T.
PACTS_MFMA_HD constexpr KeyDim pv_a(int lane, int reg, int nt) {
  const Coord c = a_coord(lane, reg);
  return {c.col, kM * nt + c.row};
}
// The P element a lane feeds as register `reg` of B (P^T[key][row] = P[row][key]).
PACTS_MFMA_HD constexpr RowKey pv_b(int lane, int reg) {
  const Coord c = b_coord(lane, reg);
  return {c.col, c.row};
}
// The output element O[row][dim] a lane holds in register `reg` of accumulator tile nt.
PACTS_MFMA_HD constexpr RowDim o_c(int lane, int reg, int nt) {
  const Coord c = c_coord(lane, reg);
  return {c.col, kM * nt + c.row};
}
// LDS rows of the kernel's 16-bit tiles (K, V, Q~: elements) and fp32 V tile (floats): D + 4, so
// that the 8-byte fragment reads of 16 keys and the 2-byte V^T reads (4 keys x 16 dims) spread
// over the banks. Element (key or row, d) of such a tile lies at tile_at(key or row, d, D).
PACTS_MFMA_HD constexpr int lds_stride(int D) { return D + 4; }
PACTS_MFMA_HD constexpr int tile_at(int row, int d, int D) { return row * lds_stride(D) + d; }
// The staging map of a wave: load n of lane -> (key, first of 8 dims) of a 16 x D tile, for
// n < 16 * D / 8 / 64 (every 8-element chunk of the tile exactly once).
PACTS_MFMA_HD constexpr KeyDim stage_chunk(int lane, int n, int D) {
  const int idx = lane + n * kWave;
  return {idx / (D / 8), (idx % (D / 8)) * 8};
}
// The query row of every S and O register of a lane (its softmax state's row).
PACTS_MFMA_HD constexpr int lane_row(int lane) { return s_c(lane, 0).row; }
// The lanes that hold the other keys of a lane's row: lane ^ x for x in kRowXor and their XOR
// (the butterfly of the row max and the row sum).
inline constexpr int kRowXor[2] = {16, 32};

// The facts the kernel relies on, checked at compile time here and by the host test:
// (1) P is reused in place: B register r of P.V is C register r of S (no shuffle between them);
constexpr bool p_in_place() {
  for (int l = 0; l < kWave; ++l)
    for (int r = 0; r < kRegs; ++r)
      if (!(pv_b(l, r) == s_c(l, r))) return false;
  return true;
}
// (2) every S and O register of a lane belongs to lane_row(lane), and lanes 0..15 hold rows
//     0..15 (they write the per-row states);
constexpr bool one_row_per_lane() {
  for (int l = 0; l < kWave; ++l) {
    if (l < kM && lane_row(l) != l) return false;
    for (int r = 0; r < kRegs; ++r) {
      if (s_c(l, r).row != lane_row(l)) return false;
      for (int nt = 0; nt < 2; ++nt)
        if (o_c(l, r, nt).row != lane_row(l)) return false;
    }
  }
  return true;
}
// (3) A registers 0..3 of K and B registers 0..3 of Q~ are 4 consecutive dims of one key / row
//     (one 8-byte LDS read each); S registers 0..3 are 4 consecutive keys (the bf16 pairs of P).
constexpr bool contiguous_fragments() {
  for (int l = 0; l < kWave; ++l)
    for (int kk = 0; kk < 2; ++kk)
      for (int r = 0; r < kRegs; ++r) {
        if (qk_a(l, r, kk).key != qk_a(l, 0, kk).key || qk_a(l, r, kk).d != qk_a(l, 0, kk).d + r)
          return false;
        if (qk_b(l, r, kk).row != qk_b(l, 0, kk).row || qk_b(l, r, kk).d != qk_b(l, 0, kk).d + r)
          return false;
        if (qk_a(l, 0, kk).d % 4 != 0 || qk_b(l, 0, kk).d % 4 != 0) return false;
        if (s_c(l, r).key != s_c(l, 0).key + r) return false;
      }
  return true;
}
// (4) the row butterfly: lane ^ {0, 16, 32, 48} hold the row's 16 keys, each exactly once.
constexpr bool row_butterfly_covers_keys() {
  for (int l = 0; l < kWave; ++l) {
    int seen = 0;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const int o = l ^ (a * kRowXor[0]) ^ (b * kRowXor[1]);
        if (lane_row(o) != lane_row(l)) return false;
        for (int r = 0; r < kRegs; ++r) {
          const int bit = 1 << s_c(o, r).key;
          if (seen & bit) return false;
          seen |= bit;
        }
      }
    if (seen != 0xFFFF) return false;
  }
  return true;
}
static_assert(p_in_place() && one_row_per_lane() && contiguous_fragments() &&
              row_butterfly_covers_keys());

// An fp32 value (its bits) rounded to nearest even to bf16 (a NaN stays a NaN, made quiet; an
// overflow gives Inf): what cvt.rn.bf16x2.f32 does on NVIDIA (its NaN is canonical, this one keeps
// the sign and payload bits). Integer arithmetic: exact, no floating-point environment.
PACTS_MFMA_HD constexpr uint16_t bf16_rn_bits(uint32_t bits) {
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
// Two bf16 codes packed as one register pair of an operand: `lo` is the lower register index.
PACTS_MFMA_HD constexpr uint32_t pack2(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

}  // namespace pacts::gpu::mfma

#if defined(__HIP__)
namespace pacts::gpu::mfma {

typedef short bf16x4_t __attribute__((ext_vector_type(4)));
typedef float f32x4_t __attribute__((ext_vector_type(4)));

// An accumulator's 4 registers as the builtins' vector and back.
__device__ inline f32x4_t acc_vector(const float (&c)[4]) { return {c[0], c[1], c[2], c[3]}; }
__device__ inline void store_acc(f32x4_t v, float (&c)[4]) {
  for (int x = 0; x < 4; ++x) c[x] = v[x];
}

// c += A B: a[0] holds A registers 0 (low half) and 1, a[1] registers 2 and 3; b likewise.
// Device code for gfx942 / gfx950 only (the host pass of a HIP build never runs it).
__device__ inline void mfma_16x16x16_bf16(float (&c)[4], const uint32_t (&a)[2],
                                          const uint32_t (&b)[2]) {
#if defined(__HIP_DEVICE_COMPILE__) && (defined(__gfx942__) || defined(__gfx950__))
  struct Pair {
    uint32_t lo, hi;
  };
  const bf16x4_t av = __builtin_bit_cast(bf16x4_t, Pair{a[0], a[1]});
  const bf16x4_t bv = __builtin_bit_cast(bf16x4_t, Pair{b[0], b[1]});
  store_acc(__builtin_amdgcn_mfma_f32_16x16x16bf16_1k(av, bv, acc_vector(c), 0, 0, 0), c);
#elif defined(__HIP_DEVICE_COMPILE__)
  (void)c, (void)a, (void)b;
  __builtin_trap();  // no MFMA on this target (PACTS_HIP_MFMA refuses it above)
#else
  (void)c, (void)a, (void)b;
#endif
}

// Orders the LDS accesses of the lanes of a wave (what __syncwarp is on ROCm): release, wave
// barrier, acquire.
__device__ inline void wave_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

__device__ inline int lane_id() {
  return static_cast<int>(__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)));
}

// Lane `src`'s value of a 64-bit integer (every lane active).
__device__ inline int64_t shfl_i64(int64_t v, int src) {
  const uint64_t u = static_cast<uint64_t>(v);
  const int lo = __builtin_amdgcn_ds_bpermute(src << 2, static_cast<int>(static_cast<uint32_t>(u)));
  const int hi =
      __builtin_amdgcn_ds_bpermute(src << 2, static_cast<int>(static_cast<uint32_t>(u >> 32)));
  return static_cast<int64_t>((static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32) |
                              static_cast<uint32_t>(lo));
}

// Whether any lane of the wave has `flag` set.
__device__ inline bool wave_any(bool flag) { return __builtin_amdgcn_ballot_w64(flag) != 0; }

// *p = max(*p, v) on an LDS word, relaxed, among the block.
__device__ inline void atomic_max_shared(uint32_t* p, uint32_t v) {
  __hip_atomic_fetch_max(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
}

__device__ inline uint32_t float_bits(float x) { return __builtin_bit_cast(uint32_t, x); }
__device__ inline float float_of(uint32_t b) { return __builtin_bit_cast(float, b); }

}  // namespace pacts::gpu::mfma
#endif  // __HIP__
