#include "ir/registry.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "ir/groups.h"
#include "ir/registry_rules.h"

namespace dstc::ir {

namespace {

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> entries;
  rules::add_forward_ops(entries);
  rules::add_backward_ops(entries);
  rules::add_optimizer_ops(entries);
  rules::add_communication_ops(entries);
  rules::add_routing_ops(entries);
  std::vector<OpInfo> table(static_cast<size_t>(kOpKindCount));
  std::vector<bool> seen(table.size(), false);
  for (OpInfo& e : entries) {
    auto index = static_cast<size_t>(e.kind);
    if (seen[index]) throw std::logic_error("op registered twice: " + std::string(e.name));
    seen[index] = true;
    table[index] = std::move(e);
  }
  for (size_t i = 0; i < table.size(); ++i) {
    if (!seen[i]) throw std::logic_error("op kind not registered: " + std::to_string(i));
  }
  return table;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = build_table();
  return t;
}

constexpr std::array<std::string_view, kOpKindCount> kNames = {
#define DSTC_IR_OP(ident, name) name,
#include "ir/op_kinds.def"
#undef DSTC_IR_OP
};

}  // namespace

int OpInfo::attr_slot(std::string_view attr) const {
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (attrs[i].name == attr) return static_cast<int>(i);
  }
  return -1;
}

const OpInfo& op_info(OpKind kind) { return table()[static_cast<size_t>(kind)]; }

std::string_view op_name(OpKind kind) { return kNames[static_cast<size_t>(kind)]; }

std::optional<OpKind> find_op_kind(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

const AttrSpec& AttrReader::spec(std::string_view name) const {
  const OpInfo& info = op_info(kind_);
  int slot = info.attr_slot(name);
  if (slot < 0) throw std::logic_error(fmt::format("{} has no attribute '{}'", info.name, name));
  return info.attrs[static_cast<size_t>(slot)];
}

const Attr* AttrReader::find(std::string_view name) const {
  int slot = op_info(kind_).attr_slot(name);
  for (const Attr& a : attrs_) {
    if (a.slot == slot) return &a;
  }
  return nullptr;
}

int64_t AttrReader::integer(std::string_view name) const {
  const Attr* a = find(name);
  return a ? a->i : spec(name).default_int;
}

double AttrReader::real(std::string_view name) const {
  const Attr* a = find(name);
  if (a == nullptr) return spec(name).default_float;
  return a->type == AttrType::Float ? a->f : static_cast<double>(a->i);
}

std::string_view AttrReader::string(std::string_view name) const {
  const Attr* a = find(name);
  return a ? module_.str(a->s) : spec(name).default_string;
}

std::span<const int64_t> AttrReader::ints(std::string_view name) const {
  const Attr* a = find(name);
  if (a == nullptr) return {};
  return {int_pool_.data() + static_cast<size_t>(a->i), a->count};
}

OpCost op_cost(const Module& module, const Function& f, const Op& op) {
  const OpInfo& info = op_info(op.kind);
  TensorType operands[16];
  std::vector<TensorType> many;
  std::span<const TensorType> operand_span;
  std::span<const ValueId> ids = f.operands(op);
  if (ids.size() <= 16) {
    for (size_t i = 0; i < ids.size(); ++i) operands[i] = module.value_type(f, ids[i]);
    operand_span = {operands, ids.size()};
  } else {
    for (ValueId v : ids) many.push_back(module.value_type(f, v));
    operand_span = many;
  }
  TensorType results[8];
  size_t n = std::min<size_t>(op.result_count, 8);
  for (size_t i = 0; i < n; ++i) results[i] = module.value_type(f, op.first_result + static_cast<ValueId>(i));
  AttrReader reader(module, f, op);
  OpContext ctx{operand_span, reader, group_size(module, op)};
  OpCost cost = info.cost(ctx, {results, n});
  const double fill = op_fill(f, op).fullest;
  if (fill == 1) return cost;
  // The work scales with the filled share; the bytes with the filled share
  // of the values' bytes, so a grouped GEMM still reads whole weights and
  // an op that passes over its partly filled values twice (a quantization's
  // amax, then its cast) reads twice only what is filled.
  double total = 0, filled = 0;
  auto account = [&](ValueId v) {
    const auto bytes = static_cast<double>(module.value_type(f, v).bytes());
    total += bytes;
    filled += bytes * f.values[v].fill.fullest;
  };
  for (ValueId v : ids) account(v);
  for (uint16_t r = 0; r < op.result_count; ++r) account(op.first_result + r);
  return {cost.flops * fill, total > 0 ? cost.bytes * filled / total : cost.bytes};
}

Fill op_fill(const Function& f, const Op& op) {
  Fill fill;
  auto least = [&](ValueId v) {
    fill.fullest = std::min(fill.fullest, f.values[v].fill.fullest);
    fill.mean = std::min(fill.mean, f.values[v].fill.mean);
  };
  for (ValueId v : f.operands(op)) least(v);
  for (uint16_t r = 0; r < op.result_count; ++r) least(op.first_result + r);
  return fill;
}

}  // namespace dstc::ir
