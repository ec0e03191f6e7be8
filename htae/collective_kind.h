// The collectives the simulator prices: the IR's collective ops, named as
// the IR names them, and send_recv (a send with its matching recv).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "ir/ids.h"
#include "ir/registry.h"

namespace dstc::htae {

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };

// The IR op each kind prices (send for send_recv), in CollectiveKind order.
inline constexpr std::array<ir::OpKind, 7> kCollectiveOps = {
    ir::OpKind::AllReduce, ir::OpKind::AllGather, ir::OpKind::ReduceScatter, ir::OpKind::AllToAll,
    ir::OpKind::Broadcast, ir::OpKind::Reduce,    ir::OpKind::Send};

inline std::string_view collective_name(CollectiveKind kind) {
  return kind == CollectiveKind::SendRecv ? "send_recv" : ir::op_name(kCollectiveOps[static_cast<size_t>(kind)]);
}

// The kind an IR op is priced as; nullopt for ops that are not collectives
// or point-to-point transfers of their own kind (scatter, gather).
inline std::optional<CollectiveKind> collective_of(ir::OpKind op) {
  if (op == ir::OpKind::Recv) return CollectiveKind::SendRecv;
  for (size_t i = 0; i < kCollectiveOps.size(); ++i)
    if (kCollectiveOps[i] == op) return static_cast<CollectiveKind>(i);
  return std::nullopt;
}

// "all_reduce, all_gather, ..., reduce and send_recv", for diagnostics.
inline std::string collective_names() {
  std::string out;
  for (size_t i = 0; i < kCollectiveOps.size(); ++i) {
    out += i == 0 ? "" : i + 1 == kCollectiveOps.size() ? " and " : ", ";
    out += collective_name(static_cast<CollectiveKind>(i));
  }
  return out;
}

inline std::optional<CollectiveKind> parse_collective(std::string_view name) {
  for (size_t i = 0; i < kCollectiveOps.size(); ++i) {
    auto kind = static_cast<CollectiveKind>(i);
    if (collective_name(kind) == name) return kind;
  }
  return std::nullopt;
}

}  // namespace dstc::htae
