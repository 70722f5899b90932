// What the gated tensor-core forward's staging and B loads cost, in its form and transposed
// (bench/persistent/NOTES.md, "Next for the 16-bit LSTM forward at B = 4"). Standalone, no
// library: one CTA per SM of 12 warps (LSTM, 3 records per CTA, BB = 4), each lane holding the
// 4 records it polls in a step (one of each batch element, record k = lane + 32·warp). Each
// iteration is the step between the poll and the finish:
//   rows    the kernel's form (GatedMma): h's hi and lo as n rows 2i and 2i + 1 of K = 1152
//           16-bit columns, 6 STS.U16 a record (24 a lane); each warp 6 k-tiles of 3 row tiles,
//           its B fragments as 2 LDS.32 a k-tile; its partial sums stored; a barrier each side;
//   trans   B transposed: rows k of 8 16-bit values (hi, lo of the 4 batch elements), one
//           STS.32 a value (hi | lo; 12 a lane), lane l writing batch element (t + l / 8) mod 4
//           at its t-th store so that the 32 lanes hit 32 banks; B fragments by
//           ldmatrix.x4.trans (two k-tiles a load);
//   rstage, tstage   each form's staging and barrier alone.
// The two forms' partial sums are compared (the same products in the same order: equal bit for
// bit), then timed with clock64() around the loop; cycles per iteration (median over CTAs).
// Build and run: bench/persistent/forward_staging_lab.sh.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lab_common.cuh"

constexpr int kWarps = 12, kThreads = 32 * kWarps;
constexpr int kBB = 4;                  // batch elements, one record of each a lane
constexpr int kK = 3 * 32 * kWarps;     // 1152 columns: 384 records of 3
constexpr int kKT = kK / 16 / kWarps;   // 6 k-tiles a warp
constexpr int kMT = 3;                  // row tiles (36 gate rows)
constexpr int kStride = kK + 8;         // the rows form's staged row, u16 (padded)
constexpr int kRed = kWarps * kMT * 16 * 4;  // partial sums, floats

enum Mode { kRows, kTrans, kRowsStage, kTransStage };

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

template <Mode M>
__global__ void __launch_bounds__(kThreads, 1)
    staging_kernel(int iters, long long* cycles, float* red_out, const float* h,
                   const unsigned* init) {
  constexpr bool kT = M == kTrans || M == kTransStage;
  constexpr bool kProduct = M == kRows || M == kTrans;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned short* stage = reinterpret_cast<unsigned short*>(smem);  // rows: [8][kStride]
  unsigned* stage_t = reinterpret_cast<unsigned*>(smem);            // trans: [kK][4] u32
  float* red = reinterpret_cast<float*>(smem + (kT ? kK * 16 : 8 * kStride * 2));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int grp = lane >> 2, tig = lane & 3;
  const int k = lane + 32 * warp;  // this lane's record

  float4 rec[kBB];
#pragma unroll
  for (int i = 0; i < kBB; ++i) {
    const float* r = h + (i * kK + 3 * k);
    rec[i] = make_float4(r[0], r[1], r[2], 0.0f);
  }
  unsigned a[kMT][kKT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[mt][kt][j] = init[((mt * kKT + kt) * 4 + j) % 256 * 32 + lane];
  for (int i = threadIdx.x; i < (kT ? kK * 4 : 8 * kStride / 2); i += kThreads)
    reinterpret_cast<unsigned*>(smem)[i] = 0;
  __syncthreads();

  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    // The records change every iteration (their last bit), so that the split is not hoisted.
    const unsigned flip = static_cast<unsigned>(it) & 1u;
    // ---- staging: value c of batch element i as hi[i][c] and lo[i][c] ----
    unsigned short hi[kBB][3], lo[kBB][3];
#pragma unroll
    for (int i = 0; i < kBB; ++i) {
      const float v[3] = {rec[i].x, rec[i].y, rec[i].z};
#pragma unroll
      for (int c = 0; c < 3; ++c)
        split_bf16(__uint_as_float(__float_as_uint(v[c]) ^ flip), hi[i][c], lo[i][c]);
    }
    if constexpr (!kT) {
#pragma unroll
      for (int i = 0; i < kBB; ++i)
#pragma unroll
        for (int c = 0; c < 3; ++c) {
          stage[2 * i * kStride + 3 * k + c] = hi[i][c];
          stage[(2 * i + 1) * kStride + 3 * k + c] = lo[i][c];
        }
    } else {
      unsigned packed[kBB][3];  // hi | lo << 16 of value c of batch element i
#pragma unroll
      for (int i = 0; i < kBB; ++i)
#pragma unroll
        for (int c = 0; c < 3; ++c) packed[i][c] = hi[i][c] | static_cast<unsigned>(lo[i][c]) << 16;
      const int rot = lane >> 3;
#pragma unroll
      for (int t = 0; t < kBB; ++t) {
        const int i = (t + rot) & 3;
#pragma unroll
        for (int c = 0; c < 3; ++c) {
          // packed[i][c] with i a run-time value, by selects (no local memory)
          const unsigned v01 = (i & 1) ? packed[1][c] : packed[0][c];
          const unsigned v23 = (i & 1) ? packed[3][c] : packed[2][c];
          stage_t[(3 * k + c) * 4 + i] = (i & 2) ? v23 : v01;
        }
      }
    }
    __syncthreads();
    // ---- product ----
    if constexpr (kProduct) {
      float acc[kMT][4] = {};
#pragma unroll
      for (int kt = 0; kt < kKT; kt += 2) {
        unsigned b[2][2];
        const int k0 = (warp * kKT + kt) * 16;
        if constexpr (kT) {
          unsigned r[4];
          ldmatrix_x4_trans(r, stage_t + (k0 + lane) * 4);
          b[0][0] = r[0];
          b[0][1] = r[1];
          b[1][0] = r[2];
          b[1][1] = r[3];
        } else {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int at = grp * kStride + k0 + 16 * e + 2 * tig;
            b[e][0] = *reinterpret_cast<const unsigned*>(stage + at);
            b[e][1] = *reinterpret_cast<const unsigned*>(stage + at + 8);
          }
        }
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) mma_bf16(acc[mt], a[mt][kt + e], b[e][0], b[e][1]);
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        red[((warp * kMT + mt) * 16 + grp) * 4 + tig] = acc[mt][0] + acc[mt][1];
        red[((warp * kMT + mt) * 16 + grp + 8) * 4 + tig] = acc[mt][2] + acc[mt][3];
      }
    }
    __syncthreads();
  }
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  if (blockIdx.x == 0 && kProduct)
    for (int i = threadIdx.x; i < kRed; i += kThreads) red_out[i] = red[i];
}

template <Mode M>
std::vector<float> run(int sms, int iters, const char* name, const float* d_h,
                       const unsigned* d_init) {
  constexpr bool kT = M == kTrans || M == kTransStage;
  const int smem = (kT ? kK * 16 : 8 * kStride * 2) + kRed * 4;
  long long* d_cycles;
  float* d_red;
  CHECK(cudaMalloc(&d_cycles, sizeof(long long) * sms));
  CHECK(cudaMalloc(&d_red, sizeof(float) * kRed));
  CHECK(cudaMemset(d_red, 0, sizeof(float) * kRed));
  CHECK(cudaFuncSetAttribute(staging_kernel<M>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  staging_kernel<M><<<sms, kThreads, smem>>>(iters, d_cycles, d_red, d_h, d_init);  // warm-up
  CHECK(cudaGetLastError());
  staging_kernel<M><<<sms, kThreads, smem>>>(iters, d_cycles, d_red, d_h, d_init);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> red(kRed);
  CHECK(cudaMemcpy(red.data(), d_red, sizeof(float) * kRed, cudaMemcpyDeviceToHost));
  std::printf("%-72s %8.1f cycles/iteration  (%d bytes of shared memory)\n", name,
              median_cycles_per_iteration(d_cycles, sms, iters), smem);
  CHECK(cudaFree(d_cycles));
  CHECK(cudaFree(d_red));
  return red;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int sms = print_device(iters, "; LSTM, 12 warps, BB = 4, 4 records a lane");
  // Random h (4 batch elements × 1152) and A fragments (bf16 pairs of moderate exponent).
  std::vector<float> h(kBB * kK);
  std::vector<unsigned> init(256 * 32);
  unsigned s = 12345u;
  auto next = [&] { return s = s * 1664525u + 1013904223u; };
  for (float& v : h) v = static_cast<float>(static_cast<int>(next() >> 8) - (1 << 23)) / (1 << 23);
  for (unsigned& v : init) v = 0x3c003c00u ^ (next() & 0x007f007fu) ^ (next() & 0x80008000u);
  float* d_h;
  unsigned* d_init;
  CHECK(cudaMalloc(&d_h, sizeof(float) * h.size()));
  CHECK(cudaMalloc(&d_init, sizeof(unsigned) * init.size()));
  CHECK(cudaMemcpy(d_h, h.data(), sizeof(float) * h.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_init, init.data(), sizeof(unsigned) * init.size(), cudaMemcpyHostToDevice));

  // An even number of iterations ends on the records as given (the flip undone), an odd one
  // on the flipped ones: the check runs 1 iteration of each form, the timing `iters`.
  const std::vector<float> rows = run<kRows>(sms, 1, "check: rows, 1 iteration", d_h, d_init);
  const std::vector<float> trans = run<kTrans>(sms, 1, "check: trans, 1 iteration", d_h, d_init);
  int differ = 0;
  double sum = 0.0;
  for (int i = 0; i < kRed; ++i) {
    differ += rows[i] != trans[i];
    sum += std::abs(rows[i]);
  }
  std::printf("check: %d of %d partial sums differ between the forms (sum |x| %.3f)\n", differ,
              kRed, sum);
  run<kRows>(sms, iters, "rows: hi/lo n rows, 24 STS.U16 a lane, 2 LDS.32 a k-tile", d_h, d_init);
  run<kRowsStage>(sms, iters, "  its staging and barriers alone", d_h, d_init);
  run<kTrans>(sms, iters, "trans: [k][8] rows, 12 STS.32 a lane, ldmatrix.x4.trans", d_h, d_init);
  run<kTransStage>(sms, iters, "  its staging and barriers alone", d_h, d_init);
  CHECK(cudaFree(d_h));
  CHECK(cudaFree(d_init));
  return differ == 0 ? 0 : 1;
}
