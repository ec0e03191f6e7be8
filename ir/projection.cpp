#include "ir/projection.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "ir/groups.h"
#include "ir/printer.h"
#include "ir/registry.h"

namespace dstc::ir {

namespace {

RankOp project_op(const Module& module, const Op& op, OpId i, Rank rank) {
  RankOp r;
  r.op = i;
  switch (op_info(op.kind).category) {
    case OpCategory::Collective:
      r.group = group_of(module, op, rank);
      r.group_index = static_cast<int32_t>(std::find(r.group.begin(), r.group.end(), rank) - r.group.begin());
      break;
    case OpCategory::PointToPoint: r.peer = p2p_peer(module, op, rank).value_or(-1); break;
    default: break;
  }
  return r;
}

}  // namespace

RankProgram project_rank(const Module& module, const Function& f, Rank rank) {
  RankProgram p;
  p.rank = rank;
  for (const Arg& a : f.args) {
    if (module.contains(f.values[a.value].devices, rank)) p.args.push_back(a.value);
  }
  for (OpId i = 0; i < f.ops.size(); ++i) {
    if (module.contains(f.ops[i].devices, rank)) p.ops.push_back(project_op(module, f.ops[i], i, rank));
  }
  for (ValueId v : f.returns) {
    if (module.contains(f.values[v].devices, rank)) p.returns.push_back(v);
  }
  return p;
}

std::vector<RankProgram> project_ranks(const Module& module, const Function& f) {
  std::vector<RankProgram> programs(static_cast<size_t>(module.mesh().size()));
  for (Rank r = 0; r < module.mesh().size(); ++r) programs[static_cast<size_t>(r)].rank = r;
  for (const Arg& a : f.args) {
    for (Rank r : module.members(f.values[a.value].devices)) programs[static_cast<size_t>(r)].args.push_back(a.value);
  }
  for (OpId i = 0; i < f.ops.size(); ++i) {
    for (Rank r : module.members(f.ops[i].devices))
      programs[static_cast<size_t>(r)].ops.push_back(project_op(module, f.ops[i], i, r));
  }
  for (ValueId v : f.returns) {
    for (Rank r : module.members(f.values[v].devices)) programs[static_cast<size_t>(r)].returns.push_back(v);
  }
  return programs;
}

std::string print_rank_program(const Module& module, const Function& f, const RankProgram& program) {
  const Mesh& mesh = module.mesh();
  std::string out = fmt::format("rank {} (device {}, {}) @{} {{\n", program.rank, mesh.physical(program.rank),
                                print_rank_coords(mesh, program.rank), f.name);
  auto type_of = [&](ValueId v) { return to_string(module.value_type(f, v)); };
  for (ValueId v : program.args) {
    const Arg& arg = *std::find_if(f.args.begin(), f.args.end(), [&](const Arg& a) { return a.value == v; });
    out += fmt::format("  {} {} : {}{}\n", arg_kind_name(arg.kind), print_value(module, f, v), type_of(v),
                       print_input_data(module, f, arg));
  }
  for (const RankOp& r : program.ops) {
    const Op& op = f.ops[r.op];
    out += "  ";
    for (uint16_t i = 0; i < op.result_count; ++i) out += (i ? ", " : "") + print_value(module, f, op.first_result + i);
    if (op.result_count) out += " = ";
    out += op_name(op.kind);
    out += '(';
    std::span<const ValueId> operands = f.operands(op);
    for (size_t i = 0; i < operands.size(); ++i) out += (i ? ", " : "") + print_value(module, f, operands[i]);
    out += ')';
    out += print_attrs(module, f, op);
    if (!r.group.empty()) {
      out += " group [";
      for (size_t i = 0; i < r.group.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", r.group[i]);
      out += ']';
    }
    if (op.kind == OpKind::Send) out += fmt::format(" to rank {} channel {}", r.peer, op.channel);
    if (op.kind == OpKind::Recv) out += fmt::format(" from rank {} channel {}", r.peer, op.channel);
    if (op.stream != Stream::Compute) out += fmt::format(" stream {}", stream_name(op.stream));
    out += print_meta(module, op);
    for (uint16_t i = 0; i < op.result_count; ++i) out += (i ? ", " : " : ") + type_of(op.first_result + i);
    out += '\n';
  }
  out += "  return";
  for (size_t i = 0; i < program.returns.size(); ++i)
    out += (i ? ", " : " ") + print_value(module, f, program.returns[i]);
  out += "\n}\n";
  return out;
}

}  // namespace dstc::ir
