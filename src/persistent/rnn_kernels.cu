// Persistent RNN, one layer direction, forward or backward data, every cell (contract in
// rnn_kernels.h; gate math in gemm_rnn/gates.cuh), NG = 1 (vanilla), 3 (GRU), 4 (LSTM) gates.
//   Forward:       P_t = u_t + W_hh h_prev + biases, then the cell (h_t; LSTM c_t)
//   BackwardData:  dh = dy_t + W_hhᵀ dQ_prev, then the cell's backward (dP_t, dQ_t, the carry)
// Layout:   W_hh [NG·H, H] row-major; pre/dpre (and GRU pre_h/dpre_h) [T, B, NG·H]; LSTM cell
//           [T, B, H]; h0, hn, dhn, initial, carry [B, H]; out, dy rows strided.
//           Exchange: two buffers (step parity) of [B, K] records; forward K = ceil(H/3), record
//           (b, k) = {h[b][3k], h[b][3k+1], h[b][3k+2], tag}; backward K = ceil(NG·H/3) over dQ
//           in unit-major order (value j = gate j % NG of unit j / NG); values past the end 0.
// Launch:   cooperative, tiling.ctas CTAs (≤ one per SM) × tiling.threads; kernel shape
//           (NG, R, G, BC, storage) from tiling.h. CTA k owns units [k·R, k·R + R): the NG·R
//           rows of W_hh of those units (forward) or the R rows of W_hhᵀ (backward). Thread i
//           owns the column groups i + j·threads (forward j < G, backward j < NG·G).
// On chip:  rW registers: the thread's weights, loaded once per launch, fp32 or two 16-bit
//           weights per register (widened to fp32 for the FMA). Per step and batch chunk: the
//           thread polls its records (one 16-byte load each, one L2 round trip when they are
//           ready), does its FMAs, the CTA reduces the partial sums (warp reduce-scatter, then
//           shared memory across warps in a fixed order: deterministic), and R/3·BC threads
//           finish 3 units each (the cell's math) and publish the records. A chunk's records go
//           out before the next chunk starts, so other CTAs begin the next step on them while
//           this one still computes (pipelining over the mini-batch; tiling.h picks two chunks
//           per step where it can). A finisher keeps its units of every batch element it
//           finishes, so the state it needs from the previous step (c_{t-1}, the GRU's h_{t-1},
//           the carry) is what it wrote itself. Where the tiling asks for it
//           (Tiling::finish_barrier), a CTA barrier after the finishers keeps the other warps
//           from polling the next chunk's records until this chunk's records are out.
// Sync:     none besides the tagged records: a record's tag is epoch + s, the epoch advanced by
//           T per launch (the last CTA to finish does it), so records of other steps or launches
//           never match. Two buffers suffice: a CTA publishes step s only after reading all of
//           step s-1, which its producers published only after reading all of step s-2.
// Limits:   B·NG·H < 2^31, T < 2^31; every wait bounded by timeout_ns (then kStatusTimeout,
//           exit).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/cuda_check.h"
#include "gemm_rnn/activation.cuh"
#include "gemm_rnn/gates.cuh"
#include "persistent/gated_warp_rows_kernel.cuh"
#include "persistent/kernel_common.cuh"
#include "persistent/rnn_kernels.h"
#include "persistent/tensor_core_kernel.cuh"
#include "persistent/warp_rows_kernel.cuh"
#include "prnn/error.h"
#include "prnn/rnn.h"

namespace prnn::persistent {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

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

__device__ __forceinline__ float component(const float4& r, int c) {
  return c == 0 ? r.x : c == 1 ? r.y : r.z;
}

// acc[row·BC + bb] += w[row][col] · hv[bb] for every row of the thread (rW as the kernel holds
// it: fp32 rows, or packed pairs of 16-bit rows).
template <int kWRows, int kRows, int BC, bool kPacked, DType WS, class WReg, int kCols, int kNP>
__device__ __forceinline__ void fma_rows(const WReg (&rW)[kWRows][kCols], int col,
                                         const float (&hv)[BC], float (&acc)[kNP]) {
#pragma unroll
  for (int i = 0; i < kWRows; ++i) {
    if constexpr (kPacked) {
      float w0, w1;
      unpack16<WS>(rW[i][col], w0, w1);
#pragma unroll
      for (int bb = 0; bb < BC; ++bb) {
        acc[2 * i * BC + bb] = fmaf(w0, hv[bb], acc[2 * i * BC + bb]);
        if (2 * i + 1 < kRows)
          acc[(2 * i + 1) * BC + bb] = fmaf(w1, hv[bb], acc[(2 * i + 1) * BC + bb]);
      }
    } else {
#pragma unroll
      for (int bb = 0; bb < BC; ++bb) acc[i * BC + bb] = fmaf(rW[i][col], hv[bb], acc[i * BC + bb]);
    }
  }
}

template <int NG, int R, int G, int BC, int kMaxThreads, DType WS, bool kStaged, bool kLengths,
          Pass P>
__global__ void __launch_bounds__(kMaxThreads, 1) persistent_rnn_kernel(const Params p) {
  constexpr bool kFwd = P == Pass::Forward;
  constexpr bool kPacked = WS != DType::F32;  // two 16-bit weights per register
  // Staged shapes: a chunk's records are first copied once into shared memory by the whole CTA,
  // and the forward splits its NG·R rows by gate over NG row groups of threads (R rows each),
  // so a thread holds R rows whatever the cell and the batch fits in one chunk.
  constexpr int kRG = kStaged && kFwd ? NG : 1;  // row groups
  static_assert(NG == 1 || NG == 3 || NG == 4, "vanilla, GRU or LSTM");
  constexpr int kRows = kFwd && !kStaged ? NG * R : R;  // weight rows per thread
  constexpr int kGroups = kFwd || kStaged ? G : NG * G;  // record columns per thread
  constexpr int kN = kRows * BC;                 // partial sums per thread
  constexpr int kNP = (kN + 7) / 8 * 8;          // padded for the reduce-scatter
  constexpr int kChunk = kNP / 8;
  constexpr int kMaxWarps = kMaxThreads / 32;
  constexpr int kUnitGroups = R / kR3;           // 3-unit groups a CTA finishes per batch element
  constexpr int kOutRecords = kFwd ? 1 : NG;     // records one 3-unit group publishes
  constexpr int kNF = kFwd ? NG : 1;             // matrix-vector sums per unit the finisher reads
  static_assert(R % kR3 == 0, "a CTA publishes whole records");
  constexpr int kWRows = kPacked ? (kRows + 1) / 2 : kRows;  // register rows of weights
  using WReg = std::conditional_t<kPacked, unsigned, float>;

  __shared__ float s_red[2][kMaxWarps][kNP];  // per-warp sums, double-buffered by chunk parity
  extern __shared__ float4 s_rec[];            // staged: the chunk's records [BC][K]
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int nwarps = static_cast<int>(blockDim.x) >> 5;
  // Row group rg (the gate, staged forward) and column thread ct of TC; TC is a multiple of 32.
  const int TC = static_cast<int>(blockDim.x) / kRG, rg = tid / TC, ct = tid % TC;
  const int H = p.hidden, B = p.batch;
  // Records per batch element of the exchanged vector: h (forward) or dQ (backward, NG·H values
  // in unit-major order: value j is gate j % NG of unit j / NG).
  const int K = ((kFwd ? 1 : NG) * H + kR3 - 1) / kR3;
  const int row0 = static_cast<int>(blockIdx.x) * R;

  // ---- the thread's weights: its rows, the columns of its groups (zeros outside) -------------
  //   forward  row rr = q·R + r is W_hh row q·H + row0 + r, column = unit of h (staged: the
  //            thread's rows are r = rr of gate q = rg)
  //   backward row r is unit row0 + r of dh; column j is W_hh row (j % NG)·H + j / NG
  //   packed   register row i holds rows 2i (low half) and 2i + 1 (high half)
  auto weight = [&](int rr, int k, int col) -> float {
    if (k >= K || rr >= kRows) return 0.0f;
    if constexpr (kFwd) {
      const int q = kStaged ? rg : rr / R, row = row0 + (kStaged ? rr : rr % R);
      return col < H && row < H ? p.w[(static_cast<std::int64_t>(q) * H + row) * H + col] : 0.0f;
    } else {
      const int u = col / NG, q = col % NG, row = row0 + rr;
      return u < H && row < H ? p.w[(static_cast<std::int64_t>(q) * H + u) * H + row] : 0.0f;
    }
  };
  WReg rW[kWRows][kR3 * kGroups];
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    const int k = ct + g * TC;
#pragma unroll
    for (int c = 0; c < kR3; ++c) {
      const int col = k * kR3 + c;
#pragma unroll
      for (int i = 0; i < kWRows; ++i) {
        if constexpr (kPacked)
          rW[i][kR3 * g + c] = pack16<WS>(weight(2 * i, k, col), weight(2 * i + 1, k, col));
        else
          rW[i][kR3 * g + c] = weight(i, k, col);
      }
    }
  }
  begin_launch(p, &s_epoch, &s_abort);
  __syncthreads();
  const unsigned epoch = s_epoch;

  // ---- the finishing role: thread f < BC·R/3 finishes 3-unit group (bb, q) of each chunk ----
  const bool finisher = tid < BC * kUnitGroups;
  const int f_bb = tid / kUnitGroups, f_q = tid % kUnitGroups;
  const int f_k = static_cast<int>(blockIdx.x) * kUnitGroups + f_q;  // the group's global index
  float bias[kR3] = {};
  if constexpr (kFwd && NG == 1) {
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
    // The time of the step before this one in the forward order (forward: t - t_step; the
    // backward runs the forward order reversed: t + t_step), and whether there is none.
    const std::int64_t t_prev = kFwd ? t - p.t_step : t + p.t_step;
    const bool first_fwd = kFwd ? s == 0 : s == p.steps - 1;
    stall_if_asked(p, s);
    const bool from_exchange = s > 0;
    const bool has_source = from_exchange || (kFwd && p.h0 != nullptr);
    const float4* src = p.exchange + static_cast<std::int64_t>((s - 1) & 1) * B * K;
    float4* dst = p.exchange + static_cast<std::int64_t>(s & 1) * B * K;
    const unsigned want = epoch + static_cast<unsigned>(s) - 1u;
    const unsigned mine = epoch + static_cast<unsigned>(s);

    for (int b0 = 0; b0 < B; b0 += BC) {
      // The finisher's per-step inputs, loaded before the wait so their latency hides in it:
      // forward, the input side of each gate row (W_ih x) and the state entering the step (LSTM
      // c_{t-1}, GRU h_{t-1}); backward, what the unit's backward step reads (kernel_common.cuh).
      const int f_b = b0 + f_bb;
      const bool f_live = finisher && f_b < B;
      // Padding: an identity step for this batch row (rnn_kernels.h).
      const bool f_pad = f_live && kLengths && t >= p.lengths[f_b];
      float u[kFwd ? NG : 1][kR3] = {}, st[kR3] = {};
      BackwardUnitIn<NG> bin[kFwd ? 1 : kR3];
      if (f_live) {
#pragma unroll
        for (int c = 0; c < kR3; ++c) {
          const int row = row0 + kR3 * f_q + c;
          if (row >= H) continue;
          if constexpr (kFwd) {
            float uc[NG];
            load_forward_unit<NG>(p, t, t_prev, first_fwd, f_b, row, uc, st[c]);
#pragma unroll
            for (int q = 0; q < NG; ++q) u[q][c] = uc[q];
          } else {
            bin[c] = load_backward_unit<NG, kLengths>(p, s, t, t_prev, first_fwd, f_b, row);
          }
        }
      }

      float acc[kNP];
#pragma unroll
      for (int i = 0; i < kNP; ++i) acc[i] = 0.0f;
      if (has_source) {
        // The record of column group k, batch element b0 + bb (tag `want`, or h0 at s = 0).
        auto fetch = [&](int k, int bb, float4& r) -> const float4* {
          const int b = b0 + bb;
          r = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
          if (k >= K || b >= B) return nullptr;
          if (from_exchange) {
            const float4* at = src + static_cast<std::int64_t>(b) * K + k;
            r = load_record(at);
            return at;
          }
          const float* h = p.h0 + static_cast<std::int64_t>(b) * H + k * kR3;  // forward, s = 0
          const int n = min(kR3, H - k * kR3);
          r.x = h[0];
          if (n > 1) r.y = h[1];
          if (n > 2) r.z = h[2];
          return nullptr;
        };
        if constexpr (!kStaged) {
          // Direct: the thread's own records, in registers; the missing ones reloaded (all in
          // flight at once) until every one carries `want`.
          float4 rec[kGroups][BC];
#pragma unroll
          for (int g = 0; g < kGroups; ++g)
#pragma unroll
            for (int bb = 0; bb < BC; ++bb) fetch(ct + g * TC, bb, rec[g][bb]);
          if (from_exchange) {
            bool ready = true;
#pragma unroll
            for (int g = 0; g < kGroups; ++g)
#pragma unroll
              for (int bb = 0; bb < BC; ++bb) ready &= tagged(rec[g][bb], want);
            if (!ready) {
              const std::uint64_t start = global_ns();
              for (unsigned spins = 1; !ready; ++spins) {
#pragma unroll
                for (int g = 0; g < kGroups; ++g) {
                  const int k = ct + g * TC;
#pragma unroll
                  for (int bb = 0; bb < BC; ++bb)
                    if (!tagged(rec[g][bb], want))
                      rec[g][bb] = load_record(src + static_cast<std::int64_t>(b0 + bb) * K + k);
                }
                ready = true;
#pragma unroll
                for (int g = 0; g < kGroups; ++g)
#pragma unroll
                  for (int bb = 0; bb < BC; ++bb) ready &= tagged(rec[g][bb], want);
                if (ready || spins % kSpinsPerCheck != 0) continue;
                if (!keep_waiting(start, p, &s_abort)) {
                  s_abort = 1;
                  break;
                }
              }
            }
          }
          // fp32 rows walked batch-major (the loop order the vanilla shapes were tuned with);
          // per accumulator the terms are added in (group, column) order.
          static_assert(!kPacked, "packed 16-bit weights come with staged shapes only");
#pragma unroll
          for (int g = 0; g < kGroups; ++g)
#pragma unroll
            for (int bb = 0; bb < BC; ++bb)
#pragma unroll
              for (int c = 0; c < kR3; ++c) {
                const float hv = component(rec[g][bb], c);
#pragma unroll
                for (int i = 0; i < kWRows; ++i)
                  acc[i * BC + bb] = fmaf(rW[i][kR3 * g + c], hv, acc[i * BC + bb]);
              }
        } else {
          // Staged: the CTA copies the chunk's BC·K records into shared memory once (each
          // thread polls kStageBatch at a time, all in flight), then every thread reads its
          // columns from there.
          const int n = BC * K;
          for (int base = tid; base < n; base += kStageBatch * static_cast<int>(blockDim.x)) {
            float4 rec[kStageBatch];
            const float4* at[kStageBatch];
#pragma unroll
            for (int u = 0; u < kStageBatch; ++u) {
              const int i = base + u * static_cast<int>(blockDim.x);
              at[u] = nullptr;
              rec[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
              if (i < n) at[u] = fetch(i % K, i / K, rec[u]);
            }
            if (!wait_records(rec, at, want, p, &s_abort)) {
              s_abort = 1;
              break;
            }
#pragma unroll
            for (int u = 0; u < kStageBatch; ++u) {
              const int i = base + u * static_cast<int>(blockDim.x);
              if (i < n) s_rec[i] = rec[u];
            }
          }
          __syncthreads();
#pragma unroll
          for (int g = 0; g < kGroups; ++g) {
            const int k = ct + g * TC;
            float4 hv4[BC];
#pragma unroll
            for (int bb = 0; bb < BC; ++bb)
              hv4[bb] = k < K ? s_rec[bb * K + k] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int c = 0; c < kR3; ++c) {
              float hv[BC];
#pragma unroll
              for (int bb = 0; bb < BC; ++bb) hv[bb] = component(hv4[bb], c);
              fma_rows<kWRows, kRows, BC, kPacked, WS>(rW, kR3 * g + c, hv, acc);
            }
          }
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
        // The units' matrix-vector sums (forward: one per gate row): warps added in a fixed
        // order, the independent chains interleaved.
        float mv[kNF][kR3] = {};
        if (has_source) {
          // Staged forward: gate q's sums are in its row group's warps, at the unit's row.
          const int group_warps = nwarps / kRG;
#pragma unroll
          for (int w = 0; w < kMaxWarps / kRG; ++w) {
            if (w >= group_warps) break;
#pragma unroll
            for (int q = 0; q < kNF; ++q)
#pragma unroll
              for (int c = 0; c < kR3; ++c) {
                if constexpr (kRG > 1)
                  mv[q][c] += s_red[parity][q * group_warps + w][(kR3 * f_q + c) * BC + f_bb];
                else
                  mv[q][c] += s_red[parity][w][(q * R + kR3 * f_q + c) * BC + f_bb];
              }
          }
        }
        float v[kR3 * kOutRecords];  // the values published: h (forward) or dQ, unit-major
#pragma unroll
        for (int c = 0; c < kR3; ++c) {
          const int row = row0 + kR3 * f_q + c;
          const bool live = row < H;
          if constexpr (kFwd) {
            float h = 0.0f;
            if (live) {
              float uc[NG], mvc[NG];
#pragma unroll
              for (int q = 0; q < NG; ++q) {
                uc[q] = u[q][c];
                mvc[q] = mv[q][c];
              }
              h = finish_forward_unit<NG>(p, s, t, t_prev, first_fwd, f_b, row, uc, st[c], mvc,
                                          bias[c], f_pad);
            }
            v[c] = live ? h : 0.0f;
          } else {
            const BackwardUnitOut<NG> o = compute_backward_unit<NG>(p, bin[c], mv[0][c], f_pad);
            if (live) store_backward_unit<NG, kLengths>(p, t, f_b, row, o);
#pragma unroll
            for (int q = 0; q < kOutRecords; ++q) v[c * kOutRecords + q] = live ? o.dq[q] : 0.0f;
          }
        }
        if (s + 1 < p.steps) {
#pragma unroll
          for (int i = 0; i < kOutRecords; ++i) {
            const int k = f_k * kOutRecords + i;  // the last CTA's units may run past the last record
            if (k < K)
              store_record(dst + static_cast<std::int64_t>(f_b) * K + k,
                           make_float4(v[kR3 * i], v[kR3 * i + 1], v[kR3 * i + 2],
                                       __uint_as_float(mine)));
          }
        }
      }
      // Where the tiling asks for it, no warp polls the next chunk's records until the
      // finishers' stores have issued (their polls slow the finishers' shared-memory sums).
      if (p.finish_barrier) __syncthreads();
      parity ^= 1;
    }
  }

  if (tid == 0) end_launch(p, epoch);
}

// ---- the one dispatch point: (pass, shape, lengths) -> kernel and launch shape -------------

// Sequence lengths are a separate instantiation: the per-row padding checks cost ~10% of a step
// (H=1152 B=4: 3.30 vs 3.03 µs), so the kernels without them carry none.
using KernelFn = void (*)(Params);

// Each family's kernel for its shape I, with sequence lengths L, for pass P.
template <int I, bool L, Pass P>
struct FmaKernel {
  static constexpr KernelFn get() {
    constexpr KernelShape s = kShapes[I];
    return &persistent_rnn_kernel<s.gates, s.rows, s.groups, s.batch_chunk, s.max_threads,
                                  s.storage, s.staged, L, P>;
  }
};

template <int I, bool L, Pass P>
struct TensorCoreKernel {
  static constexpr KernelFn get() {
    constexpr TensorCoreShape s = kTensorCoreShapes[I];
    if constexpr (P == Pass::Forward)
      return &tensor_core_forward_kernel<s.gates, s.rows, s.k_tiles, s.smem_tiles, s.n_tiles,
                                        s.storage, L>;
    else
      return &tensor_core_backward_kernel<s.gates, s.rows, s.k_tiles, s.smem_tiles, s.n_tiles,
                                         s.storage, L>;
  }
};

// The warp-rows kernels are instantiated per activation and, forward, with and without the input
// projection as well: I = (shape · 3 + activation) · 2 + projects (the backward's two are one, and
// so are a wide shape's: it has no projecting form, projects_input below).
constexpr int kActivationCount = 3;
static_assert(static_cast<int>(Activation::ReLU) == 0 &&
              static_cast<int>(Activation::ClippedReLU) == 1 &&
              static_cast<int>(Activation::Tanh) == kActivationCount - 1);

template <int I, bool L, Pass P>
struct WarpRowsKernel {
  static constexpr KernelFn get() {
    constexpr WarpRowsShape s = kWarpRowsShapes[I / 2 / kActivationCount];
    constexpr Activation A = static_cast<Activation>(I / 2 % kActivationCount);
    constexpr bool kInput = P == Pass::Forward && I % 2 == 1 && s.smem_slots == 0;
    return &warp_rows_kernel<s.records_per_lane, s.smem_slots, s.batch_per_warp, s.max_threads,
                             s.own_slots, A, L, P, kInput>;
  }
};

// The gated warp-rows kernels, one per shape and pass (sequence lengths are checked at run time:
// one load per finishing lane and step).
template <std::size_t... I>
KernelFn pick_gated_warp_rows(int shape, Pass pass, std::index_sequence<I...>) {
  constexpr KernelFn forward[] = {
      &gated_warp_rows_forward_kernel<kGatedWarpRowsShapes[I].gates, kGatedWarpRowsRecords,
                                      kGatedWarpRowsShapes[I].batch_per_warp,
                                      kGatedWarpRowsShapes[I].own_slots,
                                      kGatedWarpRowsShapes[I].max_threads>...};
  constexpr KernelFn backward[] = {
      &gated_warp_rows_backward_kernel<kGatedWarpRowsShapes[I].gates, kGatedWarpRowsRecords,
                                       kGatedWarpRowsShapes[I].batch_per_warp,
                                       kGatedWarpRowsShapes[I].backward_slots,
                                       kGatedWarpRowsShapes[I].max_threads>...};
  return pass == Pass::Forward ? forward[shape] : backward[shape];
}

// Family Of's kernel for shape `shape` (of N), with or without lengths, for `pass`: one table
// per (lengths, pass) over the family's shapes.
template <template <int, bool, Pass> class Of, bool L, Pass P, std::size_t... I>
KernelFn pick_in(int shape, std::index_sequence<I...>) {
  constexpr KernelFn fns[] = {Of<static_cast<int>(I), L, P>::get()...};
  return fns[shape];
}

template <template <int, bool, Pass> class Of, int N>
KernelFn pick(int shape, bool lengths, Pass pass) {
  const auto seq = std::make_index_sequence<N>{};
  if (lengths)
    return pass == Pass::Forward ? pick_in<Of, true, Pass::Forward>(shape, seq)
                                 : pick_in<Of, true, Pass::BackwardData>(shape, seq);
  return pass == Pass::Forward ? pick_in<Of, false, Pass::Forward>(shape, seq)
                               : pick_in<Of, false, Pass::BackwardData>(shape, seq);
}

struct LaunchShape {
  KernelFn fn = nullptr;
  int ctas = 0, threads = 0;
  std::size_t smem_bytes = 0;
  int warp_records = 0;  // the warp-rows kernels' records per batch group
};

// `projects`: the warp-rows forward's instantiation with the input projection (launch's p.x).
LaunchShape kernel_for(Pass pass, const Tiling& tiling, bool lengths, Activation act,
                       bool projects = false) {
  if (!tiling.runs())
    throw InternalError("persistent kernel: no kernel shape (" + tiling.reason + ")");
  // The kernel a pass runs is the planner's call (pass_kernel); here only its instantiation.
  switch (pass_kernel(tiling, pass == Pass::Forward)) {
    case PassKernel::GatedWarpRows:
      if (tiling.gated_warp_rows >= kGatedWarpRowsShapeCount)
        throw InternalError("persistent kernel: no gated warp-rows shape " +
                            std::to_string(tiling.gated_warp_rows));
      return {pick_gated_warp_rows(tiling.gated_warp_rows, pass,
                                   std::make_index_sequence<kGatedWarpRowsShapeCount>{}),
              tiling.gated_warp_rows_ctas, tiling.gated_warp_rows_threads,
              gated_warp_rows_smem_bytes(kGatedWarpRowsShapes[tiling.gated_warp_rows],
                                         pass == Pass::BackwardData),
              tiling.gated_warp_rows_records};
    case PassKernel::WarpRows: {
      if (tiling.warp_rows >= kWarpRowsShapeCount)
        throw InternalError("persistent kernel: no warp-rows shape " +
                            std::to_string(tiling.warp_rows));
      const int index =
          (tiling.warp_rows * kActivationCount + static_cast<int>(act)) * 2 + (projects ? 1 : 0);
      return {
          pick<WarpRowsKernel, kWarpRowsShapeCount * kActivationCount * 2>(index, lengths, pass),
          tiling.warp_rows_ctas, tiling.warp_rows_threads,
          warp_rows_smem_bytes(kWarpRowsShapes[tiling.warp_rows], tiling.warp_rows_groups,
                               tiling.warp_rows_records, tiling.records),
          tiling.warp_rows_records};
    }
    case PassKernel::TensorCores: {
      if (tiling.tensor_core >= kTensorCoreShapeCount)
        throw InternalError("persistent kernel: no tensor-core shape " +
                            std::to_string(tiling.tensor_core));
      const TensorCoreShape& s = kTensorCoreShapes[tiling.tensor_core];
      return {pick<TensorCoreKernel, kTensorCoreShapeCount>(tiling.tensor_core, lengths, pass),
              tiling.tensor_core_ctas, kTensorCoreThreads,
              pass == Pass::Forward ? tiling.tensor_core_smem_bytes
                                    : tensor_core_backward_smem_bytes(s)};
    }
    case PassKernel::FmaStaged:
    case PassKernel::FmaDirect:
      if (tiling.shape >= kShapeCount)
        throw InternalError("persistent kernel: no kernel shape " + std::to_string(tiling.shape));
      return {pick<FmaKernel, kShapeCount>(tiling.shape, lengths, pass), tiling.ctas,
              tiling.threads, tiling.smem_bytes};
  }
  throw InternalError("persistent kernel: unknown pass kernel");
}

// Whether the forward of `tiling` has an input projection's form for input_size inputs: the
// warp-rows kernel but its wide shapes, I % 4 == 0 (whether its shared memory fits is
// fuses_input_projection's).
bool projects_input(const Tiling& tiling, std::int64_t input_size) {
  return tiling.runs() && pass_kernel(tiling, true) == PassKernel::WarpRows &&
         kWarpRowsShapes[tiling.warp_rows].smem_slots == 0 && input_size > 0 &&
         input_size % 4 == 0;
}

// The warp-rows forward's shared memory for an input projection of input_size inputs.
std::size_t input_smem_bytes(const Tiling& tiling, std::int64_t input_size) {
  return warp_rows_input_smem_bytes(kWarpRowsShapes[tiling.warp_rows], tiling.warp_rows_records,
                                    tiling.warp_rows_groups, input_size);
}

}  // namespace

std::size_t exchange_bytes(const Tiling& tiling, std::int64_t batch) {
  return static_cast<std::size_t>(2 * batch * tiling.records) * sizeof(float4) +
         tiling.tensor_core_exchange_bytes;
}

std::string prepare(Pass pass, const Tiling& tiling, Activation act, int device) {
  int cooperative = 0, sms = 0, smem_optin = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  PRNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (cooperative == 0) return "this GPU does not support cooperative launches";
  for (bool lengths : {false, true}) {  // both instantiations must fit
    const LaunchShape k = kernel_for(pass, tiling, lengths, act);
    cudaFuncAttributes attr{};
    PRNN_CUDA_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k.fn)));
    if (k.smem_bytes + attr.sharedSizeBytes > static_cast<std::size_t>(smem_optin))
      return "the persistent kernel needs " +
             std::to_string(k.smem_bytes + attr.sharedSizeBytes) +
             " bytes of shared memory per CTA; this GPU allows " + std::to_string(smem_optin);
    // All but the direct FMA shapes: allow the dynamic shared memory.
    if (k.smem_bytes > 0)
      PRNN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k.fn),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(k.smem_bytes)));
    // The warp-rows forward's projecting instantiation: all there is, for the W_ih rows
    // (fuses_input_projection says whether a layer's fit).
    if (pass == Pass::Forward && pass_kernel(tiling, true) == PassKernel::WarpRows) {
      const LaunchShape kp = kernel_for(pass, tiling, lengths, act, true);
      cudaFuncAttributes pattr{};
      PRNN_CUDA_CHECK(cudaFuncGetAttributes(&pattr, reinterpret_cast<const void*>(kp.fn)));
      PRNN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kp.fn),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem_optin - static_cast<int>(pattr.sharedSizeBytes)));
    }
    int per_sm = 0;
    PRNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, reinterpret_cast<const void*>(k.fn), k.threads, k.smem_bytes));
    if (static_cast<std::int64_t>(per_sm) * sms < k.ctas)
      return "the persistent kernel needs " + std::to_string(k.ctas) + " co-resident CTAs of " +
             std::to_string(k.threads) + " threads; the occupancy API reports room for " +
             std::to_string(per_sm) + " per SM on " + std::to_string(sms) + " SMs";
  }
  return {};
}

bool fuses_input_projection(const Tiling& tiling, std::int64_t input_size, Activation act,
                            int device) {
  if (!projects_input(tiling, input_size)) return false;
  int smem_optin = 0;
  PRNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  for (bool lengths : {false, true}) {
    const LaunchShape k = kernel_for(Pass::Forward, tiling, lengths, act, true);
    cudaFuncAttributes attr{};
    PRNN_CUDA_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k.fn)));
    if (k.smem_bytes + input_smem_bytes(tiling, input_size) + attr.sharedSizeBytes >
        static_cast<std::size_t>(smem_optin))
      return false;
  }
  return true;
}

void launch(Pass pass, const Tiling& tiling, const Params& params, cudaStream_t stream) {
  const bool projects = params.x != nullptr;
  if (projects && (pass != Pass::Forward || !projects_input(tiling, params.input_size) ||
                   reinterpret_cast<std::uintptr_t>(params.x) % 16 != 0))
    throw InternalError("persistent kernel: an input projection this launch cannot fuse");
  const LaunchShape k =
      kernel_for(pass, tiling, params.lengths != nullptr, params.act, projects);
  Params p = params;
  p.warp_records = k.warp_records;
  std::size_t smem = k.smem_bytes;
  if (projects) smem += input_smem_bytes(tiling, p.input_size);
  void* args[] = {&p};
  PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(
      reinterpret_cast<const void*>(k.fn), dim3(static_cast<unsigned>(k.ctas)),
      dim3(static_cast<unsigned>(k.threads)), args, smem, stream));
}

}  // namespace prnn::persistent
