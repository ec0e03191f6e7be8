// Who communicates with whom: collective groups implied by a device set and
// mesh axes (or an explicit group list), and send/recv peers.
//
// A collective on a slice over axes A forms one group per combination of
// coordinates on the other axes; a group's members are ordered row-major over
// A. A send from set S to set T pairs the k-th member of S with the k-th
// member of T (for slices: equal coordinates on the axes they share freely).
#pragma once

#include <optional>
#include <vector>

#include "ir/module.h"

namespace dstc::ir {

// Members of each group (uniform across groups); 1 for a non-collective.
int64_t group_size(const Module& module, const Op& op);
// Number of groups of a collective.
int64_t group_count(const Module& module, const Op& op);
// The group of rank r, in group order; empty when r is not in the op's set.
std::vector<Rank> group_of(const Module& module, const Op& op, Rank r);
// Every group of a collective.
std::vector<std::vector<Rank>> groups_of(const Module& module, const Op& op);
// The peer of rank r in a send (its receiver) or recv (its sender).
std::optional<Rank> p2p_peer(const Module& module, const Op& op, Rank r);

// The bytes of an in-place all_gather's result that its operand already
// holds (the distributed optimizer's parameter buffer holds the shard); 0
// for any other op.
int64_t bytes_in_operand(const Module& module, const Function& f, const Op& op);

// For each op of a function, the op its channel pairs it with (a send's
// recv, a recv's send), or kNone. Channels used by other than one send and
// one recv are left unpaired (the verifier reports them).
std::vector<OpId> pair_channels(const Function& f);

}  // namespace dstc::ir
