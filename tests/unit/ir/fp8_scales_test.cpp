// The scales an FP8 value carries, found through the ops that move it.
#include "ir/fp8_scales.h"

#include <gtest/gtest.h>

#include "ir/parser.h"

namespace dstc::ir {
namespace {

// x [8, 64] in two shards of 4 rows: a quantized shard holds 4 row scales
// (rowwise) or 4 x 64 / 32 block scales (blockwise, 32-element blocks), and
// its gather twice as many, gathered alone or grouped with the other; a
// tensorwise copy holds one; a value no quantize made (the fp8 argument)
// none.
TEST(Fp8Scales, CountedThroughTheGatherThatMovesThem) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> m = parse_module(sm.add("t.ir", R"(mesh w[d=2]
func @f {
  input %x on w : bf16[4, 64] sbp(d=S(0))
  param %p on w : f8e4m3[4, 64]
  %r = quantize(%x) {dtype = "f8e4m3", block = -1} on w : f8e4m3[4, 64] sbp(d=S(0))
  %rg = all_gather(%r) {dim = 0} on w over [d] : f8e4m3[8, 64] sbp(d=B)
  %b = quantize(%x) {dtype = "f8e5m2", block = 32} on w : f8e5m2[4, 64] sbp(d=S(0))
  %bg = all_gather(%b) {dim = 0} on w over [d] : f8e5m2[8, 64] sbp(d=B)
  %t = quantize(%x) {dtype = "f8e4m3"} on w : f8e4m3[4, 64] sbp(d=S(0))
  %gr, %gb = all_gather(%r, %b) {dim = 0} on w over [d] : f8e4m3[8, 64] sbp(d=B), f8e5m2[8, 64] sbp(d=B)
  return
}
)"),
                                         diags);
  ASSERT_TRUE(m.has_value());
  const Function& f = m->functions[0];
  auto value = [&](std::string_view name) {
    for (ValueId v = 0; v < f.values.size(); ++v)
      if (m->value_name(f, v) == name) return v;
    ADD_FAILURE() << "no value " << name;
    return ValueId{0};
  };
  EXPECT_EQ(fp8_scale_block(*m, f, value("rg")), kRowwiseBlock);
  EXPECT_EQ(fp8_scale_bytes(*m, f, value("r")), 4 * 4);
  EXPECT_EQ(fp8_scale_bytes(*m, f, value("rg")), 8 * 4);
  EXPECT_EQ(fp8_scale_bytes(*m, f, value("b")), 4 * 2 * 4);
  EXPECT_EQ(fp8_scale_bytes(*m, f, value("bg")), 8 * 2 * 4);
  EXPECT_EQ(fp8_scale_bytes(*m, f, value("t")), 4);
  EXPECT_EQ(fp8_scale_block(*m, f, value("gr")), kRowwiseBlock);
  EXPECT_EQ(fp8_scale_block(*m, f, value("gb")), 32);
  EXPECT_EQ(fp8_scale_block(*m, f, value("p")), std::nullopt);
  EXPECT_EQ(fp8_scale_bytes(*m, f, value("p")), 0);
  EXPECT_EQ(fp8_scale_bytes(*m, f, value("x")), 0);
  // The bytes a value takes include its scales.
  EXPECT_EQ(m->value_bytes(f, value("rg")), 8 * 64 + 8 * 4);
}

}  // namespace
}  // namespace dstc::ir
