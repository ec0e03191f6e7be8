// The ops a model can write, defined once (op_kinds.def): each op's kind,
// its source name and family, its tensor arity and attributes, and the rule
// giving its output dims from its inputs' named dims (einsum-style). The
// front end checks op statements with it; the logical graph, SBP and
// lowering name ops by its kind. docs/language.md lists the ops.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/pointwise_ops.h"

namespace dstc::ops {

enum class OpKind : uint8_t {
#define DSTC_OP(kind, ...) kind,
#include "compiler/ops/op_kinds.def"
#undef DSTC_OP
};

// Groups of ops whose rules live together, in compiler/ops/<family>.cpp.
enum class Family : uint8_t {
  Contraction,
  Elementwise,
  Normalization,
  Reduction,
  Embedding,
  Loss,
  Attention,
  Convolution,
  Shape,
  Routing
};

// A named dim of a tensor, as the model writes it: `h: hidden`.
struct Dim {
  std::string name;
  int64_t size = 0;
  friend bool operator==(const Dim&, const Dim&) = default;
};

enum class AttrType : uint8_t { Int, Float, Bool, Dim };

struct AttrSpec {
  std::string_view name;
  AttrType type = AttrType::Int;
  bool required = false;
  // The value of an attribute not given (Bool: nonzero is true), or, where
  // `fallback_attr` names another attribute, that one's (a pool's stride
  // is its kernel).
  double fallback = 0;
  std::string_view fallback_attr = {};
};

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

class OpAttrs;

// What an output-dims rule sees: each input's dims as the op names them,
// the attributes and the written output.
struct DimsQuery {
  const std::vector<std::vector<Dim>>& inputs;
  const OpAttrs& attrs;
  const std::optional<std::vector<DeclaredDim>>& declared;  // always set for Declared ops
};

using DimsRule = std::optional<std::vector<Dim>> (*)(const DimsQuery& query, OpError& error);

// What a lowering limit sees: an op of the logical graph, its operands' and
// output's dim names as it uses them, its attributes and the model's batch
// dim (the one micro-batches cut).
struct LoweringQuery {
  std::string_view op;  // its name, for messages
  const std::vector<std::vector<std::string>>& inputs;
  const std::vector<std::string>& output;
  const OpAttrs& attrs;
  int axis;  // the axis of the first input its `dim` attribute names (-1: it has none)
  std::string_view batch_dim;

  size_t rank() const { return inputs[0].size(); }
};

// Why the compiler cannot lower an op written this way yet; nullopt when it can.
using LoweringLimit = std::optional<std::string> (*)(const LoweringQuery& query);

enum class OutputDims : uint8_t { Inferred, Declared };

// How an op splits a dim over a mesh axis (compiler/sbp/signature.cpp reads
// it). By name: an operand holding the dim is split along it, the others
// replicated, the output split or partial (a sum over the split dim). The
// other kinds split by name too but refuse some dims, as `refusal` says:
// "softmax normalizes over 'v', which it cannot split".
struct SplitRule {
  enum Kind : uint8_t {
    ByName,
    Elementwise,    // by name, and the output must hold the dim
    RefuseAttrDim,  // not the dim its `dim` attribute names
    RefuseLastDim,  // not its first input's last dim
    RefuseWindow,   // not the two dims it slides a window over
    RefuseKernelAndWindow,
    VocabParallelClasses,  // cross-entropy: a split class dim is the vocabulary-parallel loss
    ReshapeGroups,         // only the outermost dim of a group it merges or splits
    BatchAndHeadsOnly,     // attention: its first two dims
    ToPartialMax,          // by name; a split reduced dim leaves a partial maximum
    RoutesTokens,          // dispatch, combine: not the routed dim nor the slots
  };
  Kind kind = ByName;
  std::string_view refusal;
};
inline constexpr SplitRule kSplitByName{SplitRule::ByName, {}};
inline constexpr SplitRule kSplitElementwise{SplitRule::Elementwise, {}};
inline constexpr SplitRule kNormalizesOverAttrDim{SplitRule::RefuseAttrDim, "normalizes over"};
inline constexpr SplitRule kPicksFromAttrDim{SplitRule::RefuseAttrDim, "picks one index of"};
inline constexpr SplitRule kTakesRangeOfAttrDim{SplitRule::RefuseAttrDim, "takes a range of"};
inline constexpr SplitRule kJoinsAlongAttrDim{SplitRule::RefuseAttrDim, "joins its inputs along"};
inline constexpr SplitRule kNormalizesOverLastDim{SplitRule::RefuseLastDim, "normalizes over"};
inline constexpr SplitRule kRotatesLastDim{SplitRule::RefuseLastDim, "rotates pairs of"};
inline constexpr SplitRule kSlidesWindow{SplitRule::RefuseWindow, "slides its window over"};
inline constexpr SplitRule kSlidesKernelWindow{SplitRule::RefuseKernelAndWindow, "slides its window over"};
inline constexpr SplitRule kVocabParallelClasses{SplitRule::VocabParallelClasses, {}};
inline constexpr SplitRule kReshapeSplit{SplitRule::ReshapeGroups, {}};
inline constexpr SplitRule kSplitsBatchAndHeads{SplitRule::BatchAndHeadsOnly, {}};
inline constexpr SplitRule kSplitToPartialMax{SplitRule::ToPartialMax, {}};
inline constexpr SplitRule kSelectsTopKAlongAttrDim{SplitRule::RefuseAttrDim, "selects its top k along"};
inline constexpr SplitRule kRoutesTokens{SplitRule::RoutesTokens, {}};

// Which inputs an op is linear in, so which may arrive partial (the output
// is then partial too): none, the first (the rest replicated), or all.
enum class PartialInputs : uint8_t { NotLinear, LinearInFirst, LinearInAll };

inline constexpr size_t kMany = 64;  // max_inputs of ops taking any number

struct OpDef {
  OpKind kind;
  std::string_view name;
  Family family;
  size_t min_inputs;
  size_t max_inputs;
  OutputDims output;
  DimsRule output_dims;
  LoweringLimit lowering_limit;
  SplitRule split;
  PartialInputs partial;
  std::string_view summary;
  std::vector<AttrSpec> attrs;
  // The activations: their IR op, grad and semantics (ir/pointwise_ops.def).
  const ir::PointwiseOp* pointwise = nullptr;

  bool needs_declared_output() const { return output == OutputDims::Declared; }
};

// An op's attribute values, one per AttrSpec of its definition, in order.
// Every stage reads them by name, and one not given reads as its spec's
// fallback: no stage keeps its own list of an op's attributes or defaults.
// Reading a name the op does not declare is a bug: std::logic_error.
class OpAttrs {
 public:
  OpAttrs() = default;
  // None written.
  explicit OpAttrs(const OpDef& def);
  // `values`: one per spec of `def`, in order (AttrValue::given says which were written).
  OpAttrs(const OpDef& def, std::vector<AttrValue> values);

  bool declares(std::string_view name) const;

  int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;
  bool boolean(std::string_view name) const;
  // A Dim attribute's dim name; empty when not given.
  const std::string& dim(std::string_view name) const;
  bool given(std::string_view name) const;

  // Writes an attribute, as a model would (graphs built by hand).
  void set_integer(std::string_view name, int64_t value);
  void set_real(std::string_view name, double value);
  void set_boolean(std::string_view name, bool value);

 private:
  // The value of `name`, or of the attribute it falls back to, with its spec.
  std::pair<const AttrValue*, const AttrSpec*> lookup(std::string_view name) const;
  size_t slot(std::string_view name) const;

  const OpDef* def_ = nullptr;
  std::vector<AttrValue> values_;
};

std::span<const OpDef> all_ops();
const OpDef& op_def(OpKind kind);
const OpDef* find_op(std::string_view name);
std::string_view op_name(OpKind kind);

// The output dims of `def` applied to `inputs`, or the error.
std::optional<std::vector<Dim>> infer_output(const OpDef& def, const std::vector<std::vector<Dim>>& inputs,
                                             const OpAttrs& attrs,
                                             const std::optional<std::vector<DeclaredDim>>& declared, OpError& error);

}  // namespace dstc::ops
