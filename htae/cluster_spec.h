// A cluster description: identical nodes of GPUs, how the GPUs of one node
// are wired (NVSwitch, an NVLink mesh, or PCIe switches under CPU sockets),
// the NICs that join nodes through a non-blocking network, and the runtime
// factors the simulator applies. Loaded from TOML (docs/cluster.md) by
// load_cluster(). Units are SI base units: bytes, bytes/s, FLOP/s, seconds.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/source/diagnostics.h"

namespace dstc::htae {

// The arithmetic precisions a GPU has a peak rate for. Fp8 is both 8-bit
// formats (e4m3 and e5m2): tensor cores run them at one rate.
enum class ComputeDtype { Fp32, Tf32, Fp16, Bf16, Fp8 };
inline constexpr std::array<ComputeDtype, 5> kComputeDtypes = {
    ComputeDtype::Fp32, ComputeDtype::Tf32, ComputeDtype::Fp16, ComputeDtype::Bf16, ComputeDtype::Fp8};
std::string_view dtype_name(ComputeDtype dtype);
// Accepts fp32/f32/float32, tf32, fp16/f16/float16/half, bf16/bfloat16,
// fp8/e4m3/e5m2.
std::optional<ComputeDtype> parse_dtype(std::string_view name);

struct GpuSpec {
  std::string name;
  // Peak FLOP/s per precision; fp32 is always present.
  std::array<std::optional<double>, kComputeDtypes.size()> peak_flops;
  int64_t memory_bytes = 0;
  double hbm_bandwidth = 0;    // bytes/s
  double launch_overhead = 0;  // seconds per kernel
  // Streaming multiprocessors (data sheet); 0 when the file gives none, and
  // then communication does not slow the compute it overlaps.
  int64_t sms = 0;

  // The peak for `dtype`, or the fp32 peak when the GPU has no faster path
  // for it (it computes in fp32).
  double peak(ComputeDtype dtype) const;
};

enum class IntraNodeKind { NvSwitch, NvLinkMesh, Pcie };
std::string_view intra_node_kind_name(IntraNodeKind kind);

// NVLinks between two GPUs of a mesh.
struct NvlinkPair {
  int a = 0;
  int b = 0;
  int links = 1;
};

struct PcieSwitch {
  int socket = 0;
  std::vector<int> gpus;
  double uplink_bandwidth = 0;  // switch <-> CPU socket, bytes/s per direction
};

struct IntraNodeSpec {
  IntraNodeKind kind = IntraNodeKind::NvSwitch;
  double latency = 0;  // seconds, per hop
  // nvswitch: each GPU's bandwidth to the switch fabric, per direction.
  double gpu_bandwidth = 0;
  // nvlink_mesh: one NVLink's bandwidth per direction, and the links.
  double link_bandwidth = 0;
  std::vector<NvlinkPair> links;
  // pcie: GPU <-> switch bandwidth (gpu_bandwidth), switches, sockets.
  std::vector<PcieSwitch> switches;
  int sockets = 0;
  double socket_link_bandwidth = 0;  // between two sockets, per direction
};

struct NicSpec {
  std::vector<int> gpus;  // the GPUs of a node this NIC serves
};

struct NetworkSpec {
  std::vector<NicSpec> nics;  // per node; empty for a one-node cluster
  double nic_bandwidth = 0;   // bytes/s per direction
  double nic_latency = 0;     // seconds, NIC to NIC through the network
};

struct RuntimeSpec {
  // SMs an NCCL collective's kernel occupies, one per channel, for a group
  // across nodes and one within a node; NCCL's CTAs do not share an SM
  // with compute kernels, so an overlapped compute op runs on the rest
  // (docs/simulator.md, "Comp-comm overlap"). NCCL's counts on DGX H100s.
  int64_t collective_sms = 16;
  int64_t intra_node_collective_sms = 24;
  // NCCL_MAX_P2P_NCHANNELS: the most channels NCCL's point-to-point
  // operations (an all-to-all's sends) use, whose buffers it holds per peer.
  int64_t max_p2p_channels = 64;
  // How many parameter all-gathers (ZeRO-3, FSDP: a parameter shard, or its
  // low-precision copy, gathered on the feature stream) a device runs ahead
  // of their use: gather n waits until computation reaches the first use of
  // gather n - prefetch_gathers. 0: each is gathered when it is needed.
  // Runtimes bound it to bound the memory of gathered weights (FSDP's
  // rate limiter, DeepSpeed's stage3_prefetch_bucket_size).
  int64_t prefetch_gathers = 2;
  // Fraction of link bandwidth a collective's transfers achieve, by
  // collective name ("all_reduce", ...); absent = 1.
  std::map<std::string, double, std::less<>> collective_efficiency;
  double efficiency(std::string_view collective) const;
};

// The most GPUs a cluster may have: past the largest machines built (about
// 200,000 GPUs in 2026) with room to plan, and small enough that the
// topology of a cluster this size fits in memory.
inline constexpr int64_t kMaxDevices = int64_t{1} << 20;

struct ClusterSpec {
  std::string name;
  std::string path;  // the file it was loaded from
  int64_t nodes = 1;
  int gpus_per_node = 1;
  GpuSpec gpu;
  IntraNodeSpec intra_node;
  NetworkSpec network;
  RuntimeSpec runtime;

  int64_t num_devices() const { return nodes * gpus_per_node; }
  double aggregate_peak_flops(ComputeDtype dtype) const { return static_cast<double>(num_devices()) * gpu.peak(dtype); }
  // Index of the NIC serving a GPU of a node (-1 when none does).
  int nic_of_gpu(int local_gpu) const;
};

// What the command line or a strategy may change in a loaded cluster.
struct ClusterOverrides {
  std::optional<int64_t> nodes;
};

// Loads, validates and returns a cluster description; nullopt after
// reporting errors. The file's text is added to `sources`, so diagnostics
// point at the offending key or value.
std::optional<ClusterSpec> load_cluster(SourceManager& sources, DiagnosticEngine& diags, const std::string& path,
                                        const ClusterOverrides& overrides = {});

}  // namespace dstc::htae
