// The fragment index algebra of the AMD MFMA tile kernel (src/kernel_mfma.h), proven on the host.
//
// Nothing can run the kernel's AMD code here, so this test emulates v_mfma_f32_16x16x16_bf16 on
// the host (64 lanes x 4 registers per operand, D = A B + C, exact: binary64 over small integers)
// in the lane layout the public sources document (written out below on its own, NOT through
// platform/matrix_amd.h), and drives it exactly as the kernel does, through the kernel's own
// constexpr functions of platform/matrix_amd.h: the staging map and LDS stride, A from K and B
// from Q~ for S^T = K Q~^T (8-byte LDS reads, register pairs low half first), the S registers'
// (row, key), P taken in place as B of O^T += V^T P^T, A from V, the O registers' (row, dim), the
// row butterfly (lane ^ 16, lane ^ 32), the row scaling of the accumulator, the tiny-V path's P
// tile, and the bf16 rounding. Every product must equal a scalar loop, for random data and every
// head dim. A slip in an index (a swapped term, a wrong lane group) fails here.
//
// Below those, the split-V path (the fp32 V tile, round_pairs' hi / mid / lo parts, the tiny
// elements on the vector ALUs) and the masking columns (column / ja / jb, in[], the tile max and
// P of the visible keys only, the zeros of unowned slots), mirrored line by line from the kernel's
// stage_tile and key loop against scalar models.
#include "platform/matrix_amd.h"

#include "common/dequant.h"
#include "common/mask.h"
#include "common/round.h"
#include "common/softmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

namespace mf = pacts::gpu::mfma;

constexpr int kLanes = 64;

// ---- The instruction, from the documentation only ----
// v_mfma_f32_16x16x16_bf16 (ROCm/composable_kernel WarpGemmAttributeMfmaImplBf16Bf16F32M16N16K16,
// ggml-org/llama.cpp ggml-cuda/mma.cuh for AMD MFMA): lane l, register r holds
//   A[l % 16][4 (l / 16) + r],  B[4 (l / 16) + r][l % 16],  C / D[4 (l / 16) + r][l % 16];
// register r of A / B is bf16 element r of the lane's two 32-bit words, low half first.
struct Operand {
  uint32_t w[kLanes][2];
};
struct Acc {
  double v[kLanes][4];
};

float bf16_value(uint16_t code) {
  const uint32_t bits = static_cast<uint32_t>(code) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t reg_of(const Operand& op, int lane, int r) {
  return static_cast<uint16_t>(op.w[lane][r / 2] >> (16 * (r % 2)));
}

// c += A B, the documented layout, exact (binary64 of small integers times powers of two).
void mfma_reference(Acc& c, const Operand& a, const Operand& b) {
  double A[16][16] = {}, B[16][16] = {};
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < 4; ++r) {
      A[l % 16][4 * (l / 16) + r] = bf16_value(reg_of(a, l, r));
      B[4 * (l / 16) + r][l % 16] = bf16_value(reg_of(b, l, r));
    }
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < 4; ++r) {
      const int m = 4 * (l / 16) + r, n = l % 16;
      double s = 0.0;
      for (int k = 0; k < 16; ++k) s += A[m][k] * B[k][n];
      c.v[l][r] += s;
    }
}

// ---- Test data: bf16-exact values whose products and sums are exact in binary64 ----
uint16_t bf16_code(float x) {
  return static_cast<uint16_t>(pacts::kernels::common::round_to_bf16(x));
}

struct Data {
  int D;
  std::vector<uint16_t> q, k, v;  // [16][D] bf16 codes: Q~ rows, K keys, V keys
  std::vector<uint16_t> p;        // [16][16] bf16 codes: P[row][key]
  float Q(int r, int d) const { return bf16_value(q[r * D + d]); }
  float K(int j, int d) const { return bf16_value(k[j * D + d]); }
  float V(int j, int d) const { return bf16_value(v[j * D + d]); }
  float P(int r, int j) const { return bf16_value(p[r * 16 + j]); }
};

Data random_data(int D, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> mant(-15, 15), expo(-3, 3);
  const auto value = [&] {
    return bf16_code(std::ldexp(static_cast<float>(mant(rng)), expo(rng)));
  };
  Data x{D, {}, {}, {}, {}};
  for (int i = 0; i < 16 * D; ++i) {
    x.q.push_back(value());
    x.k.push_back(value());
    x.v.push_back(value());
  }
  for (int i = 0; i < 256; ++i) x.p.push_back(value());
  return x;
}

// A 16 x D tile staged into "LDS" as stage_tile does: load n of each lane writes 8 elements of
// (key, d..d+7) at tile_at(key, d, D). Every element must be written exactly once.
std::vector<uint16_t> stage(const std::vector<uint16_t>& src, int D) {
  const int stride = mf::lds_stride(D);
  std::vector<uint16_t> lds(16 * stride, 0xFFFF);
  std::vector<int> writes(16 * D, 0);
  const int loads = 16 * D / 8 / kLanes;
  for (int lane = 0; lane < kLanes; ++lane)
    for (int n = 0; n < loads; ++n) {
      const mf::KeyDim at = mf::stage_chunk(lane, n, D);
      EXPECT_EQ(at.d % 8, 0);
      for (int i = 0; i < 8; ++i) {
        lds[mf::tile_at(at.key, at.d, D) + i] = src[at.key * D + at.d + i];
        ++writes[at.key * D + at.d + i];
      }
    }
  for (int i = 0; i < 16 * D; ++i) EXPECT_EQ(writes[i], 1) << "element " << i << ", D " << D;
  return lds;
}

// The kernel's 8-byte LDS read of registers 0..3 (uint64 little endian: the low word holds
// registers 0 and 1, as the kernel's split()).
void read8(const std::vector<uint16_t>& lds, int at, uint32_t (&w)[2]) {
  uint64_t u;
  std::memcpy(&u, &lds[at], sizeof u);
  w[0] = static_cast<uint32_t>(u);
  w[1] = static_cast<uint32_t>(u >> 32);
}

// S^T = K Q~^T as the kernel computes it; returns S[row][key] assembled from the lanes' registers
// through s_c (each (row, key) exactly once).
std::array<std::array<double, 16>, 16> kernel_scores(const Data& x) {
  const int D = x.D, stride = mf::lds_stride(D);
  const std::vector<uint16_t> k_lds = stage(x.k, D);
  // Q~ in LDS as the kernel's Q~ loop writes it: (r, d) at tile_at(r, d, D).
  std::vector<uint16_t> q_lds(16 * stride, 0xFFFF);
  for (int r = 0; r < 16; ++r)
    for (int d = 0; d < D; ++d) q_lds[mf::tile_at(r, d, D)] = x.q[r * D + d];
  Acc sc{};
  for (int kk = 0; kk < D / 16; ++kk) {
    Operand a{}, b{};
    for (int lane = 0; lane < kLanes; ++lane) {
      const mf::KeyDim ka = mf::qk_a(lane, 0, kk);
      read8(k_lds, mf::tile_at(ka.key, ka.d, D), a.w[lane]);
      const mf::RowDim qb = mf::qk_b(lane, 0, kk);
      read8(q_lds, mf::tile_at(qb.row, qb.d, D), b.w[lane]);
    }
    mfma_reference(sc, a, b);
  }
  std::array<std::array<double, 16>, 16> s{};
  int seen[16][16] = {};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int r = 0; r < 4; ++r) {
      const mf::RowKey rk = mf::s_c(lane, r);
      EXPECT_EQ(rk.row, mf::lane_row(lane));
      s[rk.row][rk.key] = sc.v[lane][r];
      ++seen[rk.row][rk.key];
    }
  for (int r = 0; r < 16; ++r)
    for (int j = 0; j < 16; ++j) EXPECT_EQ(seen[r][j], 1) << "S[" << r << "][" << j << "]";
  return s;
}

// The P each lane holds in its S registers (what the kernel computes in place: P[row][key] at
// s_c(lane, r)), packed as the kernel packs pb.
Operand p_in_s_registers(const Data& x) {
  Operand pb{};
  for (int lane = 0; lane < kLanes; ++lane) {
    uint16_t pc[4];
    for (int r = 0; r < 4; ++r) {
      const mf::RowKey rk = mf::s_c(lane, r);
      pc[r] = x.p[rk.row * 16 + rk.key];
    }
    pb.w[lane][0] = mf::pack2(pc[0], pc[1]);
    pb.w[lane][1] = mf::pack2(pc[2], pc[3]);
  }
  return pb;
}

// The A operand of O^T += V^T P^T for dims [16 nt, 16 nt + 16): the kernel's pv_a reads of the
// bf16 V tile, packed two per register.
Operand v_operand(const uint16_t* v_lds, int nt, int D) {
  Operand a{};
  for (int lane = 0; lane < kLanes; ++lane) {
    uint16_t e[4];
    for (int r = 0; r < 4; ++r) {
      const mf::KeyDim at = mf::pv_a(lane, r, nt);
      e[r] = v_lds[mf::tile_at(at.key, at.d, D)];
    }
    a.w[lane][0] = mf::pack2(e[0], e[1]);
    a.w[lane][1] = mf::pack2(e[2], e[3]);
  }
  return a;
}

// O^T += V^T P^T as the kernel computes it (bf16 V from its staged tile: 2-byte reads at pv_a),
// with the accumulator of every lane scaled by `alpha` of its row before the product (the
// kernel's acc *= step.alpha); returns O[row][dim] through o_c.
std::vector<double> kernel_pv(const Data& x, const double* alpha, const std::vector<double>* acc0) {
  const int D = x.D;
  const std::vector<uint16_t> v_lds = stage(x.v, D);
  const Operand pb = p_in_s_registers(x);
  std::vector<double> o(16 * D, 0.0);
  std::vector<int> seen(16 * D, 0);
  for (int nt = 0; nt < D / 16; ++nt) {
    Acc acc{};
    for (int lane = 0; lane < kLanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        const mf::RowDim od = mf::o_c(lane, r, nt);
        acc.v[lane][r] = acc0 ? (*acc0)[od.row * D + od.d] : 0.0;
        acc.v[lane][r] *= alpha[mf::lane_row(lane)];  // the lane's row's alpha, every register
      }
    const Operand a = v_operand(v_lds.data(), nt, D);
    mfma_reference(acc, a, pb);
    for (int lane = 0; lane < kLanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        const mf::RowDim od = mf::o_c(lane, r, nt);
        o[od.row * D + od.d] = acc.v[lane][r];
        ++seen[od.row * D + od.d];
      }
  }
  for (int i = 0; i < 16 * D; ++i) EXPECT_EQ(seen[i], 1) << "O element " << i << ", D " << D;
  return o;
}

class MfmaLayout : public ::testing::TestWithParam<int> {};

TEST_P(MfmaLayout, ScoresEqualTheScalarProduct) {
  const int D = GetParam();
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const Data x = random_data(D, seed * 7919u + D);
    const auto s = kernel_scores(x);
    for (int r = 0; r < 16; ++r)
      for (int j = 0; j < 16; ++j) {
        double ref = 0.0;
        for (int d = 0; d < D; ++d) ref += static_cast<double>(x.Q(r, d)) * x.K(j, d);
        ASSERT_EQ(s[r][j], ref) << "S[" << r << "][" << j << "], D " << D << ", seed " << seed;
      }
  }
}

TEST_P(MfmaLayout, OutputEqualsTheScalarProduct) {
  const int D = GetParam();
  const double one[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const Data x = random_data(D, seed * 104729u + D);
    const std::vector<double> o = kernel_pv(x, one, nullptr);
    for (int r = 0; r < 16; ++r)
      for (int d = 0; d < D; ++d) {
        double ref = 0.0;
        for (int j = 0; j < 16; ++j) ref += static_cast<double>(x.P(r, j)) * x.V(j, d);
        ASSERT_EQ(o[r * D + d], ref) << "O[" << r << "][" << d << "], D " << D << ", seed " << seed;
      }
  }
}

// Two tiles with a per-row rescale in between (acc *= alpha of the lane's row): each output row is
// scaled by its own row's factor only.
TEST_P(MfmaLayout, RowRescaleReachesOnlyItsRow) {
  const int D = GetParam();
  const Data x1 = random_data(D, 11u + D), x2 = random_data(D, 13u + D);
  double alpha[16];
  for (int r = 0; r < 16; ++r) alpha[r] = std::ldexp(1.0, r - 8);  // distinct per row
  const double one[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const std::vector<double> o1 = kernel_pv(x1, one, nullptr);
  const std::vector<double> o2 = kernel_pv(x2, alpha, &o1);
  for (int r = 0; r < 16; ++r)
    for (int d = 0; d < D; ++d) {
      double ref = 0.0;
      for (int j = 0; j < 16; ++j) ref += static_cast<double>(x2.P(r, j)) * x2.V(j, d);
      ASSERT_EQ(o2[r * D + d], o1[r * D + d] * alpha[r] + ref) << "row " << r << ", dim " << d;
    }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, MfmaLayout, ::testing::Values(64, 128, 256));

// The row max and row sum butterflies (lane ^ 16, then lane ^ 32) over the lanes' 4 S registers
// give every lane its row's value over the 16 keys, and the in-lane order the kernel uses.
TEST(MfmaLayoutRows, ButterflyGivesEveryLaneItsRowsSumAndMax) {
  const Data x = random_data(128, 5u);
  const auto s = kernel_scores(x);
  double sum[kLanes], mx[kLanes];
  for (int lane = 0; lane < kLanes; ++lane) {
    double v[4];
    for (int r = 0; r < 4; ++r) {
      const mf::RowKey rk = mf::s_c(lane, r);
      v[r] = s[rk.row][rk.key];
    }
    sum[lane] = (v[0] + v[1]) + (v[2] + v[3]);
    mx[lane] = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
  }
  for (int x_or : mf::kRowXor) {
    double ns[kLanes], nm[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      ns[lane] = sum[lane] + sum[lane ^ x_or];
      nm[lane] = std::max(mx[lane], mx[lane ^ x_or]);
    }
    std::memcpy(sum, ns, sizeof sum);
    std::memcpy(mx, nm, sizeof mx);
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    const int row = mf::lane_row(lane);
    double ref = 0.0, ref_max = -INFINITY;
    for (int j = 0; j < 16; ++j) {
      ref += s[row][j];
      ref_max = std::max(ref_max, s[row][j]);
    }
    EXPECT_EQ(sum[lane], ref) << "lane " << lane;
    EXPECT_EQ(mx[lane], ref_max) << "lane " << lane;
  }
}

// The kernel's structural facts (also static_asserts in matrix_amd.h), and the lanes that write
// the per-row states (lanes 0..15 hold rows 0..15).
TEST(MfmaLayoutRows, StructuralFacts) {
  EXPECT_TRUE(mf::p_in_place());
  EXPECT_TRUE(mf::one_row_per_lane());
  EXPECT_TRUE(mf::contiguous_fragments());
  EXPECT_TRUE(mf::row_butterfly_covers_keys());
  for (int lane = 0; lane < 16; ++lane) EXPECT_EQ(mf::lane_row(lane), lane);
  // The documented C layout against the kernel's functions, element by element.
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(mf::c_coord(l, r).row, 4 * (l / 16) + r);
      EXPECT_EQ(mf::c_coord(l, r).col, l % 16);
    }
}

// The tiny-V path: P written to the stage's fp32 P tile from the S registers, read back per
// output element as P[row][0..15] against V[0..15][dim]: the same O as the matrix path.
TEST(MfmaLayoutRows, TinyPathPTileMatchesTheMatrixPath) {
  for (int D : {64, 128, 256}) {
    const Data x = random_data(D, 17u + D);
    std::vector<double> pt(256, std::nan(""));
    for (int lane = 0; lane < kLanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        const mf::RowKey rk = mf::s_c(lane, r);
        pt[rk.row * 16 + rk.key] = x.P(rk.row, rk.key);
      }
    for (int nt = 0; nt < D / 16; ++nt)
      for (int lane = 0; lane < kLanes; ++lane)
        for (int r = 0; r < 4; ++r) {
          const mf::RowDim o = mf::o_c(lane, r, nt);
          double s = 0.0, ref = 0.0;
          for (int k = 0; k < 16; ++k) {
            s += pt[o.row * 16 + k] * x.V(k, o.d);
            ref += static_cast<double>(x.P(o.row, k)) * x.V(k, o.d);
          }
          ASSERT_EQ(s, ref) << "D " << D << ", lane " << lane << ", reg " << r << ", tile " << nt;
        }
  }
}

// The kernel's fp32 -> bf16 rounding (RNE, integer) against kernels/common's binary64 rounding.
TEST(MfmaLayoutRows, Bf16RoundingIsRoundToNearestEven) {
  std::mt19937 rng(2026);
  std::uniform_int_distribution<uint32_t> bits;
  const auto check = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    const uint16_t got = mf::bf16_rn_bits(b);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_value(got))) << std::hex << b;
      return;
    }
    EXPECT_EQ(got, bf16_code(f)) << std::hex << b;
  };
  for (int i = 0; i < 200000; ++i) check(bits(rng));
  for (uint32_t hi = 0; hi < 0x10000u; hi += 1) {  // every bf16 code's ties and neighbours
    const uint32_t b = hi << 16;
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) check(b | lo);
  }
}

// ---- The split-V path and the masking columns (src/kernel_mfma.h), mirrored ----
namespace cm = pacts::kernels::common;
using cm::KeyRange;

// Host copies of the kernel's device helpers, same bodies: is_tiny and residual (src/kernel.h),
// round_pairs (kernel_mfma.h, mfma_detail), float_bits (matrix_amd.h).
uint32_t float_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
bool is_tiny(float v) { return v != 0.0f && std::fabs(v) < 0x1p-102f; }
float residual(float x, float r) { return r - r == 0.0f ? x - r : 0.0f; }
template <int N>
void round_pairs(float (&x)[N], uint32_t (&w)[N / 2], bool keep) {
  for (int i = 0; i < N / 2; ++i) {
    const uint16_t lo = mf::bf16_rn_bits(float_bits(x[2 * i]));
    const uint16_t hi = mf::bf16_rn_bits(float_bits(x[2 * i + 1]));
    w[i] = mf::pack2(lo, hi);
    if (keep) {
      x[2 * i] = residual(x[2 * i], cm::bf16_to_float(lo));
      x[2 * i + 1] = residual(x[2 * i + 1], cm::bf16_to_float(hi));
    }
  }
}

// MfmaShape<D, true>'s stage (16-bit elements): K tile (bf16), fp32 V tile at kVAt, fp32 P tile
// (16 x 16) at kPAt, kStageElems in all.
struct SplitStage {
  int kKElems, kVAt, kPAt, kStageElems, kLoads, kGroup;
};
SplitStage split_stage(int D) {
  const int kKElems = 16 * mf::lds_stride(D), kVAt = kKElems,
            kPAt = kVAt + 2 * 16 * mf::lds_stride(D);
  return {kKElems, kVAt, kPAt, kPAt + 2 * 16 * 16, 16 * (D / 8) / kLanes, 2};
}

// One wave's stage as bytes, poisoned (0xFF: an fp32 and a bf16 NaN), with the region (1 K,
// 2 V, 3 P) that wrote each 16-bit element: a write outside its region or over another region's
// element fails.
struct Stage {
  SplitStage s;
  std::vector<unsigned char> bytes;
  std::vector<int> region;
  explicit Stage(int D)
      : s(split_stage(D)),
        bytes(2 * static_cast<size_t>(s.kStageElems), 0xFF),
        region(s.kStageElems, 0) {}
  bool mark(int e16, int n16, int reg) {
    const int lo[4] = {0, 0, s.kVAt, s.kPAt}, hi[4] = {0, s.kKElems, s.kPAt, s.kStageElems};
    for (int i = e16; i < e16 + n16; ++i) {
      if (i < lo[reg] || i >= hi[reg]) {
        ADD_FAILURE() << "region " << reg << " writes element " << i;
        return false;
      }
      EXPECT_TRUE(region[i] == 0 || region[i] == reg) << "element " << i << " of two regions";
      region[i] = reg;
    }
    return true;
  }
  // reinterpret_cast<float*>(stage + at16)[idx]: the float store / load of the kernel.
  void store_f32(int at16, int idx, float v, int reg) {
    const int e16 = at16 + 2 * idx;
    if (mark(e16, 2, reg)) std::memcpy(&bytes[2 * static_cast<size_t>(e16)], &v, sizeof v);
  }
  float load_f32(int at16, int idx) const {
    const size_t off = 2 * static_cast<size_t>(at16) + 4 * static_cast<size_t>(idx);
    EXPECT_LE(off + 4, bytes.size()) << "a load past the stage";
    if (off + 4 > bytes.size()) return std::nanf("");
    float v;
    std::memcpy(&v, &bytes[off], sizeof v);
    return v;
  }
  void store16(int e16, uint16_t v) {
    if (mark(e16, 1, 1)) std::memcpy(&bytes[2 * static_cast<size_t>(e16)], &v, sizeof v);
  }
};

// The split key loop for one tile [t0, t0 + 16) of one wave, as kernel_mfma.h writes it:
// slot_entry (owned keys only), stage_tile's split branch (fp32 V at kVAt + tile_at(slot, col, D)
// as floats, zeros for unowned slots, the tiny vote), P packed from the lanes' S registers, the
// tiny path (P tile at kPAt, per output element a fp32 sum over the keys in key order, added to
// acc), then O^T += V^T P^T with V read at pv_a, tiny elements as 0, and v_parts round_pairs<4>
// parts. `pool[slot * D + d]` is the decoded, scaled V of key t0 + slot (NaN where unowned: it
// must never be read), pv[row][key] the fp32 P of the tile. Returns O[row][d] through o_c.
struct SplitOut {
  std::vector<double> o;
  int unowned_reads = 0;
  bool tiny = false;
};
SplitOut kernel_split_pv(int D, int64_t t0, KeyRange owned, const std::vector<float>& pool,
                         const float (&pv)[16][16], int v_parts) {
  Stage st(D);
  const SplitStage& S = st.s;
  // The waves' stages follow each other (MfmaSmem::stage): each must start 16-byte aligned for
  // the float4 stores.
  EXPECT_EQ(2 * S.kStageElems % 16, 0);
  SplitOut out;
  int64_t entry[kLanes];  // slot_entry: the key, or -1 (an unowned key or a lane >= 16)
  for (int lane = 0; lane < kLanes; ++lane)
    entry[lane] = lane < 16 && owned.contains(t0 + lane) ? t0 + lane : -1;
  // stage_tile, split branch (V only; K written as zeros / codes to check the regions).
  bool tiny_lane[kLanes] = {};
  for (int lane = 0; lane < kLanes; ++lane)
    for (int g0 = 0; g0 < S.kLoads; g0 += S.kGroup)
      for (int i = 0; i < S.kGroup; ++i) {
        const mf::KeyDim at = mf::stage_chunk(lane, g0 + i, D);
        const int slot = at.key, col = at.d;
        const int64_t e = entry[slot];  // shfl_i64(entry, slot)
        const bool own = e >= 0;
        // float* vd = reinterpret_cast<float*>(stage + kVAt) + tile_at(slot, col, D): (vd, vi).
        const int vd = S.kVAt, vi = mf::tile_at(slot, col, D);
        EXPECT_EQ((2 * S.kVAt + 4 * vi) % 16, 0) << "float4 store not 16-byte aligned";
        if (!own) {
          for (int j = 0; j < 8; ++j) st.store16(mf::tile_at(slot, col, D) + j, 0);
          for (int j = 0; j < 8; ++j) st.store_f32(vd, vi + j, 0.0f, 2);
          continue;
        }
        float x[8];
        for (int j = 0; j < 8; ++j) {
          x[j] = pool[static_cast<size_t>(e - t0) * D + col + j];
          if (!owned.contains(e)) ++out.unowned_reads;
        }
        for (int j = 0; j < 8; ++j) st.store16(mf::tile_at(slot, col, D) + j, 0x3F80);
        for (int j = 0; j < 8; ++j) tiny_lane[lane] |= is_tiny(x[j]);
        for (int j = 0; j < 8; ++j) st.store_f32(vd, vi + j, x[j], 2);
      }
  bool tiny = false;  // wave_any(tiny)
  for (int lane = 0; lane < kLanes; ++lane) tiny |= tiny_lane[lane];
  out.tiny = tiny;
  // P in bf16 from the S registers, packed as pb.
  uint16_t pc[kLanes][4];
  Operand pb{};
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int r = 0; r < 4; ++r) {
      const mf::RowKey rk = mf::s_c(lane, r);
      pc[lane][r] = mf::bf16_rn_bits(float_bits(pv[rk.row][rk.key]));
    }
    pb.w[lane][0] = mf::pack2(pc[lane][0], pc[lane][1]);
    pb.w[lane][1] = mf::pack2(pc[lane][2], pc[lane][3]);
  }
  std::vector<Acc> acc(D / 16, Acc{});
  if (tiny) {
    for (int lane = 0; lane < kLanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        const mf::RowKey rk = mf::s_c(lane, r);
        st.store_f32(S.kPAt, rk.row * 16 + rk.key, cm::bf16_to_float(pc[lane][r]), 3);
      }
    for (int lane = 0; lane < kLanes; ++lane) {
      const int my_row = mf::lane_row(lane);
      for (int n = 0; n < D / 16; ++n) {
        float ts[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int k = 0; k < 16; ++k) {
          const float pk = st.load_f32(S.kPAt, my_row * 16 + k);
          for (int x = 0; x < 4; ++x) {
            const float v = st.load_f32(S.kVAt, mf::tile_at(k, mf::o_c(lane, x, n).d, D));
            const float prod = pk * (is_tiny(v) ? v : 0.0f);  // fp32, no contraction
            ts[x] += prod;
          }
        }
        for (int x = 0; x < 4; ++x) acc[n].v[lane][x] += ts[x];
      }
    }
  }
  for (int n = 0; n < D / 16; ++n) {
    float xs[kLanes][4];
    for (int lane = 0; lane < kLanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        const mf::KeyDim at = mf::pv_a(lane, r, n);
        const float v = st.load_f32(S.kVAt, mf::tile_at(at.key, at.d, D));
        xs[lane][r] = is_tiny(v) ? 0.0f : v;
      }
    for (int part = 0; part < v_parts; ++part) {
      Operand a{};
      for (int lane = 0; lane < kLanes; ++lane) round_pairs<4>(xs[lane], a.w[lane], true);
      mfma_reference(acc[n], a, pb);
    }
  }
  out.o.assign(16 * static_cast<size_t>(D), std::nan(""));
  std::vector<int> seen(16 * D, 0);
  for (int n = 0; n < D / 16; ++n)
    for (int lane = 0; lane < kLanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        const mf::RowDim od = mf::o_c(lane, r, n);
        out.o[od.row * D + od.d] = acc[n].v[lane][r];
        ++seen[od.row * D + od.d];
      }
  for (int i = 0; i < 16 * D; ++i) EXPECT_EQ(seen[i], 1) << "O element " << i << ", D " << D;
  // Every slot of the K and V tiles was written (no poison left for the products to read).
  for (int k = 0; k < 16; ++k)
    for (int d = 0; d < D; ++d) {
      EXPECT_EQ(st.region[mf::tile_at(k, d, D)], 1) << "K slot " << k << ", dim " << d;
      EXPECT_EQ(st.region[S.kVAt + 2 * mf::tile_at(k, d, D)], 2) << "V slot " << k << ", dim " << d;
    }
  return out;
}

// Split-V test data for one tile. Column (dim) classes, so that the checks can be exact:
//   kExact3: full 24-bit fp32 values in a 7-binade band per column from 2^-102 up to 2^96 (R2), so
//            that hi, mid and lo are all needed; columns at the bottom (band from 2^-102) also get
//            tiny values with 4 significant bits in [2^-106, 2^-102) and the extremes of the band;
//   kExact1: values exact in bf16 (4 significant bits: fp8 without a scale, e2m1 times a power of
//            two), tiny ones (down to 2^-130) with 2 significant bits at the bottom columns;
//   kWide:   tiny values with full mantissas down to the fp32 subnormals (2^-149) next to normal
//            ones in the same column: the kernel's fp32 tiny sum rounds there.
// Within a column every product with P and every partial sum fits binary64's 53 bits (the
// emulated MFMA is exact), and for kExact* the tiny products and sums fit fp32's 24 bits.
enum class VClass { kExact3, kExact1, kWide };
struct SplitData {
  int D;
  int64_t t0;
  KeyRange owned;
  std::vector<float> pool;  // [16][D], NaN where the key is not owned
  float pv[16][16];         // fp32 P, 0 for keys the row does not see (unowned ones included)
};
SplitData split_data(int D, VClass cls, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<int> pct(0, 99);
  SplitData x{D, 16 * static_cast<int64_t>(3 + seed % 5), {}, {}, {}};
  // A partial tile for odd seeds (unowned slots at both ends), the whole tile for even ones.
  x.owned = seed % 2 ? KeyRange{x.t0 + 2, x.t0 + 13} : KeyRange{x.t0 - 40, x.t0 + 70};
  const auto mant = [&](int sig) {  // 1.xxx with sig significant bits
    return 1.0f + static_cast<float>(bits(rng) >> (33 - sig)) * std::ldexp(1.0f, 1 - sig);
  };
  const auto sign = [&] { return bits(rng) & 1 ? -1.0f : 1.0f; };
  std::vector<int> band(D);
  for (int d = 0; d < D; ++d) {
    const int bands[10] = {-102, -102, -95, -60, -20, -3, 0, 20, 60, 89};
    band[d] = bands[(d * 7 + seed) % 10];
  }
  x.pool.assign(16 * static_cast<size_t>(D), std::nan(""));
  for (int k = 0; k < 16; ++k) {
    if (!x.owned.contains(x.t0 + k)) continue;
    for (int d = 0; d < D; ++d) {
      const int e = band[d] + static_cast<int>(bits(rng) % 7);
      const int c = pct(rng);
      float v;
      if (cls == VClass::kExact3) {
        if (c < 5)
          v = 0.0f;
        else if (c < 10)
          v = sign() * std::ldexp(mant(8), e);  // one part suffices
        else if (c < 13)
          v = sign() * std::ldexp(2.0f - 0x1p-23f, band[d]);  // hi rounds up a binade
        else if (c < 16)
          v = sign() * std::ldexp(1.0f, band[d]);  // the band's bottom
        else if (c < 30 && band[d] == -102)
          v = sign() * std::ldexp(mant(4), -106 + static_cast<int>(bits(rng) % 4));  // tiny
        else
          v = sign() * std::ldexp(mant(24), e);
      } else if (cls == VClass::kExact1) {
        if (c < 5)
          v = 0.0f;
        else if (c < 30 && band[d] == -102)
          v = sign() * std::ldexp(mant(2), -130 + static_cast<int>(bits(rng) % 8));  // tiny
        else
          v = sign() * std::ldexp(mant(4), e);
      } else {
        if (c < 40 && band[d] <= -95)
          v = sign() * std::ldexp(mant(24), -149 + static_cast<int>(bits(rng) % 46));  // tiny
        else
          v = sign() * std::ldexp(mant(24), e);
      }
      x.pool[static_cast<size_t>(k) * D + d] = v;
    }
  }
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k) {
      const bool seen = x.owned.contains(x.t0 + k) && pct(rng) >= 15;
      // fp32 P in [2^-3, 1] (24-bit mantissas: the kernel's rounding to bf16 matters), and 1.
      x.pv[r][k] = !seen          ? 0.0f
                   : pct(rng) < 5 ? 1.0f
                                  : std::ldexp(mant(24), -3 + static_cast<int>(bits(rng) % 3));
    }
  return x;
}

// The scalar model: O[r][d] = sum over the owned keys of bf16(P) * v, in binary64 (exact for the
// data above), with round_to_bf16 (kernels/common, binary64) for P; T and A: sums of |terms| of
// the tiny keys and of all keys (the tolerance of kWide).
struct SplitRef {
  std::vector<double> o, tiny_abs, all_abs;
};
SplitRef split_reference(const SplitData& x) {
  const int D = x.D;
  SplitRef ref{std::vector<double>(16 * D, 0.0), std::vector<double>(16 * D, 0.0),
               std::vector<double>(16 * D, 0.0)};
  for (int r = 0; r < 16; ++r)
    for (int d = 0; d < D; ++d)
      for (int k = 0; k < 16; ++k) {
        if (!x.owned.contains(x.t0 + k)) continue;
        const double p = bf16_value(static_cast<uint16_t>(cm::round_to_bf16(x.pv[r][k])));
        const float v = x.pool[static_cast<size_t>(k) * D + d];
        const double term = p * v;
        ref.o[r * D + d] += term;
        ref.all_abs[r * D + d] += std::fabs(term);
        if (v != 0.0f && std::fabs(v) < 0x1p-102f) ref.tiny_abs[r * D + d] += std::fabs(term);
      }
  return ref;
}

// The data needs what the test claims: values whose bf16 parts hi + mid + lo all differ from 0,
// tiny values, and (for 3 parts) hi + mid + lo == v for every non-tiny value.
void check_split_data(const SplitData& x, VClass cls) {
  int three = 0, tinies = 0;
  for (float v : x.pool) {
    if (std::isnan(v)) continue;
    if (is_tiny(v)) {
      ++tinies;
      continue;
    }
    float p[2] = {v, 0.0f};
    uint32_t w[1];
    uint16_t code[3];
    for (int part = 0; part < 3; ++part) {
      round_pairs<2>(p, w, true);
      code[part] = static_cast<uint16_t>(w[0] & 0xFFFFu);
    }
    const double sum =
        static_cast<double>(bf16_value(code[0])) + bf16_value(code[1]) + bf16_value(code[2]);
    if (cls == VClass::kExact3) {
      EXPECT_EQ(sum, v) << std::hexfloat << v;
    }
    if (cls == VClass::kExact1) {
      EXPECT_EQ(bf16_value(code[0]), v) << std::hexfloat << v;
    }
    three += (code[2] & 0x7FFF) != 0;
  }
  EXPECT_GT(tinies, 0);
  if (cls != VClass::kExact1) {
    EXPECT_GT(three, 16 * x.D / 4);
  }
}

// (b) Split V: the kernel's fp32 V tile, round_pairs' 3 parts (or 1 for bf16-exact V) and the
// tiny path give sum_k bf16(P_k) v_k. Exact (ASSERT_EQ) for kExact3 / kExact1: hi + mid + lo = v
// for |v| >= 2^-102, one part = v for bf16-exact V, the tiny products and their fp32 sum exact,
// and the emulated MFMA (binary64) exact on these data. kWide with a tolerance, the only place
// where rounding and order matter: the kernel sums P t of the tiny elements in fp32 (each product and
// addition rounds, products below 2^-126 on the subnormal grid 2^-149; 32 operations:
// <= 2^-18 T + 2^-140 absolute) and adds that sum before the matrix parts (binary64 here:
// 2^-48 A covers the emulation's own roundings where a column spans more than 53 bits).
TEST(MfmaSplitV, ThreePartsAndTinyPathEqualTheScalarSum) {
  for (int D : {64, 128, 256})
    for (VClass cls : {VClass::kExact3, VClass::kExact1, VClass::kWide})
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        const SplitData x = split_data(D, cls, seed * 31u + static_cast<uint32_t>(D));
        check_split_data(x, cls);
        const SplitOut got =
            kernel_split_pv(D, x.t0, x.owned, x.pool, x.pv, cls == VClass::kExact1 ? 1 : 3);
        const SplitRef ref = split_reference(x);
        EXPECT_EQ(got.unowned_reads, 0);
        EXPECT_TRUE(got.tiny);
        for (int r = 0; r < 16; ++r)
          for (int d = 0; d < D; ++d) {
            const int i = r * D + d;
            if (cls != VClass::kWide) {
              ASSERT_EQ(got.o[i], ref.o[i])
                  << std::hexfloat << "O[" << r << "][" << d << "], D " << D << ", class "
                  << static_cast<int>(cls) << ", seed " << seed;
            } else {
              const double tol = 0x1p-18 * ref.tiny_abs[i] + 0x1p-140 + 0x1p-48 * ref.all_abs[i];
              ASSERT_LE(std::fabs(got.o[i] - ref.o[i]), tol)
                  << std::hexfloat << "O[" << r << "][" << d << "], D " << D << ", seed " << seed;
            }
          }
      }
}

// Without a tiny element the vote is false and the tiny path is skipped: the matrix parts alone
// give the sum; with one part only (v_parts 1) a V that is not bf16-exact is NOT reproduced (the
// data of the 3-part case needs its mid and lo parts).
TEST(MfmaSplitV, NoTinyVoteAndOnePartIsNotEnoughForFp32V) {
  const int D = 128;
  SplitData x = split_data(D, VClass::kExact3, 7u);
  for (float& v : x.pool)
    if (is_tiny(v)) v = 0x1p-102f;  // the smallest non-tiny magnitude: three parts, exact
  const SplitRef ref = split_reference(x);
  const SplitOut three = kernel_split_pv(D, x.t0, x.owned, x.pool, x.pv, 3);
  EXPECT_FALSE(three.tiny);
  EXPECT_EQ(three.o, ref.o);
  const SplitOut one = kernel_split_pv(D, x.t0, x.owned, x.pool, x.pv, 1);
  EXPECT_NE(one.o, ref.o);
}

// (c) The masking columns. The kernel's selection for one tile and every lane / register:
// column() clamps the row's visible range to the tile, in[r] = ja <= key < jb for the key
// s_c(lane, r).key; then sv, the tile max over the selected keys, the butterflies (lane ^ 16,
// lane ^ 32), begin_tile, P = in ? expf(sv - shift) : 0 (a select), the fp32 sum and the bf16 P.
struct MaskStep {
  bool in[kLanes][4];
  float tile_max[kLanes], sum[kLanes], pv[kLanes][4];
  uint16_t pc[kLanes][4];
};
MaskStep kernel_mask_step(const float (&sc)[16][16], const KeyRange (&vis_of_row)[16], int64_t t0,
                          float softcap, float logit_down) {
  MaskStep m{};
  float sv[kLanes][4];
  for (int lane = 0; lane < kLanes; ++lane) {
    const KeyRange vis = vis_of_row[mf::lane_row(lane)];
    const auto column = [&](int64_t j) {
      return static_cast<int>(j < t0 ? 0 : (j - t0 > 16 ? 16 : j - t0));
    };
    const int ja = column(vis.begin), jb = column(vis.end);
    float tile_max = -INFINITY;
    for (int r = 0; r < 4; ++r) {
      const int key = mf::s_c(lane, r).key;
      m.in[lane][r] = key >= ja && key < jb;
      sv[lane][r] = sc[mf::s_c(lane, r).row][key] * logit_down;
      if (m.in[lane][r] && softcap > 0.0f) sv[lane][r] = cm::soft_cap(sv[lane][r], softcap);
      if (m.in[lane][r]) tile_max = cm::max_finite(tile_max, sv[lane][r]);
    }
    m.tile_max[lane] = tile_max;
  }
  for (int x_or : mf::kRowXor) {
    float next[kLanes];
    for (int lane = 0; lane < kLanes; ++lane)
      next[lane] = cm::max_finite(m.tile_max[lane], m.tile_max[lane ^ x_or]);
    std::memcpy(m.tile_max, next, sizeof next);
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    cm::SoftmaxState state;
    const cm::TileStep step = state.begin_tile(m.tile_max[lane]);
    for (int r = 0; r < 4; ++r)
      m.pv[lane][r] = m.in[lane][r] ? expf(sv[lane][r] - step.shift) : 0.0f;
    m.sum[lane] = (m.pv[lane][0] + m.pv[lane][1]) + (m.pv[lane][2] + m.pv[lane][3]);
    for (int r = 0; r < 4; ++r) m.pc[lane][r] = mf::bf16_rn_bits(float_bits(m.pv[lane][r]));
  }
  for (int x_or : mf::kRowXor) {
    float next[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) next[lane] = m.sum[lane] + m.sum[lane ^ x_or];
    std::memcpy(m.sum, next, sizeof next);
  }
  return m;
}

// The scalar model of one row: the keys t0 + k with vis.contains; their max (after the softcap),
// P = expf(s - max) and sum. Logits of the other keys are set far above the visible ones (a leak
// moves the max, and every P with it) or to NaN.
void check_mask_step(const MaskStep& m, const float (&sc)[16][16], const KeyRange (&vis_of_row)[16],
                     int64_t t0, float softcap, const char* what) {
  for (int lane = 0; lane < kLanes; ++lane) {
    const int row = mf::lane_row(lane);
    const KeyRange vis = vis_of_row[row];
    float s[16], mx = -INFINITY;
    double sum = 0.0;
    int n = 0;
    for (int k = 0; k < 16; ++k) {
      s[k] = softcap > 0.0f ? cm::soft_cap(sc[row][k], softcap) : sc[row][k];
      if (vis.contains(t0 + k)) mx = std::max(mx, s[k]), ++n;
    }
    ASSERT_EQ(m.tile_max[lane], mx) << what << ", lane " << lane << ", t0 " << t0;
    for (int k = 0; k < 16; ++k)
      if (vis.contains(t0 + k)) sum += expf(s[k] - mx);
    for (int r = 0; r < 4; ++r) {
      const int key = mf::s_c(lane, r).key;
      const bool visible = vis.contains(t0 + key);
      ASSERT_EQ(m.in[lane][r], visible)
          << what << ", lane " << lane << ", key " << key << ", t0 " << t0;
      const float p = visible ? expf(s[key] - mx) : 0.0f;
      ASSERT_EQ(float_bits(m.pv[lane][r]), float_bits(p))
          << what << ", lane " << lane << ", key " << key;
      ASSERT_EQ(m.pc[lane][r], cm::round_to_bf16(p))
          << what << ", lane " << lane << ", key " << key;
    }
    // The fp32 sum's order (pairs, then the butterfly) differs from this loop's: 16 additions.
    ASSERT_LE(std::fabs(m.sum[lane] - sum), 16 * 0x1p-24 * sum) << what << ", lane " << lane;
    if (n == 0) {
      ASSERT_EQ(m.sum[lane], 0.0f) << what << ", lane " << lane;
    }
  }
}

// Hand-made rows against the tile [32, 48): none (empty, before, after, begin > end), a prefix, a
// suffix, a middle part, the whole tile, one key at either end, ranges ending / starting exactly
// at the tile's bounds. The selection must be exactly the row's keys in the tile, the tile max and
// P over those only; P.V (bf16 V path, every head dim) then takes the visible keys only.
TEST(MfmaMasking, ColumnsSelectExactlyTheVisibleKeys) {
  const int64_t t0 = 32;
  const KeyRange vis[16] = {{0, 0},   {0, 32},  {48, 60}, {10, 37}, {41, 90}, {35, 44},
                            {0, 100}, {32, 48}, {32, 33}, {47, 48}, {45, 40}, {31, 33},
                            {47, 49}, {33, 47}, {48, 49}, {16, 32}};
  std::mt19937 rng(4242);
  std::uniform_real_distribution<float> logit(-8.0f, 8.0f);
  for (int variant = 0; variant < 3; ++variant) {
    float sc[16][16];
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k)
        sc[r][k] = vis[r].contains(t0 + k) ? logit(rng) : variant == 2 ? std::nanf("") : 100.0f + k;
    const float softcap = variant == 1 ? 20.0f : 0.0f;
    const MaskStep m = kernel_mask_step(sc, vis, t0, softcap, 1.0f);
    check_mask_step(m, sc, vis, t0, softcap, "hand-made rows");
    // P.V from the P in the S registers (in place) with a V whose invisible keys are non-zero.
    for (int D : {64, 128, 256}) {
      Data x = random_data(D, 99u + static_cast<uint32_t>(D + variant));
      for (int lane = 0; lane < kLanes; ++lane)
        for (int r = 0; r < 4; ++r) {
          const mf::RowKey rk = mf::s_c(lane, r);
          x.p[rk.row * 16 + rk.key] = m.pc[lane][r];
        }
      const double one[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
      const std::vector<double> o = kernel_pv(x, one, nullptr);
      for (int r = 0; r < 16; ++r) {
        float mx = -INFINITY;
        for (int k = 0; k < 16; ++k)
          if (vis[r].contains(t0 + k))
            mx = std::max(mx, softcap > 0.0f ? cm::soft_cap(sc[r][k], softcap) : sc[r][k]);
        for (int d = 0; d < D; ++d) {
          double ref = 0.0;
          for (int k = 0; k < 16; ++k) {
            if (!vis[r].contains(t0 + k)) continue;
            const float s = softcap > 0.0f ? cm::soft_cap(sc[r][k], softcap) : sc[r][k];
            ref += static_cast<double>(
                       bf16_value(static_cast<uint16_t>(cm::round_to_bf16(expf(s - mx))))) *
                   x.V(k, d);
          }
          ASSERT_EQ(o[r * D + d], ref)
              << "O[" << r << "][" << d << "], D " << D << ", variant " << variant;
        }
      }
    }
  }
}

// The kernel's rows through its visible() (row_keys of token (r0 + r) / group, intersected with
// the partition), span (the owned keys) and tiles [first, last): over the tiles, every visible key
// of a row is selected exactly once, no other key, and never an unowned slot (slot_entry: outside
// span), whose K and V are the kernel's zeros. Random contexts, windows, groups, partitions.
TEST(MfmaMasking, KernelRowsOverTheirTilesSelectEachVisibleKeyOnce) {
  std::mt19937 rng(777);
  std::uniform_int_distribution<int> u(0, 1 << 20);
  for (int it = 0; it < 300; ++it) {
    const int64_t context = u(rng) % 200;
    const int32_t group = 1 << (u(rng) % 4), q_len = 1 + u(rng) % 16;
    const int32_t window = u(rng) % 3 ? 0 : 1 + u(rng) % 40;
    const int64_t psize = u(rng) % 2 ? 0 : 16 << (u(rng) % 3);  // 0: direct
    const int64_t z = psize ? u(rng) % (context / psize + 1) : 0;
    const int32_t tokens = q_len * group;
    const int32_t r0 = 16 * (u(rng) % ((tokens + 15) / 16));
    const int32_t rows = std::min(16, tokens - r0);
    const KeyRange seq = cm::sequence_keys(context, q_len, window);
    const KeyRange part = psize == 0 ? seq : cm::intersect(cm::partition_keys(z, psize), seq);
    const auto visible = [&](int r) -> KeyRange {
      if (r >= rows) return {0, 0};
      return cm::intersect(cm::row_keys(context, q_len, window, (r0 + r) / group), part);
    };
    KeyRange span{INT64_MAX, INT64_MIN}, vis[16];
    for (int r = 0; r < 16; ++r) {
      vis[r] = visible(r);
      if (r >= rows || vis[r].empty()) continue;
      span.begin = std::min(span.begin, vis[r].begin);
      span.end = std::max(span.end, vis[r].end);
    }
    const int64_t first = span.empty() ? 0 : span.begin / 16;
    const int64_t last = span.empty() ? 0 : (span.end + 16 - 1) / 16;
    std::vector<int> selected(16 * 512, 0);  // [row][key], keys < 512
    float sc[16][16];
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k) sc[r][k] = static_cast<float>(k - r);
    for (int64_t tile = first; tile < last; ++tile) {
      const int64_t t0 = tile * 16;
      const MaskStep m = kernel_mask_step(sc, vis, t0, 0.0f, 1.0f);
      for (int lane = 0; lane < kLanes; ++lane)
        for (int r = 0; r < 4; ++r) {
          if (!m.in[lane][r]) continue;
          const mf::RowKey rk = mf::s_c(lane, r);
          const int64_t j = t0 + rk.key;
          ASSERT_TRUE(span.contains(j)) << "an unowned slot selected: key " << j << ", it " << it;
          ++selected[rk.row * 512 + j];
        }
      check_mask_step(m, sc, vis, t0, 0.0f, "kernel rows");
    }
    for (int r = 0; r < 16; ++r)
      for (int64_t j = 0; j < 512; ++j)
        ASSERT_EQ(selected[r * 512 + j], vis[r].contains(j) ? 1 : 0)
            << "row " << r << ", key " << j << ", it " << it << ", context " << context
            << ", window " << window << ", group " << group << ", partition " << psize << "/" << z;
  }
}

// (c) The bf16 branch of stage_tile (kSplitV false): with kGroup loads in flight (4 at D 128,
// else 2), owned slots get the pool's codes at tile_at(slot, col, D) and unowned ones the kernel's
// zeros (the pool holds NaN codes there and must not be read); P.V from that tile, with P 0 for
// the unowned keys, is then the scalar sum over the owned keys (no 0 * NaN).
TEST(MfmaMasking, Bf16StageZeroFillsUnownedSlots) {
  for (int D : {64, 128, 256}) {
    const int kLoads = 16 * (D / 8) / kLanes, kGroup = D == 128 ? 4 : 2;
    ASSERT_EQ(kLoads % kGroup, 0);
    const Data x = random_data(D, 123u + static_cast<uint32_t>(D));
    const int64_t t0 = 80;
    for (const KeyRange owned :
         {KeyRange{83, 90}, KeyRange{0, 81}, KeyRange{95, 200}, KeyRange{0, 500}}) {
      std::vector<uint16_t> kpool(x.k), vpool(x.v);
      for (int k = 0; k < 16; ++k)
        if (!owned.contains(t0 + k))
          for (int d = 0; d < D; ++d) kpool[k * D + d] = vpool[k * D + d] = 0x7FC1;  // NaN
      int64_t entry[kLanes];
      for (int lane = 0; lane < kLanes; ++lane)
        entry[lane] = lane < 16 && owned.contains(t0 + lane) ? t0 + lane : -1;
      std::vector<uint16_t> k_lds(16 * mf::lds_stride(D), 0xFFFF), v_lds(k_lds);
      int unowned_reads = 0;
      for (int lane = 0; lane < kLanes; ++lane)
        for (int g0 = 0; g0 < kLoads; g0 += kGroup)
          for (int i = 0; i < kGroup; ++i) {
            const mf::KeyDim at = mf::stage_chunk(lane, g0 + i, D);
            const int slot = at.key, col = at.d;
            const int64_t e = entry[slot];  // shfl_i64(entry, slot)
            for (int j = 0; j < 8; ++j) {
              if (e < 0) {  // store8(kd, 0), store8(stage + kVAt + tile_at(slot, col, D), 0)
                k_lds[mf::tile_at(slot, col, D) + j] = 0;
                v_lds[mf::tile_at(slot, col, D) + j] = 0;
                continue;
              }
              unowned_reads += !owned.contains(e);
              k_lds[mf::tile_at(slot, col, D) + j] = kpool[(e - t0) * D + col + j];
              v_lds[mf::tile_at(slot, col, D) + j] = vpool[(e - t0) * D + col + j];
            }
          }
      EXPECT_EQ(unowned_reads, 0);
      for (int k = 0; k < 16; ++k)
        for (int d = 0; d < D; ++d) {
          const uint16_t want_k = owned.contains(t0 + k) ? x.k[k * D + d] : 0;
          const uint16_t want_v = owned.contains(t0 + k) ? x.v[k * D + d] : 0;
          ASSERT_EQ(k_lds[mf::tile_at(k, d, D)], want_k) << "K slot " << k << ", dim " << d;
          ASSERT_EQ(v_lds[mf::tile_at(k, d, D)], want_v) << "V slot " << k << ", dim " << d;
        }
      // P.V with P 0 outside the owned keys (those keys no row sees), V read at pv_a.
      Data px = x;
      for (int r = 0; r < 16; ++r)
        for (int k = 0; k < 16; ++k)
          if (!owned.contains(t0 + k)) px.p[r * 16 + k] = 0;
      const Operand pb = p_in_s_registers(px);
      for (int nt = 0; nt < D / 16; ++nt) {
        Acc acc{};
        const Operand a = v_operand(v_lds.data(), nt, D);
        mfma_reference(acc, a, pb);
        for (int lane = 0; lane < kLanes; ++lane)
          for (int r = 0; r < 4; ++r) {
            const mf::RowDim od = mf::o_c(lane, r, nt);
            double ref = 0.0;
            for (int k = 0; k < 16; ++k)
              if (owned.contains(t0 + k))
                ref += static_cast<double>(px.P(od.row, k)) * x.V(k, od.d);
            ASSERT_EQ(acc.v[lane][r], ref) << "O[" << od.row << "][" << od.d << "], D " << D;
          }
      }
    }
  }
}

}  // namespace
