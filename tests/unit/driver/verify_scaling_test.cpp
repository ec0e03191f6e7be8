#include "compiler/driver/verify_scaling.h"

#include <gtest/gtest.h>

#include "compiler/driver/verify_programs.h"

namespace dstc {
namespace {

StrategyRequest gpt2_megatron() {
  StrategyRequest request;
  request.file = std::string(DSTC_SOURCE_DIR) + "/examples/gpt2_megatron.dstrat";
  return request;
}

TEST(VerifyScale, FindsDefinesUnderWhichTheStrategyCompilesWithinTheTargets) {
  StrategyRequest request = gpt2_megatron();
  SourceManager sources;
  DiagnosticEngine diags(sources);
  bool internal = false;
  std::optional<VerifyPrograms> full = compile_verify_programs(request, sources, diags, internal);
  ASSERT_TRUE(full);
  double full_bytes = full->single_work().bytes + full->strategy_work().bytes;

  constexpr double kMaxBytes = 64.0 * (1 << 20);
  std::optional<VerifyScale> scale = find_verify_scale(request, full->strategy(), 1e12, kMaxBytes);
  ASSERT_TRUE(scale);
  EXPECT_LE(scale->bytes, kMaxBytes);
  EXPECT_LT(scale->bytes, full_bytes / 1000);

  StrategyRequest scaled = request;
  scaled.defines = scale->defines;
  SourceManager scaled_sources;
  DiagnosticEngine scaled_diags(scaled_sources);
  std::optional<VerifyPrograms> small = compile_verify_programs(scaled, scaled_sources, scaled_diags, internal);
  ASSERT_TRUE(small) << define_arguments(scale->defines);
  EXPECT_DOUBLE_EQ(small->single_work().bytes + small->strategy_work().bytes, scale->bytes);
  // Parallelism stays: the tensor-parallel axis is halved from 4, never to 1.
  EXPECT_GE(small->strategy().devices(), 4);
  for (const std::string& d : scale->defines) EXPECT_GE(std::stoll(d.substr(d.find('=') + 1)), 2) << d;
}

TEST(VerifyScale, KeepsTheUsersDefinesThatAreNotParameters) {
  StrategyRequest request = gpt2_megatron();
  request.defines = {"layers=2"};
  SourceManager sources;
  DiagnosticEngine diags(sources);
  bool internal = false;
  std::optional<VerifyPrograms> programs = compile_verify_programs(request, sources, diags, internal);
  ASSERT_TRUE(programs);
  std::optional<VerifyScale> scale = find_verify_scale(request, programs->strategy(), 1e12, 64.0 * (1 << 20));
  ASSERT_TRUE(scale);
  EXPECT_NE(std::find(scale->defines.begin(), scale->defines.end(), "layers=2"), scale->defines.end())
      << define_arguments(scale->defines);
}

TEST(VerifyScale, DefineArguments) { EXPECT_EQ(define_arguments({"a=1", "b=2"}), "-D a=1 -D b=2"); }

}  // namespace
}  // namespace dstc
