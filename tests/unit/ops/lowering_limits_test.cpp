// Each op's lowering limit refuses the forms the language allows but the
// compiler cannot lower yet, with the reason the user sees, and passes the
// forms it lowers.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ops/op_table.h"

namespace dstc::ops {
namespace {

using Dims = std::vector<std::string>;

// `op` over operands named `inputs` with output `output`, its `dim`
// attribute naming `dim` (if given), in a model whose batch dim is b.
std::optional<std::string> refusal(std::string_view op, std::vector<Dims> inputs, Dims output, std::string dim = {}) {
  const OpDef& def = *find_op(op);
  std::vector<AttrValue> values;
  for (const AttrSpec& spec : def.attrs) values.push_back({spec.name, 0, 0, false, {}, false});
  int axis = -1;
  if (!dim.empty()) {
    auto slot = std::find_if(values.begin(), values.end(), [](const AttrValue& v) { return v.name == "dim"; });
    slot->dim = dim;
    slot->given = true;
    axis = static_cast<int>(std::find(inputs[0].begin(), inputs[0].end(), dim) - inputs[0].begin());
  }
  OpAttrs attrs(def, std::move(values));
  EXPECT_NE(def.lowering_limit, nullptr) << op;
  if (!def.lowering_limit) return std::nullopt;
  return def.lowering_limit(LoweringQuery{def.name, inputs, output, attrs, axis, "b"});
}

TEST(LoweringLimits, BinaryOpsTakeTwoOperandsOneWithinTheOther) {
  EXPECT_EQ(refusal("add", {{"b", "h"}, {"b", "h"}, {"b", "h"}}, {"b", "h"}),
            "add takes exactly two operands here; nest it for more");
  EXPECT_EQ(refusal("add", {{"h"}, {"b", "s", "h"}}, {"b", "s", "h"}), std::nullopt);
  EXPECT_EQ(refusal("sub", {{"b", "s", "h"}, {"s", "h"}}, {"b", "s", "h"}), std::nullopt);
  EXPECT_EQ(refusal("mul", {{"b", "s", "h"}, {"h", "s"}}, {"b", "s", "h"}),
            "one operand's dims must be dims of the other, in the same order");
  EXPECT_EQ(refusal("div", {{"b", "h"}, {"b", "o"}}, {"b", "h", "o"}),
            "one operand's dims must be dims of the other, in the same order");
}

TEST(LoweringLimits, NormsNormalizeTheLastDimWithTheirParameters) {
  EXPECT_EQ(refusal("rmsnorm", {{"b", "s", "h"}, {"h"}}, {"b", "s", "h"}, "h"), std::nullopt);
  EXPECT_EQ(refusal("rmsnorm", {{"b", "s", "h"}}, {"b", "s", "h"}, "s"), "rmsnorm must normalize the last dim");
  EXPECT_EQ(refusal("rmsnorm", {{"b", "s", "h"}, {"s"}}, {"b", "s", "h"}, "h"),
            "rmsnorm's scale must have exactly the normalized dim");
  EXPECT_EQ(refusal("layernorm", {{"b", "s", "h"}, {"h"}, {"h"}}, {"b", "s", "h"}, "h"), std::nullopt);
  EXPECT_EQ(refusal("layernorm", {{"b", "s", "h"}, {"h"}, {"h"}}, {"b", "s", "h"}, "s"),
            "layernorm must normalize the last dim");
  EXPECT_EQ(refusal("layernorm", {{"b", "s", "h"}}, {"b", "s", "h"}, "h"), "layernorm needs gamma and beta");
}

TEST(LoweringLimits, BatchNormNormalizesItsChannelsWithGammaAndBeta) {
  const Dims x{"b", "c", "h", "w"};
  EXPECT_EQ(refusal("batchnorm", {x, {"c"}, {"c"}}, x, "c"), std::nullopt);
  EXPECT_EQ(refusal("batchnorm", {x, {"h"}, {"h"}}, x, "h"),
            "batchnorm takes its input as [batch, channels, ...] with dim = the channels");
  EXPECT_EQ(refusal("batchnorm", {x}, x, "c"), "batchnorm needs gamma and beta");
  EXPECT_EQ(refusal("batchnorm", {x, {"c"}, {"h"}}, x, "c"),
            "batchnorm's gamma and beta must have exactly the channel dim");
}

TEST(LoweringLimits, ConvolutionPoolingAndAttentionTakeFourDims) {
  EXPECT_EQ(refusal("conv2d", {{"c", "h", "w"}, {"o", "c", "kh", "kw"}}, {"o", "h", "w"}),
            "conv2d takes its input as [batch, channels, height, width]");
  EXPECT_EQ(refusal("maxpool2d", {{"c", "h", "w"}}, {"c", "h", "w"}),
            "pooling takes its input as [batch, channels, height, width]");
  EXPECT_EQ(refusal("avgpool2d", {{"b", "c", "h", "w"}}, {"b", "c", "h", "w"}), std::nullopt);
  const Dims qkv{"b", "s", "d"};
  EXPECT_EQ(refusal("attention", {qkv, qkv, qkv}, qkv), "attention takes q, k and v as [batch, heads, seq, head_dim]");
}

TEST(LoweringLimits, ClassesAreTheLastDimOfTheLogits) {
  EXPECT_EQ(refusal("cross_entropy", {{"b", "v"}, {"b"}}, {}, "v"), std::nullopt);
  EXPECT_EQ(refusal("cross_entropy", {{"v", "b"}, {"b"}}, {}, "v"), "the class dim must be the last dim of the logits");
}

// Micro-batches cut the batch dim: positions, ranges and token routing
// along it would restart in each.
TEST(LoweringLimits, NothingCountsAlongTheBatchDim) {
  EXPECT_EQ(refusal("rope", {{"b", "s", "d"}}, {"b", "s", "d"}, "s"), std::nullopt);
  EXPECT_EQ(refusal("rope", {{"b", "s", "d"}}, {"b", "s", "d"}, "b"), "positions along the batch dim b");
  EXPECT_EQ(refusal("slice", {{"b", "s"}}, {"b", "s"}, "b"), "a range of the batch dim b");
  EXPECT_EQ(refusal("combine", {{"e", "c", "h"}, {"b", "s", "e"}}, {"b", "s", "h"}), std::nullopt);
  EXPECT_EQ(refusal("dispatch", {{"s", "b", "h"}, {"s", "b", "e"}}, {"s", "e", "c", "h"}),
            "routing tokens along the batch dim b; route along a dim inside each sample (the sequence)");
}

}  // namespace
}  // namespace dstc::ops
