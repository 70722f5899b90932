// cuDNN's RNN as a benchmark baseline (cuDNN v9 API: cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8).
//   One layer, unidirectional, linear input, double bias (PyTorch's configuration).
//   Data:    x [T, B, I], y [T, B, H] (CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, every sequence of
//            length T), h/c [1, B, H]; weights in cuDNN's own flat weight space.
//   Math:    always fp32. f32 data uses CUDNN_DEFAULT_MATH; 16-bit data uses CUDNN_TENSOR_OP_MATH
//            (16-bit data with fp32 math is how the persistent algorithms accept 16-bit data).
//   Inputs:  uniform random, never zeros: x, h0, c0, dy, dhy, dcy in [-1, 1), weights and biases in
//            [-1/sqrt(H), 1/sqrt(H)) (PyTorch's init, so 256 ReLU steps stay finite).
//   Stream:  the legacy default stream.
// Everything cuDNN allocates or describes is owned here and freed on destruction.
#pragma once

#include <cstdint>
#include <memory>

#include "prnn/dtype.h"
#include "prnn/rnn.h"

struct cudnnContext;  // what cudnnHandle_t points to

namespace prnn::bench {

enum class CudnnRnnAlgo : std::uint8_t { Standard, PersistStatic, PersistDynamic };
inline constexpr CudnnRnnAlgo kCudnnRnnAlgos[] = {
    CudnnRnnAlgo::Standard, CudnnRnnAlgo::PersistStatic, CudnnRnnAlgo::PersistDynamic};
// "standard", "persist_static", "persist_dynamic".
const char* to_string(CudnnRnnAlgo algo);

struct CudnnRnnShape {
  Cell cell = Cell::LSTM;    // relu, tanh, gru or lstm (cuDNN has no clipped ReLU)
  DType dtype = DType::F32;  // data and weights: f32, f16 or bf16
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t batch = 0;
  std::int64_t steps = 0;
  // f32 data: Fp32 runs CUDNN_FMA_MATH (fp32 FMA only), Tf32 CUDNN_DEFAULT_MATH, cuDNN's default,
  // which takes TF32 tensor cores for fp32 data on Ampere and later (measured on an H100:
  // NVIDIA_TF32_OVERRIDE=0 makes it 10-25 % slower). 16-bit data: CUDNN_TENSOR_OP_MATH either way.
  GemmMath math = GemmMath::Tf32;

  // Forward flops of one step, both GEMMs: 2·B·G·H·(I+H).
  double forward_flops_per_step() const;
};

// One cuDNN handle on the current device.
class CudnnContext {
 public:
  CudnnContext();
  ~CudnnContext();
  CudnnContext(const CudnnContext&) = delete;
  CudnnContext& operator=(const CudnnContext&) = delete;

  cudnnContext* handle() const { return handle_; }
  // cudnnGetVersion(), e.g. 91400 for 9.14.0.
  static std::int64_t version();

 private:
  cudnnContext* handle_ = nullptr;
};

// One configured RNN with every buffer allocated and filled.
//   Throws Unsupported when cuDNN reports the combination unsupported (any NOT_SUPPORTED status,
//   or any failure while configuring a persistent algorithm), InvalidArgument for a cell, dtype
//   or size cuDNN cannot take, RuntimeError for any other failure.
class CudnnRnn {
 public:
  CudnnRnn(CudnnContext& context, const CudnnRnnShape& shape, CudnnRnnAlgo algo);
  ~CudnnRnn();
  CudnnRnn(const CudnnRnn&) = delete;
  CudnnRnn& operator=(const CudnnRnn&) = delete;

  // Training-mode forward over all T steps: y, hy, cy and the reserve space. Asynchronous.
  void forward();
  // Backward data (dx, dhx, dcx) then backward weights (accumulated into dw), using the reserve
  // space of the last forward(). Asynchronous.
  void backward();

  const CudnnRnnShape& shape() const;
  CudnnRnnAlgo algo() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prnn::bench
