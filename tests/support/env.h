// An environment variable set for a scope (the library's knobs), then unset.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

namespace prnn::test {

struct EnvScope {
  const char* name;
  EnvScope(const char* n, const char* value) : name(n) { EXPECT_EQ(setenv(n, value, 1), 0); }
  ~EnvScope() { unsetenv(name); }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;
};

}  // namespace prnn::test
