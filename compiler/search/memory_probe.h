// Setting aside configurations that cannot fit before compiling them whole.
//
// Most of a large search space runs out of memory (a 175B model on few
// devices, a batch too large to hold), and its configurations with many
// micro-batches are its largest modules. A configuration's memory lower
// bound (htae/memory_lower_bound.h) only needs its arguments and its forward
// ops' shapes, which its micro-batch count does not change, so once the
// configuration is checked (logical and planned) the search lowers it, with
// the same SBP plan, with the fewest micro-batches of the same size its
// schedule allows (one; the pipeline ranks for the interleaved schedule),
// and drops it when even that bound, with the saved activations its own
// schedule holds at once, exceeds a device's memory.
#pragma once

#include <optional>
#include <vector>

#include "compiler/compile_strategy.h"
#include "compiler/logical/build_logical_graph.h"
#include "htae/cluster_spec.h"
#include "htae/memory_lower_bound.h"
#include "ir/module.h"
#include "ir/source/source_manager.h"

namespace dstc::search {

// The fewest micro-batches of the same size that the planned
// configuration's schedule allows, when fewer than it has; nullopt when it
// has no fewer (a schedule table names its own).
std::optional<int32_t> fewest_micro_batches(const compiler::ResolvedStrategy& resolved);

// The memory lower bound of the configuration (`logical`, `planned`)
// lowered with `micro_batches` micro-batches of the same size and the same
// SBP plan, when it exceeds `cluster`'s device memory; nullopt when the
// bound fits or the probe does not resolve (the configuration is then
// compiled and simulated as usual): a plan option, the program is left as is.
std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const compiler::LogicalProgram& logical,
                                                             const compiler::PlannedStrategy& planned,
                                                             int32_t micro_batches, const htae::ClusterSpec& cluster,
                                                             SourceManager& sources);
// The same for a compiled module (the probe, or a configuration that is its
// own probe), with as many micro-batches held as `resolved`, the
// configuration's own schedule, holds.
std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const ir::Module& module,
                                                             const compiler::ResolvedStrategy& resolved,
                                                             int32_t pipeline_axis, const htae::ClusterSpec& cluster);

// Per device of `module`: how many micro-batches' forward the resolved
// schedule runs whole on its pipeline rank before the rank's first backward
// (htae::memory_lower_bound counts their saved activations held at once).
std::vector<int64_t> micro_batches_held(const ir::Module& module, const compiler::ResolvedStrategy& resolved,
                                        int32_t pipeline_axis);

}  // namespace dstc::search
