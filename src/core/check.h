// Internal checks shared by every subsystem.
//   PRNN_EXPECT(cond, fmt, args...)  user error -> InvalidArgument with a formatted message
//   PRNN_ASSERT(cond)                broken invariant inside prnn -> InternalError
// Uses fmt, which nvcc cannot compile: .cu files keep to kernels and thin launchers, and the
// argument checks live in the .cpp dispatch code that calls them.
#pragma once

#include <fmt/format.h>

#include "prnn/error.h"

#define PRNN_EXPECT(cond, ...)                                  \
  do {                                                          \
    if (!(cond)) throw ::prnn::InvalidArgument(fmt::format(__VA_ARGS__)); \
  } while (0)

#define PRNN_ASSERT(cond)                                                                       \
  do {                                                                                          \
    if (!(cond))                                                                                \
      throw ::prnn::InternalError(fmt::format("{}:{}: internal invariant failed: {}", __FILE__, \
                                              __LINE__, #cond));                                \
  } while (0)
