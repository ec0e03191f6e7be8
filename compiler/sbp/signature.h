// SBP signatures of logical ops: for one mesh axis, the layout each input
// must arrive in and the layout the output leaves in. OneFlow's rules:
// matmul S(m)·B→S(m), B·S(n)→S(n), S(k)·S(k)→P, P·B→P, B·B→B; elementwise
// ops keep layouts; normalizations cannot split their normalized dim. Each
// op's rule is data in its op table entry (compiler/ops/op_kinds.def: how
// it splits, which inputs may arrive partial); this file applies them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/logical/logical_graph.h"
#include "compiler/strategy/strategy_spec.h"
#include "ir/mesh.h"

namespace dstc::compiler {

struct AxisSignature {
  std::vector<ir::Sbp> inputs;
  ir::Sbp output;
  AxisCompute compute;  // the choice it came from (for --explain)
  friend bool operator==(const AxisSignature&, const AxisSignature&) = default;
};

inline constexpr ir::Sbp kBroadcast{ir::Sbp::Broadcast, 0};
inline constexpr ir::Sbp kPartial{ir::Sbp::PartialSum, 0};
inline ir::Sbp split(int dim) { return {ir::Sbp::Split, static_cast<uint8_t>(dim)}; }

// The layout of a gradient of a tensor laid out as `s`: B and P swap, S stays.
ir::Sbp dual(ir::Sbp s);

// The signature a compute choice gives the op on one axis, or nullopt with
// the reason in `why_not` (the op cannot split that dim, or has no such dim).
std::optional<AxisSignature> signature_for(const LogicalGraph& graph, const LogicalOp& op, const AxisCompute& choice,
                                           std::string& why_not);

// Every legal signature of the op on one axis: B, each splittable dim, and P
// where the op is linear in a partial input.
std::vector<AxisSignature> candidate_signatures(const LogicalGraph& graph, const LogicalOp& op);

std::string to_string(const AxisCompute& c);
std::string to_string(ir::Sbp s);

}  // namespace dstc::compiler
