// Convolution and pooling over the last two dims, [..., c, h, w].
#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {
namespace {

// Kernels and padding past this are typos; below it, the padded size of a
// dim (at most 2^48) cannot overflow.
constexpr int64_t kMaxWindow = int64_t{1} << 31;

int64_t pooled(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

}  // namespace

DimsResult conv2d_dims(const DimsQuery& q, OpError& error) {
  const auto& x = q.inputs[0];
  const auto& w = q.inputs[1];
  if (x.size() < 3) return fail(error, fmt::format("the input must be [..., c, h, w], not {}", dims_text(x)), 0);
  if (w.size() != 4) return fail(error, fmt::format("the weight must be [o, c, kh, kw], not {}", dims_text(w)), 1);
  size_t n = x.size();
  if (x[n - 3].size != w[1].size) {
    return fail(error, fmt::format("input channels {} differ from the weight's {}", x[n - 3].size, w[1].size), 1);
  }
  const int64_t stride = q.attrs.integer("stride"), padding = q.attrs.integer("padding");
  if (stride < 1 || padding < 0) return fail(error, "stride must be at least 1 and padding not negative");
  if (padding > kMaxWindow || w[2].size > kMaxWindow || w[3].size > kMaxWindow)
    return fail(error, "padding and kernel sizes must be at most 2^31");
  int64_t oh = pooled(x[n - 2].size, w[2].size, stride, padding);
  int64_t ow = pooled(x[n - 1].size, w[3].size, stride, padding);
  if (oh < 1 || ow < 1) return fail(error, "the kernel is larger than the padded input");
  std::vector<Dim> out(x.begin(), x.end() - 3);
  if (find_dim(out, w[0].name)) return fail(error, fmt::format("dim {} appears twice", w[0].name), 1);
  out.push_back(w[0]);
  out.push_back({x[n - 2].name, oh});
  out.push_back({x[n - 1].name, ow});
  return check_declared(out, q.declared, error);
}

DimsResult pool2d_dims(const DimsQuery& q, OpError& error) {
  const auto& x = q.inputs[0];
  if (x.size() < 2) return fail(error, "the input must be [..., h, w]", 0);
  const int64_t kernel = q.attrs.integer("kernel"), stride = q.attrs.integer("stride"),
                padding = q.attrs.integer("padding");
  if (kernel < 1 || stride < 1 || padding < 0) return fail(error, "kernel and stride must be at least 1");
  if (padding > kMaxWindow || kernel > kMaxWindow) return fail(error, "padding and kernel must be at most 2^31");
  size_t n = x.size();
  int64_t oh = pooled(x[n - 2].size, kernel, stride, padding);
  int64_t ow = pooled(x[n - 1].size, kernel, stride, padding);
  if (oh < 1 || ow < 1) return fail(error, "the kernel is larger than the padded input");
  std::vector<Dim> out(x.begin(), x.end() - 2);
  out.push_back({x[n - 2].name, oh});
  out.push_back({x[n - 1].name, ow});
  return check_declared(out, q.declared, error);
}

DimsResult global_pool_dims(const DimsQuery& q, OpError& error) {
  const auto& x = q.inputs[0];
  if (x.size() < 2) return fail(error, "the input must be [..., h, w]", 0);
  return check_declared(std::vector<Dim>(x.begin(), x.end() - 2), q.declared, error);
}

LoweringRefusal conv2d_limit(const LoweringQuery& q) {
  if (q.rank() != 4) return "conv2d takes its input as [batch, channels, height, width]";
  return std::nullopt;
}

LoweringRefusal pool2d_limit(const LoweringQuery& q) {
  if (q.rank() != 4) return "pooling takes its input as [batch, channels, height, width]";
  return std::nullopt;
}

}  // namespace dstc::ops
