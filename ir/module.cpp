#include "ir/module.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "ir/groups.h"
#include "ir/registry.h"

namespace dstc::ir {

namespace {

template <typename T>
size_t capacity_bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// Byte key of a plain-data sequence, for the interning maps.
template <typename T>
void append_key(std::string& key, const T* data, size_t n) {
  key.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

}  // namespace

size_t Function::memory_bytes() const {
  return name.capacity() + capacity_bytes(ops) + capacity_bytes(values) + capacity_bytes(operand_pool) +
         capacity_bytes(attr_pool) + capacity_bytes(int_pool) + capacity_bytes(args) + capacity_bytes(returns) +
         capacity_bytes(op_ranges) + capacity_bytes(value_ranges);
}

Module::Module() {
  strings_.emplace_back();
  string_ids_.emplace("", 0);
  layouts_.emplace_back();  // kNoLayout
  locs_.emplace_back();     // kNoLoc
  group_lists_.emplace_back();
}

size_t Module::TypeHash::operator()(const TensorType& t) const {
  size_t h = static_cast<size_t>(t.dtype) * 0x9E3779B97F4A7C15ULL + t.rank;
  for (int i = 0; i < t.rank; ++i) h = (h ^ static_cast<size_t>(t.dims[static_cast<size_t>(i)])) * 0x100000001B3ULL;
  return h;
}

StrId Module::intern(std::string_view s) {
  auto it = string_ids_.find(s);
  if (it != string_ids_.end()) return it->second;
  auto id = static_cast<StrId>(strings_.size());
  strings_.emplace_back(s);
  string_ids_.emplace(strings_.back(), id);
  return id;
}

TypeId Module::intern_type(const TensorType& t) {
  // Look up first: emplace builds a node (an allocation) even when the type is there.
  if (auto it = type_ids_.find(t); it != type_ids_.end()) return it->second;
  auto id = static_cast<TypeId>(types_.size());
  type_ids_.emplace(t, id);
  types_.push_back(t);
  return id;
}

DeviceSetId Module::intern_devices(const DeviceSet& set) {
  std::string key;
  key.push_back(set.is_slice() ? 's' : 'l');
  append_key(key, set.ranges.data(), set.ranges.size());
  append_key(key, set.ranks.data(), set.ranks.size());
  auto found = device_set_ids_.find(key);
  if (found != device_set_ids_.end()) return found->second;

  if (mesh_.empty()) throw std::invalid_argument("device set: the module has no mesh");
  InternedSet entry{set, {}};
  if (set.is_slice()) {
    if (set.ranges.size() != static_cast<size_t>(mesh_.axis_count()))
      throw std::invalid_argument("device set: one range per mesh axis expected");
    for (int a = 0; a < mesh_.axis_count(); ++a) {
      const AxisRange& r = set.ranges[static_cast<size_t>(a)];
      if (r.begin < 0 || r.end > mesh_.axes()[static_cast<size_t>(a)].size || r.begin >= r.end)
        throw std::invalid_argument(fmt::format("device set: range {}..{} outside axis '{}'", r.begin, r.end,
                                                mesh_.axes()[static_cast<size_t>(a)].name));
    }
    // Row-major enumeration of the slice.
    std::vector<int32_t> coord(set.ranges.size());
    for (size_t a = 0; a < coord.size(); ++a) coord[a] = set.ranges[a].begin;
    for (;;) {
      Rank r = 0;
      for (size_t a = 0; a < coord.size(); ++a) r += coord[a] * mesh_.stride(static_cast<int>(a));
      entry.members.push_back(r);
      size_t a = coord.size();
      while (a > 0 && ++coord[a - 1] == set.ranges[a - 1].end) {
        coord[a - 1] = set.ranges[a - 1].begin;
        --a;
      }
      if (a == 0) break;
    }
  } else {
    std::vector<Rank> sorted = set.ranks;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw std::invalid_argument("device set: a rank is listed twice");
    if (sorted.front() < 0 || sorted.back() >= mesh_.size())
      throw std::invalid_argument("device set: rank outside the mesh");
    entry.members = set.ranks;
  }
  auto id = static_cast<DeviceSetId>(device_sets_.size());
  device_sets_.push_back(std::move(entry));
  device_set_ids_.emplace(std::move(key), id);
  return id;
}

bool Module::contains(DeviceSetId id, Rank r) const {
  const DeviceSet& s = device_sets_[id].set;
  if (r < 0 || r >= mesh_.size()) return false;
  if (s.is_slice()) {
    for (int a = 0; a < mesh_.axis_count(); ++a) {
      int32_t c = mesh_.coord(r, a);
      const AxisRange& range = s.ranges[static_cast<size_t>(a)];
      if (c < range.begin || c >= range.end) return false;
    }
    return true;
  }
  return std::find(s.ranks.begin(), s.ranks.end(), r) != s.ranks.end();
}

AxisRange Module::axis_range(DeviceSetId id, int axis) const {
  const DeviceSet& set = device_sets_[id].set;
  if (set.is_slice()) return set.ranges[static_cast<size_t>(axis)];
  int32_t lo = std::numeric_limits<int32_t>::max(), hi = -1;
  for (Rank r : device_sets_[id].members) {
    lo = std::min(lo, mesh_.coord(r, axis));
    hi = std::max(hi, mesh_.coord(r, axis));
  }
  return hi < 0 ? AxisRange{0, 1} : AxisRange{lo, hi + 1};
}

std::vector<int64_t> Module::logical_dims(DeviceSetId set, const Layout& layout, const TensorType& type) const {
  std::vector<int64_t> dims(type.dims.begin(), type.dims.begin() + type.rank);
  for (size_t a = 0; a < layout.size() && static_cast<int>(a) < mesh_.axis_count(); ++a)
    if (layout[a].kind == Sbp::Split && layout[a].dim < dims.size())
      dims[layout[a].dim] *= axis_range(set, static_cast<int>(a)).size();
  return dims;
}

bool Module::includes(DeviceSetId outer, DeviceSetId inner) const {
  if (outer == inner) return true;
  const DeviceSet& o = device_sets_[outer].set;
  const DeviceSet& i = device_sets_[inner].set;
  if (o.is_slice() && i.is_slice()) {
    for (size_t a = 0; a < o.ranges.size(); ++a) {
      if (i.ranges[a].begin < o.ranges[a].begin || i.ranges[a].end > o.ranges[a].end) return false;
    }
    return true;
  }
  for (Rank r : device_sets_[inner].members) {
    if (!contains(outer, r)) return false;
  }
  return true;
}

LayoutId Module::intern_layout(const Layout& layout) {
  for (size_t i = 1; i < layouts_.size(); ++i) {
    if (layouts_[i] == layout) return static_cast<LayoutId>(i);
  }
  layouts_.push_back(layout);
  return static_cast<LayoutId>(layouts_.size() - 1);
}

LocId Module::intern_loc(SourceLoc loc) {
  // Locations repeat in runs (every op lowered from one layer), so the last
  // one is the likely match.
  if (locs_.size() > 1 && locs_.back() == loc) return static_cast<LocId>(locs_.size() - 1);
  locs_.push_back(loc);
  return static_cast<LocId>(locs_.size() - 1);
}

GroupListId Module::add_groups(std::vector<std::vector<Rank>> groups) {
  for (size_t i = 1; i < group_lists_.size(); ++i) {
    if (group_lists_[i] == groups) return static_cast<GroupListId>(i);
  }
  group_lists_.push_back(std::move(groups));
  return static_cast<GroupListId>(group_lists_.size() - 1);
}

Function& Module::add_function(std::string name) {
  functions.emplace_back();
  functions.back().name = std::move(name);
  return functions.back();
}

const Function* Module::find_function(std::string_view name) const {
  for (const Function& f : functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string Module::value_name(const Function& f, ValueId v) const {
  StrId n = f.values[v].name;
  return n == 0 ? std::to_string(v) : std::string(strings_[n]);
}

size_t Module::memory_bytes() const {
  size_t bytes = capacity_bytes(strings_) + capacity_bytes(types_) + capacity_bytes(device_sets_) +
                 capacity_bytes(layouts_) + capacity_bytes(locs_) + capacity_bytes(group_lists_) +
                 capacity_bytes(functions);
  for (const std::string& s : strings_) bytes += s.capacity() > 15 ? s.capacity() : 0;
  // Hash maps: a node (key string + id + link) per entry, plus buckets.
  auto map_bytes = [](const auto& m) { return m.bucket_count() * sizeof(void*) + m.size() * 64; };
  bytes += map_bytes(string_ids_) + map_bytes(type_ids_) + map_bytes(device_set_ids_);
  for (const InternedSet& s : device_sets_) bytes += capacity_bytes(s.members) + capacity_bytes(s.set.ranges);
  for (const Function& f : functions) bytes += f.memory_bytes();
  return bytes;
}

void Function::append_signature(const Op& op, std::string& key) const {
  auto put = [&](const auto& x) { key.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
  put(op.kind);
  for (ValueId v : operands(op)) put(values[v].type), put(values[v].fill);
  for (const Attr& a : attrs(op)) {
    put(a.slot);
    put(a.type);
    if (a.type == AttrType::IntList) {
      for (int64_t x : ints(a)) put(x);
    } else {
      put(a.i);  // the union's bits: an int, a double or a string id
    }
  }
}

ValueId Builder::add_arg(std::string_view name, ArgKind kind, const TensorType& type, DeviceSetId devices,
                         LayoutId layout, const InputData& data) {
  auto id = static_cast<ValueId>(function_.values.size());
  function_.values.push_back({module_.intern_type(type), devices, layout, module_.intern(name), kNone});
  function_.args.push_back({id, kind, data});
  return id;
}

void Function::append_inference_key(const Op& op, std::string& key) const {
  auto put = [&](const auto& x) { key.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
  put(op.devices);
  put(op.group_axes);
  put(op.aux);
  append_signature(op, key);
}

const std::vector<TypeId>& Builder::infer_results(const OpSpec& spec, const Op& op) {
  const OpInfo& info = op_info(spec.kind);
  if (info.infer == nullptr) throw IrBuildError(fmt::format("{} needs its result types given", info.name));
  key_.clear();
  function_.append_inference_key(op, key_);
  auto [cached, fresh] = inferred_.try_emplace(key_);
  if (!fresh) return cached->second;
  // Scratch reused across appends: a fresh array of TensorTypes per op
  // was a measurable share of lowering.
  operand_types_.clear();
  for (ValueId v : spec.operands) operand_types_.push_back(module_.value_type(function_, v));
  std::span<const TensorType> operand_span = operand_types_;
  AttrReader reader(spec.kind, function_.attrs(op), function_.int_pool, module_);
  scratch_types_.clear();
  std::string error;
  OpContext ctx{operand_span, reader, group_size(module_, op)};
  if (!info.infer(ctx, scratch_types_, error)) {
    inferred_.erase(cached);
    throw IrBuildError(fmt::format("{}: {}", info.name, error));
  }
  for (const TensorType& t : scratch_types_) cached->second.push_back(module_.intern_type(t));
  return cached->second;
}

TypeId Builder::flat_logical_type(const OpSpec& spec, size_t operand, TypeId result) {
  if (operand >= spec.operands.size()) return kNone;  // recv: the caller sets it (the verifier checks)
  const Value& in = function_.values[spec.operands[operand]];
  TensorType logical = module_.type(result);
  std::vector<int64_t> dims;
  if (in.logical != kNone) {
    const TensorType& t = module_.type(in.logical);
    dims.assign(t.dims.begin(), t.dims.begin() + t.rank);
  } else {
    ir::Layout layout = in.layout != kNoLayout ? module_.layout(in.layout) : Layout{};
    dims = module_.logical_dims(in.devices, layout, module_.type(in.type));
  }
  return module_.intern_type(TensorType(logical.dtype, dims));
}

OpId Builder::append(const OpSpec& spec) {
  const OpInfo& info = op_info(spec.kind);
  Function& f = function_;
  Op op;
  op.kind = spec.kind;
  op.stream = spec.meta.stream;
  op.phase = spec.meta.phase;
  op.stage = spec.meta.stage;
  op.micro_batch = spec.meta.micro_batch;
  op.loc = spec.meta.loc;
  op.devices = spec.devices;
  op.group_axes = spec.group_axes;
  op.aux = info.category == OpCategory::PointToPoint ? spec.peer : (spec.groups == kNoGroups ? kNone : spec.groups);
  op.channel = spec.channel;

  op.operand_begin = static_cast<uint32_t>(f.operand_pool.size());
  op.operand_count = static_cast<uint16_t>(spec.operands.size());
  f.operand_pool.insert(f.operand_pool.end(), spec.operands.begin(), spec.operands.end());

  op.attr_begin = static_cast<uint32_t>(f.attr_pool.size());
  op.attr_count = static_cast<uint16_t>(spec.attrs.size());
  for (const AttrValue& a : spec.attrs) {
    int slot = info.attr_slot(a.name);
    if (slot < 0) throw IrBuildError(fmt::format("{} has no attribute '{}'", info.name, a.name));
    Attr attr;
    attr.slot = static_cast<uint8_t>(slot);
    attr.type = a.type;
    switch (a.type) {
      case AttrType::Int:
      case AttrType::Bool: attr.i = a.i; break;
      case AttrType::Float: attr.f = a.f; break;
      case AttrType::String: attr.s = module_.intern(a.s); break;
      case AttrType::IntList:
        attr.i = static_cast<int64_t>(f.int_pool.size());
        attr.count = static_cast<uint32_t>(a.list.size());
        f.int_pool.insert(f.int_pool.end(), a.list.begin(), a.list.end());
        break;
    }
    f.attr_pool.push_back(attr);
  }

  op.first_result = static_cast<ValueId>(f.values.size());
  std::span<const TypeId> result_types = spec.result_types;
  if (result_types.empty()) result_types = infer_results(spec, op);
  op.result_count = static_cast<uint16_t>(result_types.size());
  auto op_id = static_cast<OpId>(f.ops.size());
  for (size_t i = 0; i < result_types.size(); ++i) {
    Value v;
    v.type = result_types[i];
    v.devices = spec.devices;
    v.layout = i < spec.result_layouts.size() ? spec.result_layouts[i] : kNoLayout;
    v.name = i < spec.result_names.size() ? spec.result_names[i] : 0;
    v.def = op_id;
    if (v.layout != kNoLayout && flat_axis(module_.layout(v.layout)) >= 0)
      v.logical = flat_logical_type(spec, info.results == kPerOperand ? i : 0, v.type);
    f.values.push_back(v);
  }
  f.ops.push_back(op);
  return op_id;
}

}  // namespace dstc::ir
