// Warp-rows lab (not part of the library; bench/persistent/NOTES.md, "Rows per warp"): a
// persistent vanilla ReLU forward whose every warp owns whole rows of W_hh, so that a step needs
// no CTA-wide reduction, barrier or finishing threads. Measures how short a step's chain gets.
//   h_t[b] = relu(u_t[b] + W h_{t-1}[b]),  h_{-1} = 0,  u given (the input side and biases)
// Layout:  W [H, H] row-major; u, out [T, B, H]; exchange: two buffers (step parity) of [B, K]
//          records, K = H / 3, record (b, k) = {h[b][3k..3k+2], tag} (one 16-byte access).
// Launch:  cooperative, H / 9 CTAs of 3·G warps: warp w owns the 3 rows [9·cta + 3·(w % 3), +3)
//          (one record) for the batch elements {w / 3 + G·i}; lane l holds the columns of records
//          l + 32·j, j < kRec (kRec = ceil(K / 32)), in registers.
// Step:    each warp polls its records of h_{t-1} (tag = epoch + t - 1), does its FMAs, reduces
//          its 3 sums per batch element across the warp (shuffles), and lane bb publishes the
//          record of batch element bb (tag epoch + t) and stores out. Nothing else synchronizes.
// Limits:  H a multiple of 9 with H / 9 CTAs co-resident; B a multiple of G; no timeout beyond a
//          spin bound (a lab: on a bound the kernel sets *error and exits).
// Build:   -DLAB_TRACE=0 leaves the clock reads out; -DLAB_CLOCKS=<mask> keeps only some of them
//          (1: before the wait, 2: after it, 4: after the reduction, 8: after the publish);
//          -DLAB_PIN=1 issues the finishing lane's input loads as volatile loads ahead of the wait;
//          -DLAB_POLL=1 polls with two sets of loads in flight (staggered), -DLAB_POLL=2 adds a
//          -DLAB_STAGGER_NS pause between issuing the two sets; -DLAB_COUNTERS=0 skips the
//          counter form; -DLAB_REPL=n publishes every record n times (n copies of the exchange,
//          CTA c reading copy c % n), spreading the reads of a record over n L2 lines;
//          -DLAB_SHARE=1: the 3 warps of a batch group each poll a third of the records and
//          share them through shared memory (a named barrier per group and step), so that a
//          CTA reads each record from L2 once instead of three times.
//          -DLAB_CLUSTER=n (with LAB_SHARE=1): clusters of n CTAs share the same way across the
//          cluster: each of the 3·n warps of a batch group polls 1/(3·n) of the slots from L2 and
//          stores them into the shared memory of every CTA of the cluster (st.shared::cluster),
//          then arrives on each CTA's mbarrier for the group and step parity (release.cluster);
//          a warp waits on its own CTA's mbarrier (acquire.cluster) and reads all slots from its
//          shared memory. A cluster reads each record from L2 once instead of 3·n times.
//          -DLAB_CLUSTER_TAGS=1: the same without mbarriers: the records keep their tags in shared
//          memory and a warp polls its own CTA's shared memory until every slot has this step's tag.
// Usage:   prnn_warp_rows_lab [H B G]... (default: H = 1152 at B = 1, 2, 4 with every G
//          instantiated, H = 2043 at B = 1, 2).
// Prints µs/step (median of 20 launches, T = 256, CUDA events) and the max relative error of out
// against an fp64 CPU reference (fresh uniform inputs, outputs poisoned before each check run),
// then warp 0's clock64() cycles per step from one more launch: the wait for its records (and
// how many re-polls it took), its FMAs and reduction, the finishing lanes' math and stores.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

void check(cudaError_t e, const char* what, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "warp_rows_lab: %s: %s (line %d)\n", what, cudaGetErrorString(e), line);
  std::exit(1);
}
#define LAB_CHECK(x) check((x), #x, __LINE__)

struct Params {
  const float* w;
  const float* u;
  float* out;
  float4* exchange;
  unsigned* error;
  unsigned* count;  // counter form: [T, CTAs] arrivals (warps done with step s), zeroed per launch
  int* smid;         // [CTAs]: the SM each CTA ran on
  long long* trace;  // [CTAs, 4]: cycles of warp 0 summed over steps 8..T-1: poll, math, finish; polls
  int hidden, batch, steps;
  unsigned epoch;
};

#ifndef LAB_TRACE
#define LAB_TRACE 1
#endif
#ifndef LAB_CLOCKS
#if LAB_TRACE
#define LAB_CLOCKS 15
#else
#define LAB_CLOCKS 0
#endif
#endif
#ifndef LAB_PIN
#define LAB_PIN 0
#endif
#ifndef LAB_POLL
#define LAB_POLL 0
#endif
#ifndef LAB_STAGGER_NS
#define LAB_STAGGER_NS 100
#endif
#ifndef LAB_REPL
#define LAB_REPL 1
#endif
#ifndef LAB_SHARE
#define LAB_SHARE 0
#endif
#ifndef LAB_CLUSTER
#define LAB_CLUSTER 1
#endif
#if LAB_CLUSTER > 1 && !LAB_SHARE
#error "LAB_CLUSTER needs LAB_SHARE=1"
#endif
// LAB_CLUSTER_XCHG=0: launched in clusters, but the records shared within each CTA only (as
// LAB_SHARE=1 alone); LAB_SMEM_PAD=bytes asks that much more dynamic shared memory per CTA.
#ifndef LAB_CLUSTER_XCHG
#define LAB_CLUSTER_XCHG 1
#endif
#ifndef LAB_SMEM_PAD
#define LAB_SMEM_PAD 0
#endif
#ifndef LAB_CLUSTER_TAGS
#define LAB_CLUSTER_TAGS 0
#endif
#ifndef LAB_COUNTERS
#define LAB_COUNTERS 1
#endif
// clock64() where bit kBit of LAB_CLOCKS is set, else 0 (no clock read at that point).
template <int kBit>
__device__ __forceinline__ long long lab_clock() {
  if constexpr ((LAB_CLOCKS & kBit) != 0) return clock64();
  return 0;
}

__device__ __forceinline__ float4 load_record(const float4* p) {
  float4 v;
  asm volatile("ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
// The finishing lane's input: with LAB_PIN, a volatile load, so that it is issued here, ahead of
// the wait for the records, and not moved next to its use.
__device__ __forceinline__ float load_input(const float* p) {
#if LAB_PIN
  float v;
  asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
#else
  return *p;
#endif
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_record(float4* p, float4 v) {
  asm volatile("st.relaxed.gpu.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
}

#if LAB_CLUSTER > 1
__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// The same shared-memory address in the CTA of cluster rank `rank`.
__device__ __forceinline__ unsigned cluster_address(unsigned local, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local), "r"(rank));
  return r;
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_store(unsigned addr, float4 v) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}
__device__ __forceinline__ void cluster_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
#endif

// kRec records per lane, BB batch elements per warp (B = G·BB: G batch groups of 3 warps).
// kCounter: consumers poll per-CTA arrival counters (a fence and an atomic after the producers'
// stores), then read the records once, instead of polling the tagged records themselves.
template <int kRec, int BB, int G, bool kCounter>
__global__ void __launch_bounds__(96 * G, 1) warp_rows_kernel(const Params p) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int H = p.hidden, B = p.batch, K = H / 3;
  const int rec_k = static_cast<int>(blockIdx.x) * 3 + warp % 3;  // the record this warp publishes
  const int row0 = rec_k * 3, bg = warp / 3;
  float w[3][3 * kRec];
#pragma unroll
  for (int j = 0; j < kRec; ++j)
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const int col = 3 * (lane + 32 * j) + c;
#pragma unroll
      for (int r = 0; r < 3; ++r) w[r][3 * j + c] = col < H ? p.w[(row0 + r) * H + col] : 0.0f;
    }
#if LAB_SHARE
  // [parity][G][BB][kRec][32] records, each group's third from each of its warps.
  extern __shared__ float4 s_share[];
#endif
#if LAB_CLUSTER > 1
  // [parity][G] mbarriers after the records: 3·n arrivals (every warp of the group in the cluster).
  auto* s_bar = reinterpret_cast<unsigned long long*>(s_share + static_cast<std::int64_t>(2) * G * BB * kRec * 32);
  const unsigned crank = cluster_rank();
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2 * G; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(s_bar + i)), "r"(3 * LAB_CLUSTER)
                   : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync_all();
#endif
  long long tsum[4] = {};  // the trace (warp 0, lane 0, written at the end)
  for (int s = 0; s < p.steps; ++s) {
    const float4* src =
        p.exchange + (static_cast<std::int64_t>((s - 1) & 1) * LAB_REPL + blockIdx.x % LAB_REPL) * B * K;
    float4* dst = p.exchange + static_cast<std::int64_t>(s & 1) * LAB_REPL * B * K;
    const unsigned want = p.epoch + static_cast<unsigned>(s) - 1u;
    // The finishing lane's input side, loaded before the wait.
    float u[3] = {};
    if (lane < BB) {
      const int b = bg + G * lane;
#pragma unroll
      for (int r = 0; r < 3; ++r) u[r] = load_input(p.u + (static_cast<std::int64_t>(s) * B + b) * H + row0 + r);
    }
    float acc[3 * BB];
#pragma unroll
    for (int i = 0; i < 3 * BB; ++i) acc[i] = 0.0f;
    long long c0 = lab_clock<1>(), c1 = c0, c2 = c0;
    unsigned polls = 0;
    if (s > 0) {
      if constexpr (kCounter) {
        const int ctas = static_cast<int>(gridDim.x);
        const unsigned* c = p.count + static_cast<std::int64_t>(s - 1) * ctas;
        for (unsigned spins = 0;; ++spins) {
          bool ready = true;
          for (int i = lane; i < ctas; i += 32) ready &= load_acquire(c + i) == 3u * G;
          if (__all_sync(0xFFFFFFFFu, ready)) break;
          if (spins > (1u << 26)) {
            if (lane == 0) atomicExch(p.error, 1u);
            return;
          }
        }
        __syncwarp();
      }
      float4 rec[BB][kRec];
#if LAB_SHARE
      // This warp's share of the record slots: j = part mod 3 (3·n in a cluster).
#if LAB_CLUSTER > 1 && LAB_CLUSTER_XCHG
      constexpr int kParts = 3 * LAB_CLUSTER;
      const int part = static_cast<int>(crank) * 3 + warp % 3;
#else
      constexpr int kParts = 3;
      const int part = warp % 3;
#endif
#pragma unroll
      for (int bb = 0; bb < BB; ++bb)
#pragma unroll
        for (int j = 0; j < kRec; ++j) {
          const int k = lane + 32 * j;
          rec[bb][j] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
          if (j % kParts == part && k < K) rec[bb][j] = load_record(src + static_cast<std::int64_t>(bg + G * bb) * K + k);
        }
#else
#pragma unroll
      for (int bb = 0; bb < BB; ++bb)
#pragma unroll
        for (int j = 0; j < kRec; ++j) {
          const int k = lane + 32 * j;
          rec[bb][j] = k < K ? load_record(src + static_cast<std::int64_t>(bg + G * bb) * K + k)
                             : make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
        }
#endif
#if LAB_POLL == 0
      for (unsigned spins = 0;; ++spins) {
        bool ready = true;
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j) ready &= __float_as_uint(rec[bb][j].w) == want;
        if (__all_sync(0xFFFFFFFFu, ready)) break;
        if (spins > (1u << 26)) {
          if (lane == 0) atomicExch(p.error, 1u);
          return;
        }
        ++polls;
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j) {
            const int k = lane + 32 * j;
            if (k < K && __float_as_uint(rec[bb][j].w) != want)
              rec[bb][j] = load_record(src + static_cast<std::int64_t>(bg + G * bb) * K + k);
          }
      }
#else
      // Staggered: a second set of loads in flight behind the first; each turn checks one set,
      // takes its fresh records into rec and re-issues that set's stale ones, so a record that
      // lands just after one set's load is seen by the other's, not a whole round trip later.
      float4 alt[BB][kRec];
#if LAB_POLL == 2
      __nanosleep(LAB_STAGGER_NS);
#endif
#pragma unroll
      for (int bb = 0; bb < BB; ++bb)
#pragma unroll
        for (int j = 0; j < kRec; ++j) {
          const int k = lane + 32 * j;
          alt[bb][j] = k < K ? load_record(src + static_cast<std::int64_t>(bg + G * bb) * K + k)
                             : make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
        }
      for (unsigned spins = 0;; ++spins) {
        bool ready = true;
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j) ready &= __float_as_uint(rec[bb][j].w) == want;
        if (__all_sync(0xFFFFFFFFu, ready)) break;
        // rec's stale records: take alt's where fresh, else re-issue into rec.
        bool ready2 = true;
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j) {
            const int k = lane + 32 * j;
            if (__float_as_uint(rec[bb][j].w) != want) {
              if (__float_as_uint(alt[bb][j].w) == want) {
                rec[bb][j] = alt[bb][j];
              } else {
                ready2 = false;
                rec[bb][j] = load_record(src + static_cast<std::int64_t>(bg + G * bb) * K + k);
              }
            }
          }
        if (__all_sync(0xFFFFFFFFu, ready2)) break;
        if (spins > (1u << 26)) {
          if (lane == 0) atomicExch(p.error, 1u);
          return;
        }
        ++polls;
        // alt's turn: re-issue the records neither set has yet (waits on alt's loads only).
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j) {
            const int k = lane + 32 * j;
            if (k < K && __float_as_uint(alt[bb][j].w) != want)
              alt[bb][j] = load_record(src + static_cast<std::int64_t>(bg + G * bb) * K + k);
          }
      }
#endif
#if LAB_CLUSTER > 1 && LAB_CLUSTER_XCHG
      {
        float4* mine_s = s_share + (static_cast<std::int64_t>(s & 1) * G + bg) * BB * kRec * 32;
        for (int c = 0; c < LAB_CLUSTER; ++c) {
#pragma unroll
          for (int bb = 0; bb < BB; ++bb)
#pragma unroll
            for (int j = 0; j < kRec; ++j)
              if (j % kParts == part)
                cluster_store(cluster_address(smem_address(mine_s + (bb * kRec + j) * 32 + lane), c), rec[bb][j]);
        }
#if LAB_CLUSTER_TAGS
        for (unsigned spins = 0;; ++spins) {
          bool ready = true;
#pragma unroll
          for (int bb = 0; bb < BB; ++bb)
#pragma unroll
            for (int j = 0; j < kRec; ++j) {
              float4 v;
              asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                           : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                           : "r"(smem_address(mine_s + (bb * kRec + j) * 32 + lane))
                           : "memory");
              rec[bb][j] = v;
              ready &= lane + 32 * j >= K || __float_as_uint(v.w) == want;
            }
          if (__all_sync(0xFFFFFFFFu, ready)) break;
          if (spins > (1u << 26)) {
            if (lane == 0) atomicExch(p.error, 1u);
            return;
          }
        }
#else
        __syncwarp();
        const unsigned bar = smem_address(s_bar + (s & 1) * G + bg);
        if (lane < LAB_CLUSTER) cluster_arrive(cluster_address(bar, lane));
        // Barrier (s & 1) serves steps 1, 3, 5, ... or 2, 4, 6, ...: its phase is the use's index.
        const unsigned phase = static_cast<unsigned>(((s & 1) ? (s - 1) / 2 : s / 2 - 1) & 1);
        for (unsigned spins = 0; !mbar_try_wait(bar, phase); ++spins)
          if (spins > (1u << 24)) {
            if (lane == 0) atomicExch(p.error, 1u);
            return;
          }
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j) rec[bb][j] = mine_s[(bb * kRec + j) * 32 + lane];
#endif
      }
#elif LAB_SHARE
      {
        float4* mine_s = s_share + (static_cast<std::int64_t>(s & 1) * G + bg) * BB * kRec * 32;
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j)
            if (j % 3 == part) mine_s[(bb * kRec + j) * 32 + lane] = rec[bb][j];
        asm volatile("bar.sync %0, %1;" ::"r"(1 + bg), "r"(96) : "memory");
#pragma unroll
        for (int bb = 0; bb < BB; ++bb)
#pragma unroll
          for (int j = 0; j < kRec; ++j) rec[bb][j] = mine_s[(bb * kRec + j) * 32 + lane];
      }
#endif
      c1 = lab_clock<2>();
#pragma unroll
      for (int bb = 0; bb < BB; ++bb)
#pragma unroll
        for (int j = 0; j < kRec; ++j) {
          const float hv[3] = {rec[bb][j].x, rec[bb][j].y, rec[bb][j].z};
#pragma unroll
          for (int c = 0; c < 3; ++c)
#pragma unroll
            for (int r = 0; r < 3; ++r) acc[r * BB + bb] = fmaf(w[r][3 * j + c], hv[c], acc[r * BB + bb]);
        }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1)
#pragma unroll
        for (int i = 0; i < 3 * BB; ++i) acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], off);
      c2 = lab_clock<4>();
    }
    // Lane bb finishes batch element bg + G·bb: its 3 units, the record, the outputs.
#pragma unroll
    for (int bb = 0; bb < BB; ++bb) {
      if (lane != bb) continue;
      const int b = bg + G * bb;
      float h[3];
#pragma unroll
      for (int r = 0; r < 3; ++r) h[r] = fmaxf(u[r] + acc[r * BB + bb], 0.0f);
      if (s + 1 < p.steps)
#pragma unroll
        for (int c = 0; c < LAB_REPL; ++c)
          store_record(dst + (static_cast<std::int64_t>(c) * B + b) * K + rec_k,
                       make_float4(h[0], h[1], h[2], __uint_as_float(p.epoch + static_cast<unsigned>(s))));
#pragma unroll
      for (int r = 0; r < 3; ++r) p.out[(static_cast<std::int64_t>(s) * B + b) * H + row0 + r] = h[r];
    }
    if (s >= 8) {
      const long long c3 = lab_clock<8>();
      tsum[0] += c1 - c0;
      tsum[1] += c2 - c1;
      tsum[2] += c3 - c2;
      tsum[3] += polls;
    }
    if constexpr (kCounter) {
      __syncwarp();
      if (lane == 0 && s + 1 < p.steps) {
        __threadfence();
        atomicAdd(p.count + static_cast<std::int64_t>(s) * gridDim.x + blockIdx.x, 1u);
      }
    }
  }
#if LAB_CLUSTER > 1
  cluster_sync_all();  // no CTA leaves while a peer may still store into its shared memory
#endif
  if (threadIdx.x == 0) {
    int sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    p.smid[blockIdx.x] = sm;
  }
  if (warp == 0 && lane == 0)
    for (int i = 0; i < 4; ++i) p.trace[4 * blockIdx.x + i] = tsum[i];
}

template <int kRec, int BB, int G, bool kCounter>
void run(int H, int B) {
  const int T = 256, ctas = H / 9, threads = 96 * G, K = H / 3;
  auto fn = warp_rows_kernel<kRec, BB, G, kCounter>;
  int per_sm = 0, sms = 0;
  LAB_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::size_t smem =
      (LAB_SHARE ? sizeof(float4) * 2 * G * BB * kRec * 32 : 0) + (LAB_CLUSTER > 1 ? 16 * G : 0) + LAB_SMEM_PAD;
  if (smem > 0)
    LAB_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  LAB_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem));
  if (per_sm * sms < ctas) {
    std::printf("H%d B%d G%d: not co-resident (%d per SM)\n", H, B, G, per_sm);
    return;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = LAB_CLUSTER;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeCooperative;
  attrs[1].val.cooperative = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  if (LAB_CLUSTER > 1) {
    if (ctas % LAB_CLUSTER != 0) {
      std::printf("H%d B%d G%d: %d CTAs not a multiple of the cluster %d\n", H, B, G, ctas, LAB_CLUSTER);
      return;
    }
    int clusters = 0;
    cfg.numAttrs = 1;
    LAB_CHECK(cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg));
    cfg.numAttrs = 2;
    if (clusters * LAB_CLUSTER < ctas) {
      std::printf("H%d B%d G%d: %d clusters of %d not co-resident (%d fit)\n", H, B, G, ctas / LAB_CLUSTER,
                  LAB_CLUSTER, clusters);
      return;
    }
  }
  std::mt19937 gen(static_cast<unsigned>(H * 131 + B * 7 + G));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(H) * H), u(static_cast<std::size_t>(T) * B * H);
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  for (float& e : w) e = unit(gen) * scale;
  for (float& e : u) e = unit(gen);
  float *dw, *du, *dout;
  float4* dx;
  unsigned *derr, *dcount;
  long long* dtrace;
  LAB_CHECK(cudaMalloc(&dtrace, sizeof(long long) * 4 * ctas));
  LAB_CHECK(cudaMalloc(&dcount, sizeof(unsigned) * T * ctas));
  LAB_CHECK(cudaMalloc(&dw, w.size() * 4));
  LAB_CHECK(cudaMalloc(&du, u.size() * 4));
  LAB_CHECK(cudaMalloc(&dout, u.size() * 4));
  LAB_CHECK(cudaMalloc(&dx, sizeof(float4) * 2 * LAB_REPL * B * K));
  LAB_CHECK(cudaMalloc(&derr, 4));
  LAB_CHECK(cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  LAB_CHECK(cudaMemcpy(du, u.data(), u.size() * 4, cudaMemcpyHostToDevice));
  LAB_CHECK(cudaMemset(dx, 0, sizeof(float4) * 2 * LAB_REPL * B * K));
  LAB_CHECK(cudaMemset(derr, 0, 4));
  int* dsmid;
  LAB_CHECK(cudaMalloc(&dsmid, sizeof(int) * ctas));
  Params p{dw, du, dout, dx, derr, dcount, dsmid, dtrace, H, B, T, 1u};
  void* args[] = {&p};
  auto launch = [&] {
    if (kCounter) LAB_CHECK(cudaMemsetAsync(dcount, 0, sizeof(unsigned) * T * ctas));
    if (LAB_CLUSTER > 1) {
      cudaError_t e = cudaLaunchKernelEx(&cfg, fn, p);
      if (e != cudaSuccess && cfg.numAttrs == 2) {  // cooperative with clusters refused: plain launch
        (void)cudaGetLastError();
        std::printf("  (cooperative cluster launch refused: %s; launching without)\n", cudaGetErrorString(e));
        cfg.numAttrs = 1;
        e = cudaLaunchKernelEx(&cfg, fn, p);
      }
      LAB_CHECK(e);
    } else {
      LAB_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fn), dim3(ctas), dim3(threads), args,
                                            smem, nullptr));
    }
    p.epoch += T;
  };
  // Check: poisoned output, one launch, fp64 reference.
  LAB_CHECK(cudaMemset(dout, 0xFF, u.size() * 4));
  launch();
  LAB_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(u.size());
  LAB_CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<double> h(static_cast<std::size_t>(B) * H, 0.0), next(h.size());
  double num = 0.0, den = 0.0;
  for (int t = 0; t < T; ++t) {
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < H; ++i) {
        double a = u[(static_cast<std::size_t>(t) * B + b) * H + i];
        for (int j = 0; j < H; ++j) a += static_cast<double>(w[static_cast<std::size_t>(i) * H + j]) * h[b * H + j];
        next[b * H + i] = std::max(a, 0.0);
        const double g = out[(static_cast<std::size_t>(t) * B + b) * H + i];
        num = std::max(num, std::fabs(g - next[b * H + i]));
        den = std::max(den, std::fabs(next[b * H + i]));
      }
    h.swap(next);
  }
  unsigned err = 0;
  LAB_CHECK(cudaMemcpy(&err, derr, 4, cudaMemcpyDeviceToHost));
  // Timing: 20 launches, each between two events; the median.
  cudaEvent_t a, b;
  LAB_CHECK(cudaEventCreate(&a));
  LAB_CHECK(cudaEventCreate(&b));
  std::vector<float> us;
  for (int i = 0; i < 23; ++i) {
    LAB_CHECK(cudaEventRecord(a));
    launch();
    LAB_CHECK(cudaEventRecord(b));
    LAB_CHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    LAB_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) us.push_back(ms * 1000.0f / T);
  }
  std::sort(us.begin(), us.end());
  LAB_CHECK(cudaMemcpy(&err, derr, 4, cudaMemcpyDeviceToHost));
  // One more launch with the trace zeroed: warp 0's cycles per step (steps 8..T-1), CTA 0 and the
  // middle CTA.
  LAB_CHECK(cudaMemset(dtrace, 0, sizeof(long long) * 4 * ctas));
  launch();
  LAB_CHECK(cudaDeviceSynchronize());
  std::vector<long long> tr(4 * static_cast<std::size_t>(ctas));
  LAB_CHECK(cudaMemcpy(tr.data(), dtrace, tr.size() * sizeof(long long), cudaMemcpyDeviceToHost));
  {
    std::vector<int> sm(ctas);
    LAB_CHECK(cudaMemcpy(sm.data(), dsmid, sizeof(int) * ctas, cudaMemcpyDeviceToHost));
    std::sort(sm.begin(), sm.end());
    std::printf("  %d CTAs on %d SMs\n", ctas, static_cast<int>(std::unique(sm.begin(), sm.end()) - sm.begin()));
    cudaFree(dsmid);
  }
  for (int c : {0, ctas / 2}) {
    const double n = T - 8;
    std::printf("  cta %3d warp 0, cycles per step: wait %.0f (re-polls %.2f), math %.0f, finish+publish %.0f\n", c,
                tr[4 * c] / n, tr[4 * c + 3] / n, tr[4 * c + 1] / n, tr[4 * c + 2] / n);
  }
  std::printf("H%d B%d G%d (%d warps/CTA)%s: %.3f us/step  max rel err %.2e%s\n", H, B, G, threads / 32,
              kCounter ? " counters" : " tags",
              us[us.size() / 2], num / den, err ? "  SPIN BOUND HIT" : "");
  cudaFree(dw);
  cudaFree(du);
  cudaFree(dout);
  cudaFree(dx);
  cudaFree(derr);
  cudaFree(dcount);
  cudaFree(dtrace);
}

void dispatch(int H, int B, int G) {
  if (H % 9 != 0 || B % G != 0) {
    std::printf("H%d B%d G%d: needs H %% 9 == 0 and B %% G == 0\n", H, B, G);
    return;
  }
  const int BB = B / G, rec = (H / 3 + 31) / 32;
  if (rec == 12 && BB == 1 && G == 1) { run<12, 1, 1, false>(H, B); if (LAB_COUNTERS) run<12, 1, 1, true>(H, B); return; }
  if (rec == 12 && BB == 1 && G == 2) { run<12, 1, 2, false>(H, B); if (LAB_COUNTERS) run<12, 1, 2, true>(H, B); return; }
  if (rec == 12 && BB == 1 && G == 4) { run<12, 1, 4, false>(H, B); if (LAB_COUNTERS) run<12, 1, 4, true>(H, B); return; }
  if (rec == 12 && BB == 2 && G == 1) { run<12, 2, 1, false>(H, B); if (LAB_COUNTERS) run<12, 2, 1, true>(H, B); return; }
  if (rec == 12 && BB == 2 && G == 2) { run<12, 2, 2, false>(H, B); if (LAB_COUNTERS) run<12, 2, 2, true>(H, B); return; }
  if (rec == 12 && BB == 4 && G == 1) { run<12, 4, 1, false>(H, B); if (LAB_COUNTERS) run<12, 4, 1, true>(H, B); return; }
  if (rec == 22 && BB == 1 && G == 1) { run<22, 1, 1, false>(H, B); if (LAB_COUNTERS) run<22, 1, 1, true>(H, B); return; }
  if (rec == 22 && BB == 2 && G == 1) { run<22, 2, 1, false>(H, B); if (LAB_COUNTERS) run<22, 2, 1, true>(H, B); return; }
  if (rec == 22 && BB == 1 && G == 2) { run<22, 1, 2, false>(H, B); if (LAB_COUNTERS) run<22, 1, 2, true>(H, B); return; }
  std::printf("H%d B%d G%d: no instantiation (records per lane %d, batch per warp %d)\n", H, B, G, rec, BB);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> v;
  for (int i = 1; i < argc; ++i) v.push_back(std::atoi(argv[i]));
  if (v.size() < 3) v = {1152, 1, 1, 1152, 2, 2, 1152, 2, 1, 1152, 4, 4, 1152, 4, 2, 1152, 4, 1, 2043, 1, 1, 2043, 2, 2, 2043, 2, 1};
  for (std::size_t i = 0; i + 2 < v.size(); i += 3) dispatch(v[i], v[i + 1], v[i + 2]);
  return 0;
}
