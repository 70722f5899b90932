// Dataset readers for the dynamic-graph models.
//   SST      Stanford Sentiment Treebank, one PTB-style binary tree per line:
//              (3 (2 It) (4 (4 (2 's) ...)) (2 .)))
//            every node carries a sentiment label 0..4; a leaf is `(label word)`, an internal node
//            `(label child child)` with exactly two children. Read into a flattened Tree.
//   WikiNER  one sentence per line, tokens `word|TAG` separated by spaces; the tag is what follows
//            the LAST '|' of a token, so a word may itself contain '|'. Read into TaggedSentence.
// Both readers, on every line:
//   - a trailing '\r' is dropped (CRLF files read like LF files);
//   - a blank line (empty, or only spaces and tabs) is skipped but still counted, so the line
//     numbers of later messages match the file; a non-blank line yields exactly one tree/sentence;
//   - spaces and tabs separate tokens, any number of them; a word is any other run of bytes
//     (UTF-8 is kept as is; SST words cannot contain '(' or ')');
//   - a malformed line throws InvalidArgument "SOURCE:LINE:COLUMN: expected X, got Y" (1-based
//     line and byte column; SOURCE is the path, or the name given with a stream). Any byte
//     sequence either parses or throws InvalidArgument: nothing deeper than the heap is used for
//     nesting, so deep or unbalanced input cannot overflow the stack.
// Vocabulary lookups: with grow = true every word (and tag) is counted and unseen ones get the next
// id; with grow = false unseen words map to <unk> and an unseen tag is an error naming its line.
//
// Building a min-count vocabulary from the training set, then reading the dev set against it:
//   Vocabulary counts;
//   auto train = read_sst(train_path, counts, /*grow=*/true);
//   Vocabulary words = counts.pruned(2);           // frozen; words seen once become <unk>
//   for (auto& t : train) t.set_word_ids(words);   // renumber against the pruned vocabulary
//   auto dev = read_sst(dev_path, words, /*grow=*/false);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace prnn::data {

// Words <-> dense ids 0..size()-1, with occurrence counts.
class Vocabulary {
 public:
  // What a lookup of an entry the vocabulary lacks gives.
  enum class Unknown : std::uint8_t {
    MapToUnk,  // id kUnk (0), reserved for the token "<unk>" (word vocabularies)
    Reject,    // no such id: the entry is an error (closed sets such as NER tags)
  };
  static constexpr int kUnk = 0;
  static constexpr std::string_view kUnkToken = "<unk>";

  explicit Vocabulary(Unknown unknown = Unknown::MapToUnk);

  // Counts `times` (>= 1) occurrences of `entry` and returns its id, giving it the next id if it
  // is new. Throws InvalidArgument if the vocabulary is frozen or `entry` is empty. With MapToUnk,
  // adding "<unk>" itself counts toward id 0.
  int add(std::string_view entry, std::int64_t times = 1);
  // The id of `entry`, or nullopt if the vocabulary lacks it (kUnkToken gives kUnk under MapToUnk).
  std::optional<int> find(std::string_view entry) const;
  // The id of `entry`; a missing one gives kUnk under MapToUnk and throws InvalidArgument under
  // Reject.
  int lookup(std::string_view entry) const;
  // The entry of `id`; throws InvalidArgument outside 0..size()-1.
  const std::string& entry(int id) const;
  // Occurrences counted by add(); kUnk counts explicit "<unk>" entries and, in a pruned copy, the
  // occurrences of the entries pruning dropped.
  std::int64_t count(int id) const;

  int size() const { return static_cast<int>(entries_.size()); }
  Unknown unknown() const { return unknown_; }
  bool has_unk() const { return unknown_ == Unknown::MapToUnk; }

  // After freeze(), add() throws; ids never change again.
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }

  // A frozen copy keeping <unk> (under MapToUnk) and every entry counted at least `min_count`
  // times, in the order of their ids here (so ids stay dense), with their counts.
  Vocabulary pruned(std::int64_t min_count) const;

 private:
  Unknown unknown_;
  bool frozen_ = false;
  std::vector<std::string> entries_;
  std::vector<std::int64_t> counts_;
  struct Hash {  // lets find() look a string_view up without building a string
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, int, Hash, std::equal_to<>> ids_;
};

// One node of a flattened binary tree.
struct TreeNode {
  int label = 0;      // sentiment class 0..4
  int left = -1;      // internal: index of the left child in Tree::nodes; leaf: -1
  int right = -1;     // internal: index of the right child; leaf: -1
  int word = -1;      // leaf: word id in the vocabulary the tree was read with; internal: -1
  int position = -1;  // leaf: index of its word in the sentence (Tree::tokens); internal: -1
  bool is_leaf() const { return left < 0; }
};

// A binary tree in post-order: both children of a node come before it, the root is last, and the
// leaves appear in sentence order. n leaves give 2n - 1 nodes.
struct Tree {
  static constexpr int kLabels = 5;  // SST sentiment classes 0..4

  std::vector<TreeNode> nodes;
  int root = -1;                    // == nodes.size() - 1
  std::vector<std::string> tokens;  // the leaves' words as written, in sentence order

  int leaves() const { return static_cast<int>(tokens.size()); }
  // The leaves' word ids in sentence order.
  std::vector<int> word_ids() const;
  // Re-reads every leaf's word id from `words` (unknown words -> <unk>, or InvalidArgument if
  // `words` has none), e.g. after Vocabulary::pruned.
  void set_word_ids(const Vocabulary& words);
  // The canonical PTB form, `(label word)` / `(label left right)` with single spaces: for a line
  // of the SST files this is the line itself.
  std::string to_string() const;
};

std::vector<Tree> read_sst(const std::string& path, Vocabulary& words, bool grow);
std::vector<Tree> read_sst(std::istream& in, const std::string& source, Vocabulary& words,
                           bool grow);

// One tagged sentence; tokens, words and tags have one entry per token.
struct TaggedSentence {
  std::vector<std::string> tokens;  // the words as written
  std::vector<int> words;           // word ids
  std::vector<int> tags;            // tag ids

  int size() const { return static_cast<int>(tokens.size()); }
  void set_word_ids(const Vocabulary& words);
  // `word|TAG word|TAG ...`, single spaces: for a line of the WikiNER files, the line itself.
  std::string to_string(const Vocabulary& tags) const;
};

// `tags` should be a Vocabulary(Vocabulary::Unknown::Reject); with grow = false, a tag it lacks
// throws InvalidArgument naming the line and column.
std::vector<TaggedSentence> read_wikiner(const std::string& path, Vocabulary& words,
                                         Vocabulary& tags, bool grow);
std::vector<TaggedSentence> read_wikiner(std::istream& in, const std::string& source,
                                         Vocabulary& words, Vocabulary& tags, bool grow);

// Characters, for character-level models: the UTF-8 code points of `word`, each as its bytes; a
// byte that does not begin a well-formed UTF-8 sequence is a character of its own.
std::vector<std::string> utf8_chars(std::string_view word);
// A frozen character vocabulary (with <unk>) of every entry of `words` but <unk>, each character
// counted count(word) times. Build it from the unpruned vocabulary so rare words' characters
// are kept.
Vocabulary char_vocabulary(const Vocabulary& words);
// The character ids of `word` (characters `chars` lacks -> <unk>).
std::vector<int> char_ids(const Vocabulary& chars, std::string_view word);

}  // namespace prnn::data
