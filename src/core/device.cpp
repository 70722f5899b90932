#include "prnn/device.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>

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

namespace {
// The sm_90 parts prnn plans for without one (prnn/device.h): what cudaDeviceGetAttribute reports
// on each where they differ; the rest, below, is common to both. The H200 is the device the
// planner's tests plan on (tests/persistent/planner_test.cpp).
struct Sm90Part {
  const char* key;
  const char* name;
  std::size_t l2_bytes;
  int memory_clock_khz;
  int memory_bus_width_bits;
};
constexpr Sm90Part kDescribed[] = {
    {"h100", "NVIDIA H100 80GB HBM3", 50u << 20, 2619000, 5120},
    {"h200", "NVIDIA H200", 60u << 20, 3201000, 6016},
};

DeviceInfo described(const Sm90Part& part) {
  DeviceInfo d;
  d.index = -1;
  d.name = part.name;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.max_threads_per_sm = 2048;
  d.max_threads_per_block = 1024;
  d.shared_memory_per_sm = 233472;           // 228 KiB
  d.shared_memory_per_block_optin = 232448;  // 227 KiB
  d.l2_bytes = part.l2_bytes;
  d.memory_clock_khz = part.memory_clock_khz;
  d.memory_bus_width_bits = part.memory_bus_width_bits;
  d.sm_clock_khz = 1980000;
  d.cooperative_launch = true;
  d.cluster_launch = true;
  return d;
}
}  // namespace

std::vector<std::string> described_devices() {
  std::vector<std::string> out;
  for (const Sm90Part& part : kDescribed) out.emplace_back(part.key);
  return out;
}

DeviceInfo described_device(const std::string& name) {
  std::string key = name;
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Sm90Part& part : kDescribed)
    if (key == part.key) return described(part);
  throw InvalidArgument(fmt::format("described_device: expected one of {}, got \"{}\"",
                                    fmt::join(described_devices(), ", "), name));
}

std::vector<DeviceInfo> all_devices() {
  std::vector<DeviceInfo> out;
  const int n = device_count();
  for (int i = 0; i < n; ++i) out.push_back(device_info(i));
  return out;
}

}  // namespace prnn
