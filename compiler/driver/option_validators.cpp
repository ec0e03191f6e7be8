// Validators for option values: words of a fixed list, paths to write.
#include <fmt/format.h>

#include "compiler/driver/command.h"
#include "compiler/frontend/program.h"
#include "ir/source/spelling.h"

namespace dstc {

CLI::Validator one_of(std::vector<std::string> choices) {
  std::string listed = fmt::format("{{{}}}", fmt::join(choices, ","));
  return CLI::Validator(
      [choices = std::move(choices)](std::string& value) -> std::string {
        std::string word = lowercase(value);
        if (std::find(choices.begin(), choices.end(), word) != choices.end()) {
          value = word;
          return "";
        }
        std::string message = fmt::format("'{}' is not one of {}", value, fmt::join(choices, ", "));
        if (std::optional<std::string> meant = closest_spelling(word, choices))
          message += fmt::format("; did you mean '{}'?", *meant);
        return message;
      },
      listed);
}

CLI::Validator non_empty_path() {
  return CLI::Validator([](std::string& value) -> std::string { return value.empty() ? "the path is empty" : ""; },
                        "PATH");
}

CLI::Validator found_in_stdlib() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (std::optional<std::string> found = frontend::resolve_relative("", value)) {
          value = *found;
          return "";
        }
        if (std::optional<std::string> meant = frontend::closest_existing_path("", value))
          return fmt::format("cannot find '{}' here or in the stdlib; did you mean '{}'?", value, *meant);
        return "";  // the reader says why it cannot be read
      },
      "");
}

}  // namespace dstc
