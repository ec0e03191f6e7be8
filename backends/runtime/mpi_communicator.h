// Ranks as processes started by mpirun (OpenMPI): the IR's collectives on
// MPI communicators made once per group, sends as MPI_Isend of a copy (so
// a rank never waits on its receiver), receives as MPI_Recv. A failing
// rank reports and calls MPI_Abort, which ends every rank of the job.
#pragma once

#include <memory>
#include <vector>

#include "backends/runtime/communicator.h"

namespace dstc::runtime {

// MPI_Init on construction, MPI_Finalize on destruction: one per process.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();
  ~MpiCommunicator() override;
  ir::Rank rank() const override { return rank_; }
  int32_t size() const override { return size_; }

  // Makes the communicators of one partition of the ranks into groups
  // (the groups of one collective op): collective over every rank, so
  // every rank calls it with the same partitions in the same order.
  void define_groups(const std::vector<std::vector<ir::Rank>>& partition);

  void all_reduce(std::span<double> data, std::span<const ir::Rank> group, ReduceOp op) override;
  void all_gather(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) override;
  void reduce_scatter(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group,
                      ReduceOp op) override;
  void all_to_all(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) override;
  void broadcast(std::span<double> data, std::span<const ir::Rank> group, int32_t root) override;
  void send(std::span<const double> data, ir::Rank to, uint32_t tag) override;
  void recv(std::span<double> data, ir::Rank from, uint32_t tag) override;
  void barrier() override;
  [[noreturn]] void abort(const std::string& message) override;

 private:
  struct State;  // MPI's handles: communicators per group, sends in flight
  int count(size_t elements);
  void finish_sends(bool wait);

  ir::Rank rank_ = 0;
  int32_t size_ = 1;
  std::unique_ptr<State> state_;
};

}  // namespace dstc::runtime
