// Persistent GRU / LSTM forward on tensor cores, one layer direction: the forward of the
// persistent family (rnn_kernels.h) for 16-bit weights. Included by rnn_kernels.cu, whose
// dispatch point picks it (tiling.h: TensorCoreShape).
//   P_t = u_t + W_hh h_prev + biases, then the cell (LSTM: c_t; GRU: a_ih, a_hh), exactly as
//   rnn_kernels.h states; the same reserve, outputs, padding and exchange records as the FMA
//   kernel, so its backward follows either forward.
// Layout:   W_hh [NG·H, H] row-major fp32 holding 16-bit values (the layer's weights are bf16 or
//           f16 tensors); the rest as rnn_kernels.cu. Exchange: [2, B, K] records of h, K =
//           ceil(H/3), record (b, k) = {h[b][3k], h[b][3k+1], h[b][3k+2], tag}.
// Launch:   cooperative, ceil(H/R) CTAs (≤ one per SM) × kTensorCoreThreads (8 warps), dynamic
//           shared memory tensor_core_smem_bytes(). CTA k owns the units [k·R, k·R + R): the
//           NG·R rows of W_hh, CTA row r = q·R + j being gate q of unit k·R + j, padded to kMT
//           row tiles of 16.
// On chip:  W_hh in registers as mma.sync m16n8k16 A fragments (16-bit, exact): warp w holds the
//           k-tiles [w·KT, (w+1)·KT) of every row tile (zeros past H), 4·kMT·KT registers.
//           h_{t-1} of a batch chunk of up to 8·NT elements in shared memory as 16-bit hi and
//           lo rows (h = hi + lo to about 2^-16 relative: two products per fragment keep the
//           recurrence near fp32 accuracy with 16-bit weights), [8·NT][8·KT·16 + kStagePad] each.
// Per step and batch chunk:
//           the finishers (R/3 per batch element, 3 units each) load u_t and the state entering
//           the step; every thread polls its share of the chunk's records (kStageBatch in flight)
//           and writes them to shared memory as hi and lo; each warp runs its mma over its
//           k-tiles for every row and n tile (the batch is the mma's n), fp32 partial sums to
//           shared memory; the finishers add the 8 warps' sums in a fixed order (deterministic),
//           do the cell's math and stores (kernel_common.cuh) and publish their records.
// Sync:     the tagged records only (rnn_kernels.cu): a consumer's poll of a record is the wait.
// Limits:   H ≤ 8·KT·16 and ceil(H/R) ≤ SMs (tiling.h); B·NG·H < 2^31; waits bounded by
//           timeout_ns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "persistent/kernel_common.cuh"

namespace prnn::persistent {

// D += A·B, m16n8k16, 16-bit A and B (bf16 or f16), fp32 accumulators.
template <DType WS>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  if constexpr (WS == DType::BF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x as 16-bit hi and lo: hi = round(x), lo = round(x − hi), as raw bits.
template <DType WS>
__device__ __forceinline__ void split16(float x, unsigned short& hi, unsigned short& lo) {
  if constexpr (WS == DType::BF16) {
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    hi = __bfloat16_as_ushort(h);
    lo = __bfloat16_as_ushort(__float2bfloat16_rn(x - __bfloat162float(h)));
  } else {
    const __half h = __float2half_rn(x);
    hi = __half_as_ushort(h);
    lo = __half_as_ushort(__float2half_rn(x - __half2float(h)));
  }
}

template <int NG, int R, int KT, int NT, DType WS, bool kLengths>
__global__ void __launch_bounds__(kTensorCoreThreads, 1)
    tensor_core_forward_kernel(const Params p) {
  static_assert(NG == 3 || NG == 4, "GRU or LSTM");
  static_assert(R % kR3 == 0, "a CTA publishes whole records");
  static_assert(WS == DType::BF16 || WS == DType::F16, "16-bit weights");
  constexpr int kRowsCta = NG * R;
  constexpr int kMT = (kRowsCta + 15) / 16;                        // row tiles
  constexpr int kNB = 8 * NT;                                      // batch chunk
  constexpr int kStride = kTensorCoreWarps * KT * 16 + kStagePad;  // staged row (16-bit elements)
  constexpr int kUnitGroups = R / kR3;

  extern __shared__ __align__(16) unsigned short s_stage[];  // hi [kNB][kStride], then lo
  unsigned short* s_hi = s_stage;
  unsigned short* s_lo = s_stage + kNB * kStride;
  __shared__ float s_red[kTensorCoreWarps][kMT * 16][kNB];  // the warps' partial sums
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int grp = lane >> 2, tig = lane & 3;  // the mma fragment's row group and thread in group
  const int H = p.hidden, B = p.batch;
  const int K = (H + kR3 - 1) / kR3;  // records per batch element
  const int row0 = static_cast<int>(blockIdx.x) * R;

  // ---- W_hh rows as A fragments: a[mt][kt] = rows mt·16 + {grp, grp + 8}, columns
  //      (warp·KT + kt)·16 + {2·tig, 2·tig + 1, 2·tig + 8, 2·tig + 9} -----------------------------
  const auto weight = [&](int r, int col) -> float {
    if (r >= kRowsCta || col >= H) return 0.0f;
    const int q = r / R, unit = row0 + r % R;
    return unit < H ? p.w[(static_cast<std::int64_t>(q) * H + unit) * H + col] : 0.0f;
  };
  unsigned rA[kMT][KT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const int r = mt * 16 + grp, k = (warp * KT + kt) * 16 + 2 * tig;
      rA[mt][kt][0] = pack16<WS>(weight(r, k), weight(r, k + 1));
      rA[mt][kt][1] = pack16<WS>(weight(r + 8, k), weight(r + 8, k + 1));
      rA[mt][kt][2] = pack16<WS>(weight(r, k + 8), weight(r, k + 9));
      rA[mt][kt][3] = pack16<WS>(weight(r + 8, k + 8), weight(r + 8, k + 9));
    }
  for (int i = tid; i < 2 * kNB * kStride; i += kTensorCoreThreads) s_stage[i] = 0;
  if (tid == 0) {
    s_epoch = *static_cast<volatile unsigned*>(p.control + kEpoch);  // set by the last launch
    s_abort = 0;
  }
  __syncthreads();
  const unsigned epoch = s_epoch;

  // The finishing role: thread f < kNB·R/3 finishes units 3·f_q .. 3·f_q + 2 of the CTA for
  // batch element f_bb of each chunk.
  const bool finisher = tid < kNB * kUnitGroups;
  const int f_bb = tid / kUnitGroups, f_q = tid % kUnitGroups;
  const int f_k = static_cast<int>(blockIdx.x) * kUnitGroups + f_q;  // its record

  bool aborted = false;
  for (int s = 0; s < p.steps && !aborted; ++s) {
    const std::int64_t t =
        static_cast<std::int64_t>(p.t_first) + static_cast<std::int64_t>(s) * p.t_step;
    const std::int64_t t_prev = t - p.t_step;
    const bool first = s == 0;
    stall_if_asked(p, s);
    const bool from_exchange = s > 0;
    const bool has_source = from_exchange || p.h0 != nullptr;
    const float4* src = p.exchange + static_cast<std::int64_t>((s - 1) & 1) * B * K;
    float4* dst = p.exchange + static_cast<std::int64_t>(s & 1) * B * K;
    const unsigned want = epoch + static_cast<unsigned>(s) - 1u;
    const unsigned mine = epoch + static_cast<unsigned>(s);

    for (int b0 = 0; b0 < B; b0 += kNB) {
      const int nb = min(kNB, B - b0);
      // The finisher's inputs, loaded before the wait so their latency hides in it.
      const int f_b = b0 + f_bb;
      const bool f_live = finisher && f_bb < nb;
      const bool f_pad = f_live && kLengths && t >= p.lengths[f_b];
      float u[kR3][NG] = {}, st[kR3] = {};
      if (f_live) {
#pragma unroll
        for (int c = 0; c < kR3; ++c) {
          const int row = row0 + kR3 * f_q + c;
          if (row < H) load_forward_unit<NG>(p, t, t_prev, first, f_b, row, u[c], st[c]);
        }
      }

      if (has_source) {
        // ---- stage the chunk's h (records of step s - 1, or h0) as hi and lo ------------------
        const int n = nb * K;
        for (int base = tid; base < n; base += kStageBatch * kTensorCoreThreads) {
          float4 rec[kStageBatch];
          const float4* at[kStageBatch];
#pragma unroll
          for (int i = 0; i < kStageBatch; ++i) {
            const int e = base + i * kTensorCoreThreads, bb = e / K, k = e % K;
            at[i] = nullptr;
            rec[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (e >= n) continue;
            if (from_exchange) {
              at[i] = src + static_cast<std::int64_t>(b0 + bb) * K + k;
              rec[i] = load_record(at[i]);
            } else {
              const float* h = p.h0 + static_cast<std::int64_t>(b0 + bb) * H + k * kR3;
              const int m = min(kR3, H - k * kR3);
              rec[i].x = h[0];
              if (m > 1) rec[i].y = h[1];
              if (m > 2) rec[i].z = h[2];
            }
          }
          if (!wait_records(rec, at, want, p, &s_abort)) {
            s_abort = 1;
            break;
          }
#pragma unroll
          for (int i = 0; i < kStageBatch; ++i) {
            const int e = base + i * kTensorCoreThreads, bb = e / K, k = e % K;
            if (e >= n) continue;
            const float v[kR3] = {rec[i].x, rec[i].y, rec[i].z};
#pragma unroll
            for (int c = 0; c < kR3; ++c)
              split16<WS>(v[c], s_hi[bb * kStride + k * kR3 + c], s_lo[bb * kStride + k * kR3 + c]);
          }
        }
        __syncthreads();
        if (*static_cast<volatile int*>(&s_abort) != 0) {
          aborted = true;
          break;
        }

        // ---- the warp's partial products over its k-tiles ---------------------------------------
        float acc[kMT][NT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
            acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
          const int k = (warp * KT + kt) * 16 + 2 * tig;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int row = (nt * 8 + grp) * kStride + k;  // batch element nt·8 + grp: column n
            const unsigned bh0 = *reinterpret_cast<const unsigned*>(s_hi + row);
            const unsigned bh1 = *reinterpret_cast<const unsigned*>(s_hi + row + 8);
            const unsigned bl0 = *reinterpret_cast<const unsigned*>(s_lo + row);
            const unsigned bl1 = *reinterpret_cast<const unsigned*>(s_lo + row + 8);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma_16816<WS>(acc[mt][nt], rA[mt][kt], bh0, bh1);
              mma_16816<WS>(acc[mt][nt], rA[mt][kt], bl0, bl1);
            }
          }
        }
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int r = mt * 16 + grp, n = nt * 8 + 2 * tig;
            *reinterpret_cast<float2*>(&s_red[warp][r][n]) =
                make_float2(acc[mt][nt][0], acc[mt][nt][1]);
            *reinterpret_cast<float2*>(&s_red[warp][r + 8][n]) =
                make_float2(acc[mt][nt][2], acc[mt][nt][3]);
          }
      }
      __syncthreads();

      // ---- finish: the warps' sums in order, the cell, the records of step s --------------------
      if (f_live) {
        float v[kR3];
#pragma unroll
        for (int c = 0; c < kR3; ++c) {
          const int row = row0 + kR3 * f_q + c;
          float mv[NG] = {};
          if (has_source) {
#pragma unroll
            for (int w = 0; w < kTensorCoreWarps; ++w)
#pragma unroll
              for (int q = 0; q < NG; ++q) mv[q] += s_red[w][q * R + kR3 * f_q + c][f_bb];
          }
          v[c] = row < H ? finish_forward_unit<NG>(p, s, t, t_prev, first, f_b, row, u[c], st[c],
                                                   mv, 0.0f, f_pad)
                         : 0.0f;
        }
        if (s + 1 < p.steps && f_k < K)
          store_record(dst + static_cast<std::int64_t>(f_b) * K + f_k,
                       make_float4(v[0], v[1], v[2], __uint_as_float(mine)));
      }
    }
  }
  if (tid == 0) end_launch(p, epoch);
}

}  // namespace prnn::persistent
