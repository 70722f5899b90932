// Wide warp-rows lab (not part of the library; bench/persistent/NOTES.md, "Warp rows past
// H = 1152"): the vanilla warp-rows forward (src/persistent/warp_rows_kernel.cuh) for layers
// whose rows do not fit the registers, as at ReLU H = 2048 (16.8 MB of fp32 W_hh, 127 KB an SM):
// each lane keeps the columns of its first kReg record slots in registers and the rest in shared
// memory. Measures whether such a step gets near the library's H = 1152 step.
//   h_t[b] = relu(u_t[b] + W h_{t-1}[b]),  h_{-1} = 0,  u given (the input side and biases)
// Layout:  W [H, H] row-major; u, out [T, B, H]; exchange: two buffers (step parity) of [B, K]
//          records, K = ceil(H / 3), record (b, k) = {h[b][3k..3k+2], tag} (0 past H).
// Launch:  cooperative, ceil(K / kW) CTAs of kW·kG warps; warp w of CTA c is record warp
//          p = w % kW of batch group g = w / kW: it owns record k = c·kW + p (rows 3k..3k+2) for
//          the group's batch elements g + kG·i, i < kBB (B ≤ kG·kBB). Lane l holds the columns of
//          record slots j = l + 32·i: i < kReg in registers (9 weights each), kReg ≤ i < kReg +
//          kSmem in shared memory ([p][i - kReg][9][32] floats, conflict-free; the CTA's, read by
//          every group).
// Step:    each warp polls the slots i ≡ p (mod kW) of its group's batch elements (tag epoch +
//          s − 1), stores them into shared memory ([parity][kG][kBB][slots][32] float4), meets its
//          group at a barrier (named barrier 1 + g; the CTA's barrier when kG = 1), reads every
//          slot back as its FMAs need it (the shared-memory weights loaded once per slot for the
//          group's batch elements), all-reduces its 3·kBB sums by shuffles, and lane i finishes
//          batch element g + kG·i: relu, the record (tag epoch + s), out.
// Limits:  a lab: on a spin bound or a peer's failure a warp stops waiting and the launch sets
//          *error (results then wrong, and reported); every CTA must be co-resident (checked).
// Build:   the CMake target prnn_wide_rows_lab (the records' loads and stores are the library's,
//          persistent/kernel_common.cuh; the timing bench/bench_timer.h's).
// Usage:   wide_rows_lab [T [B [CASE]]]   (T default 256): every instantiation below at its H
//          and each B of 1, 2, 4 up to kG·kBB; B (0: all) keeps that batch only, CASE (0-based,
//          in main's order) that instantiation only (for a profiler: wide_rows_profile.sh).
// Prints per case: CTAs, registers and spills (cudaFuncGetAttributes), shared memory, µs/step
// (median of 20 launches timed alone with events, after 3: bench_timer.h's median_us) and the max
// |out − ref| / max |ref| against an fp64 CPU reference (fresh uniform inputs, out poisoned with
// NaN before the checked launch).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <vector>

#include "bench/bench_timer.h"
#include "core/cuda_check.h"
#include "persistent/kernel_common.cuh"

namespace {

using prnn::persistent::load_record;
using prnn::persistent::store_record;
using prnn::persistent::tagged;

struct Params {
  const float* w;    // [H, H]
  const float* u;    // [T, B, H]
  float* out;        // [T, B, H]
  float4* exchange;  // [2][B][K]
  unsigned* error;   // set on a spin bound
  int hidden, batch, steps;
  unsigned epoch;
};

constexpr unsigned kSpinBound = 1u << 24;

// Diagnostic (wrong results, for timing only): -DLAB_ONE_SLOT=1 reads every batch element's slot 0
// of the records from shared memory for all slots (the same FMAs, 1/kSlots of the record reads),
// to see how much of the step the shared-memory reads of the records take.
#ifndef LAB_ONE_SLOT
#define LAB_ONE_SLOT 0
#endif
constexpr bool kLabOneSlot = LAB_ONE_SLOT != 0;
// Code-size variant: -DLAB_ROLLED=1 runs the register slots' FMAs batch element by batch element
// in a loop that is not unrolled (#pragma unroll 1), each pass over the kReg slots into two
// partial sums per row (even and odd slots), then added into that element's sums. The step's
// unrolled body shrinks by about kBB× (640 of its ~740 instructions at 16 + 6, BB = 4, are the
// register slots'), for the hypothesis that the FMA phase, 3× slower than its issue rate, waits
// on instruction fetch. The sums' order changes (two chains), so results differ by rounding.
#ifndef LAB_ROLLED
#define LAB_ROLLED 0
#endif
constexpr bool kLabRolled = LAB_ROLLED != 0;
// Scheduling variant (the same sums in the same order per accumulator, so the same results):
// -DLAB_INTERLEAVE=1 loads a slot's records of every batch element first and then issues its
// FMAs column by column over all 3·kBB sums, so that consecutive FMAs write 3·kBB different
// accumulators (the default order, batch element by batch element, reuses one every 3).
#ifndef LAB_INTERLEAVE
#define LAB_INTERLEAVE 0
#endif
constexpr bool kLabInterleave = LAB_INTERLEAVE != 0;

__device__ __forceinline__ unsigned load_volatile(const unsigned* p) {
  unsigned v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int kG, int kBB, int kSlots>
constexpr std::size_t record_smem_bytes() {
  return std::size_t{2} * kG * kBB * kSlots * 32 * sizeof(float4);
}
template <int kW, int kSmem>
constexpr std::size_t weight_smem_bytes() {
  return std::size_t{kW} * kSmem * 9 * 32 * sizeof(float);
}

template <int kW, int kG, int kBB, int kReg, int kSmem>
__global__ void __launch_bounds__(32 * kW * kG, 1) wide_rows_kernel(const Params p) {
  constexpr int kSlots = kReg + kSmem;
  constexpr int kOwn = (kSlots + kW - 1) / kW;  // slots a warp polls per batch element
  extern __shared__ float4 smem[];
  float4* s_rec = smem;  // [2][kG][kBB][kSlots][32]
  float* s_w = reinterpret_cast<float*>(smem + 2 * kG * kBB * kSlots * 32);  // [kW][kSmem][9][32]
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int part = kG == 1 ? warp : warp % kW, g = kG == 1 ? 0 : warp / kW;  // record warp, group
  const int H = p.hidden, B = p.batch, K = (H + 2) / 3;
  const int rec_k = static_cast<int>(blockIdx.x) * kW + part, row0 = 3 * rec_k;
  auto batch_of = [&](int i) { return g + kG * i; };  // the group's i-th batch element

  // Weights: slot i, column 3·(lane + 32·i) + c, row row0 + r.
  auto weight = [&](int i, int r, int c) {
    const int col = 3 * (lane + 32 * i) + c, row = row0 + r;
    return col < H && row < H ? p.w[static_cast<std::int64_t>(row) * H + col] : 0.0f;
  };
  float w[3][3 * kReg];
#pragma unroll
  for (int i = 0; i < kReg; ++i)
#pragma unroll
    for (int c = 0; c < 3; ++c)
#pragma unroll
      for (int r = 0; r < 3; ++r) w[r][3 * i + c] = weight(i, r, c);
  float* my_w = s_w + static_cast<std::int64_t>(part) * kSmem * 9 * 32 + lane;
  if (g == 0)  // the held weights are the CTA's: group 0 fills them for every group
    for (int i = 0; i < kSmem; ++i)
      for (int c = 0; c < 3; ++c)
        for (int r = 0; r < 3; ++r) my_w[(i * 9 + 3 * c + r) * 32] = weight(kReg + i, r, c);
  if constexpr (kG == 1)
    __syncwarp();
  else
    __syncthreads();

  bool failed = false;
  for (int s = 0; s < p.steps; ++s) {
    const float4* src = p.exchange + static_cast<std::int64_t>((s - 1) & 1) * B * K;
    float4* dst = p.exchange + static_cast<std::int64_t>(s & 1) * B * K;
    const unsigned want = p.epoch + static_cast<unsigned>(s) - 1u;
    float u[3] = {};
    if (lane < kBB && batch_of(lane) < B)
#pragma unroll
      for (int r = 0; r < 3; ++r)
        if (row0 + r < H)
          u[r] = p.u[(static_cast<std::int64_t>(s) * B + batch_of(lane)) * H + row0 + r];
    float acc[3 * kBB];
#pragma unroll
    for (int i = 0; i < 3 * kBB; ++i) acc[i] = 0.0f;
    if (s > 0) {
      // This warp's share of the slots, all loads in flight, the stale ones reloaded.
      float4 rec[kBB][kOwn];
#pragma unroll
      for (int b = 0; b < kBB; ++b)
#pragma unroll
        for (int o = 0; o < kOwn; ++o) {
          const int i = part + kW * o, k = lane + 32 * i;
          rec[b][o] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
          if (batch_of(b) < B && i < kSlots && k < K)
            rec[b][o] = load_record(src + static_cast<std::int64_t>(batch_of(b)) * K + k);
        }
      for (unsigned spins = 0;; ++spins) {
        bool ready = true;
#pragma unroll
        for (int b = 0; b < kBB; ++b)
#pragma unroll
          for (int o = 0; o < kOwn; ++o) ready &= tagged(rec[b][o], want);
        if (__all_sync(0xFFFFFFFFu, ready)) break;
        if (failed || spins > kSpinBound ||
            ((spins & 1023u) == 1023u && load_volatile(p.error) != 0u)) {
          if (lane == 0 && !failed) atomicExch(p.error, 1u);
          failed = true;
          break;
        }
#pragma unroll
        for (int b = 0; b < kBB; ++b)
#pragma unroll
          for (int o = 0; o < kOwn; ++o) {
            const int i = part + kW * o, k = lane + 32 * i;
            if (!tagged(rec[b][o], want) && batch_of(b) < B && i < kSlots && k < K)
              rec[b][o] = load_record(src + static_cast<std::int64_t>(batch_of(b)) * K + k);
          }
      }
      float4* s_par =
          s_rec + (static_cast<std::int64_t>(s & 1) * kG + g) * kBB * kSlots * 32 + lane;
#pragma unroll
      for (int b = 0; b < kBB; ++b)
#pragma unroll
        for (int o = 0; o < kOwn; ++o) {
          const int i = part + kW * o;
          if (i < kSlots) s_par[(b * kSlots + i) * 32] = rec[b][o];
        }
      // The group's barrier (named barrier 1 + g, its kW warps; the CTA's with one group).
      if constexpr (kG == 1)
        __syncthreads();
      else
        asm volatile("bar.sync %0, %1;" ::"r"(1 + g), "r"(32 * kW) : "memory");
      // Register slots.
      if constexpr (kLabRolled) {
#pragma unroll 1
        for (int b = 0; b < kBB; ++b) {
          const float4* hb = s_par + b * kSlots * 32;
          float part[2][3] = {};
#pragma unroll
          for (int i = 0; i < kReg; ++i) {
            const float4 h = hb[i * 32];
            const float hv[3] = {h.x, h.y, h.z};
#pragma unroll
            for (int c = 0; c < 3; ++c)
#pragma unroll
              for (int r = 0; r < 3; ++r)
                part[i & 1][r] = fmaf(w[r][3 * i + c], hv[c], part[i & 1][r]);
          }
#pragma unroll
          for (int e = 0; e < kBB; ++e)
            if (e == b)
#pragma unroll
              for (int r = 0; r < 3; ++r) acc[3 * e + r] += part[0][r] + part[1][r];
        }
      } else {
#pragma unroll
        for (int i = 0; i < kReg; ++i) {
          if constexpr (kLabInterleave) {
            float hv[kBB][3];
#pragma unroll
            for (int b = 0; b < kBB; ++b) {
              const float4 h = s_par[(b * kSlots + (kLabOneSlot ? 0 : i)) * 32];
              hv[b][0] = h.x;
              hv[b][1] = h.y;
              hv[b][2] = h.z;
            }
#pragma unroll
            for (int c = 0; c < 3; ++c)
#pragma unroll
              for (int b = 0; b < kBB; ++b)
#pragma unroll
                for (int r = 0; r < 3; ++r)
                  acc[3 * b + r] = fmaf(w[r][3 * i + c], hv[b][c], acc[3 * b + r]);
          } else {
#pragma unroll
            for (int b = 0; b < kBB; ++b) {
              const float4 h = s_par[(b * kSlots + (kLabOneSlot ? 0 : i)) * 32];
              const float hv[3] = {h.x, h.y, h.z};
#pragma unroll
              for (int c = 0; c < 3; ++c)
#pragma unroll
                for (int r = 0; r < 3; ++r)
                  acc[3 * b + r] = fmaf(w[r][3 * i + c], hv[c], acc[3 * b + r]);
            }
          }
        }
      }
      // Shared-memory slots: 9 weights loaded once for every batch element.
#pragma unroll 2
      for (int i = 0; i < kSmem; ++i) {
        float ws[9];
#pragma unroll
        for (int e = 0; e < 9; ++e) ws[e] = my_w[(i * 9 + e) * 32];
#pragma unroll
        for (int b = 0; b < kBB; ++b) {
          const float4 h = s_par[(b * kSlots + (kLabOneSlot ? 0 : kReg + i)) * 32];
          const float hv[3] = {h.x, h.y, h.z};
#pragma unroll
          for (int c = 0; c < 3; ++c)
#pragma unroll
            for (int r = 0; r < 3; ++r) acc[3 * b + r] = fmaf(ws[3 * c + r], hv[c], acc[3 * b + r]);
        }
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1)
#pragma unroll
        for (int i = 0; i < 3 * kBB; ++i) acc[i] += __shfl_xor_sync(0xFFFFFFFFu, acc[i], off);
    }
    // Lane b finishes the group's batch element b.
#pragma unroll
    for (int b = 0; b < kBB; ++b) {
      if (lane != b || batch_of(b) >= B || rec_k >= K) continue;
      float h[3];
#pragma unroll
      for (int r = 0; r < 3; ++r) h[r] = row0 + r < H ? fmaxf(u[r] + acc[3 * b + r], 0.0f) : 0.0f;
      if (s + 1 < p.steps)
        store_record(
            dst + static_cast<std::int64_t>(batch_of(b)) * K + rec_k,
            make_float4(h[0], h[1], h[2], __uint_as_float(p.epoch + static_cast<unsigned>(s))));
#pragma unroll
      for (int r = 0; r < 3; ++r)
        if (row0 + r < H)
          p.out[(static_cast<std::int64_t>(s) * B + batch_of(b)) * H + row0 + r] = h[r];
    }
  }
}

// The command line's filters: the batch (0: all) and the instantiation (-1: all) to run.
int g_only_batch = 0, g_only_case = -1, g_case = 0;

// One instantiation's runs at its H and every B ≤ kG·kBB in {1, 2, 4}.
template <int kW, int kG, int kBB, int kReg, int kSmem>
void run_case(int H, int T, std::mt19937& rng) {
  if (const int index = g_case++; g_only_case >= 0 && index != g_only_case) return;
  constexpr int kSlots = kReg + kSmem;
  const int K = (H + 2) / 3, ctas = (K + kW - 1) / kW;
  auto kernel = wide_rows_kernel<kW, kG, kBB, kReg, kSmem>;
  const std::size_t smem = record_smem_bytes<kG, kBB, kSlots>() + weight_smem_bytes<kW, kSmem>();
  std::printf("H=%d W=%d G=%d BB=%d reg=%d smem_slots=%d:", H, kW, kG, kBB, kReg, kSmem);
  if (32 * kSlots < K) {
    std::printf(" %d slots hold %d of %d records: skipped\n", kSlots, 32 * kSlots, K);
    return;
  }
  PRNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  cudaFuncAttributes attr{};
  PRNN_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int per_sm = 0, sms = 0, device = 0;
  PRNN_CUDA_CHECK(cudaGetDevice(&device));
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  PRNN_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * kW * kG, smem));
  std::printf(" %d CTAs, %d registers, %zu B spilled (local), %.1f KiB shared\n", ctas,
              attr.numRegs, attr.localSizeBytes, smem / 1024.0);
  if (per_sm * sms < ctas) {
    std::printf("  not co-resident (%d per SM, %d SMs)\n", per_sm, sms);
    return;
  }
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<float> w(static_cast<std::size_t>(H) * H);
  for (float& v : w) v = scale * uni(rng);
  for (int B : {1, 2, 4}) {
    if (B > kG * kBB || (g_only_batch != 0 && B != g_only_batch)) continue;
    std::vector<float> u(static_cast<std::size_t>(T) * B * H);
    for (float& v : u) v = uni(rng);
    // fp64 reference.
    std::vector<double> ref(u.size()), h(static_cast<std::size_t>(B) * H, 0.0);
    for (int t = 0; t < T; ++t) {
      std::vector<double> next(h.size());
      for (int b = 0; b < B; ++b)
        for (int r = 0; r < H; ++r) {
          double a = u[(static_cast<std::size_t>(t) * B + b) * H + r];
          for (int c = 0; c < H; ++c)
            a += static_cast<double>(w[static_cast<std::size_t>(r) * H + c]) * h[b * H + c];
          next[b * H + r] = a > 0.0 ? a : 0.0;
        }
      h = next;
      std::copy(h.begin(), h.end(), ref.begin() + static_cast<std::ptrdiff_t>(t) * B * H);
    }
    float *dw, *du, *dout;
    float4* dx;
    unsigned* derr;
    PRNN_CUDA_CHECK(cudaMalloc(&dw, w.size() * sizeof(float)));
    PRNN_CUDA_CHECK(cudaMalloc(&du, u.size() * sizeof(float)));
    PRNN_CUDA_CHECK(cudaMalloc(&dout, u.size() * sizeof(float)));
    PRNN_CUDA_CHECK(cudaMalloc(&dx, std::size_t{2} * B * K * sizeof(float4)));
    PRNN_CUDA_CHECK(cudaMalloc(&derr, sizeof(unsigned)));
    PRNN_CUDA_CHECK(cudaMemcpy(dw, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
    PRNN_CUDA_CHECK(cudaMemcpy(du, u.data(), u.size() * sizeof(float), cudaMemcpyHostToDevice));
    PRNN_CUDA_CHECK(cudaMemset(dx, 0, std::size_t{2} * B * K * sizeof(float4)));
    PRNN_CUDA_CHECK(cudaMemset(derr, 0, sizeof(unsigned)));
    Params p{dw, du, dout, dx, derr, H, B, T, 1u};
    auto launch = [&] {
      void* args[] = {&p};
      PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(ctas),
                                                  dim3(32 * kW * kG), args, smem, nullptr));
      p.epoch += static_cast<unsigned>(T);
    };
    PRNN_CUDA_CHECK(cudaMemset(dout, 0xFF, u.size() * sizeof(float)));  // NaN
    launch();
    PRNN_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(u.size());
    PRNN_CUDA_CHECK(
        cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0, big = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double d = std::fabs(out[i] - ref[i]);
      worst = std::isnan(out[i]) ? INFINITY : std::max(worst, d);
      big = std::max(big, std::fabs(ref[i]));
    }
    const double us = prnn::bench::median_us(launch, 20, 3) / T;
    unsigned err = 0;
    PRNN_CUDA_CHECK(cudaMemcpy(&err, derr, sizeof(unsigned), cudaMemcpyDeviceToHost));
    std::printf("  B=%d: %.3f us/step  max rel err %.2e%s\n", B, us, worst / big,
                err != 0 ? "  (a spin bound was hit: results invalid)" : "");
    PRNN_CUDA_CHECK(cudaFree(dw));
    PRNN_CUDA_CHECK(cudaFree(du));
    PRNN_CUDA_CHECK(cudaFree(dout));
    PRNN_CUDA_CHECK(cudaFree(dx));
    PRNN_CUDA_CHECK(cudaFree(derr));
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const int T = argc > 1 ? std::atoi(argv[1]) : 256;
  if (T < 2) {
    std::fprintf(stderr, "wide_rows_lab: expected T >= 2, got %d\n", T);
    return 1;
  }
  g_only_batch = argc > 2 ? std::atoi(argv[2]) : 0;
  g_only_case = argc > 3 ? std::atoi(argv[3]) : -1;
  if (g_only_batch != 0 && g_only_batch != 1 && g_only_batch != 2 && g_only_batch != 4) {
    std::fprintf(stderr, "wide_rows_lab: expected B of 0 (all), 1, 2 or 4, got %d\n", g_only_batch);
    return 1;
  }
  std::mt19937 rng(std::random_device{}());
  // H = 1152 (K = 384, 12 slots) as the library holds it, all in registers, and with half the
  // slots in shared memory: what the shared-memory weights cost at the same exchange.
  run_case<3, 1, 4, 12, 0>(1152, T, rng);
  run_case<3, 1, 4, 6, 6>(1152, T, rng);
  // H = 2048 (K = 683, 22 slots): 6 warps (114 CTAs) or 8 (86), 12 or 16 slots in registers.
  run_case<6, 1, 4, 12, 10>(2048, T, rng);
  run_case<6, 1, 4, 16, 6>(2048, T, rng);
  run_case<8, 1, 4, 12, 10>(2048, T, rng);
  run_case<6, 1, 2, 16, 6>(2048, T, rng);
  // Two or four batch groups (12 or 24 warps: 168 or 85 registers a thread), fewer slots in
  // registers, the held weights read by every group: more warps to hide the FMAs' latency.
  run_case<6, 2, 2, 8, 14>(2048, T, rng);
  run_case<6, 2, 1, 10, 12>(2048, T, rng);
  run_case<6, 4, 1, 4, 18>(2048, T, rng);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "wide_rows_lab: %s\n", e.what());
  return 1;
}
