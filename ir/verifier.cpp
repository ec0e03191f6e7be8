#include "ir/verifier.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

#include "ir/groups.h"
#include "ir/printer.h"
#include "ir/registry.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::ir {

namespace {

std::string_view attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::Int: return "an integer";
    case AttrType::Float: return "a number";
    case AttrType::Bool: return "a boolean";
    case AttrType::String: return "a string";
    case AttrType::IntList: return "a list of integers";
  }
  return "?";
}

class Verifier {
 public:
  Verifier(const Module& module, DiagnosticEngine& diags) : m_(module), diags_(diags) {}

  bool run() {
    bool ok = true;
    for (const Function& f : m_.functions) {
      size_t before = diags_.error_count();
      verify_function(f);
      bool function_ok = diags_.error_count() == before;
      if (function_ok) function_ok = check_deadlock(m_, f, diags_);
      ok = ok && function_ok;
    }
    return ok;
  }

 private:
  DiagnosticEngine::Builder report(DiagKind kind, const Function& f, OpId op, std::string message) {
    return diags_.error(kind, f.op_range(op), fmt::format("in @{}: {}: {}", f.name, op_label(m_, f, op), message));
  }

  // A flat chunk: one dim, the logical block over the flattening axis's
  // extent, rounded up.
  std::string flat_problem(const Value& value, const Layout& layout, const TensorType& t) {
    if (value.logical == kNone) return "an S(flat) value needs its logical type ('of TYPE')";
    const TensorType& logical = m_.type(value.logical);
    int64_t block = logical.numel();
    for (size_t a = 0; a < layout.size(); ++a) {
      if (layout[a].kind != Sbp::Split) continue;
      if (layout[a].dim >= logical.rank)
        return fmt::format("layout splits dimension {} of the logical {}", layout[a].dim, to_string(logical));
      const int64_t parts = m_.axis_range(value.devices, static_cast<int>(a)).size();
      if (logical.dims[layout[a].dim] % parts != 0)
        return fmt::format("layout splits dimension {} of the logical {} {} ways, which does not divide it",
                           layout[a].dim, to_string(logical), parts);
      block /= parts;
    }
    int64_t parts = 1;
    for (size_t a = 0; a < layout.size(); ++a)
      if (layout[a].kind == Sbp::Flat) parts *= m_.axis_range(value.devices, static_cast<int>(a)).size();
    const int64_t chunk = flat_chunk(block, parts);
    if (t.rank != 1 || t.dims[0] != chunk)
      return fmt::format("a {}-way flat chunk of {} elements holds {}, not {}", parts, block, chunk, to_string(t));
    return {};
  }

  void check_layout(const Function& f, ValueId v, OpId op) {
    const Value& value = f.values[v];
    const int flat = value.layout != kNoLayout ? flat_axis(m_.layout(value.layout)) : -1;
    std::string problem;
    if (value.logical != kNone && flat < 0) {
      problem = "only an S(flat) value carries a logical type ('of TYPE')";
    } else if (value.layout == kNoLayout) {
      return;
    } else if (const Layout& layout = m_.layout(value.layout);
               layout.size() != static_cast<size_t>(m_.mesh().axis_count())) {
      problem = fmt::format("layout has {} entries for a mesh of {} axes", layout.size(), m_.mesh().axis_count());
    } else {
      const TensorType& t = m_.type(value.type);
      for (size_t a = 0; a < layout.size(); ++a) {
        if (layout[a].kind == Sbp::Split && layout[a].dim >= t.rank && flat < 0)
          problem = fmt::format("layout {} splits dimension {} of {}, which has rank {}",
                                print_layout(m_, value.layout), layout[a].dim, to_string(t), t.rank);
      }
      if (problem.empty() && flat >= 0) problem = flat_problem(value, layout, t);
    }
    if (problem.empty()) return;
    SourceRange where = f.value_range(v);
    if (op == kNone)
      diags_.error(diag::kIrLayout, where, fmt::format("in @{}: %{}: {}", f.name, m_.value_name(f, v), problem));
    else
      report(diag::kIrLayout, f, op, fmt::format("result %{}: {}", m_.value_name(f, v), problem));
  }

  void verify_function(const Function& f) {
    for (const Arg& arg : f.args) check_layout(f, arg.value, kNone);
    std::vector<OpId> partner = pair_channels(f);
    for (OpId i = 0; i < f.ops.size() && !diags_.at_error_limit(); ++i) verify_op(f, i, partner);
    for (ValueId v : f.returns) {
      if (v >= f.values.size())
        diags_.error(diag::kIrUndefinedValue, SourceRange{},
                     fmt::format("in @{}: return of an undefined value", f.name));
    }
  }

  bool verify_attrs(const Function& f, OpId i, const OpInfo& info) {
    const Op& op = f.ops[i];
    bool ok = true;
    uint64_t seen = 0;  // bit per attribute slot
    for (const Attr& a : f.attrs(op)) {
      if (a.slot >= info.attrs.size()) {
        report(diag::kIrAttribute, f, i, "an attribute the op kind does not have");
        return false;
      }
      const AttrSpec& spec = info.attrs[a.slot];
      if (seen & (1ull << a.slot))
        ok = (report(diag::kIrAttribute, f, i, fmt::format("attribute '{}' is given twice", spec.name)), false);
      seen |= 1ull << a.slot;
      bool type_ok = a.type == spec.type || (spec.type == AttrType::Float && a.type == AttrType::Int);
      if (!type_ok)
        ok = (report(diag::kIrAttribute, f, i,
                     fmt::format("attribute '{}' must be {}", spec.name, attr_type_name(spec.type))),
              false);
    }
    for (size_t s = 0; s < info.attrs.size(); ++s) {
      if (info.attrs[s].required && !(seen & (1ull << s)))
        ok = (report(diag::kIrAttribute, f, i, fmt::format("missing required attribute '{}'", info.attrs[s].name)),
              false);
    }
    return ok;
  }

  bool verify_groups(const Function& f, OpId i) {
    const Op& op = f.ops[i];
    if (op.aux == kNone) {
      if (op.group_axes == 0)
        return (report(diag::kIrCollectiveGroup, f, i, "a collective must name the mesh axes it runs over"), false);
      if (!m_.devices(op.devices).is_slice()) {
        int64_t size = group_size(m_, op);
        for (const std::vector<Rank>& g : groups_of(m_, op)) {
          if (static_cast<int64_t>(g.size()) != size)
            return (report(diag::kIrCollectiveGroup, f, i, "its groups over the listed devices differ in size"), false);
        }
      }
      return true;
    }
    const auto& groups = m_.groups(op.aux);
    std::vector<int> count(static_cast<size_t>(m_.mesh().size()), 0);
    for (const std::vector<Rank>& g : groups) {
      if (g.size() != groups.front().size())
        return (
            report(diag::kIrCollectiveGroup, f, i,
                   fmt::format("groups must have one size; found {} and {} members", groups.front().size(), g.size())),
            false);
      for (Rank r : g) {
        if (!m_.contains(op.devices, r))
          return (report(diag::kIrCollectiveGroup, f, i,
                         fmt::format("group member rank {} is not in the op's devices {}", r,
                                     print_devices(m_, op.devices))),
                  false);
        ++count[static_cast<size_t>(r)];
      }
    }
    for (Rank r : m_.members(op.devices)) {
      if (count[static_cast<size_t>(r)] != 1)
        return (report(diag::kIrCollectiveGroup, f, i,
                       fmt::format("rank {} is in {} groups; every device of the op must be in exactly one", r,
                                   count[static_cast<size_t>(r)])),
                false);
    }
    return true;
  }

  void verify_channel(const Function& f, OpId i, const std::vector<OpId>& partner) {
    const Op& op = f.ops[i];
    if (op.aux == kNone || op.aux >= m_.device_set_count()) {
      report(diag::kIrChannel, f, i, "has no peer device set");
      return;
    }
    if (m_.members(op.aux).size() != m_.members(op.devices).size()) {
      report(diag::kIrChannel, f, i,
             fmt::format("pairs {} devices with {} peer devices; the sets must have one size",
                         m_.members(op.devices).size(), m_.members(op.aux).size()));
      return;
    }
    OpId other = partner[i];
    bool is_send = op.kind == OpKind::Send;
    if (other == kNone) {
      int sends = 0, recvs = 0;
      for (const Op& o : f.ops) {
        if (o.channel != op.channel) continue;
        sends += o.kind == OpKind::Send;
        recvs += o.kind == OpKind::Recv;
      }
      report(diag::kIrChannel, f, i,
             fmt::format("channel {} has {} send(s) and {} recv(s); it needs exactly one of each", op.channel, sends,
                         recvs));
      return;
    }
    if (!is_send) return;  // the pair is checked once, from its send
    const Op& recv = f.ops[other];
    if (recv.devices != op.aux || recv.aux != op.devices) {
      report(diag::kIrChannel, f, i,
             fmt::format("sends from {} to {}, but its recv receives on {} from {}", print_devices(m_, op.devices),
                         print_devices(m_, op.aux), print_devices(m_, recv.devices),
                         recv.aux == kNone ? "nowhere" : print_devices(m_, recv.aux)))
          .note(f.op_range(other), "the recv is here");
      return;
    }
    std::span<const ValueId> operands = f.operands(op);
    if (operands.empty() || recv.result_count != 1) return;
    const Value& sent = f.values[operands[0]];
    const Value& received = f.values[recv.first_result];
    if (sent.type != received.type)
      report(diag::kIrChannel, f, i,
             fmt::format("sends {} but its recv expects {}", to_string(m_.type(sent.type)),
                         to_string(m_.type(received.type))))
          .note(f.op_range(other), "the recv is here");
  }

  void verify_op(const Function& f, OpId i, const std::vector<OpId>& partner) {
    const Op& op = f.ops[i];
    const OpInfo& info = op_info(op.kind);
    std::span<const ValueId> operands = f.operands(op);
    if (operands.size() < info.min_operands ||
        (info.max_operands != kVariadic && operands.size() > info.max_operands)) {
      std::string want = info.max_operands == kVariadic ? fmt::format("at least {}", info.min_operands)
                         : info.min_operands == info.max_operands
                             ? fmt::format("{}", info.min_operands)
                             : fmt::format("{} to {}", info.min_operands, info.max_operands);
      report(diag::kIrSignature, f, i, fmt::format("takes {} operand(s), not {}", want, operands.size()));
      return;
    }
    const size_t results = info.results == kPerOperand ? operands.size() : info.results;
    if (op.result_count != results) {
      report(diag::kIrSignature, f, i,
             fmt::format("names {} result(s), but {} gives {}", op.result_count, info.name, results));
      return;
    }
    bool ok = verify_attrs(f, i, info);
    for (ValueId v : operands) {
      const Value& value = f.values[v];
      if (value.def != kNone && value.def >= i) {
        report(diag::kIrUseBeforeDef, f, i, fmt::format("uses %{} before it is defined", m_.value_name(f, v)))
            .note(f.op_range(value.def), "defined here, later in program order");
        ok = false;
      } else if (!m_.includes(value.devices, op.devices)) {
        report(diag::kIrPlacement, f, i,
               fmt::format("runs on {} but its operand %{} lives on {}", print_devices(m_, op.devices),
                           m_.value_name(f, v), print_devices(m_, value.devices)))
            .note(f.value_range(v), "defined here");
        ok = false;
      }
    }
    if (info.category == OpCategory::Collective) ok = verify_groups(f, i) && ok;
    if (info.category == OpCategory::PointToPoint) verify_channel(f, i, partner);
    for (uint16_t r = 0; r < op.result_count; ++r) check_layout(f, op.first_result + r, i);
    if (!ok || info.infer == nullptr) return;

    // Ops repeat per layer and micro-batch: a signature with result types
    // that inferred right once is right again.
    key_.clear();
    f.append_inference_key(op, key_);
    for (uint16_t r = 0; r < op.result_count; ++r) {
      TypeId type = f.values[op.first_result + r].type;
      key_.append(reinterpret_cast<const char*>(&type), sizeof(type));
    }
    if (inferred_right_.contains(key_)) return;

    operand_types_.clear();
    for (ValueId v : operands) operand_types_.push_back(m_.value_type(f, v));
    AttrReader attrs(m_, f, op);
    OpContext ctx{operand_types_, attrs, group_size(m_, op)};
    std::vector<TensorType>& expected = expected_;
    expected.clear();
    std::string error;
    if (!info.infer(ctx, expected, error)) {
      report(diag::kIrType, f, i, error);
      return;
    }
    bool right = expected.size() >= op.result_count;
    for (uint16_t r = 0; r < op.result_count && r < expected.size(); ++r) {
      const TensorType& declared = m_.value_type(f, op.first_result + r);
      if (!(declared == expected[r])) {
        right = false;
        report(diag::kIrType, f, i,
               fmt::format("result %{} is declared {} but {} gives {}", m_.value_name(f, op.first_result + r),
                           to_string(declared), info.name, to_string(expected[r])));
      }
    }
    if (right) inferred_right_.insert(key_);
  }

  const Module& m_;
  DiagnosticEngine& diags_;
  std::vector<TensorType> operand_types_;  // scratch, reused per op
  std::vector<TensorType> expected_;
  std::string key_;
  std::unordered_set<std::string> inferred_right_;  // keys of ops whose inferred types matched
};

}  // namespace

std::string op_label(const Module& module, const Function& f, OpId id) {
  const Op& op = f.ops[id];
  std::string label;
  for (uint16_t r = 0; r < op.result_count; ++r)
    label += fmt::format("{}%{}", r ? ", " : "", module.value_name(f, op.first_result + r));
  if (op.result_count) label += " = ";
  label += op_name(op.kind);
  label += '(';
  std::span<const ValueId> operands = f.operands(op);
  for (size_t i = 0; i < operands.size(); ++i)
    label += fmt::format("{}%{}", i ? ", " : "", module.value_name(f, operands[i]));
  label += ')';
  if (op_info(op.kind).category == OpCategory::PointToPoint) label += fmt::format(" channel {}", op.channel);
  return label;
}

bool verify_module(const Module& module, DiagnosticEngine& diags) { return Verifier(module, diags).run(); }

}  // namespace dstc::ir
