// open_cuda_device for a dstc built without the CUDA toolkit.
#include "backends/runtime/device.h"

namespace dstc::runtime {

std::unique_ptr<Device> open_cuda_device(int32_t, GemmPrecision, std::string& why_not) {
  why_not =
      "this dstc was built without CUDA (no CUDA toolkit was found when it was configured; install one under "
      "/usr/local/cuda and rebuild)";
  return nullptr;
}

}  // namespace dstc::runtime
