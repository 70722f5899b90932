// Host-side entry points of the scan kernels (one dispatch point per kernel family).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "scan/scan_params.h"

namespace prnn::scan {

// One thread per lane, all steps in order.
void launch_serial_scan(Mode mode, Elem elem, const ScanParams& p, cudaStream_t stream);

// Tiled parallel scan with a deterministic multi-level lookback (device_scan.cu).
struct ParallelTiling {
  int vector = 1;           // V: channels per thread (4 or 8: C % V == 0 and aligned tensors)
  int threads_per_row = 1;  // TPR
  int lane_width = 0;       // W = V * TPR: channels per tile
  int tile_steps = 0;       // L: steps per tile
  bool staged = false;      // forward rows staged through shared memory (tile_scan.cuh)
  // Fewest tiles a launch needs to take the staged form (fewer: the register form): measured on
  // an H100 (bench/scan/NOTES.md), 16-bit forward launches of 128-256 tiles (2^18-2^21
  // elements) were 6-13 % slower staged, of 2048 tiles 7 % faster.
  std::int64_t staged_min_tiles = 1024;
};
// widest_vector: the widest vector the call's tensors allow: 1; 4 (C % 4 == 0, aligned to 4
// elements); 8 (16-bit, C % 8 == 0, aligned to 16 bytes), which the 16-bit forward at C >= 32
// takes (8 channels a thread, held raw in registers). contiguous_rows: a lane block's step is one
// contiguous row (stride_t == C: batch 1 or batch-major); with C == W (fp32 at C = 4 and, from
// 2048 tiles, C = 8) the forward then stages rows, as it does for 16-bit tensors with C % 8 == 0
// in either layout (C >= 64 only where 8-channel vectors are not allowed).
ParallelTiling parallel_tiling(Mode mode, std::int64_t channels, int widest_vector,
                               int elem_bytes = 4, bool contiguous_rows = false);
// Fewest tiles a 16-bit forward launch needs to take 8-channel vectors (fewer: 4-channel ones).
// Its tiles are twice as long, so a small launch has half as many and leaves SMs idle: measured
// on an H200 (bench/scan/NOTES.md, lab run 28), bf16 at 1M elements (64 tiles) 18-22 % slower,
// from 1024 tiles 0-29 % faster.
inline constexpr std::int64_t kPacked16MinTiles = 1024;
// (A bool would convert to 1: say the width.)
ParallelTiling parallel_tiling(Mode, std::int64_t, bool, int = 4, bool = false) = delete;
void launch_parallel_scan(Mode mode, Elem elem, const ParallelTiling& tiling, const ScanParams& p,
                          cudaStream_t stream);

// ---- Auto: serial or parallel --------------------------------------------------------------------
// With enough lanes, one thread per lane walking time keeps memory as busy as the parallel scan
// and skips its lookback: measured on an H200 (bench/results/h200/layers.csv), the serial scan
// inside the layers is 1.3–3x faster at B·H = 2^20 lanes, equal at 2^16, 4x slower at 2^12.
inline constexpr std::int64_t kSerialLanes = std::int64_t{1} << 17;
struct AutoChoice {
  bool parallel;
  std::string reason;
};
AutoChoice choose_scan_algo(std::int64_t lanes, std::int64_t steps);

// ---- the parallel scan's workspace, shared by every tile-scan kernel (linear_scan.cpp) ---------
// Layout: status word (byte 0), epoch (4), tile counter (8), done counter (12), then the lookback
// records from kScanRecordsOffset on. The kernels keep the launch state themselves (tile_scan.cuh
// finish_tile), so a launch needs no host-side bookkeeping and may be captured in a CUDA graph.
// Several tilings (and kernels) may share one workspace as long as their launches run in order
// on one stream: each launch carries a fresh epoch.
inline constexpr std::size_t kScanRecordsOffset = 256;

// Fills the tiling fields of p (lane blocks, time tiles, tile count, levels, level counts) for
// `tiling`; p.steps, p.batch and p.channels must be set. Returns the workspace bytes it needs.
std::size_t plan_parallel_scan(const ParallelTiling& tiling, ScanParams& p);
// Zeroes a new workspace and sets its epoch to 1 (zeroed records never match). Synchronous.
void init_parallel_scan_workspace(void* workspace, std::size_t bytes);
// Points p's launch state and records into `workspace` (>= plan_parallel_scan bytes, initialized).
void bind_parallel_scan(const ParallelTiling& tiling, void* workspace, ScanParams& p);

}  // namespace prnn::scan
