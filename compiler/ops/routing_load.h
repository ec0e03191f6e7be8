// How full experts' slots are expected to be, for pricing: the share of a
// rank's slots its experts' tokens fill. Routing is not uniform in real
// runs; a measured histogram of tokens per expert, or else a Zipf skew (0:
// every expert the same share), stands for it.
#pragma once

#include <cstdint>
#include <span>

namespace dstc::ops {

struct RoutingLoad {
  int64_t experts = 1;   // E
  int64_t capacity = 1;  // slots per expert and group
  int64_t routes = 1;    // tokens routed per group: the routed dim's size times k
  double skew = 0;       // Zipf exponent of the experts' shares
  // Measured tokens per expert, by expert index (empty: the skew). Experts
  // are placed as Megatron-Core places them: chunk r of an expert-parallel
  // split holds experts [r·E/parts, (r+1)·E/parts).
  std::span<const double> measured;
};

// The fullest of `parts` equal chunks of the experts (an expert-parallel
// split): the share of its slots filled, in (0, 1]. Under a skew, popular
// experts are dealt round-robin over the chunks (the most popular to chunks
// 0, 1, ...), so chunk 0 is the fullest; measured counts fill the chunks
// their experts' indices place them in.
double fullest_slot_fill(const RoutingLoad& load, int64_t parts);

}  // namespace dstc::ops
