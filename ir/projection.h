// Rank projection (DistIR section 3.2): the program one rank runs, its ops in
// program order with concrete peers and groups. A backend runs it; `dstc ir
// ranks` prints it.
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace dstc::ir {

struct RankOp {
  OpId op = 0;
  Rank peer = -1;            // send: the receiver; recv: the sender
  std::vector<Rank> group;   // collectives: this rank's group, in group order
  int32_t group_index = -1;  // collectives: this rank's position in its group
};

struct RankProgram {
  Rank rank = 0;
  std::vector<ValueId> args;     // arguments that live on this rank
  std::vector<RankOp> ops;       // ops this rank runs, in program order (all streams)
  std::vector<ValueId> returns;  // returned values that live on this rank
};

RankProgram project_rank(const Module& module, const Function& f, Rank rank);
// Every rank's program, in one pass over the ops: linear in their total
// size, where projecting each rank alone rescans every op.
std::vector<RankProgram> project_ranks(const Module& module, const Function& f);

// "rank 3 (device 3, world[pp=0, dp=1, tp=1]) @step { ... }": the projected
// program in the op syntax, with "on" sets replaced by concrete peers/groups.
std::string print_rank_program(const Module& module, const Function& f, const RankProgram& program);

}  // namespace dstc::ir
