// make_executor (prnn/graph.h): the executors by name.
#include "core/check.h"
#include "prnn/graph.h"

namespace prnn::graph {

std::unique_ptr<Executor> make_executor(const std::string& name) {
  if (name == "cpu") return std::make_unique<CpuExecutor>();
  if (name == "cpu-autobatch") return std::make_unique<AutobatchExecutor>(BatchStrategy::Agenda);
  if (name == "cpu-autobatch-depth") return std::make_unique<AutobatchExecutor>(BatchStrategy::Depth);
  if (name == "gpu") return std::make_unique<GpuExecutor>();
  if (name == "gpu-autobatch") return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Agenda);
  if (name == "gpu-autobatch-depth")
    return std::make_unique<GpuAutobatchExecutor>(BatchStrategy::Depth);
  PRNN_EXPECT(false,
              "make_executor: unknown executor '{}'; expected cpu, cpu-autobatch, "
              "cpu-autobatch-depth, gpu, gpu-autobatch or gpu-autobatch-depth",
              name);
  return nullptr;
}

}  // namespace prnn::graph
