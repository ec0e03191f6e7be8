#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/search/plot.h"
#include "tests/unit/search/sample_result.h"

namespace dstc::search {
namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A minimal XML well-formedness check: tags nest and close in order, the
// document is one root element, attribute values are quoted, and text holds
// no raw '<' or unescaped '&'. Returns "" when well formed, else why not.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  size_t roots = 0;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] != '<') {
      if (xml[i] == '&') {
        size_t semi = xml.find(';', i);
        std::string entity = semi == std::string::npos ? "" : xml.substr(i, semi - i + 1);
        if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;") {
          return "bad entity at " + std::to_string(i);
        }
      }
      if (open.empty() && xml[i] != '\n') return "text outside the root at " + std::to_string(i);
      ++i;
      continue;
    }
    size_t end = i + 1;
    char quote = 0;
    for (; end < xml.size(); ++end) {
      if (quote) {
        if (xml[end] == quote)
          quote = 0;
        else if (xml[end] == '<')
          return "'<' in an attribute at " + std::to_string(end);
      } else if (xml[end] == '"' || xml[end] == '\'') {
        quote = xml[end];
      } else if (xml[end] == '>') {
        break;
      }
    }
    if (end >= xml.size()) return "unterminated tag at " + std::to_string(i);
    std::string tag = xml.substr(i + 1, end - i - 1);
    bool closing = !tag.empty() && tag[0] == '/';
    bool self_closing = !tag.empty() && tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0, tag.find_first_of(" \t\n/", closing ? 1 : 0) - (closing ? 1 : 0));
    if (name.empty()) return "empty tag name at " + std::to_string(i);
    if (closing) {
      if (open.empty() || open.back() != name) return "</" + name + "> does not close the open element";
      open.pop_back();
    } else if (!self_closing) {
      if (open.empty() && ++roots > 1) return "a second root element <" + name + ">";
      open.push_back(name);
    } else if (open.empty()) {
      return "a self-closed root";
    }
    i = end + 1;
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  return roots == 1 ? "" : "no root element";
}

// The plot of `r` as text.
std::string svg_of(const SearchResult& r) {
  std::ostringstream out;
  write_search_svg(out, r);
  return out.str();
}

TEST(SearchPlot, WellFormedSvgWithLabelledAxesAndOneMarkerPerSimulatedConfiguration) {
  std::string svg = svg_of(testing::sample_result());
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find(">throughput (samples/s)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">peak memory per device (GiB)</text>"), std::string::npos);
  EXPECT_EQ(count_of(svg, "class=\"config "), 4u)
      << "three that fit and one out of memory; invalid ones have no figures";
  EXPECT_EQ(count_of(svg, "class=\"config oom\""), 1u);
  EXPECT_EQ(count_of(svg, "class=\"config fits\""), 3u);
  EXPECT_EQ(count_of(svg, "<polyline class=\"pareto\""), 1u);
  EXPECT_NE(svg.find("device memory 32 GiB"), std::string::npos);
  EXPECT_NE(svg.find("best: dp=2 tp=2"), std::string::npos);
  EXPECT_NE(svg.find("Test &lt;cluster&gt; &amp; co"), std::string::npos) << "names are escaped";
}

// Out of memory by the memory bound: not simulated, so no marker, but the
// caption counts it and says how to draw it.
TEST(SearchPlot, ConfigurationsOutOfMemoryByTheBoundAreCountedNotDrawn) {
  SearchResult r = testing::sample_result();
  for (ConfigResult& c : r.configs) {
    if (c.status == ConfigStatus::out_of_memory) c.memory_bound_only = true;
  }
  std::string svg = svg_of(r);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count_of(svg, "class=\"config oom\""), 0u);
  EXPECT_EQ(count_of(svg, "class=\"config fits\""), 3u);
  EXPECT_NE(svg.find("1 out of memory by their memory bound (--simulate-all draws them)"), std::string::npos);
}

TEST(SearchPlot, ALongTitleWrapsInsteadOfRunningOffTheImage) {
  SearchResult r = testing::sample_result();
  r.cluster = "2 x 8x A100 SXM4 40GB, NVSwitch, 200 Gb/s InfiniBand HDR, four rails (Proteus HC3)";
  std::string svg = svg_of(r);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count_of(svg, "class=\"title\""), 2u) << svg;
}

TEST(SearchPlot, ACapacityFarAboveTheConfigurationsIsAnArrowNotTheRange) {
  SearchResult r = testing::sample_result();
  for (ConfigResult& c : r.configs) c.memory_capacity_bytes *= 100;
  std::string svg = svg_of(r);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count_of(svg, "<line class=\"capacity\""), 0u);
  EXPECT_EQ(count_of(svg, "<path class=\"capacity\""), 1u);
  EXPECT_NE(svg.find("(above)"), std::string::npos);
  // The y axis ends near the largest configuration, not at the capacity.
  EXPECT_EQ(svg.find(">3200</text>"), std::string::npos) << svg;
}

TEST(SearchPlot, TheCheckerRejectsBrokenXml) {
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<svg>a & b</svg>"), "");
  EXPECT_NE(xml_problem("<svg></svg><svg></svg>"), "");
  EXPECT_EQ(xml_problem("<svg><g a=\"1\"/><text>x &amp; y</text></svg>\n"), "");
}

TEST(SearchPlot, ParetoFrontGoesThroughTheFrontConfigurationsOnly) {
  SearchResult r = testing::sample_result();
  std::string svg = svg_of(r);
  size_t at = svg.find("<polyline class=\"pareto\" points=\"");
  ASSERT_NE(at, std::string::npos);
  std::string points = svg.substr(at + 33, svg.find('"', at + 33) - at - 33);
  // dp=1 tp=4 (90/s, 8 GiB) and dp=2 tp=2 (150/s, 12 GiB) are on the front,
  // dp=4 tp=1 (100/s, 20 GiB) is not: a staircase of three corners.
  EXPECT_EQ(count_of(points, ","), 3u) << points;
}

}  // namespace
}  // namespace dstc::search
