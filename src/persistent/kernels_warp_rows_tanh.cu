// The warp-rows kernels for Tanh (warp_rows_table.cuh).
#include "persistent/warp_rows_table.cuh"

namespace prnn::persistent {

template KernelFn warp_rows_kernel_of<Activation::Tanh>(int, bool, bool, Pass);

}  // namespace prnn::persistent
