// The storage behind Model and its Parameter / LookupParameter handles: fp32 host vectors,
// row-major, one entry per parameter in creation order (handles are indices into these).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "prnn/graph.h"

namespace prnn::graph {

struct DenseParameter {
  Dim dim;
  std::vector<float> value;  // [rows, cols]
  std::vector<float> grad;   // [rows, cols]
};

struct LookupTable {
  std::int64_t size = 0;
  Dim dim;                    // of one row
  std::vector<float> value;   // [size, dim.size()]
  std::vector<float> grad;    // [size, dim.size()]
  std::vector<bool> touched;  // [size]: row has a gradient since the last clear
};

struct Model::Storage {
  std::mt19937_64 gen;
  std::vector<DenseParameter> params;
  std::vector<LookupTable> tables;
};

}  // namespace prnn::graph
