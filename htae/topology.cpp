#include "htae/topology.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>

namespace dstc::htae {
namespace {

constexpr uint32_t kNetwork = std::numeric_limits<uint32_t>::max();
// Routes minimise the time a message of this size takes, summed over the
// links (latency plus size over capacity): the fastest path, fewest hops
// among equals.
constexpr double kRouteProbeBytes = 1 << 20;

struct EdgeProps {
  LinkId link;
  double weight;
};
using NodeGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;

}  // namespace

std::string_view link_kind_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::NvLink: return "nvlink";
    case LinkKind::NvSwitch: return "nvswitch";
    case LinkKind::Pcie: return "pcie";
    case LinkKind::Socket: return "socket";
    case LinkKind::GpuNic: return "gpu-nic";
    case LinkKind::NicUplink: return "nic-up";
    case LinkKind::NicDownlink: return "nic-down";
  }
  return "link";
}

uint32_t Topology::add_vertex(VertexKind kind, int index) {
  node_vertices_.push_back({kind, index});
  return static_cast<uint32_t>(node_vertices_.size() - 1);
}

void Topology::add_link_pair(LinkKind kind, uint32_t a, uint32_t b, double capacity, double latency) {
  node_links_.push_back({kind, capacity, latency, a, b});
  node_links_.push_back({kind, capacity, latency, b, a});
}

Topology::Topology(const ClusterSpec& spec) : nodes_(spec.nodes), gpus_per_node_(spec.gpus_per_node) {
  const IntraNodeSpec& intra = spec.intra_node;
  for (int g = 0; g < gpus_per_node_; ++g) add_vertex(VertexKind::Gpu, g);
  switch (intra.kind) {
    case IntraNodeKind::NvSwitch: {
      uint32_t fabric = add_vertex(VertexKind::NvSwitch, 0);
      for (int g = 0; g < gpus_per_node_; ++g) {
        add_link_pair(LinkKind::NvSwitch, static_cast<uint32_t>(g), fabric, intra.gpu_bandwidth, intra.latency);
      }
      break;
    }
    case IntraNodeKind::NvLinkMesh:
      for (const NvlinkPair& p : intra.links) {
        add_link_pair(LinkKind::NvLink, static_cast<uint32_t>(p.a), static_cast<uint32_t>(p.b),
                      intra.link_bandwidth * p.links, intra.latency);
      }
      break;
    case IntraNodeKind::Pcie: {
      std::vector<uint32_t> sockets;
      for (int s = 0; s < intra.sockets; ++s) sockets.push_back(add_vertex(VertexKind::CpuSocket, s));
      for (int a = 0; a < intra.sockets; ++a) {
        for (int b = a + 1; b < intra.sockets; ++b) {
          add_link_pair(LinkKind::Socket, sockets[a], sockets[b], intra.socket_link_bandwidth, intra.latency);
        }
      }
      for (size_t i = 0; i < intra.switches.size(); ++i) {
        const PcieSwitch& sw = intra.switches[i];
        uint32_t v = add_vertex(VertexKind::PcieSwitch, static_cast<int>(i));
        add_link_pair(LinkKind::Pcie, v, sockets[sw.socket], sw.uplink_bandwidth, intra.latency);
        for (int g : sw.gpus)
          add_link_pair(LinkKind::Pcie, static_cast<uint32_t>(g), v, intra.gpu_bandwidth, intra.latency);
      }
      break;
    }
  }
  // NICs: each served GPU reaches its NIC directly (GPUDirect RDMA through
  // the PCIe switch, at the NIC's rate); the NIC's up and down links into
  // the network core are what the node's GPUs share.
  nic_latency_ = spec.network.nic_latency;
  for (size_t n = 0; n < spec.network.nics.size(); ++n) {
    uint32_t nic = add_vertex(VertexKind::Nic, static_cast<int>(n));
    for (int g : spec.network.nics[n].gpus) {
      add_link_pair(LinkKind::GpuNic, static_cast<uint32_t>(g), nic, spec.network.nic_bandwidth, intra.latency);
    }
  }
  compute_routes(spec);
}

void Topology::compute_routes(const ClusterSpec& spec) {
  NodeGraph graph(node_vertices_.size());
  for (LinkId id = 0; id < node_links_.size(); ++id) {
    const Link& l = node_links_[id];
    boost::add_edge(l.from, l.to, EdgeProps{id, l.latency + kRouteProbeBytes / l.capacity}, graph);
  }
  auto shortest_from = [&](uint32_t source) {
    std::vector<NodeGraph::vertex_descriptor> pred(node_vertices_.size());
    std::vector<double> dist(node_vertices_.size());
    boost::dijkstra_shortest_paths(graph, source,
                                   boost::weight_map(boost::get(&EdgeProps::weight, graph))
                                       .predecessor_map(pred.data())
                                       .distance_map(dist.data()));
    return pred;
  };
  auto path_to = [&](const std::vector<NodeGraph::vertex_descriptor>& pred, uint32_t source, uint32_t target) {
    LocalRoute r;
    r.bandwidth = std::numeric_limits<double>::infinity();
    for (uint32_t v = target; v != source;) {
      uint32_t u = static_cast<uint32_t>(pred[v]);
      if (u == v) throw std::logic_error(fmt::format("topology: no route to vertex {}", v));
      auto [edge, found] = boost::edge(u, v, graph);
      LinkId id = graph[edge].link;
      r.links.push_back(id);
      r.latency += node_links_[id].latency;
      r.bandwidth = std::min(r.bandwidth, node_links_[id].capacity);
      v = u;
    }
    std::reverse(r.links.begin(), r.links.end());
    return r;
  };

  int g = gpus_per_node_;
  intra_routes_.resize(static_cast<size_t>(g) * g);
  to_nic_.resize(g);
  from_nic_.resize(g);
  std::vector<LinkId> uplink, downlink;
  for (size_t n = 0; n < spec.network.nics.size(); ++n) {
    uint32_t nic = static_cast<uint32_t>(
        std::find_if(node_vertices_.begin(), node_vertices_.end(),
                     [&](const Vertex& v) { return v.kind == VertexKind::Nic && v.index == static_cast<int>(n); }) -
        node_vertices_.begin());
    uplink.push_back(static_cast<LinkId>(node_links_.size()));
    node_links_.push_back({LinkKind::NicUplink, spec.network.nic_bandwidth, nic_latency_ / 2, nic, kNetwork});
    downlink.push_back(static_cast<LinkId>(node_links_.size()));
    node_links_.push_back({LinkKind::NicDownlink, spec.network.nic_bandwidth, nic_latency_ / 2, kNetwork, nic});
  }
  auto nic_vertex = [&](int n) { return node_links_[uplink[n]].from; };
  for (int a = 0; a < g; ++a) {
    auto pred = shortest_from(static_cast<uint32_t>(a));
    for (int b = 0; b < g; ++b) {
      if (a != b) intra_routes_[static_cast<size_t>(a) * g + b] = path_to(pred, a, b);
    }
    int nic = spec.nic_of_gpu(a);
    if (nic < 0) continue;
    LocalRoute& out = to_nic_[a];
    out = path_to(pred, a, nic_vertex(nic));
    out.links.push_back(uplink[nic]);
    out.latency += nic_latency_ / 2;
    out.bandwidth = std::min(out.bandwidth, spec.network.nic_bandwidth);
  }
  std::vector<int> served(uplink.size(), 0);
  for (int a = 0; a < g; ++a)
    if (int nic = spec.nic_of_gpu(a); nic >= 0) ++served[static_cast<size_t>(nic)];
  nic_per_gpu_ = !uplink.empty() && static_cast<int>(uplink.size()) == g &&
                 std::all_of(served.begin(), served.end(), [](int n) { return n == 1; });
  for (size_t n = 0; n < uplink.size(); ++n) {
    auto pred = shortest_from(nic_vertex(static_cast<int>(n)));
    for (int b = 0; b < g; ++b) {
      if (spec.nic_of_gpu(b) != static_cast<int>(n)) continue;
      LocalRoute tail = path_to(pred, nic_vertex(static_cast<int>(n)), b);
      LocalRoute& in = from_nic_[b];
      in.links = {downlink[n]};
      in.links.insert(in.links.end(), tail.links.begin(), tail.links.end());
      in.latency = nic_latency_ / 2 + tail.latency;
      in.bandwidth = std::min(tail.bandwidth, spec.network.nic_bandwidth);
    }
  }
}

bool Topology::nvlink_between(int a, int b) const {
  if (a == b) return true;
  const LocalRoute& r = intra(a, b);
  if (r.links.empty()) return false;
  for (LinkId l : r.links) {
    LinkKind kind = node_links_[l].kind;
    if (kind != LinkKind::NvLink && kind != LinkKind::NvSwitch) return false;
  }
  return true;
}

Link Topology::link(LinkId id) const {
  size_t per_node = node_links_.size();
  uint32_t node = static_cast<uint32_t>(id / per_node);
  Link l = node_links_[id % per_node];
  uint32_t base = node * static_cast<uint32_t>(node_vertices_.size());
  uint32_t core = static_cast<uint32_t>(num_vertices() - 1);
  l.from = l.from == kNetwork ? core : base + l.from;
  l.to = l.to == kNetwork ? core : base + l.to;
  return l;
}

std::string Topology::vertex_name(uint32_t vertex) const {
  if (vertex == num_vertices() - 1) return "network";
  const Vertex& v = node_vertices_[vertex % node_vertices_.size()];
  size_t node = vertex / node_vertices_.size();
  switch (v.kind) {
    case VertexKind::Gpu: return fmt::format("node {} GPU {}", node, v.index);
    case VertexKind::NvSwitch: return fmt::format("node {} NVSwitch", node);
    case VertexKind::PcieSwitch: return fmt::format("node {} PCIe switch {}", node, v.index);
    case VertexKind::CpuSocket: return fmt::format("node {} socket {}", node, v.index);
    case VertexKind::Nic: return fmt::format("node {} NIC {}", node, v.index);
    case VertexKind::Network: break;
  }
  return "network";
}

std::string Topology::link_name(LinkId id) const {
  Link l = link(id);
  return fmt::format("{} -> {} ({})", vertex_name(l.from), vertex_name(l.to), link_kind_name(l.kind));
}

void Topology::route(int64_t src, int64_t dst, std::vector<LinkId>& out) const {
  if (src == dst) return;
  auto per_node = static_cast<LinkId>(node_links_.size());
  auto append = [&](const LocalRoute& r, int64_t node) {
    LinkId offset = static_cast<LinkId>(node) * per_node;
    for (LinkId l : r.links) out.push_back(offset + l);
  };
  int64_t ns = node_of(src), nd = node_of(dst);
  if (ns == nd) {
    append(intra(local_of(src), local_of(dst)), ns);
  } else {
    append(to_nic_[local_of(src)], ns);
    append(from_nic_[local_of(dst)], nd);
  }
}

std::vector<LinkId> Topology::route(int64_t src, int64_t dst) const {
  std::vector<LinkId> out;
  route(src, dst, out);
  return out;
}

double Topology::route_latency(int64_t src, int64_t dst) const {
  if (src == dst) return 0;
  if (node_of(src) == node_of(dst)) return intra(local_of(src), local_of(dst)).latency;
  return to_nic_[local_of(src)].latency + from_nic_[local_of(dst)].latency;
}

double Topology::route_bandwidth(int64_t src, int64_t dst) const {
  if (src == dst) return std::numeric_limits<double>::infinity();
  if (node_of(src) == node_of(dst)) return intra(local_of(src), local_of(dst)).bandwidth;
  return std::min(to_nic_[local_of(src)].bandwidth, from_nic_[local_of(dst)].bandwidth);
}

}  // namespace dstc::htae
