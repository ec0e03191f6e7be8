#include "htae/comm_buffers.h"

#include <gtest/gtest.h>

#include <numeric>

#include "ir/parser.h"
#include "tests/unit/htae/preset_cluster.h"

namespace dstc::htae {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::vector<int64_t> iota(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

NcclP2pBuffers all_to_all(const Topology& topology, const ClusterSpec& cluster, const std::vector<int64_t>& members,
                          int64_t device) {
  return nccl_p2p_buffers(topology, cluster, members, all_to_all_sends(topology, members, device), device);
}

// Expert parallelism over one DGX H100: NCCL's communicator has 24
// channels, 32 once a power of two; an NVLink peer asks for two per lane
// (18 lanes), so each of the 7 peers gets 32 channels of 12 MiB (10 MiB of
// receive slots, 2 MiB of send control): 2688 MiB, where NVIDIA/nccl#1685
// measured 3.28 GB after the first all_to_all_single.
TEST(CommBuffers, NcclAllToAllInOneNodeHoldsTwelveMibPerPeerChannel) {
  ClusterSpec cluster = testing::preset_cluster("dgx-h100.toml");
  Topology topology(cluster);
  NcclP2pBuffers b = all_to_all(topology, cluster, iota(8), 3);
  EXPECT_EQ(b.channels_per_peer, 32);
  EXPECT_EQ(b.nvlink_connections, 14);
  EXPECT_EQ(b.network_pools, 0);
  EXPECT_EQ(b.bytes, 7 * 32 * 12 * kMiB);
  // One peer costs as many channels.
  EXPECT_EQ(all_to_all(topology, cluster, iota(2), 0).bytes, 32 * 12 * kMiB);
}

// H800's 8 NVLink lanes give 16 channels a peer (as its NCCL logs show);
// NCCL_MAX_P2P_NCHANNELS caps the communicator's.
TEST(CommBuffers, NvlinkLanesAndTheChannelCapBoundChannelsPerPeer) {
  ClusterSpec h800 = testing::preset_cluster("dgx-h100.toml");
  h800.intra_node.gpu_bandwidth = 200e9;
  EXPECT_EQ(all_to_all(Topology(h800), h800, iota(8), 0).channels_per_peer, 16);
  ClusterSpec capped = testing::preset_cluster("dgx-h100.toml");
  capped.runtime.max_p2p_channels = 4;
  NcclP2pBuffers b = all_to_all(Topology(capped), capped, iota(8), 0);
  EXPECT_EQ(b.channels_per_peer, 4);
  EXPECT_EQ(b.bytes, 7 * 4 * 12 * kMiB);
}

// Over 8 nodes (64 ranks) a network peer gets one channel (two would put
// over 4 operations on each of the communicator's 16), and so does every
// peer: the NVLink ones hold 7 x 12 MiB. Through PXN a rank's proxy sends
// for all 8 local members to its rail and receives its own: 9 pools of 16
// channels x 16 steps x 128 KiB.
TEST(CommBuffers, AcrossNodesPeersShareOneChannelAndTheProxyPools) {
  ClusterSpec cluster = testing::preset_cluster("dgx-h100.toml", {.nodes = 8});
  Topology topology(cluster);
  NcclP2pBuffers b = all_to_all(topology, cluster, iota(64), 9);
  EXPECT_EQ(b.channels_per_peer, 1);
  EXPECT_EQ(b.nvlink_connections, 14);
  EXPECT_EQ(b.network_pools, 9);
  EXPECT_EQ(b.bytes, 7 * 12 * kMiB + 9 * 32 * kMiB);
  // Two ranks on one rail of two nodes: two channels, no PXN, a send and
  // a receive pool.
  const std::vector<int64_t> pair{2, 10};
  NcclP2pBuffers p = all_to_all(topology, cluster, pair, 2);
  EXPECT_EQ(p.channels_per_peer, 2);
  EXPECT_EQ(p.nvlink_connections, 0);
  EXPECT_EQ(p.network_pools, 2);
  EXPECT_EQ(p.bytes, 2 * 32 * kMiB);
}

// A pipeline of 4 stages in one node (ranks 0-3): a middle stage sends
// to and receives from both neighbours, 32 channels each way at 2 MiB
// sent and 10 MiB received; the first stage has one neighbour. Across two
// nodes on one rail, stage 0 (node 0) sends activations to stage 1 (node
// 1) and receives its gradients: one send and one receive pool of its own.
TEST(CommBuffers, PipelineSendsConnectOnlyTheNeighbours) {
  ClusterSpec cluster = testing::preset_cluster("dgx-h100.toml", {.nodes = 2});
  Topology topology(cluster);
  const std::vector<int64_t> stages = iota(4);
  std::vector<std::pair<int64_t, int64_t>> sends;
  for (int64_t s = 0; s + 1 < 4; ++s) {
    sends.emplace_back(s, s + 1);
    sends.emplace_back(s + 1, s);
  }
  NcclP2pBuffers middle = nccl_p2p_buffers(topology, cluster, stages, sends, 1);
  EXPECT_EQ(middle.channels_per_peer, 32);
  EXPECT_EQ(middle.nvlink_connections, 4);
  EXPECT_EQ(middle.bytes, 2 * 32 * 12 * kMiB);
  EXPECT_EQ(nccl_p2p_buffers(topology, cluster, stages, sends, 0).bytes, 32 * 12 * kMiB);
  const std::vector<int64_t> rail{3, 11};
  const std::vector<std::pair<int64_t, int64_t>> both_ways{{3, 11}, {11, 3}};
  NcclP2pBuffers first = nccl_p2p_buffers(topology, cluster, rail, both_ways, 3);
  EXPECT_EQ(first.channels_per_peer, 2);
  EXPECT_EQ(first.network_pools, 2);
  EXPECT_EQ(first.bytes, 2 * 32 * kMiB);
}

// With PXN a send to another node goes through this node's member on the
// receiver's rail; members 0 and 1 have none on rails 2 and 3, so each
// sends through its own NIC: device 0 holds its send pool and its receive
// pool (2 channels a peer among 4 ranks on 2 nodes: 2 x 2 + 2 x 10 MiB to
// its NVLink peer, 2 pools of 16 x 2 MiB).
TEST(CommBuffers, PxnRelaysOnlyThroughMembers) {
  ClusterSpec cluster = testing::preset_cluster("dgx-h100.toml", {.nodes = 2});
  Topology topology(cluster);
  NcclP2pBuffers b = all_to_all(topology, cluster, {0, 1, 10, 11}, 0);
  EXPECT_EQ(b.channels_per_peer, 2);
  EXPECT_EQ(b.network_pools, 2);
  EXPECT_EQ(b.bytes, 24 * kMiB + 64 * kMiB);
}

// Ranks 0-3 sit on devices 0, 1, 8 and 9 (two nodes), ranks 4-7 on 2-5
// (one node); both groups run the same program, so they are one class,
// which holds what its fullest rank holds: 3 NVLink peers x 32 channels x
// 12 MiB.
TEST(CommBuffers, AClassHoldsWhatItsFullestRankHolds) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> module =
      ir::parse_module(sources.add("t.ir", R"(mesh world[a=2, e=4] devices [0, 1, 8, 9, 2, 3, 4, 5]
func @f {
  input %t on world : f32[4, 1024] sbp(e=S(0))
  %s = all_to_all(%t) {split_dim = 0, concat_dim = 0} on world over [e] : f32[4, 1024] sbp(e=S(0))
  return %s
}
)"),
                       diags);
  ASSERT_TRUE(module) << diags.error_count();
  const ir::Function& f = module->functions.front();
  ClusterSpec cluster = testing::preset_cluster("dgx-h100.toml", {.nodes = 2});
  const DeviceClasses classes(*module, f, true);
  ASSERT_EQ(classes.count(), 1u);
  EXPECT_EQ(comm_buffer_bytes(*module, f, classes, Topology(cluster), cluster),
            (std::vector<int64_t>{3 * 32 * 12 * kMiB}));
}

// DeepEP's buffers as Megatron-Core sizes them (worked in
// docs/research/deepep-buffers-and-sms.md): DeepSeek-V3's hidden 7168 in
// bf16 over 64 ranks on 8 nodes holds 360.2 MiB over NVLink, 350.5 MiB for
// RDMA and the 32 MiB workspace; hidden 4096 within one node, 200.2 MiB
// and the workspace.
TEST(CommBuffers, DeepEpBuffersAreFixedQueuesPerChannel) {
  EXPECT_EQ(deepep_buffer_bytes(64, 2 * 7168), 377677824 + 367550720 + (32LL << 20));
  EXPECT_EQ(deepep_buffer_bytes(8, 2 * 4096), 209880704 + (32LL << 20));
  EXPECT_NEAR(static_cast<double>(deepep_buffer_bytes(64, 2 * 7168)) / (1 << 20), 742.7, 0.1);
  // 16 nodes: 560 NVLink slots and 132 RDMA ones a channel, 700.4 and
  // 661.0 MiB (docs/research/deepep-buffers-and-sms.md).
  EXPECT_EQ(deepep_buffer_bytes(128, 2 * 7168), 734372864 + 693096960 + (32LL << 20));
}

}  // namespace
}  // namespace dstc::htae
