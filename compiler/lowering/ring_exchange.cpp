#include "compiler/lowering/ring_exchange.h"

#include <optional>
#include <vector>

#include "ir/registry.h"

namespace dstc::compiler {

void group_key_value_gathers(const ir::Module& m, ir::Function& f) {
  std::vector<std::vector<ir::OpId>> readers(f.values.size());
  for (ir::OpId id = 0; id < f.ops.size(); ++id)
    for (ir::ValueId v : f.operands(f.ops[id])) readers[v].push_back(id);
  // The one attention op (forward or gradient) reading all of op's results.
  auto attention_reader = [&](const ir::Op& op) -> ir::OpId {
    ir::OpId reader = ir::kNone;
    for (uint16_t r = 0; r < op.result_count; ++r) {
      for (ir::OpId id : readers[op.first_result + r]) {
        ir::OpKind kind = f.ops[id].kind;
        if ((kind != ir::OpKind::Attention && kind != ir::OpKind::AttentionGrad) ||
            (reader != ir::kNone && reader != id))
          return ir::kNone;
        reader = id;
      }
    }
    return reader;
  };
  auto gather_dim = [&](const ir::Op& op) -> std::optional<int64_t> {
    if (op.kind != ir::OpKind::AllGather || op.stream != ir::Stream::Feature) return std::nullopt;
    ir::AttrReader attrs(m, f, op);
    if (attrs.boolean("flat")) return std::nullopt;
    return attrs.integer("dim");
  };
  auto joinable = [&](const ir::Op& a, const ir::Op& b) {
    std::optional<int64_t> dim = gather_dim(a);
    if (!dim || gather_dim(b) != dim) return false;
    if (a.devices != b.devices || a.group_axes != b.group_axes || a.aux != b.aux || a.phase != b.phase ||
        a.stage != b.stage || a.micro_batch != b.micro_batch || b.first_result != a.first_result + a.result_count)
      return false;
    ir::OpId reader = attention_reader(a);
    return reader != ir::kNone && attention_reader(b) == reader;
  };
  size_t placed = 0;
  for (size_t read = 0; read < f.ops.size(); ++read) {
    const ir::Op op = f.ops[read];
    if (placed > 0 && joinable(f.ops[placed - 1], op)) {
      ir::Op& joined = f.ops[placed - 1];
      std::vector<ir::ValueId> operands(f.operands(joined).begin(), f.operands(joined).end());
      operands.insert(operands.end(), f.operands(op).begin(), f.operands(op).end());
      joined.operand_begin = static_cast<uint32_t>(f.operand_pool.size());
      joined.operand_count = static_cast<uint16_t>(operands.size());
      joined.result_count = static_cast<uint16_t>(joined.result_count + op.result_count);
      f.operand_pool.insert(f.operand_pool.end(), operands.begin(), operands.end());
      continue;
    }
    f.ops[placed++] = op;
  }
  f.ops.resize(placed);
  for (ir::OpId id = 0; id < f.ops.size(); ++id)
    for (int i = 0; i < f.ops[id].result_count; ++i) f.values[f.ops[id].first_result + i].def = id;
}

}  // namespace dstc::compiler
