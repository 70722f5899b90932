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
  const graph::Parameter w_1 = model.add_parameters({options.mlp, 2 * options.hidden});
  const graph::Parameter b_1 =
      model.add_parameters({options.mlp}, graph::Initializer::constant(0.0));
  const graph::Parameter w_2 = model.add_parameters({tags.size(), options.mlp});
  const graph::Parameter b_2 =
      model.add_parameters({tags.size()}, graph::Initializer::constant(0.0));

  graph::Expr e_w1, e_b1, e_w2, e_b2;  // of the current graph
  detail::ModelHooks hooks;
  hooks.new_graph = [&](graph::Graph& g) {
    bilstm.new_graph(g);
    e_w1 = graph::parameter(g, w_1);
    e_b1 = graph::parameter(g, b_1);
    e_w2 = graph::parameter(g, w_2);
    e_b2 = graph::parameter(g, b_2);
  };
  hooks.add_sentence = [&](graph::Graph& g, std::size_t index, bool from_train) {
    const TaggedSentence& sentence = from_train ? train[index] : dev[index];
    std::vector<graph::Expr> xs;
    for (int w : sentence.words) xs.push_back(graph::lookup(g, embed, w));
    const std::vector<graph::Expr> hs = bilstm.transduce(xs);  // [2H] each
    detail::SentenceExprs out;
    std::vector<graph::Expr> terms;
    for (std::size_t t = 0; t < hs.size(); ++t) {
      const graph::Expr m = graph::tanh(graph::affine_transform({e_b1, e_w1, hs[t]}));  // [M]
      const graph::Expr logits = graph::affine_transform({e_b2, e_w2, m});              // [tags]
      out.logits.push_back(logits);
      out.gold.push_back(sentence.tags[t]);
      if (from_train) terms.push_back(graph::pick_neg_log_softmax(logits, sentence.tags[t]));
    }
    if (from_train) detail::set_loss(out, terms);
    return out;
  };
  hooks.words = [&](std::size_t index, bool from_train) -> std::int64_t {
    return (from_train ? train[index] : dev[index]).size();
  };
  return detail::run_training(o, model, train_size, dev.size(), hooks, callbacks, executor);
}

}  // namespace prnn::models
