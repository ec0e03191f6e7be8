#include "compiler/driver/cli.h"

#include <gtest/gtest.h>

#include <fstream>
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

// CI machines have no GPU: calibrate says why it cannot measure (a build
// without CUDA, or no usable device) and writes nothing.
TEST(Cli, CalibrateWithoutAGpuSaysWhyAndWritesNothing) {
  std::string output = testing::TempDir() + "/never-written.toml";
  CliResult r = run({"calibrate", "--quick", "-o", output});
  EXPECT_NE(r.code, kExitSuccess);
  EXPECT_EQ(r.err.rfind("dstc calibrate: error: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.err.find("built without CUDA") != std::string::npos || r.err.find("CUDA device") != std::string::npos)
      << r.err;
  EXPECT_FALSE(std::ifstream(output).good());
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

TEST(Cli, NoColorTurnsOffColourOnATerminalUnlessAskedFor) {
  std::vector<std::string> args{"check", DSTC_SOURCE_DIR "/tests/golden/newcomer/template_misspelt.dstrat"};
  auto err_with = [&](CliEnvironment env, std::vector<std::string> extra) {
    std::ostringstream out, err;
    extra.insert(extra.end(), args.begin(), args.end());
    EXPECT_EQ(run_cli(extra, out, err, env), kExitInputErrors);
    return err.str();
  };
  CliEnvironment terminal{.err_is_terminal = true};
  CliEnvironment no_color{.err_is_terminal = true, .no_color = true};
  EXPECT_NE(err_with(terminal, {}).find("\x1b["), std::string::npos);
  EXPECT_EQ(err_with(no_color, {}).find("\x1b["), std::string::npos);
  EXPECT_NE(err_with(no_color, {"--color=always"}).find("\x1b["), std::string::npos);
}

// A stream that fails every write, as stdout does on a full disk.
struct FullDisk : std::streambuf {
  int overflow(int) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

TEST(Cli, OutputThatCannotBeWrittenIsAnError) {
  FullDisk full;
  std::ostream out(&full);
  std::ostringstream err;
  EXPECT_EQ(run_cli({"schedule", "--kind", "gpipe", "--ranks", "2", "--micro-batches", "2"}, out, err),
            kExitInputErrors);
  EXPECT_NE(err.str().find("cannot write the output"), std::string::npos) << err.str();
}

TEST(Cli, BadColourModeIsAUsageError) { EXPECT_EQ(run({"--color", "purple", "check"}).code, kExitUsage); }

}  // namespace
}  // namespace dstc
