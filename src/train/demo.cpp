// The demo job: LSTM + dense classifier on the first-symbol memory task, trained with Adam.
// Backend: the CPU reference (src/reference), in f32.
#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "core/check.h"
#include "prnn/rnn.h"
#include "prnn/train.h"
#include "reference/dense.h"
#include "reference/rnn.h"

namespace prnn {
namespace {

constexpr std::int64_t kClasses = 2;
constexpr std::int64_t kSmoothingWindow = 10;

struct Batch {
  std::vector<float> x;               // [T, B, alphabet] one-hot
  std::vector<std::int32_t> labels;   // [B]
};

Batch make_batch(const DemoConfig& c, std::mt19937_64& gen) {
  Batch b;
  b.x.assign(static_cast<std::size_t>(c.steps * c.batch * c.alphabet), 0.0f);
  b.labels.resize(static_cast<std::size_t>(c.batch));
  std::uniform_int_distribution<std::int64_t> symbol(0, c.alphabet - 1);
  for (std::int64_t n = 0; n < c.batch; ++n) {
    for (std::int64_t t = 0; t < c.steps; ++t) {
      const std::int64_t s = symbol(gen);
      b.x[static_cast<std::size_t>((t * c.batch + n) * c.alphabet + s)] = 1.0f;
      if (t == 0) b.labels[static_cast<std::size_t>(n)] = s < c.alphabet / 2 ? 0 : 1;
    }
  }
  return b;
}

void init_uniform(std::vector<float>& w, double scale, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> d(-scale, scale);
  for (auto& v : w) v = static_cast<float>(d(gen));
}

}  // namespace

TrainResult run_demo(const DemoConfig& c, const std::function<void(const TrainProgress&)>& on_progress) {
  PRNN_EXPECT(c.alphabet >= 2, "demo: alphabet: expected >= 2, got {}", c.alphabet);
  PRNN_EXPECT(c.hidden >= 1, "demo: hidden: expected >= 1, got {}", c.hidden);
  PRNN_EXPECT(c.steps >= 1, "demo: steps: expected >= 1, got {}", c.steps);
  PRNN_EXPECT(c.batch >= 1, "demo: batch: expected >= 1, got {}", c.batch);
  PRNN_EXPECT(c.iterations >= 1, "demo: iterations: expected >= 1, got {}", c.iterations);
  PRNN_EXPECT(c.learning_rate > 0, "demo: learning_rate: expected > 0, got {}", c.learning_rate);

  const RnnDesc desc{Cell::LSTM, c.alphabet, c.hidden, 1, Direction::Unidirectional, DType::F32};
  const auto H = static_cast<std::size_t>(c.hidden);
  const auto B = static_cast<std::size_t>(c.batch);
  std::mt19937_64 gen(c.seed);

  // PyTorch's default LSTM init: U(-1/sqrt(H), 1/sqrt(H)) for every parameter.
  std::vector<float> rnn_w(static_cast<std::size_t>(rnn_param_count(desc)));
  init_uniform(rnn_w, 1.0 / std::sqrt(double(c.hidden)), gen);
  // Forget-gate bias 1 (gate order i, f, g, o): the cell starts out remembering, which is what
  // lets the first symbol's gradient reach step 0 (Jozefowicz et al., 2015).
  const RnnParamOffsets off = rnn_param_offsets(desc, 0, 0);
  for (std::int64_t k = 0; k < c.hidden; ++k)
    rnn_w[static_cast<std::size_t>(off.b_ih + c.hidden + k)] = 1.0f;
  std::vector<float> fc_w(kClasses * H), fc_b(kClasses);
  init_uniform(fc_w, 1.0 / std::sqrt(double(c.hidden)), gen);
  init_uniform(fc_b, 1.0 / std::sqrt(double(c.hidden)), gen);

  std::vector<float> rnn_g(rnn_w.size()), rnn_m(rnn_w.size()), rnn_v(rnn_w.size());
  std::vector<float> fcw_g(fc_w.size()), fcw_m(fc_w.size()), fcw_v(fc_w.size());
  std::vector<float> fcb_g(fc_b.size()), fcb_m(fc_b.size()), fcb_v(fc_b.size());
  std::vector<float> y(static_cast<std::size_t>(c.steps) * B * H), hn(B * H), logits(B * kClasses);
  std::vector<float> dlogits(logits.size()), dhn(B * H), dy(y.size(), 0.0f);
  const reference::AdamConfig adam{c.learning_rate, 0.9, 0.999, 1e-8, 0.0};

  TrainResult result;
  result.backend = "cpu-reference (f32)";
  result.task = "first-symbol memory, LSTM-" + std::to_string(c.hidden) + ", T=" +
                std::to_string(c.steps) + ", B=" + std::to_string(c.batch);
  std::vector<double> losses, accuracies;
  const auto start = std::chrono::steady_clock::now();

  for (std::int64_t it = 1; it <= c.iterations; ++it) {
    const Batch batch = make_batch(c, gen);
    reference::rnn_forward<float>(desc, c.steps, c.batch, batch.x.data(), nullptr, nullptr,
                                  rnn_w.data(), y.data(), hn.data(), nullptr);
    reference::dense_forward<float>(c.batch, c.hidden, kClasses, hn.data(), fc_w.data(),
                                    fc_b.data(), logits.data());
    const double loss = reference::softmax_cross_entropy<float>(
        c.batch, kClasses, logits.data(), batch.labels.data(), dlogits.data());
    std::int64_t correct = 0;
    for (std::size_t n = 0; n < B; ++n) {
      const std::int32_t pred = logits[n * kClasses + 1] > logits[n * kClasses] ? 1 : 0;
      correct += pred == batch.labels[n];
    }
    reference::dense_backward<float>(c.batch, c.hidden, kClasses, hn.data(), fc_w.data(),
                                     dlogits.data(), dhn.data(), fcw_g.data(), fcb_g.data());
    reference::rnn_backward<float>(desc, c.steps, c.batch, batch.x.data(), nullptr, nullptr,
                                   rnn_w.data(), dy.data(), dhn.data(), nullptr, nullptr, nullptr,
                                   nullptr, rnn_g.data());
    reference::adam_update<float>(adam, it, static_cast<std::int64_t>(rnn_w.size()), rnn_w.data(),
                                  rnn_g.data(), rnn_m.data(), rnn_v.data());
    reference::adam_update<float>(adam, it, static_cast<std::int64_t>(fc_w.size()), fc_w.data(),
                                  fcw_g.data(), fcw_m.data(), fcw_v.data());
    reference::adam_update<float>(adam, it, static_cast<std::int64_t>(fc_b.size()), fc_b.data(),
                                  fcb_g.data(), fcb_m.data(), fcb_v.data());

    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    losses.push_back(loss);
    accuracies.push_back(double(correct) / double(c.batch));
    if (it == 1) result.first_loss = loss;
    TrainProgress p;
    p.iteration = it;
    p.iterations = c.iterations;
    p.loss = loss;
    p.accuracy = accuracies.back();
    p.tokens_per_second = double(it * c.steps * c.batch) / std::max(seconds, 1e-9);
    if (on_progress) on_progress(p);
    result.tokens_per_second = p.tokens_per_second;
    result.seconds = seconds;
  }
  const std::size_t window = std::min<std::size_t>(losses.size(), kSmoothingWindow);
  for (std::size_t i = losses.size() - window; i < losses.size(); ++i) {
    result.final_loss += losses[i] / double(window);
    result.final_accuracy += accuracies[i] / double(window);
  }
  result.iterations = c.iterations;
  return result;
}

}  // namespace prnn
