// `train { accumulate = n }` is shorthand: a batch n times larger in n
// times the micro-batches, one schedule (docs/language.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/driver/cli.h"

namespace dstc {
namespace {

namespace fs = std::filesystem;

std::string ir_of(const fs::path& file, const std::string& strategy) {
  const fs::path out = fs::temp_directory_path() / ("dstc_accumulate_test_" + strategy + ".ir");
  std::ostringstream o, e;
  EXPECT_EQ(run_cli({"compile", file.string(), "--strategy", strategy, "--emit", "ir", "-o", out.string()}, o, e),
            kExitSuccess)
      << e.str();
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(out);
  return text.str();
}

TEST(Accumulate, IsTheProgramOfALargerBatchInAsManyMoreMicroBatches) {
  const fs::path file = fs::temp_directory_path() / "dstc_accumulate_test.dstrat";
  std::ofstream(file) << R"(import "models/gpt2.dstrat"
import "strategies/data_parallel.dstrat"
strategy Accumulated for GPT2(layers = 2, hidden = 64, heads = 4, seq = 32, vocab = 128) on "clusters/dgx-a100.toml" {
  mesh [dp: 4]
  train { batch = 16, accumulate = 4, optimizer = adam, precision = bf16 }
  schedule { micro_batches = 2 }
  use DataParallel()
}
strategy Larger for GPT2(layers = 2, hidden = 64, heads = 4, seq = 32, vocab = 128) on "clusters/dgx-a100.toml" {
  mesh [dp: 4]
  train { batch = 64, optimizer = adam, precision = bf16 }
  schedule { micro_batches = 8 }
  use DataParallel()
}
strategy FewerMicroBatches for GPT2(layers = 2, hidden = 64, heads = 4, seq = 32, vocab = 128) on "clusters/dgx-a100.toml" {
  mesh [dp: 4]
  train { batch = 64, optimizer = adam, precision = bf16 }
  schedule { micro_batches = 2 }
  use DataParallel()
}
)";
  const std::string accumulated = ir_of(file, "Accumulated");
  EXPECT_FALSE(accumulated.empty());
  EXPECT_EQ(accumulated, ir_of(file, "Larger"));
  EXPECT_NE(accumulated, ir_of(file, "FewerMicroBatches"));
  fs::remove(file);
}

}  // namespace
}  // namespace dstc
