#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/search/export.h"
#include "tests/unit/search/sample_result.h"

namespace dstc::search {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(SearchCsv, OneRowPerConfigurationInReportOrderWithTheVariablesAsColumns) {
  std::ostringstream out;
  write_search_csv(out, testing::sample_result());
  std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0],
            "rank,configuration,strategy,dp,tp,status,devices,parallelism,step_time_s,samples_per_s,tokens_per_s,"
            "tflops_per_gpu,mfu,peak_memory_bytes,memory_lower_bound_bytes,memory_capacity_bytes,num_ops,pareto,"
            "speedup_vs_data,"
            "speedup_vs_tensor,speedup_vs_pipeline,reason");
  EXPECT_EQ(lines[1],
            "1,dp=2 tp=2,Sweep,2,2,ranked,4,data+tensor,0.426667,150,153600,15,0.15,12884901888,,34359738368,1000,"
            "true,1.5,1.66667,,");
  EXPECT_EQ(lines[2].substr(0, 26), "2,dp=4 tp=1,Sweep,4,1,rank");
  EXPECT_EQ(lines[4].substr(0, 36), ",dp=8 tp=1,Sweep,8,1,out-of-memory,8");
  // A reason with commas and quotes is one quoted field.
  EXPECT_EQ(lines[5],
            ",dp=3 tp=1,Sweep,3,1,invalid,3,data,,,,,,,,,,,,,,\"a.dstrat:3:4: batch 64 does not divide by 3, "
            "\"\"dp\"\" [split-not-divisible]\"");
}

// Out of memory by the memory bound: no step-time figures, the bound in its
// own column, never as a simulated peak.
TEST(SearchCsv, ConfigurationsOutOfMemoryByTheBoundGiveTheBoundOnly) {
  SearchResult result = testing::sample_result();
  for (ConfigResult& c : result.configs) {
    if (c.status == ConfigStatus::out_of_memory) c.memory_bound_only = true, c.peak_memory_bytes = 40LL << 30;
  }
  std::ostringstream out;
  write_search_csv(out, result);
  std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[4], ",dp=8 tp=1,Sweep,8,1,out-of-memory,8,data,,,,,,,42949672960,34359738368,,,,,,");
  std::ostringstream json;
  write_search_json(json, result);
  nlohmann::json j = nlohmann::json::parse(json.str());
  EXPECT_EQ(j["out_of_memory_by_bound"], 1);
  const nlohmann::json& oom = j["results"][3];
  EXPECT_EQ(oom["status"], "out-of-memory");
  EXPECT_FALSE(oom.contains("step_time_s"));
  EXPECT_FALSE(oom.contains("peak_memory_bytes"));
  EXPECT_EQ(oom["memory_lower_bound_bytes"], 40LL << 30);
}

TEST(SearchJson, SummaryBaselinesAndEveryConfiguration) {
  std::ostringstream out;
  write_search_json(out, testing::sample_result());
  nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["search"], "Sweep");
  EXPECT_EQ(j["configurations"], 6);
  EXPECT_EQ(j["ranked"], 3);
  EXPECT_EQ(j["out_of_memory"], 1);
  EXPECT_EQ(j["invalid"], 2);
  EXPECT_EQ(j["best_pure"]["data"], "dp=4 tp=1");
  EXPECT_EQ(j["best_pure"]["tensor"], "dp=1 tp=4");
  EXPECT_TRUE(j["best_pure"]["pipeline"].is_null());
  ASSERT_EQ(j["results"].size(), 6u);
  const nlohmann::json& best = j["results"][0];
  EXPECT_EQ(best["rank"], 1);
  EXPECT_EQ(best["point"]["dp"], "2");
  EXPECT_EQ(best["status"], "ranked");
  EXPECT_DOUBLE_EQ(best["samples_per_s"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(best["speedup_vs_data"].get<double>(), 1.5);
  EXPECT_TRUE(best["speedup_vs_pipeline"].is_null());
  EXPECT_EQ(best["pareto"], true);
  const nlohmann::json& oom = j["results"][3];
  EXPECT_EQ(oom["status"], "out-of-memory");
  EXPECT_TRUE(oom["rank"].is_null());
  EXPECT_FALSE(oom.contains("speedup_vs_data"));
  const nlohmann::json& invalid = j["results"][5];
  EXPECT_EQ(invalid["status"], "invalid");
  EXPECT_FALSE(invalid.contains("samples_per_s"));
  EXPECT_NE(invalid["reason"].get<std::string>().find("[cluster-too-small]"), std::string::npos);
}

}  // namespace
}  // namespace dstc::search
