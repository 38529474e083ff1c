// The split kernels' MXFP4 decode by table (src/mx_table.h), proven on the host: nothing runs the
// NVIDIA kernel here, so the byte permutes run as their documented semantics (mx_table.h
// byte_perm's host branch) and the bf16 pack as round-to-nearest-even. For every e8m0 scale byte,
// both nibble orders and words in which every byte value sits at every byte position, each of
// the eight elements must come out as the scalar decode gives it (common::e2m1_nibble, the e2m1
// value times the decoded scale in fp32, rounded to bf16): the same bits, a NaN where it gives a
// NaN, and for V's tables a zero exactly where it gives a tiny element (below 2^-102, which the
// kernel adds on the CUDA cores), with the table's tiny flag set exactly when some magnitude of
// the block is tiny.
#include "src/mx_table.h"

#include "common/dequant.h"
#include "common/round.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace {

using namespace pacts::kernels::hip::detail;
namespace common = pacts::kernels::common;

uint32_t bf16_bits(float x) {
  return std::isnan(x) ? 0x7FFFu : common::round_to_bf16(static_cast<double>(x));
}

struct HostPack {
  uint32_t operator()(float lo, float hi) const { return bf16_bits(lo) | bf16_bits(hi) << 16; }
};

bool is_nan_bf16(uint32_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0; }

// Word k of the sweep: byte i is (k + offset_i) mod 256, so every byte value meets every position.
uint32_t sweep_word(int k) {
  const int off[4] = {0, 37, 101, 211};
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i) w |= static_cast<uint32_t>((k + off[i]) & 0xFF) << (8 * i);
  return w;
}

template <bool kZeroTiny>
void check_all_scales(pacts_nibble_order order) {
  for (int e = 0; e < 256; ++e) {
    const float scale = common::e8m0_to_float(static_cast<uint8_t>(e));
    const MxTable t = mx_table<kZeroTiny>(scale, HostPack{});
    bool any_tiny = false;
    for (int k = 0; k < 256; ++k) {
      const uint32_t w = sweep_word(k);
      uint32_t out[4];
      mx_decode8(mx_low_first(w, mx_swap_nibbles(order)), t, out);
      for (int d = 0; d < 8; ++d) {
        const uint8_t byte = static_cast<uint8_t>(w >> (8 * (d / 2)));
        const float v = common::e2m1_to_float(common::e2m1_nibble(byte, d, order)) * scale;
        const uint32_t got = (out[d / 2] >> (16 * (d % 2))) & 0xFFFFu;
        const bool tiny = v != 0.0f && std::fabs(v) < kMxTinyBelow;
        any_tiny |= tiny;
        if (std::isnan(v)) {
          ASSERT_TRUE(is_nan_bf16(got)) << "scale byte " << e << " word " << std::hex << w << " dim " << d;
        } else if (kZeroTiny && tiny) {
          ASSERT_EQ(got & 0x7FFFu, 0u) << "tiny: scale byte " << e << " word " << std::hex << w << " dim " << d;
        } else {
          ASSERT_EQ(got, bf16_bits(v)) << "scale byte " << e << " word " << std::hex << w << " dim " << d;
        }
      }
    }
    if (kZeroTiny) {
      EXPECT_EQ(t.tiny, any_tiny) << "scale byte " << e;
    }
  }
}

TEST(MxTable, KeyTablesGiveTheScalarDecodeForEveryScaleByteLowFirst) {
  check_all_scales<false>(PACTS_NIBBLE_LOW_FIRST);
}
TEST(MxTable, KeyTablesGiveTheScalarDecodeForEveryScaleByteHighFirst) {
  check_all_scales<false>(PACTS_NIBBLE_HIGH_FIRST);
}
TEST(MxTable, ValueTablesZeroTinyElementsAndFlagThem) {
  check_all_scales<true>(PACTS_NIBBLE_LOW_FIRST);
  check_all_scales<true>(PACTS_NIBBLE_HIGH_FIRST);
}

// A zero scale (no e8m0 byte decodes to one; the mutant e8m0_zero_as_zero's does): every element is
// a zero of its nibble's sign, none tiny.
TEST(MxTable, AZeroScaleGivesZerosAndNoTinyFlag) {
  const MxTable t = mx_table<true>(0.0f, HostPack{});
  EXPECT_FALSE(t.tiny);
  uint32_t out[4];
  mx_decode8(0xFEDCBA98u, t, out);
  for (uint32_t o : out) EXPECT_EQ(o & 0x7FFF7FFFu, 0u);
}

// The pair of V's B fragment: element n of two keys, from the low or the high halves.
TEST(MxTable, PairHalvesTakeTheSameHalfOfBothWords) {
  EXPECT_EQ(mx_pair_halves(0x22221111u, 0x44443333u, false), 0x33331111u);
  EXPECT_EQ(mx_pair_halves(0x22221111u, 0x44443333u, true), 0x44442222u);
}

// The permute itself, against its documented semantics on a hand-checked value.
TEST(MxTable, BytePermSelectsBytesOfTheEightByteInput) {
  EXPECT_EQ(byte_perm(0x03020100u, 0x07060504u, 0x7531u), 0x07050301u);
  EXPECT_EQ(byte_perm(0x03020100u, 0x07060504u, 0x6420u), 0x06040200u);
  EXPECT_EQ(byte_perm(0xDDCCBBAAu, 0x11223344u, 0x0404u), 0xAA44AA44u);
}

}  // namespace
