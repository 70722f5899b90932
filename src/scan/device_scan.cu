// Parallel linear recurrence (PLR), forward and backward, one launch, single pass over memory.
//   Forward:  h_q = a_q·h_{q-1} + x_q            Backward: g_q = a_{s+1}·g_{q-1} + dh_q,
//                                                           dx = g, da = g·h_{s-1}, dh0 = a_0·g_last
//   (mapping of logical step q to memory, padding and lengths: scan_params.h)
// Tiles:    a tile is W channels of one batch entry (a "lane block") × L = 8·(32/W)·R steps.
//           Thread (row, w) owns channel w and R = 8 consecutive steps; a warp holds 32/W rows.
// Per tile: 1. load coefficients and inputs for R steps into registers (fp32);
//           2. fold them into the pair (A, X) (the map h -> A·h + X), scan the pairs across rows
//              (warp shuffles, then across warps through shared memory) -> exclusive prefixes;
//           3. the tile's aggregate is published, and, when the tile closes a block of 32
//              tiles (or 32 blocks, ...), the aggregate of that block; then the aggregates of
//              everything before the tile are folded, in a fixed order, into the carry-in;
//           4. every thread applies its prefix to the carry, rescans its R steps from registers
//              and writes the outputs.
// Lookback: deterministic by construction. The carry of time tile j of a lane block is
//           init ∘ (level-ℓ aggregates of the blocks before j, top level first, ≤ 31 per level)
//           — always the same aggregates combined by the same tree, whatever the timing, and
//           each aggregate depends only on data (never on another tile's carry), so no chain
//           of waits forms. An aggregate is a 16-byte record tagged with the launch's epoch (no
//           reset between launches); each level costs one L2 round trip, all 8 warps loading
//           in parallel. Waits are bounded by timeout_ns and report kStatusTimeout, never hang.
// Launch:   one CTA of 256 threads per tile. A CTA claims its tile from a counter in the
//           workspace (64-bit, never reset: launch e owns ids [base, base + tiles)), so tiles
//           are claimed in order and every tile waited on belongs to a CTA already running —
//           forward progress without co-residency, and the block scheduler overlaps one CTA's
//           lookback with other CTAs' loads.
// Memory:   forward reads a, x and writes h (12 B/elem at fp32); backward reads a, h, dh and
//           writes da, dx (20 B/elem).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "prnn/error.h"
#include "scan/elem.cuh"
#include "scan/scan_kernels.h"

namespace prnn::scan {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStepsPerThread = 8;   // R
constexpr int kFanoutLog2 = 5;       // 32 children per lookback block
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// The affine map h -> a·h + x. compose(first, then) applies `first`, then `then`.
struct Pair {
  float a, x;
};
__device__ __forceinline__ Pair compose(Pair first, Pair then) {
  return {then.a * first.a, fmaf(then.a, first.x, then.x)};
}

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A published aggregate: the pair (A, X) of one channel with the launch's epoch as its tag, in
// one aligned 16-byte record written by a single vector store and read by a single vector load
// (the same single-transaction assumption CUB's tile descriptors make), so a reader that sees the
// tag sees the pair: no separate flag, no fence.
__device__ __forceinline__ void store_record(float4* slot, Pair v, unsigned epoch) {
  __stcg(slot, make_float4(v.a, v.x, __uint_as_float(epoch), 0.0f));
}
__device__ __forceinline__ bool tagged(const float4& r, unsigned epoch) {
  return __float_as_uint(r.z) == epoch;
}

// Channels per warp when the 8 warps of a CTA share the W channels of a lane block.
template <int W>
inline constexpr int kChannelsPerWarp = (W + kWarps - 1) / kWarps;

// Whole CTA: fold records [first, first + n) (n <= 32) of one level, in order, for every channel.
// Warp v owns channels v, v + 8, ...; lane i loads item i, so a level costs one round trip to L2;
// the items are then combined by a fixed tree over the lanes (deterministic for every n).
// On return lane 0 of each warp holds the fold of its k-th channel in out[k].
template <int W>
__device__ void fold_items(const ScanParams& p, int level, std::int64_t lane_block,
                           std::int64_t first, int n, Pair (&out)[kChannelsPerWarp<W>]) {
  constexpr int K = kChannelsPerWarp<W>;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const float4* rec = reinterpret_cast<const float4*>(p.agg[level]) +
                      (lane_block * p.level_count[level] + first) * W;
  float4 v[K];
  bool ready = true;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int ch = warp + kWarps * k;
    v[k] = make_float4(1.0f, 0.0f, __uint_as_float(p.epoch), 0.0f);
    if (ch < W && lane < n) {
      v[k] = __ldcg(rec + static_cast<std::int64_t>(lane) * W + ch);
      ready = ready && tagged(v[k], p.epoch);
    }
  }
  std::uint64_t start = 0;
  while (!__all_sync(kFullMask, ready)) {
    const std::uint64_t now = global_ns();
    if (start == 0) {
      start = now;
    } else if (now - start > p.timeout_ns) {
      if (lane == 0) atomicOr(p.status, kStatusTimeout);
      break;
    }
    __nanosleep(20);
    ready = true;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int ch = warp + kWarps * k;
      if (ch < W && lane < n && !tagged(v[k], p.epoch)) {
        v[k] = __ldcg(rec + static_cast<std::int64_t>(lane) * W + ch);
        ready = ready && tagged(v[k], p.epoch);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    Pair acc{v[k].x, v[k].y};
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const float oa = __shfl_down_sync(kFullMask, acc.a, d);
      const float ox = __shfl_down_sync(kFullMask, acc.x, d);
      if ((lane & (2 * d - 1)) == 0) acc = compose(acc, Pair{oa, ox});
    }
    out[k] = acc;
  }
}

// Where a tile lives and which part of it this thread owns.
struct TileCoords {
  std::int64_t j = 0;            // time tile
  std::int64_t lane_block = 0;
  std::int64_t len = 0;          // valid steps of this thread's sequence
  std::int64_t base = 0;         // element offset of (t = 0, b, c)
  std::int64_t state_index = 0;  // b * C + c
  std::int64_t q0 = 0;           // first logical step of this thread
  std::int64_t channel0_index = 0;  // b * C + (first channel of the lane block)
  std::int32_t channel0 = 0;        // first channel of the lane block
  bool lane_ok = false;          // c < C
};

template <int W, int R>
__device__ TileCoords tile_coords(const ScanParams& p, std::int64_t tile, int w, int row) {
  constexpr std::int64_t L = static_cast<std::int64_t>(kWarps) * (32 / W) * R;
  // 32-bit division: the host guarantees fewer than 2^31 tiles.
  const auto t32 = static_cast<std::uint32_t>(tile);
  const auto lane_blocks = static_cast<std::uint32_t>(p.batch) *
                           static_cast<std::uint32_t>(p.lane_blocks_per_batch);
  const auto lpb = static_cast<std::uint32_t>(p.lane_blocks_per_batch);
  TileCoords tc;
  tc.j = t32 / lane_blocks;
  const std::uint32_t lb = t32 - static_cast<std::uint32_t>(tc.j) * lane_blocks;
  tc.lane_block = lb;
  const auto b = static_cast<std::int32_t>(lb / lpb);
  const std::int32_t c = static_cast<std::int32_t>(lb - static_cast<std::uint32_t>(b) * lpb) * W + w;
  tc.channel0_index = static_cast<std::int64_t>(b) * p.channels + (c - w);
  tc.channel0 = c - w;
  tc.lane_ok = c < p.channels;
  tc.len = p.steps;
  if (p.lengths != nullptr) {
    tc.len = p.lengths[b];
    if (tc.len < 0 || tc.len > p.steps) {
      if (tc.j == 0 && threadIdx.x == 0) atomicOr(p.status, kStatusBadLength);
      tc.len = tc.len < 0 ? 0 : p.steps;
    }
  }
  tc.base = b * p.stride_b + c;
  tc.state_index = static_cast<std::int64_t>(b) * p.channels + c;
  tc.q0 = tc.j * L + static_cast<std::int64_t>(row) * R;
  return tc;
}

// The R steps a thread owns, in fp32. Padding and out-of-range steps are the identity (1, 0).
template <Mode M, int R>
struct TileData {
  float coef[R];
  float in[R];
  float hprev[M == Mode::Backward ? R : 1];
};

template <class T, Mode M, int R>
__device__ void load_tile(const ScanParams& p, const TileCoords& tc, TileData<M, R>& d) {
  const std::int64_t fdir = p.reverse ? -1 : 1;
  const std::int64_t dir = M == Mode::Forward ? fdir : -fdir;
  const std::int64_t st = p.stride_t;
  // Physical step of q0; consecutive q move by dir.
  const std::int64_t t0 = dir > 0 ? tc.q0 : tc.len - 1 - tc.q0;
  const T* a = static_cast<const T*>(p.a) + tc.base + t0 * st;
  const T* u = static_cast<const T*>(p.u) + tc.base + t0 * st;
  const T* h = static_cast<const T*>(p.h) + tc.base + t0 * st;
  const std::int64_t step = dir * st;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t q = tc.q0 + r;
    d.coef[r] = 1.0f;
    d.in[r] = 0.0f;
    if constexpr (M == Mode::Backward) d.hprev[r] = 0.0f;
    if (tc.lane_ok && q < tc.len) {
      if constexpr (M == Mode::Forward) {
        d.coef[r] = load_elem(a, r * step);
      } else {
        if (q != 0) d.coef[r] = load_elem(a, r * step + fdir * st);
        if (q != tc.len - 1) {
          d.hprev[r] = load_elem(h, r * step - fdir * st);
        } else if (p.h0 != nullptr) {
          d.hprev[r] = load_elem(static_cast<const T*>(p.h0), tc.state_index);
        }
      }
      d.in[r] = load_elem(u, r * step);
    }
  }
}

template <class T, Mode M, int W>
__global__ void __launch_bounds__(kThreads) parallel_scan_kernel(ScanParams p) {
  constexpr int kRowsPerWarp = 32 / W;
  constexpr int R = kStepsPerThread;

  __shared__ Pair s_warp_total[kWarps][W];
  __shared__ float s_carry[W];
  __shared__ std::int64_t s_tile;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int w = lane % W;
  const int row = warp * kRowsPerWarp + lane / W;
  const std::int64_t fdir = p.reverse ? -1 : 1;
  const std::int64_t dir = M == Mode::Forward ? fdir : -fdir;
  const std::int64_t st = p.stride_t;

  // Tiles are claimed in order from a counter, so every tile this one waits for belongs to a CTA
  // that is already running: forward progress needs no co-residency.
  if (threadIdx.x == 0)
    s_tile = static_cast<std::int64_t>(atomicAdd(p.tile_counter, 1ull) - p.tile_base);
  __syncthreads();
  const std::int64_t tile = s_tile;
  const TileCoords tc = tile_coords<W, R>(p, tile, w, row);
  TileData<M, R> cur;
  load_tile<T, M, R>(p, tc, cur);

  // 1. Thread fold, then scan across rows: within the warp (stride W), then across warps.
  Pair inc{1.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < R; ++r) inc = compose(inc, Pair{cur.coef[r], cur.in[r]});
#pragma unroll
  for (int d = W; d < 32; d *= 2) {
    const float pa = __shfl_up_sync(kFullMask, inc.a, d);
    const float px = __shfl_up_sync(kFullMask, inc.x, d);
    if (lane >= d) inc = compose(Pair{pa, px}, inc);
  }
  Pair excl{__shfl_up_sync(kFullMask, inc.a, W), __shfl_up_sync(kFullMask, inc.x, W)};
  if (lane < W) excl = Pair{1.0f, 0.0f};
  if (lane >= 32 - W) s_warp_total[warp][w] = inc;
  __syncthreads();
  Pair before{1.0f, 0.0f};
  for (int i = 0; i < warp; ++i) before = compose(before, s_warp_total[i][w]);
  excl = compose(before, excl);

  // 2. Publish the tile's aggregate, and those of the blocks of 32 (of 32, ...) it closes;
  //    then fold everything before the tile into the carry, one level per L2 round trip.
  constexpr int K = kChannelsPerWarp<W>;
  if (warp == 0 && lane < W) {
    Pair tile_total{1.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < kWarps; ++i) tile_total = compose(tile_total, s_warp_total[i][w]);
    store_record(reinterpret_cast<float4*>(p.agg[0]) +
                     (tc.lane_block * p.level_count[0] + tc.j) * W + w,
                 tile_total, p.epoch);
  }
  Pair folded[K];
  std::int64_t index = tc.j;  // index at level (level - 1)
  for (int level = 1; level < p.levels && (index & 31) == 31; ++level) {
    fold_items<W>(p, level - 1, tc.lane_block, index - 31, 32, folded);
    index >>= kFanoutLog2;
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int ch = warp + kWarps * k;
        if (ch < W)
          store_record(reinterpret_cast<float4*>(p.agg[level]) +
                           (tc.lane_block * p.level_count[level] + index) * W + ch,
                       folded[k], p.epoch);
      }
    }
  }
  float carry[K];  // lane 0 of each warp: the state entering this tile, per owned channel
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int ch = warp + kWarps * k;
    carry[k] = 0.0f;
    if (ch < W && tc.channel0 + ch < p.channels && p.init != nullptr)
      carry[k] = load_elem(static_cast<const T*>(p.init), tc.channel0_index + ch);
  }
  for (int level = p.levels - 1; level >= 0; --level) {
    const std::int64_t at = tc.j >> (kFanoutLog2 * level);
    const std::int64_t first = (at >> kFanoutLog2) << kFanoutLog2;
    const int n = static_cast<int>(at - first);
    if (n == 0) continue;
    fold_items<W>(p, level, tc.lane_block, first, n, folded);
#pragma unroll
    for (int k = 0; k < K; ++k) carry[k] = fmaf(folded[k].a, carry[k], folded[k].x);
  }
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int ch = warp + kWarps * k;
      if (ch < W) {
        s_carry[ch] = carry[k];
        if (tc.j == 0 && tc.len == 0 && tc.channel0 + ch < p.channels && p.final_out != nullptr)
          store_elem(static_cast<T*>(p.final_out), tc.channel0_index + ch, carry[k]);
      }
    }
  }
  __syncthreads();

  // 3. Rescan from registers with the carry-in and write.
  if (!tc.lane_ok) return;
  float state = fmaf(excl.a, s_carry[w], excl.x);
  const std::int64_t t0 = dir > 0 ? tc.q0 : tc.len - 1 - tc.q0;
  T* out = static_cast<T*>(p.out) + tc.base;
  T* out2 = static_cast<T*>(p.out2) + tc.base;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t q = tc.q0 + r;
    if (q < tc.len) {
      const std::int64_t t = t0 + dir * r;
      state = fmaf(cur.coef[r], state, cur.in[r]);
      store_elem(out, t * st, state);
      if constexpr (M == Mode::Backward) store_elem(out2, t * st, state * cur.hprev[r]);
      if (q == tc.len - 1 && p.final_out != nullptr) {
        float fin = state;
        if constexpr (M == Mode::Backward)
          fin = load_elem(static_cast<const T*>(p.a) + tc.base, (p.reverse ? tc.len - 1 : 0) * st) *
                state;
        store_elem(static_cast<T*>(p.final_out), tc.state_index, fin);
      }
    } else if (q < p.steps) {
      store_elem(out, q * st, 0.0f);
      if constexpr (M == Mode::Backward) store_elem(out2, q * st, 0.0f);
    }
  }
}

template <class T, Mode M, int W>
const void* kernel_of() {
  return reinterpret_cast<const void*>(&parallel_scan_kernel<T, M, W>);
}

// The one dispatch point: runtime (mode, element type, W) -> kernel instance.
template <class T, Mode M>
const void* select_width(int lane_width) {
  switch (lane_width) {
    case 1: return kernel_of<T, M, 1>();
    case 2: return kernel_of<T, M, 2>();
    case 4: return kernel_of<T, M, 4>();
    case 8: return kernel_of<T, M, 8>();
    case 16: return kernel_of<T, M, 16>();
    case 32: return kernel_of<T, M, 32>();
    default: return nullptr;
  }
}

template <Mode M>
const void* select_elem(Elem elem, int lane_width) {
  switch (elem) {
    case Elem::F32: return select_width<float, M>(lane_width);
    case Elem::F16: return select_width<__half, M>(lane_width);
    case Elem::BF16: return select_width<__nv_bfloat16, M>(lane_width);
  }
  return nullptr;
}

const void* select_kernel(Mode mode, Elem elem, int lane_width) {
  const void* k = mode == Mode::Forward ? select_elem<Mode::Forward>(elem, lane_width)
                                        : select_elem<Mode::Backward>(elem, lane_width);
  if (k == nullptr)
    throw InternalError("parallel scan: no kernel for lane width " + std::to_string(lane_width));
  return k;
}

}  // namespace

ParallelTiling parallel_tiling(std::int64_t channels) {
  int w = 1;
  while (w < 32 && w < channels) w *= 2;
  return {w, kWarps * (32 / w) * kStepsPerThread};
}

void launch_parallel_scan(Mode mode, Elem elem, int lane_width, const ScanParams& p,
                          cudaStream_t stream) {
  const void* k = select_kernel(mode, elem, lane_width);
  ScanParams params = p;
  void* args[] = {&params};
  PRNN_CUDA_CHECK(cudaLaunchKernel(k, dim3(static_cast<unsigned>(p.num_tiles)), dim3(kThreads),
                                   args, 0, stream));
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::scan
