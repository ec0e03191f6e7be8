#include <gtest/gtest.h>

#include "htae/cluster_spec.h"
#include "htae/topology.h"

namespace dstc::htae {
namespace {

std::string preset(const std::string& name) { return std::string(DSTC_SOURCE_DIR) + "/stdlib/clusters/" + name; }

ClusterSpec load_preset(const std::string& name, ClusterOverrides overrides = {}) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ClusterSpec> spec = load_cluster(sources, diags, preset(name), overrides);
  EXPECT_TRUE(spec) << name;
  EXPECT_EQ(diags.diagnostics().size(), 0u) << name;
  return spec.value_or(ClusterSpec{});
}

TEST(Cluster, DgxA100ScalesToMoreNodes) {
  ClusterSpec spec = load_preset("dgx-a100.toml", {.nodes = 128});
  EXPECT_EQ(spec.nodes, 128);
  EXPECT_EQ(spec.num_devices(), 1024);
  EXPECT_EQ(spec.gpu.memory_bytes, 80LL << 30);
  EXPECT_DOUBLE_EQ(spec.gpu.peak(ComputeDtype::Bf16), 312e12);
  EXPECT_EQ(spec.network.nics.size(), 8u);
  EXPECT_EQ(spec.nic_of_gpu(5), 5);
}

TEST(Cluster, MissingPrecisionFallsBackToFp32) {
  ClusterSpec spec = load_preset("titanxp-pcie-8.toml");
  EXPECT_DOUBLE_EQ(spec.gpu.peak(ComputeDtype::Fp16), 12.15e12);
}

TEST(Cluster, ErrorsPointAtTheValueInTheFile) {
  SourceManager sources;
  sources.add("c.toml",
              "name = \"x\"\ngpus_per_node = 2\n[gpu]\nname = \"g\"\nmemory_bytes = 0\nhbm_bandwidth = 1e12\n"
              "launch_overhead = 0\n[gpu.peak_flops]\nfp32 = 1e12\n[intra_node]\nkind = \"nvswitch\"\nlatency = 0\n"
              "gpu_bandwidth = 1e11\n");
  DiagnosticEngine diags(sources);
  EXPECT_FALSE(load_cluster(sources, diags, "c.toml"));
  ASSERT_EQ(diags.diagnostics().size(), 1u);
  EXPECT_EQ(diags.diagnostics()[0].kind.name, "config-bad-value");
  EXPECT_EQ(diags.location(diags.diagnostics()[0].range), "c.toml:5:16");
}

const char* kSmallCluster =
    "name = \"x\"\ngpus_per_node = 2\n[gpu]\nname = \"g\"\nmemory_bytes = 1000000000\nhbm_bandwidth = 1e12\n"
    "launch_overhead = 0\n[gpu.peak_flops]\nfp32 = 1e12\n[intra_node]\nkind = \"nvswitch\"\nlatency = 0\n"
    "gpu_bandwidth = 1e11\n[runtime]\n";

// kSmallCluster with these [runtime] lines, loaded.
struct SmallCluster {
  explicit SmallCluster(const std::string& runtime) {
    sources.add("c.toml", std::string(kSmallCluster) + runtime);
    spec = load_cluster(sources, diags, "c.toml");
  }
  SourceManager sources;
  DiagnosticEngine diags{sources};
  std::optional<ClusterSpec> spec;
};

TEST(Cluster, PrefetchGathersDefaultsToTwoAndIsRead) {
  for (auto [runtime, expected] :
       {std::pair{"", 2}, std::pair{"prefetch_gathers = 0\n", 0}, std::pair{"prefetch_gathers = 5\n", 5}}) {
    SmallCluster c(runtime);
    ASSERT_TRUE(c.spec) << runtime;
    EXPECT_EQ(c.spec->runtime.prefetch_gathers, expected) << runtime;
  }
}

TEST(Cluster, NegativePrefetchGathersIsAnError) {
  SmallCluster c("prefetch_gathers = -1\n");
  EXPECT_FALSE(c.spec);
  ASSERT_EQ(c.diags.diagnostics().size(), 1u);
  EXPECT_EQ(c.diags.diagnostics()[0].kind.name, "config-bad-value");
  EXPECT_EQ(c.diags.location(c.diags.diagnostics()[0].range), "c.toml:15:20");
}

// NCCL_MAX_P2P_NCHANNELS: 64 (MAXCHANNELS) unless given; 1 to 64.
TEST(Cluster, MaxP2pChannelsDefaultsToNcclsMaximumAndIsBounded) {
  for (auto [runtime, expected] : {std::pair{"", 64}, std::pair{"max_p2p_channels = 8\n", 8}}) {
    SmallCluster c(runtime);
    ASSERT_TRUE(c.spec) << runtime;
    EXPECT_EQ(c.spec->runtime.max_p2p_channels, expected) << runtime;
  }
  for (const char* bad : {"max_p2p_channels = 0\n", "max_p2p_channels = 65\n"}) {
    SmallCluster c(bad);
    EXPECT_FALSE(c.spec) << bad;
    ASSERT_EQ(c.diags.diagnostics().size(), 1u) << bad;
    EXPECT_EQ(c.diags.diagnostics()[0].kind.name, "config-bad-value");
    EXPECT_EQ(c.diags.location(c.diags.diagnostics()[0].range), "c.toml:15:20");
  }
}

TEST(Topology, NvswitchRouteIsTwoLinksThroughTheSwitch) {
  Topology topo(load_preset("dgx-a100.toml"));
  std::vector<LinkId> route = topo.route(0, 7);
  ASSERT_EQ(route.size(), 2u);
  EXPECT_EQ(topo.link_name(route[0]), "node 0 GPU 0 -> node 0 NVSwitch (nvswitch)");
  EXPECT_EQ(topo.link_name(route[1]), "node 0 NVSwitch -> node 0 GPU 7 (nvswitch)");
  EXPECT_DOUBLE_EQ(topo.route_bandwidth(0, 7), 300e9);
  EXPECT_DOUBLE_EQ(topo.route_latency(0, 7), 2e-6);
  EXPECT_TRUE(topo.route(3, 3).empty());
}

TEST(Topology, InterNodeRouteGoesThroughBothNics) {
  Topology topo(load_preset("dgx-a100.toml", {.nodes = 512}));
  EXPECT_EQ(topo.num_devices(), 4096);
  std::vector<LinkId> route = topo.route(2, 4095);
  ASSERT_EQ(route.size(), 4u);
  EXPECT_EQ(topo.link_name(route[0]), "node 0 GPU 2 -> node 0 NIC 2 (gpu-nic)");
  EXPECT_EQ(topo.link_name(route[1]), "node 0 NIC 2 -> network (nic-up)");
  EXPECT_EQ(topo.link_name(route[2]), "network -> node 511 NIC 7 (nic-down)");
  EXPECT_EQ(topo.link_name(route[3]), "node 511 NIC 7 -> node 511 GPU 7 (gpu-nic)");
  EXPECT_DOUBLE_EQ(topo.route_bandwidth(2, 4095), 25e9);
  EXPECT_DOUBLE_EQ(topo.route_latency(2, 4095), 1e-6 + 5e-6 + 1e-6);
}

TEST(Topology, PcieRouteCrossesTheSocketLink) {
  Topology topo(load_preset("titanxp-pcie-8.toml"));
  std::vector<LinkId> same_switch = topo.route(0, 1);
  EXPECT_EQ(same_switch.size(), 2u);
  std::vector<LinkId> route = topo.route(0, 7);
  ASSERT_EQ(route.size(), 5u);
  EXPECT_EQ(topo.link_name(route[2]), "node 0 socket 0 -> node 0 socket 1 (socket)");
  EXPECT_DOUBLE_EQ(topo.route_bandwidth(0, 7), 15.75e9);
}

TEST(Topology, MeshRoutesUnlinkedPairsOverTheFastestTwoHops) {
  Topology topo(load_preset("v100-nvlink-4x8.toml"));
  // GPUs 0 and 3 share two NVLinks; 0 and 5 share none.
  EXPECT_EQ(topo.route(0, 3).size(), 1u);
  EXPECT_DOUBLE_EQ(topo.route_bandwidth(0, 3), 50e9);
  std::vector<LinkId> route = topo.route(0, 5);
  ASSERT_EQ(route.size(), 2u);
  // Via GPU 4 (0-4 double, 4-5 single) or GPU 1 (0-1 single, 1-5 double).
  EXPECT_DOUBLE_EQ(topo.route_bandwidth(0, 5), 25e9);
}

}  // namespace
}  // namespace dstc::htae
