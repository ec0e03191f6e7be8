// dstc run on the CPU device, ranks as threads: every example strategy, at
// the reduced size its verify golden test uses, runs a training step whose
// values on every rank equal the reference executor's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/driver/cli.h"

namespace dstc {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The example commands of tests/golden/verify ("verify examples/X.dstrat
// -D ...") whose verification passes, each named for its .cmd file.
struct ExampleRun {
  std::string name;
  std::vector<std::string> args;
};

// How test names show the parameter (its bytes otherwise, pointers and all).
void PrintTo(const ExampleRun& run, std::ostream* out) { *out << run.name; }

std::vector<ExampleRun> example_verify_commands() {
  std::vector<ExampleRun> commands;
  for (const auto& entry : fs::directory_iterator(fs::path(DSTC_SOURCE_DIR) / "tests/golden/verify")) {
    if (entry.path().extension() != ".cmd") continue;
    std::ifstream in(entry.path());
    std::string line;
    std::getline(in, line);
    std::vector<std::string> args = words(line);
    if (args.size() < 2 || args[0] != "verify" || !args[1].starts_with("examples/")) continue;
    std::ifstream expected(fs::path(entry.path()).replace_extension(".expected"));
    std::string status;
    std::getline(expected, status);
    if (status != "=== exit 0") continue;
    args[1] = (fs::path(DSTC_SOURCE_DIR) / args[1]).string();
    commands.push_back({entry.path().stem().string(), std::move(args)});
  }
  std::sort(commands.begin(), commands.end(), [](const ExampleRun& a, const ExampleRun& b) { return a.name < b.name; });
  return commands;
}

TEST(RunCommand, EveryExampleStrategyHasARun) { EXPECT_GE(example_verify_commands().size(), 30u); }

// One test per example, so that they run side by side and each stays well
// inside the test timeout, under the sanitizers too.
class ExampleStrategyRun : public ::testing::TestWithParam<ExampleRun> {};

TEST_P(ExampleStrategyRun, MatchesTheReferenceOnEveryRank) {
  std::vector<std::string> args = GetParam().args;
  args[0] = "run";
  for (const char* extra : {"--check", "--warmup", "0", "--steps", "1"}) args.emplace_back(extra);
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  EXPECT_EQ(code, kExitSuccess) << args[1] << "\n" << out.str() << err.str();
  EXPECT_NE(out.str().find("check: PASS"), std::string::npos) << args[1] << "\n" << out.str() << err.str();
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleStrategyRun, ::testing::ValuesIn(example_verify_commands()),
                         [](const ::testing::TestParamInfo<ExampleRun>& example) { return example.param.name; });

TEST(RunCommand, StepsTrainOnTheUpdatedWeights) {
  std::ostringstream out, err;
  int code = run_cli({"run", std::string(DSTC_SOURCE_DIR) + "/examples/mlp_distir_pipeline.dstrat", "-D", "hidden=64"},
                     out, err);
  ASSERT_EQ(code, kExitSuccess) << err.str();
  std::vector<double> losses;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);)
    if (size_t at = line.find(" loss "); line.starts_with("step ") && at != std::string::npos)
      losses.push_back(std::stod(line.substr(at + 6)));
  ASSERT_EQ(losses.size(), 4u) << out.str();  // one warm-up step, three timed
  // The prediction for the strategy's cluster beside it; no error is given
  // for the CPU device.
  EXPECT_NE(out.str().find("simulated on 8x TITAN Xp"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("% from the measured"), std::string::npos) << out.str();
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << out.str();
}

// An inference strategy's steps run its forward (here a decode step over a
// KV cache) and print no loss; --check compares every rank's output.
TEST(RunCommand, InferenceStepsRunTheForwardAndCheckTheOutput) {
  std::ostringstream out, err;
  int code = run_cli({"run",        std::string(DSTC_SOURCE_DIR) + "/examples/llama3_8b_serving.dstrat",
                      "--strategy", "Llama3_8B_Decode",
                      "-D",         "tp=2",
                      "-D",         "batch=2",
                      "-D",         "context=3",
                      "-D",         "hidden=16",
                      "-D",         "heads=4",
                      "-D",         "kv_heads=2",
                      "-D",         "ffn=16",
                      "-D",         "layers=1",
                      "-D",         "vocab=32",
                      "--check"},
                     out, err);
  ASSERT_EQ(code, kExitSuccess) << err.str();
  EXPECT_NE(out.str().find("step 2 "), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find(" loss "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("check: PASS"), std::string::npos) << out.str();
}

TEST(RunCommand, TheTraceHasEveryRanksOpsOfTheLastStep) {
  const std::string trace = (fs::temp_directory_path() / "dstc_run_trace_test.json").string();
  std::ostringstream out, err;
  int code = run_cli({"run", std::string(DSTC_SOURCE_DIR) + "/examples/mlp_distir_pipeline.dstrat", "-D", "hidden=64",
                      "--steps", "2", "--trace", trace},
                     out, err);
  ASSERT_EQ(code, kExitSuccess) << err.str();
  std::ifstream in(trace);
  nlohmann::json events = nlohmann::json::parse(in)["traceEvents"];
  fs::remove(trace);
  std::map<int, int> processes, spans, counters;
  for (const auto& e : events) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes[e["pid"].get<int>()];
    if (e["ph"] == "X") {
      ++spans[e["pid"].get<int>()];
      EXPECT_GE(e["dur"].get<double>(), 0);
    }
    if (e["ph"] == "C") ++counters[e["pid"].get<int>()];
  }
  EXPECT_EQ(processes, (std::map<int, int>{{0, 1}, {1, 1}}));
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_GT(spans[0], 3);
  EXPECT_EQ(counters, spans);  // the memory after every op
}

// Without a GPU (CI) the CUDA device is refused before anything runs; with
// one, the MLP's step matches the reference.
TEST(RunCommand, TheCudaDeviceRunsOrSaysWhyNot) {
  std::ostringstream out, err;
  int code = run_cli({"run", std::string(DSTC_SOURCE_DIR) + "/examples/mlp_distir_pipeline.dstrat", "-D", "hidden=64",
                      "--device", "cuda", "--check"},
                     out, err);
  if (code == kExitSuccess)
    EXPECT_NE(out.str().find("check: PASS"), std::string::npos) << out.str();
  else
    EXPECT_EQ(err.str().rfind("dstc run: error: --device cuda: ", 0), 0u) << err.str();
}

// Tensor-core GEMMs are the CUDA device's: the CPU device refuses them; on a
// GPU a bf16-GEMM step passes the check at the bf16 tolerance.
TEST(RunCommand, RoundedGemmInputsAreTheCudaDevicesAndCheckedAtTheirTolerance) {
  const std::string mlp = std::string(DSTC_SOURCE_DIR) + "/examples/mlp_distir_pipeline.dstrat";
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"run", mlp, "-D", "hidden=64", "--gemm-precision", "tf32"}, out, err), kExitUsage);
  EXPECT_EQ(err.str(), "dstc run: error: --gemm-precision is the CUDA device's: add --device cuda\n");
  std::ostringstream gpu_out, gpu_err;
  int code = run_cli({"run", mlp, "-D", "hidden=64", "--device", "cuda", "--gemm-precision", "bf16", "--check"},
                     gpu_out, gpu_err);
  if (code == kExitSuccess)
    EXPECT_NE(gpu_out.str().find("bf16 GEMMs"), std::string::npos) << gpu_out.str();
  else
    EXPECT_EQ(gpu_err.str().rfind("dstc run: error: --device cuda: ", 0), 0u) << gpu_err.str();
}

}  // namespace
}  // namespace dstc
