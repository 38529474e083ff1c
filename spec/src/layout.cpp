// Default layouts and the extents that layouts reach (spec/operator.md §3).
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>

namespace pacts::spec {

pacts_problem make_problem(int32_t batch, int32_t q_len, int32_t num_q_heads,
                           int32_t num_kv_heads, int32_t head_dim, int32_t page_size,
                           int32_t num_pages, int32_t max_pages_per_seq) {
  pacts_problem p{};
  p.abi_version = PACTS_ABI_VERSION;
  p.batch = batch;
  p.q_len = q_len;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.page_size = page_size;
  p.num_pages = num_pages;
  p.max_pages_per_seq = max_pages_per_seq;
  p.q_format = PACTS_FORMAT_BF16;
  p.kv_format = PACTS_FORMAT_BF16;
  p.out_format = PACTS_FORMAT_BF16;
  p.k_scale_mode = PACTS_SCALE_NONE;
  p.v_scale_mode = PACTS_SCALE_NONE;
  p.nibble_order = PACTS_NIBBLE_LOW_FIRST;
  p.softmax_scale = 1.0f;
  p.q_scale = 1.0f;
  p.k_scale = 1.0f;
  p.v_scale = 1.0f;
  const int64_t d = head_dim;
  const pacts_row_layout rows{int64_t{q_len} * num_q_heads * d, int64_t{num_q_heads} * d, d};
  p.q_layout = rows;
  p.out_layout = rows;
  p.lse_layout = {int64_t{q_len} * num_q_heads, num_q_heads, 1};
  // NHD pool: [pages, page_size, Hkv, D].
  const pacts_pool_layout nhd{int64_t{page_size} * num_kv_heads * d, d, int64_t{num_kv_heads} * d,
                              d, head_dim, 0};
  p.k_layout = nhd;
  p.v_layout = nhd;
  p.block_table_stride = max_pages_per_seq;
  return p;
}

namespace {

// Largest offset (in the layout's units) reached by a pool, plus one.
int64_t pool_span(const pacts_problem& p, const pacts_pool_layout& l, int64_t dims) {
  if (p.num_pages == 0 || p.num_kv_heads == 0) return 0;
  const int64_t chunk = std::max<int64_t>(l.chunk, 1);
  const int64_t chunks = (dims + chunk - 1) / chunk;
  return (p.num_pages - 1) * l.s_page + (p.num_kv_heads - 1) * l.s_head +
         (p.page_size - 1) * l.s_tok + (chunks - 1) * l.s_chunk + std::min(chunk, dims);
}

int64_t scale_span(const pacts_problem& p, const pacts_scale_layout& l, int64_t blocks) {
  if (p.num_pages == 0 || p.num_kv_heads == 0) return 0;
  return (p.num_pages - 1) * l.s_page + (p.num_kv_heads - 1) * l.s_head +
         (p.page_size - 1) * l.s_tok + (blocks - 1) * l.s_block + 1;
}

int64_t rows_span(const pacts_problem& p, const pacts_row_layout& l, int64_t inner) {
  if (p.batch == 0 || p.num_q_heads == 0) return 0;
  return (p.batch - 1) * l.s_batch + (p.q_len - 1) * l.s_tok + (p.num_q_heads - 1) * l.s_head +
         inner;
}

uint64_t bytes_of(int64_t elements, pacts_format f) {
  return static_cast<uint64_t>(elements) * static_cast<uint64_t>(element_bytes(f));
}

uint64_t kv_bytes(const pacts_problem& p, const pacts_pool_layout& l) {
  if (p.kv_format == PACTS_FORMAT_E2M1) return static_cast<uint64_t>(pool_span(p, l, p.head_dim / 2));
  return bytes_of(pool_span(p, l, p.head_dim), p.kv_format);
}

uint64_t scale_bytes(const pacts_problem& p, pacts_scale_mode mode, const pacts_scale_layout& l) {
  switch (mode) {
    case PACTS_SCALE_PER_TOKEN: return 4u * static_cast<uint64_t>(scale_span(p, l, 1));
    case PACTS_SCALE_MX_BLOCK: return static_cast<uint64_t>(scale_span(p, l, p.head_dim / 32));
    default: return 0;
  }
}

}  // namespace

RequiredExtents required_extents(const pacts_problem& p) {
  RequiredExtents e{};
  e.q = bytes_of(rows_span(p, p.q_layout, p.head_dim), p.q_format);
  e.out = bytes_of(rows_span(p, p.out_layout, p.head_dim), p.out_format);
  e.lse = p.want_lse ? 4u * static_cast<uint64_t>(rows_span(p, p.lse_layout, 1)) : 0;
  e.k = kv_bytes(p, p.k_layout);
  e.v = kv_bytes(p, p.v_layout);
  e.k_scale = scale_bytes(p, p.k_scale_mode, p.k_scale_layout);
  e.v_scale = scale_bytes(p, p.v_scale_mode, p.v_scale_layout);
  e.block_table = p.batch == 0 || p.max_pages_per_seq == 0
                      ? 0
                      : 4u * static_cast<uint64_t>((p.batch - 1) * p.block_table_stride +
                                                   p.max_pages_per_seq);
  e.context_lens = 4u * static_cast<uint64_t>(p.batch);
  e.sinks = p.has_sinks ? 4u * static_cast<uint64_t>(p.num_q_heads) : 0;
  return e;
}

}  // namespace pacts::spec
