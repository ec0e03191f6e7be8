// dstc schedule: prints a pipeline schedule (built-in or a CSV table) as
// per-rank action lists and a timestep grid, after checking it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <ostream>

#include "compiler/driver/cli.h"
#include "compiler/driver/command.h"
#include "compiler/schedule/schedule_check.h"
#include "compiler/schedule/schedule_csv.h"
#include "compiler/schedule/schedule_generators.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc {
namespace {

struct ScheduleOptions {
  std::string kind = "1f1b";
  std::string table_path;
  int32_t ranks = 0;
  int32_t micro_batches = 0;
  int32_t virtual_stages = 1;
  int32_t max_ongoing = 0;
  bool forward_only = false;
  bool csv = false;
};

schedule::ScheduleKind kind_from_name(const std::string& name) {
  if (name == "gpipe") return schedule::ScheduleKind::GPipe;
  if (name == "interleaved") return schedule::ScheduleKind::Interleaved;
  if (name == "zb_h1") return schedule::ScheduleKind::ZeroBubbleH1;
  if (name == "zb_2p") return schedule::ScheduleKind::ZeroBubble2P;
  if (name == "zb_v") return schedule::ScheduleKind::ZeroBubbleV;
  if (name == "dualpipe_v") return schedule::ScheduleKind::DualPipeV;
  return schedule::ScheduleKind::OneFOneB;
}

void print_summary(std::ostream& out, const schedule::ScheduleTable& table, const schedule::ScheduleRun& run) {
  int64_t busy = 0;
  for (const auto& rank : table.ranks) busy += static_cast<int64_t>(rank.size());
  int64_t slots = int64_t(run.num_steps) * table.num_ranks;
  out << fmt::format("{} steps at one action per step; ranks idle {:.1f}% of the time\n", run.num_steps,
                     slots ? 100.0 * double(slots - busy) / double(slots) : 0.0);
}

// Where stages run when not round-robin (a V, or a table's own placement),
// for the first 16 ranks.
void print_placement(std::ostream& out, const schedule::ScheduleTable& table) {
  constexpr int32_t kShownRanks = 16;
  std::vector<std::vector<int32_t>> held(static_cast<size_t>(std::min(table.num_ranks, kShownRanks)));
  for (int32_t s = 0; s < table.num_stages; ++s)
    if (int32_t r = table.rank_of_stage(s); r < kShownRanks) held[r].push_back(s);
  out << "stages:";
  for (size_t r = 0; r < held.size(); ++r)
    out << fmt::format("{} rank {} holds {}", r ? ";" : "", r, fmt::join(held[r], ", "));
  if (table.num_ranks > kShownRanks) out << fmt::format("; {} more ranks", table.num_ranks - kShownRanks);
  out << "\n";
}

int run_schedule(const ScheduleOptions& o, CommandContext& ctx) {
  SourceManager sources;
  DiagnosticEngine diags(sources);
  auto finish = [&](int code) {
    diags.render(ctx.err, ctx.color);
    return code;
  };

  std::optional<schedule::ScheduleTable> table;
  std::string title;
  SourceRange origin;  // whole-table errors point at the table's file
  if (!o.table_path.empty()) {
    std::string error;
    std::optional<FileId> file = sources.load(o.table_path, error);
    if (!file) {
      ctx.err << fmt::format("dstc: error: cannot read '{}': {}\n", o.table_path, error);
      return kExitUsage;
    }
    origin = {*file, 0, 0};
    table = schedule::read_schedule_csv(*file, {o.ranks, o.virtual_stages, o.micro_batches}, diags);
    title = fmt::format("schedule table {}", o.table_path);
  } else {
    int32_t virtual_stages = schedule::v_shaped(kind_from_name(o.kind)) && o.virtual_stages == 1
                                 ? schedule::kZeroBubbleVStagesPerRank
                                 : o.virtual_stages;
    schedule::ScheduleRequest request{kind_from_name(o.kind), o.ranks,       virtual_stages,
                                      o.micro_batches,        o.max_ongoing, o.forward_only};
    auto generated = schedule::generate_schedule(request);
    if (auto* message = std::get_if<std::string>(&generated)) {
      diags.error(diag::kScheduleUnavailable, {}, fmt::format("cannot build the {} schedule: {}", o.kind, *message));
      return finish(kExitInputErrors);
    }
    table = std::get<schedule::ScheduleTable>(std::move(generated));
    title = fmt::format("{} schedule", o.kind);
  }
  if (!table) return finish(kExitInputErrors);
  if (!schedule::check_schedule(*table, {o.forward_only, o.max_ongoing, origin}, diags))
    return finish(kExitInputErrors);

  if (o.csv) {
    ctx.out << schedule::write_schedule_csv(*table);
    return finish(kExitSuccess);
  }
  schedule::ScheduleRun run = schedule::run_unit_time(*table);
  ctx.out << fmt::format("{}: {} ranks, {} stages, {} micro-batches\n", title, table->num_ranks, table->num_stages,
                         table->num_micro_batches);
  if (!table->round_robin()) print_placement(ctx.out, *table);
  for (size_t r = 0; r < table->ranks.size(); ++r) {
    ctx.out << fmt::format("rank {}:", r);
    for (const schedule::Action& a : table->ranks[r]) ctx.out << " " << schedule::to_string(a);
    ctx.out << "\n";
  }
  ctx.out << "\n" << schedule::render_grid(*table, run) << "\n";
  print_summary(ctx.out, *table, run);
  return finish(kExitSuccess);
}

}  // namespace

Command add_schedule_command(CLI::App& root) {
  auto options = std::make_shared<ScheduleOptions>();
  CLI::App* sub = root.add_subcommand("schedule", "Print and check a pipeline schedule (built-in or a CSV table)");
  sub->add_option("--kind", options->kind,
                  "Built-in schedule: gpipe, 1f1b, interleaved, zb_h1, zb_2p, zb_v or dualpipe_v")
      ->transform(one_of({"gpipe", "1f1b", "interleaved", "zb_h1", "zb_2p", "zb_v", "dualpipe_v"}))
      ->capture_default_str();
  sub->add_option("--table", options->table_path,
                  "A CSV schedule table (torch.distributed.pipelining format: a row per rank, cells like 0F1)")
      ->excludes("--kind");
  sub->add_option("--ranks", options->ranks, "Pipeline ranks")->required()->check(CLI::Range(1, 1 << 16));
  sub->add_option("--micro-batches", options->micro_batches, "Micro-batches per step")
      ->required()
      ->check(CLI::Range(1, 1 << 16));
  sub->add_option("--virtual-stages", options->virtual_stages, "Stages per rank (interleaved, or a table's)")
      ->check(CLI::Range(1, 1 << 10))
      ->capture_default_str();
  sub->add_option("--max-ongoing", options->max_ongoing, "Forward micro-batches in flight before their backward")
      ->check(CLI::Range(1, 1 << 16));
  sub->add_flag("--forward-only", options->forward_only, "Inference: forwards only");
  sub->add_flag("--csv", options->csv, "Print the table as CSV instead of the grid");
  return {sub, [options](CommandContext& ctx) { return run_schedule(*options, ctx); }};
}

}  // namespace dstc
