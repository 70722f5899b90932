// The persistent kernels' host side (contract in rnn_kernels.h): the one dispatch point from a
// pass, a tiling (tiling.h, the planner's choice of kernel and shape) and the sequence-lengths
// form to a kernel instantiation and its launch shape (kernel_for); the checks before a launch
// (cooperative launch, shared memory, co-residency: prepare); the cooperative launch. The
// kernels are in their families' headers (kernels_fma.cu for the FMA ones,
// tensor_core_kernel.cuh, warp_rows_kernel.cuh, gated_warp_rows_kernel.cuh), instantiated by
// one translation unit per family (kernel_tables.cuh).
#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "persistent/kernel_tables.cuh"
#include "persistent/rnn_kernels.h"
#include "persistent/tiling.h"
#include "prnn/error.h"
#include "prnn/rnn.h"

namespace prnn::persistent {
namespace {

// The warp-rows kernel of `shape` for activation `act` (one table per activation).
KernelFn warp_rows_kernel(int shape, Activation act, bool projects, bool lengths, Pass pass) {
  switch (act) {
    case Activation::ReLU:
      return warp_rows_kernel_of<Activation::ReLU>(shape, projects, lengths, pass);
    case Activation::ClippedReLU:
      return warp_rows_kernel_of<Activation::ClippedReLU>(shape, projects, lengths, pass);
    case Activation::Tanh:
      return warp_rows_kernel_of<Activation::Tanh>(shape, projects, lengths, pass);
  }
  throw InternalError("persistent kernel: unknown activation");
}

struct LaunchShape {
  KernelFn fn = nullptr;
  int ctas = 0, threads = 0;
  std::size_t smem_bytes = 0;
  int warp_records = 0;  // the warp-rows kernels' records per batch group
};

// `projects`: the warp-rows forward's instantiation with the input projection (launch's p.x).
LaunchShape kernel_for(Pass pass, const Tiling& tiling, bool lengths, Activation act,
                       bool projects = false) {
  if (!tiling.runs())
    throw InternalError("persistent kernel: no kernel shape (" + tiling.reason + ")");
  // The kernel a pass runs is the planner's call (pass_kernel); here only its instantiation.
  switch (pass_kernel(tiling, pass == Pass::Forward)) {
    case PassKernel::GatedWarpRows:
      if (tiling.gated_warp_rows >= kGatedWarpRowsShapeCount)
        throw InternalError("persistent kernel: no gated warp-rows shape " +
                            std::to_string(tiling.gated_warp_rows));
      {
        const GatedWarpRowsShape& s = kGatedWarpRowsShapes[tiling.gated_warp_rows];
        const bool backward = pass == Pass::BackwardData;
        const bool mma = backward ? tiling.gated_warp_rows_backward_mma : tiling.gated_warp_rows_mma;
        const KernelFn fn = gated_warp_rows_kernel_of(tiling.gated_warp_rows, pass,
                                                      mma ? tiling.weights : DType::F32);
        if (fn == nullptr ||
            (mma && tiling.gated_warp_rows_records != gated_warp_rows_shape_records(s)))
          throw InternalError("persistent kernel: gated warp-rows shape " +
                              std::to_string(tiling.gated_warp_rows) + " has no tensor-core " +
                              (backward ? "backward" : "forward") + " for " +
                              std::to_string(tiling.gated_warp_rows_records) + " records per CTA");
        return {fn, tiling.gated_warp_rows_ctas, tiling.gated_warp_rows_threads,
                backward && mma ? gated_mma_backward_smem_bytes(s)
                                : gated_warp_rows_smem_bytes(s, backward),
                tiling.gated_warp_rows_records};
      }
    case PassKernel::WarpRows: {
      if (tiling.warp_rows >= kWarpRowsShapeCount)
        throw InternalError("persistent kernel: no warp-rows shape " +
                            std::to_string(tiling.warp_rows));
      return {warp_rows_kernel(tiling.warp_rows, act, projects, lengths, pass),
              tiling.warp_rows_ctas, tiling.warp_rows_threads,
              warp_rows_smem_bytes(kWarpRowsShapes[tiling.warp_rows], tiling.warp_rows_groups,
                                   tiling.warp_rows_records, tiling.records),
              tiling.warp_rows_records};
    }
    case PassKernel::TensorCores: {
      if (tiling.tensor_core >= kTensorCoreShapeCount)
        throw InternalError("persistent kernel: no tensor-core shape " +
                            std::to_string(tiling.tensor_core));
      const TensorCoreShape& s = kTensorCoreShapes[tiling.tensor_core];
      return {pass == Pass::Forward
                  ? tensor_core_kernel_of<Pass::Forward>(tiling.tensor_core, lengths)
                  : tensor_core_kernel_of<Pass::BackwardData>(tiling.tensor_core, lengths),
              tiling.tensor_core_ctas, kTensorCoreThreads,
              pass == Pass::Forward ? tiling.tensor_core_smem_bytes
                                    : tensor_core_backward_smem_bytes(s)};
    }
    case PassKernel::FmaStaged:
    case PassKernel::FmaDirect:
      if (tiling.shape >= kShapeCount)
        throw InternalError("persistent kernel: no kernel shape " + std::to_string(tiling.shape));
      return {fma_kernel(tiling.shape, lengths, pass), tiling.ctas, tiling.threads,
              tiling.smem_bytes};
  }
  throw InternalError("persistent kernel: unknown pass kernel");
}

// Whether the forward of `tiling` has an input projection's form for input_size inputs: the
// warp-rows kernel but its wide shapes, I % 4 == 0 (whether its shared memory fits is
// fuses_input_projection's).
bool projects_input(const Tiling& tiling, std::int64_t input_size) {
  return tiling.runs() && pass_kernel(tiling, true) == PassKernel::WarpRows &&
         kWarpRowsShapes[tiling.warp_rows].smem_slots == 0 && input_size > 0 && input_size % 4 == 0;
}

// The warp-rows forward's shared memory for an input projection of input_size inputs.
std::size_t input_smem_bytes(const Tiling& tiling, std::int64_t input_size) {
  return warp_rows_input_smem_bytes(kWarpRowsShapes[tiling.warp_rows], tiling.warp_rows_records,
                                    tiling.warp_rows_groups, input_size);
}

}  // namespace

std::size_t exchange_bytes(const Tiling& tiling, std::int64_t batch) {
  return static_cast<std::size_t>(2 * batch * tiling.records) * sizeof(float4) +
         tiling.tensor_core_exchange_bytes;
}

std::string prepare(Pass pass, const Tiling& tiling, Activation act, int device) {
  int cooperative = 0, sms = 0, smem_optin = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  PRNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (cooperative == 0) return "this GPU does not support cooperative launches";
  for (bool lengths : {false, true}) {  // both instantiations must fit
    const LaunchShape k = kernel_for(pass, tiling, lengths, act);
    cudaFuncAttributes attr{};
    PRNN_CUDA_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k.fn)));
    if (k.smem_bytes + attr.sharedSizeBytes > static_cast<std::size_t>(smem_optin))
      return "the persistent kernel needs " + std::to_string(k.smem_bytes + attr.sharedSizeBytes) +
             " bytes of shared memory per CTA; this GPU allows " + std::to_string(smem_optin);
    // All but the direct FMA shapes: allow the dynamic shared memory.
    if (k.smem_bytes > 0)
      PRNN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k.fn),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(k.smem_bytes)));
    // The warp-rows forward's projecting instantiation: all there is, for the W_ih rows
    // (fuses_input_projection says whether a layer's fit).
    if (pass == Pass::Forward && pass_kernel(tiling, true) == PassKernel::WarpRows) {
      const LaunchShape kp = kernel_for(pass, tiling, lengths, act, true);
      cudaFuncAttributes pattr{};
      PRNN_CUDA_CHECK(cudaFuncGetAttributes(&pattr, reinterpret_cast<const void*>(kp.fn)));
      PRNN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kp.fn),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           smem_optin - static_cast<int>(pattr.sharedSizeBytes)));
    }
    int per_sm = 0;
    PRNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, reinterpret_cast<const void*>(k.fn), k.threads, k.smem_bytes));
    if (static_cast<std::int64_t>(per_sm) * sms < k.ctas)
      return "the persistent kernel needs " + std::to_string(k.ctas) + " co-resident CTAs of " +
             std::to_string(k.threads) + " threads; the occupancy API reports room for " +
             std::to_string(per_sm) + " per SM on " + std::to_string(sms) + " SMs";
  }
  return {};
}

bool fuses_input_projection(const Tiling& tiling, std::int64_t input_size, Activation act,
                            int device) {
  if (!projects_input(tiling, input_size)) return false;
  int smem_optin = 0;
  PRNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  for (bool lengths : {false, true}) {
    const LaunchShape k = kernel_for(Pass::Forward, tiling, lengths, act, true);
    cudaFuncAttributes attr{};
    PRNN_CUDA_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k.fn)));
    if (k.smem_bytes + input_smem_bytes(tiling, input_size) + attr.sharedSizeBytes >
        static_cast<std::size_t>(smem_optin))
      return false;
  }
  return true;
}

void launch(Pass pass, const Tiling& tiling, const Params& params, cudaStream_t stream) {
  const bool projects = params.x != nullptr;
  if (projects && (pass != Pass::Forward || !projects_input(tiling, params.input_size) ||
                   reinterpret_cast<std::uintptr_t>(params.x) % 16 != 0))
    throw InternalError("persistent kernel: an input projection this launch cannot fuse");
  const LaunchShape k = kernel_for(pass, tiling, params.lengths != nullptr, params.act, projects);
  Params p = params;
  p.warp_records = k.warp_records;
  std::size_t smem = k.smem_bytes;
  if (projects) smem += input_smem_bytes(tiling, p.input_size);
  void* args[] = {&p};
  PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(
      reinterpret_cast<const void*>(k.fn), dim3(static_cast<unsigned>(k.ctas)),
      dim3(static_cast<unsigned>(k.threads)), args, smem, stream));
}

}  // namespace prnn::persistent
