// Element access for the scan kernels: every element type is loaded to and stored from fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace prnn::scan {

template <class T>
__device__ __forceinline__ float load_elem(const T* p, std::int64_t i);
template <>
__device__ __forceinline__ float load_elem<float>(const float* p, std::int64_t i) {
  return __ldg(p + i);
}
template <>
__device__ __forceinline__ float load_elem<__half>(const __half* p, std::int64_t i) {
  return __half2float(__ldg(p + i));
}
template <>
__device__ __forceinline__ float load_elem<__nv_bfloat16>(const __nv_bfloat16* p, std::int64_t i) {
  return __bfloat162float(__ldg(p + i));
}

template <class T>
__device__ __forceinline__ void store_elem(T* p, std::int64_t i, float v);
template <>
__device__ __forceinline__ void store_elem<float>(float* p, std::int64_t i, float v) {
  p[i] = v;
}
template <>
__device__ __forceinline__ void store_elem<__half>(__half* p, std::int64_t i, float v) {
  p[i] = __float2half_rn(v);
}
template <>
__device__ __forceinline__ void store_elem<__nv_bfloat16>(__nv_bfloat16* p, std::int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

}  // namespace prnn::scan
