// Dynamic graphs on the CPU executor (prnn/graph.h): a finite-difference gradient check of every
// op in fp64 over random inputs and odd sizes, fp32 == fp64, parameter and lookup gradients equal
// to the gradient of the same values fed as inputs, hand-computed cases, shape errors at build
// time, executor misuse, save/load and corrupted files, the trainers' update rules.
#include "prnn/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/ops.h"
#include "prnn/error.h"
#include "support/expect.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace prnn::graph {
namespace {

using test::expect_invalid;
using test::Rng;
using test::sz;

// Σ_ij w_ij · out_ij as a graph expression: 1ᵀ (w ⊙ out) 1, so backward seeds dL/dout = w.
Expr project(Graph& g, Expr out, const std::vector<double>& w) {
  const Dim d = out.dim();
  const Expr ones_left = input(g, Dim{1, d.rows}, std::vector<double>(sz(d.rows), 1.0));
  const Expr ones_right = input(g, Dim{d.cols}, std::vector<double>(sz(d.cols), 1.0));
  return ones_left * cmult(out, input(g, d, w)) * ones_right;
}

// ---------------------------------------------------------------------------------------------
// Per-op harness: the leaves are inputs of the given shapes, `build` applies the op under test.

struct OpCase {
  const char* name;
  std::vector<Dim> inputs;
  std::function<Expr(Graph&, const std::vector<Expr>&)> build;
  double min_magnitude = 0.0;  // inputs kept this far from 0 (relu's kink)
};

void PrintTo(const OpCase& c, std::ostream* os) {
  *os << c.name;
}
std::string case_name(const ::testing::TestParamInfo<OpCase>& p) {
  return p.param.name;
}

std::vector<OpCase> op_cases() {
  using X = const std::vector<Expr>&;
  return {
      {"input", {{5, 3}}, [](Graph&, X x) { return x[0]; }},
      {"affine_transform",
       {{5, 3}, {5, 7}, {7, 3}, {5, 2}, {2, 3}},
       [](Graph&, X x) {
         return affine_transform({x[0], x[1], x[2], x[3], x[4]});
       }},
      {"affine_transform_bias_only", {{3}}, [](Graph&, X x) { return affine_transform({x[0]}); }},
      {"matmul", {{5, 7}, {7, 3}}, [](Graph&, X x) { return x[0] * x[1]; }},
      {"matvec", {{1, 7}, {7}}, [](Graph&, X x) { return x[0] * x[1]; }},
      {"add", {{5, 3}, {5, 3}}, [](Graph&, X x) { return x[0] + x[1]; }},
      {"sub", {{5, 3}, {5, 3}}, [](Graph&, X x) { return x[0] - x[1]; }},
      {"cmult", {{5, 3}, {5, 3}}, [](Graph&, X x) { return cmult(x[0], x[1]); }},
      {"cmult_same_argument", {{7}}, [](Graph&, X x) { return cmult(x[0], x[0]); }},
      {"concatenate",
       {{3, 2}, {1, 2}, {4, 2}},
       [](Graph&, X x) {
         return concatenate({x[0], x[1], x[2]});
       }},
      {"pick_range", {{7, 3}}, [](Graph&, X x) { return pick_range(x[0], 2, 5); }},
      {"tanh", {{5, 3}}, [](Graph&, X x) { return tanh(x[0]); }},
      {"logistic", {{5, 3}}, [](Graph&, X x) { return logistic(x[0]); }},
      {"relu", {{5, 3}}, [](Graph&, X x) { return relu(x[0]); }, 0.05},
      {"log_softmax", {{7}}, [](Graph&, X x) { return log_softmax(x[0]); }},
      {"pick_neg_log_softmax", {{7}}, [](Graph&, X x) { return pick_neg_log_softmax(x[0], 3); }},
      {"sum",
       {{5, 3}, {5, 3}, {5, 3}},
       [](Graph&, X x) {
         return sum({x[0], x[1], x[2]});
       }},
      {"dropout", {{9, 3}}, [](Graph&, X x) { return dropout(x[0], 0.4); }},
      {"dropout_p0", {{5}}, [](Graph&, X x) { return dropout(x[0], 0.0); }},
      {"composite",
       {{4, 6}, {6}, {4}},
       [](Graph&, X x) { return pick_neg_log_softmax(tanh(x[0] * x[1]) + logistic(x[2]), 1); }},
  };
}

class GraphOp : public ::testing::TestWithParam<OpCase> {
 protected:
  // Fresh random leaf values (flattened per leaf) and a projection of the output.
  void SetUp() override {
    const OpCase& c = GetParam();
    for (const Dim& d : c.inputs) {
      auto v = rng_.uniform(sz(d.size()), -1.5, 1.5);
      for (auto& e : v)
        if (std::abs(e) < c.min_magnitude) e = e < 0 ? -c.min_magnitude : c.min_magnitude;
      leaves_.push_back(v);
    }
  }

  // Builds the case on a fresh graph: returns {out, loss}.
  std::pair<Expr, Expr> build(Graph& g, std::vector<Expr>* xs = nullptr) {
    std::vector<Expr> in;
    for (std::size_t i = 0; i < leaves_.size(); ++i)
      in.push_back(input(g, GetParam().inputs[i], leaves_[i]));
    const Expr out = GetParam().build(g, in);
    if (proj_.empty()) proj_ = rng_.uniform(sz(out.dim().size()));
    if (xs != nullptr) *xs = in;
    return {out, project(g, out, proj_)};
  }

  Rng rng_;
  std::vector<std::vector<double>> leaves_;
  std::vector<double> proj_;
};

TEST_P(GraphOp, GradientMatchesFiniteDifferencesInDouble) {
  const std::uint64_t kGraphSeed = rng_.gen()();
  std::vector<std::vector<double>> analytic;
  {
    Graph g(kGraphSeed);
    std::vector<Expr> xs;
    const auto [out, loss] = build(g, &xs);
    CpuExecutor ex(Precision::F64);
    ex.forward(g, loss);
    ex.backward(g, loss);
    for (const Expr& x : xs) analytic.push_back(ex.gradient(x));
    // The graph loss is the projection of the output.
    EXPECT_NEAR(ex.scalar(loss), test::project(ex.value(out), proj_), 1e-12);
  }
  const auto loss_fn = [&] {
    Graph g(kGraphSeed);
    const Expr loss = build(g).second;
    CpuExecutor ex(Precision::F64);
    ex.forward(g, loss);
    return ex.scalar(loss);
  };
  // Tolerance: gradcheck.h defaults (rtol 1e-6, atol 1e-8, ε 1e-6), all ops smooth near the
  // sampled points (relu's inputs are kept ≥ 0.05 from its kink).
  for (std::size_t i = 0; i < leaves_.size(); ++i)
    EXPECT_TRUE(test::check_gradient(std::string(GetParam().name) + " d/dx" + std::to_string(i),
                                     leaves_[i], analytic[i], loss_fn, rng_.gen()));
}

TEST_P(GraphOp, Float32MatchesFloat64) {
  const std::uint64_t kGraphSeed = rng_.gen()();
  std::vector<std::vector<double>> out[2];
  const Precision precisions[2] = {Precision::F32, Precision::F64};
  for (int k = 0; k < 2; ++k) {
    Graph g(kGraphSeed);
    std::vector<Expr> xs;
    const auto [y, loss] = build(g, &xs);
    CpuExecutor ex(precisions[k]);
    ex.forward(g, loss);
    ex.backward(g, loss);
    out[k].push_back(ex.value(y));
    for (const Expr& x : xs) out[k].push_back(ex.gradient(x));
  }
  // fp32 arithmetic over O(10) terms of O(1) values: relative error well under 1e-5.
  for (std::size_t i = 0; i < out[0].size(); ++i)
    EXPECT_LE(test::rel_error(out[0][i], out[1][i]), 1e-5) << "tensor " << i;
}

INSTANTIATE_TEST_SUITE_P(Ops, GraphOp, ::testing::ValuesIn(op_cases()), case_name);

// The registry's element-wise flag (OpInfo::elementwise: what a fused group may hold) holds for the
// op's reference: every argument has the result's shape, and changing element j of any argument
// changes no result element but j. The pointwise ops are exactly the element-wise ones less
// dropout. Cases whose last op is not element-wise have nothing to check here.
TEST_P(GraphOp, ElementwiseFlagMatchesTheReference) {
  const std::uint64_t kGraphSeed = rng_.gen()();
  const auto evaluate = [&](std::vector<Expr>* xs, Op* op) {
    Graph g(kGraphSeed);
    const Expr out = build(g, xs).first;
    *op = g.node(out.id).op;
    CpuExecutor ex(Precision::F64);
    ex.forward(g, out);
    return ex.value(out);
  };
  std::vector<Expr> xs;
  Op op = Op::Input;
  const std::vector<double> y = evaluate(&xs, &op);
  const OpInfo& info = op_info(op);
  EXPECT_EQ(info.pointwise, info.elementwise && op != Op::Dropout) << to_string(op);
  if (!info.elementwise) return;
  for (std::size_t a = 0; a < leaves_.size(); ++a) {
    ASSERT_EQ(leaves_[a].size(), y.size()) << GetParam().name << " argument " << a;
    for (std::size_t j = 0; j < y.size(); ++j) {
      const double saved = leaves_[a][j];
      leaves_[a][j] += 0.25;
      Op same = Op::Input;
      const std::vector<double> y2 = evaluate(nullptr, &same);
      leaves_[a][j] = saved;
      for (std::size_t i = 0; i < y.size(); ++i) {
        if (i == j) continue;
        EXPECT_EQ(y2[i], y[i]) << GetParam().name << ": x" << a << "[" << j << "] moved y[" << i
                               << "]";
      }
    }
  }
}

// Every element-wise op of the registry has a case above (the flag test is not vacuous).
TEST(GraphOpRegistry, EveryElementwiseOpHasACase) {
  std::set<Op> last_ops;
  for (const OpCase& c : op_cases()) {
    Graph g;
    std::vector<Expr> in;
    for (const Dim& d : c.inputs) in.push_back(input(g, d, std::vector<double>(sz(d.size()), 0.5)));
    last_ops.insert(g.node(c.build(g, in).id).op);
  }
  for (int i = 0; i < kOpCount; ++i) {
    const auto op = static_cast<Op>(i);
    if (!op_info(op).elementwise) continue;
    EXPECT_TRUE(last_ops.count(op)) << to_string(op);
  }
}

// Every op of the registry has a gradient check: the harness above or the leaf tests below.
TEST(GraphOpRegistry, EveryOpIsCovered) {
  std::set<Op> covered = {Op::Parameter, Op::Lookup};  // ParameterAndLookupGradients
  for (const OpCase& c : op_cases()) {
    Graph g;
    std::vector<Expr> in;
    for (const Dim& d : c.inputs) in.push_back(input(g, d, std::vector<double>(sz(d.size()), 0.5)));
    c.build(g, in);
    for (const Node& n : g.nodes()) covered.insert(n.op);
  }
  for (int i = 0; i < kOpCount; ++i)
    EXPECT_TRUE(covered.count(static_cast<Op>(i))) << to_string(static_cast<Op>(i));
  EXPECT_STREQ(to_string(Op::PickNegLogSoftmax), "pick_neg_log_softmax");
  EXPECT_EQ(arity(Op::Sum), kVariadic);
  EXPECT_EQ(arity(Op::MatMul), 2);
}

// Parameter and lookup leaves: their gradients (accumulated into the fp32 Model) equal the
// gradients of the same values fed through input leaves, and both accumulate over backward calls.
TEST(GraphLeaves, ParameterAndLookupGradients) {
  Rng rng;
  Model m(rng.gen()());
  const Parameter w = m.add_parameters({5, 7});
  const LookupParameter emb = m.add_lookup_parameters(4, {7});
  const auto w_values = std::vector<double>(w.values().begin(), w.values().end());
  const auto row = [&](std::int64_t r) {
    return std::vector<double>(emb.values(r).begin(), emb.values(r).end());
  };

  // loss = nll(W·(e2 + e2 ⊙ e0), 3)
  const auto loss_of = [](Expr W, Expr e2, Expr e0) {
    return pick_neg_log_softmax(W * (e2 + cmult(e2, e0)), 3);
  };
  Graph gp;
  const Expr lp = loss_of(parameter(gp, w), lookup(gp, emb, 2), lookup(gp, emb, 0));
  Graph gi;
  const Expr wi = input(gi, {5, 7}, w_values), e2 = input(gi, {7}, row(2)),
             e0 = input(gi, {7}, row(0));
  const Expr li = loss_of(wi, e2, e0);

  CpuExecutor ex(Precision::F64), ex_in(Precision::F64);
  ex_in.forward(gi, li);
  ex_in.backward(gi, li);
  for (int round = 1; round <= 2; ++round) {
    ex.forward(gp, lp);
    ex.backward(gp, lp);
    EXPECT_NEAR(ex.scalar(lp), ex_in.scalar(li), 1e-12);
    const auto scaled = [&](std::vector<double> v) {
      for (auto& e : v) e *= round;
      return v;
    };
    // fp32 accumulation of fp64 gradients: rounding only.
    EXPECT_LE(test::rel_error(w.gradients().data(), scaled(ex_in.gradient(wi)).data(), 35), 1e-6);
    EXPECT_LE(test::rel_error(emb.gradients(2).data(), scaled(ex_in.gradient(e2)).data(), 7), 1e-6);
    EXPECT_LE(test::rel_error(emb.gradients(0).data(), scaled(ex_in.gradient(e0)).data(), 7), 1e-6);
  }
  EXPECT_EQ(emb.touched_rows(), (std::vector<std::int64_t>{0, 2}));
  for (float v : emb.gradients(1)) EXPECT_EQ(v, 0.0f);
  m.zero_gradients();
  EXPECT_TRUE(emb.touched_rows().empty());
  for (float v : w.gradients()) EXPECT_EQ(v, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Hand-computed cases

// b = (0.1, -0.2), W = [[1, -1], [0.5, 2]], x = (1, 2):  y = (1 - 2 + 0.1, 0.5 + 4 - 0.2).
TEST(GraphByHand, AffineTransform) {
  Graph g;
  const Expr y = affine_transform({input(g, {2}, std::vector<double>{0.1, -0.2}),
                                   input(g, {2, 2}, std::vector<double>{1, -1, 0.5, 2}),
                                   input(g, {2}, std::vector<double>{1, 2})});
  CpuExecutor ex(Precision::F64);
  ex.forward(g, y);
  EXPECT_NEAR(ex.value(y)[0], -0.9, 1e-12);
  EXPECT_NEAR(ex.value(y)[1], 4.3, 1e-12);
}

// nll of logits (0, 0) at label 0 is log 2; d/dlogits = softmax - onehot = (-0.5, 0.5).
// With logits = W·x, W = 0, x = (1, 2):  dW = (softmax - onehot) xᵀ = [[-0.5, -1], [0.5, 1]].
TEST(GraphByHand, NegLogSoftmaxAndParameterGradient) {
  Model m;
  const Parameter w = m.add_parameters({2, 2}, Initializer::constant(0.0));
  Graph g;
  const Expr logits = parameter(g, w) * input(g, {2}, std::vector<double>{1, 2});
  const Expr loss = pick_neg_log_softmax(logits, 0);
  CpuExecutor ex;
  ex.forward(g, loss);
  ex.backward(g, loss);
  EXPECT_NEAR(ex.scalar(loss), std::log(2.0), 1e-6);
  EXPECT_NEAR(ex.gradient(logits)[0], -0.5, 1e-6);
  EXPECT_NEAR(ex.gradient(logits)[1], 0.5, 1e-6);
  const std::vector<float> want = {-0.5f, -1.0f, 0.5f, 1.0f};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(w.gradients()[i], want[i], 1e-6);
}

// tanh(0) = 0, σ(0) = 1/2, relu(-1) = 0; concatenate stacks rows; pick_range takes rows back.
TEST(GraphByHand, ElementwiseConcatenatePickRange) {
  Graph g;
  const Expr x = input(g, {3}, std::vector<double>{0, -1, 2});
  const Expr cat = concatenate({tanh(x), logistic(x), relu(x)});
  const Expr mid = pick_range(cat, 3, 6);
  CpuExecutor ex(Precision::F64);
  ex.forward(g, mid);
  const auto v = ex.value(cat);
  ASSERT_EQ(v.size(), 9u);
  EXPECT_EQ(cat.dim(), Dim(9, 1));
  EXPECT_NEAR(v[0], 0.0, 1e-15);
  EXPECT_NEAR(v[1], std::tanh(-1.0), 1e-15);
  EXPECT_NEAR(v[3], 0.5, 1e-15);
  EXPECT_NEAR(v[5], 1 / (1 + std::exp(-2.0)), 1e-15);
  EXPECT_EQ(v[7], 0.0);
  EXPECT_EQ(v[8], 2.0);
  EXPECT_EQ(ex.value(mid), std::vector<double>(v.begin() + 3, v.begin() + 6));
}

// log_softmax(x) sums to 1 after exp; sum adds; sub subtracts.
TEST(GraphByHand, LogSoftmaxSumSub) {
  Graph g;
  const Expr a = input(g, {3}, std::vector<double>{1, 2, 3});
  const Expr b = input(g, {3}, std::vector<double>{0.5, 0.5, 0.5});
  const Expr ls = log_softmax(a);
  const Expr s = sum({a, b, b}) - b;
  CpuExecutor ex(Precision::F64);
  ex.forward(g, s);
  double total = 0;
  for (double v : ex.value(ls)) total += std::exp(v);
  EXPECT_NEAR(total, 1.0, 1e-14);
  EXPECT_EQ(ex.value(s), (std::vector<double>{1.5, 2.5, 3.5}));
}

// Dropout: the identity at inference and at p = 0; in training each element is 0 or x/(1-p),
// the same mask for the same graph seed, and about p of them dropped.
TEST(GraphByHand, Dropout) {
  constexpr std::int64_t kN = 4000;
  constexpr double kP = 0.3;
  const std::vector<double> ones(sz(kN), 1.0);
  const auto run = [&](std::uint64_t seed, bool training, double p) {
    Graph g(seed, training);
    const Expr y = dropout(input(g, {kN}, ones), p);
    CpuExecutor ex(Precision::F64);
    ex.forward(g, y);
    return ex.value(y);
  };
  EXPECT_EQ(run(7, false, kP), ones);
  EXPECT_EQ(run(7, true, 0.0), ones);
  const auto a = run(7, true, kP);
  EXPECT_EQ(a, run(7, true, kP));
  EXPECT_NE(a, run(8, true, kP));
  std::int64_t dropped = 0;
  for (double v : a) {
    if (v == 0.0) {
      ++dropped;
    } else {
      EXPECT_NEAR(v, 1 / (1 - kP), 1e-15);
    }
  }
  // Binomial(4000, 0.3): mean 1200, sd 29; ±150 is over 5 sd.
  EXPECT_NEAR(static_cast<double>(dropped), kP * kN, 150.0);
}

// ---------------------------------------------------------------------------------------------
// Errors when building

TEST(GraphErrors, ShapeMismatchNamesOpAndBothShapes) {
  Graph g;
  const Expr a = input(g, {3}, std::vector<double>(3, 0.0));
  const Expr b = input(g, {4}, std::vector<double>(4, 0.0));
  const Expr w = input(g, {3, 4}, std::vector<double>(12, 0.0));
  const Expr wide = input(g, {3, 2}, std::vector<double>(6, 0.0));
  expect_invalid([&] { a + b; }, {"add", "3x1", "4x1"});
  expect_invalid([&] { a - b; }, {"sub", "3x1", "4x1"});
  expect_invalid([&] { cmult(a, b); }, {"cmult", "3x1", "4x1"});
  expect_invalid([&] { sum({a, a, b}); }, {"sum", "3x1", "4x1"});
  expect_invalid([&] { w* a; }, {"matmul", "3x4", "3x1"});
  expect_invalid([&] { affine_transform({b, w, b}); }, {"affine_transform", "3x1", "4x1"});
  expect_invalid([&] { affine_transform({a, w}); }, {"affine_transform", "odd"});
  expect_invalid([&] { concatenate({a, wide}); }, {"concatenate", "3x1", "3x2"});
  expect_invalid([&] { log_softmax(wide); }, {"log_softmax", "3x2"});
  expect_invalid([&] { pick_neg_log_softmax(a, 3); }, {"pick_neg_log_softmax", "label 3", "3x1"});
  expect_invalid([&] { pick_range(a, 2, 5); }, {"pick_range", "[2, 5)", "3x1"});
  expect_invalid([&] { pick_range(a, 2, 2); }, {"pick_range", "empty"});
  expect_invalid([&] { dropout(a, 1.0); }, {"dropout", "[0, 1)"});
  expect_invalid(
      [&] {
        input(g, {2, 2}, std::vector<double>(3, 0.0));
      },
      {"input", "2x2", "4", "3"});
  expect_invalid([&] { sum({}); }, {"sum", "at least one"});
  expect_invalid([&] { tanh(Expr{}); }, {"tanh", "empty"});
  Graph other;
  const Expr c = input(other, {3}, std::vector<double>(3, 0.0));
  expect_invalid([&] { a + c; }, {"add", "different graph"});
  Model m;
  const LookupParameter emb = m.add_lookup_parameters(5, {2});
  expect_invalid([&] { lookup(g, emb, 5); }, {"lookup", "5", "[0, 5)"});
  expect_invalid([&] { parameter(g, Parameter{}); }, {"parameter", "empty"});
  // Nodes added directly go through the same rules.
  Node bad_input;
  bad_input.op = Op::Input;
  bad_input.dim = {2};
  bad_input.input_offset = 100;
  expect_invalid([&] { g.add(bad_input); }, {"input", "outside"});
  Node two_args;
  two_args.op = Op::Tanh;
  two_args.args = {0, 1};
  expect_invalid([&] { g.add(two_args); }, {"tanh", "expected 1", "got 2"});
  Node dangling;
  dangling.op = Op::Relu;
  dangling.args = {4};
  expect_invalid([&] { g.add(dangling); }, {"relu", "node 4", "does not exist"});
  // Nothing was appended by the failed calls.
  EXPECT_EQ(g.size(), 4u);
}

TEST(GraphErrors, ExecutorMisuse) {
  Graph g;
  const Expr a = input(g, {3}, std::vector<double>(3, 0.5));
  const Expr t = tanh(a);
  CpuExecutor ex;
  expect_invalid([&] { ex.value(t); }, {"value", "not computed"});
  ex.forward(g, a);
  expect_invalid([&] { ex.value(t); }, {"value", "not computed"});
  expect_invalid([&] { ex.backward(g, t); }, {"backward", "forward"});
  ex.forward(g, t);
  expect_invalid([&] { ex.backward(g, t); }, {"backward", "1x1", "3x1"});
  expect_invalid([&] { ex.gradient(t); }, {"gradient"});
  expect_invalid([&] { ex.scalar(t); }, {"scalar", "1x1"});
  Graph other;
  expect_invalid([&] { ex.forward(other, t); }, {"forward", "graph"});
}

// ---------------------------------------------------------------------------------------------
// Save / load

class ModelFile : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(path_.c_str()); }
  static void make(Model& m) {
    m.add_parameters({3, 4});
    m.add_parameters({5}, Initializer::normal(0.0, 1.0));
    m.add_lookup_parameters(6, {2}, Initializer::uniform(0.5));
  }
  std::vector<unsigned char> bytes() const {
    std::ifstream f(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
  void write(const std::vector<unsigned char>& b) const {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  // One file per test, so tests running in parallel do not share it.
  std::string path_ = ::testing::TempDir() + "prnn_graph_model_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".bin";
};

TEST_F(ModelFile, RoundTrip) {
  Model a(1), b(2);
  make(a);
  make(b);
  a.save(path_);
  ASSERT_NE(std::vector<float>(a.parameter(0).values().begin(), a.parameter(0).values().end()),
            std::vector<float>(b.parameter(0).values().begin(), b.parameter(0).values().end()));
  b.parameter(1).gradients()[0] = 3.0f;
  b.load(path_);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto va = a.parameter(i).values(), vb = b.parameter(i).values();
    EXPECT_TRUE(std::equal(va.begin(), va.end(), vb.begin(), vb.end())) << "parameter " << i;
  }
  for (std::int64_t r = 0; r < 6; ++r) {
    const auto va = a.lookup_parameter(0).values(r), vb = b.lookup_parameter(0).values(r);
    EXPECT_TRUE(std::equal(va.begin(), va.end(), vb.begin(), vb.end())) << "row " << r;
  }
  EXPECT_EQ(b.parameter(1).gradients()[0], 0.0f);
}

TEST_F(ModelFile, RejectsCorruptedTruncatedAndMismatchedFiles) {
  Model a(1);
  make(a);
  a.save(path_);
  const auto good = bytes();

  Model b(2);
  make(b);
  const float before = b.parameter(0).values()[0];
  auto bad = good;
  bad[bad.size() / 2] ^= 0x10;
  write(bad);
  expect_invalid([&] { b.load(path_); }, {path_, "checksum"});
  EXPECT_EQ(b.parameter(0).values()[0], before);

  write(std::vector<unsigned char>(good.begin(), good.begin() + 20));
  expect_invalid([&] { b.load(path_); }, {path_});
  write({'n', 'o', 't', ' ', 'a', ' ', 'm', 'o', 'd', 'e', 'l', '!', '!', '!', '!', '!'});
  expect_invalid([&] { b.load(path_); }, {path_, "not a prnn"});
  expect_invalid([&] { b.load(path_ + ".missing"); }, {".missing", "cannot open"});

  write(good);
  Model transposed;
  transposed.add_parameters({4, 3});
  transposed.add_parameters({5});
  transposed.add_lookup_parameters(6, {2});
  expect_invalid([&] { transposed.load(path_); }, {path_, "parameter 0", "3x4", "4x3"});
  Model fewer;
  fewer.add_parameters({3, 4});
  expect_invalid([&] { fewer.load(path_); }, {path_, "2 parameters", "has 1"});
  Model other_table;
  other_table.add_parameters({3, 4});
  other_table.add_parameters({5});
  other_table.add_lookup_parameters(7, {2});
  expect_invalid([&] { other_table.load(path_); },
                 {path_, "lookup parameter 0", "6 rows", "7 rows"});
}

// ---------------------------------------------------------------------------------------------
// Trainers

// One SGD step is w -= lr·g on dense parameters and on touched lookup rows only; gradients are
// cleared afterwards.
TEST(GraphTrainer, SgdUpdatesDenseAndTouchedRows) {
  Model m;
  const Parameter w = m.add_parameters({2}, Initializer::constant(1.0));
  const LookupParameter emb = m.add_lookup_parameters(3, {2}, Initializer::constant(1.0));
  SimpleSgdTrainer sgd(m, 0.5);
  w.gradients()[0] = 2.0f;
  Graph g;
  const Expr loss = pick_neg_log_softmax(parameter(g, w) + lookup(g, emb, 1), 0);
  CpuExecutor ex;
  ex.forward(g, loss);
  ex.backward(g, loss);  // d/dlogits = (0.5 - 1, 0.5) at equal logits
  sgd.update();
  EXPECT_FLOAT_EQ(w.values()[0], 1.0f - 0.5f * (2.0f - 0.5f));
  EXPECT_FLOAT_EQ(w.values()[1], 1.0f - 0.5f * 0.5f);
  EXPECT_FLOAT_EQ(emb.values(1)[0], 1.0f + 0.25f);
  EXPECT_FLOAT_EQ(emb.values(0)[0], 1.0f);
  EXPECT_FLOAT_EQ(emb.values(2)[1], 1.0f);
  EXPECT_EQ(w.gradients()[0], 0.0f);
  EXPECT_TRUE(emb.touched_rows().empty());
}

// Dense lookup updates (set_sparse_updates(false), DyNet's sparse_updates_enabled = false): a
// row without a gradient still moves by its optimizer state. Two SGD steps with momentum 0.5:
// row 1 is touched in the first step only; the sparse trainer leaves it after step 1, the dense
// one moves it again by lr·μ·v in step 2. Row 0, never touched, moves in neither.
TEST(GraphTrainer, DenseLookupUpdatesMoveRowsByTheirState) {
  for (bool sparse : {true, false}) {
    SCOPED_TRACE(sparse ? "sparse" : "dense");
    Model m;
    const LookupParameter emb = m.add_lookup_parameters(2, {1}, Initializer::constant(1.0));
    SimpleSgdTrainer sgd(m, 0.5, 0.5);
    sgd.set_sparse_updates(sparse);
    EXPECT_EQ(sgd.sparse_updates(), sparse);
    Graph g;
    const Expr loss = sum({lookup(g, emb, 1)});  // dL/d row 1 = 1
    CpuExecutor ex;
    ex.forward(g, loss);
    ex.backward(g, loss);
    sgd.update();  // v = 1, w = 1 - 0.5
    EXPECT_FLOAT_EQ(emb.values(1)[0], 0.5f);
    sgd.update();  // no gradient: dense v = 0.5, w -= 0.25; sparse: untouched, unchanged
    EXPECT_FLOAT_EQ(emb.values(1)[0], sparse ? 0.5f : 0.25f);
    EXPECT_FLOAT_EQ(emb.values(0)[0], 1.0f);
  }
}

// Adam's first step moves each weight by lr·sign(g) (bias correction makes m̂/√v̂ = ±1).
TEST(GraphTrainer, AdamFirstStep) {
  Model m;
  const Parameter w = m.add_parameters({3}, Initializer::constant(0.0));
  AdamTrainer adam(m, 0.01);
  w.gradients()[0] = 4.0f;
  w.gradients()[1] = -0.001f;
  adam.update();
  EXPECT_NEAR(w.values()[0], -0.01, 1e-6);
  EXPECT_NEAR(w.values()[1], 0.01, 1e-5);
  EXPECT_EQ(w.values()[2], 0.0f);
}

}  // namespace
}  // namespace prnn::graph
