// Autobatching: the planner's schedule properties (every node exactly once, dependencies before
// users, one signature per batch, determinism, batching actually happening), the fused groups'
// properties (elementwise runs of one size, lanes closed under in-group arguments, lanes within
// kMaxLaneNodes) and the invariance AutobatchExecutor (depth and agenda strategies, fused and
// unfused) == CpuExecutor on forward values, node gradients, parameter gradients, lookup-row
// gradients and touched rows, over random graphs, a mini-batch of SST trees through the Tree-LSTM
// and a mini-batch of BiLSTM sequences; the groups of a Tree-LSTM sentence, dependencies across
// member indices, and the places where fusion must stop.
#include "graph/autobatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
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
constexpr Fusion kFusions[] = {Fusion::None, Fusion::Elementwise};

// fp32 against fp32: forward products sum each entry in the reference's order, but dW is one sum
// over the whole batch instead of one per node and gradients are scatter-added in another order,
// so results differ by rounding. Relative to the vector's norm, with an absolute floor for
// gradients that cancel to (nearly) zero.
constexpr double kRelTol = 1e-5;
constexpr double kAbsTol = 1e-6;

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  expect_near_norm(got, want, what, kRelTol, kAbsTol);
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

// The fused groups of graph/autobatch.h: in schedule order, each a run of >= 2 elementwise
// batches of one element count; its nodes exactly those of its batches, lane by lane in schedule
// order; every argument inside the group in the same lane, earlier; lanes of at most
// kMaxLaneNodes; a batch next to a group that could have joined it would have made a lane too
// long (maximal runs).
void check_groups(const Graph& g, const BatchPlan& plan) {
  ASSERT_EQ(plan.group_of.size(), plan.batches.size());
  std::vector<int> lane_of(plan.batch_of.size(), -1), position(plan.batch_of.size(), -1);
  int previous_end = 0;
  for (std::size_t gi = 0; gi < plan.groups.size(); ++gi) {
    const FusedGroup& group = plan.groups[gi];
    SCOPED_TRACE("group " + std::to_string(gi));
    ASSERT_GE(group.begin, previous_end);
    ASSERT_GE(group.end - group.begin, 2);
    ASSERT_LE(sz(group.end), plan.batches.size());
    previous_end = group.end;
    std::vector<NodeId> in_batches;
    for (int b = group.begin; b < group.end; ++b) {
      EXPECT_EQ(plan.group_of[sz(b)], static_cast<int>(gi));
      for (NodeId id : plan.batches[sz(b)].nodes) {
        EXPECT_TRUE(is_elementwise(g.node(id).op)) << "node " << id;
        EXPECT_EQ(g.node(id).dim.size(), group.size) << "node " << id;
        in_batches.push_back(id);
      }
    }
    ASSERT_EQ(group.lane_first.front(), 0);
    ASSERT_EQ(sz(group.lane_first.back()), group.nodes.size());
    std::vector<NodeId> nodes = group.nodes;
    std::sort(nodes.begin(), nodes.end());
    std::sort(in_batches.begin(), in_batches.end());
    EXPECT_EQ(nodes, in_batches);
    for (std::size_t l = 0; l < group.lanes(); ++l) {
      const int k0 = group.lane_first[l], k1 = group.lane_first[l + 1];
      ASSERT_LT(k0, k1) << "empty lane " << l;
      EXPECT_LE(k1 - k0, kMaxLaneNodes) << "lane " << l;
      for (int k = k0; k < k1; ++k) {
        const NodeId id = group.nodes[sz(k)];
        lane_of[sz(id)] = static_cast<int>(l);
        position[sz(id)] = k;
        if (k > k0) {
          const NodeId prev = group.nodes[sz(k - 1)];
          EXPECT_LT(std::make_pair(plan.batch_of[sz(prev)], plan.slot_of[sz(prev)]),
                    std::make_pair(plan.batch_of[sz(id)], plan.slot_of[sz(id)]))
              << "lane " << l << " out of schedule order";
        }
        for (NodeId a : g.node(id).args) {
          const int ab = plan.batch_of[sz(a)];
          if (ab < group.begin || ab >= group.end) continue;
          EXPECT_EQ(lane_of[sz(a)], static_cast<int>(l)) << "node " << id << " argument " << a;
          EXPECT_LT(position[sz(a)], k) << "node " << id << " argument " << a;
        }
      }
      if (l > 0) {
        const NodeId prev = group.nodes[sz(group.lane_first[l - 1])], first = group.nodes[sz(k0)];
        EXPECT_LT(std::make_pair(plan.batch_of[sz(prev)], plan.slot_of[sz(prev)]),
                  std::make_pair(plan.batch_of[sz(first)], plan.slot_of[sz(first)]))
            << "lanes out of order";
      }
    }
  }
  // Maximal: the batch after a group, when elementwise of the same size, joins a lane of the
  // group to more than kMaxLaneNodes nodes (lanes it connects are summed with its members).
  for (const FusedGroup& group : plan.groups) {
    if (sz(group.end) >= plan.batches.size()) continue;
    const Batch& next = plan.batches[sz(group.end)];
    const Node& f = g.node(next.nodes.front());
    if (!is_elementwise(f.op) || f.dim.size() != group.size) continue;
    std::vector<int> parent(group.lanes() + next.nodes.size()), size(parent.size(), 1);
    for (std::size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
    for (std::size_t l = 0; l < group.lanes(); ++l)
      size[l] = group.lane_first[l + 1] - group.lane_first[l];
    const std::function<int(int)> find = [&](int a) { return parent[sz(a)] == a ? a : find(parent[sz(a)]); };
    int largest = 1;
    for (std::size_t k = 0; k < next.nodes.size(); ++k) {
      const int me = static_cast<int>(group.lanes() + k);
      for (NodeId a : g.node(next.nodes[k]).args) {
        const int ab = plan.batch_of[sz(a)];
        if (ab < group.begin || ab >= group.end) continue;
        const int ra = find(lane_of[sz(a)]), rb = find(me);
        if (ra == rb) continue;
        parent[sz(rb)] = ra;
        size[sz(ra)] += size[sz(rb)];
        largest = std::max(largest, size[sz(ra)]);
      }
    }
    EXPECT_GT(largest, kMaxLaneNodes) << "batch " << group.end << " could have joined the group";
  }
}

// Runs g up to `loss` on the CPU reference and on both autobatching strategies, fused and not;
// compares every node's value and gradient and the model's gradients. Returns the statistics of
// the fused agenda executor.
AutobatchStats expect_equivalent(Graph& g, Expr loss, Model& m) {
  m.zero_gradients();
  CpuExecutor ref;
  ref.forward(g, loss);
  ref.backward(g, loss);
  const ModelGradients want = take_gradients(m);
  AutobatchStats agenda_stats;
  for (BatchStrategy s : kStrategies)
    for (Fusion f : kFusions) {
      SCOPED_TRACE(std::string(to_string(s)) + ", fusion " + to_string(f));
      const BatchPlan plan = plan_batches(g, loss.id, s, f);
      check_schedule(g, loss.id, plan);
      check_groups(g, plan);
      if (f == Fusion::None) {
        EXPECT_TRUE(plan.groups.empty());
      }
      AutobatchExecutor ex(s, f);
      ex.forward(g, loss);
      ex.backward(g, loss);
      for (NodeId id = 0; id <= loss.id; ++id) {
        const Expr e{&g, id};
        expect_close(ex.value(e), ref.value(e), "value of node " + std::to_string(id));
        expect_close(ex.gradient(e), ref.gradient(e), "gradient of node " + std::to_string(id));
      }
      expect_gradients_close(take_gradients(m), want, kRelTol, kAbsTol);
      const AutobatchStats& st = ex.stats();
      EXPECT_EQ(st.nodes, sz(loss.id) + 1);
      std::size_t total = 0;
      for (const auto& ps : st.per_signature) total += ps.nodes;
      EXPECT_EQ(total, st.nodes);
      EXPECT_EQ(st.groups, plan.groups.size());
      if (s == BatchStrategy::Agenda && f == Fusion::Elementwise) agenda_stats = st;
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
// Elementwise fusion

// Height of node i of a tree: 0 for a leaf, 1 + the larger of its children's.
int tree_height(const data::Tree& t, int i) {
  const data::TreeNode& n = t.nodes[sz(i)];
  return n.is_leaf() ? 0 : 1 + std::max(tree_height(t, n.left), tree_height(t, n.right));
}

std::vector<Op> group_ops(const Graph& g, const BatchPlan& plan, const FusedGroup& group) {
  std::vector<Op> ops;
  for (int b = group.begin; b < group.end; ++b)
    ops.push_back(g.node(plan.batches[sz(b)].nodes.front()).op);
  return ops;
}

// One sentence through the Tree-LSTM, depth strategy: every cell of tree height h sits at the
// same depths, so the cells of one height form one run of elementwise batches. Leaves (i, o, u;
// c = i⊙u; h = o⊙tanh c): logistic, tanh, cmult, tanh, cmult, a lane of 6 nodes per leaf.
// Inner cells (i, o, u, f_L, f_R; c = i⊙u + f_L⊙c_L + f_R⊙c_R; h = o⊙tanh c): logistic, tanh,
// cmult, add, add, tanh, cmult, a lane of 12 nodes per cell: each cell one lane although its
// logistic batch holds 4 nodes per cell and its cmult batch 3.
TEST(Fusion, TreeLstmSentenceGroupsOnePerTreeHeight) {
  Rng rng;
  TreeFixture f(rng.gen()());
  for (std::size_t t = 0; t < 20; ++t) {
    const data::Tree& tree = f.trees[t];
    SCOPED_TRACE("tree " + std::to_string(t) + ": " + tree.to_string());
    Graph g;
    const Expr loss = f.build(g, t, 1);
    const BatchPlan plan = plan_batches(g, loss.id, BatchStrategy::Depth, Fusion::Elementwise);
    check_groups(g, plan);
    const int height = tree_height(tree, tree.root);
    std::vector<int> cells(sz(height) + 1, 0);  // per height
    for (std::size_t i = 0; i < tree.nodes.size(); ++i) ++cells[sz(tree_height(tree, static_cast<int>(i)))];
    ASSERT_EQ(plan.groups.size(), sz(height) + 1);
    for (int h = 0; h <= height; ++h) {
      SCOPED_TRACE("height " + std::to_string(h));
      const FusedGroup& group = plan.groups[sz(h)];
      const std::vector<Op> want =
          h == 0 ? std::vector<Op>{Op::Logistic, Op::Tanh, Op::CMult, Op::Tanh, Op::CMult}
                 : std::vector<Op>{Op::Logistic, Op::Tanh, Op::CMult, Op::Add,
                                   Op::Add,      Op::Tanh, Op::CMult};
      EXPECT_EQ(group_ops(g, plan, group), want);
      EXPECT_EQ(group.size, kHidden);
      ASSERT_EQ(group.lanes(), sz(cells[sz(h)]));
      for (std::size_t l = 0; l < group.lanes(); ++l)
        EXPECT_EQ(group.lane_first[l + 1] - group.lane_first[l], h == 0 ? 6 : 12) << "lane " << l;
    }
  }
}

// Over the SST trees of tests/data, one sentence per graph (batch 1), both strategies: the
// elementwise batches, the groups they fuse into, and the GPU operations fusion saves per
// sentence (each fused batch one launch fewer in forward and in backward, except its group's
// first; the Tree-LSTM's group destinations never overlap, so no backward falls back).
TEST(Fusion, TreeLstmSentencesLaunchesSaved) {
  Rng rng;
  TreeFixture f(rng.gen()());
  for (BatchStrategy s : kStrategies) {
    double elementwise = 0.0, grouped = 0.0, groups = 0.0, batches = 0.0;
    for (std::size_t t = 0; t < f.trees.size(); ++t) {
      Graph g;
      const Expr loss = f.build(g, t, 1);
      const BatchPlan plan = plan_batches(g, loss.id, s, Fusion::Elementwise);
      const AutobatchStats st = plan_statistics(plan, 0.0);
      for (const Batch& b : plan.batches)
        if (is_elementwise(g.node(b.nodes.front()).op)) elementwise += 1.0;
      grouped += static_cast<double>(st.fused_batches);
      groups += static_cast<double>(st.groups);
      batches += static_cast<double>(st.batches);
    }
    const double n = static_cast<double>(f.trees.size());
    std::printf(
        "tree-lstm, %zu SST trees, batch 1, %s: per sentence %.1f batches, %.1f elementwise, "
        "%.1f of them in %.1f fused groups: %.1f GPU operations saved (forward + backward)\n",
        f.trees.size(), to_string(s), batches / n, elementwise / n, grouped / n, groups / n,
        2.0 * (grouped - groups) / n);
    // Depth: every elementwise batch of a sentence is in a group (the final sum of the losses
    // aside: its [1x1] is the only elementwise batch of its size).
    if (s == BatchStrategy::Depth) {
      EXPECT_EQ(grouped, elementwise - n);
    }
  }
}

// A dependency across member indices: member 0 of the second batch reads member 1 of the first
// and vice versa. Lanes follow the argument edges, not member indices: {a0, b1} and {a1, b0}.
TEST(Fusion, DependenciesAcrossMemberIndicesShareALane) {
  Rng rng;
  Model m(rng.gen()());
  Graph g;
  const Expr x0 = input(g, {3}, rng.uniform(3)), x1 = input(g, {3}, rng.uniform(3));
  const Expr a0 = tanh(x0), a1 = tanh(x1);
  const Expr b0 = logistic(a1), b1 = logistic(a0);
  const Expr loss = input(g, Dim{1, 3}, rng.uniform(3)) * (cmult(b0, x0) + cmult(b1, a1));
  for (BatchStrategy s : kStrategies) {
    SCOPED_TRACE(to_string(s));
    const BatchPlan plan = plan_batches(g, loss.id, s, Fusion::Elementwise);
    check_groups(g, plan);
    ASSERT_EQ(plan.groups.size(), 1u);
    const FusedGroup& group = plan.groups[0];
    // tanh, logistic, cmult, add: the two cmults' lanes join at the add.
    EXPECT_EQ(group_ops(g, plan, group),
              (std::vector<Op>{Op::Tanh, Op::Logistic, Op::CMult, Op::Add}));
    ASSERT_EQ(group.lanes(), 1u);
    EXPECT_EQ(group.nodes.size(), 7u);
  }
  // Without the add the lanes stay apart, crossing member indices.
  Graph h;
  const Expr y0 = input(h, {3}, rng.uniform(3)), y1 = input(h, {3}, rng.uniform(3));
  const Expr c0 = tanh(y0), c1 = tanh(y1);
  const Expr d0 = logistic(c1), d1 = logistic(c0);
  const Expr loss2 = sum({input(h, Dim{1, 3}, rng.uniform(3)) * d0,
                          input(h, Dim{1, 3}, rng.uniform(3)) * d1});
  const BatchPlan plan = plan_batches(h, loss2.id, BatchStrategy::Depth, Fusion::Elementwise);
  check_groups(h, plan);
  ASSERT_EQ(plan.groups.size(), 1u);
  const FusedGroup& group = plan.groups[0];
  ASSERT_EQ(group.lanes(), 2u);
  EXPECT_EQ(plan.slot_of[sz(d0.id)], 0);  // member 0 of the logistic batch ...
  EXPECT_EQ(plan.slot_of[sz(c1.id)], 1);  // ... reads member 1 of the tanh batch
  EXPECT_EQ(group.nodes, (std::vector<NodeId>{c0.id, d1.id, c1.id, d0.id}));
  expect_equivalent(g, loss, m);
  expect_equivalent(h, loss2, m);
}

// Where fusion stops: a batch that is not elementwise (pick_range, a product), elementwise
// batches of another element count, and lanes that would grow beyond kMaxLaneNodes.
TEST(Fusion, StopsAtOtherOpsOtherSizesAndLongLanes) {
  Rng rng;
  Model m(rng.gen()());
  const Parameter w = m.add_parameters({4, 4});
  {  // tanh -> pick_range -> logistic -> (product) -> relu
    Graph g;
    const Expr x = input(g, {8}, rng.uniform(8));
    const Expr t = logistic(tanh(x));                 // [8]: one group of 2
    const Expr p = relu(tanh(pick_range(t, 2, 6)));   // [4]: one group of 2
    const Expr q = relu(parameter(g, w) * p);         // [4] after a product: alone
    const Expr loss = input(g, Dim{1, 4}, rng.uniform(4)) * q;
    const BatchPlan plan = plan_batches(g, loss.id, BatchStrategy::Depth, Fusion::Elementwise);
    check_groups(g, plan);
    ASSERT_EQ(plan.groups.size(), 2u);
    EXPECT_EQ(group_ops(g, plan, plan.groups[0]), (std::vector<Op>{Op::Tanh, Op::Logistic}));
    EXPECT_EQ(plan.groups[0].size, 8);
    EXPECT_EQ(group_ops(g, plan, plan.groups[1]), (std::vector<Op>{Op::Tanh, Op::Relu}));
    EXPECT_EQ(plan.groups[1].size, 4);
    EXPECT_LT(plan.group_of[sz(plan.batch_of[sz(q.id)])], 0);
    expect_equivalent(g, loss, m);
  }
  {  // sizes 4 then 3 at consecutive depths: two groups, not one
    Graph g;
    const Expr x = input(g, {4}, rng.uniform(4)), y = input(g, {3}, rng.uniform(3));
    const Expr a = tanh(logistic(x));
    const Expr b = relu(logistic(tanh(y)));
    const Expr loss = sum({input(g, Dim{1, 4}, rng.uniform(4)) * a,
                           input(g, Dim{1, 3}, rng.uniform(3)) * b});
    const BatchPlan plan = plan_batches(g, loss.id, BatchStrategy::Agenda, Fusion::Elementwise);
    check_groups(g, plan);
    for (const FusedGroup& group : plan.groups)
      for (NodeId id : group.nodes) EXPECT_EQ(g.node(id).dim.size(), group.size);
    expect_equivalent(g, loss, m);
  }
  {  // a chain of 40 tanh: lanes of at most kMaxLaneNodes, so groups of 16, 16, 8
    Graph g;
    Expr x = input(g, {5}, rng.uniform(5));
    for (int i = 0; i < 40; ++i) x = tanh(x);
    const Expr loss = input(g, Dim{1, 5}, rng.uniform(5)) * x;
    const BatchPlan plan = plan_batches(g, loss.id, BatchStrategy::Depth, Fusion::Elementwise);
    check_groups(g, plan);
    ASSERT_EQ(plan.groups.size(), 3u);
    EXPECT_EQ(plan.groups[0].end - plan.groups[0].begin, kMaxLaneNodes);
    EXPECT_EQ(plan.groups[1].end - plan.groups[1].begin, kMaxLaneNodes);
    EXPECT_EQ(plan.groups[2].end - plan.groups[2].begin, 40 - 2 * kMaxLaneNodes);
    expect_equivalent(g, loss, m);
  }
  {  // 20 tanh in one batch summed: the sum's lane would hold 21 nodes, so it stays apart
    Graph g;
    std::vector<Expr> ts;
    for (int i = 0; i < 20; ++i) ts.push_back(tanh(input(g, {2}, rng.uniform(2))));
    const Expr loss = input(g, Dim{1, 2}, rng.uniform(2)) * logistic(sum(ts));
    const BatchPlan plan = plan_batches(g, loss.id, BatchStrategy::Depth, Fusion::Elementwise);
    check_groups(g, plan);
    ASSERT_EQ(plan.groups.size(), 1u);  // sum, logistic
    EXPECT_EQ(group_ops(g, plan, plan.groups[0]), (std::vector<Op>{Op::Sum, Op::Logistic}));
    expect_equivalent(g, loss, m);
  }
}

// Two lanes that add into one gradient outside the group (x · tanh(a_i), x an input used by
// both): the plan fuses them (the GPU backward then falls back to unfused launches); a lane
// that reads one outside node twice (cmult(x, x)) and dropout inside a group.
TEST(Fusion, SharedOutsideArgumentsAndDropout) {
  Rng rng;
  Model m(rng.gen()());
  Graph g(rng.gen()(), true);
  const Expr x = input(g, {5}, rng.uniform(5));
  const Expr c1 = cmult(x, tanh(input(g, {5}, rng.uniform(5))));
  const Expr c2 = cmult(x, tanh(input(g, {5}, rng.uniform(5))));
  const Expr c3 = dropout(logistic(cmult(x, x)), 0.3);
  const Expr loss = sum({input(g, Dim{1, 5}, rng.uniform(5)) * c1,
                         input(g, Dim{1, 5}, rng.uniform(5)) * c2,
                         input(g, Dim{1, 5}, rng.uniform(5)) * c3});
  const BatchPlan plan = plan_batches(g, loss.id, BatchStrategy::Depth, Fusion::Elementwise);
  check_groups(g, plan);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].lanes(), 3u);
  expect_equivalent(g, loss, m);
}

// Fusion over random graphs: the equivalence runs of RandomGraphsMatchCpuExecutor cover it; here
// the plans are checked to fuse at all (random graphs are mostly elementwise ops).
TEST(Fusion, RandomGraphsFuse) {
  Rng rng;
  RandomGraphModel rm(rng.gen()());
  std::size_t groups = 0, multi_lane = 0;
  for (int graph_index = 0; graph_index < 100; ++graph_index) {
    Graph g(rng.gen()(), true);
    const Expr loss = random_graph(g, rm, rng);
    for (BatchStrategy s : kStrategies) {
      const BatchPlan plan = plan_batches(g, loss.id, s, Fusion::Elementwise);
      check_groups(g, plan);
      groups += plan.groups.size();
      for (const FusedGroup& group : plan.groups) multi_lane += group.lanes() > 1 ? 1 : 0;
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(groups, 20u);
  EXPECT_GT(multi_lane, 5u);
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
