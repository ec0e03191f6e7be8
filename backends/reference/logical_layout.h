// How a device's local value relates to the logical tensor it is part of,
// from the value's nd-SBP layout (docs/ir.md, "Layouts"): B axes replicate,
// S(d) axes place the local block along d, P axes sum. When several mesh
// axes split one dim, the earlier mesh axis chunks outermost.
//
// Only mesh axes the value's device set spans count: a value on a pipeline
// stage (one coordinate on pp) is not split or summed over pp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/reference/host_tensor.h"
#include "ir/module.h"

namespace dstc::reference {

struct DevicePlacement {
  std::vector<int64_t> logical_shape;
  std::vector<int64_t> offset;  // first logical index of the local block, per dim
  // S(flat): the local value is chunk `flat_index` of the block (of
  // `block_shape`, at `offset`) flattened; flat_index < 0 otherwise.
  std::vector<int64_t> block_shape;
  int64_t flat_index = -1;
  uint32_t sum_axes = 0;         // mesh axes (bit per axis) the logical value sums over
  uint32_t max_axes = 0;         // ... takes the maximum over
  bool first_on_partial = true;  // coordinate 0 on every P axis
  bool first_replica = true;     // coordinate 0 on every B axis
};

// The extent and first coordinate of a device set on one mesh axis.
struct AxisSpan {
  int32_t begin = 0;
  int32_t extent = 1;
};
AxisSpan axis_span(const ir::Module& module, ir::DeviceSetId set, int axis);

// Where rank's local block (of `local_shape`) sits in the logical tensor.
// An S(flat) layout needs the logical tensor's shape: its local value, a
// flat chunk, does not say.
DevicePlacement place_on_device(const ir::Module& module, ir::DeviceSetId set, const ir::Layout& layout,
                                std::span<const int64_t> local_shape, ir::Rank rank,
                                std::span<const int64_t> flat_logical_shape = {});

// The local value a device holds of `logical`: its block, or zeros when the
// layout is partial and the device is not coordinate 0 of a P axis.
HostTensor local_part(const HostTensor& logical, const DevicePlacement& where, std::span<const int64_t> local_shape);

// The logical tensor from every member's local value (members in the set's
// order). Replicas along B axes should agree; the largest difference between
// a replica and the first one is reported.
struct GatheredTensor {
  HostTensor logical;
  double replica_difference = 0;
  ir::Rank differing_rank = -1;  // the replica that differs most
};
GatheredTensor gather_logical(const ir::Module& module, ir::DeviceSetId set, const ir::Layout& layout,
                              std::span<const HostTensor* const> locals,
                              std::span<const int64_t> flat_logical_shape = {});

// "S(0)", "B", "P(sum)" of one axis; "[dp=S(0), tp=B]" of a layout.
std::string layout_text(const ir::Mesh& mesh, const ir::Layout& layout);

}  // namespace dstc::reference
