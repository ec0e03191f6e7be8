// dstc run FILE: executes a strategy's steps (training, or inference's forward) for real, one rank
// per device of its mesh, on the CPU or CUDA device (docs/run.md). Under
// mpirun each process is a rank and talks over MPI; under torchrun over
// TCP; started by itself, dstc run runs the ranks as threads. --check compares the first step on every rank
// with the reference executor, which `dstc verify` proves equal to the
// single-device model.
#include <algorithm>
#include <cstdlib>
#include <ostream>

#include <fmt/format.h>

#include "backends/reference/verify.h"
#include "backends/runtime/cpu_device.h"
#include "backends/runtime/launch.h"
#include "backends/runtime/mpi_communicator.h"
#include "backends/runtime/tcp_communicator.h"
#include "backends/runtime/training_run.h"
#include "compiler/compile_strategy.h"
#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/driver/human_units.h"
#include "compiler/driver/output_file.h"
#include "compiler/pipeline/load_strategy.h"
#include "ir/chrome_trace.h"
#include "ir/groups.h"
#include "ir/registry.h"
#include "ir/source/diagnostic_kinds.h"
#include "ir/verifier.h"

namespace dstc {
namespace {

struct RunOptions {
  StrategyRequest request;
  std::string device = "cpu";
  int32_t ranks = 0;  // 0: as many as the strategy's mesh has devices
  runtime::TrainingRunOptions training;
  std::string arithmetic = "f32";
  std::string gemm_precision = "f32";  // the CUDA device's GEMM inputs
  double tolerance = 0;                // 0: reference::default_tolerance
  double rendezvous_timeout = 300;     // torchrun's ranks, seconds
  std::string trace;                   // the Chrome trace to write, or ""
};

// Every partition of the ranks into groups that a collective op of `f`
// uses, and the whole world, in program order: the communicators an MPI
// run makes before its first step.
std::vector<std::vector<std::vector<ir::Rank>>> program_groups(const ir::Module& m, const ir::Function& f) {
  std::vector<std::vector<ir::Rank>> world(1);
  for (ir::Rank r = 0; r < m.mesh().size(); ++r) world[0].push_back(r);
  std::vector<std::vector<std::vector<ir::Rank>>> partitions{world};
  for (const ir::Op& op : f.ops) {
    if (ir::op_info(op.kind).category != ir::OpCategory::Collective) continue;
    std::vector<std::vector<ir::Rank>> groups = ir::groups_of(m, op);
    if (std::find(partitions.begin(), partitions.end(), groups) == partitions.end())
      partitions.push_back(std::move(groups));
  }
  return partitions;
}

// A step's time: CPU steps of small models take milliseconds.
std::string step_time(double seconds) {
  return seconds < 1 ? fmt::format("{:.3g} ms", seconds * 1e3) : fmt::format("{:.3g} s", seconds);
}

// An inference step has no loss to print: its output is what --check compares.
void print_step(std::ostream& out, const runtime::StepFigures& s, bool training) {
  out << fmt::format("step {}{:<10} {}{}\n", s.step, s.warmup ? " (warm-up)" : "",
                     training ? fmt::format("loss {:.9g}  ", s.loss) : std::string(), step_time(s.seconds));
  out.flush();
}

void print_report(std::ostream& out, const runtime::TrainingRunReport& report) {
  std::vector<double> timed;
  for (const runtime::StepFigures& s : report.steps)
    if (!s.warmup) timed.push_back(s.seconds);
  if (!timed.empty()) {
    std::sort(timed.begin(), timed.end());
    out << fmt::format("step time: median {} over {} step{} (min {}, max {})\n", step_time(timed[timed.size() / 2]),
                       timed.size(), timed.size() == 1 ? "" : "s", step_time(timed.front()), step_time(timed.back()));
  }
  if (!report.peak_bytes.empty()) {
    auto most = std::max_element(report.peak_bytes.begin(), report.peak_bytes.end());
    auto least = std::min_element(report.peak_bytes.begin(), report.peak_bytes.end());
    if (*most == *least)
      out << fmt::format("peak memory: {} on every rank (values in their dtypes)\n",
                         human_bytes(static_cast<double>(*most)));
    else
      out << fmt::format("peak memory: {} on rank {}, the least {} on rank {} (values in their dtypes)\n",
                         human_bytes(static_cast<double>(*most)), most - report.peak_bytes.begin(),
                         human_bytes(static_cast<double>(*least)), least - report.peak_bytes.begin());
  }
  if (const auto& c = report.check) {
    if (c->passed && c->worst_error == 0)
      out << fmt::format(
          "check: PASS: step 1 on every rank equals the reference executor ({} tensors, every value "
          "the same)\n",
          c->compared);
    else if (c->passed)
      out << fmt::format(
          "check: PASS: step 1 on every rank equals the reference executor ({} tensors; worst error {:.3g}, {} on "
          "rank {}; tolerance {:.3g})\n",
          c->compared, c->worst_error, c->worst_tensor, c->worst_rank, c->tolerance);
    else
      out << fmt::format("check: FAIL: {}\n", c->failure);
  }
}

// The simulator's step time for the same program on the strategy's cluster
// (or --cluster), beside the measured one. Only the CUDA device's time is
// compared: the CPU device is a correctness device, not the cluster's GPUs.
void print_prediction(std::ostream& out, const compiler::LogicalProgram& program, const LoadedStrategy& loaded,
                      const ir::Module& module, const runtime::TrainingRunReport& report, bool cuda) {
  SourceManager sources;
  DiagnosticEngine quiet(sources);
  std::optional<htae::SimReport> sim = htae::simulate(module, loaded.cluster, simulation_options(program), quiet);
  if (!sim) return;
  out << fmt::format("simulated on {}: step time {}", loaded.cluster.name, step_time(sim->step_time_s));
  std::vector<double> timed;
  for (const runtime::StepFigures& s : report.steps)
    if (!s.warmup) timed.push_back(s.seconds);
  if (cuda && !timed.empty()) {
    std::sort(timed.begin(), timed.end());
    const double measured = timed[timed.size() / 2];
    out << fmt::format(", {:+.1f} % from the measured {} (compare where the cluster file describes this machine)",
                       100 * (sim->step_time_s - measured) / measured, step_time(measured));
  }
  out << "\n";
}

int run_strategy(CommandContext& ctx, RunOptions& o) {
  std::string launch_error;
  std::optional<runtime::LaunchEnvironment> launch = runtime::detect_launch(std::getenv, launch_error);
  if (!launch) {
    ctx.err << fmt::format("dstc run: error: the launcher's environment is incomplete: {}\n", launch_error);
    return kExitInputErrors;
  }
  const bool speaks = launch->rank == 0;  // only rank 0 prints
  // An error every rank finds alike (the files, the rank count) is rank
  // 0's to report and to fail the job with; the others leave quietly and
  // with success, or the launcher, seeing a rank fail, would end rank 0
  // before it had printed why.
  auto refuse = [&](int code) { return speaks ? code : kExitSuccess; };
  const bool cuda = o.device == "cuda";
  if (cuda && o.arithmetic != "f32") {
    if (speaks) ctx.err << "dstc run: error: the CUDA device computes in f32: --arithmetic f32\n";
    return refuse(kExitUsage);
  }
  if (!cuda && o.gemm_precision != "f32") {
    if (speaks) ctx.err << "dstc run: error: --gemm-precision is the CUDA device's: add --device cuda\n";
    return refuse(kExitUsage);
  }
  const runtime::GemmPrecision gemms = o.gemm_precision == "tf32"   ? runtime::GemmPrecision::TF32
                                       : o.gemm_precision == "bf16" ? runtime::GemmPrecision::BF16
                                                                    : runtime::GemmPrecision::F32;
  SourceManager sources;
  DiagnosticEngine diags(sources);
  auto finish = [&](int code) {
    if (speaks) diags.render(ctx.err, ctx.color);
    return refuse(code);
  };
  std::optional<LoadedStrategy> loaded = load_strategy(o.request, sources, diags);
  if (!loaded) return finish(kExitInputErrors);
  const frontend::Strategy& strategy = loaded->strategy->strategy;
  const int64_t needed = strategy.devices();
  const int64_t given = launch->launcher == runtime::Launcher::Mpirun ? launch->world_size
                        : o.ranks > 0                                 ? o.ranks
                                                                      : needed;
  if (given != needed) {
    diags
        .error(diag::kRunRankCount, strategy.range,
               fmt::format("{} runs on {} devices, one rank each; this run has {} rank{}", strategy.name, needed, given,
                           given == 1 ? "" : "s"))
        .note(launch->launcher == runtime::Launcher::Mpirun
                  ? fmt::format("start it with mpirun -np {}", needed)
                  : fmt::format("leave out --ranks, and dstc run starts {} ranks itself", needed));
    return finish(kExitInputErrors);
  }
  auto program = compiler::build_logical_program(strategy, diags);
  if (!program) return finish(kExitInputErrors);
  auto compiled = compiler::compile_strategy(*program, sources, diags);
  if (!compiled) return finish(kExitInputErrors);
  const ir::Function* step = reference::step_function(compiled->module);
  if (!step || !ir::verify_module(compiled->module, diags)) {
    if (speaks) ctx.err << "dstc: internal error: the compiler produced IR that does not verify\n";
    return finish(kExitInternal);
  }
  o.training.arithmetic = *reference::parse_arithmetic(o.arithmetic);
  o.training.trace = !o.trace.empty();
  // GEMMs on rounded inputs differ from the f32 reference as bf16 storage does.
  o.training.tolerance = o.tolerance > 0 ? o.tolerance
                         : gemms != runtime::GemmPrecision::F32
                             ? reference::default_tolerance(reference::Arithmetic::Native)
                             : reference::default_tolerance(o.training.arithmetic);
  // Opened before anything is printed: no GPU is an error of the run.
  auto open_device = [&](int32_t local_rank, std::string& why_not) -> std::unique_ptr<runtime::Device> {
    if (!cuda) return std::make_unique<runtime::CpuDevice>(o.training.arithmetic);
    return runtime::open_cuda_device(local_rank, gemms, why_not);
  };
  std::string why_not;
  std::unique_ptr<runtime::Device> first = open_device(launch->local_rank, why_not);
  if (!first) {
    ctx.err << fmt::format("dstc run: error: --device cuda: {}\n", why_not);
    return kExitInputErrors;
  }
  if (speaks)
    ctx.out << fmt::format("{}: {} ranks ({}), {} device, {} arithmetic, seed {}\n", strategy.name, needed,
                           launch->launcher == runtime::Launcher::Itself
                               ? std::string("threads of dstc run")
                               : fmt::format("{} processes", runtime::launcher_name(launch->launcher)),
                           first->name(), o.arithmetic, o.training.seed);
  auto on_step = [&](const runtime::StepFigures& s) { print_step(ctx.out, s, strategy.run.training); };
  runtime::TrainingRunReport report;
  if (launch->launcher == runtime::Launcher::Mpirun) {
    runtime::MpiSession session;
    runtime::MpiCommunicator comm;
    // Anything thrown must end every rank: unwinding into MPI_Finalize
    // would wait for peers that wait in a collective.
    try {
      for (const auto& partition : program_groups(compiled->module, *step)) comm.define_groups(partition);
      report = runtime::run_training(compiled->module, *step, comm, *first, o.training, on_step);
    } catch (const std::exception& e) {
      comm.abort(e.what());
    }
  } else if (launch->launcher == runtime::Launcher::Torchrun) {
    std::optional<runtime::TcpCommunicator> comm;
    try {
      comm.emplace(*launch, o.rendezvous_timeout);
      report = runtime::run_training(compiled->module, *step, *comm, *first, o.training, on_step);
    } catch (const runtime::PeerFailed& e) {
      ctx.err << fmt::format("dstc run: error: rank {}: {}\n", launch->rank, e.what());
      return kExitInputErrors;
    } catch (const std::exception& e) {
      if (!comm) {
        ctx.err << fmt::format("dstc run: error: {}\n", e.what());
        return kExitInputErrors;
      }
      comm->abort(e.what());
    }
  } else {
    std::optional<std::string> failure;
    auto device_of = [&](ir::Rank r) {
      if (r == 0) return std::move(first);
      std::string why;
      std::unique_ptr<runtime::Device> device = open_device(r, why);
      if (!device) throw std::runtime_error(why);
      return device;
    };
    report = runtime::run_training_in_threads(compiled->module, *step, device_of, o.training, on_step, failure);
    if (failure) {
      ctx.err << fmt::format("dstc run: error: {}\n", *failure);
      return kExitInputErrors;
    }
  }
  if (!speaks) return kExitSuccess;
  print_report(ctx.out, report);
  print_prediction(ctx.out, *program, *loaded, compiled->module, report, cuda);
  if (!o.trace.empty()) {
    std::vector<ir::Rank> ranks;
    for (ir::Rank r = 0; r < compiled->module.mesh().size(); ++r) ranks.push_back(r);
    std::string failure = write_file_atomically(o.trace, [&](std::ostream& file) {
      ir::write_chrome_trace(file, compiled->module, *step, ranks, report.spans, report.memory);
    });
    if (!failure.empty()) {
      ctx.err << fmt::format("dstc run: error: cannot write the trace to '{}': {}\n", o.trace, failure);
      return kExitInputErrors;
    }
    ctx.out << fmt::format("wrote {}: the last step on every rank (open it in Perfetto beside the simulator's)\n",
                           o.trace);
  }
  return report.check && !report.check->passed ? kExitInputErrors : kExitSuccess;
}

}  // namespace

Command add_run_command(CLI::App& root) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = root.add_subcommand("run", "Execute a strategy's steps (training or inference), one rank per device");
  sub->add_option("file", o->request.file, "The .dstrat file")->required();
  sub->add_option("--strategy", o->request.strategy, "The strategy to run (default: the file's only one)");
  sub->add_option("--cluster", o->request.cluster,
                  "The cluster file the simulator predicts the step on, to compare (default: the strategy's)")
      ->transform(found_in_stdlib());
  sub->add_option("-D", o->request.defines, "Set a model or strategy parameter: -D name=value")
      ->allow_extra_args(false);
  sub->add_option("--device", o->device, "Where each rank computes: cpu, or cuda (a GPU per local rank)")
      ->transform(one_of({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--ranks", o->ranks,
                  "Ranks to start when not launched by mpirun (default: one per device of the strategy's mesh)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--steps", o->training.steps, "Timed steps")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--warmup", o->training.warmup, "Steps run before the timed ones")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--seed", o->training.seed, "Seed of the random weights and batch (as dstc verify's)")
      ->capture_default_str();
  sub->add_option("--arithmetic", o->arithmetic,
                  "Precision of every float value: f32, f64, or native (each value's own dtype)")
      ->transform(one_of({"f32", "f64", "native"}))
      ->capture_default_str();
  sub->add_option("--gemm-precision", o->gemm_precision,
                  "The CUDA device's GEMM inputs: f32, or tf32 / bf16 on tensor cores (f32 accumulation)")
      ->transform(one_of({"f32", "tf32", "bf16"}))
      ->capture_default_str();
  sub->add_flag("--check", o->training.check,
                "Compare the first step on every rank with the reference executor (what dstc verify checks)");
  sub->add_option("--tol", o->tolerance, "Largest accepted error of --check (default as dstc verify's)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--rendezvous-timeout", o->rendezvous_timeout,
                  "Under torchrun: seconds to wait for every rank to join rank 0 at MASTER_ADDR:MASTER_PORT")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--trace", o->trace,
                  "Write a Chrome trace (Perfetto) of the last step on every rank, as the simulator's --trace does")
      ->check(non_empty_path());
  return {sub, [o](CommandContext& ctx) { return run_strategy(ctx, *o); }};
}

}  // namespace dstc
