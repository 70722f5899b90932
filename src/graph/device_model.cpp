// The device copies of a Model (graph/device_model.h) and the Model members that move values
// between the copies. Plain cudaMemcpy: these run once per model or on explicit request.
#include "graph/device_model.h"

#include <algorithm>

#include "core/check.h"
#include "prnn/device.h"
#include "prnn/error.h"

#if PRNN_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#endif

namespace prnn::graph {
namespace {

#if PRNN_WITH_CUDA
constexpr std::size_t kFloat = sizeof(float);

void upload(const std::vector<float>& host, DeviceBuffer& dev) {
  PRNN_ASSERT(dev.bytes() >= host.size() * kFloat);
  if (!host.empty())
    PRNN_CUDA_CHECK(
        cudaMemcpy(dev.data(), host.data(), host.size() * kFloat, cudaMemcpyHostToDevice));
}

void download(const DeviceBuffer& dev, std::vector<float>& host) {
  PRNN_ASSERT(dev.bytes() >= host.size() * kFloat);
  if (!host.empty())
    PRNN_CUDA_CHECK(
        cudaMemcpy(host.data(), dev.data(), host.size() * kFloat, cudaMemcpyDeviceToHost));
}

// Copies host state of parameters [params.size(), ...) and tables likewise into new buffers.
void grow(Model::Storage& s, DeviceMirror& d) {
  for (std::size_t i = d.params.size(); i < s.params.size(); ++i) {
    const DenseParameter& p = s.params[i];
    DeviceMirror::Dense m;
    m.n = p.value.size();
    m.value = DeviceBuffer(m.n * kFloat);
    m.grad = DeviceBuffer(m.n * kFloat);
    upload(p.value, m.value);
    upload(p.grad, m.grad);
    d.params.push_back(std::move(m));
  }
  for (std::size_t i = d.tables.size(); i < s.tables.size(); ++i) {
    const LookupTable& t = s.tables[i];
    DeviceMirror::Table m;
    m.rows = t.size;
    m.row = static_cast<std::size_t>(t.dim.size());
    m.value = DeviceBuffer(t.value.size() * kFloat);
    m.grad = DeviceBuffer(t.grad.size() * kFloat);
    m.touched = DeviceBuffer(static_cast<std::size_t>(t.size));
    upload(t.value, m.value);
    upload(t.grad, m.grad);
    std::vector<unsigned char> flags(t.touched.begin(), t.touched.end());
    if (!flags.empty())
      PRNN_CUDA_CHECK(
          cudaMemcpy(m.touched.data(), flags.data(), flags.size(), cudaMemcpyHostToDevice));
    d.tables.push_back(std::move(m));
  }
}
#endif

}  // namespace

DeviceMirror& device_mirror(Model& m) {
  Model::Storage& s = m.storage();
#if PRNN_WITH_CUDA
  if (!s.device) {
    if (device_count() == 0) throw Unsupported("Model on the GPU", "no GPU: " + no_device_reason());
    s.device = std::make_shared<DeviceMirror>();
  }
  if (s.device->params.size() < s.params.size() || s.device->tables.size() < s.tables.size())
    grow(s, *s.device);
  return *s.device;
#else
  (void)s;
  throw Unsupported("Model on the GPU", "prnn was built without CUDA (PRNN_CUDA=OFF)");
#endif
}

void check_host_copy_current(const Graph& g, NodeId last, const char* who) {
  const auto n = static_cast<std::size_t>(last) + 1;
  const Model* checked = nullptr;  // the usual case: one model, checked once
  for (std::size_t id = 0; id < n && id < g.size(); ++id) {
    const Node& node = g.nodes()[id];
    const Model* m = node.op == Op::Parameter ? node.param.model()
                     : node.op == Op::Lookup  ? node.lookup.model()
                                              : nullptr;
    if (m == nullptr || m == checked) continue;
    PRNN_EXPECT(!m->storage().host_stale,
                "{}: node {} reads a Model whose parameters changed on the GPU (device backward or "
                "update); call Model::copy_to_host() before computing with it on the host",
                who, id);
    checked = m;
  }
}

void push_host_gradients(const Graph& g, NodeId last) {
  const auto n = static_cast<std::size_t>(last) + 1;
  std::vector<Model*> done;  // usually one model
  for (std::size_t id = 0; id < n && id < g.size(); ++id) {
    const Node& node = g.nodes()[id];
    Model* m = node.op == Op::Parameter ? node.param.model()
               : node.op == Op::Lookup  ? node.lookup.model()
                                        : nullptr;
    if (m == nullptr || std::find(done.begin(), done.end(), m) != done.end()) continue;
    done.push_back(m);
    if (!m->on_device()) continue;
#if PRNN_WITH_CUDA
    Model::Storage& s = m->storage();
    DeviceMirror& d = device_mirror(*m);  // copies parameters added since, gradients included
    for (std::size_t i = 0; i < d.params.size(); ++i) upload(s.params[i].grad, d.params[i].grad);
    for (std::size_t i = 0; i < d.tables.size(); ++i) {
      const LookupTable& t = s.tables[i];
      upload(t.grad, d.tables[i].grad);
      const std::vector<unsigned char> flags(t.touched.begin(), t.touched.end());
      if (!flags.empty())
        PRNN_CUDA_CHECK(cudaMemcpy(d.tables[i].touched.data(), flags.data(), flags.size(),
                                   cudaMemcpyHostToDevice));
    }
#endif
  }
}

bool Model::on_device() const {
  return storage_->device != nullptr;
}

void Model::copy_to_host() {
  copy_device_to_host(*storage_);
}

void copy_device_to_host(Model::Storage& s) {
#if PRNN_WITH_CUDA
  if (!s.device) return;
  DeviceMirror& d = *s.device;
  for (std::size_t i = 0; i < d.params.size(); ++i) {
    download(d.params[i].value, s.params[i].value);
    download(d.params[i].grad, s.params[i].grad);
  }
  for (std::size_t i = 0; i < d.tables.size(); ++i) {
    LookupTable& t = s.tables[i];
    download(d.tables[i].value, t.value);
    download(d.tables[i].grad, t.grad);
    std::vector<unsigned char> flags(t.touched.size());
    if (!flags.empty())
      PRNN_CUDA_CHECK(cudaMemcpy(flags.data(), d.tables[i].touched.data(), flags.size(),
                                 cudaMemcpyDeviceToHost));
    std::transform(flags.begin(), flags.end(), t.touched.begin(),
                   [](unsigned char f) { return f != 0; });
  }
  s.host_stale = false;
#else
  (void)s;
#endif
}

void Model::copy_to_device() {
#if PRNN_WITH_CUDA
  Storage& s = *storage_;
  if (!s.device) return;
  DeviceMirror& d = device_mirror(*this);
  for (std::size_t i = 0; i < d.params.size(); ++i) upload(s.params[i].value, d.params[i].value);
  for (std::size_t i = 0; i < d.tables.size(); ++i) upload(s.tables[i].value, d.tables[i].value);
#endif
}

void zero_device_gradients(Model::Storage& s) {
#if PRNN_WITH_CUDA
  if (!s.device) return;
  for (auto& p : s.device->params)
    if (p.grad.bytes() > 0) PRNN_CUDA_CHECK(cudaMemset(p.grad.data(), 0, p.grad.bytes()));
  for (auto& t : s.device->tables) {
    if (t.grad.bytes() > 0) PRNN_CUDA_CHECK(cudaMemset(t.grad.data(), 0, t.grad.bytes()));
    if (t.touched.bytes() > 0) PRNN_CUDA_CHECK(cudaMemset(t.touched.data(), 0, t.touched.bytes()));
  }
#else
  (void)s;
#endif
}

}  // namespace prnn::graph
