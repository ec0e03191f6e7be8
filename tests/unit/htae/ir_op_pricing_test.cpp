#include "htae/ir_op_pricing.h"

#include <gtest/gtest.h>

#include "ir/parser.h"

namespace dstc::htae {
namespace {

// The [m, n, k] the op estimator prices each op of `text`'s function by.
std::vector<std::vector<int64_t>> gemm_shapes(const char* text) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  std::optional<ir::Module> module = ir::parse_module(sources.add("t.ir", text), diags);
  EXPECT_TRUE(module);
  std::vector<std::vector<int64_t>> shapes;
  if (!module) return shapes;
  const ir::Function& f = module->functions[0];
  for (const ir::Op& op : f.ops) shapes.push_back(compute_query(*module, f, op, ir::op_cost(*module, f, op)).shape);
  return shapes;
}

// Experts' GEMMs (stdlib/layers/moe.dstrat): the experts dim is in both
// operands and the result, so each expert is one GEMM of its own 2 x 128
// slots, not one of 8 x 2 x 128 rows (bench/results/expert_gemms_h100_2026-11-26/).
TEST(IrOpPricing, ABatchedEinsumIsPricedAsOneOfItsGemms) {
  std::vector<std::vector<int64_t>> shapes = gemm_shapes(R"(mesh world[d=1]
func @f {
  input %x on world : bf16[2, 8, 128, 4096]
  param %w on world : bf16[8, 4096, 2048]
  input %dy on world : bf16[2, 8, 128, 2048]
  %y = einsum(%x, %w) {spec = "abcd,bde->abce"} on world : bf16[2, 8, 128, 2048]
  %dw = einsum(%x, %dy) {spec = "abcd,abce->bde"} on world : bf16[8, 4096, 2048]
  %z = einsum(%x, %w) {spec = "abcd,bde->ace"} on world : bf16[2, 128, 2048]
  return %y, %dw, %z
}
)");
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{256, 2048, 4096}));
  EXPECT_EQ(shapes[1], (std::vector<int64_t>{4096, 2048, 256}));
  // Contracted over the experts too: one GEMM, no batch.
  EXPECT_EQ(shapes[2], (std::vector<int64_t>{256, 2048, 8 * 4096}));
}

// Slots a quarter filled: the forward's rows shrink, the weight gradient's
// contraction does (its result, the weights' gradient, is whole).
TEST(IrOpPricing, PartlyFilledSlotsShrinkTheGemmDimTheyAreIn) {
  std::vector<std::vector<int64_t>> shapes = gemm_shapes(R"(mesh world[d=1]
func @f {
  input %slots on world : bf16[2, 8, 128, 4096]
  param %w on world : bf16[8, 4096, 2048]
  input %dslots on world : bf16[2, 8, 128, 2048]
  %x = scale(%slots) {factor = 1.0} on world : bf16[2, 8, 128, 4096] fill 0.25 mean 0.25
  %dy = scale(%dslots) {factor = 1.0} on world : bf16[2, 8, 128, 2048] fill 0.25 mean 0.25
  %y = einsum(%x, %w) {spec = "abcd,bde->abce"} on world : bf16[2, 8, 128, 2048] fill 0.25 mean 0.25
  %dw = einsum(%x, %dy) {spec = "abcd,abce->bde"} on world : bf16[8, 4096, 2048]
  return %y, %dw
}
)");
  ASSERT_EQ(shapes.size(), 4u);
  EXPECT_EQ(shapes[2], (std::vector<int64_t>{64, 2048, 4096}));
  EXPECT_EQ(shapes[3], (std::vector<int64_t>{4096, 2048, 64}));
}

}  // namespace
}  // namespace dstc::htae
