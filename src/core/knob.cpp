#include "core/knob.h"

#include <cstdlib>
#include <string>

#include "core/check.h"

namespace prnn {

std::optional<bool> switch_knob(const char* name) {
  const char* t = std::getenv(name);
  if (t == nullptr || *t == '\0') return std::nullopt;
  const std::string text = t;
  PRNN_EXPECT(text == "0" || text == "1", "{}: expected 0 or 1, got '{}'", name, text);
  return text == "1";
}

}  // namespace prnn
