#include "backends/runtime/rank_executor.h"

#include <chrono>

#include <fmt/format.h>

#include "backends/reference/logical_layout.h"
#include "backends/reference/returned_values.h"
#include "backends/runtime/ir_collectives.h"
#include "ir/printer.h"
#include "ir/registry.h"

namespace dstc::runtime {

using reference::HostTensor;

RankExecutor::RankExecutor(const ir::Module& module, const ir::Function& function, ir::Rank rank, Communicator& comm,
                           Device& device)
    : module_(module),
      function_(function),
      comm_(comm),
      device_(device),
      program_(ir::project_rank(module, function, rank)),
      next_arguments_(reference::next_step_arguments(module, function)),
      last_use_(function.values.size(), kNeverRead),
      kept_(function.values.size(), 0),
      values_(function.values.size()) {
  for (const ir::Op& op : function.ops) micro_batches_ = std::max(micro_batches_, op.micro_batch + 1);
  for (size_t i = 0; i < program_.ops.size(); ++i)
    for (ir::ValueId v : function.operands(function.ops[program_.ops[i].op])) last_use_[v] = i;
  for (const ir::Arg& a : function.args) kept_[a.value] = 1;
  for (ir::ValueId v : function.returns) {
    kept_[v] = 1;
    is_loss_.push_back(reference::trace_source(module, function, v).optimizer == nullptr);
  }
  check_program();
}

void RankExecutor::check_program() {
  for (const ir::RankOp& rank_op : program_.ops) {
    const ir::Op& op = function_.ops[rank_op.op];
    if (ir::op_info(op.kind).category == ir::OpCategory::Collective || op.kind == ir::OpKind::Send ||
        op.kind == ir::OpKind::Recv)
      continue;
    if (std::string why = device_.cannot_run(module_, function_, op); !why.empty())
      comm_.abort(
          fmt::format("the {} device cannot run {}: {}", device_.name(), ir::print_op(module_, function_, op), why));
  }
  for (size_t i = 0; i < function_.returns.size(); ++i) {
    ir::ValueId r = function_.returns[i], arg = next_arguments_[i];
    if (is_loss_[i]) continue;
    const ir::Value &from = function_.values[r], *to = arg != ir::kNone ? &function_.values[arg] : nullptr;
    if (!to || from.type != to->type || from.layout != to->layout || from.devices != to->devices)
      comm_.abort(
          fmt::format("the program returns %{} as an update, but no argument of its type and layout takes it "
                      "in the next step",
                      module_.value_name(function_, r)));
  }
}

bool RankExecutor::lives_here(ir::ValueId v) const {
  std::span<const ir::Rank> members = module_.members(function_.values[v].devices);
  return std::find(members.begin(), members.end(), rank()) != members.end();
}

void RankExecutor::store(ir::ValueId v, std::unique_ptr<DeviceValue> value) {
  release(v);
  live_bytes_ += module_.value_type(function_, v).bytes();
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  values_[v] = std::move(value);
}

void RankExecutor::release(ir::ValueId v) {
  if (!values_[v]) return;
  live_bytes_ -= module_.value_type(function_, v).bytes();
  values_[v].reset();
}

std::unique_ptr<DeviceValue> RankExecutor::take(ir::ValueId v) {
  live_bytes_ -= module_.value_type(function_, v).bytes();
  return std::move(values_[v]);
}

void RankExecutor::bind(const reference::ArgumentSource& arguments, reference::Arithmetic arithmetic) {
  for (const ir::Arg& arg : function_.args) {
    if (!lives_here(arg.value)) continue;
    std::string error;
    std::optional<HostTensor> logical =
        reference::logical_argument(module_, function_, arg, arguments, arithmetic, error);
    if (!logical) comm_.abort(error);
    store(arg.value, device_.upload(reference::local_argument(module_, function_, arg.value, *logical, rank())));
  }
}

const DeviceValue& RankExecutor::operand(ir::ValueId v, const ir::Op& op) {
  if (!values_[v])
    comm_.abort(fmt::format("%{} is not held on rank {} where {} reads it", module_.value_name(function_, v), rank(),
                            ir::print_op(module_, function_, op)));
  return *values_[v];
}

void RankExecutor::step(bool record) {
  if (steps_ > 0) {
    for (size_t i = 0; i < function_.returns.size(); ++i) {
      ir::ValueId r = function_.returns[i], arg = next_arguments_[i];
      if (!is_loss_[i] && values_[r]) store(arg, take(r));
    }
    for (ir::ValueId v = 0; v < values_.size(); ++v)
      if (function_.values[v].def != ir::kNone) release(v);
  }
  if (record) {
    spans_.clear();
    memory_.clear();
  }
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (size_t i = 0; i < program_.ops.size(); ++i) {
    const double begin = record ? since_start() : 0;
    run_op(i);
    if (record) {
      device_.synchronize();
      const double end = since_start();
      spans_.push_back({rank(), program_.ops[i].op, begin, end});
      memory_.push_back({rank(), end, live_bytes_});
    }
  }
  device_.synchronize();
  ++steps_;
}

void RankExecutor::run_op(size_t index) {
  const ir::RankOp& rank_op = program_.ops[index];
  const ir::Op& op = function_.ops[rank_op.op];
  std::span<const ir::ValueId> operands = function_.operands(op);
  auto result_tensor = [&](int i) { return HostTensor(module_.value_type(function_, function_.result(op, i))); };
  auto keep = [&](ir::ValueId v, std::unique_ptr<DeviceValue> value) {
    if (lives_here(v) && (kept_[v] || last_use_[v] != kNeverRead)) store(v, std::move(value));
  };
  if (op.kind == ir::OpKind::Send) {
    comm_.send(device_.download(operand(operands[0], op)).data, rank_op.peer, op.channel);
  } else if (op.kind == ir::OpKind::Recv) {
    HostTensor t = result_tensor(0);
    comm_.recv(t.data, rank_op.peer, op.channel);
    keep(function_.result(op), device_.upload(t));
  } else if (ir::op_info(op.kind).category == ir::OpCategory::Collective) {
    for (int i = 0; i < op.result_count; ++i) {
      HostTensor t = result_tensor(i);
      run_collective(module_, function_, op, rank_op, device_.download(operand(operands[static_cast<size_t>(i)], op)),
                     t, comm_);
      keep(function_.result(op, i), device_.upload(t));
    }
  } else {
    std::vector<const DeviceValue*> in;
    for (ir::ValueId v : operands) in.push_back(&operand(v, op));
    std::vector<std::unique_ptr<DeviceValue>> out;
    reference::DeviceContext ctx{module_, function_, op, rank(), micro_batches_, steps_};
    std::string error = device_.compute(ctx, in, out);
    if (!error.empty()) comm_.abort(fmt::format("{}: {}", ir::print_op(module_, function_, op), error));
    for (int i = 0; i < op.result_count; ++i) keep(function_.result(op, i), std::move(out[static_cast<size_t>(i)]));
  }
  for (ir::ValueId v : operands)
    if (last_use_[v] == index && !kept_[v]) release(v);
}

std::optional<HostTensor> RankExecutor::returned(ir::ValueId v) const {
  if (!values_[v]) return std::nullopt;
  return device_.download(*values_[v]);
}

double RankExecutor::loss_share() const {
  double share = 0;
  for (size_t i = 0; i < function_.returns.size(); ++i) {
    ir::ValueId r = function_.returns[i];
    if (!is_loss_[i] || !values_[r]) continue;
    const ir::Value& value = function_.values[r];
    ir::Layout layout = value.layout != ir::kNoLayout ? module_.layout(value.layout) : ir::Layout{};
    HostTensor loss = device_.download(*values_[r]);
    // Counted once per logical value: by the first replica on B axes, by
    // every member on P axes (their sum is the value).
    if (reference::place_on_device(module_, value.devices, layout, loss.shape, rank()).first_replica)
      share += loss.data.empty() ? 0 : loss.data[0];
  }
  return share;
}

}  // namespace dstc::runtime
