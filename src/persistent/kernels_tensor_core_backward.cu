// The tensor-core kernels' backward-data pass (tensor_core_table.cuh).
#include "persistent/tensor_core_table.cuh"

namespace prnn::persistent {

template KernelFn tensor_core_kernel_of<Pass::BackwardData>(int, bool);

}  // namespace prnn::persistent
