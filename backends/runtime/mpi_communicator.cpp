#include "backends/runtime/mpi_communicator.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <list>
#include <map>

#include <fmt/format.h>

namespace dstc::runtime {

namespace {

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Max ? MPI_MAX : MPI_SUM; }

struct PendingSend {
  std::vector<double> data;
  MPI_Request request = MPI_REQUEST_NULL;
};

}  // namespace

struct MpiCommunicator::State {
  std::map<std::vector<ir::Rank>, MPI_Comm> comms;
  std::list<std::unique_ptr<PendingSend>> sends;

  // The communicator of `group`, made by define_groups.
  MPI_Comm comm_of(std::span<const ir::Rank> group, MpiCommunicator& self) const {
    auto it = comms.find(std::vector<ir::Rank>(group.begin(), group.end()));
    if (it == comms.end()) self.abort(fmt::format("no communicator for a group of {} ranks", group.size()));
    return it->second;
  }
};

MpiSession::MpiSession() { MPI_Init(nullptr, nullptr); }

MpiSession::~MpiSession() { MPI_Finalize(); }

MpiCommunicator::MpiCommunicator() : state_(std::make_unique<State>()) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  finish_sends(true);
  for (auto& [group, comm] : state_->comms) MPI_Comm_free(&comm);
}

void MpiCommunicator::define_groups(const std::vector<std::vector<ir::Rank>>& partition) {
  int color = MPI_UNDEFINED, key = 0;
  const std::vector<ir::Rank>* mine = nullptr;
  for (size_t g = 0; g < partition.size(); ++g)
    for (size_t k = 0; k < partition[g].size(); ++k)
      if (partition[g][k] == rank_) {
        color = static_cast<int>(g);
        key = static_cast<int>(k);
        mine = &partition[g];
      }
  if (mine && state_->comms.count(*mine)) color = MPI_UNDEFINED;  // made for an earlier op
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
  if (comm != MPI_COMM_NULL) state_->comms[*mine] = comm;
}

int MpiCommunicator::count(size_t elements) {
  if (elements > static_cast<size_t>(INT_MAX))
    abort(fmt::format("a transfer of {} elements is more than MPI's int count allows", elements));
  return static_cast<int>(elements);
}

void MpiCommunicator::all_reduce(std::span<double> data, std::span<const ir::Rank> group, ReduceOp op) {
  MPI_Allreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_DOUBLE, mpi_op(op), state_->comm_of(group, *this));
}

void MpiCommunicator::all_gather(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) {
  MPI_Allgather(in.data(), count(in.size()), MPI_DOUBLE, out.data(), count(in.size()), MPI_DOUBLE,
                state_->comm_of(group, *this));
}

void MpiCommunicator::reduce_scatter(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group,
                                     ReduceOp op) {
  MPI_Reduce_scatter_block(in.data(), out.data(), count(out.size()), MPI_DOUBLE, mpi_op(op),
                           state_->comm_of(group, *this));
}

void MpiCommunicator::all_to_all(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) {
  const int block = count(out.size() / group.size());
  MPI_Alltoall(in.data(), block, MPI_DOUBLE, out.data(), block, MPI_DOUBLE, state_->comm_of(group, *this));
}

void MpiCommunicator::broadcast(std::span<double> data, std::span<const ir::Rank> group, int32_t root) {
  MPI_Bcast(data.data(), count(data.size()), MPI_DOUBLE, root, state_->comm_of(group, *this));
}

void MpiCommunicator::send(std::span<const double> data, ir::Rank to, uint32_t tag) {
  finish_sends(false);
  auto pending = std::make_unique<PendingSend>();
  pending->data.assign(data.begin(), data.end());
  MPI_Isend(pending->data.data(), count(data.size()), MPI_DOUBLE, to, static_cast<int>(tag), MPI_COMM_WORLD,
            &pending->request);
  state_->sends.push_back(std::move(pending));
}

void MpiCommunicator::recv(std::span<double> data, ir::Rank from, uint32_t tag) {
  MPI_Status status;
  MPI_Recv(data.data(), count(data.size()), MPI_DOUBLE, from, static_cast<int>(tag), MPI_COMM_WORLD, &status);
  int got = 0;
  MPI_Get_count(&status, MPI_DOUBLE, &got);
  if (static_cast<size_t>(got) != data.size())
    abort(fmt::format("expected {} elements from rank {} (tag {}), got {}", data.size(), from, tag, got));
}

void MpiCommunicator::barrier() {
  finish_sends(true);
  MPI_Barrier(MPI_COMM_WORLD);
}

void MpiCommunicator::finish_sends(bool wait) {
  for (auto it = state_->sends.begin(); it != state_->sends.end();) {
    int done = 0;
    if (wait)
      MPI_Wait(&(*it)->request, MPI_STATUS_IGNORE), done = 1;
    else
      MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE);
    it = done ? state_->sends.erase(it) : std::next(it);
  }
}

void MpiCommunicator::abort(const std::string& message) {
  std::fprintf(stderr, "dstc run: rank %d failed: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace dstc::runtime
