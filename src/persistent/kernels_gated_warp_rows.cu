// The gated warp-rows kernels' instantiations (gated_warp_rows_kernel.cuh), one per shape of
// kGatedWarpRowsShapes and pass (sequence lengths are checked at run time: one load per
// finishing lane and step), and the forward and backward with their product on tensor cores in
// bf16 and f16 for the shapes that have it (gated_warp_rows_has_mma,
// gated_warp_rows_has_backward_mma).
#include <utility>

#include "persistent/gated_warp_rows_kernel.cuh"
#include "persistent/kernel_tables.cuh"

namespace prnn::persistent {
namespace {

// The forward of shape I with its product on tensor cores (WS) where the shape has one, else
// none: only those shapes are instantiated.
template <std::size_t I, DType WS>
constexpr KernelFn mma_forward() {
  constexpr GatedWarpRowsShape s = kGatedWarpRowsShapes[I];
  if constexpr (gated_warp_rows_has_mma(s))
    return &gated_warp_rows_forward_kernel<s.gates, kGatedWarpRowsRecords, s.batch_per_warp,
                                           s.own_slots, s.max_threads, WS>;
  else
    return nullptr;
}

// The backward of shape I with its product on tensor cores (WS) where the shape has one.
template <std::size_t I, DType WS>
constexpr KernelFn mma_backward() {
  constexpr GatedWarpRowsShape s = kGatedWarpRowsShapes[I];
  if constexpr (gated_warp_rows_has_backward_mma(s))
    return &gated_warp_rows_backward_kernel<s.gates, kGatedWarpRowsRecords, s.batch_per_warp,
                                            s.backward_slots, s.max_threads, WS>;
  else
    return nullptr;
}

template <std::size_t... I>
KernelFn pick_gated_warp_rows(int shape, Pass pass, DType product, std::index_sequence<I...>) {
  constexpr KernelFn forward[] = {&gated_warp_rows_forward_kernel<
      kGatedWarpRowsShapes[I].gates, kGatedWarpRowsRecords, kGatedWarpRowsShapes[I].batch_per_warp,
      kGatedWarpRowsShapes[I].own_slots, kGatedWarpRowsShapes[I].max_threads>...};
  constexpr KernelFn forward_bf16[] = {mma_forward<I, DType::BF16>()...};
  constexpr KernelFn forward_f16[] = {mma_forward<I, DType::F16>()...};
  constexpr KernelFn backward[] = {&gated_warp_rows_backward_kernel<
      kGatedWarpRowsShapes[I].gates, kGatedWarpRowsRecords, kGatedWarpRowsShapes[I].batch_per_warp,
      kGatedWarpRowsShapes[I].backward_slots, kGatedWarpRowsShapes[I].max_threads>...};
  constexpr KernelFn backward_bf16[] = {mma_backward<I, DType::BF16>()...};
  constexpr KernelFn backward_f16[] = {mma_backward<I, DType::F16>()...};
  if (pass == Pass::BackwardData) {
    switch (product) {
      case DType::BF16: return backward_bf16[shape];
      case DType::F16: return backward_f16[shape];
      default: return backward[shape];
    }
  }
  switch (product) {
    case DType::BF16: return forward_bf16[shape];
    case DType::F16: return forward_f16[shape];
    default: return forward[shape];
  }
}

}  // namespace

KernelFn gated_warp_rows_kernel_of(int shape, Pass pass, DType product) {
  return pick_gated_warp_rows(shape, pass, product,
                              std::make_index_sequence<kGatedWarpRowsShapeCount>{});
}

}  // namespace prnn::persistent
