// The device copies of a Model (contract in prnn/graph.h, "Device copies"): per dense parameter a
// value and a gradient buffer, per lookup table value and gradient [size, row] and one touched
// byte per row; same row-major layouts as the host vectors of graph/model_storage.h.
// device_mirror() creates the copies on first use and copies parameters added since; everything
// else (executors, trainers) reaches the buffers through it. Host side only, no kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/model_storage.h"
#include "prnn/graph.h"
#include "prnn/tensor.h"

namespace prnn::graph {

struct DeviceMirror {
  struct Dense {
    std::size_t n = 0;  // elements
    DeviceBuffer value, grad;
  };
  struct Table {
    std::int64_t rows = 0;
    std::size_t row = 0;  // elements per row
    DeviceBuffer value, grad;
    DeviceBuffer touched;  // [rows] bytes, 1: the row has a gradient
  };
  std::vector<Dense> params;
  std::vector<Table> tables;
};

// The Model's device copies, created (values uploaded, gradients zero) on first use and grown by
// parameters added since. Throws Unsupported without CUDA or without a GPU.
DeviceMirror& device_mirror(Model& m);

// Model::copy_to_host / zero_gradients' device halves on the storage (save() is const).
void copy_device_to_host(Model::Storage& s);
void zero_device_gradients(Model::Storage& s);

// Throws InvalidArgument, naming `who`, when a parameter or lookup node among 0..last belongs to
// a Model whose host copy is stale (the CPU executors read host values).
void check_host_copy_current(const Graph& g, NodeId last, const char* who);

}  // namespace prnn::graph
