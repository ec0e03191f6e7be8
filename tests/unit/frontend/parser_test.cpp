// Parsing and evaluation details: ranges, precedence, limits, values.
#include <gtest/gtest.h>

#include "compiler/frontend/formatter.h"
#include "compiler/frontend/parser.h"
#include "compiler/frontend/value.h"

namespace dstc::frontend {
namespace {

struct Parsed {
  SourceManager sources;
  DiagnosticEngine diags{sources};
  std::optional<FileAst> ast;
  explicit Parsed(const std::string& text) { ast = parse_file(sources.add("t.dstrat", text), diags); }
};

TEST(Parser, FormatsWithMinimalParentheses) {
  Parsed p("model M(a = (1 + 2) * 3 - (4 - 5), b = not (1 < 2) and true, c = -(-3)) {\n}\n");
  ASSERT_TRUE(p.ast);
  EXPECT_EQ(format_file(*p.ast, p.sources),
            "model M(a = (1 + 2) * 3 - (4 - 5), b = not 1 < 2 and true, c = --3) {\n}\n");
}

TEST(Parser, KeepsByteRangesPastMultibyteText) {
  Parsed p("// héllo wörld\nlayer A() {\n  input x[...]\n  output x\n}\n");
  ASSERT_TRUE(p.ast);
  const auto& layer = std::get<ComponentDecl>(p.ast->items[0]);
  EXPECT_EQ(p.sources.file(layer.name_range.file).text.substr(layer.name_range.begin, 1), "A");
}

// Found by the fuzzer: the runtime skips a byte-order mark, which shifted
// every range by one code point.
TEST(Parser, RangesAreRightAfterAByteOrderMark) {
  Parsed p("\xEF\xBB\xBF// c\nlayer A() {\n  input x[...]\n  output x\n}\n");
  ASSERT_TRUE(p.ast);
  ASSERT_EQ(p.ast->comments.size(), 1u);
  EXPECT_EQ(p.ast->comments[0].text, "// c");
  EXPECT_EQ(format_file(*p.ast, p.sources), "// c\nlayer A() {\n  input x[...]\n  output x\n}\n");
}

TEST(Values, OverflowAndExactDivisionAreDiagnosed) {
  Parsed p("model M(a = 4611686018427387904 * 2, b = 7 / 2, c = 7 % 2) {\n}\n");
  ASSERT_TRUE(p.ast);
  const auto& m = std::get<ComponentDecl>(p.ast->items[0]);
  Evaluator eval(p.diags);
  Scope scope;
  EXPECT_FALSE(eval.eval(*m.params[0].default_value, scope).ok());
  EXPECT_FALSE(eval.eval(*m.params[1].default_value, scope).ok());
  EXPECT_EQ(eval.eval(*m.params[2].default_value, scope).i, 1);
  ASSERT_EQ(p.diags.diagnostics().size(), 2u);
  EXPECT_EQ(p.diags.diagnostics()[0].kind.name, "integer-overflow");
  EXPECT_EQ(p.diags.diagnostics()[1].kind.name, "bad-division");
}

TEST(Parser, RejectsDeepNestingWithoutCrashing) {
  Parsed p("model M(a = " + std::string(200000, '(') + "1" + std::string(200000, ')') + ") {\n}\n");
  EXPECT_FALSE(p.ast);
  ASSERT_FALSE(p.diags.diagnostics().empty());
  EXPECT_EQ(p.diags.diagnostics()[0].kind.name, "nesting-too-deep");
}

}  // namespace
}  // namespace dstc::frontend
