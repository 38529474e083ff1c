#include <pacts/conformance/generators.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/spec/formats.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace pacts::conformance {
namespace {

namespace gen = rc::gen;

// RapidCheck's element, elementOf and weightedElement never shrink (Select.hpp returns a
// non-shrinking value). Picking an index with inRange does shrink, toward the first item, so
// every list below is ordered simplest first. inRange also scales its range with RapidCheck's
// size, which would make the last items rare in a short run; resizing to the nominal size keeps
// every item equally likely from the first case on.
size_t pick_index(size_t n) { return *gen::resize(100, gen::inRange<size_t>(0, n)); }

template <class T>
T pick(const std::vector<T>& items) {
  return items[pick_index(items.size())];
}

template <class T>
T pick_weighted(const std::vector<std::pair<int, T>>& items) {
  int total = 0;
  for (const auto& [w, x] : items) total += w;
  int r = static_cast<int>(pick_index(static_cast<size_t>(total)));
  for (const auto& [w, x] : items) {
    if (r < w) return x;
    r -= w;
  }
  return items.back().second;
}

// The items of `all` that `allowed` lists, in `all`'s order; `all` when `allowed` is empty or
// nothing is left (the property then meets NotSupported cases, as without the restriction).
template <class T>
std::vector<T> allowed_of(const std::vector<T>& all, const std::vector<T>& allowed) {
  if (allowed.empty()) return all;
  std::vector<T> kept;
  for (const T& x : all)
    if (std::find(allowed.begin(), allowed.end(), x) != allowed.end()) kept.push_back(x);
  return kept.empty() ? all : kept;
}

bool is_16bit(pacts_format f) { return f == PACTS_FORMAT_BF16 || f == PACTS_FORMAT_FP16; }

uint32_t code_of(pacts_format f, double x) {
  return spec::encode(f, x, spec::Overflow::kSaturate);
}

// Special codes of a format that stay inside the range contract (spec/contract.md §2): zeros,
// subnormal extremes, the smallest normal, +-1, and the largest value the contract allows
// (fp8 and fp16 maxima; bf16 capped at 2^40 so that one element times any generated partner
// keeps sum |q k| below 2^64, R3). `cap` lowers the largest value further (V feeding an fp16
// output must stay below 2^15: spec/contract.md R2).
std::vector<uint32_t> in_contract_codes(pacts_format f, double cap) {
  const spec::FormatInfo* fi = spec::format_info(f);
  const double big = std::min({fi->max_finite, std::ldexp(1.0, 40), cap});
  std::vector<uint32_t> codes = {code_of(f, 0.0)};
  if (fi->has_negative_zero) codes.push_back(code_of(f, -0.0));
  for (double x : {fi->min_subnormal, -fi->min_subnormal, fi->min_normal, 1.0, -1.0, big, -big})
    codes.push_back(code_of(f, x));
  return codes;
}

// NaN and Inf codes of a format (outside the range contract).
std::vector<uint32_t> non_finite_codes(pacts_format f) {
  std::vector<uint32_t> codes;
  const spec::FormatInfo* fi = spec::format_info(f);
  if (fi->has_nan) codes.push_back(spec::encode(f, NAN, spec::Overflow::kNonSaturate));
  if (fi->has_inf) {
    codes.push_back(spec::encode(f, INFINITY, spec::Overflow::kNonSaturate));
    codes.push_back(spec::encode(f, -INFINITY, spec::Overflow::kNonSaturate));
  }
  return codes;
}

uint32_t fp32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

pacts_scale_mode pick_scale_mode(pacts_format kv, const GenLimits& lim) {
  if (kv == PACTS_FORMAT_E2M1) return PACTS_SCALE_MX_BLOCK;
  if (is_16bit(kv))
    return pick<pacts_scale_mode>(
        allowed_of<pacts_scale_mode>({PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR}, lim.scale_modes));
  return pick<pacts_scale_mode>(allowed_of<pacts_scale_mode>(
      {PACTS_SCALE_PER_TENSOR, PACTS_SCALE_NONE, PACTS_SCALE_PER_TOKEN}, lim.scale_modes));
}

// The items of `all` within [lo, hi]; `all` when none is (NotSupported cases, as above).
std::vector<int32_t> within(const std::vector<int32_t>& all, int32_t lo, int32_t hi) {
  std::vector<int32_t> kept;
  for (int32_t x : all)
    if (x >= lo && x <= hi) kept.push_back(x);
  return kept.empty() ? all : kept;
}

int32_t pick_context(const CaseShape& s, const GenLimits& lim) {
  const int32_t P = s.page_size, L = s.q_len;
  // Edges first (shrinking walks toward the front: one token, then one page plus one).
  const std::vector<int32_t> edges = {1,   P + 1, P,   P - 1, L,   L - 1,
                                      0,   255,   256, 257,   2 * P + 1, lim.long_context};
  return pick_weighted<int>({{4, 0}, {1, 1}}) == 0 ? pick(edges)
                                                    : *gen::inRange<int32_t>(0, lim.long_context + 1);
}

// The bytes one more pool page adds to the case's buffers (K, V and their scale pools).
uint64_t page_bytes(const CaseShape& s) {
  return case_buffer_bytes(shape_problem(s, 2, 1)) - case_buffer_bytes(shape_problem(s, 1, 1));
}

// Halve the longest context until the reference's work fits the budget.
void fit_budget(CaseShape& s, const GenLimits& lim) {
  while (reference_work(s) > lim.max_reference_work) {
    auto longest = std::max_element(s.contexts.begin(), s.contexts.end());
    if (longest == s.contexts.end() || *longest <= 1) break;
    *longest /= 2;
  }
}

Override pick_override(const CaseShape& s, const GenLimits& lim) {
  Override o;
  const bool mx = s.kv_format == PACTS_FORMAT_E2M1;
  std::vector<Override::Tensor> tensors = {Override::Tensor::kK, Override::Tensor::kV,
                                           Override::Tensor::kQ};
  if (s.k_scale_mode == PACTS_SCALE_PER_TOKEN || mx) tensors.push_back(Override::Tensor::kKScale);
  if (s.v_scale_mode == PACTS_SCALE_PER_TOKEN || mx) tensors.push_back(Override::Tensor::kVScale);
  o.tensor = pick(tensors);
  o.seq = *gen::inRange<int32_t>(0, std::max(s.batch, 1));
  const int32_t ctx = s.contexts.empty() ? 1 : s.contexts[static_cast<size_t>(o.seq)];
  const bool q = o.tensor == Override::Tensor::kQ;
  o.pos = *gen::inRange<int32_t>(0, std::max(q ? s.q_len : ctx, 1));
  o.head = *gen::inRange<int32_t>(0, q ? s.num_q_heads : s.num_kv_heads);
  const bool scale = o.tensor == Override::Tensor::kKScale || o.tensor == Override::Tensor::kVScale;
  o.dim = *gen::inRange<int32_t>(0, scale ? std::max(s.head_dim / 32, 1) : s.head_dim);
  // V feeding an fp16 output stays small enough for the output to be finite (R2).
  const bool small_v = s.out_format == PACTS_FORMAT_FP16 &&
                       (o.tensor == Override::Tensor::kV || o.tensor == Override::Tensor::kVScale);
  std::vector<uint32_t> codes;
  if (scale && mx) {
    // e8m0: 0x00 is 2^-127, not zero; 0xFF is NaN (its whole block of 32 is NaN).
    codes = {0x00, 0x01, 0x7F, 0x80};
    if (lim.non_finite) codes.push_back(0xFF);
  } else if (scale) {
    codes = {fp32_bits(0.0f), fp32_bits(1.0f), fp32_bits(std::ldexp(1.0f, -100)),
             fp32_bits(std::ldexp(1.0f, -140))};
    if (!small_v) codes.push_back(fp32_bits(std::ldexp(1.0f, 40)));
    if (lim.non_finite) codes.push_back(fp32_bits(NAN));
  } else {
    const pacts_format f = q ? s.q_format : s.kv_format;
    // With e8m0 extremes the K values are near 2^123 against a Q near 2^-125: a large Q or K
    // element there would break R3, so the specials stay at most 1 in magnitude.
    const bool extremes = s.k_e8m0_hi > 127 + 8;
    const double cap = extremes && !small_v ? 1.0 : small_v ? std::ldexp(1.0, 10) : INFINITY;
    codes = in_contract_codes(f, cap);
    if (lim.non_finite)
      for (uint32_t c : non_finite_codes(f)) codes.push_back(c);
  }
  o.code = pick(codes);
  return o;
}

}  // namespace

int64_t reference_work(const CaseShape& s) {
  int64_t keys = 0;
  for (int32_t c : s.contexts) keys += c;
  return 2 * keys * s.q_len * s.num_q_heads * s.head_dim;
}

rc::Gen<CaseSpec> gen_case(const GenLimits& lim) {
  return gen::exec([lim] {
    CaseSpec c;
    CaseShape& s = c.shape;
    // Structure, simplest first so that shrinking ends at batch 1, L 1, one KV head, G 1,
    // D 64, page 8, bf16, NHD, no options.
    const int batch_kind = pick_weighted<int>({{12, 0}, {1, 1}, {2, 2}});
    // Small batches, B = 0, and large ones up to the property's limit (a limit below 5 has none).
    const int32_t small_max = std::min(4, lim.max_batch);
    s.batch = batch_kind == 0   ? *gen::inRange<int32_t>(1, small_max + 1)
              : batch_kind == 1 || lim.max_batch <= small_max
                  ? (batch_kind == 1 ? 0 : small_max)
                  : *gen::inRange<int32_t>(5, lim.max_batch + 1);
    const int l_kind = pick_weighted<int>({{6, 0}, {3, 1}, {1, 2}});
    s.q_len = std::max(lim.min_q_len, l_kind == 0   ? 1
                                      : l_kind == 1 ? *gen::inRange<int32_t>(2, 5)
                                                    : *gen::inRange<int32_t>(5, 17));
    if (lim.max_q_len >= lim.min_q_len) s.q_len = std::min(s.q_len, lim.max_q_len);
    s.num_kv_heads = *gen::inRange<int32_t>(1, 5);
    const int32_t group = pick<int32_t>(within({1, 2, 4, 8, 16, 3, 5, 7, 32}, 1, lim.max_group));
    s.num_q_heads = std::min(s.num_kv_heads * group, 128 / s.num_kv_heads * s.num_kv_heads);
    s.head_dim = pick<int32_t>(allowed_of<int32_t>({64, 128, 256}, lim.head_dims));
    s.page_size = pick<int32_t>(
        within({8, 16, 32, 64, 128, 256}, lim.min_page_size, lim.max_page_size));
    s.kv_format = pick<pacts_format>(allowed_of<pacts_format>(
        {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ,
         PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ, PACTS_FORMAT_E2M1},
        lim.kv_formats));
    s.q_format = pick<pacts_format>(allowed_of<pacts_format>(
        {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ,
         PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ},
        lim.q_formats));
    s.out_format = pick<pacts_format>(allowed_of<pacts_format>(
        {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_FP32}, lim.out_formats));
    s.k_scale_mode = pick_scale_mode(s.kv_format, lim);
    s.v_scale_mode = pick_scale_mode(s.kv_format, lim);
    s.nibble_order = pick<pacts_nibble_order>({PACTS_NIBBLE_LOW_FIRST, PACTS_NIBBLE_HIGH_FIRST});
    if (lim.chunked_layouts) {
      s.k_layout = pick<PoolLayout>({PoolLayout::kNHD, PoolLayout::kHND, PoolLayout::kXPackedK,
                                     PoolLayout::kPadded});
      s.v_layout = pick<PoolLayout>({PoolLayout::kNHD, PoolLayout::kHND, PoolLayout::kDimMajorV,
                                     PoolLayout::kPadded});
    } else {
      s.k_layout = pick<PoolLayout>({PoolLayout::kNHD, PoolLayout::kHND, PoolLayout::kPadded});
      s.v_layout = pick<PoolLayout>({PoolLayout::kNHD, PoolLayout::kHND, PoolLayout::kPadded});
    }
    s.q_gap = pick<int32_t>({0, 8, 64});
    s.out_gap = pick<int32_t>({0, 8, 64});
    s.bt_extra_cols = pick<int32_t>({0, 2, 1});
    s.extra_pages = pick<int32_t>({0, 3, 1});
    s.share_pages = pick_weighted<bool>({{4, false}, {1, true}});
    s.contexts.clear();
    for (int32_t b = 0; b < s.batch; ++b) s.contexts.push_back(pick_context(s, lim));
    // Options.
    s.sinks = lim.allow_sinks && pick_weighted<bool>({{3, false}, {1, true}});
    s.lse = pick_weighted<bool>({{1, true}, {1, false}}) && lim.allow_lse;
    if (lim.allow_softcap && pick_weighted<bool>({{4, false}, {1, true}}))
      s.softcap = static_cast<float>(pick<int32_t>({30, 1, 5, 50}));
    if (lim.allow_window && pick_weighted<bool>({{3, false}, {1, true}})) {
      // 1, near the context, beyond it (narrow windows are drawn last, below).
      const int32_t ctx = s.contexts.empty() ? 1 : s.contexts.front();
      s.window = pick<int32_t>({1, std::max(ctx - 1, 1), ctx + 1, std::max(ctx / 2, 1),
                                         ctx + 100});
    }
    // e8m0 across the range contract: high K bytes with a tiny Q keep the exact logits in
    // range while a scale applied after the Q.K sum of raw values overflows fp32 (aiter: 249).
    if (s.kv_format == PACTS_FORMAT_E2M1 && lim.e8m0_extremes &&
        pick_weighted<bool>({{3, false}, {1, true}})) {
      // <= 250: 6 * 2^(250-127) keeps every decoded K below 2^126 (spec/contract.md R1).
      const int32_t high = *gen::inRange<int32_t>(200, 251);
      s.k_e8m0_lo = high - 2;
      s.k_e8m0_hi = high;
      s.q_exponent = 127 - high - 2;
      s.v_e8m0_lo = pick<int32_t>({1, 0, 100});
      // <= 200 keeps |v| below 2^96; an fp16 output needs |v| below 2^15 (spec/contract.md R2).
      s.v_e8m0_hi = std::min(s.v_e8m0_lo + 100, s.out_format == PACTS_FORMAT_FP16 ? 139 : 200);
    }
    fit_budget(s, lim);
    c.seed = *gen::noShrink(gen::arbitrary<uint64_t>());
    if (lim.special_values) {
      const int32_t n = pick_weighted<int32_t>({{3, 0}, {2, 1}, {1, 3}});
      for (int32_t i = 0; i < n; ++i) c.overrides.push_back(pick_override(s, lim));
    }
    // Drawn last, so that everything drawn above stays what the same random stream gave before
    // these existed (the fixed CI seeds' cases, and the budgets calibrated on them, are kept):
    // head-major Q / output rows (a kernel that derives the token stride from the head stride
    // is wrong only there: §11, hip_out_token_stride_packed), and a narrow window of 2..48 keys
    // in place of a drawn one (with L > 1 the rows' windows then start in different key tiles:
    // a row can see no key of a tile that another row sees).
    s.q_head_major = pick_weighted<bool>({{3, false}, {1, true}});
    s.out_head_major = pick_weighted<bool>({{3, false}, {1, true}});
    if (s.window > 0 && pick_weighted<bool>({{5, false}, {1, true}}))
      s.window = *gen::inRange<int32_t>(2, 49);
    // Also drawn last: a window one key off a page multiple inside the context (tokenspeed #578:
    // a window's first page found in whole pages, off by one key only there).
    if (s.window > 0 && pick_weighted<bool>({{3, false}, {1, true}})) {
      const int32_t ctx = s.contexts.empty() ? 1 : s.contexts.front();
      const int32_t pages = std::max(ctx / std::max(s.page_size, 1), 1);
      s.window = std::max(s.page_size * *gen::inRange<int32_t>(1, pages + 1) + pick<int32_t>({-1, 1}), 1);
    }
    // Also drawn last: page ids past 16 bits (aiter #3062: block ids read through 16-bit
    // arithmetic). 2^16 pages that no sequence owns sit below the owned ones, in three of four
    // cases whose pages are small enough for those to take at most kHighIdPoolBytes.
    if (lim.high_page_ids && page_bytes(s) * kLowPages <= kHighIdPoolBytes &&
        pick_weighted<bool>({{1, false}, {3, true}}))
      s.low_pages = kLowPages;
    return c;
  });
}

GenLimits restrict_to_capabilities(GenLimits lim, const Capabilities& caps) {
  if (!lim.follow_capabilities) return lim;
  lim.q_formats = caps.q_formats;
  lim.kv_formats = caps.kv_formats;
  lim.out_formats = caps.out_formats;
  lim.scale_modes = caps.scale_modes;
  lim.head_dims = caps.head_dims;
  lim.chunked_layouts = caps.chunked_layouts;
  lim.max_q_len = caps.max_q_len;
  lim.max_group = caps.max_group;
  lim.min_page_size = caps.min_page_size;
  lim.max_page_size = caps.max_page_size;
  lim.allow_sinks = lim.allow_sinks && caps.sinks;
  lim.allow_window = lim.allow_window && caps.window;
  lim.allow_softcap = lim.allow_softcap && caps.softcap;
  lim.allow_lse = caps.lse;
  return lim;
}

std::string describe(const CaseSpec& c) {
  const CaseShape& s = c.shape;
  std::ostringstream os;
  os << "B" << s.batch << " L" << s.q_len << " Hq" << s.num_q_heads << " Hkv" << s.num_kv_heads
     << " D" << s.head_dim << " page" << s.page_size << " kv " << spec::format_name(s.kv_format)
     << " q " << spec::format_name(s.q_format) << " out " << spec::format_name(s.out_format)
     << " ctx [";
  for (size_t i = 0; i < s.contexts.size(); ++i) os << (i ? "," : "") << s.contexts[i];
  os << "]";
  if (s.window) os << " window " << s.window;
  if (s.q_head_major) os << " q head-major";
  if (s.out_head_major) os << " out head-major";
  if (s.sinks) os << " sinks";
  if (s.softcap > 0) os << " softcap " << s.softcap;
  if (!c.overrides.empty()) os << " overrides " << c.overrides.size();
  if (s.low_pages) os << " page ids >= " << s.low_pages;
  os << " seed " << c.seed;
  return os.str();
}

}  // namespace pacts::conformance
