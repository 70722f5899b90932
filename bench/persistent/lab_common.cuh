// What the standalone persistent labs (mma_issue_lab.cu, backward_staging_lab.cu,
// forward_staging_lab.cu) share: the CUDA error check, one bf16 m16n8k16 mma.sync with fp32
// accumulation (d += a·b), the bf16 hi/lo split of the kernels' staging, the device line every
// lab prints first, and the median over CTAs of their clock64() cycles.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// v as bf16 hi and lo: hi = round(v), lo = round(v − hi), as raw bits (the kernels' split16).
__device__ __forceinline__ void split_bf16(float v, unsigned short& hi, unsigned short& lo) {
  const __nv_bfloat16 h = __float2bfloat16_rn(v);
  hi = __bfloat16_as_ushort(h);
  lo = __bfloat16_as_ushort(__float2bfloat16_rn(v - __bfloat162float(h)));
}

// Prints "<GPU>, <SMs> SMs, <iters> iterations<what>" and returns the SM count.
inline int print_device(int iters, const char* what) {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, %d iterations%s\n", prop.name, sms, iters, what);
  return sms;
}

// The median over n CTAs of their cycles (device array), per iteration.
inline double median_cycles_per_iteration(const long long* d_cycles, int n, int iters) {
  std::vector<long long> c(n);
  CHECK(cudaMemcpy(c.data(), d_cycles, sizeof(long long) * n, cudaMemcpyDeviceToHost));
  std::sort(c.begin(), c.end());
  return static_cast<double>(c[n / 2]) / iters;
}

