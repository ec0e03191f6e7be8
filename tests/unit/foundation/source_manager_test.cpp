#include "ir/source/source_manager.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>

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

TEST(SourceManager, LoadReadsOnlyRegularFilesWithinTheLimit) {
  SourceManager sm;
  std::string error;
  EXPECT_FALSE(sm.load("/dev/zero", error).has_value());  // would never end
  EXPECT_EQ(error, "it is a device, not a regular file");
  EXPECT_FALSE(sm.load(DSTC_SOURCE_DIR "/examples", error).has_value());
  EXPECT_EQ(error, "it is a directory");
  std::string fifo = testing::TempDir() + "/source_manager_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(sm.load(fifo, error).has_value());  // no writer: would block
  EXPECT_EQ(error, "it is a pipe, not a regular file");
  std::remove(fifo.c_str());
  std::string readme = DSTC_SOURCE_DIR "/README.md";
  EXPECT_FALSE(sm.load(readme, error, 100).has_value());
  EXPECT_NE(error.find("more than the 100 dstc reads"), std::string::npos) << error;
  std::optional<FileId> whole = sm.load(readme, error);
  ASSERT_TRUE(whole.has_value());
  EXPECT_GT(sm.file(*whole).text.size(), 100u);
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
