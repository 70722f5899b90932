// The tensor-core backward's exchange alone (not part of the library; bench/persistent/NOTES.md,
// "The backward's X by owner"): each step every CTA stores its partial products X (a value for
// every unit of dh and batch element), arrives on a counter, waits for every CTA, and sums the
// CTAs' partials of its own R units, as tensor_core_backward_kernel does at B ≤ 4 (one packed
// chunk). No products, no cell: what the exchange's layout costs, by phase.
// Layouts (X of one step; the CTA owning unit m is o = m / R, j = m % R):
//   0 cta    X[k][m][4]     the library's rows at B ≤ 4 (patches/tc_backward_x_rows4.patch):
//                           a writer's units contiguous; a summing lane reads CTA k, k + 16, …
//                           of its unit, 16 lanes a unit, so a warp's load touches 16 lines
//   1 unit   X[o][j][k][4]  a unit's CTAs contiguous: 16 lanes of a unit read 256 contiguous
//                           bytes, a warp's load 2 lines; each writer's unit its own line
//   2 owner  X[o][k][j][4]  an owner's block contiguous (CTAs·R·16 bytes), a writer's R units of
//                           one owner contiguous; the block read coalesced (each thread float4
//                           tid + 256·i) into shared memory, then summed from there as layout 1
//   3 cta16  X[k][m][4]     layout 0 stored 16 bytes a lane: the 4 lanes of a unit pair
//                           exchange their values by shuffles, lane tig = 0 stores unit grp's
//                           float4, tig = 1 unit grp + 8's (half the store instructions)
//   4 gather G[k][r][4]     not X: the other way to exchange a backward step, each CTA storing
//                           its own 4·R rows of dQ (LSTM) and every CTA reading all 4·H of
//                           them (thread tid the float4 tid + 256·i, summed in its lane: the
//                           loads a staging would issue), as the gated warp-rows backward does
//   5 x16    X[k][m][4]     layout 0 in bf16 (2-byte stores, 8-byte loads, the sum in fp32):
//                           half the bytes, each partial rounded to 8 bits of mantissa
//   6 pair   X[c][m][4]     clusters of 2 CTAs (2c, 2c + 1): each stores the m-tiles of its
//                           peer's parity into the peer's shared memory (st.shared::cluster),
//                           a cluster barrier, then each stores the pair's sums of its own
//                           parity's tiles; the readers add CTAs / 2 partials a unit
//   7 owner_staged          layout 2 with the stores through shared memory: the CTA's X
//            X[o][k][j][4]  there first ([m][4]), then thread tid stores float4 m = tid + 256·i
//                           to its owner's block, so a warp's store covers 512 contiguous bytes
//                           of ~4 owners (R = 9) instead of one line per unit
//   8 none                  no exchange: layout 0's values and indices computed but not stored
//                           (the lab's own arithmetic in the store phase), nothing read: the
//                           step is the arithmetic and the grid barrier alone
// Step s:  CTA k stores X_s[k][m][b] = g(k, m, b, s) + 0·(its previous sum) for every m (warp w
//          the m-tiles [w·KT, (w+1)·KT) of 16 units, lane (grp, tig) units grp and grp + 8 of a
//          tile, element tig: the kernel's packed stores); bar.sync; thread 0 fences and adds 1
//          to the counter, then waits until it reaches base + CTAs·(s + 1); bar.sync; the sum of
//          its R units over the CTAs in order k = sub, sub + 16, … per lane and a shuffle tree
//          (deterministic); the last step's sums checked against the exact sum of g (integers:
//          exact in fp32), after its stamps.
// Launch:  cooperative, ceil(H/R) CTAs × 256 threads, one per SM (layout 6: in clusters of 2). Two buffers by step parity
//          (a CTA stores X_s after every CTA arrived at s − 1, which each did after reading
//          X_{s-2}).
// Timing:  events around each launch (median of 7, per step), and thread 0's clock64() per
//          phase (store, arrive, wait, sum), the median over CTAs of their mean per step.
// Usage:   x_exchange_lab [H [R [STEPS]]]   (defaults 1152 9 256; R ≤ 32, H ≤ 8·16·kMaxKT)
// Prints:  the device line, then CSV layout,H,R,ctas,ns_per_step,store,arrive,wait,sum,errors
//          (phases in SM cycles a step).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_timer.h"
#include "core/cuda_check.h"

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kLanes = 16;     // summing lanes per unit (the kernel's at R = 9 and 16)
constexpr int kSumLoads = 8;   // loads a summing lane has in flight
constexpr int kMaxKT = 16;     // m-tiles per warp: H ≤ 2048
constexpr unsigned long long kSpinBound = 1ull << 26;

enum Layout {
  kCta = 0,
  kUnit = 1,
  kOwner = 2,
  kCta16 = 3,
  kGather = 4,
  kX16 = 5,
  kPair = 6,
  kOwnerStaged = 7,
  kNone = 8
};
const char* const kLayoutNames[] = {"cta", "unit", "owner", "cta16",        "gather",
                                    "x16", "pair", "owner_staged", "none"};

struct Params {
  float* x;                       // [2][CTAs·H·4]
  unsigned long long* counter;    // arrivals, never reset: launch `base` onward
  unsigned long long base;
  unsigned* errors;               // sums that differ from the exact one
  long long* phases;              // [CTAs][4] cycles summed over the steps
  float* sink;
  float zero;                     // 0 at run time: the store depends on the previous sum
  int hidden, rows, steps;
};

__host__ __device__ inline float g(int k, int m, int b, int s) {
  return static_cast<float>((k * 7 + m * 3 + b * 5 + s) % 16);
}

// Index of X[k][m][b] of one step in the layout.
// (kPair: k the pair of CTAs 2k, 2k + 1; kX16: in 16-bit elements.)
template <int L>
__device__ __forceinline__ std::int64_t x_index(int k, int m, int b, int ctas, int H, int R) {
  if constexpr (L == kCta || L == kCta16 || L == kX16 || L == kPair || L == kNone)
    return (static_cast<std::int64_t>(k) * H + m) * 4 + b;
  const int o = m / R, j = m % R;
  if constexpr (L == kUnit) return ((static_cast<std::int64_t>(o) * R + j) * ctas + k) * 4 + b;
  return ((static_cast<std::int64_t>(o) * ctas + k) * R + j) * 4 + b;
}

// Distributed shared memory (kPair): the same shared-memory address in the cluster's CTA `rank`,
// a 4-byte store there, and the cluster-wide barrier (release / acquire).
__device__ __forceinline__ unsigned peer_address(const void* local, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(r)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(local))), "r"(rank));
  return r;
}
__device__ __forceinline__ void peer_store(unsigned addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}

template <int L>
__global__ void __launch_bounds__(kThreads, 1) x_exchange_kernel(const Params p) {
  // layout 2: the owner's block, CTAs·R float4; layout 6: the peer's partials of this CTA's
  // m-tiles (tile t of the CTA's parity at slot t / 2, 16 units × 4 values)
  extern __shared__ float4 s_block[];
  __shared__ float4 s_sum[32];
  __shared__ int s_abort;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int grp = lane >> 2, tig = lane & 3;
  const int H = p.hidden, R = p.rows, k_self = static_cast<int>(blockIdx.x);
  const int ctas = static_cast<int>(gridDim.x), row0 = k_self * R;
  const int kt_per_warp = (H + 16 * kWarps - 1) / (16 * kWarps);
  if (tid == 0) s_abort = 0;
  float prev = 0.0f;
  long long ph[4] = {0, 0, 0, 0};
  __syncthreads();
  for (int s = 0; s < p.steps; ++s) {
    const long long t0 = clock64();
    // a step's X: CTAs·CTAs·R·4 values (main's per_step), room for every layout's units up to
    // CTAs·R ≥ H, so that the two parities never overlap
    float* x = p.x + static_cast<std::int64_t>(s & 1) * ctas * ctas * R * 4;
    const float dep = prev * p.zero;
    // ---- store: warp w's m-tiles, lane (grp, tig) units grp, grp + 8 of each, element tig ----
    float unstored = 0.0f;  // kNone: what layout 0 would store
    for (int mt = 0; mt < kt_per_warp; ++mt) {
      const int m = (warp * kt_per_warp + mt) * 16 + grp;
      if constexpr (L == kNone) {
        if (m < H)
          unstored += g(k_self, m, tig, s) + dep +
                      static_cast<float>(x_index<L>(k_self, m, tig, ctas, H, R) & 1);
        if (m + 8 < H)
          unstored += g(k_self, m + 8, tig, s) + dep +
                      static_cast<float>(x_index<L>(k_self, m + 8, tig, ctas, H, R) & 1);
      } else if constexpr (L == kOwnerStaged) {
        float* s_x = reinterpret_cast<float*>(s_block);
        if (m < H) s_x[m * 4 + tig] = g(k_self, m, tig, s) + dep;
        if (m + 8 < H) s_x[(m + 8) * 4 + tig] = g(k_self, m + 8, tig, s) + dep;
      } else if constexpr (L == kPair) {
        // tiles of the peer's parity go to the peer's shared memory; this CTA's stay
        const int t = warp * kt_per_warp + mt;
        const unsigned rank = static_cast<unsigned>(k_self & 1);
        if ((t & 1) != static_cast<int>(rank)) {
          float* slot = reinterpret_cast<float*>(s_block) + (t >> 1) * 64;
          peer_store(peer_address(slot + grp * 4 + tig, rank ^ 1u), g(k_self, m, tig, s) + dep);
          peer_store(peer_address(slot + (grp + 8) * 4 + tig, rank ^ 1u),
                     g(k_self, m + 8, tig, s) + dep);
        }
      } else if constexpr (L == kX16) {
        unsigned short* x16 = reinterpret_cast<unsigned short*>(x);
        if (m < H)
          x16[x_index<L>(k_self, m, tig, ctas, H, R)] =
              __bfloat16_as_ushort(__float2bfloat16_rn(g(k_self, m, tig, s) + dep));
        if (m + 8 < H)
          x16[x_index<L>(k_self, m + 8, tig, ctas, H, R)] =
              __bfloat16_as_ushort(__float2bfloat16_rn(g(k_self, m + 8, tig, s) + dep));
      } else if constexpr (L == kGather) {
        // rows r = q·R + j of this CTA: warp w's share, one float4 a lane
        for (int r = warp * 32 + lane; r < 4 * R && mt == 0; r += kThreads)
          *reinterpret_cast<float4*>(x + (static_cast<std::int64_t>(k_self) * 4 * R + r) * 4) =
              make_float4(g(k_self, r, 0, s) + dep, g(k_self, r, 1, s) + dep,
                          g(k_self, r, 2, s) + dep, g(k_self, r, 3, s) + dep);
      } else if constexpr (L == kCta16) {
        const float lo = g(k_self, m, tig, s) + dep, hi = g(k_self, m + 8, tig, s) + dep;
        float v[2][4];
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          v[0][b] = __shfl_sync(0xFFFFFFFFu, lo, (lane & ~3) | b);
          v[1][b] = __shfl_sync(0xFFFFFFFFu, hi, (lane & ~3) | b);
        }
        const int u = m + 8 * tig;  // tig 0: unit m, tig 1: unit m + 8
        if (tig < 2 && u < H)
          *reinterpret_cast<float4*>(x + x_index<L>(k_self, u, 0, ctas, H, R)) =
              tig == 0 ? make_float4(v[0][0], v[0][1], v[0][2], v[0][3])
                       : make_float4(v[1][0], v[1][1], v[1][2], v[1][3]);
      } else {
        if (m < H) x[x_index<L>(k_self, m, tig, ctas, H, R)] = g(k_self, m, tig, s) + dep;
        if (m + 8 < H)
          x[x_index<L>(k_self, m + 8, tig, ctas, H, R)] = g(k_self, m + 8, tig, s) + dep;
      }
    }
    if (L == kNone && unstored < 0.0f) x[tid] = unstored;  // never (values ≥ 0): kept alive
    if constexpr (L == kOwnerStaged) {
      // unit m = o·R + j: its float4 to X[o][k][j], consecutive m of an owner contiguous
      __syncthreads();
      for (int m = tid; m < H; m += kThreads)
        *reinterpret_cast<float4*>(x + x_index<kOwner>(k_self, m, 0, ctas, H, R)) = s_block[m];
    }
    if constexpr (L == kPair) {
      // the pair's sums of this CTA's tiles: its own partial and the peer's
      cluster_sync();
      const unsigned rank = static_cast<unsigned>(k_self & 1);
      for (int mt = 0; mt < kt_per_warp; ++mt) {
        const int t = warp * kt_per_warp + mt, m = t * 16 + grp;
        if ((t & 1) != static_cast<int>(rank)) continue;
        const float* slot = reinterpret_cast<const float*>(s_block) + (t >> 1) * 64;
        if (m < H)
          x[x_index<L>(k_self >> 1, m, tig, ctas, H, R)] =
              g(k_self, m, tig, s) + dep + slot[grp * 4 + tig];
        if (m + 8 < H)
          x[x_index<L>(k_self >> 1, m + 8, tig, ctas, H, R)] =
              g(k_self, m + 8, tig, s) + dep + slot[(grp + 8) * 4 + tig];
      }
    }
    __syncthreads();
    const long long t1 = clock64();
    const unsigned long long want = p.base + static_cast<unsigned long long>(ctas) * (s + 1);
    long long t2 = t1;
    if (tid == 0) {
      __threadfence();
      atomicAdd(p.counter, 1ull);
      t2 = clock64();
      for (unsigned long long spins = 0;; ++spins) {
        unsigned long long got;
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(got) : "l"(p.counter) : "memory");
        if (got >= want) break;
        if (spins > kSpinBound) {
          s_abort = 1;
          atomicAdd(p.errors, 1u << 20);
          break;
        }
      }
    }
    __syncthreads();
    const long long t3 = clock64();
    if (*static_cast<volatile int*>(&s_abort) != 0) break;
    // ---- sum: unit j = item of 16 lanes, lane sub adds CTAs sub, sub + 16, … in order ----------
    const int item = tid / kLanes, sub = tid % kLanes;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float gathered = 0.0f;
    if constexpr (L == kGather) {
      const float4* all = reinterpret_cast<const float4*>(x);
      const int n = ctas * 4 * R;
      for (int e0 = tid; e0 < n; e0 += kSumLoads * kThreads) {
        float4 v[kSumLoads];
#pragma unroll
        for (int i = 0; i < kSumLoads; ++i)
          v[i] = e0 + i * kThreads < n ? __ldcg(all + e0 + i * kThreads)
                                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int i = 0; i < kSumLoads; ++i) gathered += v[i].x + v[i].y + v[i].z + v[i].w;
      }
      if (tid == 0) s_sum[0] = make_float4(gathered, 0.0f, 0.0f, 0.0f);
    } else if constexpr (L == kOwner || L == kOwnerStaged) {
      const float4* block =
          reinterpret_cast<const float4*>(x) + static_cast<std::int64_t>(k_self) * ctas * R;
      const int n = ctas * R;
      for (int e0 = tid; e0 < n; e0 += kSumLoads * kThreads) {
        float4 v[kSumLoads];
#pragma unroll
        for (int i = 0; i < kSumLoads; ++i)
          if (e0 + i * kThreads < n) v[i] = __ldcg(block + e0 + i * kThreads);
#pragma unroll
        for (int i = 0; i < kSumLoads; ++i)
          if (e0 + i * kThreads < n) s_block[e0 + i * kThreads] = v[i];
      }
      __syncthreads();
      if (item < R && row0 + item < H)
        for (int k = sub; k < ctas; k += kLanes) {
          const float4 v = s_block[k * R + item];
          acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
        }
    } else if (L != kNone && item < R && row0 + item < H) {
      const int m = row0 + item;
      const int parts = L == kPair ? ctas / 2 : ctas;  // partials per unit
      for (int k = sub; k < parts; k += kSumLoads * kLanes) {
        float4 v[kSumLoads];
#pragma unroll
        for (int i = 0; i < kSumLoads; ++i) {
          const int kk = k + i * kLanes;
          if (kk >= parts) {
            v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          } else if constexpr (L == kX16) {
            const uint2 r = __ldcg(reinterpret_cast<const uint2*>(
                reinterpret_cast<const unsigned short*>(x) + x_index<L>(kk, m, 0, ctas, H, R)));
            v[i] = make_float4(__uint_as_float(r.x << 16), __uint_as_float(r.x & 0xFFFF0000u),
                               __uint_as_float(r.y << 16), __uint_as_float(r.y & 0xFFFF0000u));
          } else {
            v[i] = __ldcg(reinterpret_cast<const float4*>(x + x_index<L>(kk, m, 0, ctas, H, R)));
          }
        }
#pragma unroll
        for (int i = 0; i < kSumLoads; ++i) acc.x += v[i].x, acc.y += v[i].y, acc.z += v[i].z, acc.w += v[i].w;
      }
    }
    for (int off = kLanes / 2; off > 0; off /= 2) {
      acc.x += __shfl_xor_sync(0xFFFFFFFFu, acc.x, off);
      acc.y += __shfl_xor_sync(0xFFFFFFFFu, acc.y, off);
      acc.z += __shfl_xor_sync(0xFFFFFFFFu, acc.z, off);
      acc.w += __shfl_xor_sync(0xFFFFFFFFu, acc.w, off);
    }
    if (L != kGather && sub == 0 && item < R && row0 + item < H) s_sum[item] = acc;
    __syncthreads();
    const long long t4 = clock64();
    if (L == kGather && s == p.steps - 1) {  // checked, untimed: this thread's loads
      float want_sum = 0.0f;
      for (int e = tid; e < ctas * 4 * R; e += kThreads)
        for (int b = 0; b < 4; ++b) want_sum += g(e / (4 * R), e % (4 * R), b, s);
      if (gathered != want_sum) atomicAdd(p.errors, 1u);
    }
    if (L != kGather && L != kNone && s == p.steps - 1 && sub == 0 && item < R &&
        row0 + item < H) {
      const float got[4] = {acc.x, acc.y, acc.z, acc.w};
      for (int b = 0; b < 4; ++b) {
        float want_sum = 0.0f;
        for (int k = 0; k < ctas; ++k) want_sum += g(k, row0 + item, b, s);
        if (got[b] != want_sum) atomicAdd(p.errors, 1u);
      }
    }
    if (tid == 0) {
      ph[0] += t1 - t0;
      ph[1] += t2 - t1;
      ph[2] += t3 - t2;
      ph[3] += t4 - t3;
    }
    prev = s_sum[0].x;
  }
  if constexpr (L == kPair) cluster_sync();  // no CTA leaves while its peer may still store
  if (tid == 0) {
    for (int i = 0; i < 4; ++i) p.phases[k_self * 4 + i] = ph[i];
    if (k_self == 0) *p.sink = prev;
  }
}

int arg(int argc, char** argv, int i, int fallback) {
  return argc > i ? std::atoi(argv[i]) : fallback;
}

template <int L>
void run(Params& p, int ctas, int sms) {
  const int tiles = kWarps * ((p.hidden + 16 * kWarps - 1) / (16 * kWarps));
  const std::size_t smem = L == kOwner || L == kOwnerStaged ? sizeof(float4) * ctas * p.rows
                           : L == kPair ? sizeof(float) * 64 * ((tiles + 1) / 2)
                                        : 0;
  const void* fn = reinterpret_cast<const void*>(x_exchange_kernel<L>);
  PRNN_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  // kPair: clusters of 2, cooperative (both attributes on one launch)
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = 2;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeCooperative;
  attrs[1].val.cooperative = 1;
  cfg.attrs = attrs;
  if constexpr (L == kPair) {
    if (ctas % 2 != 0) {
      std::fprintf(stderr, "layout pair: %d CTAs, not pairs\n", ctas);
      return;
    }
    int clusters = 0;
    cfg.numAttrs = 1;
    PRNN_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, x_exchange_kernel<L>, &cfg));
    if (2 * clusters < ctas) {
      std::fprintf(stderr, "layout pair: %d clusters of 2 not co-resident (%d fit)\n", ctas / 2,
                   clusters);
      return;
    }
  } else {
    int per_sm = 0;
    PRNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, smem));
    if (per_sm * sms < ctas) {
      std::fprintf(stderr, "layout %s: %d CTAs not co-resident\n", kLayoutNames[L], ctas);
      return;
    }
  }
  cfg.numAttrs = 2;
  PRNN_CUDA_CHECK(cudaMemset(p.errors, 0, sizeof(unsigned)));
  const auto launch = [&] {
    if constexpr (L == kPair) {
      PRNN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, x_exchange_kernel<L>, p));
    } else {
      void* args[] = {&p};
      PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(fn, dim3(static_cast<unsigned>(ctas)),
                                                  dim3(kThreads), args, smem, nullptr));
    }
    p.base += static_cast<unsigned long long>(ctas) * p.steps;
  };
  const double us = prnn::bench::median_us(launch, 7, 2);
  unsigned errors = 0;
  PRNN_CUDA_CHECK(cudaMemcpy(&errors, p.errors, sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::vector<long long> ph(static_cast<std::size_t>(ctas) * 4);
  PRNN_CUDA_CHECK(cudaMemcpy(ph.data(), p.phases, sizeof(long long) * ph.size(),
                             cudaMemcpyDeviceToHost));
  double med[4];
  for (int i = 0; i < 4; ++i) {
    std::vector<long long> c(static_cast<std::size_t>(ctas));
    for (int k = 0; k < ctas; ++k) c[k] = ph[k * 4 + i];
    std::nth_element(c.begin(), c.begin() + ctas / 2, c.end());
    med[i] = static_cast<double>(c[ctas / 2]) / p.steps;
  }
  std::printf("%s,%d,%d,%d,%.1f,%.0f,%.0f,%.0f,%.0f,%u\n", kLayoutNames[L], p.hidden, p.rows, ctas,
              1000.0 * us / p.steps, med[0], med[1], med[2], med[3], errors);
}

}  // namespace

int main(int argc, char** argv) {
  const int H = arg(argc, argv, 1, 1152), R = arg(argc, argv, 2, 9), steps = arg(argc, argv, 3, 256);
  if (H < 1 || H > kWarps * 16 * kMaxKT || R < 1 || R > 32 || steps < 1) {
    std::fprintf(stderr, "usage: x_exchange_lab [H (1..%d) [R (1..32) [STEPS]]]\n",
                 kWarps * 16 * kMaxKT);
    return 2;
  }
  int sms = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  PRNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int ctas = (H + R - 1) / R;
  if (ctas > sms) {
    std::fprintf(stderr, "H = %d at R = %d needs %d CTAs, more than the %d SMs\n", H, R, ctas, sms);
    return 2;
  }
  std::printf("# %s, %d SMs, H = %d, R = %d: %d CTAs x %d threads, %d steps a launch\n", prop.name,
              sms, H, R, ctas, kThreads, steps);
  // Every layout indexes units of owners past H up to ctas·R: size X for that.
  const std::size_t per_step = static_cast<std::size_t>(ctas) * ctas * R * 4;
  Params p{};
  PRNN_CUDA_CHECK(cudaMalloc(&p.x, 2 * per_step * sizeof(float)));
  PRNN_CUDA_CHECK(cudaMalloc(&p.counter, sizeof(unsigned long long)));
  PRNN_CUDA_CHECK(cudaMalloc(&p.errors, sizeof(unsigned)));
  PRNN_CUDA_CHECK(cudaMalloc(&p.phases, sizeof(long long) * ctas * 4));
  PRNN_CUDA_CHECK(cudaMalloc(&p.sink, sizeof(float)));
  PRNN_CUDA_CHECK(cudaMemset(p.x, 0, 2 * per_step * sizeof(float)));
  PRNN_CUDA_CHECK(cudaMemset(p.counter, 0, sizeof(unsigned long long)));
  p.hidden = H;
  p.rows = R;
  p.steps = steps;
  std::printf("layout,H,R,ctas,ns_per_step,store,arrive,wait,sum,errors\n");
  for (int round = 0; round < 3; ++round) {
    run<kCta>(p, ctas, sms);
    run<kUnit>(p, ctas, sms);
    run<kOwner>(p, ctas, sms);
    run<kCta16>(p, ctas, sms);
    run<kGather>(p, ctas, sms);
    run<kX16>(p, ctas, sms);
    run<kPair>(p, ctas, sms);
    run<kOwnerStaged>(p, ctas, sms);
    run<kNone>(p, ctas, sms);
  }
  PRNN_CUDA_CHECK(cudaFree(p.x));
  PRNN_CUDA_CHECK(cudaFree(p.counter));
  PRNN_CUDA_CHECK(cudaFree(p.errors));
  PRNN_CUDA_CHECK(cudaFree(p.phases));
  PRNN_CUDA_CHECK(cudaFree(p.sink));
  return 0;
}
