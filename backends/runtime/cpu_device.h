// The CPU device: values are reference::HostTensor (every element a double,
// rounded to the run's arithmetic after each op, as the reference executor
// does) and ops run on the reference executor's kernels, so a rank's
// values can equal the reference's exactly.
#pragma once

#include "backends/reference/arithmetic.h"
#include "backends/runtime/device.h"

namespace dstc::runtime {

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(reference::Arithmetic arithmetic) : arithmetic_(arithmetic) {}
  std::string name() const override { return "cpu"; }
  std::string cannot_run(const ir::Module&, const ir::Function&, const ir::Op&) const override { return {}; }
  std::unique_ptr<DeviceValue> upload(const reference::HostTensor& t) override;
  reference::HostTensor download(const DeviceValue& v) override;
  std::string compute(const reference::DeviceContext& ctx, std::span<const DeviceValue* const> in,
                      std::vector<std::unique_ptr<DeviceValue>>& out) override;
  void synchronize() override {}

 private:
  reference::Arithmetic arithmetic_;
};

}  // namespace dstc::runtime
