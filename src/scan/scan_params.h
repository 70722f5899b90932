// Kernel parameters of the linear-scan family (POD, passed by value), shared by the serial and
// the parallel kernels and by the host dispatch.
//
// One "lane" is a (b, c) pair; a lane's elements sit at t*stride_t + b*stride_b + c. The kernels
// walk each lane in logical order q = 0..T-1; q < len maps to a physical step t(q) (forward or
// reversed), q >= len is padding whose physical step is q itself and whose outputs are zero.
//   Forward mode:  state_q = a[t(q)]·state_{q-1} + x[t(q)];  out = h
//   Backward mode: q runs against the forward scan (q = 0 is the forward's last step);
//                  g_q = a[t(q) - fdir]·g_{q-1} + dh[t(q)]  (coefficient 1 at q = 0, where the
//                  carry is dh_final); dx = g; da = g · h_prev with h_prev = h[t(q) - fdir] or h0.
#pragma once

#include <cstdint>

namespace prnn::scan {

enum class Mode : std::uint8_t { Forward, Backward };

// Elementwise type of a, x, h and the gradients; arithmetic is always fp32.
enum class Elem : std::uint8_t { F32, F16, BF16 };

// The lookback's hierarchy: a record of level l + 1 folds 2^kFanoutLog2 records of level l.
inline constexpr int kFanoutLog2 = 5;  // 32 children per lookback block
inline constexpr int kMaxLevels = 5;   // 32^5 time tiles per lane block

// Steps per thread of a tile, by pass, vector width and threads per row (the kernels' R; the
// host sizes tiles with it). Longer tiles read fewer lookback records per element, but cost
// registers. Measured (bench/scan/NOTES.md): 8 steps win for the forward with 4-channel vectors
// and >= 2 threads per row (H200), and for the backward at 2 and 4 threads per row, i.e. C = 5..32
// (H100: +7-9 % at C = 32, +5 % at C = 16, the rest level); 4 steps elsewhere for vectors, 8 for
// scalars.
constexpr int steps_per_thread(Mode mode, int vector, int threads_per_row) {
  if (vector == 1) return 8;
  if (mode == Mode::Forward) return threads_per_row >= 2 ? 8 : 4;
  return threads_per_row == 2 || threads_per_row == 4 ? 8 : 4;
}

// Status bits the kernels report through ScanParams::status.
inline constexpr unsigned kStatusTimeout = 1u;
inline constexpr unsigned kStatusBadLength = 2u;

struct ScanParams {
  std::int64_t steps = 0;
  std::int32_t batch = 0;
  std::int32_t channels = 0;
  std::int64_t stride_t = 0;  // elements between consecutive steps of a lane
  std::int64_t stride_b = 0;  // elements between consecutive batch entries
  bool reverse = false;
  const std::int32_t* lengths = nullptr;  // [B] or null (all T)

  const void* a = nullptr;     // coefficients
  const void* u = nullptr;     // forward: x; backward: dh
  const void* h = nullptr;     // backward: the forward output
  const void* init = nullptr;  // forward: h0; backward: dh_final (null = zeros) [B, C]
  const void* h0 = nullptr;    // backward: forward's h0 for da at the first step (null = zeros)
  void* out = nullptr;         // forward: h; backward: dx
  void* out2 = nullptr;        // backward: da
  void* final_out = nullptr;   // forward: h_final; backward: dh0 (null = not written) [B, C]

  // Parallel scan only: tiling and the lookback workspace.
  std::int32_t lane_blocks_per_batch = 0;  // ceil(C / W)
  std::int64_t time_tiles = 0;             // K = ceil(T / L)
  std::int64_t num_tiles = 0;              // K * B * lane_blocks_per_batch
  int levels = 0;
  std::int64_t level_count[kMaxLevels] = {};  // aggregates per lane block at each level
  // [lane_blocks][level_count][W] records {A, X, epoch tag, 0} (16 bytes each)
  float* agg[kMaxLevels] = {};
  // Launch state in the workspace, kept by the kernel itself so that every launch (also a CUDA
  // graph replay) is self-contained: CTAs tag their records with *epoch, and the last CTA to
  // finish (counted in *done_counter) resets the counter and advances the epoch, so no record of
  // an earlier launch ever matches.
  unsigned* epoch = nullptr;
  unsigned* done_counter = nullptr;
  unsigned* status = nullptr;
  std::uint64_t timeout_ns = 0;
};

}  // namespace prnn::scan
