// Parallel linear recurrence (PLR), forward and backward, one launch, single pass over memory.
//   Forward:  h_q = a_q·h_{q-1} + x_q            Backward: g_q = a_{s+1}·g_{q-1} + dh_q,
//                                                           dx = g, da = g·h_{s-1}, dh0 = a_0·g_last
//   (mapping of logical step q to memory, padding and lengths: scan_params.h)
// Tiles, lookback, launch: tile_scan.cuh. Here: the two ops (what a step loads and writes) and
// the dispatch from runtime (mode, element type, vector width, threads per row) to a kernel.
// Vectors of 4 channels when C % 4 == 0 and the tensors are aligned, else 1 channel per thread;
// the 16-bit forward at C >= 64 takes 8 (C % 8 == 0, 16-byte aligned; tile_scan_packed16).
// Memory:   forward reads a, x and writes h (12 B/elem at fp32); backward reads a, h, dh and
//           writes da, dx (20 B/elem).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "prnn/error.h"
#include "scan/scan_kernels.h"
#include "scan/tile_scan.cuh"

namespace prnn::scan {
namespace {

// The plain recurrence over the tensors named in ScanParams.
template <class T, Mode M>
struct ScanOp {
  struct Args {};
  static constexpr Mode kMode = M;
  template <int V>
  struct Step {
    float hprev[M == Mode::Backward ? V : 1];  // backward: h_{s-1} for da
  };

  template <int V>
  __device__ static void load(const ScanParams& p, const Args&, const Lane& ln, Pos s_at,
                              float (&coef)[V], float (&in)[V], Step<V>& s) {
    const T* a = static_cast<const T*>(p.a);
    if constexpr (M == Mode::Forward) {
      load_vec<T, V>(a + s_at.at, coef);
    } else {
      const std::int64_t fwd = p.reverse ? -p.stride_t : p.stride_t;  // next step, forward order
      if (s_at.q != 0) {
        load_vec<T, V>(a + s_at.at + fwd, coef);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) coef[i] = 1.0f;  // dh_final enters with coefficient 1
      }
      if (s_at.q != ln.len - 1) {
        load_vec<T, V>(static_cast<const T*>(p.h) + s_at.at - fwd, s.hprev);
      } else if (p.h0 != nullptr) {
        load_vec<T, V>(static_cast<const T*>(p.h0) + ln.state_index, s.hprev);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) s.hprev[i] = 0.0f;
      }
    }
    load_vec<T, V>(static_cast<const T*>(p.u) + s_at.at, in);
  }

  template <int V>
  __device__ static void store(const ScanParams& p, const Args&, const Lane&, Pos s_at,
                               const float (&state)[V], const Step<V>& s) {
    const std::int64_t at = s_at.at;
    store_vec<T, V>(static_cast<T*>(p.out) + at, state);
    if constexpr (M == Mode::Backward) {
      float da[V];
#pragma unroll
      for (int i = 0; i < V; ++i) da[i] = state[i] * s.hprev[i];
      store_vec<T, V>(static_cast<T*>(p.out2) + at, da);
    }
  }

  template <int V>
  __device__ static void store_padding(const ScanParams& p, const Args&, const Lane& ln,
                                       std::int64_t t) {
    const float zero[V] = {};
    store_vec<T, V>(static_cast<T*>(p.out) + ln.base + t * p.stride_t, zero);
    if constexpr (M == Mode::Backward)
      store_vec<T, V>(static_cast<T*>(p.out2) + ln.base + t * p.stride_t, zero);
  }

  template <int V>
  __device__ static void store_final(const ScanParams& p, const Args&, const Lane& ln,
                                     const float (&state)[V]) {
    if (p.final_out == nullptr) return;
    float fin[V];
#pragma unroll
    for (int i = 0; i < V; ++i) fin[i] = state[i];
    if constexpr (M == Mode::Backward) {
      if (ln.len > 0) {  // dh0 = a_0 · g_0
        float a0[V];
        load_vec<T, V>(static_cast<const T*>(p.a) + ln.base +
                           (p.reverse ? ln.len - 1 : 0) * p.stride_t,
                       a0);
#pragma unroll
        for (int i = 0; i < V; ++i) fin[i] = a0[i] * state[i];
      }
    }
    store_vec<T, V>(static_cast<T*>(p.final_out) + ln.state_index, fin);
  }

  __device__ static float init(const ScanParams& p, const Args&, std::int32_t b, std::int32_t c) {
    return p.init != nullptr
               ? load_elem(static_cast<const T*>(p.init), static_cast<std::int64_t>(b) * p.channels + c)
               : 0.0f;
  }

  // Staged rows (forward only; tile_scan.cuh): a and x in, h out.
  static constexpr int kStagedInputs = 2;
  static constexpr int kElemBytes = sizeof(T);
  static_assert(kElemBytes == 2 || kElemBytes == 4);
  __device__ static const void* staged_input(const ScanParams& p, const Args&, int i) {
    return i == 0 ? p.a : p.u;
  }
  __device__ static void* staged_output(const ScanParams& p, const Args&) { return p.out; }
  template <int V>
  __device__ static void load_staged(const ScanParams&, const Args&, const Lane&, Pos,
                                     const void* const (&src)[kStagedInputs], float (&coef)[V],
                                     float (&in)[V], Step<V>&) {
    load_vec<T, V>(static_cast<const T*>(src[0]), coef);
    load_vec<T, V>(static_cast<const T*>(src[1]), in);
  }
  template <int V>
  __device__ static void store_staged(const ScanParams&, const Args&, const Lane&, Pos,
                                      const float (&state)[V], const Step<V>&, void* dst) {
    store_vec<T, V>(static_cast<T*>(dst), state);
  }
};

// CTAs per SM a kernel is compiled for (its register budget).
template <class T, Mode M, int V, int TPR, bool Staged>
constexpr int kScanMinBlocks = Staged ? kStagedMinBlocks<sizeof(T), TPR> : kMinBlocks<M, V, TPR>;

template <class T, Mode M, int V, int TPR, bool Staged>
__global__ void __launch_bounds__(kTileThreads, (kScanMinBlocks<T, M, V, TPR, Staged>))
    parallel_scan_kernel(ScanParams p) {
  if constexpr (V == 8)  // 16-bit forward only (select_shape)
    tile_scan_packed16<ScanOp<T, M>, T, V, TPR, kStepsPerThread<M, V, TPR>>(
        p, typename ScanOp<T, M>::Args{});
  else
    tile_scan<ScanOp<T, M>, V, TPR, kStepsPerThread<M, V, TPR>, Staged>(
        p, typename ScanOp<T, M>::Args{});
}

// Threads per row of the packed 16-bit form (tile_scan_packed16): lane blocks of 32 channels.
constexpr int kPacked16Tpr = 4;

// ---- dispatch ----------------------------------------------------------------------------------

struct KernelChoice {
  const void* kernel = nullptr;
  int dynamic_smem = 0;
};

// A staged kernel whose buffer outgrows static shared memory takes it dynamically
// (kStagedDynamicBytes); the attribute is set at every such launch so that it holds on whichever
// device is current (such launches have at least kStagedPairMinTiles tiles, so the two calls are
// small beside them; only the PRNN_SCAN_STAGED=1 knob stages smaller launches).
template <class T, Mode M, int V, int TPR, bool Staged = false>
KernelChoice kernel_of() {
  const void* k = reinterpret_cast<const void*>(&parallel_scan_kernel<T, M, V, TPR, Staged>);
  int bytes = 0;
  if constexpr (Staged) {
    bytes = kStagedDynamicBytes<ScanOp<T, M>, V, TPR, kStepsPerThread<M, V, TPR>>;
    if (bytes > 0) {
      PRNN_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      PRNN_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           cudaSharedmemCarveoutMaxShared));
    }
  }
  return {k, bytes};
}

// The one dispatch point: runtime (mode, element type, vector width, threads per row, staged)
// -> kernel. Staged rows (forward, 4-channel vectors): fp32 at one or two threads per row, 16-bit
// at 2, 4 or 8 (parallel_tiling says when). 8-channel vectors: the 16-bit forward at 4 threads per
// row (tile_scan_packed16).
template <class T, Mode M>
KernelChoice select_shape(int vector, int tpr, bool staged) {
  if (staged) {
    if constexpr (M == Mode::Forward && sizeof(T) == 4) {
      if (vector == 4) {
        switch (tpr) {
          case 1: return kernel_of<T, M, 4, 1, true>();
          case 2: return kernel_of<T, M, 4, 2, true>();
          default: return {};
        }
      }
    }
    if constexpr (M == Mode::Forward && sizeof(T) == 2) {
      if (vector == 4) {
        switch (tpr) {
          case 2: return kernel_of<T, M, 4, 2, true>();
          case 4: return kernel_of<T, M, 4, 4, true>();
          case 8: return kernel_of<T, M, 4, 8, true>();
          default: return {};
        }
      }
    }
    return {};
  }
  if (vector == 8) {
    if constexpr (M == Mode::Forward && sizeof(T) == 2)
      switch (tpr) {
        case 2: return kernel_of<T, M, 8, 2>();
        case kPacked16Tpr: return kernel_of<T, M, 8, kPacked16Tpr>();
        default: break;
      }
    return {};
  }
  if (vector == 4) {
    switch (tpr) {
      case 1: return kernel_of<T, M, 4, 1>();
      case 2: return kernel_of<T, M, 4, 2>();
      case 4: return kernel_of<T, M, 4, 4>();
      case 8: return kernel_of<T, M, 4, 8>();
      default: return {};
    }
  }
  switch (tpr) {
    case 1: return kernel_of<T, M, 1, 1>();
    case 2: return kernel_of<T, M, 1, 2>();
    case 4: return kernel_of<T, M, 1, 4>();
    case 8: return kernel_of<T, M, 1, 8>();
    case 16: return kernel_of<T, M, 1, 16>();
    case 32: return kernel_of<T, M, 1, 32>();
    default: return {};
  }
}

template <Mode M>
KernelChoice select_elem(Elem elem, int vector, int tpr, bool staged) {
  switch (elem) {
    case Elem::F32: return select_shape<float, M>(vector, tpr, staged);
    case Elem::F16: return select_shape<__half, M>(vector, tpr, staged);
    case Elem::BF16: return select_shape<__nv_bfloat16, M>(vector, tpr, staged);
  }
  return {};
}

// Fewest tiles from which the fp32 forward at C = 8 takes the staged form (parallel_tiling).
constexpr std::int64_t kStagedPairMinTiles = 2048;

}  // namespace

ParallelTiling parallel_tiling(Mode mode, std::int64_t channels, int widest_vector,
                               int elem_bytes, bool contiguous_rows) {
  // 8-channel 16-bit vectors held raw in registers (tile_scan_packed16): the forward at C >= 32,
  // in lane blocks of 32 channels from C = 64 and of 16 at C = 32..56, so that a row is two
  // lookback chains or more (one block would be one chain; the 4-channel forms below split it in
  // two for the same reason). Lane blocks of 8 (one thread per row, C = 16..24) measured slower
  // than the staged 4-channel rows (bench/scan/NOTES.md, lab 29: C = 16 -23 %).
  if (widest_vector == 8 && mode == Mode::Forward && elem_bytes == 2 && channels % 8 == 0 &&
      channels >= 32) {
    const int tpr = channels >= 64 ? kPacked16Tpr : 2;
    return ParallelTiling{8, tpr, 8 * tpr, kTileThreads / tpr * steps_per_thread(mode, 8, tpr),
                          false};
  }
  const bool vectorized = widest_vector >= 4;
  const int vector = vectorized ? 4 : 1;
  const int max_tpr = vectorized ? 8 : 32;
  const std::int64_t slots = (channels + vector - 1) / vector;
  int tpr = 1;
  while (tpr < max_tpr && tpr < slots) tpr *= 2;
  // A lane block that holds every channel (C = 12..32 in vectors) is one lookback chain per
  // sequence: each tile waits on the records of the tiles just before it, which are still
  // loading. Halved, the channels are two chains whose tiles interleave. Measured on an H100
  // (bench/scan/NOTES.md), batch 1, C = 32, 2^21 and 2^23 steps: forward fp32 +12 %, backward
  // +16-26 %, bf16 +29-41 % (C = 12 and 16: +7-25 %). Narrower blocks at every C: four chains at
  // C = 32 measured the same as two, C = 128 (4 chains -> 8) gained 1-3 %, C = 1024 and B = 8
  // lost 5-14 % forward; so only the single block is split.
  if (vectorized && tpr >= 4 && slots <= tpr) tpr /= 2;
  const int steps = steps_per_thread(mode, vector, tpr);
  // Staged rows (tile_scan.cuh), forward only, with the register form's tiles (so the same plan
  // and workspace) and CTAs per SM of their own (kStagedMinBlocks):
  // - fp32 at C = 4 with contiguous rows (one thread per row; 34 KB of shared memory).
  // - fp32 at C = 8 with contiguous rows (two threads per row, one lane block a row; 64 KB of
  //   dynamic shared memory, 3 CTAs per SM instead of the register form's 2), from 2048 tiles on.
  //   Measured on an H200 (bench/scan/NOTES.md), batch 1: forward +10 % at 2^21 and 3·2^20 steps
  //   (2048 and 3072 tiles), +13-15 % at 2^22, +22 % at 2^24; level at 1536 tiles, -3 % at 1024.
  //   Time-major at B = 4 and 16 (rows not contiguous) lost 29-35 %; C = 16 (two lane blocks of 2
  //   threads) lost 2 %, and 4 or 8 threads per row (C = 32..8192) 16-23 %.
  // - 16-bit tensors with C % 8 == 0 (2 to 8 threads per row, 8 steps of 8-byte vectors: 35-43
  //   KB), in either layout: every step of a lane block is then whole 16-byte chunks. At 8
  //   threads per row the chunks come in by cp.async and 4 CTAs share an SM (kStagedAsyncCopy).
  const bool staged_f32_pair =
      elem_bytes == 4 && contiguous_rows && tpr == 2 && channels == 2 * vector;
  const bool staged =
      mode == Mode::Forward && vectorized &&
      ((elem_bytes == 4 && contiguous_rows && tpr == 1 && channels == vector) || staged_f32_pair ||
       (elem_bytes == 2 && tpr >= 2 && channels % 8 == 0));
  ParallelTiling tiling{vector, tpr, vector * tpr, kTileThreads / tpr * steps, staged};
  if (staged_f32_pair) tiling.staged_min_tiles = kStagedPairMinTiles;
  return tiling;
}

void launch_parallel_scan(Mode mode, Elem elem, const ParallelTiling& tiling, const ScanParams& p,
                          cudaStream_t stream) {
  const int vector = tiling.vector, tpr = tiling.threads_per_row;
  // Staged rows copy 16-byte chunks: the staged tensors and every step must be 16-byte aligned;
  // where a call's are not, the same tiling runs with per-thread loads. So does a launch of few
  // tiles (under staged_min_tiles), whose time is one tile's latency, which staging lengthens.
  const int elem_bytes = elem == Elem::F32 ? 4 : 2;
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const bool chunks16 = aligned16(p.a) && aligned16(p.u) && aligned16(p.out) &&
                        (p.stride_t * elem_bytes) % 16 == 0 && (p.stride_b * elem_bytes) % 16 == 0;
  const bool staged = tiling.staged && p.num_tiles >= tiling.staged_min_tiles && chunks16;
  // 8-channel vectors: the caller checked every tensor's alignment (linear_scan.cpp).
  if (vector == 8 && !chunks16)
    throw InternalError("parallel scan: 8-channel vectors need 16-byte aligned tensors and steps");
  const KernelChoice choice = mode == Mode::Forward
                                  ? select_elem<Mode::Forward>(elem, vector, tpr, staged)
                                  : select_elem<Mode::Backward>(elem, vector, tpr, staged);
  const void* k = choice.kernel;
  if (k == nullptr)
    throw InternalError("parallel scan: no kernel for vector " + std::to_string(vector) + " x " +
                        std::to_string(tpr) + " threads per row" + (staged ? " (staged)" : ""));
  ScanParams params = p;
  void* args[] = {&params};
  PRNN_CUDA_CHECK(cudaLaunchKernel(k, dim3(static_cast<unsigned>(p.num_tiles)), dim3(kTileThreads),
                                   args, static_cast<std::size_t>(choice.dynamic_smem), stream));
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::scan
