// Which elements dropout keeps: a function of the seed and the element's
// index in the logical tensor only, so every split of the tensor drops the
// same elements. Shared by the reference kernels and the CUDA device.
#pragma once

#include <cstdint>

#include "ir/host_device.h"

namespace dstc::reference {

DSTC_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t logical_index, double p) {
  uint64_t z = (seed ^ logical_index) + 0x9e3779b97f4a7c15ull;  // SplitMix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z) / 18446744073709551616.0 >= p;
}

}  // namespace dstc::reference
