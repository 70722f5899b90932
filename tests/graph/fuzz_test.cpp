// Builds 2000 random graphs from random ops on random operands (shapes, labels, ranges and
// probabilities drawn so that many calls are invalid): every invalid call throws InvalidArgument
// and leaves the graph unchanged, and every valid graph runs forward and backward on the CPU
// executor to finite values. The seed is printed; PRNN_TEST_SEED reproduces a run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "prnn/error.h"
#include "prnn/graph.h"
#include "support/random.h"

namespace prnn::graph {
namespace {

using test::Rng;
using test::sz;

constexpr int kGraphs = 2000;
constexpr int kMaxOpsPerGraph = 12;
constexpr std::int64_t kMaxSide = 4;

TEST(GraphFuzz, RandomGraphsNeverCrash) {
  Rng rng;
  std::printf("graph fuzz: PRNN_TEST_SEED=%llu\n", static_cast<unsigned long long>(rng.seed()));
  Model m(rng.gen()());
  const Parameter w = m.add_parameters({3, 2}), v = m.add_parameters({2});
  const LookupParameter emb = m.add_lookup_parameters(5, {2});

  const auto side = [&] { return rng.integer(1, kMaxSide); };
  const auto values = [&](Dim d) { return rng.uniform(sz(d.size())); };
  int valid_ops = 0, invalid_ops = 0;

  for (int graph_index = 0; graph_index < kGraphs; ++graph_index) {
    SCOPED_TRACE("graph " + std::to_string(graph_index));
    Graph g(rng.gen()(), rng.integer(0, 1) == 1);
    Graph other;
    std::vector<Expr> pool;
    for (std::int64_t k = rng.integer(1, 3); k > 0; --k) {
      const Dim d{side(), side()};
      pool.push_back(input(g, d, values(d)));
    }
    const auto pick = [&]() -> Expr {
      switch (rng.integer(0, 19)) {
        case 0:
          return Expr{};  // empty
        case 1:
          return input(other, {2}, std::vector<double>{1, 2});  // another graph
        default:
          return pool[sz(rng.integer(0, static_cast<std::int64_t>(pool.size()) - 1))];
      }
    };
    const auto picks = [&](std::int64_t n) {
      std::vector<Expr> xs;
      for (std::int64_t i = 0; i < n; ++i) xs.push_back(pick());
      return xs;
    };
    const std::vector<std::function<Expr()>> ops = {
        [&] {
          const Dim d{side(), side()};
          auto x = values(d);
          if (rng.integer(0, 9) == 0) x.pop_back();  // wrong count
          return input(g, d, x);
        },
        [&] { return parameter(g, rng.integer(0, 1) == 0 ? w : v); },
        [&] { return lookup(g, emb, rng.integer(-1, 5)); },
        [&] { return affine_transform(picks(rng.integer(0, 5))); },
        [&] { return pick() * pick(); },
        [&] { return pick() + pick(); },
        [&] { return pick() - pick(); },
        [&] { return cmult(pick(), pick()); },
        [&] { return concatenate(picks(rng.integer(0, 3))); },
        [&] {
          const auto begin = rng.integer(-1, kMaxSide);
          return pick_range(pick(), begin, begin + rng.integer(0, 3));
        },
        [&] { return tanh(pick()); },
        [&] { return logistic(pick()); },
        [&] { return relu(pick()); },
        [&] { return log_softmax(pick()); },
        [&] { return pick_neg_log_softmax(pick(), rng.integer(-1, kMaxSide)); },
        [&] { return sum(picks(rng.integer(0, 3))); },
        [&] { return dropout(pick(), static_cast<double>(rng.integer(-1, 10)) / 10.0); },
    };

    for (std::int64_t k = rng.integer(1, kMaxOpsPerGraph); k > 0; --k) {
      const std::size_t before = g.size();
      try {
        const Expr e = ops[sz(rng.integer(0, static_cast<std::int64_t>(ops.size()) - 1))]();
        if (e.graph == &g) pool.push_back(e);  // else every operand came from `other`: valid there
        ++valid_ops;
      } catch (const InvalidArgument&) {
        ++invalid_ops;
        ASSERT_EQ(g.size(), before);  // a failed call appends nothing
      }
    }

    // Reduce the last expression to a scalar: 1ᵀ x 1.
    const Expr last = pool.back();
    const Dim d = last.dim();
    const Expr loss = input(g, Dim{1, d.rows}, std::vector<double>(sz(d.rows), 1.0)) * last *
                      input(g, Dim{d.cols}, std::vector<double>(sz(d.cols), 1.0));
    CpuExecutor ex;
    ex.forward(g, loss);
    ex.backward(g, loss);
    ASSERT_TRUE(std::isfinite(ex.scalar(loss)));
    for (const Expr& e : pool)
      for (double gv : ex.gradient(e)) ASSERT_TRUE(std::isfinite(gv));
    m.zero_gradients();
  }
  // Both kinds occur in quantity (the draws above make roughly half the calls invalid).
  EXPECT_GT(valid_ops, kGraphs);
  EXPECT_GT(invalid_ops, kGraphs / 2);
}

}  // namespace
}  // namespace prnn::graph
