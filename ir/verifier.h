// Checks a module: SSA (every operand defined once, earlier in program
// order, on every device that uses it), op signatures and attributes, result
// types against the registry's shape rules, layouts, placement, collective
// groups, send/recv pairing, and deadlock freedom of the schedule.
// Diagnostics point at the ops' text when the module was parsed.
#pragma once

#include "ir/module.h"
#include "ir/source/diagnostics.h"

namespace dstc::ir {

// True when the module has no errors; each problem is reported to diags.
// The deadlock check runs only on functions that pass the other checks.
bool verify_module(const Module& module, DiagnosticEngine& diags);

// Executes the program order of every (device, stream) queue with blocking
// collectives and send/recv rendezvous (an op proceeds only when all its
// participants are at it and its operands are computed on that device).
// Reports a stuck state as [ir-deadlock], naming the cycle of ops and ranks
// that wait for each other. Assumes the function passed the other checks.
bool check_deadlock(const Module& module, const Function& f, DiagnosticEngine& diags);

// "%h = matmul(%x, %w)" / "send(%a) channel 3": how diagnostics name an op.
std::string op_label(const Module& module, const Function& f, OpId op);

}  // namespace dstc::ir
