#include <pacts/conformance/case_data.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <pacts/conformance/rng.h>

namespace pacts::conformance {
namespace {

pacts_view view_of(std::vector<uint8_t>& bytes) {
  return bytes.empty() ? pacts_view{} : pacts_view{bytes.data(), bytes.size()};
}

template <class T>
pacts_view view_of(std::vector<T>& items) {
  return items.empty() ? pacts_view{} : pacts_view{items.data(), items.size() * sizeof(T)};
}

int64_t pool_offset(const pacts_pool_layout& l, int64_t page, int64_t head, int64_t slot,
                    int64_t unit) {
  return page * l.s_page + head * l.s_head + slot * l.s_tok + (unit / l.chunk) * l.s_chunk +
         unit % l.chunk;
}

int64_t scale_offset(const pacts_scale_layout& l, int64_t page, int64_t head, int64_t slot,
                     int64_t block) {
  return page * l.s_page + head * l.s_head + slot * l.s_tok + block * l.s_block;
}

// Flags the bytes of one pool row (page, head, slot) and its scales as owned.
void mark_row(const pacts_problem& p, const pacts_pool_layout& layout, pacts_scale_mode mode,
              const pacts_scale_layout& scale_layout, int64_t page, int64_t head, int64_t slot,
              std::vector<uint8_t>& data_flags, std::vector<uint8_t>& scale_flags) {
  const bool e2m1 = p.kv_format == PACTS_FORMAT_E2M1;
  const int64_t units = e2m1 ? p.head_dim / 2 : p.head_dim;
  const int64_t bytes_per_unit = e2m1 ? 1 : spec::element_bytes(p.kv_format);
  for (int64_t u = 0; u < units; ++u) {
    const int64_t at = pool_offset(layout, page, head, slot, u) * bytes_per_unit;
    std::fill_n(data_flags.begin() + at, bytes_per_unit, uint8_t{1});
  }
  if (mode == PACTS_SCALE_PER_TOKEN) {
    const int64_t at = scale_offset(scale_layout, page, head, slot, 0) * 4;
    std::fill_n(scale_flags.begin() + at, 4, uint8_t{1});
  } else if (mode == PACTS_SCALE_MX_BLOCK) {
    for (int64_t blk = 0; blk < p.head_dim / 32; ++blk)
      scale_flags[scale_offset(scale_layout, page, head, slot, blk)] = 1;
  }
}

// The little-endian bytes of one element of `f` holding the fill, or empty when the format has
// no such value.
std::vector<uint8_t> fill_pattern(pacts_format f, Poison fill) {
  const spec::FormatInfo* fi = spec::format_info(f);
  uint32_t code = 0;
  switch (fill) {
    case Poison::kNaN:
      if (!fi->has_nan) return {};
      code = spec::encode(f, std::numeric_limits<double>::quiet_NaN(), spec::Overflow::kNonSaturate);
      break;
    case Poison::kInf:
      if (!fi->has_inf) return {};
      code = spec::encode(f, std::numeric_limits<double>::infinity(), spec::Overflow::kNonSaturate);
      break;
    case Poison::kMaxFinite:
      code = spec::encode(f, fi->max_finite, spec::Overflow::kSaturate);
      break;
    case Poison::kRandomBytes:
      return {};
  }
  if (f == PACTS_FORMAT_E2M1) code |= code << 4;  // both nibbles of the byte
  const int bytes = std::max(spec::element_bytes(f), 1);
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  for (int i = 0; i < bytes; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(code >> (8 * i));
  return out;
}

void fill_unowned(std::vector<uint8_t>& bytes, const std::vector<uint8_t>& owned,
                  const std::vector<uint8_t>& pattern, Rng& rng) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (owned[i]) continue;
    bytes[i] = pattern.empty() ? static_cast<uint8_t>(rng.next()) : pattern[i % pattern.size()];
  }
}

}  // namespace

void CaseData::allocate() {
  const spec::RequiredExtents e = spec::required_extents(problem);
  q.assign(e.q, 0);
  k.assign(e.k, 0);
  v.assign(e.v, 0);
  k_scale.assign(e.k_scale, 0);
  v_scale.assign(e.v_scale, 0);
  sinks.assign(e.sinks, 0);
  out.assign(e.out, 0);
  lse.assign(e.lse, 0);
  block_table.assign(e.block_table / 4, 0);
  context_lens.assign(e.context_lens / 4, 0);
}

pacts_buffers CaseData::buffers() {
  pacts_buffers b{};
  b.q = view_of(q);
  b.k = view_of(k);
  b.v = view_of(v);
  b.k_scale = view_of(k_scale);
  b.v_scale = view_of(v_scale);
  b.block_table = view_of(block_table);
  b.context_lens = view_of(context_lens);
  b.sinks = view_of(sinks);
  b.out = view_of(out);
  b.lse = view_of(lse);
  return b;
}

spec::KeyRange visible_keys(const pacts_problem& p, int32_t context_len) {
  return spec::sequence_keys(context_len, p.q_len, p.window);
}

Ownership owned_bytes(const CaseData& c) {
  const pacts_problem& p = c.problem;
  Ownership own;
  own.k.assign(c.k.size(), 0);
  own.v.assign(c.v.size(), 0);
  own.k_scale.assign(c.k_scale.size(), 0);
  own.v_scale.assign(c.v_scale.size(), 0);
  own.block_table.assign(c.block_table.size(), 0);
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t ctx = c.context_lens[static_cast<size_t>(b)];
    if (ctx < 0 || int64_t{ctx} > int64_t{p.max_pages_per_seq} * p.page_size) continue;
    const spec::KeyRange keys = visible_keys(p, ctx);
    for (int64_t t = keys.begin; t < keys.end; ++t) {
      const size_t entry = static_cast<size_t>(b * p.block_table_stride + t / p.page_size);
      own.block_table[entry] = 1;
      const int32_t page = c.block_table[entry];
      if (page < 0 || page >= p.num_pages) continue;  // a device precondition failure
      for (int64_t h = 0; h < p.num_kv_heads; ++h) {
        mark_row(p, p.k_layout, p.k_scale_mode, p.k_scale_layout, page, h, t % p.page_size, own.k,
                 own.k_scale);
        mark_row(p, p.v_layout, p.v_scale_mode, p.v_scale_layout, page, h, t % p.page_size, own.v,
                 own.v_scale);
      }
    }
  }
  return own;
}

bool poison_unowned(CaseData& c, Poison fill, uint64_t seed) {
  const pacts_problem& p = c.problem;
  const bool mx = p.kv_format == PACTS_FORMAT_E2M1;
  // MXFP4 data has no NaN or Inf: its NaN lives in the e8m0 byte (0xFF), which has no Inf.
  std::vector<uint8_t> data_pattern, scale_pattern;
  if (fill != Poison::kRandomBytes) {
    data_pattern = fill_pattern(p.kv_format, mx && fill == Poison::kNaN ? Poison::kMaxFinite : fill);
    scale_pattern = fill_pattern(mx ? PACTS_FORMAT_E8M0 : PACTS_FORMAT_FP32, fill);
    if (data_pattern.empty() || (mx && scale_pattern.empty())) return false;
    if (scale_pattern.empty()) scale_pattern = fill_pattern(PACTS_FORMAT_FP32, Poison::kNaN);
  }
  Rng rng(seed);
  const Ownership own = owned_bytes(c);
  fill_unowned(c.k, own.k, data_pattern, rng);
  fill_unowned(c.v, own.v, data_pattern, rng);
  fill_unowned(c.k_scale, own.k_scale, scale_pattern, rng);
  fill_unowned(c.v_scale, own.v_scale, scale_pattern, rng);
  // Padding entries: out of range both ways, and pages that hold poison where any exist.
  const std::array<int32_t, 4> wild = {-1, std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int32_t>::max(), p.num_pages};
  for (size_t i = 0; i < c.block_table.size(); ++i) {
    if (own.block_table[i]) continue;
    const uint64_t r = rng.next();
    c.block_table[i] = (r % 3 == 0 && p.num_pages > 0)
                           ? static_cast<int32_t>(r % static_cast<uint64_t>(p.num_pages))
                           : wild[r % wild.size()];
  }
  return true;
}

}  // namespace pacts::conformance
