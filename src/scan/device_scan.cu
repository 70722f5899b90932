// Parallel linear recurrence (PLR), forward and backward, one launch, single pass over memory.
//   Forward:  h_q = a_q·h_{q-1} + x_q            Backward: g_q = a_{s+1}·g_{q-1} + dh_q,
//                                                           dx = g, da = g·h_{s-1}, dh0 = a_0·g_last
//   (mapping of logical step q to memory, padding and lengths: scan_params.h)
// Tiles:    a tile is W channels of one batch entry (a "lane block") × L = 8·(32/W)·R steps.
//           Thread (row, w) owns channel w and R = 16 consecutive steps; a warp holds 32/W rows.
// Per tile: 1. load coefficients and inputs for R steps into registers (fp32);
//           2. fold them into the pair (A, X) (the map h -> A·h + X), scan the pairs across rows
//              (warp shuffles, then across warps through shared memory) -> exclusive prefixes;
//           3. warp 0 publishes the tile's aggregate, and, when the tile closes a block of 32
//              tiles (or 32 blocks, ...), the aggregate of that block; then it folds the
//              aggregates of everything before the tile, in a fixed order, into the carry-in;
//           4. every thread applies its prefix to the carry, rescans its R steps from registers
//              and writes the outputs.
// Lookback: deterministic by construction. The carry of time tile j of a lane block is
//           init ∘ (level-ℓ aggregates of the blocks before j, top level first, ≤ 31 per level)
//           — always the same aggregates combined in the same order, whatever the timing, and
//           each aggregate depends only on data (never on another tile's carry), so no chain
//           of waits forms. Aggregates are published with release stores of an epoch tag (no
//           reset between launches) and read after an acquire; waits are bounded by timeout_ns
//           and report kStatusTimeout instead of hanging.
// Launch:   cooperative (all CTAs co-resident: a tile only waits on smaller tiles, which are
//           owned by running CTAs), 256 threads, grid = occupancy × SMs (≤ tiles); CTA k takes
//           tiles k, k + grid, ... in order.
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
constexpr int kStepsPerThread = 16;  // R
constexpr int kFanoutLog2 = 5;       // 32 children per lookback block
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// The affine map h -> a·h + x. compose(first, then) applies `first`, then `then`.
struct Pair {
  float a, x;
};
__device__ __forceinline__ Pair compose(Pair first, Pair then) {
  return {then.a * first.a, fmaf(then.a, first.x, then.x)};
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Whole warp: wait until flags[0..n) all carry `epoch` (n <= 32). On timeout, report and go on.
__device__ void wait_flags(const unsigned* flags, int n, const ScanParams& p) {
  const int lane = threadIdx.x & 31;
  bool ready = lane >= n;
  std::uint64_t start = 0;
  while (true) {
    if (!ready) ready = load_acquire(flags + lane) == p.epoch;
    if (__all_sync(kFullMask, ready)) return;
    const std::uint64_t now = global_ns();
    if (start == 0) {
      start = now;
    } else if (now - start > p.timeout_ns) {
      if (lane == 0) atomicOr(p.status, kStatusTimeout);
      return;
    }
    __nanosleep(100);
  }
}

// Warp 0: lanes w < W store channel w of an aggregate, then lane 0 raises the flag.
template <int W>
__device__ void publish(const ScanParams& p, int level, std::int64_t lane_block, std::int64_t index,
                        Pair value) {
  const int lane = threadIdx.x & 31;
  const std::int64_t slot = lane_block * p.level_count[level] + index;
  if (lane < W) {
    float2* agg = reinterpret_cast<float2*>(p.agg[level]);
    __stcg(agg + slot * W + lane, make_float2(value.a, value.x));
    __threadfence();
  }
  __syncwarp();
  if (lane == 0) store_release(p.flags[level] + slot, p.epoch);
}

// Warp 0, lanes w < W: fold aggregates [first, first + n) of one level onto `acc`, in order.
template <int W>
__device__ Pair fold_level(const ScanParams& p, int level, std::int64_t lane_block,
                           std::int64_t first, int n, Pair acc) {
  const std::int64_t slot = lane_block * p.level_count[level] + first;
  wait_flags(p.flags[level] + slot, n, p);
  const int lane = threadIdx.x & 31;
  if (lane < W) {
    const float2* agg = reinterpret_cast<const float2*>(p.agg[level]) + slot * W + lane;
#pragma unroll 8
    for (int i = 0; i < n; ++i) {
      const float2 v = __ldcg(agg + static_cast<std::int64_t>(i) * W);
      acc = compose(acc, Pair{v.x, v.y});
    }
  }
  return acc;
}

template <class T, Mode M, int W>
__global__ void __launch_bounds__(kThreads) parallel_scan_kernel(ScanParams p) {
  constexpr int kRowsPerWarp = 32 / W;
  constexpr int kRows = kWarps * kRowsPerWarp;
  constexpr int R = kStepsPerThread;
  constexpr std::int64_t L = static_cast<std::int64_t>(kRows) * R;

  __shared__ Pair s_warp_total[kWarps][W];
  __shared__ float s_carry[W];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int w = lane % W;
  const int row = warp * kRowsPerWarp + lane / W;
  const std::int64_t lane_blocks = static_cast<std::int64_t>(p.batch) * p.lane_blocks_per_batch;
  const std::int64_t fdir = p.reverse ? -1 : 1;
  const std::int64_t dir = M == Mode::Forward ? fdir : -fdir;
  const std::int64_t st = p.stride_t;
  const T* ga = static_cast<const T*>(p.a);
  const T* gu = static_cast<const T*>(p.u);
  const T* gh = static_cast<const T*>(p.h);
  T* gout = static_cast<T*>(p.out);
  T* gout2 = static_cast<T*>(p.out2);

  for (std::int64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
    const std::int64_t j = tile / lane_blocks;  // time tile
    const std::int64_t lb = tile % lane_blocks;  // lane block
    const std::int32_t b = static_cast<std::int32_t>(lb / p.lane_blocks_per_batch);
    const std::int32_t c = static_cast<std::int32_t>(lb % p.lane_blocks_per_batch) * W + w;
    const bool lane_ok = c < p.channels;
    std::int64_t len = p.steps;
    if (p.lengths != nullptr) {
      len = p.lengths[b];
      if (len < 0 || len > p.steps) {
        if (j == 0 && threadIdx.x == 0) atomicOr(p.status, kStatusBadLength);
        len = len < 0 ? 0 : p.steps;
      }
    }
    const std::int64_t base = b * p.stride_b + c;
    const std::int64_t state_index = static_cast<std::int64_t>(b) * p.channels + c;
    const std::int64_t q0 = j * L + static_cast<std::int64_t>(row) * R;

    // 1. Load R steps. Padding and out-of-range steps are the identity map (1, 0).
    float coef[R], in[R], hprev[M == Mode::Backward ? R : 1];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::int64_t q = q0 + r;
      coef[r] = 1.0f;
      in[r] = 0.0f;
      if constexpr (M == Mode::Backward) hprev[r] = 0.0f;
      if (lane_ok && q < len) {
        const std::int64_t t = dir > 0 ? q : len - 1 - q;
        if constexpr (M == Mode::Forward) {
          coef[r] = load_elem(ga + base, t * st);
        } else {
          if (q != 0) coef[r] = load_elem(ga + base, (t + fdir) * st);
          if (q != len - 1) {
            hprev[r] = load_elem(gh + base, (t - fdir) * st);
          } else if (p.h0 != nullptr) {
            hprev[r] = load_elem(static_cast<const T*>(p.h0), state_index);
          }
        }
        in[r] = load_elem(gu + base, t * st);
      }
    }

    // 2. Thread fold, then scan across rows: within the warp (stride W), then across warps.
    Pair inc{1.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < R; ++r) inc = compose(inc, Pair{coef[r], in[r]});
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

    // 3. Warp 0: publish aggregates, then fold everything before this tile into the carry.
    if (warp == 0) {
      Pair tile_total{1.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < kWarps; ++i) tile_total = compose(tile_total, s_warp_total[i][w]);
      publish<W>(p, 0, lb, j, tile_total);
      std::int64_t index = j;  // index at level (level - 1)
      for (int level = 1; level < p.levels && (index & 31) == 31; ++level) {
        const Pair block = fold_level<W>(p, level - 1, lb, index - 31, 32, Pair{1.0f, 0.0f});
        index >>= kFanoutLog2;
        publish<W>(p, level, lb, index, block);
      }
      Pair carry{0.0f, 0.0f};  // carry.x is the state entering this tile
      if (lane < W && lane_ok && p.init != nullptr)
        carry.x = load_elem(static_cast<const T*>(p.init), state_index);
      for (int level = p.levels - 1; level >= 0; --level) {
        const std::int64_t cur = j >> (kFanoutLog2 * level);
        const std::int64_t first = (cur >> kFanoutLog2) << kFanoutLog2;
        const int n = static_cast<int>(cur - first);
        if (n > 0) carry = fold_level<W>(p, level, lb, first, n, carry);
      }
      if (lane < W) s_carry[w] = carry.x;
      if (j == 0 && len == 0 && lane < W && lane_ok && p.final_out != nullptr)
        store_elem(static_cast<T*>(p.final_out), state_index, carry.x);
    }
    __syncthreads();

    // 4. Rescan from registers with the carry-in and write.
    float state = fmaf(excl.a, s_carry[w], excl.x);
    if (lane_ok) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const std::int64_t q = q0 + r;
        if (q < len) {
          const std::int64_t t = dir > 0 ? q : len - 1 - q;
          state = fmaf(coef[r], state, in[r]);
          store_elem(gout + base, t * st, state);
          if constexpr (M == Mode::Backward) store_elem(gout2 + base, t * st, state * hprev[r]);
          if (q == len - 1 && p.final_out != nullptr) {
            float fin = state;
            if constexpr (M == Mode::Backward)
              fin = load_elem(ga + base, (p.reverse ? len - 1 : 0) * st) * state;
            store_elem(static_cast<T*>(p.final_out), state_index, fin);
          }
        } else if (q < p.steps) {
          store_elem(gout + base, q * st, 0.0f);
          if constexpr (M == Mode::Backward) store_elem(gout2 + base, q * st, 0.0f);
        }
      }
    }
    __syncthreads();  // s_warp_total and s_carry are reused by the next tile
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

int parallel_grid_size(Mode mode, Elem elem, int lane_width, int device) {
  const void* k = select_kernel(mode, elem, lane_width);
  int per_sm = 0;
  PRNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, 0));
  int sms = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::max(1, per_sm) * sms;
}

void launch_parallel_scan(Mode mode, Elem elem, int lane_width, int grid, const ScanParams& p,
                          cudaStream_t stream) {
  const void* k = select_kernel(mode, elem, lane_width);
  ScanParams params = p;
  void* args[] = {&params};
  PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(k, dim3(static_cast<unsigned>(grid)), dim3(kThreads),
                                              args, 0, stream));
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::scan
