// Boxing: the transfers that turn a tensor laid out one way into another
// layout, one mesh axis at a time (architecture note, "SBP and boxing").
//
// Nesting: when several mesh axes split the same tensor dim, the later mesh
// axis chunks outermost. Plans therefore remove splits from the earliest axis
// up and add splits from the latest axis down, so each collective sees
// contiguous chunks.
#pragma once

#include <string>
#include <vector>

#include "ir/mesh.h"

namespace dstc::compiler {

enum class TransferKind : uint8_t {
  AllGather,       // S(i) -> B
  AllReduce,       // P -> B
  ReduceScatter,   // P -> S(j)
  AllToAll,        // S(i) -> S(j)
  LocalShard,      // B -> S(j): keep this device's chunk
  LocalUnshard,    // S(i) -> P: this device's chunk in place, zeros elsewhere
  LocalPartialize  // B -> P: keep on coordinate 0, zeros elsewhere
};

struct AxisTransfer {
  TransferKind kind;
  int axis = 0;       // mesh axis
  int from_dim = -1;  // AllGather, AllToAll
  int to_dim = -1;    // ReduceScatter, AllToAll, LocalShard
};

std::vector<AxisTransfer> plan_boxing(const ir::Layout& from, const ir::Layout& to);

// Bytes each device sends to carry out `plan` on a tensor of `logical_bytes`
// held in layout `from` (ring algorithms, architecture note's table).
double boxing_bytes(const std::vector<AxisTransfer>& plan, const ir::Layout& from, double logical_bytes,
                    const ir::Mesh& mesh);

// Local bytes of a tensor of `logical_bytes` in `layout` (splits divide it).
double local_bytes(const ir::Layout& layout, double logical_bytes, const ir::Mesh& mesh);

}  // namespace dstc::compiler
