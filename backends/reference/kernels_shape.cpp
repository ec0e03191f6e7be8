// Layout and shape kernels: slices, concatenation, permutations, reductions,
// and the rank-dependent chunking that boxing emits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/reference/arithmetic.h"
#include "backends/reference/kernel_table.h"
#include "backends/reference/kernels.h"
#include "backends/reference/op_context.h"
#include "ir/fp8_scales.h"

namespace dstc::reference::kernels {

namespace {

// Copies `x` into `out` at `offset` along `dim` (out is at least as long there).
void place(const HostTensor& x, int dim, int64_t offset, HostTensor& out) {
  const int64_t outer = extent(x.shape, 0, dim), inner = extent(x.shape, dim + 1, x.rank());
  const int64_t n = x.dim(dim), m = out.dim(dim);
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(x.data.begin() + o * n * inner, n * inner, out.data.begin() + (o * m + offset) * inner);
}

}  // namespace

void slice(const HostTensor& x, int dim, int64_t start, HostTensor& out) {
  const int64_t outer = extent(x.shape, 0, dim), inner = extent(x.shape, dim + 1, x.rank());
  const int64_t n = x.dim(dim), m = out.dim(dim);
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(x.data.begin() + (o * n + start) * inner, m * inner, out.data.begin() + o * m * inner);
}

void concat(std::span<const HostTensor* const> in, int dim, HostTensor& out) {
  int64_t offset = 0;
  for (const HostTensor* t : in) {
    place(*t, dim, offset, out);
    offset += t->dim(dim);
  }
}

void copy_elements(const HostTensor& x, HostTensor& out) { out.data = x.data; }

void transpose(const HostTensor& x, std::span<const int64_t> perm, HostTensor& out) {
  const int rank = x.rank();
  std::vector<int64_t> in_strides = strides_of(x.shape), idx(static_cast<size_t>(rank), 0);
  int64_t offset = 0;
  for (size_t i = 0; i < out.data.size(); ++i) {
    out.data[i] = x.data[static_cast<size_t>(offset)];
    for (int d = rank - 1; d >= 0; --d) {
      int64_t stride = in_strides[static_cast<size_t>(perm[static_cast<size_t>(d)])];
      if (++idx[static_cast<size_t>(d)] < out.dim(d)) {
        offset += stride;
        break;
      }
      idx[static_cast<size_t>(d)] = 0;
      offset -= stride * (out.dim(d) - 1);
    }
  }
}

namespace {

// Calls f(i, r) for every element i (row-major) of `shape`, r being the
// row-major index of its element in `shape` reduced over `dims` (keepdim or
// not, the kept dims are in order).
template <typename F>
void for_each_reduced(std::span<const int64_t> shape, std::span<const int64_t> dims, F f) {
  const int rank = static_cast<int>(shape.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d < 0 ? d + rank : d)] = true;
  std::vector<int64_t> kept;
  for (int d = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)]) kept.push_back(shape[static_cast<size_t>(d)]);
  std::vector<int64_t> kept_strides = strides_of(kept), out_stride(static_cast<size_t>(rank), 0);
  for (int d = 0, k = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)]) out_stride[static_cast<size_t>(d)] = kept_strides[static_cast<size_t>(k++)];
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  int64_t offset = 0;
  const int64_t total = numel_of(shape);
  for (int64_t i = 0; i < total; ++i) {
    f(static_cast<size_t>(i), static_cast<size_t>(offset));
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t n = shape[static_cast<size_t>(d)];
      if (++idx[static_cast<size_t>(d)] < n) {
        offset += out_stride[static_cast<size_t>(d)];
        break;
      }
      idx[static_cast<size_t>(d)] = 0;
      offset -= out_stride[static_cast<size_t>(d)] * (n - 1);
    }
  }
}

}  // namespace

void sum(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out) {
  for_each_reduced(x.shape, dims, [&](size_t i, size_t r) { out.data[r] += x.data[i]; });
}

void count_nonzero(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out) {
  for_each_reduced(x.shape, dims, [&](size_t i, size_t r) { out.data[r] += x.data[i] != 0 ? 1 : 0; });
}

void reduce_max(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out) {
  std::fill(out.data.begin(), out.data.end(), -std::numeric_limits<double>::infinity());
  for_each_reduced(x.shape, dims, [&](size_t i, size_t r) { out.data[r] = std::max(out.data[r], x.data[i]); });
}

void expand(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out) {
  for_each_reduced(out.shape, dims, [&](size_t i, size_t r) { out.data[i] = x.data[r]; });
}

// Every tied maximum gets dy: the result does not depend on how x is split.
void reduce_max_grad(const HostTensor& dy, const HostTensor& x, const HostTensor& y, std::span<const int64_t> dims,
                     HostTensor& dx) {
  for_each_reduced(x.shape, dims, [&](size_t i, size_t r) { dx.data[i] = x.data[i] == y.data[r] ? dy.data[r] : 0.0; });
}

void fill(double value, HostTensor& out) { std::fill(out.data.begin(), out.data.end(), value); }

// Float to integer truncates; float to float is rounded by the executor.
void cast(const HostTensor& x, HostTensor& out) {
  bool to_int = !ir::is_float(out.dtype) && ir::is_float(x.dtype);
  for (size_t i = 0; i < x.data.size(); ++i) out.data[i] = to_int ? std::trunc(x.data[i]) : x.data[i];
}

void quantize(const HostTensor& x, int64_t block, HostTensor& out) {
  const int64_t row = x.rank() > 0 ? x.dim(x.rank() - 1) : 1;
  const int64_t per_scale = block == ir::kRowwiseBlock ? row : block > 0 ? block : x.numel();
  const size_t group = std::max<size_t>(static_cast<size_t>(per_scale), 1);
  const double largest = fp8_max(out.dtype);
  for (size_t begin = 0; begin < x.data.size(); begin += group) {
    const size_t end = std::min(begin + group, x.data.size());
    double amax = 0;
    for (size_t i = begin; i < end; ++i) amax = std::max(amax, std::abs(x.data[i]));
    const double scale = amax > 0 ? largest / amax : 1.0;
    for (size_t i = begin; i < end; ++i) out.data[i] = round_to_fp8(x.data[i] * scale, out.dtype) / scale;
  }
}

void shard(const HostTensor& x, int dim, int64_t parts, int64_t index, HostTensor& out) {
  slice(x, dim, index * (x.dim(dim) / parts), out);
}

void unshard(const HostTensor& x, int dim, int64_t index, HostTensor& out) { place(x, dim, index * x.dim(dim), out); }

void flat_shard(const HostTensor& x, int64_t index, HostTensor& out) {
  const size_t begin = static_cast<size_t>(index) * out.data.size();
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = begin + i < x.data.size() ? x.data[begin + i] : 0;
}

void flat_concat(std::span<const HostTensor* const> chunks, HostTensor& out) {
  for (size_t i = 0; i < out.data.size(); ++i) {
    const HostTensor& chunk = *chunks[i / chunks[0]->data.size()];
    out.data[i] = chunk.data[i % chunk.data.size()];
  }
}

}  // namespace dstc::reference::kernels

namespace dstc::reference {

using ir::OpKind;

void bind_shape_kernels(KernelTable& t) {
  t.bind(OpKind::Slice, [](const KernelCall& c) { kernels::slice(c.x(0), c.dim(), c.attrs.integer("start"), c.y()); });
  t.bind(OpKind::Concat, [](const KernelCall& c) { kernels::concat(c.in, c.dim(), c.y()); });
  t.bind(OpKind::Reshape, [](const KernelCall& c) { kernels::copy_elements(c.x(0), c.y()); });
  t.bind(OpKind::Transpose, [](const KernelCall& c) { kernels::transpose(c.x(0), c.attrs.ints("perm"), c.y()); });
  t.bind(OpKind::Sum, [](const KernelCall& c) { kernels::sum(c.x(0), c.attrs.ints("dims"), c.y()); });
  t.bind(OpKind::CountNonzero,
         [](const KernelCall& c) { kernels::count_nonzero(c.x(0), c.attrs.ints("dims"), c.y()); });
  t.bind(OpKind::ReduceMax, [](const KernelCall& c) { kernels::reduce_max(c.x(0), c.attrs.ints("dims"), c.y()); });
  t.bind(OpKind::ReduceMaxGrad,
         [](const KernelCall& c) { kernels::reduce_max_grad(c.x(0), c.x(1), c.x(2), c.attrs.ints("dims"), c.y()); });
  t.bind(OpKind::Expand, [](const KernelCall& c) { kernels::expand(c.x(0), c.attrs.ints("dims"), c.y()); });
  t.bind(OpKind::Fill, [](const KernelCall& c) { kernels::fill(c.attrs.real("value"), c.y()); });
  t.bind(OpKind::Cast, [](const KernelCall& c) { kernels::cast(c.x(0), c.y()); });
  t.bind(OpKind::Quantize, [](const KernelCall& c) { kernels::quantize(c.x(0), c.attrs.integer("block"), c.y()); });
  t.bind(OpKind::Shard, [](const KernelCall& c) {
    if (c.attrs.boolean("flat"))
      kernels::flat_shard(c.x(0), axis_coord(c.ctx, c.attrs), c.y());
    else
      kernels::shard(c.x(0), c.dim(), c.attrs.integer("parts"), axis_coord(c.ctx, c.attrs), c.y());
  });
  t.bind(OpKind::Unshard,
         [](const KernelCall& c) { kernels::unshard(c.x(0), c.dim(), axis_coord(c.ctx, c.attrs), c.y()); });
  t.bind(OpKind::Partialize, [](const KernelCall& c) {
    if (axis_coord(c.ctx, c.attrs) == 0) c.y().data = c.x(0).data;
  });
}

}  // namespace dstc::reference
