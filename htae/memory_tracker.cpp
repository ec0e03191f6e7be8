#include "htae/memory_tracker.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace dstc::htae {

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Weights: return "weights";
    case MemoryKind::OptimizerState: return "optimizer state";
    case MemoryKind::Gradients: return "gradients";
    case MemoryKind::Activations: return "activations";
    case MemoryKind::Other: return "other";
    case MemoryKind::KvCache: return "kv cache";
    case MemoryKind::CommBuffers: return "comm buffers";
  }
  return "?";
}

MemoryTracker::MemoryTracker(int64_t devices, int64_t capacity_bytes, bool record_timeline)
    : capacity_(capacity_bytes), record_(record_timeline), devices_(static_cast<size_t>(devices)) {}

MemoryTracker::Device& MemoryTracker::at(int64_t device, double time) {
  Device& d = devices_.at(static_cast<size_t>(device));
  if (time < d.last_time) {
    throw std::logic_error(fmt::format("memory event on device {} at {} before {}", device, time, d.last_time));
  }
  d.last_time = time;
  return d;
}

void MemoryTracker::alloc(int64_t device, int64_t bytes, double time, MemoryKind kind) {
  Device& d = at(device, time);
  d.live += bytes;
  int64_t& of_kind = d.live_by_kind[static_cast<size_t>(kind)];
  of_kind += bytes;
  int64_t& kind_peak = d.kind_peaks[static_cast<size_t>(kind)];
  kind_peak = std::max(kind_peak, of_kind);
  if (d.live > d.peak) d.peak = d.live, d.peak_time = time, d.at_peak = d.live_by_kind;
  if (d.live > capacity_ && !d.first_oom) d.first_oom = time;
  if (record_) d.timeline.push_back({time, d.live});
}

void MemoryTracker::free(int64_t device, int64_t bytes, double time, MemoryKind kind) {
  Device& d = at(device, time);
  int64_t& of_kind = d.live_by_kind[static_cast<size_t>(kind)];
  if (bytes > of_kind) {
    throw std::logic_error(
        fmt::format("device {} frees {} bytes of {} with {} live", device, bytes, memory_kind_name(kind), of_kind));
  }
  d.live -= bytes;
  of_kind -= bytes;
  if (record_) d.timeline.push_back({time, d.live});
}

int64_t MemoryTracker::max_peak() const {
  int64_t result = 0;
  for (const Device& d : devices_) result = std::max(result, d.peak);
  return result;
}

bool MemoryTracker::any_oom() const {
  return std::any_of(devices_.begin(), devices_.end(), [](const Device& d) { return d.first_oom.has_value(); });
}

}  // namespace dstc::htae
