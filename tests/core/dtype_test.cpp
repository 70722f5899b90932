// dtype names and the host-side f16 / bf16 conversions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "prnn/dtype.h"
#include "prnn/error.h"
#include "support/random.h"

namespace prnn {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(size_of(DType::F64), 8u);
  EXPECT_EQ(size_of(DType::F32), 4u);
  EXPECT_EQ(size_of(DType::F16), 2u);
  EXPECT_EQ(size_of(DType::BF16), 2u);
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16})
    EXPECT_EQ(parse_dtype(to_string(t)), t);
  EXPECT_EQ(parse_dtype("FP32"), DType::F32);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::BF16);
}

TEST(DType, ParseRejectsUnknownNames) {
  try {
    parse_dtype("int8");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("got 'int8'"), std::string::npos) << e.what();
  }
}

// Exact values: bit patterns from the IEEE 754 binary16 and bfloat16 definitions.
TEST(GemmMath, NamesRoundTripAndUnknownNamesAreRejected) {
  for (GemmMath m : {GemmMath::Fp32, GemmMath::Tf32}) EXPECT_EQ(parse_gemm_math(to_string(m)), m);
  try {
    parse_gemm_math("bf16");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "GEMM math: expected fp32 or tf32, got 'bf16'");
  }
}

TEST(DType, HalfKnownValues) {
  EXPECT_EQ(to_half(1.0f).bits, 0x3C00);
  EXPECT_EQ(to_half(-2.0f).bits, 0xC000);
  EXPECT_EQ(to_half(65504.0f).bits, 0x7BFF);             // largest finite
  EXPECT_EQ(to_half(65520.0f).bits, 0x7C00);             // rounds up to inf
  EXPECT_EQ(to_half(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(to_half(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie -> even (zero)
  EXPECT_EQ(to_half(std::ldexp(3.0f, -26)).bits, 0x0001);  // above the tie -> up
  EXPECT_EQ(to_half(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(to_half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3C00);  // tie -> even
  EXPECT_EQ(to_half(1.0f + std::ldexp(3.0f, -11)).bits, 0x3C02);  // tie -> even (up)
  EXPECT_EQ(to_half(std::numeric_limits<float>::infinity()).bits, 0x7C00);
  EXPECT_TRUE(std::isnan(to_float(to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(to_float(Half{0x3555}), 0.333251953125f);
  EXPECT_EQ(to_float(Half{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(to_float(Half{0x8000}), -0.0f);
  EXPECT_TRUE(std::signbit(to_float(Half{0x8000})));
}

TEST(DType, BFloat16KnownValues) {
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(to_bfloat16(-3.0f).bits, 0xC040);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.
  EXPECT_EQ(to_bfloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3F80);
  EXPECT_EQ(to_bfloat16(1.0f + std::ldexp(3.0f, -8)).bits, 0x3F82);
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(to_float(BFloat16{0x4049}), 3.140625f);
}

// Every 16-bit pattern that is not NaN survives a round trip through float exactly.
TEST(DType, SixteenBitRoundTripIsExact) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const Half h{static_cast<std::uint16_t>(b)};
    const float f = to_float(h);
    if (!std::isnan(f)) {
      ASSERT_EQ(to_half(f).bits, h.bits) << "half pattern " << b;
    }
    const BFloat16 bf{static_cast<std::uint16_t>(b)};
    const float g = to_float(bf);
    if (!std::isnan(g)) {
      ASSERT_EQ(to_bfloat16(g).bits, bf.bits) << "bf16 pattern " << b;
    }
  }
}

// Rounding is to nearest: the converted value is never farther than the other neighbour.
TEST(DType, HalfRoundsToNearest) {
  test::Rng rng;
  for (float f : rng.uniform<float>(20000, -70000.0, 70000.0)) {
    const Half h = to_half(f);
    const float r = to_float(h);
    if (std::isinf(r)) {
      EXPECT_GE(std::abs(f), 65520.0f);
      continue;
    }
    const float up = to_float(Half{static_cast<std::uint16_t>(h.bits + 1)});
    const float down = to_float(Half{static_cast<std::uint16_t>(h.bits - 1)});
    EXPECT_LE(std::abs(r - f), std::abs(up - f)) << f;
    EXPECT_LE(std::abs(r - f), std::abs(down - f)) << f;
  }
}

TEST(DType, ConvertBuffers) {
  const double src[4] = {1.5, -2.25, 1e-3, 3.0e4};
  float f[4];
  Half h[4];
  BFloat16 b[4];
  double back[4];
  convert(src, DType::F64, f, DType::F32, 4);
  convert(f, DType::F32, h, DType::F16, 4);
  convert(h, DType::F16, b, DType::BF16, 4);
  convert(b, DType::BF16, back, DType::F64, 4);
  EXPECT_EQ(f[1], -2.25f);
  EXPECT_EQ(to_float(h[0]), 1.5f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(back[i], src[i], std::abs(src[i]) * 1e-2) << i;
  EXPECT_THROW(convert(nullptr, DType::F32, f, DType::F32, 4), InvalidArgument);
}

}  // namespace
}  // namespace prnn
