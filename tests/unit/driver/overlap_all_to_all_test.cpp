// schedule { overlap_all_to_all = true }: the IR pairs a forward with
// another micro-batch's backward on each rank, and the simulator hides the
// all-to-alls behind the other pass's compute.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/driver/cli.h"

namespace dstc {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whether some stage runs a forward op of a micro-batch, then a backward op
// of another, then a forward op of the first again: the two passes in turns.
bool some_stage_alternates(const std::string& ir) {
  static const std::regex where(R"(<stage=(\d+), mb=(\d+), phase=(\w+))");
  struct Seen {
    std::map<int, bool> forward_then_backward;  // mb -> a backward of another mb followed its forward
    int last_forward = -1;
  };
  std::map<int, Seen> stages;
  for (auto it = std::sregex_iterator(ir.begin(), ir.end(), where); it != std::sregex_iterator(); ++it) {
    const int stage = std::stoi((*it)[1]), mb = std::stoi((*it)[2]);
    const bool forward = (*it)[3] == "forward";
    Seen& s = stages[stage];
    if (forward) {
      if (s.forward_then_backward.count(mb) && s.forward_then_backward[mb]) return true;
      s.forward_then_backward[mb] = false;
      s.last_forward = mb;
    } else if (s.last_forward >= 0 && s.last_forward != mb) {
      s.forward_then_backward[s.last_forward] = true;
    }
  }
  return false;
}

std::string ir_of(const std::string& file, const std::vector<std::string>& defines) {
  const fs::path out = fs::temp_directory_path() / "dstc_overlap_all_to_all_test.ir";
  std::vector<std::string> args{"compile", file, "--emit", "ir", "-o", out.string()};
  for (const std::string& d : defines) args.insert(args.end(), {"-D", d});
  std::ostringstream o, e;
  EXPECT_EQ(run_cli(args, o, e), kExitSuccess) << e.str();
  std::string text = slurp(out);
  fs::remove(out);
  return text;
}

TEST(OverlapAllToAll, ForwardAndBackwardRunInTurnsOnlyWhenAsked) {
  const std::string golden = std::string(DSTC_SOURCE_DIR) + "/tests/golden/verify/";
  EXPECT_TRUE(some_stage_alternates(ir_of(golden + "moe_overlap_all_to_all_interleaved.dstrat", {})));
  EXPECT_TRUE(some_stage_alternates(ir_of(golden + "moe_overlap_all_to_all_no_pipeline.dstrat", {})));
  // The same pipeline without the option: each pass's block stays whole.
  EXPECT_FALSE(some_stage_alternates(ir_of(golden + "moe_experts_over_two_axes.dstrat", {})));
}

// dstc run executes the reordered program as verify checks it, ranks as
// threads exchanging in the new order.
TEST(OverlapAllToAll, TheReorderedStepRunsAndMatchesTheReference) {
  std::ostringstream out, err;
  const std::string file =
      std::string(DSTC_SOURCE_DIR) + "/tests/golden/verify/moe_overlap_all_to_all_interleaved.dstrat";
  ASSERT_EQ(run_cli({"run", file, "--check", "--warmup", "0", "--steps", "1"}, out, err), kExitSuccess) << err.str();
  EXPECT_NE(out.str().find("check: PASS"), std::string::npos) << out.str();
}

// Mixtral-shaped layers with experts over two nodes: the all-to-alls cross
// the network, and paired passes hide most of their time.
TEST(OverlapAllToAll, HidesTheAllToAllsBehindTheOtherPassesCompute) {
  const fs::path file = fs::temp_directory_path() / "dstc_overlap_all_to_all_test.dstrat";
  std::map<bool, nlohmann::json> report;
  for (bool overlap : {false, true}) {
    std::ofstream(file)
        << "import \"models/mixtral.dstrat\"\n"
           "strategy Experts(overlap = false) for Mixtral(batch = 128, seq = 4096, layers = 2, experts = 16) on "
           "\"clusters/dgx-h100.toml\" (nodes = 2) {\n"
           "  mesh [ep: 16]\n"
           "  train { batch = 128, optimizer = adam, precision = bf16 }\n"
           "  schedule { micro_batches = 8, overlap_all_to_all = overlap }\n"
           "  default compute [ep: S(b)]\n"
           "  **.moe.experts compute [ep: S(e)]\n"
           "}\n";
    std::ostringstream out, err;
    ASSERT_EQ(run_cli({"compile", file.string(), "-D", overlap ? "overlap=true" : "overlap=false", "--simulate",
                       "--format", "json"},
                      out, err),
              kExitSuccess)
        << err.str();
    report[overlap] = nlohmann::json::parse(out.str());
  }
  fs::remove(file);
  const double exposed_before = report[false]["breakdown"]["exposed_comm_s"];
  const double exposed_after = report[true]["breakdown"]["exposed_comm_s"];
  EXPECT_LT(exposed_after, 0.6 * exposed_before);
  EXPECT_LT(report[true]["step_time_s"].get<double>(), report[false]["step_time_s"].get<double>());
}

}  // namespace
}  // namespace dstc
