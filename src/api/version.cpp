#include "prnn/prnn.h"

namespace prnn {
const char* version() { return "0.1.0"; }
}  // namespace prnn
