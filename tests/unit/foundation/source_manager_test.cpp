#include "ir/source/source_manager.h"

#include <gtest/gtest.h>

namespace dstc {
namespace {

TEST(SourceManager, MapsOffsetsToLinesAndColumns) {
  SourceManager sm;
  FileId f = sm.add("a.dstrat", "ab\ncd\r\n\nxyz");
  EXPECT_EQ(sm.line_col(f, 0).line, 1u);
  EXPECT_EQ(sm.line_col(f, 1).column, 2u);
  EXPECT_EQ(sm.line_col(f, 3).line, 2u);
  EXPECT_EQ(sm.line_col(f, 3).column, 1u);
  EXPECT_EQ(sm.line_col(f, 7).line, 3u);
  EXPECT_EQ(sm.line_col(f, 9).line, 4u);
  EXPECT_EQ(sm.line_col(f, 10).column, 3u);
  EXPECT_EQ(sm.line_text(f, 2), "cd");  // CR dropped
  EXPECT_EQ(sm.line_text(f, 3), "");
  EXPECT_EQ(sm.line_text(f, 4), "xyz");
  EXPECT_EQ(sm.line_text(f, 9), "");
}

TEST(SourceManager, OffsetsPastTheEndClampToTheLastColumn) {
  SourceManager sm;
  FileId f = sm.add("a", "ab");
  EXPECT_EQ(sm.line_col(f, 100).column, 3u);
}

TEST(SourceManager, RangeAtClampsToTheFile) {
  SourceManager sm;
  FileId f = sm.add("a", "one\ntwo");
  SourceRange r = sm.range_at(f, 2, 2, 10);
  EXPECT_EQ(r.begin, 5u);
  EXPECT_EQ(r.end, 7u);
  EXPECT_EQ(sm.range_at(f, 99, 1).begin, 4u);
}

TEST(SourceManager, LoadReportsMissingFiles) {
  SourceManager sm;
  std::string error;
  EXPECT_FALSE(sm.load("/nonexistent/dir/file.dstrat", error).has_value());
  EXPECT_FALSE(error.empty());
}

TEST(SourceManager, FindsLoadedPaths) {
  SourceManager sm;
  FileId a = sm.add("a", "");
  FileId b = sm.add("b", "");
  EXPECT_EQ(sm.find("b"), b);
  EXPECT_EQ(sm.find("a"), a);
  EXPECT_FALSE(sm.find("c").has_value());
}

}  // namespace
}  // namespace dstc
