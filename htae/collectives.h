// Collective operations as the point-to-point transfers their algorithms
// make, so the flow engine can charge them on the physical links, and
// closed-form alpha-beta times for when link sharing is not simulated.
//
// Sizes follow nccl-tests: `bytes` is the full logical buffer (all_reduce's
// buffer, all_gather's output, reduce_scatter's input, each rank's
// all_to_all buffer, the broadcast message). A plan is a sequence of phases
// run one after the other; the transfers of a phase run concurrently. A
// pipelined algorithm is one phase whose transfers carry all their steps'
// bytes and pay the latencies of their steps (NCCL pipelines chunks along
// the ring or tree, so the steps overlap and only their latencies add up).
// A ring's step latency is its hops' average: a chunk that goes round a
// ring spanning nodes crosses the network only at the node boundaries and
// NVLink elsewhere, as in NCCL's own model (intra steps x intra latency +
// inter steps x inter latency).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "htae/collective_kind.h"
#include "htae/topology.h"

namespace dstc::htae {

enum class CollectiveAlgorithm { Ring, Tree, Hierarchical, Direct };

struct Transfer {
  int64_t src;
  int64_t dst;
  double bytes;
  double latency = 0;  // seconds from its last byte leaving to its delivery
};

struct CollectivePhase {
  std::vector<Transfer> transfers;
  int steps = 1;  // latency-bound steps the transfers' latencies account for
};

struct CollectivePlan {
  CollectiveKind kind;
  CollectiveAlgorithm algorithm;
  std::vector<CollectivePhase> phases;
};

// The transfers of `kind` over `group` (device ids; `root` indexes the
// group for broadcast and reduce). A ring inside one node follows group
// order. A ring over several nodes visits them in group order, each node's
// members together, and runs as NCCL's channels do: as many rings as the
// fewest members a node has, each carrying an equal share and entering
// every node at a different member, so each leaves a node by a different
// GPU (and NIC). With no
// algorithm given, chooses as NCCL's tuner does: the candidate with the
// smallest plan_time() (ring, double binary tree, and for all_reduce over
// several nodes with the same number of GPUs on each, hierarchical).
CollectivePlan plan_collective(const Topology& topology, CollectiveKind kind, std::span<const int64_t> group,
                               double bytes, std::optional<CollectiveAlgorithm> algorithm = std::nullopt,
                               size_t root = 0);

// A mixture of experts' token exchange as DeepEP's normal kernels send it
// (Megatron-Core's `flex` dispatcher): `bytes` is each member's slots, in
// which every token appears `copies` times (its top-k) among `experts`
// spread evenly over the group. A token crosses the network once per
// destination node, to the GPU of its own rail there, which forwards it
// over NVLink once per destination GPU; the combine sums within the node
// before the network, the same volumes the other way. Uniform routing:
// a token reaches a node (GPU) holding h of the experts with probability
// 1 - C(experts - h, copies) / C(experts, copies). One pipelined phase, as
// DeepEP chunks both legs. Where the group's nodes hold unequal numbers of
// members or lack NVLink between them, the flat all-to-all.
//
// Node-limited routing (`groups`: the experts in `count` groups, a token's
// from the `kept` best, DeepSeek-V3's 4 of 8) where the groups are the
// group's nodes: a token reaches min(kept, the unlimited count) nodes, as
// scoring groups by their best experts makes nearly every chosen group
// receive one, and its GPUs as `copies` experts among the kept nodes'.
struct ExpertGroups {
  int64_t count = 0;
  int64_t kept = 0;
};
CollectivePlan deduplicated_all_to_all(const Topology& topology, std::span<const int64_t> group, double bytes,
                                       int64_t copies, int64_t experts, ExpertGroups groups = {});

// Closed-form time of a plan: per phase, the largest transfer latency
// plus, with `contention`, the most loaded link's bytes over its capacity
// (exact when a phase's transfers all drain together, as in a ring), or
// without it, the slowest transfer alone on its route. `efficiency` scales
// link bandwidth (the cluster's collective_efficiency).
double plan_time(const Topology& topology, const CollectivePlan& plan, double efficiency = 1.0, bool contention = true);

// nccl-tests' bus-bandwidth factor: busbw = algbw x factor (all_reduce
// 2(p-1)/p; all_gather, reduce_scatter, all_to_all (p-1)/p; else 1).
double bus_bandwidth_factor(CollectiveKind kind, int64_t p);
// Latency-bound steps of the ring algorithm (all_reduce 2(p-1), ...).
int64_t ring_steps(CollectiveKind kind, int64_t p);
// alpha-beta: ring_steps x alpha + bytes x factor / bus_bandwidth.
double alpha_beta_time(CollectiveKind kind, int64_t p, double bytes, double alpha, double bus_bandwidth);

}  // namespace dstc::htae
