// The IR's canonical text form (documented in docs/ir.md). Printing a parsed
// module gives back the text that parses to it: print -> parse -> print is
// the identity.
#pragma once

#include <string>

#include "ir/module.h"

namespace dstc::ir {

std::string print_module(const Module& module);
void print_module(const Module& module, std::string& out);
// "world[pp=0, dp=0..2]", "world{0, 5}", or "world" for the whole mesh.
std::string print_devices(const Module& module, DeviceSetId set);
// One rank's coordinates: "world[pp=0, dp=1, tp=1]".
std::string print_rank_coords(const Mesh& mesh, Rank rank);
// "sbp(pp=B, dp=S(0), tp=P(sum))".
std::string print_layout(const Module& module, LayoutId layout);
// One op on one line, without indentation or newline.
std::string print_op(const Module& module, const Function& f, const Op& op);
// Pieces of an op line, as print_op writes them: " {a = 1, b = [2, 3]}" or
// "", " <stage=0, mb=1, phase=forward>" or "".
std::string print_attrs(const Module& module, const Function& f, const Op& op);
std::string print_meta(const Module& module, const Op& op);
// An input argument's data description, " {data = \"x\", batch_axis = 0,
// micro_batch = 1, micro_batches = 4, values = 50257}" (the keys that differ
// from their defaults; `data` is left out when it is the argument's own
// name), or "" for other arguments and the default.
std::string print_input_data(const Module& module, const Function& f, const Arg& arg);
// "%x" (or "%<id>" when unnamed).
std::string print_value(const Module& module, const Function& f, ValueId v);
// A float as the text form writes it: shortest round-trip digits, always
// with a '.' or exponent.
std::string print_float(double v);

}  // namespace dstc::ir
