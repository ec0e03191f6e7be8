// Every stdlib and example file (found, not listed) checks clean, and formats idempotently
// without changing its AST.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/frontend/formatter.h"
#include "compiler/frontend/parser.h"
#include "tests/unit/frontend/frontend_test_util.h"

namespace fs = std::filesystem;

namespace dstc::frontend {
namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> files;
  for (const char* dir : {"stdlib", "examples"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(DSTC_SOURCE_DIR) / dir)) {
      if (e.path().extension() == ".dstrat") files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Corpus, HasTheExamples) { EXPECT_GE(corpus().size(), 20u); }

TEST(Corpus, EveryFileChecksClean) {
  for (const std::string& file : corpus()) {
    testing::Checked c = testing::check_paths({file});
    EXPECT_FALSE(c.diags->has_errors()) << file << "\n" << c.rendered();
  }
}

TEST(Corpus, FormattingIsIdempotentAndKeepsTheAst) {
  for (const std::string& file : corpus()) {
    SourceManager sources;
    DiagnosticEngine diags(sources);
    std::string error;
    FileId id = *sources.load(file, error);
    std::optional<FileAst> original = parse_file(id, diags);
    ASSERT_TRUE(original) << file;
    std::string once = format_file(*original, sources);
    FileId id2 = sources.add(file + ".fmt", once);
    std::optional<FileAst> reparsed = parse_file(id2, diags);
    ASSERT_TRUE(reparsed) << file << "\n" << once;
    EXPECT_TRUE(same(*original, *reparsed)) << file;
    EXPECT_EQ(once, format_file(*reparsed, sources)) << file;
  }
}

}  // namespace
}  // namespace dstc::frontend
