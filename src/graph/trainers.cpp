// Trainers over a Model's fp32 parameters: the update rules are the reference ones
// (reference::sgd_update / adam_update, PyTorch semantics). Dense parameters are updated whole;
// lookup tables only on the rows backward touched since the last update (sparse updates), with
// optimizer state kept per row.
#include <algorithm>

#include "graph/model_storage.h"
#include "prnn/graph.h"
#include "reference/dense.h"

namespace prnn::graph {
namespace {

// Calls f(n, w, g, offset) on every dense parameter and every touched lookup row; `slot` indexes
// the optimizer state vectors (dense parameters first, then lookup tables).
template <class F>
void for_each_update(Model& model, F&& f) {
  auto& s = model.storage();
  std::size_t slot = 0;
  for (auto& p : s.params)
    f(slot++, static_cast<std::int64_t>(p.value.size()), p.value.data(), p.grad.data(),
      std::size_t{0});
  for (auto& t : s.tables) {
    const auto row = static_cast<std::size_t>(t.dim.size());
    for (std::size_t r = 0; r < t.touched.size(); ++r)
      if (t.touched[r])
        f(slot, t.dim.size(), t.value.data() + r * row, t.grad.data() + r * row, r * row);
    ++slot;
  }
}

std::vector<std::vector<float>> zero_state(Model& model) {
  std::vector<std::vector<float>> state;
  for (const auto& p : model.storage().params) state.emplace_back(p.value.size(), 0.0f);
  for (const auto& t : model.storage().tables) state.emplace_back(t.value.size(), 0.0f);
  return state;
}

// Parameters added to the model after the trainer was made get zero state.
void grow(Model& model, std::vector<std::vector<float>>& state) {
  const auto fresh = zero_state(model);
  for (std::size_t i = state.size(); i < fresh.size(); ++i) state.push_back(fresh[i]);
}

}  // namespace

SimpleSgdTrainer::SimpleSgdTrainer(Model& model, double lr, double momentum, double weight_decay)
    : model_(model),
      lr_(lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      velocity_(zero_state(model)) {}
SimpleSgdTrainer::~SimpleSgdTrainer() = default;

void SimpleSgdTrainer::update() {
  grow(model_, velocity_);
  const reference::SgdConfig cfg{lr_, momentum_, weight_decay_, false};
  for_each_update(
      model_, [&](std::size_t slot, std::int64_t n, float* w, const float* g, std::size_t offset) {
        reference::sgd_update<float>(cfg, n, w, g, velocity_[slot].data() + offset);
      });
  model_.zero_gradients();
}

AdamTrainer::AdamTrainer(Model& model, double lr, double beta1, double beta2, double eps)
    : model_(model),
      lr_(lr),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      m_(zero_state(model)),
      v_(zero_state(model)) {}
AdamTrainer::~AdamTrainer() = default;

void AdamTrainer::update() {
  grow(model_, m_);
  grow(model_, v_);
  ++step_;
  const reference::AdamConfig cfg{lr_, beta1_, beta2_, eps_, 0.0};
  for_each_update(
      model_, [&](std::size_t slot, std::int64_t n, float* w, const float* g, std::size_t offset) {
        reference::adam_update<float>(cfg, step_, n, w, g, m_[slot].data() + offset,
                                      v_[slot].data() + offset);
      });
  model_.zero_gradients();
}

}  // namespace prnn::graph
