// The gated warp-rows kernels: GRU (NG = 3) and LSTM (NG = 4), one layer direction, forward and
// backward data (contract in rnn_kernels.h), for the small batches where a step is one chain of
// latencies. The forward first; the backward (its own contract) below. The vanilla
// warp-rows design (warp_rows_kernel.cuh: every warp owns whole rows, so no partial sums cross
// warps within a gate) with a record's NG·3 rows split by gate over NG warps. Measured against
// the FMA staged and tensor-core forwards, and a split by columns instead of by gate:
// docs/PERFORMANCE.md and bench/persistent/NOTES.md, "Gated warp rows".
//   Forward:  P_t = u_t + W_hh h_prev + biases (NG rows per unit), then the cell: LSTM c_t, h_t;
//             GRU h_t (kernel_common.cuh: the finisher, every store of the reserve)
// Layout:   as kernels_fma.cu: W_hh [NG·H, H] row-major (gate q of unit j is row q·H + j);
//           pre [T, B, NG·H]; exchange: two buffers (step parity) of [B, K] records,
//           K = ceil(H/3), record (b, k) = {h[b][3k], h[b][3k+1], h[b][3k+2], tag}, 0 past H.
// Launch:   cooperative, tiling.gated_warp_rows_ctas CTAs (≤ one per SM) of Wr·NG warps, Wr =
//           p.warp_records: warp w of CTA c owns record k = c·Wr + w % Wr and gate q = w / Wr,
//           i.e. rows q·H + 3k + r (r < 3) of W_hh; lane l holds the columns of records
//           l + 32·j, j < kRec: 9·kRec fp32 weights in registers (16-bit weights widened once,
//           exactly). Every warp takes the whole batch, BB ≥ B elements.
// Step:     the CTA's warps poll a share each of the step's records (slots j ≡ w (mod Wr·NG), at
//           most kOwn per batch element; one 16-byte load each, the stale ones reloaded, all in
//           flight) into shared memory; barrier 1 (all warps; it ORs their failures); each warp
//           its 9·kRec·BB FMAs and a warp reduce-scatter of its 3·BB sums (fixed order:
//           deterministic). The warps of gates 1..NG−1 leave theirs in shared memory, all warps
//           meet at barrier 2 (hand_over_sums), and lane 3i + c of the gate-0 warps finishes
//           (WS 16-bit: the product on tensor cores instead, GatedMma below: the records go to
//           shared memory as h's hi and lo, each warp its k-slice of every row, partial sums to
//           shared memory, barrier 2, and the finisher adds them)
//           unit c of batch element i: the cell with the NG
//           sums (biases kept in registers), the record of batch element i gathered into lane 3i
//           by shuffles and published, then every store of the unit (kernel_common.cuh).
// On chip:  the weights in registers; shared memory [2 (step parity)][BB][kRec][32] records
//           (dynamic; each parity's as two planes, float2 {x, y} then float z, the tag left
//           out: 3 wavefronts a warp's read, not 4) and [Wr][NG − 1][3·BB] sums.
// Sync:     none besides the tagged records and the CTA's two named barriers. Two record buffers
//           suffice: a warp publishes step s only after its CTA read all of step s−1, whose
//           producers published it only after reading all of step s−2. The sums need one: a
//           gate warp writes step s + 1's only after barrier 1 of step s + 1, which the gate-0
//           warps reach after reading step s's.
// Limits:   ceil(H/3) ≤ 32·kRec; B ≤ BB; ceil(kRec / (Wr·NG)) ≤ kOwn; 32·Wr·NG ≤ kMaxThreads; Wr ≤
//           kGatedWarpRowsMaxRecordWarps; every wait bounded by timeout_ns (then kStatusTimeout:
//           the warp still meets the CTA at barrier 1, which ORs the failures, and all leave).
//           Included by kernels_gated_warp_rows.cu only.
#pragma once

#include "persistent/kernel_common.cuh"

namespace prnn::persistent {

// A warp's weights: w[r][3j + c] for row row0 + r and column col = 3·(lane + 32j) + c of gate
// `gate`'s block of W_hh (forward: W_hh[gate·H + row0 + r][col]) or of W_hhᵀ (backward, kT:
// W_hh[gate·H + col][row0 + r]); zeros outside.
template <bool kT, int kRec>
__device__ __forceinline__ void load_gate_weights(const Params& p, int gate, int row0, int lane,
                                                  float (&w)[kR3][kR3 * kRec]) {
  const int H = p.hidden;
#pragma unroll
  for (int j = 0; j < kRec; ++j)
#pragma unroll
    for (int c = 0; c < kR3; ++c) {
      const int col = kR3 * (lane + 32 * j) + c;
#pragma unroll
      for (int r = 0; r < kR3; ++r) {
        const int row = row0 + r;
        const std::int64_t at = kT ? (static_cast<std::int64_t>(gate) * H + col) * H + row
                                   : (static_cast<std::int64_t>(gate) * H + row) * H + col;
        w[r][kR3 * j + c] = col < H && row < H ? p.w[at] : 0.0f;
      }
    }
}

// The warps of gates 1..NG−1 leave their warp sums (entry e = lane / kSpread in `sum`) in
// sums[gate − 1][e]; then every warp of the CTA syncs at barrier 2. The other gates only arrived
// there once (bar.arrive, going on to the next step's poll), which compute-sanitizer's racecheck
// reported as 1.6 M shared-memory hazards on the records behind barrier 1. Syncing everywhere is
// racecheck-clean and measured level or faster (H200, bench/results/h200/ab/gwr_sync/: LSTM f32
// H = 1152 B = 4 4.47 → 4.37 µs/step forward, GRU f32 B = 1 1.94 → 1.82; forward + backward at
// B = 2 1–2.3 % slower).
template <int kSums, int kSpread>
__device__ __forceinline__ void hand_over_sums(float (*sums)[kSums], int gate, int lane, float sum,
                                               int threads) {
  if (gate != 0 && lane % kSpread == 0 && lane / kSpread < kSums)
    sums[gate - 1][lane / kSpread] = sum;
  asm volatile("bar.sync 2, %0;" ::"r"(threads) : "memory");
}

// The gated warp-rows forward's product on tensor cores (16-bit weights, B ≤ 4): the CTA's
// kUnits = 3·Wr units (Wr = kMaxThreads / 32 / NG records, as the shapes give) have NG·kUnits
// rows of W_hh, CTA row r = q·kUnits + j being gate q of unit j, padded to kMT row tiles of 16,
// held as mma.sync m16n8k16 A fragments (16-bit, exact): warp w the k-tiles [w·kKT, (w+1)·kKT)
// of every row tile (72 A registers for LSTM Wr = 3). The polled records go to shared memory as
// h's 16-bit hi and lo (h = hi + lo to about 2^-16 relative), batch element i in row 2i (hi) and
// 2i + 1 (lo) of the mma's n tile, so one mma per fragment takes both products and each lane's
// accumulator pairs hold hi and lo of one batch element (lane tig: element tig), added in the
// lane (no shuffle); each warp's partial sums go to s_red [warp][row][batch]; the finisher adds
// the kWarps partial sums of each of its unit's gates in warp order (deterministic), the NG gates'
// loads all issued first. Against the FMAs: 18 mma and 12 B-fragment loads a warp and step (LSTM
// H = 1152) instead of 432 FFMA and 48 LDS.128.
template <int NG, int kRec, int kMaxThreads>
struct GatedMma {
  static constexpr int kWr = kMaxThreads / 32 / NG;  // gated_warp_rows_shape_records
  static constexpr int kWarps = kWr * NG;
  static constexpr int kUnits = kR3 * kWr;
  static constexpr int kMT = gated_mma_row_tiles(NG, kWr);
  static constexpr int kKT = gated_mma_k_tiles(NG, kWr, kRec);
  static constexpr int kStride = kWarps * kKT * 16 + kStagePad;  // a staged row, 16-bit elements

  template <DType WS>
  __device__ static void load_fragments(const Params& p, int unit0, int warp, int lane,
                                        unsigned (&a)[kMT][kKT][4]) {
    const int H = p.hidden, grp = lane >> 2, tig = lane & 3;
    const auto weight = [&](int r, int col) {
      const int q = r / kUnits, unit = unit0 + r % kUnits;
      if (r >= NG * kUnits || col >= H || unit >= H || warp >= kWarps) return 0.0f;
      return w_hh_at(p, (static_cast<std::int64_t>(q) * H + unit) * H + col);
    };
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt) {
        const int m = mt * 16 + grp, k = (warp * kKT + kt) * 16 + 2 * tig;
        a[mt][kt][0] = pack16<WS>(weight(m, k), weight(m, k + 1));
        a[mt][kt][1] = pack16<WS>(weight(m + 8, k), weight(m + 8, k + 1));
        a[mt][kt][2] = pack16<WS>(weight(m, k + 8), weight(m, k + 9));
        a[mt][kt][3] = pack16<WS>(weight(m + 8, k + 8), weight(m + 8, k + 9));
      }
  }

  // Record k of batch element i (its 3 units, zeros past H) as hi and lo (n rows 2i, 2i + 1).
  template <DType WS>
  __device__ static void stage_record(unsigned short* stage, int i, int k, const float4& r) {
    const float v[kR3] = {r.x, r.y, r.z};
#pragma unroll
    for (int c = 0; c < kR3; ++c) {
      unsigned short hi, lo;
      split16<WS>(v[c], hi, lo);
      stage[2 * i * kStride + kR3 * k + c] = hi;
      stage[(2 * i + 1) * kStride + kR3 * k + c] = lo;
    }
  }

  template <DType WS>
  __device__ static void products(const unsigned (&a)[kMT][kKT][4], const unsigned short* stage,
                                  float (*red)[16 * kMT][4], int warp, int lane) {
    const int grp = lane >> 2, tig = lane & 3;
    float acc[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.0f;
    if (warp < kWarps) {
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt) {
        const int at = grp * kStride + (warp * kKT + kt) * 16 + 2 * tig;
        const unsigned b0 = *reinterpret_cast<const unsigned*>(stage + at);
        const unsigned b1 = *reinterpret_cast<const unsigned*>(stage + at + 8);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) mma_16816<WS>(acc[mt], a[mt][kt], b0, b1);
      }
    }
    // Columns n = 2·tig (hi) and 2·tig + 1 (lo) of batch element tig, rows grp and grp + 8.
    if (warp < kWarps) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        red[warp][mt * 16 + grp][tig] = acc[mt][0] + acc[mt][1];
        red[warp][mt * 16 + grp + 8][tig] = acc[mt][2] + acc[mt][3];
      }
    }
  }

  // The NG sums of unit j (< kUnits, of the CTA) and batch element b, each over the warps in
  // order (0 where not `live`; b is clamped, so every lane's loads stay in s_red): all NG·kWarps
  // loads first, then NG independent chains, without a branch between the gates.
  __device__ static void gate_sums(const float (*red)[16 * kMT][4], int j, int b, bool live,
                                   float (&mv)[NG]) {
    const int bc = b < 4 ? b : 3;
    float v[NG][kWarps];
#pragma unroll
    for (int q = 0; q < NG; ++q)
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v[q][w] = red[w][q * kUnits + j][bc];
#pragma unroll
    for (int q = 0; q < NG; ++q) {
      float m = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) m += v[q][w];
      mv[q] = live ? m : 0.0f;
    }
  }
};

template <int NG, int kRec, int BB, int kOwn, int kMaxThreads, DType WS = DType::F32>
__global__ void __launch_bounds__(kMaxThreads, 1) gated_warp_rows_forward_kernel(const Params p) {
  static_assert(NG == 3 || NG == 4, "GRU or LSTM");
  // WS 16-bit: the step's product on tensor cores (GatedMma, below), else the FMAs.
  using Mma = GatedMma<NG, kRec, kMaxThreads>;
  constexpr bool kMma = WS != DType::F32;
  static_assert(!kMma || BB <= 4,
                "tensor cores: hi and lo of at most 4 batch elements in one n tile");
  constexpr unsigned kAll = 0xFFFFFFFFu;
  constexpr int kSums = kR3 * BB;  // sum e = 3i + r: row r of batch element i
  constexpr int kP = kSums <= 4 ? 4 : kSums <= 8 ? 8 : kSums <= 16 ? 16 : 32;
  constexpr int kSpread = 32 / kP;  // lanes that end with each sum
  static_assert(kSums <= 32, "one lane per unit and batch element");
  // The first poll of a step as straight-line predicated loads (kStraightPoll below) for the
  // GRU only: an H100 A/B (bench/results/h100/ab/gated_straight_poll/) measured the GRU
  // forward 8-9 % faster at H = 1152, B = 3..4 and the LSTM's 4-5 % slower there (its spills
  // grow from 20 to 32 bytes at B = 4).
  constexpr bool kStraightPoll = NG == 3;
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;
  __shared__ float s_sums[kGatedWarpRowsMaxRecordWarps][NG - 1][kSums];
  extern __shared__ float4 s_share[];  // [2][BB][kRec][32] float4s, each parity: xy then z planes
  // Tensor cores: h_{t-1} as 16-bit hi and lo rows, and the warps' partial sums (GatedMma).
  __shared__ __align__(16) unsigned short s_stage[kMma ? 8 * Mma::kStride : 1];
  __shared__ __align__(16) float s_red[kMma ? Mma::kWarps : 1][kMma ? 16 * Mma::kMT : 1][4];

  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int H = p.hidden, B = p.batch, K = (H + kR3 - 1) / kR3;
  const int Wr = p.warp_records, nwarps = static_cast<int>(blockDim.x) / 32;
  const int rr = warp % Wr, gate = warp / Wr;
  const int rec_k = static_cast<int>(blockIdx.x) * Wr + rr;  // the record this warp's rows are of
  const int row0 = rec_k * kR3;

  std::conditional_t<kMma, unsigned[Mma::kMT][Mma::kKT][4], float[kR3][kR3 * kRec]> w;
  if constexpr (kMma) {
    Mma::template load_fragments<WS>(p, static_cast<int>(blockIdx.x) * Mma::kUnits, warp, lane, w);
    for (int i = static_cast<int>(threadIdx.x); i < 8 * Mma::kStride;
         i += static_cast<int>(blockDim.x))
      s_stage[i] = 0;
  } else {
    load_gate_weights<false, kRec>(p, gate, row0, lane, w);
  }
  begin_launch(p, &s_epoch, &s_abort);
  __syncthreads();
  const unsigned epoch = s_epoch;

  // Lane 3i + c of a gate-0 warp finishes unit row0 + c of batch element i, every step.
  const int f_b = lane / kR3, f_row = row0 + lane % kR3;
  const bool finisher = gate == 0 && rec_k < K && lane < kSums && f_b < B && f_row < H;
  const bool publisher = gate == 0 && rec_k < K && lane < kSums && lane % kR3 == 0 && f_b < B;
  GateBias<NG> bias{};
  if (finisher) bias = load_gate_bias<NG>(p, f_row);

  for (int s = 0; s < p.steps; ++s) {
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

    // The finisher's inputs, loaded before the wait so that their latency hides in it.
    const bool f_pad = finisher && p.lengths != nullptr && t >= p.lengths[f_b];
    float u[NG] = {}, st = 0.0f;
    if (finisher) load_forward_unit<NG>(p, t, t_prev, first, f_b, f_row, u, st);

    float sum = 0.0f;  // the warp sum of entry lane / kSpread
    if (has_source) {
      // This warp's share of the step's records: slots j = warp + nwarps·m (m < kOwn) of every
      // batch element; slot j is record lane + 32j (tag `want`; at s = 0 h0, untagged; past
      // the end zeros that count as ready). All go to shared memory for every warp to read.
      // The vanilla warp-rows kernel polls the same way in its own copy: one function for both
      // moved its register allocation and cost it 0.02-0.04 µs/step at H = 1152, B = 1..4
      // (bench/results/h200/ab/poll_share_*: cur = the shared function, head = two copies).
      float4 own[BB][kOwn];
      if constexpr (kStraightPoll) {
        // Slot (i, m) holds a record (else it stays zeros tagged `want`: ready).
        auto held_slot = [&](int i, int m) {
          const int j = warp + nwarps * m;
          return j < kRec && lane + 32 * j < K && i < B;
        };
        // Record slot (i, m) of this lane lies at lane_at[i·K + 32·nwarps·m].
        const float4* const lane_at = src + (lane + 32 * warp);
        if (from_exchange) {
          // Straight-line predicated loads at a running pointer, all in flight (as the vanilla
          // warp rows' kStraightPoll).
          const float4* at_i = lane_at;
#pragma unroll
          for (int i = 0; i < BB; ++i, at_i += K) {
            const float4* at = at_i;
#pragma unroll
            for (int m = 0; m < kOwn; ++m, at += 32 * nwarps) {
              own[i][m] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
              load_record_if(held_slot(i, m), at, own[i][m]);
            }
          }
        } else {
#pragma unroll
          for (int i = 0; i < BB; ++i)
#pragma unroll
            for (int m = 0; m < kOwn; ++m) {
              const int k = lane + 32 * (warp + nwarps * m);
              own[i][m] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
              if (held_slot(i, m)) load_h0_record(p.h0, H, i, k, own[i][m]);
            }
        }
      } else {
#pragma unroll
        for (int i = 0; i < BB; ++i)
#pragma unroll
          for (int m = 0; m < kOwn; ++m) {
            const int j = warp + nwarps * m, k = lane + 32 * j;
            own[i][m] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
            if (j >= kRec || k >= K || i >= B) continue;
            if (from_exchange) {
              own[i][m] = load_record(src + static_cast<std::int64_t>(i) * K + k);
            } else {
              load_h0_record(p.h0, H, i, k, own[i][m]);
            }
          }
      }
      bool failed = false;
      if (from_exchange) {
        auto ready = [&] {
          bool r = true;
#pragma unroll
          for (int i = 0; i < BB; ++i)
#pragma unroll
            for (int m = 0; m < kOwn; ++m) r &= tagged(own[i][m], want);
          return __all_sync(kAll, r);
        };
        if (!ready()) {
          const std::uint64_t start = global_ns();
          for (unsigned spins = 1;; ++spins) {
#pragma unroll
            for (int i = 0; i < BB; ++i)
#pragma unroll
              for (int m = 0; m < kOwn; ++m) {
                const int k = lane + 32 * (warp + nwarps * m);
                if (!tagged(own[i][m], want))
                  own[i][m] = load_record(src + static_cast<std::int64_t>(i) * K + k);
              }
            if (ready()) break;
            if (spins % kSpinsPerCheck != 0) continue;
            // A warp that gives up still meets the CTA at barrier 1.
            if (warp_gives_up(start, p, &s_abort, lane)) {
              failed = true;
              break;
            }
          }
        }
      }
      if constexpr (kMma) {
        // The step's records as h's hi and lo rows (rows 2i and 2i + 1 of the n tile).
#pragma unroll
        for (int i = 0; i < BB; ++i)
#pragma unroll
          for (int m = 0; m < kOwn; ++m)
            if (warp + nwarps * m < kRec)
              Mma::template stage_record<WS>(s_stage, i, lane + 32 * (warp + nwarps * m),
                                             own[i][m]);
        if (barrier_any(1, 32 * nwarps, failed)) break;
        Mma::template products<WS>(w, s_stage, s_red, warp, lane);
        asm volatile("bar.sync 2, %0;" ::"r"(32 * nwarps) : "memory");
        if (gate != 0) continue;
      } else {
        // The step's records in shared memory as two planes (RecordPlanes).
        const RecordPlanes share(s_share + static_cast<std::int64_t>(s & 1) * BB * kRec * 32,
                                 BB * kRec * 32);
#pragma unroll
        for (int i = 0; i < BB; ++i)
#pragma unroll
          for (int m = 0; m < kOwn; ++m)
            if (warp + nwarps * m < kRec)
              share.put((i * kRec + warp + nwarps * m) * 32 + lane, own[i][m]);
        // Barrier 1 ORs the warps' failures, so that the CTA leaves together.
        if (barrier_any(1, 32 * nwarps, failed)) break;
        // Per sum, the terms in (record, column) order, then the reduce-scatter.
        float acc[kP];
#pragma unroll
        for (int e = 0; e < kP; ++e) acc[e] = 0.0f;
#pragma unroll
        for (int i = 0; i < BB; ++i)
#pragma unroll
          for (int j = 0; j < kRec; ++j) {
            float hv[kR3];
            share.get((i * kRec + j) * 32 + lane, hv);
#pragma unroll
            for (int c = 0; c < kR3; ++c)
#pragma unroll
              for (int r = 0; r < kR3; ++r)
                acc[kR3 * i + r] = fmaf(w[r][kR3 * j + c], hv[c], acc[kR3 * i + r]);
          }
        sum = warp_sum_scatter<kP>(acc, lane);
        hand_over_sums<kSums, kSpread>(s_sums[rr], gate, lane, sum, 32 * nwarps);
      }
    }
    if (gate != 0) continue;

    // Gate-0 warps: lane 3i + c finishes unit c of batch element i.
    float mv[NG];
    if constexpr (kMma) {
      Mma::gate_sums(s_red, 3 * rr + lane % kR3, lane / kR3, has_source && lane < kSums, mv);
    } else {
      mv[0] = __shfl_sync(kAll, sum, (lane * kSpread) & 31);  // this lane's entry, e = lane
#pragma unroll
      for (int q = 1; q < NG; ++q)
        mv[q] = has_source && lane < kSums ? s_sums[rr][q - 1][lane] : 0.0f;
    }
    UnitStep<NG> r{};
    if (finisher)
      r = compute_forward_unit<NG, gemm_rnn::RuntimeActivation, kMma>(p, t_prev, first, f_b, f_row,
                                                                      u, st, mv, 0.0f, f_pad,
                                                                      &bias);
    const float h = finisher ? r.h : 0.0f;
    const float h1 = __shfl_down_sync(kAll, h, 1), h2 = __shfl_down_sync(kAll, h, 2);
    if (publisher && s + 1 < p.steps)
      store_record(dst + static_cast<std::int64_t>(f_b) * K + rec_k,
                   make_float4(h, h1, h2, __uint_as_float(mine)));
    if (finisher) store_forward_unit<NG>(p, s, t, f_b, f_row, r, f_pad);
  }

  __syncthreads();
  if (threadIdx.x == 0) end_launch(p, epoch);
}

// The gated warp-rows backward's product on tensor cores (16-bit weights, BB = 4, 3 records per
// CTA: gated_warp_rows_has_backward_mma). The CTA's kUnits = 3·Wr units of dh are one row tile
// of W_hhᵀ (rows past kUnits zero). K is the exchanged dQ, gate-major as the records: column
// q·kGateCols + 4k + c is value c of record (q, k), c = 3 a zero pad, so that a record's hi and
// lo go to shared memory as one 8-byte store each (n rows 2i, 2i + 1 of batch element i). Warp w
// takes the k-tiles [w·kKT, (w+1)·kKT) (hold_fragments: the first kKR in registers, the last
// kKS in shared memory), in two accumulator chains (k-tile parity); its partial sums go to s_red
// [warp][unit][batch element] and the finisher adds the warps' in order (deterministic). Against
// the FMAs (bench/persistent/backward_staging_lab.cu): 32 mma and 64 B-fragment loads a warp
// and step instead of 432 FFMA a lane.
template <int NG, int kRec, int kMaxThreads>
struct GatedMmaT {
  static constexpr int kWr = kMaxThreads / 32 / NG;  // gated_warp_rows_shape_records
  static constexpr int kWarps = kWr * NG;
  static constexpr int kUnits = kR3 * kWr;
  static constexpr int kGateCols = 4 * 32 * kRec;  // a gate's padded columns
  static constexpr int kKT = gated_mma_backward_k_tiles(kWr, kRec);
  static constexpr int kKS = kGatedMmaBackwardSmemTiles;
  static constexpr int kKR = kKT - kKS;
  static constexpr int kStride = gated_mma_backward_stride(NG, kRec);  // a staged row, 16-bit
  static_assert(kUnits <= 16, "the CTA's units in one row tile");
  static_assert(kKT * 16 * kWarps == NG * kGateCols, "the k-tiles split evenly over the warps");
  static_assert(kKR > 0 && kKS % 2 == 0, "register tiles, shared-memory tiles in pairs");

  // The warp's fragments: rows (units of the CTA) grp and grp + 8, columns (warp·kKT + kt)·16 +
  // 2·tig + {0, 1, 8, 9}; A[m][col] = W_hh[q·H + 3k + c][unit0 + m], zeros at the pads and past H.
  template <DType WS>
  __device__ static void load_fragments(const Params& p, int unit0, int warp, int lane,
                                        unsigned (&reg)[1][kKR][4], uint4* smem) {
    const int H = p.hidden, grp = lane >> 2, tig = lane & 3;
    const auto weight = [&](int m, int col) {
      const int q = col / kGateCols, r = col % kGateCols, c = r % 4, j = kR3 * (r / 4) + c;
      const int unit = unit0 + m;
      if (m >= kUnits || c == 3 || j >= H || unit >= H) return 0.0f;
      return p.w[(static_cast<std::int64_t>(q) * H + j) * H + unit];
    };
    hold_fragments<kKS>(reg, smem, warp, lane, [&](unsigned (&a)[4], int kt, int) {
      const int k = (warp * kKT + kt) * 16 + 2 * tig;
      a[0] = pack16<WS>(weight(grp, k), weight(grp, k + 1));
      a[1] = pack16<WS>(weight(grp + 8, k), weight(grp + 8, k + 1));
      a[2] = pack16<WS>(weight(grp, k + 8), weight(grp, k + 9));
      a[3] = pack16<WS>(weight(grp + 8, k + 8), weight(grp + 8, k + 9));
    });
  }

  // Record (q, k) of batch element i as hi and lo, one 8-byte store each.
  template <DType WS>
  __device__ static void stage_record(unsigned short* stage, int i, int q, int k,
                                      const float4& r) {
    unsigned short h[kR3], l[kR3];
    split16<WS>(r.x, h[0], l[0]);
    split16<WS>(r.y, h[1], l[1]);
    split16<WS>(r.z, h[2], l[2]);
    const int at = q * kGateCols + 4 * k;
    *reinterpret_cast<uint2*>(stage + 2 * i * kStride + at) =
        make_uint2(h[0] | static_cast<unsigned>(h[1]) << 16, h[2]);
    *reinterpret_cast<uint2*>(stage + (2 * i + 1) * kStride + at) =
        make_uint2(l[0] | static_cast<unsigned>(l[1]) << 16, l[2]);
  }

  template <DType WS>
  __device__ static void products(const unsigned (&reg)[1][kKR][4], const uint4* smem,
                                  const unsigned short* stage, float (*red)[16][4], int warp,
                                  int lane) {
    const int grp = lane >> 2, tig = lane & 3;
    const unsigned short* b = stage + grp * kStride + warp * kKT * 16 + 2 * tig;
    const auto b_at = [&](int kt, unsigned& b0, unsigned& b1) {
      b0 = *reinterpret_cast<const unsigned*>(b + kt * 16);
      b1 = *reinterpret_cast<const unsigned*>(b + kt * 16 + 8);
    };
    float d[2][4] = {};
#pragma unroll
    for (int kt = 0; kt < kKR; ++kt) {
      unsigned b0, b1;
      b_at(kt, b0, b1);
      mma_16816<WS>(d[kt & 1], reg[0][kt], b0, b1);
    }
#pragma unroll 1
    for (int i = 0; i < kKS; i += 2) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint4 v = smem[(warp * kKS + i + e) * 32 + lane];
        const unsigned a[4] = {v.x, v.y, v.z, v.w};
        unsigned b0, b1;
        b_at(kKR + i + e, b0, b1);
        mma_16816<WS>(d[(kKR + e) & 1], a, b0, b1);
      }
    }
    // Columns 2·tig (hi) and 2·tig + 1 (lo) of batch element tig, rows grp and grp + 8.
    red[warp][grp][tig] = (d[0][0] + d[0][1]) + (d[1][0] + d[1][1]);
    red[warp][grp + 8][tig] = (d[0][2] + d[0][3]) + (d[1][2] + d[1][3]);
  }

  // W_hhᵀ dQ of unit j (< kUnits) and batch element b (< 4): the warps' partial sums in order,
  // all loads first.
  __device__ static float unit_sum(const float (*red)[16][4], int j, int b) {
    float v[kWarps];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v[w] = red[w][j][b];
    float m = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m += v[w];
    return m;
  }
};

// The gated warp-rows backward data: the forward's design over W_hhᵀ, whose NG·H columns (the
// exchanged dQ) are split by gate over the warps instead of its rows.
//   BackwardData:  dh = dy_t + Σ_q W_q,hhᵀ dQ_q,prev (+ dhn / the padding carry), then the cell's
//                  backward: dP_t, dQ_t (LSTM dQ = dP = the 4 gates' da; GRU dQ = da_hh), the carry
// Layout:   as kernels_fma.cu: W_hh [NG·H, H] row-major; pre (GRU: pre_h), dpre (GRU: dpre_h)
//           [T, B, NG·H]; LSTM cell [T, B, H]; exchange: two buffers (step parity) of [B, NG, K]
//           records, K = ceil(H/3): record (b, q, k) = {dQ_q[b][3k], dQ_q[b][3k+1], dQ_q[b][3k+2],
//           tag}, 0 past H (gate-major per batch element, unlike the FMA kernel's unit-major dQ).
// Launch:   as the forward: Wr·NG warps per CTA, warp w owns record k = c·Wr + w % Wr and gate
//           q = w / Wr: the rows 3k + r (r < 3) of W_hhᵀ restricted to gate q's columns, i.e.
//           w[r][3j + c] = W_hh[q·H + 3(l + 32j) + c][3k + r] in lane l: 9·kRec fp32 weights.
// Step:     the CTA's warps poll a share each of the step's NG·K records per batch element
//           (slots j ≡ w (mod Wr·NG) of NG·kRec, at most kOwn per batch element; kPoll = 2
//           batch elements at a time from BB = 2, so that the polled records fit the registers
//           beside the weights) into shared memory; barrier 1; each warp its 9·kRec·BB FMAs
//           over its gate's records and the reduce-scatter; gates 1..NG−1 leave their sums in
//           shared memory, barrier 2 (all warps), and lane 3i + c of the gate-0 warps
//           finishes unit c of batch element i: dh from the NG sums added in gate order, the
//           cell's backward, the NG records gathered into lane 3i and published, then the
//           unit's stores (kernel_common.cuh).
// On chip:  the weights in registers; shared memory [2 (step parity)][BB][NG][kRec][32] records
//           (192 KiB for LSTM at BB = 4; kPlanes, LSTM at BB = 2: as two planes, {x, y} then
//           float z, RecordPlanes) and [Wr][NG − 1][3·BB] sums.
// WS 16-bit (the LSTM at BB = 4, 3 records per CTA; gated_warp_rows_has_backward_mma): the
//           product on tensor cores instead (GatedMmaT above): W_hhᵀ as 16-bit A fragments, half
//           in registers and half in shared memory; the polled records staged as hi and lo rows
//           in shared memory (8 rows of gated_mma_backward_stride 16-bit values; 192 KiB of
//           dynamic shared memory with the fragments); the warps' partial sums in s_red, added
//           by the finishers in warp order.
// Sync:     as the forward (records of step s go out only after the CTA read all of step s−1).
// Limits:   ceil(H/3) ≤ 32·kRec; B ≤ BB; ceil(NG·kRec / (Wr·NG)) ≤ kOwn;
//           sequence lengths checked at run time; every wait bounded by timeout_ns (then
//           kStatusTimeout, and the CTA leaves together from barrier 1).
template <int NG, int kRec, int BB, int kOwn, int kMaxThreads, DType WS = DType::F32>
__global__ void __launch_bounds__(kMaxThreads, 1)
    gated_warp_rows_backward_kernel(const Params p) {
  static_assert(NG == 3 || NG == 4, "GRU or LSTM");
  // WS 16-bit: the step's product on tensor cores (GatedMmaT, above), else the FMAs.
  using Mma = GatedMmaT<NG, kRec, kMaxThreads>;
  constexpr bool kMma = WS != DType::F32;
  static_assert(!kMma || BB == 4, "tensor cores: hi and lo of 4 batch elements in one n tile");
  // Batch elements polled at once. Copying the records straight into shared memory instead
  // (cp.async, one round, no registers) measured slower: LSTM f32 H=1024 B=4 14.4 against 11.8
  // µs/step forward + backward (H100, bench/results/h100/gwr_bwd/cpasync_*).
  constexpr int kPoll = BB >= 2 ? 2 : 1;
  static_assert(BB % kPoll == 0, "whole poll rounds");
  constexpr unsigned kAll = 0xFFFFFFFFu;
  constexpr int kSums = kR3 * BB;  // sum e = 3i + r: row r of batch element i
  constexpr int kP = kSums <= 4 ? 4 : kSums <= 8 ? 8 : kSums <= 16 ? 16 : 32;
  constexpr int kSpread = 32 / kP;
  constexpr int kSlots = NG * kRec;  // record slots per batch element (gate-major)
  static_assert(kSums <= 32, "one lane per unit and batch element");
  // The step's records in shared memory as two planes (RecordPlanes) where an H200 A/B measured
  // them faster, else float4s (gated_warp_rows_backward_record_planes, tiling.h).
  constexpr bool kPlanes = gated_warp_rows_backward_record_planes(NG, BB);
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;
  __shared__ float s_sums[kGatedWarpRowsMaxRecordWarps][NG - 1][kSums];
  extern __shared__ float4 s_share[];  // [2][BB][NG][kRec][32] float4s, or as much as two planes
  // Tensor cores: the dynamic shared memory holds the staged dQ (8 rows of Mma::kStride 16-bit
  // values), then the warps' fragments of their shared-memory k-tiles; and the partial sums.
  __shared__ __align__(16) float s_red[kMma ? Mma::kWarps : 1][16][4];

  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int H = p.hidden, B = p.batch, K = (H + kR3 - 1) / kR3, KQ = NG * K;
  const int Wr = p.warp_records, nwarps = static_cast<int>(blockDim.x) / 32;
  const int rr = warp % Wr, gate = warp / Wr;
  const int rec_k = static_cast<int>(blockIdx.x) * Wr + rr;
  const int row0 = rec_k * kR3;

  unsigned short* const s_stage = reinterpret_cast<unsigned short*>(s_share);
  uint4* const s_frag = reinterpret_cast<uint4*>(s_stage + (kMma ? 8 * Mma::kStride : 0));
  std::conditional_t<kMma, unsigned[1][kMma ? Mma::kKR : 1][4], float[kR3][kR3 * kRec]> w;
  if constexpr (kMma) {
    Mma::template load_fragments<WS>(p, static_cast<int>(blockIdx.x) * Mma::kUnits, warp, lane, w,
                                     s_frag);
    // The pads (and rows nothing stages) must be zeros, not NaN, beside the fragments' zeros.
    for (int i = static_cast<int>(threadIdx.x); i < 8 * Mma::kStride;
         i += static_cast<int>(blockDim.x))
      s_stage[i] = 0;
  } else {
    load_gate_weights<true, kRec>(p, gate, row0, lane, w);
  }
  begin_launch(p, &s_epoch, &s_abort);
  __syncthreads();
  const unsigned epoch = s_epoch;

  const int f_b = lane / kR3, f_row = row0 + lane % kR3;
  const bool finisher = gate == 0 && rec_k < K && lane < kSums && f_b < B && f_row < H;
  const bool publisher = gate == 0 && rec_k < K && lane < kSums && lane % kR3 == 0 && f_b < B;
  const bool lengths = p.lengths != nullptr;

  for (int s = 0; s < p.steps; ++s) {
    const std::int64_t t = static_cast<std::int64_t>(p.t_first) + static_cast<std::int64_t>(s) * p.t_step;
    const std::int64_t t_prev = t + p.t_step;  // the step before in the forward order
    const bool first_fwd = s == p.steps - 1;
    stall_if_asked(p, s);
    const bool has_source = s > 0;
    const float4* src = p.exchange + static_cast<std::int64_t>((s - 1) & 1) * B * KQ;
    float4* dst = p.exchange + static_cast<std::int64_t>(s & 1) * B * KQ;
    const unsigned want = epoch + static_cast<unsigned>(s) - 1u;
    const unsigned mine = epoch + static_cast<unsigned>(s);

    // The finisher's inputs, loaded before the wait so that their latency hides in it.
    const bool f_pad = finisher && lengths && t >= p.lengths[f_b];
    BackwardUnitIn<NG> bin;
    if (finisher)
      bin = lengths ? load_backward_unit<NG, true>(p, s, t, t_prev, first_fwd, f_b, f_row)
                    : load_backward_unit<NG, false>(p, s, t, t_prev, first_fwd, f_b, f_row);

    float sum = 0.0f;  // the warp sum of entry lane / kSpread
    if (has_source) {
      // This warp's share: slots j = warp + nwarps·m (m < kOwn) of every batch element, slot j
      // the record (gate j / kRec, lane + 32·(j % kRec)); past the end zeros that count as ready.
      bool failed = false;
      float4* share = s_share + static_cast<std::int64_t>(s & 1) * BB * kSlots * 32;
#pragma unroll
      for (int i0 = 0; i0 < BB; i0 += kPoll) {
        float4 own[kPoll][kOwn];
        // Slot m's record offset within a batch element (-1: none), in one register each.
        int off[kOwn];
#pragma unroll
        for (int m = 0; m < kOwn; ++m) {
          const int j = warp + nwarps * m, k = lane + 32 * (j % kRec);
          off[m] = j < kSlots && k < K ? (j / kRec) * K + k : -1;
        }
        auto at = [&](int i, int m) {
          return src + static_cast<std::int64_t>(i0 + i) * KQ + off[m];
        };
        auto live = [&](int i, int m) { return off[m] >= 0 && i0 + i < B; };
#pragma unroll
        for (int i = 0; i < kPoll; ++i)
#pragma unroll
          for (int m = 0; m < kOwn; ++m)
            own[i][m] = live(i, m) ? load_record(at(i, m))
                                   : make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
        auto ready = [&] {
          bool r = true;
#pragma unroll
          for (int i = 0; i < kPoll; ++i)
#pragma unroll
            for (int m = 0; m < kOwn; ++m) r &= tagged(own[i][m], want);
          return __all_sync(kAll, r);
        };
        if (!failed && !ready()) {
          const std::uint64_t start = global_ns();
          for (unsigned spins = 1;; ++spins) {
#pragma unroll
            for (int i = 0; i < kPoll; ++i)
#pragma unroll
              for (int m = 0; m < kOwn; ++m)
                if (!tagged(own[i][m], want)) own[i][m] = load_record(at(i, m));
            if (ready()) break;
            if (spins % kSpinsPerCheck != 0) continue;
            if (warp_gives_up(start, p, &s_abort, lane)) {
              failed = true;
              break;
            }
          }
        }
        if constexpr (kMma) {
#pragma unroll
          for (int i = 0; i < kPoll; ++i)
#pragma unroll
            for (int m = 0; m < kOwn; ++m) {
              const int j = warp + nwarps * m;
              if (j < kSlots)
                Mma::template stage_record<WS>(s_stage, i0 + i, j / kRec, lane + 32 * (j % kRec),
                                               own[i][m]);
            }
        } else {
#pragma unroll
          for (int i = 0; i < kPoll; ++i)
#pragma unroll
            for (int m = 0; m < kOwn; ++m)
              if (warp + nwarps * m < kSlots)
                write_share<kPlanes>(share, BB * kSlots * 32,
                                     ((i0 + i) * kSlots + warp + nwarps * m) * 32 + lane,
                                     own[i][m]);
        }
      }
      if (barrier_any(1, 32 * nwarps, failed)) break;
      if constexpr (kMma) {
        Mma::template products<WS>(w, s_frag, s_stage, s_red, warp, lane);
        asm volatile("bar.sync 2, %0;" ::"r"(32 * nwarps) : "memory");
      } else {
        // Per sum, the terms in (record, column) order over this warp's gate, then the
        // reduce-scatter.
        float acc[kP];
#pragma unroll
        for (int e = 0; e < kP; ++e) acc[e] = 0.0f;
#pragma unroll
        for (int i = 0; i < BB; ++i)
#pragma unroll
          for (int j = 0; j < kRec; ++j) {
            float dq[kR3];
            read_share<kPlanes>(share, BB * kSlots * 32, (i * kSlots + gate * kRec + j) * 32 + lane,
                                dq);
#pragma unroll
            for (int c = 0; c < kR3; ++c)
#pragma unroll
              for (int r = 0; r < kR3; ++r)
                acc[kR3 * i + r] = fmaf(w[r][kR3 * j + c], dq[c], acc[kR3 * i + r]);
          }
        sum = warp_sum_scatter<kP>(acc, lane);
        hand_over_sums<kSums, kSpread>(s_sums[rr], gate, lane, sum, 32 * nwarps);
      }
    }
    if (gate != 0) continue;

    // Gate-0 warps: lane 3i + c finishes unit c of batch element i; W_hhᵀ dQ added in gate order
    // (tensor cores: the warps' partial sums in warp order).
    float mv;
    if constexpr (kMma) {
      mv = has_source && lane < kSums ? Mma::unit_sum(s_red, kR3 * rr + lane % kR3, lane / kR3)
                                      : 0.0f;
    } else {
      mv = __shfl_sync(kAll, sum, (lane * kSpread) & 31);
#pragma unroll
      for (int q = 1; q < NG; ++q)
        mv += has_source && lane < kSums ? s_sums[rr][q - 1][lane] : 0.0f;
    }
    BackwardUnitOut<NG> o{};
    // σ with its slow-path branch for the LSTM at BB = 1 and 4, where the branch-free form
    // measured slower (compute_backward_unit).
    if (finisher)
      o = compute_backward_unit<NG, gemm_rnn::RuntimeActivation, !(NG == 4 && BB != 2)>(p, bin, mv,
                                                                                       f_pad);
    if (s + 1 < p.steps) {
#pragma unroll
      for (int q = 0; q < NG; ++q) {
        const float v = finisher ? o.dq[q] : 0.0f;
        const float v1 = __shfl_down_sync(kAll, v, 1), v2 = __shfl_down_sync(kAll, v, 2);
        if (publisher)
          store_record(dst + static_cast<std::int64_t>(f_b) * KQ + q * K + rec_k,
                       make_float4(v, v1, v2, __uint_as_float(mine)));
      }
    }
    if (finisher) {
      if (lengths) store_backward_unit<NG, true>(p, t, f_b, f_row, o);
      else store_backward_unit<NG, false>(p, t, f_b, f_row, o);
    }
  }

  __syncthreads();
  if (threadIdx.x == 0) end_launch(p, epoch);
}

}  // namespace prnn::persistent
