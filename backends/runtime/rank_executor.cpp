#include "backends/runtime/rank_executor.h"

#include <chrono>

#include <fmt/format.h>

#include "backends/reference/compute_ops.h"
#include "backends/reference/logical_layout.h"
#include "backends/reference/returned_values.h"
#include "backends/runtime/ir_collectives.h"
#include "ir/printer.h"
#include "ir/registry.h"

namespace dstc::runtime {

using reference::HostTensor;

namespace {

int64_t device_bytes(const HostTensor& t) { return t.numel() * ir::dtype_bytes(t.dtype); }

}  // namespace

RankExecutor::RankExecutor(const ir::Module& module, const ir::Function& function, ir::Rank rank, Communicator& comm,
                           reference::Arithmetic arithmetic)
    : module_(module),
      function_(function),
      comm_(comm),
      arithmetic_(arithmetic),
      program_(ir::project_rank(module, function, rank)),
      next_arguments_(reference::next_step_arguments(module, function)),
      last_use_(function.values.size(), 0),
      kept_(function.values.size(), 0),
      values_(function.values.size()) {
  for (const ir::Op& op : function.ops) micro_batches_ = std::max(micro_batches_, op.micro_batch + 1);
  for (size_t i = 0; i < program_.ops.size(); ++i)
    for (ir::ValueId v : function.operands(function.ops[program_.ops[i].op])) last_use_[v] = i;
  for (const ir::Arg& a : function.args) kept_[a.value] = 1;
  for (ir::ValueId v : function.returns) kept_[v] = 1;
}

void RankExecutor::store(ir::ValueId v, HostTensor t) {
  release(v);
  live_bytes_ += device_bytes(t);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  values_[v] = std::move(t);
}

void RankExecutor::release(ir::ValueId v) {
  if (!values_[v]) return;
  live_bytes_ -= device_bytes(*values_[v]);
  values_[v].reset();
}

HostTensor RankExecutor::take(ir::ValueId v) {
  HostTensor t = std::move(*values_[v]);
  live_bytes_ -= device_bytes(t);
  values_[v].reset();
  return t;
}

void RankExecutor::bind(const reference::ArgumentSource& arguments) {
  for (const ir::Arg& arg : function_.args) {
    std::span<const ir::Rank> members = module_.members(function_.values[arg.value].devices);
    if (std::find(members.begin(), members.end(), rank()) == members.end()) continue;
    std::string error;
    std::optional<HostTensor> logical =
        reference::logical_argument(module_, function_, arg, arguments, arithmetic_, error);
    if (!logical) comm_.abort(error);
    store(arg.value, reference::local_argument(module_, function_, arg.value, *logical, rank()));
  }
}

const HostTensor& RankExecutor::operand(ir::ValueId v, const ir::Op& op) {
  if (!values_[v])
    comm_.abort(fmt::format("%{} is not held on rank {} where {} reads it", module_.value_name(function_, v), rank(),
                            ir::print_op(module_, function_, op)));
  return *values_[v];
}

void RankExecutor::step(bool record) {
  if (stepped_) {
    for (size_t i = 0; i < function_.returns.size(); ++i) {
      ir::ValueId r = function_.returns[i], arg = next_arguments_[i];
      if (arg != ir::kNone && values_[r] && values_[arg]) store(arg, take(r));
    }
    for (ir::ValueId v = 0; v < values_.size(); ++v)
      if (function_.values[v].def != ir::kNone) release(v);
  }
  stepped_ = true;
  if (record) {
    spans_.clear();
    memory_.clear();
  }
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (size_t i = 0; i < program_.ops.size(); ++i) {
    const double begin = record ? since_start() : 0;
    run_op(program_.ops[i]);
    for (ir::ValueId v : function_.operands(function_.ops[program_.ops[i].op]))
      if (last_use_[v] == i && !kept_[v]) release(v);
    if (record) {
      const double end = since_start();
      spans_.push_back({rank(), program_.ops[i].op, begin, end});
      memory_.push_back({rank(), end, live_bytes_});
    }
  }
}

void RankExecutor::run_op(const ir::RankOp& rank_op) {
  const ir::Op& op = function_.ops[rank_op.op];
  std::span<const ir::ValueId> operands = function_.operands(op);
  auto lives_here = [&](ir::ValueId v) {
    std::span<const ir::Rank> members = module_.members(function_.values[v].devices);
    return std::find(members.begin(), members.end(), rank()) != members.end();
  };
  auto result_tensor = [&](int i) { return HostTensor(module_.value_type(function_, function_.result(op, i))); };
  if (op.kind == ir::OpKind::Send) {
    comm_.send(operand(operands[0], op).data, rank_op.peer, op.channel);
    return;
  }
  if (op.kind == ir::OpKind::Recv) {
    HostTensor t = result_tensor(0);
    comm_.recv(t.data, rank_op.peer, op.channel);
    store(function_.result(op), std::move(t));
    return;
  }
  if (ir::op_info(op.kind).category == ir::OpCategory::Collective) {
    for (int i = 0; i < op.result_count; ++i) {
      HostTensor t = result_tensor(i);
      run_collective(module_, function_, op, rank_op, operand(operands[static_cast<size_t>(i)], op), t, comm_);
      reference::round_to_storage(t, arithmetic_);
      if (lives_here(function_.result(op, i))) store(function_.result(op, i), std::move(t));
    }
    return;
  }
  std::vector<const HostTensor*> in;
  for (ir::ValueId v : operands) in.push_back(&operand(v, op));
  std::vector<HostTensor> out;
  for (int i = 0; i < op.result_count; ++i) out.push_back(result_tensor(i));
  std::string error = reference::run_compute({module_, function_, op, rank(), micro_batches_}, in, out);
  if (!error.empty()) comm_.abort(fmt::format("{}: {}", ir::print_op(module_, function_, op), error));
  for (int i = 0; i < op.result_count; ++i) {
    HostTensor& t = out[static_cast<size_t>(i)];
    reference::round_to_storage(t, arithmetic_);
    if (lives_here(function_.result(op, i))) store(function_.result(op, i), std::move(t));
  }
}

const HostTensor* RankExecutor::returned(ir::ValueId v) const { return values_[v] ? &*values_[v] : nullptr; }

double RankExecutor::loss_share() const {
  double share = 0;
  for (size_t i = 0; i < function_.returns.size(); ++i) {
    ir::ValueId r = function_.returns[i];
    if (next_arguments_[i] != ir::kNone || !values_[r]) continue;
    const ir::Value& value = function_.values[r];
    ir::Layout layout = value.layout != ir::kNoLayout ? module_.layout(value.layout) : ir::Layout{};
    // Counted once per logical value: by the first replica on B axes, by
    // every member on P axes (their sum is the value).
    if (reference::place_on_device(module_, value.devices, layout, values_[r]->shape, rank()).first_replica)
      share += values_[r]->data.empty() ? 0 : values_[r]->data[0];
  }
  return share;
}

}  // namespace dstc::runtime
