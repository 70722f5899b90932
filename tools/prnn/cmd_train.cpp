// `prnn train long-memory`: the long-memory task (prnn/train.h) with a progress bar, a log line
// every K iterations, checkpoints and resume. `prnn demo` runs the same job on a GPU machine.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "commands.h"
#include "progress.h"
#include "prnn/train.h"

namespace prnn::cli {
namespace {

std::string tokens(double per_second) {
  if (per_second >= 1e9) return fmt::format("{:.2f}G tok/s", per_second / 1e9);
  if (per_second >= 1e6) return fmt::format("{:.2f}M tok/s", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f}k tok/s", per_second / 1e3);
  return fmt::format("{:.0f} tok/s", per_second);
}

std::string status(const TrainProgress& p) {
  return fmt::format("iter {}/{}  loss {:.4f}  acc {:.3f}  {:.1f} it/s  {}", p.iteration,
                     p.iterations, p.loss, p.accuracy, p.iterations_per_second,
                     tokens(p.tokens_per_second));
}

struct TrainOptions {
  LongMemoryConfig config;
  std::int64_t log_every = 100;
  std::int64_t save_every = -1;  // -1: the same as log_every
  std::string backend = "auto";
};

}  // namespace

void run_long_memory_command(const LongMemoryConfig& config, std::int64_t log_every) {
  fmt::print("long-memory task (Hochreiter & Schmidhuber 2b): remember the sign of the first of {} "
             "one-hot vectors (alphabet {})\n",
             config.steps, kLongMemoryAlphabet);
  fmt::print("model: GILR-LSTM {}-{} + linear classifier, batch {}, Adam lr {} eps {}, seed {}\n",
             config.hidden, config.hidden, config.batch, config.learning_rate, config.adam_eps,
             config.seed);
  if (config.resume) fmt::print("resuming from {}\n", config.checkpoint);
  const bool tty = isatty(fileno(stdout)) != 0;
  ProgressBar bar(config.iterations);
  double window_loss = 0.0, window_accuracy = 0.0;  // sums since the last log line
  std::int64_t window = 0;
  const LongMemoryResult r = train_long_memory(config, [&](const TrainProgress& p) {
    window_loss += p.loss;
    window_accuracy += p.accuracy;
    ++window;
    if (log_every > 0 && p.iteration % log_every == 0) {
      if (tty) std::fputs("\r\033[K", stdout);
      fmt::print("iter {:>7}  loss {:.4f}  acc {:.3f}  (mean of {}: loss {:.4f}, acc {:.3f})  "
                 "{:.1f} it/s  {}  {:.1f} s\n",
                 p.iteration, p.loss, p.accuracy, window, window_loss / double(window),
                 window_accuracy / double(window), p.iterations_per_second,
                 tokens(p.tokens_per_second), p.seconds);
      window_loss = window_accuracy = 0.0;
      window = 0;
    }
    bar.update(p.iteration, status(p));
  });
  bar.finish();
  const TrainResult& t = r.train;
  fmt::print("backend: {}\n", t.backend);
  if (r.converged && t.iterations == 0) {
    fmt::print("already converged at iteration {} (the checkpoint's)\n", r.converged_iteration);
  } else if (r.converged) {
    fmt::print("converged: {} consecutive batches 100% correct at iteration {} ({:.1f} s this run)\n",
               config.stop_after_perfect, r.converged_iteration, t.seconds);
  } else {
    fmt::print("not converged: stopped at iteration {}\n", r.last_iteration);
  }
  if (t.iterations > 0) {
    fmt::print("loss: {:.4f} (iteration {}) -> {:.4f} (iteration {}); last 10 batches: loss "
               "{:.4f}, accuracy {:.1f}%\n",
               t.first_loss, r.start_iteration + 1, r.last_loss, r.last_iteration, t.final_loss,
               100.0 * t.final_accuracy);
    fmt::print("speed: {} iterations in {:.2f} s: {:.2f} it/s, {}\n", t.iterations, t.seconds,
               r.iterations_per_second, tokens(t.tokens_per_second));
  }
  if (!config.checkpoint.empty())
    fmt::print("checkpoint: {} (iteration {})\n", config.checkpoint, r.last_iteration);
}

void add_train_command(CLI::App& app) {
  auto* train = app.add_subcommand("train", "Train a model on a task");
  train->require_subcommand(1);
  auto o = std::make_shared<TrainOptions>();
  LongMemoryConfig& c = o->config;
  auto* lm = train->add_subcommand(
      "long-memory",
      "Hochreiter & Schmidhuber's problem 2b at long T: a 2-layer GILR-LSTM remembers the "
      "first symbol");
  auto* steps = lm->add_option("--steps", c.steps, "Sequence length T")
                    ->check(CLI::PositiveNumber)->capture_default_str();
  auto* hidden = lm->add_option("--hidden", c.hidden, "Hidden units of both layers")
                     ->check(CLI::PositiveNumber)->capture_default_str();
  auto* batch = lm->add_option("--batch", c.batch, "Mini-batch size")
                    ->check(CLI::PositiveNumber)->capture_default_str();
  auto* lr = lm->add_option("--lr", c.learning_rate, "Adam learning rate")
                 ->check(CLI::PositiveNumber)->capture_default_str();
  auto* eps = lm->add_option("--adam-eps", c.adam_eps,
                             "Adam's epsilon (about 1e-12 at T = 2^20, where gradients are tiny)")
                  ->check(CLI::PositiveNumber)->capture_default_str();
  auto* seed = lm->add_option("--seed", c.seed, "Seed of the init and the data stream")
                   ->capture_default_str();
  lm->add_option("--iterations", c.iterations,
                 "Last iteration to run (counting those a resumed checkpoint has done)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  lm->add_option("--stop-after", c.stop_after_perfect,
                 "Stop after this many consecutive 100%-correct batches (0: never)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  lm->add_option("--checkpoint", c.checkpoint, "Checkpoint file (saved periodically and at the end)");
  lm->add_flag("--resume", c.resume, "Resume from --checkpoint (its config is the default)");
  lm->add_option("--log-every", o->log_every, "Print a log line every K iterations (0: never)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  lm->add_option("--save-every", o->save_every,
                 "Save the checkpoint every K iterations (default: --log-every; 0: only at the end)")
      ->check(CLI::NonNegativeNumber);
  lm->add_option("--backend", o->backend, "auto (GPU if present), gpu, or cpu (the reference)")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))->capture_default_str();
  lm->callback([o, steps, hidden, batch, lr, eps, seed] {
    LongMemoryConfig cfg = o->config;
    if (cfg.resume && !cfg.checkpoint.empty()) {
      // The checkpoint's config fills whatever the command line leaves out; a given value that
      // differs is reported by train_long_memory.
      const LongMemoryCheckpoint ck = read_long_memory_checkpoint(cfg.checkpoint);
      if (steps->count() == 0) cfg.steps = ck.config.steps;
      if (hidden->count() == 0) cfg.hidden = ck.config.hidden;
      if (batch->count() == 0) cfg.batch = ck.config.batch;
      if (lr->count() == 0) cfg.learning_rate = ck.config.learning_rate;
      if (eps->count() == 0) cfg.adam_eps = ck.config.adam_eps;
      if (seed->count() == 0) cfg.seed = ck.config.seed;
    }
    cfg.save_every = o->save_every >= 0 ? o->save_every : o->log_every;
    static const std::map<std::string, TrainBackend> backends{
        {"auto", TrainBackend::Auto}, {"gpu", TrainBackend::Gpu}, {"cpu", TrainBackend::Cpu}};
    cfg.backend = backends.at(o->backend);
    run_long_memory_command(cfg, o->log_every);
  });
}

}  // namespace prnn::cli
