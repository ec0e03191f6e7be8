// Ranks as threads of one process: `dstc run` without a launcher starts
// the strategy's ranks itself this way on the CPU device, and the tests run
// every example so. Collectives meet at a rendezvous per (group, call
// number); each member computes its own result from every member's input,
// in group order, so a run is deterministic.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/runtime/communicator.h"

namespace dstc::runtime {

// What the ranks of one process share.
class ThreadWorld {
 public:
  explicit ThreadWorld(int32_t size) : size_(size) {}
  int32_t size() const { return size_; }
  // The first failure reported with abort, if any.
  std::optional<std::string> failure() const;

 private:
  friend class ThreadCommunicator;
  struct Meeting {
    std::vector<std::span<const double>> inputs;
    int32_t arrived = 0, done = 0, left = 0;
  };
  using MeetingKey = std::pair<std::vector<ir::Rank>, uint64_t>;
  using Channel = std::tuple<ir::Rank, ir::Rank, uint32_t>;  // from, to, tag

  int32_t size_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<MeetingKey, Meeting> meetings_;
  std::map<Channel, std::deque<std::vector<double>>> mailboxes_;
  std::optional<std::string> failure_;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(ThreadWorld& world, ir::Rank rank) : world_(world), rank_(rank) {}
  ir::Rank rank() const override { return rank_; }
  int32_t size() const override { return world_.size(); }
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
  using Compute = std::function<void(std::span<const std::span<const double>> inputs, int32_t member)>;
  // Deposits `in`, waits for every member, runs `compute` (reading the
  // others' inputs), and returns once every member has computed.
  void meet(std::span<const ir::Rank> group, std::span<const double> in, const Compute& compute);

  ThreadWorld& world_;
  ir::Rank rank_;
  std::map<std::vector<ir::Rank>, uint64_t> calls_;  // collectives this rank made per group
};

}  // namespace dstc::runtime
