// Checks that a call is rejected with prnn::InvalidArgument, and reads its message.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "prnn/error.h"

namespace prnn::test {

// The message of the InvalidArgument f throws, or a marker that it threw none.
inline std::string invalid_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "<no InvalidArgument thrown>";
}

// Runs f, expects InvalidArgument whose message contains every one of `fragments`.
inline void expect_invalid(const std::function<void()>& f,
                           const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected prnn::InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos)
          << "message '" << msg << "' lacks '" << frag << "'";
  }
}

}  // namespace prnn::test
