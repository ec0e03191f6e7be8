#include "compiler/search/svg_layout.h"

#include <cmath>
#include <limits>

namespace dstc::svg {

double text_width(std::string_view text, double font_size, bool bold) {
  // Count UTF-8 characters, not bytes.
  size_t chars = 0;
  for (char ch : text) chars += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return static_cast<double>(chars) * font_size * (bold ? 0.62 : 0.55);
}

std::vector<std::string> wrap(std::string_view text, double width, double font_size, bool bold) {
  std::vector<std::string> lines;
  std::string line;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(' ', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(begin, end - begin);
    std::string longer = line.empty() ? std::string(word) : line + " " + std::string(word);
    if (!line.empty() && text_width(longer, font_size, bold) > width) {
      lines.push_back(line);
      line = std::string(word);
    } else {
      line = std::move(longer);
    }
    begin = end + 1;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

PlacedLabel place_label(Point at, double width, double font_size, const Box& area, const std::vector<Point>& markers,
                        double marker_radius, std::vector<Box>& taken) {
  const double gap = marker_radius + 6, ascent = 0.8 * font_size, descent = 0.25 * font_size;
  // Text start and baseline of each candidate spot: right, left, above,
  // below, the diagonals, then the same one and two lines further out.
  std::vector<Point> spots;
  for (double out = 0; out <= 2 * font_size * 1.2; out += font_size * 1.2) {
    double near = gap + out;
    spots.insert(spots.end(), {
                                  {at.x + near, at.y + ascent / 2 - descent / 2},
                                  {at.x - near - width, at.y + ascent / 2 - descent / 2},
                                  {at.x - width / 2, at.y - near - descent},
                                  {at.x - width / 2, at.y + near + ascent},
                                  {at.x + gap, at.y - near - descent},
                                  {at.x - gap - width, at.y - near - descent},
                                  {at.x + gap, at.y + near + ascent},
                                  {at.x - gap - width, at.y + near + ascent},
                              });
  }
  // Failing those, anywhere in the area (a leader line will point back).
  for (double y = area.top + ascent; y <= area.bottom - descent; y += 10)
    for (double x = area.left; x + width <= area.right; x += 10) spots.push_back({x, y});
  PlacedLabel best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const Point& s : spots) {
    Box box{s.x, s.y - ascent, s.x + width, s.y + descent};
    // Outside the area is worst, then covering markers, then distance.
    double cost = (box.inside(area) ? 0 : 1000) + std::hypot(s.x - at.x, s.y - at.y) / 1e5;
    for (const Point& m : markers)
      cost += box.overlaps({m.x - marker_radius, m.y - marker_radius, m.x + marker_radius, m.y + marker_radius});
    for (const Box& t : taken) cost += 10 * box.overlaps(t);
    if (cost < best_cost) {
      best_cost = cost;
      best = {s.x, s.y, box};
    }
  }
  taken.push_back(best.box);
  return best;
}

}  // namespace dstc::svg
