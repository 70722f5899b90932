// Rounds lab: a two-pass scan whose second pass rereads its chunk from the L2. Standalone
// (nvcc -O3 -std=c++20 -arch=sm_90), batch 1, C = 4·TPR channels in one lane block, forward:
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/scan/rounds_lab.cu -o /tmp/rounds && /tmp/rounds v1
// (v1, v2 or cuts: the variant lists of bench/results/h200/scan_lab/lab_27_rounds_*.csv; also
// built as prnn_scan_rounds_lab by the GPU build.) One CSV row per (variant, shape): the largest
// error against an fp64 reference over every element, the launch's status (1: a record wait
// timed out), and G elements/s, median of 15 event-timed launches.
//
// The question (bench/scan/NOTES.md): the single-pass tile scan holds a tile (in registers or
// shared memory) through its lookback, a chain of L2 round trips, so at few channels an SM has too
// few bytes in flight. Here nothing is held across a wait that the chunk's own data needs:
// - A persistent grid (cooperative launch: every CTA resident) walks time in rounds of G chunks,
//   chunk n = r·G + g to CTA g. A chunk is 256/TPR rows of R consecutive steps.
// - Pass 1 of round r: load the chunk (from HBM), fold it, scan its rows, keep each thread's
//   exclusive prefix (V pairs) and publish the chunk's aggregate (16-byte records tagged with the
//   launch, as in tile_scan.cuh).
// - Then the carry into chunk (r, g): the carry out of round r - 1 (published by CTA G - 1), the
//   aggregates of whole groups of 32 chunks before g's group (published by each group's last CTA)
//   and the chunks before g in its group: at most 1 + 12 + 31 records a channel, one round trip.
// - Pass 2 rereads the chunk (from the L2, if it stayed) and writes h.
// Each CTA runs pass 1 of round r + 1 before the carry and pass 2 of round r, so the records it
// waits on were published a pass earlier and its HBM loads continue meanwhile. The L2 then holds
// two rounds: R·1024·G elements of a and x each. rounds2_kernel (v2) waits on nothing published
// in the same iteration (three rounds in the L2).
// Measured on an H200 (bench/scan/NOTES.md, "Two passes through the L2"): correct (fp32 error
// <= 1e-6), but 110-233 G elem/s against the tile scan's 214-263 at the same shapes; with no
// waits at all the two passes still only reach 208-213 at C = 4 and 32. Not taken further.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kV = 4;                                  // channels per thread
constexpr int kGroup = 32;                             // chunks per group record
constexpr int kMaxGroups = 12;                         // so G <= 12·32 + 31
constexpr int kMaxList = 1 + kMaxGroups + kGroup - 1;  // records a channel's carry folds
constexpr unsigned kFull = 0xFFFFFFFFu;

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

// V = 4 elements of a tensor: fp32 (16 bytes) or bf16 (8 bytes); with an L2 policy (Hint) or
// without.
template <class E, bool Hint>
__device__ __forceinline__ void load4(const E* p, std::uint64_t pol, float (&out)[kV]) {
  if constexpr (std::is_same_v<E, float>) {
    float4 v;
    if constexpr (Hint)
      asm("ld.global.nc.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
          : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
          : "l"(p), "l"(pol));
    else
      asm("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];"
          : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
          : "l"(p));
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
    unsigned u0, u1;
    if constexpr (Hint)
      asm("ld.global.nc.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;"
          : "=r"(u0), "=r"(u1)
          : "l"(p), "l"(pol));
    else
      asm("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(u0), "=r"(u1) : "l"(p));
    out[0] = __uint_as_float(u0 << 16), out[1] = __uint_as_float(u0 & 0xFFFF0000u);
    out[2] = __uint_as_float(u1 << 16), out[3] = __uint_as_float(u1 & 0xFFFF0000u);
  }
}

template <class E, bool Hint>
__device__ __forceinline__ void store4(E* p, std::uint64_t pol, const float (&in)[kV]) {
  if constexpr (std::is_same_v<E, float>) {
    if constexpr (Hint)
      asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(p), "f"(in[0]),
                   "f"(in[1]), "f"(in[2]), "f"(in[3]), "l"(pol)
                   : "memory");
    else
      asm volatile("st.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "f"(in[0]), "f"(in[1]),
                   "f"(in[2]), "f"(in[3])
                   : "memory");
  } else {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(in[0], in[1]);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(in[2], in[3]);
    const unsigned u0 = *reinterpret_cast<const unsigned*>(&lo);
    const unsigned u1 = *reinterpret_cast<const unsigned*>(&hi);
    if constexpr (Hint)
      asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1,%2}, %3;" ::"l"(p), "r"(u0), "r"(u1),
                   "l"(pol)
                   : "memory");
    else
      asm volatile("st.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(u0), "r"(u1) : "memory");
  }
}

__device__ __forceinline__ void put(float4* slot, Pair v, unsigned tag) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(slot), "f"(v.a), "f"(v.x),
               "f"(__uint_as_float(tag)), "f"(0.0f)
               : "memory");
}
__device__ __forceinline__ float4 get(const float4* slot) {
  float4 r;
  asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
               : "l"(slot)
               : "memory");
  return r;
}

template <class E>
struct Params {
  const E* a;
  const E* x;
  E* h;
  long long T;
  int rounds;
  float4* agg;    // [rounds·G][W]
  float4* grp;    // [rounds][kMaxGroups][W]
  float4* carry;  // [rounds + 1][W]
  unsigned tag;
  int* status;
  unsigned long long timeout_ns;
};

// A thread's R steps of a and x from step s0 (steps past T: the identity, a = 1, x = 0).
template <class E, int W, int R, bool Hint>
__device__ __forceinline__ void load_steps(const Params<E>& p, long long s0, int k,
                                           std::uint64_t pol, float (&va)[R][kV],
                                           float (&vx)[R][kV]) {
  const E* pa = p.a + s0 * W + k * kV;
  const E* px = p.x + s0 * W + k * kV;
  if (s0 + R <= p.T) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      load4<E, Hint>(pa + r * W, pol, va[r]);
      load4<E, Hint>(px + r * W, pol, vx[r]);
    }
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < kV; ++i) va[r][i] = 1.0f, vx[r][i] = 0.0f;
      if (s0 + r < p.T) {
        load4<E, Hint>(pa + r * W, pol, va[r]);
        load4<E, Hint>(px + r * W, pol, vx[r]);
      }
    }
  }
}

// Contract: a, x, h are [T, W] (W = 4·TPR channels, batch 1), 16-byte aligned; every CTA of the
// grid is resident (cooperative launch); G <= kMaxGroups·32 + 31. Writes h_t = a_t·h_{t-1} + x_t
// from h_{-1} = 0; a record wait past timeout_ns sets *status and goes on (wrong results, no
// hang). Records must hold no `tag` of this launch before it starts.
template <class E, int TPR, int R, int MB, bool Hint>
__global__ void __launch_bounds__(kThreads, MB) rounds_kernel(Params<E> p) {
  constexpr int W = kV * TPR;
  constexpr int kRows = kThreads / TPR;
  constexpr long long S = static_cast<long long>(kRows) * R;  // steps per chunk
  constexpr int K = (W + kWarps - 1) / kWarps;                // carry channels per warp
  constexpr int GL = 32 / K;                                  // lanes per carry channel
  constexpr int kItems = (kMaxList + GL - 1) / GL;
  static_assert(32 % K == 0);
  __shared__ Pair s_warp[kWarps][W];
  __shared__ Pair s_total[2][W];
  __shared__ float s_carry[W];

  const int G = gridDim.x, g = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k = lane % TPR, row = threadIdx.x / TPR;
  std::uint64_t keep = 0, drop = 0;
  if constexpr (Hint) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(drop));
  }
  Pair excl_prev[kV], excl_cur[kV];
#pragma unroll
  for (int i = 0; i < kV; ++i) excl_prev[i] = excl_cur[i] = Pair{1.0f, 0.0f};

#pragma unroll 1
  for (int it = 0; it <= p.rounds; ++it) {
    if (it < p.rounds) {  // pass 1 of round it
      const long long n = static_cast<long long>(it) * G + g;
      const long long s0 = n * S + static_cast<long long>(row) * R;
      float va[R][kV], vx[R][kV];
      load_steps<E, W, R, Hint>(p, s0, k, keep, va, vx);
      Pair inc[kV], excl[kV];
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        inc[i] = Pair{1.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < R; ++r) inc[i] = compose(inc[i], Pair{va[r][i], vx[r][i]});
#pragma unroll
        for (int d = TPR; d < 32; d *= 2) {
          const float pa = __shfl_up_sync(kFull, inc[i].a, d);
          const float px = __shfl_up_sync(kFull, inc[i].x, d);
          if (lane >= d) inc[i] = compose(Pair{pa, px}, inc[i]);
        }
        excl[i] = Pair{__shfl_up_sync(kFull, inc[i].a, TPR), __shfl_up_sync(kFull, inc[i].x, TPR)};
        if (lane < TPR) excl[i] = Pair{1.0f, 0.0f};
        if (lane >= 32 - TPR) s_warp[warp][k * kV + i] = inc[i];
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        Pair before{1.0f, 0.0f};
        for (int w = 0; w < warp; ++w) before = compose(before, s_warp[w][k * kV + i]);
        excl_cur[i] = compose(before, excl[i]);
      }
      for (int ch = threadIdx.x; ch < W; ch += kThreads) {
        Pair total{1.0f, 0.0f};
#pragma unroll
        for (int w = 0; w < kWarps; ++w) total = compose(total, s_warp[w][ch]);
        s_total[it & 1][ch] = total;
        put(p.agg + n * W + ch, total, p.tag);
      }
      __syncthreads();
    }
    if (it >= 1) {  // the carry into chunk (it - 1, g), then pass 2
      const int r = it - 1;
      const int gi = g / kGroup, gj = g % kGroup;
      const int n_a = (r > 0 ? 1 : 0) + gi;  // carry of round r - 1, whole groups before
      const int n_all = n_a + gj;            // then the chunks before g in its group
      const int kk = lane / GL, gl = lane % GL;
      const int ch = warp + kWarps * kk;
      const int per = (n_all + GL - 1) / GL;
      const int lo = gl * per;
      const int cnt = ch < W ? max(0, min(per, n_all - lo)) : 0;
      auto slot = [&](int e) -> const float4* {
        if (r > 0 && e == 0) return p.carry + static_cast<long long>(r) * W + ch;
        if (e < n_a)
          return p.grp + (static_cast<long long>(r) * kMaxGroups + (e - (r > 0 ? 1 : 0))) * W + ch;
        return p.agg + (static_cast<long long>(r) * G + gi * kGroup + (e - n_a)) * W + ch;
      };
      float4 v[kItems];
      bool ready = true;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        v[i] = make_float4(1.0f, 0.0f, __uint_as_float(p.tag), 0.0f);
        if (i < cnt) {
          v[i] = get(slot(lo + i));
          ready = ready && __float_as_uint(v[i].z) == p.tag;
        }
      }
      std::uint64_t start = 0;
      while (!__all_sync(kFull, ready)) {
        const std::uint64_t now = global_ns();
        if (start == 0) {
          start = now;
        } else if (now - start > p.timeout_ns) {
          if (lane == 0) atomicOr(p.status, 1);
          break;
        }
        ready = true;
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
          if (i < cnt && __float_as_uint(v[i].z) != p.tag) {
            v[i] = get(slot(lo + i));
            ready = ready && __float_as_uint(v[i].z) == p.tag;
          }
        }
      }
      // Fold in order: the items before n_a into fa, the rest into fb; then across the lanes.
      Pair fa{1.0f, 0.0f}, fb{1.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        if (i < cnt) {
          const Pair q{v[i].x, v[i].y};
          if (lo + i < n_a)
            fa = compose(fa, q);
          else
            fb = compose(fb, q);
        }
      }
#pragma unroll
      for (int d = 1; d < GL; d *= 2) {
        const Pair oa{__shfl_down_sync(kFull, fa.a, d), __shfl_down_sync(kFull, fa.x, d)};
        const Pair ob{__shfl_down_sync(kFull, fb.a, d), __shfl_down_sync(kFull, fb.x, d)};
        if ((gl & (2 * d - 1)) == 0) fa = compose(fa, oa), fb = compose(fb, ob);
      }
      if (gl == 0 && ch < W) {
        const Pair f = compose(fa, fb);  // everything before chunk (r, g), from h = 0
        s_carry[ch] = f.x;
        const Pair own = s_total[r & 1][ch];
        if (gj == kGroup - 1)
          put(p.grp + (static_cast<long long>(r) * kMaxGroups + gi) * W + ch, compose(fb, own),
              p.tag);
        if (g == G - 1)
          put(p.carry + static_cast<long long>(r + 1) * W + ch, Pair{0.0f, compose(f, own).x},
              p.tag);
      }
      __syncthreads();
      // Pass 2: reread the chunk, rescan from the carry, write h.
      const long long s0 =
          (static_cast<long long>(r) * G + g) * S + static_cast<long long>(row) * R;
      float state[kV];
#pragma unroll
      for (int i = 0; i < kV; ++i)
        state[i] = fmaf(excl_prev[i].a, s_carry[k * kV + i], excl_prev[i].x);
      float va[R][kV], vx[R][kV];
      load_steps<E, W, R, Hint>(p, s0, k, drop, va, vx);
      E* out = p.h + s0 * W + k * kV;
      const bool whole = s0 + R <= p.T;
#pragma unroll
      for (int q = 0; q < R; ++q)
        if (whole || s0 + q < p.T) {
#pragma unroll
          for (int i = 0; i < kV; ++i) state[i] = fmaf(va[q][i], state[i], vx[q][i]);
          store4<E, Hint>(out + q * W, drop, state);
        }
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) excl_prev[i] = excl_cur[i];
  }
}

// Whole CTA: for channel ch = warp + 8·kk of lane group kk, fold records e = 0 .. n_all - 1
// (address slot(e)) in order, the first n_a into fa and the rest into fb; on return lane gl = 0
// of each group holds both. Bounded wait (timeout sets *status).
template <int W, int kMax, class Slot>
__device__ __forceinline__ void fold_list(unsigned tag, int* status, unsigned long long timeout_ns,
                                          int n_a, int n_all, const Slot& slot, Pair& fa, Pair& fb,
                                          int& ch, bool& head) {
  constexpr int K = (W + kWarps - 1) / kWarps;
  constexpr int GL = 32 / K;
  constexpr int kItems = (kMax + GL - 1) / GL;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kk = lane / GL, gl = lane % GL;
  ch = warp + kWarps * kk;
  head = gl == 0 && ch < W;
  const int per = (n_all + GL - 1) / GL;
  const int lo = gl * per;
  const int cnt = ch < W ? max(0, min(per, n_all - lo)) : 0;
  float4 v[kItems];
  bool ready = true;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    v[i] = make_float4(1.0f, 0.0f, __uint_as_float(tag), 0.0f);
    if (i < cnt) {
      v[i] = get(slot(ch, lo + i));
      ready = ready && __float_as_uint(v[i].z) == tag;
    }
  }
  std::uint64_t start = 0;
  while (!__all_sync(kFull, ready)) {
    const std::uint64_t now = global_ns();
    if (start == 0) {
      start = now;
    } else if (now - start > timeout_ns) {
      if (lane == 0) atomicOr(status, 1);
      break;
    }
    ready = true;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < cnt && __float_as_uint(v[i].z) != tag) {
        v[i] = get(slot(ch, lo + i));
        ready = ready && __float_as_uint(v[i].z) == tag;
      }
    }
  }
  fa = fb = Pair{1.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (i < cnt) {
      const Pair q{v[i].x, v[i].y};
      if (lo + i < n_a)
        fa = compose(fa, q);
      else
        fb = compose(fb, q);
    }
  }
#pragma unroll
  for (int d = 1; d < GL; d *= 2) {
    const Pair oa{__shfl_down_sync(kFull, fa.a, d), __shfl_down_sync(kFull, fa.x, d)};
    const Pair ob{__shfl_down_sync(kFull, fb.a, d), __shfl_down_sync(kFull, fb.x, d)};
    if ((gl & (2 * d - 1)) == 0) fa = compose(fa, oa), fb = compose(fb, ob);
  }
}

// v2: as rounds_kernel, but no record is waited for in the iteration that publishes it. Iteration
// it: pass 1 of round it; the group records of round it - 1 (each group's last CTA folds its
// group's 32 aggregates); the carry into chunk (it - 2, g) (carry of round it - 3 from CTA G - 1,
// groups and chunks of round it - 2) and pass 2 of round it - 2. CTA G - 1 publishes the carry out
// of round it - 2. The L2 then holds three rounds.
// Cut (timing only, wrong results): 1 skips every record wait and fold (carry 0); 2 also skips pass
// 2; 3 runs pass 2 alone (no pass 1, no records).
template <class E, int TPR, int R, int MB, bool Hint, int Cut = 0>
__global__ void __launch_bounds__(kThreads, MB) rounds2_kernel(Params<E> p) {
  constexpr int W = kV * TPR;
  constexpr int kRows = kThreads / TPR;
  constexpr long long S = static_cast<long long>(kRows) * R;
  __shared__ Pair s_warp[kWarps][W];
  __shared__ Pair s_total[3][W];
  __shared__ float s_carry[W];

  const int G = gridDim.x, g = blockIdx.x;
  const int gi = g / kGroup, gj = g % kGroup;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k = lane % TPR, row = threadIdx.x / TPR;
  std::uint64_t keep = 0, drop = 0;
  if constexpr (Hint) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(drop));
  }
  Pair e0[kV], e1[kV], e2[kV];  // exclusive prefixes of rounds it - 2, it - 1, it
#pragma unroll
  for (int i = 0; i < kV; ++i) e0[i] = e1[i] = e2[i] = Pair{1.0f, 0.0f};

#pragma unroll 1
  for (int it = 0; it <= p.rounds + 1; ++it) {
    if (Cut != 3 && it < p.rounds) {  // pass 1 of round it
      const long long n = static_cast<long long>(it) * G + g;
      const long long s0 = n * S + static_cast<long long>(row) * R;
      float va[R][kV], vx[R][kV];
      load_steps<E, W, R, Hint>(p, s0, k, keep, va, vx);
      Pair inc[kV], excl[kV];
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        inc[i] = Pair{1.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < R; ++r) inc[i] = compose(inc[i], Pair{va[r][i], vx[r][i]});
#pragma unroll
        for (int d = TPR; d < 32; d *= 2) {
          const float pa = __shfl_up_sync(kFull, inc[i].a, d);
          const float px = __shfl_up_sync(kFull, inc[i].x, d);
          if (lane >= d) inc[i] = compose(Pair{pa, px}, inc[i]);
        }
        excl[i] = Pair{__shfl_up_sync(kFull, inc[i].a, TPR), __shfl_up_sync(kFull, inc[i].x, TPR)};
        if (lane < TPR) excl[i] = Pair{1.0f, 0.0f};
        if (lane >= 32 - TPR) s_warp[warp][k * kV + i] = inc[i];
      }
      __syncthreads();
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        Pair before{1.0f, 0.0f};
        for (int w = 0; w < warp; ++w) before = compose(before, s_warp[w][k * kV + i]);
        e2[i] = compose(before, excl[i]);
      }
      for (int ch = threadIdx.x; ch < W; ch += kThreads) {
        Pair total{1.0f, 0.0f};
#pragma unroll
        for (int w = 0; w < kWarps; ++w) total = compose(total, s_warp[w][ch]);
        s_total[it % 3][ch] = total;
        put(p.agg + n * W + ch, total, p.tag);
      }
      __syncthreads();
    }
    if (Cut == 0 && it >= 1 && it <= p.rounds &&
        gj == kGroup - 1) {  // group record of round it - 1
      const int r = it - 1;
      auto slot = [&](int ch, int e) {
        return p.agg + (static_cast<long long>(r) * G + gi * kGroup + e) * W + ch;
      };
      Pair fa, fb;
      int ch;
      bool head;
      fold_list<W, kGroup - 1>(p.tag, p.status, p.timeout_ns, 0, kGroup - 1, slot, fa, fb, ch,
                               head);
      if (head)
        put(p.grp + (static_cast<long long>(r) * kMaxGroups + gi) * W + ch,
            compose(fb, s_total[r % 3][ch]), p.tag);
    }
    if (Cut != 2 && it >= 2) {  // the carry into chunk (it - 2, g), then pass 2
      const int r = it - 2;
      const int n_a = (r > 0 ? 1 : 0) + gi;
      const int n_all = n_a + gj;
      auto slot = [&](int ch, int e) -> const float4* {
        if (r > 0 && e == 0) return p.carry + static_cast<long long>(r) * W + ch;
        if (e < n_a)
          return p.grp + (static_cast<long long>(r) * kMaxGroups + (e - (r > 0 ? 1 : 0))) * W + ch;
        return p.agg + (static_cast<long long>(r) * G + gi * kGroup + (e - n_a)) * W + ch;
      };
      Pair fa{1.0f, 0.0f}, fb{1.0f, 0.0f};
      int ch = threadIdx.x;
      bool head = ch < W;
      if constexpr (Cut == 0)
        fold_list<W, kMaxList>(p.tag, p.status, p.timeout_ns, n_a, n_all, slot, fa, fb, ch, head);
      if (head) {
        const Pair f = compose(fa, fb);
        s_carry[ch] = f.x;
        if (g == G - 1)
          put(p.carry + static_cast<long long>(r + 1) * W + ch,
              Pair{0.0f, compose(f, s_total[r % 3][ch]).x}, p.tag);
      }
      __syncthreads();
      const long long s0 =
          (static_cast<long long>(r) * G + g) * S + static_cast<long long>(row) * R;
      float state[kV];
#pragma unroll
      for (int i = 0; i < kV; ++i) state[i] = fmaf(e0[i].a, s_carry[k * kV + i], e0[i].x);
      float va[R][kV], vx[R][kV];
      load_steps<E, W, R, Hint>(p, s0, k, drop, va, vx);
      E* out = p.h + s0 * W + k * kV;
      const bool whole = s0 + R <= p.T;
#pragma unroll
      for (int q = 0; q < R; ++q)
        if (whole || s0 + q < p.T) {
#pragma unroll
          for (int i = 0; i < kV; ++i) state[i] = fmaf(va[q][i], state[i], vx[q][i]);
          store4<E, Hint>(out + q * W, drop, state);
        }
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) e0[i] = e1[i], e1[i] = e2[i];
  }
}

// ---- host --------------------------------------------------------------------------------------

int g_sms = 0;

struct Data {
  std::vector<float> a, x;  // host values (bf16-exact when the run is bf16)
  void *da = nullptr, *dx = nullptr, *dh = nullptr;
};

float bf16_round(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

template <class E>
void upload(Data& d, std::size_t n) {
  std::vector<E> ta(n), tx(n);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<E, float>)
      ta[i] = d.a[i], tx[i] = d.x[i];
    else
      ta[i] = __float2bfloat16_rn(d.a[i]), tx[i] = __float2bfloat16_rn(d.x[i]);
  }
  CK(cudaMemcpy(d.da, ta.data(), n * sizeof(E), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.dx, tx.data(), n * sizeof(E), cudaMemcpyHostToDevice));
}

template <class F>
float median_ms(F launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float m = 0;
    CK(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
  }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The largest |h - reference| over every element (reference in fp64 from the uploaded values).
template <class E>
double max_error(const Data& d, long long T, int C) {
  const std::size_t n = static_cast<std::size_t>(T) * C;
  std::vector<E> h(n);
  CK(cudaMemcpy(h.data(), d.dh, n * sizeof(E), cudaMemcpyDeviceToHost));
  double worst = 0.0;
  std::vector<double> s(C, 0.0);
  for (long long t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) {
      const std::size_t i = static_cast<std::size_t>(t) * C + c;
      const double av = std::is_same_v<E, float> ? d.a[i] : bf16_round(d.a[i]);
      const double xv = std::is_same_v<E, float> ? d.x[i] : bf16_round(d.x[i]);
      s[c] = av * s[c] + xv;
      double got;
      if constexpr (std::is_same_v<E, float>)
        got = h[i];
      else
        got = __bfloat162float(h[i]);
      const double err = std::isfinite(got) ? std::fabs(got - s[c]) : 1e30;
      worst = std::max(worst, err);
    }
  return worst;
}

template <class E, int TPR, int R, int MB, bool Hint, int Version = 1, int Cut = 0>
void run(const char* name, Data& d, long long T) {
  constexpr int C = kV * TPR;
  auto kern =
      Version == 1 ? rounds_kernel<E, TPR, R, MB, Hint> : rounds2_kernel<E, TPR, R, MB, Hint, Cut>;
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, kThreads, 0));
  const int per_sm = std::min(MB, occ);
  const int G = per_sm * g_sms;
  if (G > kMaxGroups * kGroup + kGroup - 1) {
    std::fprintf(stderr, "%s: grid %d too large\n", name, G);
    return;
  }
  const long long S = static_cast<long long>(kThreads / TPR) * R;
  const int rounds = static_cast<int>((T + S * G - 1) / (S * G));
  Params<E> p{};
  p.a = static_cast<const E*>(d.da);
  p.x = static_cast<const E*>(d.dx);
  p.h = static_cast<E*>(d.dh);
  p.T = T;
  p.rounds = rounds;
  const std::size_t n_agg = static_cast<std::size_t>(rounds) * G * C;
  const std::size_t n_grp = static_cast<std::size_t>(rounds) * kMaxGroups * C;
  const std::size_t n_carry = static_cast<std::size_t>(rounds + 1) * C;
  CK(cudaMalloc(&p.agg, n_agg * sizeof(float4)));
  CK(cudaMalloc(&p.grp, n_grp * sizeof(float4)));
  CK(cudaMalloc(&p.carry, n_carry * sizeof(float4)));
  CK(cudaMemset(p.agg, 0, n_agg * sizeof(float4)));
  CK(cudaMemset(p.grp, 0, n_grp * sizeof(float4)));
  CK(cudaMemset(p.carry, 0, n_carry * sizeof(float4)));
  CK(cudaMalloc(&p.status, sizeof(int)));
  CK(cudaMemset(p.status, 0, sizeof(int)));
  p.timeout_ns = 200000000ull;
  const std::size_t n = static_cast<std::size_t>(T) * C;
  CK(cudaMemset(d.dh, 0xFF, n * sizeof(E)));  // poisoned: NaN in both types
  unsigned tag = 0;
  auto launch = [&] {
    p.tag = ++tag;
    void* args[] = {&p};
    CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kern), G, kThreads, args, 0, nullptr));
  };
  launch();
  CK(cudaDeviceSynchronize());
  const double err = max_error<E>(d, T, C);
  const float ms = median_ms(launch);
  int status = 0;
  CK(cudaMemcpy(&status, p.status, sizeof(int), cudaMemcpyDeviceToHost));
  const double round_mb = static_cast<double>(S) * G * C * 2 * sizeof(E) / 1e6;
  std::printf("%s,%s,%lld,%d,%d,%d,%d,%.1f,%.3g,%d,%.2f,%.1f\n", name,
              std::is_same_v<E, float> ? "f32" : "bf16", T, C, R, per_sm, rounds, round_mb, err,
              status, ms * 1e3, static_cast<double>(n) / (ms * 1e-3) / 1e9);
  std::fflush(stdout);
  CK(cudaFree(p.agg));
  CK(cudaFree(p.grp));
  CK(cudaFree(p.carry));
  CK(cudaFree(p.status));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::fprintf(stderr, "%s, %d SMs, L2 %d MB\n", prop.name, g_sms, prop.l2CacheSize >> 20);
  const std::size_t n_max = std::size_t{1} << 26;
  Data d;
  d.a.resize(n_max);
  d.x.resize(n_max);
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  auto uni = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((s >> 40) & 0xFFFFFF) / 16777216.0f;
  };
  for (std::size_t i = 0; i < n_max; ++i)
    d.a[i] = 0.5f + 0.5f * uni(), d.x[i] = 2.0f * uni() - 1.0f;
  CK(cudaMalloc(&d.da, n_max * 4));
  CK(cudaMalloc(&d.dx, n_max * 4));
  CK(cudaMalloc(&d.dh, n_max * 4));
  {
    std::vector<float> ms;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 15; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(d.dh, d.da, n_max * 4, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float m = 0;
      CK(cudaEventElapsedTime(&m, e0, e1));
      ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("# copy bandwidth %.0f GB/s\n", 2.0 * n_max * 4 / (ms[7] * 1e-3) / 1e9);
  }
  std::printf("variant,dtype,T,C,R,ctas_per_sm,rounds,round_MB,max_err,status,us,gelem_s\n");
  const long long n16 = 1ll << 24, n64 = 1ll << 26;
  if (mode == "v1") {  // scan_lab/lab_27_rounds_v1.csv
    upload<float>(d, n_max);
    for (long long n : {n16, n64}) {
      run<float, 1, 8, 2, true>("r8b2h", d, n / 4);
      run<float, 1, 8, 1, true>("r8b1h", d, n / 4);
      run<float, 1, 16, 1, true>("r16b1h", d, n / 4);
      run<float, 1, 8, 2, false>("r8b2", d, n / 4);
      run<float, 2, 8, 2, true>("r8b2h", d, n / 8);
      run<float, 2, 16, 1, true>("r16b1h", d, n / 8);
      run<float, 8, 8, 2, true>("r8b2h", d, n / 32);
      run<float, 8, 8, 1, true>("r8b1h", d, n / 32);
      run<float, 8, 16, 1, true>("r16b1h", d, n / 32);
      run<float, 8, 8, 2, false>("r8b2", d, n / 32);
      run<float, 32, 8, 2, true>("r8b2h", d, n / 128);
      run<float, 32, 16, 1, true>("r16b1h", d, n / 128);
    }
    upload<__nv_bfloat16>(d, n_max);
    for (long long n : {n16, n64}) {
      run<__nv_bfloat16, 1, 8, 2, true>("r8b2h", d, n / 4);
      run<__nv_bfloat16, 1, 16, 1, true>("r16b1h", d, n / 4);
      run<__nv_bfloat16, 8, 8, 2, true>("r8b2h", d, n / 32);
      run<__nv_bfloat16, 8, 16, 1, true>("r16b1h", d, n / 32);
      run<__nv_bfloat16, 32, 8, 2, true>("r8b2h", d, n / 128);
      run<__nv_bfloat16, 32, 16, 1, true>("r16b1h", d, n / 128);
    }
  } else if (mode == "v2") {  // lab_27_rounds_v2.csv
    upload<float>(d, n_max);
    for (long long n : {n16, n64}) {
      run<float, 8, 16, 1, true, 1>("v1_r16b1h", d, n / 32);
      run<float, 1, 8, 2, true, 2>("v2_r8b2h", d, n / 4);
      run<float, 1, 16, 1, true, 2>("v2_r16b1h", d, n / 4);
      run<float, 1, 4, 3, true, 2>("v2_r4b3h", d, n / 4);
      run<float, 2, 8, 2, true, 2>("v2_r8b2h", d, n / 8);
      run<float, 2, 16, 1, true, 2>("v2_r16b1h", d, n / 8);
      run<float, 8, 8, 2, true, 2>("v2_r8b2h", d, n / 32);
      run<float, 8, 16, 1, true, 2>("v2_r16b1h", d, n / 32);
      run<float, 8, 4, 3, true, 2>("v2_r4b3h", d, n / 32);
      run<float, 8, 8, 2, false, 2>("v2_r8b2", d, n / 32);
      run<float, 32, 8, 2, true, 2>("v2_r8b2h", d, n / 128);
      run<float, 32, 16, 1, true, 2>("v2_r16b1h", d, n / 128);
    }
    upload<__nv_bfloat16>(d, n_max);
    for (long long n : {n16, n64}) {
      run<__nv_bfloat16, 1, 8, 2, true, 2>("v2_r8b2h", d, n / 4);
      run<__nv_bfloat16, 1, 16, 1, true, 2>("v2_r16b1h", d, n / 4);
      run<__nv_bfloat16, 8, 8, 2, true, 2>("v2_r8b2h", d, n / 32);
      run<__nv_bfloat16, 8, 16, 1, true, 2>("v2_r16b1h", d, n / 32);
      run<__nv_bfloat16, 32, 8, 2, true, 2>("v2_r8b2h", d, n / 128);
      run<__nv_bfloat16, 32, 16, 1, true, 2>("v2_r16b1h", d, n / 128);
    }
  } else if (mode == "cuts") {  // lab_27_rounds_cuts.csv
    upload<float>(d, n_max);
    for (int round = 0; round < 2; ++round) {
      run<float, 1, 4, 3, true, 2, 0>("v2_r4b3h", d, n64 / 4);
      run<float, 1, 4, 3, true, 2, 1>("v2_r4b3h_nowait", d, n64 / 4);
      run<float, 1, 4, 3, true, 2, 2>("v2_r4b3h_pass1", d, n64 / 4);
      run<float, 1, 4, 3, true, 2, 3>("v2_r4b3h_pass2", d, n64 / 4);
      run<float, 1, 8, 2, true, 2, 0>("v2_r8b2h", d, n64 / 4);
      run<float, 1, 8, 2, true, 2, 1>("v2_r8b2h_nowait", d, n64 / 4);
      run<float, 1, 8, 2, true, 2, 2>("v2_r8b2h_pass1", d, n64 / 4);
      run<float, 1, 8, 2, true, 2, 3>("v2_r8b2h_pass2", d, n64 / 4);
      run<float, 8, 8, 2, true, 2, 0>("v2_r8b2h", d, n64 / 32);
      run<float, 8, 8, 2, true, 2, 1>("v2_r8b2h_nowait", d, n64 / 32);
      run<float, 8, 8, 2, true, 2, 2>("v2_r8b2h_pass1", d, n64 / 32);
      run<float, 8, 8, 2, true, 2, 3>("v2_r8b2h_pass2", d, n64 / 32);
    }
  } else {
    std::fprintf(stderr, "usage: rounds_lab v1|v2|cuts (got '%s')\n", mode.c_str());
    return 2;
  }
  return 0;
}
