// libFuzzer target for the .dstrat front end: any bytes go through parsing,
// checking and (when they parse) formatting; nothing may crash, hang or
// leak, and formatting must be idempotent. Built with -DDSTC_FUZZ=ON (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "compiler/frontend/formatter.h"
#include "compiler/frontend/frontend.h"
#include "compiler/frontend/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  {
    dstc::SourceManager sources;
    dstc::DiagnosticEngine diags(sources);
    dstc::frontend::check_text("fuzz.dstrat", text, {}, sources, diags);
  }
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  std::optional<dstc::frontend::FileAst> ast = dstc::frontend::parse_file(sources.add("fuzz.dstrat", text), diags);
  if (!ast) return 0;
  std::string once = dstc::frontend::format_file(*ast, sources);
  std::optional<dstc::frontend::FileAst> again = dstc::frontend::parse_file(sources.add("fmt.dstrat", once), diags);
  if (!again || !dstc::frontend::same(*ast, *again) || dstc::frontend::format_file(*again, sources) != once) abort();
  return 0;
}
