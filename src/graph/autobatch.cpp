// The autobatching planner; the signature and both strategies are specified in graph/autobatch.h.
#include "graph/autobatch.h"
#include "graph/ops.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>

#include "core/check.h"

namespace prnn::graph {
namespace {

using std::size_t;

size_t idx(NodeId id) {
  return static_cast<size_t>(id);
}

// The signature of n into `key` (cleared first; a buffer reused across nodes).
void signature_key(const Graph& g, const Node& n, std::vector<std::int64_t>& key) {
  key.assign({static_cast<std::int64_t>(n.op), n.dim.rows, n.dim.cols,
              static_cast<std::int64_t>(n.args.size())});
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
}

// Interned signatures: looked up by a view of the key buffer, so only a new signature copies it.
struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::span<const std::int64_t> k) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull ^ k.size();
    for (std::int64_t v : k) {
      h ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return static_cast<size_t>(h);
  }
  size_t operator()(const std::vector<std::int64_t>& k) const {
    return (*this)(std::span<const std::int64_t>(k));
  }
};
struct KeyEqual {
  using is_transparent = void;
  bool operator()(std::span<const std::int64_t> a, std::span<const std::int64_t> b) const {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
};

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
  // (depth, first node of the signature) -> batch; the batches in that key order at the end.
  std::unordered_map<std::uint64_t, size_t> where;
  std::vector<std::uint64_t> keys;
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
    const auto first = static_cast<std::uint32_t>(
        batchable ? first_node[static_cast<size_t>(sig)] : static_cast<int>(id));
    const std::uint64_t k = (static_cast<std::uint64_t>(plan.depth[id]) << 32) | first;
    auto [it, fresh] = where.try_emplace(k, groups.size());
    if (fresh) {
      groups.push_back(Batch{sig, {}});
      keys.push_back(k);
    }
    groups[it->second].nodes.push_back(static_cast<NodeId>(id));
  }
  std::vector<size_t> by_key(groups.size());
  for (size_t i = 0; i < by_key.size(); ++i) by_key[i] = i;
  std::sort(by_key.begin(), by_key.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  for (size_t i : by_key) out.push_back(std::move(groups[i]));
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

  // users with multiplicity, so a repeated argument is counted once per occurrence; node a's
  // users (ascending) are user_list[user_first[a] .. user_first[a + 1]) (one flat array: no
  // allocation per node)
  std::vector<size_t> pending(n, 0), user_first(n + 1, 0);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    pending[id] = node.args.size();
    for (NodeId a : node.args) ++user_first[idx(a) + 1];
  }
  for (size_t a = 0; a < n; ++a) user_first[a + 1] += user_first[a];
  std::vector<NodeId> user_list(user_first[n]);
  {
    std::vector<size_t> fill(user_first.begin(), user_first.end() - 1);
    for (size_t id = 0; id < n; ++id)
      for (NodeId a : g.nodes()[id].args) user_list[fill[idx(a)]++] = static_cast<NodeId>(id);
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
      for (size_t k = user_first[idx(id)]; k < user_first[idx(id) + 1]; ++k)
        if (const NodeId u = user_list[k]; --pending[idx(u)] == 0) make_ready(u);
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

// Union-find over node ids with rollback (union by size, no path compression), for the lanes of
// a fused group: a batch's unions are undone when they would make a lane too long.
class Lanes {
 public:
  explicit Lanes(size_t n) : parent_(n), size_(n, 1), label_(n, -1) {
    for (size_t i = 0; i < n; ++i) parent_[i] = static_cast<NodeId>(i);
  }
  // A label per lane root (-1 until set), for numbering the lanes of a group.
  int& label(NodeId root) { return label_[idx(root)]; }
  NodeId find(NodeId a) const {
    while (parent_[idx(a)] != a) a = parent_[idx(a)];
    return a;
  }
  // Joins the lanes of a and b; returns the size of the joined lane.
  int unite(NodeId a, NodeId b) {
    NodeId ra = find(a), rb = find(b);
    if (ra == rb) return size_[idx(ra)];
    if (size_[idx(ra)] < size_[idx(rb)]) std::swap(ra, rb);
    parent_[idx(rb)] = ra;
    size_[idx(ra)] += size_[idx(rb)];
    log_.push_back(rb);
    return size_[idx(ra)];
  }
  void commit() { log_.clear(); }
  void rollback() {
    for (size_t i = log_.size(); i-- > 0;) {
      const NodeId rb = log_[i], ra = parent_[idx(rb)];
      size_[idx(ra)] -= size_[idx(rb)];
      parent_[idx(rb)] = rb;
    }
    log_.clear();
  }

 private:
  std::vector<NodeId> parent_;
  std::vector<int> size_;
  std::vector<NodeId> log_;  // roots attached since the last commit
  std::vector<int> label_;
};

// The fused groups of graph/autobatch.h over plan.batches.
void fuse_elementwise(const Graph& g, BatchPlan& plan) {
  const size_t n_batches = plan.batches.size();
  plan.group_of.assign(n_batches, -1);
  Lanes lanes(plan.batch_of.size());
  const auto first_node = [&](size_t b) -> const Node& { return g.node(plan.batches[b].nodes.front()); };
  std::vector<NodeId> order, roots;  // a group's nodes in schedule order, its lanes' roots
  std::vector<int> lane_of, cursor;  // each of those nodes' lane; fill positions per lane
  size_t b = 0;
  while (b < n_batches) {
    if (!is_elementwise(first_node(b).op)) {
      ++b;
      continue;
    }
    const std::int64_t size = first_node(b).dim.size();
    const size_t begin = b;
    size_t end = b + 1;
    for (; end < n_batches; ++end) {
      const Node& f = first_node(end);
      if (!is_elementwise(f.op) || f.dim.size() != size) break;
      bool fits = true;
      for (NodeId id : plan.batches[end].nodes)
        for (NodeId a : g.node(id).args) {
          const auto ab = static_cast<size_t>(plan.batch_of[idx(a)]);
          if (ab >= begin && ab < end && lanes.unite(id, a) > kMaxLaneNodes) fits = false;
        }
      if (!fits) {
        lanes.rollback();
        break;
      }
      lanes.commit();
    }
    b = end;
    if (end - begin < 2) continue;
    // Lanes by first node in schedule order, nodes in schedule order: each node's lane in one
    // pass, then a counting sort by lane.
    order.clear();
    lane_of.clear();
    roots.clear();
    for (size_t k = begin; k < end; ++k)
      for (NodeId id : plan.batches[k].nodes) {
        const NodeId r = lanes.find(id);
        int& l = lanes.label(r);
        if (l < 0) {
          l = static_cast<int>(roots.size());
          roots.push_back(r);
        }
        order.push_back(id);
        lane_of.push_back(l);
      }
    for (NodeId r : roots) lanes.label(r) = -1;
    FusedGroup group;
    group.begin = static_cast<int>(begin);
    group.end = static_cast<int>(end);
    group.size = size;
    group.lane_first.assign(roots.size() + 1, 0);
    for (int l : lane_of) ++group.lane_first[static_cast<size_t>(l) + 1];
    for (size_t l = 0; l < roots.size(); ++l) group.lane_first[l + 1] += group.lane_first[l];
    cursor.assign(group.lane_first.begin(), group.lane_first.end() - 1);
    group.nodes.resize(order.size());
    for (size_t i = 0; i < order.size(); ++i)
      group.nodes[static_cast<size_t>(cursor[static_cast<size_t>(lane_of[i])]++)] = order[i];
    for (size_t k = begin; k < end; ++k) plan.group_of[k] = static_cast<int>(plan.groups.size());
    plan.groups.push_back(std::move(group));
  }
}

}  // namespace

bool is_elementwise(Op op) {
  return op_info(op).elementwise;
}

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

const char* to_string(Fusion f) {
  return f == Fusion::Elementwise ? "elementwise" : "none";
}

BatchPlan plan_batches(const Graph& g, NodeId last, BatchStrategy strategy, Fusion fusion) {
  PRNN_EXPECT(last >= 0 && idx(last) < g.size(), "autobatch: node {} is not in the graph ({} nodes)",
              last, g.size());
  const size_t n = idx(last) + 1;
  BatchPlan plan;
  plan.signature_of.resize(n);
  plan.depth.resize(n);
  std::unordered_map<std::vector<std::int64_t>, int, KeyHash, KeyEqual> interned;
  std::vector<std::int64_t> key;
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    int d = 0;
    for (NodeId a : node.args) d = std::max(d, plan.depth[idx(a)] + 1);
    plan.depth[id] = d;
    signature_key(g, node, key);
    auto it = interned.find(std::span<const std::int64_t>(key));
    if (it == interned.end()) {
      it = interned.emplace(key, static_cast<int>(plan.signatures.size())).first;
      plan.signatures.push_back(
          Signature{node.op, node.dim, node.op != Op::Parameter, key, signature_name(node)});
    }
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
  if (fusion == Fusion::Elementwise)
    fuse_elementwise(g, plan);
  else
    plan.group_of.assign(plan.batches.size(), -1);
  return plan;
}

AutobatchStats plan_statistics(const BatchPlan& plan, double plan_seconds) {
  AutobatchStats stats;
  stats.plan_seconds = plan_seconds;
  stats.nodes = plan.batch_of.size();
  stats.batches = plan.batches.size();
  stats.groups = plan.groups.size();
  for (const FusedGroup& group : plan.groups) stats.fused_batches += idx(group.end - group.begin);
  stats.per_signature.resize(plan.signatures.size());
  for (size_t i = 0; i < plan.signatures.size(); ++i)
    stats.per_signature[i].name = plan.signatures[i].name;
  for (const Batch& b : plan.batches) {
    auto& ps = stats.per_signature[idx(b.signature)];
    ps.batches += 1;
    ps.nodes += b.nodes.size();
  }
  return stats;
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
  plan.group_of.assign(n, -1);
  return plan;
}

}  // namespace prnn::graph
