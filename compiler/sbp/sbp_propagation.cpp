#include "compiler/sbp/sbp_propagation.h"

#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/sbp/boxing_plan.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::compiler {
namespace {

double logical_bytes(const Tensor& t, int32_t micro_batches) {
  double n = static_cast<double>(t.numel()) * ir::dtype_bytes(t.dtype);
  return t.batch_axis >= 0 ? n / micro_batches : n;
}

struct Propagator {
  const LogicalGraph& graph;
  const StrategySpec& spec;
  const PropagationOptions& options;
  DiagnosticEngine& diags;
  SbpAssignment result;
  // Inputs and params: bit a set once their stored layout on mesh axis a
  // is fixed (by a memory config, or by their first consumer).
  std::vector<uint32_t> fixed_axes;
  static constexpr uint32_t kAllAxes = ~0u;
  int axes = 0;
  // Candidate signatures by what they depend on (the op's type, normalized
  // axis, operand and output dim names; a reshape's sizes too): the layers
  // of a repeat share them.
  std::unordered_map<std::string, std::vector<AxisSignature>> candidate_cache;
  std::string candidate_key;

  const std::vector<AxisSignature>& candidates_of(const LogicalOp& op) {
    std::string& key = candidate_key;
    key.clear();
    key += static_cast<char>(op.type);
    key += std::to_string(op.axis);
    for (const Operand& in : op.inputs) {
      key += ';';
      for (const std::string& d : in.dims) key += d, key += ',';
    }
    key += '|';
    for (const std::string& d : op.output_dims) key += d, key += ',';
    if (op.type == ops::OpKind::Reshape) {
      for (int32_t t : {op.inputs[0].tensor, op.output}) {
        key += '#';
        for (const auto& d : graph.tensors[t].dims) key += std::to_string(d.size), key += ',';
      }
    }
    auto [it, fresh] = candidate_cache.try_emplace(key);
    if (fresh) it->second = candidate_signatures(graph, op);
    return it->second;
  }

  Propagator(const LogicalGraph& g, const StrategySpec& s, const PropagationOptions& o, DiagnosticEngine& d)
      : graph(g), spec(s), options(o), diags(d) {
    axes = s.mesh.axis_count();
    result.ops.resize(g.ops.size());
    result.layouts.assign(g.tensors.size(), ir::Layout(axes, kBroadcast));
    fixed_axes.assign(g.tensors.size(), 0);
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      if (const TensorLayoutConfig* value = value_config(static_cast<int32_t>(t))) {
        result.layouts[t] = without_single_flat(value->over(result.layouts[t]));
        fixed_axes[t] = value->written;
      }
    }
  }

  // Size of tensor axis `dim` on one device once `layout` (axes < upto) splits it.
  int64_t local_size(const Tensor& t, const ir::Layout& layout, int dim, int upto) const {
    int64_t size = t.dims[dim].size;
    if (dim == t.batch_axis) size /= options.micro_batches;
    for (int a = 0; a < upto; ++a)
      if (layout[a].kind == ir::Sbp::Split && layout[a].dim == dim) size /= spec.mesh.axes()[a].size;
    return size;
  }

  bool divides(const Tensor& t, const ir::Layout& layout, int axis, ir::Sbp s) const {
    if (s.kind != ir::Sbp::Split) return true;
    if (s.dim >= t.dims.size()) return false;
    return local_size(t, layout, s.dim, axis) % spec.mesh.axes()[axis].size == 0;
  }

  // The op's signature on `axis` divides all its tensors given axes < axis.
  bool signature_divides(const LogicalOp& op, const std::vector<ir::Layout>& in_layouts, const ir::Layout& out_layout,
                         int axis, const AxisSignature& sig) const {
    return !divisibility_problem(op, in_layouts, out_layout, axis, sig);
  }

  // Which dim a signature would split unevenly: "b = 12 per micro-batch".
  std::optional<std::string> divisibility_problem(const LogicalOp& op, const std::vector<ir::Layout>& in_layouts,
                                                  const ir::Layout& out_layout, int axis,
                                                  const AxisSignature& sig) const {
    auto check = [&](const Tensor& t, const std::vector<std::string>& names, const ir::Layout& layout,
                     ir::Sbp s) -> std::optional<std::string> {
      if (divides(t, layout, axis, s)) return std::nullopt;
      if (s.dim >= names.size()) return std::string("a dim the tensor does not have");
      int64_t size = local_size(t, layout, s.dim, axis);
      return fmt::format("{} = {}{}", names[s.dim], size,
                         s.dim == t.batch_axis && options.micro_batches > 1 ? " per micro-batch" : "");
    };
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (auto p = check(graph.tensors[op.inputs[i].tensor], op.inputs[i].dims, in_layouts[i], sig.inputs[i])) return p;
    }
    return check(graph.tensors[op.output], op.output_dims, out_layout, sig.output);
  }

  // A user config that cannot apply is reported once per mesh axis.
  bool first_report(const ComputeConfig& config, int axis) {
    return reported.insert({config.where.file, config.where.begin, axis}).second;
  }
  std::set<std::tuple<FileId, uint32_t, int>> reported;
  // Split problems already reported by text: configs of one template that
  // split the same dim (every S(b) of a batch dp does not divide) are one
  // problem, reported once.
  std::set<std::string> reported_splits;
  std::set<std::tuple<FileId, uint32_t, std::string_view>> reported_stored;

  // Communication this signature costs on `axis`: boxing the inputs from
  // where they are, plus the all-reduce a partial output will need.
  double cost(const LogicalOp& op, int axis, const AxisSignature& sig) const {
    double bytes = 0;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      int32_t t = op.inputs[i].tensor;
      if (!(fixed_axes[t] & (1u << axis)) && graph.tensors[t].producer < 0) continue;  // free to store as needed
      ir::Layout from = result.layouts[t];
      ir::Layout to = from;
      to[axis] = sig.inputs[i];
      bytes +=
          boxing_bytes(plan_boxing(from, to), from, logical_bytes(graph.tensors[t], options.micro_batches), spec.mesh);
    }
    if (sig.output.kind == ir::Sbp::PartialSum) {
      ir::Layout out = result.layouts[op.output];
      out[axis] = kPartial;
      ir::Layout reduced = out;
      reduced[axis] = kBroadcast;
      bytes += boxing_bytes(plan_boxing(out, reduced), out,
                            logical_bytes(graph.tensors[op.output], options.micro_batches), spec.mesh);
    }
    return bytes;
  }

  // Propagation may keep a split or partial an input brings, or replicate.
  bool inherited(const LogicalOp& op, int axis, const AxisSignature& sig) const {
    if (sig.compute.kind == ir::Sbp::Broadcast) return true;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      int32_t t = op.inputs[i].tensor;
      if (graph.tensors[t].producer < 0) continue;
      ir::Sbp have = result.layouts[t][axis];
      if (sig.compute.kind == ir::Sbp::PartialSum && have.kind == ir::Sbp::PartialSum) return true;
      if (sig.compute.kind == ir::Sbp::Split && have.kind == ir::Sbp::Split &&
          op.inputs[i].dims[have.dim] == sig.compute.dim)
        return true;
    }
    return false;
  }

  const TensorLayoutConfig* value_config(int32_t t) const {
    if (graph.tensors[t].kind != TensorKind::Param || static_cast<size_t>(t) >= spec.memory.size()) return nullptr;
    return spec.memory[t].value ? &*spec.memory[t].value : nullptr;
  }

  // Where each parameter's gradient and optimizer state live, once its
  // value's layout is known.
  void place_param_state() {
    result.grad_layouts.assign(graph.tensors.size(), {});
    result.optimizer_layouts.assign(graph.tensors.size(), {});
    for (int32_t t = 0; t < static_cast<int32_t>(graph.tensors.size()); ++t) {
      if (graph.tensors[t].kind != TensorKind::Param) continue;
      const ir::Layout& value = result.layouts[t];
      ir::Layout grad;
      for (int a = 0; a < axes; ++a) grad.push_back(a == options.pipeline_axis ? value[a] : dual(value[a]));
      const ParamMemoryConfig* m = static_cast<size_t>(t) < spec.memory.size() ? &spec.memory[t] : nullptr;
      result.grad_layouts[t] = without_single_flat(m && m->grad ? m->grad->over(grad) : grad);
      result.optimizer_layouts[t] = without_single_flat(m && m->optimizer ? m->optimizer->over(value) : value);
      if (!m) continue;
      check_divides(t, "value", m->value, value);
      check_divides(t, "gradient", m->grad, result.grad_layouts[t]);
      check_divides(t, "optimizer state", m->optimizer, result.optimizer_layouts[t]);
    }
  }

  // One device along the axis holds the whole block: no chunk to flatten.
  ir::Layout without_single_flat(ir::Layout layout) const {
    for (size_t a = 0; a < layout.size(); ++a)
      if (layout[a].kind == ir::Sbp::Flat && spec.mesh.axes()[a].size == 1) layout[a] = ir::Sbp{};
    return layout;
  }

  // A memory config's split lands on top of the splits the compute configs
  // give the axes it leaves out; together they must divide the dim. One
  // report per config and role.
  void check_divides(int32_t t, std::string_view role, const std::optional<TensorLayoutConfig>& config,
                     const ir::Layout& layout) {
    if (!config) return;
    const Tensor& tensor = graph.tensors[t];
    for (size_t d = 0; d < tensor.dims.size(); ++d) {
      int64_t parts = 1;
      std::string over;
      for (int a = 0; a < axes; ++a) {
        if (layout[a].kind != ir::Sbp::Split || layout[a].dim != d) continue;
        parts *= spec.mesh.axes()[a].size;
        over += fmt::format("{}{} ({})", over.empty() ? "" : " and ", spec.mesh.axes()[a].name,
                            config->written & (1u << a) ? "this config" : "the compute configs");
      }
      if (tensor.dims[d].size % parts == 0) continue;
      if (!reported_stored.insert({config->where.file, config->where.begin, role}).second) return;
      diags
          .error(diag::kSplitNotDivisible, config->where,
                 fmt::format("the {} of {} would split dim {} (size {}) {} ways, which does not divide it", role,
                             tensor.name, tensor.dims[d].name, tensor.dims[d].size, parts))
          .note(fmt::format("split over {}", over));
      return;
    }
  }

  const ComputeConfig* user_config(const LogicalOp& op) const {
    if (op.node >= 0 && op.node < static_cast<int32_t>(spec.compute.size()) && spec.compute[op.node])
      return &*spec.compute[op.node];
    return nullptr;
  }

  void choose(int32_t op_id) {
    const LogicalOp& op = graph.ops[op_id];
    OpSbp& chosen = result.ops[op_id];
    std::vector<ir::Layout> in_layouts;
    for (const Operand& in : op.inputs) in_layouts.push_back(result.layouts[in.tensor]);
    ir::Layout out_layout(axes, kBroadcast);

    for (int a = 0; a < axes; ++a) {
      std::optional<AxisSignature> sig;
      ConfigReason reason = ConfigReason::Propagated;
      if (a == options.pipeline_axis) {
        std::string unused;
        sig = signature_for(graph, op, {ir::Sbp::Broadcast, {}}, unused);
        reason = ConfigReason::Pipeline;
      }
      const ComputeConfig* user = user_config(op);
      for (auto [config, why] :
           {std::pair{user, ConfigReason::User},
            std::pair{spec.default_compute ? &*spec.default_compute : nullptr, ConfigReason::Default}}) {
        if (sig || !config || a >= static_cast<int>(config->axes.size()) || !config->axes[a]) continue;
        std::string why_not;
        auto s = signature_for(graph, op, *config->axes[a], why_not);
        if (!s) {
          bool missing_dim = why_not.find(" has no ") != std::string::npos;
          if (why == ConfigReason::User && !missing_dim && first_report(*config, a)) {
            diags
                .error(diag::kComputeConfigInvalid, config->where,
                       fmt::format("{} on mesh axis '{}' cannot apply: {}", to_string(*config->axes[a]),
                                   spec.mesh.axes()[a].name, why_not))
                .note(op.where, fmt::format("the {} op is here", ops::op_name(op.type)));
          }
          continue;
        }
        if (auto problem = divisibility_problem(op, in_layouts, out_layout, a, *s)) {
          std::string message =
              fmt::format("{} on mesh axis '{}' splits {}, which {} devices do not divide", to_string(*config->axes[a]),
                          spec.mesh.axes()[a].name, *problem, spec.mesh.axes()[a].size);
          if (why == ConfigReason::User && first_report(*config, a) && reported_splits.insert(message).second) {
            diags.error(diag::kSplitNotDivisible, config->where, message)
                .note(op.where, fmt::format("first in this {} op", ops::op_name(op.type)));
          } else if (why == ConfigReason::Default && first_report(*config, a)) {
            // Silently replicating the op over the axis would predict a
            // step many times slower with no hint why.
            diags
                .warning(diag::kDefaultSplitDropped, config->where,
                         message + "; the planner chose another layout there")
                .note(op.where, fmt::format("first in this {} op", ops::op_name(op.type)))
                .note(problem->find(" per micro-batch") != std::string::npos
                          ? "see the chosen layouts with --explain; a micro-batch count that leaves each device a "
                            "whole number of samples keeps the split"
                          : "see the chosen layouts with --explain");
          }
          continue;
        }
        sig = s;
        reason = why;
      }
      if (!sig) {
        double best = 0;
        for (const AxisSignature& c : candidates_of(op)) {
          if (!inherited(op, a, c) || !signature_divides(op, in_layouts, out_layout, a, c)) continue;
          double k = cost(op, a, c);
          if (!sig || k < best) {
            sig = c;
            best = k;
          }
        }
      }
      for (size_t i = 0; i < op.inputs.size(); ++i) in_layouts[i][a] = sig->inputs[i];
      out_layout[a] = sig->output;
      chosen.axes.push_back(*sig);
      chosen.reasons.push_back(reason);
    }
    // Inputs and parameters are stored as their first consumer reads them,
    // on the axes no memory config fixes.
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      int32_t t = op.inputs[i].tensor;
      if (graph.tensors[t].producer < 0 && fixed_axes[t] != kAllAxes) {
        const TensorLayoutConfig* value = value_config(t);
        result.layouts[t] = value ? without_single_flat(value->over(in_layouts[i])) : in_layouts[i];
        fixed_axes[t] = kAllAxes;
      }
    }
    result.layouts[op.output] = out_layout;
  }
};

}  // namespace

std::string_view reason_name(ConfigReason r) {
  switch (r) {
    case ConfigReason::User: return "user";
    case ConfigReason::Default: return "default";
    case ConfigReason::Propagated: return "propagated";
    case ConfigReason::Pipeline: return "pipeline";
  }
  return "?";
}

SbpAssignment assign_sbp(const LogicalGraph& graph, const StrategySpec& spec, const PropagationOptions& options,
                         DiagnosticEngine& diags) {
  Propagator p(graph, spec, options, diags);
  for (int32_t op = 0; op < static_cast<int32_t>(graph.ops.size()); ++op) p.choose(op);
  p.place_param_state();
  return std::move(p.result);
}

}  // namespace dstc::compiler
