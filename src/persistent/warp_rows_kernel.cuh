// The warp-rows persistent kernel: vanilla cells (NG = 1), one layer direction, forward or
// backward data (contract in rnn_kernels.h), for the small batches where a step is one chain of
// latencies. Every warp owns whole rows, so a step needs no CTA reduction, barrier or finishing
// threads (bench/persistent/NOTES.md, "Rows per warp").
//   Forward:       a_t = u_t + W_hh h_prev + b_ih + b_hh, h_t = act(a_t); u_t = (W_ih x)_t read
//                  from pre, or, with p.x set, computed here (kInput: the input projection below)
//   BackwardData:  dh = dy_t + W_hhᵀ dQ_prev (+ dhn / the padding carry), dQ_t = dh ⊙ act'(a_t)
//                  (act' from h_t); the activation A is a template parameter
// Layout:   as kernels_fma.cu: W_hh [H, H] row-major; pre/dpre [T, B, H]; out, dy rows strided;
//           exchange: two buffers (step parity) of [B, K] records, K = ceil(H/3), record (b, k)
//           = {v[b][3k], v[b][3k+1], v[b][3k+2], tag} (h forward, dQ backward; 0 past H).
// Launch:   cooperative, tiling.warp_rows_ctas CTAs (≤ one per SM) of W·G warps, W =
//           p.warp_records, G = warps / W: warp w of CTA c owns record k = c·W + w % W, i.e. the
//           3 units [3k, 3k + 3): rows 3k.. of W_hh (forward) or of W_hhᵀ (backward), for the
//           batch elements g + G·i, i < BB, of its batch group g = w / W. Lane l holds the
//           columns of records l + 32·j, j < kRec + kSmem: 9·kRec fp32 weights in registers,
//           and (the wide shapes, kSmem > 0: layers past H = 1152) 9·kSmem in shared memory.
// Step:     the W warps of a batch group need the same records: each polls a W-th of them
//           (record slots j ≡ w (mod W), at most kOwn per batch element; one 16-byte load each,
//           the stale ones reloaded, all in flight) and leaves them in shared memory, a named
//           barrier per group (W warps), then every warp reads all its records from there as
//           its FMAs need them (so registers hold only the polled share). So a CTA reads each
//           record from L2 once: with every warp reading all of them, the L2 reads (W·B·K·16
//           bytes per SM and step) were the step's limit (NOTES.md, "Rows per warp": 2.1 →
//           1.0–1.7 µs/step at H = 1152). Then each warp does its 9·(kRec + kSmem)·BB FMAs (a
//           held slot's 9 weights loaded from shared memory once for its BB), sums its 3·BB
//           partial sums across the warp (fixed trees: deterministic) and finishes batch element
//           g + G·i in lane i (BB = 1, 3: a butterfly of every sum, one finishing branch per batch
//           element) or in lane i·32/BB (BB = 2, 4: one reduce-scatter over the batch elements
//           leaves each element's sums in its own lanes, and the BB finishers run in one branch):
//           its 3 units' cell math (kernel_common.cuh) and the record (tag epoch + s). Then the
//           step's other stores, spread over the warp: lane 3i + c stores unit c of batch element
//           g + G·i, so each tensor takes one store instruction per warp (B = 6, 8: 0.25 µs/step
//           less).
// Input:    (forward, p.x set: the kInput instantiation) the kernel computes u_t = W_ih x_t
//           itself, so the call needs no input GEMM. A separate instantiation, so that the kernel
//           without it carries none of its code: as a run-time branch it made every forward
//           step 1.5-9.5 % slower at H = 1152, B = 1..12 (NOTES.md, "The input projection in the
//           kernel"). The CTA's W_ih rows (its records' 3 rows each) stay in shared memory; x_t
//           arrives there one step ahead: during step s each warp of a batch group copies a W-th
//           of the group's rows of x_{t+1} (cp.async, 16 bytes a lane, no registers) and waits for
//           its copies before the group's barrier, which makes them the group's. A warp issues
//           its record polls first, then adds its rows' W_ih x_t to its partial sums from shared
//           memory, so the projection runs while the records are on their way
//           (bench/persistent/NOTES.md, "The input projection in the kernel"). Lane l takes the
//           columns 4·(l + 32j) .. + 3 (I % 4 == 0, x 16-byte aligned: the host's condition).
//           The sum's order is fixed: projection terms, then W_hh's.
// On chip:  the weights in registers (staged through shared memory first, but for kInput:
//           stage_weights below); shared memory: the held weights [W][kSmem][9][32] fp32 (the
//           CTA's, shared by its batch groups), then [2 (step parity)][G][BB][kRec + kSmem][32]
//           records (warp_rows_smem_bytes in tiling.h; each group's as two planes, float2
//           {x, y} then float z, the tag left out; float4s where kPlanes is false),
//           then, projecting, [W][3][nch][32] float4 of W_ih and [2 (step parity)][G][BB][nch][32]
//           float4 of x, nch = ceil(I / 128) (warp_rows_input_smem_bytes).
// Sync:     none besides the tagged records. Two buffers suffice: a warp publishes its record of
//           step s for batch element b only after reading all of b's records of step s−1, whose
//           producers published them only after reading all of b's records of step s−2.
// Limits:   ceil(H/3) ≤ 32·(kRec + kSmem); B ≤ G·BB; ceil((kRec + kSmem) / W) ≤ kOwn; G ≤ 15
//           (named barriers 1..G); no kInput form with kSmem > 0;
//           every wait bounded by timeout_ns (then kStatusTimeout: the warp still meets its
//           group at the barrier, which ORs the warps' failures, and the whole group leaves).
//           Included by warp_rows_table.cuh only.
#pragma once

#include "persistent/kernel_common.cuh"

namespace prnn::persistent {

// The kernel's weights: the CTA's block of W_hh staged through shared memory
// `s` (tiling.h: warp_rows_weight_smem_bytes) with asynchronous copies, so that every load from
// global memory is coalesced and all of a thread's are in flight at once; then each warp fills
// its registers from there: w[r][3j + c] for column col = 3·(lane + 32j) + c and unit
// unit0 + 3·ur + r: W_hh[unit][col] (forward) or, kT, W_hh[col][unit] (W_hhᵀ, the backward
// data). Zeros outside. The CTA holds units [unit0, unit0 + U). Forward: s[u·Hp + col] (Hp = H
// rounded up to 4; 16-byte copies where H % 4 == 0 and W_hh is 16-byte aligned); backward: s[col·U
// + u] (a row's U units contiguous). Loaded straight from global memory, a warp's transposed
// weights took one L1 wavefront per lane and load (32 scattered rows), and the backward's launch
// took about 19 µs more than the forward's (ReLU H = 1152, B = 4, H100: bench/persistent/NOTES.md,
// "The backward's weights"). A wide shape's slots past kRec go from there to `held`
// ([kSmem][9][32] for this warp's units, entry (i·9 + 3c + r)·32 + lane: column 3·(lane + 32·(kRec
// + i)) + c, unit 3·ur + r), written where `fill` (one warp per record: the held weights are the
// CTA's, not a batch group's). Every thread of the CTA calls it; it syncs the CTA twice.
template <bool kT, int kRec, int kSmem>
__device__ __forceinline__ void stage_weights(const Params& p, float* s, int unit0, int U, int ur,
                                              int lane, float (&w)[kR3][kR3 * kRec], float* held,
                                              bool fill) {
  const int H = p.hidden, Hp = (H + 3) & ~3;
  auto copy = [](float* to, const float* from, int bytes, int valid) {
    const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(to));
    if (bytes == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at), "l"(from), "r"(valid)
                   : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(at), "l"(from), "r"(valid)
                   : "memory");
  };
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  if (!kT && H % 4 == 0 && reinterpret_cast<std::uintptr_t>(p.w) % 16 == 0) {
    for (int e = tid; e < U * Hp / 4; e += nt) {  // 4 columns of row unit0 + u each
      const int u = e / (Hp / 4), col = 4 * (e % (Hp / 4)), unit = unit0 + u;
      const bool in = unit < H;
      copy(s + 4 * e, in ? p.w + static_cast<std::int64_t>(unit) * H + col : p.w, 16, in ? 16 : 0);
    }
  } else {
    for (int e = tid; e < U * Hp; e += nt) {
      const int u = kT ? e % U : e / Hp, col = kT ? e / U : e % Hp, unit = unit0 + u;
      const bool in = unit < H && col < H;
      const float* from = !in  ? p.w
                          : kT ? p.w + static_cast<std::int64_t>(col) * H + unit
                               : p.w + static_cast<std::int64_t>(unit) * H + col;
      copy(s + e, from, 4, in ? 4 : 0);
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  // The staged weight of this lane's slot j, column c and row r.
  auto staged = [&](int j, int c, int r) {
    const int col = kR3 * (lane + 32 * j) + c, u = kR3 * ur + r;
    return col >= H ? 0.0f : kT ? s[col * U + u] : s[u * Hp + col];
  };
#pragma unroll
  for (int j = 0; j < kRec; ++j)
#pragma unroll
    for (int c = 0; c < kR3; ++c)
#pragma unroll
      for (int r = 0; r < kR3; ++r) w[r][kR3 * j + c] = staged(j, c, r);
  if (fill)
    for (int i = 0; i < kSmem; ++i)
#pragma unroll
      for (int c = 0; c < kR3; ++c)
#pragma unroll
        for (int r = 0; r < kR3; ++r)
          held[(i * kR3 * kR3 + kR3 * c + r) * 32 + lane] = staged(kRec + i, c, r);
  __syncthreads();
}

template <int kRec, int kSmem, int BB, int kMaxThreads, int kOwn, Activation A, bool kLengths,
          Pass P, bool kInput>
__global__ void __launch_bounds__(kMaxThreads, 1) warp_rows_kernel(const Params p) {
  constexpr bool kFwd = P == Pass::Forward;
  constexpr int kSlots = kRec + kSmem;  // record slots a lane covers
  // BB = 2, 4: the sums reduce-scattered over the batch elements, so that lanes [i·kSpan,
  // (i + 1)·kSpan) end with batch element i's and the BB finishers run at once. BB = 1 (nothing
  // to scatter) and BB = 3 (a padded fourth group, and spills at 168 registers: 12-18 % slower)
  // keep the butterfly of every sum, lane i finishing batch element i.
  constexpr bool kScatter = BB == 2 || BB == 4;
  // The step's records through shared memory as two planes, {x, y} and z: a warp's read of a
  // record is 384 bytes (3 wavefronts), not a float4's 512. H200, µs/step: ReLU f32 H = 1152
  // B = 4 1.648 / 4.059 → 1.548 / 3.917 forward / forward + backward. Not where the same A/B
  // measured float4s faster (bench/results/h200/ab/record_planes/, two runs, every activation and
  // weight type): the wide shapes at BB = 3 (H = 2048 B = 3 forward 4-8 %, ReLU 2.607 → 2.821
  // with TF32 GEMMs, the same registers and no spills), the wide backward at BB = 4 (H = 2048
  // B = 4, 0.05-0.14 µs/step), and the backward of the kRec = 12 shapes at BB = 1 of at most 256
  // threads (H = 1152 B = 1, 2: 0.03-0.07 µs/step).
  constexpr bool kPlanes = warp_rows_record_planes(kRec, kSmem, BB, kMaxThreads, kFwd);
  // The first poll of a step as straight-line predicated loads (load_record_if), not a branch
  // per slot: 3-10 % faster forward at H = 1152, B = 1..4 (H100). Not where the wide shapes
  // scatter (their forward 2-6 % slower at 255 registers), nor in the wide backward (5-9 %
  // slower, 27-35 % at BB = 4, whose spills grow by 52 bytes). NOTES.md, "The straight poll".
  constexpr bool kStraightPoll = kSmem == 0 || (kFwd && !kScatter);
  constexpr int kSpan = kScatter ? 32 / BB : 1;  // lanes from one finisher to the next
  // Where batch element i's sum of row r lies in acc: acc[i·kAtI + r·kAtR] (grouped by batch
  // element to scatter them; else the layout the unscattered shapes were tuned with).
  constexpr int kAtI = kScatter ? kR3 : 1, kAtR = kScatter ? 1 : BB;
  static_assert(kFwd || !kInput, "only the forward projects its input");
  static_assert(kSmem == 0 || !kInput, "the wide shapes have no input projection");
  using Act = gemm_rnn::StaticActivation<A>;  // compiled in (NOTES.md, "The B = 1 gap")
  constexpr unsigned kAll = 0xFFFFFFFFu;
  __shared__ unsigned s_epoch;
  __shared__ int s_abort;
  extern __shared__ float4 s_dynamic[];  // held weights [W][kSmem][9][32] fp32, then s_share

  // The scattering shapes read their lane once (lane_id: NVVM recomputed threadIdx.x & 31 at
  // its uses there); the others keep the register it would take (BB = 3 spilled 70 bytes more).
  const int lane = kScatter ? lane_id() : static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int H = p.hidden, B = p.batch, K = (H + kR3 - 1) / kR3;
  const int W = p.warp_records, G = static_cast<int>(blockDim.x) / 32 / W;
  const int rec_k = static_cast<int>(blockIdx.x) * W + warp % W;  // the record this warp owns
  const int row0 = rec_k * kR3, bg = warp / W, part = warp % W;
  // The wide shapes' weights in shared memory (this warp's: [kSmem][9][32]), then the records,
  // [2][G][BB][kSlots][32].
  float* const s_held = reinterpret_cast<float*>(s_dynamic) + part * kSmem * kR3 * kR3 * 32;
  float4* const s_share = s_dynamic + W * kSmem * kR3 * kR3 * 32 / 4;
  const float* const held = s_held + lane;

  // The weights: w[r][3j + c] is row row0 + r, column 3·(lane + 32j) + c of W_hh (forward) or
  // of W_hhᵀ (backward); zeros outside. Staged through the shared memory the records use later,
  // except where the kernel projects its input (T ≤ 4): there each lane loads its own, all in
  // flight, while the staging waits twice for the CTA (+1.0–2.6 µs per call at T = 1, H = 1152,
  // B = 1..8; bench/persistent/NOTES.md, "The backward's weights").
  float w[kR3][kR3 * kRec];
  if constexpr (kInput) {
#pragma unroll
    for (int j = 0; j < kRec; ++j)
#pragma unroll
      for (int c = 0; c < kR3; ++c)
#pragma unroll
        for (int r = 0; r < kR3; ++r) {
          const int col = kR3 * (lane + 32 * j) + c, row = row0 + r;
          w[r][kR3 * j + c] =
              col < H && row < H ? p.w[static_cast<std::int64_t>(row) * H + col] : 0.0f;
        }
  } else {
    stage_weights<!kFwd, kRec, kSmem>(p, reinterpret_cast<float*>(s_share),
                                      static_cast<int>(blockIdx.x) * W * kR3, W * kR3, part, lane,
                                      w, s_held, bg == 0);
  }
  // The input projection's W_ih rows: entry ((w·3 + r)·nch + j)·32 + l is row 3·(c·W + w) + r,
  // columns 4·(l + 32j) .. + 3 (zeros outside); filled by the whole CTA once.
  constexpr bool project = kInput;  // p.x set (the host's launch picks this instantiation)
  const int I = p.input_size, nch = (I + 127) / 128;
  float4* s_wih = s_share + static_cast<std::int64_t>(2) * G * BB * kSlots * 32;
  float4* s_x = s_wih + static_cast<std::int64_t>(W) * kR3 * nch * 32;  // [2][G][BB][nch][32]
  if (project) {
    const int total = W * kR3 * nch * 32;
    for (int e = static_cast<int>(threadIdx.x); e < total; e += static_cast<int>(blockDim.x)) {
      const int l = e % 32, j = e / 32 % nch, r = e / (32 * nch) % kR3, wr = e / (32 * nch * kR3);
      const int row = (static_cast<int>(blockIdx.x) * W + wr) * kR3 + r, col = 4 * (l + 32 * j);
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (row < H && col < I) {
        const float* at = p.w_ih + static_cast<std::int64_t>(row) * I + col;
        v = make_float4(at[0], at[1], at[2], at[3]);
      }
      s_wih[e] = v;
    }
  }
  // This warp's share of its group's rows of x at time t into x buffer `parity`: chunks
  // j ≡ part (mod W) of each batch element bg + G·i (zeros past I), asynchronously.
  auto copy_x = [&](std::int64_t t, int parity) {
    float4* to = s_x + (static_cast<std::int64_t>(parity) * G + bg) * BB * nch * 32 + lane;
    for (int i = 0; i < BB; ++i) {
      const int b = bg + G * i;
      if (b >= B) break;
      const float* row = p.x + (t * B + b) * I;
      for (int j = part; j < nch; j += W) {
        const int col = 4 * (lane + 32 * j);
        const unsigned dst =
            static_cast<unsigned>(__cvta_generic_to_shared(to + (i * nch + j) * 32));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst),
                     "l"(row + (col < I ? col : 0)), "r"(col < I ? 16 : 0)
                     : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  auto wait_x = [] { asm volatile("cp.async.wait_all;" ::: "memory"); };
  // This warp's 3 rows of W_ih x_t (x buffer `parity`) added to its sums.
  auto add_projection = [&](float (&acc)[kR3 * BB], int parity) {
    const float4* wrow = s_wih + static_cast<std::int64_t>(part) * kR3 * nch * 32 + lane;
    const float4* xrow = s_x + (static_cast<std::int64_t>(parity) * G + bg) * BB * nch * 32 + lane;
#pragma unroll 3
    for (int j = 0; j < nch; ++j) {
      float4 xv[BB];
#pragma unroll
      for (int i = 0; i < BB; ++i) xv[i] = xrow[(i * nch + j) * 32];
#pragma unroll
      for (int q = 0; q < kR3; ++q) {
        const float4 wv = wrow[(q * nch + j) * 32];
#pragma unroll
        for (int i = 0; i < BB; ++i) {
          float a = acc[i * kAtI + q * kAtR];
          a = fmaf(wv.x, xv[i].x, a);
          a = fmaf(wv.y, xv[i].y, a);
          a = fmaf(wv.z, xv[i].z, a);
          a = fmaf(wv.w, xv[i].w, a);
          acc[i * kAtI + q * kAtR] = a;
        }
      }
    }
  };
  if (project) {
    copy_x(p.t_first, 0);
    wait_x();  // the __syncthreads below makes every warp's copies the CTA's
  }
  begin_launch(p, &s_epoch, &s_abort);
  __syncthreads();
  const unsigned epoch = s_epoch;

  // Lane f_i·kSpan (f_i < BB) finishes batch element f_b = bg + G·f_i of the warp's 3 units
  // (where the step's reduction leaves that element's sums). A warp whose record lies past the
  // last one (in the last CTA) has no rows: it only polls its share of the records.
  const int f_i = lane / kSpan, f_b = bg + G * f_i;
  const bool finisher = rec_k < K && lane % kSpan == 0 && f_i < BB && f_b < B;
  float bias[kR3] = {};
  if constexpr (kFwd) {
#pragma unroll
    for (int c = 0; c < kR3; ++c) {
      const int row = row0 + c;
      if (finisher && row < H) bias[c] = p.b_ih[row] + p.b_hh[row];  // the GEMM-RNN's order
    }
  }

  for (int s = 0; s < p.steps; ++s) {
    const std::int64_t t = static_cast<std::int64_t>(p.t_first) + static_cast<std::int64_t>(s) * p.t_step;
    const std::int64_t t_prev = kFwd ? t - p.t_step : t + p.t_step;  // as kernels_fma.cu
    const bool first_fwd = kFwd ? s == 0 : s == p.steps - 1;
    stall_if_asked(p, s);
    const bool from_exchange = s > 0;
    const bool has_source = from_exchange || (kFwd && p.h0 != nullptr);
    const float4* src = p.exchange + static_cast<std::int64_t>((s - 1) & 1) * B * K;
    float4* dst = p.exchange + static_cast<std::int64_t>(s & 1) * B * K;
    const unsigned want = epoch + static_cast<unsigned>(s) - 1u;
    const unsigned mine = epoch + static_cast<unsigned>(s);

    // The finisher's inputs, loaded before the wait so that their latency hides in it.
    const bool f_pad = finisher && kLengths && t >= p.lengths[f_b];
    float u[kR3] = {};
    BackwardUnitIn<1> bin[kFwd ? 1 : kR3];
    if (finisher) {
#pragma unroll
      for (int c = 0; c < kR3; ++c) {
        const int row = row0 + c;
        if (row >= H) continue;
        if constexpr (kFwd) {
          if (project) continue;  // u_t is in the partial sums
          float uc[1], st = 0.0f;
          load_forward_unit<1>(p, t, t_prev, first_fwd, f_b, row, uc, st);
          u[c] = uc[0];
        } else {
          bin[c] = load_backward_unit<1, kLengths>(p, s, t, t_prev, first_fwd, f_b, row);
        }
      }
    }

    // The partial sums, batch element i's row r at acc[i·kAtI + r·kAtR].
    float acc[kR3 * BB];
#pragma unroll
    for (int i = 0; i < kR3 * BB; ++i) acc[i] = 0.0f;
    // The next step's x rows, copied while this step runs (the other buffer: its last readers
    // were past the group's barrier of the step before).
    if (project && s + 1 < p.steps) copy_x(t + p.t_step, (s + 1) & 1);
    if (has_source) {
      // This warp's share of the step's records: slots j = part + W·m (m < kOwn) of each of its
      // batch elements bg + G·i; slot j is record lane + 32j (tag `want`; at s = 0 the forward's
      // h0, untagged; past the end zeros that count as ready). All of them go to shared memory,
      // where every warp of the group reads the whole set.
      float4 own[BB][kOwn];
      if constexpr (kStraightPoll) {
        // Slot (i, m) holds a record (else it stays zeros tagged `want`: ready).
        auto held_slot = [&](int i, int m) {
          const int j = part + W * m;
          return j < kSlots && lane + 32 * j < K && bg + G * i < B;
        };
        if (from_exchange) {
          // Straight-line predicated loads at a running pointer, all in flight (a branch and
          // the 64-bit address from scratch took about 14 instructions a slot at H = 2048,
          // B = 4). Slot (i, m) lies i·G·K + 32·W·m records past slot (0, 0).
          const float4* at_i = src + (bg * K + lane + 32 * part);
#pragma unroll
          for (int i = 0; i < BB; ++i, at_i += G * K) {
            const float4* at = at_i;
#pragma unroll
            for (int m = 0; m < kOwn; ++m, at += 32 * W) {
              own[i][m] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
              load_record_if(held_slot(i, m), at, own[i][m]);
            }
          }
        } else {
#pragma unroll
          for (int i = 0; i < BB; ++i)
#pragma unroll
            for (int m = 0; m < kOwn; ++m) {
              own[i][m] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
              if (held_slot(i, m))
                load_h0_record(p.h0, H, bg + G * i, lane + 32 * (part + W * m), own[i][m]);
            }
        }
      } else {
#pragma unroll
        for (int i = 0; i < BB; ++i)
#pragma unroll
          for (int m = 0; m < kOwn; ++m) {
            const int j = part + W * m, k = lane + 32 * j, b = bg + G * i;
            own[i][m] = make_float4(0.0f, 0.0f, 0.0f, __uint_as_float(want));
            if (j >= kSlots || k >= K || b >= B) continue;
            if (from_exchange) {
              own[i][m] = load_record(src + static_cast<std::int64_t>(b) * K + k);
            } else {
              load_h0_record(p.h0, H, b, k, own[i][m]);
            }
          }
      }
      // The input projection while the polls are in flight.
      if (project) add_projection(acc, s & 1);
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
                const int k = lane + 32 * (part + W * m);
                if (!tagged(own[i][m], want))
                  own[i][m] = load_record(src + static_cast<std::int64_t>(bg + G * i) * K + k);
              }
            if (ready()) break;
            if (spins % kSpinsPerCheck != 0) continue;
            // A warp that gives up still meets its group at the barrier below.
            if (warp_gives_up(start, p, &s_abort, lane)) {
              failed = true;
              break;
            }
          }
        }
      }
      // The group's records through shared memory (each lane its own column of slots; kPlanes
      // above: as two planes, RecordPlanes).
      float4* share = s_share + (static_cast<std::int64_t>(s & 1) * G + bg) * BB * kSlots * 32;
#pragma unroll
      for (int i = 0; i < BB; ++i)
#pragma unroll
        for (int m = 0; m < kOwn; ++m)
          if (part + W * m < kSlots) {
            write_share<kPlanes>(share, BB * kSlots * 32, (i * kSlots + part + W * m) * 32 + lane,
                                 own[i][m]);
          }
      if (project) wait_x();  // this warp's copies of x_{t+1} in, before the group's barrier
      // The barrier also ORs the warps' failures, so that the group leaves together.
      if (barrier_any(1 + bg, 32 * W, failed)) break;
      // Per sum, the terms in (record, column) order, then the butterfly: the same order in
      // every lane and every run.
#pragma unroll
      for (int i = 0; i < BB; ++i)
#pragma unroll
        for (int j = 0; j < kRec; ++j) {
          float hv[kR3];
          read_share<kPlanes>(share, BB * kSlots * 32, (i * kSlots + j) * 32 + lane, hv);
#pragma unroll
          for (int c = 0; c < kR3; ++c)
#pragma unroll
            for (int q = 0; q < kR3; ++q)
              acc[i * kAtI + q * kAtR] = fmaf(w[q][kR3 * j + c], hv[c], acc[i * kAtI + q * kAtR]);
        }
      // The wide shapes' slots held in shared memory, after the register slots (the same record
      // order per sum): a slot's 9 weights loaded once for all BB batch elements.
#pragma unroll 2
      for (int j = 0; j < kSmem; ++j) {
        float ws[kR3 * kR3];
#pragma unroll
        for (int e = 0; e < kR3 * kR3; ++e) ws[e] = held[(j * kR3 * kR3 + e) * 32];
#pragma unroll
        for (int i = 0; i < BB; ++i) {
          float hv[kR3];
          read_share<kPlanes>(share, BB * kSlots * 32, (i * kSlots + kRec + j) * 32 + lane, hv);
#pragma unroll
          for (int c = 0; c < kR3; ++c)
#pragma unroll
            for (int q = 0; q < kR3; ++q)
              acc[i * kAtI + q * kAtR] = fmaf(ws[kR3 * c + q], hv[c], acc[i * kAtI + q * kAtR]);
        }
      }
    } else if (project) {  // no h_prev: the projection alone, and the barrier for x_{t+1}
      add_projection(acc, s & 1);
      wait_x();
      if (barrier_any(1 + bg, 32 * W, false)) break;
    }
    // The warp's sums. Scattered: lanes [i·kSpan, (i + 1)·kSpan) end with batch element i's 3
    // sums in acc[0, 3) (warp_sum_groups), so every finisher has them in the same registers.
    // Otherwise every lane ends with all of them, added in the same order.
    if (has_source || project) {
      if constexpr (kScatter) {
        warp_sum_groups<BB, kR3>(acc, lane);
      } else {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
          for (int i = 0; i < kR3 * BB; ++i) acc[i] += __shfl_xor_sync(kAll, acc[i], off);
      }
    }

    // The finishers: their 3 units' values (backward: dQ = dP) and the record; scattered, all of
    // them at once, else lane i in branch i (i a constant there: no indexed registers). The step's
    // other stores wait until after the record.
    float v[kR3] = {}, carry_h[kR3] = {};
#pragma unroll
    for (int i = 0; i < (kScatter ? 1 : BB); ++i) {
      if ((kScatter ? false : lane != i) || !finisher) continue;
      const int at = kScatter ? 0 : i;  // this finisher's sum of row c: acc[at·kAtI + c·kAtR]
#pragma unroll
      for (int c = 0; c < kR3; ++c) {
        const int row = row0 + c;
        const bool live = row < H;
        if constexpr (kFwd) {
          const float uc[1] = {u[c]}, mv[1] = {acc[at * kAtI + c * kAtR]};
          v[c] = live ? compute_forward_unit<1, Act>(p, t_prev, first_fwd, f_b, row, uc, 0.0f, mv,
                                                     bias[c], f_pad)
                            .h
                      : 0.0f;
        } else {
          const BackwardUnitOut<1> o =
              compute_backward_unit<1, Act>(p, bin[c], acc[at * kAtI + c * kAtR], f_pad);
          v[c] = live ? o.dq[0] : 0.0f;
          carry_h[c] = o.carry_h;
        }
      }
      // (A finisher has rec_k < K; the unscattered shapes keep the test their code was tuned with.)
      if (s + 1 < p.steps && (kScatter || rec_k < K))
        store_record(dst + static_cast<std::int64_t>(f_b) * K + rec_k,
                     make_float4(v[0], v[1], v[2], __uint_as_float(mine)));
    }
    // The step's stores, spread over the warp: lane 3i + c stores unit c of batch element
    // bg + G·i (one store instruction per tensor for the warp's 3·BB values, not 3·BB).
    {
      const int si = lane / kR3, sc = lane % kR3, sb = bg + G * si, srow = row0 + sc;
      const int from = si * kSpan;  // the finisher of batch element sb
      auto pick = [&](const float (&x)[kR3]) {
        float r = 0.0f;
#pragma unroll
        for (int c = 0; c < kR3; ++c) {
          const float y = __shfl_sync(kAll, x[c], from);
          if (c == sc) r = y;
        }
        return r;
      };
      const float sv = pick(v);
      const float sch = kFwd || !kLengths ? 0.0f : pick(carry_h);
      const bool spad = __shfl_sync(kAll, static_cast<int>(f_pad), from) != 0;
      if (rec_k < K && si < BB && sb < B && srow < H) {
        if constexpr (kFwd) {
          UnitStep<1> r{};
          r.h = sv;
          store_forward_unit<1>(p, s, t, sb, srow, r, spad);
        } else {
          BackwardUnitOut<1> o{};
          o.dp[0] = sv;
          o.carry_h = sch;
          store_backward_unit<1, kLengths>(p, t, sb, srow, o);
        }
      }
    }
  }

  __syncthreads();
  if (threadIdx.x == 0) end_launch(p, epoch);
}

}  // namespace prnn::persistent
