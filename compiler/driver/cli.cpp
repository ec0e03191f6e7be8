#include "compiler/driver/cli.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <ostream>

#include <fmt/format.h>

#include "compiler/driver/command.h"
#include "ir/source/spelling.h"

#ifndef DSTC_VERSION
#error "DSTC_VERSION must be defined by the build"
#endif

namespace dstc {

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const CliEnvironment& env) {
  CLI::App app{"dstc: compile, simulate, verify and run distributed training strategies", "dstc"};
  app.set_version_flag("--version", "dstc " DSTC_VERSION);
  app.require_subcommand(0, 1);
  app.fallthrough();
  std::string color_mode = "auto";
  app.add_option("--color", color_mode, "Colour diagnostics: auto, always or never")
      ->transform(one_of({"auto", "always", "never"}))
      ->capture_default_str();

  std::vector<Command> commands = {
      add_check_command(app),   add_fmt_command(app),      add_compile_command(app),   add_verify_command(app),
      add_search_command(app),  add_run_command(app),      add_calibrate_command(app), add_ir_command(app),
      add_cluster_command(app), add_schedule_command(app), add_simulate_command(app),
  };

  // An unknown first word is most often a misspelt subcommand: say so.
  if (!args.empty() && !args.front().empty() && args.front().front() != '-') {
    const std::string& word = args.front();
    bool known =
        std::any_of(commands.begin(), commands.end(), [&](const Command& c) { return c.app->get_name() == word; });
    if (!known) {
      err << fmt::format("dstc: error: unknown subcommand '{}'", word);
      std::vector<std::string> names;
      for (const Command& c : commands) names.push_back(c.app->get_name());
      if (std::optional<std::string> meant = closest_spelling(word, names))
        err << fmt::format("; did you mean '{}'?", *meant);
      err << "\nRun 'dstc --help' for the list of subcommands.\n";
      return kExitUsage;
    }
  }

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    // Help for the deepest subcommand the user named.
    const CLI::App* shown = &app;
    for (bool deeper = true; deeper;) {
      deeper = false;
      for (const CLI::App* sub : shown->get_subcommands()) {
        shown = sub;
        deeper = true;
        break;
      }
    }
    out << shown->help();
    return kExitSuccess;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitSuccess;
  } catch (const CLI::CallForVersion&) {
    out << "dstc " DSTC_VERSION "\n";
    return kExitSuccess;
  } catch (const CLI::ParseError& e) {
    err << "dstc: error: " << e.what() << "\nRun 'dstc --help' for usage.\n";
    return kExitUsage;
  }

  CommandContext ctx{out, err};
  ctx.color = color_mode == "always" || (color_mode == "auto" && env.err_is_terminal && !env.no_color);
  ctx.out_is_terminal = env.out_is_terminal;
  ctx.err_is_terminal = env.err_is_terminal;
  for (Command& c : commands) {
    if (c.app->parsed()) {
      int code = kExitInternal;
      try {
        code = c.run(ctx);
      } catch (const std::exception& e) {
        err << "dstc: internal error: " << e.what() << "\n";
        return kExitInternal;
      }
      errno = 0;
      out.flush();
      if (out.fail()) {
        err << fmt::format("dstc: error: cannot write the output{}\n",
                           errno ? fmt::format(": {}", std::strerror(errno)) : "");
        return code == kExitSuccess ? kExitInputErrors : code;
      }
      return code;
    }
  }
  err << "dstc: error: no subcommand given\nRun 'dstc --help' for usage.\n";
  return kExitUsage;
}

}  // namespace dstc
