// Exchange placement lab (not part of the library; bench/persistent/NOTES.md, "Where the exchange
// sits"): the persistent kernels' exchange alone, every CTA publishing its records each step and
// reading all of them, timed at many places of the records in device memory, to find which
// address bits move the step (the library's LSTM bf16 H = 1024 B = 4 forward moved by 13 % over
// ten places; bench/results/h200/ab/placement/).
// Layout:  a pool of PAGES 2 MiB pages (and room past the last); the records of one run start
//          `offset` bytes into page `page`: two buffers (step parity) of K records {v, v, v, tag}.
// Launch:  cooperative, one CTA per SM × kThreads; CTA c owns records [c·P, c·P + P) of each step
//          (P = ceil(K / CTAs)).
// Step s:  CTA c's first P threads store its records (value: the CTA's sum of step s − 1, tag
//          epoch + s); every thread polls its records tid + kThreads·i of the step (all of them
//          issued, then the untagged ones again, as the kernels' straight-line polls) and sums
//          their x; the CTA's sum (shuffles, then shared memory) is the next step's value. A step
//          thus waits for every CTA's previous one, as the kernels' steps do.
// Limits:  a lab: on a spin bound a thread stops waiting and the launch sets *error (reported
//          with the row); K ≤ kThreads·kPolls; every CTA must be co-resident (the cooperative
//          launch checks).
// Build:   the CMake target prnn_exchange_place_lab (the records' loads and stores are the
//          library's, persistent/kernel_common.cuh; the timing bench/bench_timer.h's).
// Usage:   exchange_place_lab [K [STEPS [STRIDE [COUNT [PAGES]]]]]
//          K records a step (default 1368: LSTM H = 1024 B = 4, 342 a batch element), STEPS a
//          launch (256), offsets 0, STRIDE, ..., (COUNT − 1)·STRIDE bytes (128, 64) into each of
//          PAGES pages (8).
// Prints:  the device line, then CSV page,offset,ns_per_step,error: the median of 5 launches
//          timed alone with events (after one warm-up), per step.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "bench/bench_timer.h"
#include "core/cuda_check.h"
#include "persistent/kernel_common.cuh"

namespace {

using prnn::persistent::load_record;
using prnn::persistent::store_record;
using prnn::persistent::tagged;

constexpr int kThreads = 384;
constexpr int kPolls = 8;  // records a thread polls at most
constexpr unsigned kSpinBound = 1u << 22;
constexpr std::size_t kPage = std::size_t{2} << 20;

struct Params {
  float4* exchange;  // [2][K]
  unsigned* error;   // set on a spin bound
  float* sink;       // the last step's sum (keeps the chain)
  int records, per_cta, steps;
  unsigned epoch;
};

__global__ void __launch_bounds__(kThreads, 1) exchange_kernel(const Params p) {
  __shared__ float s_warp[kThreads / 32];
  __shared__ float s_value;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int K = p.records;
  float value = static_cast<float>(blockIdx.x);
  for (int s = 0; s < p.steps; ++s) {
    float4* buf = p.exchange + (s & 1) * K;
    const unsigned tag = p.epoch + static_cast<unsigned>(s);
    const int mine = static_cast<int>(blockIdx.x) * p.per_cta + tid;
    if (tid < p.per_cta && mine < K)
      store_record(buf + mine, make_float4(value, value, value, __uint_as_float(tag)));
    float4 r[kPolls];
    bool done[kPolls];
#pragma unroll
    for (int i = 0; i < kPolls; ++i) {
      r[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      done[i] = tid + kThreads * i >= K;
    }
    unsigned spins = 0;
    for (bool all = false; !all;) {
#pragma unroll
      for (int i = 0; i < kPolls; ++i)
        if (!done[i]) r[i] = load_record(buf + tid + kThreads * i);
      all = true;
#pragma unroll
      for (int i = 0; i < kPolls; ++i) {
        done[i] = done[i] || tagged(r[i], tag);
        all = all && done[i];
      }
      if (!all && ++spins > kSpinBound) {
        atomicExch(p.error, 1u);
        break;
      }
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPolls; ++i)
      if (tid + kThreads * i < K) sum += r[i].x;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
    if (lane == 0) s_warp[warp] = sum;
    __syncthreads();
    if (tid == 0) {
      float total = 0.0f;
      for (int w = 0; w < kThreads / 32; ++w) total += s_warp[w];
      s_value = total * 1e-6f;
    }
    __syncthreads();
    value = s_value;
  }
  if (blockIdx.x == 0 && tid == 0) *p.sink = value;
}

int arg(int argc, char** argv, int i, int fallback) {
  return argc > i ? std::atoi(argv[i]) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int K = arg(argc, argv, 1, 1368), steps = arg(argc, argv, 2, 256);
  const int stride = arg(argc, argv, 3, 128), count = arg(argc, argv, 4, 64);
  const int pages = arg(argc, argv, 5, 8);
  if (K < 1 || K > kThreads * kPolls || steps < 1 || stride < 16 || stride % 16 != 0 || count < 1 ||
      pages < 1) {
    std::fprintf(stderr,
                 "usage: exchange_place_lab [K (1..%d) [STEPS [STRIDE (a multiple of 16) "
                 "[COUNT [PAGES]]]]]\n",
                 kThreads * kPolls);
    return 2;
  }
  int sms = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  PRNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs, K = %d records, %d steps a launch, %d threads a CTA\n", prop.name, sms,
              K, steps, kThreads);
  const std::size_t span = std::size_t{2} * K * sizeof(float4);
  const std::size_t pool_bytes = pages * kPage + static_cast<std::size_t>(count) * stride + span;
  std::byte* pool = nullptr;
  unsigned* error = nullptr;
  float* sink = nullptr;
  PRNN_CUDA_CHECK(cudaMalloc(&pool, pool_bytes));
  PRNN_CUDA_CHECK(cudaMalloc(&error, sizeof(unsigned)));
  PRNN_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  PRNN_CUDA_CHECK(cudaMemset(pool, 0, pool_bytes));  // tag 0: never a step's
  Params p{nullptr, error, sink, K, (K + sms - 1) / sms, steps, 1u};
  std::printf("page,offset,ns_per_step,error\n");
  for (int page = 0; page < pages; ++page)
    for (int i = 0; i < count; ++i) {
      const std::size_t offset = static_cast<std::size_t>(i) * stride;
      p.exchange = reinterpret_cast<float4*>(pool + page * kPage + offset);
      PRNN_CUDA_CHECK(cudaMemset(error, 0, sizeof(unsigned)));
      // Each launch's tags are past every earlier launch's: a stale record never matches.
      const auto launch = [&] {
        void* args[] = {&p};
        PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(exchange_kernel),
                                                    dim3(static_cast<unsigned>(sms)),
                                                    dim3(kThreads), args, 0, nullptr));
        p.epoch += static_cast<unsigned>(steps);
      };
      const double us = prnn::bench::median_us(launch, 5, 1);
      unsigned err = 0;
      PRNN_CUDA_CHECK(cudaMemcpy(&err, error, sizeof(unsigned), cudaMemcpyDeviceToHost));
      std::printf("%d,%zu,%.1f,%u\n", page, offset, 1000.0 * us / steps, err);
    }
  PRNN_CUDA_CHECK(cudaFree(pool));
  PRNN_CUDA_CHECK(cudaFree(error));
  PRNN_CUDA_CHECK(cudaFree(sink));
  return 0;
}
