// The include rules of docs/architecture.md, checked on every source file:
// the executors and the simulator read the IR and nothing of the compiler;
// only the driver sees every stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Rule {
  std::string folder;                    // a source folder, with its trailing '/'
  std::vector<std::string> may_include;  // folders (prefixes) its files may include
};

// The most specific rule wins (ir/source/ over ir/).
const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      {"ir/source/", {"ir/source/"}},
      {"ir/", {"ir/"}},
      {"htae/", {"htae/", "ir/"}},
      {"backends/", {"backends/", "ir/"}},
      // Calibration writes the simulator's profile database.
      {"backends/calibration/", {"backends/calibration/", "backends/cuda/", "htae/", "ir/"}},
      // The CUDA device also computes dstc run's steps behind the runtime's interface.
      {"backends/cuda/",
       {"backends/cuda/", "backends/calibration/", "backends/runtime/device.h", "backends/reference/", "htae/", "ir/"}},
      // The runtime computes with the reference executor's kernels.
      {"backends/runtime/", {"backends/runtime/", "backends/reference/", "ir/"}},
      {"compiler/ops/", {"compiler/ops/", "ir/"}},
      {"compiler/frontend/",
       {"compiler/frontend/", "compiler/ops/", "compiler/schedule/", "compiler/strategy/training_choices.h", "ir/"}},
      {"compiler/schedule/", {"compiler/schedule/", "ir/source/"}},
      // The middle end: the logical graph and program (not their builder,
      // which reads the front end), every stage after it, the ops and the IR.
      {"compiler/",
       {"compiler/compile_strategy.h", "compiler/logical/logical_graph.h", "compiler/logical/logical_program.h",
        "compiler/strategy/", "compiler/sbp/", "compiler/schedule/", "compiler/lowering/", "compiler/explain/",
        "compiler/ops/", "ir/"}},
      {"compiler/logical/",
       {"compiler/logical/", "compiler/frontend/", "compiler/strategy/", "compiler/schedule/", "compiler/ops/", "ir/"}},
      // Loading: the front end and the cluster files.
      {"compiler/pipeline/", {"compiler/pipeline/", "compiler/frontend/", "compiler/logical/", "htae/", "ir/"}},
      // Search runs the whole chain and the simulator, below the driver.
      {"compiler/search/",
       {"compiler/search/", "compiler/pipeline/", "compiler/compile_strategy.h", "compiler/logical/",
        "compiler/strategy/", "compiler/sbp/", "compiler/schedule/", "compiler/lowering/", "compiler/frontend/",
        "compiler/ops/", "htae/", "ir/"}},
      {"compiler/driver/", {""}},
  };
  return table;
}

const Rule* rule_for(const std::string& file) {
  const Rule* best = nullptr;
  for (const Rule& r : rules()) {
    if (file.starts_with(r.folder) && (!best || r.folder.size() > best->folder.size())) best = &r;
  }
  return best;
}

// Whether `file` (relative to the repository root) may include `header`.
bool may_include(const std::string& file, const std::string& header) {
  const Rule* rule = rule_for(file);
  if (!rule) return true;
  return std::any_of(rule->may_include.begin(), rule->may_include.end(),
                     [&](const std::string& prefix) { return header.starts_with(prefix); });
}

TEST(Layering, RulesSayWhatTheArchitectureSays) {
  EXPECT_FALSE(may_include("backends/reference/verify.h", "compiler/logical/logical_graph.h"));
  EXPECT_FALSE(may_include("htae/simulator.cpp", "compiler/compile_strategy.h"));
  EXPECT_FALSE(may_include("ir/module.h", "htae/report.h"));
  EXPECT_FALSE(may_include("ir/source/diagnostics.cpp", "ir/module.h"));
  EXPECT_FALSE(may_include("compiler/lowering/lowering.cpp", "compiler/frontend/model.h"));
  EXPECT_FALSE(may_include("compiler/sbp/signature.cpp", "htae/cluster_spec.h"));
  EXPECT_FALSE(may_include("compiler/frontend/frontend.cpp", "compiler/logical/logical_graph.h"));
  EXPECT_FALSE(may_include("compiler/ops/op_table.h", "compiler/frontend/model.h"));
  EXPECT_TRUE(may_include("compiler/frontend/model.h", "compiler/ops/op_table.h"));
  EXPECT_TRUE(may_include("backends/reference/verify.h", "ir/module.h"));
  EXPECT_TRUE(may_include("backends/calibration/calibrate.h", "htae/profile_database.h"));
  EXPECT_FALSE(may_include("backends/reference/verify.h", "htae/profile_database.h"));
  EXPECT_FALSE(may_include("backends/calibration/calibrate.h", "compiler/driver/cli.h"));
  EXPECT_TRUE(may_include("compiler/logical/build_logical_graph.cpp", "compiler/frontend/model.h"));
  EXPECT_FALSE(may_include("compiler/logical/build_logical_graph.cpp", "htae/report.h"));
  EXPECT_TRUE(may_include("compiler/driver/verify_command.cpp", "backends/reference/verify.h"));
  EXPECT_TRUE(may_include("compiler/lowering/lowering.cpp", "compiler/sbp/signature.h"));
}

TEST(Layering, EverySourceFileKeepsTheRules) {
  const fs::path root = DSTC_SOURCE_DIR;
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  size_t files = 0;
  for (const char* top : {"ir", "compiler", "htae", "backends"}) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
      const std::string file = fs::relative(entry.path(), root).generic_string();
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        EXPECT_TRUE(may_include(file, m[1]))
            << file << ":" << number << ": includes " << m[1] << ", which docs/architecture.md does not allow";
      }
    }
  }
  EXPECT_GT(files, 100u);
}

}  // namespace
