// The persistent-RNN planner: tiling and capacity from device properties, cost from the MBSP
// model. No per-GPU tables: everything is derived from the DeviceInfo the driver reports.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "persistent/tiling.h"
#include "prnn/plan.h"

namespace prnn {

namespace persistent {

namespace {

// The tensor-core shape for t's layer, if one holds it (tiling.h): the forward, and the backward
// data where `backward` and the batch allow. With an FMA shape in t (fma), tensor cores from
// kTensorCoreMinBatch on and their description goes before the FMA shape's, which then names the
// backward when that stays on the FMA kernel; without one, at any batch, both passes or none.
void pick_tensor_core(Tiling& t, std::int64_t hidden, std::int64_t batch, int sm_count,
                      DType weights, bool backward) {
  const bool fma = t.shape >= 0;
  if (fma && batch < kTensorCoreMinBatch) return;
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

}  // namespace

Tiling tile(int gates, std::int64_t hidden, std::int64_t batch, int sm_count, DType weights,
            TensorCores tensor_cores) {
  PRNN_EXPECT(hidden >= 1 && batch >= 1 && sm_count >= 1,
              "persistent tiling: expected hidden, batch and SM count >= 1, got {}, {}, {}",
              hidden, batch, sm_count);
  PRNN_EXPECT(gates == 1 || gates == 3 || gates == 4,
              "persistent tiling: expected 1, 3 or 4 gates, got {}", gates);
  Tiling t;
  t.gates = gates;
  const std::int64_t h_records = (hidden + kUnitsPerRecord - 1) / kUnitsPerRecord;
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
    t.reason = fmt::format(
        "{} CTAs x {} threads, {} hidden units ({} gate rows) per CTA, {} {} weights per thread "
        "in registers, batch in chunks of {}{}",
        t.ctas, t.threads, t.rows, gates * t.rows,
        (s.staged ? 1 : gates) * t.rows * kUnitsPerRecord * t.groups, to_string(t.storage),
        t.batch_chunk, s.staged ? ", records staged in shared memory" : "");
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
        gates == 1     ? "; vanilla cells have no shape with W_hh partly in shared memory"
        : !sixteen     ? "; fp32 weights have no tensor-core shape (16-bit weights reach H = 2048)"
        : tensor_cores == TensorCores::Off
            ? "; PRNN_PERSISTENT_TENSOR_CORES=0 turns off the tensor-core shapes, which hold "
              "16-bit GRU / LSTM up to H = 2048"
            : "; no tensor-core shape holds it on this GPU either");
  }
  if (tensor_cores != TensorCores::Off && gates != 1)
    pick_tensor_core(t, hidden, batch, sm_count, weights,
                     tensor_cores == TensorCores::ForwardBackward);
  return t;
}

}  // namespace persistent

namespace {

constexpr double kFp32FlopsPerSmPerCycle = 256.0;  // 128 FMA lanes
constexpr double kSharedBytesPerSmPerCycle = 128.0;
constexpr double kL2OverDram = 2.5;
constexpr std::int64_t kSharedReserveBytes = 4096;  // barrier flags, reductions

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
double kib(std::int64_t bytes) { return static_cast<double>(bytes) / 1024.0; }

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
  p.ctas = dev.sm_count;
  p.threads_per_cta = kPlanThreads;
  p.units_per_cta = (H + p.ctas - 1) / p.ctas;
  // Layers the kernels exist for are planned with the kernels' own tiling (tiling.h).
  const persistent::Tiling kernel_tiling = persistent::tile(
      static_cast<int>(G), H, batch, dev.sm_count, desc.weight_dtype);
  p.kernel = kernel_tiling.reason;
  if (kernel_tiling.shape >= 0) {
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
  p.register_bytes_per_cta = std::min(p.weight_bytes_per_cta, p.register_budget_per_cta);
  p.shared_bytes_per_cta = p.weight_bytes_per_cta - p.register_bytes_per_cta;
  p.fits = p.shared_bytes_per_cta <= p.shared_budget_per_cta;

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
  p.step_us = std::max({p.compute_us, p.shared_us, p.exchange_us}) + p.sync_us;

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
  s += fmt::format("  predicted   {:.2f} us/step = max(compute {:.2f}, shared {:.2f}, exchange "
                   "{:.2f}) + sync {:.2f}\n",
                   p.step_us, p.compute_us, p.shared_us, p.exchange_us, p.sync_us);
  return s;
}

}  // namespace prnn
