#include "backends/runtime/training_run.h"

#include <chrono>
#include <exception>
#include <thread>

#include "backends/reference/argument_values.h"
#include "backends/runtime/thread_communicator.h"

namespace dstc::runtime {

namespace {

std::vector<ir::Rank> everyone(int32_t size) {
  std::vector<ir::Rank> ranks(static_cast<size_t>(size));
  for (int32_t r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

// Every rank's recorded spans and memory samples, sent to rank 0 as
// doubles: a count, then (op, start, end, live bytes) per op.
void collect_trace(const RankExecutor& executor, Communicator& comm, TrainingRunReport& report) {
  const uint32_t kTag = 0;  // the step's messages have all been received
  comm.barrier();
  if (comm.rank() != 0) {
    std::vector<double> mine;
    for (size_t i = 0; i < executor.spans().size(); ++i) {
      const ir::TraceOpSpan& s = executor.spans()[i];
      mine.insert(mine.end(),
                  {static_cast<double>(s.op), s.start, s.end, static_cast<double>(executor.memory()[i].live_bytes)});
    }
    comm.send(std::vector<double>{static_cast<double>(mine.size())}, 0, kTag);
    comm.send(mine, 0, kTag);
  } else {
    report.spans = executor.spans();
    report.memory = executor.memory();
    for (ir::Rank r = 1; r < comm.size(); ++r) {
      std::vector<double> count(1);
      comm.recv(count, r, kTag);
      std::vector<double> theirs(static_cast<size_t>(count[0]));
      comm.recv(theirs, r, kTag);
      for (size_t i = 0; i + 3 < theirs.size(); i += 4) {
        report.spans.push_back({r, static_cast<ir::OpId>(theirs[i]), theirs[i + 1], theirs[i + 2]});
        report.memory.push_back({r, theirs[i + 2], static_cast<int64_t>(theirs[i + 3])});
      }
    }
  }
  comm.barrier();
}

}  // namespace

TrainingRunReport run_training(const ir::Module& module, const ir::Function& function, Communicator& comm,
                               Device& device, const TrainingRunOptions& options,
                               const std::function<void(const StepFigures&)>& on_step) {
  const std::vector<ir::Rank> world = everyone(comm.size());
  reference::ArgumentSource arguments = reference::make_argument_source(options.seed);
  RankExecutor executor(module, function, comm.rank(), comm, device);
  executor.bind(arguments, options.arithmetic);
  TrainingRunReport report;
  for (int32_t s = 0; s < options.warmup + options.steps; ++s) {
    comm.barrier();
    auto start = std::chrono::steady_clock::now();
    executor.step(options.trace && s + 1 == options.warmup + options.steps);
    comm.barrier();
    std::vector<double> figures{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
    comm.all_reduce(figures, world, ReduceOp::Max);
    std::vector<double> loss{executor.loss_share()};
    comm.all_reduce(loss, world, ReduceOp::Sum);
    StepFigures step{s + 1, s < options.warmup, loss[0], figures[0]};
    report.steps.push_back(step);
    if (comm.rank() == 0 && on_step) on_step(step);
    if (s == 0 && options.check) {
      reference::ExecutorOptions reference_options;
      reference_options.arithmetic = options.arithmetic;
      reference_options.check_layouts = options.check_layouts;
      report.check = check_against_reference(executor, comm, arguments, reference_options, options.tolerance);
    }
  }
  std::vector<double> peak(static_cast<size_t>(comm.size()));
  comm.all_gather(std::vector<double>{static_cast<double>(executor.peak_bytes())}, peak, world);
  for (double b : peak) report.peak_bytes.push_back(static_cast<int64_t>(b));
  if (options.trace) collect_trace(executor, comm, report);
  return report;
}

TrainingRunReport run_training_in_threads(const ir::Module& module, const ir::Function& function,
                                          const DeviceFactory& open_device, const TrainingRunOptions& options,
                                          const std::function<void(const StepFigures&)>& on_step,
                                          std::optional<std::string>& failure) {
  const int32_t size = module.mesh().size();
  ThreadWorld world(size);
  TrainingRunReport report;
  std::vector<std::thread> threads;
  for (ir::Rank r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(world, r);
      try {
        std::unique_ptr<Device> device = open_device(r);
        TrainingRunReport mine = run_training(module, function, comm, *device, options, on_step);
        if (r == 0) report = std::move(mine);
      } catch (const PeerFailed&) {
        // world.failure() says which rank failed and why.
      } catch (const std::exception& e) {
        try {
          comm.abort(e.what());
        } catch (const PeerFailed&) {
        }
      }
    });
  for (std::thread& t : threads) t.join();
  failure = world.failure();
  return report;
}

}  // namespace dstc::runtime
