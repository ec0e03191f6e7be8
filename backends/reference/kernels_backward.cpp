// Backward compute kernels: the exact derivatives of the forward kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "backends/reference/kernel_table.h"
#include "backends/reference/kernels.h"
#include "backends/reference/op_context.h"

namespace dstc::reference::kernels {

void pointwise_grad(const ir::PointwiseOp& op, const HostTensor& dy, const HostTensor& v, HostTensor& out) {
  for (size_t i = 0; i < v.data.size(); ++i) out.data[i] = op.backward(dy.data[i], v.data[i]);
}

void softmax_grad(const HostTensor& dy, const HostTensor& y, int dim, HostTensor& out) {
  const int64_t outer = extent(y.shape, 0, dim), n = y.dim(dim), inner = extent(y.shape, dim + 1, y.rank());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * n + j) * inner + in); };
      double dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += dy.data[at(j)] * y.data[at(j)];
      for (int64_t j = 0; j < n; ++j) out.data[at(j)] = y.data[at(j)] * (dy.data[at(j)] - dot);
    }
}

void log_softmax_grad(const HostTensor& dy, const HostTensor& y, int dim, HostTensor& out) {
  const int64_t outer = extent(y.shape, 0, dim), n = y.dim(dim), inner = extent(y.shape, dim + 1, y.rank());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * n + j) * inner + in); };
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += dy.data[at(j)];
      for (int64_t j = 0; j < n; ++j) out.data[at(j)] = dy.data[at(j)] - std::exp(y.data[at(j)]) * total;
    }
}

void maximum_grad(const HostTensor& dy, const HostTensor& a, const HostTensor& b, HostTensor& da, HostTensor& db) {
  const size_t nb = b.data.size();
  for (size_t i = 0; i < a.data.size(); ++i) {
    const bool a_wins = a.data[i] >= b.data[i % nb];
    da.data[i] = a_wins ? dy.data[i] : 0.0;
    db.data[i] = a_wins ? 0.0 : dy.data[i];
  }
}

namespace {

// 1/sqrt(mean(x^2) + eps) of one row of length h.
double rms_inverse(const double* x, int64_t h, double eps) {
  double sq = 0;
  for (int64_t j = 0; j < h; ++j) sq += x[j] * x[j];
  return 1.0 / std::sqrt(sq / static_cast<double>(h) + eps);
}

}  // namespace

void rms_norm_grad(const HostTensor& dy, const HostTensor& x, const HostTensor* gamma, double eps, HostTensor& dx) {
  const int64_t h = x.dim(x.rank() - 1), rows = x.numel() / std::max<int64_t>(h, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = x.data.data() + r * h;
    const double* pdy = dy.data.data() + r * h;
    const double inv = rms_inverse(px, h, eps);
    auto g = [&](int64_t j) { return pdy[j] * (gamma ? gamma->data[static_cast<size_t>(j)] : 1.0); };
    double gx = 0;
    for (int64_t j = 0; j < h; ++j) gx += g(j) * px[j];
    gx /= static_cast<double>(h);
    for (int64_t j = 0; j < h; ++j) dx.data[static_cast<size_t>(r * h + j)] = inv * g(j) - px[j] * inv * inv * inv * gx;
  }
}

void rms_norm_weight_grad(const HostTensor& dy, const HostTensor& x, double eps, HostTensor& dgamma) {
  const int64_t h = x.dim(x.rank() - 1), rows = x.numel() / std::max<int64_t>(h, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = x.data.data() + r * h;
    const double inv = rms_inverse(px, h, eps);
    for (int64_t j = 0; j < h; ++j)
      dgamma.data[static_cast<size_t>(j)] += dy.data[static_cast<size_t>(r * h + j)] * px[j] * inv;
  }
}

namespace {

// Mean and 1/sqrt(var + eps) of one row of length h.
std::pair<double, double> row_stats(const double* x, int64_t h, double eps) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < h; ++j) mean += x[j];
  mean /= static_cast<double>(h);
  for (int64_t j = 0; j < h; ++j) var += (x[j] - mean) * (x[j] - mean);
  return {mean, 1.0 / std::sqrt(var / static_cast<double>(h) + eps)};
}

}  // namespace

void layernorm_grad(const HostTensor& dy, const HostTensor& x, const HostTensor& gamma, double eps, HostTensor& dx) {
  const int64_t h = x.dim(x.rank() - 1), rows = x.numel() / std::max<int64_t>(h, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = x.data.data() + r * h;
    const double* pd = dy.data.data() + r * h;
    auto [mean, inv] = row_stats(px, h, eps);
    double mean_g = 0, mean_gx = 0;
    for (int64_t j = 0; j < h; ++j) {
      double g = pd[j] * gamma.data[static_cast<size_t>(j)];
      mean_g += g;
      mean_gx += g * (px[j] - mean) * inv;
    }
    mean_g /= static_cast<double>(h);
    mean_gx /= static_cast<double>(h);
    for (int64_t j = 0; j < h; ++j) {
      double g = pd[j] * gamma.data[static_cast<size_t>(j)];
      dx.data[static_cast<size_t>(r * h + j)] = inv * (g - mean_g - (px[j] - mean) * inv * mean_gx);
    }
  }
}

void layernorm_weight_grad(const HostTensor& dy, const HostTensor& x, double eps, HostTensor& dgamma,
                           HostTensor& dbeta) {
  const int64_t h = x.dim(x.rank() - 1), rows = x.numel() / std::max<int64_t>(h, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const double* px = x.data.data() + r * h;
    const double* pd = dy.data.data() + r * h;
    auto [mean, inv] = row_stats(px, h, eps);
    for (int64_t j = 0; j < h; ++j) {
      dgamma.data[static_cast<size_t>(j)] += pd[j] * (px[j] - mean) * inv;
      dbeta.data[static_cast<size_t>(j)] += pd[j];
    }
  }
}

void dropout_grad(const HostTensor& dy, const HostTensor& mask, double p, HostTensor& out) {
  for (size_t i = 0; i < dy.data.size(); ++i) out.data[i] = dy.data[i] * mask.data[i] / (1 - p);
}

void embedding_grad(const HostTensor& dy, const HostTensor& ids, int64_t first_row, HostTensor& out) {
  const int64_t rows = out.dim(0), h = out.dim(1);
  for (size_t i = 0; i < ids.data.size(); ++i) {
    auto row = static_cast<int64_t>(ids.data[i]) - first_row;
    if (row < 0 || row >= rows) continue;
    for (int64_t j = 0; j < h; ++j)
      out.data[static_cast<size_t>(row * h + j)] += dy.data[static_cast<size_t>(static_cast<int64_t>(i) * h + j)];
  }
}

bool cross_entropy_grad(const HostTensor& dloss, const HostTensor& logits, const HostTensor& labels, bool mean,
                        HostTensor& out) {
  const int64_t c = logits.dim(logits.rank() - 1), rows = labels.numel();
  double factor = dloss.data[0] / (mean && rows > 0 ? static_cast<double>(rows) : 1.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* pl = logits.data.data() + r * c;
    double* po = out.data.data() + r * c;
    auto label = static_cast<int64_t>(labels.data[static_cast<size_t>(r)]);
    if (label < 0 || label >= c) return false;
    double mx = *std::max_element(pl, pl + c), z = 0;
    for (int64_t j = 0; j < c; ++j) z += std::exp(pl[j] - mx);
    for (int64_t j = 0; j < c; ++j) po[j] = factor * (std::exp(pl[j] - mx) / z - (j == label ? 1.0 : 0.0));
  }
  return true;
}

void cross_entropy_parts_grad(const HostTensor& dloss, const HostTensor& x, const HostTensor& m, const HostTensor& s,
                              const HostTensor& labels, int64_t offset, HostTensor& out) {
  const int64_t c = x.dim(x.rank() - 1), rows = labels.numel();
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data.data() + r * c;
    double* o = out.data.data() + r * c;
    const double mx = m.data[static_cast<size_t>(r)], z = s.data[static_cast<size_t>(r)];
    const int64_t label = static_cast<int64_t>(labels.data[static_cast<size_t>(r)]) - offset;
    for (int64_t j = 0; j < c; ++j) o[j] = dloss.data[0] * (std::exp(row[j] - mx) / z - (j == label ? 1.0 : 0.0));
  }
}

void attention_grad(const HostTensor& dout, const HostTensor& q, const HostTensor& k, const HostTensor& v, bool causal,
                    int64_t first_query, double scale, HostTensor& dq, HostTensor& dk, HostTensor& dv) {
  const int64_t bh = q.dim(0) * q.dim(1), s = q.dim(2), d = q.dim(3), t = k.dim(2), e = v.dim(3);
  const int64_t group = q.dim(1) / k.dim(1);  // q heads per k/v head: their gradients add up
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> p(static_cast<size_t>(t)), dp(static_cast<size_t>(t));
  for (int64_t b = 0; b < bh; ++b) {
    const int64_t kv = b / group;
    const double* pq = q.data.data() + b * s * d;
    const double* pk = k.data.data() + kv * t * d;
    const double* pv = v.data.data() + kv * t * e;
    const double* po = dout.data.data() + b * s * e;
    double* gq = dq.data.data() + b * s * d;
    double* gk = dk.data.data() + kv * t * d;
    double* gv = dv.data.data() + kv * t * e;
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
      double weighted = 0;  // sum_j p_j dp_j
      for (int64_t j = 0; j < visible; ++j) {
        double pj = p[static_cast<size_t>(j)] /= z;
        double dpj = 0;
        for (int64_t l = 0; l < e; ++l) {
          dpj += po[i * e + l] * pv[j * e + l];
          gv[j * e + l] += pj * po[i * e + l];
        }
        dp[static_cast<size_t>(j)] = dpj;
        weighted += pj * dpj;
      }
      for (int64_t j = 0; j < visible; ++j) {
        double ds = p[static_cast<size_t>(j)] * (dp[static_cast<size_t>(j)] - weighted) * scale;
        for (int64_t l = 0; l < d; ++l) {
          gq[i * d + l] += ds * pk[j * d + l];
          gk[j * d + l] += ds * pq[i * d + l];
        }
      }
    }
  }
}

}  // namespace dstc::reference::kernels

namespace dstc::reference {

using ir::OpKind;

void bind_backward_kernels(KernelTable& t) {
  for (const ir::PointwiseOp& p : ir::pointwise_ops())
    t.bind(p.grad, [](const KernelCall& c) {
      kernels::pointwise_grad(*ir::find_pointwise(c.ctx.op.kind), c.x(0), c.x(1), c.y());
    });
  t.bind(OpKind::SoftmaxGrad, [](const KernelCall& c) { kernels::softmax_grad(c.x(0), c.x(1), c.dim(1), c.y()); });
  t.bind(OpKind::LogSoftmaxGrad,
         [](const KernelCall& c) { kernels::log_softmax_grad(c.x(0), c.x(1), c.dim(1), c.y()); });
  t.bind(OpKind::MaximumGrad,
         [](const KernelCall& c) { kernels::maximum_grad(c.x(0), c.x(1), c.x(2), c.out[0], c.out[1]); });
  t.bind(OpKind::RmsNormGrad, [](const KernelCall& c) {
    kernels::rms_norm_grad(c.x(0), c.x(1), c.in.size() > 2 ? c.in[2] : nullptr, c.attrs.real("eps"), c.y());
  });
  t.bind(OpKind::RmsNormWeightGrad,
         [](const KernelCall& c) { kernels::rms_norm_weight_grad(c.x(0), c.x(1), c.attrs.real("eps"), c.y()); });
  t.bind(OpKind::LayerNormGrad,
         [](const KernelCall& c) { kernels::layernorm_grad(c.x(0), c.x(1), c.x(2), c.attrs.real("eps"), c.y()); });
  t.bind(OpKind::LayerNormWeightGrad, [](const KernelCall& c) {
    kernels::layernorm_weight_grad(c.x(0), c.x(1), c.attrs.real("eps"), c.out[0], c.out[1]);
  });
  t.bind(OpKind::DropoutGrad,
         [](const KernelCall& c) { kernels::dropout_grad(c.x(0), c.x(1), c.attrs.real("p"), c.y()); });
  t.bind(OpKind::EmbeddingGrad, [](const KernelCall& c) {
    kernels::embedding_grad(c.x(0), c.x(1), first_row(c.ctx, c.attrs, c.attrs.integer("vocab")), c.y());
  });
  t.bind(OpKind::CrossEntropyGrad, [](const KernelCall& c) {
    if (!kernels::cross_entropy_grad(c.x(0), c.x(1), c.x(2), c.attrs.string("reduction") == "mean", c.y()))
      c.error = "a label is outside the logits' classes";
  });
  t.bind(OpKind::CrossEntropyPartsGrad, [](const KernelCall& c) {
    kernels::cross_entropy_parts_grad(c.x(0), c.x(1), c.x(2), c.x(3), c.x(4),
                                      first_class(result_placement(c.ctx, c.y().shape)), c.y());
  });
  t.bind(OpKind::AttentionGrad, [](const KernelCall& c) {
    kernels::attention_grad(c.x(0), c.x(1), c.x(2), c.x(3), c.attrs.boolean("causal"),
                            first_query(c.ctx, c.x(1).shape, c.x(2).dim(2)), c.attrs.real("scale"), c.out[0], c.out[1],
                            c.out[2]);
  });
}

}  // namespace dstc::reference
