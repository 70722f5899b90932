// The long-memory task's batch generator on the device (the stream is in long_memory_data.h).
//   x [T, B, 128] fp32, time-major; every element written (zeros included), so x needs no clear.
// Launch:   1-D grid-stride loop over float4 quads, kQuadsPerRow = 32 per (t, b) row, 256 threads
//           per CTA; each thread hashes its row's symbol (4 SplitMix rounds) and writes 16 bytes.
// Limits:   x 16-byte aligned (cudaMalloc'd); T·B·32 < 2^63.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "prnn/error.h"
#include "train/long_memory_data.h"

namespace prnn::train {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kQuadsPerRow = kMemoryAlphabet / 4;
constexpr std::int64_t kMaxBlocks = 65535;
static_assert(kMemoryAlphabet % 4 == 0, "rows are written as float4");

__global__ void generate_kernel(std::uint64_t seed, std::uint64_t batch_index, std::int64_t batch,
                                std::int64_t quads, float4* __restrict__ gx) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       i < quads; i += stride) {
    const std::int64_t row = i / kQuadsPerRow;  // t·B + b
    const std::int64_t t = row / batch, b = row - t * batch;
    const std::int64_t first = (i - row * kQuadsPerRow) * 4;  // symbol of this quad's .x
    const std::uint64_t key = sequence_key(seed, batch_index, static_cast<std::uint64_t>(b));
    std::int32_t symbol = 0;
    float value = 1.0f;
    if (t == 0) value = sequence_label(key) == 0 ? 1.0f : -1.0f;
    else symbol = distractor_symbol(key, static_cast<std::uint64_t>(t));
    float4 q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const std::int64_t k = symbol - first;
    if (k == 0) q.x = value;
    else if (k == 1) q.y = value;
    else if (k == 2) q.z = value;
    else if (k == 3) q.w = value;
    gx[i] = q;
  }
}

}  // namespace

void generate_memory_batch(std::uint64_t seed, std::uint64_t batch_index, std::int64_t steps,
                           std::int64_t batch, float* x, cudaStream_t stream) {
  if (steps < 1 || batch < 1)
    throw InvalidArgument("generate_memory_batch: expected steps, batch >= 1, got " +
                          std::to_string(steps) + ", " + std::to_string(batch));
  if (x == nullptr) throw InvalidArgument("generate_memory_batch: x: expected non-null, got null");
  const std::int64_t quads = steps * batch * kQuadsPerRow;
  const std::int64_t blocks = std::min<std::int64_t>((quads + kThreads - 1) / kThreads, kMaxBlocks);
  generate_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      seed, batch_index, batch, quads, reinterpret_cast<float4*>(x));
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::train
