// Optimizer updates and gradient accumulation.
#include <cmath>

#include "backends/reference/kernel_table.h"
#include "backends/reference/kernels.h"
#include "backends/reference/op_context.h"

namespace dstc::reference::kernels {

void sgd(const HostTensor& w, const HostTensor& g, double lr, double weight_decay, HostTensor& out) {
  for (size_t i = 0; i < w.data.size(); ++i) out.data[i] = w.data[i] - lr * (g.data[i] + weight_decay * w.data[i]);
}

void adam(const HostTensor& w, const HostTensor& g, const HostTensor& m, const HostTensor& v, const AdamParams& p,
          HostTensor& w_out, HostTensor& m_out, HostTensor& v_out) {
  const double c1 = 1 - std::pow(p.beta1, static_cast<double>(p.step));
  const double c2 = 1 - std::pow(p.beta2, static_cast<double>(p.step));
  for (size_t i = 0; i < w.data.size(); ++i) {
    double mi = p.beta1 * m.data[i] + (1 - p.beta1) * g.data[i];
    double vi = p.beta2 * v.data[i] + (1 - p.beta2) * g.data[i] * g.data[i];
    m_out.data[i] = mi;
    v_out.data[i] = vi;
    w_out.data[i] = w.data[i] - p.lr * (mi / c1 / (std::sqrt(vi / c2) + p.eps) + p.weight_decay * w.data[i]);
  }
}

void accumulate(const HostTensor& acc, const HostTensor& x, HostTensor& out) {
  for (size_t i = 0; i < acc.data.size(); ++i) out.data[i] = acc.data[i] + x.data[i];
}

}  // namespace dstc::reference::kernels

namespace dstc::reference {

using ir::OpKind;

void bind_optimizer_kernels(KernelTable& t) {
  t.bind(OpKind::Sgd, [](const KernelCall& c) {
    kernels::sgd(c.x(0), c.x(1), c.attrs.real("lr"), c.attrs.real("weight_decay"), c.y());
  });
  t.bind(OpKind::Adam, [](const KernelCall& c) {
    kernels::AdamParams p{c.attrs.real("lr"),           c.attrs.real("beta1"),
                          c.attrs.real("beta2"),        c.attrs.real("eps"),
                          c.attrs.real("weight_decay"), c.attrs.integer("step") + c.ctx.steps_before};
    kernels::adam(c.x(0), c.x(1), c.x(2), c.x(3), p, c.out[0], c.out[1], c.out[2]);
  });
  t.bind(OpKind::Accumulate, [](const KernelCall& c) { kernels::accumulate(c.x(0), c.x(1), c.y()); });
}

}  // namespace dstc::reference
