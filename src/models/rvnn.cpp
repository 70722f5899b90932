// RvNN sentiment classifier on SST (contract in prnn/models.h), Socher et al.'s recursive network
// with leaf and inner weights untied as in the VPPS paper:
//   leaf n:   h_n = tanh(W_x E[word_n] + b_x)                 [H]
//   inner n:  h_n = tanh(W_L h_left + W_R h_right + b)       [H]   (= tanh(W [h_l; h_r] + b))
//   node n:   logits_n = W_s h_n + b_s  [5];  loss = Σ_n -log softmax(logits_n)[label_n]
//             (every node, or the root only; see TreeLoss)
// Parameters: E [V, E] (Glorot rows), W_x [H, E], b_x [H], W_L [H, H], W_R [H, H], b [H],
// W_s [5, H], b_s [5]; all drawn from the Model's seeded stream in this order.
#include <vector>

#include "core/check.h"
#include "models/training.h"
#include "prnn/models.h"

namespace prnn::models {

TrainReport train_rvnn(const RvnnOptions& options, const data::Vocabulary& words,
                       const std::vector<data::Tree>& train, const std::vector<data::Tree>& dev,
                       const TrainCallbacks& callbacks, graph::Executor* executor) {
  using data::Tree;
  const TrainingOptions& o = options.training;
  detail::check_training_options(o);
  PRNN_EXPECT(options.embedding >= 1 && options.hidden >= 1,
              "train_rvnn: embedding and hidden must be >= 1, got {} and {}", options.embedding,
              options.hidden);
  PRNN_EXPECT(options.loss == TreeLoss::AllNodes || options.loss == TreeLoss::Root,
              "train_rvnn: unknown loss {}", static_cast<int>(options.loss));
  PRNN_EXPECT(words.size() >= 1, "train_rvnn: the vocabulary is empty");
  const std::size_t train_size = detail::limited_size(o, train.size());
  detail::check_trees("train_rvnn", "train", train, train_size, words.size());
  detail::check_trees("train_rvnn", "dev", dev, dev.size(), words.size());

  const graph::Initializer zero = graph::Initializer::constant(0.0);
  graph::Model model(o.seed);
  const graph::LookupParameter embed =
      model.add_lookup_parameters(words.size(), {options.embedding});
  const graph::Parameter w_x = model.add_parameters({options.hidden, options.embedding});
  const graph::Parameter b_x = model.add_parameters({options.hidden}, zero);
  const graph::Parameter w_l = model.add_parameters({options.hidden, options.hidden});
  const graph::Parameter w_r = model.add_parameters({options.hidden, options.hidden});
  const graph::Parameter b = model.add_parameters({options.hidden}, zero);
  const graph::Parameter w_s = model.add_parameters({Tree::kLabels, options.hidden});
  const graph::Parameter b_s = model.add_parameters({Tree::kLabels}, zero);

  graph::Expr e_wx, e_bx, e_wl, e_wr, e_b, e_ws, e_bs;  // of the current graph
  detail::ModelHooks hooks;
  hooks.new_graph = [&](graph::Graph& g) {
    e_wx = graph::parameter(g, w_x);
    e_bx = graph::parameter(g, b_x);
    e_wl = graph::parameter(g, w_l);
    e_wr = graph::parameter(g, w_r);
    e_b = graph::parameter(g, b);
    e_ws = graph::parameter(g, w_s);
    e_bs = graph::parameter(g, b_s);
  };
  hooks.add_sentence = [&](graph::Graph& g, std::size_t index, bool from_train) {
    const Tree& tree = from_train ? train[index] : dev[index];
    const bool every_node = from_train && options.loss == TreeLoss::AllNodes;
    std::vector<graph::Expr> h(tree.nodes.size());  // [H] each
    std::vector<graph::Expr> terms;
    detail::SentenceExprs out;
    for (std::size_t i = 0; i < tree.nodes.size(); ++i) {
      const data::TreeNode& n = tree.nodes[i];
      h[i] =
          n.is_leaf()
              ? graph::tanh(graph::affine_transform({e_bx, e_wx, graph::lookup(g, embed, n.word)}))
              : graph::tanh(graph::affine_transform({e_b, e_wl, h[static_cast<std::size_t>(n.left)],
                                                     e_wr, h[static_cast<std::size_t>(n.right)]}));
      const bool root = static_cast<int>(i) == tree.root;
      if (!every_node && !root) continue;
      const graph::Expr logits = graph::affine_transform({e_bs, e_ws, h[i]});  // [5]
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
