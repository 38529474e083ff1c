// The split kernels' order of the dims inside the MMAs and the lane segments it gives
// (src/kernel_mma.h), host and device: tests/split_order_test.cpp emulates mma.sync m16n8k16 on
// the host through these functions. Internal to kernels/hip/.
//
// Any order of the reduction dim that is the same for both operands of a product leaves the
// product unchanged, and any order of the output columns can be undone when they are stored.
// These orders make each lane's fragment values contiguous dims of a row, read 16 bytes at a time:
//   Q~ K^T: position j (0..15) of k-step kk is dim split_k_dim(kk, j) for Q~ (placed so in shared
//           memory) and K alike. Lane (g, q4) reads dims k_segment(q4) + [0, D / 4) of keys g
//           and g + 8; its B fragment words of k-step kk are segment elements
//           k_segment_elem(kk, f) + {0, 1}, f = 0 (b0) and 1 (b1).
//   P V:    column c of N-tile n is output dim split_v_dim(n, c). Lane (g, q4) reads dims
//           v_segment(g) + [0, D / 8) of keys 2 q4, 2 q4 + 1, 2 q4 + 8, 2 q4 + 9: element n for
//           N-tile n. Its accumulator (row g or g + 8, column 2 q4 + e) holds dim
//           split_v_dim(n, 2 q4 + e).
#pragma once

#include "common/hd.h"

#include <pacts/problem.h>

#include <cstdint>

namespace pacts::kernels::hip::detail {

template <int D>
PACTS_HD constexpr int split_k_dim(int kk, int j) {
  return (j % 8 / 2) * (D / 4) + 4 * kk + 2 * (j / 8) + j % 2;
}
template <int D>
PACTS_HD constexpr int k_segment(int q4) { return q4 * (D / 4); }
PACTS_HD constexpr int k_segment_elem(int kk, int f) { return 4 * kk + 2 * f; }

template <int D>
PACTS_HD constexpr int split_v_dim(int n, int c) { return c * (D / 8) + n; }
template <int D>
PACTS_HD constexpr int v_segment(int g) { return g * (D / 8); }

// Element i of a segment chunk held as little-endian 32-bit words `w`: its code (16-bit
// formats: the halfword; fp8: the byte; e2m1: the byte holding it, whose nibble the element's dim
// picks, common::e2m1_nibble).
template <pacts_format kFormat>
PACTS_HD constexpr uint32_t segment_code(const uint32_t* w, int i) {
  if constexpr (kFormat == PACTS_FORMAT_E2M1) return (w[i / 8] >> (8 * (i / 2 % 4))) & 0xFFu;
  else if constexpr (kFormat == PACTS_FORMAT_BF16 || kFormat == PACTS_FORMAT_FP16)
    return (w[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
  else return (w[i / 4] >> (8 * (i % 4))) & 0xFFu;
}

}  // namespace pacts::kernels::hip::detail
