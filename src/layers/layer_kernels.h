// Host-side entry points of the layer scan kernels (layer_ops.cuh, layer_scan.cuh): one scan per
// recurrence, its gate math fused into the scan's loads and stores.
//
// A layer's tensors as the kernels see them (T steps, B batch, H hidden, R projection rows):
//   P   [T, B, R]    fp32 pre-activations without bias (the projection GEMMs' output; GILR-LSTM's
//                    i,f,z,o columns include U h̃_{t-1})
//   dP  [T, B, R]    fp32 their gradients (written by the backward scans)
//   S   [T+1, B, H]  fp32 states shifted by one step: S[0] = state0, S[t+1] = the state after
//                    step t (written by the forward scan, read by the backward scan)
// A scan lane is (b, h): ScanParams channels = H, stride_t = B·H, stride_b = H, so Pos::at is
// the element offset of (t, b, h) in every [T, B, H] tensor, and P's row of (t, b) is t·B + b.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "scan/scan_kernels.h"

namespace prnn::layers {

// The recurrences, each one op pair (forward, backward) in its own .cu (helpers: layer_ops.cuh).
//   Gilr          h = σ(P_g+b_g) ⊙ h + (1-σ) ⊙ tanh(P_u+b_u)   columns (g; u) at 0, H
//                 (also GILR-LSTM's surrogate h̃, columns (s; u), no y)
//   GilrLstmCell  c = f ⊙ c + i ⊙ z, y = o ⊙ c                  columns (i; f; z; o) at 2H..5H
//   Sru           c = f ⊙ c + (1-f) ⊙ x̃, y = r ⊙ tanh(c) + (1-r) ⊙ s   columns (x̃; f; r; s)
//   Qrnn          c = f ⊙ c + (1-f) ⊙ z, y = o ⊙ c                columns (z; f; o)
enum class Recurrence : std::uint8_t { Gilr, GilrLstmCell, Sru, Qrnn };

// The tensors of one scan launch (POD). User tensors (x, y, params, states and their gradients)
// are fp32: the caller's f32 tensors, or the layer's fp32 copies of 16-bit ones; the reserve
// (P, dP, S, dnext) is always fp32. Steps t >= lengths[b] (ScanParams::lengths) are padding:
// layer_ops.cuh says what the ops write there.
struct LayerArgs {
  std::int32_t hidden = 0;  // H
  std::int64_t rows = 0;    // R: row length of P and dP
  const float* P = nullptr;
  float* dP = nullptr;
  float* S = nullptr;
  const float* bias = nullptr;  // b of the flat parameters (its own layout per layer)

  // Forward.
  void* y = nullptr;          // [T, B, H]; null: not written (GILR-LSTM's surrogate)
  void* state_n = nullptr;    // [B, H] the state after the last step (nullable)
  const void* x = nullptr;    // SRU with I == H: the highway input s = x [T, B, H]; else null

  // Backward.
  const void* dy = nullptr;        // [T, B, H]; null for GILR-LSTM's surrogate
  const float* dnext = nullptr;    // GILR-LSTM's surrogate: [T, B, H], row t = dL/dh̃_{t-1}
                                   // through U (row 0 goes to dstate0)
  const void* dstate_n = nullptr;  // [B, H] (nullable: zeros)
  void* dstate0 = nullptr;         // [B, H] (nullable: not written)
  void* dx = nullptr;              // SRU with I == H: written with the highway term (1-r) ⊙ dy,
                                   // the dx GEMM then accumulates; else null (SRU with x given
                                   // and dx null: the caller wants no dx, the term is dropped)
};

struct LayerLaunch {
  scan::Mode mode = scan::Mode::Forward;
  bool parallel = true;          // the tile scan; false: one thread per lane, all steps in order
  scan::ParallelTiling tiling;   // parallel only; from layer_tiling()
  scan::ScanParams p;            // geometry and lengths; parallel: tiling fields, workspace
};

// The tiling the parallel layer kernels use for `channels` lanes per batch entry (vectorized:
// 4 channels per thread, needs H % 4 == 0 and 16-byte aligned tensors).
scan::ParallelTiling layer_tiling(scan::Mode mode, std::int64_t channels, bool vectorized);

void launch_layer_scan(Recurrence r, const LayerLaunch& launch, const LayerArgs& args,
                       cudaStream_t stream);

// One launcher per recurrence (one .cu file each); launch_layer_scan picks among them.
void launch_gilr_scan(const LayerLaunch& launch, const LayerArgs& args, cudaStream_t stream);
void launch_gilr_lstm_cell_scan(const LayerLaunch& launch, const LayerArgs& args,
                                cudaStream_t stream);
void launch_sru_scan(const LayerLaunch& launch, const LayerArgs& args, cudaStream_t stream);
void launch_qrnn_scan(const LayerLaunch& launch, const LayerArgs& args, cudaStream_t stream);

}  // namespace prnn::layers
