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
#include "platform/matrix_amd.h"

#include "common/round.h"

#include <gtest/gtest.h>

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

}  // namespace
