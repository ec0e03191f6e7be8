// The IR `dstc compile FILE --strategy NAME --emit ir` writes, for tests
// that compare the programs two spellings of a strategy compile to.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "compiler/driver/cli.h"

namespace dstc::testing {

inline std::string emitted_ir(const std::filesystem::path& file, const std::string& strategy) {
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / ("dstc_emitted_ir_" + strategy + ".ir");
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

}  // namespace dstc::testing
