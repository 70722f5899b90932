// The autobatching planner; the signature and both strategies are specified in graph/autobatch.h.
#include "graph/autobatch.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/check.h"

namespace prnn::graph {
namespace {

using std::size_t;

size_t idx(NodeId id) {
  return static_cast<size_t>(id);
}

std::vector<std::int64_t> signature_key(const Graph& g, const Node& n) {
  std::vector<std::int64_t> key = {static_cast<std::int64_t>(n.op), n.dim.rows, n.dim.cols,
                                   static_cast<std::int64_t>(n.args.size())};
  for (size_t p = 0; p < n.args.size(); ++p) {
    if (is_shared_argument(n.op, p)) {
      key.push_back(n.args[p]);
    } else {
      const Dim d = g.node(n.args[p]).dim;
      key.insert(key.end(), {d.rows, d.cols});
    }
  }
  switch (n.op) {
    case Op::PickRange:
      key.push_back(n.index);
      break;
    case Op::Parameter:
      key.push_back(n.param.index());
      break;
    case Op::Lookup:
      key.push_back(n.lookup.index());
      break;
    default:
      break;
  }
  return key;
}

std::string signature_name(const Node& n) {
  std::string s = fmt::format("{} {}", to_string(n.op), to_string(n.dim));
  std::string shared;
  for (size_t p = 0; p < n.args.size(); ++p)
    if (is_shared_argument(n.op, p)) shared += fmt::format("{}#{}", shared.empty() ? "" : ",", n.args[p]);
  if (!shared.empty()) s += " W=" + shared;
  if (n.op == Op::Parameter) s += fmt::format(" p{}", n.param.index());
  if (n.op == Op::Lookup) s += fmt::format(" table{}", n.lookup.index());
  if (n.op == Op::PickRange) s += fmt::format(" from{}", n.index);
  return s;
}

void depth_schedule(const BatchPlan& plan, size_t n, std::vector<Batch>& out) {
  // (depth, first node of the signature) -> batch
  std::map<std::pair<int, int>, size_t> where;
  std::vector<int> first_node(plan.signatures.size(), -1);
  for (size_t id = 0; id < n; ++id) {
    int& f = first_node[static_cast<size_t>(plan.signature_of[id])];
    if (f < 0) f = static_cast<int>(id);
  }
  std::vector<Batch> groups;
  for (size_t id = 0; id < n; ++id) {
    const int sig = plan.signature_of[id];
    const bool batchable = plan.signatures[static_cast<size_t>(sig)].batchable;
    // Unbatchable nodes get a key of their own (their node id in place of the signature).
    const std::pair<int, int> k{plan.depth[id],
                                batchable ? first_node[static_cast<size_t>(sig)]
                                          : static_cast<int>(id)};
    auto [it, fresh] = where.try_emplace(k, groups.size());
    if (fresh) groups.push_back(Batch{sig, {}});
    groups[it->second].nodes.push_back(static_cast<NodeId>(id));
  }
  for (const auto& [k, i] : where) out.push_back(std::move(groups[i]));
}

void agenda_schedule(const Graph& g, const BatchPlan& plan, size_t n, std::vector<Batch>& out) {
  const size_t n_sigs = plan.signatures.size();
  std::vector<double> depth_sum(n_sigs, 0.0), count(n_sigs, 0.0);
  for (size_t id = 0; id < n; ++id) {
    depth_sum[static_cast<size_t>(plan.signature_of[id])] += plan.depth[id];
    count[static_cast<size_t>(plan.signature_of[id])] += 1.0;
  }
  std::vector<double> average(n_sigs);
  for (size_t s = 0; s < n_sigs; ++s) average[s] = depth_sum[s] / count[s];

  // users with multiplicity, so a repeated argument is counted once per occurrence
  std::vector<std::vector<NodeId>> users(n);
  std::vector<size_t> pending(n, 0);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    pending[id] = node.args.size();
    for (NodeId a : node.args) users[idx(a)].push_back(static_cast<NodeId>(id));
  }
  std::vector<std::vector<NodeId>> ready(n_sigs);  // batchable, per signature
  std::vector<NodeId> ready_single;                // unbatchable
  const auto make_ready = [&](NodeId id) {
    const auto sig = static_cast<size_t>(plan.signature_of[idx(id)]);
    (plan.signatures[sig].batchable ? ready[sig] : ready_single).push_back(id);
  };
  for (size_t id = 0; id < n; ++id)
    if (pending[id] == 0) make_ready(static_cast<NodeId>(id));

  size_t scheduled = 0;
  const auto schedule = [&](Batch batch) {
    std::sort(batch.nodes.begin(), batch.nodes.end());
    for (NodeId id : batch.nodes)
      for (NodeId u : users[idx(id)])
        if (--pending[idx(u)] == 0) make_ready(u);
    scheduled += batch.nodes.size();
    out.push_back(std::move(batch));
  };
  while (scheduled < n) {
    while (!ready_single.empty()) {
      std::vector<NodeId> singles;
      singles.swap(ready_single);
      std::sort(singles.begin(), singles.end());
      for (NodeId id : singles) schedule(Batch{plan.signature_of[idx(id)], {id}});
    }
    size_t best = n_sigs;
    for (size_t s = 0; s < n_sigs; ++s)
      if (!ready[s].empty() && (best == n_sigs || average[s] < average[best])) best = s;
    if (best == n_sigs) break;
    std::vector<NodeId> members;
    members.swap(ready[best]);
    schedule(Batch{static_cast<int>(best), std::move(members)});
  }
  PRNN_ASSERT(scheduled == n);
}

}  // namespace

bool is_shared_argument(Op op, size_t position) {
  switch (op) {
    case Op::MatMul:
      return position == 0;
    case Op::AffineTransform:
      return position % 2 == 1;
    default:
      return false;
  }
}

const char* to_string(BatchStrategy s) {
  return s == BatchStrategy::Depth ? "depth" : "agenda";
}

BatchPlan plan_batches(const Graph& g, NodeId last, BatchStrategy strategy) {
  PRNN_EXPECT(last >= 0 && idx(last) < g.size(), "autobatch: node {} is not in the graph ({} nodes)",
              last, g.size());
  const size_t n = idx(last) + 1;
  BatchPlan plan;
  plan.signature_of.resize(n);
  plan.depth.resize(n);
  std::map<std::vector<std::int64_t>, int> interned;
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    int d = 0;
    for (NodeId a : node.args) d = std::max(d, plan.depth[idx(a)] + 1);
    plan.depth[id] = d;
    auto key = signature_key(g, node);
    auto [it, fresh] = interned.try_emplace(key, static_cast<int>(plan.signatures.size()));
    if (fresh)
      plan.signatures.push_back(Signature{node.op, node.dim, node.op != Op::Parameter,
                                          std::move(key), signature_name(node)});
    plan.signature_of[id] = it->second;
  }

  if (strategy == BatchStrategy::Depth)
    depth_schedule(plan, n, plan.batches);
  else
    agenda_schedule(g, plan, n, plan.batches);

  plan.batch_of.assign(n, -1);
  plan.slot_of.assign(n, -1);
  for (size_t b = 0; b < plan.batches.size(); ++b)
    for (size_t k = 0; k < plan.batches[b].nodes.size(); ++k) {
      const size_t id = idx(plan.batches[b].nodes[k]);
      PRNN_ASSERT(plan.batch_of[id] < 0);
      plan.batch_of[id] = static_cast<int>(b);
      plan.slot_of[id] = static_cast<int>(k);
    }
  return plan;
}

BatchPlan plan_per_node(const Graph& g, NodeId last) {
  PRNN_EXPECT(last >= 0 && idx(last) < g.size(), "per-node plan: node {} is not in the graph ({} nodes)",
              last, g.size());
  const size_t n = idx(last) + 1;
  BatchPlan plan;
  plan.signature_of.assign(n, -1);
  plan.depth.resize(n);
  plan.batches.resize(n);
  plan.batch_of.resize(n);
  plan.slot_of.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    int d = 0;
    for (NodeId a : g.nodes()[id].args) d = std::max(d, plan.depth[idx(a)] + 1);
    plan.depth[id] = d;
    plan.batches[id] = Batch{-1, {static_cast<NodeId>(id)}};
    plan.batch_of[id] = static_cast<int>(id);
  }
  return plan;
}

}  // namespace prnn::graph
