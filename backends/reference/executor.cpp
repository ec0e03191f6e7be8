#include "backends/reference/executor.h"

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "backends/reference/collectives.h"
#include "backends/reference/compute_ops.h"
#include "ir/groups.h"
#include "ir/printer.h"
#include "ir/registry.h"

namespace dstc::reference {

namespace {

// What place_on_device needs of an S(flat) value beyond its local type.
std::span<const int64_t> flat_logical_shape(const ir::Module& module, const ir::Value& value) {
  return value.logical != ir::kNone ? module.type(value.logical).shape() : std::span<const int64_t>{};
}

}  // namespace

Execution::Execution(const ir::Module& module, const ir::Function& function)
    : module_(&module),
      function_(&function),
      locals_(function.values.size()),
      computed_(function.values.size(), 0),
      partial_(function.values.size()) {
  const auto ranks = static_cast<size_t>(module.mesh().size());
  positions_.assign(module.device_set_count(), std::vector<int32_t>(ranks, -1));
  for (ir::DeviceSetId s = 0; s < module.device_set_count(); ++s) {
    std::span<const ir::Rank> members = module.members(s);
    for (size_t i = 0; i < members.size(); ++i)
      positions_[s][static_cast<size_t>(members[i])] = static_cast<int32_t>(i);
  }
}

const HostTensor* Execution::local(ir::ValueId v, ir::Rank r) const {
  int32_t pos = position(function_->values[v].devices, r);
  if (pos < 0 || !computed_[v]) return nullptr;
  return &locals_[v][static_cast<size_t>(pos)];
}

GatheredTensor Execution::logical(ir::ValueId v) const {
  const ir::Value& value = function_->values[v];
  std::vector<const HostTensor*> parts;
  for (const HostTensor& t : locals_[v]) parts.push_back(&t);
  ir::Layout layout = value.layout != ir::kNoLayout ? module_->layout(value.layout) : ir::Layout{};
  return gather_logical(*module_, value.devices, layout, parts, flat_logical_shape(*module_, value));
}

std::vector<int64_t> logical_shape(const ir::Module& module, const ir::Function& f, ir::ValueId v) {
  const ir::Value& value = f.values[v];
  const ir::TensorType& type = module.type(value.type);
  ir::Layout layout = value.layout != ir::kNoLayout ? module.layout(value.layout) : ir::Layout{};
  return place_on_device(module, value.devices, layout, type.shape(), module.members(value.devices).front(),
                         flat_logical_shape(module, value))
      .logical_shape;
}

std::optional<HostTensor> logical_argument(const ir::Module& m, const ir::Function& f, const ir::Arg& arg,
                                           const ArgumentSource& arguments, Arithmetic arithmetic, std::string& error) {
  const ir::TensorType& type = m.value_type(f, arg.value);
  ArgumentRequest request{m.value_name(f, arg.value),     arg.kind, type.dtype,
                          logical_shape(m, f, arg.value), arg.data, std::string(m.str(arg.data.data))};
  if (arg.data.data == 0) request.data_name = request.name;
  std::optional<HostTensor> logical = arguments(request, error);
  if (!logical) return std::nullopt;
  if (logical->shape != request.logical_shape) {
    error = fmt::format("argument %{} was given a tensor of shape [{}], expected [{}]", request.name,
                        fmt::join(logical->shape, ", "), fmt::join(request.logical_shape, ", "));
    return std::nullopt;
  }
  round_to_storage(*logical, arithmetic);
  return logical;
}

HostTensor local_argument(const ir::Module& m, const ir::Function& f, ir::ValueId arg, const HostTensor& logical,
                          ir::Rank r) {
  const ir::Value& value = f.values[arg];
  const ir::TensorType& type = m.type(value.type);
  ir::Layout layout = value.layout != ir::kNoLayout ? m.layout(value.layout) : ir::Layout{};
  DevicePlacement where = place_on_device(m, value.devices, layout, type.shape(), r, flat_logical_shape(m, value));
  HostTensor local = local_part(logical, where, type.shape());
  local.dtype = type.dtype;
  return local;
}

// One run of the executor over a function.
class ExecutorRun {
 public:
  ExecutorRun(Execution& e, const ExecutorOptions& options)
      : e_(e), m_(*e.module_), f_(*e.function_), options_(options) {
    for (const ir::Op& op : f_.ops) micro_batches_ = std::max(micro_batches_, op.micro_batch + 1);
  }

  void run(const ArgumentSource& arguments) {
    for (const ir::Arg& arg : f_.args)
      if (!bind_argument(arg, arguments)) return;
    for (ir::OpId id = 0; id < f_.ops.size(); ++id) {
      if (!run_op(id)) return;
      ++e_.ops_run;
      if (options_.after_op) options_.after_op(id);
    }
  }

 private:
  bool stop(ExecutionProblem::Kind kind, ir::OpId op, ir::ValueId value, std::string message) {
    e_.problem = ExecutionProblem{kind, op, value, std::move(message)};
    return false;
  }

  void allocate(ir::ValueId v) {
    const ir::Value& value = f_.values[v];
    const ir::TensorType& type = m_.type(value.type);
    e_.locals_[v].assign(m_.members(value.devices).size(), HostTensor(type));
  }

  bool bind_argument(const ir::Arg& arg, const ArgumentSource& arguments) {
    std::string error;
    std::optional<HostTensor> logical = logical_argument(m_, f_, arg, arguments, options_.arithmetic, error);
    if (!logical) return stop(ExecutionProblem::Argument, ir::kNone, arg.value, error);
    e_.locals_[arg.value].clear();
    for (ir::Rank r : m_.members(f_.values[arg.value].devices))
      e_.locals_[arg.value].push_back(local_argument(m_, f_, arg.value, *logical, r));
    e_.computed_[arg.value] = 1;
    e_.partial_[arg.value] = declared_partial(m_, f_, arg.value);
    return true;
  }

  // Layout inference for the op's results; false (and the problem) on a
  // partial read or a declared layout that disagrees.
  bool track_layouts(ir::OpId id, const ir::Op& op, std::optional<PartialAxes> received) {
    std::vector<PartialAxes> operands;
    for (ir::ValueId v : f_.operands(op)) operands.push_back(e_.partial_[v]);
    if (!options_.check_layouts) {
      for (int i = 0; i < op.result_count; ++i)
        e_.partial_[f_.result(op, i)] = declared_partial(m_, f_, f_.result(op, i));
      return true;
    }
    PartialInference inferred = infer_partial(m_, f_, op, operands);
    if (!inferred.error.empty()) return stop(ExecutionProblem::PartialRead, id, ir::kNone, inferred.error);
    if (received) inferred.results.assign(1, *received);
    for (int i = 0; i < op.result_count; ++i) {
      ir::ValueId v = f_.result(op, i);
      PartialAxes declared = declared_partial(m_, f_, v);
      uint32_t spanned = spanned_axes(m_, f_.values[v].devices);
      PartialAxes got = inferred.results[static_cast<size_t>(i)];
      got.sum &= spanned;
      got.max &= spanned;
      bool checked = i < static_cast<int>(inferred.checked.size()) && inferred.checked[static_cast<size_t>(i)];
      if (checked && f_.values[v].layout != ir::kNoLayout && !(got == declared)) {
        uint32_t hidden = got.any() & ~declared.any();
        const ir::Layout& layout = m_.layout(f_.values[v].layout);
        std::string message =
            hidden != 0
                ? fmt::format("%{} is declared {} but holds a partial sum on {}: a reduction over {} is missing",
                              m_.value_name(f_, v), layout_text(m_.mesh(), layout), axis_names(m_.mesh(), hidden),
                              axis_names(m_.mesh(), hidden))
                : fmt::format("%{} is declared {} but holds the whole value on {}, not a partial sum",
                              m_.value_name(f_, v), layout_text(m_.mesh(), layout),
                              axis_names(m_.mesh(), declared.any() & ~got.any()));
        return stop(ExecutionProblem::LayoutMismatch, id, v, message);
      }
      e_.partial_[v] = checked ? got : declared;
    }
    return true;
  }

  bool run_op(ir::OpId id) {
    const ir::Op& op = f_.ops[id];
    std::span<const ir::ValueId> operands = f_.operands(op);
    for (ir::ValueId v : operands)
      if (!e_.computed_[v])
        return stop(ExecutionProblem::Runtime, id, v,
                    fmt::format("%{} is used before it is computed", m_.value_name(f_, v)));
    const ir::OpInfo& info = ir::op_info(op.kind);
    if (op.kind == ir::OpKind::Send) return run_send(id, op);
    if (op.kind == ir::OpKind::Recv) return run_recv(id, op);
    if (!track_layouts(id, op, std::nullopt)) return false;
    for (int i = 0; i < op.result_count; ++i) allocate(f_.result(op, i));
    bool ok = info.category == ir::OpCategory::Collective ? run_collective_op(id, op) : run_compute_op(id, op);
    if (!ok) return false;
    for (int i = 0; i < op.result_count; ++i) {
      ir::ValueId v = f_.result(op, i);
      for (HostTensor& t : e_.locals_[v]) round_to_storage(t, options_.arithmetic);
      e_.computed_[v] = 1;
    }
    return true;
  }

  // The operand's local value on rank r, or nullptr (and the problem).
  const HostTensor* operand_on(ir::OpId id, ir::ValueId v, ir::Rank r) {
    int32_t pos = e_.position(f_.values[v].devices, r);
    if (pos >= 0) return &e_.locals_[v][static_cast<size_t>(pos)];
    stop(ExecutionProblem::Runtime, id, v, fmt::format("%{} does not live on rank {}", m_.value_name(f_, v), r));
    return nullptr;
  }

  HostTensor* result_on(ir::ValueId v, ir::Rank r) {
    int32_t pos = e_.position(f_.values[v].devices, r);
    return pos >= 0 ? &e_.locals_[v][static_cast<size_t>(pos)] : nullptr;
  }

  bool run_compute_op(ir::OpId id, const ir::Op& op) {
    std::span<const ir::ValueId> operands = f_.operands(op);
    std::vector<const HostTensor*> in(operands.size());
    std::vector<HostTensor> out(op.result_count);
    for (ir::Rank r : m_.members(op.devices)) {
      for (size_t i = 0; i < operands.size(); ++i)
        if (!(in[i] = operand_on(id, operands[i], r))) return false;
      for (int i = 0; i < op.result_count; ++i)
        out[static_cast<size_t>(i)] = HostTensor(m_.value_type(f_, f_.result(op, i)));
      std::string error = run_compute({m_, f_, op, r, micro_batches_}, in, out);
      if (!error.empty()) return stop(ExecutionProblem::Runtime, id, ir::kNone, error);
      for (int i = 0; i < op.result_count; ++i) {
        HostTensor* dst = result_on(f_.result(op, i), r);
        if (dst) *dst = std::move(out[static_cast<size_t>(i)]);
      }
    }
    return true;
  }

  // A grouped collective: each operand as if alone.
  bool run_collective_op(ir::OpId id, const ir::Op& op) {
    for (const std::vector<ir::Rank>& group : ir::groups_of(m_, op)) {
      for (int i = 0; i < op.result_count; ++i) {
        ir::ValueId operand = f_.operands(op)[static_cast<size_t>(i)], result = f_.result(op, i);
        std::vector<const HostTensor*> in;
        std::vector<HostTensor> out;
        for (ir::Rank r : group) {
          const HostTensor* t = operand_on(id, operand, r);
          if (!t) return false;
          in.push_back(t);
          out.emplace_back(m_.value_type(f_, result));
        }
        std::string error = run_collective(m_, f_, op, in, out);
        if (!error.empty()) return stop(ExecutionProblem::Runtime, id, ir::kNone, error);
        for (size_t k = 0; k < group.size(); ++k)
          if (HostTensor* dst = result_on(result, group[k])) *dst = std::move(out[k]);
      }
    }
    return true;
  }

  bool run_send(ir::OpId id, const ir::Op& op) {
    ir::ValueId operand = f_.operands(op)[0];
    for (ir::Rank r : m_.members(op.devices)) {
      std::optional<ir::Rank> to = ir::p2p_peer(m_, op, r);
      const HostTensor* t = operand_on(id, operand, r);
      if (!t) return false;
      if (!to) return stop(ExecutionProblem::Runtime, id, ir::kNone, fmt::format("rank {} has no receiver", r));
      mailbox_[{op.channel, *to}] = *t;
    }
    sent_partial_[op.channel] = e_.partial_[operand];
    return true;
  }

  bool run_recv(ir::OpId id, const ir::Op& op) {
    ir::ValueId result = f_.result(op);
    auto sent = sent_partial_.find(op.channel);
    if (sent == sent_partial_.end())
      return stop(ExecutionProblem::Runtime, id, ir::kNone,
                  fmt::format("recv on channel {} comes before its send in program order", op.channel));
    if (!track_layouts(id, op, sent->second)) return false;
    allocate(result);
    for (ir::Rank r : m_.members(op.devices)) {
      auto it = mailbox_.find({op.channel, r});
      if (it == mailbox_.end())
        return stop(ExecutionProblem::Runtime, id, ir::kNone,
                    fmt::format("rank {} receives nothing on channel {}", r, op.channel));
      HostTensor* dst = result_on(result, r);
      if (dst) {
        if (it->second.shape != dst->shape)
          return stop(ExecutionProblem::Runtime, id, result,
                      fmt::format("channel {} carries [{}], the recv expects [{}]", op.channel,
                                  fmt::join(it->second.shape, ", "), fmt::join(dst->shape, ", ")));
        dst->data = std::move(it->second.data);
      }
      mailbox_.erase(it);
    }
    e_.computed_[result] = 1;
    return true;
  }

  Execution& e_;
  const ir::Module& m_;
  const ir::Function& f_;
  const ExecutorOptions& options_;
  int32_t micro_batches_ = 1;
  std::map<std::pair<uint32_t, ir::Rank>, HostTensor> mailbox_;  // (channel, receiving rank)
  std::map<uint32_t, PartialAxes> sent_partial_;                 // per channel
};

Execution execute(const ir::Module& module, const ir::Function& function, const ArgumentSource& arguments,
                  const ExecutorOptions& options) {
  auto start = std::chrono::steady_clock::now();
  Execution e(module, function);
  ExecutorRun(e, options).run(arguments);
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return e;
}

}  // namespace dstc::reference
