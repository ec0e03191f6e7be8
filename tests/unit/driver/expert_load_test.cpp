// train { expert_load = "file.csv" }: a measured routing histogram prices
// the experts by the tokens each rank's experts receive.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/driver/cli.h"

namespace dstc {
namespace {

namespace fs = std::filesystem;

// Mixtral-shaped layers, 8 experts over 8 GPUs, simulated with `load` as
// the histogram ("" for none).
nlohmann::json simulate(const std::string& load) {
  const fs::path dir = fs::temp_directory_path() / "dstc_expert_load_test";
  fs::create_directories(dir);
  if (!load.empty()) std::ofstream(dir / "load.csv") << load;
  std::ofstream(dir / "experts.dstrat")
      << "import \"models/mixtral.dstrat\"\n"
         "strategy Experts for Mixtral(batch = 64, seq = 4096, layers = 2, capacity = 4096) on "
         "\"clusters/dgx-h100.toml\" {\n"
         "  mesh [ep: 8]\n"
         "  train { batch = 64, optimizer = adam, precision = bf16"
      << (load.empty() ? "" : ", expert_load = \"load.csv\"")
      << " }\n"
         "  schedule { micro_batches = 8 }\n"
         "  default compute [ep: S(b)]\n"
         "  **.moe.experts compute [ep: S(e)]\n"
         "}\n";
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"compile", (dir / "experts.dstrat").string(), "--simulate", "--format", "json"}, out, err),
            kExitSuccess)
      << err.str();
  fs::remove_all(dir);
  return nlohmann::json::parse(out.str());
}

TEST(ExpertLoad, AHotExpertSlowsItsRankAndAnEvenLoadMatchesBalancedRouting) {
  const nlohmann::json balanced = simulate("");
  // Counts are relative: any even histogram is balanced routing.
  const nlohmann::json even = simulate("5, 5, 5, 5, 5, 5, 5, 5\n");
  EXPECT_DOUBLE_EQ(even["step_time_s"].get<double>(), balanced["step_time_s"].get<double>());
  // Layer 0 sends 30 % of its tokens to expert 3, layer 1 is even.
  const nlohmann::json hot = simulate("10, 10, 10, 30, 10, 10, 10, 10\n1, 1, 1, 1, 1, 1, 1, 1\n");
  EXPECT_GT(hot["step_time_s"].get<double>(), 1.02 * balanced["step_time_s"].get<double>());
  // The fullest rank's experts fill 30 % of its slots over 12.5 % on average.
  EXPECT_NEAR(hot["expert_slots"]["fullest"].get<double>() / hot["expert_slots"]["mean"].get<double>(), 2.4, 0.01);
}

}  // namespace
}  // namespace dstc
