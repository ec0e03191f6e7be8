// Boxing: the transfers that turn a tensor laid out one way into another
// layout, one mesh axis at a time (architecture note, "SBP and boxing").
//
// Nesting: when several mesh axes split the same tensor dim, the earlier
// mesh axis chunks outermost (OneFlow's nd-SBP; with mesh [cp, tp], context
// parallelism's sequence chunk holds sequence parallelism's). Plans remove
// splits from the latest axis down and add them from the earliest up, so
// each collective sees contiguous chunks; where a split of an earlier axis
// is in the way, it is gathered and sharded again around the step.
#pragma once

#include <string>
#include <vector>

#include "ir/ids.h"
#include "ir/mesh.h"

namespace dstc::compiler {

// One step of a boxing plan is the IR op that carries it out:
//   all_gather      S(i) -> B
//   all_reduce      P -> B
//   reduce_scatter  P -> S(j)
//   all_to_all      S(i) -> S(j)
//   shard           B -> S(j): keep this device's chunk (local)
//   unshard         S(i) -> P: this device's chunk in place, zeros elsewhere (local)
//   partialize      B -> P: keep on coordinate 0, zeros elsewhere (local)
// and, on the flattened block (S(flat), flat = true):
//   all_gather      S(flat) -> B
//   reduce_scatter  P -> S(flat)
//   shard           B -> S(flat) (local)
// A flat chunk is of the block the other axes leave, so a plan first
// gathers an S(flat) it leaves and flattens last.
//
// Where several mesh axes split one dim and are to split another the same
// way (tokens split over [dp, tp] going to experts split over [dp, tp]), one
// all_to_all over all of them (`span`) moves every chunk at once: the
// group's row-major order is the nesting's, earlier axes outer.
struct AxisTransfer {
  ir::OpKind op;
  int axis = 0;       // mesh axis (a spanning all_to_all's first)
  int from_dim = -1;  // all_gather, all_to_all, unshard
  int to_dim = -1;    // reduce_scatter, all_to_all, shard
  bool flat = false;
  uint32_t span = 0;  // all_to_all over several axes: their bits; 0: `axis` alone
};

// The mesh axes a step runs over, as bits.
inline uint32_t step_axes(const AxisTransfer& t) { return t.span ? t.span : 1u << t.axis; }
// The devices in each of its groups.
int64_t step_group_size(const AxisTransfer& t, const ir::Mesh& mesh);

std::vector<AxisTransfer> plan_boxing(const ir::Layout& from, const ir::Layout& to);

// Whether boxing from → to all-gathers (the tensor read is larger than the
// one stored).
bool gathers(const ir::Layout& from, const ir::Layout& to);

// Bytes each device sends to carry out `plan` on a tensor of `logical_bytes`
// held in layout `from` (ring algorithms, architecture note's table).
double boxing_bytes(const std::vector<AxisTransfer>& plan, const ir::Layout& from, double logical_bytes,
                    const ir::Mesh& mesh);

// Local bytes of a tensor of `logical_bytes` in `layout` (splits divide it).
double local_bytes(const ir::Layout& layout, double logical_bytes, const ir::Mesh& mesh);

}  // namespace dstc::compiler
