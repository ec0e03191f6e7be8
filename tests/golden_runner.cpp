// Golden-file tests. A case is either
//   - a file under tests/golden whose first lines hold `RUN: dstc ARGS`
//     (`%s` stands for the file's own path), expected output in FILE.expected;
//   - or NAME.cmd holding ARGS, expected output in NAME.expected.
// dstc runs in process with the source root as working directory, so paths
// in its output are stable. DSTC_UPDATE_GOLDEN=1 rewrites the expected files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/driver/cli.h"

namespace fs = std::filesystem;

namespace {

const fs::path kSourceDir = DSTC_SOURCE_DIR;

struct GoldenCase {
  std::string name;      // for the test name
  std::string input;     // relative to the source root
  std::string expected;  // relative to the source root
  std::vector<std::string> args;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Splits a command line on spaces; single and double quotes group words.
std::vector<std::string> split_args(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

std::optional<std::string> run_line(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string line;
  for (int i = 0; i < 5 && std::getline(in, line); ++i) {
    auto pos = line.find("RUN: dstc ");
    if (pos != std::string::npos) return line.substr(pos + 10);
  }
  return std::nullopt;
}

std::vector<GoldenCase> collect_cases() {
  std::vector<GoldenCase> cases;
  fs::path root = kSourceDir / "tests" / "golden";
  if (!fs::exists(root)) return cases;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const fs::path& p = entry.path();
    if (p.extension() == ".expected") continue;
    std::string rel = fs::relative(p, kSourceDir).generic_string();
    std::optional<std::string> args;
    std::string expected;
    if (p.extension() == ".cmd") {
      std::string text = read_file(p);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      args = text;
      expected = fs::relative(fs::path(p).replace_extension(".expected"), kSourceDir).generic_string();
    } else {
      args = run_line(p);
      expected = rel + ".expected";
    }
    if (!args) continue;
    GoldenCase c;
    c.input = rel;
    c.expected = expected;
    for (std::string& a : split_args(*args)) {
      for (size_t at; (at = a.find("%s")) != std::string::npos;) a.replace(at, 2, rel);
      c.args.push_back(a);
    }
    c.name = fs::relative(p, root).generic_string();
    std::replace_if(
        c.name.begin(), c.name.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(), [](const GoldenCase& a, const GoldenCase& b) { return a.name < b.name; });
  return cases;
}

std::string render_result(int code, const std::string& out, const std::string& err) {
  std::string text = "=== exit " + std::to_string(code) + "\n=== stdout\n" + out;
  if (!out.empty() && out.back() != '\n') text += "\n";
  text += "=== stderr\n" + err;
  if (!err.empty() && err.back() != '\n') text += "\n";
  return text;
}

// Test listings name a case by its input file.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.input; }

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, MatchesExpected) {
  const GoldenCase& c = GetParam();
  fs::current_path(kSourceDir);
  std::ostringstream out, err;
  int code = dstc::run_cli(c.args, out, err);
  std::string actual = render_result(code, out.str(), err.str());
  fs::path expected_path = kSourceDir / c.expected;
  const char* update = std::getenv("DSTC_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(expected_path, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(fs::exists(expected_path)) << "no expected output " << c.expected
                                         << "; run with DSTC_UPDATE_GOLDEN=1 and review it";
  EXPECT_EQ(read_file(expected_path), actual) << "input: " << c.input;
}

INSTANTIATE_TEST_SUITE_P(Files, Golden, ::testing::ValuesIn(collect_cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& param_info) { return param_info.param.name; });

// Kinds no golden test's output shows yet, each with why. A kind leaves
// this list when a golden case triggers it (the test below says so).
const std::map<std::string, std::string>& kinds_not_yet_in_golden_output() {
  static const std::map<std::string, std::string> list = {
      {"ir-use-before-def", "IR text defines names before use; only a built module can (tests/unit/ir)"},
      {"sim-bad-device-map", "needs a module whose device map the IR text cannot write (tests/unit/htae)"},
      {"sim-stuck", "needs a module the verifier was not run on (tests/unit/htae)"},
      {"verify-partial-read", "the compiler emits no such program; planted faults (tests/unit/reference)"},
      {"verify-layout-mismatch", "the compiler emits no such program; planted faults (tests/unit/reference)"},
      {"verify-mismatch", "the compiler emits no such program; planted faults (tests/unit/reference)"},
      {"schedule-table-unreadable",
       "the front end finds a missing table first; a file that vanishes between (tests/unit/compiler)"},
  };
  return list;
}

// The one registry (ir/source/diagnostic_kinds.def) declares each stable
// name once, and every kind appears as `[kind]` in the output of some
// golden test, which is what dstc really printed, or is on the list above.
TEST(DiagnosticKinds, EveryKindIsDeclaredOnceAndShownByAGoldenTest) {
  const std::string registry = read_file(kSourceDir / "ir/source/diagnostic_kinds.def");
  std::regex decl(R"re(DSTC_DIAG_KIND\(\s*(\w+)\s*,\s*"([^"]+)")re");
  std::map<std::string, std::string> declared;  // name -> identifier
  for (std::sregex_iterator it(registry.begin(), registry.end(), decl), end; it != end; ++it) {
    const std::string ident = (*it)[1], name = (*it)[2];
    EXPECT_TRUE(declared.emplace(name, ident).second) << "diagnostic kind '" << name << "' is declared twice";
    EXPECT_TRUE(std::regex_match(ident, std::regex("k[A-Z][A-Za-z0-9]*"))) << ident << ": identifiers are kCamelCase";
    EXPECT_TRUE(std::regex_match(name, std::regex("[a-z0-9]+(-[a-z0-9]+)*"))) << name << ": names are kebab-case";
  }
  EXPECT_GT(declared.size(), 50u);
  std::string shown;
  for (const auto& entry : fs::recursive_directory_iterator(kSourceDir / "tests/golden")) {
    if (entry.is_regular_file() && entry.path().extension() == ".expected") shown += read_file(entry.path());
  }
  const auto& untested = kinds_not_yet_in_golden_output();
  for (const auto& [name, ident] : declared) {
    const bool in_output = shown.find("[" + name + "]") != std::string::npos;
    if (untested.count(name))
      EXPECT_FALSE(in_output) << "'" << name << "' is now shown by a golden test: take it off the list";
    else
      EXPECT_TRUE(in_output) << "diagnostic kind '" << name << "' is shown by no golden test's output";
  }
  for (const auto& [name, why] : untested) EXPECT_TRUE(declared.count(name)) << name << " is not a declared kind";
}

}  // namespace
