// The op table: every op once, found by its name, with a rule for its
// output dims.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "compiler/ops/op_table.h"

namespace dstc::ops {
namespace {

TEST(OpTable, EveryKindHasOneEntryFoundByItsName) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < all_ops().size(); ++i) {
    const OpDef& def = all_ops()[i];
    EXPECT_EQ(static_cast<size_t>(def.kind), i) << def.name;
    EXPECT_EQ(&op_def(def.kind), &def) << def.name;
    EXPECT_TRUE(names.insert(def.name).second) << def.name << " is declared twice";
    EXPECT_EQ(find_op(def.name), &def) << def.name;
    EXPECT_NE(def.output_dims, nullptr) << def.name;
    EXPECT_LE(def.min_inputs, def.max_inputs) << def.name;
    EXPECT_FALSE(def.summary.empty()) << def.name;
  }
  EXPECT_EQ(find_op("no_such_op"), nullptr);
  EXPECT_EQ(op_name(OpKind::LogSoftmax), "log_softmax");
}

TEST(OpTable, ContractionKeepsTheWrittenDims) {
  std::vector<std::vector<Dim>> inputs = {{{"b", 4}, {"h", 8}}, {{"o", 16}, {"h", 8}}};
  std::optional<std::vector<DeclaredDim>> declared = std::vector<DeclaredDim>{{"b", std::nullopt}, {"o", 16}};
  OpError error;
  auto out = infer_output(*find_op("matmul"), inputs, OpAttrs(*find_op("matmul")), declared, error);
  ASSERT_TRUE(out) << error.message;
  EXPECT_EQ(*out, (std::vector<Dim>{{"b", 4}, {"o", 16}}));
}

TEST(OpTable, ReductionNamesTheMissingDim) {
  std::vector<std::vector<Dim>> inputs = {{{"b", 4}, {"h", 8}}};
  OpAttrs attrs(*find_op("sum"), {{"dim", 0, 0, false, "s", true}});
  OpError error;
  EXPECT_FALSE(infer_output(*find_op("sum"), inputs, attrs, std::nullopt, error));
  EXPECT_TRUE(error.unknown_dim);
  EXPECT_EQ(error.message, "dim s is not a dim of [b: 4, h: 8]");
}

// Every stage reads an attribute by name; what the model left out reads as
// its spec's default, or as the attribute that default names.
TEST(OpAttrs, UnwrittenAttributesReadAsTheirDefaults) {
  OpAttrs rope(*find_op("rope"));
  EXPECT_EQ(rope.real("base"), 10000);
  EXPECT_FALSE(rope.given("base"));
  rope.set_real("base", 500000);
  EXPECT_EQ(rope.real("base"), 500000);
  EXPECT_TRUE(rope.given("base"));
  EXPECT_EQ(OpAttrs(*find_op("layernorm")).real("eps"), 1e-5);
  EXPECT_EQ(OpAttrs(*find_op("conv2d")).integer("stride"), 1);
  EXPECT_FALSE(OpAttrs(*find_op("attention")).boolean("causal"));

  // Required ones have defaults too, for graphs built by hand: a 1-wide pool, a top 1.
  EXPECT_EQ(OpAttrs(*find_op("avgpool2d")).integer("stride"), 1);
  EXPECT_EQ(OpAttrs(*find_op("top_k")).integer("k"), 1);
  EXPECT_EQ(OpAttrs(*find_op("scale")).real("by"), 1);

  OpAttrs pool(*find_op("maxpool2d"));
  pool.set_integer("kernel", 3);
  EXPECT_EQ(pool.integer("stride"), 3);  // a pool's stride is its kernel unless written
  pool.set_integer("stride", 2);
  EXPECT_EQ(pool.integer("stride"), 2);
  EXPECT_EQ(pool.integer("padding"), 0);
}

TEST(OpAttrs, ReadingAnAttributeTheOpDoesNotDeclareIsABug) {
  OpAttrs log_softmax(*find_op("log_softmax"));
  EXPECT_TRUE(log_softmax.declares("dim"));
  EXPECT_FALSE(log_softmax.declares("z_loss"));
  EXPECT_THROW(log_softmax.real("z_loss"), std::logic_error);
  EXPECT_THROW(OpAttrs().integer("k"), std::logic_error);
  EXPECT_THROW(OpAttrs(*find_op("rope"), {}), std::logic_error);  // one value per spec
}

}  // namespace
}  // namespace dstc::ops
