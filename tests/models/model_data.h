// The SST and WikiNER subsets the model tests train on (tests/data, read once per process).
#pragma once

#include <string>
#include <vector>

#include "prnn/data.h"

namespace prnn::models::test_data {

inline std::string path(const std::string& name) {
  return std::string(PRNN_TEST_DATA_DIR) + "/" + name;
}

struct Sst {
  data::Vocabulary words;
  std::vector<data::Tree> trees;
};
inline const Sst& sst() {
  static const Sst s = [] {
    Sst r;
    r.trees = data::read_sst(path("sst_dev_200.txt"), r.words, /*grow=*/true);
    return r;
  }();
  return s;
}

struct WikiNer {
  data::Vocabulary words;
  data::Vocabulary tags{data::Vocabulary::Unknown::Reject};
  std::vector<data::TaggedSentence> sentences;
  data::Vocabulary chars;
};
inline const WikiNer& wikiner() {
  static const WikiNer w = [] {
    WikiNer r;
    r.sentences = data::read_wikiner(path("wikiner_dev_200.txt"), r.words, r.tags, true);
    r.chars = data::char_vocabulary(r.words);
    return r;
  }();
  return w;
}

}  // namespace prnn::models::test_data
