// `prnn bench graph` (run_graph_bench, prnn/bench.h) on the 200-line excerpts in tests/data with
// tiny sizes: every executor gives its rows with positive finite values in the stated units, and
// the executors agree on the training loss of the measured passes (they compute the same thing).
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "prnn/bench.h"
#include "support/expect.h"

namespace prnn {
namespace {

std::string test_data(const std::string& name) {
  return std::string(PRNN_TEST_DATA_DIR) + "/" + name;
}

constexpr const char* kCpuImpls[] = {"prnn-cpu", "prnn-autobatch-cpu-depth",
                                     "prnn-autobatch-cpu-agenda"};

GraphBenchOptions tiny(std::vector<std::string> models) {
  GraphBenchOptions o;
  o.models = std::move(models);
  o.hidden = {8};
  o.batch = {1, 4};
  o.sentences = 8;
  o.repeats = 2;
  o.sst_file = test_data("sst_dev_200.txt");
  o.wikiner_file = test_data("wikiner_dev_200.txt");
  o.impls = {kCpuImpls, kCpuImpls + 3};  // the GPU rows are exercised by the GPU suite
  return o;
}

std::vector<BenchRow> run(const GraphBenchOptions& o) {
  std::vector<BenchRow> rows;
  run_graph_bench(o, [&](const BenchRow& r) { rows.push_back(r); });
  return rows;
}

const std::map<std::string, std::string> kUnits = {{"sentences_per_s", "sentences/s"},
                                                   {"words_per_s", "words/s"},
                                                   {"host_us_per_node", "us"},
                                                   {"exec_us_per_batch", "us"},
                                                   {"batches_per_graph", "batches"},
                                                   {"nodes_per_batch", "nodes"},
                                                   {"train_loss", "nats"}};

void check_rows(const std::vector<BenchRow>& rows, const std::vector<std::string>& models,
                bool words) {
  // case -> impl -> metric -> value
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> table;
  for (const BenchRow& r : rows) {
    EXPECT_EQ(r.suite, "graph");
    ASSERT_TRUE(kUnits.count(r.metric)) << r.metric;
    EXPECT_EQ(r.unit, kUnits.at(r.metric)) << r.metric;
    EXPECT_TRUE(std::isfinite(r.value) && r.value > 0.0)
        << r.case_ << " " << r.impl << " " << r.metric << " = " << r.value;
    EXPECT_FALSE(table[r.case_][r.impl].count(r.metric)) << "duplicate row " << r.metric;
    table[r.case_][r.impl][r.metric] = r.value;
  }
  std::set<std::string> expected_cases;
  for (const std::string& m : models)
    for (int b : {1, 4})
      expected_cases.insert("model=" + m + ";hidden=8;batch=" + std::to_string(b));
  std::set<std::string> cases;
  for (const auto& [c, impls] : table) cases.insert(c);
  EXPECT_EQ(cases, expected_cases);

  for (const auto& [c, impls] : table) {
    ASSERT_EQ(impls.size(), std::size(kCpuImpls)) << c;
    for (const char* impl : kCpuImpls) {
      ASSERT_TRUE(impls.count(impl)) << c << " lacks " << impl;
      const auto& metrics = impls.at(impl);
      const bool autobatch = std::string(impl).find("autobatch") != std::string::npos;
      std::set<std::string> want = {"sentences_per_s", "host_us_per_node", "exec_us_per_batch",
                                    "train_loss"};
      if (words) want.insert("words_per_s");
      if (autobatch) want.insert({"batches_per_graph", "nodes_per_batch"});
      std::set<std::string> got;
      for (const auto& [m, v] : metrics) got.insert(m);
      EXPECT_EQ(got, want) << c << " " << impl;
      if (autobatch) {
        EXPECT_GE(metrics.at("nodes_per_batch"), 1.0) << c << " " << impl;
      }
    }
    // The executors compute the same training run; fp32 summation order inside batched products
    // differs, so 1e-4 relative.
    const double reference = impls.at("prnn-cpu").at("train_loss");
    for (const char* impl : kCpuImpls)
      EXPECT_NEAR(impls.at(impl).at("train_loss"), reference, 1e-4 * std::abs(reference))
          << c << " " << impl;
  }
}

TEST(GraphBench, TreeLstmRowsForEveryExecutor) {
  const GraphBenchOptions o = tiny({"tree-lstm"});
  check_rows(run(o), o.models, /*words=*/false);
}

TEST(GraphBench, BiLstmTaggerRowsForEveryExecutor) {
  const GraphBenchOptions o = tiny({"bilstm-tagger"});
  check_rows(run(o), o.models, /*words=*/true);
}

TEST(GraphBench, OtherModelsRun) {
  GraphBenchOptions o = tiny({"rvnn", "td-rnn", "td-lstm", "bilstm-char-tagger"});
  o.sentences = 3;
  o.repeats = 1;
  const std::vector<BenchRow> rows = run(o);
  for (const std::string& m : o.models) {
    bool seen = false;
    for (const BenchRow& r : rows) seen = seen || r.case_.rfind("model=" + m + ";", 0) == 0;
    EXPECT_TRUE(seen) << m;
  }
}

TEST(GraphBench, OnlyTheGivenImpls) {
  GraphBenchOptions o = tiny({"tree-lstm"});
  o.impls = {"prnn-autobatch-cpu-agenda"};
  o.batch = {2};
  o.repeats = 1;
  for (const BenchRow& r : run(o)) EXPECT_EQ(r.impl, "prnn-autobatch-cpu-agenda");
}

TEST(GraphBench, BadOptionsThrow) {
  GraphBenchOptions o = tiny({"no-such-model"});
  test::expect_invalid([&] { run(o); }, {"no-such-model"});
  o = tiny({"tree-lstm"});
  o.impls = {"prnn-gpu-magic"};
  test::expect_invalid([&] { run(o); }, {"prnn-gpu-magic"});
  o = tiny({"tree-lstm"});
  o.sentences = 0;
  test::expect_invalid([&] { run(o); }, {"sentences"});
  o = tiny({"tree-lstm"});
  o.sst_file = test_data("no_such_file.txt");
  EXPECT_THROW(run(o), std::exception);
}

}  // namespace
}  // namespace prnn
