#include "compiler/schedule/schedule_table.h"

#include <charconv>

namespace dstc::schedule {

char action_letter(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward: return 'F';
    case ActionKind::Backward: return 'B';
    case ActionKind::InputGrad: return 'I';
    case ActionKind::WeightGrad: return 'W';
  }
  return '?';
}

std::string to_string(const Action& a) {
  return std::to_string(a.stage) + action_letter(a.kind) + std::to_string(a.micro_batch);
}

std::optional<Action> parse_action(std::string_view text) {
  auto number = [](std::string_view digits) -> std::optional<int32_t> {
    int32_t value = 0;
    if (digits.empty()) return std::nullopt;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
  };
  size_t letter = text.find_first_not_of("0123456789");
  if (letter == std::string_view::npos || letter == 0 || letter + 1 >= text.size()) return std::nullopt;
  Action a;
  switch (text[letter]) {
    case 'F': a.kind = ActionKind::Forward; break;
    case 'B': a.kind = ActionKind::Backward; break;
    case 'I': a.kind = ActionKind::InputGrad; break;
    case 'W': a.kind = ActionKind::WeightGrad; break;
    default: return std::nullopt;
  }
  auto stage = number(text.substr(0, letter));
  auto micro = number(text.substr(letter + 1));
  if (!stage || !micro) return std::nullopt;
  a.stage = *stage;
  a.micro_batch = *micro;
  return a;
}

}  // namespace dstc::schedule
