// PACTS-DEV-2's case transform (large_addresses.h).
#include <pacts/conformance/large_addresses.h>
#include <pacts/conformance/random_case.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace pacts::conformance {

int64_t large_address_page_shift(const pacts_problem& p, int64_t threshold) {
  return threshold / std::min(p.k_layout.s_page, p.v_layout.s_page) + 1;
}

namespace {

// Byte pattern that is NaN in every KV format that has one (fnuz formats: 0x80); e2m1 has no
// NaN, so its unowned bytes are the largest-magnitude code, which a wrap would still show.
uint8_t nan_byte(pacts_format f) {
  return (f == PACTS_FORMAT_E4M3FNUZ || f == PACTS_FORMAT_E5M2FNUZ) ? 0x80 : 0xFF;
}

// One K or V pool (and its scale pool) moved to `pages` pages, the case's pages becoming the
// highest ids (old id + shift). Everything else is `fill`. The page block of a page is
// [id * s_page, id * s_page + s_page) units; layouts whose pages interleave are not applicable.
bool move_pool(std::vector<uint8_t>& data, int64_t s_page_bytes, int32_t old_pages, int64_t shift,
               uint64_t new_bytes, uint8_t fill) {
  std::vector<uint8_t> moved;
  moved.assign(new_bytes, fill);
  for (int64_t pg = 0; pg < old_pages; ++pg) {
    const int64_t from = pg * s_page_bytes;
    if (from >= static_cast<int64_t>(data.size())) break;
    const int64_t n = std::min<int64_t>(s_page_bytes, static_cast<int64_t>(data.size()) - from);
    const int64_t to = (pg + shift) * s_page_bytes;
    if (to + n > static_cast<int64_t>(moved.size())) return false;
    std::copy_n(data.begin() + from, n, moved.begin() + to);
  }
  data = std::move(moved);
  return true;
}

// Units (elements; bytes for e2m1) one page of a pool layout spans.
int64_t page_span(const pacts_problem& p, const pacts_pool_layout& l) {
  const int64_t units = p.kv_format == PACTS_FORMAT_E2M1 ? p.head_dim / 2 : p.head_dim;
  const int64_t chunk = l.chunk > 0 ? l.chunk : units;
  return (p.num_kv_heads - 1) * l.s_head + (p.page_size - 1) * l.s_tok +
         (units / chunk - 1) * l.s_chunk + chunk;
}

// kPools: both pools past the threshold in units (past 2^32 bytes for 16-bit formats at 2^31), the owned pages at the
// highest ids, the per-token / MX scale pools moved with them, every other byte NaN.
std::optional<std::string> spread_pools(CaseData& c, int64_t threshold) {
  pacts_problem& p = c.problem;
  if (page_span(p, p.k_layout) > p.k_layout.s_page || page_span(p, p.v_layout) > p.v_layout.s_page)
    return "pages interleave in this layout";
  const int64_t shift = large_address_page_shift(p, threshold);
  if (shift + p.num_pages > std::numeric_limits<int32_t>::max()) return "too many pages";
  const int32_t old_pages = p.num_pages;
  p.num_pages = static_cast<int32_t>(shift + old_pages);
  const spec::RequiredExtents need = spec::required_extents(p);
  const int unit = p.kv_format == PACTS_FORMAT_E2M1 ? 1 : spec::element_bytes(p.kv_format);
  const uint8_t fill = nan_byte(p.kv_format);
  if (!move_pool(c.k, p.k_layout.s_page * unit, old_pages, shift, need.k, fill) ||
      !move_pool(c.v, p.v_layout.s_page * unit, old_pages, shift, need.v, fill))
    return "a page block outside the pool";
  const auto scale_unit = [&](pacts_scale_mode m) { return m == PACTS_SCALE_MX_BLOCK ? 1 : 4; };
  if (p.k_scale_mode == PACTS_SCALE_PER_TOKEN || p.k_scale_mode == PACTS_SCALE_MX_BLOCK)
    if (!move_pool(c.k_scale, p.k_scale_layout.s_page * scale_unit(p.k_scale_mode), old_pages,
                   shift, need.k_scale, 0xFF))
      return "a scale page block outside the pool";
  if (p.v_scale_mode == PACTS_SCALE_PER_TOKEN || p.v_scale_mode == PACTS_SCALE_MX_BLOCK)
    if (!move_pool(c.v_scale, p.v_scale_layout.s_page * scale_unit(p.v_scale_mode), old_pages,
                   shift, need.v_scale, 0xFF))
      return "a scale page block outside the pool";
  // Owned entries follow their pages; padding entries keep their (in-range) ids.
  for (int32_t b = 0; b < p.batch; ++b) {
    const spec::KeyRange cols =
        spec::owned_columns(visible_keys(p, c.context_lens[static_cast<size_t>(b)]), p.page_size);
    for (int64_t col = cols.begin; col < cols.end; ++col)
      c.block_table[static_cast<size_t>(b * p.block_table_stride + col)] +=
          static_cast<int32_t>(shift);
  }
  return std::nullopt;
}

// kQueryView / kOutputView: a batch stride that puts the last sequence's rows past the threshold;
// Q's gaps are NaN.
std::optional<std::string> spread_rows(CaseData& c, bool query, int64_t threshold) {
  pacts_problem& p = c.problem;
  if (p.batch < 2) return "B < 2";
  pacts_row_layout& l = query ? p.q_layout : p.out_layout;
  const pacts_row_layout old = l;
  l.s_batch = std::max(old.s_batch, (threshold + p.batch - 2) / (p.batch - 1) + 1);
  const spec::RequiredExtents need = spec::required_extents(p);
  if (!query) {
    c.out.assign(need.out, 0);
    return std::nullopt;
  }
  const int eb = spec::element_bytes(p.q_format);
  std::vector<uint8_t> moved;
  moved.assign(need.q, nan_byte(p.q_format));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        const int64_t from = (b * old.s_batch + i * old.s_tok + h * old.s_head) * eb;
        const int64_t to = (b * l.s_batch + i * l.s_tok + h * l.s_head) * eb;
        std::copy_n(c.q.begin() + from, p.head_dim * eb, moved.begin() + to);
      }
  c.q = std::move(moved);
  return std::nullopt;
}

}  // namespace

std::string describe(LargeAddressVariant v) {
  switch (v) {
    case LargeAddressVariant::kPools: return "K/V pools past 2^31 elements, owned pages highest";
    case LargeAddressVariant::kQueryView: return "Q view offsets past 2^31 elements";
    case LargeAddressVariant::kOutputView: return "output view offsets past 2^31 elements";
  }
  return "?";
}

std::optional<std::string> spread_to_large_addresses(CaseData& c, LargeAddressVariant variant,
                                                     int64_t threshold) {
  switch (variant) {
    case LargeAddressVariant::kPools: return spread_pools(c, threshold);
    case LargeAddressVariant::kQueryView: return spread_rows(c, true, threshold);
    case LargeAddressVariant::kOutputView: return spread_rows(c, false, threshold);
  }
  return "unknown variant";
}

}  // namespace pacts::conformance
