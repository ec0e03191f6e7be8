#include "htae/report.h"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/chrome_trace.h"
#include "ir/registry.h"

namespace dstc::htae {
namespace {

std::string duration(double s) {
  if (s >= 1) return fmt::format("{:.4g} s", s);
  if (s >= 1e-3) return fmt::format("{:.4g} ms", s * 1e3);
  return fmt::format("{:.4g} us", s * 1e6);
}

std::string bytes(int64_t b) {
  auto v = static_cast<double>(b);
  if (v >= 1 << 30) return fmt::format("{:.4g} GiB", v / (1 << 30));
  if (v >= 1 << 20) return fmt::format("{:.4g} MiB", v / (1 << 20));
  if (v >= 1 << 10) return fmt::format("{:.4g} KiB", v / (1 << 10));
  return fmt::format("{} B", b);
}

std::string rate(double v) {
  if (v >= 1e9) return fmt::format("{:.4g} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.4g} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.4g} k", v / 1e3);
  return fmt::format("{:.4g} ", v);
}

std::string ranks(const std::vector<ir::Rank>& list) {
  std::string s;
  for (size_t i = 0; i < list.size() && i < 8; ++i) s += fmt::format("{}{}", i ? ", " : "", list[i]);
  if (list.size() > 8) s += fmt::format(", ... ({} in all)", list.size());
  return s;
}

}  // namespace

void print_report_text(std::ostream& out, const SimReport& r) {
  out << fmt::format("simulated @{} on {}\n", r.function, r.cluster);
  out << fmt::format("  executor       {}, bandwidth sharing {}, comp-comm overlap {}", executor_name(r.executor),
                     r.bandwidth_sharing ? "on" : "off", r.overlap ? "on" : "off");
  if (r.overlap && r.gpu_sms > 0) {
    out << fmt::format(" (a collective takes {} of {} SMs, {} within a node)", r.collective_sms, r.gpu_sms,
                       r.intra_node_collective_sms);
  } else if (r.overlap) {
    out << " (no slowdown: the cluster gives no SM count)";
  }
  out << "\n";
  if (!r.profile_gpu.empty()) {
    out << fmt::format("  op costs       measured on {} (--profile), the roofline where it has no data\n",
                       r.profile_gpu);
  }
  out << fmt::format("  step time      {}\n", duration(r.step_time_s));
  if (r.samples_per_s) {
    out << fmt::format("  throughput     {}samples/s", rate(*r.samples_per_s));
    if (r.tokens_per_s) out << fmt::format(", {}tokens/s", rate(*r.tokens_per_s));
    out << "\n";
  } else {
    out << "  throughput     - (give --batch, and --seq for tokens)\n";
  }
  out << fmt::format("  compute        {:.4g} TFLOP/s per GPU, MFU {:.1f}% of {:.4g} TFLOP/s {}\n", r.tflops_per_gpu,
                     r.mfu * 100, r.peak_flops_per_gpu / 1e12, dtype_name(r.compute_dtype));
  if (const std::optional<ir::Fill>& slots = r.expert_slots) {
    if (slots->fullest == slots->mean) {
      out << fmt::format("  experts        slots {:.1f}% filled on every rank\n", slots->mean * 100);
    } else {
      out << fmt::format(
          "  experts        slots {:.1f}% filled on the fullest rank, {:.1f}% on average: {:.2f}x the mean load, "
          "every rank priced as the fullest\n",
          slots->fullest * 100, slots->mean * 100, slots->fullest / slots->mean);
    }
  }
  if (!r.peak_memory_bytes.empty()) {
    out << fmt::format(
        "  memory         peak {} on rank {}, capacity {}: {}\n",
        bytes(r.peak_memory_bytes[static_cast<size_t>(r.fullest_rank)]), r.fullest_rank, bytes(r.memory_capacity_bytes),
        r.oom ? fmt::format("OUT OF MEMORY on rank{} {}", r.oom_devices.size() == 1 ? "" : "s", ranks(r.oom_devices))
              : std::string("fits"));
    std::string held;
    for (size_t k = 0; k < kMemoryKinds; ++k) {
      if (r.memory_at_peak[k] == 0) continue;
      held += fmt::format("{}{} {}", held.empty() ? "" : ", ", memory_kind_name(static_cast<MemoryKind>(k)),
                          bytes(r.memory_at_peak[k]));
    }
    if (!held.empty()) out << fmt::format("    at peak      {}\n", held);
  }
  auto share = [&](double s) { return r.step_time_s > 0 ? s / r.step_time_s * 100 : 0.0; };
  const SimBreakdown& b = r.breakdown;
  out << fmt::format("  breakdown      on rank {} (finishes last)\n", r.critical_device);
  out << fmt::format("    compute      {:>12}  {:5.1f}%\n", duration(b.compute_s), share(b.compute_s));
  out << fmt::format("    exposed comm {:>12}  {:5.1f}%\n", duration(b.exposed_comm_s), share(b.exposed_comm_s));
  out << fmt::format("    bubble       {:>12}  {:5.1f}%\n", duration(b.bubble_s), share(b.bubble_s));
  out << fmt::format("    idle         {:>12}  {:5.1f}%\n", duration(b.idle_s), share(b.idle_s));
  out << fmt::format("  simulated      {} devices as {} class{}, {} ops ({} on devices), {} transfers", r.num_devices,
                     r.num_classes, r.num_classes == 1 ? "" : "es", r.num_ops, r.num_device_ops, r.num_flows);
  if (r.num_mirrored_flows > 0) out << fmt::format(" ({} more mirrored)", r.num_mirrored_flows);
  out << "\n";
}

void print_report_json(std::ostream& out, const SimReport& r) {
  nlohmann::ordered_json j;
  j["function"] = r.function;
  j["cluster"] = r.cluster;
  j["executor"] = executor_name(r.executor);
  j["bandwidth_sharing"] = r.bandwidth_sharing;
  j["overlap"] = r.overlap;
  j["gpu_sms"] = r.gpu_sms;
  j["collective_sms"] = r.collective_sms;
  j["intra_node_collective_sms"] = r.intra_node_collective_sms;
  if (!r.profile_gpu.empty()) j["profile_gpu"] = r.profile_gpu;
  j["step_time_s"] = r.step_time_s;
  j["samples_per_s"] = r.samples_per_s ? nlohmann::ordered_json(*r.samples_per_s) : nullptr;
  j["tokens_per_s"] = r.tokens_per_s ? nlohmann::ordered_json(*r.tokens_per_s) : nullptr;
  j["model_flops"] = r.model_flops;
  j["compute_dtype"] = dtype_name(r.compute_dtype);
  j["peak_flops_per_gpu"] = r.peak_flops_per_gpu;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  auto by_kind = [&](const MemoryBreakdown& held) {
    nlohmann::ordered_json kinds;
    kinds["rank"] = r.fullest_rank;
    for (size_t k = 0; k < kMemoryKinds; ++k) {
      std::string name(memory_kind_name(static_cast<MemoryKind>(k)));
      std::replace(name.begin(), name.end(), ' ', '_');
      kinds[name + "_bytes"] = held[k];
    }
    return kinds;
  };
  j["memory_at_peak"] = by_kind(r.memory_at_peak);
  j["memory_kind_peaks"] = by_kind(r.memory_kind_peaks);
  j["memory_capacity_bytes"] = r.memory_capacity_bytes;
  j["oom"] = r.oom;
  j["oom_devices"] = r.oom_devices;
  j["breakdown"] = {{"compute_s", r.breakdown.compute_s},
                    {"exposed_comm_s", r.breakdown.exposed_comm_s},
                    {"bubble_s", r.breakdown.bubble_s},
                    {"idle_s", r.breakdown.idle_s}};
  j["critical_device"] = r.critical_device;
  j["num_devices"] = r.num_devices;
  j["num_ops"] = r.num_ops;
  j["num_device_ops"] = r.num_device_ops;
  j["num_classes"] = r.num_classes;
  j["num_flows"] = r.num_flows;
  j["num_mirrored_flows"] = r.num_mirrored_flows;
  if (r.expert_slots) j["expert_slots"] = {{"fullest", r.expert_slots->fullest}, {"mean", r.expert_slots->mean}};
  out << j.dump(2) << "\n";
}

void write_chrome_trace(std::ostream& out, const ir::Module& module, const ir::Function& f, const SimReport& r) {
  if (!r.trace) return;
  const SimTrace& t = *r.trace;
  std::vector<std::vector<ir::Rank>> ranks_of_class;
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    if (t.rank_class[i] >= ranks_of_class.size()) ranks_of_class.resize(t.rank_class[i] + 1);
    ranks_of_class[t.rank_class[i]].push_back(t.ranks[i]);
  }
  auto of = [&](uint32_t c) -> const std::vector<ir::Rank>& {
    static const std::vector<ir::Rank> none;
    return c < ranks_of_class.size() ? ranks_of_class[c] : none;
  };
  // A device class's span is every one of its ranks' span.
  std::vector<ir::TraceOpSpan> spans;
  for (const TraceSpan& span : t.spans)
    for (ir::Rank rank : of(span.device_class)) spans.push_back({rank, span.op, span.start, span.end});
  std::vector<ir::TraceMemory> memory;
  for (const TraceMemorySample& m : t.memory)
    for (ir::Rank rank : of(m.device_class)) memory.push_back({rank, m.time, m.live_bytes});
  ir::write_chrome_trace(out, module, f, t.ranks, spans, memory);
}

}  // namespace dstc::htae
