// The editor grammars highlight exactly the grammar's keywords, so they
// cannot drift from Dstrat.g4.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/frontend/parser.h"

namespace dstc::frontend {
namespace {

std::string read(const std::string& rel) {
  std::ifstream in(std::string(DSTC_SOURCE_DIR) + "/" + rel);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> alternation_words(const std::string& pattern) {
  std::set<std::string> words;
  std::smatch m;
  if (!std::regex_search(pattern, m, std::regex(R"(\\b\(([^)]*)\)\\b)"))) return words;
  std::stringstream alts(m[1].str());
  for (std::string w; std::getline(alts, w, '|');) words.insert(w);
  return words;
}

TEST(EditorKeywords, VsCodeGrammarMatchesTheGrammarTokens) {
  std::vector<std::string> keywords = grammar_keywords();
  ASSERT_GT(keywords.size(), 30u);
  nlohmann::json grammar = nlohmann::json::parse(read("editors/vscode/syntaxes/dstrat.tmLanguage.json"));
  std::set<std::string> highlighted;
  for (const auto& p : grammar["repository"]["keywords"]["patterns"]) {
    for (const std::string& w : alternation_words(p["match"].get<std::string>())) highlighted.insert(w);
  }
  EXPECT_EQ(highlighted, std::set<std::string>(keywords.begin(), keywords.end()));
  nlohmann::json package = nlohmann::json::parse(read("editors/vscode/package.json"));
  EXPECT_EQ(package["contributes"]["grammars"][0]["scopeName"], grammar["scopeName"]);
}

TEST(EditorKeywords, VimSyntaxMatchesTheGrammarTokens) {
  std::string vim = read("editors/vim/syntax/dstrat.vim");
  std::set<std::string> highlighted;
  std::regex line(R"(syn keyword dstrat(Decl|Keyword|Operator|Constant) ([^\n]*))");
  for (std::sregex_iterator it(vim.begin(), vim.end(), line), end; it != end; ++it) {
    std::stringstream words((*it)[2].str());
    for (std::string w; words >> w;) highlighted.insert(w);
  }
  if (vim.find("\\<1f1b\\>") != std::string::npos) highlighted.insert("1f1b");
  std::vector<std::string> keywords = grammar_keywords();
  EXPECT_EQ(highlighted, std::set<std::string>(keywords.begin(), keywords.end()));
}

}  // namespace
}  // namespace dstc::frontend
