// Ranks as processes started by torchrun, or by any launcher that sets
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: one TCP connection between
// every pair of ranks, made through a rendezvous at rank 0 (as torchrun's
// c10d store is). A thread per connection receives into mailboxes, so a
// send never waits on its peer's program order; collectives are exchanges
// of blocks between the group's members, reduced in group order (every
// member computes the same bits). A connection that closes (a rank that
// failed, was killed or crashed) ends every rank with its number.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backends/runtime/communicator.h"
#include "backends/runtime/launch.h"

namespace dstc::runtime {

class TcpCommunicator final : public Communicator {
 public:
  // Connects the world; throws std::runtime_error, saying what it waited
  // for, when the rendezvous or a connection fails within `timeout_seconds`.
  TcpCommunicator(const LaunchEnvironment& env, double timeout_seconds);
  ~TcpCommunicator() override;
  TcpCommunicator(const TcpCommunicator&) = delete;
  TcpCommunicator& operator=(const TcpCommunicator&) = delete;

  ir::Rank rank() const override { return rank_; }
  int32_t size() const override { return size_; }
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
  using Tag = uint64_t;
  void send_tagged(std::span<const double> data, ir::Rank to, Tag tag);
  void recv_tagged(std::span<double> data, ir::Rank from, Tag tag);
  void receive_loop(ir::Rank from);
  // The tag of this rank's next collective on `group` (the same on every member).
  Tag collective_tag(std::span<const ir::Rank> group);
  // Every member's block of `in` (block k from member k, this rank's own).
  std::vector<double> exchange(std::span<const double> in, std::span<const ir::Rank> group, bool blocks_per_member);

  ir::Rank rank_ = 0;
  int32_t size_ = 1;
  std::vector<int> sockets_;  // per peer rank; -1 for this rank
  std::vector<std::unique_ptr<std::mutex>> send_locks_;
  std::vector<std::thread> receivers_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::pair<ir::Rank, Tag>, std::deque<std::vector<double>>> mailboxes_;
  std::optional<std::string> failure_;
  std::vector<uint8_t> said_goodbye_;  // per peer: it ended its run in order
  std::map<std::vector<ir::Rank>, uint64_t> calls_;
};

}  // namespace dstc::runtime
