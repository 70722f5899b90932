// SST and WikiNER readers, the Vocabulary, and UTF-8 character splitting (the formats and the
// error contract are in prnn/data.h).
// The SST parser is iterative: an explicit stack of open nodes on the heap, so nesting depth is
// bounded by memory, not by the call stack. Nodes are appended as they close, which is post-order.
#include "prnn/data.h"

#include <algorithm>
#include <fstream>
#include <istream>
#include <utility>

#include "core/check.h"

namespace prnn::data {
namespace {

constexpr std::size_t kMaxQuoted = 40;      // bytes of a token quoted in a message
constexpr std::size_t kMaxLabelDigits = 9;  // longer digit runs are out of range, not overflow
constexpr int kMaxListedTags = 16;          // known tags a message lists

bool is_space(char c) {
  return c == ' ' || c == '\t';
}
bool is_paren(char c) {
  return c == '(' || c == ')';
}

std::size_t skip_spaces(std::string_view s, std::size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

// End of the run of word bytes at pos: up to a space, or also a parenthesis when `parens`.
std::size_t token_end(std::string_view s, std::size_t pos, bool parens) {
  while (pos < s.size() && !is_space(s[pos]) && !(parens && is_paren(s[pos]))) ++pos;
  return pos;
}

// 'token' with control bytes escaped as \xNN and long tokens cut with "...".
std::string quote(std::string_view token) {
  std::string out = "'";
  const std::size_t n = std::min(token.size(), kMaxQuoted);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (token.size() > n) out += "...";
  return out + "'";
}

// What stands at pos, for "got ...": end of line, a parenthesis, or the token there.
std::string describe(std::string_view s, std::size_t pos, bool parens) {
  if (pos >= s.size()) return "end of line";
  if (parens && is_paren(s[pos])) return quote(s.substr(pos, 1));
  return quote(s.substr(pos, token_end(s, pos, parens) - pos));
}

bool is_blank(std::string_view s) {
  return skip_spaces(s, 0) == s.size();
}

// One input line and where it came from, for messages.
class Line {
 public:
  Line(const std::string& source, std::int64_t number, std::string_view text)
      : source_(source), number_(number), text_(text) {}
  std::string_view text() const { return text_; }

  // Throws "SOURCE:LINE:COLUMN: expected <expected>, got <got>" for byte offset pos.
  [[noreturn]] void fail(std::size_t pos, std::string_view expected, std::string_view got) const {
    throw InvalidArgument(
        fmt::format("{}:{}:{}: expected {}, got {}", source_, number_, pos + 1, expected, got));
  }

 private:
  const std::string& source_;
  std::int64_t number_;
  std::string_view text_;
};

// Calls parse(Line) for every non-blank line of `in`, after dropping a trailing '\r'.
template <class Parse>
void for_each_line(std::istream& in, const std::string& source, Parse&& parse) {
  std::string text;
  std::int64_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (is_blank(text)) continue;
    parse(Line(source, number, text));
  }
  if (in.bad()) throw RuntimeError("reading " + source, "stream error", __FILE__, __LINE__);
}

std::ifstream open_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  PRNN_EXPECT(in.is_open(), "cannot open '{}' for reading", path);
  return in;
}

void expect_growable(const Vocabulary& v, const std::string& source, std::string_view what) {
  PRNN_EXPECT(
      !v.frozen(),
      "{}: cannot grow the frozen {} vocabulary (read with grow = false to look entries up)",
      source, what);
}

// The id of `entry` at offset pos of `line`: added when growing, else looked up.
int entry_id(Vocabulary& v, bool grow, const Line& line, std::size_t pos, std::string_view entry,
             std::string_view what) {
  if (grow) return v.add(entry);
  if (const auto id = v.find(entry)) return *id;
  if (v.has_unk()) return Vocabulary::kUnk;
  std::string known;
  for (int id = 0; id < std::min(v.size(), kMaxListedTags); ++id)
    known += (id ? ", " : "") + v.entry(id);
  if (v.size() > kMaxListedTags) known += ", ...";
  line.fail(pos, fmt::format("a known {} ({})", what, known), quote(entry));
}

// ---- SST -------------------------------------------------------------------------------------

// A node whose ')' has not been read yet.
struct OpenNode {
  std::size_t column;  // offset of its '('
  int label;
  int children[2];
  int count;
};

// Parses the label token at pos (just after '(' and any spaces); returns the offset after it.
std::size_t parse_label(const Line& line, std::size_t pos, int& label) {
  const std::string_view s = line.text();
  const std::size_t end = token_end(s, pos, /*parens=*/true);
  constexpr std::string_view kExpected = "a label 0..4";
  if (end == pos) line.fail(pos, kExpected, describe(s, pos, true));
  const std::string_view token = s.substr(pos, end - pos);
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }))
    line.fail(pos, kExpected, quote(token));
  std::int64_t value = Tree::kLabels;  // out of range unless parsed below
  if (token.size() <= kMaxLabelDigits) {
    value = 0;
    for (char c : token) value = value * 10 + (c - '0');
  }
  if (value >= Tree::kLabels)
    line.fail(pos, kExpected, fmt::format("{} (out of range)", quote(token)));
  label = static_cast<int>(value);
  return end;
}

int append_node(Tree& tree, const TreeNode& node) {
  tree.nodes.push_back(node);
  return static_cast<int>(tree.nodes.size()) - 1;
}

Tree parse_tree(const Line& line, Vocabulary& words, bool grow) {
  const std::string_view s = line.text();
  Tree tree;
  std::vector<OpenNode> open;
  std::size_t pos = skip_spaces(s, 0);
  if (s[pos] != '(') line.fail(pos, "'(' opening a tree", describe(s, pos, true));
  for (;;) {
    // s[pos] == '(': open a node.
    OpenNode node{pos, 0, {-1, -1}, 0};
    pos = skip_spaces(s, parse_label(line, skip_spaces(s, pos + 1), node.label));
    if (pos >= s.size() || s[pos] == ')')
      line.fail(pos, "a word or '(' after the label", describe(s, pos, true));
    if (s[pos] == '(') {
      open.push_back(node);
      continue;
    }
    // A leaf: one word, then ')'.
    const std::size_t word_end = token_end(s, pos, /*parens=*/true);
    const std::string_view word = s.substr(pos, word_end - pos);
    TreeNode leaf;
    leaf.label = node.label;
    leaf.word = entry_id(words, grow, line, pos, word, "word");
    leaf.position = static_cast<int>(tree.tokens.size());
    tree.tokens.emplace_back(word);
    pos = skip_spaces(s, word_end);
    if (pos >= s.size() || s[pos] != ')')
      line.fail(pos, fmt::format("')' closing the leaf opened at column {}", node.column + 1),
                describe(s, pos, true));
    ++pos;
    int finished = append_node(tree, leaf);

    // Close every node whose ')' follows, until one needs another child.
    for (;;) {
      pos = skip_spaces(s, pos);
      if (open.empty()) {
        if (pos < s.size()) line.fail(pos, "end of line after the tree", describe(s, pos, true));
        tree.root = finished;
        return tree;
      }
      OpenNode& parent = open.back();
      parent.children[parent.count++] = finished;
      const bool third_child = parent.count == 2 && pos < s.size() && s[pos] == '(';
      const std::string expected =
          parent.count == 1
              ? fmt::format("'(' opening the second child of the node at column {}",
                            parent.column + 1)
              : fmt::format("')' closing the node opened at column {}{}", parent.column + 1,
                            third_child ? " (SST trees are binary)" : "");
      if (pos < s.size() && s[pos] == ')' && parent.count == 1)
        line.fail(parent.column, "a node with 2 children (SST trees are binary)",
                  "a node with 1 child");
      if (pos < s.size() && s[pos] == ')') {
        TreeNode internal;
        internal.label = parent.label;
        internal.left = parent.children[0];
        internal.right = parent.children[1];
        finished = append_node(tree, internal);
        open.pop_back();
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == '(' && parent.count == 1) break;
      line.fail(pos, expected, describe(s, pos, true));
    }
  }
}

void write_tree(const Tree& tree, int id, std::string& out) {
  // Iterative like the parser: (node, children written) pairs.
  std::vector<std::pair<int, int>> stack{{id, 0}};
  while (!stack.empty()) {
    auto& [node_id, done] = stack.back();
    const TreeNode& node = tree.nodes[static_cast<std::size_t>(node_id)];
    if (node.is_leaf()) {
      out +=
          fmt::format("({} {})", node.label, tree.tokens[static_cast<std::size_t>(node.position)]);
      stack.pop_back();
      continue;
    }
    if (done == 0) out += fmt::format("({} ", node.label);
    if (done == 1) out += ' ';
    if (done == 2) {
      out += ')';
      stack.pop_back();
      continue;
    }
    const int child = done == 0 ? node.left : node.right;
    ++done;
    stack.emplace_back(child, 0);
  }
}

// ---- WikiNER ---------------------------------------------------------------------------------

TaggedSentence parse_sentence(const Line& line, Vocabulary& words, Vocabulary& tags, bool grow) {
  const std::string_view s = line.text();
  TaggedSentence sentence;
  for (std::size_t pos = skip_spaces(s, 0); pos < s.size();) {
    const std::size_t end = token_end(s, pos, /*parens=*/false);
    const std::string_view token = s.substr(pos, end - pos);
    const std::size_t bar = token.rfind('|');
    if (bar == std::string_view::npos) line.fail(pos, "a token word|TAG", quote(token));
    if (bar == 0) line.fail(pos, "a word before '|'", quote(token));
    if (bar + 1 == token.size()) line.fail(pos + bar + 1, "a tag after the last '|'", quote(token));
    const std::string_view word = token.substr(0, bar);
    const std::string_view tag = token.substr(bar + 1);
    sentence.words.push_back(entry_id(words, grow, line, pos, word, "word"));
    sentence.tags.push_back(entry_id(tags, grow, line, pos + bar + 1, tag, "tag"));
    sentence.tokens.emplace_back(word);
    pos = skip_spaces(s, end);
  }
  return sentence;
}

// ---- UTF-8 -----------------------------------------------------------------------------------

// Length of the well-formed UTF-8 sequence at s[pos], or 1 if there is none (RFC 3629 table 3-7:
// no overlong forms, no surrogates, nothing past U+10FFFF).
std::size_t utf8_length(std::string_view s, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[pos + i]); };
  const unsigned char b0 = byte(0);
  std::size_t n = 1;
  unsigned char lo = 0x80, hi = 0xbf;  // range of the second byte
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return 1;
  }
  if (pos + n > s.size()) return 1;
  if (byte(1) < lo || byte(1) > hi) return 1;
  for (std::size_t i = 2; i < n; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 1;
  return n;
}

}  // namespace

// ---- Vocabulary ------------------------------------------------------------------------------

Vocabulary::Vocabulary(Unknown unknown) : unknown_(unknown) {
  if (unknown_ == Unknown::MapToUnk) {
    entries_.emplace_back(kUnkToken);
    counts_.push_back(0);
    ids_.emplace(kUnkToken, kUnk);
  }
}

int Vocabulary::add(std::string_view entry, std::int64_t times) {
  PRNN_EXPECT(!entry.empty(), "Vocabulary::add: expected a non-empty entry, got ''");
  PRNN_EXPECT(times >= 1, "Vocabulary::add: expected times >= 1, got {}", times);
  PRNN_EXPECT(!frozen_, "Vocabulary::add: cannot add {} to a frozen vocabulary", quote(entry));
  if (const auto it = ids_.find(entry); it != ids_.end()) {
    counts_[static_cast<std::size_t>(it->second)] += times;
    return it->second;
  }
  const int id = size();
  entries_.emplace_back(entry);
  counts_.push_back(times);
  ids_.emplace(entries_.back(), id);
  return id;
}

std::optional<int> Vocabulary::find(std::string_view entry) const {
  if (const auto it = ids_.find(entry); it != ids_.end()) return it->second;
  return std::nullopt;
}

int Vocabulary::lookup(std::string_view entry) const {
  if (const auto id = find(entry)) return *id;
  PRNN_EXPECT(has_unk(), "Vocabulary::lookup: expected a known entry, got {} (no <unk> here)",
              quote(entry));
  return kUnk;
}

const std::string& Vocabulary::entry(int id) const {
  PRNN_EXPECT(id >= 0 && id < size(), "Vocabulary::entry: expected an id in 0..{}, got {}",
              size() - 1, id);
  return entries_[static_cast<std::size_t>(id)];
}

std::int64_t Vocabulary::count(int id) const {
  PRNN_EXPECT(id >= 0 && id < size(), "Vocabulary::count: expected an id in 0..{}, got {}",
              size() - 1, id);
  return counts_[static_cast<std::size_t>(id)];
}

Vocabulary Vocabulary::pruned(std::int64_t min_count) const {
  Vocabulary out(unknown_);
  if (has_unk()) out.counts_[kUnk] = counts_[kUnk];
  for (int id = has_unk() ? 1 : 0; id < size(); ++id) {
    const auto i = static_cast<std::size_t>(id);
    if (counts_[i] >= min_count)
      out.add(entries_[i], counts_[i]);
    else if (has_unk())
      out.counts_[kUnk] += counts_[i];
  }
  out.freeze();
  return out;
}

// ---- Tree ------------------------------------------------------------------------------------

std::vector<int> Tree::word_ids() const {
  std::vector<int> ids(tokens.size(), -1);
  for (const TreeNode& n : nodes)
    if (n.is_leaf()) ids[static_cast<std::size_t>(n.position)] = n.word;
  return ids;
}

void Tree::set_word_ids(const Vocabulary& words) {
  for (TreeNode& n : nodes)
    if (n.is_leaf()) n.word = words.lookup(tokens[static_cast<std::size_t>(n.position)]);
}

std::string Tree::to_string() const {
  std::string out;
  if (root >= 0) write_tree(*this, root, out);
  return out;
}

std::vector<Tree> read_sst(std::istream& in, const std::string& source, Vocabulary& words,
                           bool grow) {
  if (grow) expect_growable(words, source, "word");
  std::vector<Tree> trees;
  for_each_line(in, source,
                [&](const Line& line) { trees.push_back(parse_tree(line, words, grow)); });
  return trees;
}

std::vector<Tree> read_sst(const std::string& path, Vocabulary& words, bool grow) {
  std::ifstream in = open_input(path);
  return read_sst(in, path, words, grow);
}

// ---- TaggedSentence --------------------------------------------------------------------------

void TaggedSentence::set_word_ids(const Vocabulary& vocabulary) {
  words.resize(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) words[i] = vocabulary.lookup(tokens[i]);
}

std::string TaggedSentence::to_string(const Vocabulary& tag_vocabulary) const {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += ' ';
    out += tokens[i];
    out += '|';
    out += tag_vocabulary.entry(tags[i]);
  }
  return out;
}

std::vector<TaggedSentence> read_wikiner(std::istream& in, const std::string& source,
                                         Vocabulary& words, Vocabulary& tags, bool grow) {
  if (grow) {
    expect_growable(words, source, "word");
    expect_growable(tags, source, "tag");
  }
  std::vector<TaggedSentence> sentences;
  for_each_line(in, source, [&](const Line& line) {
    sentences.push_back(parse_sentence(line, words, tags, grow));
  });
  return sentences;
}

std::vector<TaggedSentence> read_wikiner(const std::string& path, Vocabulary& words,
                                         Vocabulary& tags, bool grow) {
  std::ifstream in = open_input(path);
  return read_wikiner(in, path, words, tags, grow);
}

// ---- Characters ------------------------------------------------------------------------------

std::vector<std::string> utf8_chars(std::string_view word) {
  std::vector<std::string> chars;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t n = utf8_length(word, pos);
    chars.emplace_back(word.substr(pos, n));
    pos += n;
  }
  return chars;
}

Vocabulary char_vocabulary(const Vocabulary& words) {
  Vocabulary chars;
  for (int id = words.has_unk() ? 1 : 0; id < words.size(); ++id) {
    const std::int64_t times = std::max<std::int64_t>(words.count(id), 1);
    for (const std::string& c : utf8_chars(words.entry(id))) chars.add(c, times);
  }
  chars.freeze();
  return chars;
}

std::vector<int> char_ids(const Vocabulary& chars, std::string_view word) {
  std::vector<int> ids;
  for (const std::string& c : utf8_chars(word)) ids.push_back(chars.lookup(c));
  return ids;
}

}  // namespace prnn::data
