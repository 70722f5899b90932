// Example: one GILR-LSTM layer, forward and backward, through the public API.
// Runs on the GPU when there is one (device tensors), on the CPU reference otherwise; prints the
// loss L = Σ y² / 2 and the gradient norm, which agree between the two backends.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "prnn/prnn.h"
#include "prnn/scan.h"

int main() {
  using namespace prnn;
  constexpr std::int64_t T = 64, B = 2, I = 8, H = 16;
  const LinearLayerDesc desc{LinearLayerKind::GilrLstm, I, H, 1};
  const bool gpu = device_count() > 0;
  const Device dev = gpu ? Device::cuda(0) : Device::host();

  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> x(T * B * I), params(static_cast<std::size_t>(desc.param_count()));
  for (auto& v : x) v = u(gen);
  for (auto& v : params) v = u(gen);
  std::vector<float> y(T * B * H), dx(x.size()), dparams(params.size());

  try {
    LinearLayer layer(desc, T, B, DType::F32, dev);
    // Host vectors are used directly on the CPU; on the GPU they are copied to device buffers.
    DeviceBuffer dx_buf, dp_buf, x_buf, p_buf, y_buf, dy_buf;
    auto view = [&](std::vector<float>& v, DeviceBuffer& buf, Shape shape) {
      if (!gpu) return TensorView::of(v.data(), shape);
      buf = DeviceBuffer(v.size() * sizeof(float));
      buf.copy_from_host(v.data(), v.size() * sizeof(float));
      return buf.view(DType::F32, shape);
    };
    const TensorView tx = view(x, x_buf, {T, B, I}), tp = view(params, p_buf, {desc.param_count()});
    const TensorView ty = view(y, y_buf, {T, B, H});
    layer.forward(tx, tp, {}, ty, {});
    if (gpu) y_buf.copy_to_host(y.data(), y.size() * sizeof(float));

    double loss = 0.0;
    for (float v : y) loss += 0.5 * v * v;
    std::vector<float> dy = y;  // dL/dy = y
    const TensorView tdy = view(dy, dy_buf, {T, B, H});
    const TensorView tdx = view(dx, dx_buf, {T, B, I});
    const TensorView tdp = view(dparams, dp_buf, {desc.param_count()});
    layer.backward(tx, tp, {}, tdy, {}, tdx, tdp, {});
    if (gpu) dp_buf.copy_to_host(dparams.data(), dparams.size() * sizeof(float));

    double norm = 0.0;
    for (float g : dparams) norm += double(g) * g;
    std::printf("%s: GILR-LSTM %lldx%lld, T=%lld B=%lld: loss %.6f, |dL/dparams| %.6f\n",
                gpu ? "gpu" : "cpu reference", static_cast<long long>(I),
                static_cast<long long>(H), static_cast<long long>(T), static_cast<long long>(B),
                loss, std::sqrt(norm));
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
