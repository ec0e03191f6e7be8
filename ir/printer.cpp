#include "ir/printer.h"

#include <iterator>

#include <fmt/format.h>

#include "ir/registry.h"

namespace dstc::ir {

namespace {

void append_int(std::string& out, int64_t v) { fmt::format_to(std::back_inserter(out), "{}", v); }

void append_value(std::string& out, const Module& m, const Function& f, ValueId v) {
  out += '%';
  StrId name = f.values[v].name;
  if (name == 0)
    append_int(out, v);
  else
    out += m.str(name);
}

void append_string_literal(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
}

void append_type(std::string& out, const TensorType& t) {
  out += dtype_name(t.dtype);
  out += '[';
  for (int i = 0; i < t.rank; ++i) {
    if (i > 0) out += ", ";
    append_int(out, t.dim(i));
  }
  out += ']';
}

void append_layout(std::string& out, const Module& m, LayoutId id) {
  const Layout& layout = m.layout(id);
  out += "sbp(";
  for (size_t a = 0; a < layout.size(); ++a) {
    if (a > 0) out += ", ";
    out += a < m.mesh().axes().size() ? m.mesh().axes()[a].name : "?";
    out += '=';
    switch (layout[a].kind) {
      case Sbp::Broadcast: out += 'B'; break;
      case Sbp::Split: fmt::format_to(std::back_inserter(out), "S({})", layout[a].dim); break;
      case Sbp::PartialSum: out += "P(sum)"; break;
      case Sbp::PartialMax: out += "P(max)"; break;
      case Sbp::Flat: out += "S(flat)"; break;
    }
  }
  out += ')';
}

// An S(flat) value's logical type: " of f32[5, 4]".
void append_logical(std::string& out, const Module& m, const Value& v) {
  if (v.logical != kNone) {
    out += " of ";
    append_type(out, m.type(v.logical));
  }
  if (v.fill.fullest != 1.0f) {
    out += " fill ";
    out += print_float(v.fill.fullest);
  }
  if (v.fill.mean != v.fill.fullest) {
    out += " mean ";
    out += print_float(v.fill.mean);
  }
}

void append_devices(std::string& out, const Module& m, DeviceSetId id) {
  const Mesh& mesh = m.mesh();
  const DeviceSet& set = m.devices(id);
  out += mesh.name();
  if (!set.is_slice()) {
    out += '{';
    for (size_t i = 0; i < set.ranks.size(); ++i) {
      if (i > 0) out += ", ";
      append_int(out, set.ranks[i]);
    }
    out += '}';
    return;
  }
  bool open = false;
  for (int a = 0; a < mesh.axis_count(); ++a) {
    const AxisRange& r = set.ranges[static_cast<size_t>(a)];
    if (r.begin == 0 && r.end == mesh.axes()[static_cast<size_t>(a)].size) continue;
    out += open ? ", " : "[";
    open = true;
    out += mesh.axes()[static_cast<size_t>(a)].name;
    out += '=';
    append_int(out, r.begin);
    if (r.size() != 1) {
      out += "..";
      append_int(out, r.end);
    }
  }
  if (open) out += ']';
}

void append_attr(std::string& out, const Module& m, const Function& f, const OpInfo& info, const Attr& a) {
  out += info.attrs[a.slot].name;
  out += " = ";
  switch (a.type) {
    case AttrType::Int: append_int(out, a.i); break;
    case AttrType::Bool: out += a.i ? "true" : "false"; break;
    case AttrType::Float: out += print_float(a.f); break;
    case AttrType::String: append_string_literal(out, m.str(a.s)); break;
    case AttrType::IntList: {
      out += '[';
      std::span<const int64_t> list = f.ints(a);
      for (size_t i = 0; i < list.size(); ++i) {
        if (i > 0) out += ", ";
        append_int(out, list[i]);
      }
      out += ']';
      break;
    }
  }
}

void append_attrs(std::string& out, const Module& m, const Function& f, const Op& op) {
  std::span<const Attr> attrs = f.attrs(op);
  if (attrs.empty()) return;
  const OpInfo& info = op_info(op.kind);
  out += " {";
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i > 0) out += ", ";
    append_attr(out, m, f, info, attrs[i]);
  }
  out += '}';
}

void append_input_data(std::string& out, const Module& m, const Function& f, const Arg& arg) {
  InputData d = arg.data;
  if (d.data != 0 && m.str(d.data) == m.value_name(f, arg.value)) d.data = 0;  // the default
  if (!is_batch_data(arg.kind) || d == InputData{}) return;
  std::string_view sep = " {";
  auto key = [&](std::string_view name) {
    out += sep;
    out += name;
    out += " = ";
    sep = ", ";
  };
  if (d.data != 0) {
    key("data");
    append_string_literal(out, m.str(d.data));
  }
  if (d.batch_axis >= 0) {
    key("batch_axis");
    append_int(out, d.batch_axis);
  }
  if (d.micro_batch >= 0) {
    key("micro_batch");
    append_int(out, d.micro_batch);
  }
  if (d.micro_batches != 1) {
    key("micro_batches");
    append_int(out, d.micro_batches);
  }
  if (d.values != 0) {
    key("values");
    append_int(out, d.values);
  }
  out += '}';
}

void append_meta(std::string& out, const Module& m, const Op& op) {
  if (op.stage < 0 && op.micro_batch < 0 && op.phase == Phase::None && op.loc == kNoLoc) return;
  out += " <";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ", ";
    first = false;
  };
  if (op.stage >= 0) {
    sep();
    out += "stage=";
    append_int(out, op.stage);
  }
  if (op.micro_batch >= 0) {
    sep();
    out += "mb=";
    append_int(out, op.micro_batch);
  }
  if (op.phase != Phase::None) {
    sep();
    out += "phase=";
    out += phase_name(op.phase);
  }
  if (op.loc != kNoLoc) {
    sep();
    const SourceLoc& loc = m.loc(op.loc);
    out += "loc=";
    append_string_literal(out, m.str(loc.file));
    fmt::format_to(std::back_inserter(out), ":{}:{}", loc.line, loc.column);
    if (loc.scope) {
      out += ", scope=";
      append_string_literal(out, m.str(loc.scope));
    }
  }
  out += '>';
}

void append_op(std::string& out, const Module& m, const Function& f, const Op& op) {
  const OpInfo& info = op_info(op.kind);
  for (uint16_t i = 0; i < op.result_count; ++i) {
    if (i > 0) out += ", ";
    append_value(out, m, f, op.first_result + i);
  }
  if (op.result_count > 0) out += " = ";
  out += info.name;
  out += '(';
  std::span<const ValueId> operands = f.operands(op);
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i > 0) out += ", ";
    append_value(out, m, f, operands[i]);
  }
  out += ')';
  append_attrs(out, m, f, op);
  out += " on ";
  append_devices(out, m, op.devices);
  if (info.category == OpCategory::Collective) {
    if (op.aux != kNone) {
      out += " groups [";
      const auto& groups = m.groups(op.aux);
      for (size_t g = 0; g < groups.size(); ++g) {
        out += g > 0 ? ", [" : "[";
        for (size_t i = 0; i < groups[g].size(); ++i) {
          if (i > 0) out += ", ";
          append_int(out, groups[g][i]);
        }
        out += ']';
      }
      out += ']';
    } else {
      out += " over [";
      bool first = true;
      for (int a = 0; a < m.mesh().axis_count(); ++a) {
        if (!(op.group_axes & (1u << a))) continue;
        if (!first) out += ", ";
        first = false;
        out += m.mesh().axes()[static_cast<size_t>(a)].name;
      }
      out += ']';
    }
  } else if (info.category == OpCategory::PointToPoint) {
    out += op.kind == OpKind::Send ? " to " : " from ";
    if (op.aux != kNone) append_devices(out, m, op.aux);
    out += " channel ";
    append_int(out, op.channel);
  }
  if (op.stream != Stream::Compute) {
    out += " stream ";
    out += stream_name(op.stream);
  }
  append_meta(out, m, op);
  for (uint16_t i = 0; i < op.result_count; ++i) {
    out += i > 0 ? ", " : " : ";
    const Value& v = f.values[op.first_result + i];
    append_type(out, m.type(v.type));
    if (v.layout != kNoLayout) {
      out += ' ';
      append_layout(out, m, v.layout);
    }
    append_logical(out, m, v);
  }
}

}  // namespace

std::string print_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string print_attrs(const Module& module, const Function& f, const Op& op) {
  std::string out;
  append_attrs(out, module, f, op);
  return out;
}

std::string print_meta(const Module& module, const Op& op) {
  std::string out;
  append_meta(out, module, op);
  return out;
}

std::string print_input_data(const Module& module, const Function& f, const Arg& arg) {
  std::string out;
  append_input_data(out, module, f, arg);
  return out;
}

std::string print_value(const Module& module, const Function& f, ValueId v) {
  std::string out;
  append_value(out, module, f, v);
  return out;
}

std::string print_devices(const Module& module, DeviceSetId set) {
  std::string out;
  append_devices(out, module, set);
  return out;
}

std::string print_rank_coords(const Mesh& mesh, Rank rank) {
  std::string out = mesh.name();
  for (int a = 0; a < mesh.axis_count(); ++a)
    fmt::format_to(std::back_inserter(out), "{}{}={}", a ? ", " : "[", mesh.axes()[static_cast<size_t>(a)].name,
                   mesh.coord(rank, a));
  if (mesh.axis_count() > 0) out += ']';
  return out;
}

std::string print_layout(const Module& module, LayoutId layout) {
  std::string out;
  append_layout(out, module, layout);
  return out;
}

std::string print_op(const Module& module, const Function& f, const Op& op) {
  std::string out;
  append_op(out, module, f, op);
  return out;
}

void print_module(const Module& module, std::string& out) {
  const Mesh& mesh = module.mesh();
  if (!mesh.empty()) {
    out += "mesh ";
    out += mesh.name();
    out += '[';
    for (size_t a = 0; a < mesh.axes().size(); ++a) {
      if (a > 0) out += ", ";
      out += mesh.axes()[a].name;
      out += '=';
      append_int(out, mesh.axes()[a].size);
    }
    out += ']';
    if (mesh.has_physical_map()) {
      out += " devices [";
      for (size_t i = 0; i < mesh.physical_ids().size(); ++i) {
        if (i > 0) out += ", ";
        append_int(out, mesh.physical_ids()[i]);
      }
      out += ']';
    }
    out += '\n';
  }
  for (const Function& f : module.functions) {
    out += "\nfunc @";
    out += f.name;
    out += " {\n";
    for (const Arg& arg : f.args) {
      const Value& v = f.values[arg.value];
      out += "  ";
      out += arg_kind_name(arg.kind);
      out += ' ';
      append_value(out, module, f, arg.value);
      out += " on ";
      append_devices(out, module, v.devices);
      out += " : ";
      append_type(out, module.type(v.type));
      if (v.layout != kNoLayout) {
        out += ' ';
        append_layout(out, module, v.layout);
      }
      append_logical(out, module, v);
      append_input_data(out, module, f, arg);
      out += '\n';
    }
    for (const Op& op : f.ops) {
      out += "  ";
      append_op(out, module, f, op);
      out += '\n';
    }
    out += "  return";
    for (size_t i = 0; i < f.returns.size(); ++i) {
      out += i > 0 ? ", " : " ";
      append_value(out, module, f, f.returns[i]);
    }
    out += "\n}\n";
  }
}

std::string print_module(const Module& module) {
  std::string out;
  print_module(module, out);
  return out;
}

}  // namespace dstc::ir
