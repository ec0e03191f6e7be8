#include "compiler/search/plot.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "compiler/search/svg_layout.h"
#include "compiler/search/table.h"

namespace dstc::search {
namespace {

constexpr double kWidth = 820, kPlotHeight = 400, kMargin = 16;
constexpr double kLeft = 90, kRight = 150, kBottom = 70;  // the right margin holds the capacity label
constexpr double kTitleSize = 15, kTextSize = 12;

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

// A tick step of 1, 2 or 5 times a power of ten giving about `ticks` ticks.
double nice_step(double range, int ticks) {
  double raw = range / ticks;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

std::string tick_text(double v) { return fmt::format("{:g}", v); }

struct Axis {
  double max = 1;  // the axis runs from 0 to max
  double step = 1;
  double pixels = 1;
  bool flipped = false;  // y grows downward in SVG
  double origin = 0;
  double at(double v) const { return flipped ? origin - v / max * pixels : origin + v / max * pixels; }
};

Axis make_axis(double largest, double pixels, double origin, bool flipped) {
  Axis a;
  if (!(largest > 0)) largest = 1;
  a.step = nice_step(largest, 6);
  a.max = std::ceil(largest * 1.05 / a.step) * a.step;
  a.pixels = pixels;
  a.origin = origin;
  a.flipped = flipped;
  return a;
}

}  // namespace

void write_search_svg(std::ostream& out, const SearchResult& result) {
  std::vector<const ConfigResult*> shown;
  double max_rate = 0;
  int64_t max_bytes = 0, capacity_bytes = 0;
  for (const ConfigResult& c : result.configs) {
    if (!c.simulated()) continue;
    shown.push_back(&c);
    max_rate = std::max(max_rate, c.samples_per_s);
    max_bytes = std::max(max_bytes, c.peak_memory_bytes);
    capacity_bytes = std::max(capacity_bytes, c.memory_capacity_bytes);
  }
  // GiB, or MiB for devices (test clusters) smaller than 1 GiB.
  bool gib = std::max(max_bytes, capacity_bytes) >= (int64_t{1} << 30);
  const double unit = gib ? 1 << 30 : 1 << 20;
  const char* unit_name = gib ? "GiB" : "MiB";
  auto mem = [&](int64_t bytes) { return static_cast<double>(bytes) / unit; };
  double max_mem = mem(max_bytes), capacity_mem = mem(capacity_bytes);

  // Title and subtitle wrapped to the width; the plot starts below them.
  std::vector<std::string> title =
      svg::wrap(fmt::format("search {} on {}: peak memory against throughput", result.search, result.cluster),
                kWidth - 2 * kMargin, kTitleSize, true);
  std::vector<std::string> subtitle = svg::wrap(
      fmt::format("{} configurations simulated: {} fit (dots, orange on the Pareto front), {} out of memory (red "
                  "crosses); not shown: {} invalid{}",
                  shown.size(), result.count(ConfigStatus::ranked),
                  result.count(ConfigStatus::out_of_memory) - result.count_memory_bound_only(),
                  result.count(ConfigStatus::invalid) + result.count(ConfigStatus::internal_error),
                  result.count_memory_bound_only() == 0
                      ? std::string()
                      : fmt::format(", {} out of memory by their memory bound (--simulate-all draws them)",
                                    result.count_memory_bound_only())),
      kWidth - 2 * kMargin, kTextSize);
  const double top =
      kMargin + 20.0 * static_cast<double>(title.size()) + 16.0 * static_cast<double>(subtitle.size()) + 24;
  const double height = top + kPlotHeight + kBottom;
  double plot_w = kWidth - kLeft - kRight, plot_h = kPlotHeight;
  Axis x = make_axis(max_rate, plot_w, kLeft, false);
  // A capacity far above every configuration would squeeze them into the
  // bottom of the plot: the range then follows the configurations, and the
  // capacity is marked by an arrow at the top.
  const bool capacity_above = capacity_mem > 0 && max_mem > 0 && capacity_mem > 1.5 * max_mem;
  Axis y = make_axis(capacity_above ? max_mem : std::max(max_mem, capacity_mem), plot_h, top + plot_h, true);

  out << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"{2}\">\n",
      kWidth, height, kTextSize);
  out << fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, height);
  double line_y = kMargin + kTitleSize;
  for (const std::string& line : title) {
    out << fmt::format("<text class=\"title\" x=\"{}\" y=\"{}\" font-size=\"{}\" font-weight=\"bold\">{}</text>\n",
                       kMargin, line_y, kTitleSize, xml_escape(line));
    line_y += 20;
  }
  line_y += 2;
  for (const std::string& line : subtitle) {
    out << fmt::format("<text class=\"subtitle\" x=\"{}\" y=\"{}\" fill=\"#444\">{}</text>\n", kMargin, line_y,
                       xml_escape(line));
    line_y += 16;
  }

  // Grid, ticks and axis labels.
  out << "<g class=\"axes\" stroke=\"#ddd\">\n";
  for (double v = 0; v <= x.max + x.step / 2; v += x.step) {
    out << fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>\n", x.at(v), y.at(0),
                       y.at(y.max));
  }
  for (double v = 0; v <= y.max + y.step / 2; v += y.step) {
    out << fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\"/>\n", x.at(0), y.at(v),
                       x.at(x.max));
  }
  out << "</g>\n<g class=\"ticks\" fill=\"#222\">\n";
  for (double v = 0; v <= x.max + x.step / 2; v += x.step) {
    out << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x.at(v), y.at(0) + 18,
                       tick_text(v));
  }
  for (double v = 0; v <= y.max + y.step / 2; v += y.step) {
    out << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", x.at(0) - 8, y.at(v) + 4,
                       tick_text(v));
  }
  out << "</g>\n";
  out << fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#222\"/>\n"
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{3:.1f}\" stroke=\"#222\"/>\n",
      x.at(0), y.at(0), x.at(x.max), y.at(y.max));
  out << fmt::format(
      "<text class=\"x-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"13\">"
      "throughput (samples/s)</text>\n",
      kLeft + plot_w / 2, height - 22);
  out << fmt::format(
      "<text class=\"y-label\" x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" font-size=\"13\" "
      "transform=\"rotate(-90 {0:.1f} {1:.1f})\">peak memory per device ({2})</text>\n",
      28.0, top + plot_h / 2, unit_name);

  // The memory every device has: above it, configurations do not fit.
  if (capacity_above) {
    double ax = x.at(x.max) + 12, ay = y.at(y.max);
    out << fmt::format(
        "<path class=\"capacity\" d=\"M{0:.1f},{1:.1f}V{2:.1f}m-4,6l4,-6l4,6\" stroke=\"#c00\" fill=\"none\"/>\n"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" fill=\"#c00\">device memory:</text>\n"
        "<text x=\"{3:.1f}\" y=\"{7:.1f}\" fill=\"#c00\">{5:.0f} {6} (above)</text>\n",
        ax, ay + 30, ay, ax + 8, ay + 12, capacity_mem, unit_name, ay + 27);
  } else if (capacity_mem > 0) {
    out << fmt::format(
        "<line class=\"capacity\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#c00\" "
        "stroke-dasharray=\"6 4\"/>\n<text x=\"{3:.1f}\" y=\"{4:.1f}\" fill=\"#c00\">device memory {5:.0f} "
        "{6}</text>\n",
        x.at(0), y.at(capacity_mem), x.at(x.max), x.at(x.max) + 6, y.at(capacity_mem) + 4, capacity_mem, unit_name);
  }

  // The Pareto front, slowest to fastest, as a staircase: for each memory
  // budget, the best throughput reachable.
  std::vector<const ConfigResult*> front;
  for (const ConfigResult* c : shown) {
    if (c->pareto) front.push_back(c);
  }
  std::sort(front.begin(), front.end(),
            [](const ConfigResult* a, const ConfigResult* b) { return a->samples_per_s < b->samples_per_s; });
  std::vector<svg::Point> staircase;
  for (size_t k = 0; k < front.size(); ++k) {
    double px = x.at(front[k]->samples_per_s), py = y.at(mem(front[k]->peak_memory_bytes));
    if (k > 0) staircase.push_back({px, y.at(mem(front[k - 1]->peak_memory_bytes))});
    staircase.push_back({px, py});
  }

  // Labels go where they cover no marker, no line and no other label: the
  // staircase and the capacity line are sampled every few pixels as markers.
  std::vector<svg::Point> markers;
  for (const ConfigResult* c : shown) markers.push_back({x.at(c->samples_per_s), y.at(mem(c->peak_memory_bytes))});
  for (size_t k = 1; k < staircase.size(); ++k) {
    svg::Point from = staircase[k - 1], to = staircase[k];
    double length = std::hypot(to.x - from.x, to.y - from.y);
    for (double t = 0; t < length; t += 4)
      markers.push_back({from.x + (to.x - from.x) * t / length, from.y + (to.y - from.y) * t / length});
  }
  if (capacity_mem > 0 && !capacity_above)
    for (double px = x.at(0); px <= x.at(x.max); px += 4) markers.push_back({px, y.at(capacity_mem)});
  const svg::Box plot_area{x.at(0), y.at(y.max), x.at(x.max), y.at(0)};
  std::vector<svg::Box> labels;
  // The fastest configuration's name first: it matters most.
  const ConfigResult* best = nullptr;
  for (const ConfigResult* c : shown)
    if (c->rank == 1) best = c;
  svg::PlacedLabel best_label;
  if (best)
    best_label = svg::place_label({x.at(best->samples_per_s), y.at(mem(best->peak_memory_bytes))},
                                  svg::text_width("best: " + best->label, kTextSize, true), kTextSize, plot_area,
                                  markers, 8, labels);

  if (!staircase.empty()) {
    std::string points;
    for (const svg::Point& p : staircase) points += fmt::format("{:.1f},{:.1f} ", p.x, p.y);
    points.pop_back();
    out << fmt::format(
        "<polyline class=\"pareto\" points=\"{}\" fill=\"none\" stroke=\"#e69f00\" "
        "stroke-width=\"2\"/>\n",
        points);
    // Labelled at the middle of the staircase.
    const ConfigResult* middle = front[front.size() / 2];
    svg::PlacedLabel at =
        svg::place_label({x.at(middle->samples_per_s), y.at(mem(middle->peak_memory_bytes))},
                         svg::text_width("Pareto front", kTextSize), kTextSize, plot_area, markers, 4, labels);
    out << fmt::format("<text class=\"pareto-label\" x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#b07000\">Pareto front</text>\n",
                       at.x, at.y);
  }

  // One marker per configuration, its figures in a tooltip.
  out << "<g class=\"configs\">\n";
  for (const ConfigResult* c : shown) {
    double px = x.at(c->samples_per_s), py = y.at(mem(c->peak_memory_bytes));
    std::string tip =
        xml_escape(fmt::format("{}: {} samples/s, {} per step, {} peak{}", c->label, format_rate(c->samples_per_s),
                               format_duration(c->step_time_s), format_memory(c->peak_memory_bytes),
                               c->status == ConfigStatus::out_of_memory ? " (out of memory)" : ""));
    if (c->status == ConfigStatus::out_of_memory) {
      out << fmt::format(
          "<path class=\"config oom\" d=\"M{0:.1f},{1:.1f}l8,8m0,-8l-8,8\" stroke=\"#c00\" stroke-width=\"2\">"
          "<title>{2}</title></path>\n",
          px - 4, py - 4, tip);
    } else {
      out << fmt::format(
          "<circle class=\"config fits\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" "
          "fill-opacity=\"0.8\"><title>{}</title></circle>\n",
          px, py, c->pareto ? "#e69f00" : "#0072b2", tip);
    }
  }
  out << "</g>\n";

  if (best) {
    // A label moved away from its ring gets a leader line to it.
    double px = x.at(best->samples_per_s), py = y.at(mem(best->peak_memory_bytes));
    double nx = std::clamp(px, best_label.box.left, best_label.box.right);
    double ny = std::clamp(py, best_label.box.top, best_label.box.bottom);
    double distance = std::hypot(nx - px, ny - py);
    if (distance > 24)
      out << fmt::format(
          "<line class=\"leader\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#222\"/>\n",
          px + (nx - px) * 8 / distance, py + (ny - py) * 8 / distance, nx, ny);
    out << fmt::format(
        "<circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"8\" fill=\"none\" stroke=\"#222\"/>\n"
        "<text class=\"best\" x=\"{2:.1f}\" y=\"{3:.1f}\" font-weight=\"bold\">best: {4}</text>\n",
        x.at(best->samples_per_s), y.at(mem(best->peak_memory_bytes)), best_label.x, best_label.y,
        xml_escape(best->label));
  }
  out << "</svg>\n";
}

}  // namespace dstc::search
