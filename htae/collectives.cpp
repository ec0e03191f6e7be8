#include "htae/collectives.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

namespace dstc::htae {
namespace {

// Appends to `phase` a ring over `ring`: each member sends `bytes` to the
// next. Every transfer pays `steps` x the ring's average hop latency.
void add_ring(const Topology& topology, CollectivePhase& phase, std::span<const int64_t> ring, double bytes,
              int steps) {
  size_t p = ring.size();
  double around = 0;
  for (size_t i = 0; i < p; ++i) around += topology.route_latency(ring[i], ring[(i + 1) % p]);
  double latency = steps * around / static_cast<double>(p);
  for (size_t i = 0; i < p; ++i) phase.transfers.push_back({ring[i], ring[(i + 1) % p], bytes, latency});
}

// Appends a pipelined chain from ring[root] through the ring: broadcast (or,
// with `reverse`, reduce towards the root). A chunk crosses every hop.
void add_chain(const Topology& topology, CollectivePhase& phase, std::span<const int64_t> ring, size_t root,
               double bytes, bool reverse) {
  size_t p = ring.size();
  double path = 0;
  for (size_t i = 0; i + 1 < p; ++i) path += topology.route_latency(ring[(root + i) % p], ring[(root + i + 1) % p]);
  for (size_t i = 0; i + 1 < p; ++i) {
    int64_t a = ring[(root + i) % p], b = ring[(root + i + 1) % p];
    phase.transfers.push_back(reverse ? Transfer{b, a, bytes, path} : Transfer{a, b, bytes, path});
  }
}

// The group's members by node, nodes in order of first appearance.
std::vector<std::vector<int64_t>> by_node(const Topology& topology, std::span<const int64_t> group) {
  std::vector<std::vector<int64_t>> nodes;
  std::map<int64_t, size_t> index;
  for (int64_t d : group) {
    auto [it, inserted] = index.emplace(topology.node_of(d), nodes.size());
    if (inserted) nodes.emplace_back();
    nodes[it->second].push_back(d);
  }
  return nodes;
}

// The rings a ring collective runs on: the group itself inside one node;
// over several nodes, one channel per member of the smallest node, channel
// j entering each node at its j-th member (NCCL's ring search gives each
// channel its own NIC pair, so a node's traffic spreads over its NICs).
std::vector<std::vector<int64_t>> ring_channels(const Topology& topology, std::span<const int64_t> group) {
  std::vector<std::vector<int64_t>> nodes = by_node(topology, group);
  if (nodes.size() < 2) return {std::vector<int64_t>(group.begin(), group.end())};
  size_t channels = group.size();
  for (const auto& members : nodes) channels = std::min(channels, members.size());
  std::vector<std::vector<int64_t>> rings(channels);
  for (size_t j = 0; j < channels; ++j) {
    for (const auto& members : nodes) {
      for (size_t i = 0; i < members.size(); ++i) rings[j].push_back(members[(i + j) % members.size()]);
    }
  }
  return rings;
}

int ceil_log2(size_t p) {
  int bits = 0;
  while ((size_t{1} << bits) < p) ++bits;
  return bits;
}

// NCCL's double binary tree: two trees, each carrying half the data up
// (reduce) and down (broadcast), pipelined. Tree 0 is a binary heap over the
// group order; tree 1 is the same over the group shifted by one, so most
// ranks are leaves in one tree and inner nodes in the other.
CollectivePhase double_tree_phase(const Topology& topology, std::span<const int64_t> group, double bytes, bool up,
                                  bool down) {
  CollectivePhase phase;
  size_t p = group.size();
  phase.steps = (up ? 1 : 0) * ceil_log2(p) + (down ? 1 : 0) * ceil_log2(p);
  auto edge = [&](int64_t src, int64_t dst) {
    phase.transfers.push_back({src, dst, bytes / 2, phase.steps * topology.route_latency(src, dst)});
  };
  for (size_t shift = 0; shift < 2; ++shift) {
    for (size_t i = 1; i < p; ++i) {
      int64_t child = group[(i + shift) % p], parent = group[((i - 1) / 2 + shift) % p];
      if (up) edge(child, parent);
      if (down) edge(parent, child);
    }
  }
  return phase;
}

// The group's devices by node, when every node holds the same number (> 1)
// of them and there are several nodes; empty otherwise.
std::vector<std::vector<int64_t>> balanced_nodes(const Topology& topology, std::span<const int64_t> group) {
  std::vector<std::vector<int64_t>> nodes = by_node(topology, group);
  if (nodes.size() < 2 || nodes[0].size() < 2) return {};
  for (const auto& members : nodes) {
    if (members.size() != nodes[0].size()) return {};
  }
  return nodes;
}

// An all-to-all as NCCL sends it (every pair at once, `block` bytes each),
// with PXN, NCCL's default since 2.12 (NCCL_P2P_PXN_LEVEL=2): a block for a
// GPU on another node leaves through the NIC of the rail the receiver is on
// (the NIC serving the local GPU with the receiver's local index), handed
// over NVLink to that GPU, which sends it on. So a node's traffic to one
// rail of another node crosses the network as one aggregated transfer. A
// sender with no group member of the receiver's index on its node, or no
// NVLink to it, sends through its own NIC, as do GPUs that share NICs
// (there NCCL's proxy is whichever GPU is nearest the NIC; not modelled). Transfers between the same two
// GPUs are merged; the two legs run at once, as NCCL pipelines them.
CollectivePhase all_to_all_phase(const Topology& topology, std::span<const int64_t> group, double block) {
  CollectivePhase phase;
  // The member of the group on `node` with local index `local`, or -1.
  std::map<std::pair<int64_t, int>, int64_t> member;
  for (int64_t d : group) member[{topology.node_of(d), topology.local_of(d)}] = d;
  std::map<std::pair<int64_t, int64_t>, size_t> index;
  const bool pxn = topology.nic_per_gpu();
  auto add = [&](int64_t a, int64_t b, double latency) {
    auto [it, inserted] = index.emplace(std::pair{a, b}, phase.transfers.size());
    if (inserted) {
      phase.transfers.push_back({a, b, block, latency});
      return;
    }
    Transfer& t = phase.transfers[it->second];
    t.bytes += block;
    t.latency = std::max(t.latency, latency);
  };
  for (int64_t a : group) {
    for (int64_t b : group) {
      if (a == b) continue;
      int64_t via = -1;
      if (pxn && topology.node_of(a) != topology.node_of(b)) {
        auto it = member.find({topology.node_of(a), topology.local_of(b)});
        if (it != member.end() && it->second != a &&
            topology.nvlink_between(topology.local_of(a), topology.local_of(it->second)))
          via = it->second;
      }
      if (via < 0) {
        add(a, b, topology.route_latency(a, b));
      } else {
        double hop = topology.route_latency(a, via);
        add(a, via, hop);
        add(via, b, hop + topology.route_latency(via, b));
      }
    }
  }
  return phase;
}

// The share of tokens, each choosing `k` of `experts` uniformly, that
// choose at least one of `held` given experts.
double reach(int64_t experts, int64_t held, int64_t k) {
  double miss = 1;
  for (int64_t i = 0; i < k; ++i)
    miss *= std::max<double>(0, static_cast<double>(experts - held - i)) / static_cast<double>(experts - i);
  return 1 - miss;
}

CollectivePlan make_plan(const Topology& topology, CollectiveKind kind, std::span<const int64_t> group, double bytes,
                         CollectiveAlgorithm algorithm, size_t root) {
  CollectivePlan plan{kind, algorithm, {}};
  auto p = static_cast<int64_t>(group.size());
  auto pd = static_cast<double>(p);
  if (p < 2) return plan;
  int steps = static_cast<int>(ring_steps(kind, p));
  switch (algorithm) {
    case CollectiveAlgorithm::Direct: {
      CollectivePhase phase;
      auto add = [&](int64_t a, int64_t b, double n) {
        phase.transfers.push_back({a, b, n, topology.route_latency(a, b)});
      };
      if (kind == CollectiveKind::SendRecv) {
        add(group[0], group[1], bytes);
      } else {
        phase = all_to_all_phase(topology, group, bytes / pd);
      }
      plan.phases.push_back(std::move(phase));
      break;
    }
    case CollectiveAlgorithm::Ring: {
      CollectivePhase phase;
      if (kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce) {
        phase.steps = static_cast<int>(p - 1);
        add_chain(topology, phase, group, root, bytes, kind == CollectiveKind::Reduce);
      } else {
        phase.steps = steps;
        std::vector<std::vector<int64_t>> rings = ring_channels(topology, group);
        double share = bytes * bus_bandwidth_factor(kind, p) / static_cast<double>(rings.size());
        for (const auto& ring : rings) add_ring(topology, phase, ring, share, steps);
      }
      plan.phases.push_back(std::move(phase));
      break;
    }
    case CollectiveAlgorithm::Tree:
      plan.phases.push_back(
          double_tree_phase(topology, group, bytes, kind != CollectiveKind::Broadcast, kind != CollectiveKind::Reduce));
      break;
    case CollectiveAlgorithm::Hierarchical: {
      // Reduce-scatter inside each node, all-reduce of each shard across
      // nodes (one ring per local position), all-gather inside each node.
      std::vector<std::vector<int64_t>> nodes = balanced_nodes(topology, group);
      if (nodes.empty()) throw std::logic_error("hierarchical collective over an unbalanced group");
      auto k = static_cast<double>(nodes[0].size());
      auto n = static_cast<double>(nodes.size());
      CollectivePhase intra_rs, inter, intra_ag;
      intra_rs.steps = intra_ag.steps = static_cast<int>(k - 1);
      inter.steps = static_cast<int>(2 * (n - 1));
      for (const auto& members : nodes) add_ring(topology, intra_rs, members, bytes * (k - 1) / k, intra_rs.steps);
      intra_ag.transfers = intra_rs.transfers;
      for (size_t j = 0; j < nodes[0].size(); ++j) {
        std::vector<int64_t> across;
        for (const auto& members : nodes) across.push_back(members[j]);
        add_ring(topology, inter, across, bytes / k * 2 * (n - 1) / n, inter.steps);
      }
      plan.phases = {std::move(intra_rs), std::move(inter), std::move(intra_ag)};
      break;
    }
  }
  return plan;
}

}  // namespace

double bus_bandwidth_factor(CollectiveKind kind, int64_t p) {
  auto pd = static_cast<double>(p);
  switch (kind) {
    case CollectiveKind::AllReduce: return 2 * (pd - 1) / pd;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllToAll: return (pd - 1) / pd;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
    case CollectiveKind::SendRecv: return 1;
  }
  return 1;
}

int64_t ring_steps(CollectiveKind kind, int64_t p) {
  switch (kind) {
    case CollectiveKind::AllReduce: return 2 * (p - 1);
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce: return p - 1;
    case CollectiveKind::AllToAll:
    case CollectiveKind::SendRecv: return 1;
  }
  return 1;
}

double alpha_beta_time(CollectiveKind kind, int64_t p, double bytes, double alpha, double bus_bandwidth) {
  if (p < 2) return 0;
  return static_cast<double>(ring_steps(kind, p)) * alpha + bytes * bus_bandwidth_factor(kind, p) / bus_bandwidth;
}

CollectivePlan deduplicated_all_to_all(const Topology& topology, std::span<const int64_t> group, double bytes,
                                       int64_t copies, int64_t experts, ExpertGroups groups) {
  CollectivePlan plan{CollectiveKind::AllToAll, CollectiveAlgorithm::Direct, {}};
  const auto members = static_cast<int64_t>(group.size());
  if (members < 2) return plan;
  std::vector<std::vector<int64_t>> nodes = by_node(topology, group);
  const size_t per_node = nodes[0].size();
  bool even = copies > 1 && copies <= experts && experts % members == 0;
  for (const auto& node : nodes) {
    even = even && node.size() == per_node;
    for (size_t i = 0; even && i < node.size(); ++i)
      for (size_t j = 0; even && j < node.size(); ++j)
        even = i == j || topology.nvlink_between(topology.local_of(node[i]), topology.local_of(node[j]));
  }
  if (!even) {
    plan.phases.push_back(all_to_all_phase(topology, group, bytes / static_cast<double>(members)));
    return plan;
  }
  const double tokens = bytes / static_cast<double>(copies);  // a member's tokens, once each
  const auto n = static_cast<int64_t>(nodes.size());
  double node_share = reach(experts, experts / n, copies);
  double gpu_share = reach(experts, experts / members, copies);
  if (groups.count == n && groups.kept > 0 && groups.kept < n) {
    const auto kept = static_cast<double>(groups.kept);
    node_share = std::min(kept, static_cast<double>(n) * node_share) / static_cast<double>(n);
    gpu_share = kept / static_cast<double>(n) * reach(groups.kept * (experts / n), experts / members, copies);
  }
  const double to_node = tokens * node_share;
  // What a GPU forwards to each other GPU of its node: every rail's tokens for it.
  const double to_gpu = static_cast<double>(n) * tokens * gpu_share;
  CollectivePhase phase;
  for (size_t m = 0; m < nodes.size(); ++m) {
    for (size_t i = 0; i < per_node; ++i) {
      double arrival = 0;  // the network leg's latency into this GPU
      for (size_t a = 0; a < nodes.size(); ++a) {
        if (a == m) continue;
        double latency = topology.route_latency(nodes[a][i], nodes[m][i]);
        phase.transfers.push_back({nodes[a][i], nodes[m][i], to_node, latency});
        arrival = std::max(arrival, latency);
      }
      for (size_t j = 0; j < per_node; ++j)
        if (j != i)
          phase.transfers.push_back(
              {nodes[m][i], nodes[m][j], to_gpu, arrival + topology.route_latency(nodes[m][i], nodes[m][j])});
    }
  }
  plan.phases.push_back(std::move(phase));
  return plan;
}

CollectivePlan plan_collective(const Topology& topology, CollectiveKind kind, std::span<const int64_t> group,
                               double bytes, std::optional<CollectiveAlgorithm> algorithm, size_t root) {
  if (kind == CollectiveKind::SendRecv && group.size() != 2) {
    throw std::invalid_argument(fmt::format("send_recv needs a group of 2 devices, not {}", group.size()));
  }
  if (root >= std::max<size_t>(group.size(), 1)) throw std::invalid_argument("collective root outside the group");
  if (algorithm) return make_plan(topology, kind, group, bytes, *algorithm, root);
  std::vector<CollectiveAlgorithm> candidates;
  switch (kind) {
    case CollectiveKind::SendRecv:
    case CollectiveKind::AllToAll: candidates = {CollectiveAlgorithm::Direct}; break;
    case CollectiveKind::AllReduce:
      candidates = {CollectiveAlgorithm::Ring};
      if (group.size() > 2) candidates.push_back(CollectiveAlgorithm::Tree);
      if (!balanced_nodes(topology, group).empty()) candidates.push_back(CollectiveAlgorithm::Hierarchical);
      break;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
      candidates = {CollectiveAlgorithm::Ring};
      if (root == 0 && group.size() > 2) candidates.push_back(CollectiveAlgorithm::Tree);
      break;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter: candidates = {CollectiveAlgorithm::Ring}; break;
  }
  CollectivePlan best = make_plan(topology, kind, group, bytes, candidates[0], root);
  double best_time = plan_time(topology, best);
  for (size_t i = 1; i < candidates.size(); ++i) {
    CollectivePlan plan = make_plan(topology, kind, group, bytes, candidates[i], root);
    double t = plan_time(topology, plan);
    if (t < best_time) best_time = t, best = std::move(plan);
  }
  return best;
}

double plan_time(const Topology& topology, const CollectivePlan& plan, double efficiency, bool contention) {
  double total = 0;
  std::unordered_map<LinkId, double> load;
  std::vector<LinkId> route;
  for (const CollectivePhase& phase : plan.phases) {
    double latency = 0, drain = 0;
    load.clear();
    for (const Transfer& t : phase.transfers) {
      latency = std::max(latency, t.latency);
      if (!contention) {
        drain = std::max(drain, t.bytes / (topology.route_bandwidth(t.src, t.dst) * efficiency));
        continue;
      }
      route.clear();
      topology.route(t.src, t.dst, route);
      for (LinkId l : route) load[l] += t.bytes;
    }
    for (const auto& [l, bytes] : load) drain = std::max(drain, bytes / (topology.link(l).capacity * efficiency));
    total += latency + drain;
  }
  return total;
}

}  // namespace dstc::htae
