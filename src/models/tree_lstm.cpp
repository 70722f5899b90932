// Tree-LSTM sentiment classifier on SST (contract in prnn/models.h):
//   leaf n:   x = E[word_n] [E];  (h, c) = TreeLSTM.leaf(x)
//   inner n:  (h, c) = TreeLSTM.compose(left, right)   (Tai et al. 2015, binary, no input;
//             TreeLstmOptions::forget picks its forget gates: graph::TreeForget)
//   node n:   logits_n = W_s h_n + b_s  [5];  loss = Σ_n -log softmax(logits_n)[label_n]
//             (every node, or the root only; see TreeLoss)
// Parameters: E [V, E] (Glorot rows), the Tree-LSTM's (W [5H, E], U_L/U_R [5H, H], b [5H]; with
// own-child forget gates graph.h lists them), W_s [5, H], b_s [5]; all drawn from the Model's
// seeded stream in this order.
#include <vector>

#include "core/check.h"
#include "models/training.h"
#include "prnn/models.h"

namespace prnn::models {
namespace {

using data::Tree;

void check_trees(const char* set, const std::vector<Tree>& trees, std::size_t count,
                 int vocabulary) {
  for (std::size_t t = 0; t < count; ++t) {
    const Tree& tree = trees[t];
    PRNN_EXPECT(!tree.nodes.empty() && tree.root == static_cast<int>(tree.nodes.size()) - 1,
                "train_tree_lstm: {} tree {}: expected a non-empty post-order tree (root last), "
                "got {} nodes and root {}",
                set, t, tree.nodes.size(), tree.root);
    for (std::size_t i = 0; i < tree.nodes.size(); ++i) {
      const data::TreeNode& n = tree.nodes[i];
      PRNN_EXPECT(n.label >= 0 && n.label < Tree::kLabels,
                  "train_tree_lstm: {} tree {} node {}: label must lie in [0, {}), got {}", set, t,
                  i, Tree::kLabels, n.label);
      if (n.is_leaf()) {
        PRNN_EXPECT(n.word >= 0 && n.word < vocabulary,
                    "train_tree_lstm: {} tree {} node {}: word id must lie in [0, {}) (the "
                    "vocabulary's size), got {}",
                    set, t, i, vocabulary, n.word);
      } else {
        PRNN_EXPECT(n.left >= 0 && n.right >= 0 && n.left < static_cast<int>(i) &&
                        n.right < static_cast<int>(i),
                    "train_tree_lstm: {} tree {} node {}: children must precede their parent, "
                    "got {} and {}",
                    set, t, i, n.left, n.right);
      }
    }
  }
}

}  // namespace

TrainReport train_tree_lstm(const TreeLstmOptions& options, const data::Vocabulary& words,
                            const std::vector<data::Tree>& train,
                            const std::vector<data::Tree>& dev, const TrainCallbacks& callbacks,
                            graph::Executor* executor) {
  const TrainingOptions& o = options.training;
  detail::check_training_options(o);
  PRNN_EXPECT(options.embedding >= 1 && options.hidden >= 1,
              "train_tree_lstm: embedding and hidden must be >= 1, got {} and {}",
              options.embedding, options.hidden);
  PRNN_EXPECT(options.loss == TreeLoss::AllNodes || options.loss == TreeLoss::Root,
              "train_tree_lstm: unknown loss {}", static_cast<int>(options.loss));
  PRNN_EXPECT(words.size() >= 1, "train_tree_lstm: the vocabulary is empty");
  const std::size_t train_size = detail::limited_size(o, train.size());
  check_trees("train", train, train_size, words.size());
  check_trees("dev", dev, dev.size(), words.size());

  graph::Model model(o.seed);
  const graph::LookupParameter embed =
      model.add_lookup_parameters(words.size(), {options.embedding});
  graph::TreeLstmBuilder tree_lstm(model, options.embedding, options.hidden, options.forget);
  const graph::Parameter w_s = model.add_parameters({Tree::kLabels, options.hidden});
  const graph::Parameter b_s =
      model.add_parameters({Tree::kLabels}, graph::Initializer::constant(0.0));

  graph::Expr e_w, e_b;  // of the current graph
  detail::ModelHooks hooks;
  hooks.new_graph = [&](graph::Graph& g) {
    tree_lstm.new_graph(g);
    e_w = graph::parameter(g, w_s);
    e_b = graph::parameter(g, b_s);
  };
  hooks.add_sentence = [&](graph::Graph& g, std::size_t index, bool from_train) {
    const Tree& tree = from_train ? train[index] : dev[index];
    const bool every_node = from_train && options.loss == TreeLoss::AllNodes;
    std::vector<graph::TreeLstmBuilder::State> states(tree.nodes.size());
    std::vector<graph::Expr> terms;
    detail::SentenceExprs out;
    for (std::size_t i = 0; i < tree.nodes.size(); ++i) {
      const data::TreeNode& n = tree.nodes[i];
      states[i] = n.is_leaf() ? tree_lstm.leaf(graph::lookup(g, embed, n.word))
                              : tree_lstm.compose(states[static_cast<std::size_t>(n.left)],
                                                  states[static_cast<std::size_t>(n.right)]);
      const bool root = static_cast<int>(i) == tree.root;
      if (!every_node && !root) continue;
      const graph::Expr logits = graph::affine_transform({e_b, e_w, states[i].h});  // [5]
      if (from_train) terms.push_back(graph::pick_neg_log_softmax(logits, n.label));
      if (root) {
        out.logits.push_back(logits);
        out.gold.push_back(n.label);
      }
    }
    if (from_train) detail::set_loss(out, terms);
    return out;
  };
  hooks.words = [&](std::size_t index, bool from_train) -> std::int64_t {
    return (from_train ? train[index] : dev[index]).leaves();
  };
  return detail::run_training(o, model, train_size, dev.size(), hooks, callbacks, executor);
}

}  // namespace prnn::models
