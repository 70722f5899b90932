// The tensor-core kernels' forward pass (tensor_core_table.cuh).
#include "persistent/tensor_core_table.cuh"

namespace prnn::persistent {

template KernelFn tensor_core_kernel_of<Pass::Forward>(int, bool);

}  // namespace prnn::persistent
