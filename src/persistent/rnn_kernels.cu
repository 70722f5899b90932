// Persistent vanilla RNN, one layer direction, forward or backward data (contract in rnn_kernels.h).
//   Forward:       a_t = u_t + W_hh h_prev + b_ih + b_hh;  h_t = act(a_t)
//   BackwardData:  dA_t = (dy_t + W_hhᵀ dA_prev) ⊙ act'(a_t)
// Layout:   W_hh [H, H] row-major; u/a/dA [T, B, H]; h0, hn, dhn [B, H]; out, dy rows strided.
//           Exchange: two buffers (step parity) of [B, K] records, K = ceil(H/3); record (b, k) =
//           {v[b][3k], v[b][3k+1], v[b][3k+2], tag}, units past H are zeros.
// Launch:   cooperative, tiling.ctas CTAs (≤ one per SM) × tiling.threads; kernel shape (R, G, BC)
//           from tiling.h. CTA k owns units [k·R, k·R + R): the R rows of W_hh (forward) or of
//           W_hhᵀ (backward). Thread i owns the column groups i + j·threads (j < G).
// On chip:  rW[R][3G] registers: the thread's weights, loaded once per launch. Per step and batch
//           chunk: the thread polls its G·BC records (one 16-byte load each, one L2 round trip
//           when they are ready), does R·3G·BC FMAs, the CTA reduces the R·BC partial sums (warp
//           reduce-scatter, then shared memory across warps in a fixed order: deterministic),
//           and R/3·BC threads finish the units and publish the records. A chunk's records go
//           out before the next chunk starts, so other CTAs begin the next step on them while
//           this one still computes (pipelining over the mini-batch; tiling.h picks two chunks
//           per step where it can).
// Sync:     none besides the tagged records: a record's tag is epoch + s, the epoch advanced by
//           T per launch (the last CTA to finish does it), so records of other steps or launches
//           never match. Two buffers suffice: a CTA publishes step s only after reading all of
//           step s-1, which its producers published only after reading all of step s-2.
// Limits:   H·B < 2^31, T < 2^31; every wait bounded by timeout_ns (then kStatusTimeout, exit).
#include <cstdint>
#include <utility>

#include "core/cuda_check.h"
#include "core/device_clock.cuh"
#include "gemm_rnn/activation.cuh"
#include "persistent/rnn_kernels.h"
#include "prnn/error.h"
#include "prnn/rnn.h"

namespace prnn::persistent {
namespace {

using gemm_rnn::activate;
using gemm_rnn::activate_grad;

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kR3 = kUnitsPerRecord;
constexpr unsigned kSpinsPerCheck = 16;  // polls between looks at the clock and the abort flags

// One record, read and written as a single 16-byte access at GPU scope (the value and its tag
// travel together: no fence, no separate flag).
__device__ __forceinline__ float4 load_record(const float4* p) {
  float4 v;
  asm volatile("ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ void store_record(float4* p, float4 v) {
  asm volatile("st.relaxed.gpu.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}
__device__ __forceinline__ bool tagged(const float4& r, unsigned tag) {
  return __float_as_uint(r.w) == tag;
}

// c ? a : b on values (a plain ?: on array elements can become a select of addresses, which
// moves the array to local memory).
__device__ __forceinline__ float select(bool c, float a, float b) {
  float r;
  asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %3, 0;\n\tselp.f32 %0, %1, %2, q;\n\t}"
      : "=f"(r)
      : "f"(a), "f"(b), "r"(static_cast<int>(c)));
  return r;
}

// Warp reduce-scatter of NP partial sums (NP a multiple of 8): three halving exchanges leave
// lane l with the 8-lane sums of chunk c = (l >> 2) & 7 (entries [c·NP/8, (c+1)·NP/8) of the
// input), then two butterflies finish the warp sum in lanes with (l & 3) == 0.
// One halving exchange over lanes `kOffset` apart: the lane with that bit set keeps the upper
// kHalf entries (summed with its partner's), the other the lower ones; both end in v[0, kHalf).
template <int kOffset, int kHalf, int NP>
__device__ __forceinline__ void halve(float (&v)[NP], int lane) {
  const bool upper = (lane & kOffset) != 0;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = select(upper, v[i], v[i + kHalf]);
    const float keep = select(upper, v[i + kHalf], v[i]);
    v[i] = keep + __shfl_xor_sync(kFullMask, send, kOffset);
  }
}

// Warp reduce-scatter of NP partial sums (NP a multiple of 8): three halving exchanges leave
// lane l with the 8-lane sums of chunk c = (l >> 2) & 7 (entries [c·NP/8, (c+1)·NP/8) of the
// input), then two butterflies finish the warp sum in lanes with (l & 3) == 0.
template <int NP>
__device__ __forceinline__ void warp_reduce_scatter(float (&v)[NP], int lane) {
  static_assert(NP % 8 == 0, "three halvings");
  halve<16, NP / 2>(v, lane);
  halve<8, NP / 4>(v, lane);
  halve<4, NP / 8>(v, lane);
#pragma unroll
  for (int i = 0; i < NP / 8; ++i) {
    v[i] += __shfl_xor_sync(kFullMask, v[i], 2);
    v[i] += __shfl_xor_sync(kFullMask, v[i], 1);
  }
}

template <int R, int G, int BC, int kMaxThreads, Pass P>
__global__ void __launch_bounds__(kMaxThreads, 1) persistent_rnn_kernel(const Params p) {
  constexpr int kN = R * BC;                 // partial sums per thread
  constexpr int kNP = (kN + 7) / 8 * 8;      // padded for the reduce-scatter
  constexpr int kChunk = kNP / 8;
  constexpr int kMaxWarps = kMaxThreads / 32;
  constexpr int kGroupsPerCta = R / kR3;     // records a CTA publishes per batch element
  static_assert(R % kR3 == 0, "a CTA publishes whole records");

  __shared__ float s_red[2][kMaxWarps][kNP];  // per-warp sums, double-buffered by chunk parity
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int nwarps = static_cast<int>(blockDim.x) >> 5;
  const int H = p.hidden, B = p.batch;
  const int K = (H + kR3 - 1) / kR3;
  const int row0 = static_cast<int>(blockIdx.x) * R;

  // ---- the thread's weights: rows row0.., columns of its G groups (zeros outside H) ---------
  float rW[R][kR3 * G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int k = tid + g * static_cast<int>(blockDim.x);
#pragma unroll
    for (int c = 0; c < kR3; ++c) {
      const int col = k * kR3 + c;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = row0 + r;
        float w = 0.0f;
        if (k < K && col < H && row < H)
          w = P == Pass::Forward ? p.w[static_cast<std::int64_t>(row) * H + col]
                                 : p.w[static_cast<std::int64_t>(col) * H + row];
        rW[r][kR3 * g + c] = w;
      }
    }
  }
  if (tid == 0) {
    s_epoch = *static_cast<volatile unsigned*>(p.control + kEpoch);  // set by the last launch
    s_abort = 0;
  }
  __syncthreads();
  const unsigned epoch = s_epoch;

  // ---- the finishing role: thread f < BC·R/3 finishes record (bb, q) of each chunk ----------
  const bool finisher = tid < BC * kGroupsPerCta;
  const int f_bb = tid / kGroupsPerCta, f_q = tid % kGroupsPerCta;
  const int f_k = static_cast<int>(blockIdx.x) * kGroupsPerCta + f_q;  // global record column
  float bias[kR3] = {};
  if constexpr (P == Pass::Forward) {
    if (finisher) {
#pragma unroll
      for (int c = 0; c < kR3; ++c) {
        const int row = row0 + kR3 * f_q + c;
        if (row < H) bias[c] = p.b_ih[row] + p.b_hh[row];  // added in the GEMM-RNN's order below
      }
    }
  }

  bool aborted = false;
  int parity = 0;
  for (int s = 0; s < p.steps && !aborted; ++s) {
    const std::int64_t t = static_cast<std::int64_t>(p.t_first) + static_cast<std::int64_t>(s) * p.t_step;
    if (p.stall_cta == static_cast<int>(blockIdx.x) && p.stall_step == s) {
      const std::uint64_t until = global_ns() + p.stall_ns;
      while (global_ns() < until) {
      }
    }
    const bool from_exchange = s > 0;
    const bool has_source = from_exchange || (P == Pass::Forward && p.h0 != nullptr);
    const float4* src = p.exchange + static_cast<std::int64_t>((s - 1) & 1) * B * K;
    float4* dst = p.exchange + static_cast<std::int64_t>(s & 1) * B * K;
    const unsigned want = epoch + static_cast<unsigned>(s) - 1u;
    const unsigned mine = epoch + static_cast<unsigned>(s);

    for (int b0 = 0; b0 < B; b0 += BC) {
      // The finisher's per-step inputs, loaded before the wait so their latency hides in it.
      const int f_b = b0 + f_bb;
      const bool f_live = finisher && f_b < B;
      float u[kR3] = {}, a_in[kR3] = {}, extra[kR3] = {};
      if (f_live) {
#pragma unroll
        for (int c = 0; c < kR3; ++c) {
          const int row = row0 + kR3 * f_q + c;
          if (row >= H) continue;
          const std::int64_t i = (t * B + f_b) * H + row;
          if constexpr (P == Pass::Forward) {
            u[c] = p.pre[i];
          } else {
            u[c] = p.dy[(t * B + f_b) * p.dy_stride + row];
            a_in[c] = p.pre[i];
            if (s == 0 && p.dhn != nullptr) extra[c] = p.dhn[static_cast<std::int64_t>(f_b) * H + row];
          }
        }
      }

      float acc[kNP];
#pragma unroll
      for (int i = 0; i < kNP; ++i) acc[i] = 0.0f;
      if (has_source) {
        float4 rec[G][BC];
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const int k = tid + g * static_cast<int>(blockDim.x);
#pragma unroll
          for (int bb = 0; bb < BC; ++bb) {
            const int b = b0 + bb;
            rec[g][bb] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
            if (k >= K || b >= B) continue;
            if (from_exchange) {
              rec[g][bb] = load_record(src + static_cast<std::int64_t>(b) * K + k);
            } else {
              const float* h = p.h0 + static_cast<std::int64_t>(b) * H + k * kR3;
              const int n = min(kR3, H - k * kR3);
              rec[g][bb].x = h[0];
              if (n > 1) rec[g][bb].y = h[1];
              if (n > 2) rec[g][bb].z = h[2];
            }
          }
        }
        if (from_exchange) {
          bool ready = true;
#pragma unroll
          for (int g = 0; g < G; ++g)
#pragma unroll
            for (int bb = 0; bb < BC; ++bb) ready &= tagged(rec[g][bb], want);
          if (!ready) {
            const std::uint64_t start = global_ns();
            for (unsigned spins = 1; !ready; ++spins) {
              // Reload every record still missing, all loads in flight at once; then look.
#pragma unroll
              for (int g = 0; g < G; ++g) {
                const int k = tid + g * static_cast<int>(blockDim.x);
#pragma unroll
                for (int bb = 0; bb < BC; ++bb)
                  if (!tagged(rec[g][bb], want))
                    rec[g][bb] = load_record(src + static_cast<std::int64_t>(b0 + bb) * K + k);
              }
              ready = true;
#pragma unroll
              for (int g = 0; g < G; ++g)
#pragma unroll
                for (int bb = 0; bb < BC; ++bb) ready &= tagged(rec[g][bb], want);
              if (ready || spins % kSpinsPerCheck != 0) continue;
              if (*static_cast<volatile int*>(&s_abort) != 0 ||
                  *static_cast<volatile unsigned*>(p.control + kAbort) != 0) {
                s_abort = 1;
                break;
              }
              if (global_ns() - start > p.timeout_ns) {
                atomicOr(p.control + kStatus, kStatusTimeout);
                atomicExch(p.control + kAbort, 1u);
                if (p.status_host != nullptr)
                  *static_cast<volatile unsigned*>(p.status_host) = kStatusTimeout;
                s_abort = 1;
                break;
              }
            }
          }
        }
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int bb = 0; bb < BC; ++bb) {
            const float hv[kR3] = {rec[g][bb].x, rec[g][bb].y, rec[g][bb].z};
#pragma unroll
            for (int c = 0; c < kR3; ++c)
#pragma unroll
              for (int r = 0; r < R; ++r)
                acc[r * BC + bb] = fmaf(rW[r][kR3 * g + c], hv[c], acc[r * BC + bb]);
          }
        warp_reduce_scatter<kNP>(acc, lane);
        if ((lane & 3) == 0) {
          const int c = (lane >> 2) & 7;
#pragma unroll
          for (int i = 0; i < kChunk; ++i) s_red[parity][warp][c * kChunk + i] = acc[i];
        }
      }
      __syncthreads();
      if (*static_cast<volatile int*>(&s_abort) != 0) {
        aborted = true;
        break;
      }

      if (f_live) {
        // The three units' matrix-vector sums: warps added in a fixed order, the three
        // independent chains interleaved.
        float mv[kR3] = {};
        if (has_source) {
#pragma unroll
          for (int w = 0; w < kMaxWarps; ++w) {
            if (w >= nwarps) break;
#pragma unroll
            for (int c = 0; c < kR3; ++c) mv[c] += s_red[parity][w][(kR3 * f_q + c) * BC + f_bb];
          }
        }
        float v[kR3];
#pragma unroll
        for (int c = 0; c < kR3; ++c) {
          const int row = row0 + kR3 * f_q + c;
          const std::int64_t i = (t * B + f_b) * H + row;
          if constexpr (P == Pass::Forward) {
            const float a = u[c] + mv[c] + bias[c];
            v[c] = activate(p.act, a);
            if (row < H) {
              p.pre[i] = a;
              const std::int64_t o = (t * B + f_b) * p.out_stride + row;
              p.out[o] = v[c];
              if (p.out2 != nullptr) p.out2[o] = v[c];
              if (p.hn != nullptr && s == p.steps - 1)
                p.hn[static_cast<std::int64_t>(f_b) * H + row] = v[c];
            }
          } else {
            const float g = u[c] + (s == 0 ? extra[c] : mv[c]);
            v[c] = g * activate_grad(p.act, a_in[c]);
            if (row < H) p.dpre[i] = v[c];
          }
          if (row >= H) v[c] = 0.0f;
        }
        if (s + 1 < p.steps && f_k < K)  // the last CTA's rows may run past the last record
          store_record(dst + static_cast<std::int64_t>(f_b) * K + f_k,
                       make_float4(v[0], v[1], v[2], __uint_as_float(mine)));
      }
      parity ^= 1;
    }
  }

  // The last CTA to finish advances the epoch past this launch's tags (never through 0, the tag
  // of a zeroed record) and clears the abort flag for the next launch.
  if (tid == 0) {
    if (atomicAdd(p.control + kDone, 1u) == gridDim.x - 1) {
      p.control[kDone] = 0;
      p.control[kAbort] = 0;
      unsigned next = epoch + static_cast<unsigned>(p.steps);
      if (next < epoch || next > 0xFFFFFFFFu - static_cast<unsigned>(p.steps)) next = 1;
      p.control[kEpoch] = next;
    }
  }
}

// ---- the one dispatch point: (shape, batch chunk, pass) -> kernel ------------------------------

using KernelFn = void (*)(Params);

template <int I, Pass P>
constexpr KernelFn kernel_of() {
  constexpr KernelShape s = kShapes[I];
  return &persistent_rnn_kernel<s.rows, s.groups, s.batch_chunk, s.max_threads, P>;
}

template <Pass P, std::size_t... I>
KernelFn pick(int shape, std::index_sequence<I...>) {
  constexpr KernelFn fns[] = {kernel_of<static_cast<int>(I), P>()...};
  return fns[shape];
}

KernelFn kernel_for(Pass pass, const Tiling& tiling) {
  if (tiling.shape < 0 || tiling.shape >= kShapeCount)
    throw InternalError("persistent kernel: no kernel shape (" + tiling.reason + ")");
  const auto seq = std::make_index_sequence<kShapeCount>{};
  return pass == Pass::Forward ? pick<Pass::Forward>(tiling.shape, seq)
                               : pick<Pass::BackwardData>(tiling.shape, seq);
}

}  // namespace

std::size_t exchange_bytes(const Tiling& tiling, std::int64_t batch) {
  return static_cast<std::size_t>(2 * batch * tiling.records) * sizeof(float4);
}

std::string prepare(Pass pass, const Tiling& tiling, int device) {
  int cooperative = 0, sms = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (cooperative == 0) return "this GPU does not support cooperative launches";
  const KernelFn fn = kernel_for(pass, tiling);
  int per_sm = 0;
  PRNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, reinterpret_cast<const void*>(fn), tiling.threads, 0));
  if (static_cast<std::int64_t>(per_sm) * sms < tiling.ctas)
    return "the persistent kernel needs " + std::to_string(tiling.ctas) + " co-resident CTAs of " +
           std::to_string(tiling.threads) + " threads; the occupancy API reports room for " +
           std::to_string(per_sm) + " per SM on " + std::to_string(sms) + " SMs";
  return {};
}

void launch(Pass pass, const Tiling& tiling, const Params& params, cudaStream_t stream) {
  const KernelFn fn = kernel_for(pass, tiling);
  Params p = params;
  void* args[] = {&p};
  PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fn),
                                              dim3(static_cast<unsigned>(tiling.ctas)),
                                              dim3(static_cast<unsigned>(tiling.threads)), args, 0,
                                              stream));
}

}  // namespace prnn::persistent
