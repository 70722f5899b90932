// SST and WikiNER readers: the 200-line excerpts in tests/data parse into well-formed trees and
// sentences that print back to the original lines; vocabularies; every malformed-line case names
// its line and column; random mutations of valid lines either parse or throw InvalidArgument.
// Configured with -DPRNN_FULL_DATA=<dir holding sst/ and wikiner/>, the full sets are parsed too.
#include "prnn/data.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "support/expect.h"
#include "support/random.h"

namespace prnn::data {
namespace {

using test::expect_invalid;

constexpr int kSubsetLines = 200;
constexpr int kFuzzCases = 2000;

std::string test_data(const std::string& name) {
  return std::string(PRNN_TEST_DATA_DIR) + "/" + name;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.is_open()) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<Tree> sst_from(const std::string& text, Vocabulary& words, bool grow = true) {
  std::istringstream in(text);
  return read_sst(in, "test", words, grow);
}

std::vector<TaggedSentence> wikiner_from(const std::string& text, Vocabulary& words,
                                         Vocabulary& tags, bool grow = true) {
  std::istringstream in(text);
  return read_wikiner(in, "test", words, tags, grow);
}

// Every structural promise of Tree: 2n-1 nodes, post-order (children before parents, every node
// but the root the child of exactly one node), leaves in sentence order, labels in 0..4.
void check_tree(const Tree& t, const Vocabulary& words) {
  const int n = t.leaves();
  ASSERT_GE(n, 1);
  ASSERT_EQ(static_cast<int>(t.nodes.size()), 2 * n - 1);
  ASSERT_EQ(t.root, static_cast<int>(t.nodes.size()) - 1);
  std::vector<int> parents(t.nodes.size(), 0);
  int next_position = 0;
  for (int i = 0; i < static_cast<int>(t.nodes.size()); ++i) {
    const TreeNode& node = t.nodes[static_cast<std::size_t>(i)];
    ASSERT_GE(node.label, 0);
    ASSERT_LT(node.label, Tree::kLabels);
    if (node.is_leaf()) {
      ASSERT_EQ(node.right, -1);
      ASSERT_EQ(node.position, next_position++);
      ASSERT_EQ(node.word, words.lookup(t.tokens[static_cast<std::size_t>(node.position)]));
    } else {
      ASSERT_GE(node.left, 0);
      ASSERT_LT(node.left, i);
      ASSERT_GE(node.right, 0);
      ASSERT_LT(node.right, i);
      ASSERT_EQ(node.word, -1);
      ASSERT_EQ(node.position, -1);
      ++parents[static_cast<std::size_t>(node.left)];
      ++parents[static_cast<std::size_t>(node.right)];
    }
  }
  ASSERT_EQ(next_position, n);
  for (int i = 0; i < t.root; ++i) ASSERT_EQ(parents[static_cast<std::size_t>(i)], 1) << i;
  ASSERT_EQ(parents[static_cast<std::size_t>(t.root)], 0);
}

void check_sentence(const TaggedSentence& s) {
  ASSERT_GE(s.size(), 1);
  ASSERT_EQ(s.words.size(), s.tokens.size());
  ASSERT_EQ(s.tags.size(), s.tokens.size());
  for (const std::string& token : s.tokens) ASSERT_FALSE(token.empty());
}

// ---- the excerpts ----------------------------------------------------------------------------

TEST(DataSst, ExcerptParsesAndPrintsBack) {
  const std::string path = test_data("sst_dev_200.txt");
  const std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(static_cast<int>(lines.size()), kSubsetLines);

  Vocabulary words;
  const std::vector<Tree> trees = read_sst(path, words, /*grow=*/true);
  ASSERT_EQ(static_cast<int>(trees.size()), kSubsetLines);
  std::int64_t leaves = 0;
  for (std::size_t i = 0; i < trees.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i + 1));
    check_tree(trees[i], words);
    EXPECT_EQ(trees[i].to_string(), lines[i]);
    leaves += trees[i].leaves();
  }
  EXPECT_EQ(words.count(Vocabulary::kUnk), 0);
  std::int64_t counted = 0;
  for (int id = 0; id < words.size(); ++id) counted += words.count(id);
  EXPECT_EQ(counted, leaves);

  // The first line: (3 (2 It) (4 ...) (2 .)) -- root label 3, first word "It".
  EXPECT_EQ(trees[0].nodes.back().label, 3);
  EXPECT_EQ(trees[0].tokens.front(), "It");
  EXPECT_EQ(trees[0].nodes.front().label, 2);
  EXPECT_EQ(words.entry(trees[0].word_ids().front()), "It");

  // The stream reader gives the same trees.
  std::ifstream in(path, std::ios::binary);
  Vocabulary again;
  const std::vector<Tree> streamed = read_sst(in, "sst", again, true);
  ASSERT_EQ(streamed.size(), trees.size());
  for (std::size_t i = 0; i < trees.size(); ++i)
    EXPECT_EQ(streamed[i].word_ids(), trees[i].word_ids());
}

TEST(DataWikiner, ExcerptParsesAndPrintsBack) {
  const std::string path = test_data("wikiner_dev_200.txt");
  const std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(static_cast<int>(lines.size()), kSubsetLines);

  Vocabulary words;
  Vocabulary tags(Vocabulary::Unknown::Reject);
  const std::vector<TaggedSentence> sentences = read_wikiner(path, words, tags, true);
  ASSERT_EQ(static_cast<int>(sentences.size()), kSubsetLines);
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i + 1));
    check_sentence(sentences[i]);
    EXPECT_EQ(sentences[i].to_string(tags), lines[i]);
  }
  EXPECT_FALSE(tags.has_unk());
  EXPECT_EQ(tags.size(), 5);           // O, I-MISC, I-ORG, I-PER, I-LOC in this excerpt
  EXPECT_EQ(tags.entry(0), "I-MISC");  // "010|I-MISC" opens the file
  EXPECT_EQ(sentences[0].tokens[0], "010");
  EXPECT_EQ(sentences[0].tags[1], tags.lookup("O"));
}

// ---- vocabularies ----------------------------------------------------------------------------

TEST(DataVocabulary, UnkCountsAndFreeze) {
  Vocabulary v;
  EXPECT_TRUE(v.has_unk());
  EXPECT_EQ(v.size(), 1);
  EXPECT_EQ(v.entry(Vocabulary::kUnk), Vocabulary::kUnkToken);
  EXPECT_EQ(v.add("a"), 1);
  EXPECT_EQ(v.add("b"), 2);
  EXPECT_EQ(v.add("a"), 1);
  EXPECT_EQ(v.add("<unk>"), Vocabulary::kUnk);
  EXPECT_EQ(v.count(1), 2);
  EXPECT_EQ(v.count(2), 1);
  EXPECT_EQ(v.count(Vocabulary::kUnk), 1);
  EXPECT_EQ(v.lookup("never seen"), Vocabulary::kUnk);
  EXPECT_FALSE(v.find("never seen").has_value());
  EXPECT_EQ(v.find("b"), 2);

  expect_invalid([&] { v.add(""); }, {"non-empty"});
  expect_invalid([&] { v.entry(3); }, {"0..2", "got 3"});
  expect_invalid([&] { v.count(-1); }, {"got -1"});
  v.freeze();
  EXPECT_TRUE(v.frozen());
  expect_invalid([&] { v.add("c"); }, {"frozen", "'c'"});
  expect_invalid([&] { v.add("a"); }, {"frozen"});
  EXPECT_EQ(v.size(), 3);

  Vocabulary tags(Vocabulary::Unknown::Reject);
  EXPECT_EQ(tags.add("O"), 0);
  EXPECT_EQ(tags.lookup("O"), 0);
  expect_invalid([&] { tags.lookup("I-PER"); }, {"'I-PER'"});
}

TEST(DataVocabulary, MinCountPrunesToUnk) {
  Vocabulary counts;
  const std::vector<Tree> train =
      sst_from("(3 (2 a) (2 b))\n(1 (2 a) (2 c))\n(1 (2 a) (2 c))\n", counts);
  EXPECT_EQ(counts.size(), 4);  // <unk> a b c
  const Vocabulary words = counts.pruned(2);
  EXPECT_TRUE(words.frozen());
  ASSERT_EQ(words.size(), 3);  // <unk> a c
  EXPECT_EQ(words.entry(1), "a");
  EXPECT_EQ(words.entry(2), "c");
  EXPECT_EQ(words.count(1), 3);
  EXPECT_EQ(words.count(Vocabulary::kUnk), 1);  // the one "b"
  EXPECT_EQ(words.lookup("b"), Vocabulary::kUnk);

  std::vector<Tree> renumbered = train;
  for (Tree& t : renumbered) t.set_word_ids(words);
  EXPECT_EQ(renumbered[0].word_ids(), (std::vector<int>{1, Vocabulary::kUnk}));
  EXPECT_EQ(renumbered[2].word_ids(), (std::vector<int>{1, 2}));
  EXPECT_EQ(renumbered[0].to_string(), "(3 (2 a) (2 b))");  // the text survives <unk>

  // Reading against the frozen vocabulary: unseen words are <unk>; growing it is refused.
  Vocabulary frozen = words;
  const std::vector<Tree> dev = sst_from("(4 (2 zebra) (2 a))\n", frozen, /*grow=*/false);
  EXPECT_EQ(dev[0].word_ids(), (std::vector<int>{Vocabulary::kUnk, 1}));
  EXPECT_EQ(frozen.size(), 3);
  expect_invalid([&] { sst_from("(2 x)\n", frozen, /*grow=*/true); }, {"test", "frozen"});

  Vocabulary tags(Vocabulary::Unknown::Reject);
  tags.add("O");
  tags.add("O");
  tags.add("I-PER");
  const Vocabulary kept = tags.pruned(2);
  EXPECT_FALSE(kept.has_unk());
  EXPECT_EQ(kept.size(), 1);
}

TEST(DataVocabulary, WikinerDevAgainstTrainVocabulary) {
  Vocabulary words;
  Vocabulary tags(Vocabulary::Unknown::Reject);
  wikiner_from("John|I-PER runs|O\n", words, tags);
  words.freeze();
  tags.freeze();
  const auto dev = wikiner_from("Mary|I-PER runs|O\n", words, tags, /*grow=*/false);
  EXPECT_EQ(dev[0].words, (std::vector<int>{Vocabulary::kUnk, words.lookup("runs")}));
  EXPECT_EQ(dev[0].tags, (std::vector<int>{0, 1}));
  EXPECT_EQ(dev[0].tokens[0], "Mary");
  expect_invalid([&] { wikiner_from("runs|O\n\nMary|I-XYZ\n", words, tags, false); },
                 {"test:3:6:", "expected a known tag (I-PER, O)", "got 'I-XYZ'"});
}

TEST(DataVocabulary, Characters) {
  EXPECT_EQ(utf8_chars("abc"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(utf8_chars("h\xc3\xa9!"), (std::vector<std::string>{"h", "\xc3\xa9", "!"}));
  EXPECT_EQ(utf8_chars("\xe2\x82\xac\xf0\x9f\x98\x80"),
            (std::vector<std::string>{"\xe2\x82\xac", "\xf0\x9f\x98\x80"}));
  // Malformed: a lone continuation byte, a truncated sequence, an overlong form, a surrogate.
  EXPECT_EQ(utf8_chars("\x80"), (std::vector<std::string>{"\x80"}));
  EXPECT_EQ(utf8_chars("a\xc3"), (std::vector<std::string>{"a", "\xc3"}));
  EXPECT_EQ(utf8_chars("\xc0\xaf"), (std::vector<std::string>{"\xc0", "\xaf"}));
  EXPECT_EQ(utf8_chars("\xed\xa0\x80").size(), 3u);
  EXPECT_TRUE(utf8_chars("").empty());

  Vocabulary words;
  words.add("ab");
  words.add("ab");
  words.add("b\xc3\xa9");
  const Vocabulary chars = char_vocabulary(words);
  EXPECT_TRUE(chars.frozen());
  EXPECT_EQ(chars.size(), 4);  // <unk> a b é
  EXPECT_EQ(chars.count(chars.lookup("b")), 3);
  EXPECT_EQ(char_ids(chars, "b\xc3\xa9z"),
            (std::vector<int>{chars.lookup("b"), chars.lookup("\xc3\xa9"), Vocabulary::kUnk}));

  // From the excerpt: every word's characters are known.
  Vocabulary wiki_words;
  Vocabulary tags(Vocabulary::Unknown::Reject);
  const auto sentences = read_wikiner(test_data("wikiner_dev_200.txt"), wiki_words, tags, true);
  const Vocabulary wiki_chars = char_vocabulary(wiki_words);
  for (const TaggedSentence& s : sentences)
    for (const std::string& token : s.tokens)
      for (int id : char_ids(wiki_chars, token)) ASSERT_NE(id, Vocabulary::kUnk) << token;
}

// ---- line handling ---------------------------------------------------------------------------

TEST(DataReaders, BlankLinesAreSkippedButCounted) {
  Vocabulary words;
  const auto trees = sst_from("\n(2 a)\n  \t \r\n(3 (2 a) (4 b))\r\n\n", words);
  ASSERT_EQ(trees.size(), 2u);
  EXPECT_EQ(trees[1].to_string(), "(3 (2 a) (4 b))");
  expect_invalid([&] { sst_from("\n(2 a)\n\n(2 a\n", words); }, {"test:4:5:", "end of line"});

  Vocabulary tags(Vocabulary::Unknown::Reject);
  const auto sentences = wikiner_from("\r\n a|O \t b|O \n\n", words, tags);
  ASSERT_EQ(sentences.size(), 1u);
  EXPECT_EQ(sentences[0].to_string(tags), "a|O b|O");
  expect_invalid([&] { wikiner_from("a|O\n\n\nb\n", words, tags); }, {"test:4:1:"});

  EXPECT_TRUE(sst_from("", words).empty());
  EXPECT_TRUE(wikiner_from("\n\n", words, tags).empty());
}

TEST(DataReaders, MissingFile) {
  Vocabulary words;
  Vocabulary tags(Vocabulary::Unknown::Reject);
  expect_invalid([&] { read_sst("/nonexistent/sst.txt", words, true); },
                 {"cannot open", "/nonexistent/sst.txt"});
  expect_invalid([&] { read_wikiner("/nonexistent/ner.txt", words, tags, true); },
                 {"/nonexistent/ner.txt"});
}

// ---- malformed lines -------------------------------------------------------------------------

struct Malformed {
  const char* name;
  const char* line;
  const char* where;  // "test:3:COLUMN:", the bad line being the third
  const char* what;   // a fragment of the rest of the message
};

// Two valid lines, then the bad one: the message must name line 3.
void expect_rejected(const Malformed& c, bool sst) {
  SCOPED_TRACE(c.name);
  Vocabulary words;
  Vocabulary tags(Vocabulary::Unknown::Reject);
  if (sst) {
    const std::string text = std::string("(2 ok)\n(3 (2 a) (2 b))\n") + c.line + "\n(2 after)\n";
    expect_invalid([&] { sst_from(text, words); }, {c.where, c.what});
  } else {
    const std::string text = std::string("a|O\nb|O c|I-PER\n") + c.line + "\nd|O\n";
    expect_invalid([&] { wikiner_from(text, words, tags); }, {c.where, c.what});
  }
}

TEST(DataSst, MalformedLinesNameLineAndColumn) {
  const Malformed cases[] = {
      {"unbalanced, missing ')'", "(3 (2 a) (2 b)",
       "test:3:15:", "expected ')' closing the node opened at column 1, got end of line"},
      {"unbalanced, extra ')'", "(3 (2 a) (2 b)))",
       "test:3:16:", "expected end of line after the tree, got ')'"},
      {"missing label", "(3 (a) (2 b))", "test:3:5:", "expected a label 0..4, got 'a'"},
      {"missing label before child", "(3 ((2 a) (2 b)))",
       "test:3:5:", "expected a label 0..4, got '('"},
      {"non-numeric label", "(x (2 a) (2 b))", "test:3:2:", "expected a label 0..4, got 'x'"},
      {"negative label", "(3 (-1 a) (2 b))", "test:3:5:", "got '-1'"},
      {"label out of range", "(3 (7 a) (2 b))", "test:3:5:", "got '7' (out of range)"},
      {"huge label", "(99999999999999999999 a)", "test:3:2:", "(out of range)"},
      {"label only", "(3)", "test:3:3:", "expected a word or '(' after the label, got ')'"},
      {"empty node", "()", "test:3:2:", "expected a label 0..4, got ')'"},
      {"only '('", "(", "test:3:2:", "expected a label 0..4, got end of line"},
      {"label, no word", "(3 ", "test:3:4:", "got end of line"},
      {"unary node", "(3 (2 a))", "test:3:1:",
       "expected a node with 2 children (SST trees are binary), got a node with 1 child"},
      {"ternary node", "(3 (2 a) (2 b) (2 c))", "test:3:16:",
       "expected ')' closing the node opened at column 1 (SST trees are binary), got '('"},
      {"leaf with two words", "(2 a b)",
       "test:3:6:", "expected ')' closing the leaf opened at column 1, got 'b'"},
      {"word beside a child", "(3 (2 a) b)",
       "test:3:10:", "expected '(' opening the second child of the node at column 1, got 'b'"},
      {"no tree", "It is good", "test:3:1:", "expected '(' opening a tree, got 'It'"},
      {"stray ')'", ")", "test:3:1:", "got ')'"},
      {"two trees", "(2 a) (2 b)", "test:3:7:", "expected end of line after the tree, got '('"},
      {"control byte", "(2 a)\x01", "test:3:6:", "got '\\x01'"},
  };
  for (const Malformed& c : cases) expect_rejected(c, /*sst=*/true);
}

TEST(DataWikiner, MalformedLinesNameLineAndColumn) {
  const Malformed cases[] = {
      {"token without '|'", "x|O bad y|O", "test:3:5:", "expected a token word|TAG, got 'bad'"},
      {"empty word", "x|O |O", "test:3:5:", "expected a word before '|', got '|O'"},
      {"empty tag", "x|O y|", "test:3:7:", "expected a tag after the last '|', got 'y|'"},
      {"only a bar", "|", "test:3:1:", "expected a word before '|'"},
      {"empty tag after a bar in the word", "a|b|", "test:3:5:", "got 'a|b|'"},
  };
  for (const Malformed& c : cases) expect_rejected(c, /*sst=*/false);

  // The tag is after the last '|'; the word keeps the others.
  Vocabulary words;
  Vocabulary tags(Vocabulary::Unknown::Reject);
  const auto s = wikiner_from("a|b|I-ORG ||O\n", words, tags);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].tokens, (std::vector<std::string>{"a|b", "|"}));
  EXPECT_EQ(tags.entry(s[0].tags[0]), "I-ORG");
  EXPECT_EQ(s[0].to_string(tags), "a|b|I-ORG ||O");
}

TEST(DataSst, DeepTreesNeitherOverflowNorRecurse) {
  constexpr int kDepth = 200000;
  // A right-branching chain of kDepth internal nodes: (2 (2 w) (2 (2 w) ... (2 w)...)).
  std::string line;
  for (int i = 0; i < kDepth; ++i) line += "(2 (2 w) ";
  line += "(2 w)";
  line += std::string(kDepth, ')');
  Vocabulary words;
  const auto trees = sst_from(line + "\n", words);
  ASSERT_EQ(trees.size(), 1u);
  EXPECT_EQ(trees[0].leaves(), kDepth + 1);
  check_tree(trees[0], words);
  EXPECT_EQ(trees[0].to_string(), line);

  // Unbalanced and unary at the same depth: errors, not crashes.
  expect_invalid([&] { sst_from(std::string(kDepth, '(') + "\n", words); }, {"test:1:2:"});
  std::string unary;
  for (int i = 0; i < kDepth; ++i) unary += "(2 ";
  unary += "w" + std::string(kDepth, ')');
  expect_invalid([&] { sst_from(unary + "\n", words); }, {"1 child"});
}

// ---- fuzz ------------------------------------------------------------------------------------

// Bytes a mutation inserts or writes half the time: the ones the grammars give meaning to.
constexpr char kStructural[] = "()| \t\r\n0123456789";

std::string mutate(std::string line, test::Rng& rng) {
  const int edits = static_cast<int>(rng.integer(1, 4));
  for (int e = 0; e < edits; ++e) {
    const auto byte = [&] {
      if (rng.integer(0, 1) == 0)
        return kStructural[rng.integer(0, static_cast<std::int64_t>(sizeof(kStructural)) - 2)];
      return static_cast<char>(rng.integer(0, 255));
    };
    const auto at = [&](std::size_t n) {
      return static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(n)));
    };
    switch (rng.integer(0, 2)) {
      case 0:  // flip (overwrite) a byte
        if (!line.empty()) line[at(line.size() - 1)] = byte();
        break;
      case 1:  // delete a run of 1..3 bytes
        if (!line.empty())
          line.erase(at(line.size() - 1), static_cast<std::size_t>(rng.integer(1, 3)));
        break;
      default:  // insert a byte
        line.insert(at(line.size()), 1, byte());
        break;
    }
  }
  return line;
}

// What reading `text` did: parsed, or rejected with InvalidArgument. Anything else fails the test.
enum class Outcome : std::uint8_t { Parsed, Rejected, Failed };

std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f || c == '\\')
      out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else
      out += static_cast<char>(c);
  }
  return out;
}

template <class Read>
Outcome try_read(const std::string& text, Read&& read) {
  try {
    read(text);
    return Outcome::Parsed;
  } catch (const InvalidArgument&) {
    return Outcome::Rejected;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "input \"" << escaped(text) << "\" threw " << typeid(e).name() << ": "
                  << e.what();
  } catch (...) {
    ADD_FAILURE() << "input \"" << escaped(text) << "\" threw a non-std exception";
  }
  return Outcome::Failed;
}

TEST(DataReaders, FuzzedLinesParseOrThrowInvalidArgument) {
  test::Rng rng;
  std::cout << "[ fuzz     ] PRNN_TEST_SEED=" << rng.seed() << "\n";
  const std::vector<std::string> sst = read_lines(test_data("sst_dev_200.txt"));
  const std::vector<std::string> ner = read_lines(test_data("wikiner_dev_200.txt"));
  ASSERT_FALSE(sst.empty());
  ASSERT_FALSE(ner.empty());

  // Frozen vocabularies for the grow = false half of the cases.
  Vocabulary sst_words;
  read_sst(test_data("sst_dev_200.txt"), sst_words, true);
  sst_words.freeze();
  Vocabulary ner_words;
  Vocabulary ner_tags(Vocabulary::Unknown::Reject);
  read_wikiner(test_data("wikiner_dev_200.txt"), ner_words, ner_tags, true);
  ner_words.freeze();
  ner_tags.freeze();

  int parsed = 0, rejected = 0;
  for (int i = 0; i < kFuzzCases; ++i) {
    const bool from_sst = i % 2 == 0;
    const auto& pool = from_sst ? sst : ner;
    const std::string text = mutate(
        pool[static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(pool.size()) - 1))],
        rng);
    const bool grow = rng.integer(0, 1) == 0;
    for (const bool as_sst : {true, false}) {
      const Outcome outcome = try_read(text, [&](const std::string& t) {
        std::istringstream in(t);
        Vocabulary words;
        Vocabulary tags(Vocabulary::Unknown::Reject);
        if (as_sst) {
          Vocabulary& w = grow ? words : sst_words;
          for (const Tree& tree : read_sst(in, "fuzz", w, grow)) check_tree(tree, w);
        } else {
          Vocabulary& w = grow ? words : ner_words;
          Vocabulary& g = grow ? tags : ner_tags;
          for (const TaggedSentence& s : read_wikiner(in, "fuzz", w, g, grow)) check_sentence(s);
        }
      });
      if (outcome == Outcome::Failed || HasFatalFailure()) {
        ADD_FAILURE() << "case " << i << ": \"" << escaped(text) << "\"";
        return;
      }
      (outcome == Outcome::Parsed ? parsed : rejected) += 1;
    }
  }
  // Both outcomes occur, or the mutations are not exercising the parsers.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
  std::cout << "[ fuzz     ] " << parsed << " parsed, " << rejected << " rejected\n";
}

// ---- the full sets (only in builds configured with -DPRNN_FULL_DATA=<dir>) ------------------

#ifdef PRNN_FULL_DATA_DIR
TEST(DataFull, ParsesEveryLine) {
  const std::string root(PRNN_FULL_DATA_DIR);

  Vocabulary counts;
  const auto train = read_sst(root + "/sst/train.txt", counts, true);
  EXPECT_EQ(train.size(), 8544u);
  Vocabulary words = counts.pruned(1);
  const auto dev = read_sst(root + "/sst/dev.txt", words, false);
  EXPECT_EQ(dev.size(), 1101u);
  const auto dev_lines = read_lines(root + "/sst/dev.txt");
  for (std::size_t i = 0; i < dev.size(); ++i) {
    check_tree(dev[i], words);
    EXPECT_EQ(dev[i].to_string(), dev_lines[i]);
  }

  Vocabulary ner_words;
  Vocabulary tags(Vocabulary::Unknown::Reject);
  const auto ner_train = read_wikiner(root + "/wikiner/train.txt", ner_words, tags, true);
  EXPECT_EQ(ner_train.size(), 10000u);
  ner_words.freeze();
  tags.freeze();
  const auto ner_dev = read_wikiner(root + "/wikiner/dev.txt", ner_words, tags, false);
  EXPECT_EQ(ner_dev.size(), 1696u);
  const auto ner_lines = read_lines(root + "/wikiner/dev.txt");
  for (std::size_t i = 0; i < ner_dev.size(); ++i) {
    check_sentence(ner_dev[i]);
    EXPECT_EQ(ner_dev[i].to_string(tags), ner_lines[i]);
  }
}
#endif  // PRNN_FULL_DATA_DIR

}  // namespace
}  // namespace prnn::data
