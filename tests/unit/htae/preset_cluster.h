// A cluster preset of stdlib/clusters/ for tests, loaded or failed loudly.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "htae/cluster_spec.h"

namespace dstc::htae::testing {

inline ClusterSpec preset_cluster(const std::string& file, ClusterOverrides overrides = {}) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  auto spec = load_cluster(sources, diags, std::string(DSTC_SOURCE_DIR) + "/stdlib/clusters/" + file, overrides);
  EXPECT_TRUE(spec) << file;
  return spec.value_or(ClusterSpec{});
}

}  // namespace dstc::htae::testing
