// The storage behind Model and its Parameter / LookupParameter handles: fp32 host vectors,
// row-major, one entry per parameter in creation order (handles are indices into these).
#pragma once

#include <cstdint>
#include <memory>
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

struct DeviceMirror;  // graph/device_model.h: the device copies of a Model

struct Model::Storage {
  std::mt19937_64 gen;
  std::vector<DenseParameter> params;
  std::vector<LookupTable> tables;
  // Set once a GPU executor used the Model (Model::on_device); the device copy is then the master.
  std::shared_ptr<DeviceMirror> device;
  // The device copy changed (backward, a device update) since the last Model::copy_to_host.
  bool host_stale = false;
};

}  // namespace prnn::graph
