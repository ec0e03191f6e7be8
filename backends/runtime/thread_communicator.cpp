#include "backends/runtime/thread_communicator.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

namespace dstc::runtime {

std::optional<std::string> ThreadWorld::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void ThreadCommunicator::meet(std::span<const ir::Rank> group, std::span<const double> in, const Compute& compute) {
  std::vector<ir::Rank> members(group.begin(), group.end());
  auto position = std::find(members.begin(), members.end(), rank_);
  if (position == members.end()) abort(fmt::format("rank {} called a collective of a group it is not in", rank_));
  const auto member = static_cast<int32_t>(position - members.begin());
  const auto p = static_cast<int32_t>(members.size());
  ThreadWorld::MeetingKey key{members, calls_[members]++};

  std::unique_lock lock(world_.mutex_);
  ThreadWorld::Meeting& meeting = world_.meetings_[key];
  if (meeting.inputs.empty()) meeting.inputs.resize(static_cast<size_t>(p));
  meeting.inputs[static_cast<size_t>(member)] = in;
  ++meeting.arrived;
  world_.changed_.notify_all();
  // A failure ends the wait for members that will never come; once all
  // have come, every one computes and waits for the others (computing
  // never blocks), so no input is freed while another member reads it.
  world_.changed_.wait(lock, [&] { return meeting.arrived == p || world_.failure_; });
  if (meeting.arrived != p) throw PeerFailed(*world_.failure_);
  lock.unlock();
  compute(meeting.inputs, member);
  lock.lock();
  ++meeting.done;
  world_.changed_.notify_all();
  world_.changed_.wait(lock, [&] { return meeting.done == p; });
  if (++meeting.left == p) world_.meetings_.erase(key);
}

void ThreadCommunicator::all_reduce(std::span<double> data, std::span<const ir::Rank> group, ReduceOp op) {
  std::vector<double> mine(data.begin(), data.end());
  meet(group, mine, [&](std::span<const std::span<const double>> inputs, int32_t) {
    reduce_in_member_order(
        inputs.size(), [&](size_t m) { return inputs[m]; }, op, data);
  });
}

void ThreadCommunicator::all_gather(std::span<const double> in, std::span<double> out,
                                    std::span<const ir::Rank> group) {
  meet(group, in, [&](std::span<const std::span<const double>> inputs, int32_t) {
    for (size_t m = 0; m < inputs.size(); ++m)
      std::copy(inputs[m].begin(), inputs[m].end(), out.begin() + m * in.size());
  });
}

void ThreadCommunicator::reduce_scatter(std::span<const double> in, std::span<double> out,
                                        std::span<const ir::Rank> group, ReduceOp op) {
  meet(group, in, [&](std::span<const std::span<const double>> inputs, int32_t member) {
    const size_t base = static_cast<size_t>(member) * out.size();
    reduce_in_member_order(
        inputs.size(), [&](size_t m) { return inputs[m].subspan(base, out.size()); }, op, out);
  });
}

void ThreadCommunicator::all_to_all(std::span<const double> in, std::span<double> out,
                                    std::span<const ir::Rank> group) {
  meet(group, in, [&](std::span<const std::span<const double>> inputs, int32_t member) {
    const size_t block = out.size() / inputs.size();
    for (size_t m = 0; m < inputs.size(); ++m) {
      std::span<const double> from = inputs[m].subspan(static_cast<size_t>(member) * block, block);
      std::copy(from.begin(), from.end(), out.begin() + m * block);
    }
  });
}

void ThreadCommunicator::broadcast(std::span<double> data, std::span<const ir::Rank> group, int32_t root) {
  std::vector<double> mine(data.begin(), data.end());
  meet(group, mine, [&](std::span<const std::span<const double>> inputs, int32_t) {
    std::copy(inputs[static_cast<size_t>(root)].begin(), inputs[static_cast<size_t>(root)].end(), data.begin());
  });
}

void ThreadCommunicator::send(std::span<const double> data, ir::Rank to, uint32_t tag) {
  std::lock_guard lock(world_.mutex_);
  world_.mailboxes_[{rank_, to, tag}].emplace_back(data.begin(), data.end());
  world_.changed_.notify_all();
}

void ThreadCommunicator::recv(std::span<double> data, ir::Rank from, uint32_t tag) {
  std::unique_lock lock(world_.mutex_);
  auto& box = world_.mailboxes_[{from, rank_, tag}];
  world_.changed_.wait(lock, [&] { return !box.empty() || world_.failure_; });
  if (world_.failure_) throw PeerFailed(*world_.failure_);
  if (box.front().size() != data.size()) {
    std::string message =
        fmt::format("expected {} elements from rank {} (tag {}), got {}", data.size(), from, tag, box.front().size());
    lock.unlock();
    abort(message);
  }
  std::copy(box.front().begin(), box.front().end(), data.begin());
  box.pop_front();
}

void ThreadCommunicator::barrier() {
  std::vector<ir::Rank> everyone(static_cast<size_t>(world_.size()));
  for (size_t r = 0; r < everyone.size(); ++r) everyone[r] = static_cast<ir::Rank>(r);
  meet(everyone, {}, [](std::span<const std::span<const double>>, int32_t) {});
}

void ThreadCommunicator::abort(const std::string& message) {
  std::lock_guard lock(world_.mutex_);
  if (!world_.failure_) world_.failure_ = fmt::format("rank {}: {}", rank_, message);
  world_.changed_.notify_all();
  throw PeerFailed(*world_.failure_);
}

}  // namespace dstc::runtime
