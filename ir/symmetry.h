// Symmetric ranks: data-parallel replicas and tensor-parallel ranks usually
// run the same program. Two ranks are in one class when every op covers both
// or neither, their send/recv peers are in one class, and their collective
// groups hold the same classes (an equitable partition, found by refinement).
// The simulator and the deadlock check run one representative per class.
#pragma once

#include <vector>

#include "ir/module.h"

namespace dstc::ir {

struct RankClasses {
  std::vector<uint32_t> class_of;    // per rank
  std::vector<Rank> representative;  // per class: its lowest rank
  std::vector<uint32_t> size;        // per class: how many ranks
};

RankClasses rank_classes(const Module& module, const Function& f);

}  // namespace dstc::ir
