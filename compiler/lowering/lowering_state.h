// The state of one lowering (lowering.cpp orchestrates; autodiff.cpp holds
// the per-op forward and backward rules). Internal to compiler/lowering.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/lowering/lowering.h"
#include "compiler/lowering/micro_batch_table.h"
#include "compiler/sbp/boxing_plan.h"
#include "ir/registry.h"

namespace dstc::compiler {

// Where a lowered op goes and what it is part of.
struct Emit {
  int32_t stage = 0;
  int32_t micro_batch = -1;
  ir::Phase phase = ir::Phase::Forward;
  ir::Stream stream = ir::Stream::Compute;
  SourceRange where;
  int32_t node = -1;  // the tree node (layer) the op belongs to, for its location's scope
  // The fill of the op's results (experts' slots, ir::Value::fill); unset:
  // the largest of its operands'.
  std::optional<ir::Fill> fill = std::nullopt;
  // Boxing: the logical tensor moved, or -1 (experts' slots exchange
  // deduplicated under spec.train.moe_dispatcher).
  int32_t tensor = -1;
  // Boxing: all-gathers write into a buffer that holds the local chunk
  // (the distributed optimizer's parameter buffer), not a new one.
  bool in_place = false;
};

// A gradient of one op input, in the dual of the layout the op read it in.
struct GradContribution {
  int input = 0;
  ir::ValueId grad = 0;
  // Where the rule already moved it (ring attention's gradients, sent back
  // around the ring as one message); kNoLayout: the dual of the layout the
  // op read the input in.
  ir::LayoutId layout = ir::kNoLayout;
};

class Lowering {
 public:
  Lowering(const LogicalGraph& graph, const StrategySpec& spec, const SbpAssignment& sbp,
           const ResolvedStrategy& resolved, const SourceManager& sources);
  ir::Module run();

  // --- used by the per-op rules (autodiff.cpp) ---
  const LogicalGraph& graph;
  const StrategySpec& spec;
  const SbpAssignment& sbp;
  const ResolvedStrategy& resolved;

  // The layout op `op` reads input i in, and writes its output in.
  const ir::Layout& input_layout(int32_t op, size_t i) const { return input_layouts_[input_base_[op] + i]; }
  const ir::Layout& output_layout(int32_t op) const { return output_layouts_[op]; }
  ir::Layout dual_layout(const ir::Layout& layout) const;
  ir::TensorType local_type(int32_t tensor, const ir::Layout& layout, ir::DType dtype) const;
  // A parameter's stored value or state, with its logical type when laid out S(flat).
  ir::ValueId add_stored_arg(std::string_view name, ir::ArgKind kind, int32_t t, const ir::Layout& layout,
                             ir::DType dtype, ir::DeviceSetId devices);
  // The block an S(flat) value's chunks come from, once `layout`'s splits apply.
  std::vector<int64_t> block_dims(ir::ValueId flat, const ir::Layout& layout) const;
  ir::DType compute_dtype(int32_t tensor) const;
  // The expected fill of a tensor laid out `layout`: below 1 for experts'
  // slots that their tokens do not fill (on the fullest rank), else 1.
  ir::Fill slots_fill(int32_t tensor, const ir::Layout& layout);

  ir::ValueId append(const Emit& at, ir::OpKind kind, std::initializer_list<ir::ValueId> operands,
                     std::initializer_list<ir::AttrValue> attrs, const ir::Layout& layout);
  // One op; its result layouts are interned into a scratch list reused by every append.
  ir::OpId append_op(const Emit& at, ir::OpKind kind, std::span<const ir::ValueId> operands,
                     std::span<const ir::AttrValue> attrs, std::span<const ir::Layout> layouts);
  // Several results (layernorm_weight_grad, attention_grad, dropout, adam).
  std::vector<ir::ValueId> append_multi(const Emit& at, ir::OpKind kind, std::span<const ir::ValueId> operands,
                                        std::span<const ir::AttrValue> attrs, std::span<const ir::Layout> layouts);
  // `value` (laid out `from`) in layout `to`, through the boxing plan; with
  // `reuse`, a value boxed to the same layout before is not boxed again.
  ir::ValueId box(const Emit& at, ir::ValueId value, ir::Layout from, ir::Layout to, bool reuse = true);
  // A binary op's second operand `b`, expanded to the first's (`a`) shape
  // where the dims it lacks are not leading (the IR broadcasts over those).
  ir::ValueId broadcast_operand(const Emit& at, int32_t op, size_t i, ir::ValueId full, ir::ValueId v);
  // Boxes values of one layout together: each reduction step is one
  // grouped collective over all of them (a gradient bucket).
  std::vector<ir::ValueId> box_group(const Emit& at, std::vector<ir::ValueId> values, ir::Layout from, ir::Layout to,
                                     bool gather_together = false);
  // One step of a boxing plan on `values` (laid out `current`, updated).
  std::vector<ir::ValueId> emit_boxing_step(const Emit& at, const AxisTransfer& step,
                                            std::span<const ir::ValueId> values, ir::Layout& current);
  const ir::TensorType& type_of(ir::ValueId v) const { return module_.value_type(*function_, v); }
  // The mesh axis that splits an embedding's vocabulary, or -1.
  int vocab_split_axis(int32_t op) const;
  bool needs_grad(int32_t tensor) const { return requires_grad_[tensor]; }
  // What a forward op keeps for its backward beyond its inputs and output,
  // per (op, micro-batch): dropout's mask, batchnorm's global statistics.
  void save_extras(int32_t op, int32_t mb, std::vector<ir::ValueId> values) {
    saved_extras_[op_key(op, mb)] = std::move(values);
  }
  const std::vector<ir::ValueId>& saved_extras(int32_t op, int32_t mb) const {
    return saved_extras_.at(op_key(op, mb));
  }

  // Whether `op` runs its GEMMs in FP8 (spec.train.fp8): an einsum of an
  // activation with a weight inside a repeated block, as Transformer
  // Engine's linear layers are, unless it scores a router (its top-k
  // choice is what FP8 error would flip; Megatron-Core keeps routers out).
  bool fp8_op(int32_t op) const { return !fp8_ops_.empty() && fp8_ops_[op]; }
  // `v` quantized to `dtype` with the recipe's scaling, once per value.
  ir::ValueId quantized(const Emit& at, ir::ValueId v, ir::DType dtype, const ir::Layout& layout);
  // The same, quantized anew at every call.
  ir::ValueId quantize(const Emit& at, ir::ValueId v, ir::DType dtype, const ir::Layout& layout);
  // An fp8 copy that a backward GEMM reads, cast again from what it was
  // cast from (torchao's rowwise linear); only a copy the forward made
  // where `forward_copies_only`; other values as they are.
  ir::ValueId recast_for_backward(const Emit& at, ir::ValueId copy, bool forward_copies_only);
  // An FP8 op's input `v` (laid out `from`) in e4m3, laid out `to`; a
  // `weight` cast before its gather is cast on the gathers' queue.
  ir::ValueId fp8_input(const Emit& at, ir::ValueId v, const ir::Layout& from, const ir::Layout& to, bool reuse,
                        bool weight);

  // A cross-entropy whose logits are split on their class dim (the
  // vocabulary-parallel loss): the axes that split it, and the layouts of
  // its rows whole there, of partial maxima and of partial sums.
  struct VocabShards {
    bool split = false;
    std::vector<size_t> axes;
    ir::Layout rows, maxima, sums;
  };
  VocabShards vocab_shards(int32_t op) const;

  // An einsum op's spec strings, built once per logical op: its forward, and
  // the backward that gives each input's gradient.
  struct EinsumSpecs {
    std::string forward;
    std::array<std::string, 2> grads;
  };
  const EinsumSpecs& einsum_specs(int32_t op);

  // Forward of one op: its output value (inputs already in their layouts).
  ir::ValueId emit_forward_op(const Emit& at, int32_t op, const std::vector<ir::ValueId>& inputs);
  // Backward of one op: gradients of its inputs (input grads when
  // `input_grads`, parameter grads when `weight_grads`).
  // `input(i)` gives input i as the op read it; parameters are gathered
  // again only when a gradient rule reads them.
  std::vector<GradContribution> emit_backward_op(const Emit& at, int32_t op,
                                                 const std::function<ir::ValueId(size_t)>& input, ir::ValueId output,
                                                 ir::ValueId grad_output, bool input_grads, bool weight_grads);

  // One op's backward in one block, as its family's rules read it.
  struct BackwardStep {
    Lowering& l;
    const Emit& at;
    int32_t op;
    const LogicalOp& lop;
    const std::function<ir::ValueId(size_t)>& in;  // input i as the op read it
    ir::ValueId y, g;                              // the output and its gradient
    bool input_grads, weight_grads;
    ir::Layout g_layout;  // the layout g arrives in: the dual of the output's
    std::vector<GradContribution> result;

    // Whether input i gets a gradient from this block, and where it is emitted.
    bool wanted(size_t i) const;
    Emit emit_at(size_t i) const;
    ir::Layout grad_layout_of(size_t i) const;
    // Sums a gradient over the dims a broadcast operand lacks.
    ir::ValueId unbroadcast(size_t i, ir::ValueId grad);
    // g replicated back over the dims a reduction removed, in input i's shape.
    ir::ValueId expand(const Emit& e, ir::ValueId grad, size_t i, const std::vector<int32_t>& dims);
    void give(size_t i, ir::ValueId grad, ir::LayoutId layout = ir::kNoLayout) {
      result.push_back({static_cast<int>(i), grad, layout});
    }
  };
  // One op's forward: its inputs in their layouts, its output's layout.
  struct ForwardStep {
    const Emit& at;
    int32_t op;
    const LogicalOp& lop;
    const std::vector<ir::ValueId>& in;
    ir::Layout out;
  };
  // The forward lowering and backward rules by op family (<family>_rules.cpp).
  bool ring_returns_key_value_grads(BackwardStep& s, ir::ValueId dk, ir::ValueId dv);
  bool boxes_keys_with_values(int32_t op, size_t i) const;
  std::vector<ir::ValueId> key_value_inputs(const Emit& at, int32_t op, bool recompute);
  ir::ValueId forward_contraction(const ForwardStep& f);
  ir::ValueId forward_elementwise(const ForwardStep& f);
  ir::ValueId forward_normalization(const ForwardStep& f);
  ir::ValueId forward_reduction(const ForwardStep& f);
  ir::ValueId forward_embedding(const ForwardStep& f);
  ir::ValueId forward_loss(const ForwardStep& f);
  ir::ValueId forward_attention(const ForwardStep& f);
  ir::ValueId kv_cache_arg(const ForwardStep& f, size_t i);
  ir::ValueId attend_over_cache_shards(const ForwardStep& f, ir::ValueId keys, ir::ValueId values,
                                       std::span<const ir::AttrValue> attrs);
  ir::ValueId forward_convolution(const ForwardStep& f);
  ir::ValueId forward_shape(const ForwardStep& f);
  ir::ValueId forward_routing(const ForwardStep& f);
  // The tokens a top_k routes to each expert, over every device, per
  // micro-batch and per sequence as its load-balancing losses count them
  // (saved for their gradients).
  void save_routed_counts(const ForwardStep& f, ir::ValueId gates);
  void backward_contraction(BackwardStep& s);
  void backward_elementwise(BackwardStep& s);
  void backward_normalization(BackwardStep& s);
  void backward_reduction(BackwardStep& s);
  void backward_embedding(BackwardStep& s);
  void backward_loss(BackwardStep& s);
  void backward_attention(BackwardStep& s);
  void backward_convolution(BackwardStep& s);
  void backward_shape(BackwardStep& s);
  void backward_routing(BackwardStep& s);
  // A router z-loss's gradient for a softmax's logits.
  ir::ValueId z_loss_grad(BackwardStep& s);
  // Local batch norm's per-shard sums added up into a parameter's partial gradient.
  ir::ValueId sum_batch_shards(const Emit& at, ir::ValueId sums, const ir::Layout& shards, const ir::Layout& partial);
  // A load-balancing loss's gradient for a top_k's scores.
  ir::ValueId load_balancing_grad(BackwardStep& s, bool per_sequence);
  [[noreturn]] static void no_forward_lowering(const LogicalOp& lop);
  [[noreturn]] static void no_backward_rule(const LogicalOp& lop);

 private:
  // Sparse keys: (op or tensor, micro-batch) and (tensor, micro-batch, stage).
  uint64_t op_key(int32_t index, int32_t mb) const {
    return static_cast<uint64_t>(index) * static_cast<uint64_t>(resolved.micro_batches) + static_cast<uint64_t>(mb);
  }
  uint64_t stage_key(int32_t tensor, int32_t mb, int32_t stage) const {
    return op_key(tensor, mb) * static_cast<uint64_t>(resolved.num_stages) + static_cast<uint64_t>(stage);
  }

  // With `recompute`, replays the ops of one recompute unit.
  void emit_forward_block(int32_t stage, int32_t mb, bool recompute, int32_t unit = -1);
  void emit_backward_block(int32_t stage, int32_t mb, bool input_grads, bool weight_grads);
  // A parameter's stored or received copy on one device set (parameters.cpp).
  struct ParamCopy {
    ir::DeviceSetId devices = 0;
    std::vector<int32_t> stages;         // the stages on these devices that read it
    std::vector<int32_t> first_readers;  // per stage: its first op that reads it
    bool stored = true;                  // holds the value and optimizer state; false: transmitted to
    ir::ValueId value = ir::kNone, adam_m = ir::kNone, adam_v = ir::kNone;  // arguments when stored
    ir::ValueId master = ir::kNone;         // fp32 master weights (optimizer layout) under mixed precision
    ir::ValueId compute_value = ir::kNone;  // in compute precision: cast, or received
    ir::ValueId grad = ir::kNone;           // accumulated: gradient layout, then optimizer layout
    bool synced = false;                    // grad boxed into the optimizer layout
    // Stored as the optimizer's shard and gathered at the step's first use
    // (overlap_param_gather); false: stored in the parameter's layout.
    bool gathered_at_use = false;
  };
  void create_parameters();
  ParamCopy& param_copy(int32_t tensor, int32_t stage);
  // The parameter's value in compute precision on `at`'s stage, in its memory layout.
  ir::ValueId param_value(int32_t tensor, const Emit& at);
  // `v` sent from `from`'s stage to `to_stage`: the received value.
  ir::ValueId transfer(ir::ValueId v, const Emit& from, int32_t to_stage, ir::Phase phase, SourceRange where);
  // Sums the gradients of parameters shared across pipeline stages.
  void sum_shared_param_grads();
  void emit_optimizer(int32_t stage);
  ir::ValueId input_value(int32_t tensor, int32_t mb, int32_t stage, bool recompute);
  ir::ValueId op_input(const Emit& at, int32_t op, size_t i, bool recompute);
  // Adds `grad` into `slot` (kNone: empty).
  void add_grad(ir::ValueId& slot, ir::ValueId grad, const Emit& at);
  // The sum of a tensor's pending contributions boxed to `target` (then cast
  // to `dtype`), or kNone when it has none.
  ir::ValueId flush_grads(int32_t tensor, int32_t mb, const ir::Layout& target, std::optional<ir::DType> dtype,
                          const Emit& at);
  // Accumulates a micro-batch's pending gradient of a parameter (of all the
  // stage's parameters) into its copy on the stage; after the copy's last
  // micro-batch, boxes it into the optimizer layout.
  void flush_param_grad(int32_t tensor, int32_t stage, int32_t mb);
  void accumulate_param_grad(int32_t tensor, int32_t stage, int32_t mb);
  // Queues a copy's final gradient (once) in the stage's open bucket for
  // its layouts; a full bucket is boxed into the optimizer layout at once.
  void sync_param_grad(int32_t tensor, int32_t stage);
  // Boxes the open buckets of a stage (its backward is done).
  void flush_grad_buckets(int32_t stage);
  void flush_grad_bucket(int32_t stage, size_t bucket);
  // overlap_grad_reduce = false: the reductions of every copy whose stages
  // are all done, queued after the stage's backward.
  void sync_param_grads_after_backward(int32_t stage);
  void flush_param_grads(int32_t stage, int32_t mb);
  // The first op of `stage` that reads parameter `tensor`.
  int32_t first_reader(int32_t tensor, int32_t stage);
  ir::LocId loc_of(SourceRange where, int32_t node = -1);
  ir::Builder& builder() { return *builder_; }

  const SourceManager& sources_;
  ir::Module module_;
  ir::Function* function_ = nullptr;
  std::optional<ir::Builder> builder_;
  std::vector<ir::DeviceSetId> stage_devices_;
  std::vector<std::vector<int32_t>> stage_ops_;
  std::vector<std::vector<int32_t>> stage_params_;     // per stage: parameters it reads
  std::vector<std::vector<int32_t>> consumer_stages_;  // per tensor: stages reading it
  std::vector<bool> requires_grad_;                    // per tensor
  std::vector<size_t> input_base_;                     // per op: index of its first input in input_layouts_
  std::vector<ir::Layout> input_layouts_, output_layouts_;
  std::unordered_map<uint64_t, ir::LocId> locs_;         // (file, offset, node) -> interned location
  std::unordered_map<uint64_t, ir::Fill> slot_fills_;    // (tensor, experts' parts) -> slots_fill
  std::vector<bool> fp8_ops_;                            // per op, under an FP8 recipe
  std::unordered_map<uint64_t, ir::ValueId> quantized_;  // (value << 8 | dtype) -> its quantization
  void mark_fp8_ops();
  void pipeline_activation_collectives();
  void quantize_pending_grad(int32_t op, int32_t mb, const Emit& at);

  MicroBatchTable forward_, recomputed_;                   // (tensor, mb) on its stage
  MicroBatchTable saved_inputs_;                           // (input_base_[op] + i, mb) as the op read it
  MicroBatchTable saved_outputs_;                          // (op, mb)
  MicroBatchTable grad_outputs_;                           // (op, mb): gradient of its output
  MicroBatchTable grads_;                                  // (tensor, mb) on its producer stage
  std::unordered_map<uint64_t, ir::ValueId> received_on_;  // stage_key(tensor, mb, consumer stage)
  std::unordered_map<uint64_t, uint32_t> channels_;        // forward sends: stage_key(tensor, mb, to stage)
  std::unordered_map<uint64_t, uint32_t> grad_channels_;   // gradient sends: stage_key(tensor, mb, from stage)
  std::unordered_map<uint64_t, ir::ValueId> data_args_;    // stage_key(tensor, mb, stage)
  std::unordered_map<uint64_t, std::vector<ir::ValueId>> saved_extras_;  // op_key(op, mb)
  // Per micro-batch, gradient contributions not yet boxed back: (tensor,
  // layout it was read in) -> their sum. Consumers that read a tensor in the
  // same layout share one boxing, so their gradients share one reverse
  // boxing too. Only the backward frontier is pending, so each map is small.
  std::vector<std::map<std::pair<int32_t, ir::LayoutId>, ir::ValueId>> pending_grads_;
  std::unordered_map<uint64_t, ir::ValueId> boxed_;  // (value << 32 | target layout)
  // Activations gathered again for the backward, keyed as boxed_: the ops
  // of one micro-batch's backward that read the same gather share it.
  std::unordered_map<uint64_t, ir::ValueId> regathered_;
  std::vector<std::vector<ParamCopy>> param_copies_;  // per tensor; the first is the owner
  // Gradients waiting to be reduced together (DDP's and Megatron's buckets):
  // parameters of one stage, in the order their gradients complete, with
  // the same gradient and optimizer layouts and dtype.
  struct GradBucket {
    ir::LayoutId from = 0, to = 0;
    ir::DType dtype = ir::DType::F32;
    int64_t elements = 0, capacity = 0;  // local elements
    std::vector<int32_t> params;
  };
  std::vector<std::vector<GradBucket>> grad_buckets_;  // per stage: the open ones
  std::vector<EinsumSpecs> einsum_specs_;              // per op, filled on first use
  std::vector<int32_t> weight_blocks_done_;            // per stage
  std::vector<ir::ValueId> output_values_;             // the model's output (training: the loss), per micro-batch
  std::vector<ir::LayoutId> layout_ids_;               // append_op's scratch
  uint32_t next_channel_ = 1;

 public:
  // Layouts of a parameter's value, accumulated gradient and optimizer state.
  ir::Layout param_layout(int32_t t) const;
  ir::Layout grad_layout(int32_t t) const;
  ir::Layout optimizer_layout(int32_t t) const;
};

}  // namespace dstc::compiler
