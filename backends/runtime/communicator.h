// How the ranks of one run talk: the few collectives and point-to-point
// transfers every IR communication op maps onto (ir_collectives.h), on
// contiguous buffers of the CPU device's elements (doubles). One
// implementation per transport: MPI between processes
// (mpi_communicator.h), threads within one process (thread_communicator.h).
//
// Collectives take the group as world ranks in group order; every member
// calls with the same group, and the members of a group call their
// collectives in the same order (the IR's program order guarantees it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "ir/mesh.h"

namespace dstc::runtime {

enum class ReduceOp : uint8_t { Sum, Max };

// out[i] = member(0)[i] op member(1)[i] op ..., in member order as the
// reference executor reduces, so every transport gives the same bits.
// `member(m)` is member m's input as a span of out.size() values.
template <class MemberInput>
void reduce_in_member_order(size_t members, MemberInput member, ReduceOp op, std::span<double> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    double r = member(0)[i];
    for (size_t m = 1; m < members; ++m) r = op == ReduceOp::Max ? std::max(r, member(m)[i]) : r + member(m)[i];
    out[i] = r;
  }
}

// Thrown in a rank whose run is ended because another rank failed.
struct PeerFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual ir::Rank rank() const = 0;
  virtual int32_t size() const = 0;

  // In place: every member ends with the elementwise sum (or max).
  virtual void all_reduce(std::span<double> data, std::span<const ir::Rank> group, ReduceOp op) = 0;
  // `out` is every member's `in` in group order (p blocks of in.size()).
  virtual void all_gather(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) = 0;
  // `in` is p blocks of out.size(); member k gets block k reduced over members.
  virtual void reduce_scatter(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group,
                              ReduceOp op) = 0;
  // Block j of `in` goes to member j; block i of `out` comes from member i.
  virtual void all_to_all(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) = 0;
  // In place: every member ends with member `root`'s data.
  virtual void broadcast(std::span<double> data, std::span<const ir::Rank> group, int32_t root) = 0;
  // Returns without waiting for the receiver (the data is copied or
  // buffered), so a rank's sends never wait on its peer's program order.
  virtual void send(std::span<const double> data, ir::Rank to, uint32_t tag) = 0;
  virtual void recv(std::span<double> data, ir::Rank from, uint32_t tag) = 0;
  // Waits until every rank has called it.
  virtual void barrier() = 0;
  // Ends every rank's run: this one reports `message`, the others stop at
  // their next call (PeerFailed) or are ended by the launcher.
  [[noreturn]] virtual void abort(const std::string& message) = 0;
};

}  // namespace dstc::runtime
