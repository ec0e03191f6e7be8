// Live bytes per device over time: allocations and frees as the simulated
// program runs, the peak, and whether (and when) it exceeds the GPU's memory.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dstc::htae {

// What live bytes hold, for the breakdown at the peak: the weights, the
// optimizer's state (its fp32 master copy included), accumulated weight
// gradients, forward values (activations, saved or recomputed), the rest
// (activation gradients, collectives' results), in inference the
// attention's KV caches, and the buffers a communication library holds for
// the whole run (DeepEP's).
enum class MemoryKind : uint8_t { Weights, OptimizerState, Gradients, Activations, Other, KvCache, CommBuffers };
inline constexpr size_t kMemoryKinds = 7;
std::string_view memory_kind_name(MemoryKind kind);
using MemoryBreakdown = std::array<int64_t, kMemoryKinds>;  // bytes by MemoryKind

struct MemorySample {
  double time;
  int64_t live_bytes;
};

class MemoryTracker {
 public:
  // `record_timeline` keeps every change, for trace counters.
  MemoryTracker(int64_t devices, int64_t capacity_bytes, bool record_timeline = false);

  // Events of one device come in non-decreasing time (a logic_error if not,
  // or if a free exceeds the live bytes: both are simulator bugs).
  void alloc(int64_t device, int64_t bytes, double time, MemoryKind kind);
  void free(int64_t device, int64_t bytes, double time, MemoryKind kind);

  int64_t capacity() const { return capacity_; }
  int64_t live(int64_t device) const { return devices_.at(device).live; }
  int64_t peak(int64_t device) const { return devices_.at(device).peak; }
  double peak_time(int64_t device) const { return devices_.at(device).peak_time; }
  // What the live bytes held when the peak was first reached.
  const MemoryBreakdown& at_peak(int64_t device) const { return devices_.at(device).at_peak; }
  // Each kind's own peak over time (activations' is what a layer count or
  // a recomputation choice moves).
  const MemoryBreakdown& kind_peaks(int64_t device) const { return devices_.at(device).kind_peaks; }
  bool oom(int64_t device) const { return devices_.at(device).first_oom.has_value(); }
  // When live bytes first exceeded the capacity.
  std::optional<double> first_oom_time(int64_t device) const { return devices_.at(device).first_oom; }
  const std::vector<MemorySample>& timeline(int64_t device) const { return devices_.at(device).timeline; }
  // The largest peak over all devices, and whether any device ran out.
  int64_t max_peak() const;
  bool any_oom() const;

 private:
  struct Device {
    int64_t live = 0;
    int64_t peak = 0;
    MemoryBreakdown live_by_kind{};
    MemoryBreakdown at_peak{};
    MemoryBreakdown kind_peaks{};
    double peak_time = 0;
    double last_time = 0;
    std::optional<double> first_oom;
    std::vector<MemorySample> timeline;
  };
  Device& at(int64_t device, double time);

  int64_t capacity_;
  bool record_;
  std::vector<Device> devices_;
};

}  // namespace dstc::htae
