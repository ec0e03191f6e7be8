// Which groups of the communication ops need their transfers simulated.
//
// A communication op's component runs several groups at once (the tp
// all-reduces of every node of a pipeline stage). Union the links of every
// group of every op: a link cluster is a set of links only ever shared by
// the groups inside it, so what happens on it depends only on when those
// groups start. A family of clusters is mirrored when every op that touches
// any of them has exactly one group in each, and the clusters are
// isomorphic: walking the ops in one order, each cluster's groups carry the
// same phases of flows with the same bytes and latencies over routes of
// the same capacities that share links in the same pattern. A component's
// groups start together, so the flows of every cluster of such a family are
// the images of one cluster's flows at the same times: simulating that one
// group per op gives every group's finish exactly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "htae/topology.h"

namespace dstc::htae {

// One transfer of a group's plan, routed.
struct FlowSpec {
  std::vector<LinkId> route;
  double bytes;
  double latency;
};
// A group's plan: phases run one after the other, each a set of flows.
using GroupPlan = std::vector<std::vector<FlowSpec>>;

// `ops[i]`: the groups of one communication op's component (every op that
// may run). Returns, per op and group, 1 when the group is simulated and 0
// when it mirrors the simulated group of the same op.
std::vector<std::vector<uint8_t>> simulated_groups(std::span<const std::vector<GroupPlan>* const> ops,
                                                   const Topology& topology);

}  // namespace dstc::htae
