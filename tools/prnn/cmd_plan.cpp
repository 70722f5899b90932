// `prnn plan`: how a recurrent layer would be laid out on this GPU (or, --gpu, on a described one)
// by the persistent kernels, and the predicted cost of a step (the latency model of the kernels,
// with the MBSP bound beside it).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

#include "commands.h"
#include "prnn/error.h"
#include "prnn/plan.h"

namespace prnn::cli {
namespace {

struct PlanOptions {
  std::string cell = "relu";
  std::string dtype = "f32";
  std::string math = "fp32";
  std::int64_t hidden = 1152;
  std::int64_t batch = 4;
  int device = 0;
  std::string gpu;  // a described GPU (prnn/device.h) instead of one of this machine's
};

void run_plan(const PlanOptions& o) {
  if (o.gpu.empty() && device_count() == 0)
    throw Unsupported("prnn plan",
                      fmt::format("it plans for a GPU's registers and shared "
                                  "memory, and there is none ({}); name one with "
                                  "--gpu ({})",
                                  no_device_reason(), fmt::join(described_devices(), ", ")));
  const DeviceInfo d = o.gpu.empty() ? device_info(o.device) : described_device(o.gpu);
  RnnDesc desc{parse_cell(o.cell),  o.hidden, o.hidden, 1, Direction::Unidirectional,
               parse_dtype(o.dtype)};
  desc.gemm_math = parse_gemm_math(o.math);
  if (o.gpu.empty())
    fmt::print("{} on GPU {} ({}, {} SMs), batch {}\n", to_string(desc.cell), d.index, d.name,
               d.sm_count, o.batch);
  else
    fmt::print("{} on an {} as described (--gpu {}, {} SMs; not a GPU of this machine), batch {}\n",
               to_string(desc.cell), d.name, o.gpu, d.sm_count, o.batch);
  fmt::print("{}", describe(plan_persistent(desc, o.batch, d)));
  // The latency model's cycle constants were fitted on an H200 (src/persistent/planner.cpp).
  if (d.cc_major != 9)
    fmt::print("note: the latency model's cycle constants were fitted on an H200 (sm_90); on this "
               "sm_{}{} GPU its prediction is a rough guide\n",
               d.cc_major, d.cc_minor);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "Plan a recurrent layer for the persistent kernels");
  cmd->add_option("--cell", o->cell, "relu, clipped_relu, tanh, gru or lstm")->capture_default_str();
  cmd->add_option("--hidden", o->hidden, "Hidden size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--batch", o->batch, "Mini-batch")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Weight storage: f32, bf16 or f16")->capture_default_str();
  cmd->add_option("--math", o->math,
                  "f32 layers: the GEMMs over all timesteps in fp32 or tf32 (RnnDesc::gemm_math)")
      ->check(CLI::IsMember({"fp32", "tf32"}))
      ->capture_default_str();
  auto* device = cmd->add_option("--device", o->device, "GPU index")->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpu", o->gpu,
                  fmt::format("Plan for a described GPU instead of one of this machine's: {}",
                              fmt::join(described_devices(), ", ")))
      ->excludes(device);
  cmd->callback([o] { run_plan(*o); });
}

}  // namespace prnn::cli
