// load_cluster: the TOML schema of docs/cluster.md, validated key by key.
#include <algorithm>
#include <deque>
#include <set>

#include <fmt/format.h>

#include "htae/cluster_spec.h"
#include "htae/collective_kind.h"
#include "htae/toml_reader.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::htae {
namespace {

// Physical ranges of the figures a cluster file gives (docs/cluster.md):
// wide enough for any GPU, link or network of today and the next decade,
// narrow enough that a unit mistake (Gb/s for bytes/s, ms for s) or a
// typo'd exponent is caught where it is written.
constexpr PhysicalRange kBandwidth{1e6, false, 1e15, "bytes/s"};
constexpr PhysicalRange kLatency{0, false, 1, "s"};
constexpr PhysicalRange kLaunchOverhead{0, false, 1e-2, "s"};
constexpr PhysicalRange kPeakFlops{1e9, false, 1e18, "FLOP/s"};
// The largest GPUs have under 200 SMs (B200: 148); 1024 leaves room.
constexpr int64_t kMaxSms = 1024;
// NCCL's MAXCHANNELS (32 until 2.24, 64 since 2.25).
constexpr int64_t kMaxNcclChannels = 64;
constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;  // 1 PiB per GPU

class ClusterLoader {
 public:
  ClusterLoader(const TomlFile& toml, SourceManager& sources, DiagnosticEngine& diags)
      : toml_(toml), sources_(sources), diags_(diags), start_errors_(diags.error_count()) {}

  std::optional<ClusterSpec> load(const std::string& path, const ClusterOverrides& overrides) {
    ClusterSpec spec;
    spec.path = path;
    TableReader root(toml_.root, "", toml_.file, sources_, diags_);
    spec.name = root.string("name", true).value_or("");
    std::optional<int64_t> nodes = root.integer("nodes", false, 1, kMaxDevices);
    int64_t gpus = root.integer("gpus_per_node", true).value_or(0);
    bool nodes_given = toml_.root.contains("nodes");
    spec.nodes = nodes.value_or(1);
    if (gpus > kMaxGpusPerNode) {
      diags_.error(diag::kConfigBadValue, root.range(*toml_.root.get("gpus_per_node")),
                   fmt::format("'gpus_per_node' must be at most {}, not {}", kMaxGpusPerNode, gpus));
      gpus = 0;
    }
    if (overrides.nodes) {
      if (*overrides.nodes < 1) {
        diags_.error(diag::kConfigBadValue, {}, fmt::format("--nodes must be at least 1, not {}", *overrides.nodes));
        return std::nullopt;
      }
      spec.nodes = *overrides.nodes;
    }
    if (gpus > 0 && spec.nodes > kMaxDevices / gpus) {
      SourceRange at = nodes_given && !overrides.nodes ? root.key_range("nodes") : SourceRange{};
      auto b = diags_.error(
          diag::kConfigBadValue, at,
          fmt::format("{} nodes of {} GPUs exceed the {} GPUs dstc simulates", spec.nodes, gpus, kMaxDevices));
      if (overrides.nodes) b.note(fmt::format("the node count {} comes from --nodes", spec.nodes));
      return std::nullopt;
    }
    if (const toml::table* gpu = root.table("gpu", true)) read_gpu(*gpu, spec.gpu);
    const toml::table* intra = root.table("intra_node", true);
    const toml::table* nic = root.table("nic", false);
    if (const toml::table* runtime = root.table("runtime", false)) read_runtime(*runtime, spec.runtime);
    root.reject_unknown_keys();
    check_sms_left(spec);
    if (gpus == 0) return std::nullopt;
    spec.gpus_per_node = static_cast<int>(gpus);
    if (intra) read_intra_node(*intra, spec);
    if (nic) {
      read_nic(*nic, spec);
    } else if (spec.nodes > 1) {
      SourceRange at = nodes_given ? root.key_range("nodes") : SourceRange{};
      auto b = diags_.error(diag::kConfigMissingField, at,
                            fmt::format("a cluster of {} nodes needs a [nic] table to join them", spec.nodes));
      if (overrides.nodes) b.note(fmt::format("the node count {} comes from --nodes", spec.nodes));
    }
    if (failed()) return std::nullopt;
    check_connected(spec, intra);
    if (failed()) return std::nullopt;
    return spec;
  }

 private:
  static constexpr int64_t kMaxGpusPerNode = 1024;

  void read_gpu(const toml::table& table, GpuSpec& gpu) {
    TableReader r(table, "gpu", toml_.file, sources_, diags_);
    gpu.name = r.string("name", true).value_or("");
    gpu.memory_bytes = r.integer("memory_bytes", true, 1, kMaxMemoryBytes).value_or(0);
    gpu.hbm_bandwidth = r.number("hbm_bandwidth", true, kBandwidth).value_or(0);
    gpu.launch_overhead = r.number("launch_overhead", true, kLaunchOverhead).value_or(0);
    gpu.sms = r.integer("sms", false, 1, kMaxSms).value_or(0);
    if (const toml::table* peaks = r.table("peak_flops", true)) {
      TableReader p(*peaks, "gpu.peak_flops", toml_.file, sources_, diags_);
      for (ComputeDtype dtype : kComputeDtypes) {
        gpu.peak_flops[static_cast<size_t>(dtype)] =
            p.number(dtype_name(dtype), dtype == ComputeDtype::Fp32, kPeakFlops);
      }
      p.reject_unknown_keys();
    }
    r.reject_unknown_keys();
  }

  // Collectives must leave compute some SMs, whether their counts are
  // written or the defaults (a small GPU): else overlapped compute stalls.
  void check_sms_left(const ClusterSpec& spec) {
    const int64_t sms = spec.gpu.sms;
    if (sms <= 0) return;
    const toml::table* runtime = toml_.root["runtime"].as_table();
    for (auto [key, taken] : {std::pair{"collective_sms", spec.runtime.collective_sms},
                              std::pair{"intra_node_collective_sms", spec.runtime.intra_node_collective_sms}}) {
      if (taken < sms) continue;
      const toml::node* written = runtime ? runtime->get(key) : nullptr;
      const toml::node* at = written ? written : toml_.root["gpu"]["sms"].node();
      auto error =
          diags_.error(diag::kConfigBadValue, range_of(sources_, toml_.file, at->source()),
                       fmt::format("'runtime.{}' ({}) must leave compute some of the GPU's {} SMs", key, taken, sms));
      if (!written) error.note(fmt::format("{} is the default; give it in [runtime] for this GPU", taken));
    }
  }

  void read_runtime(const toml::table& table, RuntimeSpec& runtime) {
    TableReader r(table, "runtime", toml_.file, sources_, diags_);
    if (const toml::node* old = table.get("overlap_factor")) {
      // A flat slowdown before 2026-11-27; an SM count now (docs/cluster.md).
      r.allow("overlap_factor");
      diags_.error(diag::kConfigUnknownKey, r.range(*old), "'runtime.overlap_factor' is no longer read")
          .note(
              "communication now takes SMs from the compute it overlaps: give the GPU's `sms` in [gpu], and "
              "here the SMs NCCL's collectives hold (`collective_sms`, `intra_node_collective_sms`) where they "
              "differ from DGX H100's 16 and 24");
    }
    runtime.collective_sms = r.integer("collective_sms", false, 0, kMaxSms).value_or(runtime.collective_sms);
    runtime.intra_node_collective_sms =
        r.integer("intra_node_collective_sms", false, 0, kMaxSms).value_or(runtime.intra_node_collective_sms);
    runtime.max_p2p_channels =
        r.integer("max_p2p_channels", false, 1, kMaxNcclChannels).value_or(runtime.max_p2p_channels);
    runtime.prefetch_gathers = r.integer("prefetch_gathers", false, 0).value_or(runtime.prefetch_gathers);
    if (const toml::table* eff = r.table("collective_efficiency", false)) {
      TableReader e(*eff, "runtime.collective_efficiency", toml_.file, sources_, diags_);
      for (size_t k = 0; k < kCollectiveOps.size(); ++k) {
        std::string_view name = collective_name(static_cast<CollectiveKind>(k));
        if (std::optional<double> v = e.number(name, false)) {
          if (*v > 1.0) {
            diags_.error(
                diag::kConfigBadValue, e.range(*eff->get(name)),
                fmt::format("'{}' must be at most 1 (a fraction of link bandwidth), not {:g}", e.qualified(name), *v));
          } else {
            runtime.collective_efficiency.emplace(std::string(name), *v);
          }
        }
      }
      e.reject_unknown_keys();
    }
    r.reject_unknown_keys();
  }

  // A GPU index read from `node` into 0..gpus-1.
  std::optional<int> gpu_index(TableReader& r, const toml::node& node, std::string_view key, int gpus) {
    std::optional<int64_t> v = integer_element(r, node, key);
    if (!v) return std::nullopt;
    if (*v < 0 || *v >= gpus) {
      diags_.error(
          diag::kClusterBadGpuIndex, r.range(node),
          fmt::format("GPU {} does not exist: a node has GPUs 0 to {} (gpus_per_node = {})", *v, gpus - 1, gpus));
      return std::nullopt;
    }
    return static_cast<int>(*v);
  }

  // An array of GPU indices; `seen` catches a GPU listed twice.
  std::vector<int> gpu_list(TableReader& r, const toml::array& list, std::string_view key, int gpus,
                            std::vector<const toml::node*>& seen) {
    std::vector<int> result;
    for (const toml::node& element : list) {
      std::optional<int> g = gpu_index(r, element, key, gpus);
      if (!g) continue;
      if (seen[*g]) {
        diags_.error(diag::kClusterBadGpuIndex, r.range(element), fmt::format("GPU {} is listed twice", *g))
            .note(r.range(*seen[*g]), "first listed here");
        continue;
      }
      seen[*g] = &element;
      result.push_back(*g);
    }
    return result;
  }

  void read_intra_node(const toml::table& table, ClusterSpec& spec) {
    TableReader r(table, "intra_node", toml_.file, sources_, diags_);
    IntraNodeSpec& intra = spec.intra_node;
    intra.latency = r.number("latency", true, kLatency).value_or(0);
    std::optional<std::string> kind = r.string("kind", true);
    if (kind == "nvswitch") {
      intra.kind = IntraNodeKind::NvSwitch;
      intra.gpu_bandwidth = r.number("gpu_bandwidth", true, kBandwidth).value_or(0);
    } else if (kind == "nvlink_mesh") {
      intra.kind = IntraNodeKind::NvLinkMesh;
      intra.link_bandwidth = r.number("link_bandwidth", true, kBandwidth).value_or(0);
      if (const toml::array* links = r.array("links", true)) read_mesh_links(r, *links, spec);
    } else if (kind == "pcie") {
      intra.kind = IntraNodeKind::Pcie;
      read_pcie(r, table, spec);
    } else if (kind) {
      diags_
          .error(diag::kConfigBadValue, r.range(*table.get("kind")), fmt::format("unknown intra_node kind '{}'", *kind))
          .note("the kinds are 'nvswitch', 'nvlink_mesh' and 'pcie'");
      r.allow("gpu_bandwidth"), r.allow("link_bandwidth"), r.allow("links"), r.allow("sockets"),
          r.allow("socket_link_bandwidth"), r.allow("switch");
    }
    r.reject_unknown_keys();
  }

  void read_mesh_links(TableReader& r, const toml::array& links, ClusterSpec& spec) {
    int gpus = spec.gpus_per_node;
    std::set<std::pair<int, int>> pairs;
    std::vector<bool> linked(gpus, false);
    for (const toml::node& element : links) {
      const toml::array* link = element.as_array();
      if (!link || link->size() < 2 || link->size() > 3) {
        diags_.error(diag::kConfigWrongType, r.range(element),
                     "each of 'intra_node.links' must be [gpu_a, gpu_b] or [gpu_a, gpu_b, link_count]");
        continue;
      }
      std::optional<int> a = gpu_index(r, *link->get(0), "links", gpus);
      std::optional<int> b = gpu_index(r, *link->get(1), "links", gpus);
      std::optional<int64_t> count = link->size() == 3 ? integer_element(r, *link->get(2), "links") : 1;
      if (!a || !b || !count) continue;
      if (*count < 1) {
        diags_.error(diag::kConfigBadValue, r.range(*link->get(2)),
                     fmt::format("a link count must be at least 1, not {}", *count));
        continue;
      }
      if (*a == *b || !pairs.insert({std::min(*a, *b), std::max(*a, *b)}).second) {
        diags_.error(diag::kClusterBadGpuIndex, r.range(element),
                     *a == *b ? fmt::format("GPU {} is linked to itself", *a)
                              : fmt::format("GPUs {} and {} are linked twice; give the link count once", *a, *b));
        continue;
      }
      linked[*a] = linked[*b] = true;
      spec.intra_node.links.push_back({*a, *b, static_cast<int>(*count)});
    }
    auto covered = std::count(linked.begin(), linked.end(), true);
    if (!failed() && covered != gpus) {
      int missing = static_cast<int>(std::find(linked.begin(), linked.end(), false) - linked.begin());
      diags_
          .error(diag::kClusterGpuCountMismatch, r.key_range("links"),
                 fmt::format("the NVLink mesh links {} GPUs but gpus_per_node is {}", covered, gpus))
          .note(fmt::format("GPU {} has no NVLink", missing));
    }
  }

  void read_pcie(TableReader& r, const toml::table& table, ClusterSpec& spec) {
    IntraNodeSpec& intra = spec.intra_node;
    int gpus = spec.gpus_per_node;
    intra.gpu_bandwidth = r.number("gpu_bandwidth", true, kBandwidth).value_or(0);
    intra.sockets = static_cast<int>(r.integer("sockets", true).value_or(1));
    intra.socket_link_bandwidth = r.number("socket_link_bandwidth", intra.sockets > 1, kBandwidth).value_or(0);
    const toml::array* switches = r.array("switch", true);
    if (!switches) return;
    std::vector<const toml::node*> seen(gpus, nullptr);
    for (size_t i = 0; i < switches->size(); ++i) {
      const toml::node& element = *switches->get(i);
      const toml::table* sw = element.as_table();
      if (!sw) {
        r.wrong_type(element, "switch", "an array of tables ([[intra_node.switch]])");
        continue;
      }
      TableReader s(*sw, fmt::format("intra_node.switch[{}]", i), toml_.file, sources_, diags_);
      PcieSwitch result;
      std::optional<int64_t> socket = s.integer("socket", true, 0);
      if (socket && *socket >= intra.sockets) {
        diags_.error(diag::kConfigBadValue, s.range(*sw->get("socket")),
                     fmt::format("socket {} does not exist: the node has sockets 0 to {}", *socket, intra.sockets - 1));
      }
      result.socket = static_cast<int>(socket.value_or(0));
      result.uplink_bandwidth = s.number("uplink_bandwidth", true, kBandwidth).value_or(0);
      if (const toml::array* list = s.array("gpus", true)) result.gpus = gpu_list(s, *list, "gpus", gpus, seen);
      s.reject_unknown_keys();
      intra.switches.push_back(std::move(result));
    }
    auto covered = std::count_if(seen.begin(), seen.end(), [](const toml::node* n) { return n != nullptr; });
    if (!failed() && covered != gpus) {
      int missing = static_cast<int>(std::find(seen.begin(), seen.end(), nullptr) - seen.begin());
      diags_
          .error(diag::kClusterGpuCountMismatch, r.key_range("switch"),
                 fmt::format("the PCIe switches hold {} GPUs but gpus_per_node is {}", covered, gpus))
          .note(fmt::format("GPU {} is under no switch", missing));
    }
  }

  void read_nic(const toml::table& table, ClusterSpec& spec) {
    TableReader r(table, "nic", toml_.file, sources_, diags_);
    NetworkSpec& net = spec.network;
    std::optional<int64_t> count = r.integer("count", true);
    net.nic_bandwidth = r.number("bandwidth", true, kBandwidth).value_or(0);
    net.nic_latency = r.number("latency", true, kLatency).value_or(0);
    const toml::array* lists = r.array("gpus", false);
    r.reject_unknown_keys();
    if (!count) return;
    int gpus = spec.gpus_per_node;
    if (*count > gpus) {
      diags_.error(diag::kConfigBadValue, r.range(*table.get("count")),
                   fmt::format("'nic.count' is {} but a node has only {} GPUs to serve", *count, gpus));
      return;
    }
    net.nics.resize(static_cast<size_t>(*count));
    if (!lists) {
      // GPUs split evenly over the NICs, in order.
      for (int g = 0; g < gpus; ++g) net.nics[static_cast<size_t>(g * *count / gpus)].gpus.push_back(g);
      return;
    }
    if (static_cast<int64_t>(lists->size()) != *count) {
      diags_.error(diag::kConfigBadValue, r.range(*lists),
                   fmt::format("'nic.gpus' lists the GPUs of {} NICs but 'nic.count' is {}", lists->size(), *count));
      return;
    }
    std::vector<const toml::node*> seen(gpus, nullptr);
    for (size_t n = 0; n < lists->size(); ++n) {
      const toml::array* list = lists->get(n)->as_array();
      if (!list) {
        r.wrong_type(*lists->get(n), "gpus", "an array of GPU index arrays, one per NIC");
        continue;
      }
      net.nics[n].gpus = gpu_list(r, *list, "gpus", gpus, seen);
    }
  }

  // Every GPU must reach every other: within a node over the mesh (the other
  // kinds connect all their GPUs by construction), across nodes via a NIC.
  void check_connected(const ClusterSpec& spec, const toml::table* intra) {
    int gpus = spec.gpus_per_node;
    if (spec.intra_node.kind == IntraNodeKind::NvLinkMesh) {
      std::vector<std::vector<int>> adjacent(gpus);
      for (const NvlinkPair& p : spec.intra_node.links) adjacent[p.a].push_back(p.b), adjacent[p.b].push_back(p.a);
      std::vector<bool> reached(gpus, false);
      std::deque<int> queue{0};
      reached[0] = true;
      while (!queue.empty()) {
        int g = queue.front();
        queue.pop_front();
        for (int n : adjacent[g]) {
          if (!reached[n]) reached[n] = true, queue.push_back(n);
        }
      }
      for (int g = 1; g < gpus; ++g) {
        if (!reached[g]) {
          SourceRange at = intra ? range_of(sources_, toml_.file, intra->get("links")->source()) : SourceRange{};
          diags_.error(diag::kClusterDisconnected, at,
                       fmt::format("the NVLink mesh has no path from GPU 0 to GPU {}", g));
          return;
        }
      }
    }
    if (spec.nodes > 1) {
      for (int g = 0; g < gpus; ++g) {
        if (spec.nic_of_gpu(g) < 0) {
          const toml::node* nic = toml_.root.get("nic");
          SourceRange at = nic ? range_of(sources_, toml_.file, nic->source()) : SourceRange{};
          diags_.error(diag::kClusterDisconnected, at,
                       fmt::format("GPU {} is served by no NIC, so it cannot reach the other nodes", g));
          return;
        }
      }
    }
  }

  bool failed() const { return diags_.error_count() > start_errors_; }

  const TomlFile& toml_;
  SourceManager& sources_;
  DiagnosticEngine& diags_;
  size_t start_errors_;
};

}  // namespace

std::optional<ClusterSpec> load_cluster(SourceManager& sources, DiagnosticEngine& diags, const std::string& path,
                                        const ClusterOverrides& overrides) {
  std::optional<TomlFile> toml = load_toml_file(sources, diags, path);
  if (!toml) return std::nullopt;
  return ClusterLoader(*toml, sources, diags).load(path, overrides);
}

}  // namespace dstc::htae
