#include "ir/dot.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include "ir/groups.h"
#include "ir/printer.h"
#include "ir/registry.h"
#include "ir/verifier.h"

namespace dstc::ir {

namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

struct Edge {
  OpId from;
  OpId to;
  bool channel;  // send -> recv
};

std::vector<Edge> dependency_edges(const Function& f) {
  std::vector<Edge> edges;
  for (OpId i = 0; i < f.ops.size(); ++i) {
    for (ValueId v : f.operands(f.ops[i])) {
      OpId def = f.values[v].def;
      if (def != kNone) edges.push_back({def, i, false});
    }
  }
  std::vector<OpId> partner = pair_channels(f);
  for (OpId i = 0; i < f.ops.size(); ++i) {
    if (f.ops[i].kind == OpKind::Send && partner[i] != kNone) edges.push_back({i, partner[i], true});
  }
  return edges;
}

Graph build_graph(const Function& f) {
  Graph g(f.ops.size());
  for (const Edge& e : dependency_edges(f)) boost::add_edge(e.from, e.to, g);
  return g;
}

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string format_flops(double flops) {
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (flops >= 1000 && u < 5) {
    flops /= 1000;
    ++u;
  }
  return fmt::format("{:.3g} {}FLOP", flops, units[u]);
}

}  // namespace

std::vector<OpId> topological_order(const Module&, const Function& f) {
  Graph g = build_graph(f);
  std::vector<Graph::vertex_descriptor> reversed;
  boost::topological_sort(g, std::back_inserter(reversed));
  return {reversed.rbegin(), reversed.rend()};
}

CriticalPath critical_path(const Module& module, const Function& f) {
  CriticalPath path;
  if (f.ops.empty()) return path;
  Graph g = build_graph(f);
  std::vector<OpId> order = topological_order(module, f);
  std::vector<double> cost(f.ops.size());
  for (OpId i = 0; i < f.ops.size(); ++i) cost[i] = op_cost(module, f, f.ops[i]).flops;
  std::vector<double> best = cost;  // heaviest chain ending at each op
  std::vector<OpId> prev(f.ops.size(), kNone);
  for (OpId i : order) {
    for (auto [e, end] = boost::out_edges(i, g); e != end; ++e) {
      auto j = static_cast<OpId>(boost::target(*e, g));
      if (best[i] + cost[j] > best[j]) {
        best[j] = best[i] + cost[j];
        prev[j] = i;
      }
    }
  }
  auto last = static_cast<OpId>(std::max_element(best.begin(), best.end()) - best.begin());
  path.flops = best[last];
  for (OpId i = last; i != kNone; i = prev[i]) path.ops.push_back(i);
  std::reverse(path.ops.begin(), path.ops.end());
  return path;
}

std::string export_dot(const Module& module) {
  std::string out = "digraph module {\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  for (size_t fi = 0; fi < module.functions.size(); ++fi) {
    const Function& f = module.functions[fi];
    CriticalPath path = critical_path(module, f);
    std::vector<bool> critical(f.ops.size(), false);
    for (OpId i : path.ops) critical[i] = true;
    out += fmt::format("  subgraph cluster_{} {{\n    label=\"@{} (critical path {})\";\n", fi, escape(f.name),
                       format_flops(path.flops));
    for (OpId i = 0; i < f.ops.size(); ++i) {
      const Op& op = f.ops[i];
      std::string detail = print_devices(module, op.devices);
      if (op.stream != Stream::Compute) detail += fmt::format(" stream {}", stream_name(op.stream));
      detail += print_meta(module, op);
      out += fmt::format("    f{}_op{} [label=\"{}\\n{}\\n{}\"{}];\n", fi, i, escape(op_label(module, f, i)),
                         escape(detail), format_flops(op_cost(module, f, op).flops),
                         critical[i] ? ", color=red, penwidth=2" : "");
    }
    for (const Edge& e : dependency_edges(f)) {
      bool on_path = critical[e.from] && critical[e.to];
      out += fmt::format(
          "    f{}_op{} -> f{}_op{}{};\n", fi, e.from, fi, e.to,
          e.channel ? (on_path ? " [style=dashed, color=red]" : " [style=dashed]") : (on_path ? " [color=red]" : ""));
    }
    out += "  }\n";
  }
  out += "}\n";
  return out;
}

}  // namespace dstc::ir
