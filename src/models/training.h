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

TrainReport run_training(const TrainingOptions& o, graph::Model& model, std::size_t train_size,
                         std::size_t dev_size, const ModelHooks& hooks,
                         const TrainCallbacks& callbacks, graph::Executor* executor);

}  // namespace prnn::models::detail
