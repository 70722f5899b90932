// make_executor (prnn/graph.h): the executors by name.
#include <string_view>

#include "core/check.h"
#include "prnn/graph.h"

namespace prnn::graph {

std::unique_ptr<Executor> make_executor(const std::string& name) {
  if (name == "cpu") return std::make_unique<CpuExecutor>();
  if (name == "gpu") return std::make_unique<GpuExecutor>();
  constexpr std::string_view kUnfused = "-unfused";
  std::string_view base = name;
  Fusion fusion = Fusion::Elementwise;
  if (base.ends_with(kUnfused)) {
    base.remove_suffix(kUnfused.size());
    fusion = Fusion::None;
  }
  if (base == "cpu-autobatch") return std::make_unique<AutobatchExecutor>(BatchStrategy::Agenda, fusion);
  if (base == "cpu-autobatch-depth")
    return std::make_unique<AutobatchExecutor>(BatchStrategy::Depth, fusion);
  if (base == "gpu-autobatch")
    return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Agenda, fusion);
  if (base == "gpu-autobatch-depth")
    return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Depth, fusion);
  PRNN_EXPECT(false,
              "make_executor: unknown executor '{}'; expected cpu, gpu, or "
              "(cpu|gpu)-autobatch[-depth][-unfused]",
              name);
  return nullptr;
}

}  // namespace prnn::graph
