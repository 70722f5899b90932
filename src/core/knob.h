// Environment knobs: switches read once, where a component is built, for A/B runs and tests.
#pragma once

#include <optional>

namespace prnn {

// An on/off knob: true for "1", false for "0", nullopt when unset or empty; any other value is
// an InvalidArgument naming the knob, what it expects and what it got.
std::optional<bool> switch_knob(const char* name);

}  // namespace prnn
