#include "ir/source/diagnostics.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dstc {
namespace {

constexpr DiagKind kTestKind{"test-kind"};

std::string render_all(const DiagnosticEngine& de, bool color = false) {
  std::ostringstream s;
  de.render(s, color);
  return s.str();
}

TEST(Diagnostics, RendersLocationSourceLineAndCaret) {
  SourceManager sm;
  FileId f = sm.add("m.dstrat", "model M {\n  y = Linar(4)(x)\n}\n");
  DiagnosticEngine de(sm);
  de.error(kTestKind, {f, 16, 21}, "unknown layer 'Linar'").note(sm.range_at(f, 1, 7, 1), "model declared here");
  EXPECT_EQ(render_all(de),
            "m.dstrat:2:7: error: unknown layer 'Linar' [test-kind]\n"
            "    2 |   y = Linar(4)(x)\n"
            "      |       ^~~~~\n"
            "m.dstrat:1:7: note: model declared here\n"
            "    1 | model M {\n"
            "      |       ^\n");
  EXPECT_TRUE(de.has_errors());
  EXPECT_EQ(de.error_count(), 1u);
}

TEST(Diagnostics, DiagnosticsWithoutLocationNameDstc) {
  SourceManager sm;
  DiagnosticEngine de(sm);
  de.error(kTestKind, {}, "bad").note("a hint");
  EXPECT_EQ(render_all(de), "dstc: error: bad [test-kind]\ndstc: note: a hint\n");
}

TEST(Diagnostics, SortsBySourceOrder) {
  SourceManager sm;
  FileId f = sm.add("f", "aaa\nbbb\n");
  DiagnosticEngine de(sm);
  de.error(kTestKind, {f, 4, 5}, "second");
  de.error(kTestKind, {f, 0, 1}, "first");
  std::string text = render_all(de);
  EXPECT_LT(text.find("first"), text.find("second"));
}

TEST(Diagnostics, CaretFollowsTabsAndMultibyteCharacters) {
  SourceManager sm;
  FileId f = sm.add("f", "\t\xC3\xA9x = 1\n");  // tab, e-acute (2 bytes), x
  DiagnosticEngine de(sm);
  de.error(kTestKind, {f, 3, 4}, "here");
  EXPECT_NE(render_all(de).find("      | \t ^\n"), std::string::npos) << render_all(de);
}

TEST(Diagnostics, ReplacesInvalidUtf8AndControlBytes) {
  SourceManager sm;
  FileId f = sm.add("f", std::string("a\xFF\x01z", 4));
  DiagnosticEngine de(sm);
  de.error(kTestKind, {f, 3, 4}, "here");
  std::string text = render_all(de);
  EXPECT_NE(text.find("| a??z\n"), std::string::npos) << text;
  EXPECT_NE(text.find("|    ^\n"), std::string::npos) << text;
}

TEST(Diagnostics, WindowsVeryLongLinesAroundTheCaret) {
  SourceManager sm;
  std::string line(10000, 'a');
  line[9000] = 'X';
  FileId f = sm.add("f", line);
  DiagnosticEngine de(sm);
  de.error(kTestKind, {f, 9000, 9001}, "here");
  std::string text = render_all(de);
  EXPECT_LT(text.size(), 600u);
  size_t source_line = text.find('\n') + 1;
  size_t caret_line = text.find('\n', source_line) + 1;
  EXPECT_EQ(text.compare(source_line, 11, "    1 | ..."), 0) << text;
  EXPECT_EQ(text.find('X', source_line) - source_line, text.find('^', caret_line) - caret_line) << text;
}

TEST(Diagnostics, PointsPastTheEndOfALine) {
  SourceManager sm;
  FileId f = sm.add("f", "abc");
  DiagnosticEngine de(sm);
  de.error(kTestKind, {f, 3, 3}, "expected '}'");
  EXPECT_NE(render_all(de).find("      |    ^\n"), std::string::npos) << render_all(de);
}

TEST(Diagnostics, StopsKeepingErrorsPastTheLimit) {
  SourceManager sm;
  DiagnosticEngine de(sm, 3);
  for (int i = 0; i < 10; ++i) de.error(kTestKind, {}, "e").note("n");
  EXPECT_EQ(de.error_count(), 10u);
  EXPECT_EQ(de.diagnostics().size(), 3u);
  EXPECT_TRUE(de.at_error_limit());
  EXPECT_NE(render_all(de).find("7 more errors not shown (stopped after 3)"), std::string::npos);
}

TEST(Diagnostics, ColourOnlyWhenAsked) {
  SourceManager sm;
  DiagnosticEngine de(sm);
  de.warning(kTestKind, {}, "w");
  EXPECT_EQ(render_all(de, false).find('\x1b'), std::string::npos);
  EXPECT_NE(render_all(de, true).find("\x1b[1;35mwarning:"), std::string::npos);
  EXPECT_FALSE(de.has_errors());
}

}  // namespace
}  // namespace dstc
