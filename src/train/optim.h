// Device optimizer updates for the trainers (fp32). The math is reference::adam_update's
// (src/reference/dense.h, PyTorch's torch.optim.Adam), element for element:
//   g' = g + wd·w;  m = β1·m + (1-β1)·g';  v = β2·v + (1-β2)·g'²;
//   w -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + ε)
// with the scalars computed in double on the host and rounded to float, as the reference does.
// No fmt here: this header is included by optim.cu (argument checks live in the .cpp callers).
#pragma once

#include <cmath>
#include <cstdint>

#include "prnn/stream.h"

namespace prnn::train {

// The per-step scalars of one Adam update (POD, passed to the kernel by value).
struct AdamScalars {
  float lr = 0.0f;
  float beta1 = 0.0f, beta2 = 0.0f;
  float one_minus_beta1 = 0.0f, one_minus_beta2 = 0.0f;
  float bias1 = 1.0f, bias2 = 1.0f;  // 1 - β1^t, 1 - β2^t
  float eps = 0.0f;
  float weight_decay = 0.0f;
};

// step >= 1 (the t of the bias corrections).
inline AdamScalars adam_scalars(double lr, double beta1, double beta2, double eps,
                                double weight_decay, std::int64_t step) {
  const double t = static_cast<double>(step);
  AdamScalars s;
  s.lr = static_cast<float>(lr);
  s.beta1 = static_cast<float>(beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.bias1 = static_cast<float>(1.0 - std::pow(beta1, t));
  s.bias2 = static_cast<float>(1.0 - std::pow(beta2, t));
  s.eps = static_cast<float>(eps);
  s.weight_decay = static_cast<float>(weight_decay);
  return s;
}

// w, m, v updated in place from g; all [n] fp32 device arrays. n >= 0; asynchronous on `stream`.
void adam_update(const AdamScalars& s, std::int64_t n, float* w, const float* g, float* m,
                 float* v, cudaStream_t stream);

// The same update restricted to the rows a sparse consumer touched, consuming the gradient (the
// graph trainers' lookup tables and parameters): element i is updated only when touched is null
// or touched[i / row] != 0 (rows of `row` elements), and its g[i] is then set to 0.
struct AdamRows {
  std::int64_t row = 0;                  // >= 1 when touched is given
  const std::uint8_t* touched = nullptr;  // [n / row] device flags, or null: every element
};
void adam_update_consuming(const AdamScalars& s, std::int64_t n, float* w, float* g, float* m,
                           float* v, const AdamRows& rows, cudaStream_t stream);

// The squared L2 norm of g [n] (device), summed in double: each of kNormPartials CTAs sums a
// fixed grid-stride share of the elements and reduces it in a fixed tree, and the host adds the
// partials in order, so the result does not depend on timing. partials: [kNormPartials] device
// doubles of scratch. Synchronizes `stream`. n >= 0.
inline constexpr int kNormPartials = 128;
double squared_norm(std::int64_t n, const float* g, double* partials, cudaStream_t stream);

// g[i] *= factor for i < n (device; each product rounded as the host's float multiply).
// Asynchronous on `stream`.
void scale(std::int64_t n, float* g, float factor, cudaStream_t stream);

}  // namespace prnn::train
