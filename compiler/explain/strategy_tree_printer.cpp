#include "compiler/explain/strategy_tree_printer.h"

#include <fmt/format.h>

#include "compiler/sbp/signature.h"

namespace dstc::compiler {
namespace {

std::string layout_text(const ir::Mesh& mesh, const ir::Layout& layout) {
  std::string out;
  for (size_t a = 0; a < layout.size(); ++a)
    out += fmt::format("{}{}={}", a ? ", " : "", mesh.axes()[a].name, to_string(layout[a]));
  return out;
}

std::string schedule_text(const ResolvedSchedule& s) {
  std::string kind(schedule::schedule_kind_name(s.kind));
  if (s.kind == schedule::ScheduleKind::Interleaved) kind += fmt::format("({})", s.virtual_stages);
  if (s.table) kind = fmt::format("table(\"{}\")", *s.table);
  std::string out =
      fmt::format("micro_batches={} kind={} recompute={}", s.micro_batches, kind, s.recompute ? "on" : "off");
  if (s.max_ongoing > 0) out += fmt::format(" max_ongoing={}", s.max_ongoing);
  if (s.overlap_all_to_all) out += " overlap_all_to_all=on";
  return out;
}

}  // namespace

std::string print_strategy_tree(const LogicalGraph& graph, const StrategySpec& spec, const CompiledStrategy& compiled,
                                bool reasons) {
  const ResolvedStrategy& r = compiled.resolved;
  std::string mesh;
  for (const ir::MeshAxis& a : spec.mesh.axes())
    mesh += fmt::format("{}{}={}", mesh.empty() ? "" : ", ", a.name, a.size);
  std::string out =
      fmt::format("strategy {}: mesh [{}] ({} devices), {} pipeline stage{}, {} micro-batch{}, {}\n", spec.name, mesh,
                  spec.mesh.size(), r.num_stages, r.num_stages == 1 ? "" : "s", r.micro_batches,
                  r.micro_batches == 1 ? "" : "es", spec.train.training ? "training" : "inference");

  std::vector<int> depth(graph.nodes.size(), 0);
  for (size_t n = 1; n < graph.nodes.size(); ++n) depth[n] = depth[graph.nodes[n].parent] + 1;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const TreeNode& node = graph.nodes[n];
    std::string indent(2 * depth[n], ' ');
    std::string name = n == 0 ? "(model)" : node.path.substr(node.path.find_last_of('.') + 1);
    if (n > 0 && node.path.back() == ']') name = node.path.substr(node.path.find_last_of('['));
    out += fmt::format("{}{} {}", indent, name, node.kind);
    const ResolvedSchedule& s = r.schedule[n];
    bool set_here = s.set_at == static_cast<int32_t>(n);
    if (!node.leaf() && (n == 0 || set_here)) {
      out += "  schedule " + schedule_text(s);
      if (reasons) out += set_here ? " (user)" : " (default)";
    }
    if (node.leaf() && !node.ops.empty()) out += fmt::format("  stage {}", r.stage_of_op[node.ops.front()]);
    // Where a config turns the run's FP8 recipe off (or back on) below.
    if (n < spec.schedule.size() && spec.schedule[n] && spec.schedule[n]->fp8)
      out += *spec.schedule[n]->fp8 ? "  fp8=on" : "  fp8=off";
    if (node.leaf() && reasons && s.recompute) {
      const std::string& from = graph.nodes[s.set_at].path;
      out += fmt::format("  recompute (inherited from {})", from.empty() ? "the model" : from);
    }
    out += "\n";
    for (int32_t op : node.ops) {
      out += fmt::format("{}  {}", indent, ops::op_name(graph.ops[op].type));
      const OpSbp& sbp = compiled.sbp.ops[op];
      for (size_t a = 0; a < sbp.axes.size(); ++a) {
        out += fmt::format("  {}={}", spec.mesh.axes()[a].name, to_string(sbp.axes[a].compute));
        if (reasons) out += fmt::format(" ({})", reason_name(sbp.reasons[a]));
      }
      out += "\n";
    }
    for (int32_t t : node.params) {
      const Tensor& p = graph.tensors[t];
      bool used = false;
      for (const LogicalOp& op : graph.ops)
        for (const Operand& in : op.inputs) used |= in.tensor == t;
      if (!used) continue;
      std::string param = p.name.substr(p.name.find_last_of('.') + 1);
      out += fmt::format("{}  {} {} [{}]", indent, p.trainable ? "param" : "buffer", param,
                         layout_text(spec.mesh, compiled.sbp.layouts[t]));
      const ParamMemoryConfig& m = spec.memory[t];
      if (m.grad) out += fmt::format(" grad [{}]", layout_text(spec.mesh, compiled.sbp.grad_layouts[t]));
      if (m.optimizer) out += fmt::format(" optimizer [{}]", layout_text(spec.mesh, compiled.sbp.optimizer_layouts[t]));
      if (reasons) out += m.value ? " (user)" : " (as its first use reads it)";
      out += "\n";
    }
    // Inference with a KV cache: each attention's cache, laid out as its
    // keys arrive but where memory(cache) splits its positions.
    if (!spec.train.kv_cache) continue;
    const std::optional<TensorLayoutConfig>& split = spec.cache[n];
    for (int32_t op : node.ops) {
      const LogicalOp& attention = graph.ops[op];
      if (attention.type != ops::OpKind::Attention) continue;
      const auto positions = static_cast<uint8_t>(graph.tensors[attention.inputs[1].tensor].dims.size() - 2);
      ir::Layout cache;
      for (size_t a = 0; a < compiled.sbp.ops[op].axes.size(); ++a) {
        const bool by_position = split && (split->written >> a & 1u) && split->layout[a].kind == ir::Sbp::Split &&
                                 spec.mesh.axes()[a].size > 1;
        cache.push_back(by_position ? ir::Sbp{ir::Sbp::Split, positions} : compiled.sbp.ops[op].axes[a].inputs[1]);
      }
      out += fmt::format("{}  kv cache [{}]", indent, layout_text(spec.mesh, cache));
      if (reasons) out += split ? " (user)" : " (as its keys)";
      out += "\n";
    }
  }
  return out;
}

}  // namespace dstc::compiler
