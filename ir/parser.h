// Parses the IR text form (docs/ir.md) into a Module. Errors are reported
// through the DiagnosticEngine (file:line:col, what was expected); parsing
// stops at the first error. The parsed module records where each op and
// value was written (Function::op_ranges, value_ranges) so that the verifier
// can point at them.
#pragma once

#include <optional>
#include <string>

#include "ir/module.h"
#include "ir/source/diagnostics.h"

namespace dstc::ir {

// Parses a file already held by the DiagnosticEngine's SourceManager.
std::optional<Module> parse_module(FileId file, DiagnosticEngine& diags);

// Loads `path` into `sources` (which `diags` reports against) and parses it;
// an unreadable file is reported as [ir-file-unreadable].
std::optional<Module> parse_file(SourceManager& sources, const std::string& path, DiagnosticEngine& diags);

}  // namespace dstc::ir
