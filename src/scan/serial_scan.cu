// Serial linear recurrence (SLR, the paper's baseline): one thread per lane (b, c) walks all T
// steps in order.
//   Forward:  h_q = a_q·h_{q-1} + x_q            Backward: g_q = a_{s+1}·g_{q-1} + dh_q, dx = g,
//                                                           da = g·h_{s-1}, dh0 = a_0·g_last
// Layout:   see scan_params.h (lane (b, c) at t*stride_t + b*stride_b + c).
// Launch:   1-D, 256 threads, one thread per lane; consecutive threads = consecutive channels,
//           so each step's loads are coalesced across a warp.
// Limits:   none; speed is proportional to the number of lanes (slow for few channels).
#include "core/cuda_check.h"
#include "scan/elem.cuh"
#include "scan/scan_kernels.h"

namespace prnn::scan {
namespace {

constexpr int kSerialThreads = 256;

template <class T, Mode M>
__global__ void __launch_bounds__(kSerialThreads) serial_scan_kernel(ScanParams p) {
  const std::int64_t lane = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t lanes = static_cast<std::int64_t>(p.batch) * p.channels;
  if (lane >= lanes) return;
  const std::int32_t b = static_cast<std::int32_t>(lane / p.channels);
  const std::int64_t base = b * p.stride_b + lane % p.channels;
  std::int64_t len = p.steps;
  if (p.lengths != nullptr) {
    len = p.lengths[b];
    if (len < 0 || len > p.steps) {
      atomicOr(p.status, kStatusBadLength);
      len = len < 0 ? 0 : p.steps;
    }
  }
  const T* a = static_cast<const T*>(p.a) + base;
  const T* u = static_cast<const T*>(p.u) + base;
  const T* h = static_cast<const T*>(p.h) + base;
  T* out = static_cast<T*>(p.out) + base;
  T* out2 = static_cast<T*>(p.out2) + base;
  const std::int64_t fdir = p.reverse ? -1 : 1;
  const std::int64_t dir = M == Mode::Forward ? fdir : -fdir;
  const std::int64_t st = p.stride_t;

  float state = p.init != nullptr ? load_elem(static_cast<const T*>(p.init), lane) : 0.0f;
  const float h0 = (M == Mode::Backward && p.h0 != nullptr)
                       ? load_elem(static_cast<const T*>(p.h0), lane)
                       : 0.0f;
  for (std::int64_t q = 0; q < p.steps; ++q) {
    if (q < len) {
      const std::int64_t t = dir > 0 ? q : len - 1 - q;
      if constexpr (M == Mode::Forward) {
        state = load_elem(a, t * st) * state + load_elem(u, t * st);
        store_elem(out, t * st, state);
      } else {
        const float coef = q == 0 ? 1.0f : load_elem(a, (t + fdir) * st);
        state = coef * state + load_elem(u, t * st);
        const float hprev = q == len - 1 ? h0 : load_elem(h, (t - fdir) * st);
        store_elem(out, t * st, state);
        store_elem(out2, t * st, state * hprev);
      }
    } else {
      store_elem(out, q * st, 0.0f);
      if constexpr (M == Mode::Backward) store_elem(out2, q * st, 0.0f);
    }
  }
  if (p.final_out != nullptr) {
    float fin = state;
    if constexpr (M == Mode::Backward) {
      if (len > 0) fin = load_elem(a, (p.reverse ? len - 1 : 0) * st) * state;
    }
    store_elem(static_cast<T*>(p.final_out), lane, fin);
  }
}

template <class T, Mode M>
void launch(const ScanParams& p, cudaStream_t stream) {
  const std::int64_t lanes = static_cast<std::int64_t>(p.batch) * p.channels;
  const auto blocks = static_cast<unsigned>((lanes + kSerialThreads - 1) / kSerialThreads);
  serial_scan_kernel<T, M><<<blocks, kSerialThreads, 0, stream>>>(p);
  PRNN_CHECK_LAUNCH();
}

}  // namespace

void launch_serial_scan(Mode mode, Elem elem, const ScanParams& p, cudaStream_t stream) {
  switch (elem) {
    case Elem::F32:
      return mode == Mode::Forward ? launch<float, Mode::Forward>(p, stream)
                                   : launch<float, Mode::Backward>(p, stream);
    case Elem::F16:
      return mode == Mode::Forward ? launch<__half, Mode::Forward>(p, stream)
                                   : launch<__half, Mode::Backward>(p, stream);
    case Elem::BF16:
      return mode == Mode::Forward ? launch<__nv_bfloat16, Mode::Forward>(p, stream)
                                   : launch<__nv_bfloat16, Mode::Backward>(p, stream);
  }
}

}  // namespace prnn::scan
