// What the gated warp-rows backward's product would cost on tensor cores, staging included
// (bench/persistent/NOTES.md, "Sketch: the gated warp-rows backward's product on tensor cores"),
// beside the FMA form it has. Standalone, no library: one CTA per SM of 12 warps (LSTM, 3
// records per CTA, BB = 4), each lane holding the 16 dQ records it polls in a step (4 slots of
// each of the 4 batch elements; in a step they come from the exchange). Each iteration is the step
// between the poll and the finish:
//   fma      the records into shared memory as float4 [BB][NG][kRec][32], a barrier, each warp
//            its gate's 9·kRec·BB FMAs over them (108 fp32 weights a lane), a barrier;
//   mma      the records into shared memory as 16-bit hi and lo (n rows 2i, 2i + 1; K = NG·1152,
//            3 u16 a record and row: 6 STS.U16 a record), a barrier, each warp 24 k-tiles of
//            one row tile (B from shared memory; A fragments in registers, 16 reused round the
//            k-tiles), its partial sums stored, a barrier;
//   stage    mma's staging and barrier alone;
//   padded   records padded to 4 units in K (K = NG·1536): hi and lo one STS.64 each, 32
//            k-tiles a warp;
//   pstage   padded's staging and barrier alone.
// Timed with clock64() around the loop; cycles per iteration (median over CTAs). Values are
// garbage (timing only). Build and run: bench/persistent/backward_staging_lab.sh.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lab_common.cuh"

constexpr int kWarps = 12, kThreads = 32 * kWarps;
constexpr int kNG = 4, kRec = 12, kBB = 4, kOwn = 4;  // LSTM, BB = 4: 16 records a lane
constexpr int kUnits = 3 * 32 * kRec;                  // 1152 units of a gate
constexpr int kK = kNG * kUnits;                       // 4608
constexpr int kKPadded = kNG * 4 * 32 * kRec;          // 6144
constexpr int kPad = 8;                                // staged rows padded against conflicts

enum Mode { kFma, kMma, kStage, kPadded, kPaddedStage };

// Slot m of batch element i of this lane: record (gate j / kRec, lane + 32·(j % kRec)), j the
// warp's m-th slot of NG·kRec.
__device__ __forceinline__ void slot(int warp, int m, int& q, int& k) {
  const int j = warp + kWarps * m;
  q = j / kRec;
  k = threadIdx.x % 32 + 32 * (j % kRec);
}

template <Mode M>
__global__ void __launch_bounds__(kThreads, 1)
    staging_kernel(int iters, long long* cycles, float* sink, const unsigned* init) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int grp = lane >> 2, tig = lane & 3;
  constexpr bool kPadK = M == kPadded || M == kPaddedStage;
  constexpr int kStride = (kPadK ? kKPadded : kK) + kPad;  // a staged row, u16
  constexpr int kKT = (kPadK ? kKPadded : kK) / 16 / kWarps;  // 24 or 32 k-tiles a warp
  unsigned short* stage = reinterpret_cast<unsigned short*>(smem);
  float4* share = reinterpret_cast<float4*>(smem);
  float* red = reinterpret_cast<float*>(smem + 8 * kStride * 2);

  float4 rec[kBB][kOwn];
#pragma unroll
  for (int i = 0; i < kBB; ++i)
#pragma unroll
    for (int m = 0; m < kOwn; ++m) {
      const unsigned u = init[(i * kOwn + m) * 32 + lane];
      rec[i][m] = make_float4(__uint_as_float(u), __uint_as_float(u ^ 1u), __uint_as_float(u ^ 2u),
                              0.0f);
    }
  float w[3][3 * kRec];
#pragma unroll
  for (int r = 0; r < 3; ++r)
#pragma unroll
    for (int c = 0; c < 3 * kRec; ++c) w[r][c] = __uint_as_float(init[(r * 36 + c) % 256 * 32 + lane]);
  // 16 A fragments, reused round the k-tiles (a warp's mma cost the same whatever A holds), so
  // that the 24 or 32 of the kernel's form do not spill beside the records here.
  unsigned a[16][4];
#pragma unroll
  for (int kt = 0; kt < 16; ++kt)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[kt][j] = init[(kt * 4 + j) % 256 * 32 + lane];
  float acc[12] = {};
  float d[4] = {};
  __syncthreads();

  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    // ---- staging: each of the lane's records (batch element i, gate q, record k) ----
#pragma unroll
    for (int i = 0; i < kBB; ++i)
#pragma unroll
      for (int m = 0; m < kOwn; ++m) {
        int q, k;
        slot(warp, m, q, k);
        const float v[3] = {rec[i][m].x, rec[i][m].y, rec[i][m].z};
        if constexpr (M == kFma) {
          share[((i * kNG + q) * kRec + k / 32) * 32 + lane] = rec[i][m];
        } else if constexpr (kPadK) {
          unsigned short h[3], l[3];
#pragma unroll
          for (int c = 0; c < 3; ++c) split_bf16(v[c], h[c], l[c]);
          const int at = q * 4 * 32 * kRec + 4 * k;
          *reinterpret_cast<uint2*>(stage + 2 * i * kStride + at) =
              make_uint2(h[0] | unsigned(h[1]) << 16, h[2]);
          *reinterpret_cast<uint2*>(stage + (2 * i + 1) * kStride + at) =
              make_uint2(l[0] | unsigned(l[1]) << 16, l[2]);
        } else {
#pragma unroll
          for (int c = 0; c < 3; ++c) {
            unsigned short hi, lo;
            split_bf16(v[c], hi, lo);
            stage[2 * i * kStride + q * kUnits + 3 * k + c] = hi;
            stage[(2 * i + 1) * kStride + q * kUnits + 3 * k + c] = lo;
          }
        }
      }
    __syncthreads();
    // ---- product ----
    if constexpr (M == kFma) {
      const int q = warp / 3;  // the warp's gate
#pragma unroll
      for (int i = 0; i < kBB; ++i)
#pragma unroll
        for (int j = 0; j < kRec; ++j) {
          const float4 v = share[((i * kNG + q) * kRec + j) * 32 + lane];
          const float dq[3] = {v.x, v.y, v.z};
#pragma unroll
          for (int c = 0; c < 3; ++c)
#pragma unroll
            for (int r = 0; r < 3; ++r) acc[3 * i + r] = fmaf(w[r][3 * j + c], dq[c], acc[3 * i + r]);
        }
    } else if constexpr (M == kMma || M == kPadded) {
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt) {
        const int at = grp * kStride + (warp * kKT + kt) * 16 + 2 * tig;
        const unsigned b0 = *reinterpret_cast<const unsigned*>(stage + at);
        const unsigned b1 = *reinterpret_cast<const unsigned*>(stage + at + 8);
        mma_bf16(d, a[kt % 16], b0, b1);
      }
      red[(warp * 16 + grp) * 4 + tig] = d[0] + d[1];
      red[(warp * 16 + grp + 8) * 4 + tig] = d[2] + d[3];
    }
    __syncthreads();
  }
  const long long t1 = clock64();
  float s = d[0] + d[1] + d[2] + d[3];
#pragma unroll
  for (int e = 0; e < 12; ++e) s += acc[e];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <Mode M>
void run(int sms, int iters, const char* name) {
  constexpr bool kPadK = M == kPadded || M == kPaddedStage;
  const int stage_bytes = 8 * ((kPadK ? kKPadded : kK) + kPad) * 2 + kWarps * 16 * 4 * 4;
  const int share_bytes = kBB * kNG * kRec * 32 * 16;
  const int smem = M == kFma ? share_bytes : stage_bytes;
  long long* d_cycles;
  float* d_sink;
  unsigned* d_init;
  const std::vector<unsigned> init(256 * 32, 0x3f803f80u);
  CHECK(cudaMalloc(&d_init, sizeof(unsigned) * init.size()));
  CHECK(cudaMemcpy(d_init, init.data(), sizeof(unsigned) * init.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&d_cycles, sizeof(long long) * sms));
  CHECK(cudaMalloc(&d_sink, sizeof(float) * sms * kThreads));
  CHECK(cudaFuncSetAttribute(staging_kernel<M>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  staging_kernel<M><<<sms, kThreads, smem>>>(iters, d_cycles, d_sink, d_init);  // warm-up
  CHECK(cudaGetLastError());
  staging_kernel<M><<<sms, kThreads, smem>>>(iters, d_cycles, d_sink, d_init);
  CHECK(cudaDeviceSynchronize());
  std::printf("%-64s %8.1f cycles/iteration  (%d bytes of shared memory)\n", name,
              median_cycles_per_iteration(d_cycles, sms, iters), smem);
  CHECK(cudaFree(d_cycles));
  CHECK(cudaFree(d_sink));
  CHECK(cudaFree(d_init));
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int sms = print_device(iters, "; LSTM, 12 warps, BB = 4, 16 records a lane");
  run<kFma>(sms, iters, "fma: float4 share, 432 FFMA a lane (the kernel's form)");
  run<kMma>(sms, iters, "mma: hi/lo u16 staging (96 STS.U16 a lane), 24 mma a warp");
  run<kStage>(sms, iters, "  its staging and barrier alone");
  run<kPadded>(sms, iters, "padded: hi/lo STS.64 (32 a lane), 32 mma a warp");
  run<kPaddedStage>(sms, iters, "  its staging and barrier alone");
  return 0;
}
