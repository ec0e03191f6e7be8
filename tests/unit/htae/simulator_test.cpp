// The HTAE executor on small hand-written IR modules whose timings and
// memory are computable by hand: ops are priced by exact profile entries
// (a 64x64x64 or 64x256x64 f32 matmul takes 1 ms, a relu on 64x64 0.5 ms), links have
// round bandwidths and no latency.
#include "htae/simulator.h"

#include <gtest/gtest.h>

#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "htae/collectives.h"
#include "htae/comm_buffers.h"
#include "htae/report.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "tests/unit/htae/preset_cluster.h"
#include "tests/unit/htae/synthetic_gpt.h"

namespace dstc::htae {
namespace {

constexpr double kMs = 1e-3;

// `nodes` x `gpus` GPUs; GPUs of a node reach an NVSwitch at 10 GB/s each;
// one NIC per node at 1 GB/s serves them all; 40 SMs, of which an NCCL
// collective takes 8 within a node and 4 across nodes.
ClusterSpec test_cluster(int64_t nodes, int gpus, int64_t memory = int64_t{1} << 30) {
  ClusterSpec c;
  c.name = "test";
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.gpu.name = "T";
  c.gpu.peak_flops[static_cast<size_t>(ComputeDtype::Fp32)] = 1e12;
  c.gpu.memory_bytes = memory;
  c.gpu.hbm_bandwidth = 1e12;
  c.intra_node.kind = IntraNodeKind::NvSwitch;
  c.intra_node.gpu_bandwidth = 1e10;
  if (nodes > 1) {
    NicSpec nic;
    for (int g = 0; g < gpus; ++g) nic.gpus.push_back(g);
    c.network.nics = {nic};
    c.network.nic_bandwidth = 1e9;
  }
  c.gpu.sms = 40;
  c.runtime.collective_sms = 4;
  c.runtime.intra_node_collective_sms = 8;
  return c;
}

ProfileDatabase test_profile() {
  ProfileDatabase db;
  db.gpu = "T";
  db.add(OpProfileEntry{"matmul", ComputeDtype::Fp32, {64, 64, 64}, 2.0 * 64 * 64 * 64, 0, 1 * kMs});
  db.add(OpProfileEntry{"matmul", ComputeDtype::Fp32, {64, 256, 64}, 2.0 * 64 * 256 * 64, 0, 1 * kMs});
  db.add(OpProfileEntry{"relu", ComputeDtype::Fp32, {64, 64}, 0, 0, 0.5 * kMs});
  return db;
}

struct Outcome {
  std::optional<SimReport> report;
  std::string errors;
};

Outcome simulate_text(const std::string& text, const ClusterSpec& cluster, SimOptions options = {},
                      bool verify = true) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> module = ir::parse_module(sources.add("t.ir", text), diags);
  Outcome run;
  if (module && (!verify || ir::verify_module(*module, diags))) {
    ProfileDatabase profile = test_profile();
    options.profile = &profile;
    run.report = simulate(*module, cluster, options, diags);
  }
  std::ostringstream errors;
  diags.render(errors, false);
  run.errors = errors.str();
  return run;
}

// A matmul (1 ms) on the compute stream beside an all-reduce of 4 MB over
// two GPUs of one node (ring: each sends 4 MB at 10 GB/s = 0.4 ms).
std::string compute_beside_all_reduce(std::string_view stream, int64_t elements = 1000000) {
  return fmt::format(R"(mesh world[d=2]
func @f {{
  input %x on world : f32[64, 64]
  param %w on world : f32[64, 64]
  input %g on world : f32[{0}]
  %y = matmul(%x, %w) on world : f32[64, 64]
  %s = all_reduce(%g) on world over [d] stream {1} : f32[{0}]
  return %y, %s
}}
)",
                     elements, stream);
}

TEST(Simulator, ComputeQueuesRunInOrder) {
  Outcome run = simulate_text(R"(mesh world[d=1]
func @f {
  input %x on world : f32[64, 64]
  param %w on world : f32[64, 64]
  %a = matmul(%x, %w) on world : f32[64, 64]
  %b = relu(%a) on world : f32[64, 64]
  %c = matmul(%b, %w) on world : f32[64, 64]
  return %c
}
)",
                              test_cluster(1, 1));
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(run.report->step_time_s, 2.5 * kMs, 1e-12);
  EXPECT_NEAR(run.report->breakdown.compute_s, 2.5 * kMs, 1e-12);
  EXPECT_EQ(run.report->num_ops, 3);
  EXPECT_GT(run.report->tflops_per_gpu, 0);
}

// The same matmul on each of four devices: on a batch shard each (S), or
// replicated on the very same data (B).
std::string matmul_on_four(std::string_view x_sbp, std::string_view y_sbp) {
  return fmt::format(R"(mesh world[d=4]
func @f {{
  input %x on world : f32[64, 64] sbp(d={})
  param %w on world : f32[64, 64] sbp(d=B)
  %y = matmul(%x, %w) on world : f32[64, 64] sbp(d={})
  return %y
}}
)",
                     x_sbp, y_sbp);
}

TEST(Simulator, ModelFlopsCountReplicatedWorkOnce) {
  Outcome split = simulate_text(matmul_on_four("S(0)", "S(0)"), test_cluster(1, 4));
  Outcome replicated = simulate_text(matmul_on_four("B", "B"), test_cluster(1, 4));
  ASSERT_TRUE(split.report) << split.errors;
  ASSERT_TRUE(replicated.report) << replicated.errors;
  EXPECT_DOUBLE_EQ(split.report->step_time_s, replicated.report->step_time_s);
  EXPECT_DOUBLE_EQ(split.report->model_flops, 4 * 2.0 * 64 * 64 * 64);
  EXPECT_DOUBLE_EQ(replicated.report->model_flops, 2.0 * 64 * 64 * 64);
  EXPECT_DOUBLE_EQ(replicated.report->mfu * 4, split.report->mfu);
}

TEST(Simulator, FeatureCommunicationOverlapsComputeWithoutSlowingIt) {
  Outcome run = simulate_text(compute_beside_all_reduce("feature"), test_cluster(1, 2));
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(run.report->step_time_s, 1 * kMs, 1e-12);
  EXPECT_EQ(run.report->num_flows, 2);
}

// While the all-reduce runs (0.4 ms) the matmul has 32 of the 40 SMs: it
// has done 0.4 x 0.8 ms of its work, the rest takes 1 - 0.32 ms more.
TEST(Simulator, GradientCommunicationTakesItsChannelsSmsFromConcurrentCompute) {
  Outcome run = simulate_text(compute_beside_all_reduce("grad"), test_cluster(1, 2));
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(run.report->step_time_s, (0.4 + (1 - 0.4 * 0.8)) * kMs, 1e-12);
  EXPECT_EQ(run.report->gpu_sms, 40);
  EXPECT_EQ(run.report->intra_node_collective_sms, 8);

  SimOptions no_overlap;
  no_overlap.overlap = false;
  Outcome plain = simulate_text(compute_beside_all_reduce("grad"), test_cluster(1, 2), no_overlap);
  ASSERT_TRUE(plain.report) << plain.errors;
  EXPECT_NEAR(plain.report->step_time_s, 1 * kMs, 1e-12);
  EXPECT_FALSE(plain.report->overlap);

  // Communication holding every SM leaves compute one SM's worth.
  ClusterSpec greedy = test_cluster(1, 2);
  greedy.runtime.intra_node_collective_sms = 40;
  Outcome starved = simulate_text(compute_beside_all_reduce("grad"), greedy);
  ASSERT_TRUE(starved.report) << starved.errors;
  EXPECT_NEAR(starved.report->step_time_s, (0.4 + (1 - 0.4 / 40)) * kMs, 1e-12);

  ClusterSpec unknown_sms = test_cluster(1, 2);
  unknown_sms.gpu.sms = 0;
  Outcome unslowed = simulate_text(compute_beside_all_reduce("grad"), unknown_sms);
  ASSERT_TRUE(unslowed.report) << unslowed.errors;
  EXPECT_NEAR(unslowed.report->step_time_s, 1 * kMs, 1e-12);
}

// A matmul (1 ms) beside an expert all-to-all (on the gradient stream,
// which no compute gates, so the two start together): through NCCL
// (`copies` 0) or DeepEP's deduplicated exchange (`copies` 1), whose
// kernels hold 20 SMs.
std::string compute_beside_all_to_all(int copies) {
  return fmt::format(R"(mesh world[d=2]
func @f {{
  input %x on world : f32[64, 64]
  param %w on world : f32[64, 64]
  input %t on world : f32[2, 100000] sbp(d=S(0))
  %y = matmul(%x, %w) on world : f32[64, 64]
  %s = all_to_all(%t) {{split_dim = 0, concat_dim = 0, copies = {}, experts = 2}} on world over [d] stream grad : f32[2, 100000] sbp(d=S(0))
  return %y, %s
}}
)",
                     copies);
}

// Across two nodes NCCL builds fewer channels: the all-reduce (t, from the
// program-order executor's 1 ms + t) leaves the matmul 36 of the 40 SMs.
TEST(Simulator, CollectivesAcrossNodesTakeTheirFewerChannelsSms) {
  SimOptions serial;
  serial.executor = ExecutorKind::ProgramOrder;
  Outcome alone = simulate_text(compute_beside_all_reduce("grad", 50000), test_cluster(2, 1), serial);
  Outcome overlapped = simulate_text(compute_beside_all_reduce("grad", 50000), test_cluster(2, 1));
  ASSERT_TRUE(alone.report) << alone.errors;
  ASSERT_TRUE(overlapped.report) << overlapped.errors;
  double t = alone.report->step_time_s - 1 * kMs;
  ASSERT_GT(t, 0);
  ASSERT_LT(t, 1 * kMs);
  EXPECT_NEAR(overlapped.report->step_time_s, t + (1 * kMs - t * 36 / 40), 1e-12);
}

// The exchange's own time t comes from the program-order executor (1 ms +
// t); overlapped, the matmul runs at (40 - SMs) / 40 while it lasts.
TEST(Simulator, ExpertAllToAllsTakeNcclOrDeepepSmsFromConcurrentCompute) {
  SimOptions serial;
  serial.executor = ExecutorKind::ProgramOrder;
  for (auto [copies, sms] : {std::pair{0, 8}, std::pair{1, int(kDeepepSms)}}) {
    SCOPED_TRACE(copies);
    Outcome alone = simulate_text(compute_beside_all_to_all(copies), test_cluster(1, 2), serial);
    Outcome overlapped = simulate_text(compute_beside_all_to_all(copies), test_cluster(1, 2));
    ASSERT_TRUE(alone.report) << alone.errors;
    ASSERT_TRUE(overlapped.report) << overlapped.errors;
    double t = alone.report->step_time_s - 1 * kMs;
    ASSERT_GT(t, 0);
    ASSERT_LT(t, 1 * kMs);
    EXPECT_NEAR(overlapped.report->step_time_s, t + (1 * kMs - t * (40.0 - sms) / 40), 1e-12);
  }
}

// Both exchanges hold their library's buffers from the start: NCCL's p2p
// connections to the one peer (two channels: the test GPU's 10 GB/s is
// under one NVLink lane) or DeepEP's queues.
TEST(Simulator, AllToAllsHoldTheirLibrarysBuffersForTheRun) {
  const size_t comm = static_cast<size_t>(MemoryKind::CommBuffers);
  Outcome nccl = simulate_text(compute_beside_all_to_all(0), test_cluster(1, 2, int64_t{16} << 30));
  Outcome deepep = simulate_text(compute_beside_all_to_all(1), test_cluster(1, 2, int64_t{16} << 30));
  ASSERT_TRUE(nccl.report) << nccl.errors;
  ASSERT_TRUE(deepep.report) << deepep.errors;
  EXPECT_EQ(nccl.report->memory_at_peak[comm], 2 * (int64_t{12} << 20));
  EXPECT_EQ(deepep.report->memory_at_peak[comm], deepep_buffer_bytes(2, 100000 * 4));
}

TEST(Simulator, ProgramOrderExecutorSerializesStreams) {
  SimOptions options;
  options.executor = ExecutorKind::ProgramOrder;
  Outcome run = simulate_text(compute_beside_all_reduce("grad"), test_cluster(1, 2), options);
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(run.report->step_time_s, 1.4 * kMs, 1e-12);
  EXPECT_NEAR(run.report->breakdown.compute_s, 1 * kMs, 1e-12);
  EXPECT_NEAR(run.report->breakdown.exposed_comm_s, 0.4 * kMs, 1e-12);
}

// world[dp=2, tp=4] on 2 nodes x 4 GPUs: rank dp*4+tp sits on node dp. An
// all-reduce of 1 MB over dp forms 4 groups whose rings all cross each
// node's one NIC (1 GB/s): a quarter each, 4 ms. One group alone: 1 ms.
std::string dp_all_reduce(std::string_view set) {
  return std::string(R"(mesh world[dp=2, tp=4]
func @f {
  input %g on world : f32[250000]
  %s = all_reduce(%g) on )") +
         std::string(set) + R"( over [dp] stream grad : f32[250000]
  return %s
}
)";
}

TEST(Simulator, ConcurrentAllReducesShareANicFairly) {
  Outcome alone = simulate_text(dp_all_reduce("world[tp=0]"), test_cluster(2, 4));
  ASSERT_TRUE(alone.report) << alone.errors;
  EXPECT_NEAR(alone.report->step_time_s, 1 * kMs, 1e-12);
  Outcome four = simulate_text(dp_all_reduce("world"), test_cluster(2, 4));
  ASSERT_TRUE(four.report) << four.errors;
  EXPECT_NEAR(four.report->step_time_s, 4 * kMs, 1e-12);
  EXPECT_EQ(four.report->num_flows, 8);
  EXPECT_EQ(four.report->num_classes, 1);  // every rank runs the same program

  SimOptions exact;
  exact.symmetry = false;
  Outcome per_device = simulate_text(dp_all_reduce("world"), test_cluster(2, 4), exact);
  ASSERT_TRUE(per_device.report) << per_device.errors;
  EXPECT_NEAR(per_device.report->step_time_s, 4 * kMs, 1e-12);
  EXPECT_EQ(per_device.report->num_classes, 8);

  SimOptions no_sharing;
  no_sharing.bandwidth_sharing = false;
  Outcome unshared = simulate_text(dp_all_reduce("world"), test_cluster(2, 4), no_sharing);
  ASSERT_TRUE(unshared.report) << unshared.errors;
  EXPECT_NEAR(unshared.report->step_time_s, 1 * kMs, 1e-12);
}

// 4 nodes of one GPU: the all-reduce groups {0, 2} and {1, 3} use
// disjoint NICs, so both take the time of one alone.
TEST(Simulator, TransfersOnDisjointLinksDoNotSlowEachOther) {
  Outcome run = simulate_text(R"(mesh world[a=2, b=2]
func @f {
  input %g on world : f32[250000]
  %s = all_reduce(%g) on world over [a] stream grad : f32[250000]
  return %s
}
)",
                              test_cluster(4, 1));
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(run.report->step_time_s, 1 * kMs, 1e-12);
}

// Arguments (x, w: 16 KiB each; w2: 64 KiB) live all step. a (16 KiB)
// lives from the first matmul's start to the relu's end, b (16 KiB) from
// the relu's start to the second matmul's end, c (64 KiB, returned) from
// its start on: the peak is 96 + 16 + 16 + 64 - 16 = 176 KiB while the
// second matmul runs.
const char* kMemoryModule = R"(mesh world[d=1]
func @f {
  input %x on world : f32[64, 64]
  param %w on world : f32[64, 64]
  param %w2 on world : f32[64, 256]
  %a = matmul(%x, %w) on world : f32[64, 64]
  %b = relu(%a) on world : f32[64, 64]
  %c = matmul(%b, %w2) on world : f32[64, 256]
  return %c
}
)";

TEST(Simulator, PeakMemoryFollowsLiveness) {
  Outcome run = simulate_text(kMemoryModule, test_cluster(1, 1));
  ASSERT_TRUE(run.report) << run.errors;
  ASSERT_EQ(run.report->peak_memory_bytes.size(), 1u);
  EXPECT_EQ(run.report->peak_memory_bytes[0], 176 * 1024);
  EXPECT_FALSE(run.report->oom);
}

// The optimizer updates its parameter and states in place: w, m, v, x
// (16 KiB each) live all step, g adds 16 KiB, and adam's three results take
// the memory of w, m and v: the peak is 80 KiB, not 128 KiB.
TEST(Simulator, OptimizerUpdatesItsArgumentsInPlace) {
  Outcome run = simulate_text(R"(mesh world[d=1]
func @f {
  input %x on world : f32[64, 64]
  param %w on world : f32[64, 64]
  state %m on world : f32[64, 64]
  state %v on world : f32[64, 64]
  %g = matmul(%x, %w) on world : f32[64, 64]
  %w1, %m1, %v1 = adam(%w, %g, %m, %v) {lr = 0.001} on world <phase=optimizer> : f32[64, 64], f32[64, 64], f32[64, 64]
  return %w1, %m1, %v1
}
)",
                              test_cluster(1, 1));
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_EQ(run.report->peak_memory_bytes[0], 80 * 1024);
}

// What the peak holds: the weights (a gathered weight counts as one),
// Adam's state, a weight gradient and the forward values. The peak is
// reached when the gradient is produced: x, w, m, v, the gathered w
// (read by the gradient too), h and g are live (16 KiB each; w, m, v 8 KiB
// each on a device); the gathered w is freed before the reduce-scatter.
TEST(Simulator, ThePeakIsBrokenDownByWhatItHolds) {
  Outcome run = simulate_text(R"(mesh world[d=2]
func @f {
  input %x on world : f32[64, 64]
  param %w on world : f32[32, 64]
  state %m on world : f32[32, 64]
  state %v on world : f32[32, 64]
  %wg = all_gather(%w) {dim = 0} on world over [d] stream feature <phase=forward> : f32[64, 64]
  %h = matmul(%x, %wg) on world <phase=forward> : f32[64, 64]
  %g = matmul(%h, %wg) on world <phase=weight_grad> : f32[64, 64]
  %gs = reduce_scatter(%g) {dim = 0} on world over [d] stream grad <phase=weight_grad> : f32[32, 64]
  %w1, %m1, %v1 = adam(%w, %gs, %m, %v) {lr = 0.001} on world <phase=optimizer> : f32[32, 64], f32[32, 64], f32[32, 64]
  return %w1, %m1, %v1, %h
}
)",
                              test_cluster(1, 2));
  ASSERT_TRUE(run.report) << run.errors;
  const MemoryBreakdown& held = run.report->memory_at_peak;
  EXPECT_EQ(held[static_cast<size_t>(MemoryKind::Weights)], (8 + 16) * 1024);
  EXPECT_EQ(held[static_cast<size_t>(MemoryKind::OptimizerState)], 16 * 1024);
  EXPECT_EQ(held[static_cast<size_t>(MemoryKind::Gradients)], 16 * 1024);
  EXPECT_EQ(held[static_cast<size_t>(MemoryKind::Activations)], 32 * 1024);
  EXPECT_EQ(run.report->peak_memory_bytes[0], (8 + 16 + 16 + 16 + 32) * 1024);
}

// A kernel on a side queue (a cast on the feature stream) and one on the
// compute queue, both ready at once, share the device's one compute
// engine: they run one after the other, and the step is their sum.
TEST(Simulator, KernelsOfTwoQueuesRunOneAtATime) {
  const char* both = R"(mesh world[d=1]
func @f {
  input %x on world : f32[4096, 4096]
  param %w on world : f32[4096, 4096]
  %y = relu(%x) on world <phase=forward> : f32[4096, 4096]
  %q = quantize(%w) {dtype = "f8e4m3"} on world stream feature <phase=forward> : f8e4m3[4096, 4096]
  return %y, %q
}
)";
  const char* compute_only = R"(mesh world[d=1]
func @f {
  input %x on world : f32[4096, 4096]
  param %w on world : f32[4096, 4096]
  %y = relu(%x) on world <phase=forward> : f32[4096, 4096]
  %q = quantize(%w) {dtype = "f8e4m3"} on world <phase=forward> : f8e4m3[4096, 4096]
  return %y, %q
}
)";
  Outcome side = simulate_text(both, test_cluster(1, 1));
  Outcome serial = simulate_text(compute_only, test_cluster(1, 1));
  ASSERT_TRUE(side.report) << side.errors;
  ASSERT_TRUE(serial.report) << serial.errors;
  EXPECT_DOUBLE_EQ(side.report->step_time_s, serial.report->step_time_s);
}

// A weight's cast on the feature queue goes before the compute queue's
// next kernel, so the gather it feeds overlaps that kernel: the step is
// shorter than with the cast queued after it on the compute queue.
TEST(Simulator, ASideQueueKernelGoesFirstSoItsGatherOverlapsCompute) {
  auto program = [](const char* cast_stream) {
    return fmt::format(R"(mesh world[d=2]
func @f {{
  input %x on world : f32[4096, 4096]
  param %w on world : bf16[2048, 4096]
  %y = relu(%x) on world <phase=forward> : f32[4096, 4096]
  %q = quantize(%w) {{dtype = "f8e4m3"}} on world {}<phase=forward> : f8e4m3[2048, 4096]
  %g = all_gather(%q) {{dim = 0}} on world over [d] stream feature <phase=forward> : f8e4m3[4096, 4096]
  %z = cast(%g) {{dtype = "f32"}} on world <phase=forward> : f32[4096, 4096]
  return %y, %z
}}
)",
                       cast_stream);
  };
  Outcome side = simulate_text(program("stream feature "), test_cluster(1, 2));
  Outcome behind = simulate_text(program(""), test_cluster(1, 2));
  ASSERT_TRUE(side.report) << side.errors;
  ASSERT_TRUE(behind.report) << behind.errors;
  EXPECT_LT(side.report->step_time_s, behind.report->step_time_s);
}

// A weight's FP8 copy is held as a weight, an activation's as an
// activation (quantize moves what its operand is, as cast does), each with
// its fp32 scales: one for the tensor, one per row.
TEST(Simulator, QuantizedCopiesCountAsWhatTheyCopy) {
  Outcome run = simulate_text(R"(mesh world[d=1]
func @f {
  input %x on world : bf16[64, 64]
  param %w on world : bf16[64, 64]
  %wq = quantize(%w) {dtype = "f8e4m3"} on world <phase=forward> : f8e4m3[64, 64]
  %xq = quantize(%x) {dtype = "f8e4m3", block = -1} on world <phase=forward> : f8e4m3[64, 64]
  %y = einsum(%xq, %wq) {spec = "ab,cb->ac", dtype = "bf16"} on world <phase=forward> : bf16[64, 64]
  return %y
}
)",
                              test_cluster(1, 1));
  ASSERT_TRUE(run.report) << run.errors;
  const MemoryBreakdown& held = run.report->memory_at_peak;
  EXPECT_EQ(held[static_cast<size_t>(MemoryKind::Weights)], 8 * 1024 + 4 * 1024 + 4);
  EXPECT_EQ(held[static_cast<size_t>(MemoryKind::Activations)], 8 * 1024 + 4 * 1024 + 64 * 4 + 8 * 1024);
}

// The distributed optimizer's parameter buffer: an in-place all_gather
// writes into a buffer that holds the local shard, so the gathered weight
// (16 KiB) takes 8 KiB beside its 8 KiB shard, and it stays for the step
// (the weights at the peak, after its last reader, are 16 KiB); a plain
// gather is freed after its reader, leaving the 8 KiB shard.
int64_t gathered_weights_at_peak(bool in_place) {
  std::string text = R"(mesh world[d=2]
func @f {
  input %x on world : f32[64, 64]
  input %v on world : f32[64, 256]
  param %w on world : f32[32, 64]
  %g = all_gather(%w) {dim = 0IN_PLACE} on world over [d] stream grad <phase=forward> : f32[64, 64]
  %y = matmul(%x, %g) on world <phase=forward> : f32[64, 64]
  %z = matmul(%y, %v) on world <phase=forward> : f32[64, 256]
  return %z
}
)";
  text.replace(text.find("IN_PLACE"), 8, in_place ? ", in_place = true" : "");
  Outcome run = simulate_text(text.c_str(), test_cluster(1, 2));
  if (!run.report) return -1;
  return run.report->memory_at_peak[static_cast<size_t>(MemoryKind::Weights)];
}

TEST(Simulator, AnInPlaceGatherHoldsItsShardInsideTheGatheredBufferForTheStep) {
  EXPECT_EQ(gathered_weights_at_peak(true), 16 * 1024);
  EXPECT_EQ(gathered_weights_at_peak(false), 8 * 1024);
}

// ZeRO-3 style: three sharded weights (8 KiB each on a device) gathered
// (16 KiB, 0.8192 us over the 10 GB/s switch) on the feature stream, each
// read by one 1 ms matmul. The shards exist from the start, so without a
// bound every gather would run at once.
const char* kGatheredLayers = R"(mesh world[d=2]
func @f {
  input %x on world : f32[64, 64]
  param %w0 on world : f32[32, 64]
  param %w1 on world : f32[32, 64]
  param %w2 on world : f32[32, 64]
  %g0 = all_gather(%w0) {dim = 0} on world over [d] stream feature <phase=forward> : f32[64, 64]
  %h0 = matmul(%x, %g0) on world <phase=forward> : f32[64, 64]
  %g1 = all_gather(%w1) {dim = 0} on world over [d] stream feature <phase=forward> : f32[64, 64]
  %h1 = matmul(%h0, %g1) on world <phase=forward> : f32[64, 64]
  %g2 = all_gather(%w2) {dim = 0} on world over [d] stream feature <phase=forward> : f32[64, 64]
  %h2 = matmul(%h1, %g2) on world <phase=forward> : f32[64, 64]
  return %h2
}
)";

constexpr double kGather = 8192 / 1e10;

Outcome simulate_gathered_layers(int64_t prefetch_gathers) {
  ClusterSpec cluster = test_cluster(1, 2);
  cluster.runtime.prefetch_gathers = prefetch_gathers;
  return simulate_text(kGatheredLayers, cluster);
}

// prefetch_gathers = 0: each gather waits for computation to reach its
// matmul, so all three are exposed and one gathered weight lives at a time.
TEST(Simulator, ParameterGathersWaitForTheirUseWithoutPrefetch) {
  Outcome run = simulate_gathered_layers(0);
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(run.report->step_time_s, 3 * kMs + 3 * kGather, 1e-12);
  // x and the shards (40 KiB), then h, the gathered weight and the result.
  EXPECT_EQ(run.report->peak_memory_bytes[0], (40 + 48) * 1024);
}

// prefetch_gathers = 1: the second gather runs beside the first matmul, the
// third waits until computation reaches the second matmul: one exposed.
TEST(Simulator, ParameterGathersRunAtMostPrefetchGathersAhead) {
  Outcome run = simulate_gathered_layers(1);
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(run.report->step_time_s, 3 * kMs + kGather, 1e-9);
  EXPECT_GT(run.report->peak_memory_bytes[0], (40 + 48) * 1024);
}

// FSDP with FP8 weights: each shard's e4m3 copy is made on the gathers'
// queue and gathered from there. Those gathers are parameter gathers too:
// without prefetch one gathered weight lives at a time, fewer bytes at the
// peak than when all three may be gathered ahead.
int64_t fp8_gathered_layers_peak(int64_t prefetch_gathers) {
  std::string text;
  for (int i = 0; i < 3; ++i) text += fmt::format("  param %w{} on world : bf16[32, 64]\n", i);
  for (int i = 0; i < 3; ++i)
    text += fmt::format(
        "  %q{0} = quantize(%w{0}) {{dtype = \"f8e4m3\"}} on world stream feature <phase=forward> : f8e4m3[32, 64]\n"
        "  %g{0} = all_gather(%q{0}) {{dim = 0}} on world over [d] stream feature <phase=forward> : f8e4m3[64, 64]\n"
        "  %c{0} = cast(%g{0}) {{dtype = \"f32\"}} on world <phase=forward> : f32[64, 64]\n"
        "  %h{1} = matmul(%h{0}, %c{0}) on world <phase=forward> : f32[64, 64]\n",
        i, i + 1);
  ClusterSpec cluster = test_cluster(1, 2);
  cluster.runtime.prefetch_gathers = prefetch_gathers;
  Outcome run = simulate_text(
      "mesh world[d=2]\nfunc @f {\n  input %h0 on world : f32[64, 64]\n" + text + "  return %h3\n}\n", cluster);
  return run.report ? run.report->peak_memory_bytes[0] : -1;
}

TEST(Simulator, GathersOfQuantizedShardsArePrefetchedAsParameterGathers) {
  int64_t one_at_a_time = fp8_gathered_layers_peak(0);
  ASSERT_GT(one_at_a_time, 0);
  EXPECT_LT(one_at_a_time, fp8_gathered_layers_peak(8));
}

TEST(Simulator, OutOfMemoryWhenThePeakExceedsTheGpu) {
  Outcome run = simulate_text(kMemoryModule, test_cluster(1, 1, 170 * 1024));
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_TRUE(run.report->oom);
  EXPECT_EQ(run.report->oom_devices, std::vector<ir::Rank>{0});
  EXPECT_EQ(run.report->memory_capacity_bytes, 170 * 1024);
}

// Stage 0 computes 1 ms and sends 16 KiB (1.6384 us at 10 GB/s); stage 1
// waits for it (the bubble), then computes 1 ms.
TEST(Simulator, PipelineBubbleIsTheWaitForTheOtherStage) {
  Outcome run = simulate_text(R"(mesh world[pp=2]
func @f {
  input %x on world[pp=0] : f32[64, 64]
  param %w0 on world[pp=0] : f32[64, 64]
  param %w1 on world[pp=1] : f32[64, 64]
  %h = matmul(%x, %w0) on world[pp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  send(%h) on world[pp=0] to world[pp=1] channel 1 stream feature <stage=0, mb=0, phase=forward>
  %r = recv() on world[pp=1] from world[pp=0] channel 1 stream feature <stage=1, mb=0, phase=forward> : f32[64, 64]
  %y = matmul(%r, %w1) on world[pp=1] <stage=1, mb=0, phase=forward> : f32[64, 64]
  return %y
}
)",
                              test_cluster(1, 2));
  ASSERT_TRUE(run.report) << run.errors;
  const SimReport& r = *run.report;
  double transfer = 16384 / 1e10;
  EXPECT_NEAR(r.step_time_s, 2 * kMs + transfer, 1e-12);
  EXPECT_EQ(r.critical_device, 1);
  EXPECT_NEAR(r.breakdown.compute_s, 1 * kMs, 1e-12);
  EXPECT_NEAR(r.breakdown.bubble_s, 1 * kMs, 1e-12);
  EXPECT_NEAR(r.breakdown.exposed_comm_s, transfer, 1e-12);
  EXPECT_NEAR(r.breakdown.idle_s, 0, 1e-12);
  EXPECT_EQ(r.num_classes, 2);
}

// Stage 1 receives a0 (ready at 1 ms) and a3 (ready at 4 ms) from stage 0
// and passes b0 = matmul(a0) on to stage 2, whose three matmuls end the
// step. Its program orders the receive of a3 before the send of b0.
std::string relay_through_stage_one(std::string_view stream) {
  std::string text = R"(mesh world[pp=3]
func @f {
  input %x on world[pp=0] : f32[64, 64]
  param %w0 on world[pp=0] : f32[64, 64]
  param %w1 on world[pp=1] : f32[64, 64]
  param %w2 on world[pp=2] : f32[64, 64]
  %a0 = matmul(%x, %w0) on world[pp=0] : f32[64, 64]
  %a1 = matmul(%a0, %w0) on world[pp=0] : f32[64, 64]
  %a2 = matmul(%a1, %w0) on world[pp=0] : f32[64, 64]
  %a3 = matmul(%a2, %w0) on world[pp=0] : f32[64, 64]
  send(%a0) on world[pp=0] to world[pp=1] channel 1 stream STREAM
  send(%a3) on world[pp=0] to world[pp=1] channel 2 stream STREAM
  %r0 = recv() on world[pp=1] from world[pp=0] channel 1 stream STREAM : f32[64, 64]
  %r3 = recv() on world[pp=1] from world[pp=0] channel 2 stream STREAM : f32[64, 64]
  %b0 = matmul(%r0, %w1) on world[pp=1] : f32[64, 64]
  send(%b0) on world[pp=1] to world[pp=2] channel 3 stream STREAM
  %c = recv() on world[pp=2] from world[pp=1] channel 3 stream STREAM : f32[64, 64]
  %y1 = matmul(%c, %w2) on world[pp=2] : f32[64, 64]
  %y2 = matmul(%y1, %w2) on world[pp=2] : f32[64, 64]
  %y3 = matmul(%y2, %w2) on world[pp=2] : f32[64, 64]
  return %y3, %r3
}
)";
  for (size_t at = text.find("STREAM"); at != std::string::npos; at = text.find("STREAM", at))
    text.replace(at, 6, stream);
  return text;
}

// Pipeline receives have a queue of their own (Megatron-LM's batched
// isend/irecv): b0 leaves at 2 ms + one transfer, without waiting for a3.
// On the feature stream, one in-order queue, it waits for a3 (4 ms + one
// transfer) and the step ends 2 ms later.
TEST(Simulator, PipelineSendsDoNotWaitForEarlierReceives) {
  double transfer = 16384 / 1e10;
  Outcome pipelined = simulate_text(relay_through_stage_one("pipeline"), test_cluster(1, 3));
  ASSERT_TRUE(pipelined.report) << pipelined.errors;
  EXPECT_NEAR(pipelined.report->step_time_s, 5 * kMs + 2 * transfer, 1e-12);
  EXPECT_EQ(pipelined.report->critical_device, 2);

  Outcome in_order = simulate_text(relay_through_stage_one("feature"), test_cluster(1, 3));
  ASSERT_TRUE(in_order.report) << in_order.errors;
  EXPECT_NEAR(in_order.report->step_time_s, 7 * kMs + 2 * transfer, 1e-12);
}

// Stage 1 sends a gradient back to stage 0 and then an activation on to
// stage 2. Stage 0 takes the gradient only after a gradient from stage 2,
// which stage 2 sends after computing on that activation. Sends queue by
// direction (runtimes post them per peer with batched isend/irecv), so the
// activation leaves at once and the step takes stage 2's 3 ms plus the
// transfers; one in-order send queue would hold the activation behind the
// gradient, which waits for it: a deadlock.
TEST(Simulator, GradientSendsDoNotHoldUpActivationSends) {
  Outcome run = simulate_text(R"(mesh world[pp=3]
func @f {
  param %w1 on world[pp=1] : f32[64, 64]
  param %w2 on world[pp=2] : f32[64, 64]
  %late = recv() on world[pp=0] from world[pp=2] channel 9 stream pipeline <phase=input_grad> : f32[64, 64]
  %g = recv() on world[pp=0] from world[pp=1] channel 1 stream pipeline <phase=input_grad> : f32[64, 64]
  send(%w1) on world[pp=1] to world[pp=0] channel 1 stream pipeline <phase=input_grad>
  send(%w1) on world[pp=1] to world[pp=2] channel 2 stream pipeline <phase=forward>
  %c = recv() on world[pp=2] from world[pp=1] channel 2 stream pipeline <phase=forward> : f32[64, 64]
  %y1 = matmul(%c, %w2) on world[pp=2] : f32[64, 64]
  %y2 = matmul(%y1, %w2) on world[pp=2] : f32[64, 64]
  %y3 = matmul(%y2, %w2) on world[pp=2] : f32[64, 64]
  send(%y3) on world[pp=2] to world[pp=0] channel 9 stream pipeline <phase=input_grad>
  return %late, %g
}
)",
                              test_cluster(1, 3));
  ASSERT_TRUE(run.report) << run.errors;
  double transfer = 16384 / 1e10;
  EXPECT_NEAR(run.report->step_time_s, 3 * kMs + 3 * transfer, 1e-9);
}

TEST(Simulator, ThroughputFromBatchAndSequence) {
  SimOptions options;
  options.global_batch = 8;
  options.sequence_length = 1024;
  Outcome run = simulate_text(kMemoryModule, test_cluster(1, 1), options);
  ASSERT_TRUE(run.report) << run.errors;
  EXPECT_NEAR(*run.report->samples_per_s, 8 / 2.5e-3, 1e-6);
  EXPECT_NEAR(*run.report->tokens_per_s, 8 * 1024 / 2.5e-3, 1e-3);
  // Model FLOPs: 2*64*64*64 + 2*64*256*64 (matmuls) + 64*64 (relu).
  EXPECT_DOUBLE_EQ(run.report->model_flops, 2.0 * 64 * 64 * 64 + 2.0 * 64 * 256 * 64 + 64 * 64);
}

TEST(Simulator, JsonAndTraceCarryTheReport) {
  SimOptions options;
  options.record_trace = true;
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> module = ir::parse_module(sources.add("t.ir", compute_beside_all_reduce("grad")), diags);
  ASSERT_TRUE(module);
  std::optional<SimReport> report = simulate(*module, test_cluster(1, 2), options, diags);
  ASSERT_TRUE(report);
  std::ostringstream json, trace;
  print_report_json(json, *report);
  nlohmann::json j = nlohmann::json::parse(json.str());
  for (const char* key : {"step_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_memory_bytes",
                          "memory_capacity_bytes", "oom", "breakdown", "num_devices", "num_ops"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["peak_memory_bytes"].size(), 2u);
  EXPECT_TRUE(j["samples_per_s"].is_null());
  write_chrome_trace(trace, *module, module->functions[0], *report);
  nlohmann::json t = nlohmann::json::parse(trace.str());
  int spans = 0, counters = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_LT(e["pid"].get<int>(), 2);
    }
    if (e["ph"] == "C") ++counters;
  }
  EXPECT_EQ(spans, 4);  // the matmul and the all-reduce on each of the two devices
  EXPECT_GT(counters, 0);
}

// Experts' slots a quarter filled on the fullest rank, an eighth on average
// (ir::Value::fill): their ops cost a quarter there and count an eighth of
// their FLOPs as done; the slots take a quarter of their bytes. Priced by
// the roofline (no profile entry has the filled shape): 1 TFLOP/s, 1 TB/s.
TEST(Simulator, PartlyFilledSlotsCostTheirFillAndCountTheMean) {
  auto run = [](std::string_view fill) {
    return simulate_text(fmt::format(R"(mesh world[d=1]
func @f {{
  input %x on world : f32[4096, 1024]
  param %w on world : f32[1024, 1024]
  %y = matmul(%x, %w) on world : f32[4096, 1024]{}
  return %y
}}
)",
                                     fill),
                         test_cluster(1, 1, int64_t{1} << 40));
  };
  Outcome full = run(""), filled = run(" fill 0.25 mean 0.125");
  ASSERT_TRUE(full.report) << full.errors;
  ASSERT_TRUE(filled.report) << filled.errors;
  EXPECT_FALSE(full.report->expert_slots);
  ASSERT_TRUE(filled.report->expert_slots);
  EXPECT_EQ(filled.report->expert_slots->fullest, 0.25f);
  EXPECT_EQ(filled.report->expert_slots->mean, 0.125f);
  EXPECT_NEAR(filled.report->model_flops, full.report->model_flops / 8, 1);
  EXPECT_LT(filled.report->step_time_s, full.report->step_time_s / 3);
  // The result's 16 MiB hold a quarter: 4 MiB more than the 20 MiB of inputs.
  const int64_t inputs = (4096 + 1024) * 1024 * 4;
  EXPECT_EQ(full.report->peak_memory_bytes[0], inputs + 4096 * 1024 * 4);
  EXPECT_EQ(filled.report->peak_memory_bytes[0], inputs + 4096 * 1024);
}

// Megatron's --tp-comm-overlap (`chunks` on a collective): a GEMM reads
// an all-gather piece by piece (its own first), so it starts with the
// gather and ends at most a piece's share of itself after the gather's
// end; a reduce-scatter starts on its GEMM's first piece and ends at most
// a piece's share of itself after the GEMM. Here the GEMM (2.1 GFLOP at
// 0.71 TFLOP/s, 3.0 ms) outlasts the gather and the scatter (3 MiB each at
// 10 GB/s, 0.31 ms), which it then hides but for their last pieces.
TEST(Simulator, PipelinedCollectivesOverlapTheGemmsTheyFeedOrFollow) {
  auto run = [](std::string_view ag_chunks, std::string_view rs_chunks, bool gather, bool scatter) {
    std::string text = R"(mesh world[d=4]
func @f {
  input %xs on world : f32[256, 1024]
  param %w on world : f32[1024, 1024]
)";
    text += gather ? fmt::format(
                         "  %x = all_gather(%xs) {{dim = 0{}}} on world over [d] stream feature : f32[1024, 1024]\n",
                         ag_chunks)
                   : "  %x = reshape(%xs) {shape = [1024, 1024]} on world : f32[1024, 1024]\n";
    text += "  %y = einsum(%x, %w) {spec = \"ab,bc->ac\"} on world : f32[1024, 1024]\n";
    text += scatter ? fmt::format(
                          "  %z = reduce_scatter(%y) {{dim = 0{}}} on world over [d] stream feature : f32[256, 1024]\n",
                          rs_chunks)
                    : "  %z = reshape(%y) {shape = [1024, 1024]} on world : f32[1024, 1024]\n";
    text += "  return %z\n}\n";
    Outcome o = simulate_text(text, test_cluster(1, 4), {}, false);
    EXPECT_TRUE(o.report) << o.errors;
    return o.report ? o.report->step_time_s : 0.0;
  };
  const double gemm = run("", "", false, false);
  const double gather = run("", "", true, false) - gemm, scatter = run("", "", false, true) - gemm;
  ASSERT_GT(gemm, 2.5 * kMs);
  ASSERT_GT(gather, 0.25 * kMs);
  ASSERT_GT(scatter, 0.25 * kMs);
  const double piped_gather = run(", chunks = 4", "", true, false);
  EXPECT_GE(piped_gather, gemm - 1e-9);
  EXPECT_LE(piped_gather, gemm + gemm / 4 + 1e-9);
  EXPECT_LT(piped_gather, gemm + gather / 2);
  const double piped_scatter = run("", ", chunks = 4", false, true);
  EXPECT_GE(piped_scatter, gemm + scatter / 4 - 1e-9);
  EXPECT_LT(piped_scatter, gemm + scatter / 2);
  const double both = run(", chunks = 4", ", chunks = 4", true, true);
  EXPECT_LT(both, gemm + (gather + scatter) / 2);
}

// Ring attention (cp_comm_type = p2p): the keys and values go round the
// ring as one grouped gather that attention computes on as its pieces
// arrive, and their gradients come back as one grouped reduce-scatter
// that starts on the gradient op's first piece. Here attention (0.54
// GFLOP) outlasts the exchange (2 x 1.5 MiB at 10 GB/s, 0.31 ms), which it
// hides; gathered one after the other, attention waits for the first.
TEST(Simulator, RingAttentionHidesItsGroupedExchangesBehindTheBlocks) {
  auto run = [](std::string_view exchange, bool backward) {
    std::string text = R"(mesh world[d=4]
func @f {
  input %q on world : f32[1, 8, 256, 64]
  input %ks on world : f32[1, 8, 256, 64]
  input %vs on world : f32[1, 8, 256, 64]
  input %dout on world : f32[1, 8, 256, 64]
  input %kw on world : f32[1, 8, 1024, 64]
  input %vw on world : f32[1, 8, 1024, 64]
)";
    const std::string_view whole = ": f32[1, 8, 1024, 64]", shard = ": f32[1, 8, 256, 64]";
    auto line = [&](std::string_view results, std::string_view kind, std::string_view operands, std::string_view attrs,
                    std::string_view types) {
      text += fmt::format("  {} = {}({}) {{dim = 2{}}} on world over [d] stream feature {}\n", results, kind, operands,
                          attrs, types);
    };
    const std::string_view kind = backward ? "reduce_scatter" : "all_gather";
    const std::string_view type = backward ? shard : whole;
    if (backward)
      text +=
          "  %dq, %dk, %dv = attention_grad(%dout, %q, %kw, %vw) {causal = false} on world : f32[1, 8, 256, 64], "
          "f32[1, 8, 1024, 64], f32[1, 8, 1024, 64]\n";
    const std::string_view k_in = backward ? "%dk" : "%ks", v_in = backward ? "%dv" : "%vs";
    if (exchange == "grouped") {
      line("%k, %v", kind, fmt::format("{}, {}", k_in, v_in), ", chunks = 4",
           fmt::format("{}, {}", type, type.substr(2)));
    } else {
      const std::string_view chunks = exchange == "separate" ? ", chunks = 4" : "";
      line("%k", kind, k_in, chunks, type);
      line("%v", kind, v_in, chunks, type);
    }
    text += backward ? "  return %dq, %k, %v\n}\n"
                     : "  %o = attention(%q, %k, %v) {causal = false} on world : f32[1, 8, 256, 64]\n  return %o\n}\n";
    Outcome o = simulate_text(text, test_cluster(1, 4), {}, false);
    EXPECT_TRUE(o.report) << o.errors;
    return o.report ? o.report->step_time_s : 0.0;
  };
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    const double blocking = run("blocking", backward), separate = run("separate", backward),
                 grouped = run("grouped", backward);
    // One operand's exchange: 3 pieces of 512 KiB at 10 GB/s.
    const double t = 3.0 * 512 * 1024 / 1e10;
    if (!backward) {
      // Blocking, attention waits for both; separately, for the first.
      EXPECT_NEAR(blocking - grouped, 2 * t, 2e-6);
      EXPECT_NEAR(separate - grouped, t, 2e-6);
    } else {
      // The grouped scatter trails the gradient op by its last piece (2t/4);
      // separately, the second scatter starts after the first trailed by t/4.
      EXPECT_NEAR(blocking - grouped, 2 * t - 2 * t / 4, 2e-6);
      EXPECT_NEAR(separate - grouped, t + t / 4 - 2 * t / 4, 2e-6);
    }
  }
}

TEST(Simulator, TraceEventsAreNamedForTheLayerPassAndMicroBatch) {
  SimOptions options;
  options.record_trace = true;
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> module = ir::parse_module(sources.add("t.ir", R"(mesh world[d=1]
func @f {
  input %x on world : f32[64, 64]
  param %w on world : f32[64, 64]
  %y = matmul(%x, %w) on world <mb=2, phase=forward, loc="gpt.dstrat":3:5, scope="blocks[3].mlp.fc1"> : f32[64, 64]
  %z = relu(%y) on world : f32[64, 64]
  return %z
}
)"),
                                                      diags);
  ASSERT_TRUE(module);
  std::optional<SimReport> report = simulate(*module, test_cluster(1, 1), options, diags);
  ASSERT_TRUE(report);
  std::ostringstream trace;
  write_chrome_trace(trace, *module, module->functions[0], *report);
  std::vector<std::string> names, ir_ops;
  nlohmann::json events = nlohmann::json::parse(trace.str())["traceEvents"];
  for (const auto& e : events) {
    if (e["ph"] != "X") continue;
    names.push_back(e["name"]);
    ir_ops.push_back(e["args"]["ir"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"blocks[3].mlp.fc1 forward mb2", "relu %z"}));
  EXPECT_EQ(ir_ops, (std::vector<std::string>{"matmul %y", "relu %z"}));
}

TEST(Simulator, MeshLargerThanTheClusterIsADiagnostic) {
  Outcome run = simulate_text(dp_all_reduce("world"), test_cluster(1, 4));
  EXPECT_FALSE(run.report);
  EXPECT_NE(run.errors.find("t.ir:1:1: error: the module's mesh world has 8 devices"), std::string::npos) << run.errors;
  EXPECT_NE(run.errors.find("[sim-mesh-too-large]"), std::string::npos) << run.errors;
}

TEST(Simulator, RankOutsideTheClusterIsADiagnostic) {
  Outcome run = simulate_text(R"(mesh world[d=2] devices [0, 5]
func @f {
  input %g on world : f32[4]
  return %g
}
)",
                              test_cluster(1, 4));
  EXPECT_FALSE(run.report);
  EXPECT_NE(run.errors.find("t.ir:1:1: error: rank 1 of mesh world is placed on device 5"), std::string::npos)
      << run.errors;
  EXPECT_NE(run.errors.find("[sim-bad-device-map]"), std::string::npos) << run.errors;
}

TEST(Simulator, UnknownFunctionIsADiagnostic) {
  SimOptions options;
  options.function = "nope";
  Outcome run = simulate_text(kMemoryModule, test_cluster(1, 1), options);
  EXPECT_FALSE(run.report);
  EXPECT_NE(run.errors.find("t.ir:1:1: error: the module has no function 'nope'"), std::string::npos) << run.errors;
  EXPECT_NE(run.errors.find("[sim-no-function]"), std::string::npos) << run.errors;
}

// Each rank first waits to receive what the other sends only afterwards.
TEST(Simulator, AScheduleThatCannotFinishIsADiagnostic) {
  Outcome run = simulate_text(R"(mesh world[d=2]
func @f {
  input %a on world[d=0] : f32[4]
  input %b on world[d=1] : f32[4]
  %ra = recv() on world[d=0] from world[d=1] channel 1 : f32[4]
  send(%a) on world[d=0] to world[d=1] channel 2
  %rb = recv() on world[d=1] from world[d=0] channel 2 : f32[4]
  send(%b) on world[d=1] to world[d=0] channel 1
  return %ra, %rb
}
)",
                              test_cluster(1, 2), {}, /*verify=*/false);
  EXPECT_FALSE(run.report);
  EXPECT_NE(run.errors.find("t.ir:5:3: error: the schedule cannot finish"), std::string::npos) << run.errors;
  EXPECT_NE(run.errors.find("[sim-stuck]"), std::string::npos) << run.errors;
}

}  // namespace
}  // namespace dstc::htae

namespace dstc::htae {
namespace {

ClusterSpec dgx_a100(int64_t nodes) { return testing::preset_cluster("dgx-a100.toml", {.nodes = nodes}); }

// On a module whose tp/dp ranks of a stage are interchangeable, one class
// per stage gives what simulating every device gives.
TEST(Simulator, SymmetricClassesMatchPerDeviceSimulation) {
  ir::Module m = testing::synthetic_gpt({.pp = 2, .dp = 2, .tp = 4, .layers = 4, .micro = 4});
  SourceManager sources;
  DiagnosticEngine diags(sources);
  ASSERT_TRUE(ir::verify_module(m, diags));
  ClusterSpec cluster = dgx_a100(2);
  SimOptions symmetric, exact;
  exact.symmetry = false;
  std::optional<SimReport> a = simulate(m, cluster, symmetric, diags);
  std::optional<SimReport> b = simulate(m, cluster, exact, diags);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->num_classes, 2);
  EXPECT_EQ(b->num_classes, 16);
  EXPECT_DOUBLE_EQ(a->step_time_s, b->step_time_s);
  EXPECT_EQ(a->peak_memory_bytes, b->peak_memory_bytes);
  // The tp rings of a stage's two nodes mirror each other: one is simulated.
  EXPECT_EQ(b->num_mirrored_flows, 0);
  EXPECT_GT(a->num_mirrored_flows, 0);
  EXPECT_EQ(a->num_flows + a->num_mirrored_flows, b->num_flows);
  EXPECT_DOUBLE_EQ(a->breakdown.bubble_s, b->breakdown.bubble_s);
  EXPECT_GT(a->breakdown.bubble_s, 0);

  SimOptions serial;
  serial.executor = ExecutorKind::ProgramOrder;
  std::optional<SimReport> c = simulate(m, cluster, serial, diags);
  ASSERT_TRUE(c);
  EXPECT_GT(c->step_time_s, a->step_time_s);
}

}  // namespace
}  // namespace dstc::htae
