// Loading a .dstrat program: the files named on the command line, every file
// they import (transitively), and one table of top-level declarations.
//
// `import "path"` is resolved relative to the importing file, then under the
// stdlib directory (stdlib_dir()). A cycle of imports is an error naming the
// cycle. Every top-level name is unique across the program; a file sees the
// declarations of its own file and of the files it imports, directly or
// through other imports.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/frontend/ast.h"
#include "ir/source/diagnostics.h"

namespace dstc::frontend {

// The largest .dstrat file read: a hundred times the largest model in the
// stdlib, and small enough that lexing garbage of this size stays well
// under a gigabyte.
inline constexpr uint64_t kMaxDstratBytes = uint64_t{4} << 20;

// The stdlib directory: $DSTC_STDLIB when set, else the repository's
// stdlib/ folder (compiled in).
std::string stdlib_dir();

// Resolves `path` as written in `from_file`: relative to that file's folder,
// then under the stdlib. The path to open (relative to the working directory
// when it lies under it), or nullopt when neither exists.
std::optional<std::string> resolve_relative(const std::string& from_file, const std::string& path);

// For a `path` written in `from_file` that resolve_relative cannot find:
// the path it most likely misspells (the same folder, the closest file name
// there, beside the file or in the stdlib), or nullopt.
std::optional<std::string> closest_existing_path(const std::string& from_file, const std::string& path);

enum class DeclKind { Layer, Module, Model, Strategy, Search };
std::string_view decl_kind_name(DeclKind k);

struct DeclRef {
  DeclKind kind = DeclKind::Layer;
  size_t file = 0;  // index into Program::files
  const ComponentDecl* component = nullptr;
  const StrategyDecl* strategy = nullptr;
  const SearchDecl* search = nullptr;
  SourceRange name_range;
};

struct LoadedFile {
  FileId id = kNoFile;
  std::string path;       // as opened
  std::string canonical;  // for identity and cycle detection
  FileAst ast;
  std::vector<size_t> imports;  // indexes into Program::files
};

class Program {
 public:
  std::vector<std::unique_ptr<LoadedFile>> files;
  std::vector<size_t> roots;  // the files named by the user
  std::map<std::string, DeclRef> decls;

  // The declaration `name` as seen from `from_file`; reports unknown or
  // not-imported names at `use` (with `wanted` in the message) and returns
  // null then.
  const DeclRef* lookup(const std::string& name, size_t from_file, SourceRange use, std::string_view wanted,
                        DiagnosticEngine& diags) const;
  // Without reporting: null when unknown or not visible.
  const DeclRef* find_visible(const std::string& name, size_t from_file) const;
  size_t file_index(FileId id) const;

 private:
  const std::set<size_t>& visible_files(size_t from_file) const;
  mutable std::map<size_t, std::set<size_t>> visible_;
};

// Loads, parses and indexes the files at `paths` and their imports. Errors
// (unreadable files, syntax, cycles, duplicate names) go to `diags`; the
// program holds whatever parsed.
std::unique_ptr<Program> load_program(const std::vector<std::string>& paths, SourceManager& sources,
                                      DiagnosticEngine& diags);

// The same from text already in memory (tests, the fuzzer, benchmarks).
// Imports are still resolved on disk.
std::unique_ptr<Program> load_program_text(const std::string& path, std::string text, SourceManager& sources,
                                           DiagnosticEngine& diags);

}  // namespace dstc::frontend
