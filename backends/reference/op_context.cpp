#include "backends/reference/op_context.h"

namespace dstc::reference {

int normalized(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

int64_t first_row(const DeviceContext& ctx, const ir::AttrReader& attrs, int64_t rows) {
  int64_t axis = attrs.integer("offset_axis");
  if (axis < 0 || axis >= ctx.module.mesh().axis_count()) return attrs.integer("offset");
  return ctx.module.mesh().coord(ctx.rank, static_cast<int>(axis)) * rows;
}

int32_t axis_coord(const DeviceContext& ctx, const ir::AttrReader& attrs) {
  const auto span = attrs.has("span") ? static_cast<uint32_t>(attrs.integer("span")) : 0u;
  if (span == 0) return ctx.module.mesh().coord(ctx.rank, static_cast<int>(attrs.integer("axis")));
  int32_t index = 0;
  for (int a = 0; a < ctx.module.mesh().axis_count(); ++a) {
    if (!((span >> a) & 1u)) continue;
    const ir::AxisRange range = ctx.module.axis_range(ctx.op.devices, a);
    index = index * static_cast<int32_t>(range.size()) + ctx.module.mesh().coord(ctx.rank, a) - range.begin;
  }
  return index;
}

namespace {

DevicePlacement placement_of(const DeviceContext& ctx, ir::ValueId v, std::span<const int64_t> shape) {
  const ir::Value& value = ctx.function.values[v];
  ir::Layout layout = value.layout != ir::kNoLayout ? ctx.module.layout(value.layout) : ir::Layout{};
  return place_on_device(ctx.module, value.devices, layout, shape, ctx.rank);
}

// A pair attribute ([h, w]) or its default.
void pair_attr(const ir::AttrReader& attrs, std::string_view name, int64_t (&out)[2]) {
  std::span<const int64_t> v = attrs.ints(name);
  if (v.size() == 2) {
    out[0] = v[0];
    out[1] = v[1];
  } else if (v.size() == 1) {
    out[0] = out[1] = v[0];
  }
}

}  // namespace

DevicePlacement result_placement(const DeviceContext& ctx, std::span<const int64_t> shape) {
  return placement_of(ctx, ctx.function.result(ctx.op), shape);
}

DevicePlacement operand_placement(const DeviceContext& ctx, size_t i, std::span<const int64_t> shape) {
  return placement_of(ctx, ctx.function.operands(ctx.op)[i], shape);
}

int64_t first_class(const DevicePlacement& where) { return where.offset.empty() ? 0 : where.offset.back(); }

int64_t first_query(const DeviceContext& ctx, std::span<const int64_t> q_shape, int64_t keys) {
  DevicePlacement where = result_placement(ctx, q_shape);
  return where.offset[2] + (keys - where.logical_shape[2]);
}

DevicePlacement dropout_placement(const DeviceContext& ctx, std::span<const int64_t> shape) {
  DevicePlacement where = result_placement(ctx, shape);
  if (ctx.op.micro_batch >= 0 && ctx.micro_batches > 1 && !where.offset.empty()) {
    where.offset[0] += ctx.op.micro_batch * where.logical_shape[0];
    where.logical_shape[0] *= ctx.micro_batches;
  }
  return where;
}

kernels::Conv2dParams conv_params(const ir::AttrReader& attrs) {
  kernels::Conv2dParams p;
  pair_attr(attrs, "stride", p.stride);
  pair_attr(attrs, "padding", p.padding);
  p.groups = attrs.integer("groups");
  return p;
}

kernels::PoolParams pool_params(const ir::AttrReader& attrs) {
  kernels::PoolParams p;
  pair_attr(attrs, "kernel", p.kernel);
  p.stride[0] = p.kernel[0];
  p.stride[1] = p.kernel[1];
  pair_attr(attrs, "stride", p.stride);
  pair_attr(attrs, "padding", p.padding);
  return p;
}

}  // namespace dstc::reference
