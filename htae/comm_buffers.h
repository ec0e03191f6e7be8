// The GPU memory communication libraries hold for the whole run, apart from
// the values a step moves: DeepEP's queues, and the buffers NCCL allocates
// for the point-to-point connections that all-to-alls and sends open.
// Numbers and their sources: docs/research/nccl-p2p-buffers.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "htae/cluster_spec.h"
#include "htae/device_classes.h"
#include "htae/topology.h"
#include "ir/module.h"

namespace dstc::htae {

// DeepEP's deduplicated expert exchange (moe_dispatcher = deepep): an
// all_to_all that sends each token once per node (`copies`).
bool is_deepep_exchange(const ir::Module& m, const ir::Function& f, const ir::Op& op);

// The GPU memory DeepEP's normal kernels hold on each rank for the run, as
// Megatron-Core's `get_buffer` sizes them for a group of `group` ranks (8
// per node) and tokens of `hidden_bytes` (at least bf16's): per channel
// (10, of its 20 SMs) ring queues of fixed token slots over NVLink, and
// over RDMA across nodes, each slot with room for 128 top-k entries and
// scales; plus a 32 MiB workspace (DeepEP's csrc/config.hpp; numbers in
// docs/research/deepep-buffers-and-sms.md).
int64_t deepep_buffer_bytes(int64_t group, int64_t hidden_bytes);
// The group sizes DeepEP has kernel configs for in Megatron-Core's
// hybrid-ep build (its config map asserts on any other).
inline constexpr std::array<int64_t, 10> kDeepepGroups = {2, 4, 8, 16, 24, 32, 64, 128, 144, 160};
// The SMs DeepEP's dispatch and combine kernels occupy: Megatron-Core's
// default `moe_flex_dispatcher_num_sms` (DeepEP's `Buffer.num_sms`), the 20
// of DeepSeek-V3's report.
inline constexpr int64_t kDeepepSms = 20;

// NCCL's point-to-point connections of one communicator on one rank
// (NCCL 2.21-2.28's rules): the channels each peer gets, and the bytes.
// The first send or receive between two ranks connects them on all of
// those channels, for the communicator's life.
struct NcclP2pBuffers {
  int channels_per_peer = 0;
  int64_t nvlink_connections = 0;  // sends to and receives from NVLink peers
  int64_t network_pools = 0;       // the network proxy's shared pools held here
  int64_t bytes = 0;               // device memory on this rank
};
// `members`: the communicator's devices; `sends`: the (from, to) pairs of
// devices it sends between (those from or to `device`, and those leaving
// its node, are what count); `device`: one of the members.
NcclP2pBuffers nccl_p2p_buffers(const Topology& topology, const ClusterSpec& cluster, std::span<const int64_t> members,
                                std::span<const std::pair<int64_t, int64_t>> sends, int64_t device);
// The sends of an all-to-all over `members` that bear on `device`'s
// buffers: to and from each peer, and from its node's other members to
// other nodes.
std::vector<std::pair<int64_t, int64_t>> all_to_all_sends(const Topology& topology, std::span<const int64_t> members,
                                                          int64_t device);

// Per device class, the bytes communication libraries hold for the run
// (the most any of its ranks holds): the largest DeepEP buffer of its
// exchanges, and NCCL's p2p buffers of each communicator it sends on: an
// all-to-all's group (each a communicator of its own, as Megatron-Core's
// expert group), ring attention's cp group (each rank sending to the
// next), and for a pipeline's send the ranks that agree with both ends
// on every mesh axis where the two agree (the pipeline group).
std::vector<int64_t> comm_buffer_bytes(const ir::Module& m, const ir::Function& f, const DeviceClasses& classes,
                                       const Topology& topology, const ClusterSpec& cluster);

}  // namespace dstc::htae
