#include "backends/reference/logical_layout.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace dstc::reference {

namespace {

// Visits the elements of a flat chunk that are not padding.
template <typename F>
void for_each_chunk_element(std::span<const int64_t> local_shape, const DevicePlacement& where, F f) {
  const std::vector<int64_t> logical_strides = strides_of(where.logical_shape);
  const int64_t chunk = numel_of(local_shape), block = numel_of(where.block_shape);
  for (int64_t i = 0; i < chunk; ++i) {
    int64_t b = where.flat_index * chunk + i;
    if (b >= block) return;
    int64_t logical = 0;
    for (size_t d = where.block_shape.size(); d-- > 0;) {
      logical += (where.offset[d] + b % where.block_shape[d]) * logical_strides[d];
      b /= where.block_shape[d];
    }
    f(static_cast<size_t>(i), static_cast<size_t>(logical));
  }
}

// Visits the local block: f(local flat index, logical flat index).
template <typename F>
void for_each_block_element(std::span<const int64_t> local_shape, const DevicePlacement& where, F f) {
  if (where.flat_index >= 0) {
    for_each_chunk_element(local_shape, where, f);
    return;
  }
  const size_t rank = local_shape.size();
  std::vector<int64_t> logical_strides = strides_of(where.logical_shape), idx(rank, 0);
  int64_t logical = 0;
  for (size_t d = 0; d < rank; ++d) logical += where.offset[d] * logical_strides[d];
  const int64_t n = numel_of(local_shape);
  for (int64_t i = 0; i < n; ++i) {
    f(static_cast<size_t>(i), static_cast<size_t>(logical));
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < local_shape[d]) {
        logical += logical_strides[d];
        break;
      }
      idx[d] = 0;
      logical -= logical_strides[d] * (local_shape[d] - 1);
    }
  }
}

}  // namespace

AxisSpan axis_span(const ir::Module& module, ir::DeviceSetId set, int axis) {
  ir::AxisRange r = module.axis_range(set, axis);
  return {r.begin, r.size()};
}

DevicePlacement place_on_device(const ir::Module& module, ir::DeviceSetId set, const ir::Layout& layout,
                                std::span<const int64_t> local_shape, ir::Rank rank,
                                std::span<const int64_t> flat_logical_shape) {
  const int flat = ir::flat_axis(layout);
  std::vector<int64_t> block(local_shape.begin(), local_shape.end());
  if (flat >= 0) block.assign(flat_logical_shape.begin(), flat_logical_shape.end());
  DevicePlacement p;
  p.logical_shape = block;
  p.offset.assign(block.size(), 0);
  std::vector<int64_t> chunk(block.size(), 0), chunks(block.size(), 1);
  for (int a = 0; a < static_cast<int>(layout.size()) && a < module.mesh().axis_count(); ++a) {
    AxisSpan span = axis_span(module, set, a);
    if (span.extent <= 1) continue;
    const int32_t coord = module.mesh().coord(rank, a) - span.begin;
    const ir::Sbp s = layout[static_cast<size_t>(a)];
    switch (s.kind) {
      case ir::Sbp::Broadcast: p.first_replica &= coord == 0; break;
      case ir::Sbp::Split:
        if (s.dim < chunk.size()) {
          // Earlier axes chunk outermost: each later one adds a less
          // significant digit (OneFlow's nd-SBP: context parallelism's
          // sequence chunk holds sequence parallelism's).
          chunk[s.dim] = chunk[s.dim] * span.extent + coord;
          chunks[s.dim] *= span.extent;
        }
        break;
      case ir::Sbp::PartialSum:
      case ir::Sbp::PartialMax:
        (s.kind == ir::Sbp::PartialSum ? p.sum_axes : p.max_axes) |= 1u << a;
        p.first_on_partial &= coord == 0;
        break;
      case ir::Sbp::Flat:  // over several axes, earlier ones more significant
        p.flat_index = std::max<int64_t>(p.flat_index, 0) * span.extent + coord;
        break;
    }
  }
  if (flat >= 0) {
    // The logical shape is given; the block is what the splits leave.
    for (size_t d = 0; d < block.size(); ++d) {
      block[d] /= chunks[d];
      p.offset[d] = block[d] * chunk[d];
    }
    p.block_shape = std::move(block);
    if (p.flat_index < 0) p.flat_index = 0;  // the set spans one coordinate: one chunk
    return p;
  }
  for (size_t d = 0; d < local_shape.size(); ++d) {
    p.logical_shape[d] = local_shape[d] * chunks[d];
    p.offset[d] = local_shape[d] * chunk[d];
  }
  return p;
}

HostTensor local_part(const HostTensor& logical, const DevicePlacement& where, std::span<const int64_t> local_shape) {
  HostTensor local(logical.dtype, local_shape);
  if (!where.first_on_partial && where.sum_axes != 0) return local;
  for_each_block_element(local_shape, where, [&](size_t i, size_t l) { local.data[i] = logical.data[l]; });
  return local;
}

GatheredTensor gather_logical(const ir::Module& module, ir::DeviceSetId set, const ir::Layout& layout,
                              std::span<const HostTensor* const> locals, std::span<const int64_t> flat_logical_shape) {
  std::span<const ir::Rank> members = module.members(set);
  GatheredTensor out;
  std::vector<DevicePlacement> places;
  for (size_t m = 0; m < members.size(); ++m)
    places.push_back(place_on_device(module, set, layout, locals[m]->shape, members[m], flat_logical_shape));
  const DevicePlacement& first = places.front();
  out.logical = HostTensor(locals.front()->dtype, first.logical_shape);
  if (first.max_axes != 0)
    std::fill(out.logical.data.begin(), out.logical.data.end(), -std::numeric_limits<double>::infinity());
  // The first replica of each block contributes (summed or maximized over P axes).
  for (size_t m = 0; m < members.size(); ++m) {
    if (!places[m].first_replica) continue;
    const HostTensor& local = *locals[m];
    for_each_block_element(local.shape, places[m], [&](size_t i, size_t l) {
      double& dst = out.logical.data[l];
      dst = first.max_axes != 0 ? std::max(dst, local.data[i]) : dst + local.data[i];
    });
  }
  // Every other replica should hold what the first one of its position holds.
  for (size_t m = 0; m < members.size(); ++m) {
    if (places[m].first_replica) continue;
    for (size_t k = 0; k < members.size(); ++k) {
      if (!places[k].first_replica || places[k].offset != places[m].offset ||
          places[k].flat_index != places[m].flat_index)
        continue;
      if (places[k].first_on_partial != places[m].first_on_partial) continue;
      bool same_partial_coords = true;
      for (int a = 0; a < module.mesh().axis_count(); ++a)
        if ((first.sum_axes | first.max_axes) & (1u << a))
          same_partial_coords &= module.mesh().coord(members[k], a) == module.mesh().coord(members[m], a);
      if (!same_partial_coords) continue;
      for (size_t i = 0; i < locals[m]->data.size(); ++i) {
        double diff = std::abs(locals[m]->data[i] - locals[k]->data[i]);
        if (diff > out.replica_difference || std::isnan(diff)) {
          out.replica_difference = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff;
          out.differing_rank = members[m];
        }
      }
      break;
    }
  }
  return out;
}

std::string layout_text(const ir::Mesh& mesh, const ir::Layout& layout) {
  std::string text = "[";
  for (size_t a = 0; a < layout.size() && a < mesh.axes().size(); ++a) {
    const ir::Sbp s = layout[a];
    std::string sbp = s.kind == ir::Sbp::Broadcast    ? "B"
                      : s.kind == ir::Sbp::Split      ? fmt::format("S({})", s.dim)
                      : s.kind == ir::Sbp::PartialSum ? "P(sum)"
                      : s.kind == ir::Sbp::Flat       ? "S(flat)"
                                                      : "P(max)";
    text += fmt::format("{}{}={}", a ? ", " : "", mesh.axes()[a].name, sbp);
  }
  return text + "]";
}

}  // namespace dstc::reference
