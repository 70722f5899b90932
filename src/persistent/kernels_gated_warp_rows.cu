// The gated warp-rows kernels' instantiations (gated_warp_rows_kernel.cuh), one per shape of
// kGatedWarpRowsShapes and pass (sequence lengths are checked at run time: one load per
// finishing lane and step).
#include <utility>

#include "persistent/gated_warp_rows_kernel.cuh"
#include "persistent/kernel_tables.cuh"

namespace prnn::persistent {
namespace {

template <std::size_t... I>
KernelFn pick_gated_warp_rows(int shape, Pass pass, std::index_sequence<I...>) {
  constexpr KernelFn forward[] = {&gated_warp_rows_forward_kernel<
      kGatedWarpRowsShapes[I].gates, kGatedWarpRowsRecords, kGatedWarpRowsShapes[I].batch_per_warp,
      kGatedWarpRowsShapes[I].own_slots, kGatedWarpRowsShapes[I].max_threads>...};
  constexpr KernelFn backward[] = {&gated_warp_rows_backward_kernel<
      kGatedWarpRowsShapes[I].gates, kGatedWarpRowsRecords, kGatedWarpRowsShapes[I].batch_per_warp,
      kGatedWarpRowsShapes[I].backward_slots, kGatedWarpRowsShapes[I].max_threads>...};
  return pass == Pass::Forward ? forward[shape] : backward[shape];
}

template <DType WS, std::size_t... I>
KernelFn pick_gated_warp_rows_mma(int shape, std::index_sequence<I...>) {
  constexpr KernelFn forward[] = {&gated_warp_rows_forward_kernel<
      kGatedWarpRowsShapes[I].gates, kGatedWarpRowsRecords, kGatedWarpRowsShapes[I].batch_per_warp,
      kGatedWarpRowsShapes[I].own_slots, kGatedWarpRowsShapes[I].max_threads, WS>...};
  return forward[shape];
}

}  // namespace

KernelFn gated_warp_rows_kernel_of(int shape, Pass pass) {
  return pick_gated_warp_rows(shape, pass, std::make_index_sequence<kGatedWarpRowsShapeCount>{});
}

KernelFn gated_warp_rows_mma_forward_of(int shape, DType weights) {
  constexpr auto all = std::make_index_sequence<kGatedWarpRowsShapeCount>{};
  return weights == DType::F16 ? pick_gated_warp_rows_mma<DType::F16>(shape, all)
                               : pick_gated_warp_rows_mma<DType::BF16>(shape, all);
}

}  // namespace prnn::persistent
