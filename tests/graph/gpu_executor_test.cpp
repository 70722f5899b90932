// GPU executors: GpuExecutor (one kernel per node) and GpuAutobatchExecutor (depth and agenda,
// elementwise fusion on and off) against the fp64 CPU reference on forward values, node
// gradients, parameter gradients, lookup-row gradients and touched rows, over random graphs,
// dropouts of mixed rates in one batch, a mini-batch of SST trees through the Tree-LSTM and BiLSTM
// sequences with dropout; products at the sizes of the fused small kernels and of cuBLAS;
// destinations that share memory; fused against unfused execution; launch counts (fused groups
// and their backward fallback included); determinism run to run; the device trainers (SGD with
// momentum and weight decay, Adam) against the host trainers; the Model's device copies.
// A GPU test never skips: without a device it fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/autobatch.h"
#include "graph/test_graphs.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/graph.h"
#include "support/random.h"

namespace prnn::graph {
namespace {

using test::Rng;
using test::sz;

#define PRNN_REQUIRE_GPU() ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason()

// fp32 on the GPU against the fp64 reference: each result carries fp32 rounding of the chain of
// ops that led to it (products summed by cuBLAS in its own order), about 1e-7 relative per op over
// graphs a few dozen ops deep; 1e-4 of the vector's norm bounds it with room, the absolute floor
// covers gradients that cancel to (nearly) zero.
constexpr double kRelTol = 1e-4;
constexpr double kAbsTol = 1e-5;

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what, double rel = kRelTol, double abs = kAbsTol) {
  expect_near_norm(got, want, what, rel, abs);
}

// Every node's value and gradient up to `loss`, in loss's graph (both executors ran forward and
// backward on it).
void expect_nodes_close(Expr loss, const Executor& got, const Executor& want,
                        double rel = kRelTol, double abs = kAbsTol) {
  for (NodeId id = 0; id <= loss.id; ++id) {
    const Expr e{loss.graph, id};
    const std::string what = std::to_string(id) + " (" + to_string(loss.graph->node(id).op) + ")";
    expect_close(got.value(e), want.value(e), "value of node " + what, rel, abs);
    expect_close(got.gradient(e), want.gradient(e), "gradient of node " + what, rel, abs);
  }
}

// The GPU executors under test, by name.
std::vector<std::pair<std::string, std::function<std::unique_ptr<Executor>()>>> gpu_executors() {
  return {
      {"gpu", [] { return std::make_unique<GpuExecutor>(); }},
      {"autobatch-gpu depth",
       [] { return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Depth); }},
      {"autobatch-gpu agenda",
       [] { return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Agenda); }},
      {"autobatch-gpu depth unfused",
       [] { return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Depth, Fusion::None); }},
      {"autobatch-gpu agenda unfused",
       [] { return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Agenda, Fusion::None); }},
  };
}

// Runs g up to `loss` on the fp64 CPU reference and on every GPU executor; compares every node's
// value and gradient and the model's gradients. Once a GPU executor has used m (every call after
// the first on one Model) the reference's backward runs on a Model that is on the device: its
// gradients reach the device copy (Model::on_device), which take_gradients() reads back.
void expect_equivalent(Graph& g, Expr loss, Model& m) {
  m.copy_to_host();
  m.zero_gradients();
  CpuExecutor ref(Precision::F64);
  ref.forward(g, loss);
  ref.backward(g, loss);
  const ModelGradients want = take_gradients(m);
  for (const auto& [name, make] : gpu_executors()) {
    SCOPED_TRACE(name);
    const std::unique_ptr<Executor> ex = make();
    ex->forward(g, loss);
    ex->backward(g, loss);
    expect_nodes_close(loss, *ex, ref);
    expect_gradients_close(take_gradients(m), want, kRelTol, kAbsTol);
  }
}

// ---------------------------------------------------------------------------------------------

constexpr int kRandomGraphs = 150;

TEST(GpuExecutors, RandomGraphsMatchCpuReference) {
  PRNN_REQUIRE_GPU();
  check_random_graphs("gpu random graphs", kRandomGraphs,
                      [](Graph& g, Expr loss, Model& m) { expect_equivalent(g, loss, m); });
}

TEST(GpuExecutors, TreeLstmBatchMatchesCpuReference) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  TreeFixture f(rng.gen()());
  ASSERT_GE(f.trees.size(), 16u);
  Graph g;
  const Expr loss = f.build(g, 0, 16);
  expect_equivalent(g, loss, f.m);
}

TEST(GpuExecutors, BiLstmWithDropoutMatchesCpuReference) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  BiLstmDropoutFixture f(rng);
  Graph g(rng.gen()(), true);
  const Expr loss = f.build(g, rng);
  expect_equivalent(g, loss, f.m);
}

// Dropout nodes of different rates (0 among them) in one batch: the rate is not in the
// signature, so both strategies batch these same-shaped, same-depth dropouts, and each member
// must keep its own rate and node id (the agenda plan of a random graph once ran a batch with the
// first member's rate).
TEST(GpuExecutors, DropoutOfMixedRatesInOneBatchMatchesCpuReference) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  Model m(rng.gen()());
  const Parameter w = m.add_parameters({5, 3}), b = m.add_parameters({5});
  Graph g(rng.gen()(), true);
  const Expr ew = parameter(g, w), eb = parameter(g, b);
  std::vector<Expr> terms;
  for (const double p : {0.1, 0.7, 0.0, 0.5, 0.9, 0.3}) {
    const Expr h = tanh(affine_transform({eb, ew, input(g, {3}, rng.uniform(3))}));
    terms.push_back(input(g, Dim{1, 5}, rng.uniform(5)) * dropout(h, p));
  }
  const Expr loss = sum(terms);
  for (const BatchStrategy s : {BatchStrategy::Depth, BatchStrategy::Agenda}) {
    SCOPED_TRACE(to_string(s));
    bool mixed = false;
    for (const Batch& batch : plan_batches(g, loss.id, s).batches) {
      const Node& first = g.node(batch.nodes.front());
      if (first.op != Op::Dropout) continue;
      for (const NodeId id : batch.nodes) mixed = mixed || g.node(id).p != first.p;
    }
    EXPECT_TRUE(mixed) << "no batch mixes dropout rates: the test no longer tests that";
  }
  expect_equivalent(g, loss, m);
}

// Products whose x is a matrix (n > 1 columns: the strided-batched path) and long softmaxes
// (more rows than a CTA has threads).
TEST(GpuExecutors, WideProductsAndLongSoftmaxMatchCpuReference) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  Model m(rng.gen()());
  const Parameter w = m.add_parameters({300, 7}), b = m.add_parameters({300, 3});
  Graph g;
  const Expr ew = parameter(g, w), eb = parameter(g, b);
  std::vector<Expr> losses;
  for (int r = 0; r < 5; ++r) {
    const Expr x = input(g, {7, 3}, rng.uniform(21));
    const Expr y = tanh(affine_transform({eb, ew, x}));              // [300, 3]
    const Expr col = y * input(g, {3, 1}, rng.uniform(3));            // [300, 1]
    losses.push_back(pick_neg_log_softmax(col, rng.integer(0, 299)));
    losses.push_back(input(g, Dim{1, 300}, rng.uniform(300)) * log_softmax(col));
  }
  expect_equivalent(g, sum(losses), m);
}

// ---- Products at the sizes of both paths -------------------------------------------------------
// One batch of B AffineTransform (or MatMul) members y_b = [bias_b +] Σ_i W_i · x_i,b with P
// weights W_i [m, k + 5i] and x [k_i, n]: up to gpu::kSmallProductColumns (16) columns B·n the
// fused small_product kernels (m > 64 takes several row chunks per tile and the cross-CTA
// partial sums), beyond them cuBLAS (n == 1: one GEMM; n > 1: strided-batched). The x's are
// computed nodes (tanh of inputs), so their gradients are compared too.

enum class ProductBias : std::uint8_t { None, Shared, PerMember };

struct ProductCase {
  int B, P;
  std::int64_t m, k, n;
  ProductBias bias;
};

std::string product_case_name(const ::testing::TestParamInfo<ProductCase>& info) {
  const ProductCase& c = info.param;
  const char* bias = c.bias == ProductBias::None ? "matmul"
                     : c.bias == ProductBias::Shared ? "shared_bias"
                                                     : "member_bias";
  return "B" + std::to_string(c.B) + "_P" + std::to_string(c.P) + "_m" + std::to_string(c.m) +
         "_k" + std::to_string(c.k) + "_n" + std::to_string(c.n) + "_" + bias;
}

class GpuProducts : public ::testing::TestWithParam<ProductCase> {};

TEST_P(GpuProducts, MatchCpuReference) {
  PRNN_REQUIRE_GPU();
  const ProductCase c = GetParam();
  Rng rng;
  Model m(rng.gen()());
  std::vector<Parameter> w;
  for (int i = 0; i < c.P; ++i) w.push_back(m.add_parameters({c.m, c.k + 5 * i}));
  const Parameter shared_bias = m.add_parameters({c.m, c.n});
  Graph g;
  std::vector<Expr> ew;
  for (const Parameter& p : w) ew.push_back(parameter(g, p));
  const Expr eb = parameter(g, shared_bias);
  std::vector<Expr> terms;
  for (int b = 0; b < c.B; ++b) {
    std::vector<Expr> args;
    if (c.bias == ProductBias::Shared) args.push_back(eb);
    if (c.bias == ProductBias::PerMember)
      args.push_back(tanh(input(g, {c.m, c.n}, rng.uniform(sz(c.m * c.n)))));
    for (int i = 0; i < c.P; ++i) {
      const std::int64_t k = c.k + 5 * i;
      args.push_back(ew[sz(i)]);
      args.push_back(tanh(input(g, {k, c.n}, rng.uniform(sz(k * c.n)))));
    }
    const Expr y = c.bias == ProductBias::None ? args[0] * args[1] : affine_transform(args);
    terms.push_back(input(g, Dim{1, c.m}, rng.uniform(sz(c.m))) * tanh(y) *
                    input(g, {c.n}, rng.uniform(sz(c.n))));
  }
  const Expr loss = sum(terms);
  // The products form one batch of B members under both strategies.
  for (const BatchStrategy s : {BatchStrategy::Depth, BatchStrategy::Agenda}) {
    std::size_t largest = 0;
    for (const Batch& batch : plan_batches(g, loss.id, s).batches) {
      const Op op = g.node(batch.nodes.front()).op;
      if ((op == Op::AffineTransform || op == Op::MatMul) && g.node(batch.nodes.front()).dim.rows == c.m)
        largest = std::max(largest, batch.nodes.size());
    }
    EXPECT_EQ(largest, sz(c.B)) << to_string(s);
  }
  expect_equivalent(g, loss, m);
}

INSTANTIATE_TEST_SUITE_P(
    SmallKernels, GpuProducts,
    ::testing::Values(ProductCase{1, 1, 5, 7, 1, ProductBias::Shared},
                      ProductCase{1, 2, 1280, 256, 1, ProductBias::Shared},  // the Tree-LSTM cell
                      ProductCase{2, 1, 3, 1, 1, ProductBias::PerMember},
                      ProductCase{3, 2, 70, 33, 1, ProductBias::Shared},
                      ProductCase{5, 3, 129, 40, 1, ProductBias::PerMember},
                      ProductCase{7, 1, 64, 32, 1, ProductBias::None},
                      ProductCase{11, 2, 65, 31, 1, ProductBias::Shared},
                      ProductCase{16, 2, 300, 65, 1, ProductBias::Shared},
                      ProductCase{5, 2, 33, 9, 3, ProductBias::PerMember},
                      ProductCase{4, 1, 90, 50, 2, ProductBias::None},
                      ProductCase{1, 0, 70, 1, 4, ProductBias::Shared}),
    product_case_name);

INSTANTIATE_TEST_SUITE_P(
    Cublas, GpuProducts,
    ::testing::Values(ProductCase{17, 2, 40, 20, 1, ProductBias::Shared},
                      ProductCase{40, 2, 64, 31, 1, ProductBias::PerMember},
                      ProductCase{6, 1, 300, 7, 3, ProductBias::Shared},
                      ProductCase{9, 1, 90, 50, 2, ProductBias::None},
                      ProductCase{20, 0, 70, 1, 1, ProductBias::PerMember}),
    product_case_name);

// Destinations that share memory within one launch: a product's x repeated across members, its
// bias equal to its x, an x that is the weight itself, one weight twice in a product; and
// pick_ranges of overlapping ranges (their values are views, their gradients must not be:
// products, pointwise and concatenate over them). Each takes the store-to-scratch route, the
// cuBLAS path or a scatter, never a racing accumulation, and every node's gradient is its own.
TEST(GpuExecutors, AliasedDestinationsMatchCpuReference) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  Model m(rng.gen()());
  const Parameter w = m.add_parameters({4, 4}), v = m.add_parameters({4, 6}),
                  b = m.add_parameters({4});
  Graph g;
  const Expr ew = parameter(g, w), ev = parameter(g, v), eb = parameter(g, b);
  const Expr x = tanh(input(g, {4}, rng.uniform(4)));
  const Expr z = tanh(input(g, {6}, rng.uniform(6)));
  std::vector<Expr> outs;
  outs.push_back(affine_transform({eb, ew, x}));        // x twice in one batch
  outs.push_back(affine_transform({eb, ew, x}));
  outs.push_back(affine_transform({x, ew, x}));         // bias == x
  outs.push_back(ew * ew * x);                          // x == W (a [4, 4] product)
  outs.push_back(affine_transform({eb, ew, x, ew, x}));  // W twice
  const Expr p1 = pick_range(z, 0, 4), p2 = pick_range(z, 2, 6);  // overlapping views
  outs.push_back(affine_transform({eb, ew, p1}));
  outs.push_back(affine_transform({eb, ew, p2}));
  outs.push_back(tanh(p1) + tanh(p2));
  outs.push_back(pick_range(concatenate({p1, p2, ev * z}), 2, 6));
  outs.push_back(cmult(pick_range(z, 1, 5), p1));
  std::vector<Expr> terms;
  for (const Expr& o : outs) terms.push_back(input(g, Dim{1, 4}, rng.uniform(4)) * tanh(o));
  expect_equivalent(g, sum(terms), m);
}

// The launches of a small graph, counted by hand: forward = inputs copy + tables copy + one small
// product + one pick_neg_log_softmax; backward = gradients memset + seed copy + tables copy + the
// two kernels + one scatter per Parameter node. The same on every GPU executor (no batch holds
// two nodes here).
TEST(GpuExecutors, LaunchCountsOfASmallGraph) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  Model m(rng.gen()());
  const Parameter w = m.add_parameters({3, 4}), b = m.add_parameters({3});
  Graph g;
  const Expr y = affine_transform({parameter(g, b), parameter(g, w), input(g, {4}, rng.uniform(4))});
  const Expr loss = pick_neg_log_softmax(y, 1);
  for (const auto& [name, make] : gpu_executors()) {
    SCOPED_TRACE(name);
    const std::unique_ptr<Executor> ex = make();
    for (int round = 0; round < 2; ++round) {
      ex->forward(g, loss);
      ex->backward(g, loss);
      const DeviceTimes t = name == "gpu" ? dynamic_cast<GpuExecutor&>(*ex).device_times()
                                          : dynamic_cast<GpuAutobatchExecutor&>(*ex).device_times();
      EXPECT_EQ(t.forward_launches, 4u) << "round " << round;
      EXPECT_EQ(t.backward_launches, 7u) << "round " << round;
    }
  }
}

// ---- Elementwise fusion -------------------------------------------------------------------------

DeviceTimes times_of(const Executor& ex) {
  return dynamic_cast<const GpuAutobatchExecutor&>(ex).device_times();
}

// Fused against unfused, the same strategy, on one graph: values equal (the fused kernel computes
// each one with the per-batch kernels' expression), gradients and the model's gradients equal up
// to fp32 rounding of reordered additions (graph/autobatch.h: only where one batch adds twice
// to one element) and of multiply-adds the compiler may contract in one kernel and not in the
// other: 1e-5 of the vector's norm (the CPU autobatch executor's bound against the CPU
// reference), ten times tighter than the 1e-4 against the fp64 reference.
void expect_fused_matches_unfused(Graph& g, Expr loss, Model& m) {
  for (const BatchStrategy s : {BatchStrategy::Depth, BatchStrategy::Agenda}) {
    SCOPED_TRACE(to_string(s));
    GpuAutobatchExecutor fused(s, Fusion::Elementwise), unfused(s, Fusion::None);
    m.copy_to_host();
    m.zero_gradients();
    unfused.forward(g, loss);
    unfused.backward(g, loss);
    const ModelGradients want = take_gradients(m);
    fused.forward(g, loss);
    fused.backward(g, loss);
    const ModelGradients got = take_gradients(m);
    expect_nodes_close(loss, fused, unfused, 1e-5, 1e-6);
    expect_gradients_close(got, want, 1e-5, 1e-6);
    EXPECT_GT(fused.stats().groups, 0u) << "nothing fused: the test no longer tests fusion";
    EXPECT_LT(times_of(fused).forward_launches, times_of(unfused).forward_launches);
    EXPECT_LE(times_of(fused).backward_launches, times_of(unfused).backward_launches);
  }
}

TEST(GpuFusion, RandomGraphsFusedMatchUnfused) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  std::printf("gpu fusion random graphs: PRNN_TEST_SEED=%llu\n",
              static_cast<unsigned long long>(rng.seed()));
  RandomGraphModel rm(rng.gen()());
  int fused_graphs = 0;
  for (int graph_index = 0; graph_index < 100; ++graph_index) {
    SCOPED_TRACE("graph " + std::to_string(graph_index));
    Graph g(rng.gen()(), rng.integer(0, 1) == 1);
    const Expr loss = random_graph(g, rm, rng);
    if (plan_batches(g, loss.id, BatchStrategy::Depth, Fusion::Elementwise).groups.empty() ||
        plan_batches(g, loss.id, BatchStrategy::Agenda, Fusion::Elementwise).groups.empty())
      continue;
    ++fused_graphs;
    expect_fused_matches_unfused(g, loss, rm.m);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(fused_graphs, 10);
}

TEST(GpuFusion, TreeLstmFusedMatchesUnfused) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  TreeFixture f(rng.gen()());
  for (const std::size_t count : {std::size_t{1}, std::size_t{16}}) {
    SCOPED_TRACE(std::to_string(count) + " trees");
    Graph g;
    const Expr loss = f.build(g, 0, count);
    expect_fused_matches_unfused(g, loss, f.m);
  }
}

TEST(GpuFusion, BiLstmWithDropoutFusedMatchesUnfused) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  BiLstmDropoutFixture f(rng);
  Graph g(rng.gen()(), true);
  const Expr loss = f.build(g, rng, 0.5);
  expect_fused_matches_unfused(g, loss, f.m);
}

// Counted by hand. loss = r · (σ(x) ⊙ tanh(z)): the logistic, tanh and cmult batches are one
// group. Forward: inputs copy + tables copy + the fused kernel + one small product (unfused: three
// kernels for the group). Backward: gradients memset + seed copy + tables copy + the small
// product's backward + the fused kernel (unfused: three).
TEST(GpuFusion, LaunchCountsOfAFusedGroup) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  Graph g;
  const Expr x = input(g, {4}, rng.uniform(4)), z = input(g, {4}, rng.uniform(4));
  const Expr c = cmult(logistic(x), tanh(z));
  const Expr loss = input(g, Dim{1, 4}, rng.uniform(4)) * c;
  for (const Fusion f : {Fusion::Elementwise, Fusion::None}) {
    for (const BatchStrategy s : {BatchStrategy::Depth, BatchStrategy::Agenda}) {
      SCOPED_TRACE(std::string(to_string(s)) + ", fusion " + to_string(f));
      GpuAutobatchExecutor ex(s, f);
      for (int round = 0; round < 2; ++round) {
        ex.forward(g, loss);
        ex.backward(g, loss);
        const DeviceTimes t = ex.device_times();
        const std::size_t group = f == Fusion::Elementwise ? 1 : 3;
        EXPECT_EQ(t.forward_launches, 3u + group) << "round " << round;
        EXPECT_EQ(t.backward_launches, 4u + group) << "round " << round;
        EXPECT_EQ(ex.stats().groups, f == Fusion::Elementwise ? 1u : 0u);
      }
    }
  }
  CpuExecutor ref(Precision::F64);
  ref.forward(g, loss);
  ref.backward(g, loss);
  GpuAutobatchExecutor ex;
  ex.forward(g, loss);
  ex.backward(g, loss);
  expect_nodes_close(loss, ex, ref);
}

// Two lanes of one group add into the gradient of one outside node (x in x ⊙ tanh(a_i)): the
// fused backward would race there, so that group's backward runs unfused (as many launches as
// unfused execution) while its forward stays one launch. With the lanes joined by an add, one
// thread owns x's elements and the backward fuses too. Both against the fp64 reference.
TEST(GpuFusion, OverlappingDestinationsFallBackToUnfusedBackward) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  for (const bool joined : {false, true}) {
    SCOPED_TRACE(joined ? "lanes joined" : "lanes apart");
    Graph g;
    const Expr x = input(g, {5}, rng.uniform(5));
    const Expr c1 = cmult(x, tanh(input(g, {5}, rng.uniform(5))));
    const Expr c2 = cmult(x, tanh(input(g, {5}, rng.uniform(5))));
    const Expr loss = joined ? input(g, Dim{1, 5}, rng.uniform(5)) * (c1 + c2)
                             : sum({input(g, Dim{1, 5}, rng.uniform(5)) * c1,
                                    input(g, Dim{1, 5}, rng.uniform(5)) * c2});
    const BatchPlan plan = plan_batches(g, loss.id, BatchStrategy::Depth, Fusion::Elementwise);
    ASSERT_EQ(plan.groups.size(), 1u);
    EXPECT_EQ(plan.groups[0].lanes(), joined ? 1u : 2u);
    GpuAutobatchExecutor fused(BatchStrategy::Depth, Fusion::Elementwise),
        unfused(BatchStrategy::Depth, Fusion::None);
    for (Executor* ex : {static_cast<Executor*>(&fused), static_cast<Executor*>(&unfused)}) {
      ex->forward(g, loss);
      ex->backward(g, loss);
    }
    const std::size_t batches = static_cast<std::size_t>(plan.groups[0].end - plan.groups[0].begin);
    EXPECT_EQ(fused.device_times().forward_launches + batches - 1,
              unfused.device_times().forward_launches);
    if (joined) {
      EXPECT_LT(fused.device_times().backward_launches, unfused.device_times().backward_launches);
    } else {
      EXPECT_EQ(fused.device_times().backward_launches, unfused.device_times().backward_launches);
    }
    CpuExecutor ref(Precision::F64);
    ref.forward(g, loss);
    ref.backward(g, loss);
    expect_nodes_close(loss, fused, ref);
  }
}

// Same graph, same executor: bit-identical values and gradients (no float atomics anywhere).
TEST(GpuExecutors, DeterministicRunToRun) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  TreeFixture f(rng.gen()());
  Graph g;
  const Expr loss = f.build(g, 0, 12);
  for (const auto& [name, make] : gpu_executors()) {
    SCOPED_TRACE(name);
    std::vector<std::vector<double>> first;
    ModelGradients first_params;
    for (int round = 0; round < 2; ++round) {
      const std::unique_ptr<Executor> ex = make();
      ex->forward(g, loss);
      ex->backward(g, loss);
      std::vector<std::vector<double>> got;
      for (NodeId id = 0; id <= loss.id; ++id) got.push_back(ex->gradient(Expr{&g, id}));
      const ModelGradients params = take_gradients(f.m);
      if (round == 0) {
        first = got;
        first_params = params;
      } else {
        EXPECT_EQ(got, first);
        EXPECT_EQ(params.dense, first_params.dense);
        EXPECT_EQ(params.rows, first_params.rows);
      }
    }
  }
}

TEST(GpuExecutors, ForwardOnlyAndErrors) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  TreeFixture f(rng.gen()());
  Graph g;
  const Expr loss = f.build(g, 0, 2);
  const Expr mid{&g, loss.id / 2};
  CpuExecutor ref(Precision::F64);
  ref.forward(g, mid);
  for (const auto& [name, make] : gpu_executors()) {
    SCOPED_TRACE(name);
    const std::unique_ptr<Executor> ex = make();
    ex->forward(g, mid);
    for (NodeId id = 0; id <= mid.id; ++id)
      expect_close(ex->value(Expr{&g, id}), ref.value(Expr{&g, id}), "value " + std::to_string(id));
    EXPECT_THROW(ex->value(loss), InvalidArgument);
    EXPECT_THROW(ex->backward(g, loss), InvalidArgument);
    EXPECT_THROW(ex->gradient(mid), InvalidArgument);
  }
}

// ---- The Model's device copies ----------------------------------------------------------------

TEST(GpuModel, DeviceCopyIsTheMasterOnceUsed) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  TreeFixture f(rng.gen()());
  EXPECT_FALSE(f.m.on_device());
  Graph g;
  const Expr loss = f.build(g, 0, 2);
  GpuExecutor ex;
  ex.forward(g, loss);
  EXPECT_TRUE(f.m.on_device());
  ex.backward(g, loss);
  // The host copy is stale now: the CPU executors refuse it until copy_to_host().
  CpuExecutor cpu;
  EXPECT_THROW(cpu.forward(g, loss), InvalidArgument);
  f.m.copy_to_host();
  EXPECT_NO_THROW(cpu.forward(g, loss));
  // A host edit reaches the device after copy_to_device().
  f.m.zero_gradients();
  const auto w = f.out_b.values();
  for (float& x : w) x += 1.0f;
  f.m.copy_to_device();
  ex.forward(g, loss);
  cpu.forward(g, loss);
  expect_close({ex.scalar(loss)}, {cpu.scalar(loss)}, "loss after a host edit", 1e-5, 1e-6);
}

// A host backward on a Model that is on the device (the reference runs of expect_equivalent do
// this from the second random graph on) uploads its gradients: copy_to_host() returns them
// instead of overwriting them with the device's zeros, and the device copy holds them.
TEST(GpuModel, HostBackwardReachesTheDeviceCopy) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  TreeFixture f(rng.gen()());
  Graph g;
  const Expr loss = f.build(g, 0, 2);
  GpuExecutor gpu;
  gpu.forward(g, loss);
  ASSERT_TRUE(f.m.on_device());
  std::vector<std::unique_ptr<Executor>> hosts;
  hosts.push_back(std::make_unique<CpuExecutor>());
  hosts.push_back(std::make_unique<AutobatchExecutor>());
  for (const std::unique_ptr<Executor>& ex : hosts) {
    SCOPED_TRACE(ex->name());
    f.m.zero_gradients();
    ex->forward(g, loss);
    ex->backward(g, loss);
    const std::vector<float> want(f.out_w.gradients().begin(), f.out_w.gradients().end());
    const std::vector<std::int64_t> rows = f.emb.touched_rows();
    ASSERT_FALSE(rows.empty());
    ASSERT_TRUE(std::any_of(want.begin(), want.end(), [](float x) { return x != 0.0f; }));
    f.m.copy_to_host();  // device -> host: must bring back the same gradients
    EXPECT_EQ(std::vector<float>(f.out_w.gradients().begin(), f.out_w.gradients().end()), want);
    EXPECT_EQ(f.emb.touched_rows(), rows);
  }
}

// ---- Trainers ----------------------------------------------------------------------------------
// Graphs whose parameter gradients are exact in fp32 on every executor (every gradient element is
// one product, or a sum of two, in the same order), so the host and device trainers see the same
// gradients and their updates, rounded alike (graph/gpu_kernels.h), must agree. Equality is
// expected; 1e-6 relative leaves room only for a host compiler that contracts a*b+c into an FMA.

struct TrainerCase {
  explicit TrainerCase(std::uint64_t seed)
      : m(seed), w(m.add_parameters({6, 5})), b(m.add_parameters({6})),
        emb(m.add_lookup_parameters(10, {4})) {}
  // loss = uᵀ·(W·v) + cᵀ·b + Σ_rows dᵀ·E[row], rows {1, 3, 3, 7} (row 3 twice).
  Expr build(Graph& g, Rng& rng) {
    const Expr ew = parameter(g, w), eb = parameter(g, b);
    std::vector<Expr> terms;
    terms.push_back(input(g, Dim{1, 6}, rng.uniform(6)) * (ew * input(g, {5}, rng.uniform(5))));
    terms.push_back(input(g, Dim{1, 6}, rng.uniform(6)) * eb);
    for (std::int64_t row : {1, 3, 3, 7})
      terms.push_back(input(g, Dim{1, 4}, rng.uniform(4)) * lookup(g, emb, row));
    return sum(terms);
  }
  std::vector<float> all_values() {
    m.copy_to_host();
    std::vector<float> v;
    for (Parameter p : {w, b}) v.insert(v.end(), p.values().begin(), p.values().end());
    for (std::int64_t r = 0; r < emb.size(); ++r)
      v.insert(v.end(), emb.values(r).begin(), emb.values(r).end());
    return v;
  }
  Model m;
  Parameter w, b;
  LookupParameter emb;
};

void expect_trainers_agree(const std::function<std::unique_ptr<Trainer>(Model&)>& make) {
  Rng rng;
  const std::uint64_t seed = rng.gen()(), data_seed = rng.gen()();
  TrainerCase host(seed), device(seed);
  const std::unique_ptr<Trainer> host_trainer = make(host.m), device_trainer = make(device.m);
  CpuExecutor cpu;
  GpuAutobatchExecutor gpu;
  Rng host_rng, device_rng;  // the same inputs on both sides
  host_rng.gen().seed(data_seed);
  device_rng.gen().seed(data_seed);
  constexpr int kSteps = 4;
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Graph gh, gd;
    const Expr lh = host.build(gh, host_rng), ld = device.build(gd, device_rng);
    cpu.forward(gh, lh);
    cpu.backward(gh, lh);
    host_trainer->update();
    gpu.forward(gd, ld);
    gpu.backward(gd, ld);
    device_trainer->update();
    EXPECT_TRUE(device.m.on_device());
    const std::vector<float> want = host.all_values(), got = device.all_values();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i]) + 1e-12) << "element " << i;
    // The device update cleared the gradients and touched rows.
    device.m.copy_to_host();
    EXPECT_TRUE(device.emb.touched_rows().empty());
    for (float x : device.w.gradients()) ASSERT_EQ(x, 0.0f);
  }
}

TEST(GpuTrainers, SgdWithMomentumAndWeightDecayMatchesHost) {
  PRNN_REQUIRE_GPU();
  expect_trainers_agree(
      [](Model& m) { return std::make_unique<SimpleSgdTrainer>(m, 0.1, 0.9, 0.01); });
}

TEST(GpuTrainers, PlainSgdMatchesHost) {
  PRNN_REQUIRE_GPU();
  expect_trainers_agree([](Model& m) { return std::make_unique<SimpleSgdTrainer>(m, 0.05); });
}

TEST(GpuTrainers, AdamMatchesHost) {
  PRNN_REQUIRE_GPU();
  expect_trainers_agree([](Model& m) { return std::make_unique<AdamTrainer>(m, 1e-2); });
}

// Dense lookup updates (every row, as DyNet with sparse updates disabled) on the device equal
// the host's.
TEST(GpuTrainers, DenseLookupUpdatesMatchHost) {
  PRNN_REQUIRE_GPU();
  expect_trainers_agree([](Model& m) {
    auto t = std::make_unique<AdamTrainer>(m, 1e-2);
    t->set_sparse_updates(false);
    return t;
  });
  expect_trainers_agree([](Model& m) {
    auto t = std::make_unique<SimpleSgdTrainer>(m, 0.1, 0.9);
    t->set_sparse_updates(false);
    return t;
  });
}

// Training the Tree-LSTM on the GPU tracks the host: a few Adam steps on the same batches give
// losses within 1e-3 relative (fp32 summation orders differ, and Adam amplifies the differences
// of tiny gradients a little), and the loss falls.
TEST(GpuTrainers, TreeLstmTrainingTracksTheHost) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  const std::uint64_t seed = rng.gen()();
  TreeFixture host(seed), device(seed);
  AdamTrainer th(host.m, 1e-2), td(device.m, 1e-2);
  CpuExecutor cpu;
  GpuAutobatchExecutor gpu;
  std::vector<double> lh, ld;
  constexpr int kSteps = 6;
  for (int step = 0; step < kSteps; ++step) {
    Graph gh, gd;
    const Expr a = host.build(gh, 0, 8), b = device.build(gd, 0, 8);
    cpu.forward(gh, a);
    cpu.backward(gh, a);
    th.update();
    gpu.forward(gd, b);
    gpu.backward(gd, b);
    td.update();
    lh.push_back(cpu.scalar(a));
    ld.push_back(gpu.scalar(b));
  }
  for (int step = 0; step < kSteps; ++step)
    EXPECT_NEAR(ld[sz(step)], lh[sz(step)], 1e-3 * std::fabs(lh[sz(step)])) << "step " << step;
  EXPECT_LT(ld.back(), ld.front());
}

TEST(GpuExecutors, DeviceTimesAreReported) {
  PRNN_REQUIRE_GPU();
  Rng rng;
  TreeFixture f(rng.gen()());
  Graph g;
  const Expr loss = f.build(g, 0, 4);
  GpuAutobatchExecutor ab;
  ab.forward(g, loss);
  ab.backward(g, loss);
  const DeviceTimes t = ab.device_times();
  EXPECT_GT(t.forward_seconds, 0.0);
  EXPECT_GT(t.backward_seconds, 0.0);
  EXPECT_GT(t.forward_launches, 0u);
  EXPECT_EQ(ab.stats().nodes, sz(loss.id) + 1);
  GpuExecutor pn;
  pn.forward(g, loss);
  // Per node at least as many launches as the batched plan issues (batching merges them).
  EXPECT_GT(pn.device_times().forward_launches, ab.device_times().forward_launches);
}

}  // namespace
}  // namespace prnn::graph
