#include "compiler/schedule/schedule_table.h"

#include <charconv>

namespace dstc::schedule {

bool ScheduleTable::round_robin() const {
  for (int32_t s = 0; s < static_cast<int32_t>(stage_ranks.size()); ++s)
    if (stage_ranks[static_cast<size_t>(s)] != s % num_ranks) return false;
  return true;
}

int32_t ScheduleTable::stages_on(int32_t rank) const {
  int32_t held = 0;
  for (int32_t s = 0; s < num_stages; ++s) held += rank_of_stage(s) == rank;
  return held;
}

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
