#include "compiler/search/svg_layout.h"

#include <gtest/gtest.h>

namespace dstc::svg {
namespace {

TEST(SvgLayout, WrapsWordsToTheWidth) {
  // 12 px text: 6.6 px a character, so 10 characters fit in 66 px.
  EXPECT_EQ(wrap("one two three four", 66, 12), (std::vector<std::string>{"one two", "three four"}));
  EXPECT_EQ(wrap("unbreakableword ok", 30, 12), (std::vector<std::string>{"unbreakableword", "ok"}));
  EXPECT_EQ(wrap("", 100, 12), std::vector<std::string>{});
  EXPECT_DOUBLE_EQ(text_width("ab", 10), 11);
  EXPECT_DOUBLE_EQ(text_width("é", 10), 5.5) << "characters, not bytes";
}

TEST(SvgLayout, ALabelGoesRightOfItsPointWhenThatIsFree) {
  std::vector<Box> taken;
  PlacedLabel p = place_label({100, 100}, 50, 12, {0, 0, 400, 400}, {{100, 100}}, 4, taken);
  EXPECT_GT(p.x, 100);
  EXPECT_FALSE(p.box.overlaps({96, 96, 104, 104}));
  EXPECT_EQ(taken.size(), 1u);
}

TEST(SvgLayout, ALabelAvoidsMarkersOtherLabelsAndTheEdge) {
  // The point is at the right edge, with markers on its left and a label above.
  std::vector<Point> markers{{200, 100}};
  for (double x = 120; x < 200; x += 4) markers.push_back({x, 100});
  std::vector<Box> taken{{120, 70, 220, 95}};
  PlacedLabel p = place_label({200, 100}, 60, 12, {0, 0, 204, 400}, markers, 4, taken);
  EXPECT_TRUE(p.box.inside({0, 0, 204, 400}));
  for (const Point& m : markers) EXPECT_FALSE(p.box.overlaps({m.x - 4, m.y - 4, m.x + 4, m.y + 4}));
  EXPECT_FALSE(p.box.overlaps(taken.front()));
}

}  // namespace
}  // namespace dstc::svg
