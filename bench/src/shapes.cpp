// The shape sets (docs/bench.md): `peers` (the grid the H200 peers were measured on), `models`
// (production attention configurations in their usual KV formats) and `grid` (a sweep with
// ragged context lengths, as aiter benchmarked its poison-proofing); and
// `formats`: one figure per KV format and per K/V layout (NHD, vLLM's) at one fixed shape.
#include <pacts/bench/bench.h>
#include <pacts/conformance/rng.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

namespace pacts::bench {
namespace {

// A KV format with the scale mode it is deployed with.
struct KvFormat {
  pacts_format format;
  pacts_scale_mode scale;
};
constexpr KvFormat kBf16{PACTS_FORMAT_BF16, PACTS_SCALE_NONE};
constexpr KvFormat kFp16{PACTS_FORMAT_FP16, PACTS_SCALE_NONE};
// vLLM's fp8 KV cache (NVIDIA, gfx950): OCP e4m3 with one scale per tensor.
constexpr KvFormat kE4m3PerTensor{PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TENSOR};
// OCP e4m3 with one scale per token: the per-token cost apart from the fnuz decode.
constexpr KvFormat kE4m3PerToken{PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TOKEN};
// aiter on gfx942: e4m3fnuz with one scale per token.
constexpr KvFormat kE4m3fnuzPerToken{PACTS_FORMAT_E4M3FNUZ, PACTS_SCALE_PER_TOKEN};
// vLLM's fp8_e5m2 cache and its fnuz twin, one scale per tensor.
constexpr KvFormat kE5m2PerTensor{PACTS_FORMAT_E5M2, PACTS_SCALE_PER_TENSOR};
constexpr KvFormat kE5m2fnuzPerTensor{PACTS_FORMAT_E5M2FNUZ, PACTS_SCALE_PER_TENSOR};
// MXFP4: e2m1 elements, one e8m0 scale per 32 (spec/formats.md §3).
constexpr KvFormat kMxfp4{PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK};

std::vector<Shape> peers() {
  // The peers' grid: bf16 Q/K/V, D 128, 8 KV heads, L 1, in the order of their table.
  std::vector<Shape> out;
  for (int32_t g : {1, 8})
    for (int32_t page : {16, 64})
      for (int32_t ctx : {1024, 4096, 16384})
        for (int32_t b : {1, 8, 32, 128}) {
          Shape s;
          s.set = "peers";
          s.batch = b;
          s.context = ctx;
          s.num_kv_heads = 8;
          s.num_q_heads = 8 * g;
          s.head_dim = 128;
          s.page_size = page;
          out.push_back(s);
        }
  return out;
}

struct Model {
  const char* name;
  int32_t q_heads, kv_heads, head_dim, page;
  bool sinks;
  int32_t window;
  std::vector<KvFormat> formats;
};

std::vector<Shape> models() {
  // Production models. Heads are per GPU at the stated tensor parallelism (KV heads replicated when
  // fewer than the GPUs). Page 16 is vLLM's default; the MXFP4 model's page is 128 (the only page
  // size of the MXFP4 kernel it is served with).
  // Its KV-head count is not given: 8 (with G 16, 128 query heads) is this file's choice.
  const std::vector<KvFormat> usual = {kBf16, kE4m3PerTensor, kE4m3fnuzPerToken};
  const std::vector<Model> list = {
      {"Llama-3.1-8B", 32, 8, 128, 16, false, 0, usual},
      {"Llama-3.1-70B TP8", 8, 1, 128, 16, false, 0, usual},
      {"Qwen3.5-35B-A3B TP1", 16, 2, 256, 16, false, 0, usual},
      {"Qwen3.5-397B-A17B TP8", 4, 1, 256, 16, false, 0, usual},
      {"Qwen3.5-397B-A17B TP4", 8, 1, 256, 16, false, 0, usual},
      {"GPT-OSS-120B", 64, 8, 64, 16, true, 128, usual},
      {"MXFP4 model", 128, 8, 128, 128, false, 0, {kMxfp4}},
  };
  std::vector<Shape> out;
  for (const Model& m : list)
    for (const KvFormat& f : m.formats)
      for (int32_t l : {1, 4})
        for (int32_t ctx : {4096, 32768})
          for (int32_t b : {1, 32}) {
            Shape s;
            s.set = "models";
            s.model = m.name;
            s.batch = b;
            s.context = ctx;
            s.q_len = l;
            s.num_q_heads = m.q_heads;
            s.num_kv_heads = m.kv_heads;
            s.head_dim = m.head_dim;
            s.page_size = m.page;
            s.kv_format = f.format;
            s.kv_scale_mode = f.scale;
            s.sinks = m.sinks;
            s.window = m.window;
            out.push_back(s);
          }
  return out;
}

std::vector<Shape> grid() {
  // B x ctx x page x KV format x D x L, G 4 (Hq 32, Hkv 8), lengths ctx - U[0, 255] so that most
  // sequences end inside a tile (docs/bug-classes.md, #7092).
  const std::vector<KvFormat> formats = {kBf16, kFp16, kE4m3PerTensor, kE4m3fnuzPerToken, kMxfp4};
  std::vector<Shape> out;
  for (const KvFormat& f : formats)
    for (int32_t d : {64, 128, 256})
      for (int32_t page : {16, 64})
        for (int32_t l : {1, 4})
          for (int32_t ctx : {1024, 4096, 16384})
            for (int32_t b : {1, 32}) {
              Shape s;
              s.set = "grid";
              s.batch = b;
              s.context = ctx;
              s.q_len = l;
              s.num_q_heads = 32;
              s.num_kv_heads = 8;
              s.head_dim = d;
              s.page_size = page;
              s.kv_format = f.format;
              s.kv_scale_mode = f.scale;
              s.ragged = true;
              out.push_back(s);
            }
  return out;
}

std::vector<Shape> formats() {
  // Every KV format (with the scale mode it is deployed with) in both layouts at one shape that
  // is long enough for the K/V stream to dominate: B 32, ctx 16384 (not ragged), Hkv 8, G 8,
  // D 128, page 64, L 1.
  const std::vector<KvFormat> list = {kBf16, kFp16, kE4m3PerTensor, kE4m3PerToken,
                                      kE4m3fnuzPerToken, kE5m2PerTensor, kE5m2fnuzPerTensor,
                                      kMxfp4};
  std::vector<Shape> out;
  for (const KvFormat& f : list)
    for (KvLayout layout : {KvLayout::kNhd, KvLayout::kVllm}) {
      Shape s;
      s.set = "formats";
      s.batch = 32;
      s.context = 16384;
      s.num_kv_heads = 8;
      s.num_q_heads = 64;
      s.head_dim = 128;
      s.page_size = 64;
      s.kv_format = f.format;
      s.kv_scale_mode = f.scale;
      s.layout = layout;
      out.push_back(s);
    }
  return out;
}

// The K and V pool layouts of a shape (spec/operator.md §3.2 table). Strides count elements, or
// bytes over the byte index d/2 for e2m1 (§3.3), so a row has `units` of them.
std::pair<pacts_pool_layout, pacts_pool_layout> pool_layouts(const Shape& s) {
  const bool e2m1 = s.kv_format == PACTS_FORMAT_E2M1;
  const int64_t units = e2m1 ? s.head_dim / 2 : s.head_dim;
  const int64_t hkv = s.num_kv_heads, page = s.page_size;
  if (s.layout == KvLayout::kNhd) {
    const pacts_pool_layout nhd{page * hkv * units, units, hkv * units, units,
                                static_cast<int32_t>(units), 0};
    return {nhd, nhd};
  }
  // x-packed K: chunks of 16 bytes (x = 16 / element size; e2m1: 16 bytes = 32 elements).
  const int64_t x = e2m1 ? 16 : 16 / spec::element_bytes(s.kv_format);
  const pacts_pool_layout k{hkv * units * page, units * page, x, page * x,
                            static_cast<int32_t>(x), 0};
  // Dim-major V: one unit per chunk, the tokens of a dim contiguous.
  const pacts_pool_layout v{hkv * units * page, units * page, 1, page, 1, 0};
  return {k, v};
}

// "e4m3fn/tensor", "e4m3fnuz/token", "bf16", "e2m1" (MX block scales go with e2m1 alone).
std::string format_with_scale(const Shape& s) {
  std::string f(spec::format_name(s.kv_format));
  if (s.kv_scale_mode == PACTS_SCALE_PER_TENSOR) f += "/tensor";
  if (s.kv_scale_mode == PACTS_SCALE_PER_TOKEN) f += "/token";
  return f;
}

}  // namespace

std::string_view layout_name(KvLayout layout) {
  switch (layout) {
    case KvLayout::kNhd: return "nhd";
    case KvLayout::kVllm: return "vllm";
  }
  return "invalid";
}

std::string Shape::label() const {
  std::string s = "B" + std::to_string(batch) + " ctx" + std::to_string(context) + " L" +
                  std::to_string(q_len) + " Hq" + std::to_string(num_q_heads) + " Hkv" +
                  std::to_string(num_kv_heads) + " D" + std::to_string(head_dim) + " p" +
                  std::to_string(page_size) + " " + format_with_scale(*this);
  if (sinks) s += " sinks";
  if (window > 0) s += " W" + std::to_string(window);
  if (ragged) s += " ragged";
  if (layout != KvLayout::kNhd) s += " " + std::string(layout_name(layout));
  if (!model.empty()) s = model + ": " + s;
  return s;
}

std::string Shape::series() const {
  std::string s = format_with_scale(*this) + " p" + std::to_string(page_size);
  if (layout != KvLayout::kNhd) s += " " + std::string(layout_name(layout));
  return s;
}

std::vector<std::string> set_names() { return {"peers", "models", "grid", "formats"}; }

spec::Result<Shape> parse_shape(std::string_view label) {
  if (const size_t colon = label.find(": "); colon != std::string_view::npos)
    label.remove_prefix(colon + 2);  // a model's name
  Shape s;
  s.set = "shape";
  const auto bad = [&](std::string_view word, const std::string& why) {
    return spec::invalid_argument("shape '" + std::string(label) + "': '" + std::string(word) +
                                  "' " + why);
  };
  // The numbered words, as Shape::label writes them ("Hkv" before "Hq" is not needed: neither is
  // a prefix of the other).
  struct Numbered {
    std::string_view prefix;
    int32_t* field;
    bool seen;
  };
  Numbered numbered[] = {{"ctx", &s.context, false},   {"Hkv", &s.num_kv_heads, false},
                         {"Hq", &s.num_q_heads, false}, {"B", &s.batch, false},
                         {"L", &s.q_len, false},        {"D", &s.head_dim, false},
                         {"p", &s.page_size, false},    {"W", &s.window, false}};
  bool format_seen = false, layout_seen = false;
  size_t at = 0;
  while (at < label.size()) {
    const size_t end = std::min(label.find(' ', at), label.size());
    const std::string_view word = label.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    if (word == "sinks" || word == "ragged") {
      bool& flag = word == "sinks" ? s.sinks : s.ragged;
      if (flag) return bad(word, "is given twice");
      flag = true;
      continue;
    }
    if (word == "nhd" || word == "vllm") {
      if (layout_seen) return bad(word, "is a second layout");
      layout_seen = true;
      s.layout = word == "vllm" ? KvLayout::kVllm : KvLayout::kNhd;
      continue;
    }
    Numbered* n = nullptr;
    for (Numbered& c : numbered)
      if (word.size() > c.prefix.size() && word.substr(0, c.prefix.size()) == c.prefix &&
          word[c.prefix.size()] >= '0' && word[c.prefix.size()] <= '9') {
        n = &c;
        break;
      }
    if (n != nullptr) {
      const std::string_view digits = word.substr(n->prefix.size());
      int32_t v = 0;
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc{} || ptr != digits.data() + digits.size() || v < 1)
        return bad(word, "is not " + std::string(n->prefix) + " and a number from 1 to 2^31 - 1");
      if (n->seen) return bad(word, "is given twice");
      n->seen = true;
      *n->field = v;
      continue;
    }
    // The KV format, with its scale mode: "bf16", "e4m3fn/tensor", "e4m3fnuz/token".
    const size_t slash = word.find('/');
    const std::string_view name = word.substr(0, slash);
    const std::string_view scale = slash == std::string_view::npos ? "" : word.substr(slash + 1);
    bool known = false;
    for (int f = 0; f < 64 && !known; ++f) {
      const auto format = static_cast<pacts_format>(f);
      if (spec::format_name(format) != name || name == "invalid") continue;
      known = true;
      s.kv_format = format;
    }
    if (!known || (!scale.empty() && scale != "tensor" && scale != "token"))
      return bad(word, "is none of B<n> ctx<n> L<n> Hq<n> Hkv<n> D<n> p<n> W<n>, a KV format "
                       "with /tensor or /token or neither, sinks, ragged, nhd, vllm");
    if (format_seen) return bad(word, "is a second format");
    format_seen = true;
    s.kv_scale_mode = scale == "tensor"  ? PACTS_SCALE_PER_TENSOR
                      : scale == "token" ? PACTS_SCALE_PER_TOKEN
                      : s.kv_format == PACTS_FORMAT_E2M1 ? PACTS_SCALE_MX_BLOCK
                                                         : PACTS_SCALE_NONE;
  }
  for (const Numbered& c : numbered)
    if (!c.seen && c.prefix != "W")
      return spec::invalid_argument("shape '" + std::string(label) + "': no " +
                                    std::string(c.prefix) + "<n>");
  if (!format_seen)
    return spec::invalid_argument("shape '" + std::string(label) + "': no KV format");
  return s;
}

spec::Result<std::vector<Shape>> shape_set(std::string_view name) {
  if (name == "peers") return peers();
  if (name == "models") return models();
  if (name == "grid") return grid();
  if (name == "formats") return formats();
  return spec::invalid_argument("set '" + std::string(name) +
                                "': the shape sets are peers, models, grid, formats");
}

pacts_problem make_problem(const Shape& s) {
  const int32_t pages_per_seq = (s.context + s.page_size - 1) / s.page_size;
  pacts_problem p = spec::make_problem(s.batch, s.q_len, s.num_q_heads, s.num_kv_heads,
                                       s.head_dim, s.page_size, s.batch * pages_per_seq,
                                       pages_per_seq);
  p.kv_format = s.kv_format;
  p.k_scale_mode = p.v_scale_mode = s.kv_scale_mode;
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  p.window = s.window;
  p.has_sinks = s.sinks ? 1 : 0;
  p.want_lse = 0;
  std::tie(p.k_layout, p.v_layout) = pool_layouts(s);
  // Scales [page][head][token] (per token: fp32; MX: D / 32 e8m0 bytes per token).
  const int64_t per_token = s.kv_scale_mode == PACTS_SCALE_MX_BLOCK ? s.head_dim / 32 : 1;
  if (s.kv_scale_mode == PACTS_SCALE_PER_TOKEN || s.kv_scale_mode == PACTS_SCALE_MX_BLOCK) {
    for (pacts_scale_layout* l : {&p.k_scale_layout, &p.v_scale_layout}) {
      l->s_block = 1;
      l->s_tok = per_token;
      l->s_head = int64_t{s.page_size} * per_token;
      l->s_page = int64_t{s.num_kv_heads} * l->s_head;
    }
  }
  return p;
}

std::vector<int32_t> context_lengths(const Shape& shape, uint64_t seed) {
  std::vector<int32_t> lens(static_cast<size_t>(shape.batch), shape.context);
  if (!shape.ragged) return lens;
  conformance::Rng rng(seed);
  for (int32_t& n : lens) n = std::max(1, shape.context - rng.range(0, 255));
  return lens;
}

}  // namespace pacts::bench
