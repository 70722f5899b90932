// End-to-end trainers for the dynamic-graph models of the VPPS benchmarks, over prnn/graph.h.
//
//   Tree-LSTM sentiment (SST)   Tai et al. 2015, binary Tree-LSTM: a leaf reads its word's
//                               embedding [E]; an inner node combines its two children (no input);
//                               a linear softmax classifier over the 5 sentiment classes reads h
//                               [H] of every node (TreeLoss::AllNodes, as Tai et al. train) or of
//                               the root only (TreeLoss::Root). Accuracy is the root's
//                               (fine-grained, 5 classes), the usual SST sentence-level metric.
//   BiLSTM tagger (WikiNER)     word embedding [E] -> BiLSTM (H per direction) -> [2H] -> tanh MLP
//                               [M] -> tag softmax; one loss term per word; accuracy per word.
//   RvNN sentiment (SST)        Socher et al.'s recursive network over the parse tree, leaf and
//                               inner weights untied (as the VPPS paper does, after its ref. [29]):
//                               leaf h = tanh(W_x E[word] + b_x), inner h = tanh(W_L h_l + W_R h_r
//                               + b) = tanh(W [h_l; h_r] + b) [H]; linear softmax over the 5
//                               classes at every node or the root only (TreeLoss). Root accuracy.
//   TD-RNN sentiment (SST)      the VPPS paper's time-delay network: level 0 is the sentence's word
//                               embeddings [H]; level k+1 has one node per adjacent pair of level
//                               k, h = tanh(W_L h_i + W_R h_{i+1} + b), one composition function
//                               for every level (Socher et al.), until one node remains (n words:
//                               n(n-1)/2 compositions); that node -> tanh MLP [M] -> 5-class
//                               softmax, loss and accuracy on the sentence (root) label.
//   TD-LSTM sentiment (SST)     TD-RNN with the composition an LSTM: level 0 is TreeLSTM.leaf of
//                               the embeddings [E], a pair is TreeLSTM.compose(left, right) (binary
//                               Tree-LSTM cell, a forget gate per side) [H]; same MLP and loss.
//   BiLSTM char tagger          the BiLSTM tagger whose word representation [E], for a rare word
//   (WikiNER)                   (training count below `rare_below`, 5 as in the VPPS paper and
//                               DyNet's example, or <unk>), is INSTEAD the concatenation of a
//                               character BiLSTM's final forward and backward states [E/2 each]
//                               over character embeddings [C]; other words keep E[word].
//
// Training: the training sentences (the first `limit` of them, when limit > 0) are shuffled every
// epoch and cut into batches of `batch` sentences. A batch is ONE Graph holding every sentence's
// computation, whose loss is the SUM of the per-sentence losses (a super-graph, as DyNet batches);
// one forward, one backward and one optimizer update per batch. Adam by default, SGD optional.
// After every epoch the dev set is classified (forward only, no dropout) for its accuracy.
// Everything is a deterministic function of the options and the data: the same seed gives the
// same losses bit for bit on the same executor.
//
// Executors: the computation goes through graph::Executor, the CPU reference (CpuExecutor) when
// none is given; a GPU executor plugs in behind the same code.
//
// Sentences must use word ids below `words.size()` (read the data with that vocabulary, see
// prnn/data.h); bad options, an empty training set, or ids/labels out of range throw
// InvalidArgument naming the field and the value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prnn/data.h"
#include "prnn/graph.h"

namespace prnn::models {

enum class Optimizer : std::uint8_t {
  Adam,  // graph::AdamTrainer (β = 0.9, 0.999, ε = 1e-8)
  Sgd,   // graph::SimpleSgdTrainer with `momentum`
};
const char* to_string(Optimizer o);

// What every trainer shares.
struct TrainingOptions {
  std::int64_t epochs = 5;
  std::int64_t batch = 32;  // sentences per graph / per update
  std::int64_t limit = 0;   // use only the first `limit` training sentences; 0: all
  Optimizer optimizer = Optimizer::Adam;
  double learning_rate = 1e-3;
  double momentum = 0.0;   // Sgd only, in [0, 1)
  std::uint64_t seed = 1;  // parameter init and the per-epoch shuffles
  bool sparse_updates = true;  // lookup tables: touched rows only (false: every row, as DyNet's
                               // sparse_updates_enabled = false)
};

enum class TreeLoss : std::uint8_t {
  AllNodes,  // Σ over every node of the tree of -log p(label of the node)  (Tai et al. 2015)
  Root,      // -log p(label of the root) only
};
const char* to_string(TreeLoss l);

struct TreeLstmOptions {
  TrainingOptions training;
  std::int64_t embedding = 256;  // E
  std::int64_t hidden = 256;     // H
  TreeLoss loss = TreeLoss::AllNodes;
  graph::TreeForget forget = graph::TreeForget::AllChildren;  // the cell (graph::TreeLstmBuilder)
};

struct BiLstmTaggerOptions {
  TrainingOptions training;
  std::int64_t embedding = 128;  // E
  std::int64_t hidden = 50;      // H of each direction
  std::int64_t mlp = 32;         // hidden units of the tanh MLP
};

// Reported during an epoch, after every batch.
struct BatchProgress {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t epochs = 0;
  std::int64_t batch = 0;    // 1-based within the epoch
  std::int64_t batches = 0;  // per epoch
  double loss = 0.0;         // mean loss per loss term so far this epoch
  double accuracy = 0.0;     // training accuracy so far this epoch (predictions before updates)
  double sentences_per_second = 0.0;  // so far this epoch
  double words_per_second = 0.0;
  // This batch alone (host wall clock):
  double batch_loss = 0.0;       // the summed loss of its Graph
  std::int64_t batch_nodes = 0;  // nodes of its Graph
  double build_seconds = 0.0;    // building its Graph
  double execute_seconds = 0.0;  // forward, backward and the optimizer update
};

struct EpochReport {
  std::int64_t epoch = 0;            // 1-based
  double train_loss = 0.0;           // mean per loss term (tree node or root; tagged word)
  double train_sentence_loss = 0.0;  // mean per training sentence
  double train_accuracy = 0.0;       // measured while training, before each batch's update
  double dev_accuracy = 0.0;         // after the epoch; 0 without a dev set
  double seconds = 0.0;              // training time of the epoch, without the dev pass
  double sentences_per_second = 0.0;
  double words_per_second = 0.0;
  double dev_seconds = 0.0;
};

struct TrainReport {
  std::string executor;              // Executor::name()
  std::int64_t parameters = 0;       // trainable scalars (dense plus lookup tables)
  std::int64_t train_sentences = 0;  // after `limit`
  std::int64_t train_words = 0;
  std::int64_t dev_sentences = 0;
  std::vector<EpochReport> epochs;
};

struct TrainCallbacks {
  std::function<void(const BatchProgress&)> on_batch;
  std::function<void(const EpochReport&)> on_epoch;
};

// Trains a Tree-LSTM on `train` and reports dev root accuracy after each epoch. `dev` may be
// empty. `executor` null: a CpuExecutor (fp32).
TrainReport train_tree_lstm(const TreeLstmOptions& options, const data::Vocabulary& words,
                            const std::vector<data::Tree>& train,
                            const std::vector<data::Tree>& dev,
                            const TrainCallbacks& callbacks = {},
                            graph::Executor* executor = nullptr);

// Trains the BiLSTM tagger; tag ids must lie below `tags.size()`. Accuracy is per word.
TrainReport train_bilstm_tagger(const BiLstmTaggerOptions& options, const data::Vocabulary& words,
                                const data::Vocabulary& tags,
                                const std::vector<data::TaggedSentence>& train,
                                const std::vector<data::TaggedSentence>& dev,
                                const TrainCallbacks& callbacks = {},
                                graph::Executor* executor = nullptr);

// ---- The other models of the VPPS benchmarks ----------------------------------------------------

struct RvnnOptions {
  TrainingOptions training;
  std::int64_t embedding = 512;  // E (the VPPS paper: 512)
  std::int64_t hidden = 512;     // H
  TreeLoss loss = TreeLoss::AllNodes;
};

struct TdRnnOptions {
  TrainingOptions training;
  std::int64_t hidden = 512;  // H, also the word embedding size (level 0 feeds the composition)
  std::int64_t mlp = 256;     // hidden units of the tanh MLP before the softmax
};

struct TdLstmOptions {
  TrainingOptions training;
  std::int64_t embedding = 256;  // E
  std::int64_t hidden = 256;     // H
  std::int64_t mlp = 256;        // hidden units of the tanh MLP before the softmax
};

struct BiLstmCharTaggerOptions {
  TrainingOptions training;
  std::int64_t embedding = 128;      // E, even: a rare word's char-BiLSTM has E/2 per direction
  std::int64_t char_embedding = 20;  // C
  std::int64_t hidden = 50;          // H of each direction of the word BiLSTM
  std::int64_t mlp = 32;             // hidden units of the tanh MLP
  std::int64_t rare_below = 5;       // words counted fewer times in `words` read by characters
};

// RvNN on SST; contract as train_tree_lstm.
TrainReport train_rvnn(const RvnnOptions& options, const data::Vocabulary& words,
                       const std::vector<data::Tree>& train, const std::vector<data::Tree>& dev,
                       const TrainCallbacks& callbacks = {}, graph::Executor* executor = nullptr);

// TD-RNN / TD-LSTM on SST: only the trees' leaves (the sentence) and root labels are read; one loss
// term per sentence.
TrainReport train_td_rnn(const TdRnnOptions& options, const data::Vocabulary& words,
                         const std::vector<data::Tree>& train, const std::vector<data::Tree>& dev,
                         const TrainCallbacks& callbacks = {}, graph::Executor* executor = nullptr);
TrainReport train_td_lstm(const TdLstmOptions& options, const data::Vocabulary& words,
                          const std::vector<data::Tree>& train, const std::vector<data::Tree>& dev,
                          const TrainCallbacks& callbacks = {},
                          graph::Executor* executor = nullptr);

// BiLSTM tagger with character features. `words` gives the counts that decide rareness (a pruned
// vocabulary keeps them); `chars` is a character vocabulary (data::char_vocabulary) and must hold
// <unk>; the sentences' tokens are spelled through it.
TrainReport train_bilstm_char_tagger(const BiLstmCharTaggerOptions& options,
                                     const data::Vocabulary& words, const data::Vocabulary& chars,
                                     const data::Vocabulary& tags,
                                     const std::vector<data::TaggedSentence>& train,
                                     const std::vector<data::TaggedSentence>& dev,
                                     const TrainCallbacks& callbacks = {},
                                     graph::Executor* executor = nullptr);

}  // namespace prnn::models
