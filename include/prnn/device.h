// What the GPUs in this machine can hold on chip, read from the driver.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace prnn {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int registers_per_sm = 0;         // 32-bit registers
  int registers_per_block = 0;
  int max_threads_per_sm = 0;
  int max_threads_per_block = 0;
  std::size_t shared_memory_per_sm = 0;        // bytes
  std::size_t shared_memory_per_block_optin = 0;  // bytes, after cudaFuncSetAttribute
  std::size_t l2_bytes = 0;
  std::size_t global_memory_bytes = 0;
  int memory_bus_width_bits = 0;
  int memory_clock_khz = 0;
  int sm_clock_khz = 0;
  bool cooperative_launch = false;
  bool cluster_launch = false;

  // Register file and shared memory summed over all SMs: what a persistent kernel can stash.
  std::size_t register_file_bytes() const {
    return static_cast<std::size_t>(sm_count) * static_cast<std::size_t>(registers_per_sm) * 4;
  }
  std::size_t shared_memory_bytes() const {
    return static_cast<std::size_t>(sm_count) * shared_memory_per_sm;
  }
};

// True when prnn was built with CUDA support.
bool built_with_cuda();
// Number of usable GPUs; 0 when there is none, no driver, or the build has no CUDA.
int device_count();
// Why device_count() is 0, in plain words ("no CUDA-capable device is detected", ...).
std::string no_device_reason();
// Throws InvalidArgument for an index out of range.
DeviceInfo device_info(int index);
std::vector<DeviceInfo> all_devices();

}  // namespace prnn
