#include "htae/toml_reader.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"
#include "ir/source/spelling.h"

namespace dstc::htae {
namespace {

std::string format_number(double v) { return fmt::format("{:g}", v); }

}  // namespace

std::string_view toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date or time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::optional<TomlFile> load_toml_file(SourceManager& sources, DiagnosticEngine& diags, const std::string& path) {
  std::string error;
  std::optional<FileId> file = sources.find(path);
  if (!file) file = sources.load(path, error);
  if (!file) {
    diags.error(diag::kConfigUnreadable, {}, fmt::format("cannot read '{}': {}", path, error));
    return std::nullopt;
  }
  TomlFile result;
  result.file = *file;
  try {
    result.root = toml::parse(sources.file(*file).text, path);
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    SourceRange range =
        at.line > 0 ? sources.range_at(*file, at.line, std::max<uint32_t>(at.column, 1)) : SourceRange{};
    diags.error(diag::kConfigSyntax, range, fmt::format("invalid TOML: {}", e.description()));
    return std::nullopt;
  }
  return result;
}

SourceRange range_of(const SourceManager& sources, FileId file, const toml::source_region& region) {
  if (region.begin.line == 0) return sources.range_at(file, 1, 1);
  uint32_t length = 1;
  if (region.end.line == region.begin.line && region.end.column > region.begin.column) {
    length = region.end.column - region.begin.column;
  }
  return sources.range_at(file, region.begin.line, std::max<uint32_t>(region.begin.column, 1), length);
}

TableReader::TableReader(const toml::table& table, std::string name, FileId file, const SourceManager& sources,
                         DiagnosticEngine& diags)
    : table_(table), name_(std::move(name)), file_(file), sources_(sources), diags_(diags) {}

std::string TableReader::qualified(std::string_view key) const {
  return name_.empty() ? std::string(key) : fmt::format("{}.{}", name_, key);
}

SourceRange TableReader::key_range(std::string_view key) const {
  for (const auto& [k, v] : table_) {
    if (k.str() == key) return range_of(sources_, file_, k.source());
  }
  return table_range();
}

void TableReader::wrong_type(const toml::node& node, std::string_view key, std::string_view what) {
  failed_ = true;
  diags_.error(diag::kConfigWrongType, range(node),
               fmt::format("'{}' must be {}, not {}", qualified(key), what, toml_type_name(node)));
}

const toml::node* TableReader::find(std::string_view key, bool required, std::string_view what) {
  known_.insert(std::string(key));
  const toml::node* node = table_.get(key);
  if (!node && required) {
    failed_ = true;
    std::string where = name_.empty() ? "the cluster file" : fmt::format("[{}]", name_);
    diags_.error(diag::kConfigMissingField, table_range(),
                 fmt::format("missing required key '{}' ({}) in {}", qualified(key), what, where));
  }
  return node;
}

std::optional<double> TableReader::number(std::string_view key, bool required, double min, bool strict, double max) {
  return number(key, required, PhysicalRange{min, strict, max, ""});
}

std::optional<double> TableReader::number(std::string_view key, bool required, const PhysicalRange& bounds) {
  const toml::node* node = find(key, required, "a number");
  if (!node) return std::nullopt;
  std::optional<double> value;
  if (auto i = node->value_exact<int64_t>())
    value = static_cast<double>(*i);
  else if (auto f = node->value_exact<double>())
    value = *f;
  if (!value) {
    wrong_type(*node, key, "a number");
    return std::nullopt;
  }
  bool too_small = bounds.min_exclusive ? *value <= bounds.min : *value < bounds.min;
  if (!std::isfinite(*value) || too_small || *value > bounds.max) {
    failed_ = true;
    std::string unit = bounds.unit.empty() ? "" : fmt::format(" {}", bounds.unit);
    std::string wanted =
        bounds.max == std::numeric_limits<double>::max()
            ? fmt::format("{} {}{}", bounds.min_exclusive ? "greater than" : "at least", format_number(bounds.min),
                          unit)
            : fmt::format("{} {}{} and at most {}{}", bounds.min_exclusive ? "greater than" : "at least",
                          format_number(bounds.min), unit, format_number(bounds.max), unit);
    diags_.error(diag::kConfigBadValue, range(*node),
                 fmt::format("'{}' must be {}, not {}", qualified(key), wanted, format_number(*value)));
    return std::nullopt;
  }
  return value;
}

std::optional<int64_t> TableReader::integer(std::string_view key, bool required, int64_t min, int64_t max) {
  const toml::node* node = find(key, required, "an integer");
  if (!node) return std::nullopt;
  std::optional<int64_t> value = node->value_exact<int64_t>();
  if (!value) {
    wrong_type(*node, key, "an integer");
    return std::nullopt;
  }
  if (*value < min || *value > max) {
    failed_ = true;
    diags_.error(diag::kConfigBadValue, range(*node),
                 max == std::numeric_limits<int64_t>::max()
                     ? fmt::format("'{}' must be at least {}, not {}", qualified(key), min, *value)
                     : fmt::format("'{}' must be from {} to {}, not {}", qualified(key), min, max, *value));
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> TableReader::string(std::string_view key, bool required) {
  const toml::node* node = find(key, required, "a string");
  if (!node) return std::nullopt;
  std::optional<std::string> value = node->value_exact<std::string>();
  if (!value) wrong_type(*node, key, "a string");
  return value;
}

const toml::table* TableReader::table(std::string_view key, bool required) {
  const toml::node* node = find(key, required, "a table");
  if (!node) return nullptr;
  if (!node->is_table()) {
    wrong_type(*node, key, "a table");
    return nullptr;
  }
  return node->as_table();
}

const toml::array* TableReader::array(std::string_view key, bool required) {
  const toml::node* node = find(key, required, "an array");
  if (!node) return nullptr;
  if (!node->is_array()) {
    wrong_type(*node, key, "an array");
    return nullptr;
  }
  return node->as_array();
}

void TableReader::reject_unknown_keys() {
  for (const auto& [k, v] : table_) {
    if (known_.contains(k.str())) continue;
    failed_ = true;
    std::string where = name_.empty() ? "at the top level" : fmt::format("in [{}]", name_);
    auto builder = diags_.error(diag::kConfigUnknownKey, range_of(sources_, file_, k.source()),
                                fmt::format("unknown key '{}' {}", k.str(), where));
    if (std::optional<std::string> meant = closest_spelling(k.str(), {known_.begin(), known_.end()}))
      builder.note(fmt::format("did you mean '{}'?", *meant));
  }
}

std::optional<int64_t> integer_element(TableReader& reader, const toml::node& node, std::string_view key) {
  std::optional<int64_t> value = node.value_exact<int64_t>();
  if (!value) reader.wrong_type(node, key, "an array of integers");
  return value;
}

}  // namespace dstc::htae
