#include "compiler/frontend/op_registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/frontend/model.h"

namespace dstc::frontend {
namespace {

constexpr size_t kMany = 64;

std::vector<OpSignature> make_ops() {
  using K = OpKind;
  using T = AttrType;
  const AttrSpec dim_attr{"dim", T::Dim, true};
  const AttrSpec eps{"eps", T::Float, false};
  return {
      {K::Matmul, "matmul", 2, 2, {}, true, "contraction of two tensors; dims not in the output are summed"},
      {K::Einsum, "einsum", 1, kMany, {}, true, "contraction of any number of tensors"},
      {K::Add, "add", 2, kMany, {}, false, "elementwise sum, broadcast by dim name"},
      {K::Sub, "sub", 2, 2, {}, false, "elementwise difference"},
      {K::Mul, "mul", 2, kMany, {}, false, "elementwise product"},
      {K::Div, "div", 2, 2, {}, false, "elementwise quotient"},
      {K::Maximum, "maximum", 2, 2, {}, false, "elementwise maximum"},
      {K::Gelu, "gelu", 1, 1, {}, false, "GELU activation"},
      {K::Relu, "relu", 1, 1, {}, false, "ReLU activation"},
      {K::Tanh, "tanh", 1, 1, {}, false, "tanh"},
      {K::Sigmoid, "sigmoid", 1, 1, {}, false, "logistic sigmoid"},
      {K::Exp, "exp", 1, 1, {}, false, "exponential"},
      {K::Sqrt, "sqrt", 1, 1, {}, false, "square root"},
      {K::Dropout, "dropout", 1, 1, {{"p", T::Float, true}}, false, "dropout with probability p"},
      {K::Scale, "scale", 1, 1, {{"by", T::Float, true}}, false, "multiply by a constant"},
      {K::Identity, "identity", 1, 1, {}, false, "a copy"},
      {K::Softmax, "softmax", 1, 1, {dim_attr}, false, "softmax over dim"},
      {K::LogSoftmax, "log_softmax", 1, 1, {dim_attr}, false, "log-softmax over dim"},
      {K::LayerNorm, "layernorm", 1, 3, {dim_attr, eps}, false, "layer norm over dim; optional scale and shift"},
      {K::RmsNorm, "rmsnorm", 1, 2, {dim_attr, eps}, false, "RMS norm over dim; optional scale"},
      {K::BatchNorm, "batchnorm", 1, 3, {dim_attr, eps}, false, "batch norm per channel dim"},
      {K::Sum, "sum", 1, 1, {dim_attr}, false, "sum dim away"},
      {K::Mean, "mean", 1, 1, {dim_attr}, false, "average dim away"},
      {K::Max, "max", 1, 1, {dim_attr}, false, "maximum over dim, which goes away"},
      {K::Embedding, "embedding", 2, 2, {}, false, "rows of table[v, h] picked by integer ids[...]"},
      {K::CrossEntropy, "cross_entropy", 2, 2, {dim_attr}, false, "mean cross entropy of logits over dim vs labels"},
      {K::MseLoss, "mse_loss", 2, 2, {}, false, "mean squared error"},
      {K::Attention, "attention", 3, 3, {{"causal", T::Bool, false}}, false, "softmax(q k) v over [..., s, d]"},
      {K::Conv2d,
       "conv2d",
       2,
       2,
       {{"stride", T::Int, false}, {"padding", T::Int, false}},
       false,
       "2-D convolution: x[..., c, h, w], weight[o, c, kh, kw]"},
      {K::MaxPool2d,
       "maxpool2d",
       1,
       1,
       {{"kernel", T::Int, true}, {"stride", T::Int, false}, {"padding", T::Int, false}},
       false,
       "2-D max pooling over the last two dims"},
      {K::AvgPool2d,
       "avgpool2d",
       1,
       1,
       {{"kernel", T::Int, true}, {"stride", T::Int, false}, {"padding", T::Int, false}},
       false,
       "2-D average pooling over the last two dims"},
      {K::GlobalAvgPool, "global_avgpool", 1, 1, {}, false, "average the last two dims away"},
      {K::Concat, "concat", 1, kMany, {dim_attr}, false, "join along dim"},
      {K::Select, "select", 1, 1, {dim_attr, {"index", T::Int, true}}, false, "one index of dim, which goes away"},
      {K::Reshape, "reshape", 1, 1, {}, true, "split or merge dims; same number of elements"},
  };
}

std::string dims_text(const std::vector<Dim>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += fmt::format("{}{}: {}", i ? ", " : "", dims[i].name, dims[i].size);
  return out + "]";
}

const Dim* find_dim(const std::vector<Dim>& dims, std::string_view name) {
  for (const Dim& d : dims) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const AttrValue* attr(const std::vector<AttrValue>& attrs, std::string_view name) {
  for (const AttrValue& a : attrs) {
    if (a.name == name && a.given) return &a;
  }
  return nullptr;
}

using Result = std::optional<std::vector<Dim>>;

Result fail(OpError& error, std::string message, int input = -1, bool unknown = false) {
  error = {std::move(message), input, unknown};
  return std::nullopt;
}

// Every name shared by two inputs must have one size. Fills `all` with the
// union of dims, first appearance first.
bool unify(const std::vector<std::vector<Dim>>& inputs, std::vector<Dim>& all, OpError& error) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Dim& d : inputs[i]) {
      if (const Dim* seen = find_dim(all, d.name)) {
        if (seen->size != d.size) {
          error = {fmt::format("dim {} has size {} here but {} in an earlier input", d.name, d.size, seen->size),
                   static_cast<int>(i), false};
          return false;
        }
      } else {
        all.push_back(d);
      }
    }
  }
  return true;
}

// The written output of an op whose output is inferred must agree with it.
Result check_declared(const std::vector<Dim>& inferred, const std::optional<std::vector<DeclaredDim>>& declared,
                      OpError& error) {
  if (!declared) return inferred;
  if (declared->size() != inferred.size()) {
    return fail(error, fmt::format("the output has {} dims {}, written with {}", inferred.size(), dims_text(inferred),
                                   declared->size()));
  }
  for (size_t i = 0; i < inferred.size(); ++i) {
    const DeclaredDim& d = (*declared)[i];
    if (d.name != inferred[i].name) {
      return fail(error, fmt::format("output dim {} is {}, written as {} (output {})", i, inferred[i].name, d.name,
                                     dims_text(inferred)));
    }
    if (d.size && *d.size != inferred[i].size) {
      return fail(error, fmt::format("output dim {} has size {}, written as {}", d.name, inferred[i].size, *d.size));
    }
  }
  return inferred;
}

Result contraction(const std::vector<std::vector<Dim>>& inputs, const std::vector<DeclaredDim>& declared,
                   OpError& error) {
  std::vector<Dim> all;
  if (!unify(inputs, all, error)) return std::nullopt;
  std::vector<Dim> out;
  for (const DeclaredDim& d : declared) {
    const Dim* in = find_dim(all, d.name);
    if (!in) return fail(error, fmt::format("output dim {} appears in no input", d.name), -1, true);
    if (d.size && *d.size != in->size) {
      return fail(error,
                  fmt::format("output dim {} has size {} in the inputs, written as {}", d.name, in->size, *d.size));
    }
    if (find_dim(out, d.name)) return fail(error, fmt::format("output dim {} is written twice", d.name));
    out.push_back(*in);
  }
  return out;
}

Result elementwise(const std::vector<std::vector<Dim>>& inputs, const std::optional<std::vector<DeclaredDim>>& declared,
                   OpError& error) {
  std::vector<Dim> all;
  if (!unify(inputs, all, error)) return std::nullopt;
  // Broadcasting adds no dims: each input's dims come from the largest one
  // (a bias [o] onto [b, s, o]), so [b, s, h] + [b, s, o] is a naming slip.
  size_t largest = 0;
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].size() > inputs[largest].size()) largest = i;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Dim& d : inputs[i]) {
      if (!find_dim(inputs[largest], d.name)) {
        return fail(error,
                    fmt::format("dims {} and {} do not broadcast: dim {} is not in {}; rename it, e.g. x[..., {}]",
                                dims_text(inputs[i]), dims_text(inputs[largest]), d.name, dims_text(inputs[largest]),
                                inputs[largest].empty() ? d.name : inputs[largest].back().name),
                    static_cast<int>(i));
      }
    }
  }
  if (!declared) return all;
  // The written output may order the dims differently; it must have them all.
  std::vector<Dim> out;
  for (const DeclaredDim& d : *declared) {
    const Dim* in = find_dim(all, d.name);
    if (!in) return fail(error, fmt::format("output dim {} appears in no input", d.name), -1, true);
    out.push_back(*in);
  }
  if (out.size() != all.size()) {
    return fail(error, fmt::format("the output must have every input dim: {}", dims_text(all)));
  }
  return out;
}

bool require_dim(const std::vector<Dim>& dims, const std::string& name, int input, OpError& error) {
  if (find_dim(dims, name)) return true;
  error = {fmt::format("dim {} is not a dim of {}", name, dims_text(dims)), input, true};
  return false;
}

// Kernels and padding past this are typos; below it, the padded size of a
// dim (at most 2^48) cannot overflow.
constexpr int64_t kMaxWindow = int64_t{1} << 31;

int64_t pooled(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

}  // namespace

const std::vector<OpSignature>& all_ops() {
  static const std::vector<OpSignature> ops = make_ops();
  return ops;
}

const OpSignature* find_op(std::string_view name) {
  for (const OpSignature& s : all_ops()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const OpSignature& op_signature(OpKind kind) {
  for (const OpSignature& s : all_ops()) {
    if (s.kind == kind) return s;
  }
  return all_ops().front();
}

std::string_view op_name(OpKind kind) { return op_signature(kind).name; }

std::optional<std::vector<Dim>> infer_output(const OpSignature& sig, const std::vector<std::vector<Dim>>& inputs,
                                             const std::vector<AttrValue>& attrs,
                                             const std::optional<std::vector<DeclaredDim>>& declared, OpError& error) {
  using K = OpKind;
  const AttrValue* dim_attr = attr(attrs, "dim");
  switch (sig.kind) {
    case K::Matmul:
    case K::Einsum: return contraction(inputs, *declared, error);
    case K::Add:
    case K::Sub:
    case K::Mul:
    case K::Div:
    case K::Maximum: return elementwise(inputs, declared, error);
    case K::Gelu:
    case K::Relu:
    case K::Tanh:
    case K::Sigmoid:
    case K::Exp:
    case K::Sqrt:
    case K::Dropout:
    case K::Scale:
    case K::Identity: return check_declared(inputs[0], declared, error);
    case K::Softmax:
    case K::LogSoftmax:
      if (!require_dim(inputs[0], dim_attr->dim, 0, error)) return std::nullopt;
      return check_declared(inputs[0], declared, error);
    case K::LayerNorm:
    case K::RmsNorm:
    case K::BatchNorm: {
      if (!require_dim(inputs[0], dim_attr->dim, 0, error)) return std::nullopt;
      std::vector<Dim> all;
      if (!unify(inputs, all, error)) return std::nullopt;
      for (size_t i = 1; i < inputs.size(); ++i) {
        for (const Dim& d : inputs[i]) {
          if (!require_dim(inputs[0], d.name, static_cast<int>(i), error)) return std::nullopt;
        }
      }
      return check_declared(inputs[0], declared, error);
    }
    case K::Sum:
    case K::Mean:
    case K::Max: {
      if (!require_dim(inputs[0], dim_attr->dim, 0, error)) return std::nullopt;
      std::vector<Dim> out;
      for (const Dim& d : inputs[0]) {
        if (d.name != dim_attr->dim) out.push_back(d);
      }
      return check_declared(out, declared, error);
    }
    case K::Embedding: {
      if (inputs[0].size() != 2) {
        return fail(error, fmt::format("the table must have 2 dims [rows, width], not {}", dims_text(inputs[0])), 0);
      }
      std::vector<Dim> out = inputs[1];
      if (find_dim(out, inputs[0][1].name)) {
        return fail(error, fmt::format("the ids already have a dim named {}", inputs[0][1].name), 1);
      }
      out.push_back(inputs[0][1]);
      return check_declared(out, declared, error);
    }
    case K::CrossEntropy: {
      if (!require_dim(inputs[0], dim_attr->dim, 0, error)) return std::nullopt;
      std::vector<Dim> rest;
      for (const Dim& d : inputs[0]) {
        if (d.name != dim_attr->dim) rest.push_back(d);
      }
      if (rest != inputs[1]) {
        return fail(error,
                    fmt::format("the labels must have the logits' dims without {}: {}, not {}", dim_attr->dim,
                                dims_text(rest), dims_text(inputs[1])),
                    1);
      }
      return check_declared({}, declared, error);
    }
    case K::MseLoss:
      if (inputs[0] != inputs[1]) {
        return fail(error,
                    fmt::format("prediction {} and target {} differ", dims_text(inputs[0]), dims_text(inputs[1])), 1);
      }
      return check_declared({}, declared, error);
    case K::Attention: {
      const auto& q = inputs[0];
      const auto& k = inputs[1];
      const auto& v = inputs[2];
      if (q.size() < 2 || k.size() != q.size() || v.size() != q.size()) {
        return fail(error, "q, k and v must have the same number of dims, at least 2: [..., s, d]");
      }
      size_t n = q.size();
      for (size_t i = 0; i + 2 < n; ++i) {
        if (q[i] != k[i] || q[i] != v[i]) return fail(error, "q, k and v must share their leading dims", 1);
      }
      if (q[n - 1].size != k[n - 1].size) return fail(error, "q and k must have the same last dim size", 1);
      if (k[n - 2].size != v[n - 2].size) return fail(error, "k and v must have the same sequence dim size", 2);
      std::vector<Dim> out(q.begin(), q.end() - 1);
      out.push_back(v[n - 1]);
      return check_declared(out, declared, error);
    }
    case K::Conv2d: {
      const auto& x = inputs[0];
      const auto& w = inputs[1];
      if (x.size() < 3) return fail(error, fmt::format("the input must be [..., c, h, w], not {}", dims_text(x)), 0);
      if (w.size() != 4) return fail(error, fmt::format("the weight must be [o, c, kh, kw], not {}", dims_text(w)), 1);
      size_t n = x.size();
      if (x[n - 3].size != w[1].size) {
        return fail(error, fmt::format("input channels {} differ from the weight's {}", x[n - 3].size, w[1].size), 1);
      }
      const AttrValue* s = attr(attrs, "stride");
      const AttrValue* p = attr(attrs, "padding");
      int64_t stride = s ? s->i : 1, padding = p ? p->i : 0;
      if (stride < 1 || padding < 0) return fail(error, "stride must be at least 1 and padding not negative");
      if (padding > kMaxWindow || w[2].size > kMaxWindow || w[3].size > kMaxWindow)
        return fail(error, "padding and kernel sizes must be at most 2^31");
      int64_t oh = pooled(x[n - 2].size, w[2].size, stride, padding);
      int64_t ow = pooled(x[n - 1].size, w[3].size, stride, padding);
      if (oh < 1 || ow < 1) return fail(error, "the kernel is larger than the padded input");
      std::vector<Dim> out(x.begin(), x.end() - 3);
      if (find_dim(out, w[0].name)) return fail(error, fmt::format("dim {} appears twice", w[0].name), 1);
      out.push_back(w[0]);
      out.push_back({x[n - 2].name, oh});
      out.push_back({x[n - 1].name, ow});
      return check_declared(out, declared, error);
    }
    case K::MaxPool2d:
    case K::AvgPool2d: {
      const auto& x = inputs[0];
      if (x.size() < 2) return fail(error, "the input must be [..., h, w]", 0);
      int64_t kernel = attr(attrs, "kernel")->i;
      const AttrValue* s = attr(attrs, "stride");
      const AttrValue* p = attr(attrs, "padding");
      int64_t stride = s ? s->i : kernel, padding = p ? p->i : 0;
      if (kernel < 1 || stride < 1 || padding < 0) return fail(error, "kernel and stride must be at least 1");
      if (padding > kMaxWindow || kernel > kMaxWindow) return fail(error, "padding and kernel must be at most 2^31");
      size_t n = x.size();
      int64_t oh = pooled(x[n - 2].size, kernel, stride, padding);
      int64_t ow = pooled(x[n - 1].size, kernel, stride, padding);
      if (oh < 1 || ow < 1) return fail(error, "the kernel is larger than the padded input");
      std::vector<Dim> out(x.begin(), x.end() - 2);
      out.push_back({x[n - 2].name, oh});
      out.push_back({x[n - 1].name, ow});
      return check_declared(out, declared, error);
    }
    case K::GlobalAvgPool: {
      const auto& x = inputs[0];
      if (x.size() < 2) return fail(error, "the input must be [..., h, w]", 0);
      return check_declared(std::vector<Dim>(x.begin(), x.end() - 2), declared, error);
    }
    case K::Concat: {
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!require_dim(inputs[i], dim_attr->dim, static_cast<int>(i), error)) return std::nullopt;
      }
      std::vector<Dim> out = inputs[0];
      for (size_t i = 1; i < inputs.size(); ++i) {
        if (inputs[i].size() != out.size())
          return fail(error, "inputs of concat must have the same dims", static_cast<int>(i));
        for (size_t j = 0; j < out.size(); ++j) {
          if (inputs[i][j].name != out[j].name || (out[j].name != dim_attr->dim && inputs[i][j].size != out[j].size)) {
            return fail(error,
                        fmt::format("inputs of concat must agree on every dim but {}: {} vs {}", dim_attr->dim,
                                    dims_text(inputs[0]), dims_text(inputs[i])),
                        static_cast<int>(i));
          }
          if (out[j].name == dim_attr->dim) {
            if (__builtin_add_overflow(out[j].size, inputs[i][j].size, &out[j].size)) {
              return fail(error, "concatenated size overflows");
            }
          }
        }
      }
      return check_declared(out, declared, error);
    }
    case K::Select: {
      if (!require_dim(inputs[0], dim_attr->dim, 0, error)) return std::nullopt;
      std::vector<Dim> out;
      for (const Dim& d : inputs[0]) {
        if (d.name != dim_attr->dim) {
          out.push_back(d);
        } else if (attr(attrs, "index")->i < 0 || attr(attrs, "index")->i >= d.size) {
          return fail(error,
                      fmt::format("index {} is outside dim {} of size {}", attr(attrs, "index")->i, d.name, d.size));
        }
      }
      return check_declared(out, declared, error);
    }
    case K::Reshape: {
      // Element counts compared in long double: exact for counts below 2^64.
      std::vector<Dim> out;
      long double in_elems = 1, out_elems = 1;
      for (const Dim& d : inputs[0]) in_elems *= static_cast<long double>(d.size);
      for (const DeclaredDim& d : *declared) {
        std::optional<int64_t> size = d.size;
        if (!size) {
          if (const Dim* in = find_dim(inputs[0], d.name)) size = in->size;
        }
        if (!size)
          return fail(error, fmt::format("output dim {} is new: give its size ({}: N)", d.name, d.name), -1, true);
        out.push_back({d.name, *size});
        out_elems *= static_cast<long double>(*size);
      }
      if (in_elems != out_elems) {
        return fail(error, fmt::format("reshape must keep the number of elements: {} vs {}", dims_text(inputs[0]),
                                       dims_text(out)));
      }
      return out;
    }
  }
  return fail(error, "unhandled op");
}

}  // namespace dstc::frontend
