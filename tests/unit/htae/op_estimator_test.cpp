#include "htae/op_estimator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

namespace dstc::htae {
namespace {

// The A100 80GB of stdlib/clusters/dgx-a100.toml.
GpuSpec a100() {
  GpuSpec gpu;
  gpu.name = "A100";
  gpu.peak_flops[static_cast<size_t>(ComputeDtype::Fp32)] = 19.5e12;
  gpu.peak_flops[static_cast<size_t>(ComputeDtype::Bf16)] = 312e12;
  gpu.memory_bytes = 80LL << 30;
  gpu.hbm_bandwidth = 2039e9;
  gpu.launch_overhead = 4e-6;
  return gpu;
}

OpCostQuery matmul(int64_t m, int64_t n, int64_t k) {
  OpCostQuery q;
  q.kind = "matmul";
  q.op_class = OpClass::Matmul;
  q.dtype = ComputeDtype::Bf16;
  q.flops = 2.0 * m * n * k;
  q.bytes_read = 2.0 * (m * k + k * n);
  q.bytes_written = 2.0 * m * n;
  q.shape = {m, n, k};
  return q;
}

TEST(OpEstimator, EfficiencyCurves) {
  OpEstimator est(a100());
  EXPECT_DOUBLE_EQ(est.matmul_efficiency(128), 0.40);
  EXPECT_DOUBLE_EQ(est.matmul_efficiency(4096), 0.80 * 4096 / 4224);
  EXPECT_DOUBLE_EQ(est.matmul_efficiency(4096, ComputeDtype::Fp8), 0.73 * 4096 / 4224);
  EXPECT_DOUBLE_EQ(est.memory_efficiency(OpClass::Elementwise, 256 * 1024), 0.425);
  EXPECT_DOUBLE_EQ(est.memory_efficiency(OpClass::Reduction, 256 * 1024), 0.35);
  EXPECT_DOUBLE_EQ(est.memory_efficiency(OpClass::Optimizer, 256 * 1024), 0.39);
  // Each op's class is its registry entry's.
  EXPECT_EQ(ir::op_info(ir::OpKind::LayerNorm).cost_class, OpClass::Reduction);
  EXPECT_EQ(ir::op_info(ir::OpKind::Adam).cost_class, OpClass::Optimizer);
  EXPECT_EQ(ir::op_info(ir::OpKind::Gelu).cost_class, OpClass::Elementwise);
  EXPECT_EQ(ir::op_info(ir::OpKind::AttentionPart).cost_class, OpClass::Matmul);
  EXPECT_EQ(ir::op_info(ir::OpKind::Reshape).cost_class, OpClass::Free);
}

// An fp8 GEMM's compute time by its scales: per row at 0.95 of the
// per-tensor rate, per block at 0.82; a bf16 GEMM ignores the field.
TEST(OpEstimator, Fp8GemmsSlowWithFinerScales) {
  OpEstimator est(a100());
  OpCostQuery q = matmul(8192, 8192, 8192);
  q.dtype = ComputeDtype::Fp8;
  const double tensorwise = est.estimate(q).compute_seconds;
  q.fp8_scaling = ir::Fp8Scaling::Rowwise;
  EXPECT_DOUBLE_EQ(est.estimate(q).compute_seconds, tensorwise / 0.95);
  q.fp8_scaling = ir::Fp8Scaling::Blockwise;
  EXPECT_DOUBLE_EQ(est.estimate(q).compute_seconds, tensorwise / 0.82);
  OpCostQuery bf16 = matmul(8192, 8192, 8192);
  const double plain = est.estimate(bf16).compute_seconds;
  bf16.fp8_scaling = ir::Fp8Scaling::Blockwise;
  EXPECT_DOUBLE_EQ(est.estimate(bf16).compute_seconds, plain);
}

// 4096^3 bf16 matmul: 2 x 4096^3 FLOPs at 312 TFLOP/s x 0.7758 = 0.5678 ms,
// far above its 96 MiB of traffic (0.058 ms), plus 4 us launch.
TEST(OpEstimator, LargeMatmulIsComputeBound) {
  OpEstimator est(a100());
  OpCostEstimate e = est.estimate(matmul(4096, 4096, 4096));
  EXPECT_NEAR(e.seconds, 5.718442338e-4, 1e-12);
  EXPECT_NEAR(e.memory_seconds, 5.823237458e-5, 1e-13);
  EXPECT_FALSE(e.from_profile);
}

// Adding two 64 Mi-element bf16 tensors moves 384 MiB at 2039 GB/s x 0.85
// (nearly saturated): 0.2325 ms + 4 us.
TEST(OpEstimator, ElementwiseIsMemoryBound) {
  OpEstimator est(a100());
  OpCostQuery add;
  add.kind = "add";
  add.dtype = ComputeDtype::Bf16;
  add.flops = 64.0 * 1024 * 1024;
  add.bytes_read = 2 * 128.0 * 1024 * 1024;
  add.bytes_written = 128.0 * 1024 * 1024;
  EXPECT_NEAR(est.estimate(add).seconds, 2.3647573955e-4, 1e-13);
}

TEST(OpEstimator, ViewsCostNothing) {
  OpEstimator est(a100());
  OpCostQuery reshape;
  reshape.kind = "reshape";
  reshape.op_class = OpClass::Free;
  reshape.bytes_read = 1e9;
  EXPECT_EQ(est.estimate(reshape).seconds, 0.0);
}

TEST(OpEstimator, ProfileOverridesInterpolatesAndScales) {
  ProfileDatabase db;
  OpCostQuery small = matmul(1024, 1024, 1024), large = matmul(2048, 2048, 2048);
  db.add(OpProfileEntry{"matmul", ComputeDtype::Bf16, small.shape, small.flops, small.bytes(), 1e-5});
  db.add(OpProfileEntry{"matmul", ComputeDtype::Bf16, large.shape, large.flops, large.bytes(), 8e-5});
  OpEstimator est(a100(), &db);
  EXPECT_DOUBLE_EQ(est.estimate(small).seconds, 1e-5);
  // 2 x 1024 x 1024 x 4096 FLOPs is 4x the small entry, whose FLOPs are 1/8
  // of the large one's: 2/3 of the way in log scale, 1e-5 x 8^(2/3) = 4e-5.
  OpCostEstimate mid = est.estimate(matmul(1024, 1024, 4096));
  EXPECT_TRUE(mid.from_profile);
  EXPECT_NEAR(mid.seconds, 4e-5, 1e-15);
  // Beyond the largest entry: the roofline times (measured / roofline) of it.
  OpCostQuery wide = matmul(8192, 8192, 1024);
  double ratio = 8e-5 / est.roofline(large).seconds;
  EXPECT_NEAR(est.estimate(wide).seconds, est.roofline(wide).seconds * ratio, 1e-15);
  // Past every measured dim, the two entries' corner prices it: matmuls
  // saturate, so its rate holds (the roofline runs at it, plus the launch gap).
  OpCostQuery huge = matmul(8192, 8192, 8192);
  EXPECT_NEAR(est.estimate(huge).seconds, huge.flops / (large.flops / 8e-5) + a100().launch_overhead, 1e-12);
  // Another dtype has no entries: the roofline.
  OpCostQuery fp32 = small;
  fp32.dtype = ComputeDtype::Fp32;
  EXPECT_FALSE(est.estimate(fp32).from_profile);
}

TEST(ProfileDatabase, CollectivesInterpolateAlongBytes) {
  ProfileDatabase db;
  db.add(CollectiveProfileEntry{CollectiveKind::AllReduce, 8, 1e6, 2e-5});
  db.add(CollectiveProfileEntry{CollectiveKind::AllReduce, 8, 1e8, 8e-4});
  EXPECT_DOUBLE_EQ(*db.collective_seconds(CollectiveKind::AllReduce, 8, 1e6), 2e-5);
  EXPECT_NEAR(*db.collective_seconds(CollectiveKind::AllReduce, 8, 1e7), std::sqrt(2e-5 * 8e-4), 1e-15);
  EXPECT_FALSE(db.collective_seconds(CollectiveKind::AllReduce, 8, 1e9));
  EXPECT_FALSE(db.collective_seconds(CollectiveKind::AllReduce, 4, 1e7));
}

TEST(ProfileDatabase, RoundTripsThroughToml) {
  ProfileDatabase db;
  db.gpu = "A100-SXM4-80GB";
  db.add(OpProfileEntry{"matmul", ComputeDtype::Bf16, {4096, 4096, 4096}, 1.37e11, 1.0e8, 6.1e-4});
  db.add(CollectiveProfileEntry{CollectiveKind::AllGather, 4, 1048576, 3.25e-5});
  db.launch_overhead = 3.8e-6;
  db.memory_curve = RateCurve{4.7e12, 1.55e7};
  SourceManager sources;
  sources.add("p.toml", db.to_toml());
  DiagnosticEngine diags(sources);
  std::optional<ProfileDatabase> back = ProfileDatabase::load(sources, diags, "p.toml");
  ASSERT_TRUE(back) << db.to_toml();
  EXPECT_EQ(back->gpu, "A100-SXM4-80GB");
  ASSERT_EQ(back->ops().size(), 1u);
  EXPECT_EQ(back->ops()[0].shape, (std::vector<int64_t>{4096, 4096, 4096}));
  EXPECT_DOUBLE_EQ(back->ops()[0].seconds, 6.1e-4);
  ASSERT_EQ(back->collectives().size(), 1u);
  EXPECT_EQ(back->collectives()[0].kind, CollectiveKind::AllGather);
  EXPECT_DOUBLE_EQ(*back->launch_overhead, 3.8e-6);
  ASSERT_TRUE(back->memory_curve);
  EXPECT_DOUBLE_EQ(back->memory_curve->max_rate, 4.7e12);
  EXPECT_DOUBLE_EQ(back->memory_curve->half, 1.55e7);
  EXPECT_EQ(back->to_toml(), db.to_toml());
}

TEST(ProfileDatabase, AnUnknownCollectiveListsTheKnownOnes) {
  SourceManager sources;
  sources.add("p.toml",
              "version = 1\ngpu = \"g\"\n[[collective]]\nkind = \"allreduce\"\ngroup_size = 8\nbytes = 1\n"
              "seconds = 1\n");
  DiagnosticEngine diags(sources);
  EXPECT_FALSE(ProfileDatabase::load(sources, diags, "p.toml"));
  ASSERT_EQ(diags.diagnostics().size(), 1u);
  const Diagnostic& d = diags.diagnostics()[0];
  EXPECT_EQ(d.kind.name, "config-bad-value");
  EXPECT_EQ(diags.location(d.range), "p.toml:4:8");
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0].message,
            "the collectives are all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce and send_recv");
}

TEST(ProfileDatabase, ReportsSchemaErrorsAtTheirLine) {
  SourceManager sources;
  sources.add("p.toml",
              "version = 2\ngpu = \"g\"\n[[op]]\nkind = \"matmul\"\ndtype = \"fp4\"\nshape = [1]\nflops = 1\n"
              "bytes = 1\nseconds = 1\nsecs = 2\n");
  DiagnosticEngine diags(sources);
  EXPECT_FALSE(ProfileDatabase::load(sources, diags, "p.toml"));
  ASSERT_EQ(diags.diagnostics().size(), 3u);
  EXPECT_EQ(diags.diagnostics()[0].kind.name, "config-bad-value");
  EXPECT_EQ(diags.location(diags.diagnostics()[0].range), "p.toml:1:11");
  EXPECT_EQ(diags.diagnostics()[1].kind.name, "config-bad-value");
  EXPECT_EQ(diags.location(diags.diagnostics()[1].range), "p.toml:5:9");
  EXPECT_EQ(diags.diagnostics()[2].kind.name, "config-unknown-key");
  EXPECT_EQ(diags.location(diags.diagnostics()[2].range), "p.toml:10:1");
}

// The profiles the stdlib ships load, and price a layer's bf16 GEMM from their
// grid at a rate no data sheet gives (measured, under the tensor-core peak).
TEST(ProfileDatabase, TheShippedProfilesLoadAndCoverLayerShapes) {
  size_t profiles = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DSTC_SOURCE_DIR "/stdlib/profiles")) {
    SourceManager sources;
    DiagnosticEngine diags(sources);
    std::optional<ProfileDatabase> db = ProfileDatabase::load(sources, diags, entry.path().string());
    ASSERT_TRUE(db) << entry.path();
    ++profiles;
    std::optional<double> rate = db->matmul_rate(ComputeDtype::Bf16, {12288, 4096, 4096});
    ASSERT_TRUE(rate) << entry.path();
    EXPECT_GT(*rate, 5e14) << entry.path();
    EXPECT_LT(*rate, 989.5e12) << entry.path();
    EXPECT_TRUE(db->memory_curve && db->launch_overhead) << entry.path();
    // Causal attention of Llama 3 8B (32 heads of 128, 8192 tokens) is
    // priced by the fused-attention entries, between those of 4096 and 8192
    // tokens (cuDNN: 580-640 TFLOP/s), not as a matmul of width 128.
    OpCostQuery attention;
    attention.kind = "attention";
    attention.op_class = OpClass::Matmul;
    attention.dtype = ComputeDtype::Bf16;
    attention.shape = {32 * 8192, 128, 8192};
    attention.flops = 2.0 * 32 * 8192 * 8192 * 128;
    ASSERT_FALSE(db->rates_cover(OpClass::Matmul, attention)) << entry.path();
    std::optional<double> seconds = db->op_seconds(attention);
    ASSERT_TRUE(seconds) << entry.path();
    EXPECT_GT(attention.flops / *seconds, 5.8e14) << entry.path();
    EXPECT_LT(attention.flops / *seconds, 6.4e14) << entry.path();
  }
  EXPECT_GE(profiles, 2u);
}

}  // namespace
}  // namespace dstc::htae
