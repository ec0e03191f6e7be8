// Helpers for the front-end tests: check in-memory text or files on disk.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/frontend/frontend.h"
#include "ir/source/diagnostics.h"

namespace dstc::frontend::testing {

struct Checked {
  std::unique_ptr<SourceManager> sources = std::make_unique<SourceManager>();
  std::unique_ptr<DiagnosticEngine> diags = std::make_unique<DiagnosticEngine>(*sources);
  std::unique_ptr<FrontendResult> result;

  std::string rendered() const {
    std::ostringstream out;
    diags->render(out, false);
    return out.str();
  }
};

inline Checked check_paths(const std::vector<std::string>& paths, const std::vector<std::string>& defines = {}) {
  Checked c;
  c.result = check_files(paths, defines, *c.sources, *c.diags);
  return c;
}

}  // namespace dstc::frontend::testing
