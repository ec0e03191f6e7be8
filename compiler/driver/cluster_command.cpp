// dstc cluster FILE.toml [--nodes N]: validates a cluster description and
// prints a one-screen summary of what the simulator will see.
#include <map>
#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "htae/cluster_spec.h"
#include "htae/topology.h"

namespace dstc {
namespace {

std::string bytes_per_second(double v) {
  return v >= 1e12 ? fmt::format("{:.4g} TB/s", v / 1e12) : fmt::format("{:.4g} GB/s", v / 1e9);
}

std::string flops(double v) {
  return v >= 1e15 ? fmt::format("{:.4g} PFLOP/s", v / 1e15) : fmt::format("{:.4g} TFLOP/s", v / 1e12);
}

std::string seconds(double v) { return fmt::format("{:.3g} us", v * 1e6); }

void print_summary(std::ostream& out, const htae::ClusterSpec& spec) {
  using namespace htae;
  Topology topo(spec);
  out << fmt::format("cluster {} ({})\n", spec.name, spec.path);
  out << fmt::format("  devices      {} node{} x {} GPUs = {}\n", spec.nodes, spec.nodes == 1 ? "" : "s",
                     spec.gpus_per_node, spec.num_devices());
  const GpuSpec& gpu = spec.gpu;
  out << fmt::format("  gpu          {}: {:.4g} GiB, HBM {}, launch {}", gpu.name,
                     static_cast<double>(gpu.memory_bytes) / (1 << 30), bytes_per_second(gpu.hbm_bandwidth),
                     seconds(gpu.launch_overhead));
  out << (gpu.sms > 0 ? fmt::format(", {} SMs\n", gpu.sms) : std::string("\n"));
  for (ComputeDtype dtype : kComputeDtypes) {
    if (!gpu.peak_flops[static_cast<size_t>(dtype)]) continue;
    out << fmt::format("  peak {:<4}    {} per GPU, {} in all\n", dtype_name(dtype), flops(gpu.peak(dtype)),
                       flops(spec.aggregate_peak_flops(dtype)));
  }
  const IntraNodeSpec& intra = spec.intra_node;
  out << fmt::format("  intra-node   {}, {} per hop", intra_node_kind_name(intra.kind), seconds(intra.latency));
  switch (intra.kind) {
    case IntraNodeKind::NvSwitch:
      out << fmt::format(", {} per GPU per direction\n", bytes_per_second(intra.gpu_bandwidth));
      break;
    case IntraNodeKind::NvLinkMesh:
      out << fmt::format(", {} GPU pairs linked, {} per NVLink per direction\n", intra.links.size(),
                         bytes_per_second(intra.link_bandwidth));
      break;
    case IntraNodeKind::Pcie:
      out << fmt::format(", {} switches under {} socket{}, {} per GPU, socket link {}\n", intra.switches.size(),
                         intra.sockets, intra.sockets == 1 ? "" : "s", bytes_per_second(intra.gpu_bandwidth),
                         bytes_per_second(intra.socket_link_bandwidth));
      break;
  }
  if (spec.network.nics.empty()) {
    out << "  network      none (one node)\n";
  } else {
    out << fmt::format("  network      {} NIC{} per node, {} ({:.4g} Gb/s) each, {} NIC to NIC\n",
                       spec.network.nics.size(), spec.network.nics.size() == 1 ? "" : "s",
                       bytes_per_second(spec.network.nic_bandwidth), spec.network.nic_bandwidth * 8 / 1e9,
                       seconds(spec.network.nic_latency));
  }
  std::map<std::string_view, std::pair<size_t, double>> by_kind;  // count, capacity
  for (LinkId id = 0; id < topo.links_per_node(); ++id) {
    Link l = topo.link(id);
    auto& entry = by_kind[link_kind_name(l.kind)];
    entry.first += 1;
    entry.second += l.capacity;
  }
  out << fmt::format("  links        {} directed per node, {} in all:", topo.links_per_node(), topo.num_links());
  for (const auto& [kind, entry] : by_kind) {
    out << fmt::format(" {} {} ({} avg)", entry.first, kind, bytes_per_second(entry.second / entry.first));
  }
  out << "\n";
  if (spec.gpus_per_node > 1) {
    int last = spec.gpus_per_node - 1;
    out << fmt::format("  route        GPU 0 -> GPU {}: {} links, {}, {}\n", last, topo.route(0, last).size(),
                       bytes_per_second(topo.route_bandwidth(0, last)), seconds(topo.route_latency(0, last)));
  }
  if (spec.nodes > 1) {
    int64_t far = spec.gpus_per_node;
    out << fmt::format("  route        GPU 0 -> GPU {} (node 1): {} links, {}, {}\n", far, topo.route(0, far).size(),
                       bytes_per_second(topo.route_bandwidth(0, far)), seconds(topo.route_latency(0, far)));
  }
  out << fmt::format("  runtime      a collective takes {} SMs, {} within a node{}", spec.runtime.collective_sms,
                     spec.runtime.intra_node_collective_sms, gpu.sms > 0 ? "" : " (none slows compute: no SM count)");
  for (const auto& [name, eff] : spec.runtime.collective_efficiency)
    out << fmt::format(", {} efficiency {:g}", name, eff);
  out << "\n";
}

}  // namespace

Command add_cluster_command(CLI::App& root) {
  struct Options {
    std::string file;
    int64_t nodes = 0;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sub = root.add_subcommand("cluster", "Validate a cluster description (TOML) and summarise it");
  sub->add_option("file", options->file, "The cluster file, e.g. clusters/dgx-a100.toml (found in the stdlib)")
      ->required()
      ->transform(found_in_stdlib());
  sub->add_option("--nodes", options->nodes, "Override the number of nodes");
  return {sub, [options, sub](CommandContext& ctx) {
            SourceManager sources;
            DiagnosticEngine diags(sources);
            htae::ClusterOverrides overrides;
            if (sub->count("--nodes") > 0) overrides.nodes = options->nodes;
            std::optional<htae::ClusterSpec> spec = htae::load_cluster(sources, diags, options->file, overrides);
            diags.render(ctx.err, ctx.color);
            if (!spec) return static_cast<int>(kExitInputErrors);
            print_summary(ctx.out, *spec);
            return static_cast<int>(kExitSuccess);
          }};
}

}  // namespace dstc
