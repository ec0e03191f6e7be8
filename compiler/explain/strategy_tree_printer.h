// The strategy tree as text (`dstc compile --emit=tree` and `--explain`):
// every node in tree order, inner nodes with the schedule config set on
// them, leaves with their pipeline stage, each op's SBP choice per mesh axis
// and each parameter's layouts. With `reasons`, every choice says where it
// came from: the user's config, the strategy's default, propagation along
// the data flow, or the pipeline.
#pragma once

#include <string>

#include "compiler/compile_strategy.h"

namespace dstc::compiler {

std::string print_strategy_tree(const LogicalGraph& graph, const StrategySpec& spec, const CompiledStrategy& compiled,
                                bool reasons);

}  // namespace dstc::compiler
