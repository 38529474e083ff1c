// The split kernels' dim orders (src/split_order.h), proven on the host: nothing runs the NVIDIA
// kernel here, so this test emulates mma.sync m16n8k16 (row.col, bf16 operands: A 16 x 16, B
// 16 x 8, lane (g = lane / 4, q4 = lane % 4) holding A[g | g + 8][2 q4 + {0, 1} | + 8] and
// B[2 q4 + {0, 1} | + 8][g], C[g | g + 8][2 q4 + {0, 1}], as PTX documents it, written out here
// on its own) and feeds it the way src/kernel_mma.h does, through split_order.h's functions:
// Q~ placed in split_k_dim's order, each lane's K fragments read from its row segment 16 bytes
// at a time (segment_code: fp16 halfwords, fp8 bytes, e2m1 nibbles of both orders), V's B
// fragments from its segment, the accumulator stored at split_v_dim. S = Q~ K^T and O = P V
// must equal scalar loops exactly (small dyadic values: every sum is exact in binary64). A slip in
// an order, a segment base or a byte of a code fails here.
#include "src/split_order.h"

#include "common/dequant.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace pacts::kernels::hip::detail;
namespace common = pacts::kernels::common;

constexpr int kKeys = 16, kRows = 16;

// A raw row of D elements in format F: its bytes as the pool stores them (e2m1: two elements a
// byte, the nibble of element d by `order`), and the decoded values.
struct RawRow {
  std::vector<uint8_t> bytes;
  std::vector<double> value;
};

template <pacts_format F>
RawRow make_row(int D, std::mt19937& rng, pacts_nibble_order order) {
  RawRow row;
  row.value.resize(D);
  if constexpr (F == PACTS_FORMAT_E2M1) {
    row.bytes.assign(D / 2, 0);
    for (int d = 0; d < D; ++d) {
      const uint8_t nib = static_cast<uint8_t>(rng() & 0xF);
      const bool low = (d % 2 == 0) == (order == PACTS_NIBBLE_LOW_FIRST);
      row.bytes[d / 2] |= low ? nib : static_cast<uint8_t>(nib << 4);
      row.value[d] = common::e2m1_to_float(nib);
    }
  } else if constexpr (F == PACTS_FORMAT_FP16) {
    for (int d = 0; d < D; ++d) {
      // Small fp16 values: exponent 10..20 (2^-5 .. 2^5), any mantissa, either sign.
      const uint16_t code = static_cast<uint16_t>((rng() & 0x8000u) | ((10 + rng() % 11) << 10) | (rng() & 0x3FFu));
      row.bytes.push_back(static_cast<uint8_t>(code & 0xFF));
      row.bytes.push_back(static_cast<uint8_t>(code >> 8));
      row.value[d] = common::fp16_to_float(code);
    }
  } else {
    for (int d = 0; d < D; ++d) {
      uint8_t code = static_cast<uint8_t>(rng());
      if ((code & 0x7F) == 0x7F) code &= 0xF0;  // not e4m3fn's NaN
      row.bytes.push_back(code);
      row.value[d] = common::e4m3fn_to_float(code);
    }
  }
  return row;
}

template <pacts_format F>
constexpr int kUnitBytes = F == PACTS_FORMAT_FP16 ? 2 : 1;

// Element `at` of the segment of `elems` elements starting at element `base` of `row`, read as
// the kernel reads it: the segment cut into chunks of at most 16 bytes, each held as
// little-endian words, the element's code by segment_code, decoded (e2m1: the nibble of dim
// base + at).
template <pacts_format F>
double segment_elem(const RawRow& row, int base, int elems, int at, pacts_nibble_order order) {
  const int seg_bytes = F == PACTS_FORMAT_E2M1 ? elems / 2 : elems * kUnitBytes<F>;
  const int chunk_bytes = seg_bytes < 16 ? seg_bytes : 16;
  const int chunk_elems = elems / (seg_bytes / chunk_bytes);
  const int first = F == PACTS_FORMAT_E2M1 ? base / 2 : base * kUnitBytes<F>;
  const int c = at / chunk_elems, i = at % chunk_elems;
  uint32_t w[4] = {0, 0, 0, 0};
  for (int b = 0; b < chunk_bytes; ++b)
    w[b / 4] |= static_cast<uint32_t>(row.bytes[first + c * chunk_bytes + b]) << (8 * (b % 4));
  const uint32_t code = segment_code<F>(w, i);
  if constexpr (F == PACTS_FORMAT_E2M1)
    return common::e2m1_to_float(common::e2m1_nibble(static_cast<uint8_t>(code), base + at, order));
  else if constexpr (F == PACTS_FORMAT_FP16)
    return common::fp16_to_float(static_cast<uint16_t>(code));
  else
    return common::e4m3fn_to_float(static_cast<uint8_t>(code));
}

// S = Q~ K^T through the emulated MMA: A from Q~ placed in split_k_dim's order, B from the lanes'
// K segments, per k-step; every B entry provided by exactly one lane.
template <int D, pacts_format F>
void check_qk(uint32_t seed, pacts_nibble_order order) {
  std::mt19937 rng(seed);
  std::vector<RawRow> k(kKeys);
  for (RawRow& r : k) r = make_row<F>(D, rng, order);
  std::vector<std::vector<double>> q(kRows, std::vector<double>(D));
  for (auto& r : q)
    for (double& x : r) x = static_cast<int>(rng() % 17) - 8;
  // Q~ in shared memory: position at of row r holds dim split_k_dim(at / 16, at % 16).
  std::vector<std::vector<double>> placed(kRows, std::vector<double>(D));
  for (int r = 0; r < kRows; ++r)
    for (int at = 0; at < D; ++at) placed[r][at] = q[r][split_k_dim<D>(at / 16, at % 16)];
  double s[kRows][kKeys] = {};
  for (int kk = 0; kk < D / 16; ++kk) {
    for (int nt = 0; nt < 2; ++nt) {  // N-tile: keys 8 nt .. 8 nt + 7
      double b[16][8];
      int filled[16][8] = {};
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, q4 = lane % 4, key = g + 8 * nt;
        for (int f = 0; f < 2; ++f)
          for (int e = 0; e < 2; ++e) {
            const int kidx = 2 * q4 + 8 * f + e;  // b0 (f 0) / b1 (f 1), its half e
            b[kidx][g] = segment_elem<F>(k[key], k_segment<D>(q4), D / 4,
                                         k_segment_elem(kk, f) + e, order);
            ++filled[kidx][g];
          }
      }
      for (int kidx = 0; kidx < 16; ++kidx)
        for (int n = 0; n < 8; ++n) ASSERT_EQ(filled[kidx][n], 1) << "B[" << kidx << "][" << n << "]";
      for (int r = 0; r < kRows; ++r)
        for (int n = 0; n < 8; ++n)
          for (int kidx = 0; kidx < 16; ++kidx) s[r][8 * nt + n] += placed[r][16 * kk + kidx] * b[kidx][n];
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int key = 0; key < kKeys; ++key) {
      double want = 0;
      for (int d = 0; d < D; ++d) want += q[r][d] * k[key].value[d];
      ASSERT_EQ(s[r][key], want) << "D " << D << " row " << r << " key " << key;
    }
}

// O = P V through the emulated MMA: B of N-tile n from the lanes' V segments (element n), the
// accumulator's (row, column) stored at dim split_v_dim(n, column); every output once.
template <int D, pacts_format F>
void check_pv(uint32_t seed, pacts_nibble_order order) {
  std::mt19937 rng(seed);
  std::vector<RawRow> v(kKeys);
  for (RawRow& r : v) r = make_row<F>(D, rng, order);
  double p[kRows][kKeys];
  for (auto& r : p)
    for (double& x : r) x = static_cast<int>(rng() % 9) / 8.0;
  std::vector<std::vector<double>> out(kRows, std::vector<double>(D, 0.0));
  std::vector<std::vector<int>> stored(kRows, std::vector<int>(D, 0));
  for (int n = 0; n < D / 8; ++n) {
    double b[16][8];
    int filled[16][8] = {};
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, q4 = lane % 4;
      const int vkey[4] = {2 * q4, 2 * q4 + 1, 2 * q4 + 8, 2 * q4 + 9};
      for (int x = 0; x < 4; ++x) {
        b[vkey[x]][g] = segment_elem<F>(v[vkey[x]], v_segment<D>(g), D / 8, n, order);
        ++filled[vkey[x]][g];
      }
    }
    for (int kidx = 0; kidx < 16; ++kidx)
      for (int c = 0; c < 8; ++c) ASSERT_EQ(filled[kidx][c], 1);
    for (int lane = 0; lane < 32; ++lane) {  // C fragment: rows g, g + 8; columns 2 q4 + e
      const int g = lane / 4, q4 = lane % 4;
      for (int x = 0; x < 4; ++x) {
        const int r = g + 8 * (x / 2), c = 2 * q4 + x % 2;
        double acc = 0;
        for (int kidx = 0; kidx < 16; ++kidx) acc += p[r][kidx] * b[kidx][c];
        const int dim = split_v_dim<D>(n, c);
        out[r][dim] += acc;
        ++stored[r][dim];
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < D; ++d) {
      ASSERT_EQ(stored[r][d], 1) << "row " << r << " dim " << d;
      double want = 0;
      for (int key = 0; key < kKeys; ++key) want += p[r][key] * v[key].value[d];
      ASSERT_EQ(out[r][d], want) << "D " << D << " row " << r << " dim " << d;
    }
}

// The transposed form (kNarrow in src/kernel_mma.h, items of at most 8 rows): S^T = K Q~^T with
// K as the A operand, O^T += V^T P^T with V^T as the A operand, fed with the same words as the
// 16-row form. A fragment register r of lane (g, q4) holds A[g + 8 (r % 2)][2 q4 + 8 (r / 2) + e]
// (PTX); the kernel's K fragment is {bk[0], bk[2], bk[1], bk[3]} of the 16-row form's bk[2 h + f]
// (key g + 8 h, positions k_segment_elem(kk, f)), and V^T's for M-tile m is {b0(2 m), b0(2 m + 1),
// b1(2 m), b1(2 m + 1)} of N-tiles 2 m and 2 m + 1. C register x of M-tile m is stored at row
// 2 q4 + x % 2, dim split_v_dim(2 m + x / 2, g).
constexpr int kRowsT = 8;

template <int D, pacts_format F>
void check_qk_transposed(uint32_t seed, pacts_nibble_order order) {
  std::mt19937 rng(seed);
  std::vector<RawRow> k(kKeys);
  for (RawRow& r : k) r = make_row<F>(D, rng, order);
  std::vector<std::vector<double>> q(kRowsT, std::vector<double>(D));
  for (auto& r : q)
    for (double& x : r) x = static_cast<int>(rng() % 17) - 8;
  std::vector<std::vector<double>> placed(kRowsT, std::vector<double>(D));
  for (int r = 0; r < kRowsT; ++r)
    for (int at = 0; at < D; ++at) placed[r][at] = q[r][split_k_dim<D>(at / 16, at % 16)];
  double st[kKeys][kRowsT] = {};
  for (int kk = 0; kk < D / 16; ++kk) {
    double a[16][16];
    int filled[16][16] = {};
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, q4 = lane % 4;
      const int from[4] = {0, 2, 1, 3};  // ka[r] = bk[from[r]]
      for (int r = 0; r < 4; ++r) {
        const int h = from[r] / 2, f = from[r] % 2;  // bk[2 h + f]: key g + 8 h, b0 / b1
        for (int e = 0; e < 2; ++e) {
          const int row = g + 8 * (r % 2), col = 2 * q4 + 8 * (r / 2) + e;
          a[row][col] = segment_elem<F>(k[g + 8 * h], k_segment<D>(q4), D / 4,
                                        k_segment_elem(kk, f) + e, order);
          ++filled[row][col];
        }
      }
    }
    for (int row = 0; row < 16; ++row)
      for (int col = 0; col < 16; ++col) ASSERT_EQ(filled[row][col], 1) << "A[" << row << "][" << col << "]";
    // B = Q~^T (positions 16 kk.. of rows 0-7).
    for (int key = 0; key < kKeys; ++key)
      for (int r = 0; r < kRowsT; ++r)
        for (int kidx = 0; kidx < 16; ++kidx) st[key][r] += a[key][kidx] * placed[r][16 * kk + kidx];
  }
  for (int r = 0; r < kRowsT; ++r)
    for (int key = 0; key < kKeys; ++key) {
      double want = 0;
      for (int d = 0; d < D; ++d) want += q[r][d] * k[key].value[d];
      ASSERT_EQ(st[key][r], want) << "D " << D << " row " << r << " key " << key;
    }
}

template <int D, pacts_format F>
void check_pv_transposed(uint32_t seed, pacts_nibble_order order) {
  std::mt19937 rng(seed);
  std::vector<RawRow> v(kKeys);
  for (RawRow& r : v) r = make_row<F>(D, rng, order);
  double p[kRowsT][kKeys];
  for (auto& r : p)
    for (double& x : r) x = static_cast<int>(rng() % 9) / 8.0;
  std::vector<std::vector<double>> out(kRowsT, std::vector<double>(D, 0.0));
  std::vector<std::vector<int>> stored(kRowsT, std::vector<int>(D, 0));
  for (int m = 0; m < D / 16; ++m) {
    double a[16][16];
    int filled[16][16] = {};
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, q4 = lane % 4;
      // b0(n): keys 2 q4, 2 q4 + 1; b1(n): keys 2 q4 + 8, 2 q4 + 9; element n of the segment.
      const auto b = [&](int n, int half, int e) {
        return segment_elem<F>(v[2 * q4 + 8 * half + e], v_segment<D>(g), D / 8, n, order);
      };
      const int n_of[4] = {2 * m, 2 * m + 1, 2 * m, 2 * m + 1}, half_of[4] = {0, 0, 1, 1};
      for (int r = 0; r < 4; ++r)
        for (int e = 0; e < 2; ++e) {
          const int row = g + 8 * (r % 2), col = 2 * q4 + 8 * (r / 2) + e;
          a[row][col] = b(n_of[r], half_of[r], e);
          ++filled[row][col];
        }
    }
    for (int row = 0; row < 16; ++row)
      for (int col = 0; col < 16; ++col) ASSERT_EQ(filled[row][col], 1);
    for (int lane = 0; lane < 32; ++lane) {  // C of O^T: rows g, g + 8 (dims); columns 2 q4 + e
      const int g = lane / 4, q4 = lane % 4;
      for (int x = 0; x < 4; ++x) {
        const int row = g + 8 * (x / 2), col = 2 * q4 + x % 2;
        double acc = 0;
        for (int kidx = 0; kidx < 16; ++kidx) acc += a[row][kidx] * p[col][kidx];  // B = P^T
        const int dim = split_v_dim<D>(2 * m + x / 2, g);
        out[col][dim] += acc;
        ++stored[col][dim];
      }
    }
  }
  for (int r = 0; r < kRowsT; ++r)
    for (int d = 0; d < D; ++d) {
      ASSERT_EQ(stored[r][d], 1) << "row " << r << " dim " << d;
      double want = 0;
      for (int key = 0; key < kKeys; ++key) want += p[r][key] * v[key].value[d];
      ASSERT_EQ(out[r][d], want) << "D " << D << " row " << r << " dim " << d;
    }
}

template <int D>
void check_orders_are_bijections() {
  std::vector<int> k_seen(D, 0), v_seen(D, 0);
  for (int kk = 0; kk < D / 16; ++kk)
    for (int j = 0; j < 16; ++j) ++k_seen[split_k_dim<D>(kk, j)];
  for (int n = 0; n < D / 8; ++n)
    for (int c = 0; c < 8; ++c) ++v_seen[split_v_dim<D>(n, c)];
  for (int d = 0; d < D; ++d) {
    EXPECT_EQ(k_seen[d], 1) << "D " << D << " K dim " << d;
    EXPECT_EQ(v_seen[d], 1) << "D " << D << " V dim " << d;
  }
  // Segments start on an even dim (e2m1: a byte boundary, so a code's nibble follows its dim).
  for (int q4 = 0; q4 < 4; ++q4) EXPECT_EQ(k_segment<D>(q4) % 2, 0);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(v_segment<D>(g) % 2, 0);
}

TEST(SplitOrder, OrdersAreBijectionsAndSegmentsEven) {
  check_orders_are_bijections<64>();
  check_orders_are_bijections<128>();
  check_orders_are_bijections<256>();
}

TEST(SplitOrder, QKThroughTheLanesSegmentsIsExactFp8) {
  check_qk<64, PACTS_FORMAT_E4M3FN>(1, PACTS_NIBBLE_LOW_FIRST);
  check_qk<128, PACTS_FORMAT_E4M3FN>(2, PACTS_NIBBLE_LOW_FIRST);
  check_qk<256, PACTS_FORMAT_E4M3FN>(3, PACTS_NIBBLE_LOW_FIRST);
}

TEST(SplitOrder, QKThroughTheLanesSegmentsIsExactFp16) {
  check_qk<64, PACTS_FORMAT_FP16>(4, PACTS_NIBBLE_LOW_FIRST);
  check_qk<128, PACTS_FORMAT_FP16>(5, PACTS_NIBBLE_LOW_FIRST);
  check_qk<256, PACTS_FORMAT_FP16>(6, PACTS_NIBBLE_LOW_FIRST);
}

TEST(SplitOrder, QKThroughTheLanesSegmentsIsExactMxfp4BothNibbleOrders) {
  for (pacts_nibble_order o : {PACTS_NIBBLE_LOW_FIRST, PACTS_NIBBLE_HIGH_FIRST}) {
    check_qk<64, PACTS_FORMAT_E2M1>(7, o);
    check_qk<128, PACTS_FORMAT_E2M1>(8, o);
    check_qk<256, PACTS_FORMAT_E2M1>(9, o);
  }
}

TEST(SplitOrder, PVThroughTheLanesSegmentsIsExact) {
  for (pacts_nibble_order o : {PACTS_NIBBLE_LOW_FIRST, PACTS_NIBBLE_HIGH_FIRST}) {
    check_pv<64, PACTS_FORMAT_E2M1>(10, o);
    check_pv<128, PACTS_FORMAT_E2M1>(11, o);
    check_pv<256, PACTS_FORMAT_E2M1>(12, o);
  }
  check_pv<64, PACTS_FORMAT_E4M3FN>(13, PACTS_NIBBLE_LOW_FIRST);
  check_pv<128, PACTS_FORMAT_E4M3FN>(14, PACTS_NIBBLE_LOW_FIRST);
  check_pv<256, PACTS_FORMAT_E4M3FN>(15, PACTS_NIBBLE_LOW_FIRST);
  check_pv<64, PACTS_FORMAT_FP16>(16, PACTS_NIBBLE_LOW_FIRST);
  check_pv<128, PACTS_FORMAT_FP16>(17, PACTS_NIBBLE_LOW_FIRST);
  check_pv<256, PACTS_FORMAT_FP16>(18, PACTS_NIBBLE_LOW_FIRST);
}

TEST(SplitOrder, TransposedFormThroughTheSameWordsIsExact) {
  for (pacts_nibble_order o : {PACTS_NIBBLE_LOW_FIRST, PACTS_NIBBLE_HIGH_FIRST}) {
    check_qk_transposed<64, PACTS_FORMAT_E2M1>(19, o);
    check_qk_transposed<128, PACTS_FORMAT_E2M1>(20, o);
    check_pv_transposed<64, PACTS_FORMAT_E2M1>(21, o);
    check_pv_transposed<128, PACTS_FORMAT_E2M1>(22, o);
  }
  check_qk_transposed<64, PACTS_FORMAT_E4M3FN>(23, PACTS_NIBBLE_LOW_FIRST);
  check_qk_transposed<128, PACTS_FORMAT_E4M3FN>(24, PACTS_NIBBLE_LOW_FIRST);
  check_pv_transposed<64, PACTS_FORMAT_E4M3FN>(25, PACTS_NIBBLE_LOW_FIRST);
  check_pv_transposed<128, PACTS_FORMAT_E4M3FN>(26, PACTS_NIBBLE_LOW_FIRST);
  check_qk_transposed<128, PACTS_FORMAT_FP16>(27, PACTS_NIBBLE_LOW_FIRST);
  check_pv_transposed<128, PACTS_FORMAT_FP16>(28, PACTS_NIBBLE_LOW_FIRST);
}

}  // namespace
