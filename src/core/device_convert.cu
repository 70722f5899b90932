// Device dtype conversion (contract in device_convert.h).
//   dst[i] = convert(src[i])   f32 -> f16 / bf16 (round to nearest even), f16 / bf16 -> f32
// Launch:  1-D grid-stride loop, 256 threads, at most 4096 blocks; consecutive threads take
//          consecutive elements (coalesced). A batch of segments: the same loop, blockIdx.y the
//          segment, the grid's x as wide as the longest segment needs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/device_convert.h"
#include "prnn/error.h"

namespace prnn {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 4096;

template <class To, class From>
__device__ __forceinline__ To convert_one(From v);
template <>
__device__ __forceinline__ float convert_one<float, __half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float convert_one<float, __nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ __half convert_one<__half, float>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 convert_one<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

// The segments of a batch, passed by value.
struct Segments {
  const void* src[kMaxConvertSegments];
  void* dst[kMaxConvertSegments];
  std::int64_t n[kMaxConvertSegments];
};

template <class To, class From>
__global__ void __launch_bounds__(kThreads) convert_segments_kernel(const Segments s) {
  const From* src = static_cast<const From*>(s.src[blockIdx.y]);
  To* dst = static_cast<To*>(s.dst[blockIdx.y]);
  const std::int64_t n = s.n[blockIdx.y];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += stride)
    dst[i] = convert_one<To, From>(src[i]);
}

template <class To, class From>
void launch_segments(const Segments& s, int count, std::int64_t longest, cudaStream_t stream) {
  const auto blocks =
      static_cast<unsigned>(std::min(kMaxBlocks, (longest + kThreads - 1) / kThreads));
  convert_segments_kernel<To, From>
      <<<dim3(blocks, static_cast<unsigned>(count)), kThreads, 0, stream>>>(s);
  PRNN_CHECK_LAUNCH();
}

}  // namespace

void convert_on_device(const void* src, DType src_type, void* dst, DType dst_type, std::int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return;
  if (src_type == dst_type) {
    if (src != dst)
      PRNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * size_of(src_type),
                                      cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const ConvertSegment one{src, dst, n};
  convert_on_device(&one, 1, src_type, dst_type, stream);
}

// The one dispatch point: (source dtype, destination dtype) -> kernel.
void convert_on_device(const ConvertSegment* segments, int count, DType src_type, DType dst_type,
                       cudaStream_t stream) {
  if (count > kMaxConvertSegments)
    throw InvalidArgument("convert_on_device: expected at most " +
                          std::to_string(kMaxConvertSegments) + " segments, got " +
                          std::to_string(count));
  Segments s{};
  int used = 0;
  std::int64_t longest = 0;
  for (int i = 0; i < count; ++i) {
    if (segments[i].n <= 0) continue;
    s.src[used] = segments[i].src;
    s.dst[used] = segments[i].dst;
    s.n[used] = segments[i].n;
    longest = std::max(longest, segments[i].n);
    ++used;
  }
  if (used == 0) return;
  if (src_type == DType::F32 && dst_type == DType::F16)
    return launch_segments<__half, float>(s, used, longest, stream);
  if (src_type == DType::F32 && dst_type == DType::BF16)
    return launch_segments<__nv_bfloat16, float>(s, used, longest, stream);
  if (src_type == DType::F16 && dst_type == DType::F32)
    return launch_segments<float, __half>(s, used, longest, stream);
  if (src_type == DType::BF16 && dst_type == DType::F32)
    return launch_segments<float, __nv_bfloat16>(s, used, longest, stream);
  throw Unsupported("convert_on_device", std::string("no device conversion from ") +
                                             to_string(src_type) + " to " + to_string(dst_type));
}

}  // namespace prnn
