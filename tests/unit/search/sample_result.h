// A small ranked search result for the writer and plot tests: four
// simulated configurations (one out of memory) and two invalid ones.
#pragma once

#include "compiler/search/ranking.h"

namespace dstc::search::testing {

inline ConfigResult sample_config(std::string dp, std::string tp, ConfigStatus status, uint8_t parallelism,
                                  double samples_per_s, int64_t memory_gib) {
  ConfigResult c;
  c.point = {{"dp", dp}, {"tp", tp}};
  c.label = "dp=" + dp + " tp=" + tp;
  c.strategy = "Sweep";
  c.status = status;
  c.parallelism = parallelism;
  c.devices = std::stoi(dp) * std::stoi(tp);
  if (c.simulated()) {
    c.samples_per_s = samples_per_s;
    c.step_time_s = 64 / samples_per_s;
    c.tokens_per_s = samples_per_s * 1024;
    c.tflops_per_gpu = samples_per_s / 10;
    c.mfu = samples_per_s / 1000;
    c.peak_memory_bytes = memory_gib << 30;
    c.memory_capacity_bytes = int64_t{32} << 30;
    c.num_ops = 1000;
  }
  return c;
}

inline SearchResult sample_result() {
  SearchResult r;
  r.search = "Sweep";
  r.file = "sweep.dstrat";
  r.cluster = "Test <cluster> & co";
  r.grid_size = 9;
  r.configs = {sample_config("4", "1", ConfigStatus::ranked, kData, 100, 20),
               sample_config("2", "2", ConfigStatus::ranked, kData | kTensor, 150, 12),
               sample_config("1", "4", ConfigStatus::ranked, kTensor, 90, 8),
               sample_config("8", "1", ConfigStatus::out_of_memory, kData, 300, 40),
               sample_config("3", "1", ConfigStatus::invalid, kData, 0, 0),
               sample_config("16", "1", ConfigStatus::invalid, kData, 0, 0)};
  r.configs[4].reason = "a.dstrat:3:4: batch 64 does not divide by 3, \"dp\" [split-not-divisible]";
  r.configs[5].reason = "a.dstrat:2:3: mesh needs 16 devices but the cluster has 8 [cluster-too-small]";
  for (size_t i = 0; i < r.configs.size(); ++i) r.configs[i].index = i;
  rank_search(r);
  return r;
}

}  // namespace dstc::search::testing
