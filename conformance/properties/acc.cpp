// PACTS-ACC: accuracy against the reference (spec/properties.md §4).
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/property.h>
#include <pacts/spec/formats.h>

#include <pacts/conformance/random_case.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

// ACC-1: every output element (and the LSE when requested) within the bound.
Outcome matches_reference(PropertyContext& ctx, const CaseSpec& spec) {
  const CaseData c = spec.build();
  const Observed got = observe(ctx.backend, c);
  if (auto o = run_failed(got, "PACTS-ACC-1")) return *o;
  return within_tolerance(ctx.backend, c.problem, got, reference_answer(c, ctx.backend));
}

// ACC-2: the LSE, requested on every case.
Outcome lse_matches_reference(PropertyContext& ctx, const CaseSpec& spec0) {
  CaseSpec spec = spec0;
  spec.shape.lse = true;
  const CaseData c = spec.build();
  if (auto o = unsupported(ctx.backend, c.problem)) return *o;
  Observed got = observe(ctx.backend, c);
  if (auto o = run_failed(got, "PACTS-ACC-2")) return *o;
  // Judge the LSE only (ACC-1 judges the output): drop the output values from the comparison.
  got.out_values.clear();
  return within_tolerance(ctx.backend, c.problem, got, reference_answer(c, ctx.backend));
}

// ACC-3: a row with exactly one visible key and no sink outputs the RNE of that V row, bitwise
// (p = 1 exactly; nothing but the final rounding may touch the value). Window 1 gives every row
// exactly one key (its own position), for any L.
Outcome one_key_is_exact(PropertyContext& ctx, const CaseSpec& spec0) {
  CaseSpec spec = spec0;
  spec.shape.window = 1;
  spec.shape.sinks = false;
  spec.shape.lse = false;
  // Half the cases take L in 9..16: the rows' single keys (the last L keys) then straddle a
  // boundary of 16-key tiles, so a kernel that deals key tiles out to warps has, for some rows,
  // warps that saw none of their keys, whose empty states it must merge as nothing (the GPU
  // mutant empty_partition_nan, spec/properties.md §11).
  if ((spec.seed >> 7) & 1) spec.shape.q_len = 9 + static_cast<int32_t>((spec.seed >> 8) % 8);
  for (int32_t& c : spec.shape.contexts) c = std::max(c, spec.shape.q_len);
  CaseData c = spec.build();
  if (auto o = unsupported(ctx.backend, c.problem)) return *o;
  // spec/properties.md ACC-3: scales with few significand bits, so that v = code x scale is an
  // fp32 number and an fp32 dequantisation does not double-round. make_case draws per-token
  // scales with 24-bit significands; keep their top 12 bits (codes have at most 11).
  if (c.problem.v_scale_mode == PACTS_SCALE_PER_TOKEN)
    for (size_t i = 0; i + 4 <= c.v_scale.size(); i += 4) {
      uint32_t bits;
      std::memcpy(&bits, &c.v_scale[i], 4);
      if ((bits & 0x7F800000u) != 0x7F800000u) bits &= ~uint32_t{0x7FF};
      std::memcpy(&c.v_scale[i], &bits, 4);
    }
  const Observed got = observe(ctx.backend, c);
  if (auto o = run_failed(got, "PACTS-ACC-3")) return *o;
  const Observed want = observe(ctx.reference, c);
  return same_bits_or_flushed(got, want, ctx.backend.profile().ftz,
                              "one visible key: output vs RNE(V row)");
}

// Multiplies every V value by 2^k through the V scale of the case (per-tensor float, per-token
// floats, or e8m0 bytes). Returns false when the scaling would leave a format's range.
bool scale_v(CaseData& c, int k) {
  pacts_problem& p = c.problem;
  switch (p.v_scale_mode) {
    case PACTS_SCALE_NONE:
      p.v_scale_mode = PACTS_SCALE_PER_TENSOR;
      p.v_scale = std::ldexp(1.0f, k);
      return true;
    case PACTS_SCALE_PER_TENSOR:
      p.v_scale = std::ldexp(p.v_scale, k);
      return std::isnormal(p.v_scale);
    case PACTS_SCALE_PER_TOKEN:
      for (size_t i = 0; i + 4 <= c.v_scale.size(); i += 4) {
        float s;
        std::memcpy(&s, &c.v_scale[i], 4);
        if (s != 0 && std::isfinite(s) && !std::isnormal(std::ldexp(s, k))) return false;
        s = std::ldexp(s, k);
        std::memcpy(&c.v_scale[i], &s, 4);
      }
      return true;
    case PACTS_SCALE_MX_BLOCK:
      for (uint8_t& b : c.v_scale) {
        if (b == 0xFF) continue;
        const int nb = b + k;
        if (nb < 0 || nb > 0xFE) return false;
        b = static_cast<uint8_t>(nb);
      }
      return true;
    default:
      return false;  // validated problems have no other mode
  }
}

// ACC-4: V scaled by 2^k scales the output by exactly 2^k and leaves the LSE bitwise equal,
// wherever neither output value is subnormal, the smallest normal, or overflows in the output
// format (exact_scaling_comparable).
Outcome value_scale_is_exact(PropertyContext& ctx, const CaseSpec& spec) {
  CaseData a = spec.build();
  CaseData b = a;
  static constexpr int kShifts[] = {-3, -2, -1, 1, 2, 3};
  const int k = kShifts[spec.seed % 6];
  if (!scale_v(b, k)) return Outcome::pass();  // no exact scaling exists for this case
  if (auto o = unsupported(ctx.backend, b.problem)) return *o;
  const Observed ra = observe(ctx.backend, a), rb = observe(ctx.backend, b);
  if (auto o = run_failed(ra, "PACTS-ACC-4")) return *o;
  if (auto o = run_failed(rb, "PACTS-ACC-4 (scaled)")) return *o;
  for (size_t e = 0; e < ra.out_values.size(); ++e) {
    const double x = ra.out_values[e], y = rb.out_values[e];
    const double want = std::ldexp(x, k);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == 0 && y == 0 && std::signbit(x) == std::signbit(y)) continue;
    if (!exact_scaling_comparable(x, k, a.problem.out_format)) continue;
    if (y != want)
      return Outcome::fail(element_name(a.problem, e, false) + ": V x 2^" + std::to_string(k) +
                           " gave " + std::to_string(y) + ", expected exactly " +
                           std::to_string(want));
  }
  for (size_t r = 0; r < ra.lse_codes.size(); ++r)
    if (ra.lse_codes[r] != rb.lse_codes[r])
      return Outcome::fail(element_name(a.problem, r, true) + ": the LSE changed when only V was scaled");
  return Outcome::pass();
}

// ACC-5: moving 2^k from q_scale into softmax_scale changes no logit, so nothing changes.
Outcome logit_scale_is_exact(PropertyContext& ctx, const CaseSpec& spec) {
  CaseData a = spec.build();
  CaseData b = a;
  const int k = 1 + static_cast<int>(spec.seed % 3);
  b.problem.q_scale = std::ldexp(a.problem.q_scale, -k);
  b.problem.softmax_scale = std::ldexp(a.problem.softmax_scale, k);
  if (!std::isnormal(b.problem.q_scale) || !std::isnormal(b.problem.softmax_scale))
    return Outcome::pass();
  const Observed ra = observe(ctx.backend, a), rb = observe(ctx.backend, b);
  if (auto o = run_failed(ra, "PACTS-ACC-5")) return *o;
  if (auto o = run_failed(rb, "PACTS-ACC-5 (moved scale)")) return *o;
  return same_bits(ra, rb, "2^" + std::to_string(k) + " moved from q_scale to softmax_scale");
}

// ACC-6: the codes a V row can hold, swept through one-key rows (the OpenCL CTS way: every code
// of a small domain). The special ones come first in every case: zeros, subnormals, the smallest
// normal, the largest value the range contract admits (spec/contract.md R2); then the rest in a
// rotation that depends on the case. For MXFP4 the sweep is over e2m1 nibbles and the V block's
// e8m0 bytes (0x00 = 2^-127, an fp32 subnormal, spec/formats.md §1.9).
struct CodeSweep {
  std::vector<uint32_t> specials, rest;
  uint32_t at(uint64_t e, uint64_t rotation) const {
    if (e < specials.size()) return specials[e];
    if (rest.empty()) return specials[e % specials.size()];
    return rest[(e - specials.size() + rotation) % rest.size()];
  }
};

// Finite codes of format f with |value| <= limit. Specials: zeros, subnormals and the smallest
// normal (for the two-byte formats only the three smallest and the largest subnormal magnitudes,
// or they would crowd out the rest), and the largest admitted magnitude; both signs.
CodeSweep value_codes(pacts_format f, double limit) {
  CodeSweep sweep;
  const spec::FormatInfo* fi = spec::format_info(f);
  const uint64_t count = spec::code_count(f);
  const bool wide = count > 256;
  const auto value = [f](uint64_t code) { return spec::decode(f, static_cast<uint32_t>(code)); };
  double largest = 0;
  for (uint64_t code = 0; code < count; ++code)
    if (std::isfinite(value(code)) && std::fabs(value(code)) <= limit)
      largest = std::max(largest, std::fabs(value(code)));
  // Two-byte formats: a stride through all 65536 codes (odd, so every code comes once).
  const uint64_t stride = wide ? 40503 : 1;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t code = (k * stride) % count;
    const double x = std::fabs(value(code));
    if (!std::isfinite(x) || x > limit) continue;
    const uint64_t magnitude = code & 0x7FFFu;
    const bool subnormal = x < fi->min_normal;
    const bool special =
        x == fi->min_normal || x == largest ||
        (subnormal && (!wide || magnitude <= 3 ||
                       std::fabs(value(magnitude + 1)) == fi->min_normal));  // the largest one
    (special ? sweep.specials : sweep.rest).push_back(static_cast<uint32_t>(code));
  }
  return sweep;
}

Outcome every_value_code_is_exact(PropertyContext& ctx, const CaseSpec& spec0) {
  CaseSpec spec = spec0;
  spec.shape.window = 1;  // every row sees exactly one key: weight 1, as in ACC-3
  spec.shape.sinks = false;
  spec.shape.lse = false;
  for (int32_t& n : spec.shape.contexts) n = std::max(n, spec.shape.q_len);
  CaseData c = spec.build();
  pacts_problem& p = c.problem;
  if (auto o = unsupported(ctx.backend, p)) return *o;
  // R2 (spec/contract.md §2): |v| <= 2^96, or 2^15 with an fp16 output.
  const double limit = p.out_format == PACTS_FORMAT_FP16 ? 0x1p15 : 0x1p96;
  const bool mx = p.kv_format == PACTS_FORMAT_E2M1;
  const CodeSweep codes = value_codes(p.kv_format, limit);
  // e8m0 bytes b with 6 * 2^(b - 127) <= limit (R1 and R2), 0x00 and 0x01 first.
  CodeSweep bytes;
  const int top = 127 + static_cast<int>(std::floor(std::log2(limit / 6)));
  bytes.specials = {0x00, 0x01, 0x7F, static_cast<uint32_t>(top)};
  for (int b = 2; b < top; ++b)
    if (b != 0x7F) bytes.rest.push_back(static_cast<uint32_t>(b));
  // The scale is 1: the value is the code's, exactly an fp32 number (spec/formats.md).
  if (p.v_scale_mode == PACTS_SCALE_PER_TENSOR) p.v_scale = 1.0f;
  const uint64_t rotation = spec.seed;
  uint64_t element = 0, block = 0;
  using T = Override::Tensor;
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t n = c.context_lens[static_cast<size_t>(b)];
    for (int32_t j = std::max(0, n - p.q_len); j < n; ++j)
      for (int32_t h = 0; h < p.num_kv_heads; ++h) {
        if (p.v_scale_mode == PACTS_SCALE_PER_TOKEN)  // 1.0f
          apply_override(c, {T::kVScale, b, j, h, 0, 0x3F800000u});
        if (mx)
          for (int32_t k = 0; k < p.head_dim / 32; ++k)
            apply_override(c, {T::kVScale, b, j, h, k, bytes.at(block++, rotation)});
        for (int32_t d = 0; d < p.head_dim; ++d)
          apply_override(c, {T::kV, b, j, h, d, codes.at(element++, rotation)});
      }
  }
  const Observed got = observe(ctx.backend, c);
  if (auto o = run_failed(got, "PACTS-ACC-6")) return *o;
  const Observed want = observe(ctx.reference, c);
  return same_bits_or_flushed(got, want, ctx.backend.profile().ftz,
                              "one visible key, V swept over the codes of " +
                                  std::string(spec::format_name(p.kv_format)) + ": output vs RNE(v)");
}

}  // namespace

std::vector<Property> acc_properties() {
  GenLimits plain;
  GenLimits no_extremes;
  no_extremes.e8m0_extremes = false;
  no_extremes.special_values = false;
  return {
      make_property("PACTS-ACC-1", "MatchesReference", Level::kMandatory, false, plain, matches_reference),
      make_property("PACTS-ACC-2", "LseMatchesReference", Level::kMandatory, false, plain, lse_matches_reference),
      make_property("PACTS-ACC-3", "OneKeyIsExact", Level::kMandatory, true, plain, one_key_is_exact),
      make_property("PACTS-ACC-4", "PowerOfTwoValueScaleIsExact", Level::kMandatory, true, no_extremes, value_scale_is_exact),
      make_property("PACTS-ACC-5", "PowerOfTwoLogitScaleIsExact", Level::kMandatory, true, no_extremes, logit_scale_is_exact),
      make_property("PACTS-ACC-6", "EveryValueCodeIsExact", Level::kMandatory, true, plain, every_value_code_is_exact),
  };
}

}  // namespace pacts::conformance
