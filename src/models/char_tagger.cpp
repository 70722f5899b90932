// BiLSTM tagger with character features on WikiNER (contract in prnn/models.h), after DyNet's
// bilstmtagger example and the VPPS paper's BiLSTMwChar:
//   word t frequent (count >= rare_below):  x_t = E[word_t]  [E]
//   word t rare or <unk>:                   c_j = C[char_j] [C] over its UTF-8 characters;
//                                           x_t = [LSTM_f(c)_last ; LSTM_b(c)_first]  [E/2 + E/2]
//   [h_fwd_t ; h_bwd_t] = BiLSTM(x)_t [2H];  m_t = tanh(W_1 [h_fwd_t ; h_bwd_t] + b_1) [M]
//   logits_t = W_2 m_t + b_2 [tags];  loss = Σ_t -log softmax(logits_t)[tag_t]
// Parameters: E [V, E], C [chars, C] (Glorot rows), the character BiLSTM (C -> E/2 per direction),
// the word BiLSTM (E -> H per direction), W_1 [M, 2H], b_1 [M], W_2 [tags, M], b_2 [tags]; all
// drawn from the Model's seeded stream in this order.
#include <string>
#include <vector>

#include "core/check.h"
#include "models/training.h"
#include "prnn/models.h"

namespace prnn::models {
using data::TaggedSentence;

TrainReport train_bilstm_char_tagger(const BiLstmCharTaggerOptions& options,
                                     const data::Vocabulary& words, const data::Vocabulary& chars,
                                     const data::Vocabulary& tags,
                                     const std::vector<data::TaggedSentence>& train,
                                     const std::vector<data::TaggedSentence>& dev,
                                     const TrainCallbacks& callbacks, graph::Executor* executor) {
  const TrainingOptions& o = options.training;
  detail::check_training_options(o);
  PRNN_EXPECT(options.embedding >= 2 && options.embedding % 2 == 0,
              "train_bilstm_char_tagger: embedding must be even and >= 2 (a rare word's "
              "character BiLSTM gives embedding/2 per direction), got {}",
              options.embedding);
  PRNN_EXPECT(options.char_embedding >= 1 && options.hidden >= 1 && options.mlp >= 1,
              "train_bilstm_char_tagger: char_embedding, hidden and mlp must be >= 1, got {}, {} "
              "and {}",
              options.char_embedding, options.hidden, options.mlp);
  PRNN_EXPECT(options.rare_below >= 0, "train_bilstm_char_tagger: rare_below must be >= 0, got {}",
              options.rare_below);
  PRNN_EXPECT(words.size() >= 1 && tags.size() >= 1,
              "train_bilstm_char_tagger: the vocabularies must not be empty, got {} words and {} "
              "tags",
              words.size(), tags.size());
  PRNN_EXPECT(chars.has_unk() && chars.size() >= 1,
              "train_bilstm_char_tagger: the character vocabulary must map unseen characters to "
              "<unk> (data::char_vocabulary), got one that rejects them");
  const std::size_t train_size = detail::limited_size(o, train.size());
  detail::check_tagged_sentences("train_bilstm_char_tagger", "train", train, train_size, words.size(),
                                 tags.size());
  detail::check_tagged_sentences("train_bilstm_char_tagger", "dev", dev, dev.size(), words.size(),
                                 tags.size());

  // Rare words, read by characters; decided once from the counts.
  std::vector<bool> rare(static_cast<std::size_t>(words.size()));
  for (int w = 0; w < words.size(); ++w)
    rare[static_cast<std::size_t>(w)] =
        words.count(w) < options.rare_below || (words.has_unk() && w == data::Vocabulary::kUnk);

  graph::Model model(o.seed);
  const graph::LookupParameter embed =
      model.add_lookup_parameters(words.size(), {options.embedding});
  const graph::LookupParameter char_embed =
      model.add_lookup_parameters(chars.size(), {options.char_embedding});
  graph::BiLstmBuilder char_bilstm(model, options.char_embedding, options.embedding / 2);
  graph::BiLstmBuilder bilstm(model, options.embedding, options.hidden);
  detail::MlpHead head(model, 2 * options.hidden, options.mlp, tags.size());

  // [E] of a rare word: the character BiLSTM's last forward and first backward states.
  const auto spell = [&](graph::Graph& g, const std::string& token) {
    const std::vector<int> ids = data::char_ids(chars, token);
    graph::LstmBuilder& f = char_bilstm.forward_lstm;
    graph::LstmBuilder& b = char_bilstm.backward_lstm;
    f.start_new_sequence();
    for (int c : ids) f.add_input(graph::lookup(g, char_embed, c));
    b.start_new_sequence();
    for (auto c = ids.rbegin(); c != ids.rend(); ++c) b.add_input(graph::lookup(g, char_embed, *c));
    return graph::concatenate({f.back(), b.back()});
  };

  detail::ModelHooks hooks;
  hooks.new_graph = [&](graph::Graph& g) {
    char_bilstm.new_graph(g);
    bilstm.new_graph(g);
    head.new_graph(g);
  };
  hooks.add_sentence = [&](graph::Graph& g, std::size_t index, bool from_train) {
    const TaggedSentence& sentence = from_train ? train[index] : dev[index];
    std::vector<graph::Expr> xs;  // [E] each
    for (std::size_t t = 0; t < sentence.words.size(); ++t) {
      const int w = sentence.words[t];
      xs.push_back(rare[static_cast<std::size_t>(w)] ? spell(g, sentence.tokens[t])
                                                     : graph::lookup(g, embed, w));
    }
    return head.tag(bilstm.transduce(xs), sentence, from_train);  // features [2H] each
  };
  hooks.words = [&](std::size_t index, bool from_train) -> std::int64_t {
    return (from_train ? train[index] : dev[index]).size();
  };
  return detail::run_training(o, model, train_size, dev.size(), hooks, callbacks, executor);
}

}  // namespace prnn::models
