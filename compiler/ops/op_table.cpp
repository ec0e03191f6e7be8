#include "compiler/ops/op_table.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "compiler/ops/op_rules.h"
#include "ir/registry.h"

namespace dstc::ops {
namespace {

constexpr AttrSpec kDimAttr{"dim", AttrType::Dim, true};
constexpr AttrSpec kEpsAttr{"eps", AttrType::Float, false, 1e-5};

std::vector<OpDef> make_ops() {
  using enum Family;
  using enum OutputDims;
  using enum PartialInputs;
  return {
#define DSTC_OP(kind, name, family, min_inputs, max_inputs, output, dims_rule, lowering_limit, split, partial, \
                summary, ...)                                                                                  \
  {OpKind::kind, name,           family, min_inputs, max_inputs, output,                                       \
   dims_rule,    lowering_limit, split,  partial,    summary,    {__VA_ARGS__}},
#include "compiler/ops/op_kinds.def"
#undef DSTC_OP
  };
}

std::vector<OpDef> make_table() {
  std::vector<OpDef> ops = make_ops();
  // An activation's model op and IR op are one line of pointwise_ops.def,
  // so they share the name.
  for (OpDef& d : ops) {
    if (std::optional<ir::OpKind> kind = ir::find_op_kind(d.name)) d.pointwise = ir::find_pointwise(*kind);
  }
  return ops;
}

}  // namespace

std::span<const OpDef> all_ops() {
  static const std::vector<OpDef> ops = make_table();
  return ops;
}

const OpDef& op_def(OpKind kind) { return all_ops()[static_cast<size_t>(kind)]; }

const OpDef* find_op(std::string_view name) {
  for (const OpDef& d : all_ops()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string_view op_name(OpKind kind) { return op_def(kind).name; }

OpAttrs::OpAttrs(const OpDef& def) : def_(&def) {
  for (const AttrSpec& spec : def.attrs) values_.push_back({spec.name, 0, 0, false, {}, false});
}

OpAttrs::OpAttrs(const OpDef& def, std::vector<AttrValue> values) : def_(&def), values_(std::move(values)) {
  if (values_.size() != def.attrs.size())
    throw std::logic_error(
        fmt::format("{} declares {} attributes, {} given", def.name, def.attrs.size(), values_.size()));
}

bool OpAttrs::declares(std::string_view name) const {
  return def_ &&
         std::any_of(def_->attrs.begin(), def_->attrs.end(), [&](const AttrSpec& spec) { return spec.name == name; });
}

size_t OpAttrs::slot(std::string_view name) const {
  if (def_) {
    for (size_t i = 0; i < def_->attrs.size(); ++i)
      if (def_->attrs[i].name == name) return i;
  }
  throw std::logic_error(
      fmt::format("{} declares no attribute '{}'", def_ ? def_->name : std::string_view("this op"), name));
}

std::pair<const AttrValue*, const AttrSpec*> OpAttrs::lookup(std::string_view name) const {
  size_t i = slot(name);
  const AttrSpec& spec = def_->attrs[i];
  if (!values_[i].given && !spec.fallback_attr.empty()) return lookup(spec.fallback_attr);
  return {&values_[i], &spec};
}

int64_t OpAttrs::integer(std::string_view name) const {
  auto [value, spec] = lookup(name);
  return value->given ? value->i : static_cast<int64_t>(spec->fallback);
}

double OpAttrs::real(std::string_view name) const {
  auto [value, spec] = lookup(name);
  return value->given ? value->f : spec->fallback;
}

bool OpAttrs::boolean(std::string_view name) const {
  auto [value, spec] = lookup(name);
  return value->given ? value->b : spec->fallback != 0;
}

const std::string& OpAttrs::dim(std::string_view name) const { return values_[slot(name)].dim; }

bool OpAttrs::given(std::string_view name) const { return values_[slot(name)].given; }

void OpAttrs::set_integer(std::string_view name, int64_t value) {
  AttrValue& v = values_[slot(name)];
  v.i = value;
  v.given = true;
}

void OpAttrs::set_real(std::string_view name, double value) {
  AttrValue& v = values_[slot(name)];
  v.f = value;
  v.given = true;
}

void OpAttrs::set_boolean(std::string_view name, bool value) {
  AttrValue& v = values_[slot(name)];
  v.b = value;
  v.given = true;
}

std::optional<std::vector<Dim>> infer_output(const OpDef& def, const std::vector<std::vector<Dim>>& inputs,
                                             const OpAttrs& attrs,
                                             const std::optional<std::vector<DeclaredDim>>& declared, OpError& error) {
  return def.output_dims(DimsQuery{inputs, attrs, declared}, error);
}

}  // namespace dstc::ops
