// kernels/common/requant.h, the copy of spec/tolerance.md §2.1's rule that kernels run, bit for
// bit against pacts::spec::requantize_row (the spec's executable form), and the combined logit
// factor of spec/contract.md §2.1 order 3 against exact binary64 products.
#include "common/requant.h"

#include <pacts/spec/formats.h>
#include <pacts/spec/requant.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace pacts::kernels::common {
namespace {

float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// What a kernel does for one row: the running maximum of magnitudes, the exponent, the codes.
spec::RequantRow kernel_row(const std::vector<float>& row, pacts_format kv) {
  const Fp8Target t = requant_target(kv);
  uint32_t a = 0;
  for (float x : row) a = std::max(a, requant_magnitude(x));
  spec::RequantRow out;
  out.exponent = requant_exponent(a, t);
  for (float x : row) out.codes.push_back(requant_code(x, out.exponent, t));
  return out;
}

TEST(Requant, KernelRuleMatchesTheSpecBitForBit) {
  std::mt19937_64 rng(20261201);
  for (pacts_format kv : {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E5M2, PACTS_FORMAT_E4M3FNUZ,
                          PACTS_FORMAT_E5M2FNUZ, PACTS_FORMAT_E2M1}) {
    const pacts_format target = spec::requant_target(kv);
    ASSERT_EQ(requant_target(kv).fnuz, target == PACTS_FORMAT_E4M3FNUZ);
    for (int n = 0; n < 20000; ++n) {
      std::vector<float> row(32);
      // Biased exponent of the row's largest; 255 (Inf and NaN, outside the contract) too.
      const uint32_t top = static_cast<uint32_t>(rng() % 256);
      const uint32_t spread = static_cast<uint32_t>(rng() % 48);
      for (float& x : row) {
        const uint32_t e = top > spread ? top - static_cast<uint32_t>(rng() % (spread + 1)) : top;
        uint32_t bits = (static_cast<uint32_t>(rng() & 1) << 31) | (e << 23) |
                        (static_cast<uint32_t>(rng()) & 0x7FFFFFu);
        if (rng() % 3 == 0) bits &= 0xFFF00000u | (1u << (rng() % 20));  // ties of the fp8 grid
        x = from_bits(bits);
        if (rng() % 100 == 0) x = from_bits(0x7FC00001u);
        if (rng() % 60 == 0) x = from_bits(static_cast<uint32_t>(rng() & 1) << 31);  // +-0
      }
      const spec::RequantRow want = spec::requantize_row(row, target);
      const spec::RequantRow got = kernel_row(row, kv);
      ASSERT_EQ(got.exponent, want.exponent) << spec::format_name(kv) << " row " << n;
      for (size_t d = 0; d < row.size(); ++d)
        ASSERT_EQ(got.codes[d], want.codes[d])
            << spec::format_name(kv) << " row " << n << " d " << d << " x " << row[d];
    }
  }
}

TEST(Requant, EveryFp32ExponentAndTheTargetsTopSignificands) {
  // The row maximum at every fp32 binade (subnormals included) and at significands around the
  // two targets' largest (1.75, 1.875): the exponent and the code of the maximum.
  for (pacts_format kv : {PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ}) {
    for (uint32_t e = 0; e < 255; ++e)
      for (uint32_t m : {0u, 1u, 0x5FFFFFu, 0x600000u, 0x600001u, 0x6FFFFFu, 0x700000u, 0x700001u,
                         0x7FFFFFu}) {
        const std::vector<float> row = {from_bits((e << 23) | m), -1.0f};
        if (row[0] == 0) continue;
        const spec::RequantRow want = spec::requantize_row(row, spec::requant_target(kv));
        const spec::RequantRow got = kernel_row(row, kv);
        ASSERT_EQ(got.exponent, want.exponent) << e << " " << m;
        ASSERT_EQ(got.codes, want.codes) << e << " " << m;
      }
  }
}

TEST(Requant, LogitFactorIsTheExactProductOfScaleAndPowerOfTwo) {
  std::mt19937_64 rng(5);
  for (int n = 0; n < 200000; ++n) {
    const float scale = from_bits(static_cast<uint32_t>(rng()) & 0x7F7FFFFFu);  // finite, >= 0
    const int e = static_cast<int>(rng() % 320) - 160;
    const LogitFactor f = logit_factor(scale, e);
    const double want = std::ldexp(static_cast<double>(scale), e);
    ASSERT_EQ(std::ldexp(static_cast<double>(f.significand), f.exponent), want) << scale << " " << e;
    if (scale != 0) {
      ASSERT_TRUE(f.significand >= 1.0f && f.significand < 2.0f) << scale;
    }
  }
  EXPECT_EQ(logit_factor(0.0f, 40).significand, 0.0f);
}

}  // namespace
}  // namespace pacts::kernels::common
