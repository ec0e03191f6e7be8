// Where a rank computes: its values' storage and its compute kernels. The
// rank executor (rank_executor.h) runs one program on any device; values
// cross to the host (reference::HostTensor) only where the rank talks to
// others or reports. Two devices: the CPU (cpu_device.h, the reference
// executor's kernels) and CUDA (backends/cuda/, where built).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/reference/compute_ops.h"
#include "backends/reference/host_tensor.h"
#include "ir/module.h"

namespace dstc::runtime {

// A value held by a device; what is inside is the device's.
class DeviceValue {
 public:
  virtual ~DeviceValue() = default;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Why this device cannot run `op`, or "": asked of every op of a rank's
  // program before its first step, so a run fails before it starts.
  virtual std::string cannot_run(const ir::Module& module, const ir::Function& f, const ir::Op& op) const = 0;
  virtual std::unique_ptr<DeviceValue> upload(const reference::HostTensor& t) = 0;
  virtual reference::HostTensor download(const DeviceValue& v) = 0;
  // Runs a compute or optimizer op; `out` gets one value per result, shaped
  // by the op's result types. Returns an error message, "" on success.
  virtual std::string compute(const reference::DeviceContext& ctx, std::span<const DeviceValue* const> in,
                              std::vector<std::unique_ptr<DeviceValue>>& out) = 0;
  // Waits for the work queued so far (a step's time ends here).
  virtual void synchronize() = 0;
};

// What the CUDA device's GEMMs read their f32 inputs as, all accumulating
// in f32: f32 itself, or rounded to TF32 or bf16 for the tensor cores (as
// PyTorch's allow_tf32 and autocast do).
enum class GemmPrecision : uint8_t { F32, TF32, BF16 };

// The CUDA device on GPU `local_rank` modulo the visible GPUs, or nullptr
// with `why_not` set (no GPU; a dstc built without CUDA).
std::unique_ptr<Device> open_cuda_device(int32_t local_rank, GemmPrecision gemms, std::string& why_not);

}  // namespace dstc::runtime
