#include "ir/mesh.h"

#include <algorithm>

namespace dstc::ir {

Mesh::Mesh(std::string name, std::vector<MeshAxis> axes) : name_(std::move(name)), axes_(std::move(axes)) {
  strides_.resize(axes_.size());
  int32_t stride = 1;
  for (size_t i = axes_.size(); i-- > 0;) {
    strides_[i] = stride;
    stride *= axes_[i].size;
  }
  size_ = axes_.empty() ? 0 : stride;
}

int Mesh::axis_index(std::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int32_t Mesh::coord(Rank r, int axis) const {
  auto a = static_cast<size_t>(axis);
  return (r / strides_[a]) % axes_[a].size;
}

int32_t Mesh::physical(Rank r) const { return physical_.empty() ? r : physical_[static_cast<size_t>(r)]; }

DeviceSet DeviceSet::whole(const Mesh& mesh) {
  DeviceSet s;
  for (const MeshAxis& a : mesh.axes()) s.ranges.push_back({0, a.size});
  return s;
}

DeviceSet DeviceSet::single(const Mesh& mesh, Rank r) {
  DeviceSet s;
  for (int a = 0; a < mesh.axis_count(); ++a) {
    int32_t c = mesh.coord(r, a);
    s.ranges.push_back({c, c + 1});
  }
  return s;
}

DeviceSet DeviceSet::list(std::vector<Rank> ranks) {
  DeviceSet s;
  s.ranks = std::move(ranks);
  return s;
}

}  // namespace dstc::ir
