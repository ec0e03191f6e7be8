// Ring attention (`cp_comm_type = p2p`): a rank's keys and values go round
// the context-parallel ring as one message per step (Transformer Engine
// concatenates them), so the two gathers an attention op reads become one
// grouped collective.
#pragma once

#include "ir/module.h"

namespace dstc::compiler {

// Joins each feature-stream all-gather with the next op where that is an
// all-gather of the same kind over the same group, both read by one
// attention or attention-gradient op and nothing else, and their results
// are consecutive values: one collective, each operand gathered as if alone.
void group_key_value_gathers(const ir::Module& m, ir::Function& f);

}  // namespace dstc::compiler
