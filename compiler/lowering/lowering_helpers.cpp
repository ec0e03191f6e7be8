#include "compiler/lowering/lowering_helpers.h"

#include <algorithm>

#include "compiler/sbp/signature.h"

namespace dstc::compiler {

double loss_normalizer(const LogicalGraph& graph, const LogicalOp& op) {
  // The loss is the mean over every label (target element) of the global
  // batch, so micro-batch and data-parallel parts sum to it.
  return static_cast<double>(graph.tensors[op.inputs[1].tensor].numel());
}

double mean_count(const LogicalGraph& graph, const LogicalOp& op) {
  double n = 1;
  for (int32_t a : op.axes) n *= static_cast<double>(graph.tensors[op.inputs[0].tensor].dims[a].size);
  return n;
}

void append_expert_groups(const LogicalOp& top_k, std::vector<ir::AttrValue>& attrs) {
  if (top_k.attrs.integer("groups") <= 0) return;
  attrs.push_back(ir::AttrValue::integer("groups", top_k.attrs.integer("groups")));
  attrs.push_back(ir::AttrValue::integer("group_k", top_k.attrs.integer("group_k")));
}

std::vector<int64_t> to_ints(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

ir::Layout product_layout(const ir::Layout& a, const ir::Layout& b) {
  ir::Layout out = a;
  for (size_t i = 0; i < a.size(); ++i) {
    if (b[i].kind == ir::Sbp::PartialSum || b[i].kind == ir::Sbp::Split) out[i] = b[i];
    if (a[i].kind == ir::Sbp::PartialSum) out[i] = a[i];
  }
  return out;
}

ir::Layout reduced_layout(ir::Layout layout, const std::vector<int64_t>& dims) {
  for (ir::Sbp& axis : layout) {
    if (axis.kind != ir::Sbp::Split) continue;
    const int64_t d = axis.dim;
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
      axis = kPartial;
      continue;
    }
    axis = split(static_cast<int>(d - std::count_if(dims.begin(), dims.end(), [&](int64_t r) { return r < d; })));
  }
  return layout;
}

namespace {
bool splits_batch(const ir::Sbp& x) { return x.kind == ir::Sbp::Split && x.dim == 0; }
}  // namespace

ir::Layout stats_layout(const ir::Layout& x, int rank, bool local) {
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d)
    if (d != 1) dims.push_back(d);
  ir::Layout out = reduced_layout(x, dims);
  for (size_t i = 0; i < x.size(); ++i)
    if (local && splits_batch(x[i])) out[i] = {ir::Sbp::Split, 0};
  return out;
}

ir::Layout synced_stats_layout(const ir::Layout& x, const ir::Layout& stats, bool local) {
  ir::Layout out = stats;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].kind == ir::Sbp::Split && x[i].dim != 1 && !(local && splits_batch(x[i]))) out[i] = kBroadcast;
  return out;
}

int64_t batch_shards(const Lowering& l, const ir::Layout& x) {
  int64_t shards = 1;
  for (size_t i = 0; i < x.size(); ++i)
    if (splits_batch(x[i])) shards *= l.spec.mesh.axes()[i].size;
  return shards;
}

std::vector<int64_t> pair(int64_t v) { return {v, v}; }

int64_t batchnorm_count(const Lowering& l, int32_t op) {
  int32_t x = l.graph.ops[op].inputs[0].tensor;
  ir::TensorType whole = l.local_type(x, ir::Layout(l.spec.mesh.axis_count(), kBroadcast), ir::DType::F32);
  return whole.numel() / whole.dim(1);
}

std::vector<int32_t> dims_input_lacks(const LogicalOp& lop, size_t i) {
  const std::vector<std::string>& out = lop.output_dims;
  const std::vector<std::string>& in = lop.inputs[i].dims;
  std::vector<int32_t> missing;
  for (size_t d = 0; d < out.size(); ++d)
    if (std::find(in.begin(), in.end(), out[d]) == in.end()) missing.push_back(static_cast<int32_t>(d));
  return missing;
}

}  // namespace dstc::compiler
