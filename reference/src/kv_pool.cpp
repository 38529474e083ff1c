// KV pool addressing (spec/operator.md §3) and dequantisation (spec/formats.md §3).
#include "kv_pool.h"

#include <pacts/spec/formats.h>

#include <cstring>

namespace pacts::reference::detail {

KvPool::KvPool(const pacts_problem& problem, const pacts_view& data,
               const pacts_pool_layout& layout, pacts_scale_mode mode, const pacts_view& scales,
               const pacts_scale_layout& scale_layout, float tensor_scale)
    : data_(static_cast<const uint8_t*>(data.data)),
      layout_(layout),
      format_(problem.kv_format),
      nibble_order_(problem.nibble_order),
      head_dim_(problem.head_dim),
      element_bytes_(spec::element_bytes(problem.kv_format)),
      mode_(mode),
      scales_(static_cast<const uint8_t*>(scales.data)),
      scale_layout_(scale_layout),
      tensor_scale_(tensor_scale) {}

// `row_offset` is p*s_page + h*s_head + t*s_tok. For e2m1 the formula runs over the byte index
// d / 2 in bytes, and the nibble order picks the half (spec/formats.md §2).
double KvPool::element(int64_t row_offset, int d) const {
  const int64_t chunk = layout_.chunk;
  const int64_t unit = element_bytes_ == 0 ? d / 2 : d;
  const int64_t offset = row_offset + (unit / chunk) * layout_.s_chunk + unit % chunk;
  if (element_bytes_ == 0) {
    const uint8_t byte = data_[offset];
    const bool even_low = nibble_order_ == PACTS_NIBBLE_LOW_FIRST;
    const bool low = (d % 2 == 0) == even_low;
    return spec::decode_e2m1(static_cast<uint8_t>(low ? byte & 0xFu : byte >> 4));
  }
  if (element_bytes_ == 1) return spec::decode(format_, data_[offset]);
  uint16_t code = 0;
  std::memcpy(&code, data_ + offset * 2, sizeof code);
  return spec::decode(format_, code);
}

double KvPool::block_scale(int64_t page, int64_t head, int64_t slot, int d) const {
  const pacts_scale_layout& l = scale_layout_;
  const int64_t offset = page * l.s_page + head * l.s_head + slot * l.s_tok + (d / 32) * l.s_block;
  return spec::decode_e8m0(scales_[offset]);
}

double KvPool::row_factor(int64_t page, int64_t head, int64_t slot) const {
  switch (mode_) {
    case PACTS_SCALE_PER_TENSOR: return tensor_scale_;
    case PACTS_SCALE_PER_TOKEN: {
      const pacts_scale_layout& l = scale_layout_;
      const int64_t index = page * l.s_page + head * l.s_head + slot * l.s_tok;
      float scale = 0;
      std::memcpy(&scale, scales_ + index * 4, sizeof scale);
      return scale;
    }
    default: return 1.0;
  }
}

double KvPool::load_row(int64_t page, int64_t head, int64_t slot,
                        std::span<double> values) const {
  const int64_t row_offset = page * layout_.s_page + head * layout_.s_head + slot * layout_.s_tok;
  double block = 1.0;
  for (int d = 0; d < head_dim_; ++d) {
    // One e8m0 byte per 32 elements: the row's own bytes only, each read once.
    if (mode_ == PACTS_SCALE_MX_BLOCK && d % 32 == 0) block = block_scale(page, head, slot, d);
    values[static_cast<size_t>(d)] = element(row_offset, d) * block;
  }
  return row_factor(page, head, slot);
}

}  // namespace pacts::reference::detail
