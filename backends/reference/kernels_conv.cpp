// Convolution, pooling and batch-norm kernels (NCHW).
#include <cmath>
#include <limits>
#include <utility>

#include "backends/reference/kernel_table.h"
#include "backends/reference/kernels.h"
#include "backends/reference/op_context.h"

namespace dstc::reference::kernels {

namespace {

// Visits every (n, o, oh, ow, c, kh, kw) term of a convolution whose input
// position lies inside x: f(out index, x index, w index).
template <typename F>
void for_each_conv_term(const std::vector<int64_t>& xs, const std::vector<int64_t>& ws, const std::vector<int64_t>& ys,
                        const Conv2dParams& p, F f) {
  const int64_t n_batch = xs[0], c_in = xs[1], h = xs[2], w = xs[3];
  const int64_t o_out = ws[0], cg = ws[1], kh = ws[2], kw = ws[3], oh = ys[2], ow = ys[3];
  const int64_t og = o_out / p.groups;
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t o = 0; o < o_out; ++o) {
      const int64_t group = o / og;
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t out = ((n * o_out + o) * oh + y) * ow + x;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < kh; ++i) {
              const int64_t iy = y * p.stride[0] - p.padding[0] + i;
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ix = x * p.stride[1] - p.padding[1] + j;
                if (ix < 0 || ix >= w) continue;
                f(out, ((n * c_in + group * cg + c) * h + iy) * w + ix, ((o * cg + c) * kh + i) * kw + j);
              }
            }
        }
    }
}

// Visits every window element inside x: f(out index, x index).
template <typename F>
void for_each_pool_term(const std::vector<int64_t>& xs, const std::vector<int64_t>& ys, const PoolParams& p, F f) {
  const int64_t planes = xs[0] * xs[1], h = xs[2], w = xs[3], oh = ys[2], ow = ys[3];
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x) {
        const int64_t out = (plane * oh + y) * ow + x;
        for (int64_t i = 0; i < p.kernel[0]; ++i) {
          const int64_t iy = y * p.stride[0] - p.padding[0] + i;
          if (iy < 0 || iy >= h) continue;
          for (int64_t j = 0; j < p.kernel[1]; ++j) {
            const int64_t ix = x * p.stride[1] - p.padding[1] + j;
            if (ix >= 0 && ix < w) f(out, (plane * h + iy) * w + ix);
          }
        }
      }
}

size_t at(int64_t i) { return static_cast<size_t>(i); }

}  // namespace

void conv2d(const HostTensor& x, const HostTensor& w, const Conv2dParams& p, HostTensor& out) {
  for_each_conv_term(x.shape, w.shape, out.shape, p,
                     [&](int64_t o, int64_t xi, int64_t wi) { out.data[at(o)] += x.data[at(xi)] * w.data[at(wi)]; });
}

void conv2d_input_grad(const HostTensor& dy, const HostTensor& w, const Conv2dParams& p, HostTensor& dx) {
  for_each_conv_term(dx.shape, w.shape, dy.shape, p,
                     [&](int64_t o, int64_t xi, int64_t wi) { dx.data[at(xi)] += dy.data[at(o)] * w.data[at(wi)]; });
}

void conv2d_weight_grad(const HostTensor& dy, const HostTensor& x, const Conv2dParams& p, HostTensor& dw) {
  for_each_conv_term(x.shape, dw.shape, dy.shape, p,
                     [&](int64_t o, int64_t xi, int64_t wi) { dw.data[at(wi)] += dy.data[at(o)] * x.data[at(xi)]; });
}

void max_pool2d(const HostTensor& x, const PoolParams& p, HostTensor& out) {
  std::fill(out.data.begin(), out.data.end(), -std::numeric_limits<double>::infinity());
  for_each_pool_term(x.shape, out.shape, p,
                     [&](int64_t o, int64_t xi) { out.data[at(o)] = std::max(out.data[at(o)], x.data[at(xi)]); });
}

void avg_pool2d(const HostTensor& x, const PoolParams& p, HostTensor& out) {
  const double window = static_cast<double>(p.kernel[0] * p.kernel[1]);
  for_each_pool_term(x.shape, out.shape, p, [&](int64_t o, int64_t xi) { out.data[at(o)] += x.data[at(xi)] / window; });
}

// The gradient goes to the first maximum of each window.
void max_pool2d_grad(const HostTensor& dy, const HostTensor& x, const PoolParams& p, HostTensor& dx) {
  std::vector<double> best(dy.data.size(), -std::numeric_limits<double>::infinity());
  std::vector<int64_t> where(dy.data.size(), -1);
  for_each_pool_term(x.shape, dy.shape, p, [&](int64_t o, int64_t xi) {
    if (x.data[at(xi)] > best[at(o)]) {
      best[at(o)] = x.data[at(xi)];
      where[at(o)] = xi;
    }
  });
  for (size_t o = 0; o < where.size(); ++o)
    if (where[o] >= 0) dx.data[at(where[o])] += dy.data[o];
}

void avg_pool2d_grad(const HostTensor& dy, const PoolParams& p, HostTensor& dx) {
  const double window = static_cast<double>(p.kernel[0] * p.kernel[1]);
  for_each_pool_term(dx.shape, dy.shape, p, [&](int64_t o, int64_t xi) { dx.data[at(xi)] += dy.data[at(o)] / window; });
}

namespace {

// x as [outer, channels, inner] with statistics per channel.
struct ChannelView {
  int64_t outer, channels, inner;
  explicit ChannelView(const HostTensor& x)
      : outer(x.dim(0)), channels(x.dim(1)), inner(extent(x.shape, 2, x.rank())) {}
  double count() const { return static_cast<double>(outer * inner); }
  template <typename F>
  void each(int64_t c, F f) const {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) f(at((o * channels + c) * inner + i));
  }
};

}  // namespace

void batchnorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta, double eps, HostTensor& out) {
  ChannelView v(x);
  for (int64_t c = 0; c < v.channels; ++c) {
    double mean = 0, var = 0;
    v.each(c, [&](size_t i) { mean += x.data[i]; });
    mean /= v.count();
    v.each(c, [&](size_t i) { var += (x.data[i] - mean) * (x.data[i] - mean); });
    double inv = 1.0 / std::sqrt(var / v.count() + eps);
    v.each(c, [&](size_t i) { out.data[i] = (x.data[i] - mean) * inv * gamma.data[at(c)] + beta.data[at(c)]; });
  }
}

void batchnorm_grad(const HostTensor& dy, const HostTensor& x, const HostTensor& gamma, double eps, HostTensor& dx,
                    HostTensor& dgamma, HostTensor& dbeta) {
  ChannelView v(x);
  for (int64_t c = 0; c < v.channels; ++c) {
    double mean = 0, var = 0;
    v.each(c, [&](size_t i) { mean += x.data[i]; });
    mean /= v.count();
    v.each(c, [&](size_t i) { var += (x.data[i] - mean) * (x.data[i] - mean); });
    double inv = 1.0 / std::sqrt(var / v.count() + eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    v.each(c, [&](size_t i) {
      sum_dy += dy.data[i];
      sum_dy_xhat += dy.data[i] * (x.data[i] - mean) * inv;
    });
    dgamma.data[at(c)] = sum_dy_xhat;
    dbeta.data[at(c)] = sum_dy;
    const double g = gamma.data[at(c)], m = v.count();
    v.each(c, [&](size_t i) {
      double xhat = (x.data[i] - mean) * inv;
      dx.data[i] = g * inv / m * (m * dy.data[i] - sum_dy - xhat * sum_dy_xhat);
    });
  }
}

namespace {

struct ChannelStats {
  double mean = 0, inv = 0;  // mean and 1/sqrt(var + eps)
};

// Channel c's statistics from its sums over s.count elements.
ChannelStats channel_stats(const BatchStats& s, int64_t c) {
  const double mean = s.sum.data[at(c)] / s.count, var = s.sumsq.data[at(c)] / s.count - mean * mean;
  return {mean, 1.0 / std::sqrt(var + s.eps)};
}

}  // namespace

void batchnorm_stats(const HostTensor& x, HostTensor& sum, HostTensor& sumsq) {
  ChannelView v(x);
  for (int64_t c = 0; c < v.channels; ++c)
    v.each(c, [&](size_t i) {
      sum.data[at(c)] += x.data[i];
      sumsq.data[at(c)] += x.data[i] * x.data[i];
    });
}

void batchnorm_apply(const HostTensor& x, const BatchStats& s, const HostTensor& gamma, const HostTensor& beta,
                     HostTensor& out) {
  ChannelView v(x);
  for (int64_t c = 0; c < v.channels; ++c) {
    const ChannelStats st = channel_stats(s, c);
    const double mean = st.mean, inv = st.inv;
    v.each(c, [&](size_t i) { out.data[i] = (x.data[i] - mean) * inv * gamma.data[at(c)] + beta.data[at(c)]; });
  }
}

void batchnorm_weight_grad(const HostTensor& dy, const HostTensor& x, const BatchStats& s, HostTensor& dgamma,
                           HostTensor& dbeta) {
  ChannelView v(x);
  for (int64_t c = 0; c < v.channels; ++c) {
    const ChannelStats st = channel_stats(s, c);
    const double mean = st.mean, inv = st.inv;
    v.each(c, [&](size_t i) {
      dgamma.data[at(c)] += dy.data[i] * (x.data[i] - mean) * inv;
      dbeta.data[at(c)] += dy.data[i];
    });
  }
}

void batchnorm_input_grad(const HostTensor& dy, const HostTensor& x, const BatchStats& s, const HostTensor& gamma,
                          const HostTensor& dgamma, const HostTensor& dbeta, HostTensor& dx) {
  ChannelView v(x);
  for (int64_t c = 0; c < v.channels; ++c) {
    const ChannelStats st = channel_stats(s, c);
    const double mean = st.mean, inv = st.inv;
    const double g = gamma.data[at(c)], db = dbeta.data[at(c)] / s.count, dg = dgamma.data[at(c)] / s.count;
    v.each(c, [&](size_t i) { dx.data[i] = g * inv * (dy.data[i] - db - (x.data[i] - mean) * inv * dg); });
  }
}

}  // namespace dstc::reference::kernels

namespace dstc::reference {

namespace {

using ir::OpKind;

kernels::BatchStats batch_stats(const KernelCall& c, size_t sum) {
  return {c.x(sum), c.x(sum + 1), static_cast<double>(c.attrs.integer("count")), c.attrs.real("eps")};
}

}  // namespace

void bind_conv_kernels(KernelTable& t) {
  t.bind(OpKind::Conv2d, [](const KernelCall& c) { kernels::conv2d(c.x(0), c.x(1), conv_params(c.attrs), c.y()); });
  t.bind(OpKind::Conv2dInputGrad,
         [](const KernelCall& c) { kernels::conv2d_input_grad(c.x(0), c.x(2), conv_params(c.attrs), c.y()); });
  t.bind(OpKind::Conv2dWeightGrad,
         [](const KernelCall& c) { kernels::conv2d_weight_grad(c.x(0), c.x(1), conv_params(c.attrs), c.y()); });
  t.bind(OpKind::MaxPool2d, [](const KernelCall& c) { kernels::max_pool2d(c.x(0), pool_params(c.attrs), c.y()); });
  t.bind(OpKind::MaxPool2dGrad,
         [](const KernelCall& c) { kernels::max_pool2d_grad(c.x(0), c.x(1), pool_params(c.attrs), c.y()); });
  t.bind(OpKind::AvgPool2d, [](const KernelCall& c) { kernels::avg_pool2d(c.x(0), pool_params(c.attrs), c.y()); });
  t.bind(OpKind::AvgPool2dGrad,
         [](const KernelCall& c) { kernels::avg_pool2d_grad(c.x(0), pool_params(c.attrs), c.y()); });
  t.bind(OpKind::BatchNorm,
         [](const KernelCall& c) { kernels::batchnorm(c.x(0), c.x(1), c.x(2), c.attrs.real("eps"), c.y()); });
  t.bind(OpKind::BatchNormGrad, [](const KernelCall& c) {
    kernels::batchnorm_grad(c.x(0), c.x(1), c.x(2), c.attrs.real("eps"), c.out[0], c.out[1], c.out[2]);
  });
  t.bind(OpKind::BatchNormStats, [](const KernelCall& c) { kernels::batchnorm_stats(c.x(0), c.out[0], c.out[1]); });
  t.bind(OpKind::BatchNormApply,
         [](const KernelCall& c) { kernels::batchnorm_apply(c.x(0), batch_stats(c, 1), c.x(3), c.x(4), c.y()); });
  t.bind(OpKind::BatchNormWeightGrad, [](const KernelCall& c) {
    kernels::batchnorm_weight_grad(c.x(0), c.x(1), batch_stats(c, 2), c.out[0], c.out[1]);
  });
  t.bind(OpKind::BatchNormInputGrad, [](const KernelCall& c) {
    kernels::batchnorm_input_grad(c.x(0), c.x(1), batch_stats(c, 2), c.x(4), c.x(5), c.x(6), c.y());
  });
}

}  // namespace dstc::reference
