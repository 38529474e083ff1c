// The refusal table of spec/refusals.md §2: one row per refusal, each built from a valid problem
// by changing one thing, checking the code and that the message names the field and the value.
#include <pacts/spec/validate.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace pacts::spec {
namespace {

// Owns 256-byte aligned storage for every buffer a problem needs, sized by required_extents.
class Storage {
 public:
  // Problems the descriptor check refuses get no storage (their extents may not even be
  // computable); neither do buffers beyond 64 MiB, which only refused rows ask for.
  explicit Storage(const pacts_problem& p) {
    if (!validate_problem(p).is_ok()) return;
    const RequiredExtents e = required_extents(p);
    bind(buffers_.q, e.q);
    bind(buffers_.k, e.k);
    bind(buffers_.v, e.v);
    bind(buffers_.k_scale, e.k_scale);
    bind(buffers_.v_scale, e.v_scale);
    bind(buffers_.block_table, e.block_table);
    bind(buffers_.context_lens, e.context_lens);
    bind(buffers_.sinks, e.sinks);
    bind(buffers_.out, e.out);
    bind(buffers_.lse, e.lse);
  }
  pacts_buffers& buffers() { return buffers_; }

 private:
  void bind(pacts_view& v, uint64_t bytes) {
    if (bytes == 0 || bytes > (uint64_t{1} << 26)) return;
    auto block = std::make_unique<std::byte[]>(bytes + 256);
    auto addr = reinterpret_cast<uintptr_t>(block.get());
    v.data = reinterpret_cast<void*>((addr + 255) & ~uintptr_t{255});
    v.bytes = bytes;
    blocks_.push_back(std::move(block));
  }
  pacts_buffers buffers_{};
  std::vector<std::unique_ptr<std::byte[]>> blocks_;
};

pacts_problem base_problem() { return make_problem(3, 2, 8, 2, 128, 16, 20, 5); }

struct Row {
  const char* name;
  std::function<void(pacts_problem&)> change_problem;
  std::function<void(pacts_buffers&)> change_buffers;  // applied after storage is sized
  Code code;
  std::string needle;  // must appear in the message (the field, usually with its value)
  Requirements req{};
};

void check_row(const Row& row) {
  SCOPED_TRACE(row.name);
  pacts_problem p = base_problem();
  if (row.change_problem) row.change_problem(p);
  Storage storage(p);
  pacts_buffers b = storage.buffers();
  if (row.change_buffers) row.change_buffers(b);
  const Status s = validate(p, b, row.req);
  EXPECT_STREQ(code_name(s.code()), code_name(row.code)) << s.to_string();
  EXPECT_NE(s.message().find(row.needle), std::string::npos)
      << "message '" << s.message() << "' does not name '" << row.needle << "'";
}

TEST(RefusalTable, BaseProblemIsAccepted) {
  pacts_problem p = base_problem();
  Storage storage(p);
  const Status s = validate(p, storage.buffers());
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

const std::vector<Row>& shape_rows() {
  static const std::vector<Row> rows = {
      {"abi", [](auto& p) { p.abi_version = 7; }, {}, Code::kInvalidArgument, "abi_version 7"},
      {"batch<0", [](auto& p) { p.batch = -1; }, {}, Code::kInvalidArgument, "batch -1"},
      {"L=0", [](auto& p) { p.q_len = 0; }, {}, Code::kInvalidArgument, "q_len 0"},
      {"L=17", [](auto& p) { p.q_len = 17; }, {}, Code::kOutOfRange, "q_len 17"},
      {"Hkv=0", [](auto& p) { p.num_kv_heads = 0; }, {}, Code::kInvalidArgument, "num_kv_heads 0"},
      {"Hq=0", [](auto& p) { p.num_q_heads = 0; }, {}, Code::kInvalidArgument, "num_q_heads 0"},
      {"Hq%Hkv", [](auto& p) { p.num_q_heads = 7; }, {}, Code::kInvalidArgument, "num_q_heads 7"},
      {"G=65", [](auto& p) { p.num_q_heads = 130; }, {}, Code::kOutOfRange, "group size"},
      {"D=96", [](auto& p) { p.head_dim = 96; }, {}, Code::kNotSupported, "head_dim 96"},
      {"page 48", [](auto& p) { p.page_size = 48; }, {}, Code::kNotSupported, "page_size 48"},
      {"page 4", [](auto& p) { p.page_size = 4; }, {}, Code::kNotSupported, "page_size 4"},
      {"page 512", [](auto& p) { p.page_size = 512; }, {}, Code::kNotSupported, "page_size 512"},
      {"num_pages<0", [](auto& p) { p.num_pages = -2; }, {}, Code::kInvalidArgument, "num_pages -2"},
      {"max_pages<0", [](auto& p) { p.max_pages_per_seq = -1; }, {}, Code::kInvalidArgument,
       "max_pages_per_seq -1"},
      {"ctx overflow", [](auto& p) { p.max_pages_per_seq = 1 << 27; p.block_table_stride = 1 << 27; },
       {}, Code::kOutOfRange, "max_pages_per_seq 134217728"},
  };
  return rows;
}

const std::vector<Row>& format_rows() {
  static const std::vector<Row> rows = {
      {"q fmt bogus", [](auto& p) { p.q_format = static_cast<pacts_format>(42); }, {},
       Code::kInvalidArgument, "q_format 42"},
      {"q fmt e2m1", [](auto& p) { p.q_format = PACTS_FORMAT_E2M1; }, {}, Code::kNotSupported,
       "q_format e2m1"},
      {"q fmt fp32", [](auto& p) { p.q_format = PACTS_FORMAT_FP32; }, {}, Code::kNotSupported,
       "q_format fp32"},
      {"kv fmt e8m0", [](auto& p) { p.kv_format = PACTS_FORMAT_E8M0; }, {}, Code::kNotSupported,
       "kv_format e8m0"},
      {"kv fmt invalid", [](auto& p) { p.kv_format = PACTS_FORMAT_INVALID; }, {},
       Code::kInvalidArgument, "kv_format 0"},
      {"out fmt e4m3", [](auto& p) { p.out_format = PACTS_FORMAT_E4M3FN; }, {}, Code::kNotSupported,
       "out_format e4m3fn"},
      {"bf16 per-token", [](auto& p) { p.k_scale_mode = PACTS_SCALE_PER_TOKEN; }, {},
       Code::kInvalidArgument, "k_scale_mode per_token"},
      {"fp8 mx", [](auto& p) { p.kv_format = PACTS_FORMAT_E4M3FN; p.v_scale_mode = PACTS_SCALE_MX_BLOCK; },
       {}, Code::kInvalidArgument, "v_scale_mode mx_block"},
      {"e2m1 none", [](auto& p) { p.kv_format = PACTS_FORMAT_E2M1; p.k_layout.chunk = 64; p.v_layout.chunk = 64; },
       {}, Code::kInvalidArgument, "k_scale_mode none"},
      {"mode bogus", [](auto& p) { p.k_scale_mode = static_cast<pacts_scale_mode>(9); }, {},
       Code::kInvalidArgument, "k_scale_mode 9"},
      {"nibble", [](auto& p) { p.nibble_order = static_cast<pacts_nibble_order>(2); }, {},
       Code::kInvalidArgument, "nibble_order 2"},
      {"sm 0", [](auto& p) { p.softmax_scale = 0.0f; }, {}, Code::kInvalidArgument, "softmax_scale 0"},
      {"sm nan", [](auto& p) { p.softmax_scale = kNaN; }, {}, Code::kInvalidArgument, "softmax_scale"},
      {"q_scale inf", [](auto& p) { p.q_scale = kInf; }, {}, Code::kInvalidArgument, "q_scale inf"},
      {"q_scale neg", [](auto& p) { p.q_scale = -2.0f; }, {}, Code::kInvalidArgument, "q_scale -2"},
      {"k_scale ignored", [](auto& p) { p.k_scale = 0.5f; }, {}, Code::kInvalidArgument, "k_scale 0.5"},
      {"v_scale 0", [](auto& p) { p.v_scale_mode = PACTS_SCALE_PER_TENSOR; p.v_scale = 0.0f; }, {},
       Code::kInvalidArgument, "v_scale 0"},
      {"softcap<0", [](auto& p) { p.softcap = -1.0f; }, {}, Code::kInvalidArgument, "softcap -1"},
      {"softcap inf", [](auto& p) { p.softcap = kInf; }, {}, Code::kInvalidArgument, "softcap inf"},
      {"window<0", [](auto& p) { p.window = -3; }, {}, Code::kInvalidArgument, "window -3"},
      {"sinks=2", [](auto& p) { p.has_sinks = 2; }, {}, Code::kInvalidArgument, "has_sinks 2"},
      {"lse=-1", [](auto& p) { p.want_lse = -1; }, {}, Code::kInvalidArgument, "want_lse -1"},
  };
  return rows;
}

const std::vector<Row>& layout_rows() {
  static const std::vector<Row> rows = {
      {"q stride<0", [](auto& p) { p.q_layout.s_head = -128; }, {}, Code::kInvalidArgument,
       "q_layout.s_head -128"},
      {"q overlap", [](auto& p) { p.q_layout.s_head = 64; }, {}, Code::kInvalidArgument,
       "q_layout.s_head 64"},
      {"out overlap batch", [](auto& p) { p.out_layout.s_batch = 1024; }, {}, Code::kInvalidArgument,
       "out_layout.s_batch 1024"},
      {"lse overlap", [](auto& p) { p.want_lse = 1; p.lse_layout.s_tok = 4; }, {},
       Code::kInvalidArgument, "lse_layout.s_tok 4"},
      {"k chunk 0", [](auto& p) { p.k_layout.chunk = 0; }, {}, Code::kInvalidArgument, "k_layout.chunk 0"},
      {"k chunk 48", [](auto& p) { p.k_layout.chunk = 48; }, {}, Code::kInvalidArgument, "k_layout.chunk 48"},
      {"k tok overlap", [](auto& p) { p.k_layout.s_tok = 100; }, {}, Code::kInvalidArgument,
       "k_layout.s_tok 100"},
      {"v head overlap", [](auto& p) { p.v_layout.s_head = 0; }, {}, Code::kInvalidArgument,
       "v_layout.s_head 0"},
      {"v chunk overlap", [](auto& p) { p.v_layout.chunk = 8; p.v_layout.s_chunk = 4; }, {},
       Code::kInvalidArgument, "v_layout.s_chunk 4"},
      {"v page huge", [](auto& p) { p.v_layout.s_page = int64_t{1} << 60; }, {}, Code::kOutOfRange,
       "v_layout.s_page"},
      {"scale overlap",
       [](auto& p) {
         p.kv_format = PACTS_FORMAT_E4M3FN;
         p.k_scale_mode = PACTS_SCALE_PER_TOKEN;
         p.k_scale_layout = {32, 8, 1, 0};
       },
       {}, Code::kInvalidArgument, "k_scale_layout.s_head 8"},
      {"bt stride", [](auto& p) { p.block_table_stride = 4; }, {}, Code::kInvalidArgument,
       "block_table_stride 4"},
      // 32-bit offset wraparound was a real bug (#7056 in docs/bug-classes.md): an implementation
      // that forms 32-bit offsets declares it and the view is refused rather than wrapped.
      {"32-bit offsets", [](auto& p) { p.k_layout.s_page = int64_t{1} << 31; }, {}, Code::kOutOfRange,
       "k_layout: largest offset", Requirements{1, (int64_t{1} << 31) - 1}},
  };
  return rows;
}

const std::vector<Row>& buffer_rows() {
  static const std::vector<Row> rows = {
      {"q null", {}, [](auto& b) { b.q.data = nullptr; }, Code::kInvalidArgument, "buffers.q: null"},
      {"ctx null", {}, [](auto& b) { b.context_lens = {}; }, Code::kInvalidArgument,
       "buffers.context_lens: null"},
      {"bt null", {}, [](auto& b) { b.block_table.data = nullptr; }, Code::kInvalidArgument,
       "buffers.block_table: null"},
      {"sinks null", [](auto& p) { p.has_sinks = 1; }, [](auto& b) { b.sinks = {}; },
       Code::kInvalidArgument, "buffers.sinks: null"},
      {"k_scale missing (key_scale=None)",
       [](auto& p) {
         p.kv_format = PACTS_FORMAT_E4M3FN;
         p.k_scale_mode = PACTS_SCALE_PER_TOKEN;
         p.k_scale_layout = {int64_t{16} * 2, 16, 1, 0};
       },
       [](auto& b) { b.k_scale = {}; }, Code::kInvalidArgument, "buffers.k_scale: null"},
      {"sinks unused", {}, [](auto& b) { static float s[8]; b.sinks = {s, sizeof s}; },
       Code::kInvalidArgument, "buffers.sinks: given"},
      {"k short", {}, [](auto& b) { b.k.bytes -= 2; }, Code::kOutOfRange, "buffers.k: the layout reaches"},
      {"out short", {}, [](auto& b) { b.out.bytes = 10; }, Code::kOutOfRange, "buffers.out"},
      {"q misaligned", {}, [](auto& b) { b.q.data = static_cast<char*>(b.q.data) + 1; },
       Code::kInvalidArgument, "buffers.q: address"},
      {"bt misaligned", {}, [](auto& b) { b.block_table.data = static_cast<char*>(b.block_table.data) + 2; },
       Code::kInvalidArgument, "buffers.block_table: address"},
      {"k vector width", {}, [](auto& b) { b.k.data = static_cast<char*>(b.k.data) + 2; },
       Code::kNotSupported, "buffers.k: address", Requirements{16, INT64_MAX}},
      {"stride vector width", [](auto& p) { p.q_layout.s_head = 129; p.q_layout.s_tok = 8 * 129; p.q_layout.s_batch = 16 * 129; },
       {}, Code::kNotSupported, "q_layout.s_head 129", Requirements{16, INT64_MAX}},
      {"out aliases q", {}, [](auto& b) { b.out.data = b.q.data; }, Code::kInvalidArgument,
       "buffers.out: overlaps buffers.q"},
      {"out aliases k tail", {}, [](auto& b) { b.out.data = static_cast<char*>(b.k.data) + b.k.bytes - 64; },
       Code::kInvalidArgument, "buffers.out: overlaps buffers.k"},
      {"lse aliases ctx", [](auto& p) { p.want_lse = 1; }, [](auto& b) { b.lse.data = b.context_lens.data; },
       Code::kInvalidArgument, "buffers.lse: overlaps buffers.context_lens"},
  };
  return rows;
}

TEST(RefusalTable, Shape) {
  for (const Row& r : shape_rows()) check_row(r);
}
TEST(RefusalTable, FormatsModesAndScalars) {
  for (const Row& r : format_rows()) check_row(r);
}
TEST(RefusalTable, LayoutsAndStrides) {
  for (const Row& r : layout_rows()) check_row(r);
}
TEST(RefusalTable, Buffers) {
  for (const Row& r : buffer_rows()) check_row(r);
}

// Accepted problems: the layouts of spec/operator.md §3 and edge shapes must not be refused.
void expect_accepted(const pacts_problem& p, const char* what, Requirements req = {}) {
  Storage storage(p);
  const Status s = validate(p, storage.buffers(), req);
  EXPECT_TRUE(s.is_ok()) << what << ": " << s.to_string();
}

TEST(Accepted, NamedLayouts) {
  pacts_problem p = base_problem();
  const int64_t P = p.page_size, H = p.num_kv_heads, D = p.head_dim;
  // HND.
  p.k_layout = {H * P * D, P * D, D, D, static_cast<int32_t>(D), 0};
  p.v_layout = p.k_layout;
  expect_accepted(p, "HND", {16, INT64_MAX});
  // x-packed K (bf16: 8 elements per 16 bytes) and dim-major V.
  p.k_layout = {H * D * P, D * P, 8, P * 8, 8, 0};
  p.v_layout = {H * D * P, D * P, 1, P, 1, 0};
  expect_accepted(p, "x-packed K, dim-major V");
  // Padded pool, K and V with different strides.
  p.k_layout = {H * P * (D + 64) + 512, P * (D + 64), D + 64, D, static_cast<int32_t>(D), 0};
  expect_accepted(p, "padded K");
}

TEST(Accepted, Mxfp4AndFp8PerToken) {
  pacts_problem p = base_problem();
  const int64_t P = p.page_size, H = p.num_kv_heads, D = p.head_dim;
  p.kv_format = PACTS_FORMAT_E2M1;
  p.k_scale_mode = p.v_scale_mode = PACTS_SCALE_MX_BLOCK;
  p.k_layout = {H * P * D / 2, P * D / 2, D / 2, D / 2, static_cast<int32_t>(D / 2), 0};
  p.v_layout = p.k_layout;
  p.k_scale_layout = {H * P * D / 32, P * D / 32, D / 32, 1};
  p.v_scale_layout = p.k_scale_layout;
  expect_accepted(p, "MXFP4 HND");
  pacts_problem f = base_problem();
  f.kv_format = PACTS_FORMAT_E4M3FNUZ;
  f.q_format = PACTS_FORMAT_E4M3FNUZ;
  f.q_scale = 0.25f;
  f.k_scale_mode = PACTS_SCALE_PER_TOKEN;
  f.v_scale_mode = PACTS_SCALE_PER_TENSOR;
  f.v_scale = 3.0f;
  f.k_scale_layout = {H * P, P, 1, 0};
  f.out_format = PACTS_FORMAT_FP32;
  f.want_lse = 1;
  f.has_sinks = 1;
  f.softcap = 30.0f;
  f.window = 128;
  expect_accepted(f, "fp8 per-token K, per-tensor V, every option");
}

TEST(Accepted, EdgeShapes) {
  expect_accepted(make_problem(0, 1, 1, 1, 64, 8, 0, 0), "empty batch");
  expect_accepted(make_problem(1, 16, 128, 2, 256, 256, 4, 4), "L 16, G 64, D 256, page 256");
  pacts_problem p = make_problem(2, 1, 4, 4, 64, 8, 3, 2);
  p.block_table_stride = 1000;  // a strided view into a larger block table
  expect_accepted(p, "strided block table");
}

// Changing one field at a time of a valid problem, the validator names the first failing check
// deterministically: a problem with two faults gets the same answer every time.
TEST(RefusalTable, FirstFaultWinsDeterministically) {
  pacts_problem p = base_problem();
  p.head_dim = 96;
  p.softmax_scale = kNaN;
  Storage storage(base_problem());
  const Status a = validate(p, storage.buffers());
  const Status b = validate(p, storage.buffers());
  EXPECT_STREQ(code_name(a.code()), "NotSupported");
  EXPECT_EQ(a.message(), b.message());
}

TEST(RequiredExtents, MatchLayouts) {
  const pacts_problem p = base_problem();
  const RequiredExtents e = required_extents(p);
  EXPECT_EQ(e.q, uint64_t{3} * 2 * 8 * 128 * 2);
  EXPECT_EQ(e.k, uint64_t{20} * 16 * 2 * 128 * 2);
  EXPECT_EQ(e.block_table, uint64_t{3} * 5 * 4);
  EXPECT_EQ(e.context_lens, 12u);
  EXPECT_EQ(e.lse, 0u);
  EXPECT_EQ(e.sinks, 0u);
}

}  // namespace
}  // namespace pacts::spec
