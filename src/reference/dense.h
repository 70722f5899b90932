// CPU reference: dense (fully connected) layer, softmax cross-entropy, and the SGD / Adam updates
// the trainers use. PyTorch semantics throughout.
//
//   dense:   y [N, out] = x [N, in] · Wᵀ + b,  W [out, in], b [out]
//   matmul:  C [M, N] = A [M, K] · op(B) + beta·C, row-major with row strides lda, ldb, ldc;
//            op(B) = Bᵀ for B [N, K] (b_transposed), else B [K, N]; beta = 0 never reads C
//   softmax_cross_entropy: logits [N, K], labels [N] in [0, K); returns the mean over N of
//            -log softmax(logits_n)[label_n]; dlogits = (softmax - onehot) / N (nullable)
//   sgd:     g' = g + wd·w;  v = μ·v + g';  w -= lr·(nesterov ? g' + μ·v : v)
//   adam:    g' = g + wd·w;  m = β1·m + (1-β1)·g';  v = β2·v + (1-β2)·g'²;
//            w -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + ε),  t = step >= 1
#pragma once

#include <cstdint>

namespace prnn::reference {

template <class T>
void matmul(std::int64_t M, std::int64_t N, std::int64_t K, bool b_transposed, const T* A,
            std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc);

template <class T>
void dense_forward(std::int64_t n, std::int64_t in, std::int64_t out, const T* x, const T* w,
                   const T* b, T* y);

// dx, dw, db nullable; overwritten.
template <class T>
void dense_backward(std::int64_t n, std::int64_t in, std::int64_t out, const T* x, const T* w,
                    const T* dy, T* dx, T* dw, T* db);

template <class T>
T softmax_cross_entropy(std::int64_t n, std::int64_t classes, const T* logits,
                        const std::int32_t* labels, T* dlogits);

struct SgdConfig {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// velocity may be null only when momentum == 0.
template <class T>
void sgd_update(const SgdConfig& cfg, std::int64_t n, T* w, const T* g, T* velocity);

struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

template <class T>
void adam_update(const AdamConfig& cfg, std::int64_t step, std::int64_t n, T* w, const T* g, T* m,
                 T* v);

}  // namespace prnn::reference
