#include "htae/comm_buffers.h"

#include <algorithm>
#include <bit>
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
// slots move to the sender (6 and 6 MiB); NVIDIA/nccl#1685's H100s
// allocated 10 and 2.
constexpr int64_t kNvlinkReceiveBytes = round_up(kControlBytes + kLlBytes + kLl128Bytes + kSimpleBytes, kIpcGranule);
constexpr int64_t kNvlinkSendBytes = round_up(kControlBytes, kIpcGranule);

// A network proxy's shared pool (src/transport/net.cc): NCCL_SHARED_STEPS
// chunks of NCCL_P2P_NET_CHUNKSIZE per p2p channel.
constexpr int64_t kSharedSteps = 16;
constexpr int64_t kNetChunkBytes = 128 * 1024;

// NVLink 3 and 4 lanes carry 25 GB/s per direction; NCCL counts a path's
// lanes (its bandwidth over one lane's) to give an NVLink peer two channels
// per lane.
constexpr double kNvlinkLaneBandwidth = 25e9;

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

NcclP2pBuffers nccl_p2p_buffers(const Topology& topology, const ClusterSpec& cluster, std::span<const int64_t> members,
                                std::span<const std::pair<int64_t, int64_t>> sends, int64_t device) {
  NcclP2pBuffers out;
  const int64_t node = topology.node_of(device);
  const int local = topology.local_of(device);
  const bool spans_nodes =
      std::any_of(members.begin(), members.end(), [&](int64_t d) { return topology.node_of(d) != node; });
  // The communicator's channels: one per SM its collectives hold
  // (RuntimeSpec), capped by NCCL_MAX_P2P_NCHANNELS.
  const int channels = static_cast<int>(
      std::clamp<int64_t>(spans_nodes ? cluster.runtime.collective_sms : cluster.runtime.intra_node_collective_sms, 1,
                          cluster.runtime.max_p2p_channels));
  const auto ranks = static_cast<int64_t>(members.size());
  // Channels per peer: the fewest any member asks for, whether or not it
  // is sent to (ncclTopoComputeP2pChannels).
  int fewest = channels;
  std::vector<int> local_members;  // this node's members, by local index
  bool all_nvlink = true;
  for (int64_t peer : members) {
    if (topology.node_of(peer) == node) local_members.push_back(topology.local_of(peer));
    if (peer == device) continue;
    int asked;
    if (topology.node_of(peer) == node) {
      const bool nvlink = topology.nvlink_between(local, topology.local_of(peer));
      all_nvlink = all_nvlink && nvlink;
      const double lanes = std::floor(topology.route_bandwidth(device, peer) / kNvlinkLaneBandwidth + 1e-9);
      asked = nvlink ? 2 * std::max(1, static_cast<int>(lanes)) : 2;
    } else {
      // Two per network peer, halved while the peers would overload the
      // channels (at most 4 operations per channel); one NIC's worth.
      int per_net_peer = 2;
      while (per_net_peer * ranks > int64_t{channels} * 4 && per_net_peer > 1) per_net_peer /= 2;
      asked = per_net_peer;
    }
    fewest = std::min(fewest, asked);
  }
  const int p2p_channels = static_cast<int>(std::bit_ceil(static_cast<unsigned>(channels)));
  out.channels_per_peer = std::min(static_cast<int>(std::bit_ceil(static_cast<unsigned>(fewest))), p2p_channels);
  // A send leaves the node through its proxy: with PXN (every local GPU
  // on NVLink, a NIC each) the member of this node on the receiver's rail
  // where there is one (ncclTopoGetNetDev), else the sender's own. The
  // proxy holds a send pool per sender it serves; a receiver holds one
  // receive pool.
  const bool pxn = topology.nic_per_gpu() && all_nvlink && local_members.size() > 1;
  auto on_this_node = [&](int local_index) {
    return std::find(local_members.begin(), local_members.end(), local_index) != local_members.end();
  };
  std::set<int64_t> served;
  bool receives_remote = false;
  for (const auto& [from, to] : sends) {
    if (topology.node_of(from) == topology.node_of(to)) {
      if (from != device && to != device) continue;
      // GPUs without NVLink between them connect through host memory (SHM).
      if (!topology.nvlink_between(local, topology.local_of(from == device ? to : from))) continue;
      out.bytes += out.channels_per_peer * (from == device ? kNvlinkSendBytes : kNvlinkReceiveBytes);
      ++out.nvlink_connections;
    } else {
      if (to == device) receives_remote = true;
      if (topology.node_of(from) != node) continue;
      const bool relayed = pxn && on_this_node(topology.local_of(to));
      if ((relayed ? topology.local_of(to) : topology.local_of(from)) == local) served.insert(from);
    }
  }
  // The pools are GPU memory where a NIC serves the GPU (GPUDirect RDMA),
  // host memory otherwise.
  if (cluster.nic_of_gpu(local) >= 0) {
    out.network_pools = static_cast<int64_t>(served.size()) + (receives_remote ? 1 : 0);
    out.bytes += out.network_pools * p2p_channels * kSharedSteps * kNetChunkBytes;
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> all_to_all_sends(const Topology& topology, std::span<const int64_t> members,
                                                          int64_t device) {
  std::vector<std::pair<int64_t, int64_t>> sends;
  const int64_t node = topology.node_of(device);
  for (int64_t peer : members) {
    if (peer == device) continue;
    sends.emplace_back(device, peer);
    sends.emplace_back(peer, device);
    if (topology.node_of(peer) != node) continue;
    for (int64_t remote : members)
      if (topology.node_of(remote) != node) sends.emplace_back(peer, remote);
  }
  return sends;
}

namespace {

// A communicator's point-to-point traffic: every pair of its ranks (an
// all-to-all's group) or the sends listed.
struct P2pTraffic {
  bool all_to_all = false;
  std::set<std::pair<ir::Rank, ir::Rank>> sends;
};
using Communicators = std::map<std::vector<ir::Rank>, P2pTraffic>;  // by ranks, ascending

// The ranks that agree with `r` on every mesh axis outside `axes`.
std::vector<ir::Rank> ranks_along(const ir::Mesh& mesh, ir::Rank r, uint32_t axes) {
  std::vector<ir::Rank> group;
  for (ir::Rank x = 0; x < mesh.size(); ++x) {
    bool same = true;
    for (int a = 0; a < mesh.axis_count() && same; ++a)
      same = (axes & (1u << a)) || mesh.coord(x, a) == mesh.coord(r, a);
    if (same) group.push_back(x);
  }
  return group;
}

// Ring attention's exchange (cp_comm_type = p2p): a chunked all_gather
// attention reads, or a chunked reduce_scatter of its gradient, which
// Transformer Engine runs as sends to the next rank of the cp group.
bool is_ring_exchange(const ir::Module& m, const ir::Function& f, const ir::Op& op,
                      const std::vector<std::vector<ir::OpId>>& readers) {
  if (op.kind != ir::OpKind::AllGather && op.kind != ir::OpKind::ReduceScatter) return false;
  if (ir::AttrReader(m, f, op).integer("chunks") < 2) return false;
  if (op.kind == ir::OpKind::ReduceScatter) {
    const ir::OpId def = f.values[f.operands(op)[0]].def;
    return def != ir::kNone && f.ops[def].kind == ir::OpKind::AttentionGrad;
  }
  const std::vector<ir::OpId>& r = readers[op.first_result];
  return std::any_of(r.begin(), r.end(), [&](ir::OpId id) {
    return f.ops[id].kind == ir::OpKind::Attention || f.ops[id].kind == ir::OpKind::AttentionGrad;
  });
}

// Every NCCL all-to-all's group, ring attention's cp group and every
// send's communicator, with their traffic.
Communicators p2p_communicators(const ir::Module& m, const ir::Function& f) {
  Communicators out;
  const ir::Mesh& mesh = m.mesh();
  std::vector<std::vector<ir::OpId>> readers(f.values.size());
  for (ir::OpId id = 0; id < f.ops.size(); ++id)
    for (ir::ValueId v : f.operands(f.ops[id])) readers[v].push_back(id);
  std::set<std::tuple<ir::DeviceSetId, uint16_t, uint32_t>> collectives;
  std::set<std::pair<ir::DeviceSetId, uint32_t>> channels;
  std::map<std::vector<int32_t>, std::vector<ir::Rank>> along;  // (axes, coordinates outside them) -> ranks
  for (const ir::Op& op : f.ops) {
    const bool exchange = op.kind == ir::OpKind::AllToAll && !is_deepep_exchange(m, f, op);
    const bool ring = !exchange && is_ring_exchange(m, f, op, readers);
    if ((exchange || ring) && collectives.emplace(op.devices, op.group_axes, op.aux).second) {
      for (const std::vector<ir::Rank>& group : ir::groups_of(m, op)) {
        if (group.size() < 2) continue;
        std::vector<ir::Rank> ranks = group;
        std::sort(ranks.begin(), ranks.end());
        P2pTraffic& traffic = out[ranks];
        traffic.all_to_all = traffic.all_to_all || exchange;
        if (ring)
          for (size_t i = 0; i < group.size(); ++i) traffic.sends.emplace(group[i], group[(i + 1) % group.size()]);
      }
    }
    if (op.kind != ir::OpKind::Send || op.aux == ir::kNone || !channels.emplace(op.devices, op.aux).second) continue;
    std::span<const ir::Rank> senders = m.members(op.devices), receivers = m.members(op.aux);
    for (size_t k = 0; k < std::min(senders.size(), receivers.size()); ++k) {
      const ir::Rank from = senders[k], to = receivers[k];
      if (from == to) continue;
      uint32_t axes = 0;
      for (int a = 0; a < mesh.axis_count(); ++a)
        if (mesh.coord(from, a) != mesh.coord(to, a)) axes |= 1u << a;
      std::vector<int32_t> key{static_cast<int32_t>(axes)};
      for (int a = 0; a < mesh.axis_count(); ++a) key.push_back((axes & (1u << a)) ? -1 : mesh.coord(from, a));
      auto it = along.find(key);
      if (it == along.end()) it = along.emplace(key, ranks_along(mesh, from, axes)).first;
      out[it->second].sends.emplace(from, to);
    }
  }
  return out;
}

}  // namespace

std::vector<int64_t> comm_buffer_bytes(const ir::Module& m, const ir::Function& f, const DeviceClasses& classes,
                                       const Topology& topology, const ClusterSpec& cluster) {
  // DeepEP's buffer is allocated once per process, sized for its largest
  // group and token.
  std::vector<int64_t> deepep(classes.count(), 0);
  for (const ir::Op& op : f.ops) {
    if (!is_deepep_exchange(m, f, op)) continue;
    const ir::TensorType& tokens = m.value_type(f, f.operands(op)[0]);
    const int64_t hidden = tokens.dim(tokens.rank - 1) * std::max<int64_t>(ir::dtype_bytes(tokens.dtype), 2);
    const int64_t size = deepep_buffer_bytes(ir::group_size(m, op), hidden);
    for (uint32_t c : classes.in_set(op.devices)) deepep[c] = std::max(deepep[c], size);
  }
  // NCCL's, per rank: a class's ranks run the same program but may sit
  // differently in the cluster (a group within a node or across two), so
  // each is counted and the class holds the most.
  const ir::Mesh& mesh = m.mesh();
  std::vector<int64_t> nccl(static_cast<size_t>(mesh.size()), 0);
  for (const auto& [ranks, traffic] : p2p_communicators(m, f)) {
    std::vector<int64_t> members;
    for (ir::Rank r : ranks) members.push_back(mesh.physical(r));
    std::vector<std::pair<int64_t, int64_t>> listed;
    for (const auto& [from, to] : traffic.sends) listed.emplace_back(mesh.physical(from), mesh.physical(to));
    for (size_t i = 0; i < ranks.size(); ++i) {
      // An all-to-all already sends between every pair.
      const std::vector<std::pair<int64_t, int64_t>> sends =
          traffic.all_to_all ? all_to_all_sends(topology, members, members[i]) : listed;
      nccl[static_cast<size_t>(ranks[i])] += nccl_p2p_buffers(topology, cluster, members, sends, members[i]).bytes;
    }
  }
  std::vector<int64_t> bytes(classes.count(), 0);
  for (uint32_t c = 0; c < classes.count(); ++c) {
    for (ir::Rank r : classes.members(c)) bytes[c] = std::max(bytes[c], nccl[static_cast<size_t>(r)]);
    bytes[c] += deepep[c];
  }
  return bytes;
}

}  // namespace dstc::htae
