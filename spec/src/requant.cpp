// spec/tolerance.md §2.1 as code: the query requantisation rule "fp8-row-pow2".
#include <pacts/spec/formats.h>
#include <pacts/spec/requant.h>

#include <cmath>

namespace pacts::spec {

bool requantises(const QueryRequantRule& rule, pacts_format kv_format) {
  return rule.kind != QueryRequant::kNone && (rule.kv_formats & format_bit(kv_format)) != 0;
}

pacts_format requant_target(pacts_format kv_format) {
  const bool fnuz = kv_format == PACTS_FORMAT_E4M3FNUZ || kv_format == PACTS_FORMAT_E5M2FNUZ;
  return fnuz ? PACTS_FORMAT_E4M3FNUZ : PACTS_FORMAT_E4M3FN;
}

std::string_view requant_name(QueryRequant kind) {
  switch (kind) {
    case QueryRequant::kNone: return "none";
    case QueryRequant::kFp8RowPow2: return "fp8-row-pow2";
  }
  return "invalid";
}

float fold_query_fp32(pacts_format q_format, uint32_t code, float q_scale, float softmax_scale) {
  // Every Q format's values are exact in fp32; each product is one fp32 rounding.
  const float decoded = static_cast<float>(decode(q_format, code));
  const float scaled = decoded * q_scale;
  return scaled * softmax_scale;
}

RequantRow requantize_row(const float* folded, size_t count, pacts_format target) {
  const FormatInfo* t = format_info(target);
  RequantRow row;
  row.codes.resize(count);
  // Step 2: a = max |q~_d| over the elements that are not NaN.
  double a = 0;
  for (size_t d = 0; d < count; ++d)
    if (!std::isnan(folded[d])) a = std::fmax(a, std::fabs(static_cast<double>(folded[d])));
  // Step 3: the smallest e with a * 2^-e <= max_finite(target); 0 for a zero or non-finite a.
  if (a > 0 && std::isfinite(a)) {
    row.exponent = std::ilogb(a) - std::ilogb(t->max_finite);
    if (std::ldexp(a, -row.exponent) > t->max_finite) ++row.exponent;
  }
  // Step 4: every element scaled exactly (binary64 holds q~_d * 2^-e) and rounded once, RNE.
  // |q~_d| * 2^-e <= max_finite, so saturation never acts on a finite element.
  for (size_t d = 0; d < count; ++d)
    row.codes[d] = static_cast<uint8_t>(
        encode(target, std::ldexp(static_cast<double>(folded[d]), -row.exponent), Overflow::kSaturate));
  return row;
}

double requantized_value(pacts_format target, uint8_t code, int exponent) {
  return std::ldexp(decode(target, code), exponent);
}

}  // namespace pacts::spec
