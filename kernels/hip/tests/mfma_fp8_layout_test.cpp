// The AMD MFMA kernel's requantising Q.K paths (platform/matrix_amd_fp8.h, src/kernel_mfma.h),
// proven on the host: nothing can run them here.
//
// The two instructions are emulated from their documented lane layouts, written out below on their
// own (NOT through matrix_amd_fp8.h):
//   v_mfma_f32_16x16x32_{fp8,bf8}_fp8: lane l = 16 g + i, byte r: A[i][8 g + r], B[8 g + r][i];
//   v_mfma_scale_f32_16x16x128_f8f6f4 (A e2m1, B e4m3): A byte j of lane l holds k = 32 g + 2 j
//     (low nibble) and 32 g + 2 j + 1 (high); B byte r holds k = 16 g + (r & 15) + 64 (r >> 4);
//     lane l's scale byte scales row / column i over k block g; each block sum is scaled by
//     2^(sa + sb - 254) before it is accumulated;
//   C / D: D[4 g + x][i] in register x (both).
// They are driven as the kernel drives them, through the kernel's own index functions: the K row
// bytes and scale slots of the stage, the Q' rows, the operands of each step, the S registers'
// (row, key), the combined factor (common::logit_factor) or the query's block scale byte and its
// residual (mx_query_scale). Every logit must equal a scalar binary64 dot product of the
// requantised query (spec/tolerance.md §2.1) with the decoded keys, for every head dim, both
// nibble orders and extreme row exponents; each planted fault must break that.
#include "platform/matrix_amd_fp8.h"

#include "common/requant.h"

#include <pacts/spec/formats.h>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

namespace mf = pacts::gpu::mfma;
namespace common = pacts::kernels::common;
using pacts::spec::decode;

constexpr int kLanes = 64;

enum class Fault {
  kNone,
  kFp8BFromBf16Layout,   // B of 16x16x32 read as 4 dims per lane group (the bf16 instruction's)
  kMxBContiguous,        // Q' of the scaled instruction as 32 consecutive dims (the fp4 order)
  kMxScaleNextBlock,     // K's e8m0 byte of the next block
  kMxResidualDropped,    // 2^e beyond the e8m0 range not applied afterwards
  kFactorWithoutScale,   // the combined factor without the K scale
  kBf8Swapped,           // e4m3 K read by the bf8 instruction and e5m2 K by the fp8 one
  kMxNoPadding,          // the scaled instruction's Q' stripes past D read (D 64)
  kNibbleNotSwapped,     // a HIGH_FIRST e2m1 pool staged without the nibble swap
};

// ---- The instructions, from the documentation only ----
struct Acc {
  double v[kLanes][4] = {};
};

// 16x16x32 fp8: a[l][r], b[l][r] are byte r of lane l's operand, decoded by the caller as the
// instruction named reads them (fp8_fp8: e4m3; bf8_fp8: A e5m2; of the target's family).
void emulate_16x16x32(Acc& c, const double (&a)[kLanes][8], const double (&b)[kLanes][8]) {
  double A[16][32] = {}, B[32][16] = {};
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < 8; ++r) {
      A[l % 16][8 * (l / 16) + r] = a[l][r];
      B[8 * (l / 16) + r][l % 16] = b[l][r];
    }
  for (int l = 0; l < kLanes; ++l)
    for (int x = 0; x < 4; ++x) {
      const int m = 4 * (l / 16) + x, n = l % 16;
      for (int k = 0; k < 32; ++k) c.v[l][x] += A[m][k] * B[k][n];
    }
}

// 16x16x128 scaled, A e2m1 (16 bytes a lane), B e4m3fn (32 bytes a lane).
void emulate_scaled_16x16x128(Acc& c, const uint8_t (&a)[kLanes][16], const uint8_t (&b)[kLanes][32],
                              const int (&sa)[kLanes], const int (&sb)[kLanes]) {
  double A[16][128] = {}, B[128][16] = {};
  int SA[16][4] = {}, SB[16][4] = {};
  for (int l = 0; l < kLanes; ++l) {
    const int i = l % 16, g = l / 16;
    for (int j = 0; j < 16; ++j) {
      A[i][32 * g + 2 * j] = decode(PACTS_FORMAT_E2M1, a[l][j] & 0xFu);
      A[i][32 * g + 2 * j + 1] = decode(PACTS_FORMAT_E2M1, a[l][j] >> 4);
    }
    for (int r = 0; r < 32; ++r)
      B[16 * g + (r & 15) + 64 * (r >> 4)][i] = decode(PACTS_FORMAT_E4M3FN, b[l][r]);
    SA[i][g] = sa[l];
    SB[i][g] = sb[l];
  }
  for (int l = 0; l < kLanes; ++l)
    for (int x = 0; x < 4; ++x) {
      const int m = 4 * (l / 16) + x, n = l % 16;
      for (int kb = 0; kb < 4; ++kb) {
        double block = 0;
        for (int k = 32 * kb; k < 32 * kb + 32; ++k) block += A[m][k] * B[k][n];
        c.v[l][x] += std::ldexp(block, SA[m][kb] + SB[n][kb] - 254);
      }
    }
}

// ---- A tile as the kernel stages it ----
struct Tile {
  int D = 64;
  pacts_format kv = PACTS_FORMAT_E4M3FN;
  pacts_nibble_order order = PACTS_NIBBLE_LOW_FIRST;
  std::vector<uint8_t> codes;      // [key][d] K codes (e2m1: one nibble per element)
  std::vector<float> scale;        // [key] fp32 K scale (fp8 path)
  std::vector<uint8_t> mx;         // [key][block] e8m0 bytes (MX path)
  std::vector<uint8_t> q;          // [row][d] Q' codes (e4m3 of the target)
  std::vector<int> e;              // [row] the rows' exponents
  std::vector<uint8_t> stage;      // the K stage, 16 rows of 2 (D + 4) bytes
  std::vector<uint8_t> q_lds;      // the Q' rows, 16 rows of 2 (D + 4) bytes
  std::vector<bool> own;           // [key] owned slot (else the kernel's zeros)
  int row_bytes() const { return 2 * mf::lds_stride(D); }
};

uint8_t pack_e2m1(uint8_t even, uint8_t odd, pacts_nibble_order order) {
  return order == PACTS_NIBBLE_LOW_FIRST ? static_cast<uint8_t>(even | (odd << 4))
                                         : static_cast<uint8_t>(odd | (even << 4));
}

// Mirrors kernel_mfma.h's store_raw_k (for every chunk of 8 dims of every key, unowned slots
// included) and the Q' stores.
void stage_tile(Tile& t, Fault fault = Fault::kNone) {
  const int rb = t.row_bytes();
  t.stage.assign(static_cast<size_t>(16 * rb), 0xEE);
  // Bytes the kernel never writes: a NaN code (e4m3fn 0x7F), as uninitialised LDS may hold, so
  // a read of them reaches the result even where the other operand is 0 (0 * NaN).
  t.q_lds.assign(static_cast<size_t>(16 * rb), 0x7F);
  for (int key = 0; key < 16; ++key) {
    uint8_t* row = t.stage.data() + key * rb;
    for (int col = 0; col < t.D; col += 8) {
      if (t.kv == PACTS_FORMAT_E2M1) {
        uint8_t pool[4];  // the pool's 4 bytes of dims col .. col + 7, in its nibble order
        for (int j = 0; j < 4; ++j)
          pool[j] = pack_e2m1(t.codes[key * t.D + col + 2 * j], t.codes[key * t.D + col + 2 * j + 1],
                              t.order);
        uint32_t w = 0;
        if (t.own[key]) std::memcpy(&w, pool, 4);
        if (t.order == PACTS_NIBBLE_HIGH_FIRST && fault != Fault::kNibbleNotSwapped)
          w = ((w >> 4) & 0x0F0F0F0Fu) | ((w & 0x0F0F0F0Fu) << 4);
        std::memcpy(row + col / 2, &w, 4);
        if (col % 32 == 0) row[t.D + col / 32] = t.own[key] ? t.mx[key * (t.D / 32) + col / 32] : 127;
      } else {
        for (int x = 0; x < 8; ++x) row[col + x] = t.own[key] ? t.codes[key * t.D + col + x] : 0;
        if (col == 0) {
          const common::LogitFactor f =
              t.own[key] ? common::logit_factor(t.scale[key], 0) : common::LogitFactor{0.0f, 0};
          std::memcpy(row + t.D, &f.significand, 4);
          std::memcpy(row + t.D + 4, &f.exponent, 4);
        }
      }
    }
  }
  for (int r = 0; r < 16; ++r)
    for (int d = 0; d < t.D; ++d) t.q_lds[r * rb + d] = t.q[r * t.D + d];
}

// The kernel's S^T = K Q'^T and logit(r), per lane and register: [lane][r].
std::vector<std::array<float, 4>> kernel_logits(const Tile& t, Fault fault) {
  const int rb = t.row_bytes(), D = t.D;
  const pacts_format target = t.kv == PACTS_FORMAT_E4M3FNUZ || t.kv == PACTS_FORMAT_E5M2FNUZ
                                  ? PACTS_FORMAT_E4M3FNUZ
                                  : PACTS_FORMAT_E4M3FN;
  Acc acc;
  const bool fnuz = target == PACTS_FORMAT_E4M3FNUZ;
  bool bf8 = mf::k_operand_is_bf8(t.kv);
  if (fault == Fault::kBf8Swapped) bf8 = !bf8;
  // How the named instruction reads A's bytes.
  const pacts_format a_format = bf8 ? (fnuz ? PACTS_FORMAT_E5M2FNUZ : PACTS_FORMAT_E5M2)
                                    : (fnuz ? PACTS_FORMAT_E4M3FNUZ : PACTS_FORMAT_E4M3FN);
  if (t.kv != PACTS_FORMAT_E2M1) {
    for (int kk = 0; kk < D / mf::kK8; ++kk) {
      double a[kLanes][8], b[kLanes][8];
      for (int l = 0; l < kLanes; ++l) {
        const mf::KeyDim ka = mf::qk8_a(l, 0, kk);
        mf::RowDim qb = mf::qk8_b(l, 0, kk);
        if (fault == Fault::kFp8BFromBf16Layout) qb = {qb.row, mf::kK8 * kk + 4 * (l / 16)};
        for (int r = 0; r < 8; ++r) {
          a[l][r] = decode(a_format, t.stage[ka.key * rb + ka.d + r]);
          b[l][r] = decode(target, t.q_lds[qb.row * rb + qb.d + r]);
        }
      }
      emulate_16x16x32(acc, a, b);
    }
  } else {
    for (int kk = 0; kk < (D + 127) / 128; ++kk) {
      uint8_t a[kLanes][16] = {}, b[kLanes][32] = {};
      int sa[kLanes], sb[kLanes];
      for (int l = 0; l < kLanes; ++l) {
        const mf::KeyDim ka = mf::qkmx_a(l, 0, kk);
        sa[l] = 127;
        if (ka.d < D) {
          for (int j = 0; j < 16; ++j) a[l][j] = t.stage[ka.key * rb + ka.d / 2 + j];
          int block = mf::qkmx_a_block(l, kk);
          if (fault == Fault::kMxScaleNextBlock) block = (block + 1) % (D / 32);
          sa[l] = t.stage[ka.key * rb + D + block];
        }
        const int row = mf::qkmx_b(l, 0, kk).row;
        for (int stripe = 0; stripe < 2; ++stripe) {
          mf::RowDim qb = mf::qkmx_b(l, 16 * stripe, kk);
          if (fault == Fault::kMxBContiguous) qb = {row, 128 * kk + 32 * (l / 16) + 16 * stripe};
          for (int x = 0; x < 16; ++x)
            b[l][16 * stripe + x] =
                qb.d < D || fault == Fault::kMxNoPadding ? t.q_lds[qb.row * rb + qb.d + x] : 0;
        }
        sb[l] = mf::mx_query_scale(t.e[row]).byte;
      }
      emulate_scaled_16x16x128(acc, a, b, sa, sb);
    }
  }
  std::vector<std::array<float, 4>> out(kLanes);
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < 4; ++r) {
      const mf::RowKey rk = mf::s_c(l, r);
      const float sc = static_cast<float>(acc.v[l][r]);  // the fp32 accumulator
      const int e = t.e[rk.row];
      if (t.kv == PACTS_FORMAT_E2M1) {
        const int residual = fault == Fault::kMxResidualDropped ? 0 : mf::mx_query_scale(e).residual;
        out[l][r] = std::ldexp(sc, residual);
      } else {
        float significand;
        int exponent;
        std::memcpy(&significand, &t.stage[rk.key * rb + D], 4);
        std::memcpy(&exponent, &t.stage[rk.key * rb + D + 4], 4);
        if (fault == Fault::kFactorWithoutScale && significand != 0) significand = 1.0f, exponent = 0;
        out[l][r] = std::ldexp(sc * significand, exponent + e);
      }
    }
  return out;
}

// The scalar truth: s[row][key] = sum_d Q'_d K_d in binary64, and sum_d |Q'_d K_d|.
struct Truth {
  double s, abs;
};
Truth scalar_logit(const Tile& t, int row, int key) {
  const pacts_format target = t.kv == PACTS_FORMAT_E4M3FNUZ || t.kv == PACTS_FORMAT_E5M2FNUZ
                                  ? PACTS_FORMAT_E4M3FNUZ
                                  : PACTS_FORMAT_E4M3FN;
  Truth tr{0, 0};
  if (!t.own[key]) return tr;  // the kernel's zeros: the logit is exactly 0 (then masked)
  for (int d = 0; d < t.D; ++d) {
    const double q = std::ldexp(decode(target, t.q[row * t.D + d]), t.e[row]);
    double k = decode(t.kv, t.codes[key * t.D + d]);
    if (t.kv == PACTS_FORMAT_E2M1) k = std::ldexp(k, t.mx[key * (t.D / 32) + d / 32] - 127);
    else k *= t.scale[key];
    tr.s += q * k;
    tr.abs += std::fabs(q * k);
  }
  return tr;
}

uint8_t random_finite_code(std::mt19937_64& rng, pacts_format f) {
  for (;;) {
    const auto c = static_cast<uint32_t>(rng() & 0xFF);
    if (!pacts::spec::is_nan_code(f, c) && std::isfinite(decode(f, c))) return static_cast<uint8_t>(c);
  }
}

Tile random_tile(std::mt19937_64& rng, pacts_format kv, int D, pacts_nibble_order order,
                 Fault fault = Fault::kNone) {
  Tile t;
  t.D = D;
  t.kv = kv;
  t.order = order;
  const pacts_format target = kv == PACTS_FORMAT_E4M3FNUZ || kv == PACTS_FORMAT_E5M2FNUZ
                                  ? PACTS_FORMAT_E4M3FNUZ
                                  : PACTS_FORMAT_E4M3FN;
  for (int i = 0; i < 16 * D; ++i) {
    t.codes.push_back(kv == PACTS_FORMAT_E2M1 ? static_cast<uint8_t>(rng() & 0xF)
                                              : random_finite_code(rng, kv));
    t.q.push_back(random_finite_code(rng, target));
  }
  // Row exponents beyond an e8m0 byte's range too (a tiny query: e < -127); logits stay in fp32.
  const int kExponents[] = {0, -3, 7, -40, 30, -150, -128, -127, 20};
  for (int r = 0; r < 16; ++r) t.e.push_back(kExponents[rng() % 9]);
  for (int k = 0; k < 16; ++k) {
    const int scale_exp = static_cast<int>(rng() % 40) - 20;
    t.scale.push_back(rng() % 4 == 0 ? 1.0f
                                     : std::ldexp(1.0f + static_cast<float>(rng() % 128) / 128.0f,
                                                  scale_exp));
    for (int b = 0; b < D / 32; ++b) t.mx.push_back(static_cast<uint8_t>(60 + rng() % 120));
    t.own.push_back(rng() % 5 != 0);  // unowned slots among them
  }
  stage_tile(t, fault);
  return t;
}

// Whether every logit of the kernel matches the scalar truth: fp32 accumulation of exact
// products, one rounding of the factor product and of ldexp.
bool matches(const Tile& t, Fault fault, std::string* why) {
  const auto got = kernel_logits(t, fault);
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < 4; ++r) {
      const mf::RowKey rk = mf::s_c(l, r);
      const Truth tr = scalar_logit(t, rk.row, rk.key);
      // fp32 accumulation of exact products, two roundings: relative 2^-20 is ample; below
      // fp32's normal range the absolute floor of its subnormal spacing.
      const double tol = 0x1p-20 * tr.abs + 0x1p-148;
      const bool exact_zero = !t.own[rk.key];
      if (exact_zero ? got[l][r] != 0.0f : !(std::fabs(got[l][r] - tr.s) <= tol)) {
        if (why)
          *why = "row " + std::to_string(rk.row) + " key " + std::to_string(rk.key) + ": kernel " +
                 std::to_string(got[l][r]) + ", scalar " + std::to_string(tr.s) + " (e " +
                 std::to_string(t.e[rk.row]) + ")";
        return false;
      }
    }
  return true;
}

TEST(MfmaFp8, Fp8LogitsEqualTheScalarDotOfTheRequantisedQuery) {
  std::mt19937_64 rng(20261201);
  for (pacts_format kv : {PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2FNUZ, PACTS_FORMAT_E4M3FN,
                          PACTS_FORMAT_E5M2})
    for (int D : {64, 128, 256})
      for (int n = 0; n < 3; ++n) {
        const Tile t = random_tile(rng, kv, D, PACTS_NIBBLE_LOW_FIRST);
        std::string why;
        EXPECT_TRUE(matches(t, Fault::kNone, &why)) << pacts::spec::format_name(kv) << " D " << D << ": " << why;
      }
}

TEST(MfmaFp8, ScaledMxfp4LogitsEqualTheScalarDot) {
  std::mt19937_64 rng(7);
  for (pacts_nibble_order order : {PACTS_NIBBLE_LOW_FIRST, PACTS_NIBBLE_HIGH_FIRST})
    for (int D : {64, 128, 256})
      for (int n = 0; n < 3; ++n) {
        const Tile t = random_tile(rng, PACTS_FORMAT_E2M1, D, order);
        std::string why;
        EXPECT_TRUE(matches(t, Fault::kNone, &why)) << "D " << D << " order " << order << ": " << why;
      }
}

TEST(MfmaFp8, EveryPlantedFaultIsCaught) {
  struct Plant {
    Fault fault;
    pacts_format kv;
    pacts_nibble_order order;
    const char* name;
  };
  const pacts_nibble_order low = PACTS_NIBBLE_LOW_FIRST;
  const Plant plants[] = {
      {Fault::kFp8BFromBf16Layout, PACTS_FORMAT_E4M3FNUZ, low, "fp8 B in the bf16 layout"},
      {Fault::kMxBContiguous, PACTS_FORMAT_E2M1, low, "scaled B in the fp4 order"},
      {Fault::kMxScaleNextBlock, PACTS_FORMAT_E2M1, low, "K scale of the next block"},
      {Fault::kMxResidualDropped, PACTS_FORMAT_E2M1, low, "residual of 2^e dropped"},
      {Fault::kFactorWithoutScale, PACTS_FORMAT_E5M2, low, "factor without the K scale"},
      {Fault::kBf8Swapped, PACTS_FORMAT_E5M2FNUZ, low, "e5m2 K read by the fp8 instruction"},
      {Fault::kBf8Swapped, PACTS_FORMAT_E4M3FN, low, "e4m3 K read by the bf8 instruction"},
      {Fault::kMxNoPadding, PACTS_FORMAT_E2M1, low, "Q' past D read at D 64"},
      {Fault::kNibbleNotSwapped, PACTS_FORMAT_E2M1, PACTS_NIBBLE_HIGH_FIRST, "nibbles not swapped"},
  };
  for (const Plant& p : plants) {
    std::mt19937_64 rng(99);
    bool caught = false;
    for (int D : {64, 128, 256})
      for (int n = 0; n < 3 && !caught; ++n) {
        Tile t = random_tile(rng, p.kv, D, p.order, p.fault);
        if (p.fault == Fault::kMxResidualDropped) t.e[0] = -150;  // beyond the byte's range
        caught = !matches(t, p.fault, nullptr);
      }
    EXPECT_TRUE(caught) << p.name;
  }
}

TEST(MfmaFp8, PathsFollowTheFormatAndTheTargetNeverTheBytes) {
  using mf::AmdTarget;
  using mf::QkPath;
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx942, PACTS_FORMAT_E4M3FNUZ), QkPath::kFp8);
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx942, PACTS_FORMAT_E5M2FNUZ), QkPath::kFp8);
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx942, PACTS_FORMAT_E4M3FN), QkPath::kBf16);  // OCP bytes
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx942, PACTS_FORMAT_E2M1), QkPath::kBf16);
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx950, PACTS_FORMAT_E4M3FN), QkPath::kFp8);
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx950, PACTS_FORMAT_E5M2), QkPath::kFp8);
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx950, PACTS_FORMAT_E4M3FNUZ), QkPath::kBf16);  // fnuz bytes
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx950, PACTS_FORMAT_E2M1), QkPath::kMxScaled);
  EXPECT_EQ(mf::qk_path(AmdTarget::kGfx950, PACTS_FORMAT_BF16), QkPath::kBf16);
  EXPECT_EQ(mf::qk_path(AmdTarget::kOther, PACTS_FORMAT_E4M3FN), QkPath::kBf16);
  EXPECT_EQ(mf::amd_target_of("gfx942:sramecc+:xnack-"), AmdTarget::kGfx942);
  EXPECT_EQ(mf::amd_target_of("gfx950"), AmdTarget::kGfx950);
  EXPECT_EQ(mf::amd_target_of("gfx9420"), AmdTarget::kOther);
  EXPECT_EQ(mf::amd_target_of("gfx90a"), AmdTarget::kOther);
  EXPECT_EQ(mf::amd_target_of(nullptr), AmdTarget::kOther);
  // What the host's profile declares per target (decode_hip.cpp profile).
  const auto bit = [](pacts_format f) { return 1u << static_cast<unsigned>(f); };
  EXPECT_EQ(mf::requant_kv_formats(AmdTarget::kGfx942),
            bit(PACTS_FORMAT_E4M3FNUZ) | bit(PACTS_FORMAT_E5M2FNUZ));
  EXPECT_EQ(mf::requant_kv_formats(AmdTarget::kGfx950),
            bit(PACTS_FORMAT_E4M3FN) | bit(PACTS_FORMAT_E5M2) | bit(PACTS_FORMAT_E2M1));
  EXPECT_EQ(mf::requant_kv_formats(AmdTarget::kOther), 0u);
  // The target of each fp8 path is the family of the KV bytes (spec::requant_target's rule).
  EXPECT_TRUE(common::requant_target(PACTS_FORMAT_E5M2FNUZ).fnuz);
  EXPECT_FALSE(common::requant_target(PACTS_FORMAT_E5M2).fnuz);
  EXPECT_FALSE(common::requant_target(PACTS_FORMAT_E2M1).fnuz);
}

TEST(MfmaFp8, QueryScaleByteNeverNaNAndResidualExact) {
  for (int e = -400; e <= 400; ++e) {
    const mf::MxQueryScale s = mf::mx_query_scale(e);
    EXPECT_GE(s.byte, 0);
    EXPECT_LE(s.byte, 254);
    EXPECT_EQ(s.byte - 127 + s.residual, e);
    if (e >= -127 && e <= 127) {
      EXPECT_EQ(s.residual, 0);
    }
  }
}

}  // namespace
