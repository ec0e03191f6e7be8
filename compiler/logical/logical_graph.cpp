#include "compiler/logical/logical_graph.h"

#include <algorithm>

namespace dstc::compiler {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}

int32_t LogicalGraph::add_node(int32_t parent, std::string name, std::string kind, SourceRange where) {
  TreeNode node;
  node.kind = std::move(kind);
  node.parent = parent;
  node.where = where;
  node.repeated = name.starts_with('[');
  if (parent >= 0) {
    const std::string& base = nodes[parent].path;
    node.path = base.empty() ? name : base + (name.starts_with('[') ? "" : ".") + name;
  }
  nodes.push_back(std::move(node));
  int32_t id = static_cast<int32_t>(nodes.size() - 1);
  if (parent >= 0) nodes[parent].children.push_back(id);
  return id;
}

int32_t LogicalGraph::add_tensor(Tensor t) {
  tensors.push_back(std::move(t));
  int32_t id = static_cast<int32_t>(tensors.size() - 1);
  const Tensor& added = tensors.back();
  if (added.kind == TensorKind::Param && added.node >= 0) nodes[added.node].params.push_back(id);
  if (added.kind == TensorKind::Input) inputs.push_back(id);
  return id;
}

int32_t LogicalGraph::add_op(LogicalOp op) {
  int32_t id = static_cast<int32_t>(ops.size());
  tensors[op.output].producer = id;
  if (op.node >= 0) nodes[op.node].ops.push_back(id);
  ops.push_back(std::move(op));
  return id;
}

std::vector<std::string> LogicalGraph::op_dims(const LogicalOp& op) const {
  std::vector<std::string> dims;
  auto add = [&](const std::string& d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
  };
  for (const Operand& in : op.inputs)
    for (const std::string& d : in.dims) add(d);
  for (const std::string& d : op.output_dims) add(d);
  return dims;
}

bool LogicalGraph::op_has_dim(const LogicalOp& op, std::string_view dim) const {
  for (const Operand& in : op.inputs) {
    if (std::find(in.dims.begin(), in.dims.end(), dim) != in.dims.end()) return true;
  }
  return std::find(op.output_dims.begin(), op.output_dims.end(), dim) != op.output_dims.end();
}

int64_t LogicalGraph::op_dim_size(const LogicalOp& op, const std::string& dim) const {
  for (const Operand& in : op.inputs) {
    for (size_t a = 0; a < in.dims.size(); ++a)
      if (in.dims[a] == dim) return tensors[in.tensor].dims[a].size;
  }
  for (size_t a = 0; a < op.output_dims.size(); ++a)
    if (op.output_dims[a] == dim) return tensors[op.output].dims[a].size;
  return 0;
}

std::vector<int32_t> LogicalGraph::consumers(int32_t tensor) const {
  std::vector<int32_t> result;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const Operand& in : ops[i].inputs) {
      if (in.tensor == tensor) {
        result.push_back(static_cast<int32_t>(i));
        break;
      }
    }
  }
  return result;
}

void LogicalGraph::infer_slots_axes() {
  for (size_t i = 0; i < ops.size(); ++i) {
    const LogicalOp& op = ops[i];
    Tensor& out = tensors[op.output];
    out.slots_axis = out.experts_axis = out.router = -1;
    if (op.type == ops::OpKind::Dispatch) {
      out.slots_axis = static_cast<int32_t>(op.output_dims.size()) - 2;
      out.experts_axis = out.slots_axis - 1;
      out.router = static_cast<int32_t>(i);
      continue;
    }
    if (op.type == ops::OpKind::Combine) continue;
    auto output_axis = [&](const std::string& name) {
      auto it = std::find(op.output_dims.begin(), op.output_dims.end(), name);
      return it == op.output_dims.end() ? -1 : static_cast<int32_t>(it - op.output_dims.begin());
    };
    for (const Operand& in : op.inputs) {
      const Tensor& t = tensors[in.tensor];
      if (t.slots_axis < 0) continue;
      int32_t slots = output_axis(in.dims[t.slots_axis]);
      if (slots < 0) continue;
      out.slots_axis = slots;
      out.experts_axis = t.experts_axis >= 0 ? output_axis(in.dims[t.experts_axis]) : -1;
      out.router = t.router;
    }
  }
}

void LogicalGraph::infer_batch_axes() {
  for (const LogicalOp& op : ops) {
    std::string batch_name;
    for (const Operand& in : op.inputs) {
      int32_t axis = tensors[in.tensor].batch_axis;
      if (axis >= 0 && axis < static_cast<int32_t>(in.dims.size())) batch_name = in.dims[axis];
    }
    Tensor& out = tensors[op.output];
    out.batch_axis = -1;
    for (size_t a = 0; a < op.output_dims.size(); ++a)
      if (!batch_name.empty() && op.output_dims[a] == batch_name) out.batch_axis = static_cast<int32_t>(a);
  }
}

}  // namespace dstc::compiler
