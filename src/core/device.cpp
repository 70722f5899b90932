#include "prnn/device.h"

#include <fmt/format.h>

#include "core/check.h"

#if PRNN_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace prnn {

bool built_with_cuda() { return PRNN_WITH_CUDA != 0; }

#if PRNN_WITH_CUDA
namespace {
int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}
}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  if (err != cudaSuccess) return fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
  if (n == 0) return "the CUDA driver reports no devices";
  return {};
}

DeviceInfo device_info(int index) {
  const int n = device_count();
  PRNN_EXPECT(index >= 0 && index < n, "device_info: expected a device index in [0, {}), got {}", n,
              index);
  DeviceInfo d;
  d.index = index;
  // cudaDeviceGetAttribute has no name; the properties struct is the one place it lives.
  cudaDeviceProp prop{};
  PRNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  d.name = prop.name;
  d.cc_major = attribute(cudaDevAttrComputeCapabilityMajor, index);
  d.cc_minor = attribute(cudaDevAttrComputeCapabilityMinor, index);
  d.sm_count = attribute(cudaDevAttrMultiProcessorCount, index);
  d.registers_per_sm = attribute(cudaDevAttrMaxRegistersPerMultiprocessor, index);
  d.registers_per_block = attribute(cudaDevAttrMaxRegistersPerBlock, index);
  d.max_threads_per_sm = attribute(cudaDevAttrMaxThreadsPerMultiProcessor, index);
  d.max_threads_per_block = attribute(cudaDevAttrMaxThreadsPerBlock, index);
  d.shared_memory_per_sm =
      static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, index));
  d.shared_memory_per_block_optin =
      static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, index));
  d.l2_bytes = static_cast<std::size_t>(attribute(cudaDevAttrL2CacheSize, index));
  d.global_memory_bytes = prop.totalGlobalMem;
  d.memory_bus_width_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, index);
  d.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, index);
  d.sm_clock_khz = attribute(cudaDevAttrClockRate, index);
  d.cooperative_launch = attribute(cudaDevAttrCooperativeLaunch, index) != 0;
  d.cluster_launch = attribute(cudaDevAttrClusterLaunch, index) != 0;
  return d;
}
#else
int device_count() { return 0; }
std::string no_device_reason() { return "prnn was built without CUDA (PRNN_CUDA=OFF)"; }
DeviceInfo device_info(int index) {
  throw InvalidArgument(
      fmt::format("device_info: expected a device index in [0, 0), got {} (built without CUDA)",
                  index));
}
#endif

std::vector<DeviceInfo> all_devices() {
  std::vector<DeviceInfo> out;
  const int n = device_count();
  for (int i = 0; i < n; ++i) out.push_back(device_info(i));
  return out;
}

}  // namespace prnn
