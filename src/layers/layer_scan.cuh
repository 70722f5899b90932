// The two drivers of a layer's scan op, and the one dispatch from runtime (mode, serial or
// parallel, vector width, threads per row) to a kernel.
//   parallel_layer_kernel  the tile scan (scan/tile_scan.cuh): tiles of W channels × L steps,
//                          deterministic lookback; 256 threads, grid = ScanParams::num_tiles.
//   serial_layer_kernel    SLR, the paper's baseline: one thread per lane (b, h) walks its len
//                          valid steps in order, calling the same Op::load / Op::store per
//                          step, then Op::store_padding for t in [len, T); 256 threads,
//                          consecutive threads = consecutive h (coalesced).
// An Op is the interface tile_scan.cuh documents; every layer op here uses Args = LayerArgs.
// Sequence lengths: ScanParams::lengths (nullable: every lane has T valid steps), [B] on the
// device, each in [0, T] (checked on the host before the launch).
#pragma once

#include <string>

#include "core/cuda_check.h"
#include "layers/layer_kernels.h"
#include "prnn/error.h"
#include "scan/tile_scan.cuh"

namespace prnn::layers {

inline constexpr int kSerialThreads = 256;

// Steps per thread of the parallel layer kernels: the plain scan's tuned values.
template <scan::Mode M, int V, int TPR>
inline constexpr int kLayerSteps = scan::kStepsPerThread<M, V, TPR>;

template <class Op, int V, int TPR>
__global__ void __launch_bounds__(scan::kTileThreads, (scan::kMinBlocks<Op::kMode, V, TPR>))
    parallel_layer_kernel(scan::ScanParams p, LayerArgs args) {
  scan::tile_scan<Op, V, TPR, kLayerSteps<Op::kMode, V, TPR>>(p, args);
}

template <class Op>
__global__ void __launch_bounds__(kSerialThreads) serial_layer_kernel(scan::ScanParams p,
                                                                      LayerArgs args) {
  const std::int64_t lane = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (lane >= static_cast<std::int64_t>(p.batch) * p.channels) return;
  scan::Lane ln;
  ln.b = static_cast<std::int32_t>(lane / p.channels);
  ln.c = static_cast<std::int32_t>(lane % p.channels);
  ln.len = p.lengths != nullptr ? p.lengths[ln.b] : p.steps;
  ln.base = ln.b * p.stride_b + ln.c;
  ln.state_index = lane;
  ln.ok = true;
  const std::int64_t dir = scan::scan_dir<Op::kMode>(p);
  float state[1] = {Op::init(p, args, ln.b, ln.c)};
  for (std::int64_t q = 0; q < ln.len; ++q) {
    const std::int64_t t = dir > 0 ? q : ln.len - 1 - q;
    const scan::Pos at{q, t, ln.base + t * p.stride_t};
    float coef[1], in[1];
    typename Op::template Step<1> step;
    Op::template load<1>(p, args, ln, at, coef, in, step);
    state[0] = fmaf(coef[0], state[0], in[0]);
    Op::template store<1>(p, args, ln, at, state, step);
  }
  for (std::int64_t t = ln.len; t < p.steps; ++t) Op::template store_padding<1>(p, args, ln, t);
  Op::template store_final<1>(p, args, ln, state);
}

template <class Op, int V, int TPR>
void launch_parallel(const LayerLaunch& l, const LayerArgs& args, cudaStream_t stream) {
  parallel_layer_kernel<Op, V, TPR>
      <<<static_cast<unsigned>(l.p.num_tiles), scan::kTileThreads, 0, stream>>>(l.p, args);
}

// The one dispatch point of the layer kernels.
template <class Op>
void launch_op(const LayerLaunch& l, const LayerArgs& args, cudaStream_t stream) {
  if (!l.parallel) {
    const std::int64_t lanes = static_cast<std::int64_t>(l.p.batch) * l.p.channels;
    const auto blocks = static_cast<unsigned>((lanes + kSerialThreads - 1) / kSerialThreads);
    serial_layer_kernel<Op><<<blocks, kSerialThreads, 0, stream>>>(l.p, args);
    PRNN_CHECK_LAUNCH();
    return;
  }
  const int tpr = l.tiling.threads_per_row;
  bool launched = true;
  if (l.tiling.vector == 4) {
    switch (tpr) {
      case 1: launch_parallel<Op, 4, 1>(l, args, stream); break;
      case 2: launch_parallel<Op, 4, 2>(l, args, stream); break;
      case 4: launch_parallel<Op, 4, 4>(l, args, stream); break;
      case 8: launch_parallel<Op, 4, 8>(l, args, stream); break;
      default: launched = false;
    }
  } else if (l.tiling.vector == 1) {
    switch (tpr) {
      case 1: launch_parallel<Op, 1, 1>(l, args, stream); break;
      case 2: launch_parallel<Op, 1, 2>(l, args, stream); break;
      case 4: launch_parallel<Op, 1, 4>(l, args, stream); break;
      case 8: launch_parallel<Op, 1, 8>(l, args, stream); break;
      case 16: launch_parallel<Op, 1, 16>(l, args, stream); break;
      case 32: launch_parallel<Op, 1, 32>(l, args, stream); break;
      default: launched = false;
    }
  } else {
    launched = false;
  }
  if (!launched)
    throw InternalError("layer scan: no kernel for vector " + std::to_string(l.tiling.vector) +
                        " x " + std::to_string(tpr) + " threads per row");
  PRNN_CHECK_LAUNCH();
}

// Both modes of one op family (template <class T, Mode M> class Op), f32 tensors.
template <template <class, scan::Mode> class Op>
void launch_family(const LayerLaunch& l, const LayerArgs& args, cudaStream_t stream) {
  if (l.mode == scan::Mode::Forward)
    launch_op<Op<float, scan::Mode::Forward>>(l, args, stream);
  else
    launch_op<Op<float, scan::Mode::Backward>>(l, args, stream);
}

}  // namespace prnn::layers
