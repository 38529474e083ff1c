// reference::decode with a declared query requantisation (spec/tolerance.md §2.1): the answer for
// a requantising backend is the plain reference's answer for the problem whose query IS the
// requantised one. Checked bitwise against a second problem built by hand with that query.
#include "case_builder.h"

#include <pacts/spec/requant.h>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pacts::reference {
namespace {

using testing::Case;
using testing::Fill;
using testing::Pool;

constexpr int64_t kD = 64, kPage = 16, kCtx = 40;

// One sequence, 2 query heads over 1 KV head, fp8 KV of `kv`, a bf16 query written by `q_of`.
template <class QOf>
Case make_case(pacts_format kv, float softmax_scale, float q_scale, QOf q_of) {
  pacts_problem p = spec::make_problem(1, 1, 2, 1, kD, kPage, 3, 3);
  p.kv_format = kv;
  p.softmax_scale = softmax_scale;
  p.q_scale = q_scale;
  Case c(p);
  c.allocate(Fill::kZero);
  c.set_context(0, kCtx);
  for (int col = 0; col < 3; ++col) c.set_page(0, col, col);
  for (int64_t j = 0; j < kCtx; ++j)
    for (int64_t d = 0; d < kD; ++d) {
      c.set_key(Pool::kK, 0, j, 0, d, std::ldexp(((j * 7 + d * 3) % 13) - 6.0, -2));
      c.set_key(Pool::kV, 0, j, 0, d, ((j * 5 + d) % 11) - 5.0);
    }
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < kD; ++d) c.set_q(0, 0, h, d, q_of(h, d));
  return c;
}

// A query value with 8 significant bits (bf16-exact, not e4m3-exact: requantisation moves it).
double query_value(int64_t h, int64_t d) {
  return (h == 0 ? 1.0 : -0.03) * (1.0 + ((d * 37) % 128) / 128.0) * (d % 5 == 0 ? 0.01 : 1.0);
}

Output decoded(Case& c, const spec::QueryRequantRule& rule) {
  auto r = decode(c.problem, c.buffers(), rule);
  if (!r.is_ok()) throw std::runtime_error(r.status().to_string());
  return std::move(r).value();
}

void expect_same(const Output& a, const Output& b) {
  ASSERT_EQ(a.out.size(), b.out.size());
  for (size_t e = 0; e < a.out.size(); ++e) ASSERT_EQ(a.out[e], b.out[e]) << "element " << e;
  for (size_t r = 0; r < a.lse.size(); ++r) {
    EXPECT_EQ(a.lse[r], b.lse[r]) << "row " << r;
    EXPECT_EQ(a.logit_abs_dot[r], b.logit_abs_dot[r]) << "row " << r;
  }
}

TEST(Requant, AnswerIsThePlainAnswerOfTheRequantisedQuery) {
  // softmax_scale 1/8 and q_scale 4: powers of two, so the requantised query divided by them is
  // exact and the hand-built problem's plain answer must match bit for bit.
  for (pacts_format kv : {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E5M2FNUZ}) {
    const spec::QueryRequantRule rule{spec::QueryRequant::kFp8RowPow2, spec::format_bit(kv)};
    Case c = make_case(kv, 0.125f, 4.0f, query_value);
    const pacts_format target = spec::requant_target(kv);
    // The requantised rows, by the spec's rule, taken back to the problem's units.
    std::vector<std::vector<double>> rq(2);
    for (int64_t h = 0; h < 2; ++h) {
      std::vector<float> folded(kD);
      for (int64_t d = 0; d < kD; ++d)
        folded[d] = (static_cast<float>(spec::decode(PACTS_FORMAT_BF16,
                         spec::encode(PACTS_FORMAT_BF16, query_value(h, d), spec::Overflow::kSaturate))) *
                     4.0f) * 0.125f;
      const spec::RequantRow row = spec::requantize_row(folded, target);
      for (int64_t d = 0; d < kD; ++d)
        rq[h].push_back(spec::requantized_value(target, row.codes[d], row.exponent) / (4.0 * 0.125));
    }
    Case by_hand = make_case(kv, 0.125f, 4.0f, [&](int64_t h, int64_t d) { return rq[h][d]; });
    // Every requantised value is bf16-exact here, so by_hand holds it unchanged.
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < kD; ++d)
        ASSERT_EQ(spec::round_to(PACTS_FORMAT_BF16, rq[h][d]), rq[h][d]);
    const Output with_rule = decoded(c, rule);
    expect_same(with_rule, decoded(by_hand, {}));
    // And the rule did change the answer (the test would not see a rule that does nothing).
    const Output plain = decoded(c, {});
    bool differs = false;
    for (size_t e = 0; e < plain.out.size(); ++e) differs = differs || plain.out[e] != with_rule.out[e];
    EXPECT_TRUE(differs) << spec::format_name(kv);
  }
}

TEST(Requant, OtherKvFormatsKeepThePlainQuery) {
  const spec::QueryRequantRule rule{spec::QueryRequant::kFp8RowPow2,
                                    spec::format_bit(PACTS_FORMAT_E4M3FNUZ)};
  Case c = make_case(PACTS_FORMAT_E4M3FN, 0.125f, 1.0f, query_value);
  expect_same(decoded(c, rule), decoded(c, {}));
}

}  // namespace
}  // namespace pacts::reference
