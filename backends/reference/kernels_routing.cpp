// Routing kernels of mixtures of experts: top-k selection, dispatch of
// tokens to experts' capacity slots and their combination back.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backends/reference/kernel_table.h"
#include "backends/reference/kernels.h"
#include "backends/reference/op_context.h"

namespace dstc::reference::kernels {
namespace {

// Calls keep(j) for the k largest x[at(j)], j < n (ties: the lower j).
// With groups: the n entries form `groups.count` consecutive groups, each
// scored by the sum of its k / groups.kept largest; only the `kept` best
// groups' entries are candidates (DeepSeek-V3's node-limited routing,
// Megatron-Core's group_limited_topk).
template <typename At, typename Keep>
void for_top_k(const HostTensor& x, int64_t n, int64_t k, kernels::TopKGroups groups, At at, Keep keep) {
  auto larger = [&](int64_t a, int64_t b) {
    double va = x.data[at(a)], vb = x.data[at(b)];
    return va > vb || (va == vb && a < b);
  };
  std::vector<int64_t> order;
  if (groups.count > 0) {
    const int64_t per = n / groups.count, best = std::max<int64_t>(1, k / groups.kept);
    std::vector<double> score(static_cast<size_t>(groups.count));
    std::vector<int64_t> members(static_cast<size_t>(per));
    for (int64_t g = 0; g < groups.count; ++g) {
      std::iota(members.begin(), members.end(), g * per);
      std::partial_sort(members.begin(), members.begin() + best, members.end(), larger);
      for (int64_t i = 0; i < best; ++i) score[static_cast<size_t>(g)] += x.data[at(members[static_cast<size_t>(i)])];
    }
    std::vector<int64_t> chosen(static_cast<size_t>(groups.count));
    std::iota(chosen.begin(), chosen.end(), 0);
    std::partial_sort(chosen.begin(), chosen.begin() + groups.kept, chosen.end(), [&](int64_t a, int64_t b) {
      double sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    });
    for (int64_t i = 0; i < groups.kept; ++i)
      for (int64_t j = 0; j < per; ++j) order.push_back(chosen[static_cast<size_t>(i)] * per + j);
  } else {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
  }
  std::partial_sort(order.begin(), order.begin() + k, order.end(), larger);
  for (int64_t i = 0; i < k; ++i) keep(order[static_cast<size_t>(i)]);
}

// Applies `row_op` to every row along `dim` of x, a row given by at(j).
template <typename RowOp>
void each_row(const HostTensor& x, int dim, RowOp row_op) {
  int64_t outer = extent(x.shape, 0, dim), n = x.dim(dim), inner = extent(x.shape, dim + 1, x.rank());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in)
      row_op(n, [=](int64_t j) { return static_cast<size_t>((o * n + j) * inner + in); });
}

// The kept routes of gates[G, s, e] into slots [G, e, c, .]: visit(token,
// slot, gate_index, gate) for each token routed to an expert within its
// capacity c, token and slot as row indexes of [G·s, .] and [G·e·c, .].
template <typename Visit>
void for_each_route(const HostTensor& gates, int64_t capacity, Visit visit) {
  const int r = gates.rank();
  const int64_t groups = extent(gates.shape, 0, r - 2), tokens = gates.dim(r - 2), experts = gates.dim(r - 1);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < experts; ++j) {
      int64_t slot = 0;
      for (int64_t t = 0; t < tokens && slot < capacity; ++t) {
        const int64_t token = g * tokens + t, at = token * experts + j;
        const double gate = gates.data[static_cast<size_t>(at)];
        if (gate != 0) visit(token, (g * experts + j) * capacity + slot++, at, gate);
      }
    }
}

}  // namespace

void top_k(const HostTensor& x, int dim, int64_t k, TopKGroups groups, HostTensor& out) {
  std::fill(out.data.begin(), out.data.end(), 0.0);
  each_row(x, dim, [&](int64_t n, auto at) {
    for_top_k(x, n, k, groups, at, [&](int64_t j) { out.data[at(j)] = x.data[at(j)]; });
  });
}

void top_k_grad(const HostTensor& dy, const HostTensor& x, int dim, int64_t k, TopKGroups groups, HostTensor& out) {
  std::fill(out.data.begin(), out.data.end(), 0.0);
  each_row(x, dim, [&](int64_t n, auto at) {
    for_top_k(x, n, k, groups, at, [&](int64_t j) { out.data[at(j)] = dy.data[at(j)]; });
  });
}

void dispatch(const HostTensor& x, const HostTensor& gates, bool weighted, HostTensor& out) {
  std::fill(out.data.begin(), out.data.end(), 0.0);
  const int64_t capacity = out.dim(out.rank() - 2), width = out.dim(out.rank() - 1);
  for_each_route(gates, capacity, [&](int64_t token, int64_t slot, int64_t, double gate) {
    const double* from = &x.data[static_cast<size_t>(token * width)];
    double* to = &out.data[static_cast<size_t>(slot * width)];
    for (int64_t i = 0; i < width; ++i) to[i] = weighted ? gate * from[i] : from[i];
  });
}

void combine(const HostTensor& y, const HostTensor& gates, bool weighted, HostTensor& out) {
  std::fill(out.data.begin(), out.data.end(), 0.0);
  const int64_t capacity = y.dim(y.rank() - 2), width = y.dim(y.rank() - 1);
  for_each_route(gates, capacity, [&](int64_t token, int64_t slot, int64_t, double gate) {
    const double* from = &y.data[static_cast<size_t>(slot * width)];
    double* to = &out.data[static_cast<size_t>(token * width)];
    for (int64_t i = 0; i < width; ++i) to[i] += weighted ? gate * from[i] : from[i];
  });
}

void combine_gate_grad(const HostTensor& dz, const HostTensor& y, const HostTensor& gates, HostTensor& out) {
  std::fill(out.data.begin(), out.data.end(), 0.0);
  const int64_t capacity = y.dim(y.rank() - 2), width = y.dim(y.rank() - 1);
  for_each_route(gates, capacity, [&](int64_t token, int64_t slot, int64_t at, double) {
    const double* slot_row = &y.data[static_cast<size_t>(slot * width)];
    const double* dz_row = &dz.data[static_cast<size_t>(token * width)];
    double dot = 0;
    for (int64_t i = 0; i < width; ++i) dot += dz_row[i] * slot_row[i];
    out.data[static_cast<size_t>(at)] = dot;
  });
}

}  // namespace dstc::reference::kernels

namespace dstc::reference {

namespace {

using ir::OpKind;

kernels::TopKGroups top_k_groups(const KernelCall& c) {
  return {c.attrs.integer("groups"), c.attrs.integer("group_k")};
}

}  // namespace

void bind_routing_kernels(KernelTable& t) {
  t.bind(OpKind::TopK,
         [](const KernelCall& c) { kernels::top_k(c.x(0), c.dim(), c.attrs.integer("k"), top_k_groups(c), c.y()); });
  t.bind(OpKind::TopKGrad, [](const KernelCall& c) {
    kernels::top_k_grad(c.x(0), c.x(1), c.dim(1), c.attrs.integer("k"), top_k_groups(c), c.y());
  });
  t.bind(OpKind::Dispatch,
         [](const KernelCall& c) { kernels::dispatch(c.x(0), c.x(1), c.attrs.boolean("weighted"), c.y()); });
  t.bind(OpKind::Combine,
         [](const KernelCall& c) { kernels::combine(c.x(0), c.x(1), c.attrs.boolean("weighted"), c.y()); });
  t.bind(OpKind::CombineGateGrad,
         [](const KernelCall& c) { kernels::combine_gate_grad(c.x(0), c.x(1), c.x(2), c.y()); });
}

}  // namespace dstc::reference
