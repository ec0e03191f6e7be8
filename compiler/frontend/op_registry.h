// The registered op vocabulary of layer bodies: each op's tensor arity, its
// attributes, and the rule that gives its output dims from its inputs' named
// dims (einsum-style). docs/language.md lists them with examples.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dstc::frontend {

struct Dim;

enum class OpKind {
  Matmul,
  Einsum,  // contraction: declared output names the kept dims
  Add,
  Sub,
  Mul,
  Div,
  Maximum,  // elementwise, broadcast by dim name
  Gelu,
  Relu,
  Tanh,
  Sigmoid,
  Exp,
  Sqrt,
  Dropout,
  Scale,
  Identity,
  Softmax,
  LogSoftmax,  // over `dim`
  LayerNorm,
  RmsNorm,
  BatchNorm,  // normalise over `dim`, with optional weights
  Sum,
  Mean,
  Max,        // reduce `dim` away
  Embedding,  // (table[v, h], ids[...]) -> [..., h]
  CrossEntropy,
  MseLoss,    // scalar losses
  Attention,  // fused (q, k, v) -> [..., s, e]
  Conv2d,
  MaxPool2d,
  AvgPool2d,
  GlobalAvgPool,  // NCHW-style: [..., c, h, w]
  Concat,         // along `dim`
  Select,         // one `index` of `dim`, which goes away
  Reshape,        // split or merge dims; declared output required
};

enum class AttrType { Int, Float, Bool, Dim };

struct AttrSpec {
  std::string_view name;
  AttrType type;
  bool required;
};

struct OpSignature {
  OpKind kind;
  std::string_view name;
  size_t min_inputs;
  size_t max_inputs;
  std::vector<AttrSpec> attrs;
  bool needs_declared_output;  // the output's dims must be written
  std::string_view summary;
};

const std::vector<OpSignature>& all_ops();
const OpSignature* find_op(std::string_view name);
const OpSignature& op_signature(OpKind kind);
std::string_view op_name(OpKind kind);

// An attribute value after evaluation (Dim attributes by name).
struct AttrValue {
  std::string_view name;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string dim;
  bool given = false;
};

// A dim of the written output: a name, and a size when one was written.
struct DeclaredDim {
  std::string name;
  std::optional<int64_t> size;
};

// What went wrong: the message and which input it concerns (-1: the op or
// its output).
struct OpError {
  std::string message;
  int input = -1;
  bool unknown_dim = false;  // reported as unknown-dim rather than dim-mismatch
};

// The output dims of `sig` applied to `inputs` (each the dims as the op names
// them), or the error. `declared` is the written output, if any.
std::optional<std::vector<Dim>> infer_output(const OpSignature& sig, const std::vector<std::vector<Dim>>& inputs,
                                             const std::vector<AttrValue>& attrs,
                                             const std::optional<std::vector<DeclaredDim>>& declared, OpError& error);

}  // namespace dstc::frontend
