#include "prnn/dtype.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>

#include "core/check.h"

namespace prnn {

const char* to_string(DType t) {
  switch (t) {
    case DType::F64: return "f64";
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f64" || s == "fp64" || s == "double" || s == "float64") return DType::F64;
  if (s == "f32" || s == "fp32" || s == "float" || s == "float32") return DType::F32;
  if (s == "f16" || s == "fp16" || s == "half" || s == "float16") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  throw InvalidArgument(fmt::format("dtype: expected one of f64, f32, f16, bf16, got '{}'", name));
}

const char* to_string(GemmMath m) {
  switch (m) {
    case GemmMath::Fp32: return "fp32";
    case GemmMath::Tf32: return "tf32";
  }
  return "?";
}

GemmMath parse_gemm_math(const std::string& name) {
  for (GemmMath m : {GemmMath::Fp32, GemmMath::Tf32})
    if (name == to_string(m)) return m;
  throw InvalidArgument(fmt::format("GEMM math: expected fp32 or tf32, got '{}'", name));
}

float to_float(Half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1Fu;
  std::uint32_t mant = h.bits & 0x3FFu;
  std::uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      out = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (mant & 0x3FFu) << 13;
    }
  } else if (exp == 0x1F) {
    out = sign | 0x7F800000u | mant << 13;
  } else {
    out = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(out);
}

Half to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u) {  // inf or NaN
    const std::uint16_t nan_bit = absx > 0x7F800000u ? 0x200u : 0u;
    return {static_cast<std::uint16_t>(sign | 0x7C00u | nan_bit)};
  }
  if (absx >= 0x477FF000u) return {static_cast<std::uint16_t>(sign | 0x7C00u)};  // overflow -> inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return {sign};  // below half of the smallest subnormal
    const std::uint32_t e = absx >> 23;
    const std::uint32_t m = (absx & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126u - e;  // value / 2^-24 = m * 2^(e - 126); shift in [14, 24]
    std::uint32_t half_m = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return {static_cast<std::uint16_t>(sign | half_m)};
  }
  std::uint32_t h = ((absx - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const std::uint32_t rem = absx & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return {static_cast<std::uint16_t>(sign | h)};
}

float to_float(BFloat16 b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b.bits) << 16);
}

BFloat16 to_bfloat16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: keep it quiet
    return {static_cast<std::uint16_t>((x >> 16) | 0x40u)};
  }
  const std::uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return {static_cast<std::uint16_t>((x + rounding) >> 16)};
}

namespace {

double load(const void* p, DType t, std::size_t i) {
  switch (t) {
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F16: return to_float(static_cast<const Half*>(p)[i]);
    case DType::BF16: return to_float(static_cast<const BFloat16*>(p)[i]);
  }
  return 0.0;
}

void store(void* p, DType t, std::size_t i, double v) {
  switch (t) {
    case DType::F64: static_cast<double*>(p)[i] = v; return;
    case DType::F32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::F16: static_cast<Half*>(p)[i] = to_half(static_cast<float>(v)); return;
    case DType::BF16: static_cast<BFloat16*>(p)[i] = to_bfloat16(static_cast<float>(v)); return;
  }
}

}  // namespace

void convert(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n) {
  PRNN_EXPECT(n == 0 || (src != nullptr && dst != nullptr),
              "convert: expected non-null src and dst for {} elements", n);
  if (src_type == dst_type) {
    std::memcpy(dst, src, n * size_of(src_type));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) store(dst, dst_type, i, load(src, src_type, i));
}

}  // namespace prnn
