// spec/tolerance.md: the bound must hold for a correct fp32 computation and must fail for a
// computation that rounds more than its profile declares (the bound is not vacuous).
#include <pacts/spec/formats.h>
#include <pacts/spec/tolerance.h>
#include <pacts/spec/validate.h>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace pacts::spec {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Tolerance, GammaN) {
  EXPECT_DOUBLE_EQ(gamma_n(10, 0.01), 0.1 / 0.9);
  EXPECT_EQ(gamma_n(0, 0.5), 0.0);
  EXPECT_EQ(gamma_n(100, 0.01), kInf);
  EXPECT_EQ(gamma_n(1000, 0.01), kInf);
}

TEST(Tolerance, UnitRoundoffPerOutputFormat) {
  EXPECT_EQ(unit_roundoff(PACTS_FORMAT_BF16), std::ldexp(1.0, -8));
  EXPECT_EQ(unit_roundoff(PACTS_FORMAT_FP16), std::ldexp(1.0, -11));
  EXPECT_EQ(unit_roundoff(PACTS_FORMAT_FP32), std::ldexp(1.0, -24));
}

TEST(Tolerance, WithinBoundClasses) {
  double ratio = -1;
  EXPECT_TRUE(within_bound(kNaN, kNaN, 0, &ratio));
  EXPECT_FALSE(within_bound(1.0, kNaN, kInf, &ratio));
  EXPECT_TRUE(within_bound(-kInf, -kInf, 0, &ratio));
  EXPECT_FALSE(within_bound(-1e300, -kInf, kInf, &ratio));
  // A finite reference needs a finite value even when the bound is infinite.
  EXPECT_FALSE(within_bound(kInf, 1.0, kInf, &ratio));
  EXPECT_FALSE(within_bound(kNaN, 1.0, kInf, &ratio));
  EXPECT_TRUE(within_bound(1.0 + 1e-3, 1.0, 2e-3, &ratio));
  EXPECT_NEAR(ratio, 0.5, 1e-9);
  EXPECT_FALSE(within_bound(1.0 + 3e-3, 1.0, 2e-3, &ratio));
  EXPECT_TRUE(within_bound(0.0, 0.0, 0.0, &ratio));
  EXPECT_EQ(ratio, 0.0);
}

// spec/tolerance.md §2 eta_p_formats: the larger floor holds for the KV formats it lists, and
// only there (a backend's coarser P on one path leaves the other formats' bound as tight as it was).
TEST(Tolerance, PerFormatFloorOfPAppliesToItsFormatsOnly) {
  NumericsProfile prof = fp32_profile();
  prof.eta_p = std::ldexp(1.0, -133);
  prof.eta_p_formats.kv_formats = 1u << PACTS_FORMAT_FP16 | 1u << PACTS_FORMAT_E5M2;
  prof.eta_p_formats.eta_p = std::ldexp(1.0, -40);
  pacts_problem p = make_problem(1, 1, 1, 1, 128, 16, 1, 1);
  BoundInputs in;
  in.abs_weighted_v = 1.0;
  in.sum_abs_v = 1024.0;
  in.logit_abs_dot = 4.0;
  in.visible = 1024;
  p.kv_format = PACTS_FORMAT_BF16;
  EXPECT_EQ(eta_p_for(prof, p), std::ldexp(1.0, -133));
  const double bf16_bound = output_bound(prof, p, in, 0.5);
  p.kv_format = PACTS_FORMAT_FP16;
  EXPECT_EQ(eta_p_for(prof, p), std::ldexp(1.0, -40));
  const double fp16_bound = output_bound(prof, p, in, 0.5);
  // The difference is the floor's term, eta_p V1, through the output rounding's (1 + u_out).
  const double u_out = unit_roundoff(p.out_format);
  EXPECT_NEAR(fp16_bound - bf16_bound,
              (1 + u_out) * (std::ldexp(1.0, -40) - std::ldexp(1.0, -133)) * in.sum_abs_v,
              1e-6 * (fp16_bound - bf16_bound));
  p.kv_format = PACTS_FORMAT_E4M3FN;  // not listed
  EXPECT_EQ(output_bound(prof, p, in, 0.5), bf16_bound);
  // A listed floor below the profile's eta_p never tightens it.
  prof.eta_p_formats.eta_p = std::ldexp(1.0, -200);
  p.kv_format = PACTS_FORMAT_FP16;
  EXPECT_EQ(eta_p_for(prof, p), std::ldexp(1.0, -133));
}

TEST(Tolerance, EmptyRowsAreExact) {
  const pacts_problem p = make_problem(1, 1, 1, 1, 64, 16, 1, 1);
  const BoundInputs empty{};
  EXPECT_EQ(output_bound(fp32_profile(), p, empty, 0.0), 0.0);
  EXPECT_EQ(lse_bound(fp32_profile(), p, empty, -kInf), 0.0);
}

// One attention row computed two ways: exactly in binary64, and in fp32 the way a simple kernel
// does it (fp32 dot, max-shifted exp, P optionally rounded to bf16 before P.V, fp32 sums).
struct Row {
  std::vector<std::vector<double>> k, v;  // [n][D], exactly representable in bf16
  std::vector<double> q;                  // [D]
};

Row make_row(std::mt19937_64& rng, int n, int d, double logit_spread) {
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto bf16 = [](double x) { return round_to(PACTS_FORMAT_BF16, x); };
  Row r;
  r.q.resize(d);
  for (double& x : r.q) x = bf16(normal(rng) * logit_spread / std::sqrt(d));
  r.k.assign(n, std::vector<double>(d));
  r.v.assign(n, std::vector<double>(d));
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < d; ++i) {
      r.k[j][i] = bf16(normal(rng));
      r.v[j][i] = bf16(normal(rng));
    }
  return r;
}

struct Computed {
  std::vector<double> out;
  double lse;
};

Computed exact(const Row& r, double scale, BoundInputs& in, std::vector<double>& a_out,
               std::vector<double>& sum_abs) {
  const size_t n = r.k.size(), d = r.q.size();
  std::vector<double> s(n);
  in.logit_abs_dot = 0;
  for (size_t j = 0; j < n; ++j) {
    double dot = 0, abs_dot = 0;
    for (size_t i = 0; i < d; ++i) {
      dot += r.q[i] * r.k[j][i];
      abs_dot += std::fabs(r.q[i] * r.k[j][i]);
    }
    s[j] = scale * dot;
    in.logit_abs_dot = std::fmax(in.logit_abs_dot, scale * abs_dot);
  }
  double m = -kInf;
  for (double x : s) m = std::fmax(m, x);
  double l = 0;
  for (double x : s) l += std::exp(x - m);
  Computed c{std::vector<double>(d, 0.0), m + std::log(l)};
  a_out.assign(d, 0.0);
  sum_abs.assign(d, 0.0);
  for (size_t j = 0; j < n; ++j) {
    const double p = std::exp(s[j] - m) / l;
    for (size_t i = 0; i < d; ++i) {
      c.out[i] += p * r.v[j][i];
      a_out[i] += p * std::fabs(r.v[j][i]);
      sum_abs[i] += std::fabs(r.v[j][i]);
    }
  }
  in.visible = static_cast<int64_t>(n);
  return c;
}

Computed fp32_kernel(const Row& r, float scale, bool p_to_bf16) {
  const size_t n = r.k.size(), d = r.q.size();
  std::vector<float> s(n);
  for (size_t j = 0; j < n; ++j) {
    float dot = 0;
    for (size_t i = 0; i < d; ++i) dot += static_cast<float>(r.q[i]) * static_cast<float>(r.k[j][i]);
    s[j] = scale * dot;
  }
  float m = -INFINITY;
  for (float x : s) m = std::fmax(m, x);
  float l = 0;
  std::vector<float> acc(d, 0.0f);
  for (size_t j = 0; j < n; ++j) {
    float p = std::exp(s[j] - m);
    l += p;
    if (p_to_bf16) p = static_cast<float>(round_to(PACTS_FORMAT_BF16, p));
    for (size_t i = 0; i < d; ++i) acc[i] += p * static_cast<float>(r.v[j][i]);
  }
  Computed c{std::vector<double>(d), static_cast<double>(m + std::log(l))};
  for (size_t i = 0; i < d; ++i) c.out[i] = acc[i] / l;
  return c;
}

// Runs `rows` random rows; returns the worst error/bound ratio of output and LSE.
double worst_ratio(const NumericsProfile& prof, bool p_to_bf16, int rows, pacts_format out) {
  std::mt19937_64 rng(20261129);
  pacts_problem p = make_problem(1, 1, 1, 1, 128, 16, 1, 1);
  p.out_format = out;
  double worst = 0;
  for (int t = 0; t < rows; ++t) {
    const int n = 1 + static_cast<int>(rng() % 300);
    const Row row = make_row(rng, n, 128, 4.0 + static_cast<double>(rng() % 12));
    BoundInputs in;
    std::vector<double> a, sum_abs;
    const float scale = 1.0f / std::sqrt(128.0f);
    const Computed ref = exact(row, scale, in, a, sum_abs);
    const Computed got = fp32_kernel(row, scale, p_to_bf16);
    for (size_t i = 0; i < ref.out.size(); ++i) {
      in.abs_weighted_v = a[i];
      in.sum_abs_v = sum_abs[i];
      const double stored = round_to(out, got.out[i]);
      double ratio = 0;
      within_bound(stored, ref.out[i], output_bound(prof, p, in, ref.out[i]), &ratio);
      worst = std::fmax(worst, ratio);
    }
    double ratio = 0;
    within_bound(got.lse, ref.lse, lse_bound(prof, p, in, ref.lse), &ratio);
    worst = std::fmax(worst, ratio);
  }
  return worst;
}

TEST(Tolerance, CorrectFp32ComputationPassesItsBound) {
  const double worst = worst_ratio(fp32_profile(), false, 200, PACTS_FORMAT_FP32);
  std::printf("fp32 kernel vs fp32 profile: worst error/bound %.3g\n", worst);
  EXPECT_LE(worst, 1.0);
}

TEST(Tolerance, UndeclaredBf16PRoundingFailsTheFp32Bound) {
  // A kernel that rounds P to bf16 but declares fp32 P must be caught (fp32 output, so the
  // output rounding does not hide it).
  const double worst = worst_ratio(fp32_profile(), true, 200, PACTS_FORMAT_FP32);
  std::printf("bf16-P kernel vs fp32 profile: worst error/bound %.3g\n", worst);
  EXPECT_GT(worst, 1.0);
}

TEST(Tolerance, DeclaredBf16PRoundingPasses) {
  NumericsProfile prof = fp32_profile();
  prof.u_p = std::ldexp(1.0, -8);
  const double worst = worst_ratio(prof, true, 200, PACTS_FORMAT_FP32);
  std::printf("bf16-P kernel vs bf16-P profile: worst error/bound %.3g\n", worst);
  EXPECT_LE(worst, 1.0);
}

TEST(Tolerance, Bf16OutputRoundingIsCovered) {
  const double worst = worst_ratio(fp32_profile(), false, 100, PACTS_FORMAT_BF16);
  EXPECT_LE(worst, 1.0);
}

TEST(Tolerance, BoundGrowsWithLogitMagnitudeAndSoftcap) {
  pacts_problem p = make_problem(1, 1, 1, 1, 128, 16, 1, 1);
  BoundInputs in{1.0, 10.0, 1.0, 100};
  const double small = output_bound(fp32_profile(), p, in, 0.5);
  in.logit_abs_dot = 1000.0;
  const double large = output_bound(fp32_profile(), p, in, 0.5);
  EXPECT_GT(large, small);
  p.softcap = 50.0f;
  EXPECT_GT(output_bound(fp32_profile(), p, in, 0.5), large);
}

// §3.2: a logit error so large that e^{2 Delta} overflows, on a row whose A underflowed to 0 in
// binary64 (logits near 2^62 behind a dominant sink, PACTS-EDGE-5 on the H200): the bound is
// infinite, never NaN (a NaN bound failed every value), and 0 only when every V element is 0.
TEST(Tolerance, OverflowingWeightFactorGivesAnInfiniteBoundNotNaN) {
  const pacts_problem p = make_problem(1, 1, 1, 1, 128, 16, 1, 1);
  NumericsProfile prof = fp32_profile();
  prof.u_q = std::ldexp(1.0, -7);
  BoundInputs in;
  in.visible = 7;
  in.logit_abs_dot = std::ldexp(1.0, 62);
  in.sink_abs = std::ldexp(1.0, 64);
  in.abs_weighted_v = 0.0;
  in.sum_abs_v = 0.5;
  const double b = output_bound(prof, p, in, 0.0);
  EXPECT_FALSE(std::isnan(b));
  EXPECT_TRUE(std::isinf(b));
  double ratio = -1;
  EXPECT_TRUE(within_bound(0.0625, 0.0, b, &ratio));
  in.sum_abs_v = 0.0;  // every visible V element 0: the output must be 0
  EXPECT_FALSE(within_bound(0.0625, 0.0, output_bound(prof, p, in, 0.0), &ratio));
  EXPECT_TRUE(within_bound(0.0, 0.0, output_bound(prof, p, in, 0.0), &ratio));
}

}  // namespace
}  // namespace pacts::spec
