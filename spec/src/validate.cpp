// spec/refusals.md as code. Each check returns the first refusal it finds; the order of the
// checks is the order of spec/refusals.md §2 so that a problem with several faults always gets
// the same answer.
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace pacts::spec {
namespace {

template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

bool is_known_format(pacts_format f) { return format_info(f) != nullptr; }

bool is_fp8(pacts_format f) {
  return f == PACTS_FORMAT_E4M3FN || f == PACTS_FORMAT_E4M3FNUZ || f == PACTS_FORMAT_E5M2 ||
         f == PACTS_FORMAT_E5M2FNUZ;
}

bool is_16bit(pacts_format f) { return f == PACTS_FORMAT_BF16 || f == PACTS_FORMAT_FP16; }

bool is_power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// --- shape -------------------------------------------------------------------------------

Status check_shape(const pacts_problem& p) {
  if (p.abi_version != PACTS_ABI_VERSION)
    return invalid_argument(cat("abi_version ", p.abi_version, ": this library implements ",
                                PACTS_ABI_VERSION));
  if (p.batch < 0) return invalid_argument(cat("batch ", p.batch, ": must be >= 0"));
  if (p.q_len < 1) return invalid_argument(cat("q_len ", p.q_len, ": must be >= 1"));
  if (p.q_len > 16) return out_of_range(cat("q_len ", p.q_len, ": supported query lengths are 1 to 16"));
  if (p.num_kv_heads < 1)
    return invalid_argument(cat("num_kv_heads ", p.num_kv_heads, ": must be >= 1"));
  if (p.num_q_heads < 1)
    return invalid_argument(cat("num_q_heads ", p.num_q_heads, ": must be >= 1"));
  if (p.num_q_heads % p.num_kv_heads != 0)
    return invalid_argument(cat("num_q_heads ", p.num_q_heads,
                                ": must be a multiple of num_kv_heads ", p.num_kv_heads));
  const int32_t group = p.num_q_heads / p.num_kv_heads;
  if (group > 64)
    return out_of_range(cat("group size num_q_heads/num_kv_heads ", group,
                            ": supported group sizes are 1 to 64"));
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return not_supported(cat("head_dim ", p.head_dim, ": supported head dims are 64, 128, 256"));
  if (!is_power_of_two(p.page_size) || p.page_size < 8 || p.page_size > 256)
    return not_supported(cat("page_size ", p.page_size,
                             ": supported page sizes are powers of two from 8 to 256"));
  if (p.num_pages < 0) return invalid_argument(cat("num_pages ", p.num_pages, ": must be >= 0"));
  if (p.max_pages_per_seq < 0)
    return invalid_argument(cat("max_pages_per_seq ", p.max_pages_per_seq, ": must be >= 0"));
  if (int64_t{p.max_pages_per_seq} * p.page_size > std::numeric_limits<int32_t>::max())
    return out_of_range(cat("max_pages_per_seq ", p.max_pages_per_seq, " x page_size ",
                            p.page_size, ": context positions must fit in int32 (<= 2147483647)"));
  return Status::ok();
}

// --- formats and scale modes ---------------------------------------------------------------

Status check_format(const char* field, pacts_format f, bool accepted, const char* accepted_list) {
  if (!is_known_format(f))
    return invalid_argument(cat(field, " ", static_cast<int>(f), ": not a pacts_format value"));
  if (!accepted)
    return not_supported(cat(field, " ", format_name(f), ": accepted formats are ", accepted_list));
  return Status::ok();
}

Status check_scale_mode(const char* field, pacts_scale_mode mode, pacts_format kv) {
  if (mode < PACTS_SCALE_NONE || mode > PACTS_SCALE_MX_BLOCK)
    return invalid_argument(cat(field, " ", static_cast<int>(mode), ": not a pacts_scale_mode value"));
  const bool ok = (kv == PACTS_FORMAT_E2M1) ? mode == PACTS_SCALE_MX_BLOCK
                  : is_16bit(kv) ? (mode == PACTS_SCALE_NONE || mode == PACTS_SCALE_PER_TENSOR)
                                 : (mode != PACTS_SCALE_MX_BLOCK);
  if (ok) return Status::ok();
  static constexpr std::array<const char*, 4> kNames = {"none", "per_tensor", "per_token", "mx_block"};
  const char* accepted = kv == PACTS_FORMAT_E2M1 ? "mx_block"
                         : is_16bit(kv)          ? "none or per_tensor"
                                                 : "none, per_tensor or per_token";
  return invalid_argument(cat(field, " ", kNames[static_cast<size_t>(mode)], ": kv_format ",
                              format_name(kv), " accepts ", accepted));
}

Status check_positive_scalar(const char* field, float value) {
  if (!std::isfinite(value) || !(value > 0.0f))
    return invalid_argument(cat(field, " ", value, ": must be finite and > 0"));
  return Status::ok();
}

// A per-tensor scale that the scale mode ignores is a caller mistake (a scale passed but never
// applied was a real review finding): it must be left at 1.
Status check_tensor_scale(const char* field, float value, pacts_scale_mode mode) {
  if (mode == PACTS_SCALE_PER_TENSOR) return check_positive_scalar(field, value);
  if (value != 1.0f)
    return invalid_argument(cat(field, " ", value,
                                ": only per_tensor scale mode uses it; leave it at 1"));
  return Status::ok();
}

Status check_formats_and_scalars(const pacts_problem& p) {
  if (Status s = check_format("q_format", p.q_format, is_16bit(p.q_format) || is_fp8(p.q_format),
                              "bf16, fp16, e4m3fn, e4m3fnuz, e5m2, e5m2fnuz");
      !s)
    return s;
  if (Status s = check_format("kv_format", p.kv_format,
                              is_16bit(p.kv_format) || is_fp8(p.kv_format) ||
                                  p.kv_format == PACTS_FORMAT_E2M1,
                              "bf16, fp16, e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e2m1");
      !s)
    return s;
  if (Status s = check_format("out_format", p.out_format,
                              is_16bit(p.out_format) || p.out_format == PACTS_FORMAT_FP32,
                              "bf16, fp16, fp32");
      !s)
    return s;
  if (Status s = check_scale_mode("k_scale_mode", p.k_scale_mode, p.kv_format); !s) return s;
  if (Status s = check_scale_mode("v_scale_mode", p.v_scale_mode, p.kv_format); !s) return s;
  if (p.nibble_order != PACTS_NIBBLE_LOW_FIRST && p.nibble_order != PACTS_NIBBLE_HIGH_FIRST)
    return invalid_argument(cat("nibble_order ", static_cast<int>(p.nibble_order),
                                ": accepted values are low_first (0) and high_first (1)"));
  if (Status s = check_positive_scalar("softmax_scale", p.softmax_scale); !s) return s;
  if (Status s = check_positive_scalar("q_scale", p.q_scale); !s) return s;
  if (Status s = check_tensor_scale("k_scale", p.k_scale, p.k_scale_mode); !s) return s;
  if (Status s = check_tensor_scale("v_scale", p.v_scale, p.v_scale_mode); !s) return s;
  if (!std::isfinite(p.softcap) || p.softcap < 0.0f)
    return invalid_argument(cat("softcap ", p.softcap, ": must be 0 (none) or finite and > 0"));
  if (p.window < 0) return invalid_argument(cat("window ", p.window, ": must be 0 (none) or >= 1"));
  if (p.has_sinks != 0 && p.has_sinks != 1)
    return invalid_argument(cat("has_sinks ", p.has_sinks, ": must be 0 or 1"));
  if (p.want_lse != 0 && p.want_lse != 1)
    return invalid_argument(cat("want_lse ", p.want_lse, ": must be 0 or 1"));
  return Status::ok();
}

// --- strides -------------------------------------------------------------------------------

// One dimension of a strided view: `extent` indices, `stride` units apart.
struct Dim {
  const char* name;
  int64_t extent;
  int64_t stride;
};

// Spans beyond 2^56 units are refused (OutOfRange): byte extents of 4-byte units then stay far
// below 2^64, so no later size computation can wrap.
constexpr int64_t kMaxSpan = int64_t{1} << 56;

// A strided view is accepted when its dimensions, sorted by stride, nest: each stride is at least
// the span of all smaller dimensions (spec/refusals.md §2.4). This proves every index tuple has
// its own address. `inner` units starting at each address are contiguous. Fills `span` with the
// largest offset reached plus one.
Status check_nesting(const char* view, int64_t inner, std::vector<Dim> dims, int64_t& span) {
  for (const Dim& d : dims)
    if (d.stride < 0)
      return invalid_argument(cat(view, ".", d.name, " ", d.stride, ": strides must be >= 0"));
  std::erase_if(dims, [](const Dim& d) { return d.extent <= 1; });
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  span = inner;
  for (const Dim& d : dims) {
    if (d.stride < span)
      return invalid_argument(cat(view, ".", d.name, " ", d.stride, ": overlaps the dimensions ",
                                  "inside it, which span ", span, "; strides must nest"));
    if (d.extent - 1 > (kMaxSpan - span) / d.stride)
      return out_of_range(cat(view, ".", d.name, " ", d.stride, " x ", d.extent,
                              ": the view spans more than 2^56 units"));
    span += (d.extent - 1) * d.stride;
  }
  return Status::ok();
}

Status check_rows(const char* view, const pacts_problem& p, const pacts_row_layout& l,
                  int64_t inner, int64_t& span) {
  return check_nesting(view, inner,
                       {{"s_head", p.num_q_heads, l.s_head},
                        {"s_tok", p.q_len, l.s_tok},
                        {"s_batch", p.batch, l.s_batch}},
                       span);
}

Status check_pool(const char* view, const pacts_problem& p, const pacts_pool_layout& l,
                  int64_t& span) {
  // e2m1 pools are addressed in bytes over the byte index d/2.
  const int64_t units = p.kv_format == PACTS_FORMAT_E2M1 ? p.head_dim / 2 : p.head_dim;
  if (l.chunk < 1 || units % l.chunk != 0)
    return invalid_argument(cat(view, ".chunk ", l.chunk, ": must divide ",
                                p.kv_format == PACTS_FORMAT_E2M1 ? "head_dim/2 bytes " : "head_dim ",
                                units));
  return check_nesting(view, l.chunk,
                       {{"s_chunk", units / l.chunk, l.s_chunk},
                        {"s_tok", p.page_size, l.s_tok},
                        {"s_head", p.num_kv_heads, l.s_head},
                        {"s_page", p.num_pages, l.s_page}},
                       span);
}

Status check_scale_pool(const char* view, const pacts_problem& p, pacts_scale_mode mode,
                        const pacts_scale_layout& l, int64_t& span) {
  span = 0;
  if (mode != PACTS_SCALE_PER_TOKEN && mode != PACTS_SCALE_MX_BLOCK) return Status::ok();
  const int64_t blocks = mode == PACTS_SCALE_MX_BLOCK ? p.head_dim / 32 : 1;
  return check_nesting(view, 1,
                       {{"s_block", blocks, l.s_block},
                        {"s_tok", p.page_size, l.s_tok},
                        {"s_head", p.num_kv_heads, l.s_head},
                        {"s_page", p.num_pages, l.s_page}},
                       span);
}

Status check_offset_limit(const char* view, int64_t span, const Requirements& req) {
  if (span > 0 && span - 1 > req.max_element_offset)
    return out_of_range(cat(view, ": largest offset ", span - 1,
                            " exceeds what this implementation addresses (",
                            req.max_element_offset, ")"));
  return Status::ok();
}

Status check_layouts(const pacts_problem& p, const Requirements& req) {
  int64_t span = 0;
  if (Status s = check_rows("q_layout", p, p.q_layout, p.head_dim, span); !s) return s;
  if (Status s = check_offset_limit("q_layout", span, req); !s) return s;
  if (Status s = check_rows("out_layout", p, p.out_layout, p.head_dim, span); !s) return s;
  if (Status s = check_offset_limit("out_layout", span, req); !s) return s;
  if (p.want_lse) {
    if (Status s = check_rows("lse_layout", p, p.lse_layout, 1, span); !s) return s;
    if (Status s = check_offset_limit("lse_layout", span, req); !s) return s;
  }
  if (Status s = check_pool("k_layout", p, p.k_layout, span); !s) return s;
  if (Status s = check_offset_limit("k_layout", span, req); !s) return s;
  if (Status s = check_pool("v_layout", p, p.v_layout, span); !s) return s;
  if (Status s = check_offset_limit("v_layout", span, req); !s) return s;
  if (Status s = check_scale_pool("k_scale_layout", p, p.k_scale_mode, p.k_scale_layout, span); !s)
    return s;
  if (Status s = check_offset_limit("k_scale_layout", span, req); !s) return s;
  if (Status s = check_scale_pool("v_scale_layout", p, p.v_scale_mode, p.v_scale_layout, span); !s)
    return s;
  if (Status s = check_offset_limit("v_scale_layout", span, req); !s) return s;
  if (p.batch > 1 && p.block_table_stride < p.max_pages_per_seq)
    return invalid_argument(cat("block_table_stride ", p.block_table_stride,
                                ": must be >= max_pages_per_seq ", p.max_pages_per_seq));
  if (p.batch > 1 && p.block_table_stride > kMaxSpan / p.batch)
    return out_of_range(cat("block_table_stride ", p.block_table_stride,
                            ": the block table spans more than 2^56 entries"));
  if (p.batch > 1) span = (p.batch - 1) * p.block_table_stride + p.max_pages_per_seq;
  if (Status s = check_offset_limit("block_table_stride", span, req); !s) return s;
  return Status::ok();
}

// --- buffers ----------------------------------------------------------------------------------

struct NamedView {
  const char* name;
  const pacts_view* view;
  uint64_t required;   // bytes the layout reaches; 0 = the buffer is not used
  uint32_t align;      // element alignment in bytes
  bool written;
};

Status check_view(const NamedView& v, const Requirements& req) {
  const auto addr = reinterpret_cast<uintptr_t>(v.view->data);
  if (v.required == 0) {
    if (v.view->data != nullptr && v.view->bytes != 0)
      return invalid_argument(cat("buffers.", v.name, ": given, but the problem does not use it ",
                                  "(check the scale mode, has_sinks or want_lse)"));
    return Status::ok();
  }
  if (v.view->data == nullptr)
    return invalid_argument(cat("buffers.", v.name, ": null, but the problem reads ",
                                v.required, " bytes"));
  if (v.view->bytes < v.required)
    return out_of_range(cat("buffers.", v.name, ": the layout reaches byte ", v.required,
                            " but the view holds ", v.view->bytes));
  if (addr % v.align != 0)
    return invalid_argument(cat("buffers.", v.name, ": address 0x", std::hex, addr,
                                std::dec, " is not aligned to its element size ", v.align));
  if (req.vector_alignment_bytes > 1 && addr % req.vector_alignment_bytes != 0)
    return not_supported(cat("buffers.", v.name, ": address 0x", std::hex, addr, std::dec,
                             " is not aligned to this implementation's vector width of ",
                             req.vector_alignment_bytes, " bytes"));
  return Status::ok();
}

bool overlaps(const NamedView& a, const NamedView& b) {
  if (a.required == 0 || b.required == 0) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.view->data);
  const auto b0 = reinterpret_cast<uintptr_t>(b.view->data);
  return a0 < b0 + b.required && b0 < a0 + a.required;
}

// Every stride that separates contiguous runs must keep the runs on the vector width.
Status check_vector_strides(const pacts_problem& p, const Requirements& req) {
  const uint32_t w = req.vector_alignment_bytes;
  if (w <= 1) return Status::ok();
  const auto misaligned = [&](const char* field, int64_t stride, int64_t bytes_per_unit) {
    return (stride * bytes_per_unit) % w != 0
               ? not_supported(cat(field, " ", stride, ": ", stride * bytes_per_unit,
                                   " bytes is not a multiple of this implementation's vector ",
                                   "width of ", w, " bytes"))
               : Status::ok();
  };
  const int64_t qb = element_bytes(p.q_format), ob = element_bytes(p.out_format);
  const int64_t kvb = p.kv_format == PACTS_FORMAT_E2M1 ? 1 : element_bytes(p.kv_format);
  const std::array<std::pair<const char*, std::pair<int64_t, int64_t>>, 14> strides = {{
      {"q_layout.s_batch", {p.q_layout.s_batch, qb}},   {"q_layout.s_tok", {p.q_layout.s_tok, qb}},
      {"q_layout.s_head", {p.q_layout.s_head, qb}},     {"out_layout.s_batch", {p.out_layout.s_batch, ob}},
      {"out_layout.s_tok", {p.out_layout.s_tok, ob}},   {"out_layout.s_head", {p.out_layout.s_head, ob}},
      {"k_layout.s_page", {p.k_layout.s_page, kvb}},    {"k_layout.s_head", {p.k_layout.s_head, kvb}},
      {"k_layout.s_tok", {p.k_layout.s_tok, kvb}},      {"k_layout.s_chunk", {p.k_layout.s_chunk, kvb}},
      {"v_layout.s_page", {p.v_layout.s_page, kvb}},    {"v_layout.s_head", {p.v_layout.s_head, kvb}},
      {"v_layout.s_tok", {p.v_layout.s_tok, kvb}},      {"v_layout.s_chunk", {p.v_layout.s_chunk, kvb}},
  }};
  for (const auto& [field, sb] : strides)
    if (Status s = misaligned(field, sb.first, sb.second); !s) return s;
  return Status::ok();
}

}  // namespace

Status validate_problem(const pacts_problem& problem, const Requirements& req) {
  if (Status s = check_shape(problem); !s) return s;
  if (Status s = check_formats_and_scalars(problem); !s) return s;
  if (Status s = check_layouts(problem, req); !s) return s;
  return check_vector_strides(problem, req);
}

Status validate(const pacts_problem& problem, const pacts_buffers& buffers,
                const Requirements& req) {
  if (Status s = validate_problem(problem, req); !s) return s;
  const RequiredExtents e = required_extents(problem);
  const auto eb = [](pacts_format f) { return static_cast<uint32_t>(std::max(element_bytes(f), 1)); };
  const uint32_t kv_align = eb(problem.kv_format);
  const uint32_t k_scale_align = problem.k_scale_mode == PACTS_SCALE_PER_TOKEN ? 4 : 1;
  const uint32_t v_scale_align = problem.v_scale_mode == PACTS_SCALE_PER_TOKEN ? 4 : 1;
  const std::array<NamedView, 10> views = {{
      {"q", &buffers.q, e.q, eb(problem.q_format), false},
      {"k", &buffers.k, e.k, kv_align, false},
      {"v", &buffers.v, e.v, kv_align, false},
      {"k_scale", &buffers.k_scale, e.k_scale, k_scale_align, false},
      {"v_scale", &buffers.v_scale, e.v_scale, v_scale_align, false},
      {"block_table", &buffers.block_table, e.block_table, 4, false},
      {"context_lens", &buffers.context_lens, e.context_lens, 4, false},
      {"sinks", &buffers.sinks, e.sinks, 4, false},
      {"out", &buffers.out, e.out, eb(problem.out_format), true},
      {"lse", &buffers.lse, e.lse, 4, true},
  }};
  for (const NamedView& v : views) {
    // Only the scalable arrays must sit on the vector width; small int32/fp32 arrays need not.
    Requirements r = req;
    const std::string_view n = v.name;
    if (n != "q" && n != "k" && n != "v" && n != "out") r.vector_alignment_bytes = 1;
    if (Status s = check_view(v, r); !s) return s;
  }
  for (const NamedView& w : views) {
    if (!w.written) continue;
    for (const NamedView& other : views) {
      if (&other == &w) continue;
      if (overlaps(w, other))
        return invalid_argument(cat("buffers.", w.name, ": overlaps buffers.", other.name,
                                    "; outputs must not alias any other buffer"));
    }
  }
  return Status::ok();
}

}  // namespace pacts::spec
