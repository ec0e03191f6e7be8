#include "backends/runtime/tcp_communicator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace dstc::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// Collective tags have the top bit set; the IR's channels (uint32) do not.
constexpr uint64_t kCollective = uint64_t{1} << 63;
// Sent to every peer before an orderly close: the EOF after it is no failure.
constexpr uint64_t kGoodbye = ~uint64_t{0};
// A frame claiming more is not one of ours (16 GiB of doubles).
constexpr uint64_t kMaxFrameElements = uint64_t{1} << 31;

struct FrameHeader {
  uint64_t tag;
  uint64_t count;  // doubles that follow
};

struct Hello {
  int32_t rank;
  uint16_t port;  // where this rank accepts its higher peers
};

struct PeerAddress {
  uint32_t ip;  // network order
  uint16_t port;
};

bool write_all(int fd, const void* data, size_t bytes) {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

int listening_socket(uint16_t port, int backlog) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail(fmt::format("socket: {}", std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 || ::listen(fd, backlog) < 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    fail(fmt::format("cannot listen on port {}: {}", port, why));
  }
  return fd;
}

uint16_t port_of(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Reads on fd give up at `deadline` (while the ranks meet); a zero
// duration (after) waits as long as it takes.
void read_deadline(int fd, Clock::duration left) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
  timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
  if (us <= 0 && left != Clock::duration::zero()) tv = {0, 1};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// Accepts one connection before `deadline`, or -1.
int accept_before(int listener, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return -1;
    pollfd p{listener, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) return -1;
    if (ready > 0) {
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd >= 0) {
        no_delay(fd);
        return fd;
      }
    }
  }
}

// Connects to ip:port (network order), retrying until `deadline`: the peer
// may not listen yet.
int connect_before(uint32_t ip, uint16_t port, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = ip;
    addr.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      no_delay(fd);
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return -1;
}

uint32_t resolve(const std::string& host) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found)
    fail(fmt::format("MASTER_ADDR={} does not resolve to an IPv4 address", host));
  uint32_t ip = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(found);
  return ip;
}

// out = the blocks (one per member, each of out.size()) reduced in member order.
void reduce_blocks(const std::vector<double>& blocks, ReduceOp op, std::span<double> out) {
  const size_t n = out.size(), p = n > 0 ? blocks.size() / n : 0;
  reduce_in_member_order(
      p, [&](size_t m) { return std::span<const double>(blocks).subspan(m * n, n); }, op, out);
}

// FNV-1a of a group's ranks: the same on every member.
uint64_t group_hash(std::span<const ir::Rank> group) {
  uint64_t h = 1469598103934665603ull;
  for (ir::Rank r : group) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(r));
    h *= 1099511628211ull;
  }
  return h;
}

int32_t member_index(std::span<const ir::Rank> group, ir::Rank rank) {
  auto it = std::find(group.begin(), group.end(), rank);
  return it == group.end() ? -1 : static_cast<int32_t>(it - group.begin());
}

}  // namespace

TcpCommunicator::TcpCommunicator(const LaunchEnvironment& env, double timeout_seconds)
    : rank_(env.rank), size_(env.world_size), sockets_(static_cast<size_t>(env.world_size), -1) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds));
  const std::string master = fmt::format("{}:{}", env.master_addr, env.rendezvous_port);
  int peers = listening_socket(0, size_);
  const uint16_t peer_port = port_of(peers);
  std::vector<PeerAddress> table(static_cast<size_t>(size_));
  if (rank_ == 0) {
    int rendezvous = listening_socket(static_cast<uint16_t>(env.rendezvous_port), size_);
    for (int joined = 1; joined < size_;) {
      int fd = accept_before(rendezvous, deadline);
      if (fd < 0) {
        ::close(rendezvous);
        fail(fmt::format("rank 0 waited {:g} s at {} for the other ranks; {} of {} came", timeout_seconds, master,
                         joined, size_));
      }
      read_deadline(fd, deadline - Clock::now());
      Hello hello{};
      if (!read_all(fd, &hello, sizeof hello) || hello.rank <= 0 || hello.rank >= size_ ||
          sockets_[static_cast<size_t>(hello.rank)] >= 0) {
        ::close(fd);  // not one of this run's ranks
        continue;
      }
      ++joined;
      sockaddr_in from{};
      socklen_t len = sizeof from;
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&from), &len);
      table[static_cast<size_t>(hello.rank)] = {from.sin_addr.s_addr, hello.port};
      sockets_[static_cast<size_t>(hello.rank)] = fd;
    }
    ::close(rendezvous);
    for (int r = 1; r < size_; ++r)
      write_all(sockets_[static_cast<size_t>(r)], table.data(), table.size() * sizeof(PeerAddress));
  } else {
    int fd = connect_before(resolve(env.master_addr), static_cast<uint16_t>(env.rendezvous_port), deadline);
    if (fd >= 0) read_deadline(fd, deadline - Clock::now());
    Hello hello{rank_, peer_port};
    if (fd < 0 || !write_all(fd, &hello, sizeof hello) ||
        !read_all(fd, table.data(), table.size() * sizeof(PeerAddress)))
      fail(fmt::format("rank {} could not join the rendezvous at {} within {:g} s", rank_, master, timeout_seconds));
    sockets_[0] = fd;
    // Connect to the lower ranks; accept the higher ones.
    for (int q = 1; q < rank_; ++q) {
      int peer = connect_before(table[static_cast<size_t>(q)].ip, table[static_cast<size_t>(q)].port, deadline);
      Hello mine{rank_, peer_port};
      if (peer < 0 || !write_all(peer, &mine, sizeof mine))
        fail(fmt::format("rank {} could not connect to rank {} within {:g} s", rank_, q, timeout_seconds));
      sockets_[static_cast<size_t>(q)] = peer;
    }
    for (int joined = rank_ + 1; joined < size_; ++joined) {
      int peer = accept_before(peers, deadline);
      if (peer >= 0) read_deadline(peer, deadline - Clock::now());
      Hello theirs{};
      if (peer < 0 || !read_all(peer, &theirs, sizeof theirs) || theirs.rank <= rank_ || theirs.rank >= size_)
        fail(fmt::format("rank {} waited {:g} s for its higher ranks to connect", rank_, timeout_seconds));
      sockets_[static_cast<size_t>(theirs.rank)] = peer;
    }
  }
  ::close(peers);
  for (int fd : sockets_)
    if (fd >= 0) read_deadline(fd, Clock::duration::zero());
  for (int r = 0; r < size_; ++r) send_locks_.push_back(std::make_unique<std::mutex>());
  said_goodbye_.assign(static_cast<size_t>(size_), 0);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) receivers_.emplace_back([this, r] { receive_loop(r); });
}

TcpCommunicator::~TcpCommunicator() {
  const FrameHeader goodbye{kGoodbye, 0};
  for (int r = 0; r < size_; ++r)
    if (r != rank_) {
      std::lock_guard lock(*send_locks_[static_cast<size_t>(r)]);
      write_all(sockets_[static_cast<size_t>(r)], &goodbye, sizeof goodbye);
      ::shutdown(sockets_[static_cast<size_t>(r)], SHUT_WR);
    }
  for (std::thread& t : receivers_) t.join();  // each ends at its peer's goodbye
  for (int fd : sockets_)
    if (fd >= 0) ::close(fd);
}

void TcpCommunicator::receive_loop(ir::Rank from) {
  const int fd = sockets_[static_cast<size_t>(from)];
  while (true) {
    FrameHeader h{};
    std::vector<double> data;
    bool ok = read_all(fd, &h, sizeof h);
    if (ok && h.tag == kGoodbye) {
      std::lock_guard lock(mutex_);
      said_goodbye_[static_cast<size_t>(from)] = 1;
      arrived_.notify_all();
      return;
    }
    ok = ok && h.count <= kMaxFrameElements;
    if (ok) {
      try {
        data.resize(h.count);
        ok = read_all(fd, data.data(), h.count * sizeof(double));
      } catch (const std::bad_alloc&) {
        ok = false;
      }
    }
    std::lock_guard lock(mutex_);
    if (!ok) {
      if (!failure_) failure_ = fmt::format("rank {} closed its connection (it failed, was killed or crashed)", from);
      arrived_.notify_all();
      return;
    }
    mailboxes_[{from, h.tag}].push_back(std::move(data));
    arrived_.notify_all();
  }
}

void TcpCommunicator::send_tagged(std::span<const double> data, ir::Rank to, Tag tag) {
  const FrameHeader h{tag, data.size()};
  std::lock_guard lock(*send_locks_[static_cast<size_t>(to)]);
  const int fd = sockets_[static_cast<size_t>(to)];
  if (!write_all(fd, &h, sizeof h) || !write_all(fd, data.data(), data.size() * sizeof(double)))
    throw PeerFailed(fmt::format("rank {} closed its connection (it failed, was killed or crashed)", to));
}

void TcpCommunicator::recv_tagged(std::span<double> data, ir::Rank from, Tag tag) {
  std::unique_lock lock(mutex_);
  const std::pair<ir::Rank, Tag> key{from, tag};
  auto has_message = [&] {
    auto it = mailboxes_.find(key);
    return it != mailboxes_.end() && !it->second.empty();
  };
  arrived_.wait(lock, [&] { return has_message() || failure_ || said_goodbye_[static_cast<size_t>(from)]; });
  if (!has_message())
    throw PeerFailed(failure_ ? *failure_
                              : fmt::format("rank {} ended its run without sending what this rank waits for "
                                            "(the ranks run different programs)",
                                            from));
  auto it = mailboxes_.find(key);
  std::vector<double> message = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) mailboxes_.erase(it);
  lock.unlock();
  if (message.size() != data.size())
    abort(fmt::format("expected {} elements from rank {}, got {}", data.size(), from, message.size()));
  std::copy(message.begin(), message.end(), data.begin());
}

TcpCommunicator::Tag TcpCommunicator::collective_tag(std::span<const ir::Rank> group) {
  uint64_t call = calls_[std::vector<ir::Rank>(group.begin(), group.end())]++;
  return kCollective | ((group_hash(group) & 0xffffffffull) << 31) | (call & 0x7fffffffull);
}

std::vector<double> TcpCommunicator::exchange(std::span<const double> in, std::span<const ir::Rank> group,
                                              bool blocks_per_member) {
  const Tag tag = collective_tag(group);
  const size_t p = group.size(), me = static_cast<size_t>(member_index(group, rank_));
  const size_t block = blocks_per_member ? in.size() / p : in.size();
  auto mine_for = [&](size_t m) { return blocks_per_member ? in.subspan(m * block, block) : in; };
  for (size_t m = 0; m < p; ++m)
    if (m != me) send_tagged(mine_for(m), group[m], tag);
  std::vector<double> got(p * block);
  std::span<const double> own = mine_for(me);
  std::copy(own.begin(), own.end(), got.begin() + static_cast<std::ptrdiff_t>(me * block));
  for (size_t m = 0; m < p; ++m)
    if (m != me) recv_tagged(std::span<double>(got).subspan(m * block, block), group[m], tag);
  return got;
}

void TcpCommunicator::all_reduce(std::span<double> data, std::span<const ir::Rank> group, ReduceOp op) {
  reduce_blocks(exchange(data, group, false), op, data);
}

void TcpCommunicator::all_gather(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) {
  std::vector<double> all = exchange(in, group, false);
  std::copy(all.begin(), all.end(), out.begin());
}

void TcpCommunicator::reduce_scatter(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group,
                                     ReduceOp op) {
  reduce_blocks(exchange(in, group, true), op, out);  // every member's block of this rank
}

void TcpCommunicator::all_to_all(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) {
  std::vector<double> got = exchange(in, group, true);
  std::copy(got.begin(), got.end(), out.begin());
}

void TcpCommunicator::broadcast(std::span<double> data, std::span<const ir::Rank> group, int32_t root) {
  const Tag tag = collective_tag(group);
  if (group[static_cast<size_t>(root)] == rank_) {
    for (ir::Rank r : group)
      if (r != rank_) send_tagged(data, r, tag);
  } else {
    recv_tagged(data, group[static_cast<size_t>(root)], tag);
  }
}

void TcpCommunicator::send(std::span<const double> data, ir::Rank to, uint32_t tag) { send_tagged(data, to, tag); }

void TcpCommunicator::recv(std::span<double> data, ir::Rank from, uint32_t tag) { recv_tagged(data, from, tag); }

void TcpCommunicator::barrier() {
  std::vector<ir::Rank> everyone(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) everyone[static_cast<size_t>(r)] = r;
  exchange({}, everyone, false);
}

void TcpCommunicator::abort(const std::string& message) {
  std::fprintf(stderr, "dstc run: rank %d failed: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  // Closing without a goodbye tells every peer this rank failed.
  for (int fd : sockets_)
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  std::_Exit(1);
}

}  // namespace dstc::runtime
