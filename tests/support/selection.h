// The GoogleTest cases this run selected (--gtest_filter, sharding), for suites that compute
// their reference results up front for the selected cases only.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace prnn::test {

// The names (without their suite) of every case the run will run, e.g.
// "MatchesReference/persistent_relu_T333_B4_I16_H2048_L1_uni".
inline std::set<std::string> selected_test_names() {
  std::set<std::string> selected;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j)
      if (suite->GetTestInfo(j)->should_run()) selected.insert(suite->GetTestInfo(j)->name());
  }
  return selected;
}

}  // namespace prnn::test
