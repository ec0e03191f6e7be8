// Small models and strategies built directly as logical graphs and strategy
// specs, for the compiler's unit tests (the front end builds the same
// structures from .dstrat files).
#pragma once

#include <string>
#include <vector>

#include "compiler/logical/logical_graph.h"
#include "compiler/strategy/strategy_spec.h"

namespace dstc::compiler::testing {

struct NamedOperand {
  int32_t tensor;
  std::vector<std::string> dims;
};

class ModelBuilder {
 public:
  LogicalGraph graph;
  ModelBuilder() { graph.add_node(-1, "", "Model"); }

  int32_t node(int32_t parent, const std::string& name, const std::string& kind = "Layer") {
    return graph.add_node(parent, name, kind);
  }
  int32_t input(const std::string& name, std::vector<Dim> dims, ir::DType dtype = ir::DType::F32,
                TensorKind kind = TensorKind::Input) {
    Tensor t{name, std::move(dims), dtype, kind, -1, 0, 0, {}};
    return graph.add_tensor(t);
  }
  int32_t param(int32_t node, const std::string& name, std::vector<Dim> dims) {
    Tensor t{graph.nodes[node].path + "." + name, std::move(dims), ir::DType::F32, TensorKind::Param, -1, node, -1, {}};
    return graph.add_tensor(t);
  }
  // An op whose output dims are named `out_dims` with sizes looked up from the inputs.
  int32_t op(int32_t node, ops::OpKind type, std::vector<NamedOperand> inputs, std::vector<std::string> out_dims,
             const std::string& out_name = "y") {
    LogicalOp op;
    op.type = type;
    op.attrs = ops::OpAttrs(ops::op_def(type));
    op.node = node;
    for (auto& in : inputs) op.inputs.push_back({in.tensor, in.dims});
    op.output_dims = out_dims;
    Tensor out{graph.nodes[node].path + "." + out_name, {}, ir::DType::F32, TensorKind::Activation, -1, node, -1, {}};
    for (const std::string& d : out_dims) out.dims.push_back({d, graph.op_dim_size(op, d)});
    if (type == ops::OpKind::CrossEntropy) out.dims.clear();
    op.output = graph.add_tensor(out);
    graph.add_op(op);
    return op.output;
  }
  int32_t op_with(int32_t node, LogicalOp proto, std::vector<NamedOperand> inputs, std::vector<std::string> out_dims) {
    int32_t out = op(node, proto.type, std::move(inputs), std::move(out_dims));
    graph.ops.back().axis = proto.axis;
    graph.ops.back().attrs = proto.attrs;
    return out;
  }
};

// An MLP: `layers` Linear + ReLU layers of width `hidden`, a classifier over
// `classes`, cross-entropy loss. Tree: root -> layers -> [i] -> fc, act; head; loss.
struct Mlp {
  LogicalGraph graph;
  int32_t layers_node = -1;
  std::vector<int32_t> fc_nodes;
};

inline Mlp make_mlp(int layers, int64_t batch, int64_t hidden, int64_t classes) {
  ModelBuilder m;
  Mlp mlp;
  int32_t x = m.input("x", {{"b", batch}, {"h", hidden}});
  int32_t labels = m.input("labels", {{"b", batch}}, ir::DType::I32, TensorKind::Input);
  m.graph.tensors[x].batch_axis = 0;
  m.graph.tensors[labels].batch_axis = 0;
  mlp.layers_node = m.node(0, "layers", "Sequential");
  for (int i = 0; i < layers; ++i) {
    int32_t layer = m.node(mlp.layers_node, "[" + std::to_string(i) + "]", "Block");
    int32_t fc = m.node(layer, "fc", "Linear");
    mlp.fc_nodes.push_back(fc);
    int32_t w = m.param(fc, "weight", {{"o", hidden}, {"h", hidden}});
    int32_t y = m.op(fc, ops::OpKind::Einsum, {{x, {"b", "h"}}, {w, {"o", "h"}}}, {"b", "o"});
    int32_t act = m.node(layer, "act", "ReLU");
    x = m.op(act, ops::OpKind::Relu, {{y, {"b", "o"}}}, {"b", "o"});
  }
  int32_t head = m.node(0, "head", "Linear");
  int32_t w = m.param(head, "weight", {{"c", classes}, {"h", hidden}});
  int32_t logits = m.op(head, ops::OpKind::Einsum, {{x, {"b", "h"}}, {w, {"c", "h"}}}, {"b", "c"});
  int32_t loss_node = m.node(0, "loss", "CrossEntropy");
  m.graph.loss = m.op(loss_node, ops::OpKind::CrossEntropy, {{logits, {"b", "c"}}, {labels, {"b"}}}, {});
  m.graph.infer_batch_axes();
  mlp.graph = std::move(m.graph);
  return mlp;
}

// A GPT-style decoder: token embedding, `layers` pre-norm blocks (attention
// with `heads` heads as q/k/v/proj einsums over [b, n, s, d], MLP with
// hidden 4h), final norm, vocabulary head, cross-entropy.
struct Gpt {
  LogicalGraph graph;
  int32_t blocks_node = -1;
  struct Block {
    int32_t ln1, q, k, v, attn, proj, res1, ln2, fc1, act, fc2, res2;
  };
  std::vector<Block> blocks;
  int32_t embed = -1;
};

inline Gpt make_gpt(int layers, int64_t batch, int64_t seq, int64_t hidden, int64_t heads, int64_t vocab) {
  ModelBuilder m;
  Gpt gpt;
  int64_t head_dim = hidden / heads;
  int32_t tokens = m.input("tokens", {{"b", batch}, {"s", seq}}, ir::DType::I32);
  int32_t labels = m.input("labels", {{"b", batch}, {"s", seq}}, ir::DType::I32, TensorKind::Input);
  m.graph.tensors[tokens].batch_axis = 0;
  m.graph.tensors[labels].batch_axis = 0;
  gpt.embed = m.node(0, "embed", "Embedding");
  int32_t table = m.param(gpt.embed, "weight", {{"v", vocab}, {"h", hidden}});
  int32_t x = m.op(gpt.embed, ops::OpKind::Embedding, {{table, {"v", "h"}}, {tokens, {"b", "s"}}}, {"b", "s", "h"});
  gpt.blocks_node = m.node(0, "blocks", "Repeat");
  auto layernorm = [&](int32_t node, int32_t in) {
    int32_t g = m.param(node, "gamma", {{"h", hidden}});
    int32_t beta = m.param(node, "beta", {{"h", hidden}});
    return m.op(node, ops::OpKind::LayerNorm, {{in, {"b", "s", "h"}}, {g, {"h"}}, {beta, {"h"}}}, {"b", "s", "h"});
  };
  for (int i = 0; i < layers; ++i) {
    Gpt::Block b{};
    int32_t block = m.node(gpt.blocks_node, "[" + std::to_string(i) + "]", "TransformerBlock");
    b.ln1 = m.node(block, "ln1", "LayerNorm");
    int32_t a = layernorm(b.ln1, x);
    int32_t attn = m.node(block, "attn", "Attention");
    int32_t qkv[3];
    const char* names[3] = {"q", "k", "v"};
    int32_t* nodes[3] = {&b.q, &b.k, &b.v};
    for (int j = 0; j < 3; ++j) {
      *nodes[j] = m.node(attn, names[j], "Linear");
      int32_t w = m.param(*nodes[j], "weight", {{"n", heads}, {"d", head_dim}, {"h", hidden}});
      qkv[j] = m.op(*nodes[j], ops::OpKind::Einsum, {{a, {"b", "s", "h"}}, {w, {"n", "d", "h"}}}, {"b", "n", "s", "d"});
    }
    b.attn = m.node(attn, "core", "ScaledDotProduct");
    LogicalOp causal;
    causal.type = ops::OpKind::Attention;
    causal.attrs = ops::OpAttrs(ops::op_def(causal.type));
    causal.attrs.set_boolean("causal", true);
    int32_t o =
        m.op_with(b.attn, causal,
                  {{qkv[0], {"b", "n", "s", "d"}}, {qkv[1], {"b", "n", "s", "d"}}, {qkv[2], {"b", "n", "s", "d"}}},
                  {"b", "n", "s", "d"});
    b.proj = m.node(attn, "proj", "Linear");
    int32_t wo = m.param(b.proj, "weight", {{"h", hidden}, {"n", heads}, {"d", head_dim}});
    int32_t y = m.op(b.proj, ops::OpKind::Einsum, {{o, {"b", "n", "s", "d"}}, {wo, {"h", "n", "d"}}}, {"b", "s", "h"});
    b.res1 = m.node(block, "res1", "Add");
    x = m.op(b.res1, ops::OpKind::Add, {{x, {"b", "s", "h"}}, {y, {"b", "s", "h"}}}, {"b", "s", "h"});
    b.ln2 = m.node(block, "ln2", "LayerNorm");
    a = layernorm(b.ln2, x);
    int32_t mlp = m.node(block, "mlp", "MLP");
    b.fc1 = m.node(mlp, "fc1", "Linear");
    int32_t w1 = m.param(b.fc1, "weight", {{"f", 4 * hidden}, {"h", hidden}});
    int32_t bias1 = m.param(b.fc1, "bias", {{"f", 4 * hidden}});
    int32_t f = m.op(b.fc1, ops::OpKind::Einsum, {{a, {"b", "s", "h"}}, {w1, {"f", "h"}}}, {"b", "s", "f"});
    f = m.op(b.fc1, ops::OpKind::Add, {{f, {"b", "s", "f"}}, {bias1, {"f"}}}, {"b", "s", "f"}, "y_bias");
    b.act = m.node(mlp, "act", "GELU");
    f = m.op(b.act, ops::OpKind::Gelu, {{f, {"b", "s", "f"}}}, {"b", "s", "f"});
    b.fc2 = m.node(mlp, "fc2", "Linear");
    int32_t w2 = m.param(b.fc2, "weight", {{"h", hidden}, {"f", 4 * hidden}});
    y = m.op(b.fc2, ops::OpKind::Einsum, {{f, {"b", "s", "f"}}, {w2, {"h", "f"}}}, {"b", "s", "h"});
    b.res2 = m.node(block, "res2", "Add");
    x = m.op(b.res2, ops::OpKind::Add, {{x, {"b", "s", "h"}}, {y, {"b", "s", "h"}}}, {"b", "s", "h"});
    gpt.blocks.push_back(b);
  }
  int32_t lnf = m.node(0, "ln_f", "LayerNorm");
  x = layernorm(lnf, x);
  int32_t head = m.node(0, "head", "Linear");
  int32_t wh = m.param(head, "weight", {{"v", vocab}, {"h", hidden}});
  int32_t logits = m.op(head, ops::OpKind::Einsum, {{x, {"b", "s", "h"}}, {wh, {"v", "h"}}}, {"b", "s", "v"});
  int32_t loss = m.node(0, "loss", "CrossEntropy");
  m.graph.loss = m.op(loss, ops::OpKind::CrossEntropy, {{logits, {"b", "s", "v"}}, {labels, {"b", "s"}}}, {});
  m.graph.infer_batch_axes();
  gpt.graph = std::move(m.graph);
  return gpt;
}

inline AxisCompute S(const std::string& dim) { return {ir::Sbp::Split, dim}; }

// A strategy over mesh axes (name, size) with `[first axis: S(b)]` as default.
inline StrategySpec make_spec(const LogicalGraph& g, std::vector<ir::MeshAxis> axes, int64_t batch,
                              int32_t micro_batches = 1) {
  StrategySpec spec;
  spec.mesh = ir::Mesh("world", axes);
  spec.resize_for(g.nodes.size(), g.tensors.size());
  spec.train.global_batch = batch;
  ScheduleConfig root;
  root.micro_batches = micro_batches;
  spec.schedule[0] = root;
  return spec;
}

inline void set_compute(StrategySpec& spec, int32_t node, int axis, AxisCompute c) {
  if (!spec.compute[node])
    spec.compute[node] = ComputeConfig{std::vector<std::optional<AxisCompute>>(spec.mesh.axis_count()), {}};
  spec.compute[node]->axes[axis] = c;
}

inline void set_default(StrategySpec& spec, int axis, AxisCompute c) {
  if (!spec.default_compute)
    spec.default_compute = ComputeConfig{std::vector<std::optional<AxisCompute>>(spec.mesh.axis_count()), {}};
  spec.default_compute->axes[axis] = c;
}

}  // namespace dstc::compiler::testing
