#include <gtest/gtest.h>

#include "compiler/search/ranking.h"
#include "compiler/search/runner.h"

namespace dstc::search {
namespace {

const std::string kSmallSpace = std::string(DSTC_SOURCE_DIR) + "/tests/golden/search/small_space.dstrat";
// Adam's states outgrow the test box unless sharded: the memory bound finds some.
const std::string kBoundSpace = std::string(DSTC_SOURCE_DIR) + "/tests/golden/search/bound_space.dstrat";

struct Ran {
  SourceManager sources;
  std::unique_ptr<DiagnosticEngine> diags;
  std::unique_ptr<frontend::FrontendResult> front;
  std::optional<SearchResult> result;
};

std::unique_ptr<Ran> run(int jobs, std::function<void(size_t, size_t)> progress = {}, bool prune = true,
                         const std::string& file = kSmallSpace) {
  auto r = std::make_unique<Ran>();
  r->diags = std::make_unique<DiagnosticEngine>(r->sources);
  r->front = frontend::check_files({file}, {}, r->sources, *r->diags);
  EXPECT_FALSE(r->diags->has_errors());
  EXPECT_EQ(r->front->searches.size(), 1u);
  if (r->front->searches.empty()) return r;
  SearchRunOptions options;
  options.jobs = jobs;
  options.progress = std::move(progress);
  options.prune_by_memory_bound = prune;
  r->result = run_search(*r->front, r->front->searches.front(), r->sources, *r->diags, options);
  if (r->result) rank_search(*r->result);
  return r;
}

const ConfigResult* find(const SearchResult& r, const std::string& label) {
  for (const ConfigResult& c : r.configs) {
    if (c.label == label) return &c;
  }
  return nullptr;
}

TEST(SearchRunner, SkipsInvalidConfigurationsWithAReasonAndRanksTheRest) {
  auto r = run(2);
  ASSERT_TRUE(r->result);
  const SearchResult& s = *r->result;
  EXPECT_EQ(s.configs.size(), r->front->search_points.front());
  EXPECT_EQ(s.count(ConfigStatus::internal_error), 0u);
  EXPECT_GT(s.count(ConfigStatus::ranked), 0u);
  EXPECT_GT(s.count(ConfigStatus::out_of_memory), 0u);
  EXPECT_GT(s.count(ConfigStatus::invalid), 0u);

  const ConfigResult* too_big = find(s, "dp=4 tp=2 pp=1 micro=1");
  ASSERT_NE(too_big, nullptr);
  EXPECT_EQ(too_big->status, ConfigStatus::invalid);
  EXPECT_NE(too_big->reason.find("mesh needs 8 devices but the cluster has 4 [cluster-too-small]"), std::string::npos)
      << too_big->reason;
  const ConfigResult* indivisible = find(s, "dp=3 tp=1 pp=1 micro=1");
  ASSERT_NE(indivisible, nullptr);
  EXPECT_EQ(indivisible->status, ConfigStatus::invalid);
  EXPECT_NE(indivisible->reason.find("small_space.dstrat:"), std::string::npos) << indivisible->reason;
  EXPECT_EQ(s.first(ConfigStatus::invalid)->status, ConfigStatus::invalid);
  EXPECT_FALSE(s.first(ConfigStatus::invalid)->reason.empty());
}

TEST(SearchRunner, ClassifiesPureDataTensorAndPipelineConfigurations) {
  auto r = run(2);
  ASSERT_TRUE(r->result);
  const SearchResult& s = *r->result;
  EXPECT_EQ(find(s, "dp=4 tp=1 pp=1 micro=1")->parallelism, kData);
  EXPECT_EQ(find(s, "dp=1 tp=4 pp=1 micro=1")->parallelism, kTensor);
  EXPECT_EQ(find(s, "dp=1 tp=1 pp=4 micro=4")->parallelism, kPipeline);
  EXPECT_EQ(find(s, "dp=2 tp=2 pp=1 micro=1")->parallelism, kData | kTensor);
  EXPECT_EQ(find(s, "dp=1 tp=1 pp=1 micro=1")->parallelism, 0);
}

TEST(SearchRunner, ResultsDoNotDependOnTheNumberOfThreads) {
  auto one = run(1);
  auto two = run(2);
  ASSERT_TRUE(one->result && two->result);
  ASSERT_EQ(one->result->configs.size(), two->result->configs.size());
  for (size_t i = 0; i < one->result->configs.size(); ++i) {
    const ConfigResult& a = one->result->configs[i];
    const ConfigResult& b = two->result->configs[i];
    EXPECT_EQ(a.label, b.label);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(a.step_time_s, b.step_time_s);
    EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
    EXPECT_EQ(a.rank, b.rank);
  }
}

// Configurations the memory bound sets aside are exactly out of memory when
// simulated, with the bound at most their simulated peak; nothing else
// changes.
TEST(SearchRunner, TheMemoryBoundOnlySetsAsideConfigurationsThatDoNotFit) {
  auto pruned = run(2, {}, true, kBoundSpace);
  auto simulated = run(2, {}, false, kBoundSpace);
  ASSERT_TRUE(pruned->result && simulated->result);
  EXPECT_GT(pruned->result->count_memory_bound_only(), 0u);
  EXPECT_EQ(simulated->result->count_memory_bound_only(), 0u);
  for (size_t i = 0; i < pruned->result->configs.size(); ++i) {
    const ConfigResult& p = pruned->result->configs[i];
    const ConfigResult& s = simulated->result->configs[i];
    EXPECT_EQ(p.status, s.status) << p.label;
    if (p.memory_bound_only) {
      EXPECT_FALSE(p.simulated());
      EXPECT_LE(p.peak_memory_bytes, s.peak_memory_bytes) << p.label;
      EXPECT_GT(p.peak_memory_bytes, p.memory_capacity_bytes) << p.label;
    } else {
      EXPECT_EQ(p.step_time_s, s.step_time_s) << p.label;
      EXPECT_EQ(p.peak_memory_bytes, s.peak_memory_bytes) << p.label;
    }
  }
}

TEST(SearchRunner, ProgressEndsAtTheTotal) {
  size_t last_done = 0, last_total = 0, calls = 0;
  auto r = run(2, [&](size_t done, size_t total) {
    EXPECT_LE(done, total);
    last_done = done;
    last_total = total;
    ++calls;
  });
  ASSERT_TRUE(r->result);
  EXPECT_GE(calls, 1u);
  EXPECT_EQ(last_done, r->result->configs.size());
  EXPECT_EQ(last_total, r->result->configs.size());
}

}  // namespace
}  // namespace dstc::search
