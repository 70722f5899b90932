// Persistent GRU / LSTM on tensor cores, one layer direction: the forward and the backward data
// of the persistent family (rnn_kernels.h) for 16-bit weights. Included by
// tensor_core_table.cuh; rnn_kernels.cu's dispatch point picks them (tiling.h:
// TensorCoreShape). Both hold the CTA's NG·R rows of W_hh as mma.sync m16n8k16
// fragments (the forward as they are, the backward transposed), put the batch
// on the mma's n, and exchange through the tensor-core part of the exchange (tiling.h: one
// arrival counter per batch chunk, then the data) with one wait per step and chunk.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "persistent/kernel_common.cuh"

namespace prnn::persistent {

// Four values as 16-bit hi and lo (split16), each four packed in 8 bytes in order.
template <DType WS>
__device__ __forceinline__ void split4(const float4& x, uint2& hi, uint2& lo) {
  unsigned short h[4], l[4];
  split16<WS>(x.x, h[0], l[0]);
  split16<WS>(x.y, h[1], l[1]);
  split16<WS>(x.z, h[2], l[2]);
  split16<WS>(x.w, h[3], l[3]);
  hi = make_uint2(h[0] | static_cast<unsigned>(h[1]) << 16, h[2] | static_cast<unsigned>(h[3]) << 16);
  lo = make_uint2(l[0] | static_cast<unsigned>(l[1]) << 16, l[2] | static_cast<unsigned>(l[3]) << 16);
}

// W_hh [NG·H, H] at (CTA row r, column col) of the CTA whose first unit is row0: CTA row
// r = q·R + j is gate q of unit row0 + j; 0 past the NG·R rows, past column H and for units past H.
template <int NG, int R>
__device__ __forceinline__ float cta_weight(const Params& p, int H, int row0, int r, int col) {
  if (r >= NG * R || col >= H) return 0.0f;
  const int q = r / R, unit = row0 + r % R;
  return unit < H ? p.w[(static_cast<std::int64_t>(q) * H + unit) * H + col] : 0.0f;
}

// One m16n8k16 A fragment (16-bit, exact): rows m and m + 8, columns k, k + 1, k + 8, k + 9 of
// the matrix `at` gives, in the mma's register order.
template <DType WS, class At>
__device__ __forceinline__ void load_a_fragment(unsigned (&a)[4], const At& at, int m, int k) {
  a[0] = pack16<WS>(at(m, k), at(m, k + 1));
  a[1] = pack16<WS>(at(m + 8, k), at(m + 8, k + 1));
  a[2] = pack16<WS>(at(m, k + 8), at(m, k + 9));
  a[3] = pack16<WS>(at(m + 8, k + 8), at(m + 8, k + 9));
}

// The loop over a warp's tiles in shared memory is not unrolled: unrolled, the compiler hoists
// their loads into registers the register tiles already use, and spills (LSTM R = 16: 148 to
// 404 bytes); unrolled by 3 it is no faster (LSTM H = 2048 B = 4, H200: 6.03 against 5.90
// µs/step forward).
inline constexpr int kSmemUnroll = 1;
// Loads of h_{t-1} a thread of the forward has in flight while staging (float4): all of them at
// B ≤ 4 and H ≤ 1152 (one L2 round trip), and half as many for the shapes with tiles in shared
// memory, whose registers are full (8 spill 232 bytes in LSTM R = 16).
template <int KS>
inline constexpr int kTensorCoreStageLoads = KS > 0 ? 4 : 8;

// Runs f(i, a) over the warp's tiles in order, a[o] the tile's fragments, while f returns true.
// The loop over the shared-memory tiles is not unrolled (kSmemUnroll).
template <int KS, int NO, int KR, class F>
__device__ __forceinline__ void for_each_tile(const unsigned (&reg)[NO][KR][4], const uint4* smem,
                                              int warp, int lane, const F& f) {
  bool more = true;
#pragma unroll
  for (int i = 0; i < KR && more; ++i) {  // the register tiles
    unsigned a[NO][4];
#pragma unroll
    for (int o = 0; o < NO; ++o)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[o][j] = reg[o][i][j];
    more = f(i, a);
  }
#pragma unroll kSmemUnroll
  for (int i = 0; i < KS && more; ++i) {  // the shared-memory tiles
    unsigned a[NO][4];
#pragma unroll
    for (int o = 0; o < NO; ++o) {
      const uint4 v = smem[((warp * KS + i) * NO + o) * 32 + lane];
      a[o][0] = v.x;
      a[o][1] = v.y;
      a[o][2] = v.z;
      a[o][3] = v.w;
    }
    more = f(KR + i, a);
  }
}

// The tensor-core part of the exchange (tiling.h): after the FMA kernels' records, the arrival
// counters (one per batch chunk of 8·NT), then the data.
struct TensorCoreExchange {
  unsigned long long* arrived;
  float* data;
};
template <int NG, int NT>
__device__ __forceinline__ TensorCoreExchange tensor_core_exchange(const Params& p) {
  const int K = (NG * p.hidden + kR3 - 1) / kR3;  // records per batch element (rnn_kernels.h)
  char* base = reinterpret_cast<char*>(p.exchange + 2ll * p.batch * K);
  const TensorCoreShape shape{NG, 0, 0, NT};
  return {reinterpret_cast<unsigned long long*>(base),
          reinterpret_cast<float*>(base + tensor_core_counter_bytes(shape, p.batch))};
}

// Thread 0: waits until every CTA arrived (*counter ≥ want). False when the wait timed out or an
// abort was requested (keep_waiting reports it).
__device__ __forceinline__ bool wait_arrivals(const unsigned long long* counter,
                                              unsigned long long want, const Params& p,
                                              const int* s_abort) {
  const std::uint64_t start = global_ns();
  for (unsigned spins = 1;; ++spins) {
    unsigned long long got;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(got) : "l"(counter) : "memory");
    if (got >= want) return true;
    if (spins % kSpinsPerCheck == 0 && !keep_waiting(start, p, s_abort)) return false;
  }
}

// The CTA's arrival: every thread's stores before it (bar.sync), then thread 0 fences and counts
// (the grid barrier's release pattern).
__device__ __forceinline__ void arrive(unsigned long long* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1ull);
  }
}

// Thread 0 of every CTA at the end of a launch: the last CTA also clears the arrival counters.
__device__ __forceinline__ void end_tensor_core_launch(const Params& p, unsigned epoch,
                                                       unsigned long long* arrived, int chunks) {
  if (threadIdx.x == 0 && end_launch(p, epoch))
    for (int c = 0; c < chunks; ++c) arrived[c] = 0;
}

// ---- forward --------------------------------------------------------------------------------
// Forward (rnn_kernels.h):
//   P_t = u_t + W_hh h_prev + biases, then the cell (LSTM: c_t; GRU: a_ih, a_hh), exactly as
//   rnn_kernels.h states; the same reserve, outputs and padding as the FMA kernel, so either
//   backward follows it.
// Layout:   W_hh [NG·H, H] row-major fp32 holding 16-bit values (the layer's weights are bf16 or
//           f16 tensors); the rest as kernels_fma.cu. Exchange data: h [2, B, Hp] fp32 by step
//           parity (Hp = H rounded up to 4, zeros past H).
// Launch:   cooperative, ceil(H/R) CTAs (≤ one per SM) × kTensorCoreThreads (8 warps), dynamic
//           shared memory tensor_core_smem_bytes(). CTA k owns the units [k·R, k·R + R): the
//           NG·R rows of W_hh, CTA row r = q·R + j being gate q of unit k·R + j, padded to kMT
//           row tiles of 16.
// On chip:  W_hh as A fragments (16-bit, exact): warp w holds the k-tiles [w·KT, (w+1)·KT) of
//           every row tile (zeros past H), the first KT − KS in registers (4·kMT·(KT − KS) of
//           them), the last KS in shared memory after the staging ([warp][KS][kMT][lane], 16
//           bytes a lane: one conflict-free 128-bit load per fragment and step).
//           h_{t-1} of a batch chunk of up to 8·NT elements in shared memory as 16-bit hi and
//           lo rows (h = hi + lo to about 2^-16 relative: two products per fragment keep the
//           recurrence near fp32 accuracy with 16-bit weights), [8·NT][8·KT·16 + kStagePad] each.
//           A chunk of at most 4 elements is packed: element b's hi and lo in rows 2b and
//           2b + 1 of the hi rows, so that one mma per fragment computes both products, half the
//           mma of two products on a half-empty tile. Its columns 2b and 2b + 1 land in one
//           lane's accumulators and are added there (no shuffles; H200 A/B in
//           bench/results/h200/ab/prepared2/, `cols`: LSTM bf16 H = 2048 B = 2, 4 4–5 % faster
//           forward and forward + backward, GRU 1–2 %, within ±1 % at H ≤ 1152).
// Per step and batch chunk:
//           the finishers (one per unit and batch element) load u_t and the state entering the
//           step; thread 0 waits for the chunk's arrival counter to reach CTAs·s; every thread
//           loads its share of h_{t-1} from L2 (kTensorCoreStageLoads float4 in flight) into
//           shared memory as hi and lo; each warp runs its mma over its k-tiles, the register
//           tiles then the shared-memory ones, for every row and n tile (the batch is the mma's
//           n), fp32 partial sums to shared memory; the finishers add the 8
//           warps' sums in a fixed order (deterministic), do the cell's math, store h_t to the
//           exchange, the CTA arrives, and only then do the finishers' other stores
//           (kernel_common.cuh), so that the fence waits on h alone.
// Sync:     one arrival counter per chunk: the barrier and the exchange in one wait per step.
// Limits:   H ≤ 8·KT·16 and ceil(H/R) ≤ SMs (tiling.h); B·NG·H < 2^31; the wait is bounded by
//           timeout_ns.
template <int NG, int R, int KT, int KS, int NT, DType WS, bool kLengths>
__global__ void __launch_bounds__(kTensorCoreThreads, 1)
    tensor_core_forward_kernel(const Params p) {
  static_assert(NG == 3 || NG == 4, "GRU or LSTM");
  static_assert(WS == DType::BF16 || WS == DType::F16, "16-bit weights");
  static_assert(KS >= 0 && KS < KT, "at least one k-tile per warp in registers");
  constexpr int kRowsCta = NG * R;
  constexpr int kMT = (kRowsCta + 15) / 16;                        // row tiles
  constexpr int kKR = KT - KS;                                     // k-tiles in registers
  constexpr int kNB = 8 * NT;                                      // batch chunk
  constexpr int kStride = kTensorCoreWarps * KT * 16 + kStagePad;  // staged row (16-bit elements)

  // hi [kNB][kStride], then lo, then the fragments held in shared memory (16-byte aligned: the
  // staging is a multiple of 32 bytes).
  extern __shared__ __align__(16) unsigned short s_stage[];
  unsigned short* s_hi = s_stage;
  unsigned short* s_lo = s_stage + kNB * kStride;
  uint4* s_frag = reinterpret_cast<uint4*>(s_stage + 2 * kNB * kStride);
  __shared__ float s_red[kTensorCoreWarps][kMT * 16][kNB];  // the warps' partial sums
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int grp = lane >> 2, tig = lane & 3;  // the mma fragment's row group and thread in group
  const int H = p.hidden, B = p.batch;
  const int row0 = static_cast<int>(blockIdx.x) * R;

  // ---- W_hh rows as A fragments: fragment (mt, kt) = rows mt·16 + {grp, grp + 8}, columns
  //      (warp·KT + kt)·16 + {2·tig, 2·tig + 1, 2·tig + 8, 2·tig + 9}; kt < kKR in rA, the
  //      rest in s_frag -----------------------------------------------------------------------
  const auto weight = [&](int r, int col) { return cta_weight<NG, R>(p, H, row0, r, col); };
  unsigned rA[kMT][kKR][4];
  hold_fragments<KS>(rA, s_frag, warp, lane, [&](unsigned (&a)[4], int kt, int mt) {
    load_a_fragment<WS>(a, weight, mt * 16 + grp, (warp * KT + kt) * 16 + 2 * tig);
  });
  for (int i = tid; i < 2 * kNB * kStride; i += kTensorCoreThreads) s_stage[i] = 0;
  begin_launch(p, &s_epoch, &s_abort);
  __syncthreads();
  const unsigned epoch = s_epoch;

  // The finishing role: thread f < kNB·R finishes unit f_j of the CTA for batch element f_bb of
  // each chunk.
  static_assert(kNB * R <= kTensorCoreThreads, "one finisher per unit and batch element");
  const bool finisher = tid < kNB * R;
  const int f_bb = tid / R, f_j = tid % R, f_row = row0 + f_j;

  // The exchange: h_t [2, B, Hp] by step parity, and one arrival counter per batch chunk (CTAs
  // that published that chunk, over all steps).
  const int Hp = tensor_core_h_stride(H);
  const TensorCoreExchange ex = tensor_core_exchange<NG, NT>(p);
  float* g_h = ex.data;
  const unsigned long long ctas = gridDim.x;

  bool aborted = false;
  for (int s = 0; s < p.steps && !aborted; ++s) {
    const std::int64_t t =
        static_cast<std::int64_t>(p.t_first) + static_cast<std::int64_t>(s) * p.t_step;
    const std::int64_t t_prev = t - p.t_step;
    const bool first = s == 0;
    stall_if_asked(p, s);
    const bool from_exchange = s > 0;
    const bool has_source = from_exchange || p.h0 != nullptr;
    const float* src = g_h + static_cast<std::int64_t>((s - 1) & 1) * B * Hp;
    float* dst = g_h + static_cast<std::int64_t>(s & 1) * B * Hp;

    for (int b0 = 0, chunk = 0; b0 < B; b0 += kNB, ++chunk) {
      const int nb = min(kNB, B - b0);
      // The finisher's inputs, loaded before the wait so their latency hides in it.
      const int f_b = b0 + f_bb;
      const bool f_live = finisher && f_bb < nb && f_row < H;
      const bool f_pad = f_live && kLengths && t >= p.lengths[f_b];
      float u[NG] = {}, st = 0.0f;
      if (f_live) load_forward_unit<NG>(p, t, t_prev, first, f_b, f_row, u, st);

      // A chunk of at most 4 goes through one mma per fragment: its hi rows are columns 0-3
      // of the n tile and its lo rows columns 4-7 (s_hi rows 4 + bb), summed by the finisher.
      const bool packed = nb <= 4;
      if (has_source) {
        // ---- wait until every CTA published this chunk of step s - 1 -----------------------
        if (from_exchange && tid == 0 &&
            !wait_arrivals(ex.arrived + chunk, ctas * static_cast<unsigned long long>(s), p,
                           &s_abort))
          s_abort = 1;
        __syncthreads();
        if (*static_cast<volatile int*>(&s_abort) != 0) {
          aborted = true;
          break;
        }
        // ---- stage the chunk's h_{t-1} (or h0) as hi and lo ---------------------------------
        if (from_exchange) {
          // float4 e = bb·hp4 + k4 of h (L2 only: another SM wrote them). A thread's row bb and
          // column k4 advance by the thread count's quotient and remainder, without a division
          // per float4 (hp4 is known only at run time).
          const int hp4 = Hp / 4, n4 = nb * hp4;
          const int dq = kTensorCoreThreads / hp4, dr = kTensorCoreThreads % hp4;
          int bb = tid / hp4, k4 = tid % hp4;
          constexpr int kLoads = kTensorCoreStageLoads<KS>;
          for (int base = tid; base < n4; base += kLoads * kTensorCoreThreads) {
            float4 v[kLoads];
#pragma unroll
            for (int i = 0; i < kLoads; ++i) {
              const int e = base + i * kTensorCoreThreads;
              if (e < n4)
                v[i] = __ldcg(
                    reinterpret_cast<const float4*>(src + static_cast<std::int64_t>(b0) * Hp) + e);
            }
#pragma unroll
            for (int i = 0; i < kLoads; ++i) {
              if (base + i * kTensorCoreThreads >= n4) continue;
              const int k = 4 * k4;  // a multiple of 4: 8-byte stores
              uint2 hi, lo;
              split4<WS>(v[i], hi, lo);
              *reinterpret_cast<uint2*>(s_hi + (packed ? 2 * bb : bb) * kStride + k) = hi;
              *reinterpret_cast<uint2*>(
                  (packed ? s_hi + (2 * bb + 1) * kStride : s_lo + bb * kStride) + k) = lo;
              bb += dq;
              k4 += dr;
              if (k4 >= hp4) {
                k4 -= hp4;
                ++bb;
              }
            }
          }
        } else {
          for (int e = tid; e < nb * H; e += kTensorCoreThreads) {
            const int bb = e / H, k = e % H;
            split16<WS>(p.h0[static_cast<std::int64_t>(b0 + bb) * H + k],
                        s_hi[(packed ? 2 * bb : bb) * kStride + k],
                        packed ? s_hi[(2 * bb + 1) * kStride + k] : s_lo[bb * kStride + k]);
          }
        }
        __syncthreads();

        // ---- the warp's partial products over its k-tiles (packed: one n tile, hi and lo in
        //      its columns; else every n tile, a product each for hi and lo) -------------------
        const auto products = [&](auto packed_c) {
          constexpr bool kPacked = decltype(packed_c)::value;
          constexpr int kNT = kPacked ? 1 : NT;
          float acc[kMT][kNT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
              acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
          // k-tile kt of the warp with its fragments a[mt]
          for_each_tile<KS>(rA, s_frag, warp, lane, [&](int kt, const unsigned (&a)[kMT][4]) {
            const int k = (warp * KT + kt) * 16 + 2 * tig;
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              const int row = (nt * 8 + grp) * kStride + k;  // column n = nt·8 + grp
              const unsigned bh0 = *reinterpret_cast<const unsigned*>(s_hi + row);
              const unsigned bh1 = *reinterpret_cast<const unsigned*>(s_hi + row + 8);
#pragma unroll
              for (int mt = 0; mt < kMT; ++mt) mma_16816<WS>(acc[mt][nt], a[mt], bh0, bh1);
              if constexpr (!kPacked) {
                const unsigned bl0 = *reinterpret_cast<const unsigned*>(s_lo + row);
                const unsigned bl1 = *reinterpret_cast<const unsigned*>(s_lo + row + 8);
#pragma unroll
                for (int mt = 0; mt < kMT; ++mt) mma_16816<WS>(acc[mt][nt], a[mt], bl0, bl1);
              }
            }
            return true;
          });
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              const int r = mt * 16 + grp, n = nt * 8 + 2 * tig;
              if constexpr (kPacked) {
                // columns 2·tig, 2·tig + 1: hi and lo of batch element tig
                s_red[warp][r][tig] = acc[mt][nt][0] + acc[mt][nt][1];
                s_red[warp][r + 8][tig] = acc[mt][nt][2] + acc[mt][nt][3];
              } else {
                *reinterpret_cast<float2*>(&s_red[warp][r][n]) =
                    make_float2(acc[mt][nt][0], acc[mt][nt][1]);
                *reinterpret_cast<float2*>(&s_red[warp][r + 8][n]) =
                    make_float2(acc[mt][nt][2], acc[mt][nt][3]);
              }
            }
        };
        if (packed)
          products(std::true_type{});
        else
          products(std::false_type{});
      }
      __syncthreads();

      // ---- finish: the warps' sums in order, the cell; h_t published (and the CTA's arrival
      //      counted) before the finisher's other stores, so that the fence waits on h alone ----
      UnitStep<NG> out{};
      if (f_live) {
        float mv[NG] = {};
        if (has_source) {
#pragma unroll
          for (int w = 0; w < kTensorCoreWarps; ++w)
#pragma unroll
            for (int q = 0; q < NG; ++q) mv[q] += s_red[w][q * R + f_j][f_bb];
        }
        // The LSTM's σ branch-free (gates.cuh): H200, LSTM bf16 H = 2048 B = 2, 4, 2.4–3.2 %
        // faster forward (bench/results/h200/ab/prepared2/, `sigma`).
        out = compute_forward_unit<NG, gemm_rnn::RuntimeActivation, true>(p, t_prev, first, f_b,
                                                                          f_row, u, st, mv, 0.0f,
                                                                          f_pad);
        if (s + 1 < p.steps) dst[static_cast<std::int64_t>(f_b) * Hp + f_row] = out.h;
      }
      if (s + 1 < p.steps) arrive(ex.arrived + chunk);  // every finisher's h before it
      if (f_live) store_forward_unit<NG>(p, s, t, f_b, f_row, out, f_pad);
    }
  }
  end_tensor_core_launch(p, epoch, ex.arrived, (B + kNB - 1) / kNB);
}
// ---- backward data --------------------------------------------------------------------------
// BackwardData (rnn_kernels.h), processing the forward order reversed:
//   dh = dy_t + W_hhᵀ dQ_prev (at s = 0: dhn), then the cell's backward (kernel_common.cuh):
//   dP_t (GRU: and da_hh), the carry and carry_h exactly as the FMA kernel writes them.
// Layout:   as the forward. Exchange data: the partial products X [2, chunks, CTAs, H, 8·NT]
//           fp32 by step parity, X[k][m][n] = Σ over CTA k's rows r of W_hh[r][m] · dQ[r][n]
//           (m a unit of dh, n a batch element of the chunk; columns past the chunk not read).
// Launch:   cooperative, ceil(H/R) CTAs (≤ one per SM) × kTensorCoreThreads (8 warps), static
//           shared memory. CTA k owns the units [k·R, k·R + R) and finishes their backward step,
//           so their dQ (NG·R rows, r = q·R + j: gate q of unit k·R + j) never leaves the CTA:
//           what crosses the SMs is H values per batch element and CTA, not NG·H. Dynamic
//           shared memory tensor_core_backward_smem_bytes(): the fragments held there.
// On chip:  the CTA's rows of W_hh transposed as A fragments (16-bit, exact), A[m][r] =
//           W_hh[row r][m]: warp w holds the m-tiles (16 units of dh) [w·KT, (w+1)·KT) over the
//           rows padded to kKT k-tiles of 16 (zeros past them and past H), the first KT − KS in
//           registers (4·(KT − KS)·kKT), the last KS in shared memory ([warp][KS][kKT][lane]).
//           The chunk's dQ in shared memory as 16-bit hi and lo (dQ = hi + lo to about 2^-16
//           relative, as the forward's h), [8·NT][kKT·16 + kStagePad] each; a chunk of at most
//           4 packed as the forward's (element b's hi and lo in rows 2b, 2b + 1, one mma per
//           fragment, their columns added in the lane).
// Per step and batch chunk:
//           the finishers (one per unit and batch element) load what the unit's step reads; at
//           s > 0 thread 0 waits for the chunk's counter to reach CTAs·s, then lane groups sum
//           X_{s-1}[·][unit][4 batch elements] over the CTAs (each lane a strided share, then a
//           fixed shuffle tree: deterministic); the finisher completes dh and the cell's
//           backward and stages its dQ as hi and lo; each warp multiplies its m-tiles and
//           stores X_s of this CTA; the CTA arrives, and only then do the finishers' stores
//           (dP, the carries) go out.
// Sync:     one arrival counter per chunk. Two buffers suffice: a CTA writes X_s after every
//           CTA arrived at step s - 1, which each did after reading X_{s-2}.
// Limits:   H ≤ 8·KT·16 and ceil(H/R) ≤ SMs; B ≤ kTensorCoreBackwardMaxBatch (tiling.h: the
//           planner's rule); B·NG·H < 2^31; the wait is bounded by timeout_ns.
template <int NG, int R, int KT, int KS, int NT, DType WS, bool kLengths>
__global__ void __launch_bounds__(kTensorCoreThreads, 1)
    tensor_core_backward_kernel(const Params p) {
  static_assert(NG == 3 || NG == 4, "GRU or LSTM");
  static_assert(WS == DType::BF16 || WS == DType::F16, "16-bit weights");
  static_assert(KS >= 0 && KS < KT, "at least one m-tile per warp in registers");
  constexpr int kRowsCta = NG * R;
  constexpr int kKT = (kRowsCta + 15) / 16;        // k-tiles over the CTA's rows
  constexpr int kKR = KT - KS;                     // m-tiles in registers
  constexpr int kNB = 8 * NT;                      // batch chunk
  constexpr int kStride = kKT * 16 + kStagePad;    // staged dQ row (16-bit elements)
  static_assert(kNB * R <= kTensorCoreThreads, "one finisher per unit and batch element");
  // Loads a summing lane has in flight: at B ≤ 4 and 128 CTAs, 16 lanes per sum, all 8 of a
  // lane's loads in one round trip.
  constexpr int kSumLoads = 8;

  __shared__ __align__(16) unsigned short s_dq[2][kNB][kStride];  // hi, lo
  __shared__ float4 s_sum[R * kNB / 4];  // dh's matrix part per (unit, 4 batch elements)
  extern __shared__ uint4 s_frag_t[];     // the fragments held in shared memory
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int grp = lane >> 2, tig = lane & 3;  // the mma fragment's row group and thread in group
  const int H = p.hidden, B = p.batch;
  const int row0 = static_cast<int>(blockIdx.x) * R;

  // ---- W_hh's rows of the CTA, transposed, as A fragments: fragment (mt, kt) = units
  //      (warp·KT + mt)·16 + {grp, grp + 8}, CTA rows kt·16 + {2·tig, 2·tig + 1, 2·tig + 8,
  //      2·tig + 9}; mt < kKR in rA[kt][mt], the rest in s_frag_t ------------------------------
  const auto weight = [&](int m, int r) { return cta_weight<NG, R>(p, H, row0, r, m); };
  unsigned rA[kKT][kKR][4];
  hold_fragments<KS>(rA, s_frag_t, warp, lane, [&](unsigned (&a)[4], int mt, int kt) {
    load_a_fragment<WS>(a, weight, (warp * KT + mt) * 16 + grp, kt * 16 + 2 * tig);
  });
  // Rows past NG·R stay zero (the fragments' zeros times them must not make NaN).
  for (int i = tid; i < 2 * kNB * kStride; i += kTensorCoreThreads) (&s_dq[0][0][0])[i] = 0;
  begin_launch(p, &s_epoch, &s_abort);
  __syncthreads();
  const unsigned epoch = s_epoch;

  // The finishing role: thread f < kNB·R finishes unit f_j of the CTA for batch element f_bb of
  // each chunk.
  const bool finisher = tid < kNB * R;
  const int f_bb = tid / R, f_j = tid % R, f_row = row0 + f_j;

  const TensorCoreExchange ex = tensor_core_exchange<NG, NT>(p);
  const unsigned long long ctas = gridDim.x;
  const int chunks = (B + kNB - 1) / kNB;
  const std::int64_t per_cta = static_cast<std::int64_t>(H) * kNB;  // X of one CTA and chunk
  const std::int64_t per_chunk = static_cast<std::int64_t>(ctas) * per_cta;

  bool aborted = false;
  for (int s = 0; s < p.steps && !aborted; ++s) {
    const std::int64_t t =
        static_cast<std::int64_t>(p.t_first) + static_cast<std::int64_t>(s) * p.t_step;
    const std::int64_t t_prev = t + p.t_step;  // the step before in the forward order
    const bool first_fwd = s == p.steps - 1;
    const bool publish = s + 1 < p.steps;
    stall_if_asked(p, s);

    for (int b0 = 0, chunk = 0; b0 < B; b0 += kNB, ++chunk) {
      const int nb = min(kNB, B - b0);
      // The finisher's inputs, loaded before the wait so their latency hides in it.
      const int f_b = b0 + f_bb;
      const bool f_live = finisher && f_bb < nb && f_row < H;
      const bool f_pad = f_live && kLengths && t >= p.lengths[f_b];
      BackwardUnitIn<NG> in;
      if (f_live) in = load_backward_unit<NG, kLengths>(p, s, t, t_prev, first_fwd, f_b, f_row);

      float mv = 0.0f;
      if (s > 0) {
        // ---- wait until every CTA published this chunk of step s - 1 -------------------------
        if (tid == 0 &&
            !wait_arrivals(ex.arrived + chunk, ctas * static_cast<unsigned long long>(s), p,
                           &s_abort))
          s_abort = 1;
        __syncthreads();
        if (*static_cast<volatile int*>(&s_abort) != 0) {
          aborted = true;
          break;
        }
        // ---- W_hhᵀ dQ_{s-1} of the CTA's units: X_{s-1} summed over the CTAs. Item i = (unit
        //      i % R, batch quad i / R), `lanes` lanes each (a power of two), lane l adding the
        //      CTAs l, l + lanes, ... in order, then a shuffle tree ---------------------------
        const float* x =
            ex.data + (static_cast<std::int64_t>((s - 1) & 1) * chunks + chunk) * per_chunk;
        const int items = R * ((nb + 3) / 4);
        int lanes = 32;
        while (lanes * items > kTensorCoreThreads) lanes /= 2;
        const int item = tid / lanes, sub = tid % lanes;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (item < items && row0 + item % R < H) {
          const float* at = x + static_cast<std::int64_t>(row0 + item % R) * kNB + item / R * 4;
          for (int k = sub; k < static_cast<int>(ctas); k += kSumLoads * lanes) {
            float4 v[kSumLoads];
#pragma unroll
            for (int i = 0; i < kSumLoads; ++i) {
              const int kk = k + i * lanes;
              v[i] = kk < static_cast<int>(ctas)
                         ? __ldcg(reinterpret_cast<const float4*>(at + kk * per_cta))
                         : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int i = 0; i < kSumLoads; ++i) {
              acc.x += v[i].x;
              acc.y += v[i].y;
              acc.z += v[i].z;
              acc.w += v[i].w;
            }
          }
        }
        for (int off = lanes / 2; off > 0; off /= 2) {
          acc.x += __shfl_xor_sync(0xFFFFFFFFu, acc.x, off);
          acc.y += __shfl_xor_sync(0xFFFFFFFFu, acc.y, off);
          acc.z += __shfl_xor_sync(0xFFFFFFFFu, acc.z, off);
          acc.w += __shfl_xor_sync(0xFFFFFFFFu, acc.w, off);
        }
        if (sub == 0 && item < items) s_sum[item] = acc;
        __syncthreads();
        if (f_live) {
          const float4 v = s_sum[f_bb / 4 * R + f_j];
          const int c = f_bb % 4;
          mv = c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
        }
      }

      // ---- the units' backward step --------------------------------------------------------
      BackwardUnitOut<NG> out{};
      if (f_live) out = compute_backward_unit<NG>(p, in, mv, f_pad);

      if (publish) {
        // ---- dQ as hi and lo, then X_s of this CTA: each warp its m-tiles. A chunk of at most
        //      4 is packed as in the forward: element b's hi and lo in rows 2b, 2b + 1, one mma
        //      per fragment, and columns 2b, 2b + 1 of the product added in lane tig = b ------
        const bool packed = nb <= 4;
        if (finisher && f_bb < nb) {
#pragma unroll
          for (int q = 0; q < NG; ++q)
            split16<WS>(f_live ? out.dq[q] : 0.0f, s_dq[0][packed ? 2 * f_bb : f_bb][q * R + f_j],
                        packed ? s_dq[0][2 * f_bb + 1][q * R + f_j] : s_dq[1][f_bb][q * R + f_j]);
        }
        __syncthreads();
        float* xo = ex.data + (static_cast<std::int64_t>(s & 1) * chunks + chunk) * per_chunk +
                    blockIdx.x * per_cta;
        const auto products = [&](auto packed_c) {
          constexpr bool kPacked = decltype(packed_c)::value;
#pragma unroll
          for (int nt = 0; nt < (kPacked ? 1 : NT); ++nt) {
            if (nt * 8 >= nb) break;
            unsigned bh[kKT][2], bl[kKT][2];
            (void)bl;  // unused when packed
#pragma unroll
            for (int kt = 0; kt < kKT; ++kt) {
              const int n = nt * 8 + grp, r = kt * 16 + 2 * tig;  // B[r][n]: dQ of row r, n
              bh[kt][0] = *reinterpret_cast<const unsigned*>(&s_dq[0][n][r]);
              bh[kt][1] = *reinterpret_cast<const unsigned*>(&s_dq[0][n][r + 8]);
              if constexpr (!kPacked) {
                bl[kt][0] = *reinterpret_cast<const unsigned*>(&s_dq[1][n][r]);
                bl[kt][1] = *reinterpret_cast<const unsigned*>(&s_dq[1][n][r + 8]);
              }
            }
            // m-tile mt of the warp with its fragments a[kt]; false past H (uniform in the warp)
            for_each_tile<KS>(rA, s_frag_t, warp, lane, [&](int mt, const unsigned (&a)[kKT][4]) {
              if ((warp * KT + mt) * 16 >= H) return false;
              float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
              for (int kt = 0; kt < kKT; ++kt) {
                mma_16816<WS>(d, a[kt], bh[kt][0], bh[kt][1]);
                if constexpr (!kPacked) mma_16816<WS>(d, a[kt], bl[kt][0], bl[kt][1]);
              }
              const int m = (warp * KT + mt) * 16 + grp, n = nt * 8 + 2 * tig;
              if constexpr (kPacked) {
                // hi and lo of batch element tig in columns 2·tig, 2·tig + 1 (columns past nb:
                // rows not staged for this chunk, stored but never read)
                if (m < H) xo[static_cast<std::int64_t>(m) * kNB + tig] = d[0] + d[1];
                if (m + 8 < H) xo[static_cast<std::int64_t>(m + 8) * kNB + tig] = d[2] + d[3];
              } else if (n < nb) {
                if (m < H)
                  *reinterpret_cast<float2*>(xo + static_cast<std::int64_t>(m) * kNB + n) =
                      make_float2(d[0], d[1]);
                if (m + 8 < H)
                  *reinterpret_cast<float2*>(xo + static_cast<std::int64_t>(m + 8) * kNB + n) =
                      make_float2(d[2], d[3]);
              }
              return true;
            });
          }
        };
        if (packed)
          products(std::true_type{});
        else
          products(std::false_type{});
        arrive(ex.arrived + chunk);  // every warp's X before it
      }
      if (f_live) store_backward_unit<NG, kLengths>(p, t, f_b, f_row, out);
    }
  }
  end_tensor_core_launch(p, epoch, ex.arrived, (B + kNB - 1) / kNB);
}

}  // namespace prnn::persistent
