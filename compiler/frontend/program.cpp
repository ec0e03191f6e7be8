#include "compiler/frontend/program.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/frontend/parser.h"
#include "ir/source/diagnostic_kinds.h"
#include "ir/source/spelling.h"

#ifndef DSTC_STDLIB_DIR
#error "DSTC_STDLIB_DIR must be defined by the build"
#endif

namespace fs = std::filesystem;

namespace dstc::frontend {
namespace {

// A path for diagnostics: relative to the working directory when under it.
std::string display_path(const fs::path& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec).lexically_normal();
  if (ec) return p.generic_string();
  fs::path cwd = fs::current_path(ec);
  if (ec) return abs.generic_string();
  fs::path rel = abs.lexically_relative(cwd);
  if (!rel.empty() && *rel.begin() != "..") return rel.generic_string();
  return abs.generic_string();
}

std::string canonical_path(const std::string& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(fs::path(p), ec);
  return ec ? fs::absolute(p).lexically_normal().generic_string() : c.generic_string();
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

class Loader {
 public:
  Loader(Program& program, SourceManager& sources, DiagnosticEngine& diags)
      : program_(program), sources_(sources), diags_(diags) {}

  // Loads a file (once); returns its index or nullopt when unreadable.
  std::optional<size_t> load(const std::string& path, SourceRange imported_at, std::optional<std::string> text) {
    std::string canonical = canonical_path(path);
    for (size_t i = 0; i < program_.files.size(); ++i) {
      if (program_.files[i]->canonical == canonical) return i;
    }
    FileId id = kNoFile;
    if (text) {
      id = sources_.add(path, std::move(*text));
    } else {
      std::string error;
      std::optional<FileId> loaded = sources_.load(path, error, kMaxDstratBytes);
      if (!loaded) {
        diags_.error(diag::kFileNotFound, imported_at, fmt::format("cannot read '{}': {}", path, error));
        return std::nullopt;
      }
      id = *loaded;
    }
    auto file = std::make_unique<LoadedFile>();
    file->id = id;
    file->path = path;
    file->canonical = canonical;
    size_t index = program_.files.size();
    program_.files.push_back(std::move(file));
    if (std::optional<FileAst> ast = parse_file(id, diags_)) program_.files[index]->ast = std::move(*ast);
    program_.files[index]->ast.file = id;
    index_declarations(index);
    return index;
  }

  // Depth-first over imports; `stack` holds the chain being loaded.
  void load_imports(size_t index) {
    stack_.push_back(index);
    on_stack_.insert(index);
    for (const Item& item : program_.files[index]->ast.items) {
      const auto* imp = std::get_if<ImportDecl>(&item);
      if (!imp) continue;
      std::optional<std::string> resolved = resolve_relative(program_.files[index]->path, imp->path);
      if (!resolved) {
        auto error = diags_.error(diag::kFileNotFound, imp->range,
                                  fmt::format("cannot find '{}' next to this file or in the stdlib ({})", imp->path,
                                              display_path(stdlib_dir())));
        if (std::optional<std::string> meant = closest_existing_path(program_.files[index]->path, imp->path))
          error.note(fmt::format("did you mean \"{}\"?", *meant));
        continue;
      }
      size_t before = program_.files.size();
      std::optional<size_t> target = load(*resolved, imp->range, std::nullopt);
      if (!target) continue;
      program_.files[index]->imports.push_back(*target);
      if (on_stack_.count(*target)) {
        std::string cycle;
        auto start = std::find(stack_.begin(), stack_.end(), *target);
        for (auto it = start; it != stack_.end(); ++it) cycle += program_.files[*it]->path + " -> ";
        cycle += program_.files[*target]->path;
        diags_.error(diag::kImportCycle, imp->range, fmt::format("import cycle: {}", cycle));
        continue;
      }
      if (*target >= before) load_imports(*target);
    }
    stack_.pop_back();
    on_stack_.erase(index);
  }

 private:
  void index_declarations(size_t index) {
    auto add = [&](const std::string& name, DeclRef ref) {
      auto [it, inserted] = program_.decls.emplace(name, ref);
      if (!inserted) {
        diags_.error(diag::kDuplicateName, ref.name_range, fmt::format("'{}' is already declared", name))
            .note(it->second.name_range, "first declared here");
      }
    };
    for (const Item& item : program_.files[index]->ast.items) {
      if (const auto* c = std::get_if<ComponentDecl>(&item)) {
        DeclKind kind = c->kind == ComponentKind::Layer    ? DeclKind::Layer
                        : c->kind == ComponentKind::Module ? DeclKind::Module
                                                           : DeclKind::Model;
        add(c->name, DeclRef{kind, index, c, nullptr, nullptr, c->name_range});
      } else if (const auto* s = std::get_if<StrategyDecl>(&item)) {
        add(s->name, DeclRef{DeclKind::Strategy, index, nullptr, s, nullptr, s->name_range});
      } else if (const auto* q = std::get_if<SearchDecl>(&item)) {
        add(q->name, DeclRef{DeclKind::Search, index, nullptr, nullptr, q, q->name_range});
      }
    }
  }

  Program& program_;
  SourceManager& sources_;
  DiagnosticEngine& diags_;
  std::vector<size_t> stack_;
  std::set<size_t> on_stack_;
};

}  // namespace

std::string stdlib_dir() {
  if (const char* env = std::getenv("DSTC_STDLIB"); env && *env) return env;
  return DSTC_STDLIB_DIR;
}

std::optional<std::string> resolve_relative(const std::string& from_file, const std::string& path) {
  if (path.empty()) return std::nullopt;
  fs::path written(path);
  if (written.is_absolute()) {
    if (is_file(written)) return display_path(written);
    return std::nullopt;
  }
  fs::path beside = fs::path(from_file).parent_path() / written;
  if (is_file(beside)) return display_path(beside);
  fs::path in_stdlib = fs::path(stdlib_dir()) / written;
  if (is_file(in_stdlib)) return display_path(in_stdlib);
  return std::nullopt;
}

std::optional<std::string> closest_existing_path(const std::string& from_file, const std::string& path) {
  fs::path written(path);
  std::vector<fs::path> folders;
  if (written.is_absolute()) {
    folders.push_back(written.parent_path());
  } else {
    folders.push_back(fs::path(from_file).parent_path() / written.parent_path());
    folders.push_back(fs::path(stdlib_dir()) / written.parent_path());
  }
  for (const fs::path& folder : folders) {
    std::error_code error;
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
      if (entry.is_regular_file(error)) names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());  // directory order is the file system's
    if (std::optional<std::string> meant = closest_spelling(written.filename().string(), names))
      return (written.parent_path() / *meant).string();
  }
  return std::nullopt;
}

std::string_view decl_kind_name(DeclKind k) {
  switch (k) {
    case DeclKind::Layer: return "layer";
    case DeclKind::Module: return "module";
    case DeclKind::Model: return "model";
    case DeclKind::Strategy: return "strategy";
    case DeclKind::Search: return "search";
  }
  return "declaration";
}

size_t Program::file_index(FileId id) const {
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i]->id == id) return i;
  }
  return 0;
}

const std::set<size_t>& Program::visible_files(size_t from_file) const {
  auto it = visible_.find(from_file);
  if (it != visible_.end()) return it->second;
  std::set<size_t> seen{from_file};
  std::vector<size_t> work{from_file};
  while (!work.empty()) {
    size_t f = work.back();
    work.pop_back();
    for (size_t dep : files[f]->imports) {
      if (seen.insert(dep).second) work.push_back(dep);
    }
  }
  return visible_.emplace(from_file, std::move(seen)).first->second;
}

const DeclRef* Program::find_visible(const std::string& name, size_t from_file) const {
  auto it = decls.find(name);
  if (it == decls.end() || !visible_files(from_file).count(it->second.file)) return nullptr;
  return &it->second;
}

const DeclRef* Program::lookup(const std::string& name, size_t from_file, SourceRange use, std::string_view wanted,
                               DiagnosticEngine& diags) const {
  auto it = decls.find(name);
  if (it == decls.end()) {
    auto error = diags.error(diag::kUnknownName, use, fmt::format("unknown {} '{}'", wanted, name));
    std::vector<std::string> visible;
    for (const auto& [candidate, ref] : decls) {
      if (visible_files(from_file).count(ref.file)) visible.push_back(candidate);
    }
    if (std::optional<std::string> meant = closest_spelling(name, visible))
      error.note(decls.at(*meant).name_range, fmt::format("did you mean '{}'?", *meant));
    return nullptr;
  }
  if (!visible_files(from_file).count(it->second.file)) {
    diags
        .error(
            diag::kUnknownName, use,
            fmt::format("'{}' is declared in {}, which this file does not import", name, files[it->second.file]->path))
        .note(it->second.name_range, "declared here");
    return nullptr;
  }
  return &it->second;
}

std::unique_ptr<Program> load_program(const std::vector<std::string>& paths, SourceManager& sources,
                                      DiagnosticEngine& diags) {
  auto program = std::make_unique<Program>();
  Loader loader(*program, sources, diags);
  for (const std::string& p : paths) {
    size_t before = program->files.size();
    std::optional<size_t> index = loader.load(p, SourceRange{}, std::nullopt);
    if (!index) continue;
    program->roots.push_back(*index);
    if (*index >= before) loader.load_imports(*index);
  }
  return program;
}

std::unique_ptr<Program> load_program_text(const std::string& path, std::string text, SourceManager& sources,
                                           DiagnosticEngine& diags) {
  auto program = std::make_unique<Program>();
  Loader loader(*program, sources, diags);
  std::optional<size_t> index = loader.load(path, SourceRange{}, std::move(text));
  if (index) {
    program->roots.push_back(*index);
    loader.load_imports(*index);
  }
  return program;
}

}  // namespace dstc::frontend
