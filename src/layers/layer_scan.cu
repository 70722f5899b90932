// The layer kernels' tiling and the choice of recurrence (the kernels: gilr.cu, gilr_lstm.cu,
// sru.cu, qrnn.cu, all driven by layer_scan.cuh).
#include "layers/layer_scan.cuh"

namespace prnn::layers {
namespace {

template <scan::Mode M, int V>
int steps_per_thread(int tpr) {
  switch (tpr) {
    case 1: return kLayerSteps<M, V, 1>;
    case 2: return kLayerSteps<M, V, 2>;
    case 4: return kLayerSteps<M, V, 4>;
    case 8: return kLayerSteps<M, V, 8>;
    case 16: return kLayerSteps<M, V, 16>;
    default: return kLayerSteps<M, V, 32>;
  }
}

}  // namespace

scan::ParallelTiling layer_tiling(scan::Mode mode, std::int64_t channels, bool vectorized) {
  // Vector width and threads per row as the plain scan picks them; steps from our kernels.
  scan::ParallelTiling t = scan::parallel_tiling(mode, channels, vectorized ? 4 : 1);
  int steps = 0;
  if (mode == scan::Mode::Forward)
    steps = t.vector == 4 ? steps_per_thread<scan::Mode::Forward, 4>(t.threads_per_row)
                          : steps_per_thread<scan::Mode::Forward, 1>(t.threads_per_row);
  else
    steps = t.vector == 4 ? steps_per_thread<scan::Mode::Backward, 4>(t.threads_per_row)
                          : steps_per_thread<scan::Mode::Backward, 1>(t.threads_per_row);
  t.tile_steps = scan::kTileThreads / t.threads_per_row * steps;
  return t;
}

void launch_layer_scan(Recurrence r, const LayerLaunch& launch, const LayerArgs& args,
                       cudaStream_t stream) {
  switch (r) {
    case Recurrence::Gilr: return launch_gilr_scan(launch, args, stream);
    case Recurrence::GilrLstmCell: return launch_gilr_lstm_cell_scan(launch, args, stream);
    case Recurrence::Sru: return launch_sru_scan(launch, args, stream);
    case Recurrence::Qrnn: return launch_qrnn_scan(launch, args, stream);
  }
}

}  // namespace prnn::layers
