// The planner on device descriptions (the described H200, as its driver reports it, and a small
// made-up GPU): capacity decisions at the boundary, the MBSP bound's terms, and the
// latency model's structure and its agreement with committed H200 measurements.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "persistent/tiling.h"
#include "prnn/error.h"
#include "prnn/plan.h"

namespace prnn {
namespace {

// The H200 as its driver reports it (prnn/device.h's described H200, whose fields
// Planner.DescribedDevices checks).
DeviceInfo h200() {
  return described_device("h200");
}

RnnDesc rnn(Cell cell, std::int64_t H, DType dtype = DType::F32) {
  return RnnDesc{cell, H, H, 1, Direction::Unidirectional, dtype};
}

TEST(Planner, ReluH1152FitsInRegisters) {
  const PersistentPlan p = plan_persistent(rnn(Cell::ReLU, 1152), 4, h200());
  ASSERT_TRUE(p.fits) << p.reason;
  // The kernels' tiling at B = 4, warp rows: 9 units per CTA (3 records, one per warp of each
  // batch group), 128 CTAs, 4 batch groups of 3 warps: 384 threads.
  EXPECT_EQ(p.ctas, 128);
  EXPECT_EQ(p.units_per_cta, 9);
  EXPECT_EQ(p.threads_per_cta, 384);
  EXPECT_NE(p.kernel.find("warp rows"), std::string::npos) << p.kernel;
  // Without warp rows (PRNN_PERSISTENT_WARP_ROWS=0), the FMA direct shape: 128 threads holding
  // 3 groups of 3 columns each, the batch in two chunks of 2.
  const persistent::Tiling fma =
      persistent::tile(1, 1152, 4, 132, DType::F32, persistent::TensorCores::ForwardBackward, false);
  EXPECT_EQ(fma.warp_rows, -1);
  EXPECT_EQ(fma.ctas, 128);
  EXPECT_EQ(fma.threads, 128);
  EXPECT_NE(fma.reason.find("chunks of 2"), std::string::npos) << fma.reason;
  EXPECT_EQ(p.weight_bytes, 1152LL * 1152 * 4);
  EXPECT_EQ(p.weight_bytes_per_cta, 9LL * 1152 * 4);
  EXPECT_EQ(p.shared_bytes_per_cta, 0);  // 41.5 KiB: all in registers
  // The MBSP bound: 2·4·1152² flops over 128 SMs × 256 flops/cycle × 1.98 GHz, one grid sync.
  EXPECT_NEAR(p.compute_us, 2.0 * 4 * 1152 * 1152 / (128 * 256 * 1.98e9) * 1e6, 1e-9);
  EXPECT_DOUBLE_EQ(p.sync_us, kGridSyncUs);
  EXPECT_NEAR(p.mbsp_us, std::max({p.compute_us, p.shared_us, p.exchange_us}) + p.sync_us, 1e-12);
  // The prediction is the latency model's: more than the MBSP bound, which misses the chain.
  EXPECT_EQ(p.forward.kernel, "warp rows");
  EXPECT_GT(p.step_us, p.mbsp_us);
}

// Warp rows take one batch element per warp up to B = 4 (G = B batch groups), two from B = 5
// (G = ceil(B / 2)) up to B = 8, three (kRec = 12 shapes only) up to B = 12; W = ceil(records /
// SMs) record warps per group; the shape with the fewest records per lane, then the smallest
// launch bound, then the fewest polled slots that serve W (4 of kRec = 12 from W = 3, 6 at
// W = 2); beyond B = 12, or where no shape holds three, the FMA shape.
TEST(Planner, WarpRowsBatchGroups) {
  using persistent::kWarpRowsShapes;
  struct Case {
    std::int64_t H, B;
    int per_warp, groups, records, threads, ctas, records_per_lane, own_slots;
  };
  const Case cases[] = {
      {1152, 1, 1, 1, 3, 96, 128, 12, 4},  {1152, 3, 1, 3, 3, 288, 128, 12, 4},
      {1152, 5, 2, 3, 3, 288, 128, 12, 4}, {1152, 8, 2, 4, 3, 384, 128, 12, 4},
      {1000, 2, 1, 2, 3, 192, 112, 12, 4}, {800, 4, 1, 4, 3, 384, 89, 12, 4},
      {780, 1, 1, 1, 2, 64, 130, 12, 6},   {700, 6, 2, 3, 2, 192, 117, 8, 4},
      {100, 7, 2, 4, 1, 128, 34, 4, 4},    {1152, 9, 3, 3, 3, 288, 128, 12, 4},
      {1152, 12, 3, 4, 3, 384, 128, 12, 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "H=" << c.H << " B=" << c.B);
    const persistent::Tiling t = persistent::tile(1, c.H, c.B, 132, DType::F32);
    ASSERT_GE(t.warp_rows, 0) << t.reason;
    const persistent::WarpRowsShape& s = kWarpRowsShapes[t.warp_rows];
    EXPECT_EQ(s.batch_per_warp, c.per_warp);
    EXPECT_EQ(s.records_per_lane, c.records_per_lane);
    EXPECT_EQ(s.own_slots, c.own_slots);
    EXPECT_LE(t.warp_rows_threads, s.max_threads);
    EXPECT_LE((s.records_per_lane + t.warp_rows_records - 1) / t.warp_rows_records, s.own_slots);
    EXPECT_EQ(t.warp_rows_groups, c.groups);
    EXPECT_EQ(t.warp_rows_records, c.records);
    EXPECT_EQ(t.warp_rows_threads, c.threads);
    EXPECT_EQ(t.warp_rows_ctas, c.ctas);
    EXPECT_GE(c.per_warp * t.warp_rows_groups, c.B);
  }
  EXPECT_EQ(persistent::tile(1, 1152, 13, 132, DType::F32).warp_rows, -1);
  EXPECT_EQ(persistent::tile(1, 700, 9, 132, DType::F32).warp_rows, -1);  // no kRec = 8 shape
  EXPECT_EQ(persistent::tile(1, 1153, 4, 132, DType::F32).warp_rows, -1);
}

// Past H = 1152 no register shape holds a lane's weights; where W ≥ 6 record warps serve the 22
// slots of a wide shape (H = 1981..2112 on 132 SMs) and B ≤ 4, one batch group of the smallest
// BB ≥ B takes the layer, 16 slots in registers and 6 in shared memory, its shared memory
// within sm_90's 227 KiB; elsewhere the FMA shape.
TEST(Planner, WarpRowsWide) {
  using persistent::kWarpRowsShapes;
  struct Case {
    std::int64_t H, B;
    int per_warp, records, ctas;
  };
  const Case cases[] = {
      {2048, 1, 1, 6, 114}, {2048, 2, 2, 6, 114}, {2048, 3, 3, 6, 114},
      {2048, 4, 4, 6, 114}, {1981, 4, 4, 6, 111}, {2112, 1, 1, 6, 118},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "H=" << c.H << " B=" << c.B);
    const persistent::Tiling t = persistent::tile(1, c.H, c.B, 132, DType::F32);
    ASSERT_GE(t.warp_rows, 0) << t.reason;
    const persistent::WarpRowsShape& s = kWarpRowsShapes[t.warp_rows];
    EXPECT_EQ(s.records_per_lane, 16);
    EXPECT_EQ(s.smem_slots, 6);
    EXPECT_EQ(s.batch_per_warp, c.per_warp);
    EXPECT_EQ(t.warp_rows_groups, 1);
    EXPECT_EQ(t.warp_rows_records, c.records);
    EXPECT_EQ(t.warp_rows_ctas, c.ctas);
    EXPECT_EQ(t.warp_rows_threads, 32 * c.records);
    EXPECT_GE(32 * s.slots(), (c.H + 2) / 3);  // a lane's slots cover the records
    EXPECT_NE(t.reason.find("54 in shared memory"), std::string::npos) << t.reason;
    EXPECT_LE(persistent::warp_rows_smem_bytes(s, 1, t.warp_rows_records, t.records),
              std::size_t{227} * 1024 - 1024);
    EXPECT_EQ(persistent::pass_kernel(t, true), persistent::PassKernel::WarpRows);
    EXPECT_EQ(persistent::pass_kernel(t, false), persistent::PassKernel::WarpRows);
    EXPECT_GE(t.shape, 0);  // the FMA shape stays the fallback
  }
  // W = 5 serves no 22 slots with 4 polled a warp; B = 5 is past one batch group; H = 2113 is
  // past 22 slots a lane; with 8 record warps (96 SMs) the staging does not fit beside the held
  // weights; and the knob that turns warp rows off.
  EXPECT_EQ(persistent::tile(1, 1980, 4, 132, DType::F32).warp_rows, -1);
  EXPECT_EQ(persistent::tile(1, 2048, 5, 132, DType::F32).warp_rows, -1);
  EXPECT_EQ(persistent::tile(1, 2113, 1, 132, DType::F32).warp_rows, -1);
  EXPECT_EQ(persistent::tile(1, 2048, 4, 96, DType::F32).warp_rows, -1);
  EXPECT_EQ(
      persistent::tile(1, 2048, 4, 132, DType::F32, persistent::TensorCores::Off, false).warp_rows,
      -1);
  // Held weights: W · 6 slots · 9 · 32 fp32 at the front.
  const persistent::WarpRowsShape& wide =
      kWarpRowsShapes[persistent::tile(1, 2048, 4, 132, DType::F32).warp_rows];
  EXPECT_EQ(persistent::warp_rows_held_smem_bytes(wide, 6), 6u * 6 * 9 * 32 * 4);
  // H = 2048, W = 6: the staging (18 units x 2048 columns) is larger than the records
  // (2 parities x 4 x 22 x 32 float4).
  EXPECT_EQ(persistent::warp_rows_smem_bytes(wide, 1, 6, 683),
            6u * 6 * 9 * 32 * 4 + 18u * 2052 * 4);
  // The plan's split is the kernel's: of a CTA's 18 rows, the columns past a lane's 16 register
  // slots (3 · 32 · 16 = 1536) in shared memory.
  const PersistentPlan p = plan_persistent(rnn(Cell::ReLU, 2048), 4, h200());
  ASSERT_TRUE(p.fits) << p.reason;
  EXPECT_EQ(p.rows_per_cta, 18);
  EXPECT_EQ(p.register_bytes_per_cta, 18 * 1536 * 4);
  EXPECT_EQ(p.shared_bytes_per_cta, 18 * (2048 - 1536) * 4);
  EXPECT_NE(p.reason.find("(108.0 KiB in registers, 36.0 KiB in shared memory)"), std::string::npos)
      << p.reason;
}

// The vanilla warp-rows kernel stages its CTA's weights through shared memory: 3·W units over
// H ≤ 3·records columns rounded up to 4, fp32 (the kernel's dynamic shared memory is the larger
// of this and the records').
TEST(Planner, WarpRowsWeightStaging) {
  EXPECT_EQ(persistent::warp_rows_weight_smem_bytes(3, 384), 3u * 3 * 1152 * 4);  // H = 1152
  EXPECT_EQ(persistent::warp_rows_weight_smem_bytes(3, 334), 3u * 3 * 1004 * 4);  // H = 1000
  EXPECT_EQ(persistent::warp_rows_weight_smem_bytes(1, 1), 3u * 4 * 4);           // H = 1
  const persistent::Tiling t = persistent::tile(1, 1152, 1, 132, DType::F32);
  ASSERT_GE(t.warp_rows, 0) << t.reason;
  // B = 1: the staging decides (the records: 2 x 1 x 12 x 32 float4).
  EXPECT_GT(persistent::warp_rows_weight_smem_bytes(t.warp_rows_records, t.records),
            2u * 12 * 32 * 16);
  EXPECT_EQ(persistent::warp_rows_smem_bytes(persistent::kWarpRowsShapes[t.warp_rows],
                                             t.warp_rows_groups, t.warp_rows_records, t.records),
            persistent::warp_rows_weight_smem_bytes(t.warp_rows_records, t.records));
}

// The FMA kernel's barrier after the finishers, where it was measured faster (tiling.h): a step
// of one chunk (B = 1), two chunks of 36 sums (H = 1152 B = 8: 9 rows x 4; H = 2048 B = 4: 18 x
// 2); not two chunks of 9 or 18 sums (H = 1152 B = 2, 4; H = 2048 B = 2), nor four chunks
// (B = 16; H = 2048 B = 8), nor the staged gated shapes.
TEST(Planner, FinishBarrierWhereMeasuredFaster) {
  using persistent::tile;
  auto barrier = [](int gates, std::int64_t H, std::int64_t B) {
    const persistent::Tiling t =
        tile(gates, H, B, 132, DType::F32, persistent::TensorCores::ForwardBackward, false);
    EXPECT_GE(t.shape, 0) << t.reason;
    EXPECT_EQ(t.finish_barrier, t.reason.find("barrier") != std::string::npos) << t.reason;
    return t.finish_barrier;
  };
  EXPECT_TRUE(barrier(1, 1152, 1));
  EXPECT_FALSE(barrier(1, 1152, 2));
  EXPECT_FALSE(barrier(1, 1152, 4));
  EXPECT_TRUE(barrier(1, 1152, 8));
  EXPECT_FALSE(barrier(1, 1152, 16));
  EXPECT_TRUE(barrier(1, 2048, 1));
  EXPECT_FALSE(barrier(1, 2048, 2));
  EXPECT_TRUE(barrier(1, 2048, 4));
  EXPECT_FALSE(barrier(1, 2048, 8));
  EXPECT_FALSE(barrier(4, 1024, 1));  // staged LSTM
  EXPECT_FALSE(barrier(3, 1152, 4));  // staged GRU
}

TEST(Planner, SpillsToSharedMemoryThenStops) {
  // LSTM H=2048 in bf16: 32 MiB, 256 KiB per CTA on the large tensor-core shape (R = 16, 128
  // CTAs): more than the register budget (~191 KiB), so shared memory holds the rest. The split
  // is the kernel's: of each warp's 16 column tiles the last 9 in shared memory, 64 rows x 8 x 9
  // x 16 columns in bf16 = 144 KiB, the other 112 KiB in registers.
  const PersistentPlan lstm16 = plan_persistent(rnn(Cell::LSTM, 2048, DType::BF16), 4, h200());
  ASSERT_TRUE(lstm16.fits) << lstm16.reason;
  EXPECT_GT(lstm16.weight_bytes_per_cta, lstm16.register_budget_per_cta);
  EXPECT_EQ(lstm16.weight_bytes_per_cta, 64 * 2048 * 2);
  EXPECT_EQ(lstm16.shared_bytes_per_cta, 64 * 8 * 9 * 16 * 2);
  EXPECT_EQ(lstm16.register_bytes_per_cta, 64 * 8 * 7 * 16 * 2);
  EXPECT_GT(lstm16.shared_us, 0.0);
  // LSTM H=2048 in fp32 (64 MiB) does not fit; the reason names sizes.
  const PersistentPlan lstm32 = plan_persistent(rnn(Cell::LSTM, 2048), 4, h200());
  EXPECT_FALSE(lstm32.fits);
  EXPECT_NE(lstm32.reason.find("needs 64.0 MiB on chip"), std::string::npos) << lstm32.reason;
  EXPECT_NE(lstm32.reason.find("shared memory"), std::string::npos);
  // LSTM H=2560 in bf16 (50 MiB) does not fit either: 20 units on each of 128 CTAs (not 132,
  // of which 4 would hold nothing), 400 KiB a CTA.
  const PersistentPlan lstm2560 = plan_persistent(rnn(Cell::LSTM, 2560, DType::BF16), 4, h200());
  EXPECT_FALSE(lstm2560.fits);
  EXPECT_EQ(lstm2560.units_per_cta, 20);
  EXPECT_EQ(lstm2560.ctas, 128);
  EXPECT_EQ(lstm2560.weight_bytes_per_cta, 80 * 2560 * 2);
}

// The fit decision is exactly "the per-CTA rows fit in the register budget plus the shared-memory
// budget", and it is monotone in H: every smaller layer fits, every larger one does not.
TEST(Planner, FitIsTheCapacityInequalityAndMonotone) {
  bool seen_misfit = false;
  for (std::int64_t H = 128; H <= 4096; H += 128) {
    const PersistentPlan p = plan_persistent(rnn(Cell::LSTM, H, DType::BF16), 4, h200());
    EXPECT_EQ(p.fits, p.weight_bytes_per_cta <= p.register_budget_per_cta + p.shared_budget_per_cta)
        << "H=" << H;
    EXPECT_EQ(p.register_bytes_per_cta + p.shared_bytes_per_cta, p.weight_bytes_per_cta);
    if (seen_misfit) {
      EXPECT_FALSE(p.fits) << "H=" << H << " fits after a smaller H did not";
    }
    seen_misfit = seen_misfit || !p.fits;
  }
  EXPECT_TRUE(seen_misfit);
}

TEST(Planner, BatchGrowsTheStagingAndTheWork) {
  const PersistentPlan b1 = plan_persistent(rnn(Cell::GRU, 1024), 1, h200());
  const PersistentPlan b64 = plan_persistent(rnn(Cell::GRU, 1024), 64, h200());
  EXPECT_GT(b1.shared_budget_per_cta, b64.shared_budget_per_cta);
  EXPECT_NEAR(b64.compute_us / b1.compute_us, 64.0, 1e-9);
  EXPECT_NE(describe(b64).find("us/step"), std::string::npos);
}

// Gated cells are planned with their kernels' tiling: NG·R gate rows per CTA in registers (B = 5:
// past the gated warp rows, GatedWarpRows below).
TEST(Planner, GatedCellsUseTheirKernelTiling) {
  const PersistentPlan lstm = plan_persistent(rnn(Cell::LSTM, 1024), 5, h200());
  EXPECT_EQ(lstm.units_per_cta, 9);  // 1024 / 132 SMs rounded up to whole records
  EXPECT_EQ(lstm.rows_per_cta, 36);
  EXPECT_EQ(lstm.ctas, 114);
  // Staged: 4 gates x 96 column threads (ceil(342 records / 4 groups), whole warps), the batch
  // in chunks of 4.
  EXPECT_EQ(lstm.threads_per_cta, 384);
  EXPECT_NE(lstm.kernel.find("36 gate rows"), std::string::npos) << lstm.kernel;
  EXPECT_NE(lstm.kernel.find("chunks of 4, records staged"), std::string::npos) << lstm.kernel;
  const PersistentPlan gru = plan_persistent(rnn(Cell::GRU, 500), 5, h200());
  EXPECT_EQ(gru.units_per_cta, 6);
  EXPECT_NE(gru.kernel.find("chunks of 4"), std::string::npos) << gru.kernel;
  // Beyond the largest LSTM shape the kernel line says why (the capacity model still reports
  // what a shared-memory spill would hold).
  const PersistentPlan big = plan_persistent(rnn(Cell::LSTM, 1200), 4, h200());
  EXPECT_NE(big.kernel.find("H=1200"), std::string::npos) << big.kernel;
  EXPECT_NE(big.kernel.find("H <= 1152"), std::string::npos) << big.kernel;
  // bf16 weights: two weights per register (B = 2: below the tensor cores' batches; warp rows
  // off, which would take it).
  const persistent::Tiling half = persistent::tile(
      4, 1152, 2, 132, DType::BF16, persistent::TensorCores::ForwardBackward, false);
  EXPECT_EQ(half.rows, 9);
  EXPECT_EQ(half.ctas, 128);
  EXPECT_NE(half.reason.find("bf16 weights per thread"), std::string::npos) << half.reason;
  // f32 weights never take a 16-bit shape.
  EXPECT_NE(lstm.kernel.find("f32 weights per thread"), std::string::npos) << lstm.kernel;
}

// The tensor-core kernels: GRU and LSTM with 16-bit weights from batch 4, the fewest units per
// CTA that fit the SMs, the batch chunk of 8 up to B = 8 and of 16 beyond; never for fp32
// weights, vanilla cells, layers no shape holds, or with tensor cores turned off. The backward
// data on them too up to kTensorCoreBackwardMaxBatch (or unless the knob says forward only),
// else on the FMA shape of the same tiling.
TEST(Planner, TensorCoreForwardForSixteenBitGatedCells) {
  using persistent::kTensorCoreShapes;
  // Warp rows off (PRNN_PERSISTENT_WARP_ROWS=0): at B <= 4 they take the LSTM's forward
  // (GatedWarpRows below).
  const persistent::Tiling lstm = persistent::tile(
      4, 1152, 4, 132, DType::BF16, persistent::TensorCores::ForwardBackward, false);
  ASSERT_GE(lstm.tensor_core, 0) << lstm.reason;
  EXPECT_EQ(kTensorCoreShapes[lstm.tensor_core].rows, 9);
  EXPECT_EQ(kTensorCoreShapes[lstm.tensor_core].n_tiles, 1);
  EXPECT_EQ(kTensorCoreShapes[lstm.tensor_core].storage, DType::BF16);
  EXPECT_EQ(lstm.tensor_core_ctas, 128);
  EXPECT_TRUE(lstm.tensor_core_backward);
  // One arrival counter (one chunk, padded to 16 bytes), then the larger of the forward's h
  // [2, 4, 1152] and the backward's partial products [2, 1 chunk, 128 CTAs, 1152, 8], fp32.
  EXPECT_EQ(lstm.tensor_core_exchange_bytes, 16u + 2u * 128 * 1152 * 8 * 4);
  EXPECT_EQ(lstm.tensor_core_smem_bytes,
            persistent::tensor_core_smem_bytes(kTensorCoreShapes[lstm.tensor_core]));
  EXPECT_GE(lstm.shape, 0);  // the backward's FMA shape
  EXPECT_TRUE(persistent::kShapes[lstm.shape].staged);
  EXPECT_NE(lstm.reason.find("forward and backward on tensor cores: 128 CTAs"), std::string::npos)
      << lstm.reason;
  // Forward only (the knob, or a batch past the backward's bound): the backward's FMA shape is
  // named, and the exchange holds the forward's h alone.
  using persistent::TensorCores;
  const persistent::Tiling forward_only = persistent::tile(4, 1152, 4, 132, DType::BF16,
                                                           TensorCores::Forward, false);
  ASSERT_GE(forward_only.tensor_core, 0);
  EXPECT_FALSE(forward_only.tensor_core_backward);
  EXPECT_EQ(forward_only.tensor_core_exchange_bytes, 16u + 2u * 4 * 1152 * 4);
  EXPECT_NE(forward_only.reason.find("forward on tensor cores: 128 CTAs"), std::string::npos)
      << forward_only.reason;
  EXPECT_NE(forward_only.reason.find("backward: 128 CTAs"), std::string::npos)
      << forward_only.reason;
  const persistent::Tiling big = persistent::tile(
      4, 1152, persistent::kTensorCoreBackwardMaxBatch + 1, 132, DType::BF16);
  ASSERT_GE(big.tensor_core, 0);
  EXPECT_FALSE(big.tensor_core_backward);
  EXPECT_TRUE(persistent::tile(4, 1152, persistent::kTensorCoreBackwardMaxBatch, 132, DType::BF16)
                  .tensor_core_backward);

  // The batch chunk: 8 up to B = 8, then 16; the cell and the 16-bit type as asked.
  struct Pick {
    int gates;
    std::int64_t H, B;
    DType weights;
    int n_tiles;
  };
  for (const Pick& c : {Pick{4, 1024, 16, DType::BF16, 2}, Pick{3, 1000, 9, DType::F16, 2},
                        Pick{3, 1000, 8, DType::F16, 1}}) {
    const persistent::Tiling t = persistent::tile(c.gates, c.H, c.B, 132, c.weights);
    ASSERT_GE(t.tensor_core, 0) << t.reason;
    const persistent::TensorCoreShape& s = kTensorCoreShapes[t.tensor_core];
    EXPECT_EQ(s.n_tiles, c.n_tiles) << "B=" << c.B;
    EXPECT_EQ(s.storage, c.weights);
    EXPECT_EQ(s.gates, c.gates);
    EXPECT_GE(persistent::kTensorCoreWarps * s.k_tiles * 16, c.H);  // the shape holds H
  }
  // Small layers: 3 units per CTA (H <= 3 SMs), 4 k-tiles per warp.
  const persistent::Tiling small = persistent::tile(4, 100, 5, 132, DType::F16);
  ASSERT_GE(small.tensor_core, 0);
  EXPECT_EQ(kTensorCoreShapes[small.tensor_core].rows, 3);
  EXPECT_EQ(small.tensor_core_ctas, 34);
  // (Warp rows off: at 2 records per SM the gated warp rows would take both passes.)
  const persistent::Tiling edge =
      persistent::tile(4, 397, 4, 132, DType::BF16, TensorCores::ForwardBackward, false);
  ASSERT_GE(edge.tensor_core, 0);
  EXPECT_EQ(kTensorCoreShapes[edge.tensor_core].rows, 9);
  // Every picked shape holds H in its k-tiles.
  const std::pair<const persistent::Tiling*, int> held[] = {
      {&lstm, 1152}, {&small, 100}, {&edge, 397}};
  for (const auto& [t, H] : held)
    EXPECT_GE(persistent::kTensorCoreWarps * kTensorCoreShapes[t->tensor_core].k_tiles * 16, H);

  EXPECT_EQ(persistent::tile(4, 1152, 4, 132, DType::F32).tensor_core, -1);   // fp32
  EXPECT_EQ(persistent::tile(1, 1152, 4, 132, DType::BF16).tensor_core, -1);  // vanilla
  EXPECT_EQ(persistent::tile(4, 1152, 4, 132, DType::BF16, TensorCores::Off).tensor_core,
            -1);  // off
  EXPECT_EQ(persistent::tile(4, 2049, 4, 132, DType::BF16).tensor_core, -1);  // no shape holds it
  EXPECT_EQ(persistent::tile(4, 2048, 4, 100, DType::BF16).tensor_core, -1);  // too few SMs
  EXPECT_FALSE(persistent::tile(4, 2049, 4, 132, DType::BF16).runs());
  EXPECT_EQ(persistent::tile(4, 1152, persistent::kTensorCoreMinBatch - 1, 132, DType::BF16)
                .tensor_core,
            -1);  // small batches: the FMA forward is faster
  EXPECT_EQ(persistent::tile(4, 1024, persistent::kTensorCoreLstmMinBatch - 1, 132, DType::BF16)
                .tensor_core,
            -1);

  const PersistentPlan plan = plan_persistent(rnn(Cell::LSTM, 1152, DType::BF16), 8, h200());
  EXPECT_NE(plan.kernel.find("forward and backward on tensor cores"), std::string::npos)
      << plan.kernel;
}

// The gated warp-rows kernels: GRU / LSTM at B <= 4 whose records need 2 or 3 warps per SM
// (397 <= H <= 1152 on 132 SMs), any weight type (a 16-bit GRU at B = 4 too, as with the tensor
// cores off); BB = B rounded up to 1, 2, 4; Wr records per CTA, NG warps per record; the backward
// on them as well, but a 16-bit LSTM's at B = 4 (tensor cores).
TEST(Planner, GatedWarpRows) {
  using persistent::kGatedWarpRowsShapes;
  struct Case {
    int gates;
    std::int64_t H, B;
    DType weights;
    int per_warp, records, threads, ctas, own_slots;
  };
  const Case cases[] = {
      {4, 1152, 4, DType::BF16, 4, 3, 384, 128, 1}, {4, 1024, 4, DType::F32, 4, 3, 384, 114, 1},
      {4, 1152, 1, DType::F32, 1, 3, 384, 128, 1},  {4, 700, 2, DType::F16, 2, 2, 256, 117, 2},
      {3, 1152, 3, DType::F32, 4, 3, 288, 128, 2},  {3, 1152, 2, DType::BF16, 2, 3, 288, 128, 2},
      {3, 515, 1, DType::F32, 1, 2, 192, 86, 2},    {3, 1152, 4, DType::BF16, 4, 3, 288, 128, 2},
      {3, 1152, 4, DType::F16, 4, 3, 288, 128, 2},  {4, 768, 4, DType::BF16, 4, 2, 256, 128, 2},
      {4, 512, 4, DType::F16, 4, 2, 256, 86, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "NG=" << c.gates << " H=" << c.H << " B=" << c.B);
    const persistent::Tiling t = persistent::tile(c.gates, c.H, c.B, 132, c.weights);
    ASSERT_GE(t.gated_warp_rows, 0) << t.reason;
    ASSERT_TRUE(t.runs());
    const persistent::GatedWarpRowsShape& s = kGatedWarpRowsShapes[t.gated_warp_rows];
    EXPECT_EQ(s.gates, c.gates);
    EXPECT_EQ(s.batch_per_warp, c.per_warp);
    EXPECT_EQ(s.own_slots, c.own_slots);
    EXPECT_EQ(t.gated_warp_rows_records, c.records);
    EXPECT_EQ(t.gated_warp_rows_threads, c.threads);
    EXPECT_EQ(t.gated_warp_rows_ctas, c.ctas);
    EXPECT_LE(t.gated_warp_rows_threads, s.max_threads);
    EXPECT_GE(c.records * c.gates * s.own_slots, persistent::kGatedWarpRowsRecords);
    // The backward too, but where a 16-bit LSTM at 3 records per SM has its tensor-core
    // backward (B = 4).
    const bool tensor_core_backward =
        c.gates == 4 && c.B == 4 && c.weights != DType::F32 && c.records == 3;
    EXPECT_EQ(t.gated_warp_rows_backward, !tensor_core_backward);
    EXPECT_GE(c.records * s.backward_slots, persistent::kGatedWarpRowsRecords);
    EXPECT_NE(t.reason.find(tensor_core_backward ? "forward on gated warp rows"
                                                 : "forward and backward on gated warp rows"),
              std::string::npos)
        << t.reason;
    // The exchange holds the backward's NG records of 3 units per record of h.
    if (t.gated_warp_rows_backward) {
      EXPECT_GE(t.records, c.gates * ((c.H + 2) / 3));
    }
  }
  const persistent::Tiling lstm = persistent::tile(4, 1152, 4, 132, DType::BF16);
  EXPECT_NE(lstm.reason.find("backward on tensor cores: 128 CTAs"), std::string::npos)
      << lstm.reason;
  const persistent::Tiling f32 = persistent::tile(4, 1024, 4, 132, DType::F32);
  EXPECT_NE(f32.reason.find("forward and backward on gated warp rows: 114 CTAs"),
            std::string::npos)
      << f32.reason;
  EXPECT_EQ(f32.records, 4 * 342);  // ceil(4·1024 / 3) = 1366 in the FMA kernel's layout
  // The 16-bit GRU at B = 4: the tiling with the tensor cores off, whatever the knob says, and
  // no tensor-core pass.
  for (const persistent::TensorCores tc :
       {persistent::TensorCores::ForwardBackward, persistent::TensorCores::Forward}) {
    const persistent::Tiling gru = persistent::tile(3, 1152, 4, 132, DType::BF16, tc);
    const persistent::Tiling off =
        persistent::tile(3, 1152, 4, 132, DType::BF16, persistent::TensorCores::Off);
    EXPECT_EQ(gru.tensor_core, -1);
    EXPECT_EQ(gru.gated_warp_rows, off.gated_warp_rows);
    EXPECT_EQ(gru.shape, off.shape);
    EXPECT_EQ(gru.records, off.records);
    // ... but for the forward's product on tensor cores, which the knob's Off turns off too.
    EXPECT_TRUE(gru.gated_warp_rows_mma);
    EXPECT_FALSE(off.gated_warp_rows_mma);
    // ... but not for the backward's product, which stays on the FMAs for the GRU.
    EXPECT_FALSE(gru.gated_warp_rows_backward_mma);
    EXPECT_FALSE(off.gated_warp_rows_backward_mma);
    EXPECT_EQ(gru.reason,
              off.reason +
                  "; the forward's product on tensor cores instead: each warp a 1/9 of the "
                  "columns of the CTA's 27 gate rows as bf16 mma fragments (64 registers per "
                  "thread)");
    EXPECT_EQ(persistent::pass_kernel(gru, true), persistent::PassKernel::GatedWarpRows);
    EXPECT_EQ(persistent::pass_kernel(gru, false), persistent::PassKernel::GatedWarpRows);
  }
  // The 16-bit LSTM at 3 records per CTA, B = 4, and B = 3 up to H = 1024: the forward's product
  // on tensor cores on the gated rows, the backward on the tensor-core kernel; with the tensor
  // cores on for the forward only, the gated rows' backward on tensor cores, unless gated_mma
  // says the forward only. At B = 3 past H = 1024 the gated rows' backward by default.
  struct B3Case {
    std::int64_t H, B;
    bool tensor_core_backward;
  };
  for (const B3Case& c : {B3Case{1152, 4, true},
                          {1024, 4, true},
                          {1024, 3, true},
                          {793, 3, true},
                          {1025, 3, false},
                          {1152, 3, false}}) {
    SCOPED_TRACE(::testing::Message() << "LSTM H=" << c.H << " B=" << c.B);
    const persistent::Tiling both = persistent::tile(4, c.H, c.B, 132, DType::BF16);
    EXPECT_TRUE(both.gated_warp_rows_mma);
    EXPECT_EQ(both.gated_warp_rows_backward_mma, !c.tensor_core_backward);
    EXPECT_EQ(both.tensor_core >= 0, c.tensor_core_backward);
    EXPECT_EQ(persistent::pass_kernel(both, true), persistent::PassKernel::GatedWarpRows);
    EXPECT_EQ(persistent::pass_kernel(both, false), c.tensor_core_backward
                                                        ? persistent::PassKernel::TensorCores
                                                        : persistent::PassKernel::GatedWarpRows);
    const persistent::Tiling forward =
        persistent::tile(4, c.H, c.B, 132, DType::BF16, persistent::TensorCores::Forward);
    EXPECT_TRUE(forward.gated_warp_rows_backward_mma);
    EXPECT_EQ(persistent::pass_kernel(forward, false), persistent::PassKernel::GatedWarpRows);
    const persistent::Tiling forward_only =
        persistent::tile(4, c.H, c.B, 132, DType::BF16, persistent::TensorCores::Forward, true,
                         persistent::TensorCores::Forward);
    EXPECT_FALSE(forward_only.gated_warp_rows_backward_mma);
    EXPECT_EQ(forward.reason, forward_only.reason +
                                  "; the backward's product on tensor cores too: each warp 32 "
                                  "k-tiles of W_hh^T's 9 rows of the CTA's units (16 in "
                                  "registers, 16 in shared memory)");
  }
  // The 16-bit LSTM at B = 4 likewise where its records need 2 warps per SM (H <= 792 on 132
  // SMs); at 3 (H = 793) it keeps the tensor-core backward.
  for (const std::int64_t H : {397, 768, 792}) {
    SCOPED_TRACE(::testing::Message() << "LSTM H=" << H);
    const persistent::Tiling lstm2 = persistent::tile(4, H, 4, 132, DType::BF16);
    const persistent::Tiling off =
        persistent::tile(4, H, 4, 132, DType::BF16, persistent::TensorCores::Off);
    EXPECT_EQ(lstm2.tensor_core, -1);
    EXPECT_EQ(lstm2.gated_warp_rows_records, 2);
    EXPECT_EQ(lstm2.gated_warp_rows, off.gated_warp_rows);
    EXPECT_EQ(lstm2.reason, off.reason);
    EXPECT_EQ(persistent::pass_kernel(lstm2, false), persistent::PassKernel::GatedWarpRows);
  }
  // The forward's product on tensor cores: 16-bit weights at 3 records per CTA only, the LSTM at
  // every B, the GRU at B = 3..4 (gated_mma Off: the FMAs everywhere).
  struct MmaCase {
    int gates;
    std::int64_t H, B;
    DType weights;
    bool mma;
  };
  for (const MmaCase& m : {MmaCase{4, 1152, 4, DType::BF16, true},
                           {4, 1024, 3, DType::F16, true},
                           {3, 1152, 3, DType::BF16, true},
                           {4, 793, 4, DType::BF16, true},
                           {4, 1152, 2, DType::BF16, true},
                           {4, 1000, 1, DType::F16, true},
                           {3, 1152, 2, DType::BF16, false},
                           {3, 1152, 1, DType::F16, false},
                           {4, 768, 4, DType::BF16, false},
                           {3, 768, 4, DType::BF16, false},
                           {4, 1152, 4, DType::F32, false}}) {
    SCOPED_TRACE(::testing::Message() << "gates " << m.gates << " H=" << m.H << " B=" << m.B);
    const persistent::Tiling t = persistent::tile(m.gates, m.H, m.B, 132, m.weights);
    ASSERT_GE(t.gated_warp_rows, 0) << t.reason;
    EXPECT_EQ(t.gated_warp_rows_mma, m.mma);
    EXPECT_EQ(t.weights, m.weights);
    EXPECT_FALSE(persistent::tile(m.gates, m.H, m.B, 132, m.weights,
                                  persistent::TensorCores::ForwardBackward, true,
                                  persistent::TensorCores::Off)
                     .gated_warp_rows_mma);
  }
  const persistent::Tiling lstm3 = persistent::tile(4, 793, 4, 132, DType::BF16);
  EXPECT_EQ(lstm3.gated_warp_rows_records, 3);
  EXPECT_EQ(persistent::pass_kernel(lstm3, true), persistent::PassKernel::GatedWarpRows);
  EXPECT_EQ(persistent::pass_kernel(lstm3, false), persistent::PassKernel::TensorCores);
  // Where the gated warp rows do not hold it, the 16-bit GRU at B = 4 keeps its tensor cores.
  EXPECT_GE(persistent::tile(3, 300, 4, 132, DType::BF16).tensor_core, 0);
  EXPECT_GE(persistent::tile(3, 1153, 4, 132, DType::BF16).tensor_core, 0);
  // Not: B = 5, H past 1152 or below 2 records per SM, warp rows off.
  EXPECT_EQ(persistent::tile(4, 1152, 5, 132, DType::F32).gated_warp_rows, -1);
  EXPECT_EQ(persistent::tile(4, 1153, 4, 132, DType::BF16).gated_warp_rows, -1);
  EXPECT_EQ(persistent::tile(4, 396, 4, 132, DType::F32).gated_warp_rows, -1);
  EXPECT_EQ(persistent::tile(3, 1152, 5, 132, DType::BF16).gated_warp_rows, -1);
  EXPECT_GE(persistent::tile(3, 1152, 4, 132, DType::F32).gated_warp_rows, 0);
  EXPECT_EQ(persistent::tile(4, 1024, 4, 132, DType::F32, persistent::TensorCores::ForwardBackward,
                             false)
                .gated_warp_rows,
            -1);
}

// Past what the FMA shapes hold (H > 1152), 16-bit GRU and LSTM run on the R = 16 tensor-core
// shapes alone, with part of the fragments in shared memory: at any batch up to the backward's
// bound, both passes or none.
TEST(Planner, LargeLayersOnTensorCoresAlone) {
  using persistent::kTensorCoreShapes;
  using persistent::TensorCores;
  const persistent::Tiling lstm = persistent::tile(4, 2048, 4, 132, DType::BF16);
  ASSERT_TRUE(lstm.runs()) << lstm.reason;
  EXPECT_EQ(lstm.shape, -1);  // no FMA shape
  ASSERT_GE(lstm.tensor_core, 0);
  const persistent::TensorCoreShape& s = kTensorCoreShapes[lstm.tensor_core];
  EXPECT_EQ(s.rows, 16);
  EXPECT_EQ(s.n_tiles, 1);
  EXPECT_EQ(s.smem_tiles, 9);
  EXPECT_EQ(lstm.tensor_core_ctas, 128);
  EXPECT_TRUE(lstm.tensor_core_backward);
  // Staging hi and lo [8][2048 + 8] 16-bit, then 8 warps x 9 tiles x 4 row tiles of 512-byte
  // fragments; the backward holds the same fragments' count.
  EXPECT_EQ(lstm.tensor_core_smem_bytes, 2u * 8 * 2056 * 2 + 8u * 9 * 4 * 512);
  EXPECT_EQ(persistent::tensor_core_backward_smem_bytes(s), 8u * 9 * 4 * 512);
  EXPECT_EQ(lstm.tensor_core_exchange_bytes, 16u + 2u * 128 * 2048 * 8 * 4);
  EXPECT_NE(lstm.reason.find("144 KiB in shared memory"), std::string::npos) << lstm.reason;
  // Every batch from 1 to the backward's bound, in chunks of 8.
  for (std::int64_t B : {1, 3, 9, 32}) {
    const persistent::Tiling t = persistent::tile(4, 2048, B, 132, DType::F16);
    ASSERT_TRUE(t.runs()) << "B=" << B << ": " << t.reason;
    EXPECT_EQ(kTensorCoreShapes[t.tensor_core].n_tiles, 1);
    EXPECT_EQ(kTensorCoreShapes[t.tensor_core].storage, DType::F16);
  }
  // GRU, odd H: ceil(1537 / 16) CTAs.
  const persistent::Tiling gru = persistent::tile(3, 1537, 13, 132, DType::BF16);
  ASSERT_TRUE(gru.runs()) << gru.reason;
  EXPECT_EQ(gru.tensor_core_ctas, 97);
  EXPECT_EQ(kTensorCoreShapes[gru.tensor_core].gates, 3);
  // H <= 1152 keeps the fewer rows per CTA.
  EXPECT_EQ(kTensorCoreShapes[persistent::tile(4, 1152, 4, 132, DType::BF16).tensor_core].rows, 9);
  // Not runnable: past the backward's batch bound, one pass kept off the tensor cores, fp32.
  const persistent::Tiling big = persistent::tile(4, 2048, 33, 132, DType::BF16);
  EXPECT_FALSE(big.runs());
  EXPECT_NE(big.reason.find("batch <= 32"), std::string::npos) << big.reason;
  EXPECT_NE(big.reason.find("got batch 33"), std::string::npos) << big.reason;
  const persistent::Tiling forward =
      persistent::tile(4, 2048, 4, 132, DType::BF16, TensorCores::Forward);
  EXPECT_FALSE(forward.runs());
  EXPECT_NE(forward.reason.find("backward turned off"), std::string::npos) << forward.reason;
  const persistent::Tiling off = persistent::tile(4, 2048, 4, 132, DType::BF16, TensorCores::Off);
  EXPECT_FALSE(off.runs());
  EXPECT_NE(off.reason.find("PRNN_PERSISTENT_TENSOR_CORES=0"), std::string::npos) << off.reason;
  const persistent::Tiling f32 = persistent::tile(4, 2048, 4, 132, DType::F32);
  EXPECT_FALSE(f32.runs());
  EXPECT_NE(f32.reason.find("fp32 weights have no tensor-core shape"), std::string::npos)
      << f32.reason;
  // The plan reports the tensor-core tiling.
  const PersistentPlan plan = plan_persistent(rnn(Cell::LSTM, 2048, DType::BF16), 4, h200());
  EXPECT_EQ(plan.ctas, 128);
  EXPECT_EQ(plan.units_per_cta, 16);
  EXPECT_EQ(plan.threads_per_cta, persistent::kTensorCoreThreads);
  EXPECT_NE(plan.kernel.find("forward and backward on tensor cores"), std::string::npos)
      << plan.kernel;
}

// The input projection runs in the warp-rows kernel for short sequences only (tiling.h), unless
// PRNN_PERSISTENT_INPUT_PROJECTION says otherwise.
TEST(Tiling, InputProjectionInTheKernelForShortSequences) {
  using persistent::wants_input_in_kernel;
  for (const std::int64_t T : {1, 2, 4}) {
    EXPECT_TRUE(wants_input_in_kernel(T, -1)) << T;
    EXPECT_FALSE(wants_input_in_kernel(T, 0)) << T;
  }
  for (const std::int64_t T : {std::int64_t{5}, std::int64_t{8}, std::int64_t{1} << 40}) {
    EXPECT_FALSE(wants_input_in_kernel(T, -1)) << T;
    EXPECT_TRUE(wants_input_in_kernel(T, 1)) << T;
  }
}

// Auto leaves the persistent kernels for the per-step GEMMs only where a pass runs on an FMA
// kernel with B·NG·H² / SMs ≥ 0.5 M multiply-adds (tiling.h: the H200 measurements behind it).
TEST(Tiling, AutoPrefersGemmPerStepWhereTheFmaWorkIsLarge) {
  using persistent::auto_prefers_gemm_per_step;
  auto why = [](int gates, std::int64_t H, std::int64_t B, DType dtype) {
    const persistent::Tiling t = persistent::tile(gates, H, B, 132, dtype);
    EXPECT_TRUE(t.runs()) << t.reason;
    return t.runs() ? auto_prefers_gemm_per_step(t, H, B, 132) : std::string("does not run");
  };
  // fp32 LSTM H = 1024: staged FMA at B = 8 (0.25 M) persistent, at B = 16 (0.51 M) the GEMMs.
  EXPECT_EQ(why(4, 1024, 8, DType::F32), "");
  const std::string lstm16 = why(4, 1024, 16, DType::F32);
  EXPECT_NE(lstm16.find("FMA staged"), std::string::npos) << lstm16;
  EXPECT_NE(lstm16.find("0.51 M"), std::string::npos) << lstm16;
  EXPECT_NE(why(4, 1152, 32, DType::F32), "");
  // fp32 GRU H = 1024: B = 16 (0.38 M) persistent, B = 32 (0.76 M) the GEMMs.
  EXPECT_EQ(why(3, 1024, 16, DType::F32), "");
  EXPECT_NE(why(3, 1024, 32, DType::F32), "");
  // ReLU H = 1152: the warp rows at B = 4, FMA direct at B = 16 and 32 (0.16, 0.32 M) persistent;
  // B = 64 (0.64 M) the GEMMs.
  EXPECT_EQ(why(1, 1152, 4, DType::F32), "");
  EXPECT_EQ(why(1, 1152, 16, DType::F32), "");
  EXPECT_EQ(why(1, 1152, 32, DType::F32), "");
  EXPECT_NE(why(1, 1152, 64, DType::F32).find("FMA direct"), std::string::npos);
  // 16-bit LSTM: both passes on tensor cores to B = 32 (persistent at any work), the backward on
  // the FMA kernel past it.
  EXPECT_EQ(why(4, 1024, 32, DType::BF16), "");
  const std::string lstm64 = why(4, 1024, 64, DType::BF16);
  EXPECT_NE(lstm64.find("backward pass"), std::string::npos) << lstm64;
  // Small layers stay persistent at any batch the kernels take.
  EXPECT_EQ(why(4, 32, 64, DType::F32), "");
}

// The latency model (plan.h: PassCost): per pass, step = max(chain, chunks × busy), the chain
// the sum of its terms, busy the chain less the exchange and the direct kernels' tail; a forward
// call adds the input GEMM, a training step the backward data and its three GEMMs.
TEST(Planner, LatencyModelStructure) {
  struct Layer {
    Cell cell;
    std::int64_t H, B;
    DType dtype;
    const char* forward;  // the kernel of each pass
    const char* backward;
    int chunks, chunk;  // the forward's
  };
  const Layer layers[] = {
      {Cell::ReLU, 1152, 1, DType::F32, "warp rows", "warp rows", 1, 1},
      {Cell::ReLU, 1152, 2, DType::F32, "warp rows", "warp rows", 1, 2},
      {Cell::ReLU, 1152, 4, DType::F32, "warp rows", "warp rows", 1, 4},
      {Cell::ReLU, 1537, 2, DType::F32, "FMA direct", "FMA direct", 2, 1},
      {Cell::ReLU, 1152, 8, DType::F32, "warp rows", "warp rows", 1, 8},
      {Cell::ReLU, 1152, 16, DType::F32, "FMA direct", "FMA direct", 4, 4},
      {Cell::ReLU, 1537, 4, DType::F32, "FMA direct", "FMA direct", 2, 2},
      {Cell::ReLU, 2048, 4, DType::F32, "warp rows", "warp rows", 1, 4},
      {Cell::LSTM, 1024, 16, DType::F32, "FMA staged", "FMA staged", 4, 4},
      {Cell::GRU, 1152, 2, DType::BF16, "gated warp rows", "gated warp rows", 1, 2},
      {Cell::GRU, 1152, 4, DType::BF16, "gated warp rows (product on tensor cores)",
       "gated warp rows", 1, 4},
      {Cell::LSTM, 1152, 4, DType::BF16, "gated warp rows (product on tensor cores)",
       "tensor cores", 1, 4},
      {Cell::LSTM, 1024, 4, DType::F32, "gated warp rows", "gated warp rows", 1, 4},
      {Cell::LSTM, 1152, 64, DType::BF16, "tensor cores", "FMA staged", 4, 16},
      {Cell::LSTM, 2048, 32, DType::BF16, "tensor cores", "tensor cores", 4, 8},
      {Cell::GRU, 2048, 1, DType::F16, "tensor cores", "tensor cores", 1, 1},
  };
  for (const Layer& l : layers) {
    const PersistentPlan p = plan_persistent(rnn(l.cell, l.H, l.dtype), l.B, h200());
    SCOPED_TRACE(describe(p));
    EXPECT_EQ(p.forward.kernel, l.forward);
    EXPECT_EQ(p.backward_data.kernel, l.backward);
    EXPECT_EQ(p.forward.chunks, l.chunks);
    EXPECT_EQ(p.forward.chunk, l.chunk);
    for (const PassCost* c : {&p.forward, &p.backward_data}) {
      EXPECT_NEAR(c->chain_us, c->exchange_us + c->fixed_us + c->compute_us + c->l2_us + c->tail_us,
                  1e-9);
      EXPECT_NEAR(c->step_us, std::max(c->chain_us, c->chunks * c->busy_us), 1e-9);
      EXPECT_GT(c->exchange_us, 0.0);
      EXPECT_GT(c->fixed_us, 0.0);
      EXPECT_GT(c->compute_us, 0.0);
      EXPECT_GT(c->l2_us, 0.0);
      // Only the direct FMA kernels overlap their finishers with the next chunk.
      EXPECT_EQ(c->tail_us > 0.0, c->kernel == "FMA direct");
      // One chunk's busy time is its chain less what crosses to the next chunk (the chunks of a
      // step are equal here but for a partial last one, which is busy for less).
      EXPECT_LE(c->busy_us, c->chain_us - c->exchange_us - c->tail_us + 1e-9);
    }
    EXPECT_GT(p.input_gemm_us, 0.0);
    // I = H: three of its size, at half the rate of a 16-bit layer's input GEMM (gemm16).
    EXPECT_NEAR(p.backward_gemms_us, (l.dtype == DType::F32 ? 3.0 : 6.0) * p.input_gemm_us, 1e-9);
    EXPECT_NEAR(p.step_us, p.forward.step_us + p.input_gemm_us, 1e-9);
    EXPECT_NEAR(p.train_step_us, p.step_us + p.backward_data.step_us + p.backward_gemms_us, 1e-9);
  }
  // One chunk of a direct kernel is latency-bound (its finishers and the exchange hide the next
  // chunk: B = 2 in two chunks of one costs what B = 1 does); the staged and tensor-core kernels
  // are busy for almost all of their chain, so with several chunks the throughput bound rules.
  const PersistentPlan relu2 = plan_persistent(rnn(Cell::ReLU, 1537), 2, h200());
  EXPECT_DOUBLE_EQ(relu2.forward.step_us, relu2.forward.chain_us);
  EXPECT_DOUBLE_EQ(relu2.forward.step_us,
                   plan_persistent(rnn(Cell::ReLU, 1537), 1, h200()).forward.step_us);
  const PersistentPlan lstm16 = plan_persistent(rnn(Cell::LSTM, 1024), 16, h200());
  EXPECT_DOUBLE_EQ(lstm16.forward.step_us, 4 * lstm16.forward.busy_us);
}

// RnnDesc::gemm_math: an f32 layer's GEMMs over all T·B rows at the TF32 rate when asked for,
// the kernels unchanged; 16-bit layers take TF32 whatever it says, and their input GEMM twice
// that rate (16-bit tensor cores).
TEST(Planner, GemmMathSetsTheGemmsRate) {
  RnnDesc f32 = rnn(Cell::ReLU, 1152);
  const PersistentPlan fp32 = plan_persistent(f32, 4, h200());
  f32.gemm_math = GemmMath::Tf32;
  const PersistentPlan tf32 = plan_persistent(f32, 4, h200());
  ASSERT_TRUE(fp32.fits && tf32.fits);
  EXPECT_DOUBLE_EQ(tf32.forward.step_us, fp32.forward.step_us);
  EXPECT_DOUBLE_EQ(tf32.backward_data.step_us, fp32.backward_data.step_us);
  // TF32 at 2048 flops per SM and cycle and a third of that, against the FP32 pipes' 256 (two
  // per FMA) at 0.6 of theirs: 4.44 times the rate.
  constexpr double kRatio = (2048.0 / 3.0) / (256.0 * 0.6);
  EXPECT_NEAR(fp32.input_gemm_us / tf32.input_gemm_us, kRatio, 1e-9);
  EXPECT_NEAR(fp32.backward_gemms_us / tf32.backward_gemms_us, kRatio, 1e-9);
  EXPECT_LT(tf32.train_step_us, fp32.train_step_us);

  RnnDesc b16 = rnn(Cell::LSTM, 1152, DType::BF16);
  const double bf16_gemm = plan_persistent(b16, 4, h200()).input_gemm_us;
  b16.gemm_math = GemmMath::Tf32;
  EXPECT_DOUBLE_EQ(plan_persistent(b16, 4, h200()).input_gemm_us, bf16_gemm);
  RnnDesc f32_lstm = rnn(Cell::LSTM, 1152);
  f32_lstm.gemm_math = GemmMath::Tf32;
  EXPECT_NEAR(plan_persistent(f32_lstm, 4, h200()).input_gemm_us / bf16_gemm, 2.0, 1e-9);
}

// More work per step predicts more time: more chunks of the same size, and larger chunks.
TEST(Planner, MoreChunksPredictMoreTime) {
  auto forward = [](Cell cell, std::int64_t H, std::int64_t B, DType dtype) {
    return plan_persistent(rnn(cell, H, dtype), B, h200()).forward;
  };
  // Tensor cores, chunks of 8 at H = 2048: 1, 2, 4 chunks; each chunk adds its busy time.
  const PassCost c1 = forward(Cell::LSTM, 2048, 8, DType::BF16);
  const PassCost c2 = forward(Cell::LSTM, 2048, 16, DType::BF16);
  const PassCost c4 = forward(Cell::LSTM, 2048, 32, DType::BF16);
  ASSERT_EQ(c1.chunks, 1);
  ASSERT_EQ(c2.chunks, 2);
  ASSERT_EQ(c4.chunks, 4);
  EXPECT_LT(c1.step_us, c2.step_us);
  EXPECT_LT(c2.step_us, c4.step_us);
  EXPECT_NEAR(c4.step_us - c2.step_us, 2 * c1.busy_us, 1e-9);
  // Staged FMA chunks of 4 (LSTM f32): B = 4, 8, 16.
  EXPECT_LT(forward(Cell::LSTM, 1024, 4, DType::F32).step_us,
            forward(Cell::LSTM, 1024, 8, DType::F32).step_us);
  EXPECT_LT(forward(Cell::LSTM, 1024, 8, DType::F32).step_us,
            forward(Cell::LSTM, 1024, 16, DType::F32).step_us);
  // Direct FMA: two chunks of 1, 2, 4 (B = 2, 4, 8) cost more as the chunk grows.
  EXPECT_LT(forward(Cell::ReLU, 2048, 2, DType::F32).step_us,
            forward(Cell::ReLU, 2048, 4, DType::F32).step_us);
  EXPECT_LT(forward(Cell::ReLU, 2048, 4, DType::F32).step_us,
            forward(Cell::ReLU, 2048, 8, DType::F32).step_us);
  // Warp rows: one chain per step, more batch elements per step cost more.
  EXPECT_LT(forward(Cell::ReLU, 1152, 1, DType::F32).step_us,
            forward(Cell::ReLU, 1152, 4, DType::F32).step_us);
  // Past a chunk's capacity a partial last chunk adds less than a full one.
  const PassCost c9 = forward(Cell::LSTM, 1152, 9, DType::BF16);  // chunks of 16: one of 9
  const PassCost c17 = forward(Cell::LSTM, 1152, 17, DType::BF16);
  const PassCost c32 = forward(Cell::LSTM, 1152, 32, DType::BF16);
  EXPECT_EQ(c17.chunks, 2);
  EXPECT_LT(c9.step_us, c17.step_us);
  EXPECT_LT(c17.step_us, c32.step_us);
}

// The latency terms are SM clock cycles: at half the clock every one of them doubles; the input
// GEMM (a flop rate) doubles too.
TEST(Planner, LatencyTermsScaleWithTheClock) {
  DeviceInfo slow = h200();
  slow.sm_clock_khz /= 2;
  for (const auto& [cell, H, B, dtype] :
       {std::tuple{Cell::ReLU, 1152, 4, DType::F32}, std::tuple{Cell::LSTM, 1152, 4, DType::BF16},
        std::tuple{Cell::GRU, 1024, 8, DType::F32}}) {
    const PersistentPlan fast_plan = plan_persistent(rnn(cell, H, dtype), B, h200());
    const PersistentPlan slow_plan = plan_persistent(rnn(cell, H, dtype), B, slow);
    EXPECT_NEAR(slow_plan.forward.exchange_us, 2 * fast_plan.forward.exchange_us, 1e-9);
    EXPECT_NEAR(slow_plan.forward.fixed_us, 2 * fast_plan.forward.fixed_us, 1e-9);
    EXPECT_NEAR(slow_plan.backward_data.chain_us, 2 * fast_plan.backward_data.chain_us, 1e-9);
    EXPECT_NEAR(slow_plan.step_us, 2 * fast_plan.step_us, 1e-9);
    EXPECT_NEAR(slow_plan.train_step_us, 2 * fast_plan.train_step_us, 1e-9);
  }
}

// The prediction against committed H200 measurements (µs per step, T = 256, forward and forward +
// backward; bench/results/h200/, the file and row named; h100/: an H100, the same 132 SMs, where
// the gated warp-rows backward was measured), within 1.25× either way. Over the measurements its
// constants were fitted to, the model's ratios lay in 0.83–1.18 (docs/PERFORMANCE.md, "Prediction
// vs measurement"); over these, of the kernels since the records go through shared memory as two
// planes (the model's reads at 384 bytes a record there, its constants not refitted), 0.89–1.20.
// The MBSP bound alone misses most of them by more than 2×.
TEST(Planner, PredictionTracksCommittedMeasurements) {
  struct Measured {
    Cell cell;
    std::int64_t H, B;
    DType dtype;
    double fwd, fwd_bwd;
    const char* where;
  };
  const Measured measured[] = {
      // The tree's warp-rows kernels since the records go through shared memory as two planes
      // (1e4778d; h200/ab/record_planes/a_medians.txt, fp32 GEMMs: the `vp` tree's vanilla rows,
      // the `gp` tree's gated rows, medians of 3 runs). The backward of ReLU H = 1152 B = 1, 2 and
      // H = 2048 B = 4 has since gone back to float4s (warp_rows_record_planes), 0.03-0.14
      // µs/step faster there.
      {Cell::ReLU, 1152, 1, DType::F32, 1.092, 2.595, "ab/record_planes, relu f32 H=1152 B=1"},
      {Cell::ReLU, 1152, 2, DType::F32, 1.247, 3.062, "ab/record_planes, relu f32 H=1152 B=2"},
      {Cell::ReLU, 1152, 3, DType::F32, 1.412, 3.534, "ab/record_planes, relu f32 H=1152 B=3"},
      {Cell::ReLU, 1152, 4, DType::F32, 1.548, 3.917, "ab/record_planes, relu f32 H=1152 B=4"},
      {Cell::ReLU, 2048, 1, DType::F32, 1.732, 4.051, "ab/record_planes, relu f32 H=2048 B=1"},
      {Cell::ReLU, 2048, 2, DType::F32, 2.461, 5.671, "ab/record_planes, relu f32 H=2048 B=2"},
      {Cell::ReLU, 2048, 3, DType::F32, 3.105, 7.585,
       "ab/record_planes (`old`: the float4 share the wide BB = 3 keeps), relu f32 H=2048 B=3"},
      {Cell::ReLU, 2048, 4, DType::F32, 3.889, 9.211, "ab/record_planes, relu f32 H=2048 B=4"},
      // The LSTM at BB = 2, whose backward records went to two planes as well
      // (h200/ab/gated_backward_planes/b_medians.txt, the `lstm2` tree, medians of 3 runs).
      {Cell::LSTM, 1152, 2, DType::F32, 2.713, 7.467,
       "ab/gated_backward_planes, lstm f32 H=1152 B=2"},
      {Cell::LSTM, 768, 2, DType::BF16, 1.899, 4.544,
       "ab/gated_backward_planes, lstm bf16 H=768 B=2"},
      {Cell::LSTM, 1152, 4, DType::F32, 4.040, 12.443, "ab/record_planes, lstm f32 H=1152 B=4"},
      {Cell::GRU, 1152, 1, DType::F32, 1.726, 4.840, "ab/record_planes, gru f32 H=1152 B=1"},
      {Cell::GRU, 1152, 4, DType::F32, 3.931, 10.882, "ab/record_planes, gru f32 H=1152 B=4"},
      // The 16-bit forward's product on tensor cores at 3 records per CTA (the LSTM at every B,
      // the GRU at B = 3..4), the LSTM's B = 3 backward on tensor cores too, x and layer 0's W_ih
      // read in 16 bits (h200/ab/forward16_inputs/final_p*.csv, 25ed130, medians of 2 runs;
      // 2dfba3f's in ab/prepared2/, e.g. LSTM bf16 H=1152 B=4 2.471 / 8.558, are no longer what
      // runs).
      {Cell::LSTM, 1152, 1, DType::BF16, 1.861, 4.997, "ab/forward16_inputs, lstm bf16 H=1152 B=1"},
      {Cell::LSTM, 1152, 2, DType::BF16, 1.958, 5.947, "ab/forward16_inputs, lstm bf16 H=1152 B=2"},
      {Cell::LSTM, 1152, 3, DType::BF16, 2.218, 7.976, "ab/forward16_inputs, lstm bf16 H=1152 B=3"},
      {Cell::LSTM, 1152, 4, DType::BF16, 2.385, 8.399, "ab/forward16_inputs, lstm bf16 H=1152 B=4"},
      // Its backward on the tensor-core kernel since 9232bb0 (h200/ab/lstm_b3/medians.txt, `unset`,
      // medians of 3 runs).
      {Cell::LSTM, 1024, 3, DType::BF16, 2.127, 7.340, "ab/lstm_b3, lstm bf16 H=1024 B=3"},
      {Cell::GRU, 1152, 4, DType::BF16, 2.583, 8.015, "ab/forward16_inputs, gru bf16 H=1152 B=4"},
      {Cell::GRU, 1024, 4, DType::BF16, 2.461, 7.670, "ab/forward16_inputs, gru bf16 H=1024 B=4"},
      // The same tree, 16-bit layers (h200/ab/lstm_tensor_cores_b4/1e4778d_*, medians of 6 runs
      // over both knob values, which run the same kernels for the GRU; of 3 for the LSTM). A
      // 16-bit layer's GEMMs are TF32 whatever --math says (gemm_rnn.cpp); an fp32 layer's TF32
      // GEMMs (--math tf32) are not what the model predicts.
      {Cell::GRU, 768, 4, DType::BF16, 2.213, 6.036, "ab/lstm_tensor_cores_b4, gru bf16 H=768"},
      {Cell::LSTM, 768, 4, DType::BF16, 2.603, 7.211,
       "ab/lstm_tensor_cores_b4/1e4778d_knob0_*, lstm bf16 H=768"},
      // The tensor-core forward with its staging's row and column advanced without a division
      // (h200/ab/tc_forward_stage/medians.txt, `nodiv`, medians of 3 runs).
      {Cell::LSTM, 2048, 4, DType::BF16, 4.991, 13.679, "ab/tc_forward_stage, lstm bf16 H=2048 B=4"},
      {Cell::LSTM, 2048, 16, DType::BF16, 12.864, 35.041,
       "ab/tc_forward_stage, lstm bf16 H=2048 B=16"},
  };
  constexpr double kFactor = 1.25;
  int mbsp_misses = 0;
  for (const Measured& m : measured) {
    const PersistentPlan p = plan_persistent(rnn(m.cell, m.H, m.dtype), m.B, h200());
    SCOPED_TRACE(std::string(m.where) + "\n" + describe(p));
    EXPECT_GT(p.step_us, m.fwd / kFactor);
    EXPECT_LT(p.step_us, m.fwd * kFactor);
    EXPECT_GT(p.train_step_us, m.fwd_bwd / kFactor);
    EXPECT_LT(p.train_step_us, m.fwd_bwd * kFactor);
    if (p.mbsp_us * 2 < m.fwd) ++mbsp_misses;
  }
  EXPECT_GE(mbsp_misses, 5);
}

// The printed plan names every term of the prediction and the MBSP bound beside it; a layer no
// kernel runs gets no prediction, only the bound.
TEST(Planner, DescribeNamesTheTerms) {
  const std::string relu = describe(plan_persistent(rnn(Cell::ReLU, 1537), 4, h200()));
  for (const char* term :
       {"predicted", "us/step = forward", "input GEMM", "forward + backward", "backward data",
        "GEMMs", "max(chain", "2 chunks x busy", "FMA direct, chunks of 2", "chain = exchange",
        "fixed", "compute", "L2", "finishers", "MBSP bound", "max(compute", "shared", "sync"})
    EXPECT_NE(relu.find(term), std::string::npos) << term << "\n" << relu;
  const std::string lstm =
      describe(plan_persistent(rnn(Cell::LSTM, 1152, DType::BF16), 4, h200()));
  EXPECT_NE(lstm.find("1 chunk x busy"), std::string::npos) << lstm;
  EXPECT_NE(lstm.find("tensor cores, chunks of 4"), std::string::npos) << lstm;
  EXPECT_EQ(lstm.find("finishers"), std::string::npos) << lstm;

  const PersistentPlan none = plan_persistent(rnn(Cell::LSTM, 2048), 4, h200());  // fp32: no kernel
  EXPECT_TRUE(none.forward.kernel.empty());
  EXPECT_TRUE(none.backward_data.kernel.empty());
  EXPECT_EQ(none.step_us, 0.0);
  EXPECT_EQ(none.train_step_us, 0.0);
  EXPECT_GT(none.mbsp_us, 0.0);
  const std::string text = describe(none);
  EXPECT_NE(text.find("no persistent kernel runs this layer"), std::string::npos) << text;
  EXPECT_NE(text.find("MBSP bound"), std::string::npos) << text;
}

TEST(Planner, RejectsBadInput) {
  EXPECT_THROW(plan_persistent(rnn(Cell::ReLU, 0), 4, h200()), InvalidArgument);
  EXPECT_THROW(plan_persistent(rnn(Cell::ReLU, 64), 0, h200()), InvalidArgument);
  EXPECT_THROW(plan_persistent(rnn(Cell::ReLU, 64), 4, DeviceInfo{}), InvalidArgument);
}

// The described GPUs (`prnn plan --gpu`): the H200's fields the planner reads are those its
// driver reports (the device every plan in this file is made on); the H100 differs only in its
// memory interface and L2, so the same tiling and latency model, a slower exchange in the MBSP
// bound; any other name is refused with the names it could have been.
TEST(Planner, DescribedDevices) {
  EXPECT_EQ(described_devices(), (std::vector<std::string>{"h100", "h200"}));
  const DeviceInfo d = described_device("H200");
  EXPECT_EQ(d.index, -1);
  EXPECT_EQ(d.name, "NVIDIA H200");
  EXPECT_EQ(d.cc_major, 9);
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.registers_per_sm, 65536);
  EXPECT_EQ(d.shared_memory_per_sm, 233472u);
  EXPECT_EQ(d.shared_memory_per_block_optin, 232448u);
  EXPECT_EQ(d.sm_clock_khz, 1980000);
  EXPECT_EQ(d.memory_clock_khz, 3201000);
  EXPECT_EQ(d.memory_bus_width_bits, 6016);
  const DeviceInfo h100 = described_device("h100");
  EXPECT_EQ(h100.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.sm_count, 132);
  EXPECT_EQ(h100.memory_bus_width_bits, 5120);
  // 2 · 2619 MHz · 5120 bits / 8: the H100 SXM's 3.35 TB/s.
  EXPECT_NEAR(2.0 * h100.memory_clock_khz * 1e3 * h100.memory_bus_width_bits / 8, 3.35e12, 0.01e12);
  for (const auto& [cell, H, B, dtype] :
       {std::tuple{Cell::ReLU, 1152, 4, DType::F32}, std::tuple{Cell::ReLU, 2048, 3, DType::F32},
        std::tuple{Cell::LSTM, 2048, 4, DType::BF16},
        std::tuple{Cell::GRU, 1024, 16, DType::F32}}) {
    SCOPED_TRACE(::testing::Message() << to_string(cell) << " H=" << H << " B=" << B);
    const PersistentPlan a = plan_persistent(rnn(cell, H, dtype), B, h100);
    const PersistentPlan b = plan_persistent(rnn(cell, H, dtype), B, d);
    EXPECT_EQ(a.kernel, b.kernel);
    EXPECT_EQ(a.shared_bytes_per_cta, b.shared_bytes_per_cta);
    EXPECT_DOUBLE_EQ(a.forward.step_us, b.forward.step_us);
    EXPECT_GT(a.exchange_us, b.exchange_us);
  }
  try {
    described_device("a100");
    ADD_FAILURE() << "described_device(\"a100\") did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of h100, h200, got \"a100\""),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace prnn
