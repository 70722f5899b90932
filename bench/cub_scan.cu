// The CUB baseline for the linear recurrence: cub::DeviceScan::InclusiveScanByKey over (a, x)
// pairs with the composition operator, one key per lane. CUB scans contiguous segments, so the
// data is lane-major [lanes, T] here (the layout that favours CUB).
#include <cub/device/device_scan.cuh>

#include "bench/cub_scan.h"
#include "core/cuda_check.h"

namespace prnn::bench {
namespace {

struct ComposePairs {
  __device__ float2 operator()(const float2& first, const float2& then) const {
    return make_float2(then.x * first.x, fmaf(then.x, first.y, then.y));
  }
};

__global__ void make_keys(std::int64_t n, std::int64_t steps, int* keys) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) keys[i] = static_cast<int>(i / steps);
}

}  // namespace

CubScan::CubScan(std::int64_t lanes, std::int64_t steps) : n_(lanes * steps) {
  keys_ = DeviceBuffer(static_cast<std::size_t>(n_) * sizeof(int));
  make_keys<<<static_cast<unsigned>((n_ + 255) / 256), 256>>>(n_, steps, keys_.data_as<int>());
  PRNN_CHECK_LAUNCH();
  std::size_t bytes = 0;
  PRNN_CUDA_CHECK(cub::DeviceScan::InclusiveScanByKey(
      nullptr, bytes, keys_.data_as<int>(), static_cast<const float2*>(nullptr),
      static_cast<float2*>(nullptr), ComposePairs{}, n_));
  temp_ = DeviceBuffer(std::max<std::size_t>(bytes, 1));
}

void CubScan::run(const void* pairs_in, void* pairs_out, cudaStream_t stream) {
  std::size_t bytes = temp_.bytes();
  PRNN_CUDA_CHECK(cub::DeviceScan::InclusiveScanByKey(
      temp_.data(), bytes, keys_.data_as<int>(), static_cast<const float2*>(pairs_in),
      static_cast<float2*>(pairs_out), ComposePairs{}, n_, ::cuda::std::equal_to<>{}, stream));
}

}  // namespace prnn::bench
