#include "htae/collectives.h"

#include <gtest/gtest.h>

#include <numeric>

#include "htae/flow_engine.h"
#include "tests/unit/htae/preset_cluster.h"

namespace dstc::htae {
namespace {

constexpr double kGiB = 1 << 30;

Topology preset_topology(const std::string& name, ClusterOverrides overrides = {}) {
  return Topology(testing::preset_cluster(name, overrides));
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Runs a plan's phases one after the other on the flow engine.
double simulate(const Topology& topo, const CollectivePlan& plan) {
  FlowEngine engine(topo);
  double t = 0;
  std::vector<LinkId> route;
  for (const CollectivePhase& phase : plan.phases) {
    for (const Transfer& x : phase.transfers) {
      route.clear();
      topo.route(x.src, x.dst, route);
      engine.start_flow(route, x.bytes, t, x.latency);
    }
    std::vector<DeliveredFlow> delivered;
    while (engine.pending_flows() > 0) engine.advance_to(engine.next_event_time(), delivered);
    for (const DeliveredFlow& d : delivered) t = std::max(t, d.time);
  }
  return t;
}

TEST(Collectives, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::AllReduce, 8), 14.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::ReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::AllToAll, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::Broadcast, 4), 1.0);
  EXPECT_EQ(ring_steps(CollectiveKind::AllReduce, 8), 14);
  EXPECT_EQ(ring_steps(CollectiveKind::AllGather, 8), 7);
}

// 1 GiB all-reduce over the 8 GPUs of a DGX A100 (300 GB/s per GPU per
// direction into NVSwitch, 2 x 1 us per route): the ring sends 2 x 7/8 GiB
// per GPU in 14 latency-bound steps.
TEST(Collectives, AllReduceOnNvswitchIsARing) {
  Topology topo = preset_topology("dgx-a100.toml");
  std::vector<int64_t> group = iota(8);
  CollectivePlan plan = plan_collective(topo, CollectiveKind::AllReduce, group, kGiB);
  EXPECT_EQ(plan.algorithm, CollectiveAlgorithm::Ring);
  ASSERT_EQ(plan.phases.size(), 1u);
  ASSERT_EQ(plan.phases[0].transfers.size(), 8u);
  EXPECT_DOUBLE_EQ(plan.phases[0].transfers[0].bytes, 2 * 7.0 / 8 * kGiB);
  double expected = 14 * 2e-6 + 2 * 7.0 / 8 * kGiB / 300e9;  // 6.2915 ms
  EXPECT_NEAR(plan_time(topo, plan), expected, 1e-12);
  EXPECT_NEAR(alpha_beta_time(CollectiveKind::AllReduce, 8, kGiB, 2e-6, 300e9), expected, 1e-12);
  EXPECT_NEAR(simulate(topo, plan), expected, 1e-9);
}

// 1 GiB all-reduce over 2 nodes x 8 A100 with one 200 Gb/s (25 GB/s) NIC per
// node: hierarchical. Reduce-scatter in each node (7/8 GiB per GPU, 7 steps
// of 2 us), then 8 two-node rings of 1/8 GiB each way, all through the one
// NIC: 1 GiB over 25 GB/s (2 steps of 7 us), then the all-gather.
TEST(Collectives, AllReduceAcrossTwoNodesIsHierarchical) {
  Topology topo = preset_topology("a100-nvlink-2x8.toml");
  std::vector<int64_t> group = iota(16);
  CollectivePlan plan = plan_collective(topo, CollectiveKind::AllReduce, group, kGiB);
  EXPECT_EQ(plan.algorithm, CollectiveAlgorithm::Hierarchical);
  ASSERT_EQ(plan.phases.size(), 3u);
  double intra = 7 * 2e-6 + 7.0 / 8 * kGiB / 300e9;
  double inter = 2 * 7e-6 + kGiB / 25e9;
  double expected = 2 * intra + inter;  // 49.21 ms
  EXPECT_NEAR(plan_time(topo, plan), expected, 1e-12);
  EXPECT_NEAR(simulate(topo, plan), expected, 1e-9);
  // Alone on its route each inter-node transfer would take 1/8 of that.
  EXPECT_NEAR(plan_time(topo, plan, 1.0, /*contention=*/false), 2 * intra + 2 * 7e-6 + kGiB / 8 / 25e9, 1e-12);
  // The flat ring runs as 8 channels, but all leave a node through its one
  // NIC, which carries 2 x 15/16 GiB: slower. Each channel's ring has 14
  // NVSwitch hops (2 us) and 2 network hops (7 us); 30 steps pay 30/16 of
  // that sum.
  CollectivePlan ring = plan_collective(topo, CollectiveKind::AllReduce, group, kGiB, CollectiveAlgorithm::Ring);
  EXPECT_EQ(ring.phases[0].transfers.size(), 8u * 16);
  EXPECT_NEAR(plan_time(topo, ring), 30 * (14 * 2e-6 + 2 * 7e-6) / 16 + 2 * 15.0 / 16 * kGiB / 25e9, 1e-12);
}

// ZeRO-3's parameter all-gather over 4 DGX A100 nodes (8 NICs of 25 GB/s
// each): 8 channels, channel j entering each node at its GPU j, so each
// NIC carries one channel's share, 31/32 x 1 GiB / 8 (the GPUs' NVSwitch
// ports carry 7 shares at 300 GB/s: less). A chunk goes round 31 of the
// ring's 32 hops: 28 NVSwitch hops of 2 us and 4 network hops of 7 us.
TEST(Collectives, RingAcrossNodesSpreadsItsChannelsOverTheNics) {
  Topology topo = preset_topology("dgx-a100.toml", {.nodes = 4});
  std::vector<int64_t> group = iota(32);
  CollectivePlan plan = plan_collective(topo, CollectiveKind::AllGather, group, kGiB);
  EXPECT_EQ(plan.algorithm, CollectiveAlgorithm::Ring);
  ASSERT_EQ(plan.phases.size(), 1u);
  ASSERT_EQ(plan.phases[0].transfers.size(), 8u * 32);
  double share = 31.0 / 32 * kGiB / 8;
  EXPECT_DOUBLE_EQ(plan.phases[0].transfers[0].bytes, share);
  double latency = 31 * (28 * 2e-6 + 4 * 7e-6) / 32;
  EXPECT_NEAR(plan.phases[0].transfers[0].latency, latency, 1e-15);
  double expected = latency + share / 25e9;  // 5.28 ms, against 41.8 ms through one NIC
  EXPECT_NEAR(plan_time(topo, plan), expected, 1e-12);
  EXPECT_NEAR(simulate(topo, plan), expected, 1e-9);
  // Every GPU leaves its node in exactly one channel.
  std::vector<int> leaves(32, 0);
  for (const Transfer& t : plan.phases[0].transfers) {
    if (topo.node_of(t.src) != topo.node_of(t.dst)) ++leaves[static_cast<size_t>(t.src)];
  }
  for (int n : leaves) EXPECT_EQ(n, 1);
}

// A group whose members alternate between nodes is visited node by node:
// {0, 8, 1, 9} runs as two channels 0 1 8 9 and 1 0 9 8, crossing the
// network twice each instead of four times.
TEST(Collectives, RingVisitsEachNodesMembersTogether) {
  Topology topo = preset_topology("dgx-a100.toml", {.nodes = 2});
  std::vector<int64_t> group = {0, 8, 1, 9};
  CollectivePlan plan = plan_collective(topo, CollectiveKind::ReduceScatter, group, 4000);
  ASSERT_EQ(plan.phases[0].transfers.size(), 8u);
  int crossings = 0;
  for (const Transfer& t : plan.phases[0].transfers) {
    EXPECT_DOUBLE_EQ(t.bytes, 4000 * 3.0 / 4 / 2);
    crossings += topo.node_of(t.src) != topo.node_of(t.dst) ? 1 : 0;
  }
  EXPECT_EQ(crossings, 4);
  EXPECT_EQ(plan.phases[0].transfers[1].src, 1);
  EXPECT_EQ(plan.phases[0].transfers[1].dst, 8);
  EXPECT_EQ(plan.phases[0].transfers[5].src, 0);
  EXPECT_EQ(plan.phases[0].transfers[5].dst, 9);
}

TEST(Collectives, SmallAllReduceAcrossManyNodesUsesTheTree) {
  Topology topo = preset_topology("dgx-a100.toml", {.nodes = 16});
  std::vector<int64_t> group = iota(128);
  CollectivePlan plan = plan_collective(topo, CollectiveKind::AllReduce, group, 4096);
  EXPECT_EQ(plan.algorithm, CollectiveAlgorithm::Tree);
  EXPECT_EQ(plan.phases[0].steps, 14);  // 2 x log2(128)
  EXPECT_EQ(plan.phases[0].transfers.size(), 4u * 127);
}

TEST(Collectives, OtherKindsMakeTheirTransfers) {
  Topology topo = preset_topology("dgx-a100.toml");
  std::vector<int64_t> group = {0, 1, 2, 3};
  CollectivePlan ag = plan_collective(topo, CollectiveKind::AllGather, group, 400);
  ASSERT_EQ(ag.phases[0].transfers.size(), 4u);
  EXPECT_DOUBLE_EQ(ag.phases[0].transfers[3].bytes, 300);
  EXPECT_EQ(ag.phases[0].transfers[3].dst, 0);
  CollectivePlan a2a = plan_collective(topo, CollectiveKind::AllToAll, group, 400);
  EXPECT_EQ(a2a.algorithm, CollectiveAlgorithm::Direct);
  EXPECT_EQ(a2a.phases[0].transfers.size(), 12u);
  EXPECT_DOUBLE_EQ(a2a.phases[0].transfers[0].bytes, 100);
  std::vector<int64_t> pair = {5, 2};
  CollectivePlan p2p = plan_collective(topo, CollectiveKind::SendRecv, pair, 64);
  ASSERT_EQ(p2p.phases[0].transfers.size(), 1u);
  EXPECT_EQ(p2p.phases[0].transfers[0].src, 5);
  CollectivePlan bcast =
      plan_collective(topo, CollectiveKind::Broadcast, group, 64, CollectiveAlgorithm::Ring, /*root=*/2);
  ASSERT_EQ(bcast.phases[0].transfers.size(), 3u);
  EXPECT_EQ(bcast.phases[0].transfers[0].src, 2);
  EXPECT_EQ(bcast.phases[0].transfers[2].dst, 1);
}

// The transfer from src to dst in a phase, or null.
const Transfer* find_transfer(const CollectivePhase& phase, int64_t src, int64_t dst) {
  for (const Transfer& t : phase.transfers)
    if (t.src == src && t.dst == dst) return &t;
  return nullptr;
}

// An all-to-all over two DGX A100s (a NIC per GPU) as NCCL's PXN sends it,
// 100 bytes a block: GPU 0's blocks for node 1 leave by the NIC of their
// receiver's rail, handed over NVLink to that rail's GPU on node 0. So
// 0 -> 1 carries 0's block for 1 and for 9 (200), 1 -> 9 carries node 0's
// eight blocks for 9 (800), and nothing goes 0 -> 9 (another rail): 56
// NVLink pairs and 8 rail transfers per node, not 16 x 15 pairs.
TEST(Collectives, AllToAllAcrossRailNodesSendsThroughTheReceiversRail) {
  Topology topo = preset_topology("dgx-a100.toml", {.nodes = 2});
  std::vector<int64_t> group = iota(16);
  CollectivePlan plan = plan_collective(topo, CollectiveKind::AllToAll, group, 1600);
  ASSERT_EQ(plan.phases.size(), 1u);
  const CollectivePhase& phase = plan.phases[0];
  EXPECT_EQ(phase.transfers.size(), 2u * 56 + 2u * 8);
  ASSERT_NE(find_transfer(phase, 0, 1), nullptr);
  EXPECT_DOUBLE_EQ(find_transfer(phase, 0, 1)->bytes, 200);
  ASSERT_NE(find_transfer(phase, 1, 9), nullptr);
  EXPECT_DOUBLE_EQ(find_transfer(phase, 1, 9)->bytes, 800);
  EXPECT_EQ(find_transfer(phase, 0, 9), nullptr);
  // The rail transfer is delivered after both hops' latencies.
  EXPECT_DOUBLE_EQ(find_transfer(phase, 1, 9)->latency, topo.route_latency(0, 1) + topo.route_latency(1, 9));
  double sent = 0;
  for (const Transfer& t : phase.transfers) sent += topo.node_of(t.src) != topo.node_of(t.dst) ? t.bytes : 0;
  EXPECT_DOUBLE_EQ(sent, 2 * 8 * 8 * 100);  // every cross-node block crosses once
}

// DeepEP's exchange of experts' slots: 16 experts over 2 nodes of 8 GPUs,
// top-2. A member's 1600 bytes hold its tokens twice (800 once). A token
// reaches the other node with probability 1 - C(8,2)/C(16,2) = 0.7667 and
// crosses once, to the GPU of its rail; each GPU then forwards to the
// others of its node what both rails brought for them: 2 x 800 x (1 -
// C(15,2)/C(16,2)) = 200 each. The network carries 0.77x the flat
// exchange's bytes: a token's two experts on one node cross as one.
TEST(Collectives, DeduplicatedAllToAllCrossesOncePerNodeAndForwardsOverNvlink) {
  Topology topo = preset_topology("dgx-a100.toml", {.nodes = 2});
  std::vector<int64_t> group = iota(16);
  CollectivePlan plan = deduplicated_all_to_all(topo, group, 1600, 2, 16);
  ASSERT_EQ(plan.phases.size(), 1u);
  const CollectivePhase& phase = plan.phases[0];
  EXPECT_EQ(phase.transfers.size(), 16u + 2u * 56);
  ASSERT_NE(find_transfer(phase, 1, 9), nullptr);
  EXPECT_NEAR(find_transfer(phase, 1, 9)->bytes, 800 * (1 - 28.0 / 120), 1e-9);
  EXPECT_EQ(find_transfer(phase, 1, 10), nullptr);  // off its rail: no network transfer
  ASSERT_NE(find_transfer(phase, 9, 10), nullptr);
  EXPECT_NEAR(find_transfer(phase, 9, 10)->bytes, 2 * 800 * (1 - 105.0 / 120), 1e-9);
  EXPECT_DOUBLE_EQ(find_transfer(phase, 9, 10)->latency, topo.route_latency(1, 9) + topo.route_latency(9, 10));
  double network = 0;
  for (const Transfer& t : phase.transfers) network += topo.node_of(t.src) != topo.node_of(t.dst) ? t.bytes : 0;
  EXPECT_NEAR(network, 16 * 800 * (1 - 28.0 / 120), 1e-6);
  EXPECT_LT(network, 0.77 * 2 * 8 * 8 * 100);
  // Unequal nodes: the flat exchange.
  std::vector<int64_t> uneven = {0, 1, 2, 8};
  CollectivePlan flat = deduplicated_all_to_all(topo, uneven, 400, 2, 16);
  EXPECT_DOUBLE_EQ(plan_time(topo, flat),
                   plan_time(topo, plan_collective(topo, CollectiveKind::AllToAll, uneven, 400)));
}

// DeepSeek-V3's exchange: 256 experts, top-8, EP 64 over 8 nodes. Without
// a node limit a token reaches 8 (1 - C(224,8)/C(256,8)) = 5.30 nodes; its
// routing to the best 4 of 8 groups, a group a node, caps that at 4: each
// rail peer on another node gets half the member's tokens, and each GPU
// forwards to each other GPU of its node what 8 experts among the kept 4
// nodes' 128 bring.
TEST(Collectives, NodeLimitedRoutingCapsTheNodesATokenReaches) {
  Topology topo = preset_topology("dgx-h100.toml", {.nodes = 8});
  std::vector<int64_t> group = iota(64);
  const double bytes = 8 * 1000;  // 1000 bytes of tokens, each 8 times
  CollectivePlan free = deduplicated_all_to_all(topo, group, bytes, 8, 256);
  CollectivePlan limited = deduplicated_all_to_all(topo, group, bytes, 8, 256, {8, 4});
  double miss = 1, miss_gpu = 1;
  for (int i = 0; i < 8; ++i) miss *= (224.0 - i) / (256 - i), miss_gpu *= (124.0 - i) / (128 - i);
  EXPECT_NEAR(find_transfer(free.phases[0], 0, 8)->bytes, 1000 * (1 - miss), 1e-9);
  EXPECT_NEAR(find_transfer(limited.phases[0], 0, 8)->bytes, 1000 * 0.5, 1e-9);
  EXPECT_NEAR(find_transfer(limited.phases[0], 8, 9)->bytes, 8 * 1000 * 0.5 * (1 - miss_gpu), 1e-9);
  // Groups that are not the nodes leave the traffic as it was.
  CollectivePlan other = deduplicated_all_to_all(topo, group, bytes, 8, 256, {64, 4});
  EXPECT_DOUBLE_EQ(find_transfer(other.phases[0], 0, 8)->bytes, find_transfer(free.phases[0], 0, 8)->bytes);
}

// Without a member of the receiver's local index on the sender's node, or
// on nodes whose GPUs share a NIC, every block goes straight to its
// receiver through the sender's own NIC.
TEST(Collectives, AllToAllWithoutARailPeerSendsDirectly) {
  Topology a100 = preset_topology("dgx-a100.toml", {.nodes = 2});
  std::vector<int64_t> off_rail = {0, 9};
  CollectivePlan plan = plan_collective(a100, CollectiveKind::AllToAll, off_rail, 200);
  ASSERT_EQ(plan.phases[0].transfers.size(), 2u);
  EXPECT_NE(find_transfer(plan.phases[0], 0, 9), nullptr);
  Topology v100 = preset_topology("v100-nvlink-4x8.toml");  // one NIC per node
  EXPECT_FALSE(v100.nic_per_gpu());
  EXPECT_TRUE(a100.nic_per_gpu());
  std::vector<int64_t> group = iota(16);
  CollectivePlan direct = plan_collective(v100, CollectiveKind::AllToAll, group, 1600);
  EXPECT_EQ(direct.phases[0].transfers.size(), 16u * 15);
  EXPECT_DOUBLE_EQ(find_transfer(direct.phases[0], 0, 9)->bytes, 100);
}

// Proteus' figure 5(a) case 3: four 2-GPU groups {0,4} {1,5} {2,6} {3,7} on
// the TITAN Xp box. Each PCIe switch uplink (15.75 GB/s) carries two of them
// (7.875 GB/s each); the socket link then carries 31.5 of its 38.4 GB/s.
TEST(Collectives, ConcurrentGroupsShareTheSocketLink) {
  Topology topo = preset_topology("titanxp-pcie-8.toml");
  FlowEngine engine(topo);
  std::vector<LinkId> route;
  for (int64_t g = 0; g < 4; ++g) {
    route.clear();
    topo.route(g, g + 4, route);
    engine.start_flow(route, 1e9, 0);
  }
  std::vector<DeliveredFlow> delivered;
  engine.advance_to(engine.next_event_time(), delivered);
  ASSERT_EQ(delivered.size(), 4u);
  EXPECT_NEAR(delivered[0].time, 1e9 / (15.75e9 / 2), 1e-12);
  EXPECT_NEAR(1e9 / topo.route_bandwidth(0, 4), 1e9 / 15.75e9, 1e-12);
}

}  // namespace
}  // namespace dstc::htae
