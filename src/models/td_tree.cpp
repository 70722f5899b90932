// TD-RNN and TD-LSTM sentiment classifiers on SST (contract in prnn/models.h), the VPPS paper's
// time-delay networks: the levels of a pyramid over the sentence, one composition function for all.
//   TD-RNN:   level 0: h⁰_i = E[word_i]  [H],  i < n
//             level k+1: h^{k+1}_i = tanh(W_L h^k_i + W_R h^k_{i+1} + b)  [H],  i < n-k-1
//   TD-LSTM:  level 0: (h, c)⁰_i = TreeLSTM.leaf(E[word_i])  (E -> H)
//             level k+1: (h, c)^{k+1}_i = TreeLSTM.compose((h, c)^k_i, (h, c)^k_{i+1})
//   both:     top = the single node of level n-1;  m = tanh(W_1 h_top + b_1) [M]
//             logits = W_2 m + b_2 [5];  loss = -log softmax(logits)[root label]
// n words take n(n-1)/2 compositions. Only the leaves and the root label of a tree are read.
// Parameters, in the order drawn from the Model's seeded stream: E [V, H or E] (Glorot rows);
// TD-RNN W_L [H, H], W_R [H, H], b [H] / TD-LSTM the Tree-LSTM's W [5H, E], U_L, U_R [5H, H],
// b [5H]; then W_1 [M, H], b_1 [M], W_2 [5, M], b_2 [5].
#include <functional>
#include <vector>

#include "core/check.h"
#include "models/training.h"
#include "prnn/models.h"

namespace prnn::models {
namespace {

using data::Tree;

// The sentence's top vector [H] from its word ids, in graph g.
using Pyramid = std::function<graph::Expr(graph::Graph& g, const std::vector<int>& words)>;

// The MLP classifier, the loss and the training loop around a pyramid.
TrainReport train_pyramid(const TrainingOptions& o, graph::Model& model, std::int64_t hidden,
                          std::int64_t mlp, const std::vector<Tree>& train,
                          const std::vector<Tree>& dev,
                          const std::function<void(graph::Graph&)>& new_graph,
                          const Pyramid& pyramid, const TrainCallbacks& callbacks,
                          graph::Executor* executor) {
  detail::MlpHead head(model, hidden, mlp, Tree::kLabels);
  detail::ModelHooks hooks;
  hooks.new_graph = [&](graph::Graph& g) {
    new_graph(g);
    head.new_graph(g);
  };
  hooks.add_sentence = [&](graph::Graph& g, std::size_t index, bool from_train) {
    const Tree& tree = from_train ? train[index] : dev[index];
    const int label = tree.nodes[static_cast<std::size_t>(tree.root)].label;
    const graph::Expr logits = head.logits(pyramid(g, tree.word_ids()));  // top [H] -> [5]
    detail::SentenceExprs out;
    out.logits.push_back(logits);
    out.gold.push_back(label);
    if (from_train) {
      out.loss = graph::pick_neg_log_softmax(logits, label);
      out.loss_terms = 1;
    }
    return out;
  };
  hooks.words = [&](std::size_t index, bool from_train) -> std::int64_t {
    return (from_train ? train[index] : dev[index]).leaves();
  };
  const std::size_t train_size = detail::limited_size(o, train.size());
  return detail::run_training(o, model, train_size, dev.size(), hooks, callbacks, executor);
}

void check_inputs(const char* trainer, const TrainingOptions& o, const data::Vocabulary& words,
                  const std::vector<Tree>& train, const std::vector<Tree>& dev) {
  PRNN_EXPECT(words.size() >= 1, "{}: the vocabulary is empty", trainer);
  const std::size_t train_size = detail::limited_size(o, train.size());
  detail::check_trees(trainer, "train", train, train_size, words.size());
  detail::check_trees(trainer, "dev", dev, dev.size(), words.size());
}

}  // namespace

TrainReport train_td_rnn(const TdRnnOptions& options, const data::Vocabulary& words,
                         const std::vector<data::Tree>& train, const std::vector<data::Tree>& dev,
                         const TrainCallbacks& callbacks, graph::Executor* executor) {
  const TrainingOptions& o = options.training;
  detail::check_training_options(o);
  PRNN_EXPECT(options.hidden >= 1 && options.mlp >= 1,
              "train_td_rnn: hidden and mlp must be >= 1, got {} and {}", options.hidden,
              options.mlp);
  check_inputs("train_td_rnn", o, words, train, dev);

  graph::Model model(o.seed);
  const std::int64_t H = options.hidden;
  const graph::LookupParameter embed = model.add_lookup_parameters(words.size(), {H});
  const graph::Parameter w_l = model.add_parameters({H, H});
  const graph::Parameter w_r = model.add_parameters({H, H});
  const graph::Parameter b = model.add_parameters({H}, graph::Initializer::constant(0.0));
  graph::Expr e_wl, e_wr, e_b;  // of the current graph
  const auto new_graph = [&](graph::Graph& g) {
    e_wl = graph::parameter(g, w_l);
    e_wr = graph::parameter(g, w_r);
    e_b = graph::parameter(g, b);
  };
  const Pyramid pyramid = [&](graph::Graph& g, const std::vector<int>& ids) {
    std::vector<graph::Expr> level;  // [H] each
    for (int w : ids) level.push_back(graph::lookup(g, embed, w));
    while (level.size() > 1) {
      for (std::size_t i = 0; i + 1 < level.size(); ++i)
        level[i] = graph::tanh(graph::affine_transform({e_b, e_wl, level[i], e_wr, level[i + 1]}));
      level.pop_back();
    }
    return level[0];
  };
  return train_pyramid(o, model, H, options.mlp, train, dev, new_graph, pyramid, callbacks,
                       executor);
}

TrainReport train_td_lstm(const TdLstmOptions& options, const data::Vocabulary& words,
                          const std::vector<data::Tree>& train, const std::vector<data::Tree>& dev,
                          const TrainCallbacks& callbacks, graph::Executor* executor) {
  const TrainingOptions& o = options.training;
  detail::check_training_options(o);
  PRNN_EXPECT(options.embedding >= 1 && options.hidden >= 1 && options.mlp >= 1,
              "train_td_lstm: embedding, hidden and mlp must be >= 1, got {}, {} and {}",
              options.embedding, options.hidden, options.mlp);
  check_inputs("train_td_lstm", o, words, train, dev);

  graph::Model model(o.seed);
  const graph::LookupParameter embed =
      model.add_lookup_parameters(words.size(), {options.embedding});
  graph::TreeLstmBuilder cell(model, options.embedding, options.hidden);
  const auto new_graph = [&](graph::Graph& g) { cell.new_graph(g); };
  const Pyramid pyramid = [&](graph::Graph& g, const std::vector<int>& ids) {
    std::vector<graph::TreeLstmBuilder::State> level;
    for (int w : ids) level.push_back(cell.leaf(graph::lookup(g, embed, w)));
    while (level.size() > 1) {
      for (std::size_t i = 0; i + 1 < level.size(); ++i)
        level[i] = cell.compose(level[i], level[i + 1]);
      level.pop_back();
    }
    return level[0].h;
  };
  return train_pyramid(o, model, options.hidden, options.mlp, train, dev, new_graph, pyramid,
                       callbacks, executor);
}

}  // namespace prnn::models
