// Index types and small enums shared by the IR's data structures. Everything
// in a module is referred to by 32-bit indexes into vectors (no pointers), so
// a module of millions of ops stays compact and cheap to copy or serialize.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace dstc::ir {

using ValueId = uint32_t;      // index into Function::values
using OpId = uint32_t;         // index into Function::ops (= program order)
using TypeId = uint32_t;       // index into the module's type table
using DeviceSetId = uint32_t;  // index into the module's device-set table
using LayoutId = uint32_t;     // index into the module's layout table; 0 = none
using StrId = uint32_t;        // interned string; 0 = ""
using LocId = uint32_t;        // .dstrat source location; 0 = none
using GroupListId = uint32_t;  // explicit collective groups; 0 = none

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
inline constexpr LayoutId kNoLayout = 0;
inline constexpr LocId kNoLoc = 0;
inline constexpr GroupListId kNoGroups = 0;

enum class OpKind : uint16_t {
#define DSTC_IR_OP(ident, name) ident,
#include "ir/op_kinds.def"
#undef DSTC_IR_OP
};
inline constexpr int kOpKindCount = 0
#define DSTC_IR_OP(ident, name) +1
#include "ir/op_kinds.def"
#undef DSTC_IR_OP
    ;

// The in-order queue of a device an op runs on. Streams of one device run
// concurrently, joined only by data dependencies. Pipeline transfers have a
// queue of their own (as Megatron-LM runs them on their own stream), so a
// send waiting for its receiver never holds up a tensor-parallel collective.
enum class Stream : uint8_t { Compute, Feature, Grad, Pipeline };
inline constexpr int kStreamCount = 4;

// What part of the training step an op belongs to.
enum class Phase : uint8_t { None, Forward, InputGrad, WeightGrad, Recompute, Optimizer };

// Function arguments: model parameters, optimizer state, data inputs, and
// in inference with a KV cache each attention's cached keys and values
// (held across steps, cut from the batch as an input is).
enum class ArgKind : uint8_t { Param, State, Input, Cache };

// Whether an argument of this kind is cut from the batch and describes
// its data (InputData).
inline bool is_batch_data(ArgKind k) { return k == ArgKind::Input || k == ArgKind::Cache; }

std::string_view stream_name(Stream s);
std::string_view phase_name(Phase p);
std::string_view arg_kind_name(ArgKind k);
std::optional<Stream> parse_stream(std::string_view s);
std::optional<Phase> parse_phase(std::string_view s);
std::optional<ArgKind> parse_arg_kind(std::string_view s);

}  // namespace dstc::ir
