// Parallel linear recurrence (PLR), forward and backward, one launch, single pass over memory.
//   Forward:  h_q = a_q·h_{q-1} + x_q            Backward: g_q = a_{s+1}·g_{q-1} + dh_q,
//                                                           dx = g, da = g·h_{s-1}, dh0 = a_0·g_last
//   (mapping of logical step q to memory, padding and lengths: scan_params.h)
// Tiles:    a tile is W = V·TPR channels of one batch entry (a "lane block") × L steps. Thread
//           (row, k) owns channels [k·V, k·V + V) — one vector load per step (V = 4 when
//           C % 4 == 0 and the tensors are aligned, else 1) — and R consecutive steps; a warp
//           holds 32/TPR rows, the CTA 8·32/TPR rows, so L = R·256/TPR (R = 4 or 8).
// Per tile: 1. load coefficients and inputs for R steps into registers (fp32);
//           2. fold them into pairs (A, X) (the map h -> A·h + X), scan the pairs across rows
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
//           in parallel. Long tiles (L = 128..1024 steps) keep the records read per element
//           small. Waits are bounded by timeout_ns and report kStatusTimeout, never hang.
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
#include <string>

#include "core/cuda_check.h"
#include "prnn/error.h"
#include "scan/elem.cuh"
#include "scan/scan_kernels.h"

namespace prnn::scan {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kFanoutLog2 = 5;  // 32 children per lookback block
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// Steps per thread. Longer tiles read fewer lookback records per element, but cost registers:
// measured on an H200 (bench/scan/NOTES.md), 8 steps win for the forward pass with 4-channel
// vectors and >= 2 threads per row; 4 steps elsewhere for vectors, 8 for scalars.
template <Mode M, int V, int TPR>
inline constexpr int kStepsPerThread = V == 1 ? 8 : (M == Mode::Forward && TPR >= 2 ? 8 : 4);
template <Mode M, int V, int TPR>
inline constexpr int kMinBlocks = (M == Mode::Forward && V == 4 && TPR >= 2) ? 2
                                  : (M == Mode::Forward ? 3 : 2);

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

// ---- vector element access: V consecutive channels, fp32 in registers ------------------------

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class T, int V>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[V]) {
  if constexpr (V == 1) {
    out[0] = load_elem(p, 0);
  } else {
    const Vec<T, V> raw = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      if constexpr (std::is_same_v<T, float>) out[i] = raw.v[i];
      else if constexpr (std::is_same_v<T, __half>) out[i] = __half2float(raw.v[i]);
      else out[i] = __bfloat162float(raw.v[i]);
    }
  }
}

template <class T, int V>
__device__ __forceinline__ void store_vec(T* p, const float (&in)[V]) {
  if constexpr (V == 1) {
    store_elem(p, 0, in[0]);
  } else {
    Vec<T, V> raw;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      if constexpr (std::is_same_v<T, float>) raw.v[i] = in[i];
      else if constexpr (std::is_same_v<T, __half>) raw.v[i] = __float2half_rn(in[i]);
      else raw.v[i] = __float2bfloat16_rn(in[i]);
    }
    *reinterpret_cast<Vec<T, V>*>(p) = raw;
  }
}

// ---- lookback records --------------------------------------------------------------------------

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

// ---- tiles -------------------------------------------------------------------------------------

// Where a tile lives and which part of it this thread owns.
struct TileCoords {
  std::int64_t j = 0;               // time tile
  std::int64_t lane_block = 0;
  std::int64_t len = 0;             // valid steps of this thread's sequence
  std::int64_t base = 0;            // element offset of (t = 0, b, first channel of the thread)
  std::int64_t state_index = 0;     // b * C + first channel of the thread
  std::int64_t channel0_index = 0;  // b * C + first channel of the lane block
  std::int32_t channel0 = 0;        // first channel of the lane block
  std::int64_t q0 = 0;              // first logical step of this thread
  bool lane_ok = false;             // the thread's channels exist (C % V == 0 when V > 1)
};

template <int V, int TPR, int R>
__device__ TileCoords tile_coords(const ScanParams& p, std::int64_t tile, int k, int row) {
  constexpr int W = V * TPR;
  constexpr std::int64_t L = static_cast<std::int64_t>(kThreads / TPR) * R;
  // 32-bit division: the host guarantees fewer than 2^31 tiles.
  const auto t32 = static_cast<std::uint32_t>(tile);
  const auto lpb = static_cast<std::uint32_t>(p.lane_blocks_per_batch);
  const auto lane_blocks = static_cast<std::uint32_t>(p.batch) * lpb;
  TileCoords tc;
  const std::uint32_t j = t32 / lane_blocks;
  const std::uint32_t lb = t32 - j * lane_blocks;
  const std::uint32_t b = lb / lpb;
  tc.j = j;
  tc.lane_block = lb;
  tc.channel0 = static_cast<std::int32_t>(lb - b * lpb) * W;
  const std::int32_t c = tc.channel0 + k * V;
  tc.lane_ok = c < p.channels;
  tc.len = p.steps;
  if (p.lengths != nullptr) {
    tc.len = p.lengths[b];
    if (tc.len < 0 || tc.len > p.steps) {
      if (j == 0 && threadIdx.x == 0) atomicOr(p.status, kStatusBadLength);
      tc.len = tc.len < 0 ? 0 : p.steps;
    }
  }
  tc.base = static_cast<std::int64_t>(b) * p.stride_b + c;
  tc.channel0_index = static_cast<std::int64_t>(b) * p.channels + tc.channel0;
  tc.state_index = static_cast<std::int64_t>(b) * p.channels + c;
  tc.q0 = static_cast<std::int64_t>(j) * L + static_cast<std::int64_t>(row) * R;
  return tc;
}

// The R steps × V channels a thread owns, in fp32. Padding and out-of-range steps are the
// identity (1, 0).
template <Mode M, int V, int R>
struct TileData {
  float coef[R][V];
  float in[R][V];
  float hprev[M == Mode::Backward ? R : 1][V];
};

template <class T, Mode M, int V, int R>
__device__ void load_tile(const ScanParams& p, const TileCoords& tc, TileData<M, V, R>& d) {
  const std::int64_t fdir = p.reverse ? -1 : 1;
  const std::int64_t dir = M == Mode::Forward ? fdir : -fdir;
  const std::int64_t st = p.stride_t;
  const std::int64_t t0 = dir > 0 ? tc.q0 : tc.len - 1 - tc.q0;  // physical step of q0
  const std::int64_t step = dir * st;
  const T* a = static_cast<const T*>(p.a) + tc.base + t0 * st;
  const T* u = static_cast<const T*>(p.u) + tc.base + t0 * st;
  const T* h = static_cast<const T*>(p.h) + tc.base + t0 * st;
  const bool full = tc.lane_ok && tc.q0 + R <= tc.len &&
                    (M == Mode::Forward || (tc.q0 > 0 && tc.q0 + R < tc.len));
  if (full) {  // fast path: every step valid, no boundary
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if constexpr (M == Mode::Forward) {
        load_vec<T, V>(a + r * step, d.coef[r]);
      } else {
        load_vec<T, V>(a + r * step + fdir * st, d.coef[r]);
        load_vec<T, V>(h + r * step - fdir * st, d.hprev[r]);
      }
      load_vec<T, V>(u + r * step, d.in[r]);
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t q = tc.q0 + r;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      d.coef[r][i] = 1.0f;
      d.in[r][i] = 0.0f;
      if constexpr (M == Mode::Backward) d.hprev[r][i] = 0.0f;
    }
    if (tc.lane_ok && q < tc.len) {
      if constexpr (M == Mode::Forward) {
        load_vec<T, V>(a + r * step, d.coef[r]);
      } else {
        if (q != 0) load_vec<T, V>(a + r * step + fdir * st, d.coef[r]);
        if (q != tc.len - 1) {
          load_vec<T, V>(h + r * step - fdir * st, d.hprev[r]);
        } else if (p.h0 != nullptr) {
          load_vec<T, V>(static_cast<const T*>(p.h0) + tc.state_index, d.hprev[r]);
        }
      }
      load_vec<T, V>(u + r * step, d.in[r]);
    }
  }
}

template <class T, Mode M, int V, int TPR>
__global__ void __launch_bounds__(kThreads, (kMinBlocks<M, V, TPR>))
    parallel_scan_kernel(ScanParams p) {
  constexpr int W = V * TPR;
  constexpr int kRowsPerWarp = 32 / TPR;
  constexpr int R = kStepsPerThread<M, V, TPR>;
  constexpr int K = kChannelsPerWarp<W>;

  __shared__ Pair s_warp_total[kWarps][W];
  __shared__ float s_carry[W];
  __shared__ std::int64_t s_tile;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int k = lane % TPR;  // vector slot in the row
  const int row = warp * kRowsPerWarp + lane / TPR;
  const std::int64_t fdir = p.reverse ? -1 : 1;
  const std::int64_t dir = M == Mode::Forward ? fdir : -fdir;
  const std::int64_t st = p.stride_t;

  // Tiles are claimed in order from a counter, so every tile this one waits for belongs to a CTA
  // that is already running: forward progress needs no co-residency.
  if (threadIdx.x == 0)
    s_tile = static_cast<std::int64_t>(atomicAdd(p.tile_counter, 1ull) - p.tile_base);
  __syncthreads();
  const TileCoords tc = tile_coords<V, TPR, R>(p, s_tile, k, row);
  TileData<M, V, R> cur;
  load_tile<T, M, V, R>(p, tc, cur);

  // 1. Thread fold, then scan across rows: within the warp (stride TPR), then across warps.
  Pair inc[V], excl[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    inc[i] = Pair{1.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < R; ++r) inc[i] = compose(inc[i], Pair{cur.coef[r][i], cur.in[r][i]});
#pragma unroll
    for (int d = TPR; d < 32; d *= 2) {
      const float pa = __shfl_up_sync(kFullMask, inc[i].a, d);
      const float px = __shfl_up_sync(kFullMask, inc[i].x, d);
      if (lane >= d) inc[i] = compose(Pair{pa, px}, inc[i]);
    }
    excl[i] = Pair{__shfl_up_sync(kFullMask, inc[i].a, TPR),
                   __shfl_up_sync(kFullMask, inc[i].x, TPR)};
    if (lane < TPR) excl[i] = Pair{1.0f, 0.0f};
    if (lane >= 32 - TPR) s_warp_total[warp][k * V + i] = inc[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < V; ++i) {
    Pair before{1.0f, 0.0f};
    for (int wv = 0; wv < warp; ++wv) before = compose(before, s_warp_total[wv][k * V + i]);
    excl[i] = compose(before, excl[i]);
  }

  // 2. Publish the tile's aggregate, and those of the blocks of 32 (of 32, ...) it closes;
  //    then fold everything before the tile into the carry, one level per L2 round trip.
  for (int ch = threadIdx.x; ch < W; ch += kThreads) {
    Pair tile_total{1.0f, 0.0f};
#pragma unroll
    for (int wv = 0; wv < kWarps; ++wv) tile_total = compose(tile_total, s_warp_total[wv][ch]);
    store_record(reinterpret_cast<float4*>(p.agg[0]) +
                     (tc.lane_block * p.level_count[0] + tc.j) * W + ch,
                 tile_total, p.epoch);
  }
  Pair folded[K];
  std::int64_t index = tc.j;  // index at level (level - 1)
  for (int level = 1; level < p.levels && (index & 31) == 31; ++level) {
    fold_items<W>(p, level - 1, tc.lane_block, index - 31, 32, folded);
    index >>= kFanoutLog2;
    if (lane == 0) {
#pragma unroll
      for (int kk = 0; kk < K; ++kk) {
        const int ch = warp + kWarps * kk;
        if (ch < W)
          store_record(reinterpret_cast<float4*>(p.agg[level]) +
                           (tc.lane_block * p.level_count[level] + index) * W + ch,
                       folded[kk], p.epoch);
      }
    }
  }
  float carry[K];  // lane 0 of each warp: the state entering this tile, per owned channel
#pragma unroll
  for (int kk = 0; kk < K; ++kk) {
    const int ch = warp + kWarps * kk;
    carry[kk] = 0.0f;
    if (ch < W && tc.channel0 + ch < p.channels && p.init != nullptr)
      carry[kk] = load_elem(static_cast<const T*>(p.init), tc.channel0_index + ch);
  }
  for (int level = p.levels - 1; level >= 0; --level) {
    const std::int64_t at = tc.j >> (kFanoutLog2 * level);
    const std::int64_t first = (at >> kFanoutLog2) << kFanoutLog2;
    const int n = static_cast<int>(at - first);
    if (n == 0) continue;
    fold_items<W>(p, level, tc.lane_block, first, n, folded);
#pragma unroll
    for (int kk = 0; kk < K; ++kk) carry[kk] = fmaf(folded[kk].a, carry[kk], folded[kk].x);
  }
  if (lane == 0) {
#pragma unroll
    for (int kk = 0; kk < K; ++kk) {
      const int ch = warp + kWarps * kk;
      if (ch < W) {
        s_carry[ch] = carry[kk];
        if (tc.j == 0 && tc.len == 0 && tc.channel0 + ch < p.channels && p.final_out != nullptr)
          store_elem(static_cast<T*>(p.final_out), tc.channel0_index + ch, carry[kk]);
      }
    }
  }
  __syncthreads();

  // 3. Rescan from registers with the carry-in and write.
  if (!tc.lane_ok) return;
  float state[V];
#pragma unroll
  for (int i = 0; i < V; ++i) state[i] = fmaf(excl[i].a, s_carry[k * V + i], excl[i].x);
  const std::int64_t t0 = dir > 0 ? tc.q0 : tc.len - 1 - tc.q0;
  const std::int64_t step = dir * st;
  T* out = static_cast<T*>(p.out) + tc.base + t0 * st;
  T* out2 = static_cast<T*>(p.out2) + tc.base + t0 * st;
  if (tc.q0 + R < tc.len) {  // fast path: every step valid, not the last
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float dval[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        state[i] = fmaf(cur.coef[r][i], state[i], cur.in[r][i]);
        if constexpr (M == Mode::Backward) dval[i] = state[i] * cur.hprev[r][i];
      }
      store_vec<T, V>(out + r * step, state);
      if constexpr (M == Mode::Backward) store_vec<T, V>(out2 + r * step, dval);
    }
    return;
  }
  T* pad = static_cast<T*>(p.out) + tc.base;
  T* pad2 = static_cast<T*>(p.out2) + tc.base;
  const float zero[V] = {};
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const std::int64_t q = tc.q0 + r;
    if (q < tc.len) {
      float dval[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        state[i] = fmaf(cur.coef[r][i], state[i], cur.in[r][i]);
        if constexpr (M == Mode::Backward) dval[i] = state[i] * cur.hprev[r][i];
      }
      store_vec<T, V>(out + r * step, state);
      if constexpr (M == Mode::Backward) store_vec<T, V>(out2 + r * step, dval);
      if (q == tc.len - 1 && p.final_out != nullptr) {
        float fin[V];
#pragma unroll
        for (int i = 0; i < V; ++i) fin[i] = state[i];
        if constexpr (M == Mode::Backward) {
          float a0[V];
          load_vec<T, V>(static_cast<const T*>(p.a) + tc.base + (p.reverse ? tc.len - 1 : 0) * st,
                         a0);
#pragma unroll
          for (int i = 0; i < V; ++i) fin[i] = a0[i] * state[i];
        }
        store_vec<T, V>(static_cast<T*>(p.final_out) + tc.state_index, fin);
      }
    } else if (q < p.steps) {
      store_vec<T, V>(pad + q * st, zero);
      if constexpr (M == Mode::Backward) store_vec<T, V>(pad2 + q * st, zero);
    }
  }
}

// ---- dispatch ----------------------------------------------------------------------------------

template <class T, Mode M, int V, int TPR>
const void* kernel_of() {
  return reinterpret_cast<const void*>(&parallel_scan_kernel<T, M, V, TPR>);
}

// The one dispatch point: runtime (mode, element type, vector width, threads per row) -> kernel.
template <class T, Mode M>
const void* select_shape(int vector, int tpr) {
  if (vector == 4) {
    switch (tpr) {
      case 1: return kernel_of<T, M, 4, 1>();
      case 2: return kernel_of<T, M, 4, 2>();
      case 4: return kernel_of<T, M, 4, 4>();
      case 8: return kernel_of<T, M, 4, 8>();
      default: return nullptr;
    }
  }
  switch (tpr) {
    case 1: return kernel_of<T, M, 1, 1>();
    case 2: return kernel_of<T, M, 1, 2>();
    case 4: return kernel_of<T, M, 1, 4>();
    case 8: return kernel_of<T, M, 1, 8>();
    case 16: return kernel_of<T, M, 1, 16>();
    case 32: return kernel_of<T, M, 1, 32>();
    default: return nullptr;
  }
}

template <Mode M>
const void* select_elem(Elem elem, int vector, int tpr) {
  switch (elem) {
    case Elem::F32: return select_shape<float, M>(vector, tpr);
    case Elem::F16: return select_shape<__half, M>(vector, tpr);
    case Elem::BF16: return select_shape<__nv_bfloat16, M>(vector, tpr);
  }
  return nullptr;
}

}  // namespace

ParallelTiling parallel_tiling(Mode mode, std::int64_t channels, bool vectorized) {
  const int vector = vectorized ? 4 : 1;
  const int max_tpr = vectorized ? 8 : 32;
  const std::int64_t slots = (channels + vector - 1) / vector;
  int tpr = 1;
  while (tpr < max_tpr && tpr < slots) tpr *= 2;
  int steps = 8;
  if (vectorized) {
    steps = mode == Mode::Forward ? (tpr >= 2 ? kStepsPerThread<Mode::Forward, 4, 2>
                                              : kStepsPerThread<Mode::Forward, 4, 1>)
                                  : kStepsPerThread<Mode::Backward, 4, 1>;
  }
  return {vector, tpr, vector * tpr, kThreads / tpr * steps};
}

void launch_parallel_scan(Mode mode, Elem elem, const ParallelTiling& tiling, const ScanParams& p,
                          cudaStream_t stream) {
  const void* k = mode == Mode::Forward
                      ? select_elem<Mode::Forward>(elem, tiling.vector, tiling.threads_per_row)
                      : select_elem<Mode::Backward>(elem, tiling.vector, tiling.threads_per_row);
  if (k == nullptr)
    throw InternalError("parallel scan: no kernel for vector " + std::to_string(tiling.vector) +
                        " x " + std::to_string(tiling.threads_per_row) + " threads per row");
  ScanParams params = p;
  void* args[] = {&params};
  PRNN_CUDA_CHECK(cudaLaunchKernel(k, dim3(static_cast<unsigned>(p.num_tiles)), dim3(kThreads),
                                   args, 0, stream));
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::scan
