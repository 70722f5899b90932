// `prnn info`: each GPU and its on-chip capacity, or plainly that there is none.
#include <fmt/format.h>

#include "commands.h"
#include "prnn/prnn.h"

namespace prnn::cli {
namespace {

std::string mib(std::size_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / (1 << 20)); }
std::string kib(std::size_t bytes) { return fmt::format("{:.0f} KiB", double(bytes) / 1024); }

void run_info() {
  fmt::print("prnn {} ({})\n", version(), built_with_cuda() ? "built with CUDA" : "built without CUDA");
  const int n = device_count();
  if (n == 0) {
    fmt::print("no GPU: {}\n", no_device_reason());
    fmt::print("backend: cpu-reference (every op runs on the CPU reference)\n");
    return;
  }
  for (const DeviceInfo& d : all_devices()) {
    fmt::print("GPU {}: {} (compute capability {}.{})\n", d.index, d.name, d.cc_major, d.cc_minor);
    fmt::print("  SMs                      {}\n", d.sm_count);
    fmt::print("  registers                {} per SM = {} on chip\n", d.registers_per_sm,
               mib(d.register_file_bytes()));
    fmt::print("  shared memory            {} per SM ({} per block opt-in) = {} on chip\n",
               kib(d.shared_memory_per_sm), kib(d.shared_memory_per_block_optin),
               mib(d.shared_memory_bytes()));
    fmt::print("  L2 cache                 {}\n", mib(d.l2_bytes));
    fmt::print("  global memory            {:.1f} GiB\n", double(d.global_memory_bytes) / (1 << 30));
    fmt::print("  threads                  {} per SM\n", d.max_threads_per_sm);
    fmt::print("  cooperative launch       {}\n", d.cooperative_launch ? "yes" : "no");
    fmt::print("  thread-block clusters    {}\n", d.cluster_launch ? "yes" : "no");
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show each GPU and its on-chip capacity");
  cmd->callback(run_info);
}

}  // namespace prnn::cli
