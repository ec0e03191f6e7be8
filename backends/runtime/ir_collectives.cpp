#include "backends/runtime/ir_collectives.h"

#include <limits>

#include <fmt/format.h>

#include "backends/reference/kernels.h"
#include "ir/registry.h"

namespace dstc::runtime {

namespace {

using reference::HostTensor;

int normalized(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

// `blocks` (p contiguous tensors of `shape`) as tensors.
std::vector<HostTensor> split_blocks(std::span<const double> blocks, ir::DType dtype, std::vector<int64_t> shape,
                                     size_t p) {
  std::vector<HostTensor> parts(p, HostTensor(dtype, shape));
  const size_t n = blocks.size() / p;
  for (size_t k = 0; k < p; ++k)
    std::copy(blocks.begin() + static_cast<std::ptrdiff_t>(k * n),
              blocks.begin() + static_cast<std::ptrdiff_t>((k + 1) * n), parts[k].data.begin());
  return parts;
}

void concat_blocks(std::span<const double> blocks, std::vector<int64_t> block_shape, int dim, HostTensor& out,
                   size_t p) {
  std::vector<HostTensor> parts = split_blocks(blocks, out.dtype, std::move(block_shape), p);
  std::vector<const HostTensor*> views;
  for (const HostTensor& t : parts) views.push_back(&t);
  reference::kernels::concat(views, dim, out);
}

// x's p chunks along dim, one after another.
std::vector<double> pack_chunks(const HostTensor& x, int dim, size_t p) {
  std::vector<int64_t> shape = x.shape;
  shape[static_cast<size_t>(dim)] /= static_cast<int64_t>(p);
  std::vector<double> packed;
  packed.reserve(x.data.size());
  HostTensor chunk(x.dtype, shape);
  for (size_t k = 0; k < p; ++k) {
    reference::kernels::shard(x, dim, static_cast<int64_t>(p), static_cast<int64_t>(k), chunk);
    packed.insert(packed.end(), chunk.data.begin(), chunk.data.end());
  }
  return packed;
}

void fill_unspecified(HostTensor& t) {
  std::fill(t.data.begin(), t.data.end(), std::numeric_limits<double>::quiet_NaN());
}

}  // namespace

void run_collective(const ir::Module& module, const ir::Function& f, const ir::Op& op, const ir::RankOp& on_rank,
                    const HostTensor& in, HostTensor& out, Communicator& comm) {
  ir::AttrReader attrs(module, f, op);
  const std::span<const ir::Rank> group = on_rank.group;
  const size_t p = group.size();
  const int rank = in.rank();
  const auto reduce_op = [&] { return attrs.string("op") == "max" ? ReduceOp::Max : ReduceOp::Sum; };
  const auto root = [&] { return static_cast<int32_t>(attrs.integer("root")); };
  switch (op.kind) {
    case ir::OpKind::AllReduce:
      out.data = in.data;
      comm.all_reduce(out.data, group, reduce_op());
      return;
    case ir::OpKind::Reduce:
      out.data = in.data;
      comm.all_reduce(out.data, group, reduce_op());
      if (on_rank.group_index != root()) fill_unspecified(out);
      return;
    case ir::OpKind::AllGather:
    case ir::OpKind::Gather: {
      std::vector<double> gathered(in.data.size() * p);
      comm.all_gather(in.data, gathered, group);
      if (op.kind == ir::OpKind::Gather && on_rank.group_index != root())
        fill_unspecified(out);
      else if (op.kind == ir::OpKind::AllGather && attrs.boolean("flat"))
        std::copy(gathered.begin(), gathered.begin() + static_cast<std::ptrdiff_t>(out.data.size()), out.data.begin());
      else
        concat_blocks(gathered, in.shape, normalized(attrs.integer("dim"), rank), out, p);
      return;
    }
    case ir::OpKind::ReduceScatter: {
      std::vector<double> packed;
      if (attrs.boolean("flat")) {
        packed = in.data;
        packed.resize(out.data.size() * p, 0.0);  // the last chunk's padding
      } else {
        packed = pack_chunks(in, normalized(attrs.integer("dim"), rank), p);
      }
      comm.reduce_scatter(packed, out.data, group, reduce_op());
      return;
    }
    case ir::OpKind::AllToAll: {
      const int split = normalized(attrs.integer("split_dim"), rank);
      std::vector<double> packed = pack_chunks(in, split, p), received(packed.size());
      comm.all_to_all(packed, received, group);
      std::vector<int64_t> chunk_shape = in.shape;
      chunk_shape[static_cast<size_t>(split)] /= static_cast<int64_t>(p);
      concat_blocks(received, chunk_shape, normalized(attrs.integer("concat_dim"), rank), out, p);
      return;
    }
    case ir::OpKind::Broadcast:
      out.data = in.data;
      comm.broadcast(out.data, group, root());
      return;
    case ir::OpKind::Scatter: {
      HostTensor whole = in;
      comm.broadcast(whole.data, group, root());
      reference::kernels::shard(whole, normalized(attrs.integer("dim"), rank), static_cast<int64_t>(p),
                                on_rank.group_index, out);
      return;
    }
    default: comm.abort(fmt::format("{} is not a collective", ir::op_name(op.kind)));
  }
}

}  // namespace dstc::runtime
