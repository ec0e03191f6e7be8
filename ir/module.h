// The explicit-schedule IR: a module holds one device mesh, interned tables
// (strings, types, device sets, layouts, .dstrat locations, explicit
// collective groups) and functions. A function is straight-line SSA code: its
// ops vector IS the program order; the order of one (device, stream) is the
// subsequence of ops that run on that device and stream.
//
// Storage is vectors of plain structs and 32-bit indexes: an op's operands
// and attributes are ranges of per-function pools, its results are a
// contiguous range of values.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/ids.h"
#include "ir/mesh.h"
#include "ir/source/source_manager.h"
#include "ir/types.h"

namespace dstc::ir {

enum class AttrType : uint8_t { Int, Float, Bool, String, IntList };

// One attribute of an op. `slot` indexes the op kind's attribute list in the
// registry (the name is not stored). String payloads are interned; lists
// live in Function::int_pool.
struct Attr {
  uint8_t slot = 0;
  AttrType type = AttrType::Int;
  uint32_t count = 0;  // IntList: length
  union {
    int64_t i = 0;  // Int, Bool, IntList (offset into int_pool)
    double f;       // Float
    StrId s;        // String
  };
};

// The share of a value's elements that is data (mixture-of-experts slots
// an expert's tokens fill): on the fullest device holding it, what it costs
// in memory and what the ops that read or write it cost there; and averaged
// over those devices, the work that counts as done. Executors still hold
// the whole type.
struct Fill {
  float fullest = 1.0f;
  float mean = 1.0f;
  bool operator==(const Fill&) const = default;
};

struct Value {
  TypeId type = 0;
  DeviceSetId devices = 0;
  LayoutId layout = kNoLayout;
  StrId name = 0;    // 0: printed as %<id>
  OpId def = kNone;  // kNone: a function argument
  // A value whose layout has an S(flat) axis: the logical tensor's type (its
  // local type, a flat chunk, no longer says); kNone otherwise.
  TypeId logical = kNone;
  Fill fill{};
};

// .dstrat source location an op was lowered from.
struct SourceLoc {
  StrId file = 0;
  uint32_t line = 0;
  uint32_t column = 0;
  StrId scope = 0;  // the module path of the op's layer ("blocks[3].mlp.fc1"); 0: none
  friend bool operator==(const SourceLoc&, const SourceLoc&) = default;
};

struct Op {
  OpKind kind = OpKind::Matmul;
  Stream stream = Stream::Compute;
  Phase phase = Phase::None;
  int16_t stage = -1;        // pipeline stage; -1: none
  uint16_t group_axes = 0;   // collectives: bit i = mesh axis i is reduced/gathered over
  int32_t micro_batch = -1;  // -1: none
  DeviceSetId devices = 0;
  uint32_t operand_begin = 0;  // into Function::operand_pool
  uint16_t operand_count = 0;
  uint16_t result_count = 0;
  uint16_t attr_count = 0;
  ValueId first_result = 0;
  uint32_t attr_begin = 0;  // into Function::attr_pool
  uint32_t aux = kNone;     // send/recv: peer DeviceSetId; collectives: GroupListId or kNone
  uint32_t channel = 0;     // send/recv: channel tag pairing them
  LocId loc = kNoLoc;
};

// How an executor makes up a data input's values, written by lowering so
// that executors need nothing but the IR: the input is cut from the
// model's whole-batch tensor `data`, drawn from (seed, data), so every
// program of the same model sees the same batch however it splits it.
struct InputData {
  StrId data = 0;             // the model's input ("tokens"); 0: the argument's own name
  int32_t batch_axis = -1;    // the axis micro-batches split; -1: none
  int32_t micro_batch = -1;   // which slice of batch_axis this is; -1: the whole batch
  int32_t micro_batches = 1;  // how many slices the whole batch has
  int64_t values = 0;         // integers take values in [0, values); 0: float data (integers: [0, 2))
  bool operator==(const InputData&) const = default;
};

struct Arg {
  ValueId value = 0;
  ArgKind kind = ArgKind::Param;
  InputData data;  // Input arguments only
};

class Module;

class Function {
 public:
  std::string name;
  std::vector<Op> ops;
  std::vector<Value> values;
  std::vector<ValueId> operand_pool;
  std::vector<Attr> attr_pool;
  std::vector<int64_t> int_pool;
  std::vector<Arg> args;
  std::vector<ValueId> returns;
  // Where each op / value was written, when the function came from IR text
  // (empty otherwise). value_ranges[v] is the name at its definition.
  std::vector<SourceRange> op_ranges;
  std::vector<SourceRange> value_ranges;

  std::span<const ValueId> operands(const Op& op) const {
    return {operand_pool.data() + op.operand_begin, op.operand_count};
  }
  std::span<const Attr> attrs(const Op& op) const { return {attr_pool.data() + op.attr_begin, op.attr_count}; }
  std::span<const int64_t> ints(const Attr& a) const { return {int_pool.data() + static_cast<size_t>(a.i), a.count}; }
  ValueId result(const Op& op, int i = 0) const { return op.first_result + static_cast<ValueId>(i); }
  SourceRange op_range(OpId op) const { return op < op_ranges.size() ? op_ranges[op] : SourceRange{}; }
  SourceRange value_range(ValueId v) const { return v < value_ranges.size() ? value_ranges[v] : SourceRange{}; }
  // Heap bytes held by this function's vectors (capacities).
  size_t memory_bytes() const;
  // Appends to `key` the bytes of what an op computes: its kind, operand
  // types (interned, so equal types have equal ids) and attributes. Ops
  // repeat per layer and micro-batch; the builder and the simulator key
  // their caches on this.
  void append_signature(const Op& op, std::string& key) const;
  // The signature with what else decides an op's result types: its
  // devices and groups (shape rules read the group size).
  void append_inference_key(const Op& op, std::string& key) const;
};

// An attribute as a builder or parser passes it: by name, resolved to the
// op kind's slot on append.
struct AttrValue {
  std::string_view name;
  AttrType type = AttrType::Int;
  int64_t i = 0;
  double f = 0;
  std::string_view s;
  std::span<const int64_t> list;

  static AttrValue integer(std::string_view n, int64_t v) { return {n, AttrType::Int, v, 0, {}, {}}; }
  static AttrValue real(std::string_view n, double v) { return {n, AttrType::Float, 0, v, {}, {}}; }
  static AttrValue boolean(std::string_view n, bool v) { return {n, AttrType::Bool, v ? 1 : 0, 0, {}, {}}; }
  static AttrValue string(std::string_view n, std::string_view v) { return {n, AttrType::String, 0, 0, v, {}}; }
  static AttrValue ints(std::string_view n, std::span<const int64_t> v) { return {n, AttrType::IntList, 0, 0, {}, v}; }
};

// Scheduling metadata of an op.
struct OpMeta {
  Stream stream = Stream::Compute;
  Phase phase = Phase::None;
  int16_t stage = -1;
  int32_t micro_batch = -1;
  LocId loc = kNoLoc;
};

// Everything needed to append one op. result_types empty: the registry's
// shape rule types the results (recv and fill need no operands but their
// attributes; recv's type must be given).
struct OpSpec {
  OpKind kind = OpKind::Matmul;
  DeviceSetId devices = 0;
  std::span<const ValueId> operands;
  std::span<const AttrValue> attrs;
  OpMeta meta;
  uint16_t group_axes = 0;         // collectives over mesh axes (bit per axis)
  GroupListId groups = kNoGroups;  // or an explicit group list
  DeviceSetId peer = kNone;        // send: destination set; recv: source set
  uint32_t channel = 0;            // send/recv pairing tag
  std::span<const TypeId> result_types;
  std::span<const LayoutId> result_layouts;  // empty: no layouts
  std::span<const StrId> result_names;       // empty: unnamed
};

// The fp32 scales an FP8 value carries beside its elements (ir/fp8_scales.h).
int64_t fp8_scale_bytes(const Module& module, const Function& f, ValueId v);

class Module {
 public:
  Module();
  Module(const Module&) = default;
  Module(Module&&) = default;
  Module& operator=(const Module&) = default;
  Module& operator=(Module&&) = default;

  // Where the mesh is declared, when the module came from IR text: what a
  // diagnostic about the mesh or the whole module points at.
  SourceRange mesh_range;

  // Set the mesh before interning device sets (their members depend on it).
  void set_mesh(Mesh mesh) { mesh_ = std::move(mesh); }
  const Mesh& mesh() const { return mesh_; }

  StrId intern(std::string_view s);
  std::string_view str(StrId id) const { return strings_[id]; }

  TypeId intern_type(const TensorType& t);
  const TensorType& type(TypeId id) const { return types_[id]; }
  size_t type_count() const { return types_.size(); }

  // A slice needs one range per mesh axis, within the axis; an explicit list
  // distinct ranks within the mesh. Throws std::invalid_argument otherwise.
  DeviceSetId intern_devices(const DeviceSet& set);
  const DeviceSet& devices(DeviceSetId id) const { return device_sets_[id].set; }
  // Members in the set's order (row-major for a slice).
  std::span<const Rank> members(DeviceSetId id) const { return device_sets_[id].members; }
  bool contains(DeviceSetId id, Rank r) const;
  // Every member of `inner` is a member of `outer`.
  bool includes(DeviceSetId outer, DeviceSetId inner) const;
  // The coordinates of mesh axis `axis` the set spans.
  AxisRange axis_range(DeviceSetId id, int axis) const;
  // The logical dims of a value of local `type` laid out `layout` on `set`
  // (split dims times the axes that split them; not for S(flat) layouts).
  std::vector<int64_t> logical_dims(DeviceSetId set, const Layout& layout, const TensorType& type) const;
  size_t device_set_count() const { return device_sets_.size(); }

  // A layout has one entry per mesh axis.
  LayoutId intern_layout(const Layout& layout);
  const Layout& layout(LayoutId id) const { return layouts_[id]; }

  LocId intern_loc(SourceLoc loc);
  const SourceLoc& loc(LocId id) const { return locs_[id]; }

  // Explicit collective groups, each a list of ranks (for irregular groups).
  GroupListId add_groups(std::vector<std::vector<Rank>> groups);
  const std::vector<std::vector<Rank>>& groups(GroupListId id) const { return group_lists_[id]; }

  std::vector<Function> functions;
  Function& add_function(std::string name);
  const Function* find_function(std::string_view name) const;

  // Type of a value, shortcut.
  const TensorType& value_type(const Function& f, ValueId v) const { return types_[f.values[v].type]; }
  // The bytes a value takes: its type's (and an FP8 value's scales,
  // ir/fp8_scales.h), times its fill.
  int64_t value_bytes(const Function& f, ValueId v) const {
    const Value& value = f.values[v];
    const TensorType& type = types_[value.type];
    const int64_t bytes = type.bytes() + (is_fp8(type.dtype) ? fp8_scale_bytes(*this, f, v) : 0);
    const float fill = value.fill.fullest;
    return fill == 1.0f ? bytes : static_cast<int64_t>(static_cast<double>(bytes) * fill);
  }
  // Name as printed, without the '%' ("<id>" when unnamed).
  std::string value_name(const Function& f, ValueId v) const;

  // Heap bytes held by the module (vector capacities and interned tables).
  size_t memory_bytes() const;

 private:
  struct InternedSet {
    DeviceSet set;
    std::vector<Rank> members;
  };
  Mesh mesh_;
  std::vector<std::string> strings_;
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct TypeHash {
    size_t operator()(const TensorType& t) const;
  };
  std::unordered_map<std::string, StrId, StringHash, std::equal_to<>> string_ids_;
  std::vector<TensorType> types_;
  std::unordered_map<TensorType, TypeId, TypeHash> type_ids_;
  std::vector<InternedSet> device_sets_;
  std::unordered_map<std::string, DeviceSetId> device_set_ids_;
  std::vector<Layout> layouts_;
  std::vector<SourceLoc> locs_;
  std::vector<std::vector<std::vector<Rank>>> group_lists_;
};

// Appends ops to one function of a module. Results are typed by the op
// registry unless the spec gives their types. Misuse (an unknown attribute,
// operands the shape rule rejects) throws IrBuildError: it is a bug in the
// caller, not a user error. Run the verifier on the finished module.
class IrBuildError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Builder {
 public:
  Builder(Module& module, Function& function) : module_(module), function_(function) {}

  ValueId add_arg(std::string_view name, ArgKind kind, const TensorType& type, DeviceSetId devices,
                  LayoutId layout = kNoLayout, const InputData& data = {});
  OpId append(const OpSpec& spec);
  // Convenience for single-result ops.
  ValueId append_value(const OpSpec& spec) { return function_.ops[append(spec)].first_result; }
  void set_returns(std::span<const ValueId> values) { function_.returns.assign(values.begin(), values.end()); }
  // An argument laid out S(flat) needs its logical type; an op's flat
  // result takes its operand's.
  void set_logical_type(ValueId v, const TensorType& logical) {
    function_.values[v].logical = module_.intern_type(logical);
  }

  Module& module() { return module_; }
  Function& function() { return function_; }

 private:
  // The key of an op's result types: its kind, placement, group, operand
  // types and attributes (interned), what the shape rule reads.
  // The registry's shape rule for `op`'s results, interned, cached by Function::append_inference_key.
  const std::vector<TypeId>& infer_results(const OpSpec& spec, const Op& op);
  // The logical type of an S(flat) result of dtype `result`'s: the logical
  // shape of `operand` (its first, or its own in a grouped collective);
  // kNone without operands.
  TypeId flat_logical_type(const OpSpec& spec, size_t operand, TypeId result);

  Module& module_;
  Function& function_;
  std::vector<TensorType> scratch_types_, operand_types_;
  // Inferred result types by inference key: ops repeat per micro-batch and
  // layer, and the shape rules (einsum parsing) were a large share of lowering.
  std::unordered_map<std::string, std::vector<TypeId>> inferred_;
  std::string key_;
};

}  // namespace dstc::ir
