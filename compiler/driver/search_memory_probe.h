// Setting aside configurations that cannot fit before compiling them whole.
//
// Most of a large search space runs out of memory (a 175B model on few
// devices, a batch too large to hold), and its configurations with many
// micro-batches are its largest modules. A configuration's memory lower
// bound (htae/memory_lower_bound.h) only needs its arguments and its forward
// ops' shapes, which its micro-batch count does not change, so once the
// configuration is checked (bridged and planned) the search compiles it with
// the fewest micro-batches of the same size its schedule allows (one; the
// pipeline ranks for the interleaved schedule), and drops it when even that
// bound exceeds a device's memory.
#pragma once

#include <optional>

#include "compiler/frontend/strategy.h"
#include "htae/cluster_spec.h"
#include "htae/memory_lower_bound.h"
#include "ir/module.h"
#include "ir/source/source_manager.h"

namespace dstc::search {

// `strategy` with fewer micro-batches of the same size, or nullopt when it
// has no fewer (or its micro-batches do not divide its batch, which the
// compiler reports).
std::optional<frontend::Strategy> fewest_micro_batches_form(const frontend::Strategy& strategy);

// The memory lower bound of `strategy` when it exceeds `cluster`'s device
// memory; nullopt when the bound fits or the probe does not compile (the
// configuration is then compiled and simulated as usual).
std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const frontend::Strategy& strategy,
                                                             const htae::ClusterSpec& cluster, SourceManager& sources);
// The same for a compiled module (a configuration that is its own probe).
std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const ir::Module& module,
                                                             const htae::ClusterSpec& cluster);

}  // namespace dstc::search
