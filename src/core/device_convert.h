// Elementwise dtype conversion of device arrays (device_convert.cu): f32 <-> f16 / bf16, and
// copies between equal dtypes. 16-bit results round to nearest even, as the host conversions in
// prnn/dtype.h do, so a tensor converted on either side has the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "prnn/dtype.h"

namespace prnn {

// dst[i] = src[i] converted, i < n, asynchronously on `stream`. Supported pairs: equal dtypes
// (a device copy), f32 -> f16/bf16 and f16/bf16 -> f32; anything else throws Unsupported.
// src and dst must not overlap unless they are the same array of the same dtype.
void convert_on_device(const void* src, DType src_type, void* dst, DType dst_type, std::int64_t n,
                       cudaStream_t stream);

// One array of a batch of conversions: n elements from src to dst.
struct ConvertSegment {
  const void* src = nullptr;
  void* dst = nullptr;
  std::int64_t n = 0;
};
inline constexpr int kMaxConvertSegments = 8;

// Every segment converted from src_type to dst_type by one launch, asynchronously on `stream`
// (a call's small tensors cost one kernel instead of one each). At most kMaxConvertSegments
// segments, else InvalidArgument; segments of n = 0 are skipped. The pairs are convert_on_device's
// except equal dtypes (Unsupported).
void convert_on_device(const ConvertSegment* segments, int count, DType src_type, DType dst_type,
                       cudaStream_t stream);

}  // namespace prnn
