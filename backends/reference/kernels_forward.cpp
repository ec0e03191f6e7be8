// Forward compute kernels.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/reference/dropout_mask.h"
#include "backends/reference/kernel_table.h"
#include "backends/reference/kernels.h"
#include "backends/reference/op_context.h"

namespace dstc::reference::kernels {

namespace {

// A tensor seen as [outer, n, inner] around one dim.
struct AroundDim {
  int64_t outer, n, inner;
  AroundDim(const HostTensor& t, int dim)
      : outer(extent(t.shape, 0, dim)), n(t.dim(dim)), inner(extent(t.shape, dim + 1, t.rank())) {}
};

}  // namespace

// Every distinct letter is iterated once (an odometer over all of them);
// letters missing from the output are summed.
void einsum(std::string_view spec, std::span<const HostTensor* const> in, HostTensor& out) {
  size_t arrow = spec.find("->");
  std::vector<std::string_view> terms;
  std::string_view lhs = spec.substr(0, arrow);
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::string_view output = spec.substr(arrow + 2);
  std::string letters(output);  // output letters outermost, summed letters innermost
  for (std::string_view t : terms)
    for (char c : t)
      if (letters.find(c) == std::string::npos) letters += c;
  const size_t n = letters.size(), operands = in.size();
  std::vector<int64_t> size(n, 1);
  // stride[k][l]: stride of letter l in operand k (k == operands: the output).
  std::vector<std::vector<int64_t>> stride(operands + 1, std::vector<int64_t>(n, 0));
  auto add_strides = [&](std::string_view term, const std::vector<int64_t>& shape, size_t k) {
    std::vector<int64_t> s = strides_of(shape);
    for (size_t d = 0; d < term.size(); ++d) {
      size_t l = letters.find(term[d]);
      size[l] = shape[d];
      stride[k][l] += s[d];
    }
  };
  for (size_t k = 0; k < operands; ++k) add_strides(terms[k], in[k]->shape, k);
  add_strides(output, out.shape, operands);
  int64_t total = 1;
  for (int64_t s : size) total *= s;
  if (total == 0) return;
  // Move innermost the output letter with the fewest strided accesses when it
  // beats the last summed letter: each output element still adds its terms
  // in the same order, and the rows stay in cache.
  auto strided = [&](size_t l) {
    int count = 0;
    for (size_t k = 0; k <= operands; ++k) count += stride[k][l] > 1 ? 1 : 0;
    return count;
  };
  if (n > 1) {
    size_t best = n - 1;
    for (size_t l = 0; l < output.size(); ++l)
      if (size[l] > 1 && strided(l) < strided(best)) best = l;
    auto to_end = [&](auto& v) {
      std::rotate(v.begin() + static_cast<std::ptrdiff_t>(best), v.begin() + static_cast<std::ptrdiff_t>(best) + 1,
                  v.end());
    };
    to_end(size);
    for (auto& st : stride) to_end(st);
  }
  // The innermost letter runs as a tight loop (same order of additions as
  // one odometer step per term); the odometer walks the other letters.
  const size_t inner = n == 0 ? 0 : n - 1;
  const int64_t inner_size = n == 0 ? 1 : size[inner];
  std::vector<int64_t> inner_stride(operands + 1, 0);
  if (n > 0)
    for (size_t k = 0; k <= operands; ++k) inner_stride[k] = stride[k][inner];
  std::vector<int64_t> idx(n, 0), offset(operands + 1, 0);
  for (int64_t step = 0; step < total; step += inner_size) {
    if (operands == 2) {  // the common case, without the loop over operands
      const double* a = in[0]->data.data() + offset[0];
      const double* b = in[1]->data.data() + offset[1];
      double* o = out.data.data() + offset[2];
      const int64_t sa = inner_stride[0], sb = inner_stride[1], so = inner_stride[2];
      if (so == 0) {  // a dot product: sum in a register, in the same order
        double acc = *o;
        for (int64_t j = 0; j < inner_size; ++j) acc += a[j * sa] * b[j * sb];
        *o = acc;
      } else {
        for (int64_t j = 0; j < inner_size; ++j) o[j * so] += a[j * sa] * b[j * sb];
      }
    } else {
      for (int64_t j = 0; j < inner_size; ++j) {
        double prod = 1;
        for (size_t k = 0; k < operands; ++k) prod *= in[k]->data[static_cast<size_t>(offset[k] + j * inner_stride[k])];
        out.data[static_cast<size_t>(offset[operands] + j * inner_stride[operands])] += prod;
      }
    }
    for (size_t l = inner; l-- > 0;) {
      if (++idx[l] < size[l]) {
        for (size_t k = 0; k <= operands; ++k) offset[k] += stride[k][l];
        break;
      }
      idx[l] = 0;
      for (size_t k = 0; k <= operands; ++k) offset[k] -= stride[k][l] * (size[l] - 1);
    }
  }
}

void matmul(const HostTensor& a, const HostTensor& b, bool transpose_a, bool transpose_b, HostTensor& out) {
  const int ra = a.rank(), rb = b.rank();
  const int64_t m = out.dim(ra - 2), n = out.dim(ra - 1);
  const int64_t k = transpose_a ? a.dim(ra - 2) : a.dim(ra - 1);
  const int64_t batch = extent(a.shape, 0, ra - 2);
  const bool shared_b = rb == 2;
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* pa = a.data.data() + bi * m * k;
    const double* pb = b.data.data() + (shared_b ? 0 : bi * k * n);
    double* po = out.data.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l)
          s += pa[transpose_a ? l * m + i : i * k + l] * pb[transpose_b ? j * k + l : l * n + j];
        po[i * n + j] = s;
      }
  }
}

void binary(Binary op, const HostTensor& a, const HostTensor& b, HostTensor& out) {
  const size_t nb = b.data.size();
  for (size_t i = 0; i < a.data.size(); ++i) {
    double x = a.data[i], y = b.data[i % nb];
    switch (op) {
      case Binary::Add: out.data[i] = x + y; break;
      case Binary::Sub: out.data[i] = x - y; break;
      case Binary::Mul: out.data[i] = x * y; break;
      case Binary::Div: out.data[i] = x / y; break;
      case Binary::Max: out.data[i] = std::max(x, y); break;
    }
  }
}

void scale(const HostTensor& x, double factor, HostTensor& out) {
  for (size_t i = 0; i < x.data.size(); ++i) out.data[i] = factor * x.data[i];
}

// The exact (erf) form, as docs/ir.md states it.
void pointwise(const ir::PointwiseOp& op, const HostTensor& x, HostTensor& out) {
  for (size_t i = 0; i < x.data.size(); ++i) out.data[i] = op.forward(x.data[i]);
}

void softmax(const HostTensor& x, int dim, HostTensor& out) {
  AroundDim s(x, dim);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * s.n + j) * s.inner + in); };
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s.n; ++j) mx = std::max(mx, x.data[at(j)]);
      double total = 0;
      for (int64_t j = 0; j < s.n; ++j) total += out.data[at(j)] = std::exp(x.data[at(j)] - mx);
      for (int64_t j = 0; j < s.n; ++j) out.data[at(j)] /= total;
    }
}

void unary(Unary op, const HostTensor& x, HostTensor& out) {
  for (size_t i = 0; i < x.data.size(); ++i) {
    double v = x.data[i];
    switch (op) {
      case Unary::Exp: out.data[i] = std::exp(v); break;
      case Unary::Sqrt: out.data[i] = std::sqrt(v); break;
    }
  }
}

void log_softmax(const HostTensor& x, int dim, HostTensor& out) {
  AroundDim s(x, dim);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * s.n + j) * s.inner + in); };
      double mx = -std::numeric_limits<double>::infinity(), total = 0;
      for (int64_t j = 0; j < s.n; ++j) mx = std::max(mx, x.data[at(j)]);
      for (int64_t j = 0; j < s.n; ++j) total += std::exp(x.data[at(j)] - mx);
      const double log_total = std::log(total);
      for (int64_t j = 0; j < s.n; ++j) out.data[at(j)] = x.data[at(j)] - mx - log_total;
    }
}

void rms_norm(const HostTensor& x, const HostTensor* gamma, double eps, HostTensor& out) {
  const int64_t h = x.dim(x.rank() - 1), rows = x.numel() / std::max<int64_t>(h, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = x.data.data() + r * h;
    double sq = 0;
    for (int64_t j = 0; j < h; ++j) sq += px[j] * px[j];
    double inv = 1.0 / std::sqrt(sq / static_cast<double>(h) + eps);
    for (int64_t j = 0; j < h; ++j)
      out.data[static_cast<size_t>(r * h + j)] = px[j] * inv * (gamma ? gamma->data[static_cast<size_t>(j)] : 1.0);
  }
}

void layernorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta, double eps, HostTensor& out) {
  const int64_t h = x.dim(x.rank() - 1), rows = x.numel() / std::max<int64_t>(h, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = x.data.data() + r * h;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < h; ++j) mean += px[j];
    mean /= static_cast<double>(h);
    for (int64_t j = 0; j < h; ++j) var += (px[j] - mean) * (px[j] - mean);
    double inv = 1.0 / std::sqrt(var / static_cast<double>(h) + eps);
    for (int64_t j = 0; j < h; ++j)
      out.data[static_cast<size_t>(r * h + j)] = (px[j] - mean) * inv * gamma.data[j] + beta.data[j];
  }
}

void dropout(const HostTensor& x, double p, uint64_t seed, const LogicalPlacement& where, HostTensor& y,
             HostTensor& mask) {
  const int rank = x.rank();
  std::vector<int64_t> logical_strides = strides_of(where.logical_shape);
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < x.data.size(); ++i) {
    uint64_t logical = 0;
    for (int d = 0; d < rank; ++d)
      logical += static_cast<uint64_t>((idx[static_cast<size_t>(d)] + where.offset[static_cast<size_t>(d)]) *
                                       logical_strides[static_cast<size_t>(d)]);
    bool keep = dropout_keep(seed, logical, p);
    mask.data[i] = keep ? 1 : 0;
    y.data[i] = keep ? x.data[i] / (1 - p) : 0.0;
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < x.dim(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

void embedding(const HostTensor& table, const HostTensor& ids, int64_t first_row, HostTensor& out) {
  const int64_t rows = table.dim(0), h = table.dim(1);
  for (size_t i = 0; i < ids.data.size(); ++i) {
    auto row = static_cast<int64_t>(ids.data[i]) - first_row;
    if (row < 0 || row >= rows) continue;  // another shard's row: zeros
    std::copy_n(table.data.begin() + row * h, h, out.data.begin() + static_cast<int64_t>(i) * h);
  }
}

bool cross_entropy(const HostTensor& logits, const HostTensor& labels, bool mean, HostTensor& out) {
  const int64_t c = logits.dim(logits.rank() - 1), rows = labels.numel();
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* pl = logits.data.data() + r * c;
    auto label = static_cast<int64_t>(labels.data[static_cast<size_t>(r)]);
    if (label < 0 || label >= c) return false;
    double mx = *std::max_element(pl, pl + c), z = 0;
    for (int64_t j = 0; j < c; ++j) z += std::exp(pl[j] - mx);
    total += std::log(z) + mx - pl[label];
  }
  out.data[0] = mean && rows > 0 ? total / static_cast<double>(rows) : total;
  return true;
}

void cross_entropy_parts(const HostTensor& x, const HostTensor& m, const HostTensor& labels, int64_t offset,
                         HostTensor& s, HostTensor& p) {
  const int64_t c = x.dim(x.rank() - 1), rows = labels.numel();
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data.data() + r * c;
    const double mx = m.data[static_cast<size_t>(r)];
    double z = 0;
    for (int64_t j = 0; j < c; ++j) z += std::exp(row[j] - mx);
    const int64_t label = static_cast<int64_t>(labels.data[static_cast<size_t>(r)]) - offset;
    s.data[static_cast<size_t>(r)] = z;
    p.data[static_cast<size_t>(r)] = label >= 0 && label < c ? row[label] - mx : 0;
  }
}

void cross_entropy_total(const HostTensor& s, const HostTensor& p, HostTensor& out) {
  double total = 0;
  for (size_t r = 0; r < s.data.size(); ++r) total += std::log(s.data[r]) - p.data[r];
  out.data[0] = total;
}

void rope(const HostTensor& x, int dim, double base, bool inverse, int64_t first_position, HostTensor& out) {
  const int rank = x.rank();
  const int64_t d = x.dim(rank - 1), half = d / 2;
  // Elements between consecutive positions, and how many positions.
  int64_t inner = 1;
  for (int a = dim + 1; a < rank; ++a) inner *= x.dim(a);
  const int64_t positions = x.dim(dim);
  const double sign = inverse ? -1 : 1;
  for (int64_t row = 0; row < x.numel() / d; ++row) {
    const int64_t position = first_position + (row * d / inner) % positions;
    const double* in = x.data.data() + row * d;
    double* o = out.data.data() + row * d;
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(position) * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      const double c = std::cos(angle), sn = sign * std::sin(angle);
      o[i] = in[i] * c - in[i + half] * sn;
      o[i + half] = in[i + half] * c + in[i] * sn;
    }
  }
}

HostTensor held_positions(const HostTensor& cache, int64_t first, int64_t context, const HostTensor& step) {
  const int rank = step.rank();
  std::vector<int64_t> shape = step.shape;
  const int64_t t = step.dim(rank - 2), d = step.dim(rank - 1), capacity = cache.dim(rank - 2);
  const int64_t held = std::clamp<int64_t>(context + t - first, 0, capacity);
  shape[static_cast<size_t>(rank - 2)] = held;
  HostTensor out(step.dtype, shape);
  const int64_t rows = extent(step.shape, 0, rank - 2);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t slot = 0; slot < held; ++slot) {
      const int64_t position = first + slot;
      auto from = position < context ? cache.data.begin() + (r * capacity + slot) * d
                                     : step.data.begin() + (r * t + position - context) * d;
      std::copy(from, from + d, out.data.begin() + (r * held + slot) * d);
    }
  }
  return out;
}

void attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, bool causal, int64_t first_query,
               double scale, HostTensor& out, HostTensor* lse) {
  const int64_t bh = q.dim(0) * q.dim(1), s = q.dim(2), d = q.dim(3), t = k.dim(2), dv = v.dim(3);
  const int64_t group = q.dim(1) / k.dim(1);  // q heads per k/v head
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> p(static_cast<size_t>(t));
  for (int64_t b = 0; b < bh; ++b) {
    const int64_t kv = b / group;  // (batch, head) -> (batch, its k/v head)
    const double* pq = q.data.data() + b * s * d;
    const double* pk = k.data.data() + kv * t * d;
    const double* pv = v.data.data() + kv * t * dv;
    double* po = out.data.data() + b * s * dv;
    for (int64_t i = 0; i < s; ++i) {
      const int64_t visible = causal ? std::clamp<int64_t>(first_query + i + 1, 0, t) : t;
      double mx = -std::numeric_limits<double>::infinity(), z = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (int64_t l = 0; l < d; ++l) dot += pq[i * d + l] * pk[j * d + l];
        p[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < visible; ++j) z += p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx);
      for (int64_t j = 0; j < visible; ++j)
        for (int64_t l = 0; l < dv; ++l) po[i * dv + l] += p[static_cast<size_t>(j)] / z * pv[j * dv + l];
      if (lse) lse->data[static_cast<size_t>(b * s + i)] = visible > 0 ? mx + std::log(z) : mx;
    }
  }
}

// Flash-decoding's merge: the weights exp(lse_i - max) over their sum, the
// maximum subtracted first so no exponential overflows.
void attention_merge(const HostTensor& o, const HostTensor& lse, HostTensor& out) {
  const int64_t n = o.dim(0), rows = lse.numel() / n, dv = o.dim(o.rank() - 1);
  for (int64_t r = 0; r < rows; ++r) {
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) top = std::max(top, lse.data[static_cast<size_t>(i * rows + r)]);
    if (top == -std::numeric_limits<double>::infinity()) continue;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += std::exp(lse.data[static_cast<size_t>(i * rows + r)] - top);
    for (int64_t i = 0; i < n; ++i) {
      const double w = std::exp(lse.data[static_cast<size_t>(i * rows + r)] - top) / total;
      for (int64_t l = 0; l < dv; ++l)
        out.data[static_cast<size_t>(r * dv + l)] += w * o.data[static_cast<size_t>((i * rows + r) * dv + l)];
    }
  }
}

}  // namespace dstc::reference::kernels

namespace dstc::reference {

using ir::OpKind;

void bind_forward_kernels(KernelTable& t) {
  for (const ir::PointwiseOp& p : ir::pointwise_ops())
    t.bind(p.kind, [](const KernelCall& c) { kernels::pointwise(*ir::find_pointwise(c.ctx.op.kind), c.x(0), c.y()); });
  t.bind(OpKind::Matmul, [](const KernelCall& c) {
    kernels::matmul(c.x(0), c.x(1), c.attrs.boolean("transpose_a"), c.attrs.boolean("transpose_b"), c.y());
  });
  t.bind(OpKind::Einsum, [](const KernelCall& c) { kernels::einsum(c.attrs.string("spec"), c.in, c.y()); });
  t.bind(OpKind::Add, [](const KernelCall& c) { kernels::binary(kernels::Binary::Add, c.x(0), c.x(1), c.y()); });
  t.bind(OpKind::Sub, [](const KernelCall& c) { kernels::binary(kernels::Binary::Sub, c.x(0), c.x(1), c.y()); });
  t.bind(OpKind::Mul, [](const KernelCall& c) { kernels::binary(kernels::Binary::Mul, c.x(0), c.x(1), c.y()); });
  t.bind(OpKind::Div, [](const KernelCall& c) { kernels::binary(kernels::Binary::Div, c.x(0), c.x(1), c.y()); });
  t.bind(OpKind::Maximum, [](const KernelCall& c) { kernels::binary(kernels::Binary::Max, c.x(0), c.x(1), c.y()); });
  t.bind(OpKind::Exp, [](const KernelCall& c) { kernels::unary(kernels::Unary::Exp, c.x(0), c.y()); });
  t.bind(OpKind::Sqrt, [](const KernelCall& c) { kernels::unary(kernels::Unary::Sqrt, c.x(0), c.y()); });
  t.bind(OpKind::Scale, [](const KernelCall& c) { kernels::scale(c.x(0), c.attrs.real("factor"), c.y()); });
  t.bind(OpKind::Rope, [](const KernelCall& c) {
    // Positions are logical: a shard of the sequence starts at its offset.
    const int dim = c.dim();
    DevicePlacement where = result_placement(c.ctx, c.y().shape);
    kernels::rope(c.x(0), dim, c.attrs.real("base"), c.attrs.boolean("inverse"),
                  c.attrs.integer("offset") + where.offset[static_cast<size_t>(dim)], c.y());
  });
  t.bind(OpKind::Softmax, [](const KernelCall& c) { kernels::softmax(c.x(0), c.dim(), c.y()); });
  t.bind(OpKind::LogSoftmax, [](const KernelCall& c) { kernels::log_softmax(c.x(0), c.dim(), c.y()); });
  t.bind(OpKind::RmsNorm, [](const KernelCall& c) {
    kernels::rms_norm(c.x(0), c.in.size() > 1 ? c.in[1] : nullptr, c.attrs.real("eps"), c.y());
  });
  t.bind(OpKind::LayerNorm,
         [](const KernelCall& c) { kernels::layernorm(c.x(0), c.x(1), c.x(2), c.attrs.real("eps"), c.y()); });
  t.bind(OpKind::Dropout, [](const KernelCall& c) {
    DevicePlacement where = dropout_placement(c.ctx, c.y().shape);
    kernels::dropout(c.x(0), c.attrs.real("p"), static_cast<uint64_t>(c.attrs.integer("seed")),
                     {where.logical_shape, where.offset}, c.y(), c.out[1]);
  });
  t.bind(OpKind::Embedding, [](const KernelCall& c) {
    kernels::embedding(c.x(0), c.x(1), first_row(c.ctx, c.attrs, c.x(0).dim(0)), c.y());
  });
  t.bind(OpKind::CrossEntropy, [](const KernelCall& c) {
    if (!kernels::cross_entropy(c.x(0), c.x(1), c.attrs.string("reduction") == "mean", c.y()))
      c.error = "a label is outside the logits' classes";
  });
  t.bind(OpKind::CrossEntropyParts, [](const KernelCall& c) {
    kernels::cross_entropy_parts(c.x(0), c.x(1), c.x(2), first_class(operand_placement(c.ctx, 0, c.x(0).shape)),
                                 c.out[0], c.out[1]);
  });
  t.bind(OpKind::CrossEntropyTotal, [](const KernelCall& c) { kernels::cross_entropy_total(c.x(0), c.x(1), c.y()); });
  t.bind(OpKind::Attention, [](const KernelCall& c) {
    // A KV cache: its first `context` positions precede the step's k and
    // v. Without any (a prefill), it is only written, and may be a shard
    // (cache_shards).
    const int64_t context = c.attrs.integer("context");
    if (c.in.size() == 3 || context == 0) {
      kernels::attention(c.x(0), c.x(1), c.x(2), c.attrs.boolean("causal"),
                         first_query(c.ctx, c.x(0).shape, c.x(1).dim(2)), c.attrs.real("scale"), c.y());
      return;
    }
    HostTensor keys = kernels::held_positions(c.x(3), 0, context, c.x(1));
    HostTensor values = kernels::held_positions(c.x(4), 0, context, c.x(2));
    kernels::attention(c.x(0), keys, values, c.attrs.boolean("causal"), first_query(c.ctx, c.x(0).shape, keys.dim(2)),
                       c.attrs.real("scale"), c.y());
  });
  t.bind(OpKind::AttentionPart, [](const KernelCall& c) {
    // This shard's run of positions starts at the cache's offset; q's
    // first row is at the context plus its own offset in the step.
    const int64_t context = c.attrs.integer("context");
    const int64_t first = operand_placement(c.ctx, 3, c.x(3).shape).offset[2];
    DevicePlacement queries = operand_placement(c.ctx, 0, c.x(0).shape);
    const int64_t first_query = context + c.x(1).dim(2) - queries.logical_shape[2] + queries.offset[2];
    HostTensor keys = kernels::held_positions(c.x(3), first, context, c.x(1));
    HostTensor values = kernels::held_positions(c.x(4), first, context, c.x(2));
    kernels::attention(c.x(0), keys, values, c.attrs.boolean("causal"), first_query - first, c.attrs.real("scale"),
                       c.y(), &c.out[1]);
  });
  t.bind(OpKind::AttentionMerge, [](const KernelCall& c) { kernels::attention_merge(c.x(0), c.x(1), c.y()); });
}

}  // namespace dstc::reference
