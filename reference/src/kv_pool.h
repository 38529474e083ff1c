// Read access to one K or V pool and its scales (spec/operator.md §3). Internal to the reference.
//
// This class decides how an element is found, never which: every read is a row (page, head,
// slot) that the caller has already proved owned (spec/contract.md §1).
#pragma once

#include <pacts/problem.h>

#include <cstdint>
#include <span>

namespace pacts::reference::detail {

class KvPool {
 public:
  // `tensor_scale` is problem.k_scale or problem.v_scale; it is used under PER_TENSOR only.
  KvPool(const pacts_problem& problem, const pacts_view& data, const pacts_pool_layout& layout,
         pacts_scale_mode mode, const pacts_view& scales, const pacts_scale_layout& scale_layout,
         float tensor_scale);

  // Writes, for d = 0..D-1, decode(element) times its e8m0 block scale under MX_BLOCK (a power of
  // two, so the product is exact) into `values`, and returns the row's common factor: 1, the
  // per-tensor scale or the per-token scale. values[d] * factor is the dequantised element.
  // Keeping the factor apart lets the caller form q_d * values[d] exactly (<= 46 significant
  // bits) and apply the factor once per logit.
  double load_row(int64_t page, int64_t head, int64_t slot, std::span<double> values) const;

 private:
  double element(int64_t row_offset, int d) const;
  double block_scale(int64_t page, int64_t head, int64_t slot, int d) const;
  double row_factor(int64_t page, int64_t head, int64_t slot) const;

  const uint8_t* data_;
  pacts_pool_layout layout_;
  pacts_format format_;
  pacts_nibble_order nibble_order_;
  int head_dim_;
  int element_bytes_;  // 0 for e2m1
  pacts_scale_mode mode_;
  const uint8_t* scales_;
  pacts_scale_layout scale_layout_;
  double tensor_scale_;
};

}  // namespace pacts::reference::detail
