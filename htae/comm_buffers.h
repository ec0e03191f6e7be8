// The GPU memory communication libraries hold for the whole run, apart from
// the values a step moves: DeepEP's queues, and the buffers NCCL allocates
// for the point-to-point connections its all-to-all opens to each peer.
// Numbers and their sources: docs/research/nccl-p2p-buffers.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
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

// NCCL's point-to-point connections of one communicator, as one rank
// opens them on its first all-to-all (send/recv to every peer, NCCL
// 2.21-2.28's rules): the channels each peer gets, and the bytes.
struct NcclP2pBuffers {
  int channels_per_peer = 0;
  int64_t nvlink_peers = 0;   // same node, over NVLink: P2P transport buffers
  int64_t network_pools = 0;  // shared send and receive pools of the network proxy
  int64_t bytes = 0;          // device memory on this rank
};
// `group`: the communicator's devices; `rank`: one of them.
NcclP2pBuffers nccl_p2p_buffers(const Topology& topology, const ClusterSpec& cluster, std::span<const int64_t> group,
                                int64_t rank);

// Per device class, the bytes communication libraries hold for the run:
// the largest DeepEP buffer of its exchanges, and NCCL's p2p buffers of
// each communicator (distinct group) it runs an NCCL all-to-all on.
std::vector<int64_t> comm_buffer_bytes(const ir::Module& m, const ir::Function& f, const DeviceClasses& classes,
                                       const Topology& topology, const ClusterSpec& cluster);

}  // namespace dstc::htae
