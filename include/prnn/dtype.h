// Element types and host-side conversions between them.
// f16 and bf16 are stored as raw 16-bit patterns; conversions round to nearest even and keep
// infinities and NaN, so host code never needs CUDA headers to prepare 16-bit data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace prnn {

enum class DType : std::uint8_t { F64, F32, F16, BF16 };

constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::F64: return 8;
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
  }
  return 0;
}

const char* to_string(DType t);
// Parses "f64", "f32", "f16", "bf16" (also "fp32", "float", "half", ...); throws InvalidArgument.
DType parse_dtype(const std::string& name);

// The math of GPU GEMMs where a caller may choose it (prnn::LinearLayer: the projections,
// GILR-LSTM's U products and their gradients):
//   Fp32  fp32 FMA (cuBLAS PEDANTIC math: no TF32, no emulation);
//   Tf32  TF32 tensor cores with fp32 accumulation: both operands rounded to 10 mantissa bits
//         (2^-11 relative each), several times the fp32 rate.
enum class GemmMath : std::uint8_t { Fp32, Tf32 };

const char* to_string(GemmMath m);
// Parses "fp32", "tf32"; throws InvalidArgument.
GemmMath parse_gemm_math(const std::string& name);

// IEEE binary16 and bfloat16 as bit patterns.
struct Half {
  std::uint16_t bits = 0;
};
struct BFloat16 {
  std::uint16_t bits = 0;
};

float to_float(Half h);
float to_float(BFloat16 b);
Half to_half(float f);
BFloat16 to_bfloat16(float f);

// Converts n elements between any two dtypes on the host (src and dst must not overlap).
void convert(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n);

template <class T>
struct dtype_of;
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::F16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::BF16;
};
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace prnn
