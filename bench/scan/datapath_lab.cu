// Data-path lab for the tile scan: how fast can a tile-per-CTA kernel with the tile held in
// registers stream a, x -> h, with no lookback at all, and how does a fixed per-tile wait (a
// stand-in for the lookback) change that? Standalone (nvcc -O3 -arch=sm_90), timing only:
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/scan/datapath_lab.cu -o /tmp/datapath && /tmp/datapath
// (Also built as prnn_scan_datapath_lab by the GPU build.) One CSV row per (variant, shape, wait):
// G elements/s, median of 15 event-timed launches.
//
// A tile is W = V*TPR channels x L = 256/TPR*R steps, as in src/scan/tile_scan.cuh. Each thread
// owns R consecutive steps of V channels, folds them, waits `wait` cycles (clock64 spin), rescans
// from a zero state and stores. Load patterns:
//   direct:  each thread loads its own R steps (tile_scan.cuh's pattern);
//   staged:  (only where a warp's steps are contiguous in memory: C == W) the warp loads its
//            region coalesced into shared memory, then each thread reads its R steps back.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                           \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));   \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

constexpr int kThreads = 256;

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class T>
__device__ __forceinline__ float to_f(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return __bfloat162float(v);
}
template <class T>
__device__ __forceinline__ T from_f(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return __float2bfloat16_rn(v);
}


// 16/8/4-byte global load, through the non-coherent (texture) path or the plain one.
template <bool Nc, class Vt>
__device__ __forceinline__ Vt ld(const Vt* p) {
  static_assert(sizeof(Vt) == 16 || sizeof(Vt) == 8 || sizeof(Vt) == 4);
  Vt out;
  if constexpr (sizeof(Vt) == 16) {
    uint4 v;
    if constexpr (Nc)
      asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    else
      asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    memcpy(&out, &v, 16);
  } else if constexpr (sizeof(Vt) == 8) {
    uint2 v;
    if constexpr (Nc)
      asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    else
      asm volatile("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    memcpy(&out, &v, 8);
  } else {
    unsigned v;
    if constexpr (Nc) asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
    else asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    memcpy(&out, &v, 4);
  }
  return out;
}

__device__ __forceinline__ void spin(long long cycles) {
  if (cycles <= 0) return;
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// The tile's stand-in for fold + lookback: fold the thread's steps, wait `wait` cycles, meet at
// a CTA barrier, and start the rescan from a state that depends on the fold (so the loads are
// live across the wait, as in the kernel).
template <class T, int V, int R>
__device__ __forceinline__ void fold_and_wait(const Vec<T, V> (&ra)[R], const Vec<T, V> (&rx)[R],
                                              long long wait, float (&s)[V]) {
  float agg = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < V; ++i) agg = fmaf(to_f(ra[r].v[i]), agg, to_f(rx[r].v[i]));
  spin(wait);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < V; ++i) s[i] = agg * 1e-30f;
}

// Direct pattern: thread (row, k) loads steps [row*R, row*R + R) of channels [k*V, k*V + V).
template <class T, int V, int TPR, int R, int MinBlocks, bool Nc>
__global__ void __launch_bounds__(kThreads, MinBlocks)
    direct_kernel(const T* a, const T* x, T* h,
                  std::int64_t steps, int channels, long long wait) {
  constexpr int W = V * TPR;
  constexpr int L = kThreads / TPR * R;
  const int lane_blocks = channels / W;
  const std::int64_t tile = blockIdx.x;
  const std::int64_t j = tile / lane_blocks;
  const int lb = static_cast<int>(tile - j * lane_blocks);
  const int k = threadIdx.x % TPR;
  const int row = threadIdx.x / TPR;
  const std::int64_t t0 = j * L + static_cast<std::int64_t>(row) * R;
  const std::int64_t base = t0 * channels + lb * W + k * V;
  using Vt = Vec<T, V>;
  Vt ra[R], rx[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    ra[r] = ld<Nc>(reinterpret_cast<const Vt*>(a + base + r * static_cast<std::int64_t>(channels)));
    rx[r] = ld<Nc>(reinterpret_cast<const Vt*>(x + base + r * static_cast<std::int64_t>(channels)));
  }
  float s[V];
  fold_and_wait<T, V, R>(ra, rx, wait, s);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    Vt o;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      s[i] = fmaf(to_f(ra[r].v[i]), s[i], to_f(rx[r].v[i]));
      o.v[i] = from_f<T>(s[i]);
    }
    *reinterpret_cast<Vt*>(h + base + r * static_cast<std::int64_t>(channels)) = o;
  }
}

// Staged pattern (C == W only): a warp's 32/TPR rows x R steps are one contiguous region of
// 32*R 16-byte chunks; the warp copies it coalesced into shared memory, then each thread reads
// its own R steps. Rows padded by one chunk per 32 (at most 2-way bank conflicts).
template <class T, int V, int TPR, int R, int MinBlocks, bool Nc>
__global__ void __launch_bounds__(kThreads, MinBlocks)
    staged_kernel(const T* a, const T* x, T* h, std::int64_t steps, long long wait) {
  static_assert(sizeof(T) * V == 16, "16-byte vectors");
  constexpr int L = kThreads / TPR * R;
  constexpr int kRow = 33;
  __shared__ uint4 sa[kThreads / 32][kRow * R];
  __shared__ uint4 sx[kThreads / 32][kRow * R];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const std::int64_t warp_first = static_cast<std::int64_t>(blockIdx.x) * L * TPR + warp * 32 * R;
  const uint4* ga = reinterpret_cast<const uint4*>(a) + warp_first;
  const uint4* gx = reinterpret_cast<const uint4*>(x) + warp_first;
  auto slot = [](int c) {  // chunk of the warp region -> [step][owner] in shared memory
    const int s = c / TPR;
    const int owner = (s / R) * TPR + c % TPR;
    return (s % R) * kRow + owner;
  };
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = r * 32 + lane;
    sa[warp][slot(c)] = ld<Nc>(ga + c);
    sx[warp][slot(c)] = ld<Nc>(gx + c);
  }
  __syncwarp();
  using Vt = Vec<T, V>;
  Vt ra[R], rx[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    *reinterpret_cast<uint4*>(&ra[r]) = sa[warp][r * kRow + lane];
    *reinterpret_cast<uint4*>(&rx[r]) = sx[warp][r * kRow + lane];
  }
  float s[V];
  fold_and_wait<T, V, R>(ra, rx, wait, s);
  Vt o[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      s[i] = fmaf(to_f(ra[r].v[i]), s[i], to_f(rx[r].v[i]));
      o[r].v[i] = from_f<T>(s[i]);
    }
    sa[warp][r * kRow + lane] = *reinterpret_cast<uint4*>(&o[r]);
  }
  __syncwarp();
  uint4* gh = reinterpret_cast<uint4*>(h) + warp_first;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = r * 32 + lane;
    gh[c] = sa[warp][slot(c)];
  }
}

// Copy floor: h = a + x over 16-byte vectors, grid-stride.
template <bool Nc>
__global__ void copy_kernel(const uint4* a, const uint4* x, uint4* h, std::int64_t n16) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n16;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    uint4 va = ld<Nc>(a + i), vx = ld<Nc>(x + i);
    h[i] = make_uint4(va.x ^ vx.x, va.y ^ vx.y, va.z ^ vx.z, va.w ^ vx.w);
  }
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

struct Buffers {
  void *a = nullptr, *x = nullptr, *h = nullptr;
  std::size_t bytes = 0;
};

int g_sms = 0;

void row(const char* variant, const char* dtype, std::int64_t T, int C, long long wait, float ms,
         int blocks_per_sm) {
  const double elems = static_cast<double>(T) * C;
  std::printf("%s,%s,%lld,%d,%lld,%d,%.4f,%.1f\n", variant, dtype, static_cast<long long>(T), C,
              wait, blocks_per_sm, ms * 1e3, elems / (ms * 1e-3) / 1e9);
  std::fflush(stdout);
}

int g_cap = 0;  // blocks per SM to cap at through dynamic shared memory (0: no cap)

template <class K>
std::size_t cap_smem(K kernel) {
  if (g_cap == 0) return 0;
  cudaFuncAttributes attr{};
  CK(cudaFuncGetAttributes(&attr, kernel));
  const std::size_t dyn = 233472 / g_cap - 1024 - attr.sharedSizeBytes;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(dyn)));
  return dyn;
}

template <class K>
int occupancy(K kernel, std::size_t dyn) {
  int n = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, dyn));
  return n;
}

template <class E, int V, int TPR, int R, int MB, bool Nc = false>
void run_direct(const char* name, const char* dtype, Buffers& b, std::int64_t T, int C,
                long long wait) {
  constexpr int W = V * TPR;
  constexpr int L = kThreads / TPR * R;
  if (C % W != 0 || T % L != 0) return;
  const std::int64_t tiles = (T / L) * (C / W);
  auto k = direct_kernel<E, V, TPR, R, MB, Nc>;
  const std::size_t dyn = cap_smem(k);
  const float ms = median_ms([&] {
    k<<<static_cast<unsigned>(tiles), kThreads, dyn>>>(static_cast<const E*>(b.a),
                                                  static_cast<const E*>(b.x), static_cast<E*>(b.h),
                                                  T, C, wait);
  });
  row(name, dtype, T, C, wait, ms, occupancy(k, dyn));
}

template <class E, int V, int TPR, int R, int MB, bool Nc = false>
void run_staged(const char* name, const char* dtype, Buffers& b, std::int64_t T, int C,
                long long wait) {
  constexpr int L = kThreads / TPR * R;
  if (C != V * TPR || T % L != 0) return;
  const std::int64_t tiles = T / L;
  auto k = staged_kernel<E, V, TPR, R, MB, Nc>;
  const std::size_t dyn = cap_smem(k);
  const float ms = median_ms([&] {
    k<<<static_cast<unsigned>(tiles), kThreads, dyn>>>(static_cast<const E*>(b.a),
                                                  static_cast<const E*>(b.x), static_cast<E*>(b.h),
                                                  T, wait);
  });
  row(name, dtype, T, C, wait, ms, occupancy(k, dyn));
}

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::fprintf(stderr, "%s, %d SMs\n", prop.name, g_sms);
  Buffers b;
  b.bytes = std::size_t{1} << 28;  // 256 MiB each: 2^26 fp32 elements
  CK(cudaMalloc(&b.a, b.bytes));
  CK(cudaMalloc(&b.x, b.bytes));
  CK(cudaMalloc(&b.h, b.bytes));
  // a in [0.5, 1), x small: values stay finite for every dtype.
  {
    std::vector<float> host(b.bytes / 4);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.5f + 0.5f * ((i * 2654435761u) % 1000) / 1000.0f;
    CK(cudaMemcpy(b.a, host.data(), b.bytes, cudaMemcpyHostToDevice));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = 1e-3f * ((i * 40503u) % 1000);
    CK(cudaMemcpy(b.x, host.data(), b.bytes, cudaMemcpyHostToDevice));
  }
  std::printf("variant,dtype,T,C,wait_cycles,blocks_per_sm,us,gelem_s\n");
  const std::int64_t n = std::int64_t{1} << 24;  // 16M elements per shape
  using bf = __nv_bfloat16;
  {
    const std::int64_t n16 = n * 4 / 16;
    for (int half = 0; half < 2; ++half) {
      const std::int64_t m = half ? n16 / 2 : n16;
      const char* dt = half ? "bf16" : "f32";
      row("copy", dt, n, 1, 0, median_ms([&] {
            copy_kernel<false><<<g_sms * 8, 256>>>(static_cast<const uint4*>(b.a),
                                                   static_cast<const uint4*>(b.x), static_cast<uint4*>(b.h), m);
          }), 8);
      row("copy_nc", dt, n, 1, 0, median_ms([&] {
            copy_kernel<true><<<g_sms * 8, 256>>>(static_cast<const uint4*>(b.a),
                                                  static_cast<const uint4*>(b.x), static_cast<uint4*>(b.h), m);
          }), 8);
    }
    float ms = 0;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> v;
    for (int i = 0; i < 15; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(b.h, b.a, n * 4, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms, e0, e1));
      v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    std::printf("memcpy_d2d,f32,%lld,1,0,0,%.4f,%.1f\n", static_cast<long long>(n), v[7] * 1e3,
                2.0 * n * 4 / (v[7] * 1e-3) / 1e9);  // last column: GB/s read + write
  }

  for (int round = 0; round < 2; ++round) {
    const long long wait = 0;
    run_direct<float, 4, 1, 4, 3>("direct_v4t1r4", "f32", b, n / 4, 4, wait);
    run_staged<float, 4, 1, 4, 3>("staged_v4t1r4", "f32", b, n / 4, 4, wait);
    run_staged<float, 4, 2, 4, 3>("staged_v4t2r4", "f32", b, n / 8, 8, wait);
    run_direct<float, 4, 8, 8, 2>("direct_v4t8r8", "f32", b, n / 32, 32, wait);
    run_staged<float, 4, 8, 4, 3>("staged_v4t8r4", "f32", b, n / 32, 32, wait);
    run_direct<float, 4, 8, 8, 2>("direct_v4t8r8", "f32", b, n / 1024, 1024, wait);
    run_direct<float, 4, 16, 8, 2>("direct_v4t16r8", "f32", b, n / 1024, 1024, wait);
    run_direct<float, 4, 32, 8, 2>("direct_v4t32r8", "f32", b, n / 1024, 1024, wait);
    run_direct<float, 4, 32, 4, 3>("direct_v4t32r4", "f32", b, n / 1024, 1024, wait);
    run_direct<float, 4, 16, 8, 2>("direct_v4t16r8", "f32", b, n / 8192, 8192, wait);
    run_direct<float, 4, 32, 8, 2>("direct_v4t32r8", "f32", b, n / 8192, 8192, wait);
    run_direct<float, 4, 8, 8, 2>("direct_v4t8r8", "f32", b, (n * 4) / 1024, 1024, wait);
    run_direct<float, 4, 32, 8, 2>("direct_v4t32r8", "f32", b, (n * 4) / 1024, 1024, wait);
    run_staged<float, 4, 1, 4, 3>("staged_v4t1r4", "f32", b, (n * 4) / 4, 4, wait);
    run_direct<bf, 8, 8, 8, 2>("direct_v8t8r8", "bf16", b, n / 1024, 1024, wait);
    run_direct<bf, 8, 16, 8, 2>("direct_v8t16r8", "bf16", b, n / 1024, 1024, wait);
    run_direct<bf, 8, 16, 4, 3>("direct_v8t16r4", "bf16", b, n / 1024, 1024, wait);
    run_direct<bf, 4, 16, 8, 2>("direct_v4t16r8", "bf16", b, n / 1024, 1024, wait);
    run_direct<bf, 4, 16, 4, 3>("direct_v4t16r4", "bf16", b, n / 1024, 1024, wait);
    run_direct<bf, 8, 8, 4, 3>("direct_v8t8r4", "bf16", b, n / 1024, 1024, wait);
    run_staged<bf, 8, 1, 4, 3>("staged_v8t1r4", "bf16", b, n / 8, 8, wait);
    run_staged<bf, 8, 4, 4, 3>("staged_v8t4r4", "bf16", b, n / 32, 32, wait);
    run_staged<bf, 8, 8, 4, 3>("staged_v8t8r4", "bf16", b, n / 64, 64, wait);
  }
  return 0;
}
