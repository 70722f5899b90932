// CPU reference of the dense layer, softmax cross-entropy and the SGD / Adam updates (contracts in
// dense.h; PyTorch semantics: torch.nn.Linear, F.cross_entropy(reduction='mean'), torch.optim.SGD
// with dampening 0, torch.optim.Adam with amsgrad off). Plain loops over rows and columns.
#include "reference/dense.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/check.h"

namespace prnn::reference {
namespace {

using std::size_t;

void check_size(const char* fn, const char* name, std::int64_t v) {
  PRNN_EXPECT(v >= 1, "{}: {}: expected >= 1, got {}", fn, name, v);
}

void check_pointer(const char* fn, const char* name, const void* p) {
  PRNN_EXPECT(p != nullptr, "{}: {}: expected a non-null pointer, got null", fn, name);
}

}  // namespace

template <class T>
void matmul(std::int64_t M, std::int64_t N, std::int64_t K, bool b_transposed, const T* A,
            std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
  constexpr const char* fn = "matmul";
  check_size(fn, "M", M);
  check_size(fn, "N", N);
  check_size(fn, "K", K);
  check_pointer(fn, "A", A);
  check_pointer(fn, "B", B);
  check_pointer(fn, "C", C);
  PRNN_EXPECT(lda >= K && ldb >= (b_transposed ? K : N) && ldc >= N,
              "{}: row strides lda {}, ldb {}, ldc {} too short for M {}, N {}, K {}", fn, lda,
              ldb, ldc, M, N, K);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      T sum = 0;
      for (std::int64_t k = 0; k < K; ++k)
        sum += A[m * lda + k] * (b_transposed ? B[n * ldb + k] : B[k * ldb + n]);
      T& c = C[m * ldc + n];
      c = beta == T(0) ? sum : sum + beta * c;
    }
}

template <class T>
void dense_forward(std::int64_t n, std::int64_t in, std::int64_t out, const T* x, const T* w,
                   const T* b, T* y) {
  constexpr const char* fn = "dense_forward";
  check_size(fn, "n", n);
  check_size(fn, "in", in);
  check_size(fn, "out", out);
  check_pointer(fn, "x", x);
  check_pointer(fn, "w", w);
  check_pointer(fn, "b", b);
  check_pointer(fn, "y", y);
  const auto N = static_cast<size_t>(n), I = static_cast<size_t>(in), O = static_cast<size_t>(out);
  for (size_t r = 0; r < N; ++r)
    for (size_t o = 0; o < O; ++o) {
      T acc = b[o];
      for (size_t i = 0; i < I; ++i) acc += x[r * I + i] * w[o * I + i];
      y[r * O + o] = acc;
    }
}

template <class T>
void dense_backward(std::int64_t n, std::int64_t in, std::int64_t out, const T* x, const T* w,
                    const T* dy, T* dx, T* dw, T* db) {
  constexpr const char* fn = "dense_backward";
  check_size(fn, "n", n);
  check_size(fn, "in", in);
  check_size(fn, "out", out);
  check_pointer(fn, "x", x);
  check_pointer(fn, "w", w);
  check_pointer(fn, "dy", dy);
  const auto N = static_cast<size_t>(n), I = static_cast<size_t>(in), O = static_cast<size_t>(out);
  if (dx)  // dx [N, in] = dy · W
    for (size_t r = 0; r < N; ++r)
      for (size_t i = 0; i < I; ++i) {
        T acc = T(0);
        for (size_t o = 0; o < O; ++o) acc += dy[r * O + o] * w[o * I + i];
        dx[r * I + i] = acc;
      }
  if (dw)  // dW [out, in] = dyᵀ · x
    for (size_t o = 0; o < O; ++o)
      for (size_t i = 0; i < I; ++i) {
        T acc = T(0);
        for (size_t r = 0; r < N; ++r) acc += dy[r * O + o] * x[r * I + i];
        dw[o * I + i] = acc;
      }
  if (db)  // db [out] = Σ_n dy
    for (size_t o = 0; o < O; ++o) {
      T acc = T(0);
      for (size_t r = 0; r < N; ++r) acc += dy[r * O + o];
      db[o] = acc;
    }
}

template <class T>
T softmax_cross_entropy(std::int64_t n, std::int64_t classes, const T* logits,
                        const std::int32_t* labels, T* dlogits) {
  constexpr const char* fn = "softmax_cross_entropy";
  check_size(fn, "n", n);
  check_size(fn, "classes", classes);
  check_pointer(fn, "logits", logits);
  check_pointer(fn, "labels", labels);
  const auto N = static_cast<size_t>(n), K = static_cast<size_t>(classes);
  for (size_t r = 0; r < N; ++r)  // all labels checked before anything is written
    PRNN_EXPECT(labels[r] >= 0 && labels[r] < classes,
                "{}: labels[{}]: expected a class in [0, {}), got {}", fn, r, classes, labels[r]);

  T loss = T(0);
  for (size_t r = 0; r < N; ++r) {
    const T* row = logits + r * K;
    const T max = *std::max_element(row, row + K);  // softmax(l) = softmax(l - max): no overflow
    T sum = T(0);
    for (size_t k = 0; k < K; ++k) sum += std::exp(row[k] - max);
    const T log_sum = std::log(sum);
    const auto label = static_cast<size_t>(labels[r]);
    loss += log_sum - (row[label] - max);  // -log softmax(l)[label]
    if (dlogits)
      for (size_t k = 0; k < K; ++k) {
        const T p = std::exp(row[k] - max - log_sum);
        dlogits[r * K + k] = (p - (k == label ? T(1) : T(0))) / static_cast<T>(N);
      }
  }
  return loss / static_cast<T>(N);
}

template <class T>
void sgd_update(const SgdConfig& cfg, std::int64_t n, T* w, const T* g, T* velocity) {
  constexpr const char* fn = "sgd_update";
  check_size(fn, "n", n);
  check_pointer(fn, "w", w);
  check_pointer(fn, "g", g);
  PRNN_EXPECT(cfg.lr >= 0.0, "{}: lr: expected >= 0, got {}", fn, cfg.lr);
  PRNN_EXPECT(cfg.momentum >= 0.0, "{}: momentum: expected >= 0, got {}", fn, cfg.momentum);
  PRNN_EXPECT(cfg.weight_decay >= 0.0, "{}: weight_decay: expected >= 0, got {}", fn,
              cfg.weight_decay);
  PRNN_EXPECT(!cfg.nesterov || cfg.momentum > 0.0,
              "{}: nesterov: expected momentum > 0, got momentum {}", fn, cfg.momentum);
  PRNN_EXPECT(
      cfg.momentum == 0.0 || velocity != nullptr,
      "{}: velocity: expected a non-null pointer when momentum != 0, got null (momentum {})", fn,
      cfg.momentum);
  const auto lr = static_cast<T>(cfg.lr), mu = static_cast<T>(cfg.momentum),
             wd = static_cast<T>(cfg.weight_decay);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const T gd = g[i] + wd * w[i];  // g'
    if (cfg.momentum == 0.0) {
      w[i] -= lr * gd;  // v = g', so w -= lr·v; velocity (if given) is left alone as in PyTorch
      continue;
    }
    velocity[i] = mu * velocity[i] + gd;
    w[i] -= lr * (cfg.nesterov ? gd + mu * velocity[i] : velocity[i]);
  }
}

template <class T>
void adam_update(const AdamConfig& cfg, std::int64_t step, std::int64_t n, T* w, const T* g, T* m,
                 T* v) {
  constexpr const char* fn = "adam_update";
  check_size(fn, "step", step);
  check_size(fn, "n", n);
  check_pointer(fn, "w", w);
  check_pointer(fn, "g", g);
  check_pointer(fn, "m", m);
  check_pointer(fn, "v", v);
  PRNN_EXPECT(cfg.lr >= 0.0, "{}: lr: expected >= 0, got {}", fn, cfg.lr);
  PRNN_EXPECT(cfg.eps >= 0.0, "{}: eps: expected >= 0, got {}", fn, cfg.eps);
  PRNN_EXPECT(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0, "{}: beta1: expected in [0, 1), got {}", fn,
              cfg.beta1);
  PRNN_EXPECT(cfg.beta2 >= 0.0 && cfg.beta2 < 1.0, "{}: beta2: expected in [0, 1), got {}", fn,
              cfg.beta2);
  PRNN_EXPECT(cfg.weight_decay >= 0.0, "{}: weight_decay: expected >= 0, got {}", fn,
              cfg.weight_decay);
  // Scalars in double, then cast, as PyTorch computes them on the host: 1 - β2 in float would
  // be off by 4e-5 relative for β2 = 0.999.
  const double t = static_cast<double>(step);
  const auto bias1 = static_cast<T>(1.0 - std::pow(cfg.beta1, t));
  const auto bias2 = static_cast<T>(1.0 - std::pow(cfg.beta2, t));
  const auto lr = static_cast<T>(cfg.lr), eps = static_cast<T>(cfg.eps),
             b1 = static_cast<T>(cfg.beta1), b2 = static_cast<T>(cfg.beta2),
             one_minus_b1 = static_cast<T>(1.0 - cfg.beta1),
             one_minus_b2 = static_cast<T>(1.0 - cfg.beta2), wd = static_cast<T>(cfg.weight_decay);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const T gd = g[i] + wd * w[i];  // g'
    m[i] = b1 * m[i] + one_minus_b1 * gd;
    v[i] = b2 * v[i] + one_minus_b2 * gd * gd;
    w[i] -= lr * (m[i] / bias1) / (std::sqrt(v[i] / bias2) + eps);
  }
}

template void matmul<float>(std::int64_t, std::int64_t, std::int64_t, bool, const float*,
                            std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);
template void matmul<double>(std::int64_t, std::int64_t, std::int64_t, bool, const double*,
                             std::int64_t, const double*, std::int64_t, double, double*,
                             std::int64_t);
template void dense_forward<float>(std::int64_t, std::int64_t, std::int64_t, const float*,
                                   const float*, const float*, float*);
template void dense_forward<double>(std::int64_t, std::int64_t, std::int64_t, const double*,
                                    const double*, const double*, double*);
template void dense_backward<float>(std::int64_t, std::int64_t, std::int64_t, const float*,
                                    const float*, const float*, float*, float*, float*);
template void dense_backward<double>(std::int64_t, std::int64_t, std::int64_t, const double*,
                                     const double*, const double*, double*, double*, double*);
template float softmax_cross_entropy<float>(std::int64_t, std::int64_t, const float*,
                                            const std::int32_t*, float*);
template double softmax_cross_entropy<double>(std::int64_t, std::int64_t, const double*,
                                              const std::int32_t*, double*);
template void sgd_update<float>(const SgdConfig&, std::int64_t, float*, const float*, float*);
template void sgd_update<double>(const SgdConfig&, std::int64_t, double*, const double*, double*);
template void adam_update<float>(const AdamConfig&, std::int64_t, std::int64_t, float*,
                                 const float*, float*, float*);
template void adam_update<double>(const AdamConfig&, std::int64_t, std::int64_t, double*,
                                  const double*, double*, double*);

}  // namespace prnn::reference
