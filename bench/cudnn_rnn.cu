// `prnn bench cudnn-rnn`: cuDNN's RNN (see cudnn_rnn.h) over cells × dtypes × H × B × T ×
// {standard, persist_static, persist_dynamic}.
//   fwd_us_per_step     training-mode forward of T steps / T
//   fwdbwd_us_per_step  forward + backward data + backward weights of T steps / T
//   fwd_tflops          2·T·B·G·H·(I+H) / forward time
// Every time is the median of `repeats` event-timed runs after warm-up; setup (descriptors,
// cudnnBuildRNNDynamic, allocation, random fill) is never timed. A combination cuDNN does not
// support gives one `status` row (value 0, unit not_supported) instead of the three metrics.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bench/bench_fill.cuh"
#include "bench/bench_timer.h"
#include "bench/cudnn_rnn.h"
#include "core/cuda_check.h"
#include "prnn/bench.h"
#include "prnn/device.h"
#include "prnn/error.h"
#include "prnn/log.h"
#include "prnn/tensor.h"

namespace prnn::bench {
namespace {

// A failed cuDNN call: RuntimeError with the status kept, so callers can tell "not supported"
// from a real failure.
class CudnnError : public RuntimeError {
 public:
  CudnnError(cudnnStatus_t status, const std::string& call, const std::string& detail,
             const char* file, int line)
      : RuntimeError(call, detail, file, line), status_(status) {}
  cudnnStatus_t status() const noexcept { return status_; }

 private:
  cudnnStatus_t status_;
};

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line) {
  (void)cudaGetLastError();  // do not let a non-sticky launch error leak into the next call
  constexpr std::size_t kMessageBytes = 1024;
  char message[kMessageBytes] = {};
  cudnnGetLastErrorString(message, kMessageBytes);
  std::string detail = cudnnGetErrorString(status);
  if (message[0] != '\0') detail += std::string(" (") + message + ")";
  throw CudnnError(status, call, detail, file, line);
}

#define PRNN_CUDNN_CHECK(call)                                                         \
  do {                                                                                 \
    const cudnnStatus_t prnn_cudnn_status_ = (call);                                   \
    if (prnn_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                    \
      ::prnn::bench::throw_cudnn_error(prnn_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define PRNN_CUDNN_CHECK_NOTHROW(call)                                                    \
  do {                                                                                    \
    const cudnnStatus_t prnn_cudnn_status_ = (call);                                      \
    if (prnn_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                       \
      ::prnn::log(::prnn::LogLevel::Error,                                                \
                  std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #call + \
                      " failed: " + cudnnGetErrorString(prnn_cudnn_status_));             \
  } while (0)

// What cuDNN answers for a combination it cannot run: any NOT_SUPPORTED status; and, for a
// persistent algorithm, any failure while configuring it (descriptor, cudnnBuildRNNDynamic, sizes:
// no kernel of ours has run, and cuDNN reports shapes its persistent kernels cannot plan as
// BAD_PARAM or a failed build). For the standard algorithm any other status is a real failure.
bool means_unsupported(cudnnStatus_t status, CudnnRnnAlgo algo, bool configuring) {
  if (CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED) return true;
  return configuring && algo != CudnnRnnAlgo::Standard;
}

// RAII for the cuDNN descriptor kinds used here.
template <class Desc, cudnnStatus_t (*Create)(Desc*), cudnnStatus_t (*Destroy)(Desc)>
class Descriptor {
 public:
  Descriptor() { PRNN_CUDNN_CHECK(Create(&desc_)); }
  ~Descriptor() {
    if (desc_ != nullptr) PRNN_CUDNN_CHECK_NOTHROW(Destroy(desc_));
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Desc get() const { return desc_; }

 private:
  Desc desc_ = nullptr;
};

using RnnDescriptor =
    Descriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDescriptor = Descriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                                     cudnnDestroyRNNDataDescriptor>;
using TensorDescriptor =
    Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using DropoutDescriptor = Descriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                                     cudnnDestroyDropoutDescriptor>;

cudnnRNNMode_t cudnn_cell(Cell c) {
  switch (c) {
    case Cell::ReLU:
      return CUDNN_RNN_RELU;
    case Cell::Tanh:
      return CUDNN_RNN_TANH;
    case Cell::GRU:
      return CUDNN_GRU;
    case Cell::LSTM:
      return CUDNN_LSTM;
    case Cell::ClippedReLU:
      break;
  }
  throw InvalidArgument(std::string("cudnn-rnn cell: expected relu, tanh, gru or lstm, got ") +
                        to_string(c));
}

cudnnDataType_t cudnn_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    case DType::F64:
      break;
  }
  throw InvalidArgument(std::string("cudnn-rnn dtype: expected f32, f16 or bf16, got ") +
                        to_string(t));
}

cudnnRNNAlgo_t cudnn_algo(CudnnRnnAlgo a) {
  switch (a) {
    case CudnnRnnAlgo::Standard:
      return CUDNN_RNN_ALGO_STANDARD;
    case CudnnRnnAlgo::PersistStatic:
      return CUDNN_RNN_ALGO_PERSIST_STATIC;
    case CudnnRnnAlgo::PersistDynamic:
      return CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
  }
  throw InternalError("cudnn_algo: unknown CudnnRnnAlgo");
}

int to_int(std::int64_t v, const char* what) {
  if (v <= 0 || v > std::numeric_limits<int>::max())
    throw InvalidArgument(std::string("cudnn-rnn ") + what + ": expected 1.." +
                          std::to_string(std::numeric_limits<int>::max()) + ", got " +
                          std::to_string(v));
  return static_cast<int>(v);
}

// Fills n elements of dtype t with uniform values in [lo, hi).
void fill_uniform(DeviceBuffer& b, DType t, std::size_t n, float lo, float hi, std::uint64_t seed) {
  constexpr int kBlocks = 1024, kThreads = 256;
  const auto count = static_cast<std::int64_t>(n);
  switch (t) {
    case DType::F32:
      fill_uniform_kernel<float><<<kBlocks, kThreads>>>(b.data_as<float>(), count, lo, hi, seed);
      break;
    case DType::F16:
      fill_uniform_kernel<__half><<<kBlocks, kThreads>>>(b.data_as<__half>(), count, lo, hi, seed);
      break;
    case DType::BF16:
      fill_uniform_kernel<__nv_bfloat16>
          <<<kBlocks, kThreads>>>(b.data_as<__nv_bfloat16>(), count, lo, hi, seed);
      break;
    case DType::F64:
      throw InvalidArgument("cudnn-rnn: f64 data is not benchmarked");
  }
  PRNN_CHECK_LAUNCH();
}

}  // namespace

const char* to_string(CudnnRnnAlgo algo) {
  switch (algo) {
    case CudnnRnnAlgo::Standard:
      return "standard";
    case CudnnRnnAlgo::PersistStatic:
      return "persist_static";
    case CudnnRnnAlgo::PersistDynamic:
      return "persist_dynamic";
  }
  return "?";
}

double CudnnRnnShape::forward_flops_per_step() const {
  return 2.0 * double(batch) * double(gate_count(cell)) * double(hidden_size) *
         double(input_size + hidden_size);
}

CudnnContext::CudnnContext() {
  PRNN_CUDNN_CHECK(cudnnCreate(&handle_));
}

CudnnContext::~CudnnContext() {
  if (handle_ != nullptr) PRNN_CUDNN_CHECK_NOTHROW(cudnnDestroy(handle_));
}

std::int64_t CudnnContext::version() {
  return static_cast<std::int64_t>(cudnnGetVersion());
}

struct CudnnRnn::Impl {
  cudnnHandle_t handle;
  CudnnRnnShape shape;
  CudnnRnnAlgo algo;
  bool has_cell_state;

  DropoutDescriptor dropout;
  RnnDescriptor rnn;
  RnnDataDescriptor x_desc, y_desc;
  TensorDescriptor h_desc;  // [1, B, H], also describes c

  std::size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  DeviceBuffer seq_lengths;       // [B] int32 on the device, all T
  DeviceBuffer x, y, dx, dy;      // [T, B, I] / [T, B, H]
  DeviceBuffer hx, hy, dhx, dhy;  // [1, B, H]
  DeviceBuffer cx, cy, dcx, dcy;  // [1, B, H], LSTM only
  DeviceBuffer w, dw, work, reserve;

  Impl(cudnnHandle_t h, const CudnnRnnShape& s, CudnnRnnAlgo a)
      : handle(h), shape(s), algo(a), has_cell_state(s.cell == Cell::LSTM) {}

  void configure();
  void allocate_and_fill();

  void* maybe(DeviceBuffer& b) const { return has_cell_state ? b.data() : nullptr; }
};

void CudnnRnn::Impl::configure() {
  const int I = to_int(shape.input_size, "input size");
  const int H = to_int(shape.hidden_size, "hidden size");
  const int B = to_int(shape.batch, "batch");
  const int T = to_int(shape.steps, "steps");
  // cuDNN 9.14's persistent algorithms fault (illegal address, which ends the process's CUDA
  // context) once the gate tensor T·B·G·H reaches 2^31 elements: measured on an H200 with LSTM
  // H = 256 at T = 16384, B = 256 (2^32 gate elements; B = 64 and T = 4096 at 2^30 run). Such a
  // shape is reported unsupported instead of run.
  const std::int64_t gate_elements = std::int64_t{T} * B * gate_count(shape.cell) * H;
  if (algo != CudnnRnnAlgo::Standard && gate_elements >= (std::int64_t{1} << 31))
    throw Unsupported(std::string("cuDNN RNN ") + to_string(algo),
                      "T·B·G·H = " + std::to_string(gate_elements) +
                          " gate elements, at or past 2^31, where the persistent algorithms "
                          "fault (measured with cuDNN 9.14)");
  const cudnnDataType_t data_type = cudnn_dtype(shape.dtype);
  const cudnnMathType_t math_type = shape.dtype != DType::F32      ? CUDNN_TENSOR_OP_MATH
                                    : shape.math == GemmMath::Fp32 ? CUDNN_FMA_MATH
                                                                   : CUDNN_DEFAULT_MATH;
  constexpr int kLayers = 1;

  // One layer: dropout is never applied, so no RNG states are needed.
  PRNN_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout.get(), handle, 0.0f, nullptr, 0, 0));
  PRNN_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
      rnn.get(), cudnn_algo(algo), cudnn_cell(shape.cell), CUDNN_RNN_DOUBLE_BIAS,
      CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, data_type, CUDNN_DATA_FLOAT, math_type, I, H,
      /*projSize=*/H, kLayers, dropout.get(), CUDNN_RNN_PADDED_IO_ENABLED));
  if (algo == CudnnRnnAlgo::PersistDynamic)
    PRNN_CUDNN_CHECK(cudnnBuildRNNDynamic(handle, rnn.get(), B));

  const std::vector<int> lengths(static_cast<std::size_t>(B), T);
  PRNN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_desc.get(), data_type,
                                             CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, I,
                                             lengths.data(), nullptr));
  PRNN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(y_desc.get(), data_type,
                                             CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, H,
                                             lengths.data(), nullptr));
  const int h_dims[3] = {kLayers, B, H};
  const int h_strides[3] = {B * H, H, 1};
  PRNN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(h_desc.get(), data_type, 3, h_dims, h_strides));

  PRNN_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, rnn.get(), &weight_bytes));
  PRNN_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle, rnn.get(), CUDNN_FWD_MODE_TRAINING,
                                             x_desc.get(), &work_bytes, &reserve_bytes));

  seq_lengths = DeviceBuffer(lengths.size() * sizeof(int));
  seq_lengths.copy_from_host(lengths.data(), seq_lengths.bytes());
}

void CudnnRnn::Impl::allocate_and_fill() {
  const DType t = shape.dtype;
  const auto TB = static_cast<std::size_t>(shape.steps * shape.batch);
  const std::size_t n_x = TB * static_cast<std::size_t>(shape.input_size);
  const std::size_t n_y = TB * static_cast<std::size_t>(shape.hidden_size);
  const auto n_h = static_cast<std::size_t>(shape.batch * shape.hidden_size);
  const std::size_t esize = size_of(t);
  auto make = [&](DeviceBuffer& b, std::size_t n, float lo, float hi, std::uint64_t seed) {
    b = DeviceBuffer(n * esize);
    fill_uniform(b, t, n, lo, hi, seed);
  };
  std::uint64_t seed = 1;
  make(x, n_x, -1.0f, 1.0f, seed++);
  make(dy, n_y, -1.0f, 1.0f, seed++);
  make(y, n_y, -1.0f, 1.0f, seed++);  // outputs too: never time a pass over untouched memory
  make(dx, n_x, -1.0f, 1.0f, seed++);
  make(hx, n_h, -1.0f, 1.0f, seed++);
  make(dhy, n_h, -1.0f, 1.0f, seed++);
  make(hy, n_h, -1.0f, 1.0f, seed++);
  make(dhx, n_h, -1.0f, 1.0f, seed++);
  if (has_cell_state) {
    make(cx, n_h, -1.0f, 1.0f, seed++);
    make(dcy, n_h, -1.0f, 1.0f, seed++);
    make(cy, n_h, -1.0f, 1.0f, seed++);
    make(dcx, n_h, -1.0f, 1.0f, seed++);
  }
  // Weights and biases: PyTorch's U(-1/sqrt(H), 1/sqrt(H)).
  const float k = 1.0f / std::sqrt(static_cast<float>(shape.hidden_size));
  const std::size_t n_w = weight_bytes / esize;
  w = DeviceBuffer(weight_bytes);
  dw = DeviceBuffer(weight_bytes);
  fill_uniform(w, t, n_w, -k, k, seed++);
  fill_uniform(dw, t, n_w, -k, k, seed++);
  work = DeviceBuffer(work_bytes);
  reserve = DeviceBuffer(reserve_bytes);
  PRNN_CUDA_CHECK(cudaDeviceSynchronize());
}

CudnnRnn::CudnnRnn(CudnnContext& context, const CudnnRnnShape& shape, CudnnRnnAlgo algo)
    : impl_(std::make_unique<Impl>(context.handle(), shape, algo)) {
  try {
    impl_->configure();
  } catch (const CudnnError& e) {
    if (means_unsupported(e.status(), algo, /*configuring=*/true))
      throw Unsupported(std::string("cuDNN RNN ") + to_string(algo), e.what());
    throw;
  }
  impl_->allocate_and_fill();
}

CudnnRnn::~CudnnRnn() = default;

const CudnnRnnShape& CudnnRnn::shape() const {
  return impl_->shape;
}
CudnnRnnAlgo CudnnRnn::algo() const {
  return impl_->algo;
}

void CudnnRnn::forward() {
  Impl& m = *impl_;
  try {
    PRNN_CUDNN_CHECK(cudnnRNNForward(
        m.handle, m.rnn.get(), CUDNN_FWD_MODE_TRAINING, m.seq_lengths.data_as<const std::int32_t>(),
        m.x_desc.get(), m.x.data(), m.y_desc.get(), m.y.data(), m.h_desc.get(), m.hx.data(),
        m.hy.data(), m.h_desc.get(), m.maybe(m.cx), m.maybe(m.cy), m.weight_bytes, m.w.data(),
        m.work_bytes, m.work.data(), m.reserve_bytes, m.reserve.data()));
  } catch (const CudnnError& e) {
    if (means_unsupported(e.status(), m.algo, /*configuring=*/false))
      throw Unsupported(std::string("cuDNN RNN forward ") + to_string(m.algo), e.what());
    throw;
  }
}

void CudnnRnn::backward() {
  Impl& m = *impl_;
  try {
    PRNN_CUDNN_CHECK(cudnnRNNBackwardData_v8(
        m.handle, m.rnn.get(), m.seq_lengths.data_as<const std::int32_t>(), m.y_desc.get(),
        m.y.data(), m.dy.data(), m.x_desc.get(), m.dx.data(), m.h_desc.get(), m.hx.data(),
        m.dhy.data(), m.dhx.data(), m.h_desc.get(), m.maybe(m.cx), m.maybe(m.dcy), m.maybe(m.dcx),
        m.weight_bytes, m.w.data(), m.work_bytes, m.work.data(), m.reserve_bytes,
        m.reserve.data()));
    // cuDNN 9 implements only the accumulating mode.
    PRNN_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
        m.handle, m.rnn.get(), CUDNN_WGRAD_MODE_ADD, m.seq_lengths.data_as<const std::int32_t>(),
        m.x_desc.get(), m.x.data(), m.h_desc.get(), m.hx.data(), m.y_desc.get(), m.y.data(),
        m.weight_bytes, m.dw.data(), m.work_bytes, m.work.data(), m.reserve_bytes,
        m.reserve.data()));
  } catch (const CudnnError& e) {
    if (means_unsupported(e.status(), m.algo, /*configuring=*/false))
      throw Unsupported(std::string("cuDNN RNN backward ") + to_string(m.algo), e.what());
    throw;
  }
}

}  // namespace prnn::bench

namespace prnn {

void run_cudnn_rnn_bench(const CudnnRnnBenchOptions& o, const BenchSink& sink) {
  for (Cell cell : o.cells) (void)bench::cudnn_cell(cell);  // throws for a cell cuDNN lacks
  for (DType dtype : o.dtypes) (void)bench::cudnn_dtype(dtype);
  if (device_count() == 0)
    throw Unsupported("prnn bench cudnn-rnn", "no GPU: " + no_device_reason());
  if (o.repeats <= 0)
    throw InvalidArgument("cudnn-rnn repeats: expected > 0, got " + std::to_string(o.repeats));
  if (o.input_size < 0)
    throw InvalidArgument("cudnn-rnn input size: expected >= 0 (0: same as hidden), got " +
                          std::to_string(o.input_size));
  log(LogLevel::Info, "cudnn-rnn: cuDNN version " + std::to_string(bench::CudnnContext::version()));
  bench::CudnnContext context;

  for (Cell cell : o.cells) {
    for (DType dtype : o.dtypes) {
      for (std::int64_t H : o.hidden) {
        for (std::int64_t B : o.batch) {
          for (std::int64_t T : o.steps) {
            const std::int64_t I = o.input_size > 0 ? o.input_size : H;
            const bench::CudnnRnnShape shape{cell, dtype, I, H, B, T};
            std::string c = std::string("cell=") + to_string(cell) + ";dtype=" + to_string(dtype) +
                            ";H=" + std::to_string(H) + ";B=" + std::to_string(B) +
                            ";T=" + std::to_string(T);
            if (I != H) c += ";I=" + std::to_string(I);
            for (bench::CudnnRnnAlgo algo : bench::kCudnnRnnAlgos) {
              const std::string impl = std::string("cudnn-") + bench::to_string(algo);
              auto row = [&](const char* metric, double v, const char* unit) {
                sink({"rnn", c, impl, metric, v, unit});
              };
              double fwd = 0, fwdbwd = 0;
              try {
                bench::CudnnRnn rnn(context, shape, algo);
                fwd = bench::median_us([&] { rnn.forward(); }, o.repeats);
                fwdbwd = bench::median_us(
                    [&] {
                      rnn.forward();
                      rnn.backward();
                    },
                    o.repeats);
              } catch (const Unsupported& e) {
                log(LogLevel::Info, "cudnn-rnn " + c + " " + impl + ": " + e.what());
                row("status", 0.0, "not_supported");
                continue;
              }
              const double steps = double(T);
              row("fwd_us_per_step", fwd / steps, "us");
              row("fwdbwd_us_per_step", fwdbwd / steps, "us");
              row("fwd_tflops", shape.forward_flops_per_step() * steps / (fwd * 1e6), "TFLOP/s");
            }
          }
        }
      }
    }
  }
}

}  // namespace prnn
