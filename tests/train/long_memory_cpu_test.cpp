// The long-memory job on the CPU reference (tiny T, so CI runs it): the data stream is what
// prnn/train.h describes, the model learns, a checkpoint resumes bit for bit (train N, save,
// resume to N+M == train N+M straight: same parameters, moments and file bytes), and a corrupt or
// mismatched checkpoint is an InvalidArgument that says what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "prnn/error.h"
#include "prnn/train.h"
#include "train/long_memory_data.h"

namespace prnn {
namespace {

// A tiny config on the CPU reference that never stops early (so runs have a fixed length).
LongMemoryConfig tiny(std::int64_t iterations) {
  LongMemoryConfig c;
  c.steps = 6;
  c.hidden = 8;
  c.batch = 4;
  c.iterations = iterations;
  c.learning_rate = 1e-2;
  c.seed = 11;
  c.stop_after_perfect = 0;
  c.backend = TrainBackend::Cpu;
  return c;
}

// A fresh file name in the test's temp directory, removed (with its .tmp) at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::string& name) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (std::filesystem::path(::testing::TempDir()) /
             (std::string(info->name()) + "_" + name))
                .string();
    std::filesystem::remove(path_);
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    std::filesystem::remove(path_ + ".tmp", ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The message of the InvalidArgument that f throws ("" and a failure when it throws nothing).
template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InvalidArgument";
  return "";
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

TEST(LongMemoryData, StreamIsTheDocumentedTask) {
  // Labels are balanced, distractors cover exactly 1..127 and never e_0; the stream is a pure
  // function of (seed, batch, sequence).
  std::int64_t ones = 0;
  std::set<std::int32_t> symbols;
  constexpr std::int64_t kSequences = 4000;
  for (std::int64_t b = 0; b < kSequences; ++b) {
    const std::uint64_t key = train::sequence_key(3, 17, static_cast<std::uint64_t>(b));
    EXPECT_EQ(key, train::sequence_key(3, 17, static_cast<std::uint64_t>(b)));
    ones += train::sequence_label(key);
    for (std::uint64_t t = 1; t < 20; ++t) symbols.insert(train::distractor_symbol(key, t));
  }
  EXPECT_NEAR(double(ones) / kSequences, 0.5, 0.04);  // 5 sigma of a fair coin over 4000
  EXPECT_EQ(symbols.size(), 127u);
  EXPECT_EQ(*symbols.begin(), 1);
  EXPECT_EQ(*symbols.rbegin(), 127);
  EXPECT_NE(train::sequence_key(3, 17, 0), train::sequence_key(3, 18, 0));
  EXPECT_NE(train::sequence_key(3, 17, 0), train::sequence_key(4, 17, 0));
}

TEST(LongMemoryCpu, LearnsAtTinyT) {
  LongMemoryConfig c = tiny(600);
  c.steps = 8;
  c.hidden = 16;
  c.batch = 32;
  c.stop_after_perfect = 5;
  std::int64_t calls = 0;
  const LongMemoryResult r = train_long_memory(c, [&](const TrainProgress& p) {
    ++calls;
    EXPECT_EQ(p.iteration, calls);
    EXPECT_GT(p.iterations_per_second, 0.0);
  });
  EXPECT_EQ(r.train.backend, "cpu-reference (f32)");
  EXPECT_TRUE(r.converged) << "loss " << r.train.first_loss << " -> " << r.last_loss;
  EXPECT_EQ(r.converged_iteration, calls);
  EXPECT_EQ(r.last_iteration, calls);
  EXPECT_EQ(r.last_accuracy, 1.0);
  EXPECT_LT(r.last_loss, 0.5 * r.train.first_loss);
}

// A streak of perfect batches counts only with at least kMinPerfectSequences sequences in it:
// at batch 2, five perfect batches happen by chance once in 1024 windows.
TEST(LongMemoryCpu, ConvergenceStreakCoversEnoughSequences) {
  struct Case {
    std::int64_t stop_after, batch, needed;
  };
  for (const Case& k : {Case{5, 32, 5}, Case{5, 13, 5}, Case{5, 2, 32}, Case{5, 1, 64},
                        Case{100, 1, 100}, Case{0, 1, 0}}) {
    LongMemoryConfig c;
    c.stop_after_perfect = k.stop_after;
    c.batch = k.batch;
    EXPECT_EQ(perfect_batches_needed(c), k.needed) << "stop_after " << k.stop_after << ", batch "
                                                   << k.batch;
  }
}

TEST(LongMemoryCpu, ResumeIsBitwiseEqualToStraightRun) {
  constexpr std::int64_t kN = 5, kM = 4;
  TempFile straight("straight.ckpt"), split("split.ckpt");

  LongMemoryConfig a = tiny(kN + kM);
  a.checkpoint = straight.path();
  std::vector<double> straight_losses;
  train_long_memory(a, [&](const TrainProgress& p) { straight_losses.push_back(p.loss); });

  LongMemoryConfig b = tiny(kN);
  b.checkpoint = split.path();
  std::vector<double> split_losses;
  const auto record = [&](const TrainProgress& p) { split_losses.push_back(p.loss); };
  EXPECT_EQ(train_long_memory(b, record).last_iteration, kN);
  EXPECT_EQ(read_long_memory_checkpoint(split.path()).iteration, kN);
  b.iterations = kN + kM;
  b.resume = true;
  const LongMemoryResult r = train_long_memory(b, record);
  EXPECT_EQ(r.start_iteration, kN);
  EXPECT_EQ(r.last_iteration, kN + kM);
  EXPECT_EQ(r.train.iterations, kM);

  EXPECT_EQ(split_losses, straight_losses);  // the same batches, bit for bit
  const LongMemoryCheckpoint x = read_long_memory_checkpoint(straight.path());
  const LongMemoryCheckpoint y = read_long_memory_checkpoint(split.path());
  EXPECT_EQ(x.iteration, kN + kM);
  EXPECT_EQ(y.iteration, kN + kM);
  EXPECT_EQ(x.batches_drawn, y.batches_drawn);
  ASSERT_EQ(x.params.size(), y.params.size());
  EXPECT_EQ(std::memcmp(x.params.data(), y.params.data(), x.params.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(x.adam_m.data(), y.adam_m.data(), x.adam_m.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(x.adam_v.data(), y.adam_v.data(), x.adam_v.size() * sizeof(float)), 0);
  EXPECT_EQ(read_bytes(straight.path()), read_bytes(split.path()));
  EXPECT_EQ(x.config.hidden, 8);
  EXPECT_EQ(x.config.steps, 6);
  EXPECT_EQ(x.config.batch, 4);
  EXPECT_EQ(x.config.seed, 11u);
  EXPECT_EQ(x.config.learning_rate, 1e-2);
  EXPECT_EQ(x.config.adam_eps, 1e-8);
}

TEST(LongMemoryCpu, SavesEveryKAndAtTheEnd) {
  TempFile f("periodic.ckpt");
  LongMemoryConfig c = tiny(7);
  c.checkpoint = f.path();
  c.save_every = 3;
  std::vector<std::int64_t> saved;
  train_long_memory(c, [&](const TrainProgress& p) {
    // The callback runs before that iteration's save: the file holds the last multiple of 3.
    if (p.iteration > 3) saved.push_back(read_long_memory_checkpoint(f.path()).iteration);
  });
  EXPECT_EQ(saved, (std::vector<std::int64_t>{3, 3, 3, 6}));
  EXPECT_EQ(read_long_memory_checkpoint(f.path()).iteration, 7);
}

TEST(LongMemoryCpu, ResumingAConvergedOrFinishedCheckpointRunsNothing) {
  TempFile f("done.ckpt");
  LongMemoryConfig c = tiny(3);
  c.checkpoint = f.path();
  train_long_memory(c);
  c.resume = true;
  const LongMemoryResult r = train_long_memory(c);
  EXPECT_EQ(r.train.iterations, 0);
  EXPECT_EQ(r.last_iteration, 3);
  EXPECT_EQ(read_long_memory_checkpoint(f.path()).iteration, 3);
}

class LongMemoryCheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    LongMemoryConfig c = tiny(2);
    c.checkpoint = file_.path();
    train_long_memory(c);
    good_ = read_bytes(file_.path());
    ASSERT_GT(good_.size(), 100u);
  }
  std::string resume_error(const std::string& bytes, LongMemoryConfig c = tiny(4)) {
    write_bytes(file_.path(), bytes);
    c.checkpoint = file_.path();
    c.resume = true;
    return invalid_argument_of([&] { train_long_memory(c); });
  }
  // FNV-1a 64, as the file's trailer: to forge a file whose checksum is right.
  static std::string with_checksum(std::string bytes) {
    bytes.resize(bytes.size() - 8);
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (const char ch : bytes) {
      h ^= static_cast<unsigned char>(ch);
      h *= 0x100000001B3ull;
    }
    bytes.append(reinterpret_cast<const char*>(&h), sizeof(h));
    return bytes;
  }

  TempFile file_{"bad.ckpt"};
  std::string good_;
};

TEST_F(LongMemoryCheckpointErrors, WrongMagic) {
  std::string bytes = good_;
  bytes[0] = 'X';
  EXPECT_CONTAINS(resume_error(bytes), "magic");
  EXPECT_CONTAINS(resume_error("hello"), "magic");
  EXPECT_CONTAINS(resume_error(""), "magic");
}

TEST_F(LongMemoryCheckpointErrors, ChecksumCatchesAFlippedBit) {
  for (const std::size_t at : {std::size_t{12}, std::size_t{40}, good_.size() / 2,
                               good_.size() - 9, good_.size() - 1}) {
    std::string bytes = good_;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    EXPECT_CONTAINS(resume_error(bytes), "checksum") << "byte " << at;
  }
}

TEST_F(LongMemoryCheckpointErrors, Truncated) {
  EXPECT_CONTAINS(resume_error(good_.substr(0, good_.size() - 4)), "checksum");
  EXPECT_CONTAINS(resume_error(good_.substr(0, 10)), "truncated");
  // A consistent checksum over a file cut inside the parameters: the size check catches it.
  EXPECT_CONTAINS(resume_error(with_checksum(good_.substr(0, good_.size() - 40))), "bytes");
}

TEST_F(LongMemoryCheckpointErrors, WrongVersion) {
  std::string bytes = good_;
  bytes[8] = 7;  // u32 version after the 8-byte magic
  EXPECT_CONTAINS(resume_error(with_checksum(bytes)), "version");
}

TEST_F(LongMemoryCheckpointErrors, ConfigMismatch) {
  LongMemoryConfig c = tiny(4);
  c.hidden = 9;
  EXPECT_CONTAINS(resume_error(good_, c), "hidden");
  c = tiny(4);
  c.steps = 7;
  EXPECT_CONTAINS(resume_error(good_, c), "steps");
  c = tiny(4);
  c.batch = 5;
  EXPECT_CONTAINS(resume_error(good_, c), "batch");
  c = tiny(4);
  c.seed = 12;
  EXPECT_CONTAINS(resume_error(good_, c), "seed");
  c = tiny(4);
  c.learning_rate = 2e-2;
  EXPECT_CONTAINS(resume_error(good_, c), "learning_rate");
  c = tiny(4);
  c.adam_eps = 1e-12;
  EXPECT_CONTAINS(resume_error(good_, c), "adam_eps");
  EXPECT_EQ(read_bytes(file_.path()), good_);  // a refused resume leaves the file alone
}

TEST_F(LongMemoryCheckpointErrors, MissingFileAndMissingPath) {
  LongMemoryConfig c = tiny(4);
  c.checkpoint = file_.path() + ".absent";
  c.resume = true;
  EXPECT_CONTAINS(invalid_argument_of([&] { train_long_memory(c); }), "cannot open");
  c.checkpoint.clear();
  EXPECT_CONTAINS(invalid_argument_of([&] { train_long_memory(c); }), "resume");
}

// The reported norm is the norm of the gradient Adam is given: after the first step Adam's first
// moment is m = (1 - β1)·g, so ‖m‖ / (1 - β1) (from the checkpoint) must equal it. Clipping below
// the norm makes that ‖m‖ / (1 - β1) the clip norm (the report stays the norm before clipping);
// a clip norm above it changes nothing, bit for bit. Tolerance 1e-5 relative: m rounds each
// element of 0.1·g to float (2^-24), the norms add in double.
TEST(LongMemoryCpu, GradientNormIsReportedAndClipped) {
  TempFile plain("plain.ckpt"), clipped("clipped.ckpt"), loose("loose.ckpt");
  auto run = [](LongMemoryConfig c, const std::string& path) {
    c.checkpoint = path;
    double norm = -1.0;
    train_long_memory(c, [&](const TrainProgress& p) { norm = p.grad_norm; });
    return norm;
  };
  auto first_moment_norm = [](const std::string& path) {
    double sum = 0.0;
    for (const float m : read_long_memory_checkpoint(path).adam_m) sum += double(m) * m;
    return std::sqrt(sum) / (1.0 - 0.9);
  };
  LongMemoryConfig c = tiny(1);
  const double norm = run(c, plain.path());
  ASSERT_TRUE(std::isfinite(norm));
  ASSERT_GT(norm, 0.0);
  EXPECT_NEAR(first_moment_norm(plain.path()), norm, 1e-5 * norm);

  c.clip_norm = 0.25 * norm;
  EXPECT_EQ(run(c, clipped.path()), norm) << "the report is the norm before clipping";
  EXPECT_NEAR(first_moment_norm(clipped.path()), c.clip_norm, 1e-5 * c.clip_norm);

  c.clip_norm = 4.0 * norm;
  EXPECT_EQ(run(c, loose.path()), norm);
  EXPECT_EQ(read_bytes(loose.path()), read_bytes(plain.path()));
}

TEST(LongMemoryCpu, RejectsBadConfig) {
  LongMemoryConfig c = tiny(1);
  c.hidden = 0;
  EXPECT_THROW(train_long_memory(c), InvalidArgument);
  c = tiny(1);
  c.learning_rate = -1;
  EXPECT_THROW(train_long_memory(c), InvalidArgument);
  c = tiny(1);
  c.stop_after_perfect = -1;
  EXPECT_THROW(train_long_memory(c), InvalidArgument);
  c = tiny(1);
  c.adam_eps = 0.0;
  EXPECT_THROW(train_long_memory(c), InvalidArgument);
  c = tiny(1);
  c.clip_norm = -1.0;
  EXPECT_CONTAINS(invalid_argument_of([&] { train_long_memory(c); }),
                  "clip_norm: expected a finite value >= 0 (0: no clipping), got -1");
  c = tiny(1);  // the CPU backend: TF32 is the GPU's
  c.math = GemmMath::Tf32;
  try {
    train_long_memory(c);
    ADD_FAILURE() << "expected Unsupported for TF32 on the CPU backend";
  } catch (const Unsupported& e) {
    EXPECT_CONTAINS(std::string(e.what()), "GEMM math tf32 runs on the GPU");
  }
}

}  // namespace
}  // namespace prnn
