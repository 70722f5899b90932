// The tensor-core persistent kernels' backward-data instantiations (tensor_core_kernel.cuh), one
// per shape of kTensorCoreShapes, with and without sequence lengths (kernel_tables.cuh).
#include "persistent/kernel_tables.cuh"
#include "persistent/tensor_core_kernel.cuh"

namespace prnn::persistent {
namespace {

template <int I, bool L, Pass P>
struct TensorCoreKernel {
  static constexpr KernelFn get() {
    constexpr TensorCoreShape s = kTensorCoreShapes[I];
    return &tensor_core_backward_kernel<s.gates, s.rows, s.k_tiles, s.smem_tiles, s.n_tiles,
                                        s.storage, L>;
  }
};

}  // namespace

KernelFn tensor_core_backward_kernel_of(int shape, bool lengths) {
  return pick_pass<TensorCoreKernel, kTensorCoreShapeCount, Pass::BackwardData>(shape, lengths);
}

}  // namespace prnn::persistent
