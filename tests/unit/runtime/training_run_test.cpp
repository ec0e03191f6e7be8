// The per-rank runtime against the reference executor: every IR collective
// on ranks as threads gives each rank what the reference gives it, and a
// communicator that corrupts one rank's reduction is caught by the check.
#include <gtest/gtest.h>

#include <thread>

#include "backends/runtime/cpu_device.h"
#include "backends/runtime/thread_communicator.h"
#include "backends/runtime/training_run.h"
#include "ir/parser.h"

namespace dstc::runtime {
namespace {

ir::Module load(const char* name) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> m =
      ir::parse_file(sources, std::string(DSTC_SOURCE_DIR) + "/tests/unit/runtime/" + name, diags);
  EXPECT_TRUE(m.has_value()) << diags.error_count();
  return std::move(*m);
}

std::unique_ptr<Device> cpu(ir::Rank) { return std::make_unique<CpuDevice>(reference::Arithmetic::F32); }

TrainingRunOptions one_checked_step() {
  TrainingRunOptions o;
  o.warmup = 0;
  o.steps = 1;
  o.check = true;
  o.check_layouts = false;  // these programs reduce split values on purpose
  return o;
}

TEST(TrainingRun, EveryCollectiveGivesEachRankWhatTheReferenceGivesIt) {
  ir::Module m = load("every_collective.ir");
  std::optional<std::string> failure;
  TrainingRunReport report = run_training_in_threads(m, m.functions.front(), cpu, one_checked_step(), {}, failure);
  ASSERT_FALSE(failure) << *failure;
  ASSERT_TRUE(report.check);
  EXPECT_TRUE(report.check->passed) << report.check->failure;
  EXPECT_EQ(report.check->compared, 10u * 4u + 1u);  // ten results on every rank, %z on rank 1
  EXPECT_EQ(report.peak_bytes.size(), 4u);
}

// Passes everything through, but adds 1 to the first element of every
// reduction of a proper subgroup on one rank.
class CorruptingCommunicator final : public Communicator {
 public:
  CorruptingCommunicator(Communicator& inner, ir::Rank corrupted) : inner_(inner), corrupted_(corrupted) {}
  ir::Rank rank() const override { return inner_.rank(); }
  int32_t size() const override { return inner_.size(); }
  void all_reduce(std::span<double> data, std::span<const ir::Rank> group, ReduceOp op) override {
    inner_.all_reduce(data, group, op);
    if (rank() == corrupted_ && static_cast<int32_t>(group.size()) < size() && !data.empty()) data[0] += 1;
  }
  void all_gather(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) override {
    inner_.all_gather(in, out, group);
  }
  void reduce_scatter(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group,
                      ReduceOp op) override {
    inner_.reduce_scatter(in, out, group, op);
  }
  void all_to_all(std::span<const double> in, std::span<double> out, std::span<const ir::Rank> group) override {
    inner_.all_to_all(in, out, group);
  }
  void broadcast(std::span<double> data, std::span<const ir::Rank> group, int32_t root) override {
    inner_.broadcast(data, group, root);
  }
  void send(std::span<const double> data, ir::Rank to, uint32_t tag) override { inner_.send(data, to, tag); }
  void recv(std::span<double> data, ir::Rank from, uint32_t tag) override { inner_.recv(data, from, tag); }
  void barrier() override { inner_.barrier(); }
  void abort(const std::string& message) override { inner_.abort(message); }

 private:
  Communicator& inner_;
  ir::Rank corrupted_;
};

TEST(TrainingRun, TheCheckCatchesARankWhoseReductionIsWrong) {
  ir::Module m = load("grouped_reductions.ir");
  ThreadWorld world(4);
  std::optional<ReferenceCheck> check;
  std::vector<std::thread> ranks;
  for (ir::Rank r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] {
      ThreadCommunicator threads(world, r);
      CorruptingCommunicator comm(threads, 2);
      CpuDevice device(reference::Arithmetic::F32);
      TrainingRunReport report = run_training(m, m.functions.front(), comm, device, one_checked_step());
      if (r == 0) check = report.check;
    });
  for (std::thread& t : ranks) t.join();
  ASSERT_FALSE(world.failure());
  ASSERT_TRUE(check);
  EXPECT_FALSE(check->passed);
  EXPECT_NE(check->failure.find("on rank 2 differs from the reference"), std::string::npos) << check->failure;
}

TEST(TrainingRun, AFailingRankEndsEveryRankWithItsMessage) {
  ir::Module m = load("grouped_reductions.ir");
  ThreadWorld world(4);
  std::vector<std::thread> ranks;
  for (ir::Rank r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] {
      ThreadCommunicator comm(world, r);
      try {
        if (r == 3) comm.abort("out of memory");
        CpuDevice device(reference::Arithmetic::F32);
        run_training(m, m.functions.front(), comm, device, one_checked_step());
        ADD_FAILURE() << "rank " << r << " finished its step although rank 3 failed";
      } catch (const PeerFailed& e) {
        EXPECT_EQ(std::string(e.what()), "rank 3: out of memory");
      }
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(world.failure(), "rank 3: out of memory");
}

}  // namespace
}  // namespace dstc::runtime
