// Diagnostics: every stage reports user-caused errors through a
// DiagnosticEngine, which renders them as
//   file:line:col: error: message [kind]
//      12 | the source line
//         |     ^~~~~
// followed by notes. Kinds have stable names so tests can match them.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "ir/source/source_manager.h"

namespace dstc {

// A stable, kebab-case diagnostic name. Every kind is declared once, in
// ir/source/diagnostic_kinds.def, so that a test can check every kind is
// triggered by some test.
struct DiagKind {
  std::string_view name;
};

#define DSTC_DIAG_KIND(ident, name, summary) inline constexpr ::dstc::DiagKind ident{name};

enum class Severity { Error, Warning, Note };

struct DiagNote {
  SourceRange range;  // may be invalid: a note without a location
  std::string message;
};

struct Diagnostic {
  Severity severity = Severity::Error;
  DiagKind kind;
  SourceRange range;
  std::string message;
  std::vector<DiagNote> notes;
};

class DiagnosticEngine {
 public:
  // Past this many errors, further ones are counted but not kept, so that
  // garbage input cannot produce unbounded output.
  static constexpr size_t kDefaultMaxErrors = 50;

  explicit DiagnosticEngine(const SourceManager& sources, size_t max_errors = kDefaultMaxErrors)
      : sources_(sources), max_errors_(max_errors) {}

  // Adds notes to the diagnostic just reported.
  class Builder {
   public:
    Builder& note(SourceRange range, std::string message);
    Builder& note(std::string message) { return note(SourceRange{}, std::move(message)); }

   private:
    friend class DiagnosticEngine;
    Builder(DiagnosticEngine* engine, size_t index) : engine_(engine), index_(index) {}
    DiagnosticEngine* engine_;
    size_t index_;  // SIZE_MAX when the diagnostic was dropped
  };

  Builder error(DiagKind kind, SourceRange range, std::string message);
  Builder warning(DiagKind kind, SourceRange range, std::string message);

  // Adds a note at `at` to each diagnostic reported since the first
  // `first` that lies in another file than `at`: where the user's code
  // instantiated the library code an error points into.
  void note_other_files_since(size_t first, SourceRange at, const std::string& message);
  // Adds a note at `at` to each diagnostic reported since the first `first`.
  void note_since(size_t first, SourceRange at, const std::string& message);

  bool has_errors() const { return error_count_ > 0; }
  size_t error_count() const { return error_count_; }
  bool at_error_limit() const { return error_count_ >= max_errors_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  const SourceManager& sources() const { return sources_; }

  // Renders all diagnostics in source order (stable for equal locations),
  // then a count of any that were dropped past the limit.
  void render(std::ostream& out, bool color) const;
  std::string render(const Diagnostic& d, bool color) const;
  // "file:line:col" of a range, or "" when it has no location.
  std::string location(SourceRange range) const;

 private:
  Builder report(Severity severity, DiagKind kind, SourceRange range, std::string message);

  const SourceManager& sources_;
  size_t max_errors_;
  size_t error_count_ = 0;
  size_t dropped_ = 0;
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace dstc
