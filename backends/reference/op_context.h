// Where the data of one op on one device sits in the op's logical tensors:
// what a kernel needs beyond its local operands (a shard's first row, first
// class, first query position, the dropout mask's place in the step). Every
// device reads these, so a shard computes what the reference computes.
#pragma once

#include <cstdint>
#include <span>

#include "backends/reference/compute_ops.h"
#include "backends/reference/kernels.h"
#include "backends/reference/logical_layout.h"
#include "ir/module.h"
#include "ir/registry.h"

namespace dstc::reference {

// A dim attribute (negative counts from the end) as an index into `rank` dims.
int normalized(int64_t dim, int rank);

// First table row a device holds: `offset`, or its coordinate on mesh axis
// `offset_axis` times its rows.
int64_t first_row(const DeviceContext& ctx, const ir::AttrReader& attrs, int64_t rows);

// The device's coordinate on the mesh axis the op's `axis` attribute names;
// for a flat shard over several axes (`span`), its chunk's index.
int32_t axis_coord(const DeviceContext& ctx, const ir::AttrReader& attrs);

// Where the op's first result, or its operand i, of `shape` on this device
// sits in its logical tensor.
DevicePlacement result_placement(const DeviceContext& ctx, std::span<const int64_t> shape);
DevicePlacement operand_placement(const DeviceContext& ctx, size_t i, std::span<const int64_t> shape);

// The first class of a shard of logits: its offset along the last dim.
int64_t first_class(const DevicePlacement& where);

// The key position of q's first row: q [b, h, s, d] is the last rows of the
// logical sequence (whose length is the keys' `keys`), and a shard of q (the
// sequence split over a mesh axis, k and v gathered) starts at its offset.
int64_t first_query(const DeviceContext& ctx, std::span<const int64_t> q_shape, int64_t keys);

// Where a dropout result of `shape` sits in the step's whole batch: the
// mask is drawn over it, micro-batch k holding rows [k·b, (k+1)·b) of dim 0.
DevicePlacement dropout_placement(const DeviceContext& ctx, std::span<const int64_t> shape);

// A convolution's or a pooling's attributes (stride, padding, groups;
// kernel, its stride defaulting to the kernel).
kernels::Conv2dParams conv_params(const ir::AttrReader& attrs);
kernels::PoolParams pool_params(const ir::AttrReader& attrs);

}  // namespace dstc::reference
