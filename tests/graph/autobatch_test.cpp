// Autobatching: the planner's schedule properties (every node exactly once, dependencies before
// users, one signature per batch, determinism, batching actually happening) and the invariance
// AutobatchExecutor (depth and agenda strategies) == CpuExecutor on forward values, node gradients,
// parameter gradients, lookup-row gradients and touched rows, over random graphs, a mini-batch of
// SST trees through the Tree-LSTM and a mini-batch of BiLSTM sequences.
#include "graph/autobatch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/test_graphs.h"
#include "prnn/data.h"
#include "prnn/error.h"
#include "prnn/graph.h"
#include "support/random.h"

namespace prnn::graph {
namespace {

using test::Rng;
using test::sz;

constexpr BatchStrategy kStrategies[] = {BatchStrategy::Depth, BatchStrategy::Agenda};

// fp32 against fp32: forward products sum each entry in the reference's order, but dW is one sum
// over the whole batch instead of one per node and gradients are scatter-added in another order,
// so results differ by rounding. Relative to the vector's norm, with an absolute floor for
// gradients that cancel to (nearly) zero.
constexpr double kRelTol = 1e-5;
constexpr double kAbsTol = 1e-6;

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  EXPECT_LE(std::sqrt(num), kRelTol * std::sqrt(den) + kAbsTol) << what;
}

// The schedule invariants of graph/autobatch.h.
void check_schedule(const Graph& g, NodeId last, const BatchPlan& plan) {
  const std::size_t n = sz(last) + 1;
  std::vector<int> seen(n, 0), batch_of(n, -1);
  for (std::size_t b = 0; b < plan.batches.size(); ++b) {
    const Batch& batch = plan.batches[b];
    ASSERT_FALSE(batch.nodes.empty());
    for (std::size_t k = 0; k < batch.nodes.size(); ++k) {
      const NodeId id = batch.nodes[k];
      ASSERT_GE(id, 0);
      ASSERT_LT(sz(id), n);
      ++seen[sz(id)];
      batch_of[sz(id)] = static_cast<int>(b);
      EXPECT_EQ(plan.signature_of[sz(id)], batch.signature);
      if (k > 0) {
        EXPECT_LT(batch.nodes[k - 1], id);
      }
    }
    if (!plan.signatures[sz(batch.signature)].batchable) {
      EXPECT_EQ(batch.nodes.size(), 1u);
    }
  }
  for (std::size_t id = 0; id < n; ++id) {
    ASSERT_EQ(seen[id], 1) << "node " << id;
    for (NodeId a : g.nodes()[id].args)
      ASSERT_LT(batch_of[sz(a)], batch_of[id]) << "node " << id << " argument " << a;
  }
  // Members of a batch agree on op, shape and shared weights.
  for (const Batch& batch : plan.batches) {
    const Node& first = g.node(batch.nodes.front());
    for (NodeId id : batch.nodes) {
      const Node& node = g.node(id);
      EXPECT_EQ(node.op, first.op);
      EXPECT_EQ(node.dim, first.dim);
      ASSERT_EQ(node.args.size(), first.args.size());
      for (std::size_t p = 0; p < node.args.size(); ++p)
        if (is_shared_argument(node.op, p)) {
          EXPECT_EQ(node.args[p], first.args[p]);
        }
    }
  }
}

// Runs g up to `loss` on the CPU reference and on both autobatching strategies; compares every
// node's value and gradient and the model's gradients. Returns the agenda executor's statistics.
AutobatchStats expect_equivalent(Graph& g, Expr loss, Model& m) {
  m.zero_gradients();
  CpuExecutor ref;
  ref.forward(g, loss);
  ref.backward(g, loss);
  const ModelGradients want = take_gradients(m);
  AutobatchStats agenda_stats;
  for (BatchStrategy s : kStrategies) {
    SCOPED_TRACE(to_string(s));
    check_schedule(g, loss.id, plan_batches(g, loss.id, s));
    AutobatchExecutor ex(s);
    ex.forward(g, loss);
    ex.backward(g, loss);
    for (NodeId id = 0; id <= loss.id; ++id) {
      const Expr e{&g, id};
      expect_close(ex.value(e), ref.value(e), "value of node " + std::to_string(id));
      expect_close(ex.gradient(e), ref.gradient(e), "gradient of node " + std::to_string(id));
    }
    const ModelGradients got = take_gradients(m);
    for (std::size_t i = 0; i < want.dense.size(); ++i)
      expect_close(got.dense[i], want.dense[i], "parameter " + std::to_string(i));
    for (std::size_t i = 0; i < want.rows.size(); ++i) {
      expect_close(got.rows[i], want.rows[i], "lookup table " + std::to_string(i));
      EXPECT_EQ(got.touched[i], want.touched[i]) << "lookup table " << i;
    }
    const AutobatchStats& st = ex.stats();
    EXPECT_EQ(st.nodes, sz(loss.id) + 1);
    std::size_t total = 0;
    for (const auto& ps : st.per_signature) total += ps.nodes;
    EXPECT_EQ(total, st.nodes);
    if (s == BatchStrategy::Agenda) agenda_stats = st;
  }
  return agenda_stats;
}

// ---------------------------------------------------------------------------------------------
// Random graphs (graph/random_graph.h)

constexpr int kRandomGraphs = 300;

TEST(Autobatch, RandomGraphsMatchCpuExecutor) {
  check_random_graphs("autobatch random graphs", kRandomGraphs,
                      [](Graph& g, Expr loss, Model& m) { expect_equivalent(g, loss, m); });
}

// ---------------------------------------------------------------------------------------------
// Tree-LSTM over SST trees

TEST(Autobatch, TreeLstmBatchMatchesCpuExecutor) {
  Rng rng;
  TreeFixture f(rng.gen()());
  ASSERT_GE(f.trees.size(), 16u);
  Graph g;
  const Expr loss = f.build(g, 0, 16);
  const AutobatchStats st = expect_equivalent(g, loss, f.m);
  std::printf("tree-lstm, 16 SST trees, agenda: %zu nodes in %zu batches (%.1f per batch)\n",
              st.nodes, st.batches, st.average_batch_size());
  // Sixteen sentences of 5-40 words: the agenda joins the same step of every tree, so batches
  // hold many nodes each. Stated bound: at least 8 nodes per batch on average.
  EXPECT_GE(st.average_batch_size(), 8.0);
}

TEST(Autobatch, TreeLstmBatchStatisticsPerStrategy) {
  Rng rng;
  TreeFixture f(rng.gen()());
  Graph g;
  const Expr loss = f.build(g, 0, 16);
  for (BatchStrategy s : kStrategies) {
    const BatchPlan plan = plan_batches(g, loss.id, s);
    std::printf("tree-lstm, 16 SST trees, %s: %zu nodes in %zu batches\n", to_string(s), g.size(),
                plan.batches.size());
    check_schedule(g, loss.id, plan);
    EXPECT_LT(plan.batches.size() * 4, g.size()) << to_string(s);
  }
}

// ---------------------------------------------------------------------------------------------
// BiLSTM over sequences of different lengths

TEST(Autobatch, BiLstmBatchMatchesCpuExecutor) {
  Rng rng;
  BiLstmDropoutFixture f(rng);
  Graph g(rng.gen()(), true);
  const Expr loss = f.build(g, rng);
  const AutobatchStats st = expect_equivalent(g, loss, f.m);
  EXPECT_LT(st.batches * 2, st.nodes);
}

// ---------------------------------------------------------------------------------------------
// Determinism: the same graph plans to the same schedule, run after run and graph after graph.

TEST(Autobatch, PlannerIsDeterministic) {
  Rng rng;
  const std::uint64_t seed = rng.gen()();
  for (BatchStrategy s : kStrategies) {
    std::vector<std::vector<NodeId>> first;
    for (int round = 0; round < 3; ++round) {
      TreeFixture f(seed);
      Graph g;
      const Expr loss = f.build(g, 3, 8);
      const BatchPlan plan = plan_batches(g, loss.id, s);
      std::vector<std::vector<NodeId>> batches;
      for (const Batch& b : plan.batches) batches.push_back(b.nodes);
      if (round == 0) {
        first = batches;
      } else {
        EXPECT_EQ(batches, first) << to_string(s) << " round " << round;
      }
    }
  }
}

TEST(Autobatch, ForwardOnlyUpToAnEarlierNode) {
  Rng rng;
  TreeFixture f(rng.gen()());
  Graph g;
  const Expr loss = f.build(g, 0, 2);
  const Expr mid{&g, loss.id / 2};
  CpuExecutor ref;
  ref.forward(g, mid);
  for (BatchStrategy s : kStrategies) {
    AutobatchExecutor ex(s);
    ex.forward(g, mid);
    for (NodeId id = 0; id <= mid.id; ++id)
      expect_close(ex.value(Expr{&g, id}), ref.value(Expr{&g, id}), "value " + std::to_string(id));
    EXPECT_THROW(ex.value(loss), InvalidArgument);
    EXPECT_THROW(ex.backward(g, loss), InvalidArgument);
  }
}

}  // namespace
}  // namespace prnn::graph
