// Recurrent builders on the CPU executor: LstmBuilder against the reference LSTM
// (src/reference/rnn.h, same PyTorch-layout weights), the Tree-LSTM against Tai et al.'s
// equations written out here, BiLSTM against its two directions run separately, a gradient check
// through the cells, and small training runs whose loss must fall by a stated factor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "prnn/graph.h"
#include "prnn/rnn.h"
#include "reference/rnn.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace prnn::graph {
namespace {

using test::Rng;
using test::sz;

std::vector<double> as_double(std::span<const float> v) {
  return {v.begin(), v.end()};
}

std::vector<double> slice(const std::vector<double>& v, std::size_t begin, std::size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin),
          v.begin() + static_cast<std::ptrdiff_t>(begin + n)};
}

// ---------------------------------------------------------------------------------------------
// LSTM

// Odd sizes, a few steps, zero and given initial state: h_t of the builder == y_t of the
// reference, and the final c == cn.
TEST(LstmBuilder, MatchesReferenceLstm) {
  constexpr std::int64_t kInput = 5, kHidden = 7, kSteps = 4;
  Rng rng;
  Model m(rng.gen()());
  LstmBuilder lstm(m, kInput, kHidden);

  RnnDesc desc;
  desc.cell = Cell::LSTM;
  desc.input_size = kInput;
  desc.hidden_size = kHidden;
  std::vector<double> params(sz(rnn_param_count(desc)));
  const RnnParamOffsets off = rnn_param_offsets(desc, 0, 0);
  const auto put = [&](Parameter p, std::int64_t at) {
    std::copy(p.values().begin(), p.values().end(), params.begin() + at);
  };
  put(lstm.w_ih, off.w_ih);
  put(lstm.w_hh, off.w_hh);
  put(lstm.b_ih, off.b_ih);
  put(lstm.b_hh, off.b_hh);

  const auto x = rng.uniform(sz(kSteps * kInput));  // [T, 1, I]
  for (bool zero_state : {true, false}) {
    SCOPED_TRACE(zero_state ? "zero initial state" : "given initial state");
    const auto h0 = rng.uniform(sz(kHidden)), c0 = rng.uniform(sz(kHidden));
    std::vector<double> y(sz(kSteps * kHidden)), hn(sz(kHidden)), cn(sz(kHidden));
    reference::rnn_forward<double>(desc, kSteps, 1, x.data(), zero_state ? nullptr : h0.data(),
                                   zero_state ? nullptr : c0.data(), params.data(), y.data(),
                                   hn.data(), cn.data());
    Graph g;
    lstm.new_graph(g);
    if (zero_state) {
      lstm.start_new_sequence();
    } else {
      lstm.start_new_sequence(input(g, {kHidden}, h0), input(g, {kHidden}, c0));
    }
    std::vector<Expr> hs;
    for (std::int64_t t = 0; t < kSteps; ++t)
      hs.push_back(lstm.add_input(input(g, {kInput}, slice(x, sz(t * kInput), sz(kInput)))));
    CpuExecutor ex(Precision::F64);
    ex.forward(g, lstm.back());  // h_T is the last node
    // Same fp64 arithmetic on the same values, summed in a different order.
    for (std::int64_t t = 0; t < kSteps; ++t)
      EXPECT_LE(test::rel_error(ex.value(hs[sz(t)]), slice(y, sz(t * kHidden), sz(kHidden))), 1e-13)
          << "step " << t;
    EXPECT_LE(test::rel_error(ex.value(lstm.cell()), cn), 1e-13);
    EXPECT_LE(test::rel_error(ex.value(lstm.back()), hn), 1e-13);
  }
}

// ---------------------------------------------------------------------------------------------
// Tree-LSTM

double sigmoid(double v) {
  return 1 / (1 + std::exp(-v));
}

// y [rows] += W [rows, cols] · x [cols]
void matvec_acc(const std::vector<double>& w, const std::vector<double>& x,
                std::vector<double>& y) {
  const std::size_t cols = x.size();
  for (std::size_t r = 0; r < y.size(); ++r)
    for (std::size_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
}

struct HC {
  std::vector<double> h, c;
};

// Tai et al. 2015, binary N-ary Tree-LSTM, gates i, f_L, f_R, o, u; absent children are zero.
// TreeForget::OwnChild (DyNet's benchmark cell): z [3H] = gates i, o, u, and
// f_L = σ(Uf_L h_L + b_f), f_R = σ(Uf_R h_R + b_f).
HC tree_lstm_by_equations(const TreeLstmBuilder& b, const std::vector<double>* x, const HC* left,
                          const HC* right) {
  const std::size_t H = sz(b.hidden_dim());
  const bool own = b.forget() == TreeForget::OwnChild;
  std::vector<double> z = as_double(b.b.values());
  if (x != nullptr) matvec_acc(as_double(b.w.values()), *x, z);
  if (left != nullptr) matvec_acc(as_double(b.u_left.values()), left->h, z);
  if (right != nullptr) matvec_acc(as_double(b.u_right.values()), right->h, z);
  // Forget-gate pre-activations of one child (the rows of z, or its own product).
  auto forget = [&](const HC* child, const Parameter& uf, std::size_t row) {
    std::vector<double> f(H);
    if (child == nullptr) return f;
    if (!own) return std::vector<double>(z.begin() + row * H, z.begin() + (row + 1) * H);
    f = as_double(b.b_f.values());
    matvec_acc(as_double(uf.values()), child->h, f);
    return f;
  };
  const std::vector<double> fl = forget(left, b.uf_left, 1), fr = forget(right, b.uf_right, 2);
  const std::size_t gi = 0, go = own ? 1 : 3, gu = own ? 2 : 4;
  HC out{std::vector<double>(H), std::vector<double>(H)};
  for (std::size_t k = 0; k < H; ++k) {
    double c = sigmoid(z[gi * H + k]) * std::tanh(z[gu * H + k]);
    if (left != nullptr) c += sigmoid(fl[k]) * left->c[k];
    if (right != nullptr) c += sigmoid(fr[k]) * right->c[k];
    out.c[k] = c;
    out.h[k] = sigmoid(z[go * H + k]) * std::tanh(c);
  }
  return out;
}

// ((x0 x1) x2) with an input at the root too, for both forget-gate forms.
TEST(TreeLstmBuilder, MatchesItsEquations) {
  for (TreeForget forget : {TreeForget::AllChildren, TreeForget::OwnChild}) {
    SCOPED_TRACE(forget == TreeForget::OwnChild ? "own-child forget gates" : "all-children");
    constexpr std::int64_t kInput = 3, kHidden = 5;
    Rng rng;
    Model m(rng.gen()());
    TreeLstmBuilder tree(m, kInput, kHidden, forget);
    EXPECT_EQ(tree.forget(), forget);
    const std::int64_t gates = forget == TreeForget::OwnChild ? 3 : 5;
    EXPECT_EQ(tree.b.dim().size(), gates * kHidden);
    EXPECT_EQ(tree.uf_left.valid(), forget == TreeForget::OwnChild);
    if (forget == TreeForget::OwnChild) {
      EXPECT_EQ(tree.uf_left.dim().size(), kHidden * kHidden);
    }
    std::vector<std::vector<double>> xs;
    for (int i = 0; i < 4; ++i) xs.push_back(rng.uniform(sz(kInput)));

    const HC l0 = tree_lstm_by_equations(tree, &xs[0], nullptr, nullptr);
    const HC l1 = tree_lstm_by_equations(tree, &xs[1], nullptr, nullptr);
    const HC l2 = tree_lstm_by_equations(tree, &xs[2], nullptr, nullptr);
    const HC n01 = tree_lstm_by_equations(tree, nullptr, &l0, &l1);
    const HC root = tree_lstm_by_equations(tree, &xs[3], &n01, &l2);

    Graph g;
    tree.new_graph(g);
    std::vector<Expr> in;
    for (const auto& x : xs) in.push_back(input(g, {kInput}, x));
    const auto s01 = tree.compose(tree.leaf(in[0]), tree.leaf(in[1]));
    const auto s = tree.compose(s01, tree.leaf(in[2]), in[3]);
    CpuExecutor ex(Precision::F64);
    ex.forward(g, s.h);  // the last node
    EXPECT_LE(test::rel_error(ex.value(s01.h), n01.h), 1e-13);
    EXPECT_LE(test::rel_error(ex.value(s.h), root.h), 1e-13);
    EXPECT_LE(test::rel_error(ex.value(s.c), root.c), 1e-13);
  }
}

// ---------------------------------------------------------------------------------------------
// BiLSTM

TEST(BiLstmBuilder, ConcatenatesBothDirections) {
  constexpr std::int64_t kInput = 3, kHidden = 4, kSteps = 5;
  Rng rng;
  Model m(rng.gen()());
  BiLstmBuilder bi(m, kInput, kHidden);
  std::vector<std::vector<double>> xs;
  for (int t = 0; t < kSteps; ++t) xs.push_back(rng.uniform(sz(kInput)));

  Graph g;
  bi.new_graph(g);
  std::vector<Expr> in;
  for (const auto& x : xs) in.push_back(input(g, {kInput}, x));
  const std::vector<Expr> out = bi.transduce(in);
  ASSERT_EQ(out.size(), sz(kSteps));
  EXPECT_EQ(out[0].dim(), Dim(2 * kHidden));

  // Each direction on its own graph: forward in order, backward in reverse order.
  Graph gf, gb;
  bi.forward_lstm.new_graph(gf);
  bi.forward_lstm.start_new_sequence();
  bi.backward_lstm.new_graph(gb);
  bi.backward_lstm.start_new_sequence();
  std::vector<Expr> hf(sz(kSteps)), hb(sz(kSteps));
  for (std::int64_t t = 0; t < kSteps; ++t)
    hf[sz(t)] = bi.forward_lstm.add_input(input(gf, {kInput}, xs[sz(t)]));
  for (std::int64_t t = kSteps - 1; t >= 0; --t)
    hb[sz(t)] = bi.backward_lstm.add_input(input(gb, {kInput}, xs[sz(t)]));

  CpuExecutor ex(Precision::F64), exf(Precision::F64), exb(Precision::F64);
  ex.forward(g, out.back());
  exf.forward(gf, hf.back());
  exb.forward(gb, hb.front());
  for (std::size_t t = 0; t < sz(kSteps); ++t) {
    auto want = exf.value(hf[t]);
    const auto back = exb.value(hb[t]);
    want.insert(want.end(), back.begin(), back.end());
    EXPECT_EQ(ex.value(out[t]), want) << "step " << t;
  }
}

// ---------------------------------------------------------------------------------------------
// Gradients through the cells, with respect to their inputs (fp64, gradcheck.h tolerances).

TEST(RecurrentBuilders, GradientThroughLstmAndTreeLstm) {
  for (TreeForget forget : {TreeForget::AllChildren, TreeForget::OwnChild}) {
    SCOPED_TRACE(forget == TreeForget::OwnChild ? "own-child forget gates" : "all-children");
    constexpr std::int64_t kInput = 3, kHidden = 5, kSteps = 3;
    Rng rng;
    Model m(rng.gen()());
    LstmBuilder lstm(m, kInput, kHidden);
    TreeLstmBuilder tree(m, kHidden, kHidden, forget);
    std::vector<double> xs = rng.uniform(sz(kSteps * kInput), -2.0, 2.0);
    const std::int64_t label = rng.integer(0, kHidden - 1);

    // The LSTM reads the sequence; the Tree-LSTM combines (h_0, h_1) and h_2 into the loss.
    const auto build = [&](Graph& g, Expr* x_out) {
      const Expr x = input(g, {kSteps * kInput}, xs);
      lstm.new_graph(g);
      tree.new_graph(g);
      lstm.start_new_sequence();
      std::vector<Expr> hs;
      for (std::int64_t t = 0; t < kSteps; ++t)
        hs.push_back(lstm.add_input(pick_range(x, t * kInput, (t + 1) * kInput)));
      const auto s =
          tree.compose(tree.compose(tree.leaf(hs[0]), tree.leaf(hs[1])), tree.leaf(hs[2]));
      if (x_out != nullptr) *x_out = x;
      return pick_neg_log_softmax(s.h, label);
    };
    Graph g;
    Expr x;
    const Expr loss = build(g, &x);
    CpuExecutor ex(Precision::F64);
    ex.forward(g, loss);
    ex.backward(g, loss);
    const auto analytic = ex.gradient(x);
    const auto loss_fn = [&] {
      Graph gg;
      const Expr l = build(gg, nullptr);
      CpuExecutor e(Precision::F64);
      e.forward(gg, l);
      return e.scalar(l);
    };
    EXPECT_TRUE(test::check_gradient("d loss / d x", xs, analytic, loss_fn, rng.gen()));
  }
}

// ---------------------------------------------------------------------------------------------
// Training

// A 4-16-3 tanh MLP with plain SGD on three blobs: the mean loss over the data falls by at least
// 5x within 40 epochs (it starts near log 3). The blob centres are random in [-2, 2]^4 but at
// least 2 apart (redrawn otherwise), while a point lies within 0.6 of its centre, so the classes
// are always separable: unconstrained centres could nearly touch, and then no 5x drop exists
// (seed 7712767483049863461 drew such a set).
TEST(GraphTraining, MlpWithSgdLearnsBlobs) {
  constexpr std::int64_t kIn = 4, kHid = 16, kClasses = 3, kPerClass = 20, kEpochs = 40;
  constexpr double kMinCenterDistance = 2.0;
  Rng rng;
  std::vector<std::vector<double>> centers;
  while (static_cast<std::int64_t>(centers.size()) < kClasses) {
    std::vector<double> c = rng.uniform(sz(kIn), -2.0, 2.0);
    bool apart = true;
    for (const auto& other : centers) {
      double d2 = 0;
      for (std::size_t k = 0; k < c.size(); ++k) d2 += (c[k] - other[k]) * (c[k] - other[k]);
      apart = apart && d2 >= kMinCenterDistance * kMinCenterDistance;
    }
    if (apart) centers.push_back(std::move(c));
  }
  std::vector<std::pair<std::vector<double>, std::int64_t>> data;
  for (std::int64_t c = 0; c < kClasses; ++c)
    for (int i = 0; i < kPerClass; ++i) {
      auto x = rng.uniform(sz(kIn), -0.3, 0.3);
      for (std::size_t k = 0; k < x.size(); ++k) x[k] += centers[sz(c)][k];
      data.emplace_back(x, c);
    }

  Model m(rng.gen()());
  const Parameter w1 = m.add_parameters({kHid, kIn}), b1 = m.add_parameters({kHid});
  const Parameter w2 = m.add_parameters({kClasses, kHid}), b2 = m.add_parameters({kClasses});
  SimpleSgdTrainer sgd(m, 0.1);
  CpuExecutor ex;
  const auto epoch = [&](bool train) {
    double total = 0;
    for (const auto& [x, label] : data) {
      Graph g;
      const Expr h =
          tanh(affine_transform({parameter(g, b1), parameter(g, w1), input(g, {kIn}, x)}));
      const Expr loss =
          pick_neg_log_softmax(affine_transform({parameter(g, b2), parameter(g, w2), h}), label);
      ex.forward(g, loss);
      total += ex.scalar(loss);
      if (train) {
        ex.backward(g, loss);
        sgd.update();
      }
    }
    return total / static_cast<double>(data.size());
  };
  const double initial = epoch(false);
  for (int e = 0; e < kEpochs; ++e) epoch(true);
  const double final_loss = epoch(false);
  EXPECT_LT(final_loss, initial / 5) << "initial " << initial << ", final " << final_loss;
}

// A binary Tree-LSTM over random trees of 2-5 embedded tokens, label = the leftmost token's
// parity; SGD with momentum drives the mean loss down at least 10x in 60 epochs (it typically
// ends near 1e-3 from about 0.7).
TEST(GraphTraining, TreeLstmWithSgdLearnsLeftmostToken) {
  constexpr std::int64_t kVocab = 6, kEmbed = 4, kHidden = 6, kTrees = 16, kEpochs = 60;
  Rng rng;
  struct Tree {
    std::vector<std::int64_t> tokens;
    std::vector<int> splits;  // a random bracketing: merge position per step
    std::int64_t label;
  };
  std::vector<Tree> trees;
  for (int i = 0; i < kTrees; ++i) {
    Tree t;
    const auto n = rng.integer(2, 5);
    for (std::int64_t k = 0; k < n; ++k) t.tokens.push_back(rng.integer(0, kVocab - 1));
    for (std::int64_t k = n; k > 1; --k)
      t.splits.push_back(static_cast<int>(rng.integer(0, k - 2)));
    t.label = t.tokens[0] % 2;
    trees.push_back(t);
  }

  Model m(rng.gen()());
  const LookupParameter emb = m.add_lookup_parameters(kVocab, {kEmbed});
  TreeLstmBuilder tree_lstm(m, kEmbed, kHidden);
  const Parameter w = m.add_parameters({2, kHidden}), b = m.add_parameters({2});
  SimpleSgdTrainer sgd(m, 0.1, 0.9);
  CpuExecutor ex;
  const auto epoch = [&](bool train) {
    double total = 0;
    for (const Tree& t : trees) {
      Graph g;
      tree_lstm.new_graph(g);
      std::vector<TreeLstmBuilder::State> states;
      for (std::int64_t tok : t.tokens) states.push_back(tree_lstm.leaf(lookup(g, emb, tok)));
      for (int s : t.splits) {  // merge neighbours s and s+1
        const auto merged = tree_lstm.compose(states[sz(s)], states[sz(s) + 1]);
        states[sz(s)] = merged;
        states.erase(states.begin() + s + 1);
      }
      const Expr loss = pick_neg_log_softmax(
          affine_transform({parameter(g, b), parameter(g, w), states[0].h}), t.label);
      ex.forward(g, loss);
      total += ex.scalar(loss);
      if (train) {
        ex.backward(g, loss);
        sgd.update();
      }
    }
    return total / static_cast<double>(trees.size());
  };
  const double initial = epoch(false);
  for (int e = 0; e < kEpochs; ++e) epoch(true);
  const double final_loss = epoch(false);
  EXPECT_LT(final_loss, initial / 10) << "initial " << initial << ", final " << final_loss;
}

}  // namespace
}  // namespace prnn::graph
