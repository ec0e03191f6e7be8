// The IR text form: print -> parse -> print is the identity, and malformed
// text is reported with a location.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/parser.h"
#include "ir/printer.h"

namespace dstc::ir {
namespace {

namespace fs = std::filesystem;

std::optional<Module> parse(SourceManager& sm, DiagnosticEngine& diags, std::string text) {
  return parse_module(sm.add("t.ir", std::move(text)), diags);
}

TEST(IrText, EveryWellFormedGoldenFileRoundTrips) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(DSTC_SOURCE_DIR) / "tests/golden/ir")) {
    if (entry.path().extension() != ".ir") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    SourceManager sm;
    DiagnosticEngine diags(sm);
    std::optional<Module> first = parse(sm, diags, text.str());
    ASSERT_TRUE(first.has_value()) << entry.path();
    std::string printed = print_module(*first);
    std::optional<Module> second = parse(sm, diags, printed);
    ASSERT_TRUE(second.has_value()) << printed;
    EXPECT_EQ(print_module(*second), printed) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 2);
}

TEST(IrText, FloatsKeepEveryDigit) {
  EXPECT_EQ(print_float(2), "2.0");
  EXPECT_EQ(print_float(0.1), "0.1");
  EXPECT_EQ(print_float(1e-8), "1e-08");
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> m = parse(sm, diags,
                                  "mesh w[d=1]\nfunc @f {\n input %x on w : f32[2]\n"
                                  " %y = scale(%x) {factor = 0.30000000000000004} on w : f32[2]\n return %y\n}\n");
  ASSERT_TRUE(m.has_value());
  EXPECT_NE(print_module(*m).find("factor = 0.30000000000000004"), std::string::npos);
}

TEST(IrText, UnnamedValuesPrintAsNumbersAndParseBack) {
  Module m;
  m.set_mesh(Mesh("world", {{"dp", 2}}));
  Function& f = m.add_function("f");
  Builder b(m, f);
  DeviceSetId all = m.intern_devices(DeviceSet::whole(m.mesh()));
  ValueId x = b.add_arg("", ArgKind::Input, TensorType(DType::F32, {4}), all);
  ValueId ids[] = {x};
  OpSpec spec;
  spec.kind = OpKind::Relu;
  spec.devices = all;
  spec.operands = ids;
  ValueId y = b.append_value(spec);
  ValueId ret[] = {y};
  b.set_returns(ret);
  std::string printed = print_module(m);
  EXPECT_NE(printed.find("%1 = relu(%0) on world : f32[4]"), std::string::npos) << printed;
  SourceManager sm;
  DiagnosticEngine diags(sm);
  std::optional<Module> again = parse(sm, diags, printed);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(print_module(*again), printed);
}

TEST(IrText, ErrorsCarryLocations) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  EXPECT_FALSE(parse(sm, diags, "mesh w[d=2]\nfunc @f {\n  input %x on w : f32[2]\n  %y = relu(%x) on w : q8[2]\n}\n"));
  ASSERT_EQ(diags.diagnostics().size(), 1u);
  EXPECT_EQ(diags.diagnostics()[0].kind.name, "ir-syntax");
  EXPECT_EQ(diags.location(diags.diagnostics()[0].range), "t.ir:4:24");
  EXPECT_NE(diags.diagnostics()[0].message.find("unknown element type 'q8'"), std::string::npos);
}

TEST(IrText, EndOfFileInsideAFunction) {
  SourceManager sm;
  DiagnosticEngine diags(sm);
  EXPECT_FALSE(parse(sm, diags, "mesh w[d=2]\nfunc @f {\n  input %x on w : f32[2]\n"));
  ASSERT_EQ(diags.diagnostics().size(), 1u);
  EXPECT_NE(diags.diagnostics()[0].message.find("found end of file"), std::string::npos);
}

TEST(IrText, GarbageDoesNotCrash) {
  const char* inputs[] = {"",
                          "mesh",
                          "mesh w[",
                          "mesh w[d=0]",
                          "mesh w[d=2] devices [1]",
                          "mesh w[d=2]\nfunc",
                          "mesh w[d=2]\nfunc @f { %",
                          "mesh w[d=2]\nfunc @f { %a = send(",
                          "\xff\xfe",
                          "mesh w[d=2]\nfunc @f { input %x on w{5} : f32[1] }",
                          "mesh w[d=2]\nfunc @f { input %x on w : f32[1,2,3,4,5,6,7,8,9] }"};
  for (const char* text : inputs) {
    SourceManager sm;
    DiagnosticEngine diags(sm);
    EXPECT_FALSE(parse(sm, diags, text).has_value()) << text;
    EXPECT_TRUE(diags.has_errors()) << text;
  }
}

}  // namespace
}  // namespace dstc::ir
