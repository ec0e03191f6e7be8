// The collective operations the simulator prices, by their stable names.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace dstc::htae {

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };

inline constexpr std::array<std::string_view, 7> kCollectiveNames = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv"};

inline std::string_view collective_name(CollectiveKind kind) { return kCollectiveNames[static_cast<size_t>(kind)]; }

inline std::optional<CollectiveKind> parse_collective(std::string_view name) {
  for (size_t i = 0; i < kCollectiveNames.size(); ++i) {
    if (kCollectiveNames[i] == name) return static_cast<CollectiveKind>(i);
  }
  return std::nullopt;
}

}  // namespace dstc::htae
