// libFuzzer target for IR text: any bytes go through the parser and, when
// they parse, the verifier; a module that verifies prints to text that
// parses back to the same text. Nothing may
// crash, hang or leak. Built with -DDSTC_FUZZ=ON (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  dstc::FileId file = sources.add("fuzz.ir", std::string(reinterpret_cast<const char*>(data), size));
  std::optional<dstc::ir::Module> module = dstc::ir::parse_module(file, diags);
  if (!module || !dstc::ir::verify_module(*module, diags)) return 0;
  std::string once = dstc::ir::print_module(*module);
  std::optional<dstc::ir::Module> again = dstc::ir::parse_module(sources.add("printed.ir", once), diags);
  if (!again || dstc::ir::print_module(*again) != once) abort();
  return 0;
}
