// The op table: every op once, found by its name, with a rule for its
// output dims.
#include <gtest/gtest.h>

#include <set>

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

}  // namespace
}  // namespace dstc::ops
