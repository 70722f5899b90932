// `prnn demo`: the main job on the best backend available, with a progress bar. On a GPU machine
// that is the long-memory task at T = 1024 (LongMemoryConfig's defaults, cmd_train.cpp prints
// it); without a GPU, the small LSTM demo on the CPU reference.
#include <fmt/format.h>

#include <memory>

#include "commands.h"
#include "progress.h"
#include "prnn/device.h"
#include "prnn/train.h"

namespace prnn::cli {
namespace {

std::string rate(double tokens_per_second) {
  if (tokens_per_second >= 1e6) return fmt::format("{:.2f}M tok/s", tokens_per_second / 1e6);
  if (tokens_per_second >= 1e3) return fmt::format("{:.1f}k tok/s", tokens_per_second / 1e3);
  return fmt::format("{:.0f} tok/s", tokens_per_second);
}

void run_demo_command(const DemoConfig& config) {
  fmt::print("prnn demo: LSTM-{} learns to remember the first of {} symbols (alphabet {}), batch {}\n",
             config.hidden, config.steps, config.alphabet, config.batch);
  ProgressBar bar(config.iterations);
  const TrainResult r = run_demo(config, [&](const TrainProgress& p) {
    bar.update(p.iteration, fmt::format("iter {}/{}  loss {:.4f}  acc {:.2f}  {}", p.iteration,
                                        p.iterations, p.loss, p.accuracy,
                                        rate(p.tokens_per_second)));
  });
  bar.finish();
  fmt::print("backend: {}\n", r.backend);
  fmt::print("result: loss {:.4f} -> {:.4f}, accuracy {:.1f}% (mean of the last 10 batches), "
             "{} in {:.1f} s\n",
             r.first_loss, r.final_loss, 100.0 * r.final_accuracy, rate(r.tokens_per_second),
             r.seconds);
}

// The long-memory job with LongMemoryConfig's defaults, the options the user gave applied.
void run_gpu_demo_command(const DemoConfig& given, const CLI::App& cmd) {
  constexpr std::int64_t kLogEvery = 100;
  LongMemoryConfig config;
  config.backend = TrainBackend::Gpu;
  if (cmd.count("--iterations") > 0) config.iterations = given.iterations;
  if (cmd.count("--hidden") > 0) config.hidden = given.hidden;
  if (cmd.count("--steps") > 0) config.steps = given.steps;
  if (cmd.count("--batch") > 0) config.batch = given.batch;
  if (cmd.count("--lr") > 0) config.learning_rate = given.learning_rate;
  if (cmd.count("--seed") > 0) config.seed = given.seed;
  fmt::print("prnn demo on the GPU\n");
  run_long_memory_command(config, kLogEvery);
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto config = std::make_shared<DemoConfig>();
  auto* cmd = app.add_subcommand(
      "demo", "Train a recurrent model on the best backend available (GPU: the long-memory task "
              "at T = 1024; CPU: a small LSTM)");
  cmd->add_option("--iterations", config->iterations, "Training iterations")->check(CLI::PositiveNumber);
  cmd->add_option("--hidden", config->hidden, "Hidden units")->check(CLI::PositiveNumber);
  cmd->add_option("--steps", config->steps, "Sequence length")->check(CLI::PositiveNumber);
  cmd->add_option("--batch", config->batch, "Mini-batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--lr", config->learning_rate, "Adam learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", config->seed, "Random seed");
  cmd->callback([config, cmd] {
    if (device_count() > 0) run_gpu_demo_command(*config, *cmd);
    else run_demo_command(*config);
  });
}

}  // namespace prnn::cli
