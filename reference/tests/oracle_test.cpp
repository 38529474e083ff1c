// The multiprecision oracle: bounds the float64 reference's own error (spec/tolerance.md).
//
// A seeded generator makes small problems over every option, as LOGICAL data (codes per
// [b][j][kv head][d], scales per key, Q codes per [b][i][h][d]) and writes them into poisoned,
// strided, paged buffers. The reference reads the buffers; the oracle reads only the logical data
// and computes spec/operator.md with 168-bit arithmetic (products of decoded values are exact,
// exp/log/tanh in multiprecision). The only code they share is the spec's single-code decoder.
//
// Criterion per output element: |ref - oracle| <= 1e-12 A + 4 u L' A, with u = 2^-53,
// L' = max(logit_abs_dot, 1), A = sum_j p_j |v_jd| (sink in the denominator); per LSE:
// 1e-12 |lse| + 4 u L' + 1e-14. Rows without a visible key: exact +0 and LSE -inf.
//
// Seed: PACTS_ORACLE_SEED (default below); PACTS_ORACLE_PROBLEM=k runs problem k only.
#include <gtest/gtest.h>

#include "case_builder.h"

#include <pacts/reference/decode.h>
#include <pacts/spec/formats.h>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace pacts::reference {
namespace {

using testing::Case;
using testing::Fill;
using testing::Pool;

// 50 decimal digits: 168-bit significand.
using Real = boost::multiprecision::number<boost::multiprecision::cpp_bin_float<50>,
                                           boost::multiprecision::et_off>;

constexpr uint64_t kDefaultSeed = 0x70AC75u;
constexpr int kProblems = 250;
constexpr int kShards = 5;
constexpr double kU = 0x1p-53;

uint64_t base_seed() {
  if (const char* s = std::getenv("PACTS_ORACLE_SEED")) return std::strtoull(s, nullptr, 0);
  return kDefaultSeed;
}

std::optional<int> only_problem() {
  if (const char* s = std::getenv("PACTS_ORACLE_PROBLEM")) return std::atoi(s);
  return std::nullopt;
}

uint64_t problem_seed(uint64_t base, int index) {
  uint64_t z = base + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// --- random values from bit fields -----------------------------------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(engine_) < p; }
  template <class T>
  T pick(std::initializer_list<T> items) {
    return *(items.begin() + uniform(0, static_cast<int64_t>(items.size()) - 1));
  }

 private:
  std::mt19937_64 engine_;
};

// A nonzero finite code of `f` (zero with probability zero_p) whose unbiased exponent is drawn
// from [lo, hi], clamped to the format's fields: exponents below the normal range give
// subnormals, so [lo, hi] far below gives subnormals only.
uint32_t random_code(Rng& r, pacts_format f, int lo, int hi, double zero_p = 0.0) {
  if (r.chance(zero_p)) return 0;
  const spec::FormatInfo& info = *spec::format_info(f);
  const int top = (1 << info.exponent_bits) - 1 - (info.has_inf ? 1 : 0);
  for (;;) {
    const int field = std::clamp(static_cast<int>(r.uniform(lo, hi)) + info.bias, 0, top);
    const auto mantissa = static_cast<uint32_t>(r.uniform(0, (1 << info.mantissa_bits) - 1));
    const auto sign = static_cast<uint32_t>(r.uniform(0, 1));
    const uint32_t code = sign << (info.bits - 1) |
                          static_cast<uint32_t>(field) << info.mantissa_bits | mantissa;
    const double x = spec::decode(f, code);
    if (std::isfinite(x) && x != 0.0) return code;
  }
}

// A positive float with random 24-bit significand and exponent in [lo, hi].
float random_scale(Rng& r, int lo, int hi) {
  const double m = 1.0 + static_cast<double>(r.uniform(0, (1 << 23) - 1)) * 0x1p-23;
  return static_cast<float>(std::ldexp(m, static_cast<int>(r.uniform(lo, hi))));
}

// --- the logical problem ---------------------------------------------------------------------

struct Logical {
  pacts_problem p{};
  std::vector<int32_t> ctx;
  int32_t max_ctx = 0;
  std::vector<uint32_t> q;                    // [B][L][Hq][D]
  std::vector<uint32_t> k, v;                 // [B][max_ctx][Hkv][D]
  std::vector<float> k_token, v_token;        // [B][max_ctx][Hkv]
  std::vector<uint8_t> k_e8m0, v_e8m0;        // [B][max_ctx][Hkv][D/32]
  std::vector<float> sinks;                   // [Hq]
  std::vector<int32_t> table;                 // [B][max_pages]: owned columns real, rest junk
  std::map<std::string, int> features;        // for the coverage test

  size_t key(int64_t b, int64_t j, int64_t g) const {
    return static_cast<size_t>((b * max_ctx + j) * p.num_kv_heads + g);
  }
  size_t q_row(int64_t b, int64_t i, int64_t h) const {
    return static_cast<size_t>((b * p.q_len + i) * p.num_q_heads + h);
  }
  // spec/operator.md §4, written out independently of the reference.
  bool sees(int64_t b, int64_t i, int64_t j) const {
    const int64_t pos = ctx[static_cast<size_t>(b)] - p.q_len + i;
    return j >= 0 && j <= pos && (p.window == 0 || j > pos - p.window);
  }
  bool owned(int64_t b, int64_t j) const {
    for (int64_t i = 0; i < p.q_len; ++i)
      if (sees(b, i, j)) return true;
    return false;
  }
};

struct KvChoice {
  pacts_format format;
  pacts_scale_mode k_mode, v_mode;
};

// Every (format, K mode, V mode) validate accepts; MXFP4 repeated so it gets its share.
std::vector<KvChoice> kv_choices() {
  std::vector<KvChoice> all;
  for (const pacts_format f : {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16})
    for (const pacts_scale_mode km : {PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR})
      for (const pacts_scale_mode vm : {PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR})
        all.push_back({f, km, vm});
  for (const pacts_format f : {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2,
                               PACTS_FORMAT_E5M2FNUZ})
    for (const pacts_scale_mode km : {PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR, PACTS_SCALE_PER_TOKEN})
      for (const pacts_scale_mode vm : {PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR, PACTS_SCALE_PER_TOKEN})
        all.push_back({f, km, vm});
  for (int n = 0; n < 6; ++n)
    all.push_back({PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK, PACTS_SCALE_MX_BLOCK});
  return all;  // 50
}

// Pool layouts in elements (bytes for e2m1): NHD, HND, x-packed, dim-major; padded pages.
pacts_pool_layout random_pool(Rng& r, const pacts_problem& p, Logical& lg, const char* which) {
  const bool fp4 = p.kv_format == PACTS_FORMAT_E2M1;
  const int64_t u = fp4 ? p.head_dim / 2 : p.head_dim;
  const int64_t pg = p.page_size, hkv = p.num_kv_heads;
  const int64_t pad = r.chance(0.3) ? r.uniform(1, 24) : 0;
  const int family = static_cast<int>(r.uniform(0, 3));
  lg.features[std::string(which) + "_layout_" + std::to_string(family)]++;
  switch (family) {
    case 0: return {pg * hkv * u + pad, u, hkv * u, u, static_cast<int32_t>(u), 0};    // NHD
    case 1: return {hkv * pg * u + pad, pg * u, u, u, static_cast<int32_t>(u), 0};     // HND
    case 2: {                                                                          // packed
      const int64_t x = r.chance(0.7) ? (fp4 ? 16 : 16 / spec::element_bytes(p.kv_format)) : 4;
      return {hkv * pg * u + pad, pg * u, x, pg * x, static_cast<int32_t>(x), 0};
    }
    default: return {hkv * u * pg + pad, u * pg, 1, pg, 1, 0};                         // dim-major
  }
}

pacts_scale_layout random_scale_layout(Rng& r, const pacts_problem& p, pacts_scale_mode mode) {
  if (mode != PACTS_SCALE_PER_TOKEN && mode != PACTS_SCALE_MX_BLOCK) return {};
  const int64_t nb = mode == PACTS_SCALE_MX_BLOCK ? p.head_dim / 32 : 1;
  const int64_t pg = p.page_size, hkv = p.num_kv_heads;
  const int64_t pad = r.chance(0.3) ? r.uniform(1, 9) : 0;
  switch (r.uniform(0, 2)) {
    case 0: return {hkv * pg * nb + pad, pg * nb, nb, 1};        // [page][head][tok][blk]
    case 1: return {pg * hkv * nb + pad, nb, hkv * nb, 1};       // [page][tok][head][blk]
    default: return {hkv * nb * pg + pad, nb * pg, 1, pg};       // [page][head][blk][tok]
  }
}

pacts_row_layout random_rows(Rng& r, const pacts_problem& p, int64_t inner) {
  const int64_t w = inner + (r.chance(0.3) ? r.uniform(1, 8) : 0);
  const int64_t l = p.q_len, hq = p.num_q_heads;
  if (r.chance(0.5)) return {l * hq * w, hq * w, w};  // [B][L][Hq]
  return {hq * l * w, w, l * w};                      // [B][Hq][L]
}

Logical generate(uint64_t seed, int index) {
  Rng r(seed);
  Logical lg;
  static const std::vector<KvChoice> choices = kv_choices();
  const KvChoice kv = choices[static_cast<size_t>(index) % choices.size()];
  const int32_t q_len = static_cast<int32_t>(r.uniform(1, 4));
  const int32_t hkv = static_cast<int32_t>(r.uniform(1, 2));
  const int32_t group = static_cast<int32_t>(r.uniform(1, 4));
  const int32_t d = r.chance(0.06) ? 256 : r.chance(0.25) ? 128 : 64;
  const int32_t page = r.pick({8, 16, 32});
  const int32_t batch = static_cast<int32_t>(r.uniform(1, 3));

  // Context lengths with their edges; the block table gets 0..2 padding columns.
  std::vector<int32_t> ctx;
  for (int32_t b = 0; b < batch; ++b) {
    switch (r.uniform(0, 9)) {
      case 0: ctx.push_back(0); break;
      case 1: ctx.push_back(static_cast<int32_t>(r.uniform(1, q_len))); break;  // pos < 0 rows
      case 2: ctx.push_back(page - 1); break;
      case 3: ctx.push_back(page); break;
      case 4: ctx.push_back(page + 1); break;
      case 5: ctx.push_back(page * static_cast<int32_t>(r.uniform(2, 3))); break;
      default: ctx.push_back(static_cast<int32_t>(r.uniform(1, 100))); break;
    }
  }
  const int32_t longest = *std::max_element(ctx.begin(), ctx.end());
  const int32_t max_pages =
      std::max(1, (longest + page - 1) / page + static_cast<int32_t>(r.uniform(0, 2)));
  if (r.chance(0.2)) ctx[static_cast<size_t>(r.uniform(0, batch - 1))] = max_pages * page;  // full

  pacts_problem& p = lg.p;
  p = spec::make_problem(batch, q_len, hkv * group, hkv, d, page, 0, max_pages);
  p.q_format = r.pick({PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN,
                       PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ});
  p.kv_format = kv.format;
  p.k_scale_mode = kv.k_mode;
  p.v_scale_mode = kv.v_mode;
  p.out_format = r.pick({PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_FP32});
  p.nibble_order = r.chance(0.5) ? PACTS_NIBBLE_LOW_FIRST : PACTS_NIBBLE_HIGH_FIRST;
  p.q_scale = r.chance(0.5) ? 1.0f : random_scale(r, -3, 3);
  if (kv.k_mode == PACTS_SCALE_PER_TENSOR) p.k_scale = random_scale(r, -4, 4);
  if (kv.v_mode == PACTS_SCALE_PER_TENSOR) p.v_scale = random_scale(r, -4, 4);
  p.window = r.chance(0.55) ? 0 : r.pick<int32_t>({1, 2, static_cast<int32_t>(r.uniform(1, 40)),
                                                     static_cast<int32_t>(r.uniform(1, 120))});
  p.softcap = r.chance(0.6) ? 0.0f : r.pick({5.0f, 20.0f, 50.0f}) * random_scale(r, 0, 0);
  p.has_sinks = r.chance(0.4) ? 1 : 0;
  p.want_lse = r.chance(0.7) ? 1 : 0;
  p.k_layout = random_pool(r, p, lg, "k");
  p.v_layout = random_pool(r, p, lg, "v");
  p.k_scale_layout = random_scale_layout(r, p, kv.k_mode);
  p.v_scale_layout = random_scale_layout(r, p, kv.v_mode);
  p.q_layout = random_rows(r, p, d);
  p.out_layout = random_rows(r, p, d);
  p.lse_layout = random_rows(r, p, 1);
  p.block_table_stride = max_pages + r.uniform(0, 2);
  lg.ctx = ctx;
  lg.max_ctx = std::max(longest, max_pages * page);

  // Data. Q and K moderate; V in one of three regimes (moderate, wide with subnormals and large
  // values, subnormal only).
  const auto b_ = static_cast<size_t>(batch);
  const auto keys = b_ * static_cast<size_t>(lg.max_ctx) * static_cast<size_t>(hkv);
  const auto dims = static_cast<size_t>(d);
  const int v_regime = static_cast<int>(r.uniform(0, 5));
  const int v_lo = v_regime <= 3 ? -4 : v_regime == 4 ? -40 : -300;
  const int v_hi = v_regime <= 3 ? 3 : v_regime == 4 ? 40 : -200;
  lg.q.resize(b_ * static_cast<size_t>(q_len * p.num_q_heads) * dims);
  for (uint32_t& c : lg.q) c = random_code(r, p.q_format, -3, 1, 0.05);
  lg.k.assign(keys * dims, 0);
  lg.v.assign(keys * dims, 0);
  lg.k_token.assign(keys, 1.0f);
  lg.v_token.assign(keys, 1.0f);
  lg.k_e8m0.assign(keys * dims / 32, 127);
  lg.v_e8m0.assign(keys * dims / 32, 127);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < ctx[static_cast<size_t>(b)]; ++j) {
      if (!lg.owned(b, j)) continue;
      for (int64_t g = 0; g < hkv; ++g) {
        const size_t kk = lg.key(b, j, g);
        for (size_t e = 0; e < dims; ++e) {
          lg.k[kk * dims + e] = random_code(r, p.kv_format, -3, 1, 0.03);
          lg.v[kk * dims + e] = random_code(r, p.kv_format, v_lo, v_hi, 0.03);
        }
        lg.k_token[kk] = random_scale(r, -6, 6);
        lg.v_token[kk] = v_regime == 5 ? random_scale(r, -60, -40) : random_scale(r, -6, 6);
        for (size_t blk = 0; blk < dims / 32; ++blk) {
          lg.k_e8m0[kk * dims / 32 + blk] =
              static_cast<uint8_t>(r.chance(0.05) ? r.uniform(60, 190) : r.uniform(124, 130));
          lg.v_e8m0[kk * dims / 32 + blk] = static_cast<uint8_t>(
              v_regime <= 3 ? r.uniform(123, 131) : v_regime == 4 ? r.uniform(0, 254) : r.uniform(0, 5));
        }
      }
    }
  }

  // softmax_scale puts the largest |logit| at a target of 0.5 .. 50 (K's e8m0 scales stay within
  // 2^+-67 above, so the scale stays a normal float).
  const double target = r.pick({0.5, 4.0, 16.0, 50.0});
  double largest = 0;
  const auto kval = [&](int64_t b, int64_t j, int64_t g, size_t e) {
    const size_t kk = lg.key(b, j, g);
    const double x = spec::decode(p.kv_format, lg.k[kk * dims + e]);
    if (kv.k_mode == PACTS_SCALE_PER_TENSOR) return x * p.k_scale;
    if (kv.k_mode == PACTS_SCALE_PER_TOKEN) return x * lg.k_token[kk];
    if (kv.k_mode == PACTS_SCALE_MX_BLOCK) return x * spec::decode_e8m0(lg.k_e8m0[kk * dims / 32 + e / 32]);
    return x;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        for (int64_t j = 0; j < ctx[static_cast<size_t>(b)]; ++j) {
          if (!lg.sees(b, i, j)) continue;
          double dot = 0;
          for (size_t e = 0; e < dims; ++e)
            dot += spec::decode(p.q_format, lg.q[lg.q_row(b, i, h) * dims + e]) * p.q_scale *
                   kval(b, j, h / group, e);
          largest = std::max(largest, std::abs(dot));
        }
  p.softmax_scale = largest > 0 ? static_cast<float>(std::clamp(target / largest, 1e-37, 1e37)) : 1.0f;

  // Sinks: moderate, dominant, or -inf (no sink).
  for (int64_t h = 0; h < p.num_q_heads; ++h) {
    float s = static_cast<float>(r.uniform(-500, static_cast<int64_t>(target * 100) + 500)) / 100.0f;
    if (r.chance(0.1)) s = -std::numeric_limits<float>::infinity();
    if (r.chance(0.1)) s = static_cast<float>(target + 20.0);
    lg.sinks.push_back(s);
  }

  // Pages: owned columns get distinct random pages; a few more pages stay poisoned; padding
  // columns get junk the reference must never read.
  std::vector<std::pair<int64_t, int64_t>> owned_columns;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t col = 0; col < max_pages; ++col) {
      bool any = false;
      for (int64_t j = col * page; j < (col + 1) * page && j < ctx[static_cast<size_t>(b)]; ++j)
        any = any || lg.owned(b, j);
      if (any) owned_columns.emplace_back(b, col);
    }
  p.num_pages = static_cast<int32_t>(owned_columns.size() + static_cast<size_t>(r.uniform(1, 4)));
  std::vector<int32_t> ids(static_cast<size_t>(p.num_pages));
  for (size_t n = 0; n < ids.size(); ++n) ids[n] = static_cast<int32_t>(n);
  for (size_t n = ids.size(); n > 1; --n) std::swap(ids[n - 1], ids[static_cast<size_t>(r.uniform(0, static_cast<int64_t>(n) - 1))]);
  lg.table.assign(b_ * static_cast<size_t>(max_pages), 0);
  for (int32_t& t : lg.table) {
    const int32_t poisoned = ids.back();  // never owned
    t = r.pick({-1, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(),
                p.num_pages, poisoned, ids.front()});
  }
  for (size_t n = 0; n < owned_columns.size(); ++n)
    lg.table[static_cast<size_t>(owned_columns[n].first * max_pages + owned_columns[n].second)] = ids[n];

  // Coverage bookkeeping.
  auto& f = lg.features;
  f[std::string("kv_") + std::string(spec::format_name(p.kv_format))]++;
  f[std::string("q_") + std::string(spec::format_name(p.q_format))]++;
  f["k_mode_" + std::to_string(p.k_scale_mode)]++;
  f["v_mode_" + std::to_string(p.v_scale_mode)]++;
  f["L_" + std::to_string(q_len)]++;
  f["G_" + std::to_string(group)]++;
  f["D_" + std::to_string(d)]++;
  f["P_" + std::to_string(page)]++;
  f["softcap_" + std::to_string(p.softcap > 0)]++;
  f["window_" + std::to_string(p.window > 0)]++;
  f["sinks_" + std::to_string(p.has_sinks)]++;
  f["v_regime_" + std::to_string(std::min(v_regime, 4))]++;
  f["v_regime_subnormal"] += v_regime == 5;
  f["nibble_" + std::to_string(p.nibble_order)] += p.kv_format == PACTS_FORMAT_E2M1;
  f["target_" + std::to_string(static_cast<int>(target))]++;
  for (const int32_t n : ctx) {
    f["ctx_zero"] += n == 0;
    f["ctx_full"] += n == max_pages * page;
    f["ctx_page_multiple"] += n > 0 && n % page == 0;
    f["rows_before_first_key"] += n > 0 && n < q_len;
  }
  return lg;
}

// Writes the logical problem into poisoned buffers (spec/contract.md §1).
Case materialise(const Logical& lg) {
  const pacts_problem& p = lg.p;
  Case c(p);
  c.allocate(Fill::kPoison);
  const auto dims = static_cast<size_t>(p.head_dim);
  for (int64_t b = 0; b < p.batch; ++b) {
    c.set_context(b, lg.ctx[static_cast<size_t>(b)]);
    for (int64_t col = 0; col < p.max_pages_per_seq; ++col)
      c.set_page(b, col, lg.table[static_cast<size_t>(b * p.max_pages_per_seq + col)]);
    for (int64_t j = 0; j < lg.ctx[static_cast<size_t>(b)]; ++j) {
      if (!lg.owned(b, j)) continue;
      const int32_t page = lg.table[static_cast<size_t>(b * p.max_pages_per_seq + j / p.page_size)];
      const int64_t slot = j % p.page_size;
      for (int64_t g = 0; g < p.num_kv_heads; ++g) {
        const size_t kk = lg.key(b, j, g);
        for (size_t e = 0; e < dims; ++e) {
          c.set_kv_code(Pool::kK, page, g, slot, static_cast<int64_t>(e), lg.k[kk * dims + e]);
          c.set_kv_code(Pool::kV, page, g, slot, static_cast<int64_t>(e), lg.v[kk * dims + e]);
        }
        if (p.k_scale_mode == PACTS_SCALE_PER_TOKEN) c.set_token_scale(Pool::kK, page, g, slot, lg.k_token[kk]);
        if (p.v_scale_mode == PACTS_SCALE_PER_TOKEN) c.set_token_scale(Pool::kV, page, g, slot, lg.v_token[kk]);
        for (size_t blk = 0; blk < dims / 32; ++blk) {
          if (p.k_scale_mode == PACTS_SCALE_MX_BLOCK)
            c.set_block_scale(Pool::kK, page, g, slot, static_cast<int64_t>(blk), lg.k_e8m0[kk * dims / 32 + blk]);
          if (p.v_scale_mode == PACTS_SCALE_MX_BLOCK)
            c.set_block_scale(Pool::kV, page, g, slot, static_cast<int64_t>(blk), lg.v_e8m0[kk * dims / 32 + blk]);
        }
      }
    }
  }
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.q_len; ++i)
      for (int64_t h = 0; h < p.num_q_heads; ++h)
        for (size_t e = 0; e < dims; ++e)
          c.set_q_code(b, i, h, static_cast<int64_t>(e), lg.q[lg.q_row(b, i, h) * dims + e]);
  if (p.has_sinks)
    for (int64_t h = 0; h < p.num_q_heads; ++h) c.set_sink(h, lg.sinks[static_cast<size_t>(h)]);
  return c;
}

// --- the oracle --------------------------------------------------------------------------------

struct OracleRow {
  int32_t visible = 0;
  Real lse;
  Real logit_abs_dot = 0, logit_max = 0;
  std::vector<Real> out, a, sum_abs_v;
  std::vector<double> max_abs_v, min_v, max_v;
};

// Dequantised K or V element of logical key (b, j, g), spec/formats.md §3, in Real.
Real kv_value(const Logical& lg, Pool pool, int64_t b, int64_t j, int64_t g, size_t e) {
  const pacts_problem& p = lg.p;
  const auto dims = static_cast<size_t>(p.head_dim);
  const size_t kk = lg.key(b, j, g);
  const bool is_k = pool == Pool::kK;
  const Real x = spec::decode(p.kv_format, (is_k ? lg.k : lg.v)[kk * dims + e]);
  switch (is_k ? p.k_scale_mode : p.v_scale_mode) {
    case PACTS_SCALE_PER_TENSOR: return x * Real(is_k ? p.k_scale : p.v_scale);
    case PACTS_SCALE_PER_TOKEN: return x * Real((is_k ? lg.k_token : lg.v_token)[kk]);
    case PACTS_SCALE_MX_BLOCK:
      return x * Real(spec::decode_e8m0((is_k ? lg.k_e8m0 : lg.v_e8m0)[kk * dims / 32 + e / 32]));
    default: return x;
  }
}

// Dequantised keys of one sequence and KV head: [j][d], built once per (b, g).
struct OracleKeys {
  std::vector<std::vector<Real>> k, v;
};

OracleKeys oracle_keys(const Logical& lg, int64_t b, int64_t g) {
  OracleKeys keys;
  const auto dims = static_cast<size_t>(lg.p.head_dim);
  for (int64_t j = 0; j < lg.ctx[static_cast<size_t>(b)]; ++j) {
    keys.k.emplace_back();
    keys.v.emplace_back();
    if (!lg.owned(b, j)) continue;
    for (size_t e = 0; e < dims; ++e) {
      keys.k.back().push_back(kv_value(lg, Pool::kK, b, j, g, e));
      keys.v.back().push_back(kv_value(lg, Pool::kV, b, j, g, e));
    }
  }
  return keys;
}

OracleRow oracle_row(const Logical& lg, const OracleKeys& keys, int64_t b, int64_t i, int64_t h) {
  const pacts_problem& p = lg.p;
  const auto dims = static_cast<size_t>(p.head_dim);
  OracleRow row;
  row.out.assign(dims, Real(0));
  row.a.assign(dims, Real(0));
  row.sum_abs_v.assign(dims, Real(0));
  row.max_abs_v.assign(dims, 0.0);
  row.min_v.assign(dims, 0.0);
  row.max_v.assign(dims, 0.0);
  row.lse = -std::numeric_limits<double>::infinity();

  std::vector<Real> q(dims);
  for (size_t e = 0; e < dims; ++e)
    q[e] = Real(spec::decode(p.q_format, lg.q[lg.q_row(b, i, h) * dims + e])) * Real(p.q_scale);

  std::vector<int64_t> seen;
  std::vector<Real> logits;
  const Real scale(p.softmax_scale), cap(p.softcap);
  for (int64_t j = 0; j < lg.ctx[static_cast<size_t>(b)]; ++j) {
    if (!lg.sees(b, i, j)) continue;
    Real dot = 0, abs_dot = 0;
    for (size_t e = 0; e < dims; ++e) {
      const Real prod = q[e] * keys.k[static_cast<size_t>(j)][e];
      dot += prod;
      abs_dot += abs(prod);
    }
    Real s = scale * dot;
    row.logit_max = std::max(row.logit_max, Real(abs(s)));
    row.logit_abs_dot = std::max(row.logit_abs_dot, Real(scale * abs_dot));
    if (p.softcap > 0) s = cap * tanh(s / cap);
    seen.push_back(j);
    logits.push_back(s);
  }
  row.visible = static_cast<int32_t>(seen.size());
  if (seen.empty()) return row;

  const float sink = p.has_sinks ? lg.sinks[static_cast<size_t>(h)] : -std::numeric_limits<float>::infinity();
  Real m = *std::max_element(logits.begin(), logits.end());
  if (std::isfinite(sink)) m = std::max(m, Real(sink));
  std::vector<Real> w;
  Real keys_sum = 0;
  for (const Real& s : logits) {
    w.push_back(exp(s - m));
    keys_sum += w.back();
  }
  const Real den = std::isfinite(sink) ? keys_sum + exp(Real(sink) - m) : keys_sum;
  for (size_t e = 0; e < dims; ++e) {
    Real num = 0, abs_num = 0, sum_abs = 0;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo, big = 0;
    for (size_t n = 0; n < seen.size(); ++n) {
      const Real& x = keys.v[static_cast<size_t>(seen[n])][e];
      num += w[n] * x;
      abs_num += w[n] * abs(x);
      sum_abs += abs(x);
      const auto xd = static_cast<double>(x);  // exact: a decoded value times a scale
      lo = std::min(lo, xd);
      hi = std::max(hi, xd);
      big = std::max(big, std::abs(xd));
    }
    row.out[e] = num / den;
    row.a[e] = abs_num / den;
    row.sum_abs_v[e] = sum_abs;
    row.min_v[e] = lo;
    row.max_v[e] = hi;
    row.max_abs_v[e] = big;
  }
  row.lse = m + log(keys_sum);
  return row;
}

// --- comparison ---------------------------------------------------------------------------------

struct Worst {
  double out = 0, a = 0, lse = 0;
  double out_in_ula = 0;  // |ref - oracle| / (u L' A): the error at binary64's own logit scale
  int checked_elements = 0, empty_rows = 0;
};

std::string where(uint64_t seed, int index, int64_t b, int64_t i, int64_t h) {
  std::ostringstream os;
  os << "problem " << index << " (PACTS_ORACLE_SEED=" << seed
     << " PACTS_ORACLE_PROBLEM=" << index << " pacts_oracle_test --gtest_filter='*Shard*')"
     << " row b=" << b << " i=" << i << " h=" << h;
  return os.str();
}

// Returns |x - want| / bound, failing the test when x is outside the bound.
double check_within(double x, const Real& want, const Real& bound, const std::string& what) {
  const Real err = abs(Real(x) - want);
  if (!(std::isfinite(x) && err <= bound)) {
    const auto text = [](const Real& y) { return y.str(20, std::ios_base::scientific); };
    ADD_FAILURE() << what << ": reference " << text(Real(x)) << " oracle " << text(want)
                  << " error " << text(err) << " bound " << text(bound);
    return std::numeric_limits<double>::infinity();
  }
  return bound > 0 ? static_cast<double>(err / bound) : 0.0;
}

void check_problem(uint64_t base, int index, Worst& worst) {
  const uint64_t seed = problem_seed(base, index);
  const Logical lg = generate(seed, index);
  const pacts_problem& p = lg.p;
  Case c = materialise(lg);
  const spec::Result<Output> result = c.run();
  ASSERT_TRUE(result.is_ok()) << where(base, index, 0, 0, 0) << ": " << result.status().to_string();
  const Output& ref = result.value();
  EXPECT_EQ(ref.device_error, 0u) << where(base, index, 0, 0, 0);
  const auto dims = static_cast<size_t>(p.head_dim);
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t g = 0; g < p.num_kv_heads; ++g) {
      const OracleKeys keys = oracle_keys(lg, b, g);
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i = 0; i < p.q_len; ++i) {
          const OracleRow want = oracle_row(lg, keys, b, i, h);
          const size_t r = lg.q_row(b, i, h);
          const std::string at = where(base, index, b, i, h);
          ASSERT_EQ(ref.visible[r], want.visible) << at;
          ASSERT_EQ(ref.row_invalid[r], 0) << at;
          if (want.visible == 0) {
            worst.empty_rows++;
            EXPECT_EQ(ref.lse[r], -std::numeric_limits<double>::infinity()) << at;
            for (size_t e = 0; e < dims; ++e) {
              EXPECT_EQ(ref.out[r * dims + e], 0.0) << at;
              EXPECT_FALSE(std::signbit(ref.out[r * dims + e])) << at;
            }
            continue;
          }
          const Real l_prime = std::max(want.logit_abs_dot, Real(1));
          const Real logit_term = 4 * kU * l_prime;
          worst.lse = std::max(worst.lse, check_within(ref.lse[r], want.lse,
                                                       1e-12 * abs(want.lse) + logit_term + 1e-14,
                                                       at + " lse"));
          check_within(ref.logit_abs_dot[r], want.logit_abs_dot, 1e-13 * want.logit_abs_dot,
                       at + " logit_abs_dot");
          check_within(ref.logit_max[r], want.logit_max, 1e-13 * l_prime, at + " logit_max");
          for (size_t e = 0; e < dims; ++e) {
            const size_t x = r * dims + e;
            const Real bound = 1e-12 * want.a[e] + logit_term * want.a[e];
            const std::string ate = at + " d=" + std::to_string(e);
            worst.out = std::max(worst.out, check_within(ref.out[x], want.out[e], bound, ate + " out"));
            if (want.a[e] > 0)
              worst.out_in_ula = std::max(worst.out_in_ula,
                  static_cast<double>(abs(Real(ref.out[x]) - want.out[e]) / (kU * l_prime * want.a[e])));
            worst.a = std::max(worst.a, check_within(ref.abs_weighted_v[x], want.a[e], bound, ate + " A"));
            check_within(ref.sum_abs_v[x], want.sum_abs_v[e], 1e-13 * want.sum_abs_v[e], ate + " sum_abs_v");
            EXPECT_EQ(ref.max_abs_v[x], want.max_abs_v[e]) << ate;
            EXPECT_EQ(ref.min_v[x], want.min_v[e]) << ate;
            EXPECT_EQ(ref.max_v[x], want.max_v[e]) << ate;
            worst.checked_elements++;
          }
          if (::testing::Test::HasFailure()) return;  // one broken problem is enough to read
        }
      }
    }
  }
}

class Oracle : public ::testing::TestWithParam<int> {};

TEST_P(Oracle, Shard) {
  const uint64_t base = base_seed();
  const std::optional<int> only = only_problem();
  const int shard = GetParam();
  std::cout << "[ oracle   ] seed " << base << " (PACTS_ORACLE_SEED overrides), shard " << shard
            << " of " << kShards << "\n";
  Worst worst;
  int problems = 0;
  for (int index = shard; index < kProblems; index += kShards) {
    if (only && *only != index) continue;
    check_problem(base, index, worst);
    ++problems;
    if (HasFailure()) return;
  }
  std::cout << "[ oracle   ] " << problems << " problems, " << worst.checked_elements
            << " elements, " << worst.empty_rows << " empty rows; worst error/bound: out "
            << worst.out << ", A " << worst.a << ", lse " << worst.lse << "; worst out error "
            << worst.out_in_ula << " u L' A\n";
  RecordProperty("worst_out_ratio", std::to_string(worst.out));
  RecordProperty("worst_lse_ratio", std::to_string(worst.lse));
}

INSTANTIATE_TEST_SUITE_P(Generated, Oracle, ::testing::Range(0, kShards));

// The generator's coverage is a claim too: every option appears in the fixed-seed set.
TEST(OracleGenerator, CoversEveryOption) {
  const uint64_t base = base_seed();
  std::map<std::string, int> total;
  for (int index = 0; index < kProblems; ++index)
    for (const auto& [name, count] : generate(problem_seed(base, index), index).features)
      total[name] += count;
  std::ostringstream summary;
  for (const auto& [name, count] : total) summary << name << "=" << count << " ";
  std::cout << "[ oracle   ] coverage: " << summary.str() << "\n";
  std::vector<std::string> required = {
      "kv_bf16", "kv_fp16", "kv_e4m3fn", "kv_e4m3fnuz", "kv_e5m2", "kv_e5m2fnuz", "kv_e2m1",
      "q_bf16", "q_fp16", "q_e4m3fn", "q_e4m3fnuz", "q_e5m2", "q_e5m2fnuz",
      "k_mode_0", "k_mode_1", "k_mode_2", "k_mode_3", "v_mode_0", "v_mode_1", "v_mode_2", "v_mode_3",
      "L_1", "L_2", "L_3", "L_4", "G_1", "G_2", "G_3", "G_4", "D_64", "D_128", "D_256",
      "P_8", "P_16", "P_32", "softcap_0", "softcap_1", "window_0", "window_1", "sinks_0", "sinks_1",
      "v_regime_0", "v_regime_4", "v_regime_subnormal", "nibble_0", "nibble_1",
      "target_0", "target_4", "target_16", "target_50", "ctx_zero", "ctx_full",
      "ctx_page_multiple", "rows_before_first_key"};
  for (const char* pool : {"k", "v"})
    for (int family = 0; family < 4; ++family)
      required.push_back(std::string(pool) + "_layout_" + std::to_string(family));
  for (const std::string& name : required) EXPECT_GE(total[name], 3) << name;
}

}  // namespace
}  // namespace pacts::reference
