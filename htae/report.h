// Printers of a simulation report: a short table for people, JSON for
// scripts (every field in docs/simulator.md), and a Chrome trace-event file
// that Perfetto and chrome://tracing open.
#pragma once

#include <iosfwd>

#include "htae/simulator.h"
#include "ir/module.h"

namespace dstc::htae {

void print_report_text(std::ostream& out, const SimReport& report);
void print_report_json(std::ostream& out, const SimReport& report);
// Needs report.trace (SimOptions::record_trace); `f` is the simulated function.
void write_chrome_trace(std::ostream& out, const ir::Module& module, const ir::Function& f, const SimReport& report);

}  // namespace dstc::htae
