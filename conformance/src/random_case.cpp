#include <pacts/conformance/random_case.h>
#include <pacts/conformance/rng.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

namespace pacts::conformance {
namespace {

template <class T, size_t N>
T pick(Rng& rng, const std::array<T, N>& items) {
  return items[rng.below(N)];
}

// Contexts weighted to the edges that break kernels (spec/properties.md, generation).
int32_t edge_context(Rng& rng, const CaseShape& s) {
  const int32_t P = s.page_size, L = s.q_len;
  const std::array<int32_t, 11> edges = {0, 1, L - 1, L, P - 1, P, P + 1, 2 * P - 1, 2 * P + 1,
                                         s.max_context, s.max_context - 1};
  if (rng.below(3) != 0) return std::clamp(edges[rng.below(edges.size())], 0, s.max_context);
  return rng.range(0, s.max_context);
}

void put(std::vector<uint8_t>& buf, int64_t byte_offset, uint32_t code, int bytes) {
  for (int i = 0; i < bytes; ++i)
    buf[static_cast<size_t>(byte_offset + i)] = static_cast<uint8_t>(code >> (8 * i));
}

// A value of moderate magnitude in format f: normal(0, sigma) rounded to the format.
uint32_t random_code(Rng& rng, pacts_format f, double sigma) {
  return spec::encode(f, rng.normal(sigma), spec::Overflow::kSaturate);
}

double data_sigma(pacts_format f) {
  switch (f) {
    case PACTS_FORMAT_E2M1: return 2.0;
    case PACTS_FORMAT_E4M3FN:
    case PACTS_FORMAT_E4M3FNUZ:
    case PACTS_FORMAT_E5M2:
    case PACTS_FORMAT_E5M2FNUZ: return 16.0;
    default: return 1.0;
  }
}

void fill_pool_row(Rng& rng, const pacts_problem& p, const pacts_pool_layout& l,
                   std::vector<uint8_t>& buf, int64_t page, int64_t head, int64_t slot) {
  const int64_t base = page * l.s_page + head * l.s_head + slot * l.s_tok;
  if (p.kv_format == PACTS_FORMAT_E2M1) {
    for (int64_t u = 0; u < p.head_dim / 2; ++u)
      buf[static_cast<size_t>(base + (u / l.chunk) * l.s_chunk + u % l.chunk)] =
          static_cast<uint8_t>(rng.next());
    return;
  }
  const int eb = spec::element_bytes(p.kv_format);
  for (int64_t d = 0; d < p.head_dim; ++d)
    put(buf, (base + (d / l.chunk) * l.s_chunk + d % l.chunk) * eb,
        random_code(rng, p.kv_format, data_sigma(p.kv_format)), eb);
}

void fill_scales(Rng& rng, const CaseShape& shape, bool is_k, pacts_scale_mode mode,
                 const pacts_scale_layout& l, std::vector<uint8_t>& buf, int64_t page,
                 int64_t head, int64_t slot) {
  const int64_t base = page * l.s_page + head * l.s_head + slot * l.s_tok;
  if (mode == PACTS_SCALE_PER_TOKEN) {
    // 2^-6 .. 2^-2 with random fp32 significands.
    const float s = static_cast<float>(std::ldexp(1.0 + rng.uniform(), rng.range(-6, -3)));
    std::memcpy(&buf[static_cast<size_t>(base * 4)], &s, 4);
  } else if (mode == PACTS_SCALE_MX_BLOCK) {
    for (int64_t blk = 0; blk < shape.head_dim / 32; ++blk)
      buf[static_cast<size_t>(base + blk * l.s_block)] =
          static_cast<uint8_t>(is_k ? rng.range(shape.k_e8m0_lo, shape.k_e8m0_hi)
                                    : rng.range(shape.v_e8m0_lo, shape.v_e8m0_hi));
  }
}

pacts_scale_layout scale_layout(const pacts_problem& p, pacts_scale_mode mode) {
  const int64_t blocks = mode == PACTS_SCALE_MX_BLOCK ? p.head_dim / 32 : 1;
  // [pages, Hkv, page_size, blocks]
  return {p.num_kv_heads * p.page_size * blocks, p.page_size * blocks, blocks, 1};
}

}  // namespace

pacts_pool_layout pool_layout(PoolLayout layout, const pacts_problem& p, bool is_k) {
  const bool e2m1 = p.kv_format == PACTS_FORMAT_E2M1;
  const int64_t U = e2m1 ? p.head_dim / 2 : p.head_dim;  // units per row
  const int64_t H = p.num_kv_heads, P = p.page_size;
  const int32_t unit = static_cast<int32_t>(U);
  switch (layout) {
    case PoolLayout::kNHD: return {P * H * U, U, H * U, U, unit, 0};
    case PoolLayout::kHND: return {H * P * U, P * U, U, U, unit, 0};
    case PoolLayout::kXPackedK: {
      const int64_t x = e2m1 ? 16 : 16 / spec::element_bytes(p.kv_format);  // 16 bytes per chunk
      return {H * U * P, U * P, x, P * x, static_cast<int32_t>(x), 0};
    }
    case PoolLayout::kDimMajorV: return {H * U * P, U * P, 1, P, 1, 0};
    case PoolLayout::kPadded: {
      const int64_t row = U + (is_k ? 32 : 16);
      return {H * P * row + 64, P * row, row, U, unit, 0};
    }
  }
  return {};
}

CaseShape random_shape(uint64_t seed, int32_t max_context) {
  Rng rng(seed);
  CaseShape s;
  s.batch = rng.range(1, 4);
  s.q_len = pick(rng, std::array<int32_t, 5>{1, 1, 2, 4, 5});
  s.num_kv_heads = rng.range(1, 2);
  s.num_q_heads = s.num_kv_heads * pick(rng, std::array<int32_t, 4>{1, 2, 4, 8});
  s.head_dim = pick(rng, std::array<int32_t, 3>{64, 64, 128});
  s.page_size = pick(rng, std::array<int32_t, 4>{8, 16, 32, 64});
  s.kv_format = pick(rng, std::array<pacts_format, 7>{
                              PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN,
                              PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ,
                              PACTS_FORMAT_E2M1});
  s.q_format = pick(rng, std::array<pacts_format, 4>{PACTS_FORMAT_BF16, PACTS_FORMAT_FP16,
                                                      PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E5M2});
  s.out_format = pick(rng, std::array<pacts_format, 3>{PACTS_FORMAT_BF16, PACTS_FORMAT_FP16,
                                                        PACTS_FORMAT_FP32});
  const auto mode = [&]() {
    if (s.kv_format == PACTS_FORMAT_E2M1) return PACTS_SCALE_MX_BLOCK;
    if (s.kv_format == PACTS_FORMAT_BF16 || s.kv_format == PACTS_FORMAT_FP16)
      return pick(rng, std::array<pacts_scale_mode, 2>{PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR});
    return pick(rng, std::array<pacts_scale_mode, 3>{PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR,
                                                     PACTS_SCALE_PER_TOKEN});
  };
  s.k_scale_mode = mode();
  s.v_scale_mode = mode();
  s.nibble_order = rng.below(2) ? PACTS_NIBBLE_LOW_FIRST : PACTS_NIBBLE_HIGH_FIRST;
  s.k_layout = pick(rng, std::array<PoolLayout, 4>{PoolLayout::kNHD, PoolLayout::kHND,
                                                    PoolLayout::kXPackedK, PoolLayout::kPadded});
  s.v_layout = pick(rng, std::array<PoolLayout, 4>{PoolLayout::kNHD, PoolLayout::kHND,
                                                    PoolLayout::kDimMajorV, PoolLayout::kPadded});
  s.softcap = rng.below(4) == 0 ? static_cast<float>(rng.range(5, 44)) : 0.0f;
  s.window = rng.below(4) == 0 ? rng.range(1, 40) : 0;
  s.sinks = rng.below(3) == 0;
  s.lse = rng.below(4) != 0;
  s.max_context = max_context;
  s.extra_pages = rng.range(0, 3);
  s.q_head_major = rng.below(4) == 0;
  s.out_head_major = rng.below(4) == 0;
  return s;
}

namespace {

// Query / output rows with `gap` elements after every head row: [B, L, Hq, D] (token-major) or
// [B, Hq, L, D] (head-major).
pacts_row_layout row_layout(const pacts_problem& p, int64_t inner, int32_t gap, bool head_major) {
  const int64_t row = inner + gap, batch = int64_t{p.q_len} * p.num_q_heads * row;
  if (head_major) return {batch, row, int64_t{p.q_len} * row};
  return {batch, int64_t{p.num_q_heads} * row, row};
}

int64_t element_offset(const pacts_row_layout& l, int64_t b, int64_t i, int64_t h) {
  return b * l.s_batch + i * l.s_tok + h * l.s_head;
}

}  // namespace

pacts_problem shape_problem(const CaseShape& s, int32_t num_pages, int32_t max_pages_per_seq) {
  pacts_problem p = spec::make_problem(s.batch, s.q_len, s.num_q_heads, s.num_kv_heads,
                                       s.head_dim, s.page_size, num_pages, max_pages_per_seq);
  p.q_format = s.q_format;
  p.kv_format = s.kv_format;
  p.out_format = s.out_format;
  p.k_scale_mode = s.k_scale_mode;
  p.v_scale_mode = s.v_scale_mode;
  p.nibble_order = s.nibble_order;
  p.softmax_scale = static_cast<float>(1.0 / std::sqrt(double(s.head_dim)));
  if (spec::element_bytes(s.q_format) == 1) p.q_scale = 0.125f;
  if (p.k_scale_mode == PACTS_SCALE_PER_TENSOR) p.k_scale = 0.25f;
  if (p.v_scale_mode == PACTS_SCALE_PER_TENSOR) p.v_scale = 0.5f;
  p.k_layout = pool_layout(s.k_layout, p, true);
  p.v_layout = pool_layout(s.v_layout, p, false);
  p.k_scale_layout = scale_layout(p, p.k_scale_mode);
  p.v_scale_layout = scale_layout(p, p.v_scale_mode);
  p.q_layout = row_layout(p, p.head_dim, s.q_gap, s.q_head_major);
  p.out_layout = row_layout(p, p.head_dim, s.out_gap, s.out_head_major);
  p.lse_layout = row_layout(p, 1, s.out_gap, s.out_head_major);
  p.softcap = s.softcap;
  p.window = s.window;
  p.has_sinks = s.sinks ? 1 : 0;
  p.want_lse = s.lse ? 1 : 0;
  return p;
}

namespace {

// A tiny Q (q_exponent < 0) that the Q format cannot hold: bf16 holds it in its data, fp16 and fp8
// cannot, so it goes into q_scale, a power of two.
bool tiny_query_in_scale(const CaseShape& s) { return s.q_exponent != 0 && s.q_format != PACTS_FORMAT_BF16; }

// The contexts (the shape's, or drawn from `rng` when it has none) and the descriptor for them:
// the first draws of make_case, shared with case_problem so that both give the same problem.
pacts_problem contexts_and_problem(const CaseShape& s, Rng& rng, std::vector<int32_t>& ctx) {
  ctx = s.contexts;
  if (ctx.empty()) {
    ctx.resize(static_cast<size_t>(s.batch));
    for (int32_t& c : ctx) c = edge_context(rng, s);
  }
  int32_t longest = 0, used_pages = 0;
  for (int32_t c : ctx) {
    longest = std::max(longest, c);
    used_pages += (c + s.page_size - 1) / s.page_size;
  }
  const int32_t max_pages = (longest + s.page_size - 1) / s.page_size + s.bt_extra_cols;
  pacts_problem p = shape_problem(s, used_pages + s.extra_pages + s.low_pages, std::max(max_pages, 1));
  if (tiny_query_in_scale(s)) p.q_scale = static_cast<float>(std::ldexp(1.0, s.q_exponent));
  return p;
}

}  // namespace

pacts_problem case_problem(const CaseShape& s, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ctx;
  return contexts_and_problem(s, rng, ctx);
}

CaseData make_case(const CaseShape& s, uint64_t seed, const std::vector<Override>& overrides) {
  Rng rng(seed);
  std::vector<int32_t> ctx;
  CaseData c;
  pacts_problem& p = c.problem;
  p = contexts_and_problem(s, rng, ctx);
  c.allocate();
  c.context_lens = ctx;

  // Random physical pages: a permutation of the ids from low_pages up, so page ids never follow
  // logical order. With share_pages, every sequence's first page is sequence 0's (a shared
  // prefix).
  std::vector<int32_t> pages(static_cast<size_t>(p.num_pages - s.low_pages));
  std::iota(pages.begin(), pages.end(), s.low_pages);
  rng.shuffle(pages);
  size_t next = 0;
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t n = (ctx[static_cast<size_t>(b)] + p.page_size - 1) / p.page_size;
    for (int32_t col = 0; col < n; ++col) {
      const bool shared = s.share_pages && col == 0 && b > 0 && ctx[0] > 0;
      c.block_table[static_cast<size_t>(b * p.block_table_stride + col)] =
          shared ? c.block_table[0] : pages[next++];
    }
  }

  // Data for every row of every page from low_pages up (owned or not; poison_unowned overwrites
  // the rest); the low pages keep the zeros allocate() gave them.
  for (int64_t page = s.low_pages; page < p.num_pages; ++page)
    for (int64_t h = 0; h < p.num_kv_heads; ++h)
      for (int64_t t = 0; t < p.page_size; ++t) {
        fill_pool_row(rng, p, p.k_layout, c.k, page, h, t);
        fill_pool_row(rng, p, p.v_layout, c.v, page, h, t);
        fill_scales(rng, s, true, p.k_scale_mode, p.k_scale_layout, c.k_scale, page, h, t);
        fill_scales(rng, s, false, p.v_scale_mode, p.v_scale_layout, c.v_scale, page, h, t);
      }
  // A tiny Q (q_exponent < 0): bf16 holds it in its data; fp16 and fp8 cannot, so it goes into
  // q_scale, a power of two (the aiter case: fp8 Q whose small q_scale must be applied before a
  // huge e8m0 K scale, spec/contract.md §2).
  const int qb = spec::element_bytes(p.q_format);
  const bool tiny_in_scale = tiny_query_in_scale(s);
  const double q_sigma = std::ldexp(qb == 1 ? 8.0 : 1.0, tiny_in_scale ? 0 : s.q_exponent);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        for (int64_t d = 0; d < p.head_dim; ++d)
          put(c.q, (element_offset(p.q_layout, b, i, h) + d) * qb,
              random_code(rng, p.q_format, q_sigma), qb);
  if (p.has_sinks) {
    for (int64_t h = 0; h < p.num_q_heads; ++h) {
      const float sink = static_cast<float>(rng.normal(2.0));
      std::memcpy(&c.sinks[static_cast<size_t>(h * 4)], &sink, 4);
    }
  }
  for (const Override& o : overrides) apply_override(c, o);
  return c;
}

void apply_override(CaseData& c, const Override& o) {
  const pacts_problem& p = c.problem;
  using T = Override::Tensor;
  if (o.seq < 0 || o.seq >= p.batch || o.head < 0 || o.dim < 0) return;
  if (o.tensor == T::kSink) {
    if (p.has_sinks && o.head < p.num_q_heads)
      std::memcpy(&c.sinks[static_cast<size_t>(o.head) * 4], &o.code, 4);
    return;
  }
  if (o.tensor == T::kQ) {
    if (o.pos < 0 || o.pos >= p.q_len || o.head >= p.num_q_heads || o.dim >= p.head_dim) return;
    const int qb = spec::element_bytes(p.q_format);
    put(c.q, (element_offset(p.q_layout, o.seq, o.pos, o.head) + o.dim) * qb, o.code, qb);
    return;
  }
  // Keys: only positions the sequence owns (spec/contract.md §1).
  const int32_t ctx = c.context_lens[static_cast<size_t>(o.seq)];
  const spec::KeyRange keys = visible_keys(p, ctx);
  if (!keys.contains(o.pos) || o.head >= p.num_kv_heads) return;
  const int32_t page =
      c.block_table[static_cast<size_t>(o.seq * p.block_table_stride + o.pos / p.page_size)];
  const int64_t slot = o.pos % p.page_size;
  const bool is_k = o.tensor == T::kK || o.tensor == T::kKScale;
  const pacts_pool_layout& l = is_k ? p.k_layout : p.v_layout;
  std::vector<uint8_t>& data = is_k ? c.k : c.v;
  if (o.tensor == T::kK || o.tensor == T::kV) {
    if (o.dim >= p.head_dim) return;
    const int64_t row = page * l.s_page + o.head * l.s_head + slot * l.s_tok;
    if (p.kv_format == PACTS_FORMAT_E2M1) {
      const int64_t u = o.dim / 2;
      uint8_t& byte = data[static_cast<size_t>(row + (u / l.chunk) * l.s_chunk + u % l.chunk)];
      const bool high = (o.dim % 2 == 1) == (p.nibble_order == PACTS_NIBBLE_LOW_FIRST);
      byte = high ? static_cast<uint8_t>((byte & 0x0F) | ((o.code & 0xF) << 4))
                  : static_cast<uint8_t>((byte & 0xF0) | (o.code & 0xF));
      return;
    }
    const int eb = spec::element_bytes(p.kv_format);
    put(data, (row + (o.dim / l.chunk) * l.s_chunk + o.dim % l.chunk) * eb, o.code, eb);
    return;
  }
  const pacts_scale_mode mode = is_k ? p.k_scale_mode : p.v_scale_mode;
  const pacts_scale_layout& sl = is_k ? p.k_scale_layout : p.v_scale_layout;
  std::vector<uint8_t>& scales = is_k ? c.k_scale : c.v_scale;
  const int64_t at = page * sl.s_page + o.head * sl.s_head + slot * sl.s_tok;
  if (mode == PACTS_SCALE_PER_TOKEN) put(scales, at * 4, o.code, 4);
  if (mode == PACTS_SCALE_MX_BLOCK && o.dim < p.head_dim / 32)
    scales[static_cast<size_t>(at + o.dim * sl.s_block)] = static_cast<uint8_t>(o.code);
}

}  // namespace pacts::conformance
