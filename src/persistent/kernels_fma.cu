// The FMA persistent kernels (direct and staged) and their instantiation table: one layer
// direction, forward or backward data, every cell (contract in rnn_kernels.h; gate math in
// gemm_rnn/gates.cuh), NG = 1 (vanilla), 3 (GRU), 4 (LSTM) gates.
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
#include <cstdint>
#include <type_traits>

#include "gemm_rnn/activation.cuh"
#include "gemm_rnn/gates.cuh"
#include "persistent/kernel_common.cuh"
#include "persistent/kernel_tables.cuh"

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
  constexpr int kRows = kFwd && !kStaged ? NG * R : R;   // weight rows per thread
  constexpr int kGroups = kFwd || kStaged ? G : NG * G;  // record columns per thread
  constexpr int kN = kRows * BC;                         // partial sums per thread
  constexpr int kNP = (kN + 7) / 8 * 8;                  // padded for the reduce-scatter
  constexpr int kChunk = kNP / 8;
  constexpr int kMaxWarps = kMaxThreads / 32;
  constexpr int kUnitGroups = R / kR3;        // 3-unit groups a CTA finishes per batch element
  constexpr int kOutRecords = kFwd ? 1 : NG;  // records one 3-unit group publishes
  constexpr int kNF = kFwd ? NG : 1;          // matrix-vector sums per unit the finisher reads
  static_assert(R % kR3 == 0, "a CTA publishes whole records");
  constexpr int kWRows = kPacked ? (kRows + 1) / 2 : kRows;  // register rows of weights
  using WReg = std::conditional_t<kPacked, unsigned, float>;

  __shared__ float s_red[2][kMaxWarps][kNP];  // per-warp sums, double-buffered by chunk parity
  extern __shared__ float4 s_rec[];           // staged: the chunk's records [BC][K]
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
    const std::int64_t t =
        static_cast<std::int64_t>(p.t_first) + static_cast<std::int64_t>(s) * p.t_step;
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
          load_h0_record(p.h0, H, b, k, r);  // forward, s = 0
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
            // The last CTA's units may run past the last record.
            const int k = f_k * kOutRecords + i;
            if (k < K)
              store_record(
                  dst + static_cast<std::int64_t>(f_b) * K + k,
                  make_float4(v[kR3 * i], v[kR3 * i + 1], v[kR3 * i + 2], __uint_as_float(mine)));
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

// Sequence lengths are a separate instantiation: the per-row padding checks cost ~10% of a step
// (H=1152 B=4: 3.30 vs 3.03 µs), so the kernels without them carry none.
template <int I, bool L, Pass P>
struct FmaKernel {
  static constexpr KernelFn get() {
    constexpr KernelShape s = kShapes[I];
    return &persistent_rnn_kernel<s.gates, s.rows, s.groups, s.batch_chunk, s.max_threads,
                                  s.storage, s.staged, L, P>;
  }
};

}  // namespace

KernelFn fma_kernel(int shape, bool lengths, Pass pass) {
  return pick<FmaKernel, kShapeCount>(shape, lengths, pass);
}

}  // namespace prnn::persistent
