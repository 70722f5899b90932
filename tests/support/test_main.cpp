// Test entry point: a library warning or error logged during a test fails that test.
#include <gtest/gtest.h>

#include "prnn/log.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  prnn::set_log_level(prnn::LogLevel::Warn);
  prnn::set_log_sink([](prnn::LogLevel level, const std::string& message) {
    ADD_FAILURE() << "prnn logged a " << prnn::to_string(level) << ": " << message;
  });
  return RUN_ALL_TESTS();
}
