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
// GPUs described by what their driver reports, for planning on a machine that has none of them
// (`prnn plan --gpu h200`): "h100" (H100 SXM, 80 GB HBM3) and "h200". Both are sm_90 parts of
// 132 SMs, the GPUs the persistent kernels' tiling and the planner's latency model were fitted on.
// Set: name, compute capability, SMs, registers, threads, shared memory, L2, SM and memory
// clocks, memory bus, cooperative and cluster launch; global_memory_bytes is 0 (the plan does not
// read it) and index is -1 (not a device of this machine).
std::vector<std::string> described_devices();
// Case-insensitive; throws InvalidArgument naming the described GPUs for any other name.
DeviceInfo described_device(const std::string& name);

// Number of usable GPUs; 0 when there is none, no driver, or the build has no CUDA.
int device_count();
// Why device_count() is 0, in plain words ("no CUDA-capable device is detected", ...).
std::string no_device_reason();
// Throws InvalidArgument for an index out of range.
DeviceInfo device_info(int index);
std::vector<DeviceInfo> all_devices();

}  // namespace prnn
