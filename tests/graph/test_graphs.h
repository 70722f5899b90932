// Graphs for the executor-equivalence tests (CPU autobatch, GPU).
// Random graphs: the fuzz generator's ops,
// valid calls only, replicated R times with the same structure and different values (so batches
// form), over shared parameter nodes and one lookup table; the loss sums 1ᵀ·last·1 per replica.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "prnn/data.h"
#include "prnn/error.h"
#include "prnn/graph.h"
#include "support/random.h"

namespace prnn::graph {

inline constexpr int kMaxOpsPerReplica = 12;
inline constexpr std::int64_t kMaxSide = 4;
inline constexpr std::int64_t kMaxReplicas = 4;

// The parameters every random graph reads.
struct RandomGraphModel {
  explicit RandomGraphModel(std::uint64_t seed)
      : m(seed),
        w(m.add_parameters({3, 2})),
        v(m.add_parameters({2})),
        sq(m.add_parameters({4, 4})),
        emb(m.add_lookup_parameters(5, {2})) {}
  Model m;
  Parameter w, v, sq;
  LookupParameter emb;
};

// Builds one random graph into g; returns its 1x1 loss.
inline Expr random_graph(Graph& g, RandomGraphModel& rm, test::Rng& rng) {
  using test::sz;
  const Parameter w = rm.w, v = rm.v, sq = rm.sq;
  const LookupParameter emb = rm.emb;
  const std::vector<Expr> params = {parameter(g, w), parameter(g, v), parameter(g, sq)};
  const std::uint64_t structure_seed = rng.gen()();
  std::vector<Expr> losses;
  for (std::int64_t r = rng.integer(1, kMaxReplicas); r > 0; --r) {
    std::mt19937_64 structure(structure_seed);  // same draws in every replica
    const auto integer = [&](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(structure);
    };
    const auto side = [&] { return integer(1, kMaxSide); };
    std::vector<Expr> pool = params;
    for (std::int64_t k = integer(1, 3); k > 0; --k) {
      const Dim d{side(), side()};
      pool.push_back(input(g, d, rng.uniform(sz(d.size()))));
    }
    const auto pick = [&] {
      return pool[sz(integer(0, static_cast<std::int64_t>(pool.size()) - 1))];
    };
    const auto picks = [&](std::int64_t n) {
      std::vector<Expr> xs;
      for (std::int64_t i = 0; i < n; ++i) xs.push_back(pick());
      return xs;
    };
    const std::vector<std::function<Expr()>> ops = {
        [&] {
          const Dim d{side(), side()};
          return input(g, d, rng.uniform(sz(d.size())));
        },
        [&] { return lookup(g, emb, integer(0, 4)); },
        [&] { return affine_transform(picks(integer(1, 5))); },
        [&] { return pick() * pick(); },
        [&] { return pick() + pick(); },
        [&] { return pick() - pick(); },
        [&] { return cmult(pick(), pick()); },
        [&] { return concatenate(picks(integer(1, 3))); },
        [&] {
          const auto begin = integer(0, kMaxSide - 1);
          return pick_range(pick(), begin, begin + integer(1, 3));
        },
        [&] { return tanh(pick()); },
        [&] { return logistic(pick()); },
        [&] { return relu(pick()); },
        [&] { return log_softmax(pick()); },
        [&] { return pick_neg_log_softmax(pick(), integer(0, kMaxSide - 1)); },
        [&] { return sum(picks(integer(1, 3))); },
        [&] { return dropout(pick(), static_cast<double>(integer(0, 9)) / 10.0); },
    };
    for (std::int64_t k = integer(1, kMaxOpsPerReplica); k > 0; --k) {
      try {
        pool.push_back(ops[sz(integer(0, static_cast<std::int64_t>(ops.size()) - 1))]());
      } catch (const InvalidArgument&) {
        // shapes drawn to be often invalid; the graph is unchanged, keep going
      }
    }
    // 1ᵀ last 1
    const Expr last = pool.back();
    const Dim d = last.dim();
    losses.push_back(input(g, Dim{1, d.rows}, std::vector<double>(sz(d.rows), 1.0)) * last *
                     input(g, Dim{d.cols}, std::vector<double>(sz(d.cols), 1.0)));
  }
  return sum(losses);
}

// Tree-LSTM over the SST trees of tests/data/sst_dev_200.txt (needs PRNN_TEST_DATA_DIR).
inline constexpr std::int64_t kEmbed = 8, kHidden = 6;

class TreeFixture {
 public:
  explicit TreeFixture(std::uint64_t seed) : m(seed) {
    trees = data::read_sst(std::string(PRNN_TEST_DATA_DIR) + "/sst_dev_200.txt", words, true);
    emb = m.add_lookup_parameters(words.size(), {kEmbed});
    tree = std::make_unique<TreeLstmBuilder>(m, kEmbed, kHidden);
    out_w = m.add_parameters({data::Tree::kLabels, kHidden});
    out_b = m.add_parameters({data::Tree::kLabels});
  }

  // Trees [first, first + count) in one graph; loss = Σ over all their nodes.
  Expr build(Graph& g, std::size_t first, std::size_t count) {
    tree->new_graph(g);
    const Expr w = parameter(g, out_w), b = parameter(g, out_b);
    std::vector<Expr> losses;
    for (std::size_t t = first; t < first + count; ++t) {
      const data::Tree& tr = trees[t];
      std::vector<TreeLstmBuilder::State> state(tr.nodes.size());
      for (std::size_t i = 0; i < tr.nodes.size(); ++i) {
        const data::TreeNode& node = tr.nodes[i];
        state[i] = node.is_leaf()
                       ? tree->leaf(lookup(g, emb, node.word))
                       : tree->compose(state[test::sz(node.left)], state[test::sz(node.right)]);
        losses.push_back(pick_neg_log_softmax(affine_transform({b, w, state[i].h}), node.label));
      }
    }
    return sum(losses);
  }

  Model m;
  data::Vocabulary words;
  std::vector<data::Tree> trees;
  LookupParameter emb;
  std::unique_ptr<TreeLstmBuilder> tree;
  Parameter out_w, out_b;
};

// `count` random graphs over one RandomGraphModel (half of them with dropout on), each given to
// check(g, loss, model); stops at the first failure. The seed is printed under `label`.
template <class Check>
void check_random_graphs(const char* label, int count, const Check& check) {
  test::Rng rng;
  std::printf("%s: PRNN_TEST_SEED=%llu\n", label, static_cast<unsigned long long>(rng.seed()));
  RandomGraphModel rm(rng.gen()());
  for (int graph_index = 0; graph_index < count; ++graph_index) {
    SCOPED_TRACE("graph " + std::to_string(graph_index));
    Graph g(rng.gen()(), rng.integer(0, 1) == 1);
    const Expr loss = random_graph(g, rm, rng);
    check(g, loss, rm.m);
    if (::testing::Test::HasFailure()) return;
  }
}

// A BiLSTM tagger graph over 6 sequences of 1..9 random words with dropout 0.25 on every embedding
// (so dropout batches form), and optionally on every BiLSTM output, summing the per-word tag
// losses. The Model lives in the fixture.
struct BiLstmDropoutFixture {
  static constexpr std::int64_t kVocab = 20, kInput = 5, kHid = 4, kTags = 3, kSequences = 6;
  explicit BiLstmDropoutFixture(test::Rng& rng)
      : m(rng.gen()()),
        emb(m.add_lookup_parameters(kVocab, {kInput})),
        bilstm(m, kInput, kHid),
        out_w(m.add_parameters({kTags, 2 * kHid})),
        out_b(m.add_parameters({kTags})) {}
  // Builds the losses into g (made with a seed and dropout on); returns their sum. With
  // output_dropout > 0 each BiLSTM output passes through dropout of that rate first.
  Expr build(Graph& g, test::Rng& rng, double output_dropout = 0.0) {
    bilstm.new_graph(g);
    const Expr w = parameter(g, out_w), b = parameter(g, out_b);
    std::vector<Expr> losses;
    for (std::int64_t s = 0; s < kSequences; ++s) {
      std::vector<Expr> xs;
      for (std::int64_t t = rng.integer(1, 9); t > 0; --t)
        xs.push_back(dropout(lookup(g, emb, rng.integer(0, kVocab - 1)), 0.25));
      for (const Expr& h : bilstm.transduce(xs)) {
        const Expr out = output_dropout > 0.0 ? dropout(h, output_dropout) : h;
        losses.push_back(
            pick_neg_log_softmax(affine_transform({b, w, out}), rng.integer(0, kTags - 1)));
      }
    }
    return sum(losses);
  }
  Model m;
  LookupParameter emb;
  BiLstmBuilder bilstm;
  Parameter out_w, out_b;
};

// A model's accumulated gradients: dense parameters, then every lookup table's rows and the rows
// it marks touched.
struct ModelGradients {
  std::vector<std::vector<double>> dense;
  std::vector<std::vector<double>> rows;           // per table, all rows
  std::vector<std::vector<std::int64_t>> touched;  // per table
};

// got == want within rel times want's L2 norm plus an absolute floor abs (for vectors that cancel
// to (nearly) zero); every element of got finite.
inline void expect_near_norm(const std::vector<double>& got, const std::vector<double>& want,
                             const std::string& what, double rel, double abs) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  EXPECT_LE(std::sqrt(num), rel * std::sqrt(den) + abs) << what;
}

// The model's gradients (after copying the device copy back when there is one), then clears them.
inline ModelGradients take_gradients(Model& m) {
  m.copy_to_host();
  ModelGradients r;
  for (std::size_t i = 0; i < m.parameter_count(); ++i) {
    const auto gr = m.parameter(i).gradients();
    r.dense.emplace_back(gr.begin(), gr.end());
  }
  for (std::size_t i = 0; i < m.lookup_count(); ++i) {
    const LookupParameter lp = m.lookup_parameter(i);
    std::vector<double> all;
    for (std::int64_t row = 0; row < lp.size(); ++row) {
      const auto gr = lp.gradients(row);
      all.insert(all.end(), gr.begin(), gr.end());
    }
    r.rows.push_back(std::move(all));
    r.touched.push_back(lp.touched_rows());
  }
  m.zero_gradients();
  return r;
}

// Two runs' model gradients: every dense parameter and lookup table within expect_near_norm(rel,
// abs), and exactly the same touched rows.
inline void expect_gradients_close(const ModelGradients& got, const ModelGradients& want, double rel,
                                   double abs) {
  ASSERT_EQ(got.dense.size(), want.dense.size());
  ASSERT_EQ(got.rows.size(), want.rows.size());
  for (std::size_t i = 0; i < want.dense.size(); ++i)
    expect_near_norm(got.dense[i], want.dense[i], "parameter " + std::to_string(i), rel, abs);
  for (std::size_t i = 0; i < want.rows.size(); ++i) {
    expect_near_norm(got.rows[i], want.rows[i], "lookup table " + std::to_string(i), rel, abs);
    EXPECT_EQ(got.touched[i], want.touched[i]) << "lookup table " << i;
  }
}

}  // namespace prnn::graph
