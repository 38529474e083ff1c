// pacts::spec query requantisation (spec/tolerance.md §2.1): the exact rule by which a backend
// may turn the scaled query into fp8 codes inside the kernel, so that the reference can apply the
// same rule bit for bit and use the requantised query as the problem's query.
#pragma once

#include <pacts/problem.h>

#include <cstdint>
#include <cstddef>
#include <string_view>
#include <vector>

namespace pacts::spec {

enum class QueryRequant : uint8_t {
  kNone = 0,        // the query enters Q.K as decoded and scaled (u_q covers its rounding)
  kFp8RowPow2 = 1,  // spec/tolerance.md §2.1: per row, a power-of-two scale onto fp8
};

// What a numerics profile declares: the rule and the KV formats it is applied for (bit
// 1u << pacts_format; every other KV format keeps the plain query).
struct QueryRequantRule {
  QueryRequant kind = QueryRequant::kNone;
  uint32_t kv_formats = 0;
};

constexpr uint32_t format_bit(pacts_format f) {
  return f > PACTS_FORMAT_INVALID && f < 32 ? 1u << static_cast<unsigned>(f) : 0u;
}

// Whether `rule` requantises the query of a problem whose KV format is `kv_format`.
bool requantises(const QueryRequantRule& rule, pacts_format kv_format);

// The fp8 format the query is requantised to for KV format `kv_format`: e4m3fnuz for the fnuz K
// formats (e4m3fnuz, e5m2fnuz: the fp8 of AMD gfx942's matrix unit), e4m3fn for every other.
pacts_format requant_target(pacts_format kv_format);

std::string_view requant_name(QueryRequant kind);  // "none", "fp8-row-pow2"

// Step 1 of the rule: q~ = fl32(fl32(decode(code) * q_scale) * softmax_scale), fp32 products
// rounded to nearest even (spec/contract.md §2.1, order 2).
float fold_query_fp32(pacts_format q_format, uint32_t code, float q_scale, float softmax_scale);

// Steps 2-4 for one row of folded values: the row exponent e and one code of `target` per element.
struct RequantRow {
  int exponent = 0;            // e: the row's requantised element d is decode(target, code_d) * 2^e
  std::vector<uint8_t> codes;  // RNE of q~_d * 2^-e in `target`; NaN gives the target's NaN code
};
RequantRow requantize_row(const float* folded, size_t count, pacts_format target);
inline RequantRow requantize_row(const std::vector<float>& folded, pacts_format target) {
  return requantize_row(folded.data(), folded.size(), target);
}

// The exact binary64 value of one requantised element: decode(target, code) * 2^exponent.
double requantized_value(pacts_format target, uint8_t code, int exponent);

}  // namespace pacts::spec
