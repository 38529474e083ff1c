#include <pacts/conformance/backend.h>
#include <pacts/reference/decode.h>
#include <pacts/spec/formats.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace pacts::conformance {
namespace {

template <class T>
bool contains(const std::vector<T>& items, T x) {
  return std::find(items.begin(), items.end(), x) != items.end();
}

template <class T>
std::string list(const std::vector<T>& items, std::string (*name)(T)) {
  std::string s;
  for (const T& x : items) s += (s.empty() ? "" : ", ") + name(x);
  return s.empty() ? "none" : s;
}

std::string fmt_name(pacts_format f) { return std::string(spec::format_name(f)); }
std::string int_name(int32_t x) { return std::to_string(x); }
std::string mode_name(pacts_scale_mode m) {
  static const char* const kNames[] = {"none", "per_tensor", "per_token", "mx_block"};
  return m >= 0 && m <= 3 ? kNames[m] : "invalid";
}

// Stores a binary64 value with one RNE rounding into `f` at element `index` of `base`.
void store(void* base, pacts_format f, int64_t index, double x) {
  const uint32_t code = spec::encode(f, x, spec::Overflow::kNonSaturate);
  const int bytes = spec::element_bytes(f);
  std::memcpy(static_cast<uint8_t*>(base) + index * bytes, &code, static_cast<size_t>(bytes));
}

class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(const spec::QueryRequantRule& q_requant = {})
      : caps_(Capabilities::everything()), profile_(spec::reference_profile()) {
    profile_.q_requant = q_requant;
    if (q_requant.kind != spec::QueryRequant::kNone) profile_.name += "-requant";
  }
  std::string name() const override {
    return profile_.q_requant.kind == spec::QueryRequant::kNone ? "reference" : "reference-requant";
  }
  std::string device() const override { return "cpu (binary64)"; }
  const Capabilities& capabilities() const override { return caps_; }
  const spec::NumericsProfile& profile() const override { return profile_; }

  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint&) override {
    RunResult result;
    result.plan.variant = "reference";
    auto answer = reference::decode(p, b, profile_.q_requant);
    if (!answer) {
      result.status = answer.status();
      return result;
    }
    const reference::Output& o = answer.value();
    const int64_t D = p.head_dim;
    for (int64_t bi = 0; bi < p.batch; ++bi)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h) {
          const int64_t row = (bi * p.q_len + i) * p.num_q_heads + h;
          const int64_t at = bi * p.out_layout.s_batch + i * p.out_layout.s_tok + h * p.out_layout.s_head;
          for (int64_t d = 0; d < D; ++d)
            store(b.out.data, p.out_format, at + d, o.out[static_cast<size_t>(row * D + d)]);
          if (p.want_lse)
            store(b.lse.data, PACTS_FORMAT_FP32,
                  bi * p.lse_layout.s_batch + i * p.lse_layout.s_tok + h * p.lse_layout.s_head,
                  o.lse[static_cast<size_t>(row)]);
        }
    result.device_error = o.device_error;
    return result;
  }

 private:
  Capabilities caps_;
  spec::NumericsProfile profile_;
};

}  // namespace

Capabilities Capabilities::everything() {
  Capabilities c;
  c.q_formats = {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ,
                 PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ};
  c.kv_formats = c.q_formats;
  c.kv_formats.push_back(PACTS_FORMAT_E2M1);
  c.out_formats = {PACTS_FORMAT_BF16, PACTS_FORMAT_FP16, PACTS_FORMAT_FP32};
  c.scale_modes = {PACTS_SCALE_NONE, PACTS_SCALE_PER_TENSOR, PACTS_SCALE_PER_TOKEN,
                   PACTS_SCALE_MX_BLOCK};
  c.head_dims = {64, 128, 256};
  return c;
}

spec::Status check_capabilities(const Capabilities& c, const pacts_problem& p) {
  using spec::not_supported;
  if (!contains(c.q_formats, p.q_format))
    return not_supported("q_format " + fmt_name(p.q_format) + ": this backend offers " +
                         list(c.q_formats, fmt_name));
  if (!contains(c.kv_formats, p.kv_format))
    return not_supported("kv_format " + fmt_name(p.kv_format) + ": this backend offers " +
                         list(c.kv_formats, fmt_name));
  if (!contains(c.out_formats, p.out_format))
    return not_supported("out_format " + fmt_name(p.out_format) + ": this backend offers " +
                         list(c.out_formats, fmt_name));
  for (pacts_scale_mode m : {p.k_scale_mode, p.v_scale_mode})
    if (!contains(c.scale_modes, m))
      return not_supported("scale mode " + mode_name(m) + ": this backend offers " +
                           list(c.scale_modes, mode_name));
  if (!contains(c.head_dims, p.head_dim))
    return not_supported("head_dim " + std::to_string(p.head_dim) + ": this backend offers " +
                         list(c.head_dims, int_name));
  if (p.page_size < c.min_page_size || p.page_size > c.max_page_size)
    return not_supported("page_size " + std::to_string(p.page_size) + ": this backend offers " +
                         std::to_string(c.min_page_size) + " to " + std::to_string(c.max_page_size));
  if (p.q_len > c.max_q_len)
    return not_supported("q_len " + std::to_string(p.q_len) + ": this backend offers up to " +
                         std::to_string(c.max_q_len));
  if (p.num_q_heads / std::max(p.num_kv_heads, 1) > c.max_group)
    return not_supported("group size " + std::to_string(p.num_q_heads / p.num_kv_heads) +
                         ": this backend offers up to " + std::to_string(c.max_group));
  const int32_t units = p.kv_format == PACTS_FORMAT_E2M1 ? p.head_dim / 2 : p.head_dim;
  if (!c.chunked_layouts && (p.k_layout.chunk != units || p.v_layout.chunk != units))
    return not_supported("k_layout/v_layout chunk: this backend offers chunk == head_dim only");
  if (p.has_sinks && !c.sinks) return not_supported("has_sinks 1: this backend has no sinks");
  if (p.window > 0 && !c.window) return not_supported("window: this backend has no sliding window");
  if (p.softcap > 0 && !c.softcap) return not_supported("softcap: this backend has no soft-cap");
  if (p.want_lse && !c.lse) return not_supported("want_lse 1: this backend writes no LSE");
  return spec::Status::ok();
}

RunResult Backend::run_replayed(const pacts_problem&, const pacts_buffers&,
                                std::span<const int32_t>, const PlanHint&) {
  RunResult r;
  r.status = spec::not_supported("plan replay: backend " + name() + " cannot reuse a plan");
  return r;
}

std::vector<RunResult> Backend::run_many(std::span<const Job> jobs) {
  std::vector<RunResult> results;
  results.reserve(jobs.size());
  for (const Job& j : jobs) results.push_back(run(*j.problem, j.buffers, j.hint));
  return results;
}

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

spec::QueryRequantRule fp8_kv_requant_rule() {
  uint32_t formats = 0;
  for (pacts_format f : {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2,
                         PACTS_FORMAT_E5M2FNUZ, PACTS_FORMAT_E2M1})
    formats |= spec::format_bit(f);
  return {spec::QueryRequant::kFp8RowPow2, formats};
}

std::unique_ptr<Backend> make_reference_backend(const spec::QueryRequantRule& q_requant) {
  return std::make_unique<ReferenceBackend>(q_requant);
}

}  // namespace pacts::conformance
