// `prnn bench graph` (contract in prnn/bench.h): training throughput of the dynamic-graph models
// per executor, host wall clock; GPU executors add their device time (CUDA events). A pass trains one epoch from a fresh model; the per-batch timings
// come from models::BatchProgress, the planning time and batch counts from AutobatchStats.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "prnn/bench.h"
#include "prnn/data.h"
#include "prnn/device.h"
#include "prnn/graph.h"
#include "prnn/models.h"

namespace prnn {
namespace {

constexpr const char* kSuite = "graph";
constexpr std::uint64_t kSeed = 1;

// ---- Executors ----------------------------------------------------------------------------------

struct ImplEntry {
  const char* name;
  std::function<std::unique_ptr<graph::Executor>()> make;
};

const std::vector<ImplEntry>& impl_table() {
  static const std::vector<ImplEntry> table = {
      {"prnn-cpu", [] { return std::make_unique<graph::CpuExecutor>(); }},
      {"prnn-autobatch-cpu-depth",
       [] { return std::make_unique<graph::AutobatchExecutor>(graph::BatchStrategy::Depth); }},
      {"prnn-autobatch-cpu-agenda",
       [] { return std::make_unique<graph::AutobatchExecutor>(graph::BatchStrategy::Agenda); }},
      {"prnn-gpu", [] { return std::make_unique<graph::GpuExecutor>(); }},
      {"prnn-autobatch-gpu-depth",
       [] { return std::make_unique<graph::GpuAutobatchExecutor>(graph::BatchStrategy::Depth); }},
      {"prnn-autobatch-gpu-agenda",
       [] { return std::make_unique<graph::GpuAutobatchExecutor>(graph::BatchStrategy::Agenda); }},
      {"prnn-autobatch-gpu-depth-unfused",
       [] {
         return std::make_unique<graph::GpuAutobatchExecutor>(graph::BatchStrategy::Depth,
                                                              graph::Fusion::None);
       }},
      {"prnn-autobatch-gpu-agenda-unfused",
       [] {
         return std::make_unique<graph::GpuAutobatchExecutor>(graph::BatchStrategy::Agenda,
                                                              graph::Fusion::None);
       }},
  };
  return table;
}
static_assert(std::size(kGraphBenchImpls) == 8, "kGraphBenchImpls and impl_table() must agree");

bool is_gpu_impl(const std::string& name) {
  return name.find("gpu") != std::string::npos;
}

// Device times and launch counts of the executor's last forward + backward (zeros for the CPU
// executors).
graph::DeviceTimes device_times(const graph::Executor& ex) {
  if (const auto* g = dynamic_cast<const graph::GpuExecutor*>(&ex)) return g->device_times();
  if (const auto* g = dynamic_cast<const graph::GpuAutobatchExecutor*>(&ex))
    return g->device_times();
  return {};
}

// Planning statistics of an autobatching executor, host or GPU; null for the others.
const graph::AutobatchStats* autobatch_stats(const graph::Executor& ex) {
  if (const auto* a = dynamic_cast<const graph::AutobatchExecutor*>(&ex)) return &a->stats();
  if (const auto* a = dynamic_cast<const graph::GpuAutobatchExecutor*>(&ex)) return &a->stats();
  return nullptr;
}

// ---- Data ---------------------------------------------------------------------------------------

// The first `n` training sentences, renumbered against the vocabulary of exactly those sentences.
struct SstData {
  data::Vocabulary words;
  std::vector<data::Tree> trees;
};

struct WikiNerData {
  data::Vocabulary words;  // counts kept: the char tagger decides rareness by them
  data::Vocabulary chars;
  data::Vocabulary tags{data::Vocabulary::Unknown::Reject};
  std::vector<data::TaggedSentence> sentences;
};

template <class Sentence>
data::Vocabulary own_vocabulary(std::vector<Sentence>& sentences) {
  data::Vocabulary counts;
  for (const Sentence& s : sentences)
    for (const std::string& token : s.tokens) counts.add(token);
  data::Vocabulary words = counts.pruned(1);
  for (Sentence& s : sentences) s.set_word_ids(words);
  return words;
}

template <class Sentence>
void keep_first(std::vector<Sentence>& v, std::int64_t n, const std::string& path) {
  PRNN_EXPECT(!v.empty(), "bench graph: '{}' holds no sentences", path);
  if (static_cast<std::size_t>(n) < v.size()) v.resize(static_cast<std::size_t>(n));
}

SstData read_sst_data(const std::string& path, std::int64_t n) {
  SstData d;
  data::Vocabulary all;
  d.trees = data::read_sst(path, all, /*grow=*/true);
  keep_first(d.trees, n, path);
  d.words = own_vocabulary(d.trees);
  return d;
}

WikiNerData read_wikiner_data(const std::string& path, std::int64_t n) {
  WikiNerData d;
  data::Vocabulary all;
  d.sentences = data::read_wikiner(path, all, d.tags, /*grow=*/true);
  keep_first(d.sentences, n, path);
  d.words = own_vocabulary(d.sentences);
  d.chars = data::char_vocabulary(d.words);
  return d;
}

// ---- Models -------------------------------------------------------------------------------------

enum class Corpus : std::uint8_t { Sst, WikiNer };

using TrainFn =
    std::function<models::TrainReport(const models::TrainingOptions&, std::int64_t hidden,
                                      const models::TrainCallbacks&, graph::Executor*)>;

struct Corpora {
  std::optional<SstData> sst;
  std::optional<WikiNerData> wikiner;
};

Corpus corpus_of(const std::string& model) {
  return model == "bilstm-tagger" || model == "bilstm-char-tagger" ? Corpus::WikiNer : Corpus::Sst;
}

// Every model reads E = H; the others sizes keep their defaults.
TrainFn trainer_of(const std::string& model, const Corpora& c) {
  static const std::vector<data::Tree> kNoTrees;
  static const std::vector<data::TaggedSentence> kNoSentences;
  if (model == "tree-lstm")
    return [&c](const models::TrainingOptions& t, std::int64_t h, const models::TrainCallbacks& cb,
                graph::Executor* ex) {
      models::TreeLstmOptions o;
      o.training = t;
      o.embedding = o.hidden = h;
      return models::train_tree_lstm(o, c.sst->words, c.sst->trees, kNoTrees, cb, ex);
    };
  if (model == "rvnn")
    return [&c](const models::TrainingOptions& t, std::int64_t h, const models::TrainCallbacks& cb,
                graph::Executor* ex) {
      models::RvnnOptions o;
      o.training = t;
      o.embedding = o.hidden = h;
      return models::train_rvnn(o, c.sst->words, c.sst->trees, kNoTrees, cb, ex);
    };
  if (model == "td-rnn")
    return [&c](const models::TrainingOptions& t, std::int64_t h, const models::TrainCallbacks& cb,
                graph::Executor* ex) {
      models::TdRnnOptions o;
      o.training = t;
      o.hidden = h;
      return models::train_td_rnn(o, c.sst->words, c.sst->trees, kNoTrees, cb, ex);
    };
  if (model == "td-lstm")
    return [&c](const models::TrainingOptions& t, std::int64_t h, const models::TrainCallbacks& cb,
                graph::Executor* ex) {
      models::TdLstmOptions o;
      o.training = t;
      o.embedding = o.hidden = h;
      return models::train_td_lstm(o, c.sst->words, c.sst->trees, kNoTrees, cb, ex);
    };
  if (model == "bilstm-tagger")
    return [&c](const models::TrainingOptions& t, std::int64_t h, const models::TrainCallbacks& cb,
                graph::Executor* ex) {
      models::BiLstmTaggerOptions o;
      o.training = t;
      o.embedding = o.hidden = h;
      return models::train_bilstm_tagger(o, c.wikiner->words, c.wikiner->tags, c.wikiner->sentences,
                                         kNoSentences, cb, ex);
    };
  // bilstm-char-tagger (the names were checked before)
  return [&c](const models::TrainingOptions& t, std::int64_t h, const models::TrainCallbacks& cb,
              graph::Executor* ex) {
    models::BiLstmCharTaggerOptions o;
    o.training = t;
    o.embedding = o.hidden = h;
    return models::train_bilstm_char_tagger(o, c.wikiner->words, c.wikiner->chars, c.wikiner->tags,
                                            c.wikiner->sentences, kNoSentences, cb, ex);
  };
}

// ---- Measurement --------------------------------------------------------------------------------

struct PassMetrics {
  double sentences_per_s = 0.0;
  double words_per_s = 0.0;
  double host_us_per_node = 0.0;
  double exec_us_per_batch = 0.0;
  double batches_per_graph = 0.0;
  double nodes_per_batch = 0.0;
  double gpu_us_per_batch = 0.0;
  double build_us_per_batch = 0.0;
  double issue_us_per_batch = 0.0;
  double launches_per_graph = 0.0;
  double train_loss = 0.0;
};

PassMetrics measure_pass(const TrainFn& train, std::int64_t hidden, std::int64_t batch,
                         graph::Executor& ex) {
  const bool autobatch = autobatch_stats(ex) != nullptr;
  double build = 0.0, plan = 0.0, exec = 0.0, device = 0.0, launches = 0.0, issue_build = 0.0,
         issue = 0.0;
  std::int64_t nodes = 0, graphs = 0;
  std::size_t planned_nodes = 0, autobatches = 0;
  models::TrainCallbacks cb;
  cb.on_batch = [&](const models::BatchProgress& p) {
    build += p.build_seconds;
    exec += p.execute_seconds;
    nodes += p.batch_nodes;
    ++graphs;
    const graph::DeviceTimes t = device_times(ex);
    device += t.forward_seconds + t.backward_seconds;
    issue_build += t.forward_build_seconds + t.backward_build_seconds;
    issue += t.forward_issue_seconds + t.backward_issue_seconds;
    launches += static_cast<double>(t.forward_launches + t.backward_launches);
    if (autobatch) {
      const graph::AutobatchStats& s = *autobatch_stats(ex);
      plan += s.plan_seconds;
      planned_nodes += s.nodes;
      autobatches += s.batches;
    }
  };
  models::TrainingOptions t;
  t.epochs = 1;
  t.batch = batch;
  t.seed = kSeed;
  const models::TrainReport r = train(t, hidden, cb, &ex);
  const models::EpochReport& e = r.epochs.at(0);

  PassMetrics m;
  m.sentences_per_s = e.sentences_per_second;
  m.words_per_s = e.words_per_second;
  m.host_us_per_node = 1e6 * (build + plan) / static_cast<double>(std::max<std::int64_t>(nodes, 1));
  m.exec_us_per_batch =
      1e6 * (exec - plan) / static_cast<double>(std::max<std::int64_t>(graphs, 1));
  m.batches_per_graph =
      static_cast<double>(autobatches) / static_cast<double>(std::max<std::int64_t>(graphs, 1));
  m.nodes_per_batch = static_cast<double>(planned_nodes) /
                      static_cast<double>(std::max<std::size_t>(autobatches, 1));
  m.gpu_us_per_batch = 1e6 * device / static_cast<double>(std::max<std::int64_t>(graphs, 1));
  m.build_us_per_batch = 1e6 * issue_build / static_cast<double>(std::max<std::int64_t>(graphs, 1));
  m.issue_us_per_batch = 1e6 * issue / static_cast<double>(std::max<std::int64_t>(graphs, 1));
  m.launches_per_graph = launches / static_cast<double>(std::max<std::int64_t>(graphs, 1));
  m.train_loss = e.train_loss;
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class List>
bool contains(const List& list, const std::string& name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

void check_options(const GraphBenchOptions& o) {
  PRNN_EXPECT(!o.models.empty(), "bench graph: no models given");
  for (const std::string& m : o.models)
    PRNN_EXPECT(contains(kGraphBenchModels, m),
                "bench graph: unknown model '{}'; expected one of tree-lstm, bilstm-tagger, rvnn, "
                "td-rnn, td-lstm, bilstm-char-tagger",
                m);
  for (const std::string& i : o.impls)
    PRNN_EXPECT(contains(kGraphBenchImpls, i),
                "bench graph: unknown impl '{}'; expected one of prnn-cpu, "
                "prnn-autobatch-cpu-depth, prnn-autobatch-cpu-agenda, prnn-gpu, "
                "prnn-autobatch-gpu-depth, prnn-autobatch-gpu-agenda, "
                "prnn-autobatch-gpu-depth-unfused, prnn-autobatch-gpu-agenda-unfused",
                i);
  PRNN_EXPECT(!o.hidden.empty() && !o.batch.empty(), "bench graph: empty hidden or batch list");
  for (std::int64_t h : o.hidden)
    PRNN_EXPECT(h >= 1, "bench graph: hidden must be >= 1, got {}", h);
  for (std::int64_t b : o.batch) PRNN_EXPECT(b >= 1, "bench graph: batch must be >= 1, got {}", b);
  PRNN_EXPECT(o.sentences >= 1, "bench graph: sentences must be >= 1, got {}", o.sentences);
  PRNN_EXPECT(o.repeats >= 1, "bench graph: repeats must be >= 1, got {}", o.repeats);
}

}  // namespace

void run_graph_bench(const GraphBenchOptions& options, const BenchSink& sink) {
  check_options(options);
  Corpora corpora;
  for (const std::string& m : options.models) {
    if (corpus_of(m) == Corpus::Sst && !corpora.sst) {
      const std::string path =
          options.sst_file.empty() ? options.data + "/sst/train.txt" : options.sst_file;
      corpora.sst = read_sst_data(path, options.sentences);
    }
    if (corpus_of(m) == Corpus::WikiNer && !corpora.wikiner) {
      const std::string path =
          options.wikiner_file.empty() ? options.data + "/wikiner/train.txt" : options.wikiner_file;
      corpora.wikiner = read_wikiner_data(path, options.sentences);
    }
  }

  for (const std::string& model : options.models) {
    const TrainFn train = trainer_of(model, corpora);
    const bool tagger = corpus_of(model) == Corpus::WikiNer;
    for (std::int64_t hidden : options.hidden)
      for (std::int64_t batch : options.batch) {
        const std::string case_ = fmt::format("model={};hidden={};batch={}", model, hidden, batch);
        for (const ImplEntry& impl : impl_table()) {
          if (!options.impls.empty() && !contains(options.impls, impl.name)) continue;
          if (options.impls.empty() && is_gpu_impl(impl.name) && device_count() == 0) continue;
          const std::unique_ptr<graph::Executor> ex = impl.make();
          const bool autobatch = autobatch_stats(*ex) != nullptr;
          std::vector<PassMetrics> passes;
          for (int r = 0; r < options.repeats; ++r)
            passes.push_back(measure_pass(train, hidden, batch, *ex));
          const auto emit = [&](const char* metric, double PassMetrics::*field, const char* unit) {
            std::vector<double> v;
            for (const PassMetrics& p : passes) v.push_back(p.*field);
            sink({kSuite, case_, impl.name, metric, median(v), unit});
          };
          emit("sentences_per_s", &PassMetrics::sentences_per_s, "sentences/s");
          if (tagger) emit("words_per_s", &PassMetrics::words_per_s, "words/s");
          emit("host_us_per_node", &PassMetrics::host_us_per_node, "us");
          emit("exec_us_per_batch", &PassMetrics::exec_us_per_batch, "us");
          if (is_gpu_impl(impl.name))
            emit("gpu_us_per_batch", &PassMetrics::gpu_us_per_batch, "us");
          if (is_gpu_impl(impl.name)) {
            emit("build_us_per_batch", &PassMetrics::build_us_per_batch, "us");
            emit("issue_us_per_batch", &PassMetrics::issue_us_per_batch, "us");
          }
          if (autobatch) {
            emit("batches_per_graph", &PassMetrics::batches_per_graph, "batches");
            emit("nodes_per_batch", &PassMetrics::nodes_per_batch, "nodes");
          }
          if (is_gpu_impl(impl.name))
            emit("launches_per_graph", &PassMetrics::launches_per_graph, "launches");
          emit("train_loss", &PassMetrics::train_loss, "nats");
        }
      }
  }
}

}  // namespace prnn
