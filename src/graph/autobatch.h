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

struct BatchPlan {
  std::vector<Signature> signatures;  // in order of first node
  std::vector<int> signature_of;      // per node
  std::vector<int> depth;             // per node
  std::vector<Batch> batches;         // in execution order
  std::vector<int> batch_of;          // per node: its batch
  std::vector<int> slot_of;           // per node: its index inside the batch
};

// Plans nodes 0..last of g.
BatchPlan plan_batches(const Graph& g, NodeId last, BatchStrategy strategy);

// The trivial plan of a per-node executor: node i alone in batch i, creation order. No signatures
// are interned (signatures empty, every signature index -1); depth is filled.
BatchPlan plan_per_node(const Graph& g, NodeId last);

}  // namespace prnn::graph
