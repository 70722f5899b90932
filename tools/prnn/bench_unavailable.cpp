// Builds without CUDA have no benchmark drivers.
#include "prnn/bench.h"
#include "prnn/error.h"

namespace prnn {
void run_scan_bench(const ScanBenchOptions&, const BenchSink&) {
  throw Unsupported("prnn bench scan", "prnn was built without CUDA (PRNN_CUDA=OFF)");
}
void run_cudnn_rnn_bench(const CudnnRnnBenchOptions&, const BenchSink&) {
  throw Unsupported("prnn bench cudnn-rnn", "prnn was built without CUDA (PRNN_CUDA=OFF)");
}
void run_rnn_bench(const RnnBenchOptions&, const BenchSink&) {
  throw Unsupported("prnn bench rnn/lstm/gru", "prnn was built without CUDA (PRNN_CUDA=OFF)");
}
void run_layers_bench(const LayersBenchOptions&, const BenchSink&) {
  throw Unsupported("prnn bench layers", "prnn was built without CUDA (PRNN_CUDA=OFF)");
}
}  // namespace prnn
