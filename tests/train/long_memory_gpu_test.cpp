// The long-memory job's GPU pieces: the device Adam against reference::adam_update, the device
// batch generator against the documented stream, and the GPU trainer: its first losses agree with
// the CPU reference, it resumes bit for bit, and a short run's loss falls, with fp32 and with
// TF32 GEMMs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "prnn/error.h"
#include "prnn/tensor.h"
#include "prnn/train.h"
#include "reference/dense.h"
#include "support/random.h"
#include "train/long_memory_data.h"
#include "train/optim.h"

namespace prnn {
namespace {

// Distance in units in the last place between two finite floats of the same sign.
std::int64_t ulps(float a, float b) {
  const auto ia = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a));
  const auto ib = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b));
  return ia > ib ? ia - ib : ib - ia;
}

DeviceBuffer upload(const std::vector<float>& v) {
  DeviceBuffer b(v.size() * sizeof(float));
  b.copy_from_host(v.data(), v.size() * sizeof(float));
  return b;
}

std::vector<float> download(const DeviceBuffer& b, std::size_t n) {
  std::vector<float> v(n);
  b.copy_to_host(v.data(), n * sizeof(float));
  return v;
}

// Tolerance: at most 1 ulp per element after every step. The kernel rounds each operation as
// the reference's loop does (no FMA contraction), so it is bitwise equal when the host compiler
// does not contract either; 1 ulp allows for one that does.
TEST(DeviceAdam, MatchesReferenceOverSteps) {
  test::Rng rng;
  for (const double weight_decay : {0.0, 0.01}) {
    constexpr std::size_t kN = 10007;  // odd: a partial last CTA
    std::vector<float> w = rng.uniform<float>(kN), m(kN, 0.0f), v(kN, 0.0f);
    DeviceBuffer dw = upload(w), dm = upload(m), dv = upload(v);
    DeviceBuffer dg(kN * sizeof(float));
    const reference::AdamConfig cfg{3e-3, 0.9, 0.999, 1e-8, weight_decay};
    for (std::int64_t step = 1; step <= 5; ++step) {
      std::vector<float> g = rng.uniform<float>(kN, -2.0, 2.0);
      g[0] = 0.0f;  // a zero gradient: the update is m / (sqrt(v) + ε) of the history only
      dg.copy_from_host(g.data(), kN * sizeof(float));
      reference::adam_update<float>(cfg, step, kN, w.data(), g.data(), m.data(), v.data());
      train::adam_update(train::adam_scalars(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                                             cfg.weight_decay, step),
                         kN, dw.data_as<float>(), dg.data_as<const float>(), dm.data_as<float>(),
                         dv.data_as<float>(), nullptr);
      const std::vector<float> gw = download(dw, kN), gm = download(dm, kN), gv = download(dv, kN);
      std::int64_t worst = 0;
      for (std::size_t i = 0; i < kN; ++i)
        worst = std::max({worst, ulps(gw[i], w[i]), ulps(gm[i], m[i]), ulps(gv[i], v[i])});
      EXPECT_LE(worst, 1) << "step " << step << ", weight decay " << weight_decay;
    }
  }
}

// The graph trainers' form: only touched rows are updated (as the reference on those rows), and
// their gradient is consumed (zeroed); untouched rows keep w, m, v and g exactly. Tolerance as
// above (1 ulp).
TEST(DeviceAdam, ConsumingUpdatesTouchedRowsOnly) {
  test::Rng rng;
  constexpr std::int64_t kRow = 7, kRows = 1001, kN = kRow * kRows;  // odd sizes
  const std::size_t n = static_cast<std::size_t>(kN);
  std::vector<float> w = rng.uniform<float>(n), m = rng.uniform<float>(n, 0.0, 0.1),
                     v = rng.uniform<float>(n, 0.0, 0.1), g = rng.uniform<float>(n, -2.0, 2.0);
  std::vector<std::uint8_t> touched(kRows);
  for (std::size_t r = 0; r < touched.size(); ++r) touched[r] = (r % 3 == 1) ? 1 : 0;
  DeviceBuffer dw = upload(w), dm = upload(m), dv = upload(v), dg = upload(g);
  DeviceBuffer dt(touched.size());
  dt.copy_from_host(touched.data(), touched.size());
  const std::vector<float> w0 = w, m0 = m, v0 = v, g0 = g;
  const reference::AdamConfig cfg{3e-3, 0.9, 0.999, 1e-8, 0.0};
  constexpr std::int64_t kStep = 3;
  for (std::int64_t r = 0; r < kRows; ++r)
    if (touched[static_cast<std::size_t>(r)] != 0) {
      const std::size_t at = static_cast<std::size_t>(r * kRow);
      reference::adam_update<float>(cfg, kStep, kRow, w.data() + at, g.data() + at, m.data() + at,
                                    v.data() + at);
    }
  train::adam_update_consuming(
      train::adam_scalars(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, 0.0, kStep), kN,
      dw.data_as<float>(), dg.data_as<float>(), dm.data_as<float>(), dv.data_as<float>(),
      train::AdamRows{kRow, dt.data_as<const std::uint8_t>()}, nullptr);
  const std::vector<float> gw = download(dw, n), gm = download(dm, n), gv = download(dv, n),
                           gg = download(dg, n);
  std::int64_t worst = 0, untouched_changed = 0, touched_gradients_left = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (touched[i / kRow] != 0) {
      worst = std::max({worst, ulps(gw[i], w[i]), ulps(gm[i], m[i]), ulps(gv[i], v[i])});
      touched_gradients_left += gg[i] != 0.0f ? 1 : 0;
    } else {
      untouched_changed +=
          (gw[i] != w0[i] || gm[i] != m0[i] || gv[i] != v0[i] || gg[i] != g0[i]) ? 1 : 0;
    }
  }
  EXPECT_LE(worst, 1);
  EXPECT_EQ(touched_gradients_left, 0);
  EXPECT_EQ(untouched_changed, 0);
  EXPECT_THROW(train::adam_update_consuming(
                   train::adam_scalars(1e-3, 0.9, 0.999, 1e-8, 0.0, 1), kN, dw.data_as<float>(),
                   dg.data_as<float>(), dm.data_as<float>(), dv.data_as<float>(),
                   train::AdamRows{0, dt.data_as<const std::uint8_t>()}, nullptr),
               InvalidArgument);
}

TEST(DeviceAdam, RejectsNullAndEmptyIsANoOp) {
  EXPECT_THROW(train::adam_update(train::adam_scalars(1e-3, 0.9, 0.999, 1e-8, 0.0, 1), 4, nullptr,
                                  nullptr, nullptr, nullptr, nullptr),
               InvalidArgument);
  EXPECT_NO_THROW(train::adam_update(train::adam_scalars(1e-3, 0.9, 0.999, 1e-8, 0.0, 1), 0,
                                     nullptr, nullptr, nullptr, nullptr, nullptr));
}

// The device norm against a double sum on the host (the same squares, another order: 1e-12
// relative), at an odd size over several grid strides, and 0 for an empty array; scaling equals
// the host's float multiply bit for bit.
TEST(DeviceGradient, SquaredNormAndScaleMatchTheHost) {
  test::Rng rng;
  for (const std::int64_t n : {std::int64_t{1}, std::int64_t{100003}}) {
    const std::vector<float> g = rng.uniform<float>(static_cast<std::size_t>(n), -3.0, 3.0);
    DeviceBuffer dg = upload(g), partials(train::kNormPartials * sizeof(double));
    double want = 0.0;
    for (const float x : g) want += double(x) * x;
    const double got = train::squared_norm(n, dg.data_as<float>(), partials.data_as<double>(),
                                           nullptr);
    EXPECT_NEAR(got, want, 1e-12 * want) << "n " << n;
    const float factor = 0.3f;
    train::scale(n, dg.data_as<float>(), factor, nullptr);
    std::vector<float> scaled = g;
    for (float& x : scaled) x *= factor;
    EXPECT_EQ(download(dg, g.size()), scaled) << "n " << n;
  }
  DeviceBuffer partials(train::kNormPartials * sizeof(double));
  EXPECT_EQ(train::squared_norm(0, nullptr, partials.data_as<double>(), nullptr), 0.0);
  EXPECT_THROW(train::squared_norm(4, nullptr, partials.data_as<double>(), nullptr),
               InvalidArgument);
}

// Every element of the device batch equals the stream's definition, written as a plain loop.
TEST(DeviceMemoryBatch, MatchesTheStream) {
  constexpr std::int64_t kT = 37, kB = 3, kA = train::kMemoryAlphabet;
  constexpr std::uint64_t kSeed = 5, kBatch = 9;
  DeviceBuffer x(static_cast<std::size_t>(kT * kB * kA) * sizeof(float));
  x.fill_bytes(0xFF);
  train::generate_memory_batch(kSeed, kBatch, kT, kB, x.data_as<float>(), nullptr);
  const std::vector<float> got = download(x, static_cast<std::size_t>(kT * kB * kA));
  std::vector<float> want(got.size(), 0.0f);
  for (std::int64_t b = 0; b < kB; ++b) {
    const std::uint64_t key = train::sequence_key(kSeed, kBatch, static_cast<std::uint64_t>(b));
    want[static_cast<std::size_t>(b * kA)] = train::sequence_label(key) == 0 ? 1.0f : -1.0f;
    for (std::int64_t t = 1; t < kT; ++t)
      want[static_cast<std::size_t>((t * kB + b) * kA +
                                    train::distractor_symbol(key, static_cast<std::uint64_t>(t)))] =
          1.0f;
  }
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

LongMemoryConfig small(TrainBackend backend, std::int64_t iterations) {
  LongMemoryConfig c;
  c.steps = 16;
  c.hidden = 8;
  c.batch = 4;
  c.iterations = iterations;
  c.learning_rate = 1e-2;
  c.seed = 3;
  c.stop_after_perfect = 0;
  c.backend = backend;
  return c;
}

std::vector<double> losses_of(const LongMemoryConfig& c) {
  std::vector<double> losses;
  train_long_memory(c, [&](const TrainProgress& p) { losses.push_back(p.loss); });
  return losses;
}

// Tolerance: the first loss is a forward pass only (fp32 GEMMs + scans vs the fp32 reference
// loops): 1e-5 relative. Later losses pass through Adam steps, whose normalization magnifies
// rounding differences in small gradients: 1e-3.
TEST(LongMemoryGpu, LossesAgreeWithTheCpuReference) {
  const std::vector<double> gpu = losses_of(small(TrainBackend::Gpu, 3));
  const std::vector<double> cpu = losses_of(small(TrainBackend::Cpu, 3));
  ASSERT_EQ(gpu.size(), 3u);
  ASSERT_EQ(cpu.size(), 3u);
  EXPECT_NEAR(gpu[0], cpu[0], 1e-5 * cpu[0]);
  for (std::size_t i = 1; i < 3; ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-3 * cpu[i]) << "iter " << i;
}

// The first iteration's gradient norm (a forward and a backward pass from the same parameters):
// 1e-4 relative between the GPU layers and the CPU reference loops, both fp32.
TEST(LongMemoryGpu, GradientNormAgreesWithTheCpuReference) {
  auto first_norm = [](const LongMemoryConfig& c) {
    double norm = -1.0;
    train_long_memory(c, [&](const TrainProgress& p) { norm = p.grad_norm; });
    return norm;
  };
  const double gpu = first_norm(small(TrainBackend::Gpu, 1));
  const double cpu = first_norm(small(TrainBackend::Cpu, 1));
  ASSERT_GT(cpu, 0.0);
  EXPECT_NEAR(gpu, cpu, 1e-4 * cpu);
}

// TF32 GEMMs: the first loss (a forward pass) within 5e-3 relative of the fp32 CPU reference
// (TF32 operands, 2^-11 relative each, in every projection; the loss is a smooth function of the
// last step's output).
TEST(LongMemoryGpu, Tf32FirstLossAgreesWithTheCpuReference) {
  LongMemoryConfig g = small(TrainBackend::Gpu, 1);
  g.math = GemmMath::Tf32;
  const std::vector<double> gpu = losses_of(g);
  const std::vector<double> cpu = losses_of(small(TrainBackend::Cpu, 1));
  ASSERT_EQ(gpu.size(), 1u);
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_NEAR(gpu[0], cpu[0], 5e-3 * cpu[0]);
  EXPECT_NE(gpu[0], cpu[0]) << "TF32 GEMMs round: an exact match suggests they did not run";
}

TEST(LongMemoryGpu, ResumeIsBitwiseEqualToStraightRun) {
  const std::string dir = ::testing::TempDir();
  const std::string straight = dir + "/gpu_straight.ckpt", split = dir + "/gpu_split.ckpt";
  LongMemoryConfig a = small(TrainBackend::Gpu, 7);
  a.steps = 300;  // more than one scan tile
  a.checkpoint = straight;
  const std::vector<double> la = losses_of(a);
  LongMemoryConfig b = a;
  b.checkpoint = split;
  b.iterations = 4;
  std::vector<double> lb = losses_of(b);
  b.iterations = 7;
  b.resume = true;
  const std::vector<double> rest = losses_of(b);
  lb.insert(lb.end(), rest.begin(), rest.end());
  EXPECT_EQ(la, lb);
  const LongMemoryCheckpoint x = read_long_memory_checkpoint(straight);
  const LongMemoryCheckpoint y = read_long_memory_checkpoint(split);
  EXPECT_EQ(x.iteration, 7);
  EXPECT_EQ(y.iteration, 7);
  ASSERT_EQ(x.params.size(), y.params.size());
  EXPECT_EQ(std::memcmp(x.params.data(), y.params.data(), x.params.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(x.adam_m.data(), y.adam_m.data(), x.adam_m.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(x.adam_v.data(), y.adam_v.data(), x.adam_v.size() * sizeof(float)), 0);
  std::filesystem::remove(straight);
  std::filesystem::remove(split);
}

TEST(LongMemoryGpu, ShortRunLossFalls) {
  for (GemmMath math : {GemmMath::Fp32, GemmMath::Tf32}) {
    LongMemoryConfig c;
    c.steps = 256;
    c.hidden = 32;
    c.batch = 32;
    c.iterations = 400;
    c.stop_after_perfect = 0;  // a fixed length, so the last 10 batches are well past the drop
    c.backend = TrainBackend::Gpu;
    c.math = math;
    const LongMemoryResult r = train_long_memory(c);
    EXPECT_EQ(r.train.backend.rfind("gpu", 0), 0u);
    EXPECT_EQ(r.train.backend.find("TF32") != std::string::npos, math == GemmMath::Tf32)
        << r.train.backend;
    EXPECT_LT(r.train.final_loss, 0.5 * r.train.first_loss)
        << to_string(math) << ": iterations " << r.last_iteration << ", converged "
        << r.converged;
    EXPECT_GT(r.iterations_per_second, 0.0);
  }
}

}  // namespace
}  // namespace prnn
