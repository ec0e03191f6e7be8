#include <gtest/gtest.h>

#include "compiler/search/ranking.h"

namespace dstc::search {
namespace {

ConfigResult config(std::string label, ConfigStatus status, uint8_t parallelism, double samples_per_s,
                    int64_t memory = 1) {
  ConfigResult c;
  c.label = std::move(label);
  c.status = status;
  c.parallelism = parallelism;
  c.samples_per_s = samples_per_s;
  c.peak_memory_bytes = memory;
  return c;
}

SearchResult result_of(std::vector<ConfigResult> configs) {
  SearchResult r;
  for (size_t i = 0; i < configs.size(); ++i) configs[i].index = i;
  r.configs = std::move(configs);
  return r;
}

TEST(SearchPareto, KeepsOnlyUndominatedPointsAndTheFirstOfEqualOnes) {
  std::vector<ParetoPoint> points = {{10, 5}, {8, 3}, {9, 6}, {10, 5}, {5, 1}, {7, 4}, {10, 7}};
  std::vector<bool> front = pareto_front(points);
  EXPECT_EQ(front, (std::vector<bool>{true, true, false, false, true, false, false}));
}

TEST(SearchPareto, EmptyAndSinglePoint) {
  EXPECT_TRUE(pareto_front({}).empty());
  std::vector<ParetoPoint> one = {{1, 1}};
  EXPECT_EQ(pareto_front(one), std::vector<bool>{true});
}

TEST(SearchRanking, RanksFittingConfigurationsByThroughputAndKeepsEnumerationOrderOnTies) {
  SearchResult r =
      result_of({config("a", ConfigStatus::ranked, kData, 50), config("b", ConfigStatus::out_of_memory, kData, 500),
                 config("c", ConfigStatus::ranked, kTensor, 80), config("d", ConfigStatus::invalid, kData, 0),
                 config("e", ConfigStatus::ranked, kPipeline, 50)});
  rank_search(r);
  EXPECT_EQ(r.configs[2].rank, 1);
  EXPECT_EQ(r.configs[0].rank, 2);
  EXPECT_EQ(r.configs[4].rank, 3);
  EXPECT_EQ(r.configs[1].rank, 0) << "an out-of-memory configuration is not ranked";
  EXPECT_EQ(r.configs[3].rank, 0);
}

TEST(SearchRanking, SpeedUpIsOverTheBestFittingPureConfigurationOfEachKind) {
  SearchResult r = result_of(
      {config("dp16", ConfigStatus::ranked, kData, 100), config("dp8", ConfigStatus::ranked, kData, 120),
       config("dp-oom", ConfigStatus::out_of_memory, kData, 900), config("tp16", ConfigStatus::ranked, kTensor, 80),
       config("dp4tp4", ConfigStatus::ranked, kData | kTensor, 150),
       config("dp4pp4", ConfigStatus::ranked, kData | kPipeline, 60)});
  rank_search(r);
  ASSERT_TRUE(r.best_data);
  EXPECT_EQ(r.configs[*r.best_data].label, "dp8");
  ASSERT_TRUE(r.best_tensor);
  EXPECT_EQ(r.configs[*r.best_tensor].label, "tp16");
  EXPECT_FALSE(r.best_pipeline) << "no pure pipeline configuration in the space";
  const ConfigResult& mixed = r.configs[4];
  ASSERT_TRUE(mixed.speedup_vs_data && mixed.speedup_vs_tensor);
  EXPECT_DOUBLE_EQ(*mixed.speedup_vs_data, 150.0 / 120.0);
  EXPECT_DOUBLE_EQ(*mixed.speedup_vs_tensor, 150.0 / 80.0);
  EXPECT_FALSE(mixed.speedup_vs_pipeline);
  EXPECT_FALSE(r.configs[2].speedup_vs_data) << "out-of-memory configurations get no speed-up";
}

TEST(SearchRanking, ParetoFrontIsOverFittingConfigurationsOnly) {
  SearchResult r = result_of({config("fast-big", ConfigStatus::ranked, kData, 100, 50),
                              config("slow-small", ConfigStatus::ranked, kData, 10, 5),
                              config("slow-big", ConfigStatus::ranked, kData, 10, 60),
                              config("oom-fastest", ConfigStatus::out_of_memory, kData, 1000, 1)});
  rank_search(r);
  EXPECT_TRUE(r.configs[0].pareto);
  EXPECT_TRUE(r.configs[1].pareto);
  EXPECT_FALSE(r.configs[2].pareto);
  EXPECT_FALSE(r.configs[3].pareto);
}

TEST(SearchRanking, ReportOrderIsRankedThenOutOfMemoryByThroughputThenInvalidInEnumerationOrder) {
  SearchResult r = result_of(
      {config("inv1", ConfigStatus::invalid, 0, 0), config("oom-slow", ConfigStatus::out_of_memory, kData, 5),
       config("r-slow", ConfigStatus::ranked, kData, 10), config("failed", ConfigStatus::internal_error, 0, 0),
       config("oom-fast", ConfigStatus::out_of_memory, kData, 50), config("r-fast", ConfigStatus::ranked, kData, 20)});
  rank_search(r);
  std::vector<std::string> labels;
  for (size_t i : report_order(r)) labels.push_back(r.configs[i].label);
  EXPECT_EQ(labels, (std::vector<std::string>{"r-fast", "r-slow", "oom-fast", "oom-slow", "inv1", "failed"}));
}

}  // namespace
}  // namespace dstc::search
