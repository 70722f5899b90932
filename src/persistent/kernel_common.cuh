// Device code shared by the persistent kernels (the FMA kernel of kernels_fma.cu and the
// tensor-core and warp-rows kernels of their headers): the exchange records and their bounded
// waits, the debug stall, the end of a launch (the epoch), 16-bit weight packing, and the
// finishers of one hidden unit (the cell's math and every store of each pass, rnn_kernels.h).
// Included by the kernels' translation units (kernels_*.cu) only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/device_clock.cuh"
#include "gemm_rnn/activation.cuh"
#include "gemm_rnn/gates.cuh"
#include "persistent/rnn_kernels.h"

namespace prnn::persistent {

inline constexpr int kR3 = kUnitsPerRecord;
// Polls between looks at the clock and the abort flags.
inline constexpr unsigned kSpinsPerCheck = 16;
// Loads a thread has in flight while staging.
inline constexpr int kStageBatch = 4;

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
// load_record where `load` holds, else `v` kept: a predicated load rather than a branch, so
// that a warp's polls issue as straight-line code.
__device__ __forceinline__ void load_record_if(bool load, const float4* p, float4& v) {
  asm volatile(
      "{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %4, 0;\n\t"
      "@q ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%5];\n\t}"
      : "+f"(v.x), "+f"(v.y), "+f"(v.z), "+f"(v.w)
      : "r"(static_cast<unsigned>(load)), "l"(p)
      : "memory");
}
// At s = 0 of a forward, record k of batch element b read from h0 [B, H] instead of the
// exchange: r.x, r.y, r.z = h0[b][3k..3k+2] (entries past H and r.w left as they are).
__device__ __forceinline__ void load_h0_record(const float* h0, int H, int b, int k, float4& r) {
  const float* h = h0 + static_cast<std::int64_t>(b) * H + k * kR3;
  const int n = min(kR3, H - k * kR3);
  r.x = h[0];
  if (n > 1) r.y = h[1];
  if (n > 2) r.z = h[2];
}
__device__ __forceinline__ void store_record(float4* p, float4 v) {
  asm volatile("st.relaxed.gpu.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
}
__device__ __forceinline__ bool tagged(const float4& r, unsigned tag) {
  return __float_as_uint(r.w) == tag;
}

// A step's records in shared memory as two planes of `count` records, {x, y} (float2) then z
// (float), the tag left out (only the poll needs it): a warp's read of a record is 384 bytes
// (3 wavefronts), not a float4's 512. `base` is the step's share, sized for `count` float4s.
struct RecordPlanes {
  float2* xy;
  float* z;
  __device__ __forceinline__ RecordPlanes(float4* base, int count)
      : xy(reinterpret_cast<float2*>(base)), z(reinterpret_cast<float*>(xy + count)) {}
  __device__ __forceinline__ void put(int at, const float4& v) const {
    xy[at] = make_float2(v.x, v.y);
    z[at] = v.z;
  }
  __device__ __forceinline__ void get(int at, float (&v)[kR3]) const {
    const float2 r = xy[at];
    v[0] = r.x;
    v[1] = r.y;
    v[2] = z[at];
  }
};
// Record `at` of a step's share of `count` records, written and read as two planes
// (RecordPlanes) or, kPlanes false, as float4s (the tag unused).
template <bool kPlanes>
__device__ __forceinline__ void write_share(float4* share, int count, int at, const float4& v) {
  if constexpr (kPlanes) {
    RecordPlanes(share, count).put(at, v);
  } else {
    share[at] = v;
  }
}
template <bool kPlanes>
__device__ __forceinline__ void read_share(float4* share, int count, int at, float (&v)[kR3]) {
  if constexpr (kPlanes) {
    RecordPlanes(share, count).get(at, v);
  } else {
    const float4 r = share[at];
    v[0] = r.x;
    v[1] = r.y;
    v[2] = r.z;
  }
}

// Two weights as 16-bit values in one register (lo in the low half) and back to fp32. The
// weights come from 16-bit tensors, so the round trip is exact.
template <DType WS>
__device__ __forceinline__ unsigned pack16(float lo, float hi) {
  if constexpr (WS == DType::BF16)
    return static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
           static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16;
  else
    return static_cast<unsigned>(__half_as_ushort(__float2half_rn(lo))) |
           static_cast<unsigned>(__half_as_ushort(__float2half_rn(hi))) << 16;
}
template <DType WS>
__device__ __forceinline__ void unpack16(unsigned v, float& lo, float& hi) {
  if constexpr (WS == DType::BF16) {
    lo = __uint_as_float(v << 16);
    hi = __uint_as_float(v & 0xFFFF0000u);
  } else {
    lo = __half2float(__ushort_as_half(static_cast<unsigned short>(v & 0xFFFFu)));
    hi = __half2float(__ushort_as_half(static_cast<unsigned short>(v >> 16)));
  }
}

// W_hh's element i as fp32: from its 16-bit copy where the launch gives one (Params::w16: the
// 16-bit value, exact in fp32), else from w.
__device__ __forceinline__ float w_hh_at(const Params& p, std::int64_t i) {
  if (p.w16 == nullptr) return p.w[i];
  const unsigned short bits = p.w16[i];
  return p.w16_type == DType::BF16 ? __uint_as_float(static_cast<unsigned>(bits) << 16)
                                   : __half2float(__ushort_as_half(bits));
}

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

// How the tensor-core kernels hold the CTA's fragments (and the gated warp rows' backward its
// warp's): a warp owns KT tiles of 16 units of H (forward: k-tiles of h; backward: m-tiles of
// dh; gated backward: k-tiles of dQ), each NO fragments across the other dimension. Tile
// i < KR = KT − KS is in registers, reg[o][i]; the others in shared memory, smem
// [warp][i − KR][o][lane], 16 bytes a lane (one conflict-free 128-bit load per fragment).
// hold_fragments loads them once per launch: load(a, i, o) gives fragment o of the warp's tile i.
template <int KS, int NO, int KR, class Load>
__device__ __forceinline__ void hold_fragments(unsigned (&reg)[NO][KR][4], uint4* smem, int warp,
                                               int lane, const Load& load) {
#pragma unroll
  for (int i = 0; i < KR; ++i)
#pragma unroll
    for (int o = 0; o < NO; ++o) load(reg[o][i], i, o);
  for (int i = 0; i < KS; ++i)
    for (int o = 0; o < NO; ++o) {
      unsigned a[4];
      load(a, KR + i, o);
      smem[((warp * KS + i) * NO + o) * 32 + lane] = make_uint4(a[0], a[1], a[2], a[3]);
    }
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

// c ? a : b on values (a plain ?: on array elements can become a select of addresses, which
// moves the array to local memory).
__device__ __forceinline__ float select(bool c, float a, float b) {
  float r;
  asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %3, 0;\n\tselp.f32 %0, %1, %2, q;\n\t}"
      : "=f"(r)
      : "f"(a), "f"(b), "r"(static_cast<int>(c)));
  return r;
}

// One halving exchange of a warp reduce-scatter over lanes `kOffset` apart: the lane with that
// bit set keeps the upper kHalf entries (summed with its partner's), the other the lower ones;
// both end in v[0, kHalf).
template <int kOffset, int kHalf, int NP>
__device__ __forceinline__ void halve(float (&v)[NP], int lane) {
  const bool upper = (lane & kOffset) != 0;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = select(upper, v[i], v[i + kHalf]);
    const float keep = select(upper, v[i + kHalf], v[i]);
    v[i] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, kOffset);
  }
}

// The warp sums of P partial sums (P a power of two, 4..32): log2(P) halvings, then butterflies
// over the remaining lane bits. Returns, in every lane l, the warp sum of entry l / (32 / P): each
// entry ends in 32 / P neighbouring lanes. A fixed tree of additions: deterministic. P − 1 + log2
// (32 / P) shuffles, against 5·P for a butterfly of every entry.
template <int P>
__device__ __forceinline__ float warp_sum_scatter(float (&v)[P], int lane) {
  static_assert(P == 4 || P == 8 || P == 16 || P == 32, "P in 4..32, a power of two");
  halve<16, P / 2>(v, lane);
  halve<8, P / 4>(v, lane);
  if constexpr (P >= 8) halve<4, P / 8>(v, lane);
  if constexpr (P >= 16) halve<2, P / 16>(v, lane);
  if constexpr (P >= 32) halve<1, P / 32>(v, lane);
  float x = v[0];
#pragma unroll
  for (int off = 16 / P; off > 0; off >>= 1) x += __shfl_xor_sync(0xFFFFFFFFu, x, off);
  return x;
}

// This thread's lane, read once: a value the compiler keeps in a register. Taken as
// threadIdx.x & 31, it is an expression of a special register that NVVM may recompute at every
// use instead, and did in the warp-rows step once its reduction changed (57 reads of %tid.x in a
// wide shape's kernel, 3 before; each on the chain of an address), which ran the step up to 13 %
// slower. The register it takes is not free either: where a kernel recomputed the lane only a
// few times, reading it here cost 3.5-11 % (bench/persistent/NOTES.md, "A reduce-scatter over
// batch elements").
__device__ __forceinline__ int lane_id() {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return static_cast<int>(lane);
}

// The warp sums of P groups of N partial sums (P = 1, 2 or 4; group g in v[g·N, (g + 1)·N)):
// log2(P) halvings of whole groups, then butterflies of one group over the remaining lane bits.
// Afterwards v[0, N) of lane l holds the warp sums of group l / (32 / P), in all 32 / P lanes of
// that span. A fixed tree of additions: deterministic. (P − 1)·N + log2(32 / P)·N shuffles,
// against 5·P·N for a butterfly of every sum (P = 4, N = 3: 18 against 60).
template <int P, int N>
__device__ __forceinline__ void warp_sum_groups(float (&v)[P * N], int lane) {
  static_assert(P == 1 || P == 2 || P == 4, "P groups: 1, 2 or 4");
  if constexpr (P >= 2) halve<16, P / 2 * N>(v, lane);
  if constexpr (P >= 4) halve<8, N>(v, lane);
#pragma unroll
  for (int off = 16 / P; off > 0; off >>= 1)
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += __shfl_xor_sync(0xFFFFFFFFu, v[i], off);
}

// Whether a wait begun at `start` may go on: false when an abort was requested (by this CTA or
// another), or when the wait outlasts p.timeout_ns, which it reports (kStatusTimeout) and turns
// into an abort of every CTA.
__device__ __forceinline__ bool keep_waiting(std::uint64_t start, const Params& p,
                                             const int* s_abort) {
  if (*static_cast<const volatile int*>(s_abort) != 0 ||
      *static_cast<volatile unsigned*>(p.control + kAbort) != 0)
    return false;
  if (global_ns() - start > p.timeout_ns) {
    atomicOr(p.control + kStatus, kStatusTimeout);
    atomicExch(p.control + kAbort, 1u);
    if (p.status_host != nullptr) *static_cast<volatile unsigned*>(p.status_host) = kStatusTimeout;
    return false;
  }
  return true;
}

// Polls until every record r[u] whose address at[u] is not null carries `tag`, reloading the
// missing ones (all loads in flight at once). Returns false, with kStatusTimeout reported and
// every CTA told to abort, when a wait outlasts p.timeout_ns, or when an abort was requested.
template <int N>
__device__ bool wait_records(float4 (&r)[N], const float4* const (&at)[N], unsigned tag,
                             const Params& p, const int* s_abort) {
  bool ready = true;
#pragma unroll
  for (int u = 0; u < N; ++u) ready &= at[u] == nullptr || tagged(r[u], tag);
  if (ready) return true;
  const std::uint64_t start = global_ns();
  for (unsigned spins = 1;; ++spins) {
#pragma unroll
    for (int u = 0; u < N; ++u)
      if (at[u] != nullptr && !tagged(r[u], tag)) r[u] = load_record(at[u]);
    ready = true;
#pragma unroll
    for (int u = 0; u < N; ++u) ready &= at[u] == nullptr || tagged(r[u], tag);
    if (ready) return true;
    if (spins % kSpinsPerCheck != 0) continue;
    if (!keep_waiting(start, p, s_abort)) return false;
  }
}

// keep_waiting for a whole warp: lane 0 decides (a timeout is reported once); a warp that gives
// up raises the CTA's abort flag, and returns true on every lane.
__device__ __forceinline__ bool warp_gives_up(std::uint64_t start, const Params& p, int* s_abort,
                                              int lane) {
  if (__shfl_sync(0xFFFFFFFFu, lane == 0 ? keep_waiting(start, p, s_abort) : false, 0))
    return false;
  if (lane == 0) *static_cast<volatile int*>(s_abort) = 1;
  return true;
}

// Named barrier `id` over `threads` threads (a multiple of 32) that also ORs `failed` over them:
// returns whether any arriving thread failed (the warp-rows kernels' waits, so that the threads
// of a barrier leave a step together).
__device__ __forceinline__ bool barrier_any(int id, int threads, bool failed) {
  unsigned any;
  asm volatile(
      "{\n\t.reg .pred f, a;\n\tsetp.ne.u32 f, %1, 0;\n\t"
      "bar.red.or.pred a, %2, %3, f;\n\tselp.u32 %0, 1, 0, a;\n\t}"
      : "=r"(any)
      : "r"(static_cast<unsigned>(failed)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

// The debug knob: CTA p.stall_cta sleeps p.stall_ns before processing step p.stall_step.
__device__ __forceinline__ void stall_if_asked(const Params& p, int s) {
  if (p.stall_cta == static_cast<int>(blockIdx.x) && p.stall_step == s) {
    const std::uint64_t until = global_ns() + p.stall_ns;
    while (global_ns() < until) {
    }
  }
}

// At the start of a launch, thread 0: this launch's epoch (set by the last one) into s_epoch, and
// no abort yet. The caller synchronizes the CTA before reading them.
__device__ __forceinline__ void begin_launch(const Params& p, unsigned* s_epoch, int* s_abort) {
  if (threadIdx.x == 0) {
    *s_epoch = *static_cast<volatile unsigned*>(p.control + kEpoch);
    *s_abort = 0;
  }
}

// Thread 0 of every CTA, at the end of a launch: the last CTA to finish advances the epoch past
// this launch's tags (never through 0, the tag of a zeroed record) and clears the abort flag for
// the next launch. Returns whether this CTA was the last (every other CTA has left its loop).
__device__ __forceinline__ bool end_launch(const Params& p, unsigned epoch) {
  if (atomicAdd(p.control + kDone, 1u) != gridDim.x - 1) return false;
  p.control[kDone] = 0;
  p.control[kAbort] = 0;
  unsigned next = epoch + static_cast<unsigned>(p.steps);
  if (next < epoch || next > 0xFFFFFFFFu - static_cast<unsigned>(p.steps)) next = 1;
  p.control[kEpoch] = next;
  return true;
}

// The vanilla cells' activation a kernel applies: Act is gemm_rnn::RuntimeActivation (p.act,
// a uniform branch) or gemm_rnn::StaticActivation<A> (a kernel instantiated per activation).
template <class Act>
__device__ __forceinline__ Act activation_of(const Params& p) {
  if constexpr (std::is_same_v<Act, gemm_rnn::RuntimeActivation>)
    return Act{p.act};
  else
    return Act{};
}

// ---- the forward finisher of one hidden unit ------------------------------------------------
// Unit `row` of batch row b at step s (time t; t_prev the time of the step before in the forward
// order; first: s = 0). u: the unit's NG gate rows of W_ih x; st: the state entering the step
// (LSTM c_prev, GRU h_prev). Loaded before the step's wait so that their latency hides in it.
template <int NG>
__device__ __forceinline__ void load_forward_unit(const Params& p, std::int64_t t,
                                                  std::int64_t t_prev, bool first, int b, int row,
                                                  float (&u)[NG], float& st) {
  const int H = p.hidden, B = p.batch;
  const std::int64_t bh = static_cast<std::int64_t>(b) * H + row;  // [B, H] index
  const std::int64_t tbgh = (t * B + b) * NG * H + row;            // + q·H: gate q
#pragma unroll
  for (int q = 0; q < NG; ++q) u[q] = p.pre[tbgh + q * H];
  if constexpr (NG == 4) st = first ? p.initial[bh] : p.cell[(t_prev * B + b) * H + row];
  if constexpr (NG == 3) st = first ? p.initial[bh] : p.out[(t_prev * B + b) * p.out_stride + row];
}

// The values one unit's forward step produces: the pre-activations (GRU: a_ih and a_hh), the
// LSTM's c_t, and h_t.
template <int NG>
struct UnitStep {
  float a[NG];
  float a_hh[NG == 3 ? 3 : 1];
  float c;
  float h;
};

// A gated unit's biases, per gate, loaded once by a finisher that keeps its unit: LSTM
// a[q] = b_ih + b_hh (the sum compute_forward_unit forms); GRU a[q] = b_ih, hh[q] = b_hh.
template <int NG>
struct GateBias {
  float a[NG];
  float hh[NG == 3 ? 3 : 1];
};
template <int NG>
__device__ __forceinline__ GateBias<NG> load_gate_bias(const Params& p, int row) {
  GateBias<NG> g{};
#pragma unroll
  for (int q = 0; q < NG; ++q) {
    if constexpr (NG == 3) {
      g.a[q] = p.b_ih[q * p.hidden + row];
      g.hh[q] = p.b_hh[q * p.hidden + row];
    } else {
      g.a[q] = p.b_ih[q * p.hidden + row] + p.b_hh[q * p.hidden + row];
    }
  }
  return g;
}

// The unit's step (row < H): the pre-activations from u, the matrix-vector sums mv and the
// biases (vanilla: bias = b_ih + b_hh of the row, preloaded; gated cells read theirs, or take
// them from `given`), then the cell (vanilla: the activation Act). pad: a padded step (sequence
// lengths), an identity step. kBranchFree: the LSTM's σ by gemm_rnn::sigmoid_branch_free.
template <int NG, class Act = gemm_rnn::RuntimeActivation, bool kBranchFree = false>
__device__ __forceinline__ UnitStep<NG> compute_forward_unit(const Params& p, std::int64_t t_prev,
                                                             bool first, int b, int row,
                                                             const float (&u)[NG], float st,
                                                             const float (&mv)[NG], float bias,
                                                             bool pad,
                                                             const GateBias<NG>* given = nullptr) {
  const int H = p.hidden, B = p.batch;
  UnitStep<NG> r{};
  // Padded (vanilla, LSTM): h_prev, which this thread stored one step earlier.
  float h_pass = 0.0f;
  if constexpr (NG != 3) {
    if (pad)
      h_pass = !first            ? p.out[(t_prev * B + b) * p.out_stride + row]
               : p.h0 != nullptr ? p.h0[static_cast<std::int64_t>(b) * H + row]
                                 : 0.0f;
  }
  if constexpr (NG == 1) {
    r.a[0] = u[0] + mv[0] + bias;
    r.h = pad ? h_pass : activation_of<Act>(p)(r.a[0]);
  } else if constexpr (NG == 4) {
#pragma unroll
    for (int q = 0; q < 4; ++q)
      r.a[q] = u[q] + mv[q] +
               (given != nullptr ? given->a[q]
                                 : __ldg(p.b_ih + q * H + row) + __ldg(p.b_hh + q * H + row));
    gemm_rnn::lstm_forward<kBranchFree>(r.a, st, r.c, r.h);
    if (pad) {
      r.c = st;
      r.h = h_pass;
    }
  } else {
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      r.a[q] = u[q] + (given != nullptr ? given->a[q] : __ldg(p.b_ih + q * H + row));
      r.a_hh[q] = mv[q] + (given != nullptr ? given->hh[q] : __ldg(p.b_hh + q * H + row));
    }
    r.h = pad ? st : gemm_rnn::gru_forward(r.a, r.a_hh, st);
  }
  return r;
}

// The unit's NG gate values v into rows [T, B, NG·H] at `at` (its step, batch element and row),
// gate q at at + q·H, and for GRU the 3 hidden-side values v_h into rows_h the same way.
template <int NG, int NH>
__device__ __forceinline__ void store_gate_rows(float* rows, const float (&v)[NG], float* rows_h,
                                                const float (&v_h)[NH], std::int64_t at, int H) {
#pragma unroll
  for (int q = 0; q < NG; ++q) rows[at + q * H] = v[q];
  if constexpr (NG == 3) {
#pragma unroll
    for (int q = 0; q < 3; ++q) rows_h[at + q * H] = v_h[q];
  }
}

// Every store of the unit's forward step: the gated cells' pre (GRU: and pre_h; vanilla cells
// keep none, their backward takes act' from h), the LSTM's cell and cn, out, out2 (0 where
// padded), hn.
template <int NG>
__device__ __forceinline__ void store_forward_unit(const Params& p, int s, std::int64_t t, int b,
                                                   int row, const UnitStep<NG>& r, bool pad) {
  const int H = p.hidden, B = p.batch;
  const std::int64_t bh = static_cast<std::int64_t>(b) * H + row;
  if constexpr (NG != 1)
    store_gate_rows(p.pre, r.a, p.pre_h, r.a_hh, (t * B + b) * NG * H + row, H);
  if constexpr (NG == 4) {
    p.cell[(t * B + b) * H + row] = r.c;
    if (p.cn != nullptr && s == p.steps - 1) p.cn[bh] = r.c;
  }
  const std::int64_t o = (t * B + b) * p.out_stride + row;
  p.out[o] = r.h;
  if (p.out2 != nullptr) p.out2[o] = pad ? 0.0f : r.h;
  if (p.hn != nullptr && s == p.steps - 1) p.hn[bh] = r.h;
}

// Both: the unit's step and its stores. Returns h_t, the value the unit publishes.
template <int NG>
__device__ __forceinline__ float finish_forward_unit(const Params& p, int s, std::int64_t t,
                                                     std::int64_t t_prev, bool first, int b,
                                                     int row, const float (&u)[NG], float st,
                                                     const float (&mv)[NG], float bias, bool pad) {
  const UnitStep<NG> r = compute_forward_unit<NG>(p, t_prev, first, b, row, u, st, mv, bias, pad);
  store_forward_unit<NG>(p, s, t, b, row, r, pad);
  return r.h;
}

// ---- the backward-data finisher of one hidden unit ------------------------------------------
// What unit `row` of batch row b needs at backward step s (time t; t_prev the time of the step
// before in the forward order; first_fwd: t is the forward's first step), loaded before the
// step's wait.
template <int NG>
struct BackwardUnitIn {
  float dy = 0.0f;                    // dy_t
  float a[NG == 3 ? 6 : NG] = {};     // gated: the saved P (GRU: a_ih, then a_hh); vanilla: h_t
  float st[2] = {};                   // LSTM: c_prev, c_t; GRU: h_prev
  float extra = 0.0f;                 // s = 0: dhn; s > 0 with lengths (vanilla, LSTM): carry_h
  float carry = 0.0f;                 // LSTM: dc (carry; dcn at s = 0); GRU: the carry
};

template <int NG, bool kLengths>
__device__ __forceinline__ BackwardUnitIn<NG> load_backward_unit(const Params& p, int s,
                                                                 std::int64_t t,
                                                                 std::int64_t t_prev,
                                                                 bool first_fwd, int b, int row) {
  constexpr bool kLstm = NG == 4, kGru = NG == 3;
  const int H = p.hidden, B = p.batch;
  const std::int64_t bh = static_cast<std::int64_t>(b) * H + row;  // [B, H] index
  const std::int64_t tbgh = (t * B + b) * NG * H + row;            // + q·H: gate q
  BackwardUnitIn<NG> in;
  in.dy = p.dy[(t * B + b) * p.dy_stride + row];
  if constexpr (NG == 1) {
    in.a[0] = p.out[(t * B + b) * p.out_stride + row];
  } else {
#pragma unroll
    for (int q = 0; q < NG; ++q) in.a[q] = p.pre[tbgh + q * H];
  }
  if constexpr (kGru) {
#pragma unroll
    for (int q = 0; q < NG; ++q) in.a[NG + q] = p.pre_h[tbgh + q * H];
    in.st[0] = first_fwd ? p.initial[bh] : p.out[(t_prev * B + b) * p.out_stride + row];
  }
  if constexpr (kLstm) {
    in.st[0] = first_fwd ? p.initial[bh] : p.cell[(t_prev * B + b) * H + row];
    in.st[1] = p.cell[(t * B + b) * H + row];
  }
  if (s == 0 && p.dhn != nullptr) in.extra = p.dhn[bh];
  if constexpr (!kGru) {  // the part of dh that skipped W_hh (padded steps)
    if (s > 0 && kLengths) in.extra = p.carry_h[bh];
  }
  if constexpr (kLstm) {
    if (s > 0) in.carry = p.carry[bh];
    else if (p.dcn != nullptr) in.carry = p.dcn[bh];
  }
  if constexpr (kGru) {
    if (s > 0) in.carry = p.carry[bh];
  }
  return in;
}

// What the unit's backward step produces: dQ (the values exchanged: vanilla and LSTM dP, GRU
// da_hh), dP (GRU: da_ih), the gated cells' carry and carry_h (rnn_kernels.h).
template <int NG>
struct BackwardUnitOut {
  float dq[NG];
  float dp[NG];
  float carry;
  float carry_h;
};

// The unit's step: dh = dy_t + mv + extra (mv = W_hhᵀ dQ_prev, 0 at s = 0; extra is 0 at s > 0
// without lengths, so the sum is exact there), then the cell's backward (vanilla: act' of Act
// from h_t). pad: a padded step: dy ignored, no gate gradients, dh goes on in the carry.
// kBranchFree: the gated cells' σ by gemm_rnn::sigmoid_branch_free. H200, T = 256, µs/step
// forward + backward (bench/results/h200/ab/prepared2/, sigma against tree, B = 2 and 4):
// 0.3–7.6 % faster everywhere but once (2–7.6 % on the gated warp rows at B = 2 and for the GRU
// at B = 4, 0.3–2.2 % on tensor cores); 1.0–1.8 % slower for the LSTM f32 at B = 4 on the gated
// warp rows, whose BB = 4 backward passes false (for every weight type); and at B = 1 the LSTM's
// gated warp-rows backward measured 1.2–2.8 % slower with it (ab/gated_backward_mma/, f32 and
// bf16), so its BB = 1 passes false too.
template <int NG, class Act = gemm_rnn::RuntimeActivation, bool kBranchFree = true>
__device__ __forceinline__ BackwardUnitOut<NG> compute_backward_unit(const Params& p,
                                                                     const BackwardUnitIn<NG>& in,
                                                                     float mv, bool pad) {
  BackwardUnitOut<NG> r{};
  const float dh = (pad ? 0.0f : in.dy) + (mv + in.extra);
  r.carry_h = pad ? dh : 0.0f;
  if constexpr (NG == 1) {
    r.dq[0] = r.dp[0] = pad ? 0.0f : dh * activation_of<Act>(p).grad_of_output(in.a[0]);
  } else if constexpr (NG == 4) {
    const float a[4] = {in.a[0], in.a[1], in.a[2], in.a[3]};
    float da[4];
    r.carry = in.carry;
    gemm_rnn::lstm_backward<kBranchFree>(a, in.st[0], in.st[1], dh, r.carry, da);
    if (pad) r.carry = in.carry;
#pragma unroll
    for (int q = 0; q < 4; ++q) r.dq[q] = r.dp[q] = pad ? 0.0f : da[q];
  } else {
    const float a_ih[3] = {in.a[0], in.a[1], in.a[2]};
    const float a_hh[3] = {in.a[3], in.a[4], in.a[5]};
    float da_ih[3], da_hh[3];
    r.carry = in.carry;
    gemm_rnn::gru_backward<kBranchFree>(a_ih, a_hh, in.st[0], dh, r.carry, da_ih, da_hh);
    if (pad) r.carry = in.carry + dh;  // padded: the whole dh skips W_hh
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      r.dp[q] = pad ? 0.0f : da_ih[q];
      r.dq[q] = pad ? 0.0f : da_hh[q];
    }
  }
  return r;
}

// Every store of the unit's backward step: dpre (GRU: and dpre_h), the carry, carry_h.
template <int NG, bool kLengths>
__device__ __forceinline__ void store_backward_unit(const Params& p, std::int64_t t, int b,
                                                    int row, const BackwardUnitOut<NG>& r) {
  const int H = p.hidden, B = p.batch;
  const std::int64_t bh = static_cast<std::int64_t>(b) * H + row;
  store_gate_rows(p.dpre, r.dp, p.dpre_h, r.dq, (t * B + b) * NG * H + row, H);
  if constexpr (NG != 1) p.carry[bh] = r.carry;
  if constexpr (kLengths && NG != 3) p.carry_h[bh] = r.carry_h;
}

}  // namespace prnn::persistent
