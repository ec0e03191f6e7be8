// An elaborated model: the module tree with `repeat` expanded, every layer
// instance's parameters and ops in named-dim (einsum-style) form, and one
// global table of tensors with explicit producers, so a later stage can walk
// data dependencies without the AST.
//
// Dims are named. A model input `tokens[b: batch, s: seq]` names b and s; a
// layer names its own dims (`param weight[o: out, h: in]`); a layer input
// written `x[..., h]` is polymorphic over leading dims, whose names flow
// through from the caller (Linear on [b, s, h] gives [b, s, o]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/value.h"
#include "compiler/ops/op_table.h"
#include "ir/source/source_manager.h"
#include "ir/types.h"

namespace dstc::frontend {

using NodeId = int32_t;
using TensorId = int32_t;
using OpId = int32_t;
inline constexpr int32_t kNone = -1;

using ops::Dim;
using ops::OpKind;

// The IR's dtypes; a model writes five of them, by their source names.
using ir::DType;
std::string_view source_dtype_name(DType t);  // fp32, fp16, bf16, i32, i64 (others: their IR names)
std::optional<DType> parse_source_dtype(std::string_view name);

enum class TensorRole { Input, Param, Activation };

struct Tensor {
  std::string name;       // full path: "blocks[3].attn.qkv.weight", "tokens"
  std::vector<Dim> dims;  // named by the op or declaration that made it
  DType dtype = DType::F32;
  TensorRole role = TensorRole::Activation;
  bool trainable = true;  // Param: false for a buffer (stored, never updated)
  OpId producer = kNone;  // Activation only
  NodeId node = kNone;    // the node that declares it (root for inputs)
  SourceRange range;
};

// A tensor as one op sees it: its dims renamed positionally to the names the
// op uses (`k[b, n, t, d]` for a tensor made as [b, n, s, d]).
struct OpInput {
  TensorId tensor = kNone;
  std::vector<std::string> dims;
};

struct Op {
  OpKind kind = OpKind::Matmul;
  std::vector<OpInput> inputs;
  TensorId output = kNone;  // its dims are the op's output dims
  ops::OpAttrs attrs;       // as its definition declares them; a dim attribute by the dim's name
  NodeId node = kNone;      // the leaf it belongs to
  SourceRange range;
};

enum class NodeKind {
  Model,   // the root
  Module,  // a module instance: children
  Repeat,  // `repeat(n) X(...)`: children name[0] .. name[n-1]
  Layer,   // a layer instance: a leaf with params and ops
  Op,      // an op written directly in a module: a leaf of one op
};

struct Node {
  std::string path;    // "blocks[3].attn.qkv"; "" for the root
  std::string name;    // last segment without index: "qkv", "blocks"
  int64_t index = -1;  // i for a child of a Repeat node, else -1
  NodeKind kind = NodeKind::Module;
  std::string component;  // layer/module/model name; op name for Op
  NodeId parent = kNone;
  std::vector<NodeId> children;
  std::vector<OpId> ops;         // leaves
  std::vector<TensorId> params;  // Layer leaves
  std::vector<TensorId> inputs;  // tensors passed in, in order
  TensorId output = kNone;
  SourceRange range;       // the statement that instantiated it
  SourceRange decl_range;  // the component's declaration (its name)
  bool is_leaf() const { return kind == NodeKind::Layer || kind == NodeKind::Op; }
};

struct Model {
  std::string name;
  SourceRange range;                                  // the model's name in its declaration
  std::vector<std::pair<std::string, Value>> params;  // effective values
  std::vector<Node> nodes;                            // nodes[0] is the root
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  std::vector<TensorId> inputs;
  TensorId output = kNone;  // the loss of a training model
  // The batch dim: the first dim of the first input.
  std::string batch_dim;
  int64_t batch = 0;

  // The dims an op iterates over: its inputs' and output's, by name, first
  // appearance first.
  std::vector<Dim> op_dims(const Op& op) const;
  // The union of op_dims over a leaf's ops (from the table index_leaf_dims
  // fills, once per model: every strategy elaborated for it asks).
  const std::vector<Dim>& leaf_dims(NodeId leaf) const { return leaf_dims_[leaf]; }
  void index_leaf_dims();

 private:
  std::vector<std::vector<Dim>> leaf_dims_;  // per node; empty for inner nodes
};

}  // namespace dstc::frontend
