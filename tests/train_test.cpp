// The demo job trains: the loss falls and the first-symbol task is learned.
#include <gtest/gtest.h>

#include "prnn/error.h"
#include "prnn/train.h"

namespace prnn {
namespace {

TEST(Demo, LossFallsAndTaskIsLearned) {
  DemoConfig c;
  c.steps = 6;
  c.iterations = 300;
  c.seed = 7;
  std::int64_t calls = 0;
  const TrainResult r = run_demo(c, [&](const TrainProgress& p) {
    ++calls;
    EXPECT_EQ(p.iteration, calls);
    EXPECT_GT(p.tokens_per_second, 0.0);
  });
  EXPECT_EQ(calls, 300);
  EXPECT_LT(r.final_loss, 0.1 * r.first_loss);
  EXPECT_GE(r.final_accuracy, 0.95);
}

TEST(Demo, RejectsBadConfig) {
  DemoConfig c;
  c.hidden = 0;
  EXPECT_THROW(run_demo(c), InvalidArgument);
}

}  // namespace
}  // namespace prnn
