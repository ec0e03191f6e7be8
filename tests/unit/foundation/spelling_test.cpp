#include "ir/source/spelling.h"

#include <gtest/gtest.h>

namespace dstc {
namespace {

TEST(Spelling, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("check", "check"), 0u);
  EXPECT_EQ(edit_distance("chek", "check"), 1u);
  EXPECT_EQ(edit_distance("checks", "check"), 1u);
  EXPECT_EQ(edit_distance("chock", "check"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Spelling, EditDistanceCountsASwapOfNeighboursAsOneEdit) {
  EXPECT_EQ(edit_distance("1fb1", "1f1b"), 1u);
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);
  EXPECT_EQ(edit_distance("abc", "ca"), 3u);
}

TEST(Spelling, ClosestSpellingPrefersCaseThenTheNearestCloseEnough) {
  std::vector<std::string> kinds{"gpipe", "1f1b", "interleaved", "zb_h1"};
  EXPECT_EQ(closest_spelling("1fb1", kinds), "1f1b");
  EXPECT_EQ(closest_spelling("GPipe", kinds), "gpipe");
  EXPECT_EQ(closest_spelling("interleave", kinds), "interleaved");
  EXPECT_EQ(closest_spelling("zero_bubble", kinds), std::nullopt);  // too far
  EXPECT_EQ(closest_spelling("gpipe", kinds), std::nullopt);        // not a misspelling
  EXPECT_EQ(closest_spelling("x", {"y"}), "y");                     // one edit always allowed
  EXPECT_EQ(closest_spelling("blocks", {"block", "blocked"}), "block");
}

TEST(Spelling, ClosestSpellingFallsBackToTheOneAbbreviation) {
  std::vector<std::string> nodes{"attn", "ln1", "ln2", "mlp", "res1"};
  EXPECT_EQ(closest_spelling("attention", nodes), "attn");
  EXPECT_EQ(closest_spelling("multilayer_perceptron", nodes), "mlp");
  EXPECT_EQ(closest_spelling("at", {"attention"}), std::nullopt);                // too short to abbreviate
  EXPECT_EQ(closest_spelling("lnorm", {"ln1_norm", "ln2_norm"}), std::nullopt);  // two: no guess
}

}  // namespace
}  // namespace dstc
