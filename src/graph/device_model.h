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

// After a host backward (CpuExecutor, AutobatchExecutor) over nodes 0..last: every Model among
// them that is on the device gets its host gradients and touched rows uploaded, so the device
// copy stays the master. While the host copy is current (check_host_copy_current) the host
// gradients equal the device's plus what the host backward added, so the upload adds exactly that
// contribution; without it the next copy_to_host() would overwrite it and a device update would
// not see it. No-op for Models that are not on the device.
void push_host_gradients(const Graph& g, NodeId last);

}  // namespace prnn::graph
