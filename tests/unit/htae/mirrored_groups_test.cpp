#include "htae/mirrored_groups.h"

#include <gtest/gtest.h>

#include "tests/unit/htae/preset_cluster.h"

namespace dstc::htae {
namespace {

Topology dgx_a100_nodes(int64_t nodes) { return Topology(testing::preset_cluster("dgx-a100.toml", {.nodes = nodes})); }

// One phase: each device sends `bytes` to the next, round the ring.
GroupPlan ring(const Topology& topology, std::vector<int64_t> devices, double bytes = 1e6) {
  std::vector<FlowSpec> phase;
  for (size_t i = 0; i < devices.size(); ++i)
    phase.push_back({topology.route(devices[i], devices[(i + 1) % devices.size()]), bytes, 1e-6});
  return {phase};
}

std::vector<std::vector<uint8_t>> run(const Topology& topology, const std::vector<std::vector<GroupPlan>>& ops) {
  std::vector<const std::vector<GroupPlan>*> pointers;
  for (const auto& op : ops) pointers.push_back(&op);
  return simulated_groups(pointers, topology);
}

using Flags = std::vector<std::vector<uint8_t>>;

// A tp all-reduce on each of two nodes, twice with different sizes: the
// nodes' NVSwitch links are shared by nothing else, so node 1 mirrors node 0.
TEST(MirroredGroups, GroupsOnIsomorphicPrivateLinksAreSimulatedOnce) {
  Topology t = dgx_a100_nodes(2);
  std::vector<std::vector<GroupPlan>> ops = {
      {ring(t, {0, 1, 2, 3}), ring(t, {8, 9, 10, 11})},
      {ring(t, {0, 1, 2, 3}, 5e6), ring(t, {8, 9, 10, 11}, 5e6)},
  };
  EXPECT_EQ(run(t, ops), (Flags{{1, 0}, {1, 0}}));
}

// Another op touches node 0's links alone: node 1 would not see its
// traffic, so both groups are simulated.
TEST(MirroredGroups, TrafficOnOneClusterOnlyKeepsEveryGroup) {
  Topology t = dgx_a100_nodes(2);
  std::vector<std::vector<GroupPlan>> ops = {
      {ring(t, {0, 1, 2, 3}), ring(t, {8, 9, 10, 11})},
      {ring(t, {1, 2})},
  };
  EXPECT_EQ(run(t, ops), (Flags{{1, 1}, {1}}));
}

// Both nodes carry a second op, but on GPUs that sit differently in the
// first op's rings: the links are shared in another pattern, so the
// clusters are not images of each other.
TEST(MirroredGroups, DifferentSharingPatternsKeepEveryGroup) {
  Topology t = dgx_a100_nodes(2);
  std::vector<std::vector<GroupPlan>> ops = {
      {ring(t, {0, 1, 2, 3}), ring(t, {8, 9, 10, 11})},
      {ring(t, {0, 1}), ring(t, {10, 11})},
  };
  EXPECT_EQ(run(t, ops), (Flags{{1, 1}, {1, 1}}));
  ops[1][1] = ring(t, {8, 9});
  EXPECT_EQ(run(t, ops), (Flags{{1, 0}, {1, 0}}));
}

// Two groups whose rings cross the network through the same NIC share a
// link: one cluster holds both, and both are simulated.
TEST(MirroredGroups, GroupsSharingALinkAreBothSimulated) {
  Topology t = dgx_a100_nodes(2);
  std::vector<std::vector<GroupPlan>> ops = {{ring(t, {0, 8}), ring(t, {0, 9})}};
  EXPECT_EQ(run(t, ops), (Flags{{1, 1}}));
}

// Groups of one op with different bytes on disjoint links are not mirrors.
TEST(MirroredGroups, DifferentBytesKeepEveryGroup) {
  Topology t = dgx_a100_nodes(2);
  std::vector<std::vector<GroupPlan>> ops = {{ring(t, {0, 1}), ring(t, {8, 9}, 2e6)}};
  EXPECT_EQ(run(t, ops), (Flags{{1, 1}}));
}

}  // namespace
}  // namespace dstc::htae
