// open_local_gpu for a dstc built without the CUDA toolkit.
#include "backends/calibration/calibration_device.h"

namespace dstc::calibration {

LocalGpu open_local_gpu() {
  LocalGpu gpu;
  gpu.built_without_gpu = true;
  gpu.why_not =
      "this dstc was built without CUDA (no CUDA toolkit was found when it was configured; "
      "install one under /usr/local/cuda and rebuild)";
  return gpu;
}

}  // namespace dstc::calibration
