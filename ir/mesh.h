// The module's device mesh and device sets written as mesh slices.
//
// A mesh has named axes with sizes, e.g. world[pp=2, dp=4, tp=8]. A device's
// RANK is its row-major linear index over the mesh coordinates; the mesh maps
// ranks to physical device ids (identity unless given). Ops and values live
// on device sets: a slice (one index range per axis) or, for irregular cases,
// an explicit list of ranks. A compute op on a set runs on every member (SPMD).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/static_vector.hpp>

namespace dstc::ir {

using Rank = int32_t;

inline constexpr int kMaxMeshAxes = 16;

struct MeshAxis {
  std::string name;
  int32_t size = 1;
};

class Mesh {
 public:
  Mesh() = default;
  Mesh(std::string name, std::vector<MeshAxis> axes);

  const std::string& name() const { return name_; }
  const std::vector<MeshAxis>& axes() const { return axes_; }
  int axis_count() const { return static_cast<int>(axes_.size()); }
  // -1 when no axis has this name.
  int axis_index(std::string_view name) const;
  int32_t size() const { return size_; }
  // Row-major stride of an axis in rank space.
  int32_t stride(int axis) const { return strides_[static_cast<size_t>(axis)]; }
  int32_t coord(Rank r, int axis) const;
  bool empty() const { return axes_.empty(); }

  // Physical device id of a rank (identity unless set_physical was called).
  int32_t physical(Rank r) const;
  const std::vector<int32_t>& physical_ids() const { return physical_; }
  // One id per rank; an empty vector restores the identity map.
  void set_physical(std::vector<int32_t> ids) { physical_ = std::move(ids); }
  bool has_physical_map() const { return !physical_.empty(); }

  friend bool operator==(const Mesh&, const Mesh&) = default;

 private:
  std::string name_;
  std::vector<MeshAxis> axes_;
  std::vector<int32_t> strides_;
  int32_t size_ = 0;
  std::vector<int32_t> physical_;
};

// Half-open index range on one mesh axis.
struct AxisRange {
  int32_t begin = 0;
  int32_t end = 0;
  int32_t size() const { return end - begin; }
  friend bool operator==(const AxisRange&, const AxisRange&) = default;
};

// A set of ranks: a slice of the mesh (ranges has one entry per axis) or an
// explicit, ordered list of distinct ranks (ranks non-empty). Members are
// ordered row-major for a slice and as listed otherwise; that order pairs
// send with recv and orders collective groups.
struct DeviceSet {
  std::vector<AxisRange> ranges;
  std::vector<Rank> ranks;

  static DeviceSet whole(const Mesh& mesh);
  static DeviceSet single(const Mesh& mesh, Rank r);
  static DeviceSet list(std::vector<Rank> ranks);
  bool is_slice() const { return ranks.empty(); }
  friend bool operator==(const DeviceSet&, const DeviceSet&) = default;
};

// nd-SBP: how a device's local value relates to the logical tensor along one
// mesh axis. B: every device holds all of it; S(d): split along dim d; P:
// partial, the logical value is the sum (or max) over the axis. S(flat):
// the block the other axes leave is flattened, zero-padded to a multiple of
// the axis size and split in equal chunks, as a distributed optimizer's
// flat buffers are (any axis size divides it); at most one axis per layout.
struct Sbp {
  enum Kind : uint8_t { Broadcast, Split, PartialSum, PartialMax, Flat };
  Kind kind = Broadcast;
  uint8_t dim = 0;  // for Split
  friend bool operator==(const Sbp&, const Sbp&) = default;
};

// A layout: one Sbp per mesh axis, in mesh axis order. Inline storage: the
// compiler builds layouts for every op it lowers, and a heap vector each
// time was a large share of lowering.
using Layout = boost::container::static_vector<Sbp, kMaxMeshAxes>;

// Elements of each of `parts` S(flat) chunks of `numel` elements.
inline int64_t flat_chunk(int64_t numel, int64_t parts) { return parts < 1 ? numel : (numel + parts - 1) / parts; }

// The first mesh axis a layout flattens over, or -1.
inline int flat_axis(const Layout& layout) {
  for (size_t a = 0; a < layout.size(); ++a)
    if (layout[a].kind == Sbp::Flat) return static_cast<int>(a);
  return -1;
}

// The mesh axes a layout flattens over, as bits. Over several axes the
// block is cut once into as many chunks as their devices, chunk k on the
// device whose coordinates on them, earlier axes more significant, read k
// (the order of a collective's group over those axes): Megatron-Core's
// distributed optimizer over data and context parallelism together.
inline uint32_t flat_axes(const Layout& layout) {
  uint32_t bits = 0;
  for (size_t a = 0; a < layout.size(); ++a)
    if (layout[a].kind == Sbp::Flat) bits |= 1u << a;
  return bits;
}

}  // namespace dstc::ir
