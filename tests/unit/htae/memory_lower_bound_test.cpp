// The memory lower bound against hand-computed values, and against the
// simulator's peak on the same module: it must never exceed it.
#include "htae/memory_lower_bound.h"

#include <gtest/gtest.h>

#include "htae/comm_buffers.h"
#include "htae/device_classes.h"
#include "htae/simulator.h"
#include "htae/topology.h"
#include "ir/parser.h"

namespace dstc::htae {
namespace {

// Rank 0 holds x and w0 (16 KiB each); its largest forward op is the relu
// (h and g, 16 KiB each): 64 KiB. Rank 1 holds w1 (64 KiB); its largest
// forward op is the second matmul (r, 16 KiB, and y, 64 KiB): 144 KiB. The
// input-gradient matmul is larger but not counted: only forward shapes are
// the same whatever the micro-batch count. The add reads h twice: once.
const char* kPipeline = R"(mesh world[pp=2]
func @f {
  input %x on world[pp=0] : f32[64, 64]
  param %w0 on world[pp=0] : f32[64, 64]
  param %w1 on world[pp=1] : f32[64, 256]
  %h = matmul(%x, %w0) on world[pp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %g = relu(%h) on world[pp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %s = add(%g, %g) on world[pp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  send(%s) on world[pp=0] to world[pp=1] channel 1 stream feature <stage=0, mb=0, phase=forward>
  %r = recv() on world[pp=1] from world[pp=0] channel 1 stream feature <stage=1, mb=0, phase=forward> : f32[64, 64]
  %y = matmul(%r, %w1) on world[pp=1] <stage=1, mb=0, phase=forward> : f32[64, 256]
  %t = transpose(%w1) {perm = [1, 0]} on world[pp=1] <stage=1, mb=0, phase=input_grad> : f32[256, 64]
  %dx = matmul(%y, %t) on world[pp=1] <stage=1, mb=0, phase=input_grad> : f32[64, 64]
  return %y, %dx
}
)";

ClusterSpec two_gpus() {
  ClusterSpec c;
  c.name = "test";
  c.nodes = 1;
  c.gpus_per_node = 2;
  c.gpu.name = "T";
  c.gpu.peak_flops[static_cast<size_t>(ComputeDtype::Fp32)] = 1e12;
  c.gpu.memory_bytes = int64_t{1} << 30;
  c.gpu.hbm_bandwidth = 1e12;
  c.intra_node.kind = IntraNodeKind::NvSwitch;
  c.intra_node.gpu_bandwidth = 1e10;
  return c;
}

// A module parsed from IR text, with what simulating it needs.
struct Parsed {
  SourceManager sources;
  DiagnosticEngine diags{sources};
  std::optional<ir::Module> module;

  explicit Parsed(const char* text) { module = ir::parse_module(sources.add("t.ir", text), diags); }
  const ir::Function& function() const { return module->functions.front(); }
};

TEST(MemoryLowerBound, ArgumentsPlusTheLargestForwardOp) {
  Parsed p(kPipeline);
  const std::optional<ir::Module>& module = p.module;
  ASSERT_TRUE(module) << p.diags.error_count();
  MemoryLowerBound bound = memory_lower_bound(*module, p.function());
  EXPECT_EQ(bound.rank, 1);
  EXPECT_EQ(bound.resident_bytes, 64 * 1024);
  EXPECT_EQ(bound.working_bytes, 80 * 1024);
  EXPECT_EQ(bound.bytes, 144 * 1024);
}

TEST(MemoryLowerBound, NeverExceedsTheSimulatedPeak) {
  Parsed p(kPipeline);
  const std::optional<ir::Module>& module = p.module;
  ASSERT_TRUE(module);
  std::optional<SimReport> report = simulate(*module, two_gpus(), {}, p.diags);
  ASSERT_TRUE(report);
  MemoryLowerBound bound = memory_lower_bound(*module, p.function());
  ASSERT_EQ(report->peak_memory_bytes.size(), 2u);
  EXPECT_LE(bound.bytes, report->peak_memory_bytes[1]);
  // Rank 1's peak is the bound plus what the backward holds at once:
  // y (64 KiB) is still needed by the input-gradient matmul.
  EXPECT_GT(report->peak_memory_bytes[1], bound.bytes);
}

// NCCL's connection for the send is held for the run, and the bound that
// counts it still stays under the peak: rank 1 receives on two channels
// (the test GPUs' 10 GB/s is under one NVLink lane), 10 MiB each.
TEST(MemoryLowerBound, CountsTheCommunicationBuffersHeldForTheRun) {
  Parsed p(kPipeline);
  ASSERT_TRUE(p.module);
  const ir::Function& f = p.function();
  std::optional<SimReport> report = simulate(*p.module, two_gpus(), {}, p.diags);
  ASSERT_TRUE(report);
  const DeviceClasses classes(*p.module, f, false);
  const std::vector<int64_t> by_class = comm_buffer_bytes(*p.module, f, classes, Topology(two_gpus()), two_gpus());
  std::vector<int64_t> held;
  for (ir::Rank r = 0; r < 2; ++r) held.push_back(by_class[classes.of_rank(r)]);
  EXPECT_EQ(held, (std::vector<int64_t>{2 * (int64_t{2} << 20), 2 * (int64_t{10} << 20)}));
  MemoryLowerBound bound = memory_lower_bound(*p.module, f, {}, held);
  EXPECT_EQ(bound.rank, 1);
  EXPECT_EQ(bound.held_bytes, 20 << 20);
  EXPECT_EQ(bound.bytes, 144 * 1024 + (20 << 20));
  EXPECT_LE(bound.bytes, report->peak_memory_bytes[1]);
}

// Training: micro-batch 0 saves a, b and c (16 KiB each, computed from the
// batch) and wc (16 KiB, from a weight: shared by every micro-batch) for its
// backward, all held when its first input-gradient op starts: 64 KiB, more
// than its largest forward op (32 KiB). d is micro-batch 1's, e is read
// only forward: neither counts. x and w are resident: 32 KiB.
const char* kSaved = R"(mesh world[dp=1]
func @f {
  input %x on world[dp=0] : f32[64, 64]
  param %w on world[dp=0] : f32[64, 64]
  %wc = relu(%w) on world[dp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %a = relu(%x) on world[dp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %b = relu(%a) on world[dp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %c = relu(%b) on world[dp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %e = relu(%c) on world[dp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %f = relu(%e) on world[dp=0] <stage=0, mb=0, phase=forward> : f32[64, 64]
  %d = relu(%x) on world[dp=0] <stage=0, mb=1, phase=forward> : f32[64, 64]
  %ga = add(%a, %c) on world[dp=0] <stage=0, mb=0, phase=input_grad> : f32[64, 64]
  %gb = add(%b, %ga) on world[dp=0] <stage=0, mb=0, phase=input_grad> : f32[64, 64]
  %gw = add(%wc, %gb) on world[dp=0] <stage=0, mb=0, phase=input_grad> : f32[64, 64]
  %gd = relu(%d) on world[dp=0] <stage=0, mb=1, phase=input_grad> : f32[64, 64]
  return %f, %gw, %gd
}
)";

TEST(MemoryLowerBound, ArgumentsPlusWhatTheFirstMicroBatchSavesForItsBackward) {
  Parsed p(kSaved);
  const std::optional<ir::Module>& module = p.module;
  ASSERT_TRUE(module) << p.diags.error_count();
  MemoryLowerBound bound = memory_lower_bound(*module, p.function());
  EXPECT_EQ(bound.resident_bytes, 32 * 1024);
  EXPECT_EQ(bound.working_bytes, 32 * 1024);
  EXPECT_EQ(bound.saved_bytes, 64 * 1024);
  EXPECT_EQ(bound.bytes, 96 * 1024);
  std::optional<SimReport> report = simulate(*module, two_gpus(), {}, p.diags);
  ASSERT_TRUE(report);
  EXPECT_LE(bound.bytes, report->peak_memory_bytes[0]);
}

// A schedule that runs three micro-batches' forward before the first
// backward holds three times what one computes from the batch (a, b, c),
// and the weight's copy (wc) once: 3 x 48 + 16 KiB.
TEST(MemoryLowerBound, MicroBatchesHeldMultiplyWhatIsComputedFromTheBatch) {
  Parsed p(kSaved);
  const std::optional<ir::Module>& module = p.module;
  ASSERT_TRUE(module);
  const int64_t held[] = {3};
  MemoryLowerBound bound = memory_lower_bound(*module, p.function(), held);
  EXPECT_EQ(bound.saved_bytes, (3 * 48 + 16) * 1024);
  EXPECT_EQ(bound.bytes, (32 + 3 * 48 + 16) * 1024);
}

}  // namespace
}  // namespace dstc::htae
