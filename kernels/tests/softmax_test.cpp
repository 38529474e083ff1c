// kernels/common/softmax.h: the online-softmax state, its rescale rule, the partition merge
// (empty and all-masked partitions, order), sinks, LSE and soft-cap, against long double.
#include "common/softmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace pacts::kernels::common {
namespace {

constexpr int kTile = 16;
constexpr int kDims = 8;
const double kU = std::ldexp(1.0, -24);

struct Keys {
  std::vector<float> logit;
  std::vector<std::vector<float>> v;  // [n][kDims]
};

Keys random_keys(std::mt19937_64& rng, int n, double sigma, bool increasing = false) {
  std::normal_distribution<double> normal(0.0, sigma);
  Keys k;
  for (int j = 0; j < n; ++j) {
    k.logit.push_back(static_cast<float>(increasing ? 0.37 * j : normal(rng)));
    std::vector<float> row(kDims);
    for (float& x : row) x = static_cast<float>(normal(rng) / sigma);
    k.v.push_back(row);
  }
  return k;
}

// A partial state: m, l and acc over keys [begin, end), processed in tiles of 16 exactly as the
// host kernel does (common/softmax.h's protocol, blocked tile sums).
struct Partial {
  SoftmaxState state;
  std::vector<float> acc = std::vector<float>(kDims, 0.0f);
};

Partial run_online(const Keys& k, int begin, int end) {
  Partial p;
  for (int t0 = begin; t0 < end; t0 += kTile) {
    const int t1 = std::min(end, t0 + kTile);
    float tile_max = -INFINITY;
    for (int j = t0; j < t1; ++j) tile_max = max_finite(tile_max, k.logit[j]);
    const TileStep step = p.state.begin_tile(tile_max);
    float sum = 0.0f;
    std::vector<float> pv(kDims, 0.0f);
    for (int j = t0; j < t1; ++j) {
      const float w = expf(k.logit[j] - step.shift);
      sum += w;
      for (int d = 0; d < kDims; ++d) pv[d] = (j == t0) ? w * k.v[j][d] : pv[d] + w * k.v[j][d];
    }
    for (int d = 0; d < kDims; ++d) p.acc[d] = p.acc[d] * step.alpha + pv[d];
    p.state.add(sum);
  }
  return p;
}

// Exact softmax output and A = sum p |v| in long double.
void exact(const Keys& k, int begin, int end, std::vector<long double>& out,
           std::vector<long double>& abs_weighted, long double& lse) {
  long double m = -INFINITY;
  for (int j = begin; j < end; ++j) m = std::max<long double>(m, k.logit[j]);
  long double den = 0;
  out.assign(kDims, 0);
  abs_weighted.assign(kDims, 0);
  for (int j = begin; j < end; ++j) {
    const long double w = std::exp(static_cast<long double>(k.logit[j]) - m);
    den += w;
    for (int d = 0; d < kDims; ++d) {
      out[d] += w * k.v[j][d];
      abs_weighted[d] += w * std::fabs(static_cast<long double>(k.v[j][d]));
    }
  }
  for (int d = 0; d < kDims; ++d) {
    out[d] /= den;
    abs_weighted[d] /= den;
  }
  lse = m + std::log(den);
}

// Merges partials in the given order (binary64), as the host's merge pass does.
std::vector<double> merged_output(const std::vector<Partial>& parts, const std::vector<int>& order,
                                  double* lse = nullptr) {
  MergeState state;
  std::vector<double> acc(kDims, 0.0);
  for (int z : order) {
    const MergeWeights w = merge(state, parts[z].state.m, parts[z].state.l);
    if (w.use_self)
      for (double& a : acc) a *= w.self;
    if (w.use_other)
      for (int d = 0; d < kDims; ++d) acc[d] += w.other * parts[z].acc[d];
  }
  const double f = output_factor(state.m, state.l, false, 0.0f);
  for (double& a : acc) a *= f;
  if (lse) *lse = log_sum_exp(state.m, state.l);
  return acc;
}

// The online state, including a max that grows on every tile, stays within the fp32 bound of
// spec/tolerance.md §3.3 (2 gamma_{n+4} of A, plus the exps) against long double.
TEST(Softmax, OnlineStateMatchesExact) {
  std::mt19937_64 rng(1);
  for (int n : {1, 2, 15, 16, 17, 100, 257, 1000, 4096}) {
    for (bool increasing : {false, true}) {
      const Keys k = random_keys(rng, n, 3.0, increasing);
      const Partial p = run_online(k, 0, n);
      std::vector<long double> want, a;
      long double lse;
      exact(k, 0, n, want, a, lse);
      const double bound = (2.0 * (n + 4) + 16) * kU;
      for (int d = 0; d < kDims; ++d) {
        const double got = p.acc[d] * output_factor(p.state.m, p.state.l, false, 0.0f);
        EXPECT_LE(std::fabs(got - static_cast<double>(want[d])), bound * static_cast<double>(a[d]))
            << "n " << n << " d " << d;
      }
      EXPECT_NEAR(log_sum_exp(p.state.m, p.state.l), static_cast<double>(lse),
                  (n + 8) * kU * std::max(1.0L, std::fabs(lse)));
    }
  }
}

TEST(Softmax, BeginTileOnEmptyState) {
  SoftmaxState s;
  EXPECT_TRUE(s.empty());
  const TileStep step = s.begin_tile(2.5f);
  EXPECT_EQ(step.alpha, 0.0f);
  EXPECT_EQ(step.shift, 2.5f);
  EXPECT_EQ(s.l, 0.0f);
  EXPECT_EQ(s.m, 2.5f);
  // A second tile with a lower max keeps the origin: alpha is exactly 1.
  s.add(1.0f);
  const TileStep again = s.begin_tile(-4.0f);
  EXPECT_EQ(again.alpha, 1.0f);
  EXPECT_EQ(again.shift, 2.5f);
}

// Only non-finite logits (outside the contract): the origin stays 0, and the sums carry the
// binary64 reference's values (+inf LSE), never e^(-inf - -inf) = NaN.
TEST(Softmax, NonFiniteLogitsKeepReferenceValues) {
  SoftmaxState s;
  float tile_max = -INFINITY;
  tile_max = max_finite(tile_max, INFINITY);
  tile_max = max_finite(tile_max, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(tile_max, -INFINITY);
  const TileStep step = s.begin_tile(tile_max);
  EXPECT_EQ(step.shift, 0.0f);
  s.add(expf(INFINITY - step.shift));
  EXPECT_EQ(log_sum_exp(s.m, s.l), INFINITY);
  const TileStep next = s.begin_tile(3.0f);  // a finite logit later
  EXPECT_FALSE(std::isnan(next.alpha));
  EXPECT_EQ(s.l, INFINITY);
}

TEST(Softmax, MergeOfEmptyStatesIsEmptyAndNeverNaN) {
  MergeState s;
  MergeWeights w = merge(s, -INFINITY, 0.0);
  EXPECT_FALSE(w.use_self);
  EXPECT_FALSE(w.use_other);
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(std::isnan(s.l));
  EXPECT_FALSE(std::isnan(s.m));
  // A state then an empty one: the empty one is selected away, the state is unchanged.
  w = merge(s, 1.5, 2.0);
  EXPECT_FALSE(w.use_self);
  EXPECT_TRUE(w.use_other);
  EXPECT_EQ(w.other, 1.0);
  w = merge(s, -INFINITY, 0.0);
  EXPECT_FALSE(w.use_other);
  EXPECT_FALSE(w.use_self);
  EXPECT_EQ(s.m, 1.5);
  EXPECT_EQ(s.l, 2.0);
}

// Partitions past the context and partitions whose keys a row does not see are empty states;
// their accumulators hold whatever the workspace held (NaN here) and must not be read: the
// result is bitwise the merge without them.
TEST(Softmax, EmptyAndAllMaskedPartitionsMergeAsNothing) {
  std::mt19937_64 rng(2);
  const Keys k = random_keys(rng, 100, 2.0);
  std::vector<Partial> clean = {run_online(k, 0, 48), run_online(k, 48, 100)};
  Partial empty;  // never updated: a partition with no visible key
  std::fill(empty.acc.begin(), empty.acc.end(), std::numeric_limits<float>::quiet_NaN());
  Partial masked = run_online(k, 60, 60);  // a range of no keys: also never updated
  std::fill(masked.acc.begin(), masked.acc.end(), std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(masked.state.empty());
  std::vector<Partial> with = {empty, clean[0], masked, clean[1], empty};
  const std::vector<double> a = merged_output(clean, {0, 1});
  const std::vector<double> b = merged_output(with, {0, 1, 2, 3, 4});
  for (int d = 0; d < kDims; ++d) {
    EXPECT_FALSE(std::isnan(b[d]));
    EXPECT_EQ(a[d], b[d]) << d;
  }
  // Nothing but empty partitions: an empty merged state (the caller writes +0 and LSE -inf).
  MergeState s;
  for (int z = 0; z < 3; ++z) merge(s, empty.state.m, empty.state.l);
  EXPECT_TRUE(s.empty());
}

// The merge is binary64: any partition order agrees to a few binary64 ulps, far inside the fp32
// bound; split and unsplit agree within the fp32 bound.
TEST(Softmax, MergeOrderWithinTolerance) {
  std::mt19937_64 rng(3);
  for (int parts : {2, 3, 7, 16}) {
    const int n = 1000;
    const Keys k = random_keys(rng, n, 4.0);
    std::vector<Partial> partial;
    const int size = (n + parts - 1) / parts / kTile * kTile + kTile;
    for (int b = 0; b < n; b += size) partial.push_back(run_online(k, b, std::min(n, b + size)));
    std::vector<int> order(partial.size());
    std::iota(order.begin(), order.end(), 0);
    double lse_fwd = 0, lse_rev = 0;
    const std::vector<double> fwd = merged_output(partial, order, &lse_fwd);
    std::reverse(order.begin(), order.end());
    const std::vector<double> rev = merged_output(partial, order, &lse_rev);
    std::shuffle(order.begin(), order.end(), rng);
    const std::vector<double> shuffled = merged_output(partial, order);
    std::vector<long double> want, a;
    long double lse;
    exact(k, 0, n, want, a, lse);
    const Partial whole = run_online(k, 0, n);
    for (int d = 0; d < kDims; ++d) {
      const double tight = 1e-12 * static_cast<double>(a[d]);
      EXPECT_NEAR(fwd[d], rev[d], tight);
      EXPECT_NEAR(fwd[d], shuffled[d], tight);
      const double bound = (2.0 * (n + 4) + 16) * kU * static_cast<double>(a[d]);
      EXPECT_NEAR(fwd[d], static_cast<double>(want[d]), bound);
      EXPECT_NEAR(whole.acc[d] * output_factor(whole.state.m, whole.state.l, false, 0.0f), fwd[d],
                  2 * bound);
    }
    EXPECT_NEAR(lse_fwd, lse_rev, 1e-12 * std::fabs(lse_fwd));
  }
}

// spec/operator.md §8: a sink adds e^sigma to the denominator only; -inf is no sink; a sink far
// above every logit scales the output down in binary64 instead of flushing it.
TEST(Softmax, Sinks) {
  const double m = 1.25, l = 3.5;
  EXPECT_EQ(output_factor(m, l, true, -INFINITY), output_factor(m, l, false, 0.0f));
  const long double want_small = 1.0L / (l + std::exp(static_cast<long double>(-0.75) - m));
  EXPECT_NEAR(output_factor(m, l, true, -0.75f), static_cast<double>(want_small), 1e-15);
  // sigma - m = 120: e^(m - sigma) = 2^-173 is below fp32's range but the factor is not lost.
  const float sigma = 121.25f;
  const long double want = std::exp(static_cast<long double>(m) - sigma) /
                           (l * std::exp(static_cast<long double>(m) - sigma) + 1.0L);
  const double f = output_factor(m, l, true, sigma);
  EXPECT_GT(f, 0.0);
  EXPECT_NEAR(f, static_cast<double>(want), 1e-14 * static_cast<double>(want));
  // A sink of 2^64 (R4) against small logits: exactly 0, not NaN.
  EXPECT_EQ(output_factor(m, l, true, std::ldexp(1.0f, 64)), 0.0);
  EXPECT_TRUE(std::isnan(output_factor(m, l, true, std::numeric_limits<float>::quiet_NaN())));
}

TEST(Softmax, LogSumExp) {
  EXPECT_EQ(log_sum_exp(3.0, 1.0), 3.0);
  EXPECT_NEAR(log_sum_exp(-2.0, std::exp(1.0)), -1.0, 1e-15);
  EXPECT_EQ(log_sum_exp(-INFINITY, INFINITY), INFINITY);
}

// e^(a - b) with the difference taken exactly: a few fp32 ulps even where a - b is not an fp32
// number (large logits), where expf(a - b) alone errs by 2^-24 |a - b| relative.
TEST(Softmax, ExpDiffIsAccurate) {
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> mag(-3e4, 3e4), gap(-80.0, 0.0);
  double worst = 0;
  for (int n = 0; n < 100000; ++n) {
    const float b = static_cast<float>(mag(rng));
    const float a = static_cast<float>(b + gap(rng));
    const long double want = std::exp(static_cast<long double>(a) - static_cast<long double>(b));
    const double rel = std::fabs(static_cast<double>((exp_diff(a, b) - want) / want));
    worst = std::max(worst, rel);
  }
  EXPECT_LE(worst, 4 * kU);
}

TEST(Softmax, SoftCap) {
  EXPECT_FLOAT_EQ(soft_cap(3.0f, 30.0f), 30.0f * std::tanh(0.1f));
  EXPECT_EQ(soft_cap(1e30f, 1e-30f), 1e-30f);  // s / c overflows to +inf: tanh gives 1
  EXPECT_EQ(soft_cap(-1e30f, 1e-30f), -1e-30f);
  EXPECT_EQ(soft_cap(0.0f, 5.0f), 0.0f);
}

// The GPU merge (kernels/hip/src/kernel.h merge_partials) merges a row's partials all at once:
// the origin from merge_top over the non-empty partials, each weight by merge_weight, the sums in
// partition order. Mirrored here against merge() taken partial after partial, over partials with
// empty ones, ties, -inf origins holding non-finite sums and huge gaps: the same origin and the
// same selection bit for bit, the sums within binary64's rounding of their order (n 2^-52 of the
// sum of magnitudes; a sum made non-finite by an +inf term stays non-finite). `first_origin`: the planted fault of weights taken against the first
// non-empty partial's origin instead of the largest.
struct AllAtOnce {
  double m = -INFINITY, l = 0.0, acc = 0.0, magnitude = 0.0;  // magnitude: sum of |w_z acc_z|
  std::vector<bool> used;
};
AllAtOnce merge_all(const std::vector<std::pair<double, double>>& parts, const std::vector<double>& acc,
                    bool first_origin) {
  AllAtOnce out;
  float top = -INFINITY;
  bool seen = false;
  for (const auto& [m, l] : parts) {
    if (!merge_uses(m, l)) continue;
    top = first_origin && seen ? top : merge_top(top, static_cast<float>(m));
    seen = true;
  }
  out.m = top;
  for (size_t z = 0; z < parts.size(); ++z) {
    const auto [m, l] = parts[z];
    out.used.push_back(merge_uses(m, l));
    if (!out.used.back()) continue;
    const double w = merge_weight(m, top);
    out.l += w * l;
    out.acc += w * acc[z];
    out.magnitude += std::fabs(w * acc[z]);
  }
  return out;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(Softmax, MergeAllAtOnceIsMerge) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> count(1, 64), kind(0, 6);
  std::uniform_real_distribution<float> logit(-30.0f, 30.0f);
  std::uniform_real_distribution<double> sum(1.0, 64.0), value(-4.0, 4.0);
  int sequences = 0, fault_seen = 0, non_finite = 0;
  for (int n = 0; n < 4000; ++n) {
    std::vector<std::pair<double, double>> parts;
    std::vector<double> acc;
    for (int z = 0, k = count(rng); z < k; ++z) {
      switch (kind(rng)) {
        case 0: parts.push_back({-INFINITY, 0.0}); break;  // empty
        case 1:  // a tie with the partial before (a state with no finite logit has l 0, +inf or NaN)
          parts.push_back({parts.empty() || parts.back().first == -INFINITY ? 1.0 : parts.back().first, sum(rng)});
          break;
        case 2: parts.push_back({logit(rng) * 1e3f, sum(rng)}); break;  // a huge gap
        case 3:  // no finite logit: its sum holds +inf (spec/contract.md §3, outside the contract)
          if (n % 8 == 0) {
            parts.push_back({-INFINITY, INFINITY});
            ++non_finite;
            break;
          }
          [[fallthrough]];
        default: parts.push_back({logit(rng), sum(rng)}); break;
      }
      acc.push_back(std::isinf(parts.back().second) ? INFINITY : value(rng));
    }
    MergeState serial;
    double serial_acc = 0.0;
    std::vector<bool> serial_used;
    for (size_t z = 0; z < parts.size(); ++z) {
      const MergeWeights w = merge(serial, parts[z].first, parts[z].second);
      if (w.use_self) serial_acc *= w.self;
      if (w.use_other) serial_acc += w.other * acc[z];
      serial_used.push_back(w.use_other);
    }
    const AllAtOnce got = merge_all(parts, acc, false);
    const double tol_l = 64 * 0x1p-52 * std::fabs(serial.l);
    const double tol_acc = 64 * 0x1p-52 * got.magnitude;
    const bool finite = std::isfinite(serial.l);
    ASSERT_TRUE(same_bits(got.m, serial.m)) << "sequence " << n;
    ASSERT_EQ(got.used, serial_used) << "sequence " << n;
    if (finite) {
      ASSERT_LE(std::fabs(got.l - serial.l), tol_l) << "sequence " << n;
      ASSERT_LE(std::fabs(got.acc - serial_acc), tol_acc) << "sequence " << n;
    } else {
      // outside the range contract (spec/contract.md §2): non-finite either way, +inf or NaN
      // depending on whether a weight underflows, which the order decides
      ASSERT_FALSE(std::isfinite(got.l)) << "sequence " << n;
    }
    ++sequences;
    const AllAtOnce bad = merge_all(parts, acc, true);
    const bool bad_same = same_bits(bad.m, serial.m) && std::fabs(bad.l - serial.l) <= tol_l;
    fault_seen += !finite || bad_same ? 0 : 1;
  }
  EXPECT_EQ(sequences, 4000);
  EXPECT_GT(non_finite, 50);
  EXPECT_GT(fault_seen, 100);  // the planted fault changes the result of the sequences it meets
}

// A row whose partials are all empty stays empty (no NaN from e^(-inf - -inf)); a single
// non-empty partial passes through with weight exactly 1.
TEST(Softmax, MergeAllAtOnceEdges) {
  const AllAtOnce none = merge_all({{-INFINITY, 0.0}, {-INFINITY, 0.0}}, {NAN, NAN}, false);
  EXPECT_EQ(none.m, -INFINITY);
  EXPECT_EQ(none.l, 0.0);
  EXPECT_EQ(none.acc, 0.0);
  const AllAtOnce one = merge_all({{-INFINITY, 0.0}, {3.5, 7.25}, {-INFINITY, 0.0}}, {NAN, 0.1, NAN}, false);
  EXPECT_EQ(one.m, 3.5);
  EXPECT_EQ(one.l, 7.25);
  EXPECT_EQ(one.acc, 0.1);
}

}  // namespace
}  // namespace pacts::kernels::common
