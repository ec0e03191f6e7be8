// The physical topology of a cluster as a graph of directed links, and the
// routes transfers take over it.
//
// Vertices are GPUs, NVSwitch fabrics, PCIe switches, CPU sockets, NICs and
// one non-blocking network core (a full-bisection fat tree seen as a single
// switch). Every physical connection is two directed links, each a capacity
// in bytes/s and a latency. Nodes are identical, so the links and routes of
// one node are built once (a Boost.Graph of the node, shortest paths by
// Dijkstra) and every node's are the same shifted by an offset: routing
// between any two of 4096 GPUs costs a few array copies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "htae/cluster_spec.h"

namespace dstc::htae {

using LinkId = uint32_t;

enum class LinkKind { NvLink, NvSwitch, Pcie, Socket, GpuNic, NicUplink, NicDownlink };
std::string_view link_kind_name(LinkKind kind);

enum class VertexKind { Gpu, NvSwitch, PcieSwitch, CpuSocket, Nic, Network };

struct Vertex {
  VertexKind kind;
  int index;  // within its node and kind (GPU 3, switch 1, ...)
};

struct Link {
  LinkKind kind;
  double capacity;  // bytes/s
  double latency;   // seconds
  uint32_t from;    // vertex ids (see Topology::vertex)
  uint32_t to;
};

class Topology {
 public:
  explicit Topology(const ClusterSpec& spec);

  int64_t num_devices() const { return nodes_ * gpus_per_node_; }
  int64_t num_nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int64_t node_of(int64_t device) const { return device / gpus_per_node_; }
  int local_of(int64_t device) const { return static_cast<int>(device % gpus_per_node_); }

  size_t num_links() const { return static_cast<size_t>(nodes_) * node_links_.size(); }
  size_t links_per_node() const { return node_links_.size(); }
  Link link(LinkId id) const;
  // "node 1 GPU 3 -> nvswitch" for reports.
  std::string link_name(LinkId id) const;

  // The vertex ids: node n's vertices are n * vertices_per_node() + local;
  // the network core is the last.
  size_t vertices_per_node() const { return node_vertices_.size(); }
  size_t num_vertices() const { return static_cast<size_t>(nodes_) * node_vertices_.size() + 1; }
  std::string vertex_name(uint32_t vertex) const;

  // Appends to `out` the links from device src to device dst (nothing when
  // they are the same device).
  void route(int64_t src, int64_t dst, std::vector<LinkId>& out) const;
  std::vector<LinkId> route(int64_t src, int64_t dst) const;
  double route_latency(int64_t src, int64_t dst) const;
  // The narrowest capacity on the route (what one transfer alone gets);
  // infinity for src == dst.
  double route_bandwidth(int64_t src, int64_t dst) const;

  // Whether every GPU of a node has a NIC of its own (rail-optimized nodes
  // such as DGX A100 and H100, where NCCL's PXN applies).
  bool nic_per_gpu() const { return nic_per_gpu_; }
  // Whether two GPUs of a node reach each other over NVLink alone (NCCL's
  // PATH_NVL), which PXN needs.
  bool nvlink_between(int a, int b) const;

 private:
  struct LocalRoute {
    std::vector<LinkId> links;  // node-local link ids
    double latency = 0;
    double bandwidth = 0;
  };
  uint32_t add_vertex(VertexKind kind, int index);
  void add_link_pair(LinkKind kind, uint32_t a, uint32_t b, double capacity, double latency);
  void compute_routes(const ClusterSpec& spec);
  const LocalRoute& intra(int a, int b) const { return intra_routes_[static_cast<size_t>(a) * gpus_per_node_ + b]; }

  int64_t nodes_;
  int gpus_per_node_;
  std::vector<Vertex> node_vertices_;
  std::vector<Link> node_links_;          // `to`/`from` == kNetwork for the core
  std::vector<LocalRoute> intra_routes_;  // [src * gpus + dst]
  std::vector<LocalRoute> to_nic_;        // GPU -> its NIC, then the uplink
  std::vector<LocalRoute> from_nic_;      // downlink, then NIC -> GPU
  bool nic_per_gpu_ = false;
  double nic_latency_ = 0;
};

}  // namespace dstc::htae
