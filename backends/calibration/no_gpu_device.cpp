// open_local_gpu for a dstc built without the CUDA toolkit.
#include "backends/calibration/calibration_device.h"

namespace dstc::calibration {

std::unique_ptr<CalibrationDevice> open_local_gpu(std::string& why_not) {
  why_not =
      "this dstc was built without CUDA (no CUDA toolkit was found when it was configured; "
      "install one under /usr/local/cuda and rebuild)";
  return nullptr;
}

}  // namespace dstc::calibration
