// The tile machinery of the parallel linear recurrence, shared by every kernel that scans
// h_t = a_t ⊙ h_{t-1} + x_t over time: the plain scan (device_scan.cu) and the layers whose gate
// math is fused into the scan (layers/). A kernel supplies an Op that says how a step's
// coefficient and input are loaded (and computed: gates) and how a step's state is written
// (epilogue); tile_scan() does the rest.
//
// Geometry (ScanParams): a lane is (b, c), c < C; a lane's logical step q maps to a physical step
// t(q) (forward or reversed, lengths; scan_params.h). A tile is W = V·TPR channels of one batch
// entry (a lane block) × L = R·256/TPR steps. Thread (row, k) owns channels [k·V, k·V + V) and R
// consecutive steps.
// Per tile (tile = blockIdx.x): issue the loads of R steps through Op::load and, while they are
// in flight, read the initial state; fold the steps into pairs (A, X) and scan them across rows
// (shuffles, then shared memory), publish the tile's aggregate (and that of every block of 32,
// 32², ... tiles it closes) as 16-byte records tagged with the launch's epoch, fold the records of
// everything before the tile (the upper levels: whole blocks before its own block, top level
// first; then level 0: the tiles before it in its block, and where kPreviousBlockLookback says
// so the block before too) into the carry — fixed order, fixed tree: deterministic — then
// rescan (from registers, or staged, from shared memory) and write through Op::store. A tile waits
// only on tiles of lower index, which the hardware dispatches first (the assumption CUB's
// decoupled lookback makes too), and publishes before it waits, so no co-residency is needed;
// every wait is bounded (timeout_ns), so a broken assumption is a reported timeout, never a
// hang. The launch's last CTA advances the epoch (finish_tile).
//
// An Op provides (V = channels per thread):
//   using Args;                                    // its tensors (POD)
//   static constexpr Mode kMode;                   // Backward: q runs against the forward order
//   template <int V> struct Step;                  // registers kept from load to store
//   template <int V> static void load(p, args, lane, Pos, coef[V], in[V], Step<V>&);
//   template <int V> static void store(p, args, lane, Pos, const state[V], const Step<V>&);
//   template <int V> static void store_padding(p, args, lane, t);      // t in [len, T)
//   template <int V> static void store_final(p, args, lane, const state[V]);  // after step len-1
//   static float init(p, args, b, c);              // state before the first step
// and, for the staged form of tile_scan (Staged = true; every step of a lane block is W contiguous
// elements, 16-byte aligned at every (t, b), and a lane block's step is at least 16 bytes):
//   static constexpr int kStagedInputs;            // tensors a step reads, laid out like the scan
//   static constexpr int kElemBytes;               // bytes of one element of those tensors
//   static const void* staged_input(p, args, i);   // base of input i (indexed by Pos::at)
//   static void* staged_output(p, args);           // base of the one staged output
//   template <int V> static void load_staged(p, args, lane, Pos, src[kStagedInputs], coef, in,
//                                            Step&);
//   template <int V> static void store_staged(p, args, lane, Pos, state, Step, void* dst);
// The tile then lives in shared memory (tile_scan_staged): a warp whose steps are all valid and
// whose lane block holds W channels copies its region (32/TPR rows x R steps of W elements) in
// with coalesced 16-byte loads (16-bit at 8 threads per row: by cp.async, kStagedAsyncCopy; other
// warps: each thread its own steps), every thread folds and later rescans its V-element vectors
// from there, and the outputs leave the same way. Measured (bench/scan/NOTES.md): the data path
// alone (datapath_lab.cu, H200, no lookback) 245 -> 314-355 G elem/s in fp32 at C = 4 and 32, 280
// -> 553-580 in bf16; in the kernel (H100) the bf16 forward -3 to +6 % at 3 CTAs per SM, the fp32
// forward at C = 4 +4 %; the cp.async copy-in at 4 CTAs per SM (H200) +3-14 % in bf16 at C >= 128.
// The plain 16-bit forward at C >= 32 has a third form, tile_scan_packed16 (8 channels a thread,
// held raw in registers; tiles of 16384 elements), which it takes from 1024 tiles on.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/device_clock.cuh"
#include "scan/elem.cuh"
#include "scan/scan_params.h"

namespace prnn::scan {

inline constexpr int kTileThreads = 256;
inline constexpr int kTileWarps = kTileThreads / 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;
inline constexpr int kFanout = 1 << kFanoutLog2;  // records a lookback block folds (scan_params.h)
static_assert(kFanout == 32, "fold_items' lane groups: 32 records of a level a round trip");

// The affine map h -> a·h + x. compose(first, then) applies `first`, then `then`.
struct Pair {
  float a, x;
};
__device__ __forceinline__ Pair compose(Pair first, Pair then) {
  return {then.a * first.a, fmaf(then.a, first.x, then.x)};
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + __expf(-x)); }

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
// tag sees the pair: no separate flag, no fence. Stored with an L2 evict_last policy: a record
// is read again by up to 31 successors while the streamed data passes through the L2, and when a
// launch's records approach the L2's size (B=8, C=1536, T=65536: 50 MB) the default policy evicts
// them first (measured: 212 -> 268 G elem/s forward at that shape, bench/scan/NOTES.md).
__device__ __forceinline__ void store_record(float4* slot, Pair v, unsigned epoch) {
  std::uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  asm volatile("st.global.cg.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(slot),
               "f"(v.a), "f"(v.x), "f"(__uint_as_float(epoch)), "f"(0.0f), "l"(policy)
               : "memory");
}
__device__ __forceinline__ bool tagged(const float4& r, unsigned epoch) {
  return __float_as_uint(r.z) == epoch;
}

// Thread 0, once its CTA has read the epoch (before a barrier that every thread passed after its
// last use of it): count the CTA done; the last CTA of the launch resets the counter and advances
// the epoch for the next launch (skipping 0, the value of never-written records). No fence is
// needed: the last CTA acts only after every CTA has read the epoch, and the next launch sees
// the writes (kernel boundary).
__device__ __forceinline__ void finish_tile(const ScanParams& p, unsigned epoch,
                                            std::int64_t num_tiles) {
  if (atomicAdd(p.done_counter, 1u) == static_cast<unsigned>(num_tiles - 1)) {
    *p.done_counter = 0;
    *p.epoch = epoch + 1 == 0 ? 1 : epoch + 1;
  }
}

// Channels per warp when the 8 warps of a CTA share the W channels of a lane block.
template <int W>
inline constexpr int kChannelsPerWarp = (W + kTileWarps - 1) / kTileWarps;

// Whole CTA: fold records [first, first + n) (n <= kMaxN) of one level, in order, for every
// channel.
// Warp v owns channels v, v + 8, ... (K of them); its lanes are K groups of G = 32 / K, group k for
// its k-th channel, and lane g of a group folds items [g·S, g·S + S) in order (S = ceil(n / G)):
// every item is loaded at once, so a level costs one round trip to L2. The groups' lanes are then
// combined by a fixed tree (deterministic for every n). On return every lane of each warp holds
// the fold of its k-th channel in out[k].
template <int W, int kMaxN = kFanout>
__device__ void fold_items(const ScanParams& p, unsigned epoch, int level,
                           std::int64_t lane_block, std::int64_t first, int n,
                           Pair (&out)[kChannelsPerWarp<W>]) {
  constexpr int K = kChannelsPerWarp<W>;
  constexpr int G = 32 / K;                // lanes per channel
  constexpr int kMaxItems = (kMaxN + G - 1) / G;  // items per lane at n = kMaxN
  static_assert(K == 1 || K == 2 || K == 4, "lane groups of 32, 16 or 8");
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int k = lane / G, g = lane % G;
  const int ch = warp + kTileWarps * k;
  const int per_lane = (n + G - 1) / G;
  const int lo = g * per_lane;
  const int count = ch < W ? max(0, min(per_lane, n - lo)) : 0;
  const float4* rec = reinterpret_cast<const float4*>(p.agg[level]) +
                      (lane_block * p.level_count[level] + first + lo) * W + ch;
  float4 v[kMaxItems];
  bool ready = true;
#pragma unroll
  for (int i = 0; i < kMaxItems; ++i) {
    v[i] = make_float4(1.0f, 0.0f, __uint_as_float(epoch), 0.0f);
    if (i < count) {
      v[i] = __ldcg(rec + static_cast<std::int64_t>(i) * W);
      ready = ready && tagged(v[i], epoch);
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
    for (int i = 0; i < kMaxItems; ++i) {
      if (i < count && !tagged(v[i], epoch)) {
        v[i] = __ldcg(rec + static_cast<std::int64_t>(i) * W);
        ready = ready && tagged(v[i], epoch);
      }
    }
  }
  Pair acc{v[0].x, v[0].y};
#pragma unroll
  for (int i = 1; i < kMaxItems; ++i) acc = compose(acc, Pair{v[i].x, v[i].y});
#pragma unroll
  for (int d = 1; d < G; d *= 2) {
    const float oa = __shfl_down_sync(kFullMask, acc.a, d);
    const float ox = __shfl_down_sync(kFullMask, acc.x, d);
    if ((g & (2 * d - 1)) == 0) acc = compose(acc, Pair{oa, ox});
  }
#pragma unroll
  for (int kk = 0; kk < K; ++kk)
    out[kk] = Pair{__shfl_sync(kFullMask, acc.a, kk * G), __shfl_sync(kFullMask, acc.x, kk * G)};
}

// ---- tiles -------------------------------------------------------------------------------------

// The thread's lane within its tile: batch entry, first channel, sequence length.
struct Lane {
  std::int32_t b = 0;
  std::int32_t c = 0;              // first of the thread's V channels
  std::int64_t len = 0;            // valid steps of this sequence
  std::int64_t base = 0;           // b * stride_b + c: element offset of (t = 0, b, c)
  std::int64_t state_index = 0;    // b * C + c
  bool ok = false;                 // the thread's channels exist
};

// Where a step is: logical step q, physical step t, and `at` = lane.base + t·stride_t, the
// element offset of (t, b, c) in tensors laid out like the scan's own.
struct Pos {
  std::int64_t q, t, at;
};

struct TileCoords {
  std::int64_t j = 0;               // time tile
  std::int64_t lane_block = 0;
  std::int32_t channel0 = 0;        // first channel of the lane block
  std::int64_t q0 = 0;              // first logical step of this thread
  Lane lane;
};

template <int V, int TPR, int R>
__device__ TileCoords tile_coords(const ScanParams& p, std::int64_t tile, int k, int row) {
  constexpr int W = V * TPR;
  constexpr std::int64_t L = static_cast<std::int64_t>(kTileThreads / TPR) * R;
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
  Lane& ln = tc.lane;
  ln.b = static_cast<std::int32_t>(b);
  ln.c = tc.channel0 + k * V;
  ln.ok = ln.c < p.channels;
  ln.len = p.steps;
  if (p.lengths != nullptr) {
    ln.len = p.lengths[b];
    if (ln.len < 0 || ln.len > p.steps) {
      if (j == 0 && threadIdx.x == 0) atomicOr(p.status, kStatusBadLength);
      ln.len = ln.len < 0 ? 0 : p.steps;
    }
  }
  ln.base = static_cast<std::int64_t>(b) * p.stride_b + ln.c;
  ln.state_index = static_cast<std::int64_t>(b) * p.channels + ln.c;
  tc.q0 = static_cast<std::int64_t>(j) * L + static_cast<std::int64_t>(row) * R;
  return tc;
}

// Physical direction of increasing q: the recurrence's own direction in a forward op, the
// opposite in a backward op.
template <Mode M>
__device__ __forceinline__ std::int64_t scan_dir(const ScanParams& p) {
  const std::int64_t fdir = p.reverse ? -1 : 1;
  return M == Mode::Forward ? fdir : -fdir;
}

// Where a thread's R steps are, for the rescan: step r at Pos{q0 + r, t0 + dir·r, at0 + r·step}
// (t0 the physical step of q0, at0 its element offset).
struct StepWalk {
  std::int64_t q0, t0, at0, step, dir;
  __device__ __forceinline__ Pos operator()(int r) const {
    return Pos{q0 + r, t0 + dir * r, at0 + r * step};
  }
  // A copy the compiler cannot see through: the rescan recomputes its positions from it, so they
  // are not kept live (R of them) across the lookback.
  __device__ __forceinline__ StepWalk opaque() const {
    StepWalk w = *this;
    asm volatile("" : "+l"(w.at0), "+l"(w.step), "+l"(w.t0));
    return w;
  }
};

// The state before the lane's first step, init(b, c), for each channel lane 0 of the warp owns
// in the lookback (warp + 8·kk): read while the tile's loads are in flight.
template <int W, class Init>
__device__ __forceinline__ void carry_init(const ScanParams& p, const TileCoords& tc,
                                           float (&carry)[kChannelsPerWarp<W>], const Init& init) {
  const int warp = threadIdx.x / 32;
#pragma unroll
  for (int kk = 0; kk < kChannelsPerWarp<W>; ++kk) {
    const int ch = warp + kTileWarps * kk;
    carry[kk] = 0.0f;
    if (ch < W && tc.channel0 + ch < p.channels) carry[kk] = init(tc.lane.b, tc.channel0 + ch);
  }
}

// The lookback's upper levels: carries `carry` (lane 0 of each warp, per owned channel) through
// the records of levels >= 1, top level first: whole blocks of 32^l tiles before the tile's own
// block. Called after the tile's publication: folded before it (while the loads are in flight),
// a block's record would wait on its tiles, which would wait on the block before it, walking a
// lane of many blocks block by block (measured: 4x slower at 4 channels, T = 2^22;
// bench/scan/NOTES.md). With previous_block, level 1 stops one block short: tile_prefix folds
// that block from level 0. Warp-level only: no CTA barrier.
template <int W>
__device__ __forceinline__ void lookback_upper(const ScanParams& p, unsigned epoch,
                                               const TileCoords& tc, bool previous_block,
                                               float (&carry)[kChannelsPerWarp<W>]) {
  constexpr int K = kChannelsPerWarp<W>;
  Pair folded[K];
  for (int level = p.levels - 1; level >= 1; --level) {
    const std::int64_t at = tc.j >> (kFanoutLog2 * level);
    const std::int64_t first = (at >> kFanoutLog2) << kFanoutLog2;
    const int n = static_cast<int>(at - first) - (level == 1 && previous_block ? 1 : 0);
    if (n == 0) continue;
    fold_items<W>(p, epoch, level, tc.lane_block, first, n, folded);
#pragma unroll
    for (int kk = 0; kk < K; ++kk) carry[kk] = fmaf(folded[kk].a, carry[kk], folded[kk].x);
  }
}

// Whether a tile of V-channel vectors, TPR to a row, folds the block before its own from level-0
// records (tile_prefix's PreviousBlock): in vectors where a warp holds at most 2 channels, so 64
// records fit a level-0 fold (C <= 32); not in the staged 16-bit form (Staged16), nor in the
// scalar kernels, which were not measured. Measured on an H200 (bench/scan/NOTES.md), batch 1,
// C = 4..32: forward fp32 -1 to +5 %, backward -1 to +4 %; the staged 16-bit forward lost 3-6 %
// at C = 32.
template <int V, int TPR, bool Staged16 = false>
inline constexpr bool kPreviousBlockLookback =
    V == 4 && kChannelsPerWarp<V * TPR> <= 2 && !Staged16;

// Steps 2–3 of a tile, shared by every tile-scan kernel: from each thread's fold inc[V] over its
// R steps, compute the state entering the thread's first step. Scans the folds across rows
// (shuffles within a warp, shared memory across warps), publishes the tile's aggregate (and that
// of every block of 32, 32², ... tiles it closes), folds the level-0 records of the tiles before
// it in its block into `carry` (init(b, c) on entry, carried through the upper levels first) and
// applies the carry. PreviousBlock: the block before the tile's own is folded from its level-0
// records (below). Contains two __syncthreads(); every thread of the CTA must call it.
template <int V, int TPR, bool PreviousBlock = false>
__device__ __forceinline__ void tile_prefix(const ScanParams& p, unsigned epoch,
                                            const TileCoords& tc, Pair (&inc)[V],
                                            float (&carry)[kChannelsPerWarp<V * TPR>],
                                            float (&state_in)[V]) {
  constexpr int W = V * TPR;
  constexpr int K = kChannelsPerWarp<W>;
  __shared__ Pair s_warp_total[kTileWarps][W];
  __shared__ float s_carry[W];

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int k = lane % TPR;

  Pair excl[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
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

  for (int ch = threadIdx.x; ch < W; ch += kTileThreads) {
    Pair tile_total{1.0f, 0.0f};
#pragma unroll
    for (int wv = 0; wv < kTileWarps; ++wv) tile_total = compose(tile_total, s_warp_total[wv][ch]);
    store_record(reinterpret_cast<float4*>(p.agg[0]) +
                     (tc.lane_block * p.level_count[0] + tc.j) * W + ch,
                 tile_total, epoch);
  }
  Pair folded[K];
  std::int64_t index = tc.j;  // index at level (level - 1)
  for (int level = 1; level < p.levels && (index & (kFanout - 1)) == kFanout - 1; ++level) {
    fold_items<W>(p, epoch, level - 1, tc.lane_block, index - (kFanout - 1), kFanout, folded);
    index >>= kFanoutLog2;
    if (lane == 0) {
#pragma unroll
      for (int kk = 0; kk < K; ++kk) {
        const int ch = warp + kTileWarps * kk;
        if (ch < W)
          store_record(reinterpret_cast<float4*>(p.agg[level]) +
                           (tc.lane_block * p.level_count[level] + index) * W + ch,
                       folded[kk], epoch);
      }
    }
  }
  // PreviousBlock: the block before this tile's own (when both are in one block of the level
  // above) is folded from its 32 level-0 records, with the tiles before this one in its block, not
  // from its level-1 record, which waits on the block's last tile folding those same records.
  static_assert(!PreviousBlock || K <= 2, "64 level-0 records: at most 2 channels per warp");
  const bool previous_block = PreviousBlock && ((tc.j >> kFanoutLog2) & (kFanout - 1)) != 0;
  lookback_upper<W>(p, epoch, tc, previous_block, carry);
  // Level 0 (the tiles before this one in its block) folded on its own, not as the last turn of
  // the levels' loop: its level is then a constant, and the one loop measured 5–6 % slower
  // forward at C = 1024 and B = 8 (lab run 7, bench/scan/NOTES.md).
  const int n = static_cast<int>(tc.j & (kFanout - 1)) + (previous_block ? kFanout : 0);
  if (n > 0) {
    fold_items<W, PreviousBlock ? 2 * kFanout : kFanout>(p, epoch, 0, tc.lane_block, tc.j - n, n,
                                                         folded);
#pragma unroll
    for (int kk = 0; kk < K; ++kk) carry[kk] = fmaf(folded[kk].a, carry[kk], folded[kk].x);
  }
  if (lane == 0) {
#pragma unroll
    for (int kk = 0; kk < K; ++kk) {
      const int ch = warp + kTileWarps * kk;
      if (ch < W) s_carry[ch] = carry[kk];
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < V; ++i) state_in[i] = fmaf(excl[i].a, s_carry[k * V + i], excl[i].x);
}

// ---- staged rows -------------------------------------------------------------------------------

// Where a warp's region is and how it maps onto the staging buffer. The region is kSteps
// consecutive physical steps from t_lo; each step is the lane block's W elements (E·TPR bytes,
// E = bytes of one thread's vector), kChunksPerStep 16-byte chunks, at element offset
// `base + s·stride_t` for step t_lo + s. Chunk c of the region (c = 0 .. kChunks - 1) is chunk
// c % kChunksPerStep of step t_lo + c / kChunksPerStep; lane i copies chunks i, i + 32, ...
// In shared memory, step r of thread `lane` is the E bytes at r·kPitch + lane·E, so a thread reads
// its vectors with consecutive lanes at consecutive addresses. kPitch pads each step row so that
// the 16-byte chunk stores of 8 lanes (one shared-memory phase: 8 / kChunksPerStep steps, each in
// its own row) fall in distinct banks.
template <int TPR, int R, int E>
struct WarpRegion {
  static constexpr int kSteps = 32 / TPR * R;
  static constexpr int kChunksPerStep = TPR * E / 16;
  static constexpr int kUnitsPerChunk = 16 / E;  // thread vectors per chunk
  static constexpr int kChunks = kSteps * kChunksPerStep;
  static constexpr int kChunksPerLane = kChunks / 32;
  static constexpr int kPitch = 32 * E + 16 * kChunksPerStep;  // bytes per staged step row
  static_assert(E == 8 || E == 16, "thread vectors of 8 or 16 bytes");
  static_assert(kChunksPerStep >= 1 && kChunks % 32 == 0, "a step of the lane block is >= 16 B");
  std::int64_t t_lo = 0;
  std::int64_t base = 0;      // element offset of (t_lo, b, channel0)
  std::int64_t stride_t = 0;  // elements between consecutive steps
  bool forward = true;
  // Byte offset in the warp's staging rows of the chunk this lane copies in turn i.
  __device__ __forceinline__ int slot(int i, int lane) const {
    const int c = i * 32 + lane;
    const int s = c / kChunksPerStep;
    const int u = forward ? s : kSteps - 1 - s;  // logical step within the warp
    return (u % R) * kPitch + ((u / R) * TPR + (c % kChunksPerStep) * kUnitsPerChunk) * E;
  }
  // Element offset (in the scan's tensors) of the chunk this lane copies in turn i.
  __device__ __forceinline__ std::int64_t at(int i, int lane, int elem_bytes) const {
    const int c = i * 32 + lane;
    return base + (c / kChunksPerStep) * stride_t + (c % kChunksPerStep) * (16 / elem_bytes);
  }
};

// The CTA's staging buffer: per warp, per staged input, R step rows of kPitch bytes. Up to
// kStagedStaticBytesMax it is static shared memory (under the 48 KB static limit with the tile's
// other static arrays); a larger one is dynamic, kStagedDynamicBytes, which the launch passes.
inline constexpr int kStagedStaticBytesMax = 40 * 1024;
template <class Op, int V, int TPR, int R>
inline constexpr int kStagedRowBytes = R * WarpRegion<TPR, R, V * Op::kElemBytes>::kPitch;
template <class Op, int V, int TPR, int R>
inline constexpr int kStagedBufferBytes =
    kTileWarps * Op::kStagedInputs * kStagedRowBytes<Op, V, TPR, R>;
// Dynamic shared memory a staged kernel needs (0: its buffer is static).
template <class Op, int V, int TPR, int R>
inline constexpr int kStagedDynamicBytes =
    kStagedBufferBytes<Op, V, TPR, R> <= kStagedStaticBytesMax ? 0
                                                                : kStagedBufferBytes<Op, V, TPR, R>;
template <class Op, int V, int TPR, int R>
__device__ __forceinline__ auto staged_rows()
    -> unsigned char (&)[kTileWarps][Op::kStagedInputs][kStagedRowBytes<Op, V, TPR, R>] {
  static_assert(32 % TPR == 0);
  constexpr int kBytes = kStagedRowBytes<Op, V, TPR, R>;
  using Buffer = unsigned char[kTileWarps][Op::kStagedInputs][kBytes];
  if constexpr (kStagedDynamicBytes<Op, V, TPR, R> == 0) {
    __shared__ alignas(16) Buffer s;
    return s;
  } else {
    extern __shared__ uint4 s_staged_dynamic[];
    return *reinterpret_cast<Buffer*>(s_staged_dynamic);
  }
}

// Whether a staged tile's chunks come in by cp.async (global to shared memory, through no
// register) rather than by loads into registers and stores to shared memory: 16-bit tensors at 8
// threads per row (lane blocks of 32 channels, C >= 64), which then run 4 CTAs per SM
// (kStagedMinBlocks). Measured on an H200 (bench/scan/NOTES.md, lab runs 24-25), bf16 forward,
// both together against neither: C = 128 +3 %, C = 1024 +6-11 %, C = 8192 +10-14 %, B = 4 C = 256
// +10 %, B = 8 C = 1536 +14 %; 4 CTAs alone lost 4-9 % at C >= 1024. cp.async at 2 and 4 threads
// per row (16-bit C = 8 and 32) lost 11-32 %, and in the fp32 staged rows (C = 4 and 8) 12-37 %.
template <int ElemBytes, int TPR>
inline constexpr bool kStagedAsyncCopy = ElemBytes == 2 && TPR == 8;

// The staged form of a tile (Staged = true; the Op contract above): the tile lives in shared
// memory, not in registers. Each warp copies its region in (coalesced 16-byte chunks where all its
// steps are valid and its lane block is whole; else each thread copies its own valid steps), then
// every thread folds its R steps from shared memory, and after the lookback reads them again to
// rescan. The outputs go back through the same buffer (chunks) or straight from the thread. With
// no step held in registers across the lookback, more CTAs fit an SM.
template <class Op, int V, int TPR, int R>
__device__ __forceinline__ void tile_scan_staged(const ScanParams& p,
                                                 const typename Op::Args& args) {
  static_assert(Op::kMode == Mode::Forward, "staged rows: forward ops only");
  constexpr int kRowsPerWarp = 32 / TPR;
  constexpr int E = V * Op::kElemBytes;  // bytes of one thread's vector
  using Step = typename Op::template Step<V>;
  using Region = WarpRegion<TPR, R, E>;
  using Chunk = std::conditional_t<E == 16, uint4, uint2>;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int k = lane % TPR;
  const int row = warp * kRowsPerWarp + lane / TPR;
  const std::int64_t dir = scan_dir<Op::kMode>(p);
  const unsigned epoch = *static_cast<volatile unsigned*>(p.epoch);  // as in tile_scan
  const TileCoords tc = tile_coords<V, TPR, R>(p, blockIdx.x, k, row);
  const Lane& ln = tc.lane;
  const std::int64_t t0 = dir > 0 ? tc.q0 : ln.len - 1 - tc.q0;
  const std::int64_t at0 = ln.base + t0 * p.stride_t;
  const std::int64_t step_at = dir * p.stride_t;
  auto pos = [&](int r) { return Pos{tc.q0 + r, t0 + dir * r, at0 + r * step_at}; };
  // Steps [0, valid) of this thread exist (the rest is padding or past T).
  const std::int64_t left = ln.len - tc.q0;
  const int valid = !ln.ok || left <= 0 ? 0 : (left >= R ? R : static_cast<int>(left));

  auto& buf = staged_rows<Op, V, TPR, R>()[warp];
  auto mine = [&](int i, int r) -> unsigned char* {
    return &buf[i][r * Region::kPitch + lane * E];
  };
  const std::int64_t warp_q0 = tc.j * (kTileThreads / TPR * R) + warp * Region::kSteps;
  const bool chunked = warp_q0 + Region::kSteps <= ln.len && tc.channel0 + V * TPR <= p.channels;
  Region region;
  region.forward = dir > 0;
  region.t_lo = dir > 0 ? warp_q0 : ln.len - warp_q0 - Region::kSteps;
  region.stride_t = p.stride_t;
  region.base = ln.base - ln.c + tc.channel0 + region.t_lo * p.stride_t;

  // 1. Into shared memory.
  if (chunked) {
#pragma unroll
    for (int i = 0; i < Op::kStagedInputs; ++i) {
      const auto* src = static_cast<const unsigned char*>(Op::staged_input(p, args, i));
#pragma unroll
      for (int c = 0; c < Region::kChunksPerLane; ++c) {
        const auto* from = src + region.at(c, lane, Op::kElemBytes) * Op::kElemBytes;
        if constexpr (kStagedAsyncCopy<Op::kElemBytes, TPR>) {
          const auto to =
              static_cast<unsigned>(__cvta_generic_to_shared(&buf[i][region.slot(c, lane)]));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(from)
                       : "memory");
        } else {
          *reinterpret_cast<uint4*>(&buf[i][region.slot(c, lane)]) =
              __ldg(reinterpret_cast<const uint4*>(from));
        }
      }
    }
    if constexpr (kStagedAsyncCopy<Op::kElemBytes, TPR>)
      asm volatile("cp.async.wait_all;" ::: "memory");
  } else {
#pragma unroll
    for (int i = 0; i < Op::kStagedInputs; ++i) {
      const auto* src = static_cast<const unsigned char*>(Op::staged_input(p, args, i));
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r < valid)
          *reinterpret_cast<Chunk*>(mine(i, r)) =
              __ldg(reinterpret_cast<const Chunk*>(src + pos(r).at * Op::kElemBytes));
    }
  }
  __syncwarp();

  // 2. The initial state (its load overlaps the fold's shared-memory reads).
  float carry[kChannelsPerWarp<V * TPR>];
  carry_init<V * TPR>(p, tc, carry,
                      [&](std::int32_t b, std::int32_t c) { return Op::init(p, args, b, c); });

  // 3. Fold from shared memory, scan across rows, publish, look back.
  auto read_step = [&](int r, float (&coef)[V], float (&in)[V], Step& st) {
    const void* from[Op::kStagedInputs];
#pragma unroll
    for (int i = 0; i < Op::kStagedInputs; ++i) from[i] = mine(i, r);
    Op::template load_staged<V>(p, args, ln, pos(r), from, coef, in, st);
  };
  Pair inc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) inc[i] = Pair{1.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < valid) {
      float coef[V], in[V];
      Step st;
      read_step(r, coef, in, st);
#pragma unroll
      for (int i = 0; i < V; ++i) inc[i] = compose(inc[i], Pair{coef[i], in[i]});
    }
  }
  float state[V];
  tile_prefix<V, TPR, kPreviousBlockLookback<V, TPR, Op::kElemBytes == 2>>(p, epoch, tc, inc, carry,
                                                                           state);

  // 4. Rescan from shared memory and write.
  if (ln.ok) {
    const StepWalk pos_r = StepWalk{tc.q0, t0, at0, step_at, dir}.opaque();
    if (tc.j == 0 && row == 0 && ln.len == 0) Op::template store_final<V>(p, args, ln, state);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::int64_t q = tc.q0 + r;
      if (r < valid) {
        float coef[V], in[V];
        Step st;
        read_step(r, coef, in, st);
#pragma unroll
        for (int i = 0; i < V; ++i) state[i] = fmaf(coef[i], state[i], in[i]);
        if (chunked) Op::template store_staged<V>(p, args, ln, pos_r(r), state, st, mine(0, r));
        else Op::template store<V>(p, args, ln, pos_r(r), state, st);
        if (q == ln.len - 1) Op::template store_final<V>(p, args, ln, state);
      } else if (q >= ln.len && q < p.steps) {
        Op::template store_padding<V>(p, args, ln, q);
      }
    }
  }
  if (chunked) {  // warp-uniform; every lane of a chunked warp has ln.ok
    __syncwarp();
    auto* dst = static_cast<unsigned char*>(Op::staged_output(p, args));
#pragma unroll
    for (int c = 0; c < Region::kChunksPerLane; ++c)
      *reinterpret_cast<uint4*>(dst + region.at(c, lane, Op::kElemBytes) * Op::kElemBytes) =
          *reinterpret_cast<const uint4*>(&buf[0][region.slot(c, lane)]);
  }
  if (threadIdx.x == 0) finish_tile(p, epoch, p.num_tiles);
}

// The register form of a tile: each thread loads its R steps into registers (padding and
// out-of-range steps are the identity), folds them, and rescans them after the lookback.
template <class Op, int V, int TPR, int R>
__device__ __forceinline__ void tile_scan_registers(const ScanParams& p,
                                                    const typename Op::Args& args) {
  constexpr int kRowsPerWarp = 32 / TPR;
  using Step = typename Op::template Step<V>;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int k = lane % TPR;  // vector slot in the row
  const int row = warp * kRowsPerWarp + lane / TPR;
  const std::int64_t dir = scan_dir<Op::kMode>(p);

  // The launch's epoch, read by every thread before the CTA's first barrier, so before thread 0
  // counts the tile done (finish_tile) and the last tile of the launch advances it.
  const unsigned epoch = *static_cast<volatile unsigned*>(p.epoch);
  const TileCoords tc = tile_coords<V, TPR, R>(p, blockIdx.x, k, row);
  const Lane& ln = tc.lane;
  const std::int64_t t0 = dir > 0 ? tc.q0 : ln.len - 1 - tc.q0;  // physical step of q0
  const std::int64_t at0 = ln.base + t0 * p.stride_t;
  const std::int64_t step_at = dir * p.stride_t;
  auto pos = [&](int r) { return Pos{tc.q0 + r, t0 + dir * r, at0 + r * step_at}; };

  // 1. Load R steps; padding and out-of-range steps are the identity (1, 0).
  float coef[R][V], in[R][V];
  Step step[R];
  if (ln.ok && tc.q0 + R <= ln.len) {  // every step valid
#pragma unroll
    for (int r = 0; r < R; ++r) Op::template load<V>(p, args, ln, pos(r), coef[r], in[r], step[r]);
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        coef[r][i] = 1.0f;
        in[r][i] = 0.0f;
      }
      if (ln.ok && tc.q0 + r < ln.len)
        Op::template load<V>(p, args, ln, pos(r), coef[r], in[r], step[r]);
    }
  }

  // 2. While the loads are in flight: the initial state.
  float carry[kChannelsPerWarp<V * TPR>];
  carry_init<V * TPR>(p, tc, carry,
                      [&](std::int32_t b, std::int32_t c) { return Op::init(p, args, b, c); });

  // 3. Fold, scan across rows, publish, look back (upper levels, then level 0): the state
  //    entering this thread's first step.
  Pair inc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    inc[i] = Pair{1.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < R; ++r) inc[i] = compose(inc[i], Pair{coef[r][i], in[r][i]});
  }
  float state[V];
  tile_prefix<V, TPR, kPreviousBlockLookback<V, TPR>>(p, epoch, tc, inc, carry, state);

  // 4. Rescan from registers and write.
  if (ln.ok) {
    const StepWalk pos_r = StepWalk{tc.q0, t0, at0, step_at, dir}.opaque();
    if (tc.j == 0 && row == 0 && ln.len == 0) Op::template store_final<V>(p, args, ln, state);
    if (tc.q0 + R < ln.len) {  // every step valid, none the last
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int i = 0; i < V; ++i) state[i] = fmaf(coef[r][i], state[i], in[r][i]);
        Op::template store<V>(p, args, ln, pos_r(r), state, step[r]);
      }
    } else {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const std::int64_t q = tc.q0 + r;
        if (q < ln.len) {
#pragma unroll
          for (int i = 0; i < V; ++i) state[i] = fmaf(coef[r][i], state[i], in[r][i]);
          Op::template store<V>(p, args, ln, pos_r(r), state, step[r]);
          if (q == ln.len - 1) Op::template store_final<V>(p, args, ln, state);
        } else if (q < p.steps) {
          Op::template store_padding<V>(p, args, ln, q);
        }
      }
    }
  }
  if (threadIdx.x == 0) finish_tile(p, epoch, p.num_tiles);
}

// The register form of the plain 16-bit forward with 8-channel vectors (V = 8: 16-byte loads;
// parallel_tiling: C % 8 == 0, C >= 32, 16-byte aligned tensors and steps). Each thread keeps its
// R steps of a and x raw, 4 registers a step and tensor (half of what the same steps take in
// fp32), converts them to fp32 to fold and again to rescan. At 4 threads per row (lane blocks of
// 32 channels; 2 and 16 at C = 32..56) and 8 steps, a tile is 16384 elements, moving as many
// bytes as an fp32 tile at the same register footprint (2 CTAs per SM); its lookback is amortized over twice the elements of
// the staged 16-bit tile. Measured on an H200 against the staged form (bench/scan/NOTES.md, lab
// run 28), bf16 forward: C = 128 +22 %, C = 1024 +9-16 %, B = 4 C = 256 +9 %, C = 8192 and B = 8
// C = 1536 level, C = 8192 T = 2048 -2 %; 8 threads per row (64-channel lane blocks, 8 channels
// a warp in the lookback) spilled 268 bytes and lost 5-15 %. At 2 threads per row (lab run 29):
// C = 32 +13-14 %, C = 48 +76 %; at 1 (C = 16) -23 %, not taken.
// Expects: Op the plain scan's forward op over 16-bit T (a = p.a, x = p.u), V = 8.
template <class Op, class T, int V, int TPR, int R>
__device__ __forceinline__ void tile_scan_packed16(const ScanParams& p,
                                                   const typename Op::Args& args) {
  static_assert(sizeof(T) == 2 && V == 8, "8 16-bit channels per thread");
  static_assert(Op::kMode == Mode::Forward, "forward only");
  using Step = typename Op::template Step<V>;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int k = lane % TPR;
  const int row = warp * (32 / TPR) + lane / TPR;
  const std::int64_t dir = scan_dir<Op::kMode>(p);
  const unsigned epoch = *static_cast<volatile unsigned*>(p.epoch);
  const TileCoords tc = tile_coords<V, TPR, R>(p, blockIdx.x, k, row);
  const Lane& ln = tc.lane;
  const std::int64_t t0 = dir > 0 ? tc.q0 : ln.len - 1 - tc.q0;
  const std::int64_t at0 = ln.base + t0 * p.stride_t;
  const std::int64_t step_at = dir * p.stride_t;
  const std::int64_t left = ln.len - tc.q0;
  const int valid = !ln.ok || left <= 0 ? 0 : (left >= R ? R : static_cast<int>(left));
  const T* a = static_cast<const T*>(p.a);
  const T* x = static_cast<const T*>(p.u);
  auto unpack = [](const uint4& raw, float (&out)[V]) {
    load_vec<T, V>(reinterpret_cast<const T*>(&raw), out);
  };

  // 1. Load the valid steps raw.
  uint4 ra[R], rx[R];
  if (valid == R) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      ra[r] = __ldg(reinterpret_cast<const uint4*>(a + at0 + r * step_at));
      rx[r] = __ldg(reinterpret_cast<const uint4*>(x + at0 + r * step_at));
    }
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      ra[r] = rx[r] = make_uint4(0, 0, 0, 0);
      if (r < valid) {
        ra[r] = __ldg(reinterpret_cast<const uint4*>(a + at0 + r * step_at));
        rx[r] = __ldg(reinterpret_cast<const uint4*>(x + at0 + r * step_at));
      }
    }
  }
  float carry[kChannelsPerWarp<V * TPR>];
  carry_init<V * TPR>(p, tc, carry,
                      [&](std::int32_t b, std::int32_t c) { return Op::init(p, args, b, c); });

  // 2. Fold, scan across rows, publish, look back.
  Pair inc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) inc[i] = Pair{1.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < valid) {
      float coef[V], in[V];
      unpack(ra[r], coef);
      unpack(rx[r], in);
#pragma unroll
      for (int i = 0; i < V; ++i) inc[i] = compose(inc[i], Pair{coef[i], in[i]});
    }
  }
  float state[V];
  tile_prefix<V, TPR, false>(p, epoch, tc, inc, carry, state);

  // 3. Rescan from the raw steps and write.
  if (ln.ok) {
    const StepWalk pos_r = StepWalk{tc.q0, t0, at0, step_at, dir}.opaque();
    if (tc.j == 0 && row == 0 && ln.len == 0) Op::template store_final<V>(p, args, ln, state);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::int64_t q = tc.q0 + r;
      if (r < valid) {
        float coef[V], in[V];
        unpack(ra[r], coef);
        unpack(rx[r], in);
#pragma unroll
        for (int i = 0; i < V; ++i) state[i] = fmaf(coef[i], state[i], in[i]);
        Op::template store<V>(p, args, ln, pos_r(r), state, Step{});
        if (q == ln.len - 1) Op::template store_final<V>(p, args, ln, state);
      } else if (q >= ln.len && q < p.steps) {
        Op::template store_padding<V>(p, args, ln, q);
      }
    }
  }
  if (threadIdx.x == 0) finish_tile(p, epoch, p.num_tiles);
}

// One tile of the scan (the body of every tile-scan kernel; 256 threads): the register form, or,
// Staged, the shared-memory form (the launch guarantees 16-byte aligned tensors and steps).
template <class Op, int V, int TPR, int R, bool Staged = false>
__device__ __forceinline__ void tile_scan(const ScanParams& p, const typename Op::Args& args) {
  if constexpr (Staged) tile_scan_staged<Op, V, TPR, R>(p, args);
  else tile_scan_registers<Op, V, TPR, R>(p, args);
}

// ---- tiling ------------------------------------------------------------------------------------

// Steps per thread (scan_params.h).
template <Mode M, int V, int TPR>
inline constexpr int kStepsPerThread = steps_per_thread(M, V, TPR);
template <Mode M, int V, int TPR>
inline constexpr int kMinBlocks = (M == Mode::Forward && V >= 4 && TPR >= 2) ? 2
                                  : (M == Mode::Forward ? 3 : 2);
// CTAs per SM of the staged (shared-memory) form, by element bytes and threads per row: its steps
// are not held in registers. Measured on an H100 (bench/scan/NOTES.md): 16-bit 3 (80 registers; 4
// were 0-7 % slower, 5 spill at 8 threads per row and lost 20-30 %); fp32 at C = 4 4 (64
// registers). fp32 at 2 threads per row (C = 8): 3, as many as its 64 KB of dynamic shared memory
// allow (79 registers; H200). Where the chunks come in by cp.async (kStagedAsyncCopy: 16-bit at 8
// threads per row): 4 (64 registers, no spills, 4 x 40 KB of static shared memory; H200).
template <int ElemBytes, int TPR>
inline constexpr int kStagedMinBlocks =
    kStagedAsyncCopy<ElemBytes, TPR> ? 4 : (ElemBytes == 2 ? 3 : (TPR == 1 ? 4 : 3));
}  // namespace prnn::scan
