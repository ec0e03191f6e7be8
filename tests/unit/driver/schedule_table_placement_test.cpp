// A CSV schedule table places each stage on the rank whose row runs it
// (docs/schedules.md): ZB-V's table, written out by `dstc schedule --csv`
// and read back as `table("file.csv", 2)`, compiles to the program
// `kind = zb_v` does, V placement and all.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/driver/cli.h"
#include "tests/unit/driver/emitted_ir.h"

namespace dstc {
namespace {

namespace fs = std::filesystem;
using testing::emitted_ir;

TEST(ScheduleTablePlacement, AVShapedTableCompilesAsTheBuiltInSchedule) {
  const fs::path dir = fs::temp_directory_path() / "dstc_table_placement_test";
  fs::create_directories(dir);
  std::ostringstream csv, err;
  ASSERT_EQ(run_cli({"schedule", "--kind", "zb_v", "--ranks", "2", "--micro-batches", "4", "--csv"}, csv, err),
            kExitSuccess)
      << err.str();
  std::ofstream(dir / "zb_v.csv") << csv.str();
  const fs::path file = dir / "placement.dstrat";
  std::ofstream(file) << R"(import "models/gpt2.dstrat"
strategy BuiltIn for GPT2(layers = 4, hidden = 16, heads = 2, seq = 8, vocab = 50) on "clusters/dgx-a100.toml" {
  mesh [pp: 2, dp: 2]
  train { batch = 8, optimizer = adam, precision = bf16 }
  default compute [dp: S(b)]
  schedule { micro_batches = 4, kind = zb_v }
  pipeline blocks over pp
}
strategy Table for GPT2(layers = 4, hidden = 16, heads = 2, seq = 8, vocab = 50) on "clusters/dgx-a100.toml" {
  mesh [pp: 2, dp: 2]
  train { batch = 8, optimizer = adam, precision = bf16 }
  default compute [dp: S(b)]
  schedule { micro_batches = 4, kind = table("zb_v.csv", 2) }
  pipeline blocks over pp
}
)";
  const std::string built_in = emitted_ir(file, "BuiltIn");
  EXPECT_FALSE(built_in.empty());
  EXPECT_EQ(emitted_ir(file, "Table"), built_in);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dstc
