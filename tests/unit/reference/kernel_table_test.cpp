// The reference executor has a kernel for every compute and optimizer op of
// the IR, and none for communication, which the executor runs itself: an op
// added to ir/op_kinds.def without its reference kernel fails here.
#include "backends/reference/kernel_table.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace dstc::reference {
namespace {

TEST(KernelTable, EveryComputeAndOptimizerOpHasAReferenceKernel) {
  for (int i = 0; i < ir::kOpKindCount; ++i) {
    const ir::OpInfo& info = ir::op_info(static_cast<ir::OpKind>(i));
    const bool computes = info.category == ir::OpCategory::Compute || info.category == ir::OpCategory::Optimizer;
    EXPECT_EQ(kernel_table().find(info.kind) != nullptr, computes) << info.name;
  }
}

TEST(KernelTable, BindingAnOpTwiceIsRefused) {
  KernelTable table;
  table.bind(ir::OpKind::Add, [](const KernelCall&) {});
  EXPECT_THROW(table.bind(ir::OpKind::Add, [](const KernelCall&) {}), std::logic_error);
}

}  // namespace
}  // namespace dstc::reference
