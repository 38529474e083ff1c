// pacts-bench, CPU only, no timing assertions (docs/conventions.md): the shape sets are
// docs/bench.md's (and `formats`, every KV format in the NHD and vLLM layouts, those of the spec's
// table), the bytes model counts what a call moves, a backend that fails a property is refused
// (named, with its case file) and nothing is timed, a passing host backend produces a table,
// CSV, JSON and SVG that parse, and --baseline flags a planted change but not an identical run.
// Fixed seeds, printed. Label `bench`.
#include <pacts/backends/register.h>
#include <pacts/bench/bench.h>
#include <pacts/conformance/backend.h>
#include <pacts/conformance/registry.h>
#include <pacts/spec/validate.h>

#include "../src/internal.h"

#include <gtest/gtest.h>

#include <regex>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

namespace pacts::bench {
namespace {

constexpr uint64_t kGateSeed = 20261129;
constexpr uint64_t kDataSeed = 7;

// run_set() makes its backend by name, as pacts-bench does: registered as its main() does.
[[maybe_unused]] const bool registered = [] {
  backends::register_all();
  return true;
}();

// ---- Shape sets: written from docs/bench.md, not from shapes.cpp -------------------------

TEST(ShapeSets, PeersAreTheGridOfTheNotes) {
  // docs/bench.md: B 1/8/32/128 x ctx 1024/4096/16384 x G 1/8 x page 16/64, bf16, D 128,
  // Hkv 8 (L 1, all sequences at the full context).
  std::multiset<std::tuple<int, int, int, int>> expected;
  for (int b : {1, 8, 32, 128})
    for (int ctx : {1024, 4096, 16384})
      for (int g : {1, 8})
        for (int page : {16, 64}) expected.insert({b, ctx, g, page});
  const auto set = shape_set("peers");
  ASSERT_TRUE(set) << set.status().to_string();
  std::multiset<std::tuple<int, int, int, int>> got;
  for (const Shape& s : set.value()) {
    got.insert({s.batch, s.context, s.group(), s.page_size});
    EXPECT_EQ(s.kv_format, PACTS_FORMAT_BF16) << s.label();
    EXPECT_EQ(s.kv_scale_mode, PACTS_SCALE_NONE) << s.label();
    EXPECT_EQ(s.head_dim, 128) << s.label();
    EXPECT_EQ(s.num_kv_heads, 8) << s.label();
    EXPECT_EQ(s.q_len, 1) << s.label();
    EXPECT_FALSE(s.ragged || s.sinks || s.window) << s.label();
  }
  EXPECT_EQ(got, expected);
}

TEST(PeerFigures, EveryPeersShapeHasTheCommittedFigure) {
  // The report puts the best paged peer beside every row of the set on an H200, from the
  // committed data file.
  const auto figures = load_peer_figures(PACTS_PEERS_FILE);
  ASSERT_TRUE(figures) << figures.status().message();
  EXPECT_EQ(figures.value().device, "H200");
  const auto set = shape_set("peers");
  ASSERT_TRUE(set);
  EXPECT_EQ(figures.value().rows.size(), set.value().size());
  for (const Shape& s : set.value()) {
    const PeerFigure* f = peer_figure(figures.value(), s);
    ASSERT_NE(f, nullptr) << s.label();
    // The peers' TB/s is K+V bytes of the context over their time (docs/bench.md).
    EXPECT_NEAR(f->tbs, 2.0 * s.batch * s.context * 8 * 128 * 2 / (f->us * 1e-6) / 1e12, 0.011)
        << s.label();
  }
  // Not a shape the figures were measured at: another page size, sinks, a ragged batch.
  Shape other = set.value()[0];
  other.page_size = 32;
  EXPECT_EQ(peer_figure(figures.value(), other), nullptr);
  other = set.value()[0];
  other.sinks = true;
  EXPECT_EQ(peer_figure(figures.value(), other), nullptr);
  other = set.value()[0];
  other.ragged = true;
  EXPECT_EQ(peer_figure(figures.value(), other), nullptr);
}

TEST(PeerFigures, BadFilesAreRefusedNamingTheFileAndTheKey) {
  const std::filesystem::path dir = std::filesystem::path(PACTS_BENCH_TEST_DIR) / "peer-figures";
  std::filesystem::create_directories(dir);
  const std::string head = R"({"what": "w", "device": "H200", "method": "m", "measured": "d", )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "cannot be read|not JSON"},
      {R"({"device": "H200"})", "\"what\""},
      {head + R"("rows": []})", "\"rows\""},
      {head + R"("rows": [{"batch": 1, "context": 1024, "group": 1, "us": 1, "tbs": 1}]})",
       "rows\\[0\\].\"page_size\""},
      {head + R"("rows": [{"batch": 1, "context": 1024, "group": 1, "page_size": 16, "us": 0, "tbs": 1}]})",
       "rows\\[0\\].\"us\""},
  };
  int n = 0;
  for (const auto& [text, expect] : cases) {
    const std::string path = (dir / ("bad" + std::to_string(n++) + ".json")).string();
    std::ofstream(path) << text;
    const auto got = load_peer_figures(path);
    ASSERT_FALSE(got) << text;
    EXPECT_EQ(got.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(got.status().message().find(path), std::string::npos) << got.status().message();
    EXPECT_TRUE(std::regex_search(got.status().message(), std::regex(expect)))
        << got.status().message() << " / " << expect;
  }
  EXPECT_FALSE(load_peer_figures((dir / "missing.json").string()));
}

TEST(ShapeSets, ModelsAreTheIssuesModels) {
  // name prefix -> (Hq, Hkv, D, sinks, window, page or 0 = any): docs/bench.md's models.
  struct M {
    int hq, hkv, d;
    bool sinks;
    int window, page;
  };
  const std::map<std::string, M> expected = {
      {"Llama-3.1-8B", {32, 8, 128, false, 0, 0}},
      {"Llama-3.1-70B TP8", {8, 1, 128, false, 0, 0}},
      {"Qwen3.5-35B-A3B TP1", {16, 2, 256, false, 0, 0}},       // Hkv 2, G 8
      {"Qwen3.5-397B-A17B TP8", {4, 1, 256, false, 0, 0}},      // Hkv 1, G 4
      {"Qwen3.5-397B-A17B TP4", {8, 1, 256, false, 0, 0}},      // G 8
      {"GPT-OSS-120B", {64, 8, 64, true, 128, 0}},
  };
  const auto set = shape_set("models");
  ASSERT_TRUE(set) << set.status().to_string();
  std::map<std::string, std::set<int>> q_lens;
  bool mxfp4 = false;
  for (const Shape& s : set.value()) {
    q_lens[s.model].insert(s.q_len);
    if (s.kv_format == PACTS_FORMAT_E2M1) {
      // "an MXFP4 model (G 16, D 128, page 128)"
      mxfp4 = true;
      EXPECT_EQ(s.group(), 16) << s.label();
      EXPECT_EQ(s.head_dim, 128) << s.label();
      EXPECT_EQ(s.page_size, 128) << s.label();
      EXPECT_EQ(s.kv_scale_mode, PACTS_SCALE_MX_BLOCK) << s.label();
      continue;
    }
    const auto it = expected.find(s.model);
    ASSERT_NE(it, expected.end()) << "a model the models set does not list: " << s.label();
    EXPECT_EQ(s.num_q_heads, it->second.hq) << s.label();
    EXPECT_EQ(s.num_kv_heads, it->second.hkv) << s.label();
    EXPECT_EQ(s.head_dim, it->second.d) << s.label();
    EXPECT_EQ(s.sinks, it->second.sinks) << s.label();
    EXPECT_EQ(s.window, it->second.window) << s.label();
  }
  EXPECT_TRUE(mxfp4);
  for (const auto& [name, m] : expected) EXPECT_EQ(q_lens[name], (std::set<int>{1, 4})) << name;
  EXPECT_EQ(q_lens.size(), expected.size() + 1);  // + the MXFP4 model
}

TEST(ShapeSets, GridIsAFullRaggedSweep) {
  const auto set = shape_set("grid");
  ASSERT_TRUE(set) << set.status().to_string();
  std::set<int> b, ctx, page, d, l;
  std::set<std::pair<int, int>> formats;
  std::set<std::string> labels;
  for (const Shape& s : set.value()) {
    EXPECT_TRUE(s.ragged) << s.label();
    b.insert(s.batch), ctx.insert(s.context), page.insert(s.page_size), d.insert(s.head_dim);
    l.insert(s.q_len), formats.insert({s.kv_format, s.kv_scale_mode});
    EXPECT_TRUE(labels.insert(s.label()).second) << "duplicate " << s.label();
  }
  // B x ctx x page x KV format x D x L: the full product, each axis with more than one value.
  EXPECT_EQ(set.value().size(),
            b.size() * ctx.size() * page.size() * formats.size() * d.size() * l.size());
  for (size_t n : {b.size(), ctx.size(), page.size(), formats.size(), d.size(), l.size()})
    EXPECT_GT(n, 1u);
  // Ragged lengths: ctx - U[0, 255], from the seed, reproducible; most end inside a 64-key tile.
  Shape s = set.value().back();
  std::printf("ragged lengths of %s, seed %llu\n", s.label().c_str(),
              static_cast<unsigned long long>(kDataSeed));
  s.batch = 1000;
  const std::vector<int32_t> lens = context_lengths(s, kDataSeed);
  EXPECT_EQ(lens, context_lengths(s, kDataSeed));
  EXPECT_NE(lens, context_lengths(s, kDataSeed + 1));
  int mid_tile = 0;
  std::set<int32_t> distinct;
  for (int32_t n : lens) {
    EXPECT_GE(n, s.context - 255);
    EXPECT_LE(n, s.context);
    mid_tile += n % 64 != 0;
    distinct.insert(n);
  }
  EXPECT_GT(mid_tile, 900);
  EXPECT_GT(distinct.size(), 200u);  // spread over the range, not a constant offset
}

// The `formats` set, from its description: one shape (B 32, ctx 16384 for every sequence, Hkv 8,
// Hq 64, D 128, page 64, L 1, nothing optional) for each KV format with its scale mode, in NHD and
// in vLLM's pair (x-packed K, dim-major V).
struct FormatPair {
  pacts_format format;
  pacts_scale_mode scale;
};
const std::vector<FormatPair> kFormatsOfTheSet = {
    {PACTS_FORMAT_BF16, PACTS_SCALE_NONE},           {PACTS_FORMAT_FP16, PACTS_SCALE_NONE},
    {PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TENSOR},   {PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TOKEN},
    {PACTS_FORMAT_E4M3FNUZ, PACTS_SCALE_PER_TOKEN},  {PACTS_FORMAT_E5M2, PACTS_SCALE_PER_TENSOR},
    {PACTS_FORMAT_E5M2FNUZ, PACTS_SCALE_PER_TENSOR}, {PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK},
};

// Bytes of one K (or V) row of D elements: e2m1 packs two elements per byte.
int64_t row_bytes(pacts_format f, int64_t d) {
  switch (f) {
    case PACTS_FORMAT_BF16:
    case PACTS_FORMAT_FP16: return 2 * d;
    case PACTS_FORMAT_E2M1: return d / 2;
    default: return d;
  }
}

TEST(ShapeSets, FormatsAreEveryKvFormatInBothLayoutsAtOneShape) {
  std::multiset<std::tuple<int, int, std::string>> expected;
  for (const FormatPair& f : kFormatsOfTheSet)
    for (const char* layout : {"nhd", "vllm"}) expected.insert({f.format, f.scale, layout});
  ASSERT_EQ(expected.size(), 16u);
  const auto set = shape_set("formats");
  ASSERT_TRUE(set) << set.status().to_string();
  EXPECT_EQ(set.value().size(), 16u);
  std::multiset<std::tuple<int, int, std::string>> got;
  std::set<std::string> labels, series;
  for (const Shape& s : set.value()) {
    got.insert({s.kv_format, s.kv_scale_mode, std::string(layout_name(s.layout))});
    EXPECT_TRUE(labels.insert(s.label()).second) << "duplicate " << s.label();
    EXPECT_TRUE(series.insert(s.series()).second) << "two shapes on one plot line " << s.label();
    EXPECT_EQ(s.set, "formats");
    EXPECT_EQ(s.batch, 32) << s.label();
    EXPECT_EQ(s.context, 16384) << s.label();
    EXPECT_FALSE(s.ragged) << s.label();
    EXPECT_EQ(context_lengths(s, kDataSeed), std::vector<int32_t>(32, 16384)) << s.label();
    EXPECT_EQ(s.num_kv_heads, 8) << s.label();
    EXPECT_EQ(s.num_q_heads, 64) << s.label();
    EXPECT_EQ(s.group(), 8) << s.label();
    EXPECT_EQ(s.head_dim, 128) << s.label();
    EXPECT_EQ(s.page_size, 64) << s.label();
    EXPECT_EQ(s.q_len, 1) << s.label();
    EXPECT_FALSE(s.sinks) << s.label();
    EXPECT_EQ(s.window, 0) << s.label();
    EXPECT_TRUE(s.model.empty()) << s.label();
    const pacts_problem p = make_problem(s);
    const spec::Status st = spec::validate_problem(p);
    EXPECT_TRUE(st) << s.label() << ": " << st.to_string();
    EXPECT_EQ(p.q_format, PACTS_FORMAT_BF16) << s.label();
    EXPECT_EQ(p.out_format, PACTS_FORMAT_BF16) << s.label();
    EXPECT_EQ(p.softcap, 0.0f) << s.label();
    EXPECT_EQ(p.has_sinks, 0) << s.label();
  }
  EXPECT_EQ(got, expected);
}

// --only keeps the shapes whose label contains the text, in set order, then --limit cuts.
TEST(ShapeSets, OnlyAndLimitSelectByLabelThenCount) {
  const auto formats = shape_set("formats");
  ASSERT_TRUE(formats);
  Options o;
  o.only = "e4m3fn/";
  std::vector<Shape> picked = select_shapes(formats.value(), o);
  ASSERT_EQ(picked.size(), 4u);  // per-tensor and per-token, NHD and vLLM
  for (const Shape& s : picked) {
    EXPECT_EQ(s.kv_format, PACTS_FORMAT_E4M3FN) << s.label();
    EXPECT_NE(s.label().find("e4m3fn/"), std::string::npos);
  }
  EXPECT_EQ(picked[0].label(), formats.value()[4].label());
  o.limit = 1;
  picked = select_shapes(formats.value(), o);
  ASSERT_EQ(picked.size(), 1u);
  EXPECT_EQ(picked[0].label(), formats.value()[4].label());
  o.only = "no such shape";
  EXPECT_TRUE(select_shapes(formats.value(), o).empty());
  o.only.clear();
  o.limit = 0;
  EXPECT_EQ(select_shapes(formats.value(), o).size(), formats.value().size());
}

TEST(ShapeSets, FormatsLayoutsAreTheSpecTable) {
  // spec/operator.md §3.2 (units: elements; e2m1, §3.3: bytes, U = D/2, x = 16 bytes):
  //   NHD           C = U, s_page = P*Hkv*U, s_head = U, s_tok = Hkv*U
  //   x-packed K    C = x, s_page = Hkv*U*P, s_head = U*P, s_tok = x, s_chunk = P*x
  //   dim-major V   C = 1, s_page = Hkv*U*P, s_head = U*P, s_tok = 1, s_chunk = P
  // with x = 16 bytes / element size. Scale pools dense (§3.4) in both layouts.
  const auto set = shape_set("formats");
  ASSERT_TRUE(set);
  for (const Shape& s : set.value()) {
    const pacts_problem p = make_problem(s);
    const bool e2m1 = s.kv_format == PACTS_FORMAT_E2M1;
    const bool wide = s.kv_format == PACTS_FORMAT_BF16 || s.kv_format == PACTS_FORMAT_FP16;
    const int64_t u = e2m1 ? 64 : 128, hkv = 8, page = 64;
    const int64_t x = wide ? 8 : 16;  // 16-bit: 8 elements; fp8: 16; e2m1: 16 bytes
    const pacts_pool_layout& k = p.k_layout;
    const pacts_pool_layout& v = p.v_layout;
    if (s.layout == KvLayout::kNhd) {
      for (const pacts_pool_layout* l : {&k, &v}) {
        EXPECT_EQ(l->chunk, u) << s.label();
        EXPECT_EQ(l->s_page, page * hkv * u) << s.label();
        EXPECT_EQ(l->s_head, u) << s.label();
        EXPECT_EQ(l->s_tok, hkv * u) << s.label();
      }
    } else {
      ASSERT_EQ(s.layout, KvLayout::kVllm) << s.label();
      EXPECT_EQ(k.chunk, x) << s.label();
      EXPECT_EQ(k.s_tok, x) << s.label();
      EXPECT_EQ(k.s_chunk, page * x) << s.label();
      EXPECT_EQ(k.s_head, u * page) << s.label();
      EXPECT_EQ(k.s_page, hkv * u * page) << s.label();
      EXPECT_EQ(v.chunk, 1) << s.label();
      EXPECT_EQ(v.s_tok, 1) << s.label();
      EXPECT_EQ(v.s_chunk, page) << s.label();
      EXPECT_EQ(v.s_head, u * page) << s.label();
      EXPECT_EQ(v.s_page, hkv * u * page) << s.label();
    }
    EXPECT_EQ(k.reserved0, 0);
    EXPECT_EQ(v.reserved0, 0);
    if (s.kv_scale_mode == PACTS_SCALE_PER_TOKEN || s.kv_scale_mode == PACTS_SCALE_MX_BLOCK) {
      const int64_t per_token = s.kv_scale_mode == PACTS_SCALE_MX_BLOCK ? 128 / 32 : 1;
      for (const pacts_scale_layout* l : {&p.k_scale_layout, &p.v_scale_layout}) {
        EXPECT_EQ(l->s_tok, per_token) << s.label();
        EXPECT_EQ(l->s_head, page * per_token) << s.label();
        EXPECT_EQ(l->s_page, hkv * page * per_token) << s.label();
      }
    }
  }
}

TEST(ShapeSets, FormatsHostInputsValidateAndPoolsAreDense) {
  // A reduced copy of every shape (B 2, ctx 300: the last page partly filled): the buffers
  // make_host_inputs lays out are what the problem describes (spec::validate checks every
  // extent), and both layouts' pools are exactly N x Hkv x P rows, as dense as NHD.
  const auto set = shape_set("formats");
  ASSERT_TRUE(set);
  for (Shape s : set.value()) {
    s.batch = 2;
    s.context = 300;
    const HostInputs in = make_host_inputs(s, kDataSeed);
    const spec::Status st = spec::validate(in.problem, in.buffers);
    EXPECT_TRUE(st) << s.label() << ": " << st.to_string();
    const uint64_t pages = 2 * 5;  // ceil(300 / 64) per sequence
    const uint64_t pool = pages * 8 * 64 * static_cast<uint64_t>(row_bytes(s.kv_format, 128));
    EXPECT_EQ(in.problem.num_pages, static_cast<int32_t>(pages)) << s.label();
    EXPECT_EQ(in.k.size(), pool) << s.label();
    EXPECT_EQ(in.v.size(), pool) << s.label();
    const spec::RequiredExtents e = spec::required_extents(in.problem);
    EXPECT_EQ(e.k, pool) << s.label();
    EXPECT_EQ(e.v, pool) << s.label();
  }
}

TEST(ShapeSets, EveryProblemIsValidAndUnknownSetsAreRefused) {
  for (const std::string& name : set_names()) {
    const auto set = shape_set(name);
    ASSERT_TRUE(set);
    for (const Shape& s : set.value()) {
      const pacts_problem p = make_problem(s);
      const spec::Status st = spec::validate_problem(p);
      EXPECT_TRUE(st) << s.label() << ": " << st.to_string();
    }
  }
  const auto bad = shape_set("peer");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), spec::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'peer'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("peers, models, grid, formats"), std::string::npos);
}

TEST(ShapeSets, HostInputsValidateForEveryFormat) {
  // One small shape per KV format of the grid: the buffers make_host_inputs lays out are what
  // the problem describes (spec::validate checks every extent).
  const auto grid = shape_set("grid");
  ASSERT_TRUE(grid);
  std::set<int> seen;
  for (Shape s : grid.value()) {
    if (!seen.insert(s.kv_format).second) continue;
    s.batch = 2;
    s.context = 300;
    const HostInputs in = make_host_inputs(s, kDataSeed);
    const spec::Status st = spec::validate(in.problem, in.buffers);
    EXPECT_TRUE(st) << s.label() << ": " << st.to_string();
  }
  EXPECT_EQ(seen.size(), 5u);
}

TEST(Targets, ParsedOrRefusedByName) {
  ASSERT_TRUE(parse_target("host"));
  const auto hip = parse_target("hip:3");
  ASSERT_TRUE(hip);
  EXPECT_EQ(hip.value().kind, "hip");
  EXPECT_EQ(hip.value().ordinal, 3);
  const auto faulty = parse_target("host+v_tail_leak");
  ASSERT_TRUE(faulty);
  EXPECT_EQ(faulty.value().kind, "host");
  for (const char* bad : {"gpu", "hip:", "hip:x", "host+no_such_fault", "reference"}) {
    const auto t = parse_target(bad);
    ASSERT_FALSE(t) << bad;
    EXPECT_EQ(t.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(t.status().message().find(std::string("'") + bad + "'"), std::string::npos);
    EXPECT_NE(t.status().message().find("hip:N"), std::string::npos);
  }
}

// ---- Bytes model: values derived by hand from the shape ---------------------------------

TEST(BytesModel, CountsKvAndEverythingElse) {
  Shape s;
  s.batch = 2;
  s.context = 100;
  s.num_q_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 64;
  s.page_size = 16;
  const pacts_problem p = make_problem(s);
  kernels::Plan unsplit;
  unsplit.num_partitions = 1;
  const std::vector<int32_t> lens = {100, 37};
  const Bytes b = bytes_moved(p, lens, unsplit);
  // K and V: (100 + 37) tokens x 2 heads x 64 dims x 2 bytes, twice.
  EXPECT_EQ(b.kv, 2u * 137 * 2 * 64 * 2);
  // + Q and O (2 x 1 x 4 x 64 x 2 bytes each), block-table entries read (7 + 3 pages, 4 bytes),
  // context lengths (2 x 4 bytes).
  EXPECT_EQ(b.all, b.kv + 2 * 1024 + 10 * 4 + 8);

  // A window of 10 keys, L 1: only the last 10 keys of each sequence are read.
  Shape w = s;
  w.window = 10;
  EXPECT_EQ(bytes_moved(make_problem(w), lens, unsplit).kv, 2u * 20 * 2 * 64 * 2);

  // A split plan: partials of the partitions with keys (D floats + max + sum per row), written
  // and read: partitions of 32 keys -> 4 + 2 with keys; rows per KV head G x L = 2.
  kernels::Plan split;
  split.num_partitions = 4;
  split.partition_size = 32;
  EXPECT_EQ(bytes_moved(p, lens, split).all, b.all + 2u * 6 * 2 * 2 * (64 + 2) * 4);

  // Per-token scales: 4 bytes per token and KV head, for K and V.
  Shape t = s;
  t.kv_format = PACTS_FORMAT_E4M3FNUZ;
  t.kv_scale_mode = PACTS_SCALE_PER_TOKEN;
  const Bytes bt = bytes_moved(make_problem(t), lens, unsplit);
  EXPECT_EQ(bt.kv, 2u * 137 * 2 * 64);
  EXPECT_EQ(bt.all, bt.kv + 2u * 137 * 2 * 4 + 2 * 1024 + 10 * 4 + 8);
}

TEST(Statistics, MedianMinMax) {
  const std::vector<double> odd = {5, 1, 3}, even = {4, 1, 3, 2};
  EXPECT_EQ(statistics(odd).median_us, 3);
  EXPECT_EQ(statistics(even).median_us, 2.5);
  EXPECT_EQ(statistics(even).min_us, 1);
  EXPECT_EQ(statistics(even).max_us, 4);
  EXPECT_EQ(statistics(even).samples, 4);
}

// ---- The gate and the command -------------------------------------------------------------

struct Command {
  int status = -1;
  std::string out, err;
};

Command run_bench(const std::string& args, const std::filesystem::path& dir) {
  const std::filesystem::path err = dir / "stderr.txt";
  const std::string cmd = std::string(PACTS_BENCH_BINARY) + " " + args + " 2>" + err.string();
  std::printf("running: %s\n", cmd.c_str());
  Command c;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (pipe && std::fgets(buf.data(), buf.size(), pipe)) c.out += buf.data();
  const int raw = pipe ? pclose(pipe) : -1;
  c.status = raw >= 0 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream f(err);
  std::stringstream s;
  s << f.rdbuf();
  c.err = s.str();
  return c;
}

std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::path(PACTS_BENCH_TEST_DIR) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The quick gate of these tests: few cases, enough for the planted fault's catcher.
Options quick(const std::filesystem::path& dir) {
  Options o;
  o.gate_cases = 3;
  o.gate_seed = kGateSeed;
  o.gate_case_dir = (dir / "failures").string();
  o.repeats = 3;
  o.warmup = 1;
  o.limit = 2;
  o.host_threads = 2;
  o.data_seed = kDataSeed;
  o.ceiling_bytes = uint64_t{8} << 20;
  o.progress = nullptr;
  return o;
}

TEST(Gate, AFailingBackendIsRefusedAndNothingIsTimed) {
  // host+v_tail_leak: the unowned tail of the last page reaches P.V (PACTS-POISON-1's bug).
  const std::filesystem::path dir = fresh_dir("gate_refusal");
  std::printf("gate seed %llu\n", static_cast<unsigned long long>(kGateSeed));
  const auto target = parse_target("host+v_tail_leak");
  ASSERT_TRUE(target);
  Options o = quick(dir);
  o.gate_cases = 5;
  const auto report = run_set("peers", target.value(), o);
  ASSERT_TRUE(report) << report.status().to_string();
  EXPECT_TRUE(report.value().gate.ran);
  EXPECT_FALSE(report.value().gate.passed);
  EXPECT_TRUE(report.value().rows.empty());
  bool poison1 = false;
  for (const GateFailure& f : report.value().gate.failures) {
    EXPECT_FALSE(f.case_file.empty()) << f.id;
    EXPECT_TRUE(std::filesystem::exists(f.case_file)) << f.case_file;
    poison1 |= f.id == "PACTS-POISON-1";
  }
  EXPECT_TRUE(poison1);

  // The command: refuses (exit 1, a Mandatory failure) and names the property and the case file;
  // prints no table.
  const Command c = run_bench("--backend host+v_tail_leak --set peers --gate-cases 5 --seed 7 "
                              "--threads 2 --limit 1 --case-dir " + (dir / "cli").string(),
                              dir);
  EXPECT_EQ(c.status, 1) << c.err;
  EXPECT_NE(c.err.find("REFUSED"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("PACTS-POISON-1"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("case file: " + (dir / "cli").string()), std::string::npos) << c.err;
  // Same seed, same gate: every property the library run found failing is named by the command.
  for (const GateFailure& f : report.value().gate.failures)
    EXPECT_NE(c.err.find(f.id + " " + f.name + " failed"), std::string::npos) << f.id;
  EXPECT_EQ(c.out.find("median us"), std::string::npos) << c.out;
}

// Tag balance of an SVG document (no XML library among the dependencies): every element opened
// is closed in order, and the root is <svg>.
bool well_formed_svg(const std::string& s, int& polylines) {
  std::vector<std::string> stack;
  polylines = 0;
  size_t i = 0;
  while ((i = s.find('<', i)) != std::string::npos) {
    const size_t end = s.find('>', i);
    if (end == std::string::npos) return false;
    const std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return false;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return false;
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    if (name == "polyline") ++polylines;
    if (tag.back() != '/') stack.push_back(name);
    else if (stack.empty()) return false;
  }
  return stack.empty() && s.rfind("<svg", 0) == 0;
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

TEST(Command, PassingHostBackendWritesTableCsvJsonSvg) {
  const std::filesystem::path dir = fresh_dir("host_reports");
  const std::string files = " --csv " + (dir / "r.csv").string() + " --json " +
                            (dir / "r.json").string() + " --svg " + (dir / "r.svg").string();
  const Command c = run_bench("--backend host --set peers --limit 2 --gate-cases 3 --repeats 3 "
                              "--warmup 1 --seed 7 --threads 2 --ceiling-mib 8 --case-dir " +
                                  (dir / "failures").string() + files,
                              dir);
  ASSERT_EQ(c.status, 0) << c.err << c.out;
  // Progress on stderr: the gate's lines and one line per shape.
  EXPECT_NE(c.err.find("gate PACTS-POISON-1"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("[2/2]"), std::string::npos) << c.err;
  std::printf("%s", c.out.c_str());

  const auto report = from_json(read(dir / "r.json"));
  ASSERT_TRUE(report) << report.status().to_string();
  const Report& r = report.value();
  EXPECT_TRUE(r.gate.ran && r.gate.passed);
  EXPECT_EQ(r.gate.seed, kGateSeed);
  EXPECT_GT(r.ceilings.read_tbs, 0);
  EXPECT_GT(r.ceilings.copy_tbs, 0);
  ASSERT_EQ(r.rows.size(), 2u);
  const auto peers = shape_set("peers");
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    EXPECT_TRUE(row.ok()) << row.status;
    EXPECT_EQ(row.shape.label(), peers.value()[i].label());
    EXPECT_EQ(row.variant, "safe");
    EXPECT_EQ(row.time.samples, 3);
    EXPECT_LE(row.time.min_us, row.time.median_us);
    EXPECT_LE(row.time.median_us, row.time.max_us);
    EXPECT_GT(row.time.min_us, 0);
    EXPECT_GT(row.bytes.all, row.bytes.kv);
    EXPECT_NEAR(row.kv_tbs, row.bytes.kv / (row.time.median_us * 1e-6) / 1e12, 1e-9 * row.kv_tbs);
    EXPECT_NE(c.out.find(row.shape.label()), std::string::npos);  // the table has the row
  }
  // JSON round trip is lossless for what compare() reads.
  EXPECT_EQ(to_json(from_json(to_json(r)).value()), to_json(r));
  // Provenance: the program records its suite version; the host has no GPU driver or runtime.
  EXPECT_NE(r.suite_version.find("git "), std::string::npos) << r.suite_version;
  EXPECT_EQ(r.driver, "");
  EXPECT_EQ(r.runtime, "");
  EXPECT_NE(c.out.find("provenance: driver -; -; pacts " + r.suite_version), std::string::npos)
      << c.out;

  const std::string csv = read(dir / "r.csv");
  std::istringstream lines(csv);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(lines, line)) rows.push_back(csv_fields(line));
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) EXPECT_EQ(row.size(), rows[0].size());
  EXPECT_EQ(rows[0][11], "layout");
  EXPECT_EQ(rows[1][11], "nhd");
  EXPECT_EQ(rows[0][15], "label");
  EXPECT_EQ(rows[1][15], r.rows[0].shape.label());
  EXPECT_EQ(rows[1][17], "ok");

  int polylines = 0;
  const std::string svg = read(dir / "r.svg");
  EXPECT_TRUE(well_formed_svg(svg, polylines)) << svg;
  // B1 and B8 (Hq8/Hkv8 D128 bf16 page 16): a line each, the legend naming batch and heads.
  EXPECT_EQ(polylines, 2);
  EXPECT_NE(svg.find(">B1 Hq8/Hkv8 D128 bf16 p16<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">B8 Hq8/Hkv8 D128 bf16 p16<"), std::string::npos) << svg;
  // Readable: the host's rows in GB/s or MB/s (not 0.0007 TB/s), round value ticks, a context tick
  // only where a context was timed, and the suite version at the foot.
  EXPECT_TRUE(svg.find("GB/s (K/V bytes)") != std::string::npos ||
              svg.find("MB/s (K/V bytes)") != std::string::npos) << svg;
  std::vector<double> ticks;
  for (size_t at = 0; (at = svg.find("class=\"ytick\"", at)) != std::string::npos; ++at)
    ticks.push_back(std::stod(svg.substr(svg.find('>', at) + 1)));
  ASSERT_GE(ticks.size(), 3u);
  const double step = ticks[1] - ticks[0];
  for (size_t i = 0; i < ticks.size(); ++i) {
    EXPECT_NEAR(ticks[i], static_cast<double>(i) * step, step * 1e-9) << svg;
    const double m = step / std::pow(10.0, std::floor(std::log10(step)));  // 1, 2, 2.5 or 5
    EXPECT_TRUE(std::fabs(m - 1) < 1e-9 || std::fabs(m - 2) < 1e-9 || std::fabs(m - 2.5) < 1e-9 ||
                std::fabs(m - 5) < 1e-9) << step;
  }
  std::set<std::string> timed, ticked;
  for (const Row& row : r.rows) timed.insert(std::to_string(row.shape.context));
  for (size_t at = 0; (at = svg.find("class=\"xtick\"", at)) != std::string::npos; ++at) {
    const size_t b = svg.find('>', at) + 1;
    ticked.insert(svg.substr(b, svg.find('<', b) - b));
  }
  EXPECT_EQ(ticked, timed);
  EXPECT_NE(svg.find("pacts " + r.suite_version), std::string::npos);
}

TEST(Baseline, FlagsAPlantedChangeAndNotAnIdenticalRun) {
  const std::filesystem::path dir = fresh_dir("baseline");
  const auto target = parse_target("host");
  ASSERT_TRUE(target);
  Options o = quick(dir);
  o.repeats = 5;
  const auto run = run_set("peers", target.value(), o);
  ASSERT_TRUE(run) << run.status().to_string();
  const Report& r = run.value();
  ASSERT_EQ(r.rows.size(), 2u);

  const Comparison same = compare(r, r);
  EXPECT_EQ(same.compared, 2);
  EXPECT_TRUE(same.changes.empty()) << to_text(same);

  // Planted: the second row 40% slower in every sample (the intervals separate).
  Report slower = r;
  Row& row = slower.rows[1];
  const double spread = row.time.max_us / row.time.min_us;
  const double factor = std::max(1.4, spread * 1.1);
  row.time.median_us *= factor, row.time.min_us *= factor, row.time.max_us *= factor;
  const Comparison planted = compare(r, slower);
  ASSERT_EQ(planted.changes.size(), 1u) << to_text(planted);
  EXPECT_EQ(planted.changes[0].label, r.rows[1].shape.label());
  EXPECT_GT(planted.changes[0].percent, 0);
  EXPECT_NE(to_text(planted).find("SLOWER"), std::string::npos);

  // Within the noise: the median moves 30% but the intervals still overlap: not flagged.
  Report noisy = r;
  noisy.rows[0].time.median_us *= 1.3;
  noisy.rows[0].time.min_us = r.rows[0].time.min_us;
  noisy.rows[0].time.max_us = std::max(noisy.rows[0].time.median_us, r.rows[0].time.max_us);
  EXPECT_TRUE(compare(r, noisy).changes.empty());

  // The command with --baseline: a baseline 100x faster than anything measured is flagged, exit 3.
  Report fast = r;
  for (Row& x : fast.rows) x.time.median_us /= 100, x.time.min_us /= 100, x.time.max_us /= 100;
  {
    std::ofstream f(dir / "fast.json");
    f << to_json(fast);
  }
  const Command c = run_bench("--backend host --set peers --limit 2 --gate-cases 1 --repeats 3 "
                              "--warmup 1 --seed 7 --threads 2 --ceiling-mib 8 --case-dir " +
                                  (dir / "failures").string() + " --baseline " +
                                  (dir / "fast.json").string(),
                              dir);
  EXPECT_EQ(c.status, 3) << c.err << c.out;
  EXPECT_NE(c.out.find("2 rows compared, 2 changed beyond the noise"), std::string::npos) << c.out;
}

// The formats set's vLLM shapes of three chunk widths (e2m1: 16 bytes; fp8: 16; bf16: 8
// elements), reduced to B 2, ctx 300 (the 2-core CI machine), through run_set's own path: the
// gate on the host backend, then the host timer, the bytes model and a row per shape.
TEST(Formats, ReducedVllmShapesRunEndToEndOnTheHost) {
  const std::filesystem::path dir = fresh_dir("formats_host");
  std::printf("gate seed %llu, data seed %llu\n", static_cast<unsigned long long>(kGateSeed),
              static_cast<unsigned long long>(kDataSeed));
  const auto set = shape_set("formats");
  ASSERT_TRUE(set);
  std::vector<Shape> reduced;
  for (Shape s : set.value()) {
    if (s.layout != KvLayout::kVllm) continue;
    const bool wanted = s.kv_format == PACTS_FORMAT_E2M1 || s.kv_format == PACTS_FORMAT_BF16 ||
                        (s.kv_format == PACTS_FORMAT_E4M3FN &&
                         s.kv_scale_mode == PACTS_SCALE_PER_TOKEN);
    if (!wanted) continue;
    s.batch = 2;
    s.context = 300;
    reduced.push_back(s);
  }
  ASSERT_EQ(reduced.size(), 3u);
  const auto target = parse_target("host");
  ASSERT_TRUE(target);
  const std::unique_ptr<conformance::Backend> backend = conformance::make_backend("host");
  ASSERT_TRUE(backend);
  Options o = quick(dir);
  o.limit = 0;
  const auto report = run_shapes("formats", reduced, target.value(), *backend, o);
  ASSERT_TRUE(report) << report.status().to_string();
  const Report& r = report.value();
  EXPECT_EQ(r.set, "formats");
  EXPECT_TRUE(r.gate.ran && r.gate.passed);
  ASSERT_EQ(r.rows.size(), reduced.size());
  const std::string table = to_table(r);
  std::printf("%s", table.c_str());
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    EXPECT_TRUE(row.ok()) << row.shape.label() << ": " << row.status;
    EXPECT_EQ(row.shape.label(), reduced[i].label());
    EXPECT_EQ(row.shape.layout, KvLayout::kVllm);
    EXPECT_NE(row.shape.label().find(" vllm"), std::string::npos) << row.shape.label();
    EXPECT_EQ(row.time.samples, o.repeats);
    EXPECT_GT(row.time.min_us, 0);
    EXPECT_FALSE(row.plan.empty());
    // K and V: 2 x 300 tokens x 8 heads x one row each.
    EXPECT_EQ(row.bytes.kv, 2u * 2 * 300 * 8 * row_bytes(row.shape.kv_format, 128))
        << row.shape.label();
    EXPECT_NE(table.find(row.shape.label()), std::string::npos);
  }
  EXPECT_NE(to_csv(r).find(",vllm,"), std::string::npos);
}

TEST(Report, LayoutIsWrittenAndReadBackAndDefaultsToNhd) {
  const auto set = shape_set("formats");
  ASSERT_TRUE(set);
  Report r;
  r.set = "formats";
  for (const Shape& s : {set.value()[0], set.value()[1]}) {
    Row row;
    row.shape = s;
    row.variant = "safe";
    row.status = "ok";
    row.time = {10, 9, 11, 3};
    r.rows.push_back(row);
  }
  ASSERT_EQ(r.rows[0].shape.layout, KvLayout::kNhd);
  ASSERT_EQ(r.rows[1].shape.layout, KvLayout::kVllm);
  const std::string text = to_json(r);
  const auto back = from_json(text);
  ASSERT_TRUE(back) << back.status().to_string();
  ASSERT_EQ(back.value().rows.size(), 2u);
  EXPECT_EQ(back.value().rows[0].shape.layout, KvLayout::kNhd);
  EXPECT_EQ(back.value().rows[1].shape.layout, KvLayout::kVllm);
  EXPECT_EQ(back.value().rows[1].shape.label(), r.rows[1].shape.label());
  EXPECT_EQ(compare(r, back.value()).compared, 2);

  // A report written before layouts existed: its rows have no "layout" and read as NHD.
  std::string old;
  std::istringstream lines(text);
  int dropped = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"layout\"") != std::string::npos) {
      ++dropped;
      continue;
    }
    old += line + "\n";
  }
  ASSERT_EQ(dropped, 2);
  const auto older = from_json(old);
  ASSERT_TRUE(older) << older.status().to_string();
  for (const Row& row : older.value().rows) EXPECT_EQ(row.shape.layout, KvLayout::kNhd);

  // An unknown layout is refused by name.
  std::string bad = text;
  const size_t at = bad.find("\"vllm\"");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 6, "\"hnd\"");
  const auto refused = from_json(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), spec::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("layout 'hnd'"), std::string::npos)
      << refused.status().to_string();
}

TEST(Report, ProvenanceIsWrittenAndReadBackAndMayBeAbsent) {
  Report r;
  r.set = "peers";
  r.driver = "580.159.04, driver API 13000";
  r.runtime = "runtime 13000";
  r.suite_version = "0.1.0 (git abc1234)";
  const std::string text = to_json(r);
  const auto back = from_json(text);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back.value().driver, r.driver);
  EXPECT_EQ(back.value().runtime, r.runtime);
  EXPECT_EQ(back.value().suite_version, r.suite_version);
  // A report of a version that wrote no provenance still reads (a stored baseline).
  std::string old;
  std::istringstream lines(text);
  int dropped = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"driver\"") != std::string::npos ||
        line.find("\"runtime\"") != std::string::npos ||
        line.find("\"suite_version\"") != std::string::npos) {
      ++dropped;
      continue;
    }
    old += line + "\n";
  }
  ASSERT_EQ(dropped, 3);
  const auto older = from_json(old);
  ASSERT_TRUE(older) << older.status().to_string();
  EXPECT_EQ(older.value().driver, "");
}

TEST(Command, ForcedPartitionsReachThePlan) {
  const std::filesystem::path dir = fresh_dir("forced_partitions");
  const std::string json = (dir / "r.json").string();
  // B1 ctx1024 G1 p16: --partitions 7 must reach the timed plan; the automatic one is not 7.
  for (const char* parts : {"0", "7"}) {
    const Command c = run_bench(std::string("--backend host --set peers --limit 1 --gate-cases 1 "
                                            "--repeats 1 --warmup 0 --threads 2 --ceiling-mib 8 "
                                            "--partitions ") +
                                    parts + " --json " + json + " --case-dir " +
                                    (dir / "failures").string(),
                                dir);
    ASSERT_EQ(c.status, 0) << c.err << c.out;
    const auto report = from_json(read(json));
    ASSERT_TRUE(report) << report.status().to_string();
    ASSERT_EQ(report.value().rows.size(), 1u);
    const std::string& plan = report.value().rows[0].plan;
    if (std::string(parts) == "7")
      EXPECT_NE(plan.find(" x7"), std::string::npos) << plan;
    else
      EXPECT_EQ(plan.find(" x7"), std::string::npos) << plan;  // the automatic plan is not 7
  }
}

// --shape: a label as the reports print it names one shape; parse_shape gives back every field
// of every set's shapes from their labels (the model's name aside), and refuses what is not a
// shape, naming the word.
TEST(ShapeSets, EveryLabelParsesBackToItsShape) {
  int shapes = 0;
  for (const std::string& set : set_names()) {
    const auto all = shape_set(set);
    ASSERT_TRUE(all) << set;
    for (const Shape& want : all.value()) {
      const auto got = parse_shape(want.label());
      ASSERT_TRUE(got) << want.label() << ": " << got.status().to_string();
      const Shape& g = got.value();
      EXPECT_EQ(g.set, "shape");
      EXPECT_EQ(std::tie(g.batch, g.context, g.q_len, g.num_q_heads, g.num_kv_heads, g.head_dim,
                         g.page_size, g.kv_format, g.kv_scale_mode, g.layout, g.sinks, g.window,
                         g.ragged),
                std::tie(want.batch, want.context, want.q_len, want.num_q_heads,
                         want.num_kv_heads, want.head_dim, want.page_size, want.kv_format,
                         want.kv_scale_mode, want.layout, want.sinks, want.window, want.ragged))
          << want.label();
      ++shapes;
    }
  }
  EXPECT_GT(shapes, 300);
  for (const auto& [label, word] : std::vector<std::pair<std::string, std::string>>{
           {"B32 ctx16384 L1 Hq64 Hkv8 D128 p64 bf17", "bf17"},
           {"B32 ctx16384 L1 Hq64 Hkv8 D128 p64 e4m3fn/block", "e4m3fn/block"},
           {"B0 ctx16384 L1 Hq64 Hkv8 D128 p64 bf16", "B0"},
           {"B32 B8 ctx16384 L1 Hq64 Hkv8 D128 p64 bf16", "B8"},
           {"B32 ctx99999999999 L1 Hq64 Hkv8 D128 p64 bf16", "ctx99999999999"},
           {"B32 ctx16384 L1 Hq64 Hkv8 D128 bf16", "p<n>"},
           {"B32 ctx16384 L1 Hq64 Hkv8 D128 p64", "KV format"}}) {
    const auto r = parse_shape(label);
    ASSERT_FALSE(r) << label;
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument) << label;
    EXPECT_NE(r.status().message().find(word), std::string::npos) << r.status().to_string();
  }
}

TEST(Command, OneShapeIsTimedBehindTheGate) {
  const std::filesystem::path dir = fresh_dir("one_shape");
  const std::string json = (dir / "r.json").string();
  const Command c = run_bench("--backend host --shape \"B2 ctx300 L1 Hq8 Hkv2 D64 p16 fp16\" "
                              "--gate-cases 1 --repeats 1 --warmup 0 --threads 2 --ceiling-mib 8 "
                              "--partitions 3 --json " + json + " --case-dir " +
                                  (dir / "failures").string(),
                              dir);
  ASSERT_EQ(c.status, 0) << c.err << c.out;
  const auto report = from_json(read(json));
  ASSERT_TRUE(report) << report.status().to_string();
  EXPECT_TRUE(report.value().gate.passed);
  EXPECT_EQ(report.value().set, "shape");
  ASSERT_EQ(report.value().rows.size(), 1u);
  EXPECT_EQ(report.value().rows[0].shape.label(), "B2 ctx300 L1 Hq8 Hkv2 D64 p16 fp16");
  EXPECT_NE(report.value().rows[0].plan.find(" x3"), std::string::npos) << report.value().rows[0].plan;
  const Command bad = run_bench("--backend host --shape \"B2 ctx300 Hq8\" --gate-cases 1", dir);
  EXPECT_EQ(bad.status, 2);  // a usage error
  EXPECT_NE(bad.err.find("no Hkv<n>"), std::string::npos) << bad.err;
}

// Plugins timed beside the target (--backend repeated): each gated on its own, timed on the same
// inputs by the same method, its rows named after it, the side-by-side table at the end. A peer
// that fails its gate (the drop-sinks plugin: PACTS-ACC-1) is still timed and marked; a peer
// whose timed call writes nothing gets an error row, never a time (exit status 4); a plugin
// without timed calls is refused before anything is timed.
TEST(Command, PluginsAreGatedAndTimedBesideTheTarget) {
  const std::filesystem::path dir = fresh_dir("beside");
  const std::string common = " --set peers --limit 1 --gate-cases 3 --repeats 3 --warmup 1 "
                             "--seed 7 --threads 2 --ceiling-mib 8 --case-dir " +
                             (dir / "failures").string();
  const Command c = run_bench(std::string("--backend host --backend lib:") + PACTS_PLUGIN_GOOD +
                                  " --backend lib:" + PACTS_PLUGIN_DROP_SINKS + common +
                                  " --json " + (dir / "r.json").string(),
                              dir);
  ASSERT_EQ(c.status, 0) << c.err << c.out;
  std::printf("%s", c.out.c_str());
  const auto report = from_json(read(dir / "r.json"));
  ASSERT_TRUE(report) << report.status().to_string();
  const Report& r = report.value();
  ASSERT_EQ(r.beside.size(), 2u);
  EXPECT_EQ(r.beside[0].variant, "peer:host-plugin");
  EXPECT_TRUE(r.beside[0].gate.ran && r.beside[0].gate.passed);
  EXPECT_EQ(r.beside[1].variant, "peer:host-plugin-drop-sinks");
  EXPECT_FALSE(r.beside[1].gate.passed);
  ASSERT_FALSE(r.beside[1].gate.failures.empty());
  EXPECT_EQ(r.beside[1].gate.failures[0].id, "PACTS-ACC-1");
  bool noted = false;
  for (const std::string& n : r.notes)
    noted |= n.find("peer:host-plugin-drop-sinks") != std::string::npos &&
             n.find("failed the gate") != std::string::npos;
  EXPECT_TRUE(noted);
  ASSERT_EQ(r.rows.size(), 3u);
  for (const Row& row : r.rows) {
    EXPECT_TRUE(row.ok()) << row.variant << ": " << row.status;
    EXPECT_EQ(row.time.samples, 3);
    EXPECT_EQ(row.shape.label(), r.rows[0].shape.label());
  }
  EXPECT_EQ(r.rows[0].variant, "safe");
  EXPECT_EQ(r.rows[1].variant, "peer:host-plugin");
  // The same kernels through the ABI: the same plan.
  EXPECT_EQ(r.rows[1].plan, r.rows[0].plan);
  const std::vector<SideBySide> sbs = side_by_side(r);
  ASSERT_EQ(sbs.size(), 1u);
  ASSERT_EQ(sbs[0].ratios.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_DOUBLE_EQ(sbs[0].ratios[i], r.rows[1 + i].time.median_us / r.rows[0].time.median_us);
  EXPECT_NE(c.out.find("side by side"), std::string::npos);
  EXPECT_NE(c.out.find("peer:host-plugin: geomean ratio"), std::string::npos);

  const Command noop = run_bench(std::string("--backend host --backend lib:") +
                                     PACTS_PLUGIN_TIMED_NOOP + common,
                                 dir);
  EXPECT_EQ(noop.status, 4) << noop.err << noop.out;
  EXPECT_NE(noop.out.find("non-finite output"), std::string::npos) << noop.out;

  const Command bad = run_bench("--backend host --backend hip" + common, dir);
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("beside backend 'hip': accepted lib:PATH"), std::string::npos) << bad.err;
}

// Children of the process backend timed beside the target (spec/process.md §6): gated like any
// backend, prepared once on the same inputs (host memory), each sample one timed call the child
// measures, its rows and side-by-side ratios like a plugin's. A child whose prepared call writes
// NaN gets an error row (exit status 4), one that answers a time with a negative figure an error
// row naming the field; a child that declares no timed calls is refused before anything is timed.
TEST(Command, ChildrenAreGatedAndTimedBesideTheTarget) {
  const std::filesystem::path dir = fresh_dir("beside_child");
  const std::string common = " --set peers --limit 1 --gate-cases 2 --repeats 3 --warmup 1 "
                             "--seed 7 --threads 2 --ceiling-mib 8 --case-dir " +
                             (dir / "failures").string();
  const std::string child = std::string("\"exec:") + PACTS_CHILD_EXE + " --backend host\"";
  const Command c = run_bench("--backend host --backend " + child + common + " --json " +
                                  (dir / "r.json").string(),
                              dir);
  ASSERT_EQ(c.status, 0) << c.err << c.out;
  const auto report = from_json(read(dir / "r.json"));
  ASSERT_TRUE(report) << report.status().to_string();
  const Report& r = report.value();
  ASSERT_EQ(r.beside.size(), 1u);
  EXPECT_EQ(r.beside[0].variant, "peer:host");
  EXPECT_TRUE(r.beside[0].gate.ran && r.beside[0].gate.passed);
  ASSERT_EQ(r.rows.size(), 2u);
  for (const Row& row : r.rows) {
    EXPECT_TRUE(row.ok()) << row.variant << ": " << row.status;
    EXPECT_EQ(row.time.samples, 3);
    EXPECT_GT(row.time.min_us, 0.0);
  }
  EXPECT_EQ(r.rows[1].variant, "peer:host");
  // The same kernels in the child: the same plan, and the child says how it timed them.
  EXPECT_EQ(r.rows[1].plan.rfind(r.rows[0].plan.substr(0, r.rows[0].plan.find(' ')), 0), 0u)
      << r.rows[1].plan;
  EXPECT_NE(r.rows[1].plan.find("[timed by the child: host clock"), std::string::npos) << r.rows[1].plan;
  const std::vector<SideBySide> sbs = side_by_side(r);
  ASSERT_EQ(sbs.size(), 1u);
  ASSERT_EQ(sbs[0].ratios.size(), 1u);
  EXPECT_DOUBLE_EQ(sbs[0].ratios[0], r.rows[1].time.median_us / r.rows[0].time.median_us);

  const auto planted = [](const std::string& fault) {
    return std::string("\"exec:") + PACTS_PLANTED_CHILD_EXE + " --fault " + fault +
           " --on 1000000 --backend host\"";
  };
  const Command nan = run_bench("--backend host --backend " + planted("time-nan") + common, dir);
  EXPECT_EQ(nan.status, 4) << nan.err << nan.out;
  EXPECT_NE(nan.out.find("non-finite output"), std::string::npos) << nan.out;
  const Command garbage = run_bench("--backend host --backend " + planted("time-garbage") + common, dir);
  EXPECT_EQ(garbage.status, 4) << garbage.err << garbage.out;
  EXPECT_NE(garbage.out.find("answered garbage: times_us"), std::string::npos) << garbage.out;

  const Command untimed = run_bench(std::string("--backend host --backend \"exec:") + PACTS_CHILD_EXE +
                                        " --backend reference\"" + common,
                                    dir);
  EXPECT_NE(untimed.status, 0);
  EXPECT_NE((untimed.out + untimed.err).find("declares no timed calls (spec/process.md §6)"),
            std::string::npos)
      << untimed.err << untimed.out;
}

TEST(Options, BadValuesAreRefusedByName) {
  const std::filesystem::path dir = fresh_dir("options");
  const auto host = parse_target("host");
  Options o = quick(dir);
  o.gate_cases = 0;  // the refusals come before the gate
  o.repeats = 0;
  auto r = run_set("peers", host.value(), o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("repeats 0"), std::string::npos) << r.status().to_string();
  const auto hip = parse_target("hip:0");
  o.repeats = 10;
  r = run_set("peers", hip.value(), o);  // GPU medians take at least 20 samples
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("repeats 10"), std::string::npos) << r.status().to_string();
  if (conformance::find_backend("hip") == nullptr) {  // a build that registers no hip backend
    o.repeats = 20;
    r = run_set("peers", hip.value(), o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().code(), spec::Code::kNotSupported) << r.status().to_string();
  }
  o.repeats = 3;
  o.partitions = -2;
  r = run_set("peers", host.value(), o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("partitions -2"), std::string::npos)
      << r.status().to_string();
  o.partitions = 0;
  r = run_set("nope", host.value(), o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("'nope'"), std::string::npos);

  // The command never skips the gate.
  const Command c = run_bench("--backend host --set peers --gate-cases 0", dir);
  EXPECT_EQ(c.status, 2);
  EXPECT_NE(c.err.find("--gate-cases 0"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace pacts::bench
