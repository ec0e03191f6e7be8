// The model as the compiler's middle end sees it: a flat dataflow graph of
// logical ops over named dims, and the module tree those ops belong to (the
// strategy tree's shape). Built from the front end's elaborated model; the
// compiler never reads the AST.
//
// Each op names the dims of its operands in its own terms, like an einsum
// (a Linear's matmul names x[b, s, h] and weight[o, h]); a compute config
// such as `[tp: S(o)]` refers to those names. Tensors carry sizes per axis.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ops/op_table.h"
#include "ir/source/source_manager.h"
#include "ir/types.h"

namespace dstc::compiler {

enum class TensorKind : uint8_t { Input, Param, Activation };  // Input: data and labels

using ops::Dim;

struct Tensor {
  std::string name;  // e.g. "blocks[0].mlp.fc1.weight"
  std::vector<Dim> dims;
  ir::DType dtype = ir::DType::F32;
  TensorKind kind = TensorKind::Activation;
  int32_t producer = -1;    // op that computes it (activations)
  int32_t node = -1;        // tree node that owns it (parameters: their layer)
  int32_t batch_axis = -1;  // axis holding the batch, split into micro-batches
  SourceRange where;
  // Experts' slots from dispatch op `router`: the slots axis, and the
  // experts axis (-1 where the tensor has none).
  int32_t slots_axis = -1;
  int32_t experts_axis = -1;
  int32_t router = -1;
  bool trainable = true;  // Param: false for a buffer, stored but given no gradient or optimizer state

  int64_t numel() const;
};

struct Operand {
  int32_t tensor = -1;
  std::vector<std::string> dims;  // the op's names for the tensor's axes
};

struct LogicalOp {
  ops::OpKind type = ops::OpKind::Einsum;
  std::vector<Operand> inputs;
  int32_t output = -1;
  std::vector<std::string> output_dims;
  int32_t node = -1;  // the layer (leaf) it belongs to
  // Its attributes as the model wrote them, read by the names op_kinds.def
  // declares (an unwritten one reads as its default).
  ops::OpAttrs attrs;
  int32_t axis = -1;          // the axis of the first input its `dim` attribute names (-1: it has none)
  std::vector<int32_t> axes;  // Sum, Mean, Max: reduced axes of the input, increasing
  int32_t gates_top_k = -1;   // Dispatch: the top_k its gates come from, whose groups it routes by (-1: none)
  SourceRange where;
};

struct TreeNode {
  std::string path;  // "" for the root, else e.g. "blocks[3].attn.qkv"
  std::string kind;  // the layer or module it instantiates
  int32_t parent = -1;
  std::vector<int32_t> children;
  std::vector<int32_t> ops;     // leaves: their ops in order
  std::vector<int32_t> params;  // leaves: their parameters
  bool repeated = false;        // one layer of a repeat: blocks[3]
  SourceRange where;

  bool leaf() const { return children.empty(); }
};

struct LogicalGraph {
  std::vector<TreeNode> nodes;  // nodes[0] is the root
  std::vector<Tensor> tensors;
  std::vector<LogicalOp> ops;   // a topological order
  std::vector<int32_t> inputs;  // data inputs and labels, in order
  int32_t output = -1;          // the model's output
  int32_t loss = -1;            // the scalar loss (training: the output)

  // Adds a node under `parent` (-1 for the root) and returns its index.
  int32_t add_node(int32_t parent, std::string name, std::string kind, SourceRange where = {});
  int32_t add_tensor(Tensor t);
  // Appends an op; its output tensor gets this op as producer.
  int32_t add_op(LogicalOp op);

  // The distinct dim names of an op, inputs first, in order of appearance.
  std::vector<std::string> op_dims(const LogicalOp& op) const;
  // Whether some operand or the output of `op` has dim `dim` (op_dims without building the list).
  bool op_has_dim(const LogicalOp& op, std::string_view dim) const;
  // Size of a named dim of an op; 0 when the op has no such dim.
  int64_t op_dim_size(const LogicalOp& op, const std::string& dim) const;
  // Ops that read a tensor, in order.
  std::vector<int32_t> consumers(int32_t tensor) const;
  // The batch axis of every tensor, from the inputs' through the ops' dim
  // names (an output axis named like a batch axis of an input is a batch axis).
  void infer_batch_axes();
  // The experts' slots axis of every tensor: a dispatch's output's, then by
  // dim name as batch axes; a combine's output has none.
  void infer_slots_axes();
};

}  // namespace dstc::compiler
