// The autobatching planner (DyNet, Neubig et al. 2017): from a Graph, a schedule of batches.
//
// Signature of a node (two nodes may share a batch only if their signatures are equal):
//   op, result Dim, number of arguments, and per argument position either
//     - the argument NODE, at the positions of shared weights (is_shared_argument: W of matmul,
//       every W_i of affine_transform), so a batch of W·x_i is one product W·[x_1 .. x_n];
//     - the argument's Dim, everywhere else (gathered per member);
//   plus the attributes that change the batched kernel: PickRange its first row, Parameter its
//   Parameter, Lookup its LookupParameter (lookups are batched per table, any rows).
// Parameter nodes are not batchable (DyNet's signature 0): each one is a singleton batch.
//
// Schedule (both strategies): every node 0..last in exactly one batch; every argument of a member
// of batch k lies in a batch before k; members of a batch in ascending node order.
//   Depth   depth(leaf) = 0, depth(n) = 1 + max depth(args); one batch per (depth, signature),
//           ordered by depth, then by the signature's first node.
//   Agenda  DyNet's default (autobatch strategy 1). A node is ready once all its arguments are
//           scheduled. Repeat: schedule every ready unbatchable node as a singleton (ascending);
//           then among signatures with a ready node pick the one whose nodes in the whole graph
//           have the lowest average depth (ties: the signature that appears first in the graph)
//           and schedule ALL its ready nodes as one batch. Picking low average depth first lets
//           signatures that recur deeper in the graph wait until more of their nodes are ready.
//
// Elementwise fusion (Fusion::Elementwise; the batches stay as planned, groups are added on top):
//   A group is a maximal run of >= 2 consecutive batches of the schedule whose ops are elementwise
//   (is_elementwise: OpInfo::elementwise of the op registry, graph/ops.h) and whose nodes all hold
//   the same number of elements n, cut short where a lane would exceed kMaxLaneNodes.
//   Its nodes split into lanes: the connected components of the argument edges that lie inside
//   the group (node -> argument, both in the group). Every argument of a node is therefore either
//   outside the group (an earlier batch) or in the same lane, earlier in it; elementwise ops read
//   element e of their arguments only, so element e of a lane depends on element e of earlier
//   nodes of that lane alone, and one worker per (lane, element) runs the whole group without
//   synchronizing with any other. (A rule over member indices - member b of a batch reads member b
//   of earlier batches - would be a special case; lanes also fuse batches of different sizes, as
//   the Tree-LSTM cell's: 4 logistic, 1 tanh, 3 cmult, then 1 each of add, add, tanh, cmult.)
//   Order: lanes by their first node in schedule order; inside a lane, schedule order (batch,
//   then slot), which is topological. Executors run a group as:
//     forward   per (lane, element): the lane's nodes in order;
//     backward  per (lane, element): the lane's nodes in reverse, each node's gradient complete
//               when reached (its users outside the group ran before, those inside the lane come
//               later in the lane), adding its contribution to every argument, positions in
//               order. A gradient element outside the group therefore receives this group's
//               contributions in reverse schedule order, as unfused execution adds them, except
//               where one batch adds twice to the same element (unfused: position-major through
//               a scatter; fused: member-major), a difference of fp32 rounding only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "prnn/graph.h"

namespace prnn::graph {

// True at argument positions whose node must be the same across a batch (the weights).
bool is_shared_argument(Op op, std::size_t position);

struct Signature {
  Op op = Op::Input;
  Dim dim;
  bool batchable = true;
  std::vector<std::int64_t> key;  // the whole signature, compared for equality
  std::string name;               // for statistics
};

struct Batch {
  int signature = -1;
  std::vector<NodeId> nodes;  // ascending
};

// The most nodes one lane of a fused group holds (a GPU thread keeps a lane's values and
// gradients in registers).
inline constexpr int kMaxLaneNodes = 16;

// Ops a fused group may hold (the registry's OpInfo::elementwise): one result element from the
// same element of every argument, all arguments of the result's shape, none shared.
bool is_elementwise(Op op);

struct FusedGroup {
  int begin = 0, end = 0;        // batches [begin, end) of the schedule, end - begin >= 2
  std::int64_t size = 0;         // elements of every node of the group
  std::vector<NodeId> nodes;     // lane by lane, in a lane in schedule order
  std::vector<int> lane_first;   // [lanes + 1]: lane l is nodes[lane_first[l], lane_first[l+1])
  std::size_t lanes() const { return lane_first.empty() ? 0 : lane_first.size() - 1; }
};

struct BatchPlan {
  std::vector<Signature> signatures;  // in order of first node
  std::vector<int> signature_of;      // per node
  std::vector<int> depth;             // per node
  std::vector<Batch> batches;         // in execution order
  std::vector<int> batch_of;          // per node: its batch
  std::vector<int> slot_of;           // per node: its index inside the batch
  std::vector<FusedGroup> groups;     // in schedule order; empty without fusion
  std::vector<int> group_of;          // per batch: its group, or -1
};

// Plans nodes 0..last of g; with Fusion::Elementwise also the fused groups.
BatchPlan plan_batches(const Graph& g, NodeId last, BatchStrategy strategy,
                       Fusion fusion = Fusion::None);

// The statistics of a plan (AutobatchStats, times zero but plan_seconds).
AutobatchStats plan_statistics(const BatchPlan& plan, double plan_seconds);

// The trivial plan of a per-node executor: node i alone in batch i, creation order. No signatures
// are interned (signatures empty, every signature index -1); depth is filled; no groups.
BatchPlan plan_per_node(const Graph& g, NodeId last);

}  // namespace prnn::graph
