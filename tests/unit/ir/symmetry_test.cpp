// Classes of symmetric ranks.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/symmetry.h"

namespace dstc::ir {
namespace {

RankClasses classes_of(const std::string& text) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> m = parse_module(sm.add("t.ir", text), diags);
  EXPECT_TRUE(m.has_value());
  return m ? rank_classes(*m, m->functions[0]) : RankClasses{};
}

TEST(Symmetry, ReplicasOfAStageAreOneClass) {
  RankClasses c = classes_of(
      "mesh w[pp=2, dp=2, tp=2]\nfunc @f {\n input %x on w[pp=0] : f32[4]\n"
      " %y = all_reduce(%x) on w[pp=0] over [tp] : f32[4]\n"
      " send(%y) on w[pp=0] to w[pp=1] channel 1\n %z = recv() on w[pp=1] from w[pp=0] channel 1 : f32[4]\n"
      " return\n}\n");
  ASSERT_EQ(c.representative.size(), 2u);
  EXPECT_EQ(c.representative, (std::vector<Rank>{0, 4}));
  EXPECT_EQ(c.size, (std::vector<uint32_t>{4, 4}));
  EXPECT_EQ(c.class_of[3], 0u);
  EXPECT_EQ(c.class_of[5], 1u);
}

TEST(Symmetry, PeersInDifferentClassesSplitAClass) {
  // Ranks 0 and 1 run the same ops, but 0 sends to rank 2, which does more
  // than rank 3: 0 and 1 are not interchangeable.
  RankClasses c = classes_of(
      "mesh w[d=4]\nfunc @f {\n input %x on w{0, 1} : f32[4]\n"
      " send(%x) on w{0, 1} to w{2, 3} channel 1\n %y = recv() on w{2, 3} from w{0, 1} channel 1 : f32[4]\n"
      " %z = relu(%y) on w{2} : f32[4]\n return\n}\n");
  EXPECT_EQ(c.representative.size(), 4u);
}

TEST(Symmetry, RootsOfRootedCollectivesStandApart) {
  RankClasses c = classes_of(
      "mesh w[d=4]\nfunc @f {\n input %x on w : f32[4]\n"
      " %y = broadcast(%x) {root = 1} on w over [d] : f32[4]\n return\n}\n");
  EXPECT_EQ(c.size, (std::vector<uint32_t>{1, 1, 1, 1}));
  RankClasses all = classes_of(
      "mesh w[d=4]\nfunc @f {\n input %x on w : f32[4]\n"
      " %y = all_reduce(%x) on w over [d] : f32[4]\n return\n}\n");
  EXPECT_EQ(all.size, (std::vector<uint32_t>{4}));
}

}  // namespace
}  // namespace dstc::ir
