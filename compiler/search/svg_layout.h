// Text layout for the SVG plots dstc writes, without a font engine: widths
// estimated from the character count (sans-serif averages about 0.55 em per
// character, bold 0.62), lines wrapped to a width, and labels put where they
// cover no marker and no other label.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dstc::svg {

double text_width(std::string_view text, double font_size, bool bold = false);

// Words of `text` on lines no wider than `width` (a word longer than the
// line gets a line of its own).
std::vector<std::string> wrap(std::string_view text, double width, double font_size, bool bold = false);

struct Box {
  double left = 0, top = 0, right = 0, bottom = 0;
  bool overlaps(const Box& o) const { return left < o.right && o.left < right && top < o.bottom && o.top < bottom; }
  bool inside(const Box& o) const { return left >= o.left && right <= o.right && top >= o.top && bottom <= o.bottom; }
};

struct Point {
  double x = 0, y = 0;
};

// Where a label's text starts (text-anchor start, y the baseline) and the box it covers.
struct PlacedLabel {
  double x = 0, y = 0;
  Box box;
};

// Places a label of the given width and font size next to `at` (right,
// left, above, below, the diagonals, further out, then anywhere in
// `area`): the spot inside `area` that covers the fewest of `markers` (each
// `marker_radius` around its point) and of the boxes in `taken`, the
// nearest of those; it joins `taken`.
PlacedLabel place_label(Point at, double width, double font_size, const Box& area, const std::vector<Point>& markers,
                        double marker_radius, std::vector<Box>& taken);

}  // namespace dstc::svg
