// The per-token fp8 V scales of the split kernels (src/token_scales.h), proven on the host.
//
// Tiny keys: a key goes to the CUDA cores when its scale may make an element tiny (non-zero, below
// 2^-102); every other key's elements go to the MMAs untested. So at every scale at or above
// tiny_key_bound no non-zero code may give a tiny element (checked at the bound itself: a larger
// scale gives larger products), and the bound must be the smallest power of two that does so, or
// the CUDA cores take keys they need not (the check at half the bound must find a tiny element).
//
// The fold: fold_scale must cut a scale into exactly its significand (P's factor) and its power of
// two (V's), and fold_parts must give hi + lo within (2^-17 + 2^-24) x + 2^-134 of x = p m (the
// bound spec/tolerance.md §3.3 and docs/kernel-design.md state), and exactly x where x has at most
// 16 significant bits (PACTS-ACC-3's single-key rows). fp32 arithmetic on the host is IEEE
// binary32 rounded to nearest, as the GPU's (no kernel of pacts flushes subnormals); the bf16 pack
// is round-to-nearest-even (common::round_to_bf16), as the device's cvt.rn.bf16x2.f32.
#include "src/token_scales.h"

#include "common/dequant.h"
#include "common/round.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

using namespace pacts::kernels::hip::detail;
namespace common = pacts::kernels::common;

// Whether some non-zero finite code of `format` times `scale`, rounded to fp32, is tiny, and the
// smallest non-zero code magnitude.
struct Sweep {
  bool some_tiny = false;
  float smallest = std::numeric_limits<float>::infinity();
};
Sweep sweep(pacts_format format, float scale) {
  Sweep out;
  for (uint32_t c = 0; c < 256; ++c) {
    const float x = common::decode_code(format, c);
    if (!std::isfinite(x) || x == 0.0f) continue;
    out.smallest = std::fmin(out.smallest, std::fabs(x));
    const volatile float product = x * scale;  // one binary32 rounding
    if (std::fabs(product) < 0x1p-102f) out.some_tiny = true;
  }
  return out;
}

template <pacts_format kFormat>
void check_bound() {
  const float bound = tiny_key_bound<kFormat>();
  EXPECT_EQ(bound, std::ldexp(1.0f, -102 - smallest_code_log2<kFormat>()));
  const Sweep at = sweep(kFormat, bound);
  EXPECT_EQ(at.smallest, std::ldexp(1.0f, smallest_code_log2<kFormat>())) << "the smallest code";
  EXPECT_FALSE(at.some_tiny) << "a code gives a tiny element at the bound";
  EXPECT_TRUE(sweep(kFormat, bound / 2).some_tiny) << "half the bound gives none: not the smallest";
  // Which keys take the CUDA cores: non-zero scales below the bound, either sign; not zero (its
  // elements are 0), not the bound, not NaN (it reaches the MMAs and makes the rows NaN).
  EXPECT_TRUE(tiny_key<kFormat>(bound / 2));
  EXPECT_TRUE(tiny_key<kFormat>(-bound / 2));
  EXPECT_TRUE(tiny_key<kFormat>(std::numeric_limits<float>::denorm_min()));
  EXPECT_FALSE(tiny_key<kFormat>(0.0f));
  EXPECT_FALSE(tiny_key<kFormat>(-0.0f));
  EXPECT_FALSE(tiny_key<kFormat>(bound));
  EXPECT_FALSE(tiny_key<kFormat>(1.0f));
  EXPECT_FALSE(tiny_key<kFormat>(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_FALSE(tiny_key<kFormat>(std::numeric_limits<float>::infinity()));
}

TEST(TinyKeys, TheBoundIsTheSmallestScaleWithoutATinyElement) {
  check_bound<PACTS_FORMAT_E4M3FN>();
  check_bound<PACTS_FORMAT_E4M3FNUZ>();
  check_bound<PACTS_FORMAT_E5M2>();
  check_bound<PACTS_FORMAT_E5M2FNUZ>();
}

// A scale outside the tiny keys is its significand in [1, 2) (its sign) times a power of two,
// exactly; a tiny key folds nothing and enters V as 0; zero, infinities and NaN stay V's factor.
TEST(FoldScale, ASignificandForPAndAPowerOfTwoForV) {
  constexpr pacts_format kF = PACTS_FORMAT_E4M3FN;
  std::mt19937 rng(20261207);
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-93, 127);
  for (int i = 0; i < 100000; ++i) {
    const float s = static_cast<float>(std::ldexp(unit(rng), exponent(rng))) * (i % 2 ? -1.0f : 1.0f);
    if (!std::isfinite(s) || tiny_key<kF>(s)) continue;
    const FoldedScale f = fold_scale<kF>(s);
    ASSERT_EQ(static_cast<double>(f.p) * f.v, static_cast<double>(s)) << s;
    ASSERT_GE(std::fabs(f.p), 1.0f) << s;
    ASSERT_LT(std::fabs(f.p), 2.0f) << s;
    int e = 0;
    ASSERT_EQ(std::frexp(f.v, &e), 0.5f) << s << ": V's factor is not a power of two";
    ASSERT_GT(f.v, 0.0f) << s;
  }
  const float bound = tiny_key_bound<kF>();
  EXPECT_EQ(fold_scale<kF>(bound).p, 1.0f);
  EXPECT_EQ(fold_scale<kF>(bound).v, bound);
  for (float tiny : {bound / 2, -bound / 2, std::numeric_limits<float>::denorm_min()}) {
    EXPECT_EQ(fold_scale<kF>(tiny).p, 1.0f) << tiny;
    EXPECT_EQ(fold_scale<kF>(tiny).v, 0.0f) << tiny;
  }
  EXPECT_EQ(fold_scale<kF>(0.0f).p, 1.0f);
  EXPECT_EQ(fold_scale<kF>(0.0f).v, 0.0f);
  EXPECT_EQ(fold_scale<kF>(std::numeric_limits<float>::infinity()).v, std::numeric_limits<float>::infinity());
  EXPECT_EQ(fold_scale<kF>(std::numeric_limits<float>::infinity()).p, 1.0f);
  EXPECT_TRUE(std::isnan(fold_scale<kF>(std::numeric_limits<float>::quiet_NaN()).v));
  EXPECT_EQ(fold_scale<kF>(std::numeric_limits<float>::quiet_NaN()).p, 1.0f);
}

struct HostPack {
  uint32_t operator()(float lo, float hi) const {
    return common::round_to_bf16(static_cast<double>(lo)) | common::round_to_bf16(static_cast<double>(hi)) << 16;
  }
};

double bf16_value(uint32_t bits) { return static_cast<double>(common::bf16_to_float(static_cast<uint16_t>(bits))); }

// |parts - x| against the fold's bound, for x = fp32(p m) of key pair (x, x).
struct Parts {
  double sum, x;
};
Parts parts_of(float x, bool low_part) {
  uint32_t hi = 0, lo = 0;
  fold_parts(x, x, HostPack{}, hi, lo);
  return {bf16_value(hi & 0xFFFFu) + (low_part ? bf16_value(lo & 0xFFFFu) : 0.0), static_cast<double>(x)};
}
bool within_bound(const Parts& r) {
  return std::fabs(r.sum - r.x) <= (0x1p-17 + 0x1p-24) * std::fabs(r.x) + 0x1p-134;
}

TEST(FoldParts, TwoBf16PartsHoldPTimesTheSignificandTo16Bits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0), sig(1.0, 2.0);
  std::uniform_int_distribution<int> binade(-140, 0);
  int one_part_misses = 0;
  for (int i = 0; i < 200000; ++i) {
    // p = e^(s - m) <= 1 over every binade down to fp32's subnormals, m the significand.
    const float p = static_cast<float>(std::ldexp(unit(rng), binade(rng)));
    const float m = static_cast<float>(sig(rng));
    const float x = p * m;  // the kernel's fp32 product
    ASSERT_TRUE(within_bound(parts_of(x, true))) << "p " << p << " m " << m;
    // The second part is what the bound needs: bf16 of x alone misses it (a planted slip).
    if (!within_bound(parts_of(x, false))) ++one_part_misses;
  }
  EXPECT_GT(one_part_misses, 100000);
  // One key: p = 1, so x = m. Its significand has at most 16 bits where PACTS-ACC-3 draws scales
  // (12 bits): hi + lo is m exactly. A residual of 9 bits after hi is more than lo can hold.
  std::uniform_int_distribution<uint32_t> bits(0, (1u << 23) - 1);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t frac = bits(rng);
    const float m16 = common::f32_from_bits(0x3F800000u | (frac & ~0x7Fu));  // 1 + 15 fraction bits
    const Parts r16 = parts_of(1.0f * m16, true);
    ASSERT_EQ(r16.sum, r16.x) << m16;
  }
  const float m17 = common::f32_from_bits(0x3F800000u | 1u << 14 | 1u << 6);  // 1 + 2^-9 + 2^-17
  const Parts r17 = parts_of(m17, true);
  EXPECT_NE(r17.sum, r17.x);
}

}  // namespace
