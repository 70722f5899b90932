// The tensor-core kernels' instantiation table for one pass (tensor_core_kernel.cuh): per shape
// of kTensorCoreShapes, with and without sequence lengths. kernels_tensor_core_forward.cu and
// kernels_tensor_core_backward.cu instantiate it for their pass, so that the two compile in
// parallel.
#pragma once

#include "persistent/kernel_tables.cuh"
#include "persistent/tensor_core_kernel.cuh"

namespace prnn::persistent {

template <int I, bool L, Pass P>
struct TensorCoreKernel {
  static constexpr KernelFn get() {
    constexpr TensorCoreShape s = kTensorCoreShapes[I];
    if constexpr (P == Pass::Forward)
      return &tensor_core_forward_kernel<s.gates, s.rows, s.k_tiles, s.smem_tiles, s.n_tiles,
                                         s.storage, L>;
    else
      return &tensor_core_backward_kernel<s.gates, s.rows, s.k_tiles, s.smem_tiles, s.n_tiles,
                                          s.storage, L>;
  }
};

template <Pass P>
KernelFn tensor_core_kernel_of(int shape, bool lengths) {
  return pick_pass<TensorCoreKernel, kTensorCoreShapeCount, P>(shape, lengths);
}

}  // namespace prnn::persistent
