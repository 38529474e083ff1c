// Case files and the exchange format (spec/case_files.md): what a saved failure or an outside
// tool's case must survive. A case file that loses one bit of a seed, a field that is silently
// ignored, or an .npy that NumPy reads differently would make a failure impossible to replay.
#include <pacts/conformance/case_data.h>
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/exchange.h>
#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/conformance/mustpass.h>
#include <pacts/conformance/random_case.h>
#include <pacts/conformance/rng.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("pacts_case_file_test_" + std::string(info->test_suite_name()) + "_" + info->name() +
             "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// ---- equality of everything a file carries -------------------------------------------------

void expect_same_shape(const CaseShape& a, const CaseShape& b) {
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.q_len, b.q_len);
  EXPECT_EQ(a.num_q_heads, b.num_q_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.page_size, b.page_size);
  EXPECT_EQ(a.q_format, b.q_format);
  EXPECT_EQ(a.kv_format, b.kv_format);
  EXPECT_EQ(a.out_format, b.out_format);
  EXPECT_EQ(a.k_scale_mode, b.k_scale_mode);
  EXPECT_EQ(a.v_scale_mode, b.v_scale_mode);
  EXPECT_EQ(a.nibble_order, b.nibble_order);
  EXPECT_EQ(a.k_layout, b.k_layout);
  EXPECT_EQ(a.v_layout, b.v_layout);
  EXPECT_EQ(std::memcmp(&a.softcap, &b.softcap, 4), 0) << a.softcap << " vs " << b.softcap;
  EXPECT_EQ(a.window, b.window);
  EXPECT_EQ(a.sinks, b.sinks);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.max_context, b.max_context);
  EXPECT_EQ(a.contexts, b.contexts);
  EXPECT_EQ(a.extra_pages, b.extra_pages);
  EXPECT_EQ(a.q_gap, b.q_gap);
  EXPECT_EQ(a.out_gap, b.out_gap);
  EXPECT_EQ(a.q_head_major, b.q_head_major);
  EXPECT_EQ(a.out_head_major, b.out_head_major);
  EXPECT_EQ(a.bt_extra_cols, b.bt_extra_cols);
  EXPECT_EQ(a.share_pages, b.share_pages);
  EXPECT_EQ(a.low_pages, b.low_pages);
  EXPECT_EQ(a.k_e8m0_lo, b.k_e8m0_lo);
  EXPECT_EQ(a.k_e8m0_hi, b.k_e8m0_hi);
  EXPECT_EQ(a.v_e8m0_lo, b.v_e8m0_lo);
  EXPECT_EQ(a.v_e8m0_hi, b.v_e8m0_hi);
  EXPECT_EQ(a.q_exponent, b.q_exponent);
}

void expect_same_file(const CaseFile& a, const CaseFile& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.property, b.property);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.run_seed, b.run_seed);
  EXPECT_EQ(a.detail, b.detail);
  EXPECT_EQ(a.hint.kind, b.hint.kind);
  EXPECT_EQ(a.hint.value, b.hint.value);
  EXPECT_EQ(a.spec.seed, b.spec.seed);
  expect_same_shape(a.spec.shape, b.spec.shape);
  ASSERT_EQ(a.spec.overrides.size(), b.spec.overrides.size());
  for (size_t i = 0; i < a.spec.overrides.size(); ++i) {
    const Override &x = a.spec.overrides[i], &y = b.spec.overrides[i];
    EXPECT_EQ(x.tensor, y.tensor) << "override " << i;
    EXPECT_EQ(x.seq, y.seq) << "override " << i;
    EXPECT_EQ(x.pos, y.pos) << "override " << i;
    EXPECT_EQ(x.head, y.head) << "override " << i;
    EXPECT_EQ(x.dim, y.dim) << "override " << i;
    EXPECT_EQ(x.code, y.code) << "override " << i;
  }
}

// Every field of the descriptor, named (padding bytes make memcmp of the struct meaningless).
void expect_same_problem(const pacts_problem& a, const pacts_problem& b) {
  EXPECT_EQ(a.abi_version, b.abi_version);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.q_len, b.q_len);
  EXPECT_EQ(a.num_q_heads, b.num_q_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.page_size, b.page_size);
  EXPECT_EQ(a.num_pages, b.num_pages);
  EXPECT_EQ(a.max_pages_per_seq, b.max_pages_per_seq);
  EXPECT_EQ(a.q_format, b.q_format);
  EXPECT_EQ(a.kv_format, b.kv_format);
  EXPECT_EQ(a.out_format, b.out_format);
  EXPECT_EQ(a.k_scale_mode, b.k_scale_mode);
  EXPECT_EQ(a.v_scale_mode, b.v_scale_mode);
  EXPECT_EQ(a.nibble_order, b.nibble_order);
  for (auto f : {&pacts_problem::softmax_scale, &pacts_problem::q_scale, &pacts_problem::k_scale,
                 &pacts_problem::v_scale, &pacts_problem::softcap})
    EXPECT_EQ(std::memcmp(&(a.*f), &(b.*f), 4), 0) << a.*f << " vs " << b.*f;
  EXPECT_EQ(a.window, b.window);
  EXPECT_EQ(a.has_sinks, b.has_sinks);
  EXPECT_EQ(a.want_lse, b.want_lse);
  for (auto l : {&pacts_problem::q_layout, &pacts_problem::out_layout, &pacts_problem::lse_layout}) {
    EXPECT_EQ((a.*l).s_batch, (b.*l).s_batch);
    EXPECT_EQ((a.*l).s_tok, (b.*l).s_tok);
    EXPECT_EQ((a.*l).s_head, (b.*l).s_head);
  }
  for (auto l : {&pacts_problem::k_layout, &pacts_problem::v_layout}) {
    EXPECT_EQ((a.*l).s_page, (b.*l).s_page);
    EXPECT_EQ((a.*l).s_head, (b.*l).s_head);
    EXPECT_EQ((a.*l).s_tok, (b.*l).s_tok);
    EXPECT_EQ((a.*l).s_chunk, (b.*l).s_chunk);
    EXPECT_EQ((a.*l).chunk, (b.*l).chunk);
    EXPECT_EQ((a.*l).reserved0, (b.*l).reserved0);
  }
  for (auto l : {&pacts_problem::k_scale_layout, &pacts_problem::v_scale_layout}) {
    EXPECT_EQ((a.*l).s_page, (b.*l).s_page);
    EXPECT_EQ((a.*l).s_head, (b.*l).s_head);
    EXPECT_EQ((a.*l).s_tok, (b.*l).s_tok);
    EXPECT_EQ((a.*l).s_block, (b.*l).s_block);
  }
  EXPECT_EQ(a.block_table_stride, b.block_table_stride);
}

void expect_same_case(const CaseData& a, const CaseData& b) {
  expect_same_problem(a.problem, b.problem);
  EXPECT_TRUE(a.q == b.q) << "q differs";
  EXPECT_TRUE(a.k == b.k) << "k differs";
  EXPECT_TRUE(a.v == b.v) << "v differs";
  EXPECT_TRUE(a.k_scale == b.k_scale) << "k_scale differs";
  EXPECT_TRUE(a.v_scale == b.v_scale) << "v_scale differs";
  EXPECT_TRUE(a.sinks == b.sinks) << "sinks differ";
  EXPECT_TRUE(a.out == b.out) << "out differs";
  EXPECT_TRUE(a.lse == b.lse) << "lse differs";
  EXPECT_TRUE(a.block_table == b.block_table) << "block_table differs";
  EXPECT_TRUE(a.context_lens == b.context_lens) << "context_lens differ";
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// A file with every field away from its default: MXFP4 (so the e8m0 ranges matter), explicit
// contexts, gaps, shared pages, soft-cap with a fractional binary32, a 64-bit seed whose low
// bits a double would lose, and one override per tensor.
CaseFile rich_file() {
  CaseFile f;
  f.property = "PACTS-POISON-1";
  f.backend = "hip:0";
  f.device = "NVIDIA H200 (sm_90) \"quoted\" \\ backslash, ünïcode";
  f.run_seed = 0xFFFFFFFFFFFFFFFFull;
  f.detail = "out[b 0, i 0, h 1, d 3] = nan, reference 0.25\nsecond line";
  f.hint = PlanHint::partitions(3);
  f.spec.seed = 0x9E3779B97F4A7C15ull;  // > 2^53 and odd: not a double
  CaseShape& s = f.spec.shape;
  s.batch = 3;
  s.q_len = 2;
  s.num_q_heads = 8;
  s.num_kv_heads = 2;
  s.head_dim = 128;
  s.page_size = 32;
  s.q_format = PACTS_FORMAT_E4M3FNUZ;
  s.kv_format = PACTS_FORMAT_E2M1;
  s.out_format = PACTS_FORMAT_FP16;
  s.k_scale_mode = PACTS_SCALE_MX_BLOCK;
  s.v_scale_mode = PACTS_SCALE_MX_BLOCK;
  s.nibble_order = PACTS_NIBBLE_HIGH_FIRST;
  s.k_layout = PoolLayout::kXPackedK;
  s.v_layout = PoolLayout::kDimMajorV;
  s.softcap = 30.3f;
  s.window = 7;
  s.sinks = true;
  s.lse = false;
  s.max_context = 99;
  s.contexts = {33, 0, 65};
  s.extra_pages = 2;
  s.q_gap = 8;
  s.out_gap = 64;
  s.bt_extra_cols = 2;
  s.share_pages = true;
  s.k_e8m0_lo = 240;
  s.k_e8m0_hi = 250;
  s.v_e8m0_lo = 1;
  s.v_e8m0_hi = 101;
  s.q_exponent = -125;
  using T = Override::Tensor;
  f.spec.overrides = {{T::kQ, 1, 1, 7, 127, 0x80},
                      {T::kK, 0, 32, 1, 5, 0x7},
                      {T::kV, 2, 64, 0, 0, 0xF},
                      {T::kKScale, 0, 0, 1, 3, 0xFE},
                      {T::kVScale, 2, 1, 0, 2, 0x00},
                      {T::kSink, 0, 0, 5, 0, bits(-INFINITY)}};
  return f;
}

// Case file names from long backend names (a plugin's path, a child's command line) fit NAME_MAX
// (255 bytes) and stay distinct; short ones are left as they are.
TEST(CaseFileName, LongStemsAreCutWithAHash) {
  EXPECT_EQ(fitted_file_name("PACTS_ACC_1-host", ".json"), "PACTS_ACC_1-host.json");
  const std::string a = "PACTS_ACC_1-exec_python3_" + std::string(400, 'x') + "a";
  const std::string b = "PACTS_ACC_1-exec_python3_" + std::string(400, 'x') + "b";
  const std::string fa = fitted_file_name(a, ".json"), fb = fitted_file_name(b, ".json");
  EXPECT_LE(fa.size(), 255u);
  EXPECT_LE(fb.size(), 255u);
  EXPECT_TRUE(fa.ends_with(".json"));
  EXPECT_EQ(fa.substr(0, kMaxFileStem), a.substr(0, kMaxFileStem));
  EXPECT_NE(fa, fb);
  EXPECT_EQ(fa, fitted_file_name(a, ".json"));
  const std::string edge(kMaxFileStem, 'y');
  EXPECT_EQ(fitted_file_name(edge, ".json"), edge + ".json");
  EXPECT_NE(fitted_file_name(edge + "z", ".json"), edge + "z.json");
}

TEST(CaseFileJson, RoundTripsEveryField) {
  const CaseFile f = rich_file();
  const std::string text = to_json_text(f);
  auto back = from_json_text(text);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string() << "\n" << text;
  expect_same_file(f, back.value());
  // Writing what was read gives the same text: nothing is normalised away.
  EXPECT_EQ(to_json_text(back.value()), text);
}

TEST(CaseFileJson, RegeneratesIdenticalBytes) {
  const CaseFile f = rich_file();
  auto back = from_json_text(to_json_text(f));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const CaseData a = f.spec.build(), b = back.value().spec.build();
  ASSERT_TRUE(spec::validate_problem(a.problem).is_ok());
  expect_same_case(a, b);
}

TEST(CaseFileJson, SeedsAreDecimalStrings) {
  const CaseFile f = rich_file();
  const Json j = Json::parse(to_json_text(f));
  EXPECT_EQ(j["seed"], "11400714819323198485");
  EXPECT_EQ(j["run_seed"], "18446744073709551615");
  // A double holds neither: the string is what keeps them.
  EXPECT_NE(static_cast<uint64_t>(static_cast<double>(f.spec.seed)), f.spec.seed);
}

TEST(CaseFileJson, RoundTripsRandomShapesAndGeneratedCases) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CaseFile f;
    f.spec.shape = random_shape(seed);
    f.spec.seed = seed * 0x9E3779B97F4A7C15ull;
    f.run_seed = seed;
    if (seed % 2 == 0) f.hint = PlanHint::partition_size(static_cast<int32_t>(seed * 16));
    auto back = from_json_text(to_json_text(f));
    ASSERT_TRUE(back.is_ok()) << "seed " << seed << ": " << back.status().to_string();
    expect_same_file(f, back.value());
  }
  // The generator's own cases (what the runner saves) must all be writable and readable.
  Rng rng(20261129);
  for (int i = 0; i < 40; ++i) {
    const CaseSpec spec = gen_case()(rc::Random(rng.next()), 50).value();
    CaseFile f;
    f.spec = spec;
    auto back = from_json_text(to_json_text(f));
    ASSERT_TRUE(back.is_ok()) << describe(spec) << ": " << back.status().to_string();
    expect_same_file(f, back.value());
  }
}

// q_order / out_order: optional keys, written only for head-major rows (spec/case_files.md §2.3).
TEST(CaseFileJson, RowOrdersAreOptionalAndRoundTrip) {
  CaseFile f = rich_file();
  const Json plain = Json::parse(to_json_text(f));
  EXPECT_FALSE(plain["shape"].contains("q_order"));
  EXPECT_FALSE(plain["shape"].contains("out_order"));
  f.spec.shape.q_head_major = true;
  f.spec.shape.out_head_major = true;
  const Json j = Json::parse(to_json_text(f));
  EXPECT_EQ(j["shape"]["q_order"], "head_major");
  EXPECT_EQ(j["shape"]["out_order"], "head_major");
  auto back = from_json_text(j.dump());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_same_file(f, back.value());
  // Head-major rows: a head's L tokens are adjacent, and the heads follow one another.
  const CaseData c = back.value().spec.build();
  const pacts_problem& p = c.problem;
  ASSERT_TRUE(spec::validate_problem(p).is_ok());
  EXPECT_EQ(p.q_layout.s_tok, p.head_dim + f.spec.shape.q_gap);
  EXPECT_EQ(p.q_layout.s_head, int64_t{p.q_len} * p.q_layout.s_tok);
  EXPECT_EQ(p.out_layout.s_head, int64_t{p.q_len} * p.out_layout.s_tok);
  EXPECT_EQ(p.lse_layout.s_tok, 1 + f.spec.shape.out_gap);
  // An explicit token_major reads as the absent key; anything else is refused by name.
  Json t = j;
  t["shape"]["q_order"] = "token_major";
  auto tm = from_json_text(t.dump());
  ASSERT_TRUE(tm.is_ok()) << tm.status().to_string();
  EXPECT_FALSE(tm.value().spec.shape.q_head_major);
  t["shape"]["out_order"] = "column_major";
  auto bad = from_json_text(t.dump());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("shape.out_order \"column_major\""), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("token_major, head_major"), std::string::npos)
      << bad.status().message();
}

// low_pages: optional, written only when not 0 (spec/case_files.md §2.3); a negative value is
// refused by name.
TEST(CaseFileJson, LowPagesAreOptionalAndRoundTrip) {
  CaseFile f = rich_file();
  EXPECT_FALSE(Json::parse(to_json_text(f))["shape"].contains("low_pages"));
  f.spec.shape.low_pages = 70000;
  const Json j = Json::parse(to_json_text(f));
  EXPECT_EQ(j["shape"]["low_pages"], 70000);
  auto back = from_json_text(j.dump());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_same_file(f, back.value());
  const CaseData c = back.value().spec.build();
  for (int32_t b = 0; b < c.problem.batch; ++b)
    for (int32_t col = 0; col * c.problem.page_size < c.context_lens[static_cast<size_t>(b)]; ++col)
      EXPECT_GE(c.block_table[static_cast<size_t>(b * c.problem.block_table_stride + col)], 70000);
  Json neg = j;
  neg["shape"]["low_pages"] = -1;
  auto bad = from_json_text(neg.dump());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("shape.low_pages"), std::string::npos)
      << bad.status().message();
}

TEST(CaseFileJson, WritesAtomicallyIntoNewDirectories) {
  TempDir dir;
  const std::string path = dir / "a/b/c/case.json";
  const CaseFile f = rich_file();
  ASSERT_TRUE(write_case_file(path, f).is_ok());
  auto back = read_case_file(path);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_same_file(f, back.value());
  // Overwriting leaves exactly one file: no temporaries behind.
  ASSERT_TRUE(write_case_file(path, f).is_ok());
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir / "a/b/c")) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1u);
  auto missing = read_case_file(dir / "nope.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), spec::Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("nope.json"), std::string::npos);
}

// ---- refusals ----------------------------------------------------------------------------

// Parses the rich file's JSON, lets `edit` break it, and returns the refusal message ("" when
// the broken text was accepted).
std::string refusal(const std::function<void(Json&)>& edit) {
  Json j = Json::parse(to_json_text(rich_file()));
  edit(j);
  auto r = from_json_text(j.dump());
  if (r.is_ok()) return "";
  EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument) << r.status().to_string();
  EXPECT_EQ(r.status().message().rfind("case file: ", 0), 0u) << r.status().message();
  return r.status().message();
}

// Every leaf key path of an object, with JSON pointers to reach it ("shape.page_size",
// "/shape/page_size").
void key_paths(const Json& j, const std::string& dotted, const std::string& pointer,
               std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (const auto& item : j.items()) {
      const std::string d = dotted.empty() ? item.key() : dotted + "." + item.key();
      out.emplace_back(d, pointer + "/" + item.key());
      key_paths(item.value(), d, pointer + "/" + item.key(), out);
    }
  } else if (j.is_array() && dotted != "shape.contexts") {
    for (size_t i = 0; i < j.size(); ++i)
      key_paths(j[i], dotted + "[" + std::to_string(i) + "]", pointer + "/" + std::to_string(i), out);
  }
}

TEST(CaseFileJson, RefusesEveryMissingKeyNamingIt) {
  const Json j = Json::parse(to_json_text(rich_file()));
  std::vector<std::pair<std::string, std::string>> paths;
  key_paths(j, "", "", paths);
  ASSERT_GT(paths.size(), 50u);
  for (const auto& path : paths) {
    const std::string& dotted = path.first;
    const Json::json_pointer ptr(path.second);
    const std::string m = refusal([&](Json& x) {
      x[ptr.parent_pointer()].erase(ptr.back());
    });
    EXPECT_NE(m.find(dotted + ": missing"), std::string::npos) << dotted << " -> " << m;
  }
}

TEST(CaseFileJson, RefusesEveryWronglyTypedKeyNamingIt) {
  const Json j = Json::parse(to_json_text(rich_file()));
  std::vector<std::pair<std::string, std::string>> paths;
  key_paths(j, "", "", paths);
  for (const auto& path : paths) {
    const std::string& dotted = path.first;
    const Json::json_pointer ptr(path.second);
    // No key accepts both an object and a number: one of the two is always wrong.
    const bool is_object = j[ptr].is_object();
    const std::string m = refusal([&](Json& x) { x[ptr] = is_object ? Json(7) : Json::object(); });
    EXPECT_NE(m.find(dotted + " "), std::string::npos) << dotted << " -> " << m;
  }
}

TEST(CaseFileJson, RefusesEveryUnknownKey) {
  for (const char* where : {"", "/shape", "/plan_hint", "/overrides/0"}) {
    const std::string m = refusal([&](Json& x) { x[Json::json_pointer(where)]["windw"] = 3; });
    EXPECT_NE(m.find("windw: unknown key"), std::string::npos) << where << " -> " << m;
  }
}

struct BadValue {
  const char* pointer;
  Json value;
  const char* expect;  // part of the message
};

// A number beyond binary64 anywhere in a case file is a refusal naming the file, not an abort.
TEST(CaseFileJson, NumbersBeyondBinary64AreRefused) {
  std::string s = to_json_text(rich_file());
  const size_t at = s.find("\"seed\"");
  ASSERT_NE(at, std::string::npos);
  s.insert(at, "\"extra\": 1e999, ");
  auto r = from_json_text(s);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not JSON"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("1e999"), std::string::npos) << r.status().message();
}

// ---- what every reader checks before building a document (spec/case_files.md §7) ----------

// Sets the memory budget variable for one scope (ctest runs each test in its own process).
class ScopedBudget {
 public:
  explicit ScopedBudget(const char* value) {
    if (const char* old = std::getenv(kMemoryBudgetVariable)) old_ = old;
    ::setenv(kMemoryBudgetVariable, value, 1);
  }
  ~ScopedBudget() {
    if (old_) ::setenv(kMemoryBudgetVariable, old_->c_str(), 1);
    else ::unsetenv(kMemoryBudgetVariable);
  }

 private:
  std::optional<std::string> old_;
};

// The largest resident set this process has had, in bytes.
uint64_t peak_resident_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

// `depth` arrays (or objects under the key "a") nested in each other.
std::string nested(size_t depth, bool objects = false) {
  std::string s;
  s.reserve(depth * 6);
  for (size_t i = 0; i < depth; ++i) s += objects ? "{\"a\": " : "[";
  s += "0";
  for (size_t i = 0; i < depth; ++i) s += objects ? '}' : ']';
  return s;
}

// The text of the rich file with `key: value` inserted as the first member of the object that
// holds `before` (a key with its quotes, e.g. "\"page_size\"").
std::string with_member(const std::string& before, const std::string& member) {
  std::string s = to_json_text(rich_file());
  const size_t at = s.find(before);
  EXPECT_NE(at, std::string::npos) << before;
  s.insert(at, member + ", ");
  return s;
}

TEST(JsonText, NestingIsLimitedAndRepeatedKeysAreNamed) {
  EXPECT_TRUE(check_json_text(nested(kMaxJsonDepth), "t").is_ok());
  EXPECT_TRUE(check_json_text(nested(kMaxJsonDepth, true), "t").is_ok());
  for (const std::string& text : {nested(kMaxJsonDepth + 1), nested(kMaxJsonDepth + 1, true)}) {
    const spec::Status s = check_json_text(text, "t");
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), spec::Code::kInvalidArgument);
    EXPECT_NE(s.message().find("t: "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("nested deeper than 64 levels"), std::string::npos) << s.message();
  }
  // The path of the repeated key, through objects and arrays.
  const spec::Status s = check_json_text(R"({"a": [0, {"b": 1, "c": {}, "b": 2}]})", "t");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("t: a[1].b: duplicate key"), std::string::npos) << s.message();
  // The same key in two objects is no repetition; syntax errors are refused as before.
  EXPECT_TRUE(check_json_text(R"({"a": {"b": 1}, "c": {"b": 1}, "d": [{"b": 1}, {"b": 2}]})", "t").is_ok());
  const spec::Status bad = check_json_text("{\"a\": 1e999}", "t");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("t: not JSON"), std::string::npos) << bad.message();
}

// JSON nested tens of thousands deep, at the root, where an object is expected, or under a key
// that is refused anyway: a refusal naming the file, never a stack overflow (printing the value
// in a message recursed once per level).
TEST(CaseFileJson, DeepNestingIsRefusedNotAStackOverflow) {
  for (size_t depth : {size_t{70000}, size_t{200000}}) {
    const std::vector<std::string> texts = {
        nested(depth), nested(depth, true), with_member("\"seed\"", "\"extra\": " + nested(depth)),
        with_member("\"seed\"", "\"shape\": " + nested(depth, true))};
    for (const std::string& text : texts) {
      auto r = from_json_text(text);
      ASSERT_FALSE(r.is_ok()) << depth;
      EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument);
      EXPECT_EQ(r.status().message().rfind("case file: ", 0), 0u) << r.status().message();
      EXPECT_NE(r.status().message().find("nested deeper than 64"), std::string::npos)
          << r.status().message().substr(0, 300);
    }
  }
  TempDir dir;
  std::ofstream(dir / "deep.json", std::ios::binary) << nested(200000);
  auto r = read_case_file(dir / "deep.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("deep.json: the document: arrays and objects nested deeper"),
            std::string::npos)
      << r.status().message();
}

// A shape whose buffers exceed the memory budget is a load error (OutOfRange) naming the largest
// buffer, its fields and the budget, never a case that allocates until bad_alloc and is then
// reported as the backend failing.
TEST(CaseFileJson, ShapesBeyondTheMemoryBudgetAreRefused) {
  const auto refused = [](const std::function<void(Json&)>& edit, const std::string& expect) {
    Json j = Json::parse(to_json_text(rich_file()));
    edit(j);
    auto r = from_json_text(j.dump());
    ASSERT_FALSE(r.is_ok()) << expect;
    EXPECT_EQ(r.status().code(), spec::Code::kOutOfRange) << r.status().to_string();
    EXPECT_NE(r.status().message().find("case file: shape: the case's buffers take "),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("memory budget of "), std::string::npos)
        << r.status().message();
  };
  // 2 * 10^9 pages, a 2^31-element gap after every query row: terabytes, whatever the machine.
  refused([](Json& j) { j["shape"]["extra_pages"] = 2000000000; },
          "the largest k_pages (num_pages");
  refused([](Json& j) { j["shape"]["q_gap"] = 2147483647; }, "the largest query (batch");
  // The variable sets the budget: the rich file fits 1 MiB, not 4 KiB.
  {
    const ScopedBudget budget("4K");
    refused([](Json&) {}, "bytes (PACTS_CASE_MEMORY_BUDGET=4K)");
  }
  const ScopedBudget budget("1M");
  EXPECT_TRUE(from_json_text(to_json_text(rich_file())).is_ok());
}

// A key written twice is refused naming it: a reader that kept the last one would run another
// case than the one a person reads at the top of the file.
TEST(CaseFileJson, RepeatedKeysAreRefusedNamingThem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with_member("\"seed\"", "\"seed\": \"1\""), "case file: seed: duplicate key"},
      {with_member("\"page_size\"", "\"page_size\": 16"), "case file: shape.page_size: duplicate key"},
      {with_member("\"tensor\"", "\"code\": \"0x0\""), "case file: overrides[0].code: duplicate key"},
  };
  for (const auto& [text, expect] : cases) {
    auto r = from_json_text(text);
    ASSERT_FALSE(r.is_ok()) << expect;
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
  }
}

TEST(CaseFileJson, RefusesBadValuesNamingKeyAndValue) {
  const std::vector<BadValue> cases = {
      {"/shape/page_size", "x", "shape.page_size \"x\": expected an integer"},
      {"/shape/page_size", 16.5, "shape.page_size 16.5: expected an integer"},
      {"/shape/page_size", 4294967312ull, "shape.page_size 4294967312: expected an integer"},
      {"/shape/page_size", 48, "page_size 48: supported page sizes"},
      {"/shape/head_dim", 96, "head_dim 96"},
      {"/shape/q_len", 17, "q_len 17"},
      {"/shape/q_len", 0, "shape.q_len 0: expected an integer from 1"},
      {"/shape/batch", -1, "shape.batch -1"},
      {"/shape/num_q_heads", 7, "num_q_heads 7: must be a multiple of num_kv_heads"},
      {"/shape/kv_format", "fp4", "shape.kv_format \"fp4\": unknown name; accepted: bf16"},
      {"/shape/kv_format", "BF16", "shape.kv_format \"BF16\": unknown name"},
      {"/shape/q_format", "fp32", "q_format fp32"},
      {"/shape/q_format", "e2m1", "q_format e2m1"},
      {"/shape/out_format", "e4m3fn", "out_format e4m3fn"},
      {"/shape/k_scale_mode", "per_token", "k_scale_mode per_token: kv_format e2m1 accepts mx_block"},
      {"/shape/v_scale_mode", "per_block", "shape.v_scale_mode \"per_block\": unknown name"},
      {"/shape/nibble_order", "low", "shape.nibble_order \"low\": unknown name"},
      {"/shape/k_layout", "NHD", "shape.k_layout \"NHD\": unknown name"},
      {"/shape/v_layout", "trans_v", "shape.v_layout \"trans_v\": unknown name"},
      {"/shape/softcap", -1.0, "softcap -1"},
      {"/shape/softcap", 1e39, "shape.softcap 1e+39: expected a finite binary32"},
      {"/shape/window", -2, "shape.window -2"},
      {"/shape/sinks", 1, "shape.sinks 1: expected true or false"},
      {"/shape/contexts", Json::array({1, 2}), "shape.contexts [1,2]: has 2 entries; expected none (drawn) or batch 3"},
      {"/shape/contexts", Json::array({1, -2, 3}), "shape.contexts[1] -2"},
      {"/shape/contexts", Json::array({1, "2", 3}), "shape.contexts[1] \"2\""},
      {"/shape/contexts", 5, "shape.contexts 5: expected an array"},
      {"/shape/extra_pages", -1, "shape.extra_pages -1"},
      {"/shape/q_gap", -8, "shape.q_gap -8"},
      {"/shape/k_e8m0_lo", 256, "shape.k_e8m0_lo 256: expected an integer from 0 to 255"},
      {"/shape/k_e8m0_hi", 239, "shape.k_e8m0_hi 239: expected an integer from 240 to 255"},
      {"/shape/q_exponent", 128, "shape.q_exponent 128"},
      {"/shape/q_exponent", -150, "shape.q_exponent -150"},
      {"/overrides/0/tensor", "w", "overrides[0].tensor \"w\": unknown name"},
      {"/overrides/1/code", 7, "overrides[1].code 7: expected a string \"0x\""},
      {"/overrides/1/code", "0x123456789", "overrides[1].code \"0x123456789\""},
      {"/overrides/1/code", "0x", "overrides[1].code \"0x\""},
      {"/overrides/1/code", "0xg", "overrides[1].code \"0xg\""},
      {"/overrides/1/code", "12", "overrides[1].code \"12\""},
      {"/overrides/2/seq", -1, "overrides[2].seq -1"},
      {"/overrides/2/dim", 2147483648ll, "overrides[2].dim 2147483648"},
      {"/overrides", Json::object(), "overrides {}: expected an array"},
      {"/overrides/3", 5, "overrides[3] 5: expected an object"},
      {"/seed", 5, "seed 5: expected a decimal string"},
      {"/seed", "-1", "seed \"-1\""},
      {"/seed", "", "seed \"\""},
      {"/seed", "18446744073709551616", "seed \"18446744073709551616\": exceeds 2^64 - 1"},
      {"/seed", "1e3", "seed \"1e3\""},
      {"/run_seed", " 1", "run_seed \" 1\""},
      {"/pacts_case_version", 2, "pacts_case_version 2: this pacts reads case-file version 1"},
      {"/pacts_case_version", "1", "pacts_case_version \"1\": expected an integer"},
      {"/spec_version", "", "spec_version \"\""},
      {"/property", 3, "property 3: expected a string"},
      {"/plan_hint/kind", "auto", "plan_hint.kind \"auto\": unknown name"},
      {"/plan_hint/value", 0, "plan_hint.value 0: expected an integer from 1"},
      {"/plan_hint", Json{{"kind", "automatic"}, {"value", 3}}, "plan_hint.value 3: expected an integer from 0 to 0"},
      {"/shape", Json::array(), "shape []: expected an object"},
  };
  for (const BadValue& c : cases) {
    const std::string m = refusal([&](Json& x) { x[Json::json_pointer(c.pointer)] = c.value; });
    EXPECT_NE(m.find(c.expect), std::string::npos)
        << c.pointer << " = " << c.value.dump() << " -> \"" << m << "\"";
  }
}

TEST(CaseFileJson, RefusesTextThatIsNotACaseFile) {
  for (const char* text : {"", "{", "[]", "42", "{\"pacts_case_version\": 1,}", "null"}) {
    auto r = from_json_text(text);
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("case file: ", 0), 0u) << r.status().message();
  }
}

TEST(CaseFileJson, PageCountsMustFitInt32) {
  const std::string m = refusal([](Json& x) {
    x["shape"]["page_size"] = 8;
    x["shape"]["contexts"] = Json::array({2147483647, 2147483647, 2147483647});
  });
  EXPECT_NE(m.find("pages"), std::string::npos) << m;
}

// spec/case_files.md §3: a case file regenerates the same bytes on every machine and in every
// later version that reads its pacts_case_version. This pins make_case and the Rng: if it fails,
// the generator changed the bytes of existing case files. Bump pacts_case_version (and convert the
// corpus) instead of changing this constant.
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t digest(const CaseData& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const std::vector<uint8_t>* v : {&c.q, &c.k, &c.v, &c.k_scale, &c.v_scale, &c.sinks})
    h = fnv1a(h, v->data(), v->size());
  h = fnv1a(h, c.block_table.data(), c.block_table.size() * 4);
  return fnv1a(h, c.context_lens.data(), c.context_lens.size() * 4);
}

TEST(CaseFileJson, GoldenBytesOfVersion1) {
  const CaseFile f = rich_file();
  EXPECT_EQ(digest(f.spec.build()), 3895127102089655975ull)
      << "make_case no longer regenerates case-file version 1 bytes (spec/case_files.md §3)";
  CaseFile plain;
  plain.spec.shape = random_shape(7);
  plain.spec.shape.q_head_major = plain.spec.shape.out_head_major = false;  // drawn since
  plain.spec.seed = 7;
  EXPECT_EQ(digest(plain.spec.build()), 12097486669698276867ull)
      << "make_case no longer regenerates case-file version 1 bytes (spec/case_files.md §3)";
}

// ---- .npy ----------------------------------------------------------------------------------

NpyArray random_array(NpyType type, std::vector<uint64_t> shape, uint64_t seed) {
  NpyArray a;
  a.type = type;
  a.shape = std::move(shape);
  a.data.resize(a.elements() * npy_item_bytes(type));
  Rng rng(seed);
  for (uint8_t& b : a.data) b = static_cast<uint8_t>(rng.next());
  return a;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  TempDir dir;
  uint64_t seed = 1;
  for (NpyType t : {NpyType::kU8, NpyType::kU16, NpyType::kI32, NpyType::kF32, NpyType::kF64})
    for (const std::vector<uint64_t>& shape :
         std::vector<std::vector<uint64_t>>{{0}, {1}, {7}, {1000}, {2, 3, 4}, {}}) {
      const NpyArray a = random_array(t, shape, ++seed);
      const std::string path = dir / "a.npy";
      ASSERT_TRUE(write_npy(path, a).is_ok());
      auto b = read_npy(path);
      ASSERT_TRUE(b.is_ok()) << b.status().to_string();
      EXPECT_EQ(b.value().type, a.type);
      EXPECT_EQ(b.value().shape, a.shape);
      EXPECT_TRUE(b.value().data == a.data) << npy_descr(t);
    }
}

TEST(Npy, HeaderIsWhatNumPyWrites) {
  TempDir dir;
  NpyArray a = random_array(NpyType::kU16, {10}, 3);
  ASSERT_TRUE(write_npy(dir / "a.npy", a).is_ok());
  const std::string bytes = read_bytes(dir / "a.npy");
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ(header.rfind("{'descr': '<u2', 'fortran_order': False, 'shape': (10,), }", 0), 0u)
      << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.size(), 10 + header_len + 20);
  // Multi-dimensional and empty shapes as Python writes tuples.
  ASSERT_TRUE(write_npy(dir / "b.npy", random_array(NpyType::kF64, {2, 3}, 4)).is_ok());
  EXPECT_NE(read_bytes(dir / "b.npy").find("'shape': (2, 3), }"), std::string::npos);
  ASSERT_TRUE(write_npy(dir / "c.npy", random_array(NpyType::kU8, {5}, 4)).is_ok());
  EXPECT_NE(read_bytes(dir / "c.npy").find("'descr': '|u1'"), std::string::npos);
}

// A file as another writer might make it: version 2.0, double quotes, '<u1', no trailing comma.
TEST(Npy, ReadsOtherValidWriters) {
  TempDir dir;
  std::string header = "{\"descr\": \"<u1\", \"fortran_order\": True, \"shape\": (3,)}";
  header += std::string((64 - (12 + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::string file = std::string("\x93NUMPY\x02\x00", 8);
  const uint32_t n = static_cast<uint32_t>(header.size());
  for (int i = 0; i < 4; ++i) file += static_cast<char>(n >> (8 * i));
  file += header + "abc";
  write_bytes(dir / "v2.npy", file);
  auto a = read_npy(dir / "v2.npy");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a.value().type, NpyType::kU8);
  EXPECT_EQ(a.value().shape, std::vector<uint64_t>{3});
  EXPECT_EQ(std::string(a.value().data.begin(), a.value().data.end()), "abc");
}

TEST(Npy, RefusesMalformedFiles) {
  TempDir dir;
  ASSERT_TRUE(write_npy(dir / "good.npy", random_array(NpyType::kI32, {4}, 5)).is_ok());
  const std::string good = read_bytes(dir / "good.npy");
  const auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const std::vector<std::pair<std::string, std::string>> broken = {
      {good.substr(0, good.size() - 1), "needs 16"},
      {good + "x", "holds 17 data bytes"},
      {"\x93NUMPZ" + good.substr(6), "magic"},
      {good.substr(0, 6) + "\x04" + good.substr(7), "version 4"},
      {replace("'<i4'", "'>i4'"), "dtype '>i4'"},
      {replace("'<i4'", "'<i8'"), "dtype '<i8'"},
      {replace("'<i4'", "'|O1'"), "dtype '|O1'"},
      {replace("(4,)", "(2,2)").substr(0, good.size()), ""},
      {replace("False", "True ").substr(0, good.size()), ""},  // 1-D Fortran order is C order
      {replace("'shape'", "'shapf'"), "unexpected or repeated header key 'shapf'"},
      {replace("(4,)", "(x,)"), "expected a dimension"},
      {good.substr(0, 9), "truncated header"},
  };
  for (const auto& [bytes, expect] : broken) {
    write_bytes(dir / "bad.npy", bytes);
    auto r = read_npy(dir / "bad.npy");
    if (expect.empty()) {
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      continue;
    }
    ASSERT_FALSE(r.is_ok()) << expect;
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("bad.npy"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
  }
  // Shapes beyond NumPy's limits: an element count that wraps modulo 2^64 (here to 4, which the
  // 16 data bytes would match), a huge shape beside a zero dimension, more than 64 dimensions.
  const auto npy_v1 = [](const std::string& dict, const std::string& data) {
    std::string header = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size() & 0xFF) +
           static_cast<char>(header.size() >> 8) + header + data;
  };
  const auto shape_dict = [](const std::string& descr, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  };
  std::string ones = "(";
  for (int i = 0; i < 65; ++i) ones += "1, ";
  ones += ")";
  const std::vector<std::pair<std::string, std::string>> beyond = {
      {npy_v1(shape_dict("<i4", "(4611686018427387905, 4)"), std::string(16, 'x')),
       "shape (4611686018427387905, 4) of int32: its size in bytes exceeds 2^63 - 1"},
      {npy_v1(shape_dict("|u1", "(0, 4611686018427387904, 4)"), ""), "exceeds 2^63 - 1"},
      {npy_v1(shape_dict("|u1", ones), "x"), "more than 64 dimensions"},
  };
  for (const auto& [bytes, expect] : beyond) {
    write_bytes(dir / "huge.npy", bytes);
    auto h = read_npy(dir / "huge.npy");
    ASSERT_FALSE(h.is_ok()) << expect;
    EXPECT_EQ(h.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(h.status().message().find("huge.npy: .npy header: "), std::string::npos)
        << h.status().message();
    EXPECT_NE(h.status().message().find(expect), std::string::npos) << h.status().message();
  }
  // Within the limits: 64 dimensions, and an empty array of a large shape.
  write_bytes(dir / "fine.npy", npy_v1(shape_dict("|u1", "(0, 4611686018427387904)"), ""));
  EXPECT_TRUE(read_npy(dir / "fine.npy").is_ok());
  write_bytes(dir / "fine.npy", npy_v1(shape_dict("|u1", "(" + ones.substr(4)), "x"));
  EXPECT_TRUE(read_npy(dir / "fine.npy").is_ok());
  // Fortran order of two or more dimensions would need a transpose: refused.
  NpyArray two = random_array(NpyType::kU8, {2, 2}, 6);
  ASSERT_TRUE(write_npy(dir / "f.npy", two).is_ok());
  std::string f = read_bytes(dir / "f.npy");
  f.replace(f.find("False"), 5, "True ");
  write_bytes(dir / "f.npy", f);
  auto r = read_npy(dir / "f.npy");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("fortran_order True"), std::string::npos);
}

// ---- exchange directories --------------------------------------------------------------------

TEST(Exchange, DumpThenLoadIsByteIdentical) {
  TempDir dir;
  for (uint64_t seed = 100; seed < 112; ++seed) {
    CaseShape shape = random_shape(seed);
    shape.q_gap = static_cast<int32_t>(seed % 3) * 8;
    shape.bt_extra_cols = static_cast<int32_t>(seed % 2) * 2;
    CaseData c = make_case(shape, seed);
    // Unowned bytes are part of the case too (random bytes reach every one of them).
    ASSERT_TRUE(poison_unowned(c, Poison::kRandomBytes, seed));
    const std::string d = dir / ("case" + std::to_string(seed));
    ASSERT_TRUE(dump_case(c, d).is_ok());
    auto back = load_case(d);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_same_case(c, back.value());
  }
}

TEST(Exchange, EmptyBatchRoundTrips) {
  TempDir dir;
  CaseShape shape;
  shape.batch = 0;
  const CaseData c = make_case(shape, 1);
  ASSERT_TRUE(spec::validate_problem(c.problem).is_ok());
  ASSERT_TRUE(dump_case(c, dir.str()).is_ok());
  auto back = load_case(dir.str());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_same_case(c, back.value());
}

// The files of every scale mode carry their documented dtypes and sizes.
TEST(Exchange, FilesHaveTheDocumentedDtypes) {
  TempDir dir;
  struct Want {
    pacts_format kv;
    pacts_scale_mode mode;
    NpyType pages, scale;
  };
  for (const Want& w : {Want{PACTS_FORMAT_BF16, PACTS_SCALE_PER_TENSOR, NpyType::kU16, NpyType::kF32},
                        Want{PACTS_FORMAT_E4M3FN, PACTS_SCALE_PER_TOKEN, NpyType::kU8, NpyType::kF32},
                        Want{PACTS_FORMAT_E2M1, PACTS_SCALE_MX_BLOCK, NpyType::kU8, NpyType::kU8}}) {
    CaseShape s;
    s.kv_format = w.kv;
    s.k_scale_mode = s.v_scale_mode = w.mode;
    s.q_format = PACTS_FORMAT_E5M2;
    s.sinks = true;
    const CaseData c = make_case(s, 3);
    const std::string d = dir / std::string(spec::format_name(w.kv));
    ASSERT_TRUE(dump_case(c, d).is_ok());
    const auto read = [&](const char* name) {
      auto a = read_npy(d + "/" + name + ".npy");
      EXPECT_TRUE(a.is_ok()) << name << ": " << a.status().to_string();
      return a.is_ok() ? a.value() : NpyArray{};
    };
    EXPECT_EQ(read("query").type, NpyType::kU8);  // e5m2 Q
    EXPECT_EQ(read("query").elements(), c.q.size());
    EXPECT_EQ(read("k_pages").type, w.pages);
    EXPECT_EQ(read("k_pages").elements() * npy_item_bytes(w.pages), c.k.size());
    EXPECT_EQ(read("v_scale").type, w.scale);
    EXPECT_EQ(read("q_scale").type, NpyType::kF32);
    EXPECT_EQ(read("q_scale").elements(), 1u);
    EXPECT_EQ(read("sinks").elements(), static_cast<uint64_t>(s.num_q_heads));
    EXPECT_EQ(read("block_table").type, NpyType::kI32);
    EXPECT_EQ(read("context_lens").elements(), static_cast<uint64_t>(s.batch));
    if (w.mode == PACTS_SCALE_PER_TENSOR) {
      const NpyArray k = read("k_scale");
      ASSERT_EQ(k.elements(), 1u);
      float v;
      std::memcpy(&v, k.data.data(), 4);
      EXPECT_EQ(v, c.problem.k_scale);
    }
    const Json pj = Json::parse(read_bytes(d + "/problem.json"));
    EXPECT_EQ(pj["kv_format"], std::string(spec::format_name(w.kv)));
    EXPECT_EQ(pj["spec_version"], "pacts-spec-1");
    EXPECT_EQ(pj["k_scale_mode"], w.mode == PACTS_SCALE_PER_TENSOR ? "per_tensor"
                                  : w.mode == PACTS_SCALE_PER_TOKEN ? "per_token"
                                                                    : "mx_block");
  }
}

TEST(Exchange, ResultsCarryTheRunAndTheReference) {
  TempDir dir;
  CaseShape s = random_shape(5);
  s.lse = true;
  s.out_gap = 8;
  s.out_format = PACTS_FORMAT_BF16;
  const CaseData c = make_case(s, 5);
  auto backend = make_reference_backend();
  const Observed o = observe(*backend, c, PlanHint::automatic());
  ASSERT_TRUE(o.run.status.is_ok()) << o.run.status.to_string();
  const reference::Output ref = reference_answer(c);
  ExchangeExtras x;
  x.backend = backend->name();
  x.device = backend->device();
  x.plan = o.run.plan;
  x.out = &o.out;
  x.lse = &o.lse;
  x.reference = &ref;
  x.profile = &backend->profile();
  ASSERT_TRUE(dump_case(c, dir.str(), &x).is_ok());

  auto out = read_npy(dir / "out.npy");
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(out.value().type, NpyType::kU16);
  EXPECT_TRUE(out.value().data == o.out);
  auto lse = read_npy(dir / "lse.npy");
  ASSERT_TRUE(lse.is_ok());
  EXPECT_EQ(lse.value().type, NpyType::kF32);
  EXPECT_TRUE(lse.value().data == o.lse);
  const uint64_t B = static_cast<uint64_t>(s.batch), L = static_cast<uint64_t>(s.q_len),
                 H = static_cast<uint64_t>(s.num_q_heads), D = static_cast<uint64_t>(s.head_dim);
  for (const char* name : {"ref_out", "ref_a", "ref_bound"}) {
    auto a = read_npy(dir / (std::string(name) + ".npy"));
    ASSERT_TRUE(a.is_ok()) << name;
    EXPECT_EQ(a.value().type, NpyType::kF64);
    EXPECT_EQ(a.value().shape, (std::vector<uint64_t>{B, L, H, D})) << name;
  }
  auto ref_out = read_npy(dir / "ref_out.npy").value();
  EXPECT_EQ(std::memcmp(ref_out.data.data(), ref.out.data(), ref_out.data.size()), 0);
  auto bound = read_npy(dir / "ref_bound.npy").value();
  std::vector<double> bounds(bound.elements());
  std::memcpy(bounds.data(), bound.data.data(), bound.data.size());
  for (double b : bounds) ASSERT_TRUE(b >= 0) << b;
  for (const char* name : {"ref_lse", "ref_lse_bound"}) {
    auto a = read_npy(dir / (std::string(name) + ".npy"));
    ASSERT_TRUE(a.is_ok()) << name;
    EXPECT_EQ(a.value().shape, (std::vector<uint64_t>{B, L, H})) << name;
  }
  const Json pj = Json::parse(read_bytes(dir / "problem.json"));
  EXPECT_EQ(pj["run"]["backend"], "reference");
  EXPECT_EQ(pj["run"]["plan"]["variant"], o.run.plan.variant);
  EXPECT_EQ(pj["run"]["bound_profile"], backend->profile().name);
  // A loaded results directory is still the same case.
  auto back = load_case(dir.str());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  expect_same_case(c, back.value());

  // A later dump without results removes the stale ones: the directory is one case.
  ASSERT_TRUE(dump_case(c, dir.str()).is_ok());
  for (const char* name : {"out", "lse", "ref_out", "ref_lse", "ref_a", "ref_bound", "ref_lse_bound"})
    EXPECT_FALSE(fs::exists(dir / (std::string(name) + ".npy"))) << name;
  EXPECT_FALSE(Json::parse(read_bytes(dir / "problem.json")).contains("run"));

  // Results only, next to inputs that stay as they are.
  ExchangeExtras results_only = x;
  results_only.write_inputs = false;
  const auto before = fs::last_write_time(dir / "k_pages.npy");
  ASSERT_TRUE(dump_case(c, dir.str(), &results_only).is_ok());
  EXPECT_EQ(fs::last_write_time(dir / "k_pages.npy"), before);
  EXPECT_TRUE(fs::exists(dir / "ref_bound.npy"));

  // Reference results need the profile of their bound.
  ExchangeExtras no_profile = x;
  no_profile.profile = nullptr;
  EXPECT_FALSE(dump_case(c, dir.str(), &no_profile).is_ok());
}

// Each broken directory is refused with InvalidArgument naming the file and the field.
TEST(Exchange, LoadRefusesNamingFileAndField) {
  TempDir dir;
  CaseShape s;
  s.kv_format = PACTS_FORMAT_E4M3FN;
  s.k_scale_mode = PACTS_SCALE_PER_TENSOR;
  const CaseData c = make_case(s, 9);
  const std::string good = dir / "good";
  ASSERT_TRUE(dump_case(c, good).is_ok());
  const std::string problem = read_bytes(good + "/problem.json");

  struct Broken {
    const char* name;
    std::function<void(const std::string&)> edit;
    const char* expect;
  };
  const auto edit_json = [&](const std::function<void(Json&)>& f) {
    return [&problem, f](const std::string& d) {
      Json j = Json::parse(problem);
      f(j);
      write_bytes(d + "/problem.json", j.dump());
    };
  };
  const auto write_array = [](const char* name, NpyArray a) {
    return [name, a](const std::string& d) { ASSERT_TRUE(write_npy(d + "/" + name, a).is_ok()); };
  };
  NpyArray short_query = random_array(NpyType::kU16, {c.q.size() / 2 - 1}, 1);
  NpyArray float_query = random_array(NpyType::kF32, {c.q.size() / 4}, 1);
  NpyArray wrong_k_scale = random_array(NpyType::kF32, {1}, 1);
  const float two = 2.0f;
  std::memcpy(wrong_k_scale.data.data(), &two, 4);
  NpyArray two_k_scales = random_array(NpyType::kF32, {2}, 1);
  NpyArray v_scale = random_array(NpyType::kF32, {1}, 1);
  NpyArray ctx64 = random_array(NpyType::kF64, {static_cast<uint64_t>(s.batch)}, 1);
  const std::vector<Broken> broken = {
      {"no problem.json", [](const std::string& d) { fs::remove(d + "/problem.json"); },
       "problem.json: No such file"},
      {"missing k_pages", [](const std::string& d) { fs::remove(d + "/k_pages.npy"); },
       "k_pages.npy: missing"},
      {"missing context_lens", [](const std::string& d) { fs::remove(d + "/context_lens.npy"); },
       "context_lens.npy: missing"},
      {"float query", write_array("query.npy", float_query),
       "query.npy: dtype float32, expected uint16"},
      {"short query", write_array("query.npy", short_query), "query.npy: "},
      {"wrong k_scale", write_array("k_scale.npy", wrong_k_scale),
       "k_scale.npy holds 2.000000 but problem.json k_scale is 0.250000"},
      {"two k_scales", write_array("k_scale.npy", two_k_scales),
       "k_scale.npy: 2 elements, expected 1"},
      {"unused v_scale", write_array("v_scale.npy", v_scale),
       "v_scale.npy: present, but problem.json does not use it"},
      {"float64 context_lens", write_array("context_lens.npy", ctx64),
       "context_lens.npy: dtype float64, expected int32"},
      {"not an npy", [](const std::string& d) { write_bytes(d + "/sinks.npy", "x"); },
       "sinks.npy: present, but problem.json does not use it (has_sinks is false)"},
      {"garbage block table", [](const std::string& d) { write_bytes(d + "/block_table.npy", "xx"); },
       "block_table.npy: not a .npy file"},
      {"unknown key", edit_json([](Json& j) { j["k_scal"] = 1; }), "k_scal: unknown key"},
      {"missing key", edit_json([](Json& j) { j.erase("num_pages"); }), "num_pages: missing"},
      {"missing layout key", edit_json([](Json& j) { j["k_layout"].erase("s_chunk"); }),
       "k_layout.s_chunk: missing"},
      {"bad format name", edit_json([](Json& j) { j["kv_format"] = "fp8"; }),
       "kv_format \"fp8\": unknown name"},
      {"bad exchange version", edit_json([](Json& j) { j["pacts_exchange_version"] = 2; }),
       "pacts_exchange_version 2"},
      {"sinks as 1", edit_json([](Json& j) { j["has_sinks"] = 1; }), "has_sinks 1: expected true"},
      {"negative stride", edit_json([](Json& j) { j["q_layout"]["s_head"] = -1; }),
       "q_layout.s_head -1"},
      {"more pages than the pool holds", edit_json([](Json& j) { j["num_pages"] = j["num_pages"].get<int>() + 1; }),
       "k_pages.npy: "},
      {"not json", [](const std::string& d) { write_bytes(d + "/problem.json", "{"); },
       "problem.json: not JSON"},
      // Files that are no regular files: refused naming them, never an abort or a blocked read.
      {"query.npy a link to itself",
       [](const std::string& d) {
         fs::remove(d + "/query.npy");
         fs::create_symlink("query.npy", d + "/query.npy");
       },
       "query.npy: cannot examine"},
      {"query.npy a FIFO",
       [](const std::string& d) {
         fs::remove(d + "/query.npy");
         ASSERT_EQ(::mkfifo((d + "/query.npy").c_str(), 0600), 0);
       },
       "query.npy: not a regular file"},
      // A number beyond binary64 is refused like any bad JSON, never an uncaught exception.
      {"number beyond binary64",
       [](const std::string& d) {
         std::ifstream in(d + "/problem.json");
         std::stringstream text;
         text << in.rdbuf();
         std::string json = text.str();
         const size_t at = json.find("\"softcap\": ");
         const size_t end = json.find_first_of(",\n}", at + 11);
         json.replace(at, end - at, "\"softcap\": 1e999");
         write_bytes(d + "/problem.json", json);
       },
       "problem.json: not JSON"},
      // Checked before a document is built: depth (a stack overflow when the value was printed
      // in the refusal) and repeated keys (the last one won).
      {"nested 200,000 deep under run",
       [&problem](const std::string& d) {
         write_bytes(d + "/problem.json", "{\"run\": " + nested(200000) + ", " + problem.substr(1));
       },
       "problem.json: run: arrays and objects nested deeper than 64 levels"},
      {"nested 70,000 deep objects under run",
       [&problem](const std::string& d) {
         write_bytes(d + "/problem.json", "{\"run\": " + nested(70000, true) + ", " + problem.substr(1));
       },
       "problem.json: run: arrays and objects nested deeper than 64 levels"},
      {"num_pages twice",
       [&problem](const std::string& d) {
         write_bytes(d + "/problem.json", "{\"num_pages\": 1, " + problem.substr(1));
       },
       "problem.json: num_pages: duplicate key"},
  };
  for (const Broken& b : broken) {
    const std::string d = dir / "broken";
    fs::remove_all(d);
    fs::copy(good, d);
    b.edit(d);
    auto r = load_case(d);
    ASSERT_FALSE(r.is_ok()) << b.name;
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument) << b.name;
    EXPECT_NE(r.status().message().find(b.expect), std::string::npos)
        << b.name << ": " << r.status().message();
  }
  // A problem the spec refuses keeps the validator's code and names the field.
  const std::string d = dir / "refused";
  fs::copy(good, d);
  edit_json([](Json& j) { j["head_dim"] = 96; })(d);
  auto r = load_case(d);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), spec::Code::kNotSupported);
  EXPECT_NE(r.status().message().find("head_dim 96"), std::string::npos) << r.status().message();
}

// problem.json's sizes are checked before any buffer exists: against the memory budget first
// (2^31 - 1 pages took terabytes, an abort), then against the .npy headers (600,000 pages
// allocated and zero-filled gigabytes before the first file was found too short).
TEST(Exchange, SizesAreCheckedBeforeAnyBufferIsAllocated) {
  TempDir dir;
  CaseShape s;
  s.kv_format = PACTS_FORMAT_E4M3FN;
  const std::string good = dir / "good";
  ASSERT_TRUE(dump_case(make_case(s, 9), good).is_ok());
  const std::string problem = read_bytes(good + "/problem.json");
  const auto with_pages = [&](int64_t pages) {
    Json j = Json::parse(problem);
    j["num_pages"] = pages;
    const std::string d = dir / ("pages" + std::to_string(pages));
    fs::copy(good, d);
    write_bytes(d + "/problem.json", j.dump());
    return d;
  };
  auto r = load_case(with_pages(2147483647));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), spec::Code::kOutOfRange) << r.status().to_string();
  EXPECT_NE(r.status().message().find("problem.json: the case's buffers take "), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("the largest k_pages (num_pages"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("memory budget of "), std::string::npos)
      << r.status().message();
  {
    // Within a budget of 1 TiB, 600,000 pages (2.4 GB of pools) against files of 5 pages: the
    // .npy headers refuse it before the pools are allocated.
    const ScopedBudget budget("1T");
    const std::string d = with_pages(600000);
    const uint64_t before = peak_resident_bytes();
    r = load_case(d);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument) << r.status().to_string();
    EXPECT_NE(r.status().message().find("k_pages.npy: "), std::string::npos)
        << r.status().message();
    EXPECT_LT(peak_resident_bytes() - before, uint64_t{256} << 20)
        << "the refusal came after the pools were allocated";
  }
  // The budget variable: a case beyond it is refused naming it; a malformed one is refused.
  {
    const ScopedBudget budget("1024");
    r = load_case(good);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), spec::Code::kOutOfRange);
    EXPECT_NE(r.status().message().find("(PACTS_CASE_MEMORY_BUDGET=1024)"), std::string::npos)
        << r.status().message();
  }
  {
    const ScopedBudget budget("lots");
    r = load_case(good);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("PACTS_CASE_MEMORY_BUDGET \"lots\": expected a byte count"),
              std::string::npos)
        << r.status().message();
  }
  const ScopedBudget budget("1M");
  EXPECT_TRUE(load_case(good).is_ok());
}

// An otherwise valid .npy of `bytes` uint8 elements whose data is a hole (a sparse file): no disk
// space, but a reader that believes its header must allocate all of it. False where the file
// system cannot hold it.
bool write_sparse_npy(const std::string& path, uint64_t bytes) {
  NpyArray a;
  a.shape = {0};
  if (!write_npy(path, a).is_ok()) return false;
  std::string file = read_bytes(path);
  const std::string from = "(0,)", to = "(" + std::to_string(bytes) + ",)";
  file.replace(file.find(from), from.size(), to);
  const size_t grown = to.size() - from.size();
  file.erase(file.rfind('\n') - grown, grown);  // the padding shrinks: the header keeps its length
  write_bytes(path, file);
  return ::truncate(path.c_str(), static_cast<off_t>(file.size() + bytes)) == 0;
}

// Running out of memory inside a reader is a refusal (OutOfRange naming the file), never an
// uncaught std::bad_alloc that aborts the program: a child process whose address space is limited
// to 512 MiB more than it uses reads a 2 GiB .npy, and an exchange directory within the budget
// whose 1 GiB pools it cannot allocate.
TEST(Readers, OutOfMemoryIsARefusalNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the address sanitizer reserves more address space than the limit allows";
#endif
  TempDir dir;
  if (!write_sparse_npy(dir / "big.npy", uint64_t{1} << 31))
    GTEST_SKIP() << "this file system holds no 2 GiB sparse file";
  CaseShape s;
  s.kv_format = PACTS_FORMAT_E4M3FN;
  const std::string big = dir / "exchange";
  ASSERT_TRUE(dump_case(make_case(s, 9), big).is_ok());
  Json problem = Json::parse(read_bytes(big + "/problem.json"));
  const uint64_t page_bytes = problem["k_layout"]["s_page"].get<uint64_t>();  // 1-byte elements
  problem["num_pages"] = (uint64_t{1} << 30) / page_bytes;
  write_bytes(big + "/problem.json", problem.dump());
  ASSERT_TRUE(write_sparse_npy(big + "/k_pages.npy", uint64_t{1} << 30));
  ASSERT_TRUE(write_sparse_npy(big + "/v_pages.npy", uint64_t{1} << 30));
  const ScopedBudget budget("1T");

  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  ASSERT_TRUE(statm >> pages);
  const rlim_t limit = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + (rlim_t{512} << 20);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // No gtest assertions here: the exit status says what happened (0: both refused as expected).
    const rlimit l{limit, limit};
    if (::setrlimit(RLIMIT_AS, &l) != 0) ::_exit(10);
    const auto out_of_memory = [](const spec::Status& st, const std::string& where) {
      std::fprintf(stderr, "child: %s\n", st.to_string().c_str());
      return st.code() == spec::Code::kOutOfRange &&
             st.message().find(where + ": out of memory") != std::string::npos;
    };
    auto npy = read_npy(dir / "big.npy");
    if (npy.is_ok() || !out_of_memory(npy.status(), dir / "big.npy")) ::_exit(11);
    auto loaded = load_case(big);
    if (loaded.is_ok() || !out_of_memory(loaded.status(), "exchange " + big)) ::_exit(12);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the reader was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no limit, 11: read_npy, 12: load_case";
}

// `pacts case judge` (load_results, observe_written, within_tolerance on a profile): results
// another tool wrote into an exchange directory are judged, not ignored. The reference's own
// results pass under the reference profile; a NaN-filled out.npy fails, and the output of an
// off-by-one causal mask (the fault backend's causal_off_by_one as the writer) fails under the
// reference's numerics wherever it changed a bit, and under fp32's bound at least once; a wrong
// dtype, a wrong count and a missing out.npy are refused naming the file.
class JudgeWritten : public ::testing::Test {
 protected:
  // Runs `writer` on the case of `seed` and dumps its results as an outside tool would.
  static CaseData write(Backend& writer, const CaseData& c, const std::string& dir) {
    const Observed o = observe(writer, c, PlanHint::automatic());
    EXPECT_TRUE(o.run.status.is_ok()) << o.run.status.to_string();
    ExchangeExtras x;
    x.out = &o.out;
    x.lse = &o.lse;
    EXPECT_TRUE(dump_case(c, dir, &x).is_ok());
    auto back = load_case(dir);
    EXPECT_TRUE(back.is_ok()) << back.status().to_string();
    CaseData judged = back.value();
    const spec::Status s = load_results(dir, judged);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return judged;
  }
  static Outcome judge(const CaseData& c, const spec::NumericsProfile& prof) {
    CaseData copy = c;
    auto ref = reference::decode(copy.problem, copy.buffers(), prof.q_requant);
    EXPECT_TRUE(ref.is_ok());
    return within_tolerance(prof, c.problem, observe_written(c), ref.value());
  }
};

TEST_F(JudgeWritten, ReferenceResultsPassNaNAndOffByOneFail) {
  TempDir dir;
  auto reference = make_reference_backend();
  int offs = 0, fp32_fails = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CaseShape s = random_shape(seed * 7, 2000);
    s.lse = seed % 2 == 0;
    const CaseData c = make_case(s, seed);
    const std::string d = dir / ("s" + std::to_string(seed));
    const CaseData good = write(*reference, c, d);
    EXPECT_EQ(judge(good, spec::reference_profile()).verdict, Verdict::kPass) << "seed " << seed;
    EXPECT_EQ(judge(good, spec::fp32_profile()).verdict, Verdict::kPass) << "seed " << seed;
    // NaN everywhere (what an unlaunched kernel's poisoned buffer holds).
    CaseData nan = good;
    const int ob = spec::element_bytes(c.problem.out_format);
    const uint32_t nan_code = c.problem.out_format == PACTS_FORMAT_BF16   ? 0x7FC0u
                              : c.problem.out_format == PACTS_FORMAT_FP16 ? 0x7E00u
                                                                          : 0x7FC00000u;
    ASSERT_TRUE(spec::is_nan_code(c.problem.out_format, nan_code));
    for (size_t i = 0; i + ob <= nan.out.size(); i += static_cast<size_t>(ob))
      std::memcpy(&nan.out[i], &nan_code, static_cast<size_t>(ob));
    const reference::Output ref = reference_answer(c);
    bool any_valid_row = false;
    for (size_t r = 0; r < ref.row_invalid.size(); ++r) any_valid_row |= !ref.row_invalid[r];
    if (any_valid_row) {
      EXPECT_EQ(judge(nan, spec::fp32_profile()).verdict, Verdict::kFail) << "seed " << seed;
    }
    // One key past each row's position: the causal mask off by one.
    auto faulty = make_fault_backend(make_reference_backend(), Fault::kCausalOffByOne);
    const CaseData off = write(*faulty, c, d + "_off");
    // Held to the reference's own numerics every changed output fails; held to fp32's bound, the
    // extra key's weight can be below it, but not on every case.
    if (observe_written(off).out_codes != observe_written(good).out_codes) {
      ++offs;
      EXPECT_EQ(judge(off, spec::reference_profile()).verdict, Verdict::kFail) << "seed " << seed;
      fp32_fails += judge(off, spec::fp32_profile()).verdict == Verdict::kFail;
    }
  }
  EXPECT_GT(offs, 0) << "no seed gave the off-by-one mask a different output";
  EXPECT_GT(fp32_fails, 0) << "the fp32 bound never caught the off-by-one mask";
}

// A Fail names the worst element outside its bound, not the first one met, and counts them.
// Planted: with only the first element wrong the ratio is that element's; with a far worse one
// after it, the outcome's ratio and message are the later element's.
TEST_F(JudgeWritten, AFailNamesTheWorstElementNotTheFirst) {
  TempDir dir;
  auto reference = make_reference_backend();
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const CaseData c = make_case(random_shape(seed * 7, 2000), seed);
    const CaseData good = write(*reference, c, dir / ("w" + std::to_string(seed)));
    const reference::Output ref = reference_answer(c);
    const Observed o = observe_written(good);
    const size_t D = static_cast<size_t>(c.problem.head_dim);
    std::vector<size_t> finite;
    for (size_t e = 0; e < o.out_values.size(); ++e)
      if (!ref.row_invalid[e / D] && std::isfinite(ref.out[e])) finite.push_back(e);
    if (finite.size() < 2) continue;
    const size_t first = finite.front(), last = finite.back();
    Observed one = o;
    one.out_values[first] = ref.out[first] + 1.0 + std::fabs(ref.out[first]);
    const Outcome first_only = within_tolerance(spec::fp32_profile(), c.problem, one, ref);
    ASSERT_EQ(first_only.verdict, Verdict::kFail) << "seed " << seed;
    EXPECT_EQ(first_only.detail.find("the worst of"), std::string::npos) << first_only.detail;
    Observed two = one;
    two.out_values[last] = ref.out[last] + 1e6 * (1.0 + std::fabs(ref.out[last]));
    const Outcome both = within_tolerance(spec::fp32_profile(), c.problem, two, ref);
    ASSERT_EQ(both.verdict, Verdict::kFail);
    EXPECT_GT(both.worst_ratio, first_only.worst_ratio) << both.detail;
    EXPECT_NE(both.detail.find("the worst of 2 elements"), std::string::npos) << both.detail;
    return;
  }
  FAIL() << "no seed gave a case with two finite output elements";
}

TEST_F(JudgeWritten, RefusesMissingAndMisshapenResults) {
  TempDir dir;
  CaseShape s = random_shape(3);
  s.lse = true;
  s.out_format = PACTS_FORMAT_BF16;
  const CaseData c = make_case(s, 3);
  auto reference = make_reference_backend();
  write(*reference, c, dir.str());
  const auto refused = [&](const char* expect) {
    auto back = load_case(dir.str());
    ASSERT_TRUE(back.is_ok());
    CaseData x = back.value();
    const spec::Status st = load_results(dir.str(), x);
    EXPECT_EQ(st.code(), spec::Code::kInvalidArgument) << expect;
    EXPECT_NE(st.message().find(expect), std::string::npos) << st.message();
  };
  const NpyArray out = read_npy(dir / "out.npy").value();
  NpyArray wrong = out;
  wrong.type = NpyType::kF32;
  wrong.shape = {out.data.size() / 4};
  wrong.data.resize(wrong.shape[0] * 4);
  ASSERT_TRUE(write_npy(dir / "out.npy", wrong).is_ok());
  refused("out.npy: dtype");
  NpyArray short_out = out;
  short_out.shape = {out.shape[0] - 1};
  short_out.data.resize(short_out.data.size() - 2);
  ASSERT_TRUE(write_npy(dir / "out.npy", short_out).is_ok());
  refused("elements, expected");
  fs::remove(dir / "out.npy");
  refused("out.npy: missing");
}

// The poison relation of two written results: the same owned data with other unowned bytes must
// give the same bits; cases that differ in owned bytes are refused, not judged.
TEST_F(JudgeWritten, TwinsDifferingInUnownedBytesOnly) {
  TempDir dir;
  auto reference = make_reference_backend();
  int compared = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const CaseData c = make_case(random_shape(seed * 11, 2000), seed);
    CaseData poisoned = c;
    if (!poison_unowned(poisoned, Poison::kRandomBytes, seed)) continue;
    const CaseData a = write(*reference, c, dir / ("a" + std::to_string(seed)));
    const CaseData b = write(*reference, poisoned, dir / ("b" + std::to_string(seed)));
    auto same = same_owned_then_same_bits(a, b);
    ASSERT_TRUE(same.is_ok()) << same.status().to_string();
    EXPECT_EQ(same.value().verdict, Verdict::kPass) << same.value().detail;
    // A written output that depends on the unowned bytes fails the relation.
    if (!observe_written(b).out_codes.empty()) {
      CaseData leak = b;
      leak.out[0] ^= 1;  // element (0, 0, 0, 0) sits at offset 0 of every output layout
      EXPECT_EQ(same_owned_then_same_bits(a, leak).value().verdict, Verdict::kFail);
      ++compared;
    }
    // An owned byte changed is a different case: refused.
    CaseData other = b;
    if (!other.q.empty()) {
      other.q[0] ^= 1;
      EXPECT_EQ(same_owned_then_same_bits(a, other).status().code(), spec::Code::kInvalidArgument);
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(JudgeProfile, ReadsEveryFieldAndRefusesMissingOrNegative) {
  TempDir dir;
  const Json good = {{"name", "my-kernel"}, {"u_logit", 5.96e-8}, {"u_q", 0.0078125},
                     {"u_p", 0.0078125},    {"eta_p", 0},         {"p_rounded_in_denominator", false},
                     {"u_acc", 1.2e-7},     {"u_partial", 6e-8},  {"eps_exp", 2.4e-7},
                     {"eps_tanh", 2.4e-7},  {"eps_log", 1e-12},   {"ftz", false}};
  const std::string path = dir / "p.json";
  std::ofstream(path) << good.dump();
  auto p = read_profile_file(path);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p.value().name, "my-kernel");
  EXPECT_EQ(p.value().u_q, 0.0078125);
  EXPECT_EQ(p.value().u_acc, 1.2e-7);
  for (const char* key : {"u_acc", "ftz", "name"}) {
    Json j = good;
    j.erase(key);
    std::ofstream(path) << j.dump();
    auto r = read_profile_file(path);
    ASSERT_FALSE(r.is_ok()) << key;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
  Json neg = good;
  neg["u_p"] = -1;
  std::ofstream(path) << neg.dump();
  EXPECT_FALSE(read_profile_file(path).is_ok());
  Json extra = good;
  extra["u_typo"] = 1;
  std::ofstream(path) << extra.dump();
  EXPECT_FALSE(read_profile_file(path).is_ok());
}

TEST(JudgeProfile, ReadsAPerFormatFloorAndRefusesUnknownFormats) {
  TempDir dir;
  Json j = {{"name", "my-kernel"}, {"u_logit", 5.96e-8}, {"u_q", 0.0078125},
            {"u_p", 0.0078125},    {"eta_p", 0},         {"p_rounded_in_denominator", false},
            {"u_acc", 1.2e-7},     {"u_partial", 6e-8},  {"eps_exp", 2.4e-7},
            {"eps_tanh", 2.4e-7},  {"eps_log", 1e-12},   {"ftz", false}};
  j["eta_p_formats"] = {{"eta_p", 0x1p-40}, {"kv_formats", {"fp16", "e4m3fn"}}};
  const std::string path = dir / "p.json";
  std::ofstream(path) << j.dump();
  auto p = read_profile_file(path);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p.value().eta_p_formats.eta_p, 0x1p-40);
  EXPECT_EQ(p.value().eta_p_formats.kv_formats,
            (1u << PACTS_FORMAT_FP16) | (1u << PACTS_FORMAT_E4M3FN));
  j["eta_p_formats"]["kv_formats"] = {"fp17"};
  std::ofstream(path) << j.dump();
  auto bad = read_profile_file(path);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("fp17"), std::string::npos) << bad.status().message();
  j["eta_p_formats"] = {{"eta_p", -1}, {"kv_formats", {"fp16"}}};
  std::ofstream(path) << j.dump();
  EXPECT_FALSE(read_profile_file(path).is_ok());
}

// A profile nested deep where a string is expected, or with a key twice: refused naming the file.
TEST(JudgeProfile, RefusesDeepNestingAndRepeatedKeys) {
  TempDir dir;
  const std::string path = dir / "p.json";
  std::ofstream(path) << "{\"name\": " << nested(200000) << "}";
  auto deep = read_profile_file(path);
  ASSERT_FALSE(deep.is_ok());
  EXPECT_NE(deep.status().message().find("p.json: name: arrays and objects nested deeper"),
            std::string::npos)
      << deep.status().message();
  std::ofstream(path) << R"({"name": "a", "name": "b"})";
  auto twice = read_profile_file(path);
  ASSERT_FALSE(twice.is_ok());
  EXPECT_NE(twice.status().message().find("p.json: name: duplicate key"), std::string::npos)
      << twice.status().message();
}

// The mustpass manifest (spec/case_files.md §3.5) is read under the same rules.
TEST(MustpassManifest, RefusesDeepNestingAndRepeatedKeys) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> manifests = {
      {R"({"mustpass_version": 1, "spec_version": "pacts-spec-1", "cases": )" + nested(200000) + "}",
       "manifest.json: cases: arrays and objects nested deeper than 64"},
      {R"({"mustpass_version": 1, "mustpass_version": 1, "spec_version": "s", "cases": []})",
       "manifest.json: mustpass_version: duplicate key"},
  };
  for (const auto& [text, expect] : manifests) {
    std::ofstream(dir / "manifest.json") << text;
    auto r = load_mustpass(dir.str());
    ASSERT_FALSE(r.is_ok()) << expect;
    EXPECT_EQ(r.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace pacts::conformance
