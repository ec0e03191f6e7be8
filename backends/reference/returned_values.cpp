#include "backends/reference/returned_values.h"

#include "ir/registry.h"
#include "ir/replica_names.h"

namespace dstc::reference {

ValueSource trace_source(const ir::Module& m, const ir::Function& f, ir::ValueId v) {
  std::optional<ir::DType> cast;
  while (true) {
    const ir::Value& value = f.values[v];
    if (value.def == ir::kNone) return {nullptr, 0, v, cast};
    const ir::Op& op = f.ops[value.def];
    if (ir::op_info(op.kind).category == ir::OpCategory::Optimizer)
      return {&op, static_cast<int>(v - op.first_result), ir::kNone, cast};
    if (op.operand_count != 1) return {};
    if (op.kind == ir::OpKind::Cast && !cast) cast = m.value_type(f, v).dtype;
    v = f.operands(op)[0];
  }
}

std::vector<ir::ValueId> next_step_arguments(const ir::Module& m, const ir::Function& f) {
  std::vector<ir::ValueId> updated;
  for (ir::ValueId r : f.returns) {
    ValueSource s = trace_source(m, f, r);
    if (!s.optimizer) {
      updated.push_back(ir::kNone);
      continue;
    }
    const int operand = s.result == 0 ? 0 : s.result + 1;
    ir::ValueId arg = trace_source(m, f, f.operands(*s.optimizer)[static_cast<size_t>(operand)]).arg;
    std::string param = arg != ir::kNone && s.cast ? ir::master_of(m.value_name(f, arg)) : std::string();
    if (!param.empty()) {
      // The lower-precision parameter of an updated master copy.
      ir::ValueId found = ir::kNone;
      for (const ir::Arg& a : f.args)
        if (m.value_name(f, a.value) == param) found = a.value;
      arg = found;
    }
    updated.push_back(arg);
  }
  return updated;
}

}  // namespace dstc::reference
