// Tensor-core persistent LSTM forward: a lab prototype (not part of the library), to measure
// what a step costs when the recurrent products run on mma.sync instead of FMA loops.
//
//   bench/persistent/mma_lab.sh            (GPU machine: builds with nvcc, runs the cases)
//
// Contract of mma_lstm_forward (one layer, one direction, PyTorch gate order i, f, g, o):
//   u [T, B, 4H] fp32: W_ih·x_t + b_ih + b_hh, precomputed (the library's GEMM over all T);
//   W_hh [4H, H] bf16, row-major; h_0 = c_0 = 0; y [T, B, H] fp32: h_t.
// Launch:  cooperative (co-residency guaranteed or the launch fails), one CTA per U hidden units
//          (kUnits), kWarps warps. CTA k holds W_hh rows q·H + k·U + j (q < 4, j < U), padded
//          to kMTiles·16 rows, in registers as mma A fragments: warp w holds the k-tiles
//          [w·kKTiles, (w+1)·kKTiles) of every row tile.
// Per step: wait until every CTA published h_{t-1} (one arrival counter in global memory: the
//          barrier and the exchange in one), load h_{t-1} [B, H] into shared memory as bf16
//          hi + lo (h = hi + lo to ~2^-16 relative: two mma per fragment keep h at about fp32
//          accuracy; the weights are bf16), every warp runs its mma.sync m16n8k16 over its
//          k-tiles (the batch is the n = 8 dimension, B <= 8), writes its fp32 partial sums to
//          shared memory, and U·B finishing threads add the warps' sums in a fixed order, apply
//          the gates (c in the finisher's register across steps) and publish h_t.
// Order:   deterministic (fixed warp order, no atomics on data). Spins are bounded (a timeout
//          sets an error flag and ends the kernel).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                   \
                   cudaGetErrorString(e_));                                                \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

constexpr int kPad = 8;                       // bf16 elements of padding per staged h row
constexpr unsigned long long kTimeoutNs = 2'000'000'000ull;

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline unsigned pack_bf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<unsigned>(__bfloat16_as_ushort(lo)) |
         (static_cast<unsigned>(__bfloat16_as_ushort(hi)) << 16);
}

__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

struct Params {
  int T;
  const float* u;                // [T, B, 4H]
  const __nv_bfloat16* w;        // [4H, H]
  float* y;                      // [T, B, H]
  float* exchange;               // [2, B, H]
  unsigned* arrived;             // one counter, 0 at launch
  int* error;                    // set on timeout
};

// H hidden units, U units per CTA, B batch (<= 8), kWarps warps per CTA. kNoWait (timing only,
// wrong results): never wait for the other CTAs, so the step is the CTA's own chain.
// kLoadsUpFront: stage h_{t-1} with all of a thread's loads in flight at once (else one by one).
template <int H, int U, int B, int kWarps, bool kNoWait, bool kLoadsUpFront>
__global__ void __launch_bounds__(kWarps * 32, 1) mma_lstm_forward(Params p) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kRows = 4 * U;                  // gate rows per CTA
  constexpr int kMTiles = (kRows + 15) / 16;
  constexpr int kKTilesAll = H / 16;
  static_assert(H % (16 * kWarps) == 0, "H: whole k-tiles per warp");
  constexpr int kKTiles = kKTilesAll / kWarps;  // per warp
  constexpr int kStride = H + kPad;             // staged h row (bf16 elements)
  static_assert(B >= 1 && B <= 8, "the batch is the mma's n = 8 dimension");
  const int ctas = static_cast<int>(gridDim.x);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int grp = lane >> 2, tig = lane & 3;
  const int unit0 = static_cast<int>(blockIdx.x) * U;

  // Dynamic: the staged h, hi then lo, [B][kStride] bf16 each (rows past B are never read).
  extern __shared__ __align__(16) unsigned char s_dyn[];
  auto* s_hi = reinterpret_cast<__nv_bfloat16(*)[kStride]>(s_dyn);
  auto* s_lo = reinterpret_cast<__nv_bfloat16(*)[kStride]>(s_dyn + sizeof(__nv_bfloat16) * B * kStride);
  __shared__ float s_red[kWarps][kMTiles * 16][8];
  __shared__ int s_abort;

  // ---- the weights into registers, as A fragments (rows past the CTA's 4U are zero) ----------
  unsigned a[kMTiles][kKTiles][4];
  const auto weight = [&](int r, int k) -> __nv_bfloat16 {
    if (r >= kRows) return __float2bfloat16(0.0f);
    const int q = r / U, j = r % U, unit = unit0 + j;
    if (unit >= H) return __float2bfloat16(0.0f);
    return p.w[static_cast<long long>(q * H + unit) * H + k];
  };
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int kt = 0; kt < kKTiles; ++kt) {
      const int r = mt * 16 + grp, k = (warp * kKTiles + kt) * 16 + tig * 2;
      a[mt][kt][0] = pack_bf16(weight(r, k), weight(r, k + 1));
      a[mt][kt][1] = pack_bf16(weight(r + 8, k), weight(r + 8, k + 1));
      a[mt][kt][2] = pack_bf16(weight(r, k + 8), weight(r, k + 9));
      a[mt][kt][3] = pack_bf16(weight(r + 8, k + 8), weight(r + 8, k + 9));
    }
  for (int i = static_cast<int>(threadIdx.x); i < B * kStride; i += kThreads) {
    (&s_hi[0][0])[i] = __float2bfloat16(0.0f);
    (&s_lo[0][0])[i] = __float2bfloat16(0.0f);
  }
  if (threadIdx.x == 0) s_abort = 0;

  // The finisher: unit j of batch element b.
  const bool finisher = static_cast<int>(threadIdx.x) < U * B;
  const int f_j = static_cast<int>(threadIdx.x) % U, f_b = static_cast<int>(threadIdx.x) / U;
  const int f_unit = unit0 + f_j;
  float c = 0.0f;
  __syncthreads();

  for (int t = 0; t < p.T; ++t) {
    // ---- wait for h_{t-1} from every CTA, stage it as bf16 hi + lo ---------------------------
    if (t > 0) {
      if (threadIdx.x == 0 && !kNoWait) {
        const unsigned want = static_cast<unsigned>(ctas) * static_cast<unsigned>(t);
        const unsigned long long start = global_ns();
        while (true) {
          unsigned got;
          asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(got) : "l"(p.arrived));
          if (got >= want) break;
          if (global_ns() - start > kTimeoutNs) {
            atomicExch(p.error, 1);
            s_abort = 1;
            break;
          }
        }
      }
      __syncthreads();
      if (s_abort != 0) return;
      const float* h = p.exchange + static_cast<long long>((t - 1) & 1) * B * H;
      const auto stage = [&](int i, float4 v) {
        const int b = (4 * i) / H, k = (4 * i) % H;
        const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const __nv_bfloat16 hi = __float2bfloat16(x[e]);
          s_hi[b][k + e] = hi;
          s_lo[b][k + e] = __float2bfloat16(x[e] - __bfloat162float(hi));
        }
      };
      constexpr int kN4 = B * H / 4;
      if constexpr (kLoadsUpFront) {
        // Every load of the thread in flight at once (L2, no L1), then the conversions.
        constexpr int kPer = (kN4 + kThreads - 1) / kThreads;
        float4 v[kPer];
#pragma unroll
        for (int r = 0; r < kPer; ++r) {
          const int i = static_cast<int>(threadIdx.x) + r * kThreads;
          v[r] = i < kN4 ? __ldcg(reinterpret_cast<const float4*>(h) + i)
                         : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int r = 0; r < kPer; ++r) {
          const int i = static_cast<int>(threadIdx.x) + r * kThreads;
          if (i < kN4) stage(i, v[r]);
        }
      } else {
        // One load at a time (the first version: each waits for the previous iteration).
        for (int i = static_cast<int>(threadIdx.x); i < kN4; i += kThreads) {
          float4 v;
          asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                       : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                       : "l"(h + 4 * i));
          stage(i, v);
        }
      }
      __syncthreads();
    }

    // ---- the warp's partial products over its k-tiles -----------------------------------------
    float acc[kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.0f;
    if (t > 0) {
#pragma unroll
      for (int kt = 0; kt < kKTiles; ++kt) {
        // Column n = grp is batch element grp: zero past B.
        const int k = (warp * kKTiles + kt) * 16 + tig * 2;
        const int n = grp < B ? grp : 0;
        const unsigned live = grp < B ? ~0u : 0u;
        const unsigned bh0 = live & *reinterpret_cast<const unsigned*>(&s_hi[n][k]);
        const unsigned bh1 = live & *reinterpret_cast<const unsigned*>(&s_hi[n][k + 8]);
        const unsigned bl0 = live & *reinterpret_cast<const unsigned*>(&s_lo[n][k]);
        const unsigned bl1 = live & *reinterpret_cast<const unsigned*>(&s_lo[n][k + 8]);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_bf16(acc[mt], a[mt][kt], bh0, bh1);
          mma_bf16(acc[mt], a[mt][kt], bl0, bl1);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int r = mt * 16 + grp;
      s_red[warp][r][tig * 2] = acc[mt][0];
      s_red[warp][r][tig * 2 + 1] = acc[mt][1];
      s_red[warp][r + 8][tig * 2] = acc[mt][2];
      s_red[warp][r + 8][tig * 2 + 1] = acc[mt][3];
    }
    __syncthreads();

    // ---- finish: gates, cell, h_t published -------------------------------------------------
    if (finisher && f_unit < H) {
      float g[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) s += s_red[w][q * U + f_j][f_b];
        g[q] = s + p.u[(static_cast<long long>(t) * B + f_b) * 4 * H + q * H + f_unit];
      }
      const float i_g = sigmoid(g[0]), f_g = sigmoid(g[1]), g_g = tanhf(g[2]), o_g = sigmoid(g[3]);
      c = f_g * c + i_g * g_g;
      const float h = o_g * tanhf(c);
      p.exchange[static_cast<long long>(t & 1) * B * H + f_b * H + f_unit] = h;
      p.y[(static_cast<long long>(t) * B + f_b) * H + f_unit] = h;
      __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(p.arrived, 1u);
  }
}

template <int H, int U, int B, int kWarps = 8, bool kNoWait = false, bool kLoadsUpFront = true>
void run_case(int T, int repeats) {
  constexpr int kThreads = kWarps * 32;
  const auto kernel = mma_lstm_forward<H, U, B, kWarps, kNoWait, kLoadsUpFront>;
  const int ctas = (H + U - 1) / U;
  std::mt19937_64 rng(42 + H + B);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<__nv_bfloat16> w(static_cast<size_t>(4) * H * H);
  std::vector<float> wf(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = __float2bfloat16(dist(rng) * scale);
    wf[i] = __bfloat162float(w[i]);
  }
  std::vector<float> u(static_cast<size_t>(T) * B * 4 * H);
  for (float& x : u) x = dist(rng);

  // fp64 reference with the same (bf16) weights, over the first Tc steps (the check)
  const int Tc = std::min(T, 64);
  std::vector<double> h(static_cast<size_t>(B) * H, 0.0), cc(h.size(), 0.0),
      yref(static_cast<size_t>(Tc) * B * H);
  std::vector<double> pre(4 * static_cast<size_t>(H));
  for (int t = 0; t < Tc; ++t) {
    std::vector<double> hn(h.size());
    for (int b = 0; b < B; ++b) {
      for (int r = 0; r < 4 * H; ++r) {
        double s = u[(static_cast<size_t>(t) * B + b) * 4 * H + r];
        const float* wr = &wf[static_cast<size_t>(r) * H];
        for (int k = 0; k < H; ++k) s += static_cast<double>(wr[k]) * h[static_cast<size_t>(b) * H + k];
        pre[r] = s;
      }
      for (int j = 0; j < H; ++j) {
        auto sg = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
        const double ig = sg(pre[j]), fg = sg(pre[H + j]), gg = std::tanh(pre[2 * H + j]),
                     og = sg(pre[3 * H + j]);
        double& cj = cc[static_cast<size_t>(b) * H + j];
        cj = fg * cj + ig * gg;
        hn[static_cast<size_t>(b) * H + j] = og * std::tanh(cj);
        yref[(static_cast<size_t>(t) * B + b) * H + j] = hn[static_cast<size_t>(b) * H + j];
      }
    }
    h = hn;
  }

  float *du, *dy, *dex;
  __nv_bfloat16* dw;
  unsigned* darr;
  int* derr;
  CHECK(cudaMalloc(&du, u.size() * 4));
  const size_t y_size = static_cast<size_t>(T) * B * H;
  CHECK(cudaMalloc(&dy, y_size * 4));
  CHECK(cudaMalloc(&dex, 2 * static_cast<size_t>(B) * H * 4));
  CHECK(cudaMalloc(&dw, w.size() * 2));
  CHECK(cudaMalloc(&darr, 4));
  CHECK(cudaMalloc(&derr, 4));
  CHECK(cudaMemcpy(du, u.data(), u.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dy, 0xff, y_size * 4));  // poisoned: NaN
  CHECK(cudaMemset(derr, 0, 4));

  const size_t smem = 2 * sizeof(__nv_bfloat16) * B * (H + kPad);
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)));
  int per_sm = 0, sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads,
                                                      smem));
  if (per_sm * sms < ctas) {
    std::printf("H=%d U=%d B=%d: %d CTAs do not fit (%d per SM x %d SMs)\n", H, U, B, ctas, per_sm, sms);
    return;
  }
  cudaFuncAttributes attr{};
  CHECK(cudaFuncGetAttributes(&attr, kernel));

  Params p{T, du, dw, dy, dex, darr, derr};
  void* args[] = {&p};
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < repeats + 1; ++r) {
    CHECK(cudaMemsetAsync(darr, 0, 4));
    CHECK(cudaEventRecord(e0));
    CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel),
                                      dim3(ctas), dim3(kThreads), args, smem, nullptr));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float m = 0;
    CHECK(cudaEventElapsedTime(&m, e0, e1));
    if (r > 0) ms.push_back(m);
  }
  int err = 0;
  CHECK(cudaMemcpy(&err, derr, 4, cudaMemcpyDeviceToHost));
  std::vector<float> y(y_size);
  CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
  bool unwritten = false;  // a step past the checked ones left poisoned
  for (size_t i = yref.size(); i < y.size(); ++i) unwritten = unwritten || !std::isfinite(y[i]);
  double num = 0, den = 0, worst = 0;
  for (size_t i = 0; i < yref.size(); ++i) {
    const double d = static_cast<double>(y[i]) - yref[i];
    num += d * d;
    den += yref[i] * yref[i];
    worst = std::max(worst, std::abs(d));
    if (!std::isfinite(y[i])) worst = INFINITY;
  }
  if (unwritten) worst = INFINITY;
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  std::printf(
      "mma_lab,H=%d;B=%d;T=%d;U=%d;warps=%d;nowait=%d;upfront=%d,ctas=%d,regs=%d,spill_bytes=%d,us_per_step=%.3f,"
      "rel_l2=%.3g,max_abs=%.3g (first %d steps),timeout=%d\n",
      H, B, T, U, kWarps, kNoWait ? 1 : 0, kLoadsUpFront ? 1 : 0, ctas, attr.numRegs, static_cast<int>(attr.localSizeBytes), 1e3 * med / T,
      std::sqrt(num / std::max(den, 1e-300)), worst, Tc, err);
  CHECK(cudaFree(du));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dex));
  CHECK(cudaFree(dw));
  CHECK(cudaFree(darr));
  CHECK(cudaFree(derr));
}

}  // namespace

int main(int argc, char** argv) {
  const int T = argc > 1 ? std::atoi(argv[1]) : 256;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  // Loads up front (the default since the second version).
  run_case<1024, 8, 1>(T, repeats);
  run_case<1024, 8, 4>(T, repeats);
  run_case<1024, 8, 8>(T, repeats);
  run_case<1152, 9, 1>(T, repeats);
  run_case<1152, 9, 4>(T, repeats);
  run_case<1152, 9, 8>(T, repeats);
  // The first version's staging (one load at a time), for the A/B in one run.
  run_case<1152, 9, 4, 8, false, false>(T, repeats);
  run_case<1152, 9, 8, 8, false, false>(T, repeats);
  // The chain alone (no waiting: wrong results, timing only).
  run_case<1152, 9, 4, 8, true>(T, repeats);
  run_case<1152, 9, 8, 8, true>(T, repeats);
  return 0;
}
