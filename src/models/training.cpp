// The shared training loop (contract in models/training.h and prnn/models.h).
#include "models/training.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>

#include "core/check.h"

namespace prnn::models {

const char* to_string(Optimizer o) {
  switch (o) {
    case Optimizer::Adam:
      return "adam";
    case Optimizer::Sgd:
      return "sgd";
  }
  return "?";
}

const char* to_string(TreeLoss l) {
  switch (l) {
    case TreeLoss::AllNodes:
      return "all-nodes";
    case TreeLoss::Root:
      return "root";
  }
  return "?";
}

namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Index of the largest value (the first of equal ones).
std::size_t argmax(const std::vector<double>& v) {
  return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Fisher-Yates with mt19937_64, whose output sequence the standard fixes (std::shuffle and the
// distributions are implementation-defined), so the order is the same on every platform.
void shuffle(std::vector<std::size_t>& v, std::mt19937_64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng() % i]);
}

std::unique_ptr<graph::Trainer> make_trainer(const TrainingOptions& o, graph::Model& model) {
  std::unique_ptr<graph::Trainer> t;
  if (o.optimizer == Optimizer::Sgd)
    t = std::make_unique<graph::SimpleSgdTrainer>(model, o.learning_rate, o.momentum);
  else
    t = std::make_unique<graph::AdamTrainer>(model, o.learning_rate);
  t->set_sparse_updates(o.sparse_updates);
  return t;
}

// Seeds the shuffles apart from the Model's init stream (which uses the seed itself).
constexpr std::uint64_t kShuffleSalt = 0x9e3779b97f4a7c15ULL;

// Root/word accuracy of the dev set, forward only.
double dev_accuracy(const TrainingOptions& o, std::size_t dev_size, const ModelHooks& hooks,
                    graph::Executor& ex) {
  std::int64_t correct = 0, total = 0;
  const auto batch = static_cast<std::size_t>(o.batch);
  for (std::size_t begin = 0; begin < dev_size; begin += batch) {
    graph::Graph g(0, /*training=*/false);
    hooks.new_graph(g);
    std::vector<SentenceExprs> sentences;
    graph::Expr last;
    for (std::size_t i = begin; i < std::min(dev_size, begin + batch); ++i) {
      sentences.push_back(hooks.add_sentence(g, i, /*from_train=*/false));
      for (graph::Expr e : sentences.back().logits)
        if (!last.valid() || e.id > last.id) last = e;
    }
    if (!last.valid()) continue;
    ex.forward(g, last);
    for (const SentenceExprs& s : sentences)
      for (std::size_t k = 0; k < s.logits.size(); ++k) {
        correct += argmax(ex.value(s.logits[k])) == static_cast<std::size_t>(s.gold[k]) ? 1 : 0;
        ++total;
      }
  }
  return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
}

}  // namespace

void check_training_options(const TrainingOptions& o) {
  PRNN_EXPECT(o.epochs >= 1, "training options: epochs must be >= 1, got {}", o.epochs);
  PRNN_EXPECT(o.batch >= 1, "training options: batch must be >= 1, got {}", o.batch);
  PRNN_EXPECT(o.limit >= 0, "training options: limit must be >= 0 (0: all), got {}", o.limit);
  PRNN_EXPECT(o.learning_rate > 0.0, "training options: learning_rate must be > 0, got {}",
              o.learning_rate);
  PRNN_EXPECT(o.momentum >= 0.0 && o.momentum < 1.0,
              "training options: momentum must lie in [0, 1), got {}", o.momentum);
  PRNN_EXPECT(o.optimizer == Optimizer::Adam || o.optimizer == Optimizer::Sgd,
              "training options: unknown optimizer {}", static_cast<int>(o.optimizer));
}

std::size_t limited_size(const TrainingOptions& o, std::size_t available) {
  const auto limit = static_cast<std::size_t>(o.limit);
  const std::size_t n = o.limit > 0 ? std::min(limit, available) : available;
  PRNN_EXPECT(n > 0, "training: the training set is empty");
  return n;
}

std::int64_t parameter_count(graph::Model& model) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < model.parameter_count(); ++i) n += model.parameter(i).dim().size();
  for (std::size_t i = 0; i < model.lookup_count(); ++i) {
    const graph::LookupParameter lp = model.lookup_parameter(i);
    n += lp.size() * lp.dim().size();
  }
  return n;
}

TrainReport run_training(const TrainingOptions& o, graph::Model& model, std::size_t train_size,
                         std::size_t dev_size, const ModelHooks& hooks,
                         const TrainCallbacks& callbacks, graph::Executor* executor) {
  graph::CpuExecutor cpu;
  graph::Executor& ex = executor != nullptr ? *executor : cpu;
  const std::unique_ptr<graph::Trainer> trainer = make_trainer(o, model);
  std::mt19937_64 rng(o.seed ^ kShuffleSalt);

  TrainReport report;
  report.executor = ex.name();
  report.parameters = parameter_count(model);
  report.train_sentences = static_cast<std::int64_t>(train_size);
  report.dev_sentences = static_cast<std::int64_t>(dev_size);
  for (std::size_t i = 0; i < train_size; ++i) report.train_words += hooks.words(i, true);

  const auto batch = static_cast<std::size_t>(o.batch);
  const std::size_t batches = (train_size + batch - 1) / batch;
  std::vector<std::size_t> order(train_size);
  std::iota(order.begin(), order.end(), std::size_t{0});

  for (std::int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
    shuffle(order, rng);
    double loss_sum = 0.0;
    std::int64_t loss_terms = 0, correct = 0, predictions = 0, sentences = 0, words = 0;
    const Clock::time_point t0 = Clock::now();
    // Batch b's graph, built before batch b-1's results are read back (see below).
    struct BatchGraph {
      std::unique_ptr<graph::Graph> g = std::make_unique<graph::Graph>();
      std::vector<SentenceExprs> exprs;
      graph::Expr total;
      double build_seconds = 0.0;
      std::int64_t loss_terms = 0, words = 0, sentences = 0;
    };
    const auto build_batch = [&](std::size_t b) {
      const Clock::time_point t_build = Clock::now();
      BatchGraph bg;
      hooks.new_graph(*bg.g);
      std::vector<graph::Expr> losses;
      for (std::size_t k = b * batch; k < std::min(train_size, (b + 1) * batch); ++k) {
        bg.exprs.push_back(hooks.add_sentence(*bg.g, order[k], /*from_train=*/true));
        losses.push_back(bg.exprs.back().loss);
        bg.loss_terms += bg.exprs.back().loss_terms;
        bg.words += hooks.words(order[k], true);
        ++bg.sentences;
      }
      bg.total = losses.size() == 1 ? losses[0] : graph::sum(losses);
      bg.build_seconds = seconds_since(t_build);
      return bg;
    };
    BatchGraph next = build_batch(0);
    for (std::size_t b = 0; b < batches; ++b) {
      const BatchGraph cur = std::move(next);
      graph::Graph& g = *cur.g;
      const Clock::time_point t_forward = Clock::now();
      // Forward, backward and update are issued, then the next batch's graph is built, and only
      // then are the loss and the predictions read back: on a GPU executor the first read waits
      // for the device, so the device runs this batch while the host builds the backward and
      // the next graph (node values stay valid through backward and update; graph building
      // touches neither the executor nor the parameters).
      ex.forward(g, cur.total);
      ex.backward(g, cur.total);
      trainer->update();
      const double execute_seconds = seconds_since(t_forward);
      if (b + 1 < batches) next = build_batch(b + 1);
      const double build_seconds = cur.build_seconds;
      const double batch_loss = ex.scalar(cur.total);
      loss_sum += batch_loss;
      loss_terms += cur.loss_terms;
      words += cur.words;
      sentences += cur.sentences;
      for (const SentenceExprs& s : cur.exprs)
        for (std::size_t k = 0; k < s.logits.size(); ++k) {
          correct += argmax(ex.value(s.logits[k])) == static_cast<std::size_t>(s.gold[k]) ? 1 : 0;
          ++predictions;
        }

      if (callbacks.on_batch) {
        const double secs = seconds_since(t0);
        BatchProgress p;
        p.epoch = epoch;
        p.epochs = o.epochs;
        p.batch = static_cast<std::int64_t>(b) + 1;
        p.batches = static_cast<std::int64_t>(batches);
        p.loss = loss_sum / static_cast<double>(std::max<std::int64_t>(loss_terms, 1));
        p.accuracy = static_cast<double>(correct) /
                     static_cast<double>(std::max<std::int64_t>(predictions, 1));
        p.sentences_per_second = secs > 0 ? static_cast<double>(sentences) / secs : 0.0;
        p.words_per_second = secs > 0 ? static_cast<double>(words) / secs : 0.0;
        p.batch_loss = batch_loss;
        p.batch_nodes = static_cast<std::int64_t>(g.size());
        p.build_seconds = build_seconds;
        p.execute_seconds = execute_seconds;
        callbacks.on_batch(p);
      }
    }
    EpochReport r;
    r.epoch = epoch;
    r.seconds = seconds_since(t0);
    r.train_loss = loss_sum / static_cast<double>(std::max<std::int64_t>(loss_terms, 1));
    r.train_sentence_loss = loss_sum / static_cast<double>(sentences);
    r.train_accuracy =
        static_cast<double>(correct) / static_cast<double>(std::max<std::int64_t>(predictions, 1));
    r.sentences_per_second = r.seconds > 0 ? static_cast<double>(sentences) / r.seconds : 0.0;
    r.words_per_second = r.seconds > 0 ? static_cast<double>(words) / r.seconds : 0.0;
    const Clock::time_point t1 = Clock::now();
    r.dev_accuracy = dev_accuracy(o, dev_size, hooks, ex);
    r.dev_seconds = seconds_since(t1);
    report.epochs.push_back(r);
    if (callbacks.on_epoch) callbacks.on_epoch(r);
  }
  return report;
}

void check_trees(const char* trainer, const char* set, const std::vector<data::Tree>& trees,
                 std::size_t count, int vocabulary) {
  using data::Tree;
  for (std::size_t t = 0; t < count; ++t) {
    const Tree& tree = trees[t];
    PRNN_EXPECT(!tree.nodes.empty() && tree.root == static_cast<int>(tree.nodes.size()) - 1,
                "{}: {} tree {}: expected a non-empty post-order tree (root last), got {} nodes "
                "and root {}",
                trainer, set, t, tree.nodes.size(), tree.root);
    for (std::size_t i = 0; i < tree.nodes.size(); ++i) {
      const data::TreeNode& n = tree.nodes[i];
      PRNN_EXPECT(n.label >= 0 && n.label < Tree::kLabels,
                  "{}: {} tree {} node {}: label must lie in [0, {}), got {}", trainer, set, t, i,
                  Tree::kLabels, n.label);
      if (n.is_leaf()) {
        PRNN_EXPECT(n.word >= 0 && n.word < vocabulary,
                    "{}: {} tree {} node {}: word id must lie in [0, {}) (the vocabulary's size), "
                    "got {}",
                    trainer, set, t, i, vocabulary, n.word);
      } else {
        PRNN_EXPECT(n.left >= 0 && n.right >= 0 && n.left < static_cast<int>(i) &&
                        n.right < static_cast<int>(i),
                    "{}: {} tree {} node {}: children must precede their parent, got {} and {}",
                    trainer, set, t, i, n.left, n.right);
      }
    }
  }
}

void check_tagged_sentences(const char* trainer, const char* set,
                            const std::vector<data::TaggedSentence>& sentences, std::size_t count,
                            int vocabulary, int tags) {
  for (std::size_t s = 0; s < count; ++s) {
    const data::TaggedSentence& sentence = sentences[s];
    PRNN_EXPECT(sentence.size() >= 1 && sentence.words.size() == sentence.tokens.size() &&
                    sentence.tags.size() == sentence.tokens.size(),
                "{}: {} sentence {}: expected one word id and one tag per token, got {} tokens, "
                "{} word ids, {} tags",
                trainer, set, s, sentence.tokens.size(), sentence.words.size(),
                sentence.tags.size());
    for (std::size_t t = 0; t < sentence.words.size(); ++t) {
      PRNN_EXPECT(sentence.words[t] >= 0 && sentence.words[t] < vocabulary,
                  "{}: {} sentence {} token {}: word id must lie in [0, {}) (the vocabulary's "
                  "size), got {}",
                  trainer, set, s, t, vocabulary, sentence.words[t]);
      PRNN_EXPECT(sentence.tags[t] >= 0 && sentence.tags[t] < tags,
                  "{}: {} sentence {} token {}: tag id must lie in [0, {}), got {}", trainer, set,
                  s, t, tags, sentence.tags[t]);
      PRNN_EXPECT(!sentence.tokens[t].empty(), "{}: {} sentence {} token {}: the token is empty",
                  trainer, set, s, t);
    }
  }
}

void set_loss(SentenceExprs& out, const std::vector<graph::Expr>& terms) {
  out.loss = terms.size() == 1 ? terms[0] : graph::sum(terms);
  out.loss_terms = static_cast<std::int64_t>(terms.size());
}

MlpHead::MlpHead(graph::Model& model, std::int64_t input, std::int64_t mlp, std::int64_t classes)
    : w_1_(model.add_parameters({mlp, input})),
      b_1_(model.add_parameters({mlp}, graph::Initializer::constant(0.0))),
      w_2_(model.add_parameters({classes, mlp})),
      b_2_(model.add_parameters({classes}, graph::Initializer::constant(0.0))) {}

void MlpHead::new_graph(graph::Graph& g) {
  e_w1_ = graph::parameter(g, w_1_);
  e_b1_ = graph::parameter(g, b_1_);
  e_w2_ = graph::parameter(g, w_2_);
  e_b2_ = graph::parameter(g, b_2_);
}

graph::Expr MlpHead::logits(const graph::Expr& h) const {
  const graph::Expr m = graph::tanh(graph::affine_transform({e_b1_, e_w1_, h}));  // [M]
  return graph::affine_transform({e_b2_, e_w2_, m});                             // [classes]
}

SentenceExprs MlpHead::tag(const std::vector<graph::Expr>& hs,
                           const data::TaggedSentence& sentence, bool with_loss) const {
  SentenceExprs out;
  std::vector<graph::Expr> terms;
  for (std::size_t t = 0; t < hs.size(); ++t) {
    const graph::Expr logits = this->logits(hs[t]);
    out.logits.push_back(logits);
    out.gold.push_back(sentence.tags[t]);
    if (with_loss) terms.push_back(graph::pick_neg_log_softmax(logits, sentence.tags[t]));
  }
  if (with_loss) set_loss(out, terms);
  return out;
}

}  // namespace detail
}  // namespace prnn::models
