// How the persistent RNN kernels split one layer direction's recurrent matrix over the SMs: the
// small, documented set of compile-time kernel shapes and the rule that picks one. Shared by the
// planner (prnn/plan.h) and the kernels' one dispatch point (rnn_kernels.cu); no CUDA here.
//
// A kernel shape (cell gates NG, R, G, BC, max threads):
//   CTA k owns the R hidden units [k·R, (k+1)·R) (R a multiple of 3: it publishes whole records),
//   i.e. NG·R rows of W_hh in the forward (gate q of unit j is row q·H + j);
//   its threads split the H columns of those rows: thread i holds the 3-column groups
//   i, i + threads, ..., G of them, so its registers keep NG·R × 3G weights, and it reads exactly
//   the exchange records of those columns (the backward holds the same weights transposed: R
//   rows of W_hhᵀ, NG·G groups of the NG·H columns);
//   the mini-batch is processed BC elements at a time, and each chunk's records are published
//   before the next chunk starts, so consumers start on chunk 0 of step t while chunk 1 is still
//   being computed (the paper's pipelining over the mini-batch).
// The exchange record: 3 consecutive units of one batch element's h (or dA) and a 32-bit tag,
// 16 bytes written and read as one vector access.
//
// The rule (measured on an H200, bench/persistent/NOTES.md): the fewest rows per CTA that fit the
// SMs (most CTAs), then two chunks per step where the shapes allow (BC = 1 for B ≤ 2, 2 for
// B ≤ 4, else 4), with G chosen per (R, BC) in the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "prnn/dtype.h"

namespace prnn::persistent {

inline constexpr int kUnitsPerRecord = 3;

struct KernelShape {
  int gates = 1;        // NG: 1 vanilla, 3 GRU, 4 LSTM
  int rows = 0;         // R hidden units per CTA
  int groups = 0;       // G column groups of 3 per thread
  int batch_chunk = 0;  // BC batch elements per pass over the weights (B > 1)
  int max_threads = 0;  // launch bound: threads per CTA ≤ this, registers ≤ 65536 / this
  // How the registers hold the weights: f32, or (for f16 / bf16 weights) two 16-bit weights of
  // consecutive rows per register, widened to fp32 for the FMA: half the registers.
  DType storage = DType::F32;
  // Staged (gated cells): each chunk's records are copied once into shared memory by the whole
  // CTA, and the forward splits the NG·R rows by gate over NG row groups of threads, so a thread
  // holds R rows × 3G columns in both passes (G column groups of ceil(H/3) records forward, of
  // ceil(NG·H/3) backward) and the partial sums stay R·BC: the batch fits in one chunk.
  bool staged = false;
};

// The instantiated shapes, grouped by cell, then R ascending; within a group BC ascending.
// Gated cells keep NG·R rows per CTA, so their R stops where the weights (NG·R·3G per thread)
// plus the partial sums (NG·R·BC) still fit the registers a thread has at max threads; their
// max threads are about what R units per SM need (H ≤ R·SMs: ceil(H/3) threads), and at most
// 256 where that covers it: threads are allotted registers in groups of four warps, so 256
// threads get 255 registers each, 384 get 168.
inline constexpr KernelShape kShapes[] = {
    {1, 3, 1, 1, 512},  {1, 3, 1, 2, 512},  {1, 3, 1, 4, 512},   //
    {1, 6, 1, 1, 512},  {1, 6, 1, 2, 512},  {1, 6, 1, 4, 512},   //
    {1, 9, 3, 1, 256},  {1, 9, 3, 2, 256},  {1, 9, 2, 4, 384},   //
    {1, 12, 2, 1, 384}, {1, 12, 2, 2, 384}, {1, 12, 2, 4, 384},  //
    {1, 15, 3, 1, 256}, {1, 15, 3, 2, 256},                      //
    {1, 18, 3, 1, 256}, {1, 18, 3, 2, 256},                      //
    {3, 3, 1, 1, 192},  {3, 3, 1, 2, 192},  {3, 3, 1, 4, 192},   // GRU
    {3, 6, 1, 1, 256},  {3, 6, 1, 2, 256},  {3, 6, 1, 4, 256},   //
    {4, 3, 1, 1, 192},  {4, 3, 1, 2, 192},  {4, 3, 1, 4, 192},   // LSTM
    {4, 6, 1, 1, 256},  {4, 6, 1, 2, 256},  {4, 6, 1, 4, 256},   //
    // Staged R = 9 GRU (H <= 1152) and LSTM (H <= 1152: 96 column threads per gate), fp32 or
    // bf16 weights packed in pairs (half the registers; f16 weights are held in fp32).
    {3, 9, 3, 1, 384, DType::F32, true},  {3, 9, 3, 2, 384, DType::F32, true},    //
    {3, 9, 3, 4, 384, DType::F32, true},                                          //
    {3, 9, 3, 1, 384, DType::BF16, true}, {3, 9, 3, 2, 384, DType::BF16, true},   //
    {3, 9, 3, 4, 384, DType::BF16, true},                                         //
    {4, 9, 4, 1, 384, DType::F32, true},  {4, 9, 4, 2, 384, DType::F32, true},    //
    {4, 9, 4, 4, 384, DType::F32, true},                                          //
    {4, 9, 4, 1, 384, DType::BF16, true}, {4, 9, 4, 2, 384, DType::BF16, true},   //
    {4, 9, 4, 4, 384, DType::BF16, true},
};
inline constexpr int kShapeCount = static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0]));

// The batch chunk the rule asks for at batch B (two chunks per step where possible).
inline constexpr int wanted_batch_chunk(std::int64_t batch) {
  return batch <= 2 ? 1 : batch <= 4 ? 2 : 4;
}
// Staged shapes: the whole batch in one chunk up to 4.
inline constexpr int wanted_staged_chunk(std::int64_t batch) {
  return batch <= 1 ? 1 : batch <= 2 ? 2 : 4;
}

// Tensor-core shapes (tensor_core_kernel.cuh), for GRU and LSTM with 16-bit weights, one per
// (cell, R, KT, KS, NT, storage), used by both passes:
//   CTA k owns the R hidden units [k·R, (k+1)·R), i.e. the NG·R rows of W_hh of those units, held
//   as mma.sync A fragments by kTensorCoreWarps warps; the shape holds H ≤ kTensorCoreWarps·KT·16.
//   Forward: the rows as the mma's m, warp w the k-tiles (16 columns of h) [w·KT, (w+1)·KT).
//   Backward: the same rows transposed, W_hhᵀ restricted to them: the H columns as the mma's m,
//   warp w the m-tiles (16 units of dh) [w·KT, (w+1)·KT), the NG·R rows as its k.
//   Of a warp's KT tiles of 16 units, the first KT − KS are in registers and the last KS in
//   shared memory (the large shapes, whose fragments outgrow the registers: W_hh of LSTM
//   H = 2048 is 256 KiB per CTA in bf16, the whole register file).
//   The batch goes through in chunks of 8·NT (the mma's n is the batch).
struct TensorCoreShape {
  int gates = 4;      // NG: 3 GRU, 4 LSTM
  int rows = 0;       // R hidden units per CTA
  int k_tiles = 0;    // KT per warp: 16-unit tiles of H
  int n_tiles = 1;    // NT: batch chunk 8·NT
  DType storage = DType::BF16;
  int smem_tiles = 0;  // KS of the KT tiles per warp held in shared memory
};

// Which passes of a 16-bit GRU / LSTM layer run on tensor cores (PRNN_PERSISTENT_TENSOR_CORES).
enum class TensorCores : std::uint8_t { Off, Forward, ForwardBackward };

inline constexpr int kTensorCoreWarps = 8;
inline constexpr int kTensorCoreThreads = kTensorCoreWarps * 32;
// Measured (H200, bf16, H = 1024 / 1152, bench/results/h200/tensor_cores/): at B = 1 the FMA
// forward is faster (LSTM 3.32 vs 3.45, GRU 2.86 vs 3.28 µs/step), from B = 4 on the tensor cores
// are as fast or faster (LSTM B = 4: 5.16 vs 6.01; B = 16: 11.6 vs 21.5).
inline constexpr int kTensorCoreMinBatch = 4;
// The LSTM whose records need 3 warps per SM (the only LSTM that reaches the tensor-core choice
// with an FMA shape beside it, tile()) from B = 3 up to H = kTensorCoreLstmB3MaxHidden: its
// forward stays on the gated warp rows, its backward goes to the tensor-core kernel. Measured
// (H200, T = 256, training step, tensor-core backward against the gated one, medians of three;
// bench/results/h200/ab/lstm_b3/): H = 1024 bf16 −6.2 %, f16 −2.3 %; H = 1152 bf16 −0.6 %, f16
// +3.1 % (the forward within ±1.3 %). So from H = 1025 the gated backward stays.
inline constexpr int kTensorCoreLstmMinBatch = 3;
inline constexpr std::int64_t kTensorCoreLstmB3MaxHidden = 1024;
// The batch from which a layer that an FMA shape holds as well takes the tensor cores.
constexpr std::int64_t tensor_core_min_batch(int gates, std::int64_t hidden) {
  return gates == 4 && hidden <= kTensorCoreLstmB3MaxHidden ? kTensorCoreLstmMinBatch
                                                            : kTensorCoreMinBatch;
}
// The tensor-core backward exchanges partial products, CTAs·H per batch element and step
// (37.7 MB at H = 1152, B = 32, both parities): up to this batch, so that they stay in the L2.
inline constexpr int kTensorCoreBackwardMaxBatch = 32;
// 16-bit elements of padding after each staged row of h: the 8 rows of an n tile then start 4
// banks apart, so a warp's B-fragment loads hit 32 different banks.
inline constexpr int kStagePad = 8;

// Shared memory of a warp's KS tiles held there: per tile, one A fragment (16 B per lane) per
// row tile of the other dimension (ceil(NG·R / 16) of them).
constexpr std::size_t tensor_core_fragment_bytes(const TensorCoreShape& s) {
  return static_cast<std::size_t>(kTensorCoreWarps) * static_cast<std::size_t>(s.smem_tiles) *
         static_cast<std::size_t>((s.gates * s.rows + 15) / 16) * 32 * 16;
}
// Dynamic shared memory of a tensor-core shape's forward: the staged hi and lo rows of one batch
// chunk, then the fragments held in shared memory.
constexpr std::size_t tensor_core_smem_bytes(const TensorCoreShape& s) {
  return std::size_t{2} * static_cast<std::size_t>(8 * s.n_tiles) *
             static_cast<std::size_t>(kTensorCoreWarps * s.k_tiles * 16 + kStagePad) * 2 +
         tensor_core_fragment_bytes(s);
}
// The backward's: the fragments alone (its staging is static and small).
constexpr std::size_t tensor_core_backward_smem_bytes(const TensorCoreShape& s) {
  return tensor_core_fragment_bytes(s);
}

// The tensor-core kernels' exchange, placed after the records of the FMA kernels
// (2·B·records float4):
//   one 64-bit arrival counter per batch chunk of 8·NT (tensor_core_counter_bytes: padded to
//   16 bytes; zero between launches), then the data, by step parity:
//   forward   h [2, B, tensor_core_h_stride(H)] fp32 (float4 rows, zeros past H)
//   backward  partial products [2, chunks, CTAs, H, 8·NT] fp32: CTA k's W_hhᵀ rows times its
//             own dQ, for every unit of dh (tensor_core_kernel.cuh)
template <class Int>
constexpr Int tensor_core_h_stride(Int hidden) {
  return (hidden + 3) / 4 * 4;
}
constexpr std::int64_t tensor_core_chunks(const TensorCoreShape& s, std::int64_t batch) {
  return (batch + 8 * s.n_tiles - 1) / (8 * s.n_tiles);
}
constexpr std::size_t tensor_core_counter_bytes(const TensorCoreShape& s, std::int64_t batch) {
  return static_cast<std::size_t>((tensor_core_chunks(s, batch) + 1) / 2 * 16);
}
constexpr std::size_t tensor_core_exchange_bytes(const TensorCoreShape& s, std::int64_t hidden,
                                                 std::int64_t batch, bool backward) {
  const std::int64_t chunks = tensor_core_chunks(s, batch);
  const std::int64_t ctas = (hidden + s.rows - 1) / s.rows;
  const std::int64_t forward_floats = 2 * batch * tensor_core_h_stride(hidden);
  const std::int64_t backward_floats = backward ? 2 * chunks * ctas * hidden * 8 * s.n_tiles : 0;
  return tensor_core_counter_bytes(s, batch) +
         static_cast<std::size_t>(4 * (forward_floats > backward_floats ? forward_floats
                                                                        : backward_floats));
}

// R = 3 covers H ≤ 3·SMs (KT = 4: 512 columns), R = 9 the rest up to 1152 (KT = 9), each for a
// batch chunk of 8 or 16, bf16 or f16, all in registers. R = 16 (KT = 16) takes H ≤ 2048 on 128
// SMs with the chunk of 8 only (the staging of 16 would not fit beside the fragments): LSTM 9 of
// the 16 tiles in shared memory (144 KiB; 112 fragment registers: with 128 the forward spills),
// GRU 7 (84 KiB; 108). The forward's shared memory then is 224 of the 227 KiB a CTA may have.
inline constexpr TensorCoreShape kTensorCoreShapes[] = {
    {3, 3, 4, 1, DType::BF16},     {3, 3, 4, 2, DType::BF16},     {3, 9, 9, 1, DType::BF16},
    {3, 9, 9, 2, DType::BF16},     {3, 3, 4, 1, DType::F16},      {3, 3, 4, 2, DType::F16},
    {3, 9, 9, 1, DType::F16},      {3, 9, 9, 2, DType::F16},      {4, 3, 4, 1, DType::BF16},
    {4, 3, 4, 2, DType::BF16},     {4, 9, 9, 1, DType::BF16},     {4, 9, 9, 2, DType::BF16},
    {4, 3, 4, 1, DType::F16},      {4, 3, 4, 2, DType::F16},      {4, 9, 9, 1, DType::F16},
    {4, 9, 9, 2, DType::F16},      {3, 16, 16, 1, DType::BF16, 7}, {3, 16, 16, 1, DType::F16, 7},
    {4, 16, 16, 1, DType::BF16, 9}, {4, 16, 16, 1, DType::F16, 9},
};
inline constexpr int kTensorCoreShapeCount =
    static_cast<int>(sizeof(kTensorCoreShapes) / sizeof(kTensorCoreShapes[0]));

// Warp-rows shapes (warp_rows_kernel.cuh), vanilla cells, both passes: every warp owns one
// record's 3 rows of W_hh (forward) or W_hhᵀ (backward) over all H columns, lane l the columns of
// records l + 32·j, j < kRec (9·kRec fp32 weights in registers), for BB batch elements. A CTA
// holds W record warps for each of G batch groups (both chosen at run time); one per SM. The
// launch bound sets the registers a thread may use (65536 / max threads, at most 255): the
// smallest bound that takes the CTA, so that a CTA of few warps does not spill (at H = 1152,
// kRec = 12, a bound of 384 spilled 80–136 bytes at B = 1 before the records were shared).
// Each warp polls own_slots record slots of its kRec per batch element (the W warps of a batch
// group take every W-th), so a shape serves W ≥ ceil(kRec / own_slots) only; fewer slots, fewer
// registers: BB = 2 at kRec = 12 fits the 168 registers of 384 threads with 4 (W ≥ 3), and at
// BB = 1 4 slots where 6 are not needed were 0.05 µs/step faster at B = 1 (H = 1152, W = 3;
// bench/persistent/NOTES.md, "The B = 1 gap"); the planner takes the fewest slots that serve W.
// Wide shapes (smem_slots > 0) hold layers whose weights outgrow a lane's registers (ReLU
// H = 2048: 198 weights a lane): a lane's slots past the first kRec live in shared memory,
// [W][smem_slots][9][32] fp32, each slot's 9 weights loaded once per step for all BB batch
// elements. One batch group (B ≤ BB), W ≥ 6 record warps (own_slots 4 of 22 slots), 256 threads
// (255 registers: ptxas sm_90 235-255, no local memory; a warp computes all BB, so B = 3 takes
// BB = 3, not 4). 16 slots in registers and 6 in shared memory: measured in the lab first
// (bench/persistent/NOTES.md, "Warp rows past H = 1152": an H100 at H = 2048, B = 4, 3.46
// µs/step with 16 + 6 slots, 3.77 with 12 + 10).
struct WarpRowsShape {
  int records_per_lane = 0;  // kRec in registers: H ≤ 96·(kRec + smem_slots)
  int batch_per_warp = 1;    // BB
  int max_threads = 0;       // launch bound: 384 threads get 168 registers, 256 and 128 get 255
  int own_slots = 0;         // record slots a warp polls per batch element
  int smem_slots = 0;        // record slots a lane holds in shared memory, after its kRec
  constexpr int slots() const { return records_per_lane + smem_slots; }
};
inline constexpr WarpRowsShape kWarpRowsShapes[] = {
    {4, 1, 128, 4},  {8, 1, 128, 8},     {12, 1, 128, 6},    {12, 1, 128, 4},    {4, 1, 256, 4},
    {8, 1, 256, 8},  {12, 1, 256, 6},    {12, 1, 256, 4},    {4, 1, 384, 4},     {8, 1, 384, 8},
    {12, 1, 384, 6}, {12, 1, 384, 4},    {4, 2, 256, 4},     {8, 2, 256, 4},     {12, 2, 384, 4},
    {12, 3, 384, 4}, {16, 1, 256, 4, 6}, {16, 2, 256, 4, 6}, {16, 4, 256, 4, 6},
    {16, 3, 256, 4, 6},
};
inline constexpr int kWarpRowsShapeCount =
    static_cast<int>(sizeof(kWarpRowsShapes) / sizeof(kWarpRowsShapes[0]));
// Whether the warp-rows kernel passes a step's records through shared memory as two planes, {x, y}
// and z (384 bytes a warp's read of a record), or as float4s (512), by shape and pass: the planes
// but where an H200 A/B measured float4s faster (warp_rows_kernel.cuh, kPlanes, says where).
constexpr bool warp_rows_record_planes(int records_per_lane, int smem_slots, int batch_per_warp,
                                       int max_threads, bool forward) {
  return !(smem_slots > 0 && batch_per_warp == 3) &&
         !(smem_slots > 0 && batch_per_warp == 4 && !forward) &&
         !(smem_slots == 0 && batch_per_warp == 1 && records_per_lane == 12 && max_threads <= 256 &&
           !forward);
}
// The wide shapes' limits, from the table: one batch group of at most their largest BB, and
// H ≤ 96·slots (2112 at 22 slots; they need W ≥ ceil(slots / own_slots) = 6 record warps).
constexpr int warp_rows_wide_max_batch() {
  int most = 0;
  for (const WarpRowsShape& s : kWarpRowsShapes)
    if (s.smem_slots > 0 && s.batch_per_warp > most) most = s.batch_per_warp;
  return most;
}
constexpr std::int64_t warp_rows_wide_max_hidden() {
  std::int64_t most = 0;
  for (const WarpRowsShape& s : kWarpRowsShapes)
    if (s.smem_slots > 0 && 96 * s.slots() > most) most = 96 * s.slots();
  return most;
}
inline constexpr int kWarpRowsWideMaxBatch = warp_rows_wide_max_batch();
inline constexpr std::int64_t kWarpRowsWideMaxHidden = warp_rows_wide_max_hidden();
static_assert(kWarpRowsWideMaxBatch == 4 && kWarpRowsWideMaxHidden == 2112);
// The vanilla warp-rows kernel stages its weights through shared memory (warp_rows_kernel.cuh,
// stage_weights) before the records use that memory (the kernel takes the larger of the two): the
// CTA's 3·W units over all H ≤ 3·records columns, fp32.
constexpr std::size_t warp_rows_weight_smem_bytes(int records_per_cta, std::int64_t records) {
  return static_cast<std::size_t>(3 * records_per_cta) *
         static_cast<std::size_t>((3 * records + 3) / 4 * 4) * sizeof(float);
}
// A wide shape's weights held in shared memory, at the front: [W][smem_slots][9][32] fp32.
constexpr std::size_t warp_rows_held_smem_bytes(const WarpRowsShape& s, int records_per_cta) {
  return static_cast<std::size_t>(records_per_cta) * static_cast<std::size_t>(s.smem_slots) * 9 *
         32 * sizeof(float);
}
// Its dynamic shared memory: the weights held there (wide shapes), then each batch group's
// records of a step, by step parity, [2][G][BB][slots][32] float4 (48 KiB at kRec = 12, G = 4,
// BB = 1), or, before the first step, the weights' staging where that is larger.
constexpr std::size_t warp_rows_smem_bytes(const WarpRowsShape& s, int groups, int records_per_cta,
                                           std::int64_t records) {
  const std::size_t shared = std::size_t{2} * static_cast<std::size_t>(groups) *
                             static_cast<std::size_t>(s.batch_per_warp * s.slots()) * 32 * 16;
  const std::size_t staging = warp_rows_weight_smem_bytes(records_per_cta, records);
  return warp_rows_held_smem_bytes(s, records_per_cta) + (shared > staging ? shared : staging);
}
// With the input projection in the kernel (forward, rnn_kernels.h), after the records: the CTA's
// W records' 3 rows of W_ih and two steps of its G batch groups' rows of x, each as
// [..][ceil(I / 128)][32] float4 (I = 1152, W = 3, G = 4, BB = 1: 41.5 + 36.9 KiB).
constexpr std::size_t warp_rows_input_smem_bytes(const WarpRowsShape& s, int records, int groups,
                                                 std::int64_t input_size) {
  return static_cast<std::size_t>(3 * records + 2 * groups * s.batch_per_warp) *
         static_cast<std::size_t>((input_size + 127) / 128) * 32 * 16;
}
// When a call's forward computes its input projection in the kernel (where it can): for
// sequences of at most kInputInKernelMaxSteps steps, where the input GEMM's fixed cost is most of
// the call. In the kernel it costs every step 0.4-0.9 µs of the chain at B = 1..4 and 1.1-1.8 at
// B = 5..8 (ReLU H = 1152, an H100, against the GEMM path of 2c240ef: bench/persistent/NOTES.md,
// "The input projection in the kernel"), so from T = 8 the GEMM before the launch is faster; a
// call of T = 2 or 4 steps takes 46 % or 17 % less.
// knob: PRNN_PERSISTENT_INPUT_PROJECTION, -1 unset (this rule), 0 never, 1 at every T.
inline constexpr std::int64_t kInputInKernelMaxSteps = 4;
constexpr bool wants_input_in_kernel(std::int64_t steps, int knob) {
  return knob == 1 || (knob < 0 && steps <= kInputInKernelMaxSteps);
}
// The batches it takes: up to 4 batch groups (one chain per step each) of one to three batch
// elements per warp (the shapes' batch_per_warp), so a warp per batch element up to B = 4, two
// from B = 5 and three from B = 9 (kRec = 12 only): measured faster than the FMA direct shapes
// there (bench/persistent/NOTES.md, "Rows per warp", "Two batch elements per warp from B = 5"
// and "Three from B = 9"). Beyond, the CTA's warps outgrow the registers.
inline constexpr int kWarpRowsMaxGroups = 4;
inline constexpr int kWarpRowsMaxBatchPerWarp = 3;
inline constexpr int kWarpRowsMaxBatch = kWarpRowsMaxGroups * kWarpRowsMaxBatchPerWarp;

// Gated warp-rows shapes (gated_warp_rows_kernel.cuh): the GRU / LSTM layers at B ≤ 4, the
// vanilla warp-rows design with a record's rows split by gate: warp (r, q) of a CTA owns gate q's
// 3 rows of record r (rows q·H + 3k .. 3k + 2 of W_hh) over all H columns, lane l the columns of
// records l + 32·j, j < kGatedWarpRowsRecords (108 weights in fp32 registers, 16-bit weights
// widened once), for all BB ≥ B batch elements. A CTA holds Wr records (Wr·NG warps, Wr chosen at
// run time: the fewest that fit the SMs, 2 or 3); each warp polls own_slots record slots per
// batch element (the CTA's warps take every (Wr·NG)-th), so a shape serves Wr·NG ≥
// ceil(kRec / own_slots). The backward data holds the same 3 units' rows of W_hhᵀ restricted to
// gate q's H columns (the same 108 weights) and polls NG times the records: backward_slots of
// NG·kRec per batch element and warp (ceil(kRec / Wr): 4 at Wr = 3, 6 at Wr = 2), two batch
// elements per round from BB = 2 so that the polled records fit the registers beside the weights.
// own_slots 1 serves 12 warps (LSTM, Wr = 3), 2 serves 6..9. Registers are allotted to groups
// of four warps: a bound of 384 or 288 threads gives 168 per thread, 256 gives 255 (LSTM Wr = 2,
// GRU Wr = 2 take the latter). ptxas (sm_90), spill stores: forward at BB = 4 LSTM Wr = 3 28
// bytes, GRU Wr = 3 140, none at BB = 1; backward at Wr = 3 (168 registers) BB = 1 / 2 / 4 LSTM
// 84 / 160 / 188 bytes, GRU 80 / 144 / 168, at Wr = 2 (255 registers) 0–16.
struct GatedWarpRowsShape {
  int gates = 4;            // NG: 3 GRU, 4 LSTM
  int batch_per_warp = 1;   // BB
  int own_slots = 1;        // record slots a warp polls per batch element
  int max_threads = 384;    // launch bound
  int backward_slots = 4;   // the backward's record slots per batch element and warp
};
inline constexpr int kGatedWarpRowsRecords = 12;  // kRec: H ≤ 96·12 = 1152
inline constexpr int kGatedWarpRowsMinRecordWarps = 2, kGatedWarpRowsMaxRecordWarps = 3;
inline constexpr int kGatedWarpRowsMaxBatch = 4;
inline constexpr GatedWarpRowsShape kGatedWarpRowsShapes[] = {
    {4, 1, 1, 384, 4}, {4, 2, 1, 384, 4}, {4, 4, 1, 384, 4}, {4, 1, 2, 256, 6},
    {4, 2, 2, 256, 6}, {4, 4, 2, 256, 6}, {3, 1, 2, 288, 4}, {3, 2, 2, 288, 4},
    {3, 4, 2, 288, 4}, {3, 1, 2, 256, 6}, {3, 2, 2, 256, 6}, {3, 4, 2, 256, 6},
};
inline constexpr int kGatedWarpRowsShapeCount =
    static_cast<int>(sizeof(kGatedWarpRowsShapes) / sizeof(kGatedWarpRowsShapes[0]));
// Whether the gated warp-rows backward passes a step's records through shared memory as two
// planes, as the forward always does (384 bytes a warp's read of a record), or as float4s (512):
// an H200 A/B (bench/results/h200/ab/gated_backward_planes/) measured the planes 3-7 % faster
// for LSTM at BB = 2, the same for GRU at BB = 2, up to 3 % slower at BB = 1 and 7-35 % slower at
// BB = 4.
constexpr bool gated_warp_rows_backward_record_planes(int gates, int batch_per_warp) {
  return gates == 4 && batch_per_warp == 2;
}
// Its dynamic shared memory: the step's records by step parity, forward [2][BB][kRec][32]
// float4, backward [2][BB][NG][kRec][32] (192 KiB for LSTM at BB = 4).
constexpr std::size_t gated_warp_rows_smem_bytes(const GatedWarpRowsShape& s, bool backward) {
  return std::size_t{2} *
         static_cast<std::size_t>(s.batch_per_warp * (backward ? s.gates : 1) *
                                  kGatedWarpRowsRecords) *
         32 * 16;
}

// The gated warp-rows forward's product on tensor cores (GatedMma, gated_warp_rows_kernel.cuh).
// A shape runs Wr = its launch bound's warps / NG records per CTA; the shapes that have the
// tensor-core product are those at 3 records per CTA where it measured faster than the FMAs
// (tile()): the LSTM's at every BB, the GRU's at BB = 4. Their CTA's NG·3·Wr gate rows go in row
// tiles of 16, and each of the Wr·NG warps takes a share of the 16-column k-tiles of the 96·kRec
// columns, every row tile of each: one A fragment (4 registers) per row tile and k-tile, and one
// mma per fragment and step.
constexpr int gated_warp_rows_shape_records(const GatedWarpRowsShape& s) {
  return s.max_threads / 32 / s.gates;
}
constexpr bool gated_warp_rows_has_mma(const GatedWarpRowsShape& s) {
  return gated_warp_rows_shape_records(s) == kGatedWarpRowsMaxRecordWarps &&
         (s.gates == 4 || s.batch_per_warp == 4);
}
// The gated warp-rows backward's product on tensor cores (GatedMmaT, gated_warp_rows_kernel.cuh),
// for the LSTM's shapes of BB = 4 at 3 records per CTA (the GRU's measured level with its FMA
// form, ±2 %: bench/results/h200/ab/gated_backward_mma/): the CTA's 3·Wr units of dh are one row
// tile of W_hhᵀ; K is the exchanged dQ with each record's 3 values padded to 4 (NG·128·kRec
// columns, so that a record's hi and lo go to shared memory as one 8-byte store each), in k-tiles
// of 16 split over the Wr·NG warps, 8·kRec / Wr a warp, the last kGatedMmaBackwardSmemTiles of them
// held in shared memory (the rest in registers: 4 a k-tile). The staged dQ, 8 rows (hi and lo
// of 4 batch elements) of NG·128·kRec + kStagePad 16-bit values, and the held fragments are its
// dynamic shared memory.
constexpr bool gated_warp_rows_has_backward_mma(const GatedWarpRowsShape& s) {
  return s.gates == 4 && s.batch_per_warp == 4 &&
         gated_warp_rows_shape_records(s) == kGatedWarpRowsMaxRecordWarps;
}
constexpr int gated_mma_backward_k_tiles(int records, int rec = kGatedWarpRowsRecords) {
  return 8 * rec / records;
}
inline constexpr int kGatedMmaBackwardSmemTiles = 16;
constexpr int gated_mma_backward_stride(int gates, int rec = kGatedWarpRowsRecords) {
  return gates * 128 * rec + kStagePad;
}
constexpr std::size_t gated_mma_backward_smem_bytes(const GatedWarpRowsShape& s) {
  const int warps = gated_warp_rows_shape_records(s) * s.gates;
  return std::size_t{8} * static_cast<std::size_t>(gated_mma_backward_stride(s.gates)) * 2 +
         static_cast<std::size_t>(warps * kGatedMmaBackwardSmemTiles) * 32 * 16;
}
constexpr int gated_mma_row_tiles(int gates, int records) {
  return (gates * kUnitsPerRecord * records + 15) / 16;
}
constexpr int gated_mma_k_tiles(int gates, int records, int rec = kGatedWarpRowsRecords) {
  return (kUnitsPerRecord * 32 * rec / 16 + records * gates - 1) / (records * gates);
}

struct Tiling {
  // Index into kShapes; -1: no FMA shape fits (runs() below says whether tensor cores take the
  // layer; else the reason says why nothing does).
  int shape = -1;
  int gates = 1, rows = 0, groups = 0, batch_chunk = 0;
  DType storage = DType::F32;  // the weights in registers
  bool staged = false;
  int ctas = 0, threads = 0;
  std::size_t smem_bytes = 0;  // dynamic shared memory per CTA (staged: BC·records·16)
  // Records per batch element and step of the larger exchanged vector: the backward's dQ,
  // ceil(NG·H / 3) in the FMA kernel, NG·ceil(H / 3) on gated warp rows (the forward's h needs
  // ceil(H / 3)).
  std::int64_t records = 0;
  // The forward on tensor cores: index into kTensorCoreShapes, -1 when the forward runs on the
  // FMA shape above (fp32 weights, vanilla cells, or tensor cores turned off).
  int tensor_core = -1;
  // The backward data on tensor cores as well (the same shape); else on the FMA shape.
  bool tensor_core_backward = false;
  int tensor_core_ctas = 0;
  std::size_t tensor_core_smem_bytes = 0;  // the forward's
  // Its exchange, after the records (tensor_core_exchange_bytes() above; 0 without one).
  std::size_t tensor_core_exchange_bytes = 0;
  // The FMA kernel's CTA barrier after each batch chunk's finishers: the other warps wait for
  // the chunk's records to go out before they poll the next chunk's. Set (tile()) where it was
  // measured faster: direct shapes whose step is one chunk, or two chunks of rows x chunk >= 36
  // (H = 1152 B = 8, H = 2048 B = 4); not at two chunks of 1 or 2 at 9 rows, nor at four chunks
  // (bench/persistent/NOTES.md, "The chunk's chain timed inside the kernel").
  bool finish_barrier = false;
  // Both passes on the warp-rows kernel instead (vanilla cells, B ≤ kWarpRowsMaxBatch, H ≤
  // 1152; the wide shapes B ≤ kWarpRowsWideMaxBatch, H ≤ kWarpRowsWideMaxHidden): index into
  // kWarpRowsShapes, -1 when the FMA shape runs them; W record warps per batch group, G batch
  // groups, W·G warps per CTA.
  int warp_rows = -1;
  int warp_rows_records = 0, warp_rows_groups = 0, warp_rows_ctas = 0, warp_rows_threads = 0;
  // Both passes of a gated layer on the gated warp-rows kernels (B ≤ kGatedWarpRowsMaxBatch,
  // H ≤ 1152, 2 or 3 records per SM): index into kGatedWarpRowsShapes, -1 when they run on the
  // tensor-core or FMA shape (which the planner still picks: the fallback); Wr records per
  // CTA, Wr·NG warps. The backward on it unless the tensor cores take it (16-bit LSTM, B = 4,
  // 3 records per SM).
  int gated_warp_rows = -1;
  bool gated_warp_rows_backward = false;
  // The gated warp-rows forward's product on tensor cores (16-bit weights on a shape that has it,
  // gated_warp_rows_has_mma; tile()), else on the FMA pipes; `weights` the layer's weight type.
  bool gated_warp_rows_mma = false;
  // Its backward's product on tensor cores as well (gated_warp_rows_has_backward_mma, the tensor
  // cores on for both passes; tile()).
  bool gated_warp_rows_backward_mma = false;
  DType weights = DType::F32;
  int gated_warp_rows_records = 0, gated_warp_rows_ctas = 0, gated_warp_rows_threads = 0;
  std::string reason;

  // Whether both passes have a kernel: an FMA shape, or a tensor-core shape for both (the large
  // tensor-core shapes hold layers no FMA shape does).
  bool runs() const { return shape >= 0 || (tensor_core >= 0 && tensor_core_backward); }
};

// Picks the shape for a cell of `gates` gates (1, 3 or 4), hidden size H and batch B on a GPU
// with `sm_count` SMs (one CTA per SM). bf16 weights use the packed shapes where one exists at
// the fewest rows; other 16-bit weights are held in fp32 on chip; f64 returns shape -1 with the
// reason.
// Unless tensor_cores is Off, GRU and LSTM layers with bf16 or f16 weights get a tensor-core
// forward where a shape holds H: the fewest rows per CTA that fit the SMs, the smaller batch
// chunk that takes the whole batch (8, else 16; 8 where the shape has no other); with
// ForwardBackward (the default) and batch ≤ kTensorCoreBackwardMaxBatch, the backward data too.
// Where an FMA shape holds the layer as well, tensor cores from tensor_core_min_batch() on;
// where none does (H > 1152), at every batch, and only with both passes on them.
// Unless warp_rows is false, vanilla layers of batch ≤ kWarpRowsMaxBatch whose records fit a
// warp-rows shape run both passes on it (W = the fewest record warps per CTA that fit the SMs;
// BB = ceil(B / 4) batch elements per warp, G = ceil(B / BB) batch groups), or, where no
// register shape holds them, a wide shape (one batch group); the FMA shape stays the fallback.
// Likewise gated layers of batch ≤ kGatedWarpRowsMaxBatch whose records need 2 or 3 per SM run on
// the gated warp-rows kernels (both passes as with the tensor cores off, at B = 4 in 16 bits too,
// for a GRU and for an LSTM at 2 records per SM); a 16-bit LSTM at 3 records per SM with a
// tensor-core backward (B = 4) keeps that backward.
// gated_mma: which passes of a 16-bit layer on the gated warp rows take their product on tensor
// cores where it measured faster, unless tensor_cores is Off: the forward (3 records per CTA: the
// LSTM at every B, the GRU at B = 3..4), and with ForwardBackward the LSTM's backward too (BB = 4:
// B = 3..4 where tensor_cores is Forward; with ForwardBackward that backward is the tensor-core
// kernel's).
Tiling tile(int gates, std::int64_t hidden, std::int64_t batch, int sm_count, DType weights,
            TensorCores tensor_cores = TensorCores::ForwardBackward, bool warp_rows = true,
            TensorCores gated_mma = TensorCores::ForwardBackward);

// The kernel that runs one pass of a layer tiled as t (t.runs()), in the order launch()
// (rnn_kernels.cu) dispatches: gated warp rows where they take the pass, then warp rows, tensor
// cores where they take the pass, else the FMA shape (staged or direct).
enum class PassKernel : std::uint8_t { GatedWarpRows, WarpRows, TensorCores, FmaStaged, FmaDirect };
PassKernel pass_kernel(const Tiling& t, bool forward);
// "gated warp rows", "warp rows", "tensor cores", "FMA staged", "FMA direct" (prnn plan's names).
const char* to_string(PassKernel k);

// Auto's choice (prnn::Rnn, RnnAlgo::Auto): the per-step GEMMs instead of the persistent kernels
// where a pass of the layer runs on an FMA kernel (staged or direct) with at least this much
// recurrent work per SM and step, B·NG·H² / SMs multiply-adds. There the persistent training step
// grows about linearly with that work and the per-step GEMMs' much more slowly. Measured on an
// H200, T = 256, forward + backward µs/step, persistent / GEMM per step, with the work per SM
// (bench/results/h200/rnn_figure3_fea623f.csv, cells_figure3.csv, cells_figure3_bf16_6bf5964.csv):
//   ReLU f32 H=1152:  B = 32 (0.32 M) 33.1 / 37.6;  B = 64 (0.64 M) 65.0 / 55.2
//   GRU f32 H=1024:   B = 16 (0.38 M) 45.3 / 44.5;  B = 32 (0.76 M) 89.9 / 52.9
//   GRU f32 H=1152:   B = 16 (0.48 M) 48.6 / 58.5;  B = 32 (0.97 M) 96.2 / 74.9
//   LSTM f32 H=1024:  B = 16 (0.51 M) 62.1 / 50.3;  B = 32 (1.02 M) 123.3 / 62.8
//   LSTM f32 H=1152:  B = 16 (0.64 M) 66.9 / 75.1;  B = 32 (1.29 M) 132.1 / 91.5
//   LSTM bf16 H=1024: B = 64, the backward on the FMA kernel past kTensorCoreBackwardMaxBatch
//                     (2.03 M) 154.6 / 58.4
// At 0.5 M the rule picks the faster side, or one within 2 %, everywhere there but LSTM f32
// H=1152 B=16 (the GEMMs 12 % slower); where it takes the GEMMs they are 1.2–2.6× faster. The
// tensor-core passes (16-bit GRU / LSTM to B = 32) and the warp-rows kernels stay persistent
// (LSTM bf16 H=1024 B=32: 36.7 / 46.1).
inline constexpr double kAutoGemmPerStepMinWorkPerSm = 5e5;
// Empty when Auto keeps the persistent kernels of a layer tiled as t (t.runs()); else why it
// takes the per-step GEMMs.
std::string auto_prefers_gemm_per_step(const Tiling& t, std::int64_t hidden, std::int64_t batch,
                                       int sm_count);

}  // namespace prnn::persistent
