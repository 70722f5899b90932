// What a warp's mma.sync costs on this GPU, in the shape of the gated warp-rows forward's product
// (bench/persistent/NOTES.md, "The gated warp rows' product on tensor cores": there 18 mma a warp
// cost 0.8-1.0 µs a step, several times their issue). Standalone, no library: one CTA per SM,
// each warp holding MT x KT bf16 A fragments in registers, every iteration a warp's product
// (KT k-tiles, B fragments from shared memory, MT mma each) and a CTA barrier, as a step has.
// Timed with clock64() around the loop; cycles per iteration (median over CTAs), and per mma of
// a warp. Also single-warp chains: the latency of dependent mma, and a warp's rate over
// independent ones. Build and run: bench/persistent/mma_issue_lab.sh.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lab_common.cuh"

// The same without `volatile`: the compiler may schedule it among the loads.
__device__ __forceinline__ void mma_bf16_nv(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                            unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

constexpr int kStride = 1152 + 8;  // a staged row of h, 16-bit elements (as GatedMma's)

// Mode: 0 the product as in the kernel (B from shared memory, volatile mma, one accumulator
// chain per row tile); 1 the same with Chains accumulators per row tile; 2 B fragments from
// registers (no shared-memory loads); 3 non-volatile mma; 4 no barrier between iterations;
// 5 the FMA product instead (432 FFMA and 48 LDS.128 a lane, the FMA form at B = 4).
template <int MT, int KT, int Mode, int Chains = 1>
__global__ void product_kernel(int iters, long long* cycles, float* sink, const unsigned* init) {
  extern __shared__ __align__(16) unsigned short stage[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane >> 2, tig = lane & 3;
  for (int i = threadIdx.x; i < 8 * kStride; i += blockDim.x)
    stage[i] = static_cast<unsigned short>(0x3c00 + (i & 63));  // small bf16 values
  unsigned a[MT][KT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kt = 0; kt < KT; ++kt)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[mt][kt][j] = init[((mt * KT + kt) * 4 + j) * 32 + lane];
  float acc[Chains][MT][4] = {};
  float w[3][36], f[12] = {};  // Mode 5: a lane's 108 weights (3 rows x 36 columns), 12 sums
#pragma unroll
  for (int r = 0; r < 3; ++r)
#pragma unroll
    for (int c = 0; c < 36; ++c) w[r][c] = __uint_as_float(init[(r * 36 + c) * 32 + lane]);
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    if constexpr (Mode == 5) {
      const float4* s4 = reinterpret_cast<const float4*>(stage);
#pragma unroll
      for (int bb = 0; bb < 4; ++bb)
#pragma unroll
        for (int j = 0; j < 12; ++j) {
          const float4 h = s4[(bb * 12 + j) * 32 + lane];  // record j of batch element bb
#pragma unroll
          for (int r = 0; r < 3; ++r) {
            f[3 * bb + r] = fmaf(w[r][3 * j + 0], h.x, f[3 * bb + r]);
            f[3 * bb + r] = fmaf(w[r][3 * j + 1], h.y, f[3 * bb + r]);
            f[3 * bb + r] = fmaf(w[r][3 * j + 2], h.z, f[3 * bb + r]);
          }
        }
    } else {
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) {
        unsigned b0, b1;
        if constexpr (Mode == 2) {
          b0 = 0x3c003c00u + static_cast<unsigned>(it & 7) + kt;
          b1 = b0 ^ 1u;
        } else {
          const int at = grp * kStride + (warp * KT + kt) * 16 + 2 * tig;
          b0 = *reinterpret_cast<const unsigned*>(stage + at);
          b1 = *reinterpret_cast<const unsigned*>(stage + at + 8);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (Mode == 3)
            mma_bf16_nv(acc[kt % Chains][mt], a[mt][kt], b0, b1);
          else
            mma_bf16(acc[kt % Chains][mt], a[mt][kt], b0, b1);
        }
      }
    }
    if constexpr (Mode != 4) __syncthreads();
  }
  const long long t1 = clock64();
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < Chains; ++c)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) s += acc[c][mt][0] + acc[c][mt][1] + acc[c][mt][2] + acc[c][mt][3];
  if constexpr (Mode == 5)
#pragma unroll
    for (int i = 0; i < 12; ++i) s += f[i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// The same product by wgmma (sm_90a: the warpgroup's asynchronous mma, A and B both read from
// shared memory by descriptors, no swizzle): the LSTM's 36 rows as one m64 tile, each of the
// CTA's W/4 warpgroups KG k-steps of m64n8k16 into one accumulator, committed and waited for once
// an iteration. For timing only: the descriptors' layout is not the fragments' (the values are
// garbage, the addresses within the buffer).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ unsigned long long wgmma_desc(const void* smem, unsigned lbo,
                                                         unsigned sbo) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         static_cast<unsigned long long>(lbo >> 4) << 16 |
         static_cast<unsigned long long>(sbo >> 4) << 32;
}
#endif

template <int KG>
__global__ void wgmma_kernel(int iters, long long* cycles, float* sink, const unsigned* init) {
  extern __shared__ __align__(16) unsigned short stage[];
  for (int i = threadIdx.x; i < 8 * kStride; i += blockDim.x)
    stage[i] = static_cast<unsigned short>(init[i % 32] & 0xFFFF);
  float d[4] = {};
  __syncthreads();
  const long long t0 = clock64();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A: KG k-steps of 64 x 16 bf16 (2 KiB each) per warpgroup after the B rows; B: 8 x 16 each.
  const int warpgroup = threadIdx.x / 128;
  const unsigned short* a_base = stage + 8 * 1152 + warpgroup * KG * 64 * 16;
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < KG; ++k) {
      const unsigned long long da = wgmma_desc(a_base + k * 64 * 16, 128, 256);
      const unsigned long long db = wgmma_desc(stage + (warpgroup * KG + k) * 8 * 16, 128, 256);
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, "
          "0, 0;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "l"(da), "l"(db), "r"(1));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
  }
#endif
  const long long t1 = clock64();
  sink[blockIdx.x * blockDim.x + threadIdx.x] = d[0] + d[1] + d[2] + d[3];
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// One warp: N mma into one accumulator (dependent: the latency) or into N (the warp's rate).
template <int N, bool Dependent>
__global__ void chain_kernel(int iters, long long* cycles, float* sink, const unsigned* init) {
  const int lane = threadIdx.x & 31;
  unsigned a[4] = {init[lane], init[32 + lane], init[64 + lane], init[96 + lane]};
  float acc[N][4] = {};
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < N; ++i)
      mma_bf16(acc[Dependent ? 0 : i], a, 0x3c003c00u + static_cast<unsigned>(it & 3), 0x3c003c00u);
  }
  const long long t1 = clock64();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += acc[i][0] + acc[i][1] + acc[i][2] + acc[i][3];
  sink[threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[0] = t1 - t0;
}

template <class K>
double run(K kernel, int ctas, int threads, int iters, int mma_per_warp, const char* name,
           int smem = 8 * kStride * 2) {
  long long* d_cycles;
  float* d_sink;
  unsigned* d_init;
  // 0x3f803f80: two bf16 1.0s (and, read as one fp32, about 1.0), enough for either form.
  const std::vector<unsigned> init(216 * 32, 0x3f803f80u);  // mode 5's 108 rows, 3 x 18 x 4 fragments
  CHECK(cudaMalloc(&d_init, sizeof(unsigned) * init.size()));
  CHECK(cudaMemcpy(d_init, init.data(), sizeof(unsigned) * init.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&d_cycles, sizeof(long long) * ctas));
  CHECK(cudaMalloc(&d_sink, sizeof(float) * ctas * threads));
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<ctas, threads, smem>>>(iters, d_cycles, d_sink, d_init);  // warm-up
  CHECK(cudaGetLastError());
  kernel<<<ctas, threads, smem>>>(iters, d_cycles, d_sink, d_init);
  CHECK(cudaDeviceSynchronize());
  const double per_iter = median_cycles_per_iteration(d_cycles, ctas, iters);
  std::printf("%-58s %3d warps  %8.1f cycles/iteration  %6.1f cycles/mma of a warp\n", name,
              threads / 32, per_iter, mma_per_warp > 0 ? per_iter / mma_per_warp : 0.0);
  CHECK(cudaFree(d_cycles));
  CHECK(cudaFree(d_sink));
  CHECK(cudaFree(d_init));
  return per_iter;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int sms = print_device(iters, "");
  // The gated LSTM's product at 3 records per CTA: 12 warps, 3 row tiles x 6 k-tiles.
  run(product_kernel<3, 6, 0>, sms, 384, iters, 18, "LSTM product (the kernel's form)");
  run(product_kernel<3, 6, 1, 3>, sms, 384, iters, 18, "  three accumulator chains per row tile");
  run(product_kernel<3, 6, 1, 6>, sms, 384, iters, 18, "  six accumulator chains per row tile");
  run(product_kernel<3, 6, 2>, sms, 384, iters, 18, "  B fragments in registers");
  run(product_kernel<3, 6, 3>, sms, 384, iters, 18, "  mma not volatile");
  run(product_kernel<3, 6, 4>, sms, 384, iters, 18, "  no barrier between iterations");
  run(product_kernel<3, 6, 0>, sms, 128, iters, 18, "  4 warps (a third of the product)");
  run(product_kernel<3, 18, 0>, sms, 128, iters, 54, "  4 warps x 18 k-tiles (the whole product)");
  run(product_kernel<3, 9, 0>, sms, 256, iters, 27, "  8 warps x 9 k-tiles (the whole product)");
  // The GRU's (9 warps, 2 row tiles x 8 k-tiles) and the FMA form it replaced.
  run(product_kernel<2, 8, 0>, sms, 288, iters, 16, "GRU product (the kernel's form)");
  run(product_kernel<1, 1, 5>, sms, 384, iters, 0, "FMA product, LSTM B = 4 (432 FFMA, 48 LDS.128)",
      48 * 32 * 16);
  // The LSTM's product by wgmma (3 warpgroups, 24 k-steps of m64n8k16 each; sm_90a builds).
  run(wgmma_kernel<24>, sms, 384, iters, 24, "LSTM product by wgmma (per k-step of a warpgroup)",
      (8 * 1152 + 3 * 24 * 64 * 16) * 2);
  // One warp alone.
  run(chain_kernel<16, true>, 1, 32, iters, 16, "one warp, 16 dependent mma (latency)");
  run(chain_kernel<16, false>, 1, 32, iters, 16, "one warp, 16 independent mma (rate)");
  run(chain_kernel<4, false>, 1, 32, iters, 4, "one warp, 4 independent mma");
  return 0;
}
