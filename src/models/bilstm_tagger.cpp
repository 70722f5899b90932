// BiLSTM tagger on WikiNER (contract in prnn/models.h):
//   x_t = E[word_t] [E];  [h_fwd_t ; h_bwd_t] = BiLSTM(x)_t [2H]
//   m_t = tanh(W_1 [h_fwd_t ; h_bwd_t] + b_1) [M];  logits_t = W_2 m_t + b_2 [tags]
//   loss = Σ_t -log softmax(logits_t)[tag_t]
// Parameters: E [V, E] (Glorot rows), the two LSTMs (PyTorch layout), W_1 [M, 2H], b_1 [M],
// W_2 [tags, M], b_2 [tags]; all drawn from the Model's seeded stream in this order.
#include <vector>

#include "core/check.h"
#include "models/training.h"
#include "prnn/models.h"

namespace prnn::models {
using data::TaggedSentence;

TrainReport train_bilstm_tagger(const BiLstmTaggerOptions& options, const data::Vocabulary& words,
                                const data::Vocabulary& tags,
                                const std::vector<data::TaggedSentence>& train,
                                const std::vector<data::TaggedSentence>& dev,
                                const TrainCallbacks& callbacks, graph::Executor* executor) {
  const TrainingOptions& o = options.training;
  detail::check_training_options(o);
  PRNN_EXPECT(options.embedding >= 1 && options.hidden >= 1 && options.mlp >= 1,
              "train_bilstm_tagger: embedding, hidden and mlp must be >= 1, got {}, {} and {}",
              options.embedding, options.hidden, options.mlp);
  PRNN_EXPECT(words.size() >= 1 && tags.size() >= 1,
              "train_bilstm_tagger: the vocabularies must not be empty, got {} words and {} tags",
              words.size(), tags.size());
  const std::size_t train_size = detail::limited_size(o, train.size());
  detail::check_tagged_sentences("train_bilstm_tagger", "train", train, train_size, words.size(),
                                 tags.size());
  detail::check_tagged_sentences("train_bilstm_tagger", "dev", dev, dev.size(), words.size(),
                                 tags.size());

  graph::Model model(o.seed);
  const graph::LookupParameter embed =
      model.add_lookup_parameters(words.size(), {options.embedding});
  graph::BiLstmBuilder bilstm(model, options.embedding, options.hidden);
  detail::MlpHead head(model, 2 * options.hidden, options.mlp, tags.size());

  detail::ModelHooks hooks;
  hooks.new_graph = [&](graph::Graph& g) {
    bilstm.new_graph(g);
    head.new_graph(g);
  };
  hooks.add_sentence = [&](graph::Graph& g, std::size_t index, bool from_train) {
    const TaggedSentence& sentence = from_train ? train[index] : dev[index];
    std::vector<graph::Expr> xs;
    for (int w : sentence.words) xs.push_back(graph::lookup(g, embed, w));
    return head.tag(bilstm.transduce(xs), sentence, from_train);  // features [2H] each
  };
  hooks.words = [&](std::size_t index, bool from_train) -> std::int64_t {
    return (from_train ? train[index] : dev[index]).size();
  };
  return detail::run_training(o, model, train_size, dev.size(), hooks, callbacks, executor);
}

}  // namespace prnn::models
