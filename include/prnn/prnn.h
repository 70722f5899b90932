// The whole public API of prnn.
#pragma once

#include "prnn/device.h"
#include "prnn/dtype.h"
#include "prnn/error.h"
#include "prnn/layers.h"
#include "prnn/log.h"
#include "prnn/rnn.h"
#include "prnn/tensor.h"

namespace prnn {
// "major.minor.patch"
const char* version();
}  // namespace prnn
