#include "htae/comm_buffers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "ir/groups.h"
#include "ir/registry.h"

namespace dstc::htae {

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// NCCL's connection buffers (src/include/device.h, src/init.cc): NCCL_STEPS
// slots of each protocol, the LL and LL128 ones sized by their threads.
constexpr int64_t kSteps = 8;
constexpr int64_t kLlBytes = 8 * 512 * kSteps * 16;      // lines per thread x threads x steps x line
constexpr int64_t kLl128Bytes = 120 * 640 * kSteps * 8;  // elements per thread x threads x steps x 8
constexpr int64_t kSimpleBytes = 4 * kMiB;               // NCCL_BUFFSIZE
constexpr int64_t kIpcGranule = 2 * kMiB;                // CUDA_IPC_MIN: allocations round up to it
constexpr int64_t kControlBytes = 4096;                  // ncclSendMem / ncclRecvMem, page-aligned heads

constexpr int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// One channel's P2P-transport buffers towards one NVLink peer (src/transport/
// p2p.cc): the receiver holds LL, LL128 and Simple slots, the sender its
// control block, each rounded to the IPC granule. With P2P read the Simple
// slots move to the sender; the sum stays 12 MiB.
constexpr int64_t kNvlinkChannelBytes =
    round_up(kControlBytes + kLlBytes + kLl128Bytes + kSimpleBytes, kIpcGranule) + round_up(kControlBytes, kIpcGranule);

// A network proxy's shared pool (src/transport/net.cc): NCCL_SHARED_STEPS
// chunks of NCCL_P2P_NET_CHUNKSIZE per p2p channel.
constexpr int64_t kSharedSteps = 16;
constexpr int64_t kNetChunkBytes = 128 * 1024;

// NVLink 3 and 4 lanes carry 25 GB/s per direction; NCCL counts a path's
// lanes (its bandwidth over one lane's) to give an NVLink peer two channels
// per lane.
constexpr double kNvlinkLaneBandwidth = 25e9;

int pow2_up(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

}  // namespace

bool is_deepep_exchange(const ir::Module& m, const ir::Function& f, const ir::Op& op) {
  return op.kind == ir::OpKind::AllToAll && ir::AttrReader(m, f, op).integer("copies") >= 1;
}

int64_t deepep_buffer_bytes(int64_t group, int64_t hidden_bytes) {
  constexpr int64_t kChannels = 10, kWorkspace = 32LL << 20;
  auto align128 = [](int64_t x) { return (x + 127) / 128 * 128; };
  const int64_t nvl_ranks = std::min<int64_t>(group, 8), nodes = std::max<int64_t>((group + 7) / 8, 1);
  // Receive slots per channel: Megatron's DeepEP configs by group size
  // (the hybrid-ep branch Megatron-Core's images install).
  const int64_t nvl_slots = group <= 8 ? 256 : group <= 64 ? 288 : group <= 128 ? 560 : 720;
  const int64_t rdma_slots = group == 16 || group == 64 ? 140 : group >= 128 ? 132 : 128;
  int64_t bytes = align128(kChannels * nvl_ranks * (4 * (2 * nodes + 3) + nvl_slots * (hidden_bytes + 2056)));
  if (group > 8) bytes += align128(kChannels * nodes * (144 + 2 * rdma_slots * (hidden_bytes + 2072)));
  return bytes + kWorkspace;
}

NcclP2pBuffers nccl_p2p_buffers(const Topology& topology, const ClusterSpec& cluster, std::span<const int64_t> group,
                                int64_t rank) {
  NcclP2pBuffers out;
  const int64_t node = topology.node_of(rank);
  const int local = topology.local_of(rank);
  const bool spans_nodes =
      std::any_of(group.begin(), group.end(), [&](int64_t d) { return topology.node_of(d) != node; });
  // The communicator's channels: one per SM its collectives hold
  // (RuntimeSpec), capped by NCCL_MAX_P2P_NCHANNELS.
  const int channels = static_cast<int>(
      std::clamp<int64_t>(spans_nodes ? cluster.runtime.collective_sms : cluster.runtime.intra_node_collective_sms, 1,
                          cluster.runtime.max_p2p_channels));
  const auto ranks = static_cast<int64_t>(group.size());
  // Channels per peer: the fewest any peer asks for (ncclTopoComputeP2pChannels).
  int fewest = channels;
  std::vector<int> local_members;
  bool all_nvlink = true;
  int64_t remote_peers = 0;
  for (int64_t peer : group) {
    if (topology.node_of(peer) == node) local_members.push_back(topology.local_of(peer));
    if (peer == rank) continue;
    int asked;
    if (topology.node_of(peer) == node) {
      const bool nvlink = topology.nvlink_between(local, topology.local_of(peer));
      all_nvlink = all_nvlink && nvlink;
      const double lanes = std::round(topology.route_bandwidth(rank, peer) / kNvlinkLaneBandwidth);
      asked = nvlink ? 2 * std::max(1, static_cast<int>(lanes)) : 2;
      if (nvlink) ++out.nvlink_peers;
    } else {
      // Two per network peer, halved while the peers would overload the
      // channels (at most 4 operations per channel); one NIC's worth.
      int per_net_peer = 2;
      while (per_net_peer * ranks > int64_t{channels} * 4 && per_net_peer > 1) per_net_peer /= 2;
      asked = per_net_peer;
      ++remote_peers;
    }
    fewest = std::min(fewest, asked);
  }
  const int p2p_channels = pow2_up(channels);
  out.channels_per_peer = std::min(pow2_up(fewest), p2p_channels);
  out.bytes = out.nvlink_peers * out.channels_per_peer * kNvlinkChannelBytes;
  // Network peers share the proxy's pools, in GPU memory where the NIC
  // reaches it directly (GPUDirect RDMA: a NIC per GPU). With PXN a rank's
  // proxy also sends for each local member that has a remote peer on its
  // rail; it receives only its own.
  if (remote_peers > 0 && topology.nic_per_gpu()) {
    const bool pxn = all_nvlink && local_members.size() > 1;
    int64_t send_pools = 1;
    if (pxn) {
      const bool rail_peer = std::any_of(group.begin(), group.end(), [&](int64_t d) {
        return topology.node_of(d) != node && topology.local_of(d) == local;
      });
      send_pools = rail_peer ? static_cast<int64_t>(local_members.size()) : 0;
    }
    out.network_pools = send_pools + 1;
    out.bytes += out.network_pools * p2p_channels * kSharedSteps * kNetChunkBytes;
  }
  return out;
}

std::vector<int64_t> comm_buffer_bytes(const ir::Module& m, const ir::Function& f, const DeviceClasses& classes,
                                       const Topology& topology, const ClusterSpec& cluster) {
  std::vector<int64_t> bytes(classes.count(), 0);
  // DeepEP's buffer is allocated once per process, sized for its largest
  // group and token.
  std::vector<int64_t> deepep(classes.count(), 0);
  // NCCL all-to-alls, by what decides their groups (device set, axes,
  // group list): each group is a communicator of its own.
  std::map<std::tuple<ir::DeviceSetId, uint16_t, uint32_t>, const ir::Op*> all_to_alls;
  for (const ir::Op& op : f.ops) {
    if (op.kind != ir::OpKind::AllToAll) continue;
    if (!is_deepep_exchange(m, f, op)) {
      all_to_alls.emplace(std::tuple{op.devices, op.group_axes, op.aux}, &op);
      continue;
    }
    const ir::TensorType& tokens = m.value_type(f, f.operands(op)[0]);
    const int64_t hidden = tokens.dim(tokens.rank - 1) * std::max<int64_t>(ir::dtype_bytes(tokens.dtype), 2);
    const int64_t size = deepep_buffer_bytes(ir::group_size(m, op), hidden);
    for (uint32_t c : classes.in_set(op.devices)) deepep[c] = std::max(deepep[c], size);
  }
  for (uint32_t c = 0; c < classes.count(); ++c) {
    const ir::Rank rank = classes.members(c).front();
    std::set<std::vector<ir::Rank>> communicators;
    for (const auto& [key, op] : all_to_alls) {
      std::vector<ir::Rank> group = ir::group_of(m, *op, rank);
      std::sort(group.begin(), group.end());
      if (group.size() < 2 || !communicators.insert(group).second) continue;
      const std::vector<int64_t> devices_of_group(group.begin(), group.end());
      bytes[c] += nccl_p2p_buffers(topology, cluster, devices_of_group, rank).bytes;
    }
    bytes[c] += deepep[c];
  }
  return bytes;
}

}  // namespace dstc::htae
