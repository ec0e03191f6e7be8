#include "backends/reference/collectives.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "backends/reference/kernels.h"
#include "ir/registry.h"

namespace dstc::reference {

namespace {

HostTensor reduce_all(std::span<const HostTensor* const> inputs, bool max) {
  HostTensor r = *inputs[0];
  for (size_t m = 1; m < inputs.size(); ++m)
    for (size_t i = 0; i < r.data.size(); ++i)
      r.data[i] = max ? std::max(r.data[i], inputs[m]->data[i]) : r.data[i] + inputs[m]->data[i];
  return r;
}

void fill_unspecified(HostTensor& t) {
  std::fill(t.data.begin(), t.data.end(), std::numeric_limits<double>::quiet_NaN());
}

int normalized(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

}  // namespace

std::string run_collective(const ir::Module& module, const ir::Function& f, const ir::Op& op,
                           std::span<const HostTensor* const> inputs, std::span<HostTensor> outputs) {
  ir::AttrReader attrs(module, f, op);
  const auto p = static_cast<int64_t>(inputs.size());
  const int rank = inputs[0]->rank();
  auto root = [&]() -> size_t { return static_cast<size_t>(attrs.integer("root")); };
  switch (op.kind) {
    case ir::OpKind::AllReduce: {
      HostTensor r = reduce_all(inputs, attrs.string("op") == "max");
      for (HostTensor& out : outputs) out.data = r.data;
      return {};
    }
    case ir::OpKind::AllGather:
      for (HostTensor& out : outputs) {
        if (attrs.boolean("flat"))
          kernels::flat_concat(inputs, out);
        else
          kernels::concat(inputs, normalized(attrs.integer("dim"), rank), out);
      }
      return {};
    case ir::OpKind::ReduceScatter: {
      HostTensor r = reduce_all(inputs, attrs.string("op") == "max");
      for (int64_t k = 0; k < p; ++k) {
        HostTensor& out = outputs[static_cast<size_t>(k)];
        if (attrs.boolean("flat"))
          kernels::flat_shard(r, k, out);
        else
          kernels::shard(r, normalized(attrs.integer("dim"), rank), p, k, out);
      }
      return {};
    }
    case ir::OpKind::AllToAll: {
      const int split = normalized(attrs.integer("split_dim"), rank);
      const int cat = normalized(attrs.integer("concat_dim"), rank);
      for (int64_t j = 0; j < p; ++j) {
        std::vector<HostTensor> chunks;
        for (int64_t i = 0; i < p; ++i) {
          std::vector<int64_t> shape = inputs[static_cast<size_t>(i)]->shape;
          shape[static_cast<size_t>(split)] /= p;
          HostTensor chunk(inputs[0]->dtype, shape);
          kernels::shard(*inputs[static_cast<size_t>(i)], split, p, j, chunk);
          chunks.push_back(std::move(chunk));
        }
        std::vector<const HostTensor*> parts;
        for (const HostTensor& c : chunks) parts.push_back(&c);
        kernels::concat(parts, cat, outputs[static_cast<size_t>(j)]);
      }
      return {};
    }
    case ir::OpKind::Broadcast:
      for (HostTensor& out : outputs) out.data = inputs[root()]->data;
      return {};
    case ir::OpKind::Reduce: {
      HostTensor r = reduce_all(inputs, attrs.string("op") == "max");
      for (size_t m = 0; m < outputs.size(); ++m) {
        if (m == root()) {
          outputs[m].data = r.data;
        } else {
          fill_unspecified(outputs[m]);
        }
      }
      return {};
    }
    case ir::OpKind::Scatter:
      for (int64_t k = 0; k < p; ++k)
        kernels::shard(*inputs[root()], normalized(attrs.integer("dim"), rank), p, k, outputs[static_cast<size_t>(k)]);
      return {};
    case ir::OpKind::Gather:
      for (size_t m = 0; m < outputs.size(); ++m) {
        if (m == root()) {
          kernels::concat(inputs, normalized(attrs.integer("dim"), rank), outputs[m]);
        } else {
          fill_unspecified(outputs[m]);
        }
      }
      return {};
    default: return fmt::format("{} is not a collective", ir::op_name(op.kind));
  }
}

}  // namespace dstc::reference
