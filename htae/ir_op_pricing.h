// The bridge between IR ops and the cost model: a compute op as an
// OpCostQuery for the op estimator (FLOPs and bytes from the IR registry's
// op_cost, GEMM shape for the matmul efficiency), and a communication op as
// a collective plan over the physical devices of one group.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "htae/collectives.h"
#include "htae/op_cost.h"
#include "ir/module.h"
#include "ir/registry.h"

namespace dstc::htae {

ComputeDtype compute_dtype(ir::DType dtype);

// The dtype an op computes in: its first floating operand's, else its first result's.
ComputeDtype op_compute_dtype(const ir::Module& module, const ir::Function& f, const ir::Op& op);

OpCostQuery compute_query(const ir::Module& module, const ir::Function& f, const ir::Op& op, const ir::OpCost& cost);

// How a communication op moves data: the collective it is, its buffer in
// nccl-tests' convention, and the root position for rooted ones.
struct CommSpec {
  ir::OpKind kind = ir::OpKind::AllReduce;
  std::optional<CollectiveKind> collective;  // nullopt: scatter and gather (planned directly)
  double bytes = 0;
  size_t root = 0;
  // all_to_all of experts' slots exchanged deduplicated (DeepEP): each
  // token's copies in the slots, among how many experts; 0: flat.
  int64_t copies = 0, experts = 0;
  ExpertGroups groups;               // node-limited routing
  std::string_view efficiency_name;  // the key of the cluster's collective_efficiency
};
CommSpec comm_spec(const ir::Module& module, const ir::Function& f, const ir::Op& op);

// The transfers of `spec` over `group` (physical device ids).
CollectivePlan comm_plan(const Topology& topology, const CommSpec& spec, std::span<const int64_t> group);

}  // namespace dstc::htae
