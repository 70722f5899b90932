// The persistent-RNN planner: tiling and capacity from device properties, cost from the MBSP
// bound and from the latency model of the kernels (plan.h). No per-GPU tables: everything is
// derived from the DeviceInfo the driver reports; the latency model's constants are SM clock
// cycles, converted with its clock rate.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "persistent/tiling.h"
#include "prnn/plan.h"

namespace prnn {

namespace persistent {

namespace {

// The tensor-core shape for t's layer, if one holds it (tiling.h): the forward, and the backward
// data where `backward` and the batch allow. With an FMA shape in t (fma), tensor cores from
// tensor_core_min_batch() on and their description goes before the FMA shape's, which then names
// the backward when that stays on the FMA kernel; without one, at any batch, both passes or none.
void pick_tensor_core(Tiling& t, std::int64_t hidden, std::int64_t batch, int sm_count,
                      DType weights, bool backward) {
  const bool fma = t.shape >= 0;
  if (fma && batch < tensor_core_min_batch(t.gates, hidden)) return;
  const int n_tiles = batch <= 8 ? 1 : 2;  // wanted; shapes with only the chunk of 8 loop over it
  int best = -1;
  for (int i = 0; i < kTensorCoreShapeCount; ++i) {
    const TensorCoreShape& s = kTensorCoreShapes[i];
    if (s.gates != t.gates || s.storage != weights || s.n_tiles > n_tiles) continue;
    if ((hidden + s.rows - 1) / s.rows > sm_count ||
        hidden > std::int64_t{kTensorCoreWarps} * s.k_tiles * 16)
      continue;
    const TensorCoreShape* b = best < 0 ? nullptr : &kTensorCoreShapes[best];
    if (b == nullptr || s.rows < b->rows || (s.rows == b->rows && s.n_tiles > b->n_tiles))
      best = i;
  }
  if (best < 0) return;
  const TensorCoreShape& s = kTensorCoreShapes[best];
  const bool both = backward && batch <= kTensorCoreBackwardMaxBatch;
  const int m_tiles = (t.gates * s.rows + 15) / 16;
  const std::string forward = fmt::format(
      "{} CTAs x {} threads, {} hidden units ({} gate rows) per CTA, W_hh as {} mma fragments "
      "({} registers per thread{}), batch in chunks of {}",
      (hidden + s.rows - 1) / s.rows, kTensorCoreThreads, s.rows, t.gates * s.rows,
      to_string(s.storage), 4 * m_tiles * (s.k_tiles - s.smem_tiles),
      s.smem_tiles == 0 ? std::string()
                        : fmt::format(", {:.0f} KiB in shared memory",
                                      static_cast<double>(tensor_core_fragment_bytes(s)) / 1024.0),
      8 * s.n_tiles);
  if (!fma && !both) {
    t.reason = fmt::format(
        "H={} needs more than the FMA kernel shapes hold in registers on {} SMs; the tensor-core "
        "shape that holds it ({}) runs only with both passes on tensor cores: batch <= {} and "
        "PRNN_PERSISTENT_TENSOR_CORES=1, got batch {}{}",
        hidden, sm_count, forward, kTensorCoreBackwardMaxBatch, batch,
        backward ? "" : " and the backward turned off");
    return;
  }
  t.tensor_core = best;
  t.tensor_core_backward = both;
  t.tensor_core_ctas = static_cast<int>((hidden + s.rows - 1) / s.rows);
  t.tensor_core_smem_bytes = tensor_core_smem_bytes(s);
  t.tensor_core_exchange_bytes = tensor_core_exchange_bytes(s, hidden, batch, both);
  t.reason = both ? fmt::format("forward and backward on tensor cores: {}; the backward holds "
                                "the same rows transposed and exchanges partial products of all "
                                "{} units",
                                forward, hidden)
                  : fmt::format("forward on tensor cores: {}; backward: {}", forward, t.reason);
}

// The shared memory a CTA may have on sm_90 (227 KiB), less room for the kernels' static words:
// a warp-rows shape's held weights, records and staging must fit it (only the wide shapes come
// near it: 189 KiB at H = 2048).
constexpr std::size_t kWarpRowsMaxSmemBytes = 227 * 1024 - 1024;

// The warp-rows kernel for vanilla layers at small batches (tiling.h), when a shape holds the
// layer: the fewest batch elements per warp that keep the batch groups within
// kWarpRowsMaxGroups; W = the fewest record warps per CTA that fit the SMs; then the fewest
// records per lane that cover the records, then the smallest launch bound that takes the CTA's
// warps, then the fewest polled slots that serve W. Where no register shape holds the layer, a
// wide shape (part of each lane's weights in shared memory): one batch group, the smallest
// BB ≥ B, where W serves its slots and its shared memory fits.
void pick_warp_rows(Tiling& t, std::int64_t records, std::int64_t batch, int sm_count) {
  if (batch > kWarpRowsMaxBatch) return;
  const std::int64_t per_warp = (batch + kWarpRowsMaxGroups - 1) / kWarpRowsMaxGroups;
  const std::int64_t w = (records + sm_count - 1) / sm_count;  // record warps per batch group
  auto groups_of = [&](const WarpRowsShape& s) {
    return (batch + s.batch_per_warp - 1) / s.batch_per_warp;
  };
  auto fits = [&](const WarpRowsShape& s) {
    const bool batch_fits =
        s.smem_slots == 0 ? s.batch_per_warp == per_warp : s.batch_per_warp >= batch;  // one group
    return batch_fits && std::int64_t{32} * s.slots() >= records &&
           32 * w * groups_of(s) <= s.max_threads && (s.slots() + w - 1) / w <= s.own_slots &&
           warp_rows_smem_bytes(s, static_cast<int>(groups_of(s)), static_cast<int>(w), records) <=
               kWarpRowsMaxSmemBytes;
  };
  auto better = [](const WarpRowsShape& s, const WarpRowsShape& b) {
    if (s.smem_slots != b.smem_slots) return s.smem_slots < b.smem_slots;  // registers first
    if (s.batch_per_warp != b.batch_per_warp) return s.batch_per_warp < b.batch_per_warp;
    if (s.records_per_lane != b.records_per_lane) return s.records_per_lane < b.records_per_lane;
    if (s.max_threads != b.max_threads) return s.max_threads < b.max_threads;
    return s.own_slots < b.own_slots;
  };
  for (int i = 0; i < kWarpRowsShapeCount; ++i)
    if (fits(kWarpRowsShapes[i]) &&
        (t.warp_rows < 0 || better(kWarpRowsShapes[i], kWarpRowsShapes[t.warp_rows])))
      t.warp_rows = i;
  if (t.warp_rows < 0) return;
  const WarpRowsShape& s = kWarpRowsShapes[t.warp_rows];
  const std::int64_t groups = groups_of(s);
  t.warp_rows_records = static_cast<int>(w);
  t.warp_rows_groups = static_cast<int>(groups);
  t.warp_rows_ctas = static_cast<int>((records + w - 1) / w);
  t.warp_rows_threads = static_cast<int>(32 * w * groups);
  t.finish_barrier = false;
  t.reason = fmt::format(
      "{} CTAs x {} threads, warp rows: each warp 3 hidden units (one record) for {} batch "
      "element{}, {} f32 weights per thread in registers{}, {} batch group{} of {} warps per CTA",
      t.warp_rows_ctas, t.warp_rows_threads, s.batch_per_warp, s.batch_per_warp == 1 ? "" : "s",
      9 * s.records_per_lane,
      s.smem_slots == 0 ? std::string() : fmt::format(" and {} in shared memory", 9 * s.smem_slots),
      groups, groups == 1 ? "" : "s", w);
}

// The gated warp-rows kernels (tiling.h), both passes, for GRU / LSTM layers at B ≤
// kGatedWarpRowsMaxBatch whose records need 2 or 3 warps per SM (a GRU, and an LSTM at 2, reach
// here with the tensor cores off: tile()): BB = the batch rounded up to 1, 2 or 4; Wr = the fewest
// records per CTA that fit the SMs; the fewest polled slots that serve Wr·NG warps, then the
// smallest launch bound that takes them (the most registers). The FMA / tensor-core choice made
// before stays in the tiling as the fallback.
void pick_gated_warp_rows(Tiling& t, std::int64_t records, std::int64_t batch, int sm_count) {
  if (batch > kGatedWarpRowsMaxBatch || records > std::int64_t{32} * kGatedWarpRowsRecords) return;
  const std::int64_t wr = (records + sm_count - 1) / sm_count;
  if (wr < kGatedWarpRowsMinRecordWarps || wr > kGatedWarpRowsMaxRecordWarps) return;
  const int bb = batch <= 1 ? 1 : batch <= 2 ? 2 : 4;
  const std::int64_t warps = wr * t.gates;
  const std::int64_t slots = (kGatedWarpRowsRecords + warps - 1) / warps;
  const std::int64_t backward_slots = (kGatedWarpRowsRecords + wr - 1) / wr;
  int best = -1;
  for (int i = 0; i < kGatedWarpRowsShapeCount; ++i) {
    const GatedWarpRowsShape& s = kGatedWarpRowsShapes[i];
    if (s.gates != t.gates || s.batch_per_warp != bb || s.own_slots < slots ||
        s.backward_slots < backward_slots || 32 * warps > s.max_threads)
      continue;
    const GatedWarpRowsShape* b = best < 0 ? nullptr : &kGatedWarpRowsShapes[best];
    if (b == nullptr || s.own_slots < b->own_slots ||
        (s.own_slots == b->own_slots && s.max_threads < b->max_threads))
      best = i;
  }
  if (best < 0) return;
  t.gated_warp_rows = best;
  t.gated_warp_rows_records = static_cast<int>(wr);
  t.gated_warp_rows_ctas = static_cast<int>((records + wr - 1) / wr);
  t.gated_warp_rows_threads = static_cast<int>(32 * warps);
  // The backward too, except where the tensor cores have it (a 16-bit LSTM at B = 4 whose records
  // need 3 warps per SM, tile(): there 0.5 µs/step faster on an H100,
  // bench/results/h100/gwr_bwd/knob_warp_rows*, 0.25–0.5 on an H200).
  t.gated_warp_rows_backward = !(t.tensor_core >= 0 && t.tensor_core_backward);
  if (t.gated_warp_rows_backward)
    t.records = std::max<std::int64_t>(t.records, t.gates * records);  // its dQ records
  const std::string rows = fmt::format(
      "{} CTAs x {} threads, each warp one gate's rows of 3 hidden units{} for the whole batch "
      "({} element{} per warp), {} f32 weights per thread in registers",
      t.gated_warp_rows_ctas, t.gated_warp_rows_threads,
      t.gated_warp_rows_backward ? " (backward: of W_hh^T, over one gate's columns)" : "", bb,
      bb == 1 ? "" : "s", 9 * kGatedWarpRowsRecords);
  if (t.gated_warp_rows_backward) {
    t.reason = "forward and backward on gated warp rows: " + rows;
    return;
  }
  // The backward's description: the tensor-core one without its forward.
  std::string backward = t.reason;
  const std::string both = "forward and backward on tensor cores: ";
  if (backward.rfind(both, 0) == 0) backward = backward.substr(both.size());
  t.reason = "forward on gated warp rows: " + rows + "; backward on tensor cores: " + backward;
}

Tiling tile_kernels(int gates, std::int64_t hidden, std::int64_t batch, int sm_count, DType weights,
                    TensorCores tensor_cores, bool warp_rows) {
  PRNN_EXPECT(hidden >= 1 && batch >= 1 && sm_count >= 1,
              "persistent tiling: expected hidden, batch and SM count >= 1, got {}, {}, {}",
              hidden, batch, sm_count);
  PRNN_EXPECT(gates == 1 || gates == 3 || gates == 4,
              "persistent tiling: expected 1, 3 or 4 gates, got {}", gates);
  // A gated layer the gated warp rows hold runs both passes there, as with the tensor cores
  // off, when it is a GRU or an LSTM whose records need 2 warps per SM (H <= 792 on 132 SMs).
  // At B = 4 in 16 bits (where a tensor-core shape would take it), H200, µs/step forward /
  // forward + backward, gated warp rows against the tensor cores:
  //   GRU  H = 1152 3.52 / 9.26 against 3.49 / 9.64, H = 768 2.19 / 5.98 against 3.07 / 8.18
  //        (bench/results/h200/ab/gru_tensor_cores/);
  //   LSTM (the forward on the gated warp rows either way, the backward on each) H = 512
  //        6.63 against 7.03, H = 768 7.21 against 7.88; at 3 records per SM the tensor-core
  //        backward is faster, H = 1024 8.86 against 9.34, H = 1152 9.56 against 9.81
  //        (bench/results/h200/ab/lstm_tensor_cores_b4/), so there the LSTM keeps it
  //        (pick_gated_warp_rows).
  const std::int64_t h_records = (hidden + kUnitsPerRecord - 1) / kUnitsPerRecord;
  const bool two_records_per_sm =
      h_records <= std::int64_t{kGatedWarpRowsMinRecordWarps} * sm_count;
  if ((gates == 3 || (gates == 4 && two_records_per_sm)) && tensor_cores != TensorCores::Off &&
      warp_rows) {
    Tiling rows = tile_kernels(gates, hidden, batch, sm_count, weights, TensorCores::Off, true);
    if (rows.gated_warp_rows >= 0) return rows;
  }
  Tiling t;
  t.gates = gates;
  t.records = (gates * hidden + kUnitsPerRecord - 1) / kUnitsPerRecord;
  if (weights == DType::F64) {
    t.reason = "the persistent kernels take f32, f16 or bf16 weights, got f64";
    return t;
  }
  auto want_bc = [&](const KernelShape& s) {
    return s.staged ? wanted_staged_chunk(batch) : wanted_batch_chunk(batch);
  };
  // Direct shapes: one thread per G column groups. Staged: NG row groups of such threads.
  auto threads_for = [&](const KernelShape& s) {
    return (s.staged ? gates : 1) * (((h_records + s.groups - 1) / s.groups + 31) / 32 * 32);
  };
  // The fewest rows per CTA that fit the SMs; within those rows the packed 16-bit storage
  // when the weights are 16-bit, then the largest batch chunk the batch asks for, among the
  // shapes whose threads fit their bound.
  int best = -1;
  auto better = [&](const KernelShape& s, const KernelShape& b) {
    if (s.rows != b.rows) return s.rows < b.rows;
    if (s.staged != b.staged) return s.staged;
    const bool s16 = s.storage == weights, b16 = b.storage == weights;
    if (s16 != b16) return s16;
    return s.batch_chunk > b.batch_chunk;
  };
  for (int i = 0; i < kShapeCount; ++i) {
    const KernelShape& s = kShapes[i];
    if (s.gates != gates || (s.storage != DType::F32 && s.storage != weights)) continue;
    if ((hidden + s.rows - 1) / s.rows > sm_count || threads_for(s) > s.max_threads ||
        s.batch_chunk > want_bc(s))
      continue;
    if (best < 0 || better(s, kShapes[best])) best = i;
  }
  if (best >= 0) {
    const KernelShape& s = kShapes[best];
    t.shape = best;
    t.rows = s.rows;
    t.groups = s.groups;
    t.batch_chunk = s.batch_chunk;
    t.storage = s.storage;
    t.staged = s.staged;
    t.smem_bytes = s.staged ? static_cast<std::size_t>(s.batch_chunk * t.records) * 16 : 0;
    t.ctas = static_cast<int>((hidden + s.rows - 1) / s.rows);
    t.threads = static_cast<int>(threads_for(s));
    // Measured faster with the barrier (tiling.h): a step of one chunk, or of two chunks of at
    // least 36 sums per finishing CTA (rows x chunk).
    const std::int64_t chunks = (batch + s.batch_chunk - 1) / s.batch_chunk;
    t.finish_barrier =
        !s.staged && (chunks == 1 || (chunks == 2 && s.rows * s.batch_chunk >= 36));
    t.reason = fmt::format(
        "{} CTAs x {} threads, {} hidden units ({} gate rows) per CTA, {} {} weights per thread "
        "in registers, batch in chunks of {}{}{}",
        t.ctas, t.threads, t.rows, gates * t.rows,
        (s.staged ? 1 : gates) * t.rows * kUnitsPerRecord * t.groups, to_string(t.storage),
        t.batch_chunk, s.staged ? ", records staged in shared memory" : "",
        t.finish_barrier ? ", a CTA barrier after each chunk's finishers" : "");
  } else {
    std::int64_t max_hidden = 0;  // the largest H any FMA shape of this cell holds
    for (const KernelShape& s : kShapes)
      if (s.gates == gates && (s.storage == DType::F32 || s.storage == weights))
        max_hidden = std::max(max_hidden,
                              std::min<std::int64_t>(std::int64_t{s.rows} * sm_count,
                                                     std::int64_t{s.max_threads} /
                                                         (s.staged ? gates : 1) * s.groups *
                                                         kUnitsPerRecord));
    const bool sixteen = weights == DType::BF16 || weights == DType::F16;
    t.reason = fmt::format(
        "H={} needs more than the largest {}-gate kernel shape holds in registers on {} SMs "
        "(H <= {}){}",
        hidden, gates, sm_count, max_hidden,
        gates == 1     ? "; the vanilla shapes with W_hh partly in shared memory (warp rows) stop "
                         "at H = 2112"
        : !sixteen     ? "; fp32 weights have no tensor-core shape (16-bit weights reach H = 2048)"
        : tensor_cores == TensorCores::Off
            ? "; PRNN_PERSISTENT_TENSOR_CORES=0 turns off the tensor-core shapes, which hold "
              "16-bit GRU / LSTM up to H = 2048"
            : "; no tensor-core shape holds it on this GPU either");
  }
  if (tensor_cores != TensorCores::Off && gates != 1)
    pick_tensor_core(t, hidden, batch, sm_count, weights,
                     tensor_cores == TensorCores::ForwardBackward);
  if (warp_rows && gates == 1 && t.shape >= 0) pick_warp_rows(t, h_records, batch, sm_count);
  if (warp_rows && gates != 1 && t.runs()) pick_gated_warp_rows(t, h_records, batch, sm_count);
  return t;
}

}  // namespace

Tiling tile(int gates, std::int64_t hidden, std::int64_t batch, int sm_count, DType weights,
            TensorCores tensor_cores, bool warp_rows, TensorCores gated_mma) {
  Tiling t = tile_kernels(gates, hidden, batch, sm_count, weights, tensor_cores, warp_rows);
  t.weights = weights;
  // The tensor-core product where it measured faster, the shapes gated_warp_rows_has_mma takes:
  // 3 records per CTA (Wr·NG ≥ 9 warps, H ≥ 793 on 132 SMs), the LSTM at every B, the GRU at
  // BB = 4 (B = 3, 4). H200, bf16, T = 256, µs/step forward, FMAs against tensor cores, after
  // 25d829c's finish (bench/results/h200/ab/prepared2/mma_all_*.csv): LSTM H = 1152 B = 1 2.00 →
  // 1.95, B = 2 2.36 → 2.11, H = 1024 B = 2 2.33 → 2.01; GRU H = 1152 B = 1 1.66 → 1.86, B = 2
  // 2.14 → 2.31 (the GRU's FMA forward is faster there). At B = 4 (ab/gated_mma/, before that
  // finish): GRU H = 1152 3.42 → 2.97, LSTM H = 1152 3.29 → 3.12. At 2 records per CTA (GRU
  // H = 768 B = 4 2.23 → 2.50) the FMAs stay.
  t.gated_warp_rows_mma =
      t.gated_warp_rows >= 0 && gated_mma != TensorCores::Off && tensor_cores != TensorCores::Off &&
      (weights == DType::BF16 || weights == DType::F16) &&
      gated_warp_rows_has_mma(kGatedWarpRowsShapes[t.gated_warp_rows]) &&
      t.gated_warp_rows_records ==
          gated_warp_rows_shape_records(kGatedWarpRowsShapes[t.gated_warp_rows]);
  if (t.gated_warp_rows_mma) {
    const int wr = t.gated_warp_rows_records;
    t.reason += fmt::format(
        "; the forward's product on tensor cores instead: each warp a 1/{} of the columns of "
        "the CTA's {} gate rows as {} mma fragments ({} registers per thread)",
        wr * gates, gates * kUnitsPerRecord * wr, to_string(weights),
        4 * gated_mma_row_tiles(gates, wr) * gated_mma_k_tiles(gates, wr));
  }
  // The backward's product on tensor cores (GatedMmaT), the LSTM's only: at B = 3 it measured
  // 0.2–5.9 % faster per training step than the FMA form (bench/results/h200/ab/
  // gated_backward_mma/); the GRU's measured level (±2 %). By default the LSTM's backward at
  // B = 4, and at B = 3 up to H = 1024, is the tensor-core kernel's (tensor_core_min_batch; at
  // B = 4 4.5–14 % faster than either gated form), so there this runs under
  // PRNN_PERSISTENT_TENSOR_CORES=forward; at B = 3 past H = 1024 by default.
  t.gated_warp_rows_backward_mma =
      t.gated_warp_rows_mma && gated_mma == TensorCores::ForwardBackward &&
      t.gated_warp_rows_backward &&
      gated_warp_rows_has_backward_mma(kGatedWarpRowsShapes[t.gated_warp_rows]);
  if (t.gated_warp_rows_backward_mma) {
    const int wr = t.gated_warp_rows_records, kt = gated_mma_backward_k_tiles(wr);
    t.reason += fmt::format(
        "; the backward's product on tensor cores too: each warp {} k-tiles of W_hh^T's {} rows "
        "of the CTA's units ({} in registers, {} in shared memory)",
        kt, kUnitsPerRecord * wr, kt - kGatedMmaBackwardSmemTiles, kGatedMmaBackwardSmemTiles);
  }
  return t;
}

PassKernel pass_kernel(const Tiling& t, bool forward) {
  PRNN_ASSERT(t.runs());
  if (t.gated_warp_rows >= 0 && (forward || t.gated_warp_rows_backward))
    return PassKernel::GatedWarpRows;
  if (t.warp_rows >= 0) return PassKernel::WarpRows;
  if (t.tensor_core >= 0 && (forward || t.tensor_core_backward)) return PassKernel::TensorCores;
  return kShapes[t.shape].staged ? PassKernel::FmaStaged : PassKernel::FmaDirect;
}

std::string auto_prefers_gemm_per_step(const Tiling& t, std::int64_t hidden, std::int64_t batch,
                                       int sm_count) {
  PRNN_ASSERT(t.runs() && sm_count > 0);
  const double work = static_cast<double>(batch) * t.gates * static_cast<double>(hidden) *
                      static_cast<double>(hidden) / sm_count;
  if (work < kAutoGemmPerStepMinWorkPerSm) return {};
  for (const bool forward : {true, false}) {
    const PassKernel k = pass_kernel(t, forward);
    if (k != PassKernel::FmaStaged && k != PassKernel::FmaDirect) continue;
    return fmt::format(
        "the {} pass would run on the {} kernel with B·NG·H² = {:.2f} M multiply-adds per SM and "
        "step, at or past {:.2f} M, where the per-step GEMMs train faster (measured on an H200)",
        forward ? "forward" : "backward", to_string(k), work / 1e6,
        kAutoGemmPerStepMinWorkPerSm / 1e6);
  }
  return {};
}

const char* to_string(PassKernel k) {
  switch (k) {
    case PassKernel::GatedWarpRows: return "gated warp rows";
    case PassKernel::WarpRows: return "warp rows";
    case PassKernel::TensorCores: return "tensor cores";
    case PassKernel::FmaStaged: return "FMA staged";
    case PassKernel::FmaDirect: return "FMA direct";
  }
  return "?";
}

}  // namespace persistent

namespace {

constexpr double kFp32FlopsPerSmPerCycle = 256.0;  // 128 FMA lanes
constexpr double kSharedBytesPerSmPerCycle = 128.0;
constexpr double kL2OverDram = 2.5;
constexpr std::int64_t kSharedReserveBytes = 4096;  // barrier flags, reductions

// ---- the latency model (plan.h: PassCost) ----------------------------------------------------
// Cycles of the SM clock. The cycle constants were fitted together (least squares on the log of
// predicted / measured, then rounded; the GEMMs' efficiency set beforehand, below) to the H200
// steps of the committed measurements, forward and forward + backward, T = 256, B <= 32
// (bench/results/h200/: ab/lengths_new_*.csv, rnn_lab.csv, cells_figure3.csv f32,
// cells_figure3_bf16_6bf5964.csv, tensor_cores/h2048_batch_*_6bf5964.csv,
// cells_targets16_6c29441.csv, cells_targets32_2c511a9.csv); beside each, the measurements that
// pin it down. bench/persistent/NOTES.md ("The planner's latency model") has the fit.
//
// The exchange: a chunk's records (or arrival count) going out at one SM to a polling consumer
// at another seeing them, through L2. Set by how much one chunk's chain exceeds a CTA's busy time
// on it: the direct kernel runs B = 2 as two chunks of one as fast as B = 1 as one (H=1152 2.37
// vs 2.39, H=2048 3.35 vs 3.41 µs/step, ab/lengths_new_*.csv), while the staged and tensor-core
// kernels double with the chunks (staged LSTM f32 H=1024 B=4 5.81, B=8 11.45, cells_figure3.csv;
// tensor-core LSTM bf16 H=2048 B=8 8.21, B=16 15.64, h2048_batch_lstm_6bf5964.csv).
constexpr double kExchangeCycles = 1000;
// The direct FMA kernels (vanilla cells; kernels_fma.cu): the poll of the thread's own records,
// the reduce-scatter's shared-memory step and the CTA barrier (fixed), then the finishing threads
// and the publish (the tail: the other warps start the next chunk meanwhile). The tail from the
// same B = 1 / B = 2 pairs; the fixed part from ReLU f32 H=1152 B=4 2.99, B=8 4.80
// (rnn_lab.csv), H=2048 B=4 5.26 µs/step.
constexpr double kDirectFixedCycles = 1050;
constexpr double kDirectTailCycles = 1800;
// The warp-rows kernel (vanilla cells, B ≤ 12; warp_rows_kernel.cuh): the poll, the group's
// barrier, the warp's shuffle all-reduce, the finishing lane's cell and stores, the publish, in
// one chain per step. Fitted by hand, with kWarpRowsL2BytesPerSmPerCycle below, to ReLU f32
// H=1152 B = 1..8 (rnn_targets_fea623f.csv: forward 1.30 / 1.50 / 1.74 / 1.85 at B = 1..4,
// 2.39–2.87 at B = 5..8; forward + backward 2.87 / 3.45 / 4.10 / 4.49, 5.56–7.00 µs/step): the
// model was 0.95–1.07× the forward and 1.00–1.11× forward + backward there, at 1100 cycles. The
// weights staged through shared memory (92d2305) took every pass 0.1–0.15 µs/step faster
// (h200/staged_weights/rnn_targets.csv: forward 1.16 / 1.35 / 1.66 / 1.75 at B = 1..4, 2.32–2.78
// at B = 5..8, 3.39–3.86 at B = 9..12; forward + backward 2.61 / 3.17 / 3.92 / 4.22, 5.40–6.79,
// 8.01–9.24): at 850 cycles the model is 0.89–1.06× the forward and 1.00–1.11× forward +
// backward over B = 1..12.
constexpr double kWarpRowsFixedCycles = 850;
// The gated warp-rows forward (gated_warp_rows_kernel.cuh): the vanilla chain plus a second
// barrier, the gate warps' sums through shared memory and the gated cell's math; and its backward
// data, the same chain with NG times the records polled (every gate's dQ, in two rounds from
// B = 2) and the cell's backward. Fitted together (with the shared-memory reads in series with
// the issue, gated_warp_rows_chunks) to the GRU and LSTM at H = 1152, f32 and bf16, B = 1..4 on
// an H100, forward and forward + backward (bench/results/h100/ab/gated_straight_poll/: the `g`
// tree's GRU, the `old` tree's LSTM; e.g. LSTM bf16 2.10 / 2.56 / 3.48 / 3.74, GRU f32 1.80 /
// 2.67 / 3.80 / 4.10 µs/step forward): rms 5.7 % on log(predicted / measured), 0.91–1.12×, where
// the larger of issue and reads with 2200 / 3600 cycles gave 12 % and 0.78–1.16× (the B = 3, 4
// steps under, B = 1 over). The 16-bit forward call also converts the parameters and tensors and
// launches them apart (ncu, LSTM H=1152 B=1, per call of 256 steps: the kernel 551 µs in both
// types, the fp32 GEMM 100 µs, the TF32 GEMM 24 µs plus 31 µs of conversions:
// ab/ncu_gated_lstm_h1152_b1_*.csv); not modelled.
constexpr double kGatedWarpRowsFixedCycles = 1600;
constexpr double kGatedWarpRowsBackwardFixedCycles = 3400;
// The gated warp-rows forward's product on tensor cores (Tiling::gated_warp_rows_mma): cycles
// per mma.sync of a warp's product (kMT·kKT of them: LSTM 18, GRU 16 at 3 records per CTA), in
// place of the FMA issue and the records' shared-memory reads; the rest of the chain as the FMA
// form's. Fitted to the H200 steps of 25d829c (bench/results/h200/ab/gated_finish/final_*.csv,
// medians of 4: bf16 forward, LSTM H = 1152 B = 3 / 4 2.35 / 2.58, H = 1024 B = 3 2.32; GRU
// H = 1152 B = 4 2.73, H = 1024 B = 4 2.61 µs/step): the LSTM's alone gives ~90, the GRU's ~125
// (its finish, r before n, stays serial), 100 lies 0.91–1.09× on all five. It is not the mma's
// cost: alone, the product takes ~390 cycles an iteration in 12 warps, 21 a warp's mma
// (bench/persistent/mma_issue_lab.cu); the stamps put ~520 cycles of the step in the product,
// ~1050 in the finish (ab/gated_finish/stamps_after.txt).
constexpr double kGatedMmaCycles = 100;
// The staged FMA kernels (gated cells with FMA weights): the staging's polls, its barrier, the
// reduction's barrier, the finishers' gate math, the publish. From the gated f32 steps at B = 1..32
// (cells_figure3.csv: LSTM H=1024 3.61 at B = 1, 5.81 at B = 4; GRU H=1152 2.98, 4.71) and the
// bf16 ones at B = 1, 2 (cells_figure3_bf16_6bf5964.csv: LSTM H=1152 3.08, 3.58).
constexpr double kStagedFixedCycles = 3450;
// The tensor-core kernels (tensor_core_kernel.cuh). Forward: thread 0's wait on the arrival
// counter, the barriers around the staging and the warps' sums, the finishers, the h store, the
// fence and the count; from the bf16 forward at B = 1..32 (LSTM H=1152 B=4 4.07, GRU 3.62,
// cells_figure3_bf16_6bf5964.csv; LSTM H=2048 B=1 4.54, h2048_batch_lstm_6bf5964.csv). Backward
// data: the wait, the sums of the partial products, the finishers, the staging of dQ, the fence
// and the count; from forward + backward minus forward at the same points (LSTM H=1152 B=4 10.42
// − 4.07), which also holds the backward's GEMMs (kGemmEfficiency). Check: ncu kernel times at
// LSTM H=1152 B=4, forward 3.87 and backward data 5.17, H=2048 B=4 5.25 and 7.18 µs/step
// (docs/PERFORMANCE.md; the model: 3.74, 5.66, 5.23, 7.60).
constexpr double kTensorCoreForwardFixedCycles = 4500;
constexpr double kTensorCoreBackwardFixedCycles = 7150;
// Compute. FMA kernels: cycles per instruction of a thread (its FMAs, its 16-bit unpacking, about
// 4 per partial sum of its reduce-scatter), per warp a scheduler holds (at least one); from how the
// steps grow with the chunk (ReLU f32 H=1152 B=4 → 8, LSTM f32 H=1024 B=1 → 2 → 4). Tensor-core
// kernels: cycles per mma.sync m16n8k16 (or shared-memory fragment load) of a warp, per warp a
// scheduler holds; from the 16-bit forward at B = 8 → 16 (unpacked: 4 times the mma of B = 4),
// LSTM H=1152 5.24 → 7.86 µs/step.
constexpr double kIssueCycles = 1.2;
constexpr double kMmaCycles = 14;
constexpr int kSchedulersPerSm = 4;
// The exchange data the tensor-core backward reads and writes through L2, bytes per SM per cycle
// when every SM reads the same lines at once: from the tensor-core forward's growth with the
// batch at H = 2048 before 2026-11-29 (LSTM bf16 4.54 / 4.88 / 5.86 / 8.21 µs/step at B = 1 / 2 /
// 4 / 8, one chunk each; its staging reads 8 KB per batch element), which was its staging's
// divisions more than the L2 (the forward's own rate below); not refitted for the backward.
constexpr double kL2BytesPerSmPerCycle = 16;
// The tensor-core forward's staging of h, bytes per SM per cycle, since its row and column
// advance without a division per float4: the stamps' staging phase grows by 1492 cycles from
// B = 8 to B = 16 (32 KB more of h) at LSTM bf16 H = 1024 (h200/ab/tc_forward_stage/,
// stamps_nodiv.txt: 2172 → 3664 cycles). The old staging's 16 above was its divisions.
constexpr double kTensorCoreStageBytesPerSmPerCycle = 22;
// The same for the warp-rows kernel, whose batch groups' warps poll the records as 16-byte loads
// spread over the group: from its growth with the batch (ReLU f32 H=1152 B = 1..8,
// rnn_targets_fea623f.csv: 1.30 / 1.50 / 1.74 / 1.85 µs/step forward at B = 1..4, 2.87 at B = 8).
constexpr double kWarpRowsL2BytesPerSmPerCycle = 64;
// The GEMMs over all T·B rows (outside the recurrence): fp32 layers on the FP32 pipes (on TF32
// tensor cores where RnnDesc::gemm_math asks for them), 16-bit layers on TF32 tensor cores (2048
// flops per SM per cycle on sm_90), at a third of that peak:
// the four TF32 GEMMs of LSTM bf16 H=1152 B=4 run at 35% (ncu: 0.92 µs/step), and moving the
// 16-bit layers' GEMMs from FP32 to TF32 took LSTM bf16 H=1152 B=1 from 3.72 to 3.08 µs/step and
// B=2 from 4.33 to 3.58 (cells_figure3.csv, cells_figure3_bf16_6bf5964.csv: the FP32 GEMM at a
// quarter to a third of its peak).
constexpr double kTf32FlopsPerSmPerCycle = 2048.0;
constexpr double kGemmEfficiency = 1.0 / 3.0;
// The fp32 layers' GEMMs on the FP32 pipes (gemm_math Fp32) run at 0.6 of that peak: the same
// steps with fp32 and with TF32 GEMMs differ by the fp32 GEMM less the TF32 one, ReLU H=2048
// 0.13 / 0.33 / 0.47 / 0.59 µs/step at B = 1..4 (h100/wide_rows/h2048_wide_bb3.csv), H=1152 B=4
// 0.22 (h200/staged_weights/rnn_targets.csv), i.e. 0.59–0.66 of the FP32 peak with the TF32 GEMM
// at a third of its own. At a third the model gave the kernel of ReLU H=2048 B=4 2.16 µs/step
// and its input GEMM 1.50, for about 3.3 and 0.75 measured, the total within 0.90×.
constexpr double kFp32GemmEfficiency = 0.6;
// A 16-bit layer's input GEMM reads its 16-bit x and W_ih on the 16-bit tensor cores (gemm16),
// twice the TF32 peak, at the same third of it: that GEMM of LSTM bf16 H = 1152 B = 4 predicted
// 0.24 → 0.12 µs/step, measured 0.13 faster (bench/results/h200/ab/prepared2/, `gemm16`).
constexpr double kF16FlopsPerSmPerCycle = 2 * kTf32FlopsPerSmPerCycle;

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
double kib(std::int64_t bytes) { return static_cast<double>(bytes) / 1024.0; }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// One batch chunk of one pass, in cycles (plan.h: PassCost).
struct ChunkCycles {
  double fixed = 0.0, compute = 0.0, l2 = 0.0, tail = 0.0;
};

// The chunks of one pass of FMA kernel shape t (kernels_fma.cu). A thread holds `rows` weight
// rows (the direct forward NG·R, otherwise R) of 3·`groups` columns (the direct backward NG·G
// groups, otherwise G) and issues, per chunk of BC, rows·3·groups·BC FMAs, two unpacking
// instructions per register of two 16-bit weights and column, and about 4 per partial sum of its
// reduce-scatter (rows·BC padded to 8: select, select, shuffle, add); the CTA reads the chunk's
// records once: nb · records · 16 bytes (records of h forward, of dQ backward).
std::vector<ChunkCycles> fma_chunks(const persistent::Tiling& t, bool forward, std::int64_t hidden,
                                    std::int64_t batch) {
  const persistent::KernelShape& s = persistent::kShapes[t.shape];
  const std::int64_t rows = forward && !s.staged ? std::int64_t{s.gates} * s.rows : s.rows;
  const std::int64_t groups = !forward && !s.staged ? std::int64_t{s.gates} * s.groups : s.groups;
  const std::int64_t columns = persistent::kUnitsPerRecord * groups;
  const std::int64_t fmas = rows * columns * s.batch_chunk;
  const std::int64_t unpacking = s.storage == DType::F32 ? 0 : 2 * ceil_div(rows, 2) * columns;
  const std::int64_t partials = ceil_div(rows * s.batch_chunk, 8) * 8;
  const double instructions = static_cast<double>(fmas + unpacking + 4 * partials);
  const double warps_per_scheduler =
      std::max(1.0, static_cast<double>(t.threads) / 32.0 / kSchedulersPerSm);
  const std::int64_t records =
      forward ? ceil_div(hidden, persistent::kUnitsPerRecord) : t.records;
  std::vector<ChunkCycles> chunks;
  for (std::int64_t b0 = 0; b0 < batch; b0 += s.batch_chunk) {
    const std::int64_t nb = std::min<std::int64_t>(s.batch_chunk, batch - b0);
    chunks.push_back({s.staged ? kStagedFixedCycles : kDirectFixedCycles,
                      kIssueCycles * instructions * warps_per_scheduler,
                      static_cast<double>(nb * records * 16) / kL2BytesPerSmPerCycle,
                      s.staged ? 0.0 : kDirectTailCycles});
  }
  return chunks;
}

// Bytes of one warp's shared-memory read of a step record (32 lanes): two planes, {x, y} and z
// (kernel_common.cuh, RecordPlanes), or a float4 with its tag.
constexpr std::int64_t record_read_bytes(bool planes) {
  return planes ? 32 * 12 : 32 * 16;
}

// The one chunk of a pass of the warp-rows kernel (tiling t): a lane issues 9 FMAs per slot
// (kRec + smem_slots) and batch element it holds, 9 shared-memory loads per slot held there, and
// 5 shuffles and adds per sum (3 per batch element); the CTA reads each record of the step once
// (B·records·16 bytes; a batch group's warps share them). Then, in series with the issue, the
// shared-memory reads of every warp: a record per slot and batch element of its BB (two planes,
// 384 bytes a warp, since 1e4778d, where warp_rows_record_planes says; 512 before, when the fits
// below were made), and the held slots' 9 weights. Without them the model gave the wide shapes'
// step (ReLU H=2048, B = 1..4) 1.07 / 1.33 / 1.54 / 1.80 µs/step of kernel for about
// 1.69 / 2.33 / 2.68 / 3.29 measured (h100/wide_rows/h2048_wide_bb3.csv less the fp32 GEMM
// above); with them 1.71 / 2.27 / 2.83 / 3.39. The lab's phase runs at a third of its issue rate
// (bench/persistent/NOTES.md, "Warp rows past H = 1152"), and a diagnostic without 21 of 22 record
// reads was only 0.35 µs faster at B = 4: so this term is the phase's measured cost per slot and
// batch element, written as the reads' bandwidth, not a finding that the reads alone take it.
std::vector<ChunkCycles> warp_rows_chunks(const persistent::Tiling& t, bool forward,
                                          std::int64_t records, std::int64_t batch) {
  const persistent::WarpRowsShape& s = persistent::kWarpRowsShapes[t.warp_rows];
  const std::int64_t bb = s.batch_per_warp;
  const double instructions = static_cast<double>(9 * s.slots() * bb + 9 * s.smem_slots +
                                                  2 * 5 * persistent::kUnitsPerRecord * bb);
  const double warps = static_cast<double>(t.warp_rows_threads) / 32.0;
  const double warps_per_scheduler = std::max(1.0, warps / kSchedulersPerSm);
  const std::int64_t record_bytes = record_read_bytes(persistent::warp_rows_record_planes(
      s.records_per_lane, s.smem_slots, s.batch_per_warp, s.max_threads, forward));
  const double shared =
      warps * static_cast<double>(s.slots() * bb * record_bytes + s.smem_slots * 9 * 128) /
      kSharedBytesPerSmPerCycle;
  return {{kWarpRowsFixedCycles, kIssueCycles * instructions * warps_per_scheduler + shared,
           static_cast<double>(batch * records * 16) / kWarpRowsL2BytesPerSmPerCycle, 0.0}};
}

// The one chunk of a gated warp-rows pass (tiling t): a lane issues, per batch element of its
// BB, 9·kRec FMAs and kRec shared-memory loads, and about 4 instructions per entry of its
// reduce-scatter; every warp reads its records from shared memory (BB·kRec·384 bytes a warp in
// the forward, whose records are two planes since 1e4778d; in the backward 384 where
// gated_warp_rows_backward_record_planes says, else 512), in
// series with the issue as in the vanilla warp rows (the larger of the two gave the steps' growth
// with BB half of what it is: kGatedWarpRowsFixedCycles above); the CTA reads each record from
// L2 once: records of h (forward), NG times as many of dQ (backward). With the forward's
// product on tensor cores (gated_warp_rows_mma), kGatedMmaCycles per mma of a warp instead of
// the issue and the shared-memory reads.
std::vector<ChunkCycles> gated_warp_rows_chunks(const persistent::Tiling& t, bool forward,
                                                std::int64_t records, std::int64_t batch) {
  const persistent::GatedWarpRowsShape& s =
      persistent::kGatedWarpRowsShapes[t.gated_warp_rows];
  const std::int64_t bb = s.batch_per_warp, rec = persistent::kGatedWarpRowsRecords;
  const std::int64_t sums = persistent::kUnitsPerRecord * bb;
  const std::int64_t padded = sums <= 4 ? 4 : sums <= 8 ? 8 : 16;
  const double instructions = static_cast<double>(10 * rec * bb + 4 * padded);
  const double warps = static_cast<double>(t.gated_warp_rows_threads) / 32.0;
  const std::int64_t record_bytes = record_read_bytes(
      forward || persistent::gated_warp_rows_backward_record_planes(s.gates, s.batch_per_warp));
  const double shared =
      warps * static_cast<double>(bb * rec * record_bytes) / kSharedBytesPerSmPerCycle;
  const std::int64_t l2_records = forward ? records : s.gates * records;
  const double l2 = static_cast<double>(batch * l2_records * 16) / kWarpRowsL2BytesPerSmPerCycle;
  if (forward && t.gated_warp_rows_mma) {
    const int wr = t.gated_warp_rows_records;
    const double mma = persistent::gated_mma_row_tiles(s.gates, wr) *
                       persistent::gated_mma_k_tiles(s.gates, wr);  // a warp's, per step
    return {{kGatedWarpRowsFixedCycles, kGatedMmaCycles * mma, l2, 0.0}};
  }
  // The backward on tensor cores: the forward's cycles per mma (not refitted), one row tile.
  if (!forward && t.gated_warp_rows_backward_mma) {
    const double mma = persistent::gated_mma_backward_k_tiles(t.gated_warp_rows_records);
    return {{kGatedWarpRowsBackwardFixedCycles, kGatedMmaCycles * mma, l2, 0.0}};
  }
  return {{forward ? kGatedWarpRowsFixedCycles : kGatedWarpRowsBackwardFixedCycles,
           kIssueCycles * instructions * std::max(1.0, warps / kSchedulersPerSm) + shared, l2,
           0.0}};
}

// The chunks of one pass of tensor-core shape s (tensor_core_kernel.cuh) at `ctas` CTAs. A warp
// issues, per chunk of nb ≤ 8·NT, KT · ceil(NG·R/16) mma per product (one when nb ≤ 4 packs hi
// and lo into one n tile, else two per n tile: the forward all NT, the backward the chunk's) and
// loads its KS shared-memory tiles' fragments; the CTA reads the chunk's h (forward, nb rows of
// H rounded up to 4, fp32), or its units' partial products from every CTA and writes its own
// for every unit (backward).
std::vector<ChunkCycles> tensor_core_chunks(const persistent::TensorCoreShape& s, bool forward,
                                            std::int64_t hidden, std::int64_t batch, int ctas) {
  const std::int64_t row_tiles = ceil_div(std::int64_t{s.gates} * s.rows, 16);
  const std::int64_t nb_max = 8 * s.n_tiles;
  const double warps_per_scheduler =
      static_cast<double>(persistent::kTensorCoreWarps) / kSchedulersPerSm;
  std::vector<ChunkCycles> chunks;
  for (std::int64_t b0 = 0; b0 < batch; b0 += nb_max) {
    const std::int64_t nb = std::min(nb_max, batch - b0);
    const std::int64_t products = nb <= 4 ? 1 : 2 * (forward ? s.n_tiles : ceil_div(nb, 8));
    const std::int64_t ops = s.k_tiles * row_tiles * products + s.smem_tiles * row_tiles;
    const std::int64_t l2_bytes =
        forward ? nb * persistent::tensor_core_h_stride(hidden) * 4
                : s.rows * ceil_div(nb, 4) * 16 * ctas + hidden * nb * 4;
    chunks.push_back({forward ? kTensorCoreForwardFixedCycles : kTensorCoreBackwardFixedCycles,
                      kMmaCycles * static_cast<double>(ops) * warps_per_scheduler,
                      static_cast<double>(l2_bytes) /
                          (forward ? kTensorCoreStageBytesPerSmPerCycle : kL2BytesPerSmPerCycle),
                      0.0});
  }
  return chunks;
}

// step = max(chain of the first, longest chunk, Σ busy) (plan.h: PassCost), in µs.
PassCost pass_cost(std::string kernel, std::int64_t chunk, const std::vector<ChunkCycles>& chunks,
                   double cycles_per_us) {
  PassCost c;
  c.kernel = std::move(kernel);
  c.chunks = static_cast<int>(chunks.size());
  c.chunk = static_cast<int>(chunk);
  const ChunkCycles& first = chunks.front();
  c.exchange_us = kExchangeCycles / cycles_per_us;
  c.fixed_us = first.fixed / cycles_per_us;
  c.compute_us = first.compute / cycles_per_us;
  c.l2_us = first.l2 / cycles_per_us;
  c.tail_us = first.tail / cycles_per_us;
  c.chain_us = c.exchange_us + c.fixed_us + c.compute_us + c.l2_us + c.tail_us;
  double busy = 0.0;
  for (const ChunkCycles& k : chunks) busy += k.fixed + k.compute + k.l2;
  c.busy_us = busy / cycles_per_us / c.chunks;
  c.step_us = std::max(c.chain_us, busy / cycles_per_us);
  return c;
}

// Both passes of the kernels that run tiling t (none where t.runs() is false).
void predict_passes(PersistentPlan& p, const persistent::Tiling& t, std::int64_t hidden,
                    std::int64_t batch, double cycles_per_us) {
  if (!t.runs()) return;
  for (const bool forward : {true, false}) {
    PassCost& cost = forward ? p.forward : p.backward_data;
    const persistent::PassKernel kernel = persistent::pass_kernel(t, forward);
    const char* name = persistent::to_string(kernel);
    switch (kernel) {
      case persistent::PassKernel::GatedWarpRows:
        if (forward && t.gated_warp_rows_mma) name = "gated warp rows (product on tensor cores)";
        cost = pass_cost(name, batch,
                         gated_warp_rows_chunks(
                             t, forward, ceil_div(hidden, persistent::kUnitsPerRecord), batch),
                         cycles_per_us);
        break;
      case persistent::PassKernel::WarpRows:
        cost = pass_cost(
            name, batch,
            warp_rows_chunks(t, forward, ceil_div(hidden, persistent::kUnitsPerRecord), batch),
            cycles_per_us);
        break;
      case persistent::PassKernel::TensorCores: {
        const persistent::TensorCoreShape& s = persistent::kTensorCoreShapes[t.tensor_core];
        cost = pass_cost(name, std::min<std::int64_t>(8 * s.n_tiles, batch),
                         tensor_core_chunks(s, forward, hidden, batch, t.tensor_core_ctas),
                         cycles_per_us);
        break;
      }
      case persistent::PassKernel::FmaStaged:
      case persistent::PassKernel::FmaDirect:
        cost = pass_cost(name,
                         std::min<std::int64_t>(persistent::kShapes[t.shape].batch_chunk, batch),
                         fma_chunks(t, forward, hidden, batch), cycles_per_us);
        break;
    }
  }
}

// The bytes of a CTA's W_hh rows (G·U rows of H, as stored) that the kernel running the layer
// holds in shared memory: a wide warp-rows shape's columns past its register slots (a lane's
// slot j covers columns 96j .. 96j + 95), a large tensor-core shape's last KS of each warp's KT
// column tiles; every other shape holds them all in registers. -1 where no kernel runs the
// layer.
std::int64_t kernel_shared_weight_bytes(const persistent::Tiling& t, std::int64_t hidden,
                                        std::int64_t rows_per_cta, std::int64_t elem) {
  if (t.warp_rows >= 0) {
    const persistent::WarpRowsShape& s = persistent::kWarpRowsShapes[t.warp_rows];
    const std::int64_t first = std::int64_t{persistent::kUnitsPerRecord} * 32 * s.records_per_lane;
    return rows_per_cta * std::max<std::int64_t>(0, hidden - first) * elem;
  }
  if (t.gated_warp_rows >= 0 || t.shape >= 0) return 0;
  if (!t.runs()) return -1;
  const persistent::TensorCoreShape& s = persistent::kTensorCoreShapes[t.tensor_core];
  std::int64_t columns = 0;
  for (int w = 0; w < persistent::kTensorCoreWarps; ++w) {
    const std::int64_t from = (std::int64_t{w} * s.k_tiles + s.k_tiles - s.smem_tiles) * 16;
    const std::int64_t to = std::min<std::int64_t>(hidden, (std::int64_t{w} + 1) * s.k_tiles * 16);
    columns += std::max<std::int64_t>(0, to - from);
  }
  return rows_per_cta * columns * elem;
}

}  // namespace

PersistentPlan plan_persistent(const RnnDesc& desc, std::int64_t batch, const DeviceInfo& dev) {
  desc.validate();
  PRNN_EXPECT(batch >= 1, "plan_persistent: batch: expected >= 1, got {}", batch);
  PRNN_EXPECT(dev.sm_count >= 1 && dev.registers_per_sm >= 1 && dev.sm_clock_khz >= 1,
              "plan_persistent: device: expected SMs, registers and a clock rate, got {} SMs, {} "
              "registers per SM, {} kHz",
              dev.sm_count, dev.registers_per_sm, dev.sm_clock_khz);
  const std::int64_t H = desc.hidden_size, G = gate_count(desc.cell);
  const auto elem = static_cast<std::int64_t>(size_of(desc.weight_dtype));

  PersistentPlan p;
  // Where no kernel holds the layer: its units spread evenly over the SMs, and only the CTAs
  // that get units counted (H = 2560 on 132 SMs: 20 units each, 128 CTAs).
  p.threads_per_cta = kPlanThreads;
  p.units_per_cta = (H + dev.sm_count - 1) / dev.sm_count;
  p.ctas = static_cast<int>((H + p.units_per_cta - 1) / p.units_per_cta);
  // Layers the kernels exist for are planned with the kernels' own tiling (tiling.h).
  const persistent::Tiling kernel_tiling = persistent::tile(
      static_cast<int>(G), H, batch, dev.sm_count, desc.weight_dtype);
  p.kernel = kernel_tiling.reason;
  if (kernel_tiling.warp_rows >= 0) {
    p.ctas = kernel_tiling.warp_rows_ctas;
    p.threads_per_cta = kernel_tiling.warp_rows_threads;
    p.units_per_cta = persistent::kUnitsPerRecord * kernel_tiling.warp_rows_records;
  } else if (kernel_tiling.shape >= 0) {
    p.ctas = kernel_tiling.ctas;
    p.threads_per_cta = kernel_tiling.threads;
    p.units_per_cta = kernel_tiling.rows;
  } else if (kernel_tiling.runs()) {  // on tensor cores alone
    p.ctas = kernel_tiling.tensor_core_ctas;
    p.threads_per_cta = persistent::kTensorCoreThreads;
    p.units_per_cta = persistent::kTensorCoreShapes[kernel_tiling.tensor_core].rows;
  }
  p.rows_per_cta = G * p.units_per_cta;
  p.weight_bytes = G * H * H * elem;
  p.weight_bytes_per_cta = p.rows_per_cta * H * elem;

  const std::int64_t regs_per_thread =
      std::min<std::int64_t>(255, dev.registers_per_sm / kPlanThreads) - kReservedRegistersPerThread;
  p.register_budget_per_cta = std::max<std::int64_t>(0, regs_per_thread) * kPlanThreads * 4;
  const std::int64_t staging = 2 * batch * H * 4;  // h_{t-1} double-buffered, fp32
  p.shared_budget_per_cta = std::max<std::int64_t>(
      0, static_cast<std::int64_t>(dev.shared_memory_per_block_optin) - staging - kSharedReserveBytes);
  // The fit is the capacity inequality; the split is the kernel's where one runs the layer, else
  // registers first up to their budget.
  p.fits = p.weight_bytes_per_cta <= p.register_budget_per_cta + p.shared_budget_per_cta;
  const std::int64_t held = kernel_shared_weight_bytes(kernel_tiling, H, p.rows_per_cta, elem);
  p.shared_bytes_per_cta = held >= 0 ? std::min(held, p.weight_bytes_per_cta)
                                     : p.weight_bytes_per_cta - std::min(p.weight_bytes_per_cta,
                                                                         p.register_budget_per_cta);
  p.register_bytes_per_cta = p.weight_bytes_per_cta - p.shared_bytes_per_cta;

  const double clock_hz = dev.sm_clock_khz * 1e3;
  const double flops = 2.0 * static_cast<double>(batch * G * H * H);
  p.compute_us = flops / (p.ctas * kFp32FlopsPerSmPerCycle * clock_hz) * 1e6;
  p.shared_us =
      static_cast<double>(p.shared_bytes_per_cta) / (kSharedBytesPerSmPerCycle * clock_hz) * 1e6;
  const double dram_bytes_per_s =
      2.0 * dev.memory_clock_khz * 1e3 * dev.memory_bus_width_bits / 8.0;  // double data rate
  const double exchange_bytes = static_cast<double>(p.ctas * batch * H * 4);
  p.exchange_us = dram_bytes_per_s > 0 ? exchange_bytes / (kL2OverDram * dram_bytes_per_s) * 1e6 : 0;
  p.sync_us = kGridSyncUs;
  p.mbsp_us = std::max({p.compute_us, p.shared_us, p.exchange_us}) + p.sync_us;

  const double cycles_per_us = dev.sm_clock_khz * 1e-3;
  predict_passes(p, kernel_tiling, H, batch, cycles_per_us);
  if (!p.forward.kernel.empty()) {
    const bool fp32_pipes = desc.weight_dtype == DType::F32 && desc.gemm_math == GemmMath::Fp32;
    const double gemm_flops_per_s = dev.sm_count * clock_hz *
                                    (fp32_pipes ? kFp32GemmEfficiency * kFp32FlopsPerSmPerCycle
                                                : kGemmEfficiency * kTf32FlopsPerSmPerCycle);
    auto gemm_us = [&](std::int64_t k) {
      return 2.0 * static_cast<double>(batch * G * H * k) / gemm_flops_per_s * 1e6;
    };
    const bool sixteen_bit = desc.weight_dtype == DType::BF16 || desc.weight_dtype == DType::F16;
    p.input_gemm_us = gemm_us(desc.input_size) *
                      (sixteen_bit ? kTf32FlopsPerSmPerCycle / kF16FlopsPerSmPerCycle : 1.0);
    p.backward_gemms_us = 2.0 * gemm_us(desc.input_size) + gemm_us(H);  // d(in), dW_ih; dW_hh
    p.step_us = p.forward.step_us + p.input_gemm_us;
    p.train_step_us = p.step_us + p.backward_data.step_us + p.backward_gemms_us;
  }

  const std::string layer = fmt::format("{} H={} {} weights", to_string(desc.cell), H,
                                        to_string(desc.weight_dtype));
  if (p.fits) {
    p.reason = fmt::format(
        "{}: {:.1f} MiB over {} SMs, {:.1f} KiB per SM ({:.1f} KiB in registers, {:.1f} KiB in "
        "shared memory)",
        layer, mib(p.weight_bytes), p.ctas, kib(p.weight_bytes_per_cta),
        kib(p.register_bytes_per_cta), kib(p.shared_bytes_per_cta));
  } else {
    p.reason = fmt::format(
        "{} needs {:.1f} MiB on chip ({:.1f} KiB per SM); this GPU has {:.1f} MiB of registers "
        "and {:.1f} MiB of shared memory, of which the plan can use {:.1f} KiB of registers and "
        "{:.1f} KiB of shared memory per SM at batch {}",
        layer, mib(p.weight_bytes), kib(p.weight_bytes_per_cta), mib(static_cast<std::int64_t>(
            dev.register_file_bytes())),
        mib(static_cast<std::int64_t>(dev.shared_memory_bytes())), kib(p.register_budget_per_cta),
        kib(p.shared_budget_per_cta), batch);
  }
  return p;
}

std::string describe(const PersistentPlan& p) {
  std::string s = fmt::format("{}: {}\n", p.fits ? "fits on chip" : "does not fit", p.reason);
  s += fmt::format("  tiling      {} CTAs x {} threads, {} hidden units ({} gate rows) per CTA\n",
                   p.ctas, p.threads_per_cta, p.units_per_cta, p.rows_per_cta);
  s += fmt::format("  kernel      {}\n", p.kernel);
  s += fmt::format("  capacity    {:.1f} KiB registers + {:.1f} KiB shared memory per CTA available\n",
                   kib(p.register_budget_per_cta), kib(p.shared_budget_per_cta));
  if (p.forward.kernel.empty()) {
    s += "  predicted   none: no persistent kernel runs this layer (the MBSP bound below)\n";
  } else {
    s += fmt::format(
        "  predicted   {:.2f} us/step = forward {:.2f} + input GEMM {:.2f}; forward + backward "
        "{:.2f} = {:.2f} + backward data {:.2f} + GEMMs {:.2f}\n",
        p.step_us, p.forward.step_us, p.input_gemm_us, p.train_step_us, p.step_us,
        p.backward_data.step_us, p.backward_gemms_us);
    for (const bool forward : {true, false}) {
      const PassCost& c = forward ? p.forward : p.backward_data;
      s += fmt::format("  {:<11} {:.2f} us/step = max(chain {:.2f}, {} chunk{} x busy {:.2f}), {}, "
                       "chunks of {}\n",
                       forward ? "forward" : "backward", c.step_us, c.chain_us, c.chunks,
                       c.chunks == 1 ? "" : "s", c.busy_us, c.kernel, c.chunk);
      s += fmt::format("                chain = exchange {:.2f} + fixed {:.2f} + compute {:.2f} + "
                       "L2 {:.2f}{}\n",
                       c.exchange_us, c.fixed_us, c.compute_us, c.l2_us,
                       c.tail_us > 0.0 ? fmt::format(" + finishers {:.2f}", c.tail_us)
                                       : std::string());
    }
  }
  s += fmt::format("  MBSP bound  {:.2f} us/step = max(compute {:.2f}, shared {:.2f}, exchange "
                   "{:.2f}) + sync {:.2f}\n",
                   p.mbsp_us, p.compute_us, p.shared_us, p.exchange_us, p.sync_us);
  return s;
}

}  // namespace prnn
