// Typed, located reads from TOML tables for the simulator's input files.
// Every schema error (missing key, wrong type, out-of-range value, unknown
// key) is reported through the DiagnosticEngine at the offending key or value
// of the file, which is held in the SourceManager so the diagnostic can show
// the line. Internal to htae: only .cpp files include it (toml++ is heavy).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "ir/source/diagnostics.h"

namespace dstc::htae {

// The values a physical quantity can take on real hardware, with its unit:
// a value outside it is a typo or a unit mistake, caught where it is
// written instead of surfacing later as "the schedule cannot finish".
struct PhysicalRange {
  double min = 0;
  bool min_exclusive = true;
  double max = std::numeric_limits<double>::max();
  std::string_view unit;
};

// A parsed TOML file whose text is in the SourceManager.
struct TomlFile {
  FileId file = kNoFile;
  toml::table root;
};

// Reads and parses `path`; reports config-unreadable or config-syntax.
std::optional<TomlFile> load_toml_file(SourceManager& sources, DiagnosticEngine& diags, const std::string& path);

// The SourceRange of a toml++ source region (a one-line region keeps its
// width; a multi-line one is shown from its first character).
SourceRange range_of(const SourceManager& sources, FileId file, const toml::source_region& region);

// The reads of one table. `name` is the table's dotted name for messages
// ("" for the root table, "gpu", "intra_node.switch[2]").
class TableReader {
 public:
  TableReader(const toml::table& table, std::string name, FileId file, const SourceManager& sources,
              DiagnosticEngine& diags);

  // A number (integer or float) >= min, or > min when `strict`, and <= max.
  std::optional<double> number(std::string_view key, bool required, double min = 0, bool strict = true,
                               double max = std::numeric_limits<double>::max());
  // A number within a physical range.
  std::optional<double> number(std::string_view key, bool required, const PhysicalRange& range);
  // An integer in [min, max].
  std::optional<int64_t> integer(std::string_view key, bool required, int64_t min = 1,
                                 int64_t max = std::numeric_limits<int64_t>::max());
  std::optional<std::string> string(std::string_view key, bool required);
  const toml::table* table(std::string_view key, bool required);
  const toml::array* array(std::string_view key, bool required);
  // Marks a key as part of the schema without reading it.
  void allow(std::string_view key) { known_.insert(std::string(key)); }

  // Reports each key that no read above asked for (config-unknown-key),
  // with the closest known key as a suggestion.
  void reject_unknown_keys();

  // Whether a read through this reader reported an error.
  bool failed() const { return failed_; }
  const std::string& name() const { return name_; }
  std::string qualified(std::string_view key) const;
  SourceRange range(const toml::node& node) const { return range_of(sources_, file_, node.source()); }
  SourceRange key_range(std::string_view key) const;
  SourceRange table_range() const { return range(table_); }
  FileId file() const { return file_; }
  const SourceManager& sources() const { return sources_; }
  DiagnosticEngine& diags() { return diags_; }
  // Reports config-wrong-type for `node`, expected `what`.
  void wrong_type(const toml::node& node, std::string_view key, std::string_view what);

 private:
  const toml::node* find(std::string_view key, bool required, std::string_view what);

  const toml::table& table_;
  std::string name_;
  FileId file_;
  const SourceManager& sources_;
  DiagnosticEngine& diags_;
  std::set<std::string, std::less<>> known_;
  bool failed_ = false;
};

// The TOML type of a node in words ("a string", "an array").
std::string_view toml_type_name(const toml::node& node);

// Reads an integer array element (config-wrong-type when it is not one).
std::optional<int64_t> integer_element(TableReader& reader, const toml::node& node, std::string_view key);

}  // namespace dstc::htae
