// Trainers over a Model's fp32 parameters: the update rules are the reference ones
// (reference::sgd_update / adam_update, PyTorch semantics). Dense parameters are updated whole;
// lookup tables only on the rows backward touched since the last update (sparse updates, the
// default), with optimizer state kept per row, or whole (Trainer::set_sparse_updates(false)). On a
// Model that is on the device the same rules run as kernels (graph/gpu_kernels.h: sgd_update;
// train/optim.h: adam_update_consuming) over the device copies, with the optimizer state in
// device buffers taken over from the host state at the first device update.
#include <algorithm>

#include "core/check.h"
#include "graph/device_model.h"
#include "graph/model_storage.h"
#include "prnn/graph.h"
#include "prnn/tensor.h"
#include "reference/dense.h"

#if PRNN_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "graph/gpu_kernels.h"
#include "train/optim.h"
#endif

namespace prnn::graph {
namespace {

// Calls f(n, w, g, offset) on every dense parameter and every touched lookup row (every lookup
// table whole when !sparse); `slot` indexes the optimizer state vectors (dense parameters
// first, then lookup tables).
template <class F>
void for_each_update(Model& model, bool sparse, F&& f) {
  auto& s = model.storage();
  std::size_t slot = 0;
  for (auto& p : s.params)
    f(slot++, static_cast<std::int64_t>(p.value.size()), p.value.data(), p.grad.data(),
      std::size_t{0});
  for (auto& t : s.tables) {
    const auto row = static_cast<std::size_t>(t.dim.size());
    if (!sparse) {
      f(slot++, static_cast<std::int64_t>(t.value.size()), t.value.data(), t.grad.data(),
        std::size_t{0});
      continue;
    }
    for (std::size_t r = 0; r < t.touched.size(); ++r)
      if (t.touched[r])
        f(slot, t.dim.size(), t.value.data() + r * row, t.grad.data() + r * row, r * row);
    ++slot;
  }
}

// Parameters added to the model after the trainer was made get zero state; the others keep
// theirs (nothing is allocated when the model did not grow: this runs every update).
void grow(Model& model, std::vector<std::vector<float>>& state) {
  const auto& s = model.storage();
  const std::size_t params = s.params.size(), slots = params + s.tables.size();
  for (std::size_t i = state.size(); i < slots; ++i)
    state.emplace_back(i < params ? s.params[i].value.size() : s.tables[i - params].value.size(),
                       0.0f);
}

std::vector<std::vector<float>> zero_state(Model& model) {
  std::vector<std::vector<float>> state;
  grow(model, state);
  return state;
}

#if PRNN_WITH_CUDA
// Device buffers for the host state slots not on the device yet, filled from the host state.
void upload_state(const std::vector<std::vector<float>>& host, std::vector<DeviceBuffer>& dev) {
  for (std::size_t i = dev.size(); i < host.size(); ++i) {
    DeviceBuffer b(host[i].size() * sizeof(float));
    b.copy_from_host(host[i].data(), host[i].size() * sizeof(float));
    dev.push_back(std::move(b));
  }
}

// Calls f(n, row, touched, w, g, slot) once per dense parameter (row 0, touched null) and once
// per lookup table (over the whole table; the kernel updates touched rows only, or every row
// when !sparse: touched null, the untouched rows' gradients being zero), then clears the touched
// flags (the kernels zero the gradients they consumed). Marks the host copy stale.
template <class F>
void for_each_device_update(Model& model, bool sparse, F&& f) {
  DeviceMirror& d = device_mirror(model);
  std::size_t slot = 0;
  for (auto& p : d.params)
    f(static_cast<std::int64_t>(p.n), std::int64_t{0}, nullptr, p.value.data_as<float>(),
      p.grad.data_as<float>(), slot++);
  for (auto& t : d.tables)
    f(t.rows * static_cast<std::int64_t>(t.row), sparse ? static_cast<std::int64_t>(t.row) : 0,
      sparse ? t.touched.data_as<const std::uint8_t>() : nullptr, t.value.data_as<float>(),
      t.grad.data_as<float>(), slot++);
  for (auto& t : d.tables)
    if (t.touched.bytes() > 0)
      PRNN_CUDA_CHECK(cudaMemsetAsync(t.touched.data(), 0, t.touched.bytes(), nullptr));
  model.storage().host_stale = true;
}
#endif

}  // namespace

struct Trainer::DeviceState {
  std::vector<DeviceBuffer> first, second;  // per slot: SGD velocity; Adam m and v
};

SimpleSgdTrainer::SimpleSgdTrainer(Model& model, double lr, double momentum, double weight_decay)
    : model_(model),
      lr_(lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      velocity_(zero_state(model)) {}
SimpleSgdTrainer::~SimpleSgdTrainer() = default;

void SimpleSgdTrainer::update() {
  grow(model_, velocity_);
  if (model_.on_device()) {
    update_on_device();
    return;
  }
  const reference::SgdConfig cfg{lr_, momentum_, weight_decay_, false};
  for_each_update(
      model_, sparse_updates_,
      [&](std::size_t slot, std::int64_t n, float* w, const float* g, std::size_t offset) {
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
  if (model_.on_device()) {
    update_on_device();
    return;
  }
  const reference::AdamConfig cfg{lr_, beta1_, beta2_, eps_, 0.0};
  for_each_update(
      model_, sparse_updates_,
      [&](std::size_t slot, std::int64_t n, float* w, const float* g, std::size_t offset) {
        reference::adam_update<float>(cfg, step_, n, w, g, m_[slot].data() + offset,
                                      v_[slot].data() + offset);
      });
  model_.zero_gradients();
}

// ---- Device updates ------------------------------------------------------------------------

void SimpleSgdTrainer::update_on_device() {
#if PRNN_WITH_CUDA
  PRNN_EXPECT(lr_ >= 0.0 && momentum_ >= 0.0 && weight_decay_ >= 0.0,
              "SimpleSgdTrainer: lr, momentum and weight_decay must be >= 0, got {}, {}, {}", lr_,
              momentum_, weight_decay_);
  if (!device_) device_ = std::make_unique<DeviceState>();
  upload_state(velocity_, device_->first);
  gpu::SgdScalars s;
  s.lr = static_cast<float>(lr_);
  s.momentum = static_cast<float>(momentum_);
  s.weight_decay = static_cast<float>(weight_decay_);
  s.use_momentum = momentum_ != 0.0;
  for_each_device_update(model_, sparse_updates_,
                         [&](std::int64_t n, std::int64_t row, const std::uint8_t* touched,
                             float* w, float* g, std::size_t slot) {
                           gpu::sgd_update(s, n, row, touched, w, g,
                                           device_->first[slot].data_as<float>(), nullptr);
                         });
#endif
}

void AdamTrainer::update_on_device() {
#if PRNN_WITH_CUDA
  PRNN_EXPECT(
      lr_ >= 0.0 && eps_ >= 0.0 && beta1_ >= 0.0 && beta1_ < 1.0 && beta2_ >= 0.0 && beta2_ < 1.0,
      "AdamTrainer: expected lr, eps >= 0 and betas in [0, 1), got lr {}, eps {}, betas {} "
      "and {}",
      lr_, eps_, beta1_, beta2_);
  if (!device_) device_ = std::make_unique<DeviceState>();
  upload_state(m_, device_->first);
  upload_state(v_, device_->second);
  const train::AdamScalars s =
      train::adam_scalars(lr_, beta1_, beta2_, eps_, /*weight_decay=*/0.0, step_);
  for_each_device_update(model_, sparse_updates_,
                         [&](std::int64_t n, std::int64_t row, const std::uint8_t* touched,
                             float* w, float* g, std::size_t slot) {
                           train::adam_update_consuming(s, n, w, g,
                                                        device_->first[slot].data_as<float>(),
                                                        device_->second[slot].data_as<float>(),
                                                        train::AdamRows{row, touched}, nullptr);
                         });
#endif
}

}  // namespace prnn::graph
