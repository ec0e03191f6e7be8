// A strategy as the compiler's middle end takes it: the device mesh, the
// training config, and the user's configs attached to nodes of the strategy
// tree (LogicalGraph::nodes) and to tensors. What the user left out is
// filled in by propagation (strategy_tree.h, sbp_propagation.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/schedule/schedule_generators.h"
#include "compiler/strategy/training_choices.h"
#include "ir/mesh.h"
#include "ir/source/source_manager.h"

namespace dstc::compiler {

// One mesh axis of a compute config, over an op's dim names: `S(o)`, `B`,
// or `P` (PartialSum: the op's inputs arrive partial and its output stays
// partial). The kinds are the IR's; the front end refuses P(max) here.
struct AxisCompute {
  ir::Sbp::Kind kind = ir::Sbp::Broadcast;
  std::string dim;  // Split
};

// `[dp: S(b), tp: S(o)]`: per mesh axis; axes not named are left to
// propagation.
struct ComputeConfig {
  std::vector<std::optional<AxisCompute>> axes;  // one slot per mesh axis
  SourceRange where;
};

// How a stored tensor is laid out, per mesh axis (S by tensor axis index).
// Only the axes the config writes are fixed; on the others the tensor keeps
// its default layout, so `[dp: S(0)]` on a `[dp, tp]` mesh shards over dp
// what tensor parallelism already split over tp.
struct TensorLayoutConfig {
  ir::Layout layout;
  SourceRange where;
  uint32_t written = ~0u;  // bit a: mesh axis a is given

  // This config's axes over `fallback`'s.
  ir::Layout over(const ir::Layout& fallback) const {
    ir::Layout out = fallback;
    for (size_t a = 0; a < out.size() && a < layout.size(); ++a)
      if (written & (1u << a)) out[a] = layout[a];
    return out;
  }
};

// Memory configs of one parameter: where its value, its accumulated
// gradient and its optimizer state live. Unset ones take defaults: the value
// as its first use computes it, the gradient as the dual of the value's
// layout (partial where the value is replicated), the optimizer state as the
// value. ZeRO-1/2/3 are these set to S(0) on the data-parallel axis.
// A parameter shared by pipeline stages on different devices is sent or
// replicated (ParamSharing, training_choices.h).

struct ParamMemoryConfig {
  std::optional<TensorLayoutConfig> value, grad, optimizer;
  ParamSharing sharing = ParamSharing::Transmit;
};

struct TrainConfig {
  bool training = true;  // false: inference, forward only
  int64_t global_batch = 0;
  Optimizer optimizer = Optimizer::Adam;
  ir::DType precision = ir::DType::F32;       // compute dtype, and the stored weights'
  bool master_weights = true;                 // low-precision training: fp32 master weights with the optimizer state
  ir::DType grad_precision = ir::DType::F32;  // accumulated gradients and their reduction
  bool overlap_grad_reduce = true;            // reduce each gradient as its last micro-batch completes
  bool overlap_param_gather = true;           // sharded-state weights gathered at the next step's first use
  // Local gradient elements reduced together; unset: Megatron-Core's default.
  std::optional<int64_t> grad_bucket;
  BatchNormStatistics batch_norm = BatchNormStatistics::Sync;  // over the micro-batch, or each device's rows
  Fp8Recipe fp8 = Fp8Recipe::None;                             // the blocks' weight matmuls in FP8
  bool tp_comm_overlap = false;  // activations' gathers and scatters pipelined with their GEMMs
  std::string expert_load;       // a per-expert routing histogram's path; "": the models' skew
  SourceRange expert_load_where;
  MoeDispatcher moe_dispatcher = MoeDispatcher::AllToAll;
  ContextParallelExchange cp_exchange = ContextParallelExchange::AllGather;
  SourceRange cp_exchange_where;
  bool kv_cache = false;  // inference: attention's keys and values kept across steps
  int64_t context = 0;    // positions cached before this step
  double learning_rate = 1e-3;
  SourceRange where;
};

struct ScheduleConfig {
  std::optional<int32_t> micro_batches;
  std::optional<int32_t> max_ongoing;
  std::optional<bool> recompute;
  std::optional<bool> fp8;  // false: the subtree stays out of the run's FP8 recipe
  std::optional<bool> overlap_all_to_all;
  std::optional<schedule::ScheduleKind> kind;
  std::optional<int32_t> virtual_stages;
  std::optional<std::string> table;  // a CSV schedule table's path
  SourceRange where;
};

// `pipeline blocks over pp`: the children of `node` are cut into contiguous
// stages (ranks × virtual stages of them); what comes before the node joins
// the first stage and what comes after the last. Or explicit stages:
// `stage_of_node` gives a node's pipeline coordinate (-1: its parent's).
struct PipelineConfig {
  int32_t axis = -1;  // mesh axis of the pipeline; -1: no pipeline
  int32_t node = -1;
  std::vector<int32_t> stage_of_node;
  SourceRange where;
};

struct StrategySpec {
  std::string name;
  ir::Mesh mesh;
  TrainConfig train;
  PipelineConfig pipeline;
  std::optional<ComputeConfig> default_compute;
  std::vector<std::optional<ComputeConfig>> compute;     // per tree node (leaves)
  std::vector<std::optional<ScheduleConfig>> schedule;   // per tree node (inner)
  std::vector<ParamMemoryConfig> memory;                 // per tensor (parameters)
  std::vector<std::optional<TensorLayoutConfig>> cache;  // per tree node (leaves): its KV caches' positions

  // Sizes the per-node and per-tensor slots for a graph.
  void resize_for(size_t nodes, size_t tensors) {
    compute.resize(nodes);
    schedule.resize(nodes);
    cache.resize(nodes);
    memory.resize(tensors);
  }
};

}  // namespace dstc::compiler
