// `train { accumulate = n }` is shorthand: a batch n times larger in n
// times the micro-batches, one schedule (docs/language.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/driver/cli.h"
#include "tests/unit/driver/emitted_ir.h"

namespace dstc {
namespace {

namespace fs = std::filesystem;
using testing::emitted_ir;

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
  const std::string accumulated = emitted_ir(file, "Accumulated");
  EXPECT_FALSE(accumulated.empty());
  EXPECT_EQ(accumulated, emitted_ir(file, "Larger"));
  EXPECT_NE(accumulated, emitted_ir(file, "FewerMicroBatches"));
  fs::remove(file);
}

}  // namespace
}  // namespace dstc
