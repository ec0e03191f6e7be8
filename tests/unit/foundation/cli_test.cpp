#include "compiler/driver/cli.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dstc {
namespace {

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(Cli, HelpListsEverySubcommand) {
  CliResult r = run({"--help"});
  EXPECT_EQ(r.code, kExitSuccess);
  for (const char* sub : {"check", "fmt", "compile", "verify", "search", "run", "calibrate", "ir"}) {
    EXPECT_NE(r.out.find(std::string("\n  ") + sub), std::string::npos) << sub << " missing from\n" << r.out;
  }
}

TEST(Cli, EachSubcommandHasHelp) {
  for (const char* sub : {"check", "fmt", "compile", "verify", "search", "run", "calibrate", "ir"}) {
    CliResult r = run({sub, "--help"});
    EXPECT_EQ(r.code, kExitSuccess) << sub;
    EXPECT_NE(r.out.find(std::string("Usage: ") + sub), std::string::npos) << r.out;
  }
}

TEST(Cli, VersionPrintsTheVersion) {
  CliResult r = run({"--version"});
  EXPECT_EQ(r.code, kExitSuccess);
  EXPECT_EQ(r.out.rfind("dstc ", 0), 0u);
}

TEST(Cli, UnknownSubcommandIsAUsageError) {
  CliResult r = run({"chek"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("unknown subcommand 'chek'; did you mean 'check'?"), std::string::npos) << r.err;
}

TEST(Cli, UnknownFlagIsAUsageError) {
  EXPECT_EQ(run({"--frobnicate"}).code, kExitUsage);
  EXPECT_EQ(run({}).code, kExitUsage);
}

TEST(Cli, BadColourModeIsAUsageError) { EXPECT_EQ(run({"--color", "purple", "check"}).code, kExitUsage); }

}  // namespace
}  // namespace dstc
