// `prnn train long-memory`: the long-memory task (prnn/train.h) with a progress bar, a log line
// every K iterations, checkpoints and resume. `prnn demo` runs the same job on a GPU machine.
// `prnn train tree-lstm` / `prnn train bilstm-tagger`: the dynamic-graph models of prnn/models.h
// on SST / WikiNER read from DIR/sst or DIR/wikiner (train.txt, dev.txt), with a progress bar and
// one line per epoch (train loss, dev accuracy, sentences/s and words/s).
// `prnn train rvnn` / `td-rnn` / `td-lstm` (SST) and `bilstm-char-tagger` (WikiNER): the other
// VPPS benchmark models of prnn/models.h, the same way.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "progress.h"
#include "prnn/data.h"
#include "prnn/models.h"
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
  std::string math = "fp32";
};

// ---- Dynamic-graph models (prnn/models.h) -----------------------------------------------------

// What `tree-lstm` and `bilstm-tagger` share on the command line.
struct GraphModelOptions {
  std::string data;  // DIR holding sst/ and/or wikiner/
  std::string optimizer = "adam";
  std::int64_t min_count = 2;
  std::string executor = "cpu";  // graph::make_executor's names
};

void add_training_options(CLI::App* cmd, models::TrainingOptions& t, GraphModelOptions& g) {
  cmd->add_option("--data", g.data, "Directory holding sst/ or wikiner/ (train.txt, dev.txt)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--epochs", t.epochs, "Passes over the training set")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--batch", t.batch, "Sentences per graph and per update")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--lr", t.learning_rate, "Learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--optimizer", g.optimizer, "adam or sgd")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  cmd->add_option("--momentum", t.momentum, "SGD momentum")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  cmd->add_flag("--dense-updates", [&t](std::int64_t) { t.sparse_updates = false; },
                "Update every row of the embedding tables at each step (DyNet with sparse updates "
                "disabled), not only the rows the batch used");
  cmd->add_option("--limit", t.limit, "Train on the first N training sentences only (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", t.seed, "Seed of the init and the shuffles")->capture_default_str();
  cmd->add_option("--executor", g.executor,
                  "cpu, cpu-autobatch, cpu-autobatch-depth, gpu (one kernel per node), "
                  "gpu-autobatch or gpu-autobatch-depth; an autobatch one with the suffix "
                  "-unfused does not fuse elementwise batches")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(graph::kExecutorNames),
                                                     std::end(graph::kExecutorNames))))
      ->capture_default_str();
  cmd->add_option("--min-count", g.min_count,
                  "Words seen fewer times in the (limited) training set become <unk>")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// A model size: a positive integer with its default shown.
void add_size_option(CLI::App* cmd, const std::string& name, std::int64_t& value,
                     const std::string& help) {
  cmd->add_option(name, value, help)->check(CLI::PositiveNumber)->capture_default_str();
}

// --loss all-nodes|root of the tree models; the choice lands in `loss` when the command runs.
std::shared_ptr<std::string> add_tree_loss_option(CLI::App* cmd) {
  auto loss = std::make_shared<std::string>("all-nodes");
  cmd->add_option("--loss", *loss, "Loss over every node's label (all-nodes) or the root's")
      ->check(CLI::IsMember({"all-nodes", "root"}))
      ->capture_default_str();
  return loss;
}

models::TreeLoss tree_loss_of(const std::string& name) {
  return name == "root" ? models::TreeLoss::Root : models::TreeLoss::AllNodes;
}

void finish_training_options(models::TrainingOptions& t, const GraphModelOptions& g) {
  t.optimizer = g.optimizer == "sgd" ? models::Optimizer::Sgd : models::Optimizer::Adam;
}

std::string per_second(double n, const char* unit) {
  if (n >= 1e3) return fmt::format("{:.1f}k {}/s", n / 1e3, unit);
  return fmt::format("{:.1f} {}/s", n, unit);
}

// Keeps the first `limit` sentences (0: all).
template <class Sentence>
void apply_limit(std::vector<Sentence>& v, std::int64_t limit) {
  if (limit > 0 && static_cast<std::size_t>(limit) < v.size())
    v.resize(static_cast<std::size_t>(limit));
}

// The word vocabulary of the training sentences actually used, pruned to min_count, and the
// sentences renumbered against it.
template <class Sentence>
data::Vocabulary training_vocabulary(std::vector<Sentence>& train, std::int64_t min_count) {
  data::Vocabulary counts;
  for (const Sentence& s : train)
    for (const std::string& token : s.tokens) counts.add(token);
  data::Vocabulary words = counts.pruned(min_count);
  for (Sentence& s : train) s.set_word_ids(words);
  return words;
}

// Runs a trainer with a progress bar over all batches and a line per epoch.
template <class Train>
models::TrainReport run_with_progress(std::int64_t epochs, std::int64_t batches, bool words_rate,
                                      const Train& train) {
  const bool tty = isatty(fileno(stdout)) != 0;
  ProgressBar bar(epochs * batches);
  models::TrainCallbacks cb;
  cb.on_batch = [&](const models::BatchProgress& p) {
    std::string status = fmt::format("epoch {}/{}  batch {}/{}  loss {:.4f}  acc {:.3f}  {}",
                                     p.epoch, p.epochs, p.batch, p.batches, p.loss, p.accuracy,
                                     per_second(p.sentences_per_second, "sent"));
    if (words_rate) status += "  " + per_second(p.words_per_second, "words");
    bar.update((p.epoch - 1) * batches + p.batch, status);
  };
  cb.on_epoch = [&](const models::EpochReport& e) {
    if (tty) std::fputs("\r\033[K", stdout);
    std::string line = fmt::format(
        "epoch {:>3}  train loss {:.4f} (per sentence {:.3f})  train acc {:.4f}  dev acc {:.4f}  "
        "{}",
        e.epoch, e.train_loss, e.train_sentence_loss, e.train_accuracy, e.dev_accuracy,
        per_second(e.sentences_per_second, "sent"));
    if (words_rate) line += "  " + per_second(e.words_per_second, "words");
    fmt::print("{}  ({:.1f} s train, {:.1f} s dev)\n", line, e.seconds, e.dev_seconds);
  };
  const models::TrainReport r = train(cb);
  bar.finish();
  return r;
}

void print_summary(const models::TrainReport& r) {
  if (r.epochs.empty()) return;
  const models::EpochReport& first = r.epochs.front();
  const models::EpochReport& last = r.epochs.back();
  double seconds = 0.0;
  for (const models::EpochReport& e : r.epochs) seconds += e.seconds;
  fmt::print(
      "result: train loss {:.4f} -> {:.4f}, dev accuracy {:.4f} -> {:.4f}; {} epochs in "
      "{:.1f} s: {}, {} (executor {})\n",
      first.train_loss, last.train_loss, first.dev_accuracy, last.dev_accuracy, r.epochs.size(),
      seconds,
      per_second(
          static_cast<double>(r.train_sentences) * static_cast<double>(r.epochs.size()) / seconds,
          "sent"),
      per_second(
          static_cast<double>(r.train_words) * static_cast<double>(r.epochs.size()) / seconds,
          "words"),
      r.executor);
}

// SST train (limited, renumbered against the pruned training vocabulary) and dev trees.
struct SstData {
  std::string dir;
  data::Vocabulary words;
  std::vector<data::Tree> train, dev;
  std::int64_t train_words = 0;
};

SstData read_sst_data(const models::TrainingOptions& t, const GraphModelOptions& g) {
  SstData d;
  d.dir = g.data + "/sst";
  data::Vocabulary all_words;
  d.train = data::read_sst(d.dir + "/train.txt", all_words, /*grow=*/true);
  apply_limit(d.train, t.limit);
  d.words = training_vocabulary(d.train, g.min_count);
  data::Vocabulary dev_words = d.words;
  d.dev = data::read_sst(d.dir + "/dev.txt", dev_words, /*grow=*/false);
  for (const data::Tree& tree : d.train) d.train_words += tree.leaves();
  return d;
}

void print_sst_data(const char* model, const SstData& d, const GraphModelOptions& g) {
  fmt::print("{} on {}: {} training trees ({} words), {} dev trees, vocabulary {} (min count {})\n",
             model, d.dir, d.train.size(), d.train_words, d.dev.size(), d.words.size(),
             g.min_count);
}

std::string training_line(const models::TrainingOptions& t) {
  return fmt::format("batch {}, {} lr {}, {} epochs, seed {}{}", t.batch,
                     models::to_string(t.optimizer), t.learning_rate, t.epochs, t.seed,
                     t.sparse_updates ? "" : ", dense lookup updates");
}

// Runs a trainer over d.train (SstData or WikinerData) with progress and a summary.
template <class Data, class Train>
void run_model(const models::TrainingOptions& t, const Data& d, const Train& train) {
  const auto batches = (static_cast<std::int64_t>(d.train.size()) + t.batch - 1) / t.batch;
  print_summary(run_with_progress(t.epochs, batches, /*words_rate=*/true, train));
}

// WikiNER train (limited, renumbered against the pruned training vocabulary) and dev sentences,
// with the tag set of the training file.
struct WikinerData {
  std::string dir;
  data::Vocabulary words, tags{data::Vocabulary::Unknown::Reject};
  std::vector<data::TaggedSentence> train, dev;
  std::int64_t train_words = 0;
};

WikinerData read_wikiner_data(const models::TrainingOptions& t, const GraphModelOptions& g) {
  WikinerData d;
  d.dir = g.data + "/wikiner";
  data::Vocabulary all_words;
  d.train = data::read_wikiner(d.dir + "/train.txt", all_words, d.tags, /*grow=*/true);
  d.tags.freeze();
  apply_limit(d.train, t.limit);
  d.words = training_vocabulary(d.train, g.min_count);
  data::Vocabulary dev_words = d.words;
  d.dev = data::read_wikiner(d.dir + "/dev.txt", dev_words, d.tags, /*grow=*/false);
  for (const data::TaggedSentence& sentence : d.train) d.train_words += sentence.size();
  return d;
}

void run_tree_lstm_command(models::TreeLstmOptions o, const GraphModelOptions& g) {
  finish_training_options(o.training, g);
  const SstData d = read_sst_data(o.training, g);
  print_sst_data("Tree-LSTM sentiment (Tai et al. 2015, binary)", d, g);
  fmt::print("model: embedding {}, hidden {}, forget gates from {}, 5-class softmax, loss over {}; "
             "{}\n",
             o.embedding, o.hidden,
             o.forget == graph::TreeForget::OwnChild ? "the own child" : "both children",
             models::to_string(o.loss), training_line(o.training));
  const std::unique_ptr<graph::Executor> ex = graph::make_executor(g.executor);
  run_model(o.training, d, [&](const models::TrainCallbacks& cb) {
    return models::train_tree_lstm(o, d.words, d.train, d.dev, cb, ex.get());
  });
}

void run_bilstm_tagger_command(models::BiLstmTaggerOptions o, const GraphModelOptions& g) {
  finish_training_options(o.training, g);
  const WikinerData d = read_wikiner_data(o.training, g);
  fmt::print(
      "BiLSTM tagger on {}: {} training sentences ({} words), {} dev sentences, "
      "vocabulary {} (min count {}), {} tags\n",
      d.dir, d.train.size(), d.train_words, d.dev.size(), d.words.size(), g.min_count,
      d.tags.size());
  fmt::print("model: embedding {}, BiLSTM hidden {} per direction, MLP {}, per-word loss; {}\n",
             o.embedding, o.hidden, o.mlp, training_line(o.training));
  const std::unique_ptr<graph::Executor> ex = graph::make_executor(g.executor);
  run_model(o.training, d, [&](const models::TrainCallbacks& cb) {
    return models::train_bilstm_tagger(o, d.words, d.tags, d.train, d.dev, cb, ex.get());
  });
}

void run_rvnn_command(models::RvnnOptions o, const GraphModelOptions& g) {
  finish_training_options(o.training, g);
  const SstData d = read_sst_data(o.training, g);
  print_sst_data("RvNN sentiment (Socher et al., untied leaf weights)", d, g);
  fmt::print("model: embedding {}, hidden {}, 5-class softmax, loss over {}; {}\n", o.embedding,
             o.hidden, models::to_string(o.loss), training_line(o.training));
  const std::unique_ptr<graph::Executor> ex = graph::make_executor(g.executor);
  run_model(o.training, d, [&](const models::TrainCallbacks& cb) {
    return models::train_rvnn(o, d.words, d.train, d.dev, cb, ex.get());
  });
}

void run_td_rnn_command(models::TdRnnOptions o, const GraphModelOptions& g) {
  finish_training_options(o.training, g);
  const SstData d = read_sst_data(o.training, g);
  print_sst_data("TD-RNN sentiment (time-delay pyramid, tanh composition)", d, g);
  fmt::print("model: embedding = hidden {}, MLP {}, 5-class softmax on the sentence; {}\n",
             o.hidden, o.mlp, training_line(o.training));
  const std::unique_ptr<graph::Executor> ex = graph::make_executor(g.executor);
  run_model(o.training, d, [&](const models::TrainCallbacks& cb) {
    return models::train_td_rnn(o, d.words, d.train, d.dev, cb, ex.get());
  });
}

void run_td_lstm_command(models::TdLstmOptions o, const GraphModelOptions& g) {
  finish_training_options(o.training, g);
  const SstData d = read_sst_data(o.training, g);
  print_sst_data("TD-LSTM sentiment (time-delay pyramid, binary Tree-LSTM cell)", d, g);
  fmt::print("model: embedding {}, hidden {}, MLP {}, 5-class softmax on the sentence; {}\n",
             o.embedding, o.hidden, o.mlp, training_line(o.training));
  const std::unique_ptr<graph::Executor> ex = graph::make_executor(g.executor);
  run_model(o.training, d, [&](const models::TrainCallbacks& cb) {
    return models::train_td_lstm(o, d.words, d.train, d.dev, cb, ex.get());
  });
}

void run_bilstm_char_tagger_command(models::BiLstmCharTaggerOptions o, const GraphModelOptions& g) {
  finish_training_options(o.training, g);
  const WikinerData d = read_wikiner_data(o.training, g);
  data::Vocabulary counts;  // of the training sentences actually used
  for (const data::TaggedSentence& s : d.train)
    for (const std::string& token : s.tokens) counts.add(token);
  const data::Vocabulary chars = data::char_vocabulary(counts);
  std::int64_t rare_words = 0;
  for (const data::TaggedSentence& s : d.train)
    for (int w : s.words)
      if (w == data::Vocabulary::kUnk || d.words.count(w) < o.rare_below) ++rare_words;
  fmt::print(
      "BiLSTM tagger with character features on {}: {} training sentences ({} words, {} read by "
      "characters), {} dev sentences, vocabulary {} (min count {}), {} characters, {} tags\n",
      d.dir, d.train.size(), d.train_words, rare_words, d.dev.size(), d.words.size(), g.min_count,
      chars.size(), d.tags.size());
  fmt::print(
      "model: embedding {} (words counted < {} or <unk>: char BiLSTM {} per direction over char "
      "embedding {}), BiLSTM hidden {} per direction, MLP {}, per-word loss; {}\n",
      o.embedding, o.rare_below, o.embedding / 2, o.char_embedding, o.hidden, o.mlp,
      training_line(o.training));
  const std::unique_ptr<graph::Executor> ex = graph::make_executor(g.executor);
  run_model(o.training, d, [&](const models::TrainCallbacks& cb) {
    return models::train_bilstm_char_tagger(o, d.words, chars, d.tags, d.train, d.dev, cb, ex.get());
  });
}

}  // namespace

void run_long_memory_command(const LongMemoryConfig& config, std::int64_t log_every) {
  fmt::print("long-memory task (Hochreiter & Schmidhuber 2b): remember the sign of the first of {} "
             "one-hot vectors (alphabet {})\n",
             config.steps, kLongMemoryAlphabet);
  fmt::print("model: GILR-LSTM {}-{} + linear classifier, batch {}, Adam lr {} eps {}, seed {}, "
             "GEMMs {}, {}\n",
             config.hidden, config.hidden, config.batch, config.learning_rate, config.adam_eps,
             config.seed, to_string(config.math),
             config.clip_norm > 0 ? fmt::format("gradient clipped to norm {}", config.clip_norm)
                                  : std::string("no gradient clipping"));
  if (config.resume) fmt::print("resuming from {}\n", config.checkpoint);
  const bool tty = isatty(fileno(stdout)) != 0;
  ProgressBar bar(config.iterations);
  // Since the last log line: sums of loss and accuracy; the gradient norm's maximum and the sum of
  // its logs over the iterations where it is not 0 (a batch fitted exactly has a zero gradient).
  double window_loss = 0.0, window_accuracy = 0.0, window_log_norm = 0.0, window_max_norm = 0.0;
  std::int64_t window = 0, window_nonzero = 0;
  const LongMemoryResult r = train_long_memory(config, [&](const TrainProgress& p) {
    window_loss += p.loss;
    window_accuracy += p.accuracy;
    if (p.grad_norm > 0) {
      window_log_norm += std::log(p.grad_norm);
      ++window_nonzero;
    }
    window_max_norm = std::max(window_max_norm, p.grad_norm);
    ++window;
    if (log_every > 0 && p.iteration % log_every == 0) {
      if (tty) std::fputs("\r\033[K", stdout);
      const double n = double(window);
      fmt::print("iter {:>7}  loss {:.4f}  acc {:.3f}  (mean of {}: loss {:.4f}, acc {:.3f}; "
                 "|grad| geo-mean {:.3g}, max {:.3g})  {:.1f} it/s  {}  {:.1f} s\n",
                 p.iteration, p.loss, p.accuracy, window, window_loss / n, window_accuracy / n,
                 window_nonzero > 0 ? std::exp(window_log_norm / double(window_nonzero)) : 0.0,
                 window_max_norm, p.iterations_per_second,
                 tokens(p.tokens_per_second), p.seconds);
      window_loss = window_accuracy = window_log_norm = window_max_norm = 0.0;
      window = window_nonzero = 0;
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
               perfect_batches_needed(config), r.converged_iteration, t.seconds);
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
                 "Stop after this many consecutive 100%-correct batches, and at least 64 "
                 "sequences in a row (0: never)")
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
  lm->add_option("--clip-norm", c.clip_norm,
                 "Clip the gradient to this global L2 norm before each Adam step (0: off)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  lm->add_option("--math", o->math,
                 "GEMM math of the GPU layers: fp32, or tf32 (tensor cores, faster at long T)")
      ->check(CLI::IsMember({"fp32", "tf32"}))->capture_default_str();
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
    cfg.math = parse_gemm_math(o->math);
    run_long_memory_command(cfg, o->log_every);
  });

  auto tree = std::make_shared<models::TreeLstmOptions>();
  auto tree_g = std::make_shared<GraphModelOptions>();
  auto* tl = train->add_subcommand(
      "tree-lstm", "Tree-LSTM sentiment classifier (Tai et al. 2015) on SST");
  add_training_options(tl, tree->training, *tree_g);
  add_size_option(tl, "--embedding", tree->embedding, "Word embedding size E");
  add_size_option(tl, "--hidden", tree->hidden, "Tree-LSTM hidden size H");
  auto tree_loss = add_tree_loss_option(tl);
  auto forget = std::make_shared<std::string>("all-children");
  tl->add_option("--forget-gates", *forget,
                 "Each child's forget gate from both children's h (all-children, Tai et al.) or "
                 "from its own child's only (own-child, DyNet's Tree-LSTM benchmark cell)")
      ->check(CLI::IsMember({"all-children", "own-child"}))
      ->capture_default_str();
  tl->callback([tree, tree_g, tree_loss, forget] {
    models::TreeLstmOptions options = *tree;
    options.loss = tree_loss_of(*tree_loss);
    options.forget =
        *forget == "own-child" ? graph::TreeForget::OwnChild : graph::TreeForget::AllChildren;
    run_tree_lstm_command(options, *tree_g);
  });

  auto tagger = std::make_shared<models::BiLstmTaggerOptions>();
  auto tagger_g = std::make_shared<GraphModelOptions>();
  auto* bt =
      train->add_subcommand("bilstm-tagger", "BiLSTM named-entity tagger on WikiNER");
  add_training_options(bt, tagger->training, *tagger_g);
  add_size_option(bt, "--embedding", tagger->embedding, "Word embedding size E");
  add_size_option(bt, "--hidden", tagger->hidden, "LSTM hidden size H of each direction");
  add_size_option(bt, "--mlp", tagger->mlp, "Hidden units of the tanh MLP before the tag softmax");
  bt->callback([tagger, tagger_g] { run_bilstm_tagger_command(*tagger, *tagger_g); });

  auto rvnn = std::make_shared<models::RvnnOptions>();
  auto rvnn_g = std::make_shared<GraphModelOptions>();
  auto* rv = train->add_subcommand(
      "rvnn", "Recursive neural network (Socher et al., untied leaf weights) on SST");
  add_training_options(rv, rvnn->training, *rvnn_g);
  add_size_option(rv, "--embedding", rvnn->embedding, "Word embedding size E");
  add_size_option(rv, "--hidden", rvnn->hidden, "Hidden size H");
  auto rvnn_loss = add_tree_loss_option(rv);
  rv->callback([rvnn, rvnn_g, rvnn_loss] {
    models::RvnnOptions options = *rvnn;
    options.loss = tree_loss_of(*rvnn_loss);
    run_rvnn_command(options, *rvnn_g);
  });

  auto td_rnn = std::make_shared<models::TdRnnOptions>();
  auto td_rnn_g = std::make_shared<GraphModelOptions>();
  auto* tr = train->add_subcommand(
      "td-rnn", "TD-RNN: time-delay pyramid of tanh compositions over SST sentences");
  add_training_options(tr, td_rnn->training, *td_rnn_g);
  add_size_option(tr, "--hidden", td_rnn->hidden, "Hidden size H, also the word embedding size");
  add_size_option(tr, "--mlp", td_rnn->mlp, "Hidden units of the tanh MLP before the softmax");
  tr->callback([td_rnn, td_rnn_g] { run_td_rnn_command(*td_rnn, *td_rnn_g); });

  auto td_lstm = std::make_shared<models::TdLstmOptions>();
  auto td_lstm_g = std::make_shared<GraphModelOptions>();
  auto* tdl = train->add_subcommand(
      "td-lstm",
      "TD-LSTM: time-delay pyramid of LSTM compositions over SST sentences");
  add_training_options(tdl, td_lstm->training, *td_lstm_g);
  add_size_option(tdl, "--embedding", td_lstm->embedding, "Word embedding size E");
  add_size_option(tdl, "--hidden", td_lstm->hidden, "LSTM hidden size H");
  add_size_option(tdl, "--mlp", td_lstm->mlp, "Hidden units of the tanh MLP before the softmax");
  tdl->callback([td_lstm, td_lstm_g] { run_td_lstm_command(*td_lstm, *td_lstm_g); });

  auto char_tagger = std::make_shared<models::BiLstmCharTaggerOptions>();
  auto char_tagger_g = std::make_shared<GraphModelOptions>();
  auto* ct = train->add_subcommand(
      "bilstm-char-tagger",
      "BiLSTM tagger reading rare words by a character BiLSTM, on WikiNER");
  add_training_options(ct, char_tagger->training, *char_tagger_g);
  add_size_option(ct, "--embedding", char_tagger->embedding,
                  "Word representation size E (even; a rare word's char BiLSTM has E/2 per "
                  "direction)");
  add_size_option(ct, "--char-embedding", char_tagger->char_embedding,
                  "Character embedding size C");
  add_size_option(ct, "--hidden", char_tagger->hidden,
                  "Word LSTM hidden size H of each direction");
  add_size_option(ct, "--mlp", char_tagger->mlp,
                  "Hidden units of the tanh MLP before the tag softmax");
  ct->add_option("--rare-below", char_tagger->rare_below,
                 "Words counted fewer times in the training set are read by characters")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  ct->callback([char_tagger, char_tagger_g] {
    run_bilstm_char_tagger_command(*char_tagger, *char_tagger_g);
  });
}

}  // namespace prnn::cli
