// PACTS-REFUSE: refusals and capabilities (spec/properties.md §8, spec/refusals.md).
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/property.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

constexpr uint8_t kGuard = 0xA5;

// One call of a case that a rule may break: the case's buffers (out and LSE filled with guard
// bytes), the descriptor and views the backend gets, and spare memory for views that must point
// elsewhere (misaligned, given but unused). Views point into this object: never copy it.
struct Call {
  explicit Call(const CaseData& c) : data(c), problem(c.problem) {
    std::fill(data.out.begin(), data.out.end(), kGuard);
    std::fill(data.lse.begin(), data.lse.end(), kGuard);
    spare.assign(data.out.size() + 64, kGuard);
    buffers = data.buffers();
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  CaseData data;
  std::vector<uint8_t> spare;
  pacts_problem problem;
  pacts_buffers buffers{};
  std::string field;  // set by a rule that picks one of several fields
};

// Every byte a refused call could write to: all of the call's memory.
struct Snapshot {
  explicit Snapshot(const Call& c) : data(c.data), spare(c.spare) {}
  CaseData data;
  std::vector<uint8_t> spare;
};

// The first buffer whose bytes differ from the snapshot, or "" when none does.
std::string written_buffer(const Call& c, const Snapshot& s) {
  const CaseData& a = c.data;
  const CaseData& b = s.data;
  const std::pair<const char*, bool> same[] = {
      {"out", a.out == b.out},     {"lse", a.lse == b.lse},
      {"q", a.q == b.q},           {"k", a.k == b.k},
      {"v", a.v == b.v},           {"k_scale", a.k_scale == b.k_scale},
      {"v_scale", a.v_scale == b.v_scale}, {"sinks", a.sinks == b.sinks},
      {"block_table", a.block_table == b.block_table},
      {"context_lens", a.context_lens == b.context_lens},
      {"a view placed elsewhere (misaligned or unused)", c.spare == s.spare}};
  for (const auto& [name, equal] : same)
    if (!equal) return name;
  return {};
}

pacts_view view_of(std::vector<uint8_t>& bytes, size_t offset, uint64_t size) {
  return {bytes.data() + offset, size};
}

// A row of spec/refusals.md §2: how to break it alone in a valid call, the documented code and
// the problem.h name the message must contain. `inside` (optional) sets the value just inside
// the rule, which must not be refused for it.
struct Rule {
  std::string rule;
  std::string field;
  spec::Code code;
  std::function<bool(Call&, uint64_t)> violate;  // false: cannot be broken alone in this case
  std::function<bool(Call&)> inside;
};

using spec::Code;

float bad_float(uint64_t seed) {
  static constexpr float kBad[] = {0.0f, -1.0f, NAN, INFINITY, -0.0f};
  return kBad[seed % 5];
}

// The stride of the first row-layout dimension with extent > 1, or nullptr.
int64_t* outer_row_stride(pacts_problem& p, pacts_row_layout& l) {
  if (p.num_q_heads > 1) return &l.s_head;
  if (p.q_len > 1) return &l.s_tok;
  if (p.batch > 1) return &l.s_batch;
  return nullptr;
}

struct NamedView {
  const char* name;  // problem.h's member name
  pacts_view* view;
  bool optional;     // absent unless the problem asks for it (scales, sinks, LSE)
};

std::vector<NamedView> named_views(pacts_buffers& b) {
  return {{"q", &b.q, false},         {"k", &b.k, false},
          {"v", &b.v, false},         {"out", &b.out, false},
          {"lse", &b.lse, true},      {"block_table", &b.block_table, false},
          {"context_lens", &b.context_lens, false}, {"sinks", &b.sinks, true},
          {"k_scale", &b.k_scale, true}, {"v_scale", &b.v_scale, true}};
}

std::vector<Rule> rules(const spec::Requirements& req) {
  std::vector<Rule> t;
  const auto add = [&t](std::string rule, std::string field, Code code,
                        std::function<bool(Call&, uint64_t)> violate,
                        std::function<bool(Call&)> inside = {}) {
    t.push_back({std::move(rule), std::move(field), code, std::move(violate), std::move(inside)});
  };
  // §2.1 Shape.
  add("abi_version is not PACTS_ABI_VERSION", "abi_version", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.abi_version = PACTS_ABI_VERSION + 1; return true; });
  add("batch < 0", "batch", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.batch = (s & 1) ? -1 : std::numeric_limits<int32_t>::min(); return true; });
  add("q_len < 1", "q_len", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.q_len = (s & 1) ? 0 : -3; return true; });
  add("q_len > 16", "q_len", Code::kOutOfRange,
      [](Call& c, uint64_t) { c.problem.q_len = 17; return true; });
  add("num_kv_heads < 1", "num_kv_heads", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.num_kv_heads = 0; return true; });
  add("num_q_heads < 1", "num_q_heads", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.num_q_heads = 0; return true; });
  add("num_q_heads not a multiple of num_kv_heads", "num_q_heads", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.num_kv_heads = c.problem.num_q_heads + 1; return true; });
  add("group size > 64", "num_q_heads", Code::kOutOfRange,
      [](Call& c, uint64_t) { c.problem.num_q_heads = c.problem.num_kv_heads * 65; return true; });
  add("head_dim not 64, 128 or 256", "head_dim", Code::kNotSupported,
      [](Call& c, uint64_t s) { c.problem.head_dim = (s & 1) ? 96 : 32; return true; });
  add("page_size not a power of two in 8..256", "page_size", Code::kNotSupported,
      [](Call& c, uint64_t s) {
        static constexpr int32_t kBad[] = {48, 512, 4, 0};
        c.problem.page_size = kBad[s % 4];
        return true;
      });
  add("num_pages < 0", "num_pages", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.num_pages = -1; return true; });
  add("max_pages_per_seq < 0", "max_pages_per_seq", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.max_pages_per_seq = -1; return true; });
  add("max_pages_per_seq * page_size > 2^31 - 1", "max_pages_per_seq", Code::kOutOfRange,
      [](Call& c, uint64_t) {
        c.problem.max_pages_per_seq = std::numeric_limits<int32_t>::max() / c.problem.page_size + 1;
        return true;
      });
  // §2.2 Formats and scale modes.
  // 12 lies inside pacts_format's value range (0..15) without naming a format: a C caller can
  // pass any int, but in C++ a value outside that range is undefined behaviour to load.
  add("a format field holds no pacts_format value", "q_format", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.q_format = static_cast<pacts_format>((s & 1) ? 12 : 0); return true; });
  add("q_format not bf16, fp16 or fp8", "q_format", Code::kNotSupported,
      [](Call& c, uint64_t s) { c.problem.q_format = (s & 1) ? PACTS_FORMAT_E2M1 : PACTS_FORMAT_FP32; return true; });
  add("kv_format not bf16, fp16, fp8 or e2m1", "kv_format", Code::kNotSupported,
      [](Call& c, uint64_t s) { c.problem.kv_format = (s & 1) ? PACTS_FORMAT_FP32 : PACTS_FORMAT_E8M0; return true; });
  add("out_format not bf16, fp16 or fp32", "out_format", Code::kNotSupported,
      [](Call& c, uint64_t) { c.problem.out_format = PACTS_FORMAT_E4M3FN; return true; });
  add("out_format holds no pacts_format value", "out_format", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.out_format = PACTS_FORMAT_INVALID; return true; });
  add("a scale mode holds no pacts_scale_mode value", "k_scale_mode", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.k_scale_mode = static_cast<pacts_scale_mode>(7); return true; });
  add("a scale mode the KV format cannot have", "v_scale_mode", Code::kInvalidArgument,
      [](Call& c, uint64_t) {
        const pacts_format f = c.problem.kv_format;
        c.problem.v_scale_mode = f == PACTS_FORMAT_E2M1                               ? PACTS_SCALE_NONE
                                 : (f == PACTS_FORMAT_BF16 || f == PACTS_FORMAT_FP16) ? PACTS_SCALE_PER_TOKEN
                                                                                      : PACTS_SCALE_MX_BLOCK;
        return true;
      });
  add("nibble_order not 0 or 1", "nibble_order", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.nibble_order = static_cast<pacts_nibble_order>(2); return true; });
  // §2.3 Scalars and options.
  add("softmax_scale not finite or <= 0", "softmax_scale", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.softmax_scale = bad_float(s); return true; },
      [](Call& c) { c.problem.softmax_scale = FLT_TRUE_MIN; return true; });
  add("q_scale not finite or <= 0", "q_scale", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.q_scale = bad_float(s); return true; },
      [](Call& c) { c.problem.q_scale = FLT_TRUE_MIN; return true; });
  add("k_scale not finite or <= 0 under per_tensor; other than 1 otherwise", "k_scale",
      Code::kInvalidArgument,
      [](Call& c, uint64_t s) {
        c.problem.k_scale = c.problem.k_scale_mode == PACTS_SCALE_PER_TENSOR ? bad_float(s) : 2.0f;
        return true;
      },
      [](Call& c) {
        c.problem.k_scale = c.problem.k_scale_mode == PACTS_SCALE_PER_TENSOR ? FLT_TRUE_MIN : 1.0f;
        return true;
      });
  add("v_scale not finite or <= 0 under per_tensor; other than 1 otherwise", "v_scale",
      Code::kInvalidArgument,
      [](Call& c, uint64_t s) {
        c.problem.v_scale = c.problem.v_scale_mode == PACTS_SCALE_PER_TENSOR ? bad_float(s) : 0.5f;
        return true;
      });
  add("softcap NaN, infinite or < 0", "softcap", Code::kInvalidArgument,
      [](Call& c, uint64_t s) {
        static constexpr float kBad[] = {-1.0f, NAN, INFINITY, -FLT_TRUE_MIN};
        c.problem.softcap = kBad[s % 4];
        return true;
      },
      [](Call& c) { c.problem.softcap = 0.0f; return true; });
  add("window < 0", "window", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.window = (s & 1) ? -1 : std::numeric_limits<int32_t>::min(); return true; },
      [](Call& c) { c.problem.window = 0; return true; });
  add("has_sinks not 0 or 1", "has_sinks", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.has_sinks = (s & 1) ? 2 : -1; return true; });
  add("want_lse not 0 or 1", "want_lse", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.want_lse = (s & 1) ? 2 : -1; return true; });
  // §2.4 Layouts and strides.
  add("a stride < 0", "_layout.s_", Code::kInvalidArgument, [](Call& c, uint64_t s) {
    pacts_problem& p = c.problem;
    const std::pair<const char*, int64_t*> strides[] = {{"q_layout.s_tok", &p.q_layout.s_tok},
                                                        {"out_layout.s_head", &p.out_layout.s_head},
                                                        {"k_layout.s_page", &p.k_layout.s_page},
                                                        {"v_layout.s_tok", &p.v_layout.s_tok}};
    const auto& [name, stride] = strides[s % 4];
    *stride = -1;
    c.field = name;
    return true;
  });
  add("output rows overlapping (strides do not nest)", "out_layout", Code::kInvalidArgument,
      [](Call& c, uint64_t) {
        int64_t* stride = outer_row_stride(c.problem, c.problem.out_layout);
        if (stride == nullptr) return false;  // one row: nothing can overlap
        *stride = c.problem.head_dim - 1;
        return true;
      });
  add("a pool's chunk < 1 or not dividing D", "v_layout.chunk", Code::kInvalidArgument,
      [](Call& c, uint64_t s) { c.problem.v_layout.chunk = (s & 1) ? 0 : 3; return true; });
  add("a K/V pool overlapping (strides do not nest)", "k_layout", Code::kInvalidArgument,
      [](Call& c, uint64_t) { c.problem.k_layout.s_tok = 0; return true; });
  add("a scale pool overlapping (strides do not nest)", "scale_layout", Code::kInvalidArgument,
      [](Call& c, uint64_t) {
        pacts_problem& p = c.problem;
        const auto pooled = [](pacts_scale_mode m) {
          return m == PACTS_SCALE_PER_TOKEN || m == PACTS_SCALE_MX_BLOCK;
        };
        if (pooled(p.k_scale_mode)) p.k_scale_layout.s_tok = 0;
        else if (pooled(p.v_scale_mode)) p.v_scale_layout.s_tok = 0;
        else return false;
        return true;
      });
  add("a view spanning more than 2^56 units", "v_layout", Code::kOutOfRange, [](Call& c, uint64_t) {
    if (c.problem.num_pages < 2) return false;
    c.problem.v_layout.s_page = int64_t{1} << 60;
    return true;
  });
  add("block_table_stride < max_pages_per_seq when B > 1", "block_table_stride",
      Code::kInvalidArgument, [](Call& c, uint64_t) {
        if (c.problem.batch < 2 || c.problem.max_pages_per_seq < 1) return false;
        c.problem.block_table_stride = c.problem.max_pages_per_seq - 1;
        return true;
      });
  add("a view's largest offset beyond max_element_offset", "q_layout", Code::kOutOfRange,
      [req](Call& c, uint64_t) {
        // Only a backend that declares a limit (spec/refusals.md §4) can be asked this.
        if (req.max_element_offset >= (int64_t{1} << 55) || c.problem.batch < 2) return false;
        c.problem.q_layout.s_batch = std::max(req.max_element_offset, c.problem.q_layout.s_batch);
        return true;
      });
  // §2.5 Buffers.
  add("a needed buffer is null", "buffers.", Code::kInvalidArgument, [](Call& c, uint64_t s) {
    std::vector<NamedView> present;
    for (const NamedView& v : named_views(c.buffers))
      if (v.view->data != nullptr) present.push_back(v);
    if (present.empty()) return false;
    const NamedView& v = present[s % present.size()];
    *v.view = pacts_view{};
    c.field = std::string("buffers.") + v.name;
    return true;
  });
  add("a buffer given that the problem does not use", "buffers.", Code::kInvalidArgument,
      [](Call& c, uint64_t) {
        for (const NamedView& v : named_views(c.buffers))
          if (v.view->data == nullptr && v.optional) {
            *v.view = view_of(c.spare, 0, 16);
            c.field = std::string("buffers.") + v.name;
            return true;
          }
        return false;
      });
  add("a view shorter than its layout's extent", "buffers.", Code::kOutOfRange,
      [](Call& c, uint64_t s) {
        const NamedView v = named_views(c.buffers)[s % 6];  // q, k, v, out, lse, block_table
        if (v.view->bytes == 0) return false;
        v.view->bytes -= 1;
        c.field = std::string("buffers.") + v.name;
        return true;
      });
  add("out not aligned to its element size", "buffers.out", Code::kInvalidArgument,
      [](Call& c, uint64_t) {
        if (c.buffers.out.data == nullptr) return false;
        c.buffers.out = view_of(c.spare, 1, c.buffers.out.bytes);
        return true;
      });
  add("block_table not aligned to 4 bytes", "buffers.block_table", Code::kInvalidArgument,
      [](Call& c, uint64_t) {
        if (c.buffers.block_table.data == nullptr || c.buffers.block_table.bytes + 2 > c.spare.size())
          return false;
        c.buffers.block_table = view_of(c.spare, 2, c.buffers.block_table.bytes);
        return true;
      });
  add("out aliasing q", "buffers.out", Code::kInvalidArgument, [](Call& c, uint64_t) {
    if (c.buffers.out.data == nullptr || c.buffers.q.data == nullptr) return false;
    // q's allocation grows to hold the output view, so that a backend that writes anyway stays
    // inside memory this call owns (the extra bytes are an unread view tail of q).
    const uint64_t out_bytes = c.buffers.out.bytes;
    if (c.data.q.size() < out_bytes) c.data.q.resize(out_bytes, 0);
    c.buffers.q = {c.data.q.data(), c.data.q.size()};
    c.buffers.out = {c.data.q.data(), out_bytes};
    return true;
  });
  add("lse overlapping out", "buffers.lse", Code::kInvalidArgument, [](Call& c, uint64_t) {
    if (c.buffers.out.data == nullptr || c.buffers.lse.data == nullptr ||
        c.buffers.lse.bytes > c.buffers.out.bytes)
      return false;
    c.buffers.lse.data = c.buffers.out.data;
    return true;
  });
  add("q not aligned to the implementation's vector width", "buffers.q", Code::kNotSupported,
      [req](Call& c, uint64_t) {
        const int eb = spec::element_bytes(c.problem.q_format);
        if (req.vector_alignment_bytes <= static_cast<uint32_t>(eb) || c.buffers.q.data == nullptr)
          return false;
        c.spare.assign(c.buffers.q.bytes + 64, 0);
        std::copy(c.data.q.begin(), c.data.q.end(), c.spare.begin() + eb);
        c.buffers.q = view_of(c.spare, static_cast<size_t>(eb), c.buffers.q.bytes);
        return true;
      });
  return t;
}

std::string status_text(const spec::Status& s) { return s.is_ok() ? "Ok" : s.to_string(); }

// --- REFUSE-1 --------------------------------------------------------------------------------

Outcome refusals_are_documented(PropertyContext& ctx, const CaseSpec& spec) {
  const CaseData base = spec.build();
  const spec::Requirements& req = ctx.backend.capabilities().requirements;
  const std::vector<Rule> table = rules(req);
  int64_t checked = 0, inside_checked = 0;
  std::vector<std::string> not_applicable;
  for (size_t r = 0; r < table.size(); ++r) {
    const Rule& rule = table[r];
    const uint64_t variant = spec.seed >> (r % 32);
    Call call(base);
    if (!rule.violate(call, variant)) {
      not_applicable.push_back(rule.rule);
      continue;
    }
    const spec::Status want = spec::validate(call.problem, call.buffers, req);
    if (want.is_ok() || want.code() != rule.code)
      return Outcome::fail("'" + rule.rule + "': spec::validate gives " + status_text(want) +
                           " where spec/refusals.md documents " + spec::code_name(rule.code) +
                           " (the table and the validator disagree)");
    const Snapshot before(call);
    const RunResult got = ctx.backend.run(call.problem, call.buffers, PlanHint::automatic());
    const std::string where = "'" + rule.rule + "' (expected " + want.to_string() + "): ";
    if (got.status.is_ok() || got.status.code() != want.code())
      return Outcome::fail(where + "the backend returned " + status_text(got.status));
    const std::string& field = call.field.empty() ? rule.field : call.field;
    if (got.status.message().find(field) == std::string::npos)
      return Outcome::fail(where + "the message does not name '" + field + "': " +
                           got.status.message());
    if (const std::string w = written_buffer(call, before); !w.empty())
      return Outcome::fail(where + "the refused call wrote into " + w);
    if (got.device_error != 0)
      return Outcome::fail(where + "the refused call set the device error word to " +
                           std::to_string(got.device_error));
    ++checked;
    if (!rule.inside) continue;
    // The value just inside the rule: any answer but a refusal naming the field.
    Call inside(base);
    if (!rule.inside(inside)) continue;
    const RunResult ok = ctx.backend.run(inside.problem, inside.buffers, PlanHint::automatic());
    if (!ok.status.is_ok() && ok.status.message().find(rule.field) != std::string::npos)
      return Outcome::fail("'" + rule.rule + "': the value just inside the rule was refused: " +
                           ok.status.to_string());
    ++inside_checked;
  }
  std::ostringstream detail;
  detail << checked << " rules refused as documented, " << inside_checked
         << " accepted just inside; not applicable to this case: " << not_applicable.size();
  return {Verdict::kPass, detail.str(), 0};
}

// --- REFUSE-2 --------------------------------------------------------------------------------

template <class T>
bool offers(const std::vector<T>& items, T x) {
  return std::find(items.begin(), items.end(), x) != items.end();
}

bool is_16bit(pacts_format f) { return f == PACTS_FORMAT_BF16 || f == PACTS_FORMAT_FP16; }

void drop_overrides(CaseSpec& s, bool keep_query) {
  std::erase_if(s.overrides, [keep_query](const Override& o) {
    return !(keep_query && o.tensor == Override::Tensor::kQ);
  });
}

// A scale mode the KV format can have (spec/formats.md §3), keeping the case's where it can.
pacts_scale_mode compatible_mode(pacts_format kv, pacts_scale_mode m) {
  if (kv == PACTS_FORMAT_E2M1) return PACTS_SCALE_MX_BLOCK;
  if (m == PACTS_SCALE_MX_BLOCK || (is_16bit(kv) && m == PACTS_SCALE_PER_TOKEN)) return PACTS_SCALE_NONE;
  return m;
}

void set_kv_format(CaseShape& sh, pacts_format kv) {
  sh.kv_format = kv;
  sh.k_scale_mode = compatible_mode(kv, sh.k_scale_mode);
  sh.v_scale_mode = compatible_mode(kv, sh.v_scale_mode);
}

struct Beyond {
  std::string axis;
  CaseSpec spec;
};

// Valid problems just beyond each capability the backend does not declare: one per axis.
std::vector<Beyond> beyond_capabilities(const Capabilities& caps, const CaseSpec& spec) {
  std::vector<Beyond> out;
  const auto add = [&](std::string axis, const std::function<void(CaseSpec&)>& change) {
    CaseSpec s = spec;
    change(s);
    out.push_back({std::move(axis), std::move(s)});
  };
  for (pacts_format f : {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN,
                         PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ})
    if (!offers(caps.q_formats, f)) {
      add("q_format " + std::string(spec::format_name(f)),
          [f](CaseSpec& s) { s.shape.q_format = f; drop_overrides(s, false); });
      break;
    }
  for (pacts_format f : {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN,
                         PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ,
                         PACTS_FORMAT_E2M1})
    if (!offers(caps.kv_formats, f)) {
      add("kv_format " + std::string(spec::format_name(f)),
          [f](CaseSpec& s) { set_kv_format(s.shape, f); drop_overrides(s, true); });
      break;
    }
  for (pacts_format f : {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_FP32})
    if (!offers(caps.out_formats, f)) {
      add("out_format " + std::string(spec::format_name(f)), [f](CaseSpec& s) { s.shape.out_format = f; });
      break;
    }
  for (pacts_scale_mode m : {PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR, PACTS_SCALE_PER_TOKEN,
                             PACTS_SCALE_MX_BLOCK})
    if (!offers(caps.scale_modes, m))
      add("scale mode " + std::to_string(static_cast<int>(m)), [m](CaseSpec& s) {
        CaseShape& sh = s.shape;
        if (m == PACTS_SCALE_MX_BLOCK) set_kv_format(sh, PACTS_FORMAT_E2M1);
        else if (sh.kv_format == PACTS_FORMAT_E2M1 || (m == PACTS_SCALE_PER_TOKEN && is_16bit(sh.kv_format)))
          set_kv_format(sh, PACTS_FORMAT_E4M3FN);
        sh.k_scale_mode = m;
        if (m == PACTS_SCALE_MX_BLOCK) sh.v_scale_mode = m;
        drop_overrides(s, true);
      });
  for (int32_t d : {64, 128, 256})
    if (!offers(caps.head_dims, d)) {
      add("head_dim " + std::to_string(d), [d](CaseSpec& s) { s.shape.head_dim = d; drop_overrides(s, false); });
      break;
    }
  if (caps.min_page_size / 2 >= 8)
    add("page_size " + std::to_string(caps.min_page_size / 2),
        [&caps](CaseSpec& s) { s.shape.page_size = caps.min_page_size / 2; });
  if (caps.max_page_size * 2 <= 256)
    add("page_size " + std::to_string(caps.max_page_size * 2),
        [&caps](CaseSpec& s) { s.shape.page_size = caps.max_page_size * 2; });
  if (caps.max_q_len < 16)
    add("q_len " + std::to_string(caps.max_q_len + 1),
        [&caps](CaseSpec& s) { s.shape.q_len = caps.max_q_len + 1; });
  if (caps.max_group < 64)
    add("group size " + std::to_string(caps.max_group + 1), [&caps](CaseSpec& s) {
      s.shape.num_q_heads = s.shape.num_kv_heads * (caps.max_group + 1);
      drop_overrides(s, false);
    });
  if (!caps.chunked_layouts)
    add("x-packed K layout", [](CaseSpec& s) { s.shape.k_layout = PoolLayout::kXPackedK; });
  if (!caps.sinks) add("sinks", [](CaseSpec& s) { s.shape.sinks = true; });
  if (!caps.window) add("window", [](CaseSpec& s) { s.shape.window = 1; });
  if (!caps.softcap) add("softcap", [](CaseSpec& s) { s.shape.softcap = 30; });
  if (!caps.lse) add("want_lse", [](CaseSpec& s) { s.shape.lse = true; });
  return out;
}

bool all_guard(const std::vector<uint8_t>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == kGuard; });
}

Outcome unsupported_is_not_wrong(PropertyContext& ctx, const CaseSpec& spec) {
  const Capabilities& caps = ctx.backend.capabilities();
  // A problem within the declared capabilities is never refused as NotSupported.
  const CaseData c = spec.build();
  std::string in_caps = "the case is outside the declared capabilities";
  if (check_capabilities(caps, c.problem).is_ok()) {
    const Observed got = observe(ctx.backend, c, {}, kGuard);
    if (!got.run.status.is_ok())
      return Outcome::fail("a problem within the declared capabilities was refused: " +
                           got.run.status.to_string());
    in_caps = "the case itself was answered";
  }
  int64_t refused = 0;
  for (const Beyond& b : beyond_capabilities(caps, spec)) {
    const CaseData x = b.spec.build();
    if (!spec::validate_problem(x.problem).is_ok() || check_capabilities(caps, x.problem).is_ok())
      continue;  // the axis cannot be crossed from this case
    const Observed got = observe(ctx.backend, x, {}, kGuard);
    const std::string where = "beyond the capabilities (" + b.axis + "): ";
    if (got.run.status.code() != spec::Code::kNotSupported)
      return Outcome::fail(where + "expected NotSupported, got " + status_text(got.run.status));
    if (!all_guard(got.out) || !all_guard(got.lse))
      return Outcome::fail(where + "refused, but wrote into the output or LSE view");
    if (got.run.device_error != 0)
      return Outcome::fail(where + "refused, but set the device error word");
    ++refused;
  }
  const std::string detail =
      refused == 0 ? in_caps + "; the backend declares every capability this case can cross"
                   : in_caps + "; " + std::to_string(refused) + " problems beyond the capabilities refused";
  return {Verdict::kPass, detail, 0};
}

}  // namespace

std::vector<Property> refuse_properties() {
  // Refused calls cost nothing; the few accepted ones (just inside a rule) are full decodes.
  GenLimits limits;
  limits.max_reference_work = int64_t{1} << 19;
  // REFUSE-2 needs problems the backend does not claim as well as those it does.
  GenLimits outside_capabilities = limits;
  outside_capabilities.follow_capabilities = false;
  return {
      make_property("PACTS-REFUSE-1", "RefusalsAreDocumented", Level::kMandatory, true, limits, refusals_are_documented),
      make_property("PACTS-REFUSE-2", "UnsupportedIsNotWrong", Level::kMandatory, false,
                    outside_capabilities, unsupported_is_not_wrong),
  };
}

}  // namespace pacts::conformance
