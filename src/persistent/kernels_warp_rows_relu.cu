// The warp-rows kernels for ReLU (warp_rows_table.cuh).
#include "persistent/warp_rows_table.cuh"

namespace prnn::persistent {

template KernelFn warp_rows_kernel_of<Activation::ReLU>(int, bool, bool, Pass);

}  // namespace prnn::persistent
