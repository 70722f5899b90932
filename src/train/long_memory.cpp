// The long-memory job (the task is described in prnn/train.h): two GILR-LSTM layers and a dense
// classifier on the last step, softmax cross-entropy, Adam; on the GPU (device LinearLayers, the
// device batch generator and the device Adam of src/train) or on the CPU reference (host
// LinearLayers, reference::adam_update), with checkpoints that resume bit for bit.
//
// One iteration (T steps, B batch, H hidden; every tensor time-major, fp32):
//   x   [T, B, 128]  batch k = iteration - 1 of the stream (long_memory_data.h)
//   y1  [T, B, H]    = layer1(x),  y2 [T, B, H] = layer2(y1), zero initial states
//   h   [B, H]       = y2[T-1], copied to the host with the classifier's W [2, H] and b [2]
//   logits [B, 2], loss, accuracy, dlogits, dh, dW, db on the host (reference/dense.h)
//   dy2 [T, B, H]    zero except row T-1 = dh (rows < T-1 are cleared once, never written)
//   layer2.backward -> dy1 [T, B, H], dθ2;  layer1.backward -> dθ1 (no dx: not computed)
//   ‖dθ‖ (the flat gradient's L2 norm, reported; with clip_norm > 0 and ‖dθ‖ > clip_norm the
//   gradient is scaled by clip_norm / ‖dθ‖), then Adam step `iteration` over the flat
//   θ = [θ1 | θ2 | W | b] and its gradient, in one call.
// Init (from the seed, on the host): every weight U(-1/√fan_in, 1/√fan_in); the GILR-LSTM cell
// gates get the chrono init (Tallec & Ollivier 2018): b_f = log(u), u ~ U[1, T-1], b_i = -b_f,
// so each cell starts as a moving average over ~u steps and information from t = 0 can reach
// the classifier at any T; the other biases are 0.
// Checkpoint (read_long_memory_checkpoint in prnn/train.h has the layout): the config, the
// iteration, the stream position, the early-stop streak, θ and both Adam moments, and a
// checksum; written to FILE.tmp and renamed over FILE.
#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "prnn/device.h"
#include "prnn/layers.h"
#include "prnn/tensor.h"
#include "prnn/train.h"
#include "reference/dense.h"
#include "train/long_memory_data.h"

#if PRNN_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "train/optim.h"
#endif

namespace prnn {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints are written little-endian");
static_assert(kLongMemoryAlphabet == train::kMemoryAlphabet, "one alphabet for the task and data");

constexpr std::int64_t kClasses = kLongMemoryClasses;
constexpr std::int64_t kLayers = 2;
constexpr double kBeta1 = 0.9, kBeta2 = 0.999;
constexpr std::int64_t kSmoothingWindow = 10;

constexpr char kMagic[8] = {'P', 'R', 'N', 'N', 'L', 'M', 'C', 'K'};
constexpr std::uint32_t kVersion = 1;

std::size_t count(std::int64_t n) { return static_cast<std::size_t>(n); }

LinearLayerDesc layer_desc(std::int64_t input, std::int64_t hidden) {
  LinearLayerDesc d;
  d.kind = LinearLayerKind::GilrLstm;
  d.input_size = input;
  d.hidden_size = hidden;
  return d;
}

// Offsets of the blocks of the flat θ.
struct Layout {
  std::int64_t hidden = 0;
  std::int64_t layer1 = 0, layer2 = 0;  // GILR-LSTM params (prnn/layers.h order)
  std::int64_t fc_w = 0, fc_b = 0;      // classifier W [2, H], b [2]
  std::int64_t total = 0;

  explicit Layout(std::int64_t H) : hidden(H) {
    layer2 = layer_desc(kLongMemoryAlphabet, H).param_count();
    fc_w = layer2 + layer_desc(H, H).param_count();
    fc_b = fc_w + kClasses * H;
    total = fc_b + kClasses;
  }
  std::int64_t classifier() const { return total - fc_w; }  // W then b, contiguous
};

// n floats on the host or the device, zero-initialized, with copies in and out by offset.
class Floats {
 public:
  Floats() = default;
  Floats(std::int64_t n, Device device) : n_(n), device_(device) {
    if (device.kind == MemoryKind::Host) {
      host_.assign(count(n), 0.0f);
      data_ = host_.data();
    } else {
      dev_ = DeviceBuffer(count(n) * sizeof(float));
      dev_.fill_bytes(0);
      data_ = dev_.data_as<float>();
    }
  }
  float* data() const { return data_; }
  std::int64_t size() const { return n_; }
  TensorView view(const Shape& shape) const {
    PRNN_ASSERT(shape.numel() == n_);
    return TensorView(data_, DType::F32, shape, device_);
  }
  TensorView slice(std::int64_t offset, std::int64_t n) const {
    PRNN_ASSERT(offset >= 0 && offset + n <= n_);
    return TensorView(data_ + offset, DType::F32, {n}, device_);
  }
  void read(std::int64_t offset, std::int64_t n, float* dst) const { copy(dst, data_ + offset, n); }
  void write(std::int64_t offset, std::int64_t n, const float* src) { copy(data_ + offset, src, n); }

 private:
  void copy(float* dst, const float* src, std::int64_t n) const {
    if (n == 0) return;
    if (device_.kind == MemoryKind::Host) {
      std::memcpy(dst, src, count(n) * sizeof(float));
      return;
    }
#if PRNN_WITH_CUDA
    PRNN_CUDA_CHECK(cudaMemcpy(dst, src, count(n) * sizeof(float), cudaMemcpyDefault));
#endif
  }

  std::int64_t n_ = 0;
  Device device_;
  std::vector<float> host_;
  DeviceBuffer dev_;
  float* data_ = nullptr;
};

void validate(const LongMemoryConfig& c) {
  constexpr const char* fn = "train_long_memory";
  PRNN_EXPECT(c.steps >= 1, "{}: steps: expected >= 1, got {}", fn, c.steps);
  PRNN_EXPECT(c.hidden >= 1, "{}: hidden: expected >= 1, got {}", fn, c.hidden);
  PRNN_EXPECT(c.batch >= 1, "{}: batch: expected >= 1, got {}", fn, c.batch);
  PRNN_EXPECT(c.iterations >= 1, "{}: iterations: expected >= 1, got {}", fn, c.iterations);
  PRNN_EXPECT(c.learning_rate > 0 && std::isfinite(c.learning_rate),
              "{}: learning_rate: expected a finite value > 0, got {}", fn, c.learning_rate);
  PRNN_EXPECT(c.adam_eps > 0 && std::isfinite(c.adam_eps),
              "{}: adam_eps: expected a finite value > 0, got {}", fn, c.adam_eps);
  PRNN_EXPECT(c.stop_after_perfect >= 0, "{}: stop_after_perfect: expected >= 0, got {}", fn,
              c.stop_after_perfect);
  PRNN_EXPECT(c.save_every >= 0, "{}: save_every: expected >= 0, got {}", fn, c.save_every);
  PRNN_EXPECT(c.clip_norm >= 0 && std::isfinite(c.clip_norm),
              "{}: clip_norm: expected a finite value >= 0 (0: no clipping), got {}", fn,
              c.clip_norm);
  PRNN_EXPECT(!c.resume || !c.checkpoint.empty(),
              "{}: resume: expected a checkpoint file to resume from, got none", fn);
}

// ---- initialization and data on the host ----

std::vector<float> init_params(const LongMemoryConfig& c, const Layout& lay) {
  std::mt19937_64 gen(c.seed);
  std::vector<float> p(count(lay.total), 0.0f);
  auto uniform = [&](std::int64_t begin, std::int64_t n, double scale) {
    std::uniform_real_distribution<double> d(-scale, scale);
    for (std::int64_t i = begin; i < begin + n; ++i) p[count(i)] = static_cast<float>(d(gen));
  };
  const std::int64_t H = c.hidden;
  const double horizon = std::max<double>(1.0, static_cast<double>(c.steps - 1));
  std::uniform_real_distribution<double> timescale(1.0, horizon);
  for (std::int64_t l = 0; l < kLayers; ++l) {
    const std::int64_t I = l == 0 ? kLongMemoryAlphabet : H;
    const std::int64_t base = l == 0 ? lay.layer1 : lay.layer2;
    const std::int64_t w = 6 * H * I, u = 4 * H * H;  // W [6H, I], U [4H, H], b [6H]
    uniform(base, w, 1.0 / std::sqrt(double(I)));
    uniform(base + w, u, 1.0 / std::sqrt(double(H)));
    const std::int64_t b = base + w + u;  // (s; u; i; f; z; o)
    for (std::int64_t k = 0; k < H; ++k) {
      const auto bf = static_cast<float>(std::log(timescale(gen)));
      p[count(b + 3 * H + k)] = bf;
      p[count(b + 2 * H + k)] = -bf;
    }
  }
  uniform(lay.fc_w, lay.classifier(), 1.0 / std::sqrt(double(H)));
  return p;
}

std::vector<std::int32_t> batch_labels(const LongMemoryConfig& c, std::uint64_t batch_index) {
  std::vector<std::int32_t> labels(count(c.batch));
  for (std::int64_t b = 0; b < c.batch; ++b)
    labels[count(b)] = train::sequence_label(
        train::sequence_key(c.seed, batch_index, static_cast<std::uint64_t>(b)));
  return labels;
}

void fill_batch_host(const LongMemoryConfig& c, std::uint64_t batch_index, float* x) {
  const std::int64_t A = kLongMemoryAlphabet;
  std::fill(x, x + c.steps * c.batch * A, 0.0f);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::uint64_t key = train::sequence_key(c.seed, batch_index, static_cast<std::uint64_t>(b));
    x[b * A] = train::sequence_label(key) == 0 ? 1.0f : -1.0f;
    for (std::int64_t t = 1; t < c.steps; ++t)
      x[(t * c.batch + b) * A + train::distractor_symbol(key, static_cast<std::uint64_t>(t))] = 1.0f;
  }
}

// ---- checkpoint file ----

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char ch : bytes) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001B3ull;
  }
  return h;
}

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_floats(const std::vector<float>& v) {
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : in_(bytes), path_(path) {}
  template <class T>
  T get(const char* what) {
    T v{};
    need(sizeof(T), what);
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::vector<float> get_floats(std::int64_t n, const char* what) {
    need(count(n) * sizeof(float), what);
    std::vector<float> v(count(n));
    std::memcpy(v.data(), in_.data() + pos_, count(n) * sizeof(float));
    pos_ += count(n) * sizeof(float);
    return v;
  }
  std::size_t remaining() const { return in_.size() - pos_; }

 private:
  void need(std::size_t n, const char* what) {
    PRNN_EXPECT(in_.size() - pos_ >= n,
                "checkpoint '{}': truncated: expected {} more bytes for {} at offset {}, got {}",
                path_, n, what, pos_, in_.size() - pos_);
  }
  std::string_view in_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

void write_checkpoint(const std::string& path, const LongMemoryCheckpoint& ck) {
  const LongMemoryConfig& c = ck.config;
  Writer w;
  w.bytes().append(kMagic, sizeof(kMagic));
  w.put(kVersion);
  w.put(std::uint32_t{0});  // reserved
  w.put(kLongMemoryAlphabet);
  w.put(kClasses);
  w.put(kLayers);
  w.put(c.hidden);
  w.put(c.steps);
  w.put(c.batch);
  w.put(c.seed);
  w.put(c.learning_rate);
  w.put(kBeta1);
  w.put(kBeta2);
  w.put(c.adam_eps);
  w.put(ck.iteration);
  w.put(ck.batches_drawn);
  w.put(ck.perfect_streak);
  w.put(static_cast<std::int64_t>(ck.params.size()));
  w.put_floats(ck.params);
  w.put_floats(ck.adam_m);
  w.put_floats(ck.adam_v);
  w.put(fnv1a(w.bytes()));

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    PRNN_EXPECT(f.good(), "checkpoint '{}': cannot open '{}' for writing", path, tmp);
    f.write(w.bytes().data(), static_cast<std::streamsize>(w.bytes().size()));
    f.flush();
    PRNN_EXPECT(f.good(), "checkpoint '{}': writing '{}' failed", path, tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  PRNN_EXPECT(!ec, "checkpoint '{}': renaming '{}' over it failed: {}", path, tmp, ec.message());
}

template <class T>
void expect_field(const std::string& path, const char* name, T in_file, T here) {
  PRNN_EXPECT(in_file == here,
              "checkpoint '{}' does not match this run: {}: expected {} (this run's), got {} "
              "(the file's)",
              path, name, here, in_file);
}

// ---- the model on one device ----

class Trainer {
 public:
  Trainer(const LongMemoryConfig& c, Device device)
      : c_(c),
        device_(device),
        lay_(c.hidden),
        layer1_(layer_desc(kLongMemoryAlphabet, c.hidden), c.steps, c.batch, DType::F32, device,
                ScanAlgo::Auto, c.math),
        layer2_(layer_desc(c.hidden, c.hidden), c.steps, c.batch, DType::F32, device,
                ScanAlgo::Auto, c.math),
        x_(c.steps * c.batch * kLongMemoryAlphabet, device),
        y1_(c.steps * c.batch * c.hidden, device),
        y2_(y1_.size(), device),
        dy1_(y1_.size(), device),
        dy2_(y1_.size(), device),
        params_(lay_.total, device),
        grads_(lay_.total, device),
        m_(lay_.total, device),
        v_(lay_.total, device) {
#if PRNN_WITH_CUDA
    if (device.kind == MemoryKind::Cuda)
      norm_partials_ = DeviceBuffer(train::kNormPartials * sizeof(double));
#endif
  }

  const Layout& layout() const { return lay_; }

  void set_state(const std::vector<float>& p, const std::vector<float>& m,
                 const std::vector<float>& v) {
    params_.write(0, lay_.total, p.data());
    m_.write(0, lay_.total, m.data());
    v_.write(0, lay_.total, v.data());
  }
  void get_state(std::vector<float>& p, std::vector<float>& m, std::vector<float>& v) const {
    p.resize(count(lay_.total));
    m.resize(p.size());
    v.resize(p.size());
    params_.read(0, lay_.total, p.data());
    m_.read(0, lay_.total, m.data());
    v_.read(0, lay_.total, v.data());
  }

  struct Step {
    double loss = 0.0;
    std::int64_t correct = 0;
    double grad_norm = 0.0;  // before clipping
  };

  // Forward, backward and Adam step `step` on batch `batch_index` of the stream.
  Step run(std::int64_t step, std::uint64_t batch_index) {
    const std::int64_t T = c_.steps, B = c_.batch, H = c_.hidden;
    const Shape xs{T, B, kLongMemoryAlphabet}, ys{T, B, H};
    const std::vector<std::int32_t> labels = batch_labels(c_, batch_index);
    generate(batch_index);
    const TensorView p1 = params_.slice(lay_.layer1, lay_.layer2 - lay_.layer1);
    const TensorView p2 = params_.slice(lay_.layer2, lay_.fc_w - lay_.layer2);
    layer1_.forward(x_.view(xs), p1, {}, y1_.view(ys), {});
    layer2_.forward(y1_.view(ys), p2, {}, y2_.view(ys), {});

    // The classifier on the host: h = y2[T-1] [B, H], θ_fc = (W [2, H], b [2]).
    std::vector<float> h(count(B * H)), fc(count(lay_.classifier()));
    std::vector<float> logits(count(B * kClasses)), dlogits(logits.size()), dh(h.size()),
        dfc(fc.size());
    y2_.read((T - 1) * B * H, B * H, h.data());
    params_.read(lay_.fc_w, lay_.classifier(), fc.data());
    const float* W = fc.data();
    const float* b = fc.data() + kClasses * H;
    reference::dense_forward<float>(B, H, kClasses, h.data(), W, b, logits.data());
    Step s;
    s.loss = reference::softmax_cross_entropy<float>(B, kClasses, logits.data(), labels.data(),
                                                     dlogits.data());
    for (std::int64_t n = 0; n < B; ++n) {
      const std::int32_t pred = logits[count(n * kClasses + 1)] > logits[count(n * kClasses)] ? 1 : 0;
      s.correct += pred == labels[count(n)];
    }
    reference::dense_backward<float>(B, H, kClasses, h.data(), W, dlogits.data(), dh.data(),
                                     dfc.data(), dfc.data() + kClasses * H);
    dy2_.write((T - 1) * B * H, B * H, dh.data());
    grads_.write(lay_.fc_w, lay_.classifier(), dfc.data());

    layer2_.backward(y1_.view(ys), p2, {}, dy2_.view(ys), {}, dy1_.view(ys),
                     grads_.slice(lay_.layer2, lay_.fc_w - lay_.layer2), {});
    layer1_.backward(x_.view(xs), p1, {}, dy1_.view(ys), {}, {},
                     grads_.slice(lay_.layer1, lay_.layer2 - lay_.layer1), {});
    s.grad_norm = clip_gradient();
    adam(step);
    return s;
  }

  void synchronize() const {
#if PRNN_WITH_CUDA
    if (device_.kind == MemoryKind::Cuda) PRNN_CUDA_CHECK(cudaDeviceSynchronize());
#endif
  }

 private:
  void generate(std::uint64_t batch_index) {
    if (device_.kind == MemoryKind::Host) {
      fill_batch_host(c_, batch_index, x_.data());
      return;
    }
#if PRNN_WITH_CUDA
    train::generate_memory_batch(c_.seed, batch_index, c_.steps, c_.batch, x_.data(), nullptr);
#endif
  }

  // The gradient's L2 norm; with clip_norm > 0 and a larger norm, the gradient scaled to it.
  double clip_gradient() {
    const std::int64_t n = lay_.total;
    double squared = 0.0;
    if (device_.kind == MemoryKind::Host) {
      for (std::int64_t i = 0; i < n; ++i) squared += double(grads_.data()[i]) * grads_.data()[i];
    } else {
#if PRNN_WITH_CUDA
      squared = train::squared_norm(n, grads_.data(), norm_partials_.data_as<double>(), nullptr);
#endif
    }
    const double norm = std::sqrt(squared);
    if (c_.clip_norm > 0 && norm > c_.clip_norm) {
      const auto factor = static_cast<float>(c_.clip_norm / norm);
      if (device_.kind == MemoryKind::Host) {
        for (std::int64_t i = 0; i < n; ++i) grads_.data()[i] *= factor;
      } else {
#if PRNN_WITH_CUDA
        train::scale(n, grads_.data(), factor, nullptr);
#endif
      }
    }
    return norm;
  }

  void adam(std::int64_t step) {
    if (device_.kind == MemoryKind::Host) {
      const reference::AdamConfig cfg{c_.learning_rate, kBeta1, kBeta2, c_.adam_eps, 0.0};
      reference::adam_update<float>(cfg, step, lay_.total, params_.data(), grads_.data(),
                                    m_.data(), v_.data());
      return;
    }
#if PRNN_WITH_CUDA
    train::adam_update(train::adam_scalars(c_.learning_rate, kBeta1, kBeta2, c_.adam_eps, 0.0, step),
                       lay_.total, params_.data(), grads_.data(), m_.data(), v_.data(), nullptr);
#endif
  }

  LongMemoryConfig c_;
  Device device_;
  Layout lay_;
  LinearLayer layer1_, layer2_;
  Floats x_;                  // [T, B, 128]
  Floats y1_, y2_, dy1_, dy2_;  // [T, B, H]
  Floats params_, grads_, m_, v_;  // [lay_.total]
  DeviceBuffer norm_partials_;     // [train::kNormPartials] doubles (the GPU's norm)
};

#if PRNN_WITH_CUDA
// Bytes the GPU run allocates, to fail early with advice instead of deep inside cudaMalloc.
std::size_t gpu_bytes(const LongMemoryConfig& c) {
  const auto TB = static_cast<double>(c.steps) * static_cast<double>(c.batch);
  const auto H = static_cast<double>(c.hidden), A = static_cast<double>(kLongMemoryAlphabet);
  const double per_layer = TB * (2 * 6 * H + 2 * H + H + 1);  // P, dP, S (h̃, c), dnext, ones
  const double ours = TB * (A + 4 * H);                        // x, y1, y2, dy1, dy2
  return static_cast<std::size_t>((2 * per_layer + ours) * sizeof(float));
}
#endif

Device pick_device(const LongMemoryConfig& c) {
  constexpr const char* what = "train_long_memory";
  TrainBackend b = c.backend;
  if (b == TrainBackend::Auto) b = device_count() > 0 ? TrainBackend::Gpu : TrainBackend::Cpu;
  if (b == TrainBackend::Cpu) return Device::host();  // LinearLayer rejects TF32 there
  if (device_count() == 0) throw Unsupported(what, "no GPU: " + no_device_reason());
#if PRNN_WITH_CUDA
  std::size_t free = 0, total = 0;
  PRNN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const std::size_t need = gpu_bytes(c);
  if (need > free)
    throw Unsupported(what, fmt::format("steps {} × batch {} at hidden {} needs about {:.1f} GiB "
                                        "of GPU memory, {:.1f} GiB is free: lower the batch",
                                        c.steps, c.batch, c.hidden, double(need) / (1 << 30),
                                        double(free) / (1 << 30)));
#endif
  return Device::cuda(0);
}

std::string backend_name(Device d, GemmMath math) {
  if (d.kind == MemoryKind::Host) return "cpu-reference (f32)";
  return fmt::format("gpu (GILR-LSTM: cuBLAS {}GEMMs + parallel scan, f32)",
                     math == GemmMath::Tf32 ? "TF32 " : "");
}

}  // namespace

const char* to_string(TrainBackend b) {
  switch (b) {
    case TrainBackend::Auto: return "auto";
    case TrainBackend::Gpu: return "gpu";
    case TrainBackend::Cpu: return "cpu";
  }
  return "?";
}

LongMemoryCheckpoint read_long_memory_checkpoint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  PRNN_EXPECT(f.good(), "checkpoint '{}': cannot open it for reading", path);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  PRNN_EXPECT(bytes.size() >= sizeof(kMagic) &&
                  std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0,
              "checkpoint '{}': expected the magic 'PRNNLMCK' of a prnn long-memory checkpoint, "
              "got something else (not a checkpoint, or another kind of file)",
              path);
  PRNN_EXPECT(bytes.size() >= sizeof(kMagic) + 2 * sizeof(std::uint32_t) + sizeof(std::uint64_t),
              "checkpoint '{}': truncated: {} bytes", path, bytes.size());
  const std::string_view body(bytes.data(), bytes.size() - sizeof(std::uint64_t));
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body.size(), sizeof(stored));
  const std::uint64_t actual = fnv1a(body);
  PRNN_EXPECT(stored == actual,
              "checkpoint '{}': checksum mismatch (expected {:016x}, the file says {:016x}): the "
              "file is corrupt or truncated",
              path, actual, stored);

  Reader in(body, path);
  (void)in.get<std::array<char, sizeof(kMagic)>>("the magic");
  const auto version = in.get<std::uint32_t>("the version");
  PRNN_EXPECT(version == kVersion, "checkpoint '{}': expected format version {}, got {}", path,
              kVersion, version);
  (void)in.get<std::uint32_t>("reserved");
  LongMemoryCheckpoint ck;
  LongMemoryConfig& c = ck.config;
  const auto alphabet = in.get<std::int64_t>("alphabet");
  const auto classes = in.get<std::int64_t>("classes");
  const auto layers = in.get<std::int64_t>("layers");
  PRNN_EXPECT(alphabet == kLongMemoryAlphabet && classes == kClasses && layers == kLayers,
              "checkpoint '{}': expected alphabet {}, {} classes, {} layers, got {}, {}, {}", path,
              kLongMemoryAlphabet, kClasses, kLayers, alphabet, classes, layers);
  c.hidden = in.get<std::int64_t>("hidden");
  c.steps = in.get<std::int64_t>("steps");
  c.batch = in.get<std::int64_t>("batch");
  c.seed = in.get<std::uint64_t>("seed");
  c.learning_rate = in.get<double>("learning_rate");
  const auto b1 = in.get<double>("beta1"), b2 = in.get<double>("beta2");
  c.adam_eps = in.get<double>("adam_eps");
  PRNN_EXPECT(b1 == kBeta1 && b2 == kBeta2, "checkpoint '{}': expected Adam β1 {}, β2 {}, got {}, {}",
              path, kBeta1, kBeta2, b1, b2);
  PRNN_EXPECT(c.hidden >= 1 && c.steps >= 1 && c.batch >= 1,
              "checkpoint '{}': expected hidden, steps, batch >= 1, got {}, {}, {}", path,
              c.hidden, c.steps, c.batch);
  ck.iteration = in.get<std::int64_t>("iteration");
  ck.batches_drawn = in.get<std::int64_t>("batches_drawn");
  ck.perfect_streak = in.get<std::int64_t>("perfect_streak");
  PRNN_EXPECT(ck.iteration >= 0 && ck.batches_drawn >= 0 && ck.perfect_streak >= 0 &&
                  ck.perfect_streak <= ck.iteration,
              "checkpoint '{}': expected iteration, batches drawn and streak >= 0 (streak <= "
              "iteration), got {}, {}, {}",
              path, ck.iteration, ck.batches_drawn, ck.perfect_streak);
  const auto n = in.get<std::int64_t>("param_count");
  const Layout lay(c.hidden);
  PRNN_EXPECT(n == lay.total, "checkpoint '{}': expected {} parameters for hidden {}, got {}", path,
              lay.total, c.hidden, n);
  PRNN_EXPECT(in.remaining() == 3 * count(n) * sizeof(float),
              "checkpoint '{}': expected {} bytes of parameters and moments, got {}", path,
              3 * count(n) * sizeof(float), in.remaining());
  ck.params = in.get_floats(n, "the parameters");
  ck.adam_m = in.get_floats(n, "Adam's first moments");
  ck.adam_v = in.get_floats(n, "Adam's second moments");
  return ck;
}

std::int64_t perfect_batches_needed(const LongMemoryConfig& c) {
  if (c.stop_after_perfect <= 0) return 0;
  const std::int64_t batch = std::max<std::int64_t>(c.batch, 1);
  return std::max(c.stop_after_perfect, (kMinPerfectSequences + batch - 1) / batch);
}

LongMemoryResult train_long_memory(const LongMemoryConfig& c,
                                   const std::function<void(const TrainProgress&)>& on_progress) {
  validate(c);
  const Device device = pick_device(c);
  Trainer trainer(c, device);

  LongMemoryCheckpoint state;
  state.config = c;
  if (c.resume) {
    LongMemoryCheckpoint ck = read_long_memory_checkpoint(c.checkpoint);
    const std::string& f = c.checkpoint;
    expect_field(f, "hidden", ck.config.hidden, c.hidden);
    expect_field(f, "steps", ck.config.steps, c.steps);
    expect_field(f, "batch", ck.config.batch, c.batch);
    expect_field(f, "seed", ck.config.seed, c.seed);
    expect_field(f, "learning_rate", ck.config.learning_rate, c.learning_rate);
    expect_field(f, "adam_eps", ck.config.adam_eps, c.adam_eps);
    PRNN_EXPECT(ck.batches_drawn == ck.iteration,
                "checkpoint '{}': expected as many batches drawn as iterations, got {} and {}", f,
                ck.batches_drawn, ck.iteration);
    trainer.set_state(ck.params, ck.adam_m, ck.adam_v);
    state.iteration = ck.iteration;
    state.batches_drawn = ck.batches_drawn;
    state.perfect_streak = ck.perfect_streak;
  } else {
    const std::vector<float> zeros(count(trainer.layout().total), 0.0f);
    trainer.set_state(init_params(c, trainer.layout()), zeros, zeros);
  }

  LongMemoryResult result;
  result.train.backend = backend_name(device, c.math);
  result.train.task = fmt::format("long memory (problem 2b), GILR-LSTM {}-{}, T={}, B={}",
                                  c.hidden, c.hidden, c.steps, c.batch);
  result.start_iteration = state.iteration;
  result.last_iteration = state.iteration;
  const std::int64_t needed = perfect_batches_needed(c);
  auto converged = [&] { return needed > 0 && state.perfect_streak >= needed; };
  auto save = [&] {
    if (c.checkpoint.empty()) return;
    trainer.get_state(state.params, state.adam_m, state.adam_v);
    write_checkpoint(c.checkpoint, state);
  };

  std::vector<double> losses, accuracies;
  std::int64_t saved_at = state.iteration;
  const auto start = std::chrono::steady_clock::now();
  while (state.iteration < c.iterations && !converged()) {
    const std::int64_t it = state.iteration + 1;
    const Trainer::Step s = trainer.run(it, static_cast<std::uint64_t>(state.batches_drawn));
    state.iteration = it;
    state.batches_drawn += 1;
    state.perfect_streak = s.correct == c.batch ? state.perfect_streak + 1 : 0;

    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double ran = static_cast<double>(it - result.start_iteration);
    losses.push_back(s.loss);
    accuracies.push_back(double(s.correct) / double(c.batch));
    TrainProgress p;
    p.iteration = it;
    p.iterations = c.iterations;
    p.loss = s.loss;
    p.accuracy = accuracies.back();
    p.seconds = seconds;
    p.iterations_per_second = ran / std::max(seconds, 1e-9);
    p.tokens_per_second = p.iterations_per_second * double(c.steps) * double(c.batch);
    p.grad_norm = s.grad_norm;
    if (on_progress) on_progress(p);
    if (c.save_every > 0 && it % c.save_every == 0) {
      save();
      saved_at = it;
    }
    if (converged()) {
      result.converged = true;
      result.converged_iteration = it;
    }
  }
  trainer.synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (saved_at != state.iteration) save();

  if (!result.converged && converged()) {  // the checkpoint had already converged
    result.converged = true;
    result.converged_iteration = state.iteration;
  }
  const auto ran = static_cast<std::int64_t>(losses.size());
  result.last_iteration = state.iteration;
  result.train.iterations = ran;
  result.train.seconds = seconds;
  if (ran > 0) {
    result.train.first_loss = losses.front();
    result.last_loss = losses.back();
    result.last_accuracy = accuracies.back();
    const std::size_t window = std::min<std::size_t>(losses.size(), kSmoothingWindow);
    for (std::size_t i = losses.size() - window; i < losses.size(); ++i) {
      result.train.final_loss += losses[i] / double(window);
      result.train.final_accuracy += accuracies[i] / double(window);
    }
    result.iterations_per_second = double(ran) / std::max(seconds, 1e-9);
    result.train.tokens_per_second =
        result.iterations_per_second * double(c.steps) * double(c.batch);
  }
  return result;
}

}  // namespace prnn
