#include "compiler/frontend/elaborate_model.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"
#include "ir/types.h"

namespace dstc::frontend {
namespace {

// Instances nest through modules; past this depth a module is instantiating
// itself (directly or not).
constexpr int kMaxInstanceDepth = 64;
// The most nodes (layers, modules, ops) a model may have: some 17,000
// GPT-2 blocks, elaborated in about two seconds and under a gigabyte.
constexpr size_t kMaxModelNodes = size_t{1} << 18;

std::string dims_text(const std::vector<Dim>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += fmt::format("{}{}: {}", i ? ", " : "", dims[i].name, dims[i].size);
  return out + "]";
}

std::string snake(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (std::isupper(c) && i > 0 && !std::isupper(static_cast<unsigned char>(name[i - 1]))) out += '_';
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

// A tensor as a component body names it: its id and its dims under the
// names this body uses.
struct LocalTensor {
  TensorId id = kNone;
  std::vector<Dim> dims;
  SourceRange declared;
};

// One component instance being elaborated.
struct Frame {
  const ComponentDecl* decl = nullptr;
  size_t file = 0;
  NodeId node = kNone;
  Scope scope;
  std::map<std::string, LocalTensor> tensors;
  std::vector<LocalTensor> args;  // tensors passed in
  size_t next_input = 0;
  std::optional<std::vector<Dim>> ellipsis;  // the caller's leading dims behind `...`
  std::map<std::string, int64_t> dim_sizes;  // sizes of the dims named so far
  std::map<std::string, SourceRange> names;  // inputs, params, lets, children: for duplicates
  std::optional<LocalTensor> output;
  SourceRange output_range;
  // Names whose statement failed (already reported): uses stay silent.
  std::set<std::string> poisoned;
  SourceRange call;  // where this instance was created
  int depth = 0;
};

class ModelElaborator {
 public:
  ModelElaborator(const Program& program, DiagnosticEngine& diags) : program_(program), diags_(diags), eval_(diags) {}

  std::optional<Model> run(const DeclRef& ref, const std::vector<ParamOverride>& overrides) {
    const ComponentDecl& decl = *ref.component;
    size_t errors = diags_.error_count();
    model_.name = decl.name;
    model_.range = decl.name_range;
    Node root;
    root.kind = NodeKind::Model;
    root.component = decl.name;
    root.range = decl.name_range;
    root.decl_range = decl.name_range;
    model_.nodes.push_back(root);

    Frame frame;
    frame.decl = &decl;
    frame.file = ref.file;
    frame.node = 0;
    frame.call = decl.name_range;
    if (!bind_params(decl.params, {}, Scope{}, overrides, eval_, frame.scope, decl.name_range, decl.name)) {
      return std::nullopt;
    }
    for (const ParamDecl& p : decl.params) {
      if (const Scope::Binding* b = frame.scope.find(p.name)) model_.params.emplace_back(p.name, b->value);
    }
    body(frame, decl.body);
    finish_component(frame);
    if (diags_.error_count() > errors) return std::nullopt;
    model_.output = model_.nodes[0].output;
    if (!model_.inputs.empty() && !model_.tensors[model_.inputs[0]].dims.empty()) {
      model_.batch_dim = model_.tensors[model_.inputs[0]].dims[0].name;
      model_.batch = model_.tensors[model_.inputs[0]].dims[0].size;
    }
    return std::move(model_);
  }

 private:
  // ---- nodes and tensors ----

  NodeId add_node(NodeId parent, std::string name, int64_t index, NodeKind kind, std::string component,
                  SourceRange range, SourceRange decl_range) {
    Node n;
    const std::string& base = model_.nodes[parent].path;
    std::string seg = index >= 0 ? fmt::format("{}[{}]", name, index) : name;
    // A repeat's children sit under it but are written `blocks[3]`, not `blocks.blocks[3]`.
    if (model_.nodes[parent].kind == NodeKind::Repeat) {
      n.path = base + fmt::format("[{}]", index);
    } else {
      n.path = base.empty() ? seg : base + "." + seg;
    }
    n.name = std::move(name);
    n.index = index;
    n.kind = kind;
    n.component = std::move(component);
    n.parent = parent;
    n.range = range;
    n.decl_range = decl_range;
    auto id = static_cast<NodeId>(model_.nodes.size());
    model_.nodes.push_back(std::move(n));
    model_.nodes[parent].children.push_back(id);
    return id;
  }

  TensorId add_tensor(NodeId node, const std::string& local, std::vector<Dim> dims, DType dtype, TensorRole role,
                      SourceRange range) {
    Tensor t;
    const std::string& base = model_.nodes[node].path;
    t.name = base.empty() ? local : base + "." + local;
    t.dims = std::move(dims);
    t.dtype = dtype;
    t.role = role;
    t.node = node;
    t.range = range;
    model_.tensors.push_back(std::move(t));
    return static_cast<TensorId>(model_.tensors.size() - 1);
  }

  // Whether a tensor of these dims is small enough to model: its element
  // count, and so every byte count, FLOP count and product of two sizes
  // downstream, stays far inside 64 bits.
  bool size_fits(const std::vector<Dim>& dims, const std::string& name, SourceRange at) {
    int64_t elements = 1;
    for (const Dim& d : dims) {
      if (__builtin_mul_overflow(elements, d.size, &elements) || elements > ir::kMaxTensorElements) {
        std::string shape;
        for (const Dim& e : dims) shape += fmt::format("{}{}: {}", shape.empty() ? "" : ", ", e.name, e.size);
        diags_.error(diag::kTensorTooLarge, at,
                     fmt::format("{}[{}] has more than the 2^48 elements dstc models", name, shape));
        return false;
      }
    }
    return true;
  }

  bool declare(Frame& f, const std::string& name, SourceRange at) {
    auto [it, inserted] = f.names.emplace(name, at);
    if (inserted) return true;
    diags_.error(diag::kDuplicateName, at, fmt::format("'{}' is already declared in {}", name, f.decl->name))
        .note(it->second, "first declared here");
    return false;
  }

  // ---- bodies ----

  void body(Frame& f, const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) {
      switch (s.kind) {
        case StmtKind::Input: input(f, s); break;
        case StmtKind::Param:
        case StmtKind::Buffer: param(f, s); break;
        case StmtKind::Let: let(f, s); break;
        case StmtKind::Assign: assign(f, s); break;
        case StmtKind::Output: output(f, s); break;
        case StmtKind::If: {
          bool taken = false;
          for (const Branch& b : s.branches) {
            std::optional<bool> c = eval_.eval_bool(*b.condition, f.scope, "an if condition");
            if (!c) return;
            if (*c) {
              body(f, b.body);
              taken = true;
              break;
            }
          }
          if (!taken && s.has_else) body(f, s.else_body);
          break;
        }
      }
    }
  }

  void let(Frame& f, const Stmt& s) {
    if (!declare(f, s.name, s.name_range)) return;
    Value v = eval_.eval(*s.value, f.scope);
    f.scope.set(s.name, v, s.name_range);
  }

  std::optional<DType> dtype_of(const Stmt& s, DType fallback) {
    if (s.dtype.empty()) return fallback;
    if (std::optional<DType> t = parse_source_dtype(s.dtype)) return t;
    diags_.error(diag::kTypeMismatch, s.dtype_range,
                 fmt::format("unknown dtype '{}' (dtypes: fp32, fp16, bf16, i32, i64)", s.dtype));
    return std::nullopt;
  }

  // Evaluates written dims that must all have sizes (model inputs, params):
  // a dim without a size takes the size this body already gave that name.
  std::optional<std::vector<Dim>> sized_dims(Frame& f, const std::vector<DimItem>& items, std::string_view what) {
    std::vector<Dim> dims;
    bool ok = true;
    for (const DimItem& d : items) {
      if (d.ellipsis) {
        diags_.error(diag::kMisplacedStatement, d.range, fmt::format("'...' is only for layer inputs, not {}", what));
        ok = false;
        continue;
      }
      std::optional<int64_t> size;
      if (d.size) {
        size = eval_.eval_int(*d.size, f.scope, fmt::format("the size of dim {}", d.name));
        if (!size) {
          ok = false;
          continue;
        }
      } else if (auto it = f.dim_sizes.find(d.name); it != f.dim_sizes.end()) {
        size = it->second;
      } else {
        diags_.error(diag::kUnknownDim, d.range,
                     fmt::format("dim {} has no size here: write {}: SIZE", d.name, d.name));
        ok = false;
        continue;
      }
      if (*size < 1) {
        diags_.error(diag::kDimMismatch, d.range,
                     fmt::format("dim {} has size {}; sizes must be at least 1", d.name, *size));
        ok = false;
        continue;
      }
      for (const Dim& seen : dims) {
        if (seen.name == d.name) {
          diags_.error(diag::kDuplicateName, d.range, fmt::format("dim {} appears twice", d.name));
          ok = false;
        }
      }
      dims.push_back({d.name, *size});
    }
    if (!ok) return std::nullopt;
    return dims;
  }

  void input(Frame& f, const Stmt& s) {
    size_t errors = diags_.error_count();
    bind_input(f, s);
    if (diags_.error_count() > errors) f.poisoned.insert(s.name);
  }

  void bind_input(Frame& f, const Stmt& s) {
    if (!declare(f, s.name, s.name_range)) return;
    if (f.decl->kind == ComponentKind::Model) {
      std::optional<std::vector<Dim>> dims = sized_dims(f, s.dims, "model inputs");
      std::optional<DType> dtype = dtype_of(s, DType::F32);
      if (!dims || !dtype || !size_fits(*dims, s.name, s.range)) return;
      for (const Dim& d : *dims) f.dim_sizes[d.name] = d.size;
      TensorId id = add_tensor(0, s.name, *dims, *dtype, TensorRole::Input, s.range);
      model_.inputs.push_back(id);
      model_.nodes[0].inputs.push_back(id);
      f.tensors[s.name] = {id, *dims, s.name_range};
      return;
    }
    if (f.next_input >= f.args.size()) {
      diags_
          .error(diag::kArgumentMismatch, f.call,
                 fmt::format("{} takes more tensor inputs than the {} given", f.decl->name, f.args.size()))
          .note(s.name_range, "this input gets no tensor");
      return;
    }
    const LocalTensor& actual = f.args[f.next_input++];
    std::optional<std::vector<Dim>> view = bind_view(f, actual, s.dims, s.range, true);
    if (!view) return;
    if (!s.dtype.empty()) {
      std::optional<DType> want = dtype_of(s, DType::F32);
      DType have = model_.tensors[actual.id].dtype;
      if (want && *want != have) {
        diags_
            .error(diag::kTypeMismatch, f.call,
                   fmt::format("input {} of {} must be {}, but is {}", s.name, f.decl->name, source_dtype_name(*want),
                               source_dtype_name(have)))
            .note(s.dtype_range, "declared here");
      }
    }
    f.tensors[s.name] = {actual.id, *view, s.name_range};
  }

  // Binds a tensor's dims to written names: `...` takes the leading dims (and
  // for an input, fixes this body's `...`), each name renames one dim, and a
  // written size must match. Returns the dims under the written names.
  std::optional<std::vector<Dim>> bind_view(Frame& f, const LocalTensor& t, const std::vector<DimItem>& items,
                                            SourceRange at, bool is_input) {
    size_t named = 0;
    bool has_ellipsis = false;
    for (const DimItem& d : items) {
      if (d.ellipsis) {
        if (has_ellipsis) {
          diags_.error(diag::kDimMismatch, d.range, "'...' may appear only once");
          return std::nullopt;
        }
        has_ellipsis = true;
      } else {
        ++named;
      }
    }
    const std::vector<Dim>& have = t.dims;
    if (has_ellipsis ? have.size() < named : have.size() != named) {
      auto b = diags_.error(diag::kDimMismatch, at,
                            fmt::format("the tensor has {} dims {}, written with {}{}", have.size(), dims_text(have),
                                        named, has_ellipsis ? " after '...'" : ""));
      if (is_input) b.note(f.call, "passed here");
      return std::nullopt;
    }
    size_t lead = have.size() - named;
    std::vector<Dim> view;
    size_t pos = 0;
    for (const DimItem& d : items) {
      if (d.ellipsis) {
        std::vector<Dim> leading(have.begin(), have.begin() + static_cast<long>(lead));
        if (is_input) {
          if (!f.ellipsis) {
            f.ellipsis = leading;
          } else if (*f.ellipsis != leading) {
            diags_
                .error(diag::kDimMismatch, f.call,
                       fmt::format("the leading dims {} differ from an earlier input's {}", dims_text(leading),
                                   dims_text(*f.ellipsis)))
                .note(d.range, "'...' here");
            return std::nullopt;
          }
        }
        view.insert(view.end(), leading.begin(), leading.end());
        pos += lead;
        continue;
      }
      Dim dim{d.name, have[pos].size};
      if (d.size) {
        std::optional<int64_t> want = eval_.eval_int(*d.size, f.scope, fmt::format("the size of dim {}", d.name));
        if (!want) return std::nullopt;
        if (*want != dim.size) {
          auto b = diags_.error(diag::kDimMismatch, is_input ? f.call : d.range,
                                fmt::format("dim {} must have size {}, but the tensor's dim {} ({}) has size {}",
                                            d.name, *want, pos, have[pos].name, dim.size));
          if (is_input) b.note(d.range, fmt::format("{} declares it here", f.decl->name));
          return std::nullopt;
        }
      }
      view.push_back(dim);
      ++pos;
    }
    for (size_t i = 0; i < view.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (view[i].name == view[j].name) {
          diags_.error(diag::kDimMismatch, at,
                       fmt::format("dim {} appears twice in {}", view[i].name, dims_text(view)));
          return std::nullopt;
        }
      }
    }
    for (const Dim& d : view) f.dim_sizes[d.name] = d.size;
    return view;
  }

  void param(Frame& f, const Stmt& s) {
    const bool buffer = s.kind == StmtKind::Buffer;
    if (f.decl->kind != ComponentKind::Layer) {
      diags_.error(diag::kMisplacedStatement, s.range,
                   buffer ? "buffers belong in layers; a module or model gets them from its layers"
                          : "parameters belong in layers; a module or model gets them from its layers");
      return;
    }
    if (!declare(f, s.name, s.name_range)) return;
    std::optional<std::vector<Dim>> dims = sized_dims(f, s.dims, buffer ? "buffers" : "parameters");
    std::optional<DType> dtype = dtype_of(s, DType::F32);
    if (!dims || !dtype || !size_fits(*dims, s.name, s.range)) {
      f.poisoned.insert(s.name);  // its uses would only repeat the error
      return;
    }
    for (const Dim& d : *dims) f.dim_sizes[d.name] = d.size;
    TensorId id = add_tensor(f.node, s.name, *dims, *dtype, TensorRole::Param, s.range);
    model_.tensors[id].trainable = !buffer;
    model_.nodes[f.node].params.push_back(id);
    f.tensors[s.name] = {id, *dims, s.name_range};
  }

  void output(Frame& f, const Stmt& s) {
    auto it = f.tensors.find(s.name);
    if (it == f.tensors.end()) {
      bool silent = f.poisoned.count(s.name) > 0;
      f.poisoned.insert(s.name);  // and no "missing output" on top
      if (silent) return;
      diags_.error(diag::kUnknownName, s.name_range, fmt::format("no tensor named '{}' to output", s.name));
      return;
    }
    if (f.output) {
      diags_.error(diag::kMissingOutput, s.range, fmt::format("{} has a second output", f.decl->name))
          .note(f.output_range, "first output here");
      return;
    }
    f.output = it->second;
    f.output_range = s.range;
  }

  void finish_component(Frame& f) {
    Node& n = model_.nodes[f.node];
    if (!f.output) {
      if (!f.poisoned.empty()) return;
      diags_.error(diag::kMissingOutput, f.decl->name_range,
                   fmt::format("{} '{}' has no output statement",
                               f.decl->kind == ComponentKind::Model    ? "model"
                               : f.decl->kind == ComponentKind::Module ? "module"
                                                                       : "layer",
                               f.decl->name));
      return;
    }
    n.output = f.output->id;
    if (f.decl->kind != ComponentKind::Model && f.next_input < f.args.size()) {
      diags_.error(diag::kArgumentMismatch, f.call,
                   fmt::format("{} takes {} tensor inputs, {} given", f.decl->name, f.next_input, f.args.size()));
    }
  }

  // ---- assignments: ops and instances ----

  void assign(Frame& f, const Stmt& s) {
    const Expr& v = *s.value;
    if (v.kind == ExprKind::Call && v.items[0]->kind == ExprKind::Name) {
      const std::string& callee = v.items[0]->text;
      if (const ops::OpDef* def = ops::find_op(callee); def && !program_.find_visible(callee, f.file)) {
        size_t errors = diags_.error_count();
        op_statement(f, s, *def);
        // An op over a tensor that already failed binds nothing, silently.
        if (diags_.error_count() > errors || !f.tensors.count(s.name)) {
          f.tensors.erase(s.name);
          f.poisoned.insert(s.name);
        }
        return;
      }
    }
    if (f.decl->kind == ComponentKind::Layer) {
      diags_.error(diag::kMisplacedStatement, v.range,
                   "a layer's body holds ops (matmul, add, ...); instances of layers and modules belong in modules");
      return;
    }
    if (s.has_dims) {
      diags_.error(diag::kMisplacedStatement, s.dims.front().range,
                   "an instance's output dims come from its component; write them only on ops");
      return;
    }
    if (!declare(f, s.name, s.name_range)) return;
    std::optional<LocalTensor> out = instance(f, v, s.name, s.range);
    if (out) {
      f.tensors[s.name] = {out->id, out->dims, s.name_range};
    } else {
      f.poisoned.insert(s.name);
    }
  }

  // `Name(args)(tensors)` or `repeat(n) Name(args)(tensors)`, named `name`.
  std::optional<LocalTensor> instance(Frame& f, const Expr& v, const std::string& name, SourceRange stmt_range) {
    if (v.kind == ExprKind::Repeat) return repeat(f, v, name, stmt_range);
    if (v.kind != ExprKind::Call || v.items[0]->kind != ExprKind::Call ||
        v.items[0]->items[0]->kind != ExprKind::Name) {
      if (v.kind == ExprKind::Call && v.items[0]->kind == ExprKind::Name) {
        const std::string& callee = v.items[0]->text;
        if (program_.find_visible(callee, f.file)) {
          diags_.error(diag::kMisplacedStatement, v.range,
                       fmt::format("{} is a component: instantiate it as {}(params)(tensors)", callee, callee));
        } else {
          diags_.error(diag::kUnknownOp, v.items[0]->range, fmt::format("unknown op or component '{}'", callee));
        }
        return std::nullopt;
      }
      diags_.error(diag::kMisplacedStatement, v.range,
                   "expected an op call op(tensors) or an instance Component(params)(tensors)");
      return std::nullopt;
    }
    const Expr& ctor = *v.items[0];
    const DeclRef* ref = program_.lookup(ctor.items[0]->text, f.file, ctor.items[0]->range, "layer or module", diags_);
    if (!ref) return std::nullopt;
    if (ref->kind != DeclKind::Layer && ref->kind != DeclKind::Module) {
      diags_
          .error(diag::kWrongKind, ctor.items[0]->range,
                 fmt::format("'{}' is a {}, not a layer or module", ctor.items[0]->text, decl_kind_name(ref->kind)))
          .note(ref->name_range, "declared here");
      return std::nullopt;
    }
    std::vector<LocalTensor> inputs;
    for (const Arg& a : v.args) {
      if (!a.name.empty()) {
        diags_.error(diag::kArgumentMismatch, a.name_range,
                     "tensor inputs are positional; parameters go in the first ( )");
        return std::nullopt;
      }
      std::optional<LocalTensor> t = tensor_arg(f, *a.value, name);
      if (!t) return std::nullopt;
      inputs.push_back(*t);
    }
    NodeId node = add_node(f.node, name, -1, ref->kind == DeclKind::Layer ? NodeKind::Layer : NodeKind::Module,
                           ref->component->name, stmt_range, ref->name_range);
    return run_instance(f, *ref, ctor, inputs, node, v.range);
  }

  std::optional<LocalTensor> run_instance(Frame& f, const DeclRef& ref, const Expr& ctor,
                                          const std::vector<LocalTensor>& inputs, NodeId node, SourceRange call) {
    if (f.depth + 1 > kMaxInstanceDepth) {
      diags_.error(diag::kNestingTooDeep, call,
                   fmt::format("instances nested more than {} deep: does {} instantiate itself?", kMaxInstanceDepth,
                               ref.component->name));
      return std::nullopt;
    }
    if (failed_.count(ref.component)) return std::nullopt;
    if (model_.nodes.size() > kMaxModelNodes) {
      diags_.error(diag::kModelTooLarge, call,
                   fmt::format("the model has more than {} nodes (layers, modules and ops) here, the most dstc "
                               "elaborates",
                               kMaxModelNodes));
      return std::nullopt;
    }
    size_t errors = diags_.error_count();
    Frame child;
    child.decl = ref.component;
    child.file = ref.file;
    child.node = node;
    child.call = call;
    child.depth = f.depth + 1;
    child.args = inputs;
    for (const LocalTensor& t : inputs) model_.nodes[node].inputs.push_back(t.id);
    if (!bind_params(ref.component->params, ctor.args, f.scope, {}, eval_, child.scope, ctor.range,
                     ref.component->name)) {
      return std::nullopt;
    }
    size_t first_diagnostic = diags_.diagnostics().size();
    body(child, ref.component->body);
    finish_component(child);
    if (diags_.error_count() > errors) {
      diags_.note_other_files_since(first_diagnostic, call,
                                    fmt::format("in {} instantiated here", ref.component->name));
      failed_.insert(ref.component);
      return std::nullopt;
    }
    const Tensor& out = model_.tensors[child.output->id];
    return LocalTensor{child.output->id, out.dims, call};
  }

  std::optional<LocalTensor> repeat(Frame& f, const Expr& v, const std::string& name, SourceRange stmt_range) {
    std::optional<int64_t> n = eval_.eval_int(*v.items[0], f.scope, "a repeat count");
    if (!n) return std::nullopt;
    if (*n < 1 || *n > 100000) {
      diags_.error(diag::kTypeMismatch, v.items[0]->range, fmt::format("repeat count {} is not in 1..100000", *n));
      return std::nullopt;
    }
    const Expr& inner = *v.items[1];
    if (inner.kind != ExprKind::Call || inner.items[0]->kind != ExprKind::Call ||
        inner.items[0]->items[0]->kind != ExprKind::Name) {
      diags_.error(diag::kMisplacedStatement, inner.range, "repeat(n) takes an instance: repeat(n) Block(params)(x)");
      return std::nullopt;
    }
    const Expr& ctor = *inner.items[0];
    const DeclRef* ref = program_.lookup(ctor.items[0]->text, f.file, ctor.items[0]->range, "layer or module", diags_);
    if (!ref) return std::nullopt;
    if (ref->kind != DeclKind::Layer && ref->kind != DeclKind::Module) {
      diags_.error(diag::kWrongKind, ctor.items[0]->range,
                   fmt::format("'{}' is a {}, not a layer or module", ctor.items[0]->text, decl_kind_name(ref->kind)));
      return std::nullopt;
    }
    // The first tensor is carried from instance to instance; the others
    // (masks, router inputs) reach every instance unchanged.
    if (inner.args.empty() ||
        std::any_of(inner.args.begin(), inner.args.end(), [](const Arg& a) { return !a.name.empty(); })) {
      diags_.error(diag::kArgumentMismatch, inner.range,
                   "a repeated block takes its tensor inputs by position: the carried one first, then any that "
                   "every instance reads");
      return std::nullopt;
    }
    std::optional<LocalTensor> x = tensor_arg(f, *inner.args[0].value, name);
    if (!x) return std::nullopt;
    std::vector<LocalTensor> shared;
    for (size_t i = 1; i < inner.args.size(); ++i) {
      std::optional<LocalTensor> t = tensor_arg(f, *inner.args[i].value, name);
      if (!t) return std::nullopt;
      shared.push_back(*t);
    }
    NodeId group = add_node(f.node, name, -1, NodeKind::Repeat, ref->component->name, stmt_range, ref->name_range);
    model_.nodes[group].inputs.push_back(x->id);
    for (const LocalTensor& t : shared) model_.nodes[group].inputs.push_back(t.id);
    for (int64_t i = 0; i < *n; ++i) {
      NodeId node = add_node(group, name, i, ref->kind == DeclKind::Layer ? NodeKind::Layer : NodeKind::Module,
                             ref->component->name, stmt_range, ref->name_range);
      size_t first_diagnostic = diags_.diagnostics().size();
      std::vector<LocalTensor> inputs{*x};
      inputs.insert(inputs.end(), shared.begin(), shared.end());
      std::optional<LocalTensor> y = run_instance(f, *ref, ctor, inputs, node, inner.range);
      if (!y) {
        // Every instance is the same component on the same dims: one
        // report stands for all of them (unless the model's size ran out).
        if (*n > 1 && model_.nodes.size() <= kMaxModelNodes)
          diags_.note_since(first_diagnostic, v.items[0]->range,
                            fmt::format("the same in each of the {} instances of {}", *n, name));
        return std::nullopt;
      }
      if (y->dims != x->dims) {
        diags_.error(diag::kDimMismatch, inner.range,
                     fmt::format("a repeated block must keep its input's dims: {} becomes {}", dims_text(x->dims),
                                 dims_text(y->dims)));
        return std::nullopt;
      }
      x = y;
    }
    model_.nodes[group].output = x->id;
    return x;
  }

  // A tensor argument: `x`, `x[b, s, h]` (renamed view), or an inline
  // instance `LayerNorm(h)(x)` named after its component.
  std::optional<LocalTensor> tensor_arg(Frame& f, const Expr& e, const std::string& owner) {
    if (e.kind == ExprKind::Name) {
      auto it = f.tensors.find(e.text);
      if (it == f.tensors.end()) {
        if (f.poisoned.count(e.text)) return std::nullopt;
        diags_.error(diag::kUnknownName, e.range, fmt::format("no tensor named '{}' here", e.text));
        return std::nullopt;
      }
      return it->second;
    }
    if (e.kind == ExprKind::Dims && e.items[0]->kind == ExprKind::Name) {
      std::optional<LocalTensor> base = tensor_arg(f, *e.items[0], owner);
      if (!base) return std::nullopt;
      std::optional<std::vector<Dim>> view = bind_view(f, *base, e.dims, e.range, false);
      if (!view) return std::nullopt;
      return LocalTensor{base->id, *view, e.range};
    }
    if (e.kind == ExprKind::Call && e.items[0]->kind == ExprKind::Call && f.decl->kind != ComponentKind::Layer) {
      std::string base = snake(e.items[0]->items[0]->kind == ExprKind::Name ? e.items[0]->items[0]->text : owner);
      std::string name = base;
      for (int k = 2; f.names.count(name); ++k) name = fmt::format("{}_{}", base, k);
      f.names.emplace(name, e.range);
      std::optional<LocalTensor> t = instance(f, e, name, e.range);
      if (t) f.tensors[name] = *t;
      return t;
    }
    diags_.error(diag::kTypeMismatch, e.range, "expected a tensor: a name, name[dims] or an instance");
    return std::nullopt;
  }

  void op_statement(Frame& f, const Stmt& s, const ops::OpDef& def) {
    const Expr& v = *s.value;
    NodeId leaf = f.node;
    if (f.decl->kind != ComponentKind::Layer) {
      // An op written in a module is a leaf of its own, named by its output.
      if (!declare(f, s.name, s.name_range)) return;
      leaf = add_node(f.node, s.name, -1, NodeKind::Op, std::string(def.name), s.range, v.items[0]->range);
    }
    std::vector<LocalTensor> inputs;
    std::vector<const Arg*> attr_args;
    for (const Arg& a : v.args) {
      if (!a.name.empty()) {
        attr_args.push_back(&a);
        continue;
      }
      std::optional<LocalTensor> t = tensor_arg(f, *a.value, s.name);
      if (!t) return;
      inputs.push_back(*t);
    }
    if (inputs.size() < def.min_inputs || inputs.size() > def.max_inputs) {
      std::string want = def.min_inputs == def.max_inputs ? std::to_string(def.min_inputs)
                         : def.max_inputs >= ops::kMany   ? fmt::format("at least {}", def.min_inputs)
                                                          : fmt::format("{} to {}", def.min_inputs, def.max_inputs);
      diags_.error(
          diag::kOpSignature, v.range,
          fmt::format("{} takes {} tensor{}, {} given", def.name, want, want == "1" ? "" : "s", inputs.size()));
      return;
    }
    std::vector<ops::AttrValue> attrs;
    for (const ops::AttrSpec& spec : def.attrs) attrs.push_back({spec.name, 0, 0, false, {}, false});
    for (const Arg* a : attr_args) {
      auto spec =
          std::find_if(def.attrs.begin(), def.attrs.end(), [&](const ops::AttrSpec& x) { return x.name == a->name; });
      if (spec == def.attrs.end()) {
        std::string known;
        for (const ops::AttrSpec& x : def.attrs) known += (known.empty() ? "" : ", ") + std::string(x.name);
        diags_.error(diag::kOpSignature, a->name_range,
                     fmt::format("{} has no attribute '{}'{}", def.name, a->name,
                                 known.empty() ? "" : fmt::format(" (it has: {})", known)));
        return;
      }
      ops::AttrValue& av = attrs[static_cast<size_t>(spec - def.attrs.begin())];
      if (av.given) {
        diags_.error(diag::kArgumentMismatch, a->name_range, fmt::format("attribute '{}' given twice", a->name));
        return;
      }
      av.given = true;
      if (spec->type == ops::AttrType::Dim) {
        if (a->value->kind != ExprKind::Name) {
          diags_.error(diag::kTypeMismatch, a->value->range, fmt::format("'{}' must name a dim", a->name));
          return;
        }
        av.dim = a->value->text;
      } else {
        Value value = eval_.eval(*a->value, f.scope);
        if (!value.ok()) return;
        bool ok =
            (spec->type == ops::AttrType::Int && value.type == ValueType::Int) ||
            (spec->type == ops::AttrType::Bool && value.type == ValueType::Bool) ||
            (spec->type == ops::AttrType::Float && (value.type == ValueType::Float || value.type == ValueType::Int));
        if (!ok) {
          std::string_view want = spec->type == ops::AttrType::Int    ? "an integer"
                                  : spec->type == ops::AttrType::Bool ? "true or false"
                                                                      : "a number";
          report_wrong_type(diags_, *a->value, value, want, fmt::format("attribute '{}' of {}", a->name, def.name));
          return;
        }
        if (spec->type == ops::AttrType::Float && value.type == ValueType::Int)
          value = Value::of_float(static_cast<double>(value.i));
        av.i = value.i;
        av.f = value.f;
        av.b = value.b;
      }
    }
    for (const ops::AttrValue& av : attrs) {
      auto spec =
          std::find_if(def.attrs.begin(), def.attrs.end(), [&](const ops::AttrSpec& x) { return x.name == av.name; });
      if (spec->required && !av.given) {
        diags_.error(diag::kOpSignature, v.range, fmt::format("{} needs the attribute '{}'", def.name, av.name));
        return;
      }
    }
    std::optional<std::vector<ops::DeclaredDim>> declared;
    if (s.has_dims) {
      declared.emplace();
      for (const DimItem& d : s.dims) {
        if (d.ellipsis) {
          if (!f.ellipsis) {
            diags_.error(diag::kUnknownDim, d.range, "'...' here needs an input written with '...'");
            return;
          }
          for (const Dim& e : *f.ellipsis) declared->push_back({e.name, e.size});
          continue;
        }
        ops::DeclaredDim dd{d.name, std::nullopt};
        if (d.size) {
          dd.size = eval_.eval_int(*d.size, f.scope, fmt::format("the size of dim {}", d.name));
          if (!dd.size) return;
          if (*dd.size < 1) {
            diags_.error(diag::kDimMismatch, d.range,
                         fmt::format("dim {} has size {}; sizes must be at least 1", d.name, *dd.size));
            return;
          }
        }
        declared->push_back(dd);
      }
    } else if (def.needs_declared_output()) {
      diags_.error(diag::kDimMismatch, s.name_range,
                   fmt::format("write the output dims of {}: {}[dims] = {}(...)", def.name, s.name, def.name));
      return;
    }
    std::vector<std::vector<Dim>> in_dims;
    for (const LocalTensor& t : inputs) in_dims.push_back(t.dims);
    ops::OpError error;
    ops::OpAttrs op_attrs(def, std::move(attrs));
    std::optional<std::vector<Dim>> out = ops::infer_output(def, in_dims, op_attrs, declared, error);
    if (!out) {
      SourceRange at = error.input >= 0 ? positional_arg(v, static_cast<size_t>(error.input))->range
                                        : (s.has_dims ? s.dims.empty() ? s.name_range : s.dims.front().range : v.range);
      diags_.error(error.unknown_dim ? diag::kUnknownDim : diag::kDimMismatch, at,
                   fmt::format("{}: {}", def.name, error.message));
      return;
    }
    if (!size_fits(*out, s.name, s.range)) return;
    DType dtype = DType::F32;
    for (const LocalTensor& t : inputs) {
      DType d = model_.tensors[t.id].dtype;
      if (d != DType::I32 && d != DType::I64) {
        dtype = d;
        break;
      }
    }
    Op op;
    op.kind = def.kind;
    for (const LocalTensor& t : inputs) {
      OpInput in{t.id, {}};
      for (const Dim& d : t.dims) in.dims.push_back(d.name);
      op.inputs.push_back(std::move(in));
    }
    op.attrs = std::move(op_attrs);
    op.node = leaf;
    op.range = s.range;
    TensorId id = add_tensor(leaf, f.decl->kind == ComponentKind::Layer ? s.name : "out", *out, dtype,
                             TensorRole::Activation, s.range);
    if (f.decl->kind != ComponentKind::Layer) model_.tensors[id].name = model_.nodes[leaf].path;
    op.output = id;
    model_.tensors[id].producer = static_cast<OpId>(model_.ops.size());
    model_.nodes[leaf].ops.push_back(static_cast<OpId>(model_.ops.size()));
    for (const LocalTensor& t : inputs) {
      if (leaf != f.node) model_.nodes[leaf].inputs.push_back(t.id);
    }
    if (leaf != f.node) model_.nodes[leaf].output = id;
    model_.ops.push_back(std::move(op));
    for (const Dim& d : *out) f.dim_sizes[d.name] = d.size;
    f.tensors[s.name] = {id, *out, s.name_range};
  }

  static const Expr* positional_arg(const Expr& call, size_t index) {
    size_t k = 0;
    for (const Arg& a : call.args) {
      if (a.name.empty() && k++ == index) return a.value.get();
    }
    return &call;
  }

  const Program& program_;
  DiagnosticEngine& diags_;
  Evaluator eval_;
  Model model_;
  std::set<const ComponentDecl*> failed_;
};

std::optional<Value> parse_define_value(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text == "true" || text == "false") return Value::of_bool(text == "true");
  errno = 0;
  char* end = nullptr;
  long long i = std::strtoll(text.c_str(), &end, 10);
  if (*end == '\0') {
    if (errno == ERANGE) return std::nullopt;
    return Value::of_int(i);
  }
  double d = std::strtod(text.c_str(), &end);
  if (*end == '\0' && std::isdigit(static_cast<unsigned char>(text.back()))) return Value::of_float(d);
  bool name = std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_' || text == "1f1b";
  for (char c : text) name = name && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (name) return Value::of_symbol(text);
  return std::nullopt;
}

}  // namespace

std::string_view source_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::F16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    default: return ir::dtype_name(t);
  }
}

std::optional<DType> parse_source_dtype(std::string_view name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    if (source_dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

std::vector<Dim> Model::op_dims(const Op& op) const {
  std::vector<Dim> out;
  auto add = [&](const std::string& dim, int64_t size) {
    for (const Dim& d : out) {
      if (d.name == dim) return;
    }
    out.push_back({dim, size});
  };
  for (const OpInput& in : op.inputs) {
    const Tensor& t = tensors[in.tensor];
    for (size_t i = 0; i < in.dims.size() && i < t.dims.size(); ++i) add(in.dims[i], t.dims[i].size);
  }
  for (const Dim& d : tensors[op.output].dims) add(d.name, d.size);
  return out;
}

void Model::index_leaf_dims() {
  leaf_dims_.assign(nodes.size(), {});
  for (size_t leaf = 0; leaf < nodes.size(); ++leaf) {
    std::vector<Dim>& out = leaf_dims_[leaf];
    for (OpId id : nodes[leaf].ops) {
      for (const Dim& d : op_dims(ops[id])) {
        if (std::none_of(out.begin(), out.end(), [&](const Dim& x) { return x.name == d.name; })) out.push_back(d);
      }
    }
  }
}

std::vector<ParamOverride> parse_defines(const std::vector<std::string>& defines, DiagnosticEngine& diags) {
  std::vector<ParamOverride> out;
  for (const std::string& d : defines) {
    size_t eq = d.find('=');
    std::string name = eq == std::string::npos ? d : d.substr(0, eq);
    bool name_ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name) name_ok = name_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    std::optional<Value> value = eq == std::string::npos ? std::nullopt : parse_define_value(d.substr(eq + 1));
    if (!name_ok || !value) {
      diags.error(diag::kBadDefine, SourceRange{},
                  fmt::format("malformed -D '{}': write -D name=value with an integer, number, true/false or name", d));
      continue;
    }
    out.push_back({name, *value, SourceRange{}});
  }
  return out;
}

bool bind_params(const std::vector<ParamDecl>& params, const std::vector<Arg>& args, const Scope& caller,
                 const std::vector<ParamOverride>& overrides, Evaluator& eval, Scope& out, SourceRange call,
                 std::string_view callee) {
  DiagnosticEngine& diags = eval.diags();
  std::vector<const Expr*> given(params.size(), nullptr);
  std::vector<Value> values(params.size());
  std::vector<bool> set(params.size(), false);
  size_t positional = 0;
  bool ok = true;
  for (const Arg& a : args) {
    size_t index = 0;
    if (a.name.empty()) {
      index = positional++;
      if (index >= params.size()) {
        diags.error(
            diag::kArgumentMismatch, a.value->range,
            fmt::format("{} takes {} parameter{}, more given", callee, params.size(), params.size() == 1 ? "" : "s"));
        ok = false;
        continue;
      }
    } else {
      auto it = std::find_if(params.begin(), params.end(), [&](const ParamDecl& p) { return p.name == a.name; });
      if (it == params.end()) {
        diags.error(diag::kArgumentMismatch, a.name_range, fmt::format("{} has no parameter '{}'", callee, a.name));
        ok = false;
        continue;
      }
      index = static_cast<size_t>(it - params.begin());
    }
    if (given[index]) {
      diags.error(diag::kArgumentMismatch, a.value->range,
                  fmt::format("parameter '{}' of {} is given twice", params[index].name, callee));
      ok = false;
      continue;
    }
    given[index] = a.value.get();
    values[index] = eval.eval(*a.value, caller);
    if (!values[index].ok()) ok = false;
    set[index] = true;
  }
  if (!ok) return false;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamDecl& p = params[i];
    for (const ParamOverride& o : overrides) {
      if (o.name == p.name) {
        values[i] = o.value;
        set[i] = true;
        given[i] = nullptr;
      }
    }
    if (!set[i]) {
      if (!p.default_value) {
        diags.error(diag::kArgumentMismatch, call, fmt::format("{} needs a value for parameter '{}'", callee, p.name))
            .note(p.name_range, "declared here");
        ok = false;
        continue;
      }
      values[i] = eval.eval(*p.default_value, out);
      given[i] = p.default_value.get();
      if (!values[i].ok()) {
        ok = false;
        continue;
      }
    }
    std::optional<ValueType> want;
    if (!p.type.empty()) {
      want = parse_type_name(p.type);
      if (!want) {
        diags.error(diag::kTypeMismatch, p.type_range,
                    fmt::format("unknown type '{}' (types: int, float, bool, string, symbol)", p.type));
        ok = false;
        continue;
      }
    } else if (p.default_value && p.default_value->kind != ExprKind::Name) {
      // The type of a literal default (a name default may be a symbol or a parameter).
      if (p.default_value->kind == ExprKind::Int) want = ValueType::Int;
      if (p.default_value->kind == ExprKind::Float) want = ValueType::Float;
      if (p.default_value->kind == ExprKind::Bool) want = ValueType::Bool;
      if (p.default_value->kind == ExprKind::String) want = ValueType::String;
    }
    Value& v = values[i];
    if (want && v.type != *want) {
      if (*want == ValueType::Float && v.type == ValueType::Int) {
        v = Value::of_float(static_cast<double>(v.i));
      } else {
        SourceRange at = given[i] ? given[i]->range : call;
        auto b = diags.error(diag::kTypeMismatch, at,
                             fmt::format("parameter '{}' of {} is {}, but this is {} {}", p.name, callee,
                                         type_name(*want), type_name(v.type), to_string(v)));
        b.note(p.name_range, "declared here");
        ok = false;
        continue;
      }
    }
    out.set(p.name, v, p.name_range);
  }
  return ok;
}

std::optional<Model> elaborate_model(const Program& program, const DeclRef& model,
                                     const std::vector<ParamOverride>& overrides, DiagnosticEngine& diags) {
  ModelElaborator e(program, diags);
  std::optional<Model> m = e.run(model, overrides);
  if (m) m->index_leaf_dims();
  return m;
}

}  // namespace dstc::frontend
