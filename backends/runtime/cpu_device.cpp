#include "backends/runtime/cpu_device.h"

namespace dstc::runtime {

namespace {

struct CpuValue final : DeviceValue {
  explicit CpuValue(reference::HostTensor t) : tensor(std::move(t)) {}
  reference::HostTensor tensor;
};

const reference::HostTensor& tensor_of(const DeviceValue& v) { return static_cast<const CpuValue&>(v).tensor; }

}  // namespace

// Rounded as every stored value is (a collective's sum, a received value).
std::unique_ptr<DeviceValue> CpuDevice::upload(const reference::HostTensor& t) {
  auto v = std::make_unique<CpuValue>(t);
  reference::round_to_storage(v->tensor, arithmetic_);
  return v;
}

reference::HostTensor CpuDevice::download(const DeviceValue& v) { return tensor_of(v); }

std::string CpuDevice::compute(const reference::DeviceContext& ctx, std::span<const DeviceValue* const> in,
                               std::vector<std::unique_ptr<DeviceValue>>& out) {
  std::vector<const reference::HostTensor*> inputs;
  for (const DeviceValue* v : in) inputs.push_back(&tensor_of(*v));
  std::vector<reference::HostTensor> results;
  for (int i = 0; i < ctx.op.result_count; ++i)
    results.emplace_back(ctx.module.value_type(ctx.function, ctx.function.result(ctx.op, i)));
  std::string error = reference::run_compute(ctx, inputs, results);
  if (!error.empty()) return error;
  out.clear();
  for (reference::HostTensor& t : results) {
    reference::round_to_storage(t, arithmetic_);
    out.push_back(std::make_unique<CpuValue>(std::move(t)));
  }
  return {};
}

}  // namespace dstc::runtime
