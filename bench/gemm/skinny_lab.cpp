// Skinny GEMM lab (bench/gemm/NOTES.md): the GEMMs of few rows a persistent RNN call makes,
// through the library's dispatch (rows_gemm, src/gemm/skinny_gemm.h), timed for
//   cublas_fp32  cuBLAS with PEDANTIC math (SkinnyChoice::Never on an fp32 handle),
//   cublas_tf32  cuBLAS with TF32 tensor-op math,
//   skinny       the skinny kernel (SkinnyChoice::Always).
// Shapes: C[M, N] = A[M, K] · op(B), the input projection (B = W_ih [N, K], "bt") and d(in) /
// dh0 (B = W [K, N], "bn") of ReLU H = 1152 and LSTM H = 1024, M = T·B rows.
// Each time: a CUDA graph of 20 launches, replayed 7 times after one warm-up; the median per
// launch. Inputs uniform in [-1, 1). Also prints max |skinny - cublas_fp32| / max |cublas_fp32|.
// Usage: prnn_skinny_lab [out.csv]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_timer.h"
#include "core/cublas.h"
#include "core/cuda_check.h"
#include "gemm/skinny_gemm.h"
#include "gemm/skinny_kernel.h"
#include "prnn/tensor.h"

namespace {

using prnn::CublasHandle;
using prnn::DeviceBuffer;
using prnn::GemmMath;
using prnn::SkinnyChoice;

DeviceBuffer random_buffer(std::int64_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> h(static_cast<std::size_t>(n));
  for (float& v : h) v = d(gen);
  DeviceBuffer b(h.size() * sizeof(float));
  b.copy_from_host(h.data(), h.size() * sizeof(float));
  return b;
}

std::vector<float> download(const DeviceBuffer& b) {
  std::vector<float> h(b.bytes() / sizeof(float));
  b.copy_to_host(h.data(), b.bytes());
  return h;
}

struct Shape {
  const char* what;
  std::int64_t M, N, K;
  bool bt;
};

}  // namespace

int main(int argc, char** argv) {
  FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  if (out == nullptr) return 1;
  cudaDeviceProp prop{};
  PRNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(out, "# cmd: prnn_skinny_lab\n# gpu: %s\n", prop.name);
  // Resident clusters of each size, per instantiation (what the split is chosen from).
  for (int rows : {8, 16, 64})
    for (bool bt : {true, false}) {
      std::fprintf(out, "# clusters resident, %d-row tiles, %s:", rows, bt ? "bt" : "bn");
      for (int s = 1; s <= prnn::kSkinnyMaxSplit; ++s) {
        int clusters = -1;
        const cudaError_t e = prnn::skinny_max_active_clusters(rows, bt, s, &clusters);
        std::fprintf(out, " %d:%d%s", s, clusters, e == cudaSuccess ? "" : cudaGetErrorString(e));
      }
      std::fprintf(out, "\n");
    }
  std::fprintf(out, "gpu,what,M,N,K,layout,split,ctas,impl,us,max_rel_diff_vs_cublas_fp32\n");
  std::vector<Shape> shapes;
  for (std::int64_t M : {4, 16, 32, 64, 128, 256, 1024}) {
    shapes.push_back({"relu1152_input", M, 1152, 1152, true});
    shapes.push_back({"relu1152_din", M, 1152, 1152, false});
  }
  for (std::int64_t M : {4, 16, 64, 256}) {
    shapes.push_back({"lstm1024_input", M, 4096, 1024, true});
    shapes.push_back({"lstm1024_din", M, 1024, 4096, false});
  }
  cudaStream_t stream = nullptr;
  PRNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CublasHandle fp32(GemmMath::Fp32, stream), tf32(GemmMath::Tf32, stream);
  fp32.own_workspace(0);
  tf32.own_workspace(0);
  fp32.bind(stream);
  tf32.bind(stream);
  std::mt19937 gen(1234);
  for (const Shape& s : shapes) {
    DeviceBuffer A = random_buffer(s.M * s.K, gen), B = random_buffer(s.N * s.K, gen);
    DeviceBuffer C(static_cast<std::size_t>(s.M * s.N) * sizeof(float));
    const std::int64_t ldb = s.bt ? s.K : s.N;
    auto run = [&](CublasHandle& h, SkinnyChoice choice) {
      prnn::rows_gemm(h, choice, s.bt, s.M, s.N, s.K, A.data_as<const float>(), s.K,
                      B.data_as<const float>(), ldb, 0.0f, C.data_as<float>(), s.N);
    };
    run(fp32, SkinnyChoice::Never);
    PRNN_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> want = download(C);
    run(fp32, SkinnyChoice::Always);
    PRNN_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> got = download(C);
    double diff = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    }
    const struct {
      const char* impl;
      CublasHandle* h;
      SkinnyChoice choice;
    } impls[] = {{"cublas_fp32", &fp32, SkinnyChoice::Never},
                 {"cublas_tf32", &tf32, SkinnyChoice::Never},
                 {"skinny", &fp32, SkinnyChoice::Always}};
    const prnn::SkinnyPlan plan = prnn::skinny_plan(
        {s.M, s.N, s.K, s.bt, A.data_as<const float>(), s.K, B.data_as<const float>(), ldb, 0.0f,
         C.data_as<float>(), s.N},
        0);
    const prnn::SkinnyGemmArgs args{s.M, s.N, s.K, s.bt, A.data_as<const float>(), s.K,
                                    B.data_as<const float>(), ldb, 0.0f, C.data_as<float>(), s.N};
    for (int split = 1; split <= prnn::kSkinnyMaxSplit; ++split) {  // every split, forced
      const prnn::SkinnyPlan forced = prnn::skinny_plan(args, 0, split);
      float us = -1.0f;
      try {
        us = static_cast<float>(prnn::bench::graph_median_us(
            [&] { prnn::skinny_gemm(args, stream, split); }, stream));
      } catch (const std::exception& e) {  // clusters of this size do not fit
        std::fprintf(stderr, "split %d: %s\n", split, e.what());
        cudaGraph_t g = nullptr;
        if (cudaStreamEndCapture(stream, &g) == cudaSuccess && g != nullptr)
          (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
      }
      std::fprintf(out, "%s,%s,%lld,%lld,%lld,%s,%d,%lld,skinny_split,%.2f,\n", prop.name, s.what,
                   static_cast<long long>(s.M), static_cast<long long>(s.N),
                   static_cast<long long>(s.K), s.bt ? "bt" : "bn", split,
                   static_cast<long long>(forced.ctas), us);
    }
    for (const auto& impl : impls) {
      const auto us = static_cast<float>(
          prnn::bench::graph_median_us([&] { run(*impl.h, impl.choice); }, stream));
      std::fprintf(out, "%s,%s,%lld,%lld,%lld,%s,%d,%lld,%s,%.2f,%.3g\n", prop.name, s.what,
                   static_cast<long long>(s.M), static_cast<long long>(s.N),
                   static_cast<long long>(s.K), s.bt ? "bt" : "bn", plan.split,
                   static_cast<long long>(plan.ctas), impl.impl, us,
                   diff / std::max(scale, 1e-30));
      std::fflush(out);
    }
  }
  PRNN_CUDA_CHECK(cudaStreamDestroy(stream));
  if (out != stdout) std::fclose(out);
  return 0;
}
