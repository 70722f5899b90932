// The training loop the model trainers share (contract in prnn/models.h): per epoch a seeded
// shuffle, batches of sentences built into one Graph whose loss is the sum of the sentences'
// losses, forward / backward / update on the given Executor, then a forward-only dev pass.
// A model supplies how to add one sentence to a graph; the loop does the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "prnn/graph.h"
#include "prnn/models.h"

namespace prnn::models::detail {

// What one sentence adds to a batch graph.
struct SentenceExprs {
  graph::Expr loss;                 // [1, 1] sum of its loss terms; unset when not training
  std::int64_t loss_terms = 0;      // how many terms `loss` sums
  std::vector<graph::Expr> logits;  // [classes] scored for accuracy
  std::vector<int> gold;            // one label per logits entry
};

struct ModelHooks {
  // Once per batch graph, before any sentence: add the shared parameters to g.
  std::function<void(graph::Graph& g)> new_graph;
  // Adds sentence `index` of the train (from_train) or dev set to g.
  std::function<SentenceExprs(graph::Graph& g, std::size_t index, bool from_train)> add_sentence;
  std::function<std::int64_t(std::size_t index, bool from_train)> words;  // tokens of a sentence
};

void check_training_options(const TrainingOptions& o);
// The training set size after `limit`.
std::size_t limited_size(const TrainingOptions& o, std::size_t available);
std::int64_t parameter_count(graph::Model& model);

// Throws InvalidArgument, naming `trainer`, unless the first `count` trees are non-empty post-order
// trees (root last, children before parents) with labels in [0, 5) and word ids below
// `vocabulary`.
void check_trees(const char* trainer, const char* set, const std::vector<data::Tree>& trees,
                 std::size_t count, int vocabulary);

// Throws InvalidArgument, naming `trainer`, unless each of the first `count` sentences has at
// least one token, a non-empty text, a word id in [0, vocabulary) and a tag id in [0, tags) per
// token.
void check_tagged_sentences(const char* trainer, const char* set,
                            const std::vector<data::TaggedSentence>& sentences, std::size_t count,
                            int vocabulary, int tags);

// Sets out.loss to the sum of `terms` (the term itself when there is one) and out.loss_terms.
void set_loss(SentenceExprs& out, const std::vector<graph::Expr>& terms);

// The one-hidden-layer classifier the taggers and the TD models end in:
//   m = tanh(W_1 h + b_1) [M];  logits = W_2 m + b_2 [classes]
// Creates W_1 [M, input], b_1 [M] (zeros), W_2 [classes, M], b_2 [classes] (zeros) on the Model
// in that order (the Model's seeded stream: construct it where the model draws them).
class MlpHead {
 public:
  MlpHead(graph::Model& model, std::int64_t input, std::int64_t mlp, std::int64_t classes);
  // Once per batch graph: adds the four parameters to g.
  void new_graph(graph::Graph& g);
  graph::Expr logits(const graph::Expr& h) const;
  // A tagged sentence from its token features hs (one per token): every token's logits and,
  // with `with_loss`, the loss Σ_t -log softmax(logits_t)[tag_t].
  SentenceExprs tag(const std::vector<graph::Expr>& hs, const data::TaggedSentence& sentence,
                    bool with_loss) const;

 private:
  graph::Parameter w_1_, b_1_, w_2_, b_2_;
  graph::Expr e_w1_, e_b1_, e_w2_, e_b2_;  // of the current graph
};

TrainReport run_training(const TrainingOptions& o, graph::Model& model, std::size_t train_size,
                         std::size_t dev_size, const ModelHooks& hooks,
                         const TrainCallbacks& callbacks, graph::Executor* executor);

}  // namespace prnn::models::detail
