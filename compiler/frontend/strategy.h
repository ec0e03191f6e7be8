// An elaborated strategy: a strategy declaration with its parameter values
// applied to an elaborated Model. Everything is resolved to node, tensor
// and mesh-axis indexes, and keeps the source range and selector text it
// came from, for diagnostics in later stages.
//
// What the user wrote is recorded as written: schedule configs only on the
// nodes that were given one (propagation is the compiler's job), compute
// configs on the leaves a selector matched (the rest get `default`, marked
// as such, or nothing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/model.h"
#include "compiler/schedule/schedule_generators.h"
#include "compiler/strategy/training_choices.h"
#include "ir/mesh.h"

namespace dstc::frontend {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  SourceRange range;
};

struct ClusterReference {
  std::string written;                                   // as in the file: "clusters/dgx-a100.toml"
  std::string resolved;                                  // path to open; "" when not found
  std::optional<int64_t> nodes;                          // `(nodes = 128)`
  std::vector<std::pair<std::string, Value>> overrides;  // every `(key = value)`, in order
  SourceRange range;
};

using compiler::BatchNormStatistics;
using compiler::ContextParallelExchange;
using compiler::Fp8Recipe;
using compiler::MoeDispatcher;
using compiler::Optimizer;

struct RunConfig {
  bool training = true;  // false: `inference`, forward only
  int64_t batch = 0;     // global batch (samples per step)
  Optimizer optimizer = Optimizer::Adam;
  ir::DType precision = ir::DType::F32;  // what the step computes in
  // bf16/fp16 training: an fp32 copy of the weights kept with the
  // optimizer state (false: the update runs on the low-precision weights,
  // pure half-precision training).
  bool master_weights = true;
  ir::DType grad_precision = ir::DType::F32;  // the accumulated gradient and its reduction
  // Data-parallel gradients reduced during the last micro-batch's backward
  // as each completes (DDP, FSDP, Megatron-Core's --overlap-grad-reduce);
  // false: after the whole backward (Megatron-LM's 2021 local DDP).
  bool overlap_grad_reduce = true;
  // Weights whose optimizer state is sharded (the distributed optimizer,
  // ZeRO-1/2) kept as the updated shard between steps and gathered at the
  // next step's first use, overlapping its forward (Megatron-Core's
  // --overlap-param-gather); false: gathered after the optimizer.
  bool overlap_param_gather = true;
  // Gradient elements per rank reduced in one collective (Megatron-Core's
  // --ddp-bucket-size; 0: each tensor alone); unset: Megatron-Core's default.
  std::optional<int64_t> grad_bucket;
  BatchNormStatistics batch_norm = BatchNormStatistics::Sync;
  int64_t accumulate = 1;  // gradient-accumulation steps per optimizer step
  Fp8Recipe fp8 = Fp8Recipe::None;
  SourceRange fp8_range;
  // Tensor-parallel all-gathers and reduce-scatters pipelined with the
  // GEMMs they feed or follow (Megatron-Core's --tp-comm-overlap).
  bool tp_comm_overlap = false;
  // A measured per-expert routing histogram (docs/language.md): the file's
  // resolved path, "" for the models' Zipf skew.
  std::string expert_load;
  SourceRange expert_load_range;
  // Inference with a KV cache: each attention keeps its keys and values
  // across steps; `context` positions per sequence are cached before this
  // step (0: a prefill; with one token per sequence, a decode step).
  bool kv_cache = false;
  int64_t context = 0;
  compiler::MoeDispatcher moe_dispatcher = compiler::MoeDispatcher::AllToAll;
  ContextParallelExchange cp_exchange = ContextParallelExchange::AllGather;
  SourceRange cp_exchange_range;
  SourceRange range;
};

// A schedule config as written on one inner node; unset fields inherit.
struct ScheduleConfig {
  NodeId node = 0;
  std::optional<int64_t> micro_batches;
  std::optional<int64_t> max_ongoing;
  std::optional<bool> recompute;
  // false: the subtree's GEMMs stay in the compute precision under the
  // run's FP8 recipe (attention's projections, the first and last layers).
  std::optional<bool> fp8;
  // A micro-batch's forward and another's backward on one rank interleaved
  // at their all-to-alls, each hiding the other's (DualPipe, Megatron-Core's
  // --overlap-moe-expert-parallel-comm).
  std::optional<bool> overlap_all_to_all;
  std::optional<schedule::ScheduleKind> kind;  // a built-in schedule
  int64_t virtual_stages = 1;                  // interleaved(v), table("file.csv", v)
  std::string table;                           // or table("file.csv"), resolved like imports
  std::string selector;                        // as written; "" for the root
  SourceRange range;
};

// The layout on one mesh axis, with the IR's kinds (ir::Sbp). Split names
// a dim of the op (compute) or of the tensor (memory; also by index,
// dim_index >= 0).
struct Sbp {
  ir::Sbp::Kind kind = ir::Sbp::Broadcast;
  std::string dim;
  int dim_index = -1;
  // Written in the config; an axis left out of a compute config is the
  // compiler's to choose (the default's, or propagated), not B.
  bool written = false;
  // Equal layouts, however they were given.
  friend bool operator==(const Sbp& a, const Sbp& b) {
    return a.kind == b.kind && a.dim == b.dim && a.dim_index == b.dim_index;
  }
};

struct ComputeConfig {
  NodeId leaf = 0;
  std::vector<Sbp> sbp;  // one per mesh axis, in mesh order
  bool from_default = false;
  std::string selector;  // as written
  SourceRange range;
};

enum MemoryRole : uint8_t { kRoleParam = 1, kRoleGrad = 2, kRoleOptimizer = 4, kRoleAll = 7 };

struct MemoryConfig {
  TensorId tensor = kNone;  // a parameter
  uint8_t roles = kRoleAll;
  std::vector<Sbp> sbp;  // one per mesh axis
  std::string selector;
  SourceRange range;
};

// `memory(cache)`: where the KV caches of a leaf's attention ops split
// their positions (Split, dim_index the cache's position dim); the other
// axes keep the layout of the step's keys and values.
struct CacheConfig {
  NodeId leaf = 0;
  std::vector<Sbp> sbp;  // one per mesh axis
  SourceRange range;
};

// Pipeline stage: the subtrees placed on stage `index`. Stage s runs on
// index s mod n of the pipeline axis of n ranks: with V virtual stages per
// rank (interleaved(V), zb_v, dualpipe_v) written lists number ranks x V
// stages.
struct PipelineStage {
  int64_t index = 0;
  std::vector<NodeId> nodes;
  SourceRange range;
  SourceRange index_range;  // of a written stage's index
};

struct PipelinePlacement {
  bool present = false;
  size_t axis = 0;  // index into mesh
  std::vector<PipelineStage> stages;
  SourceRange range;
};

using compiler::ParamSharing;

struct TiedParams {
  std::vector<TensorId> params;
  ParamSharing mode = ParamSharing::Transmit;
  SourceRange range;
};

struct Strategy {
  std::string name;
  SourceRange range;
  std::vector<std::pair<std::string, Value>> params;  // effective values
  const Model* model = nullptr;
  std::vector<MeshAxis> mesh;
  ClusterReference cluster;
  RunConfig run;
  std::vector<ScheduleConfig> schedules;
  PipelinePlacement pipeline;
  std::vector<ComputeConfig> compute;            // explicit and default, one per leaf at most
  std::optional<ComputeConfig> default_compute;  // as written (leaf = 0)
  std::vector<MemoryConfig> memory;
  std::vector<CacheConfig> caches;  // at most one per leaf
  std::vector<TiedParams> ties;

  int64_t devices() const;
  // Index of a mesh axis, or -1.
  int axis_index(std::string_view axis) const;
};

}  // namespace dstc::frontend
