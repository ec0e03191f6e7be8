// The reference executor: runs one function of an explicit-schedule IR
// module with real numbers on the CPU. Every device's values are held
// separately; ops run in program order (a valid sequential execution: each
// recv comes after its send); a compute op runs on each member of its device
// set, a collective once per group, exactly (an all-reduce sums the members'
// buffers). Beside the numbers it tracks which mesh axes each value is
// partial on (partial_tracking.h) and stops at the first op that reads a
// partial sum as a value or whose result's declared layout disagrees.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/reference/arithmetic.h"
#include "backends/reference/host_tensor.h"
#include "backends/reference/logical_layout.h"
#include "backends/reference/partial_tracking.h"
#include "ir/module.h"

namespace dstc::reference {

struct ExecutorOptions {
  Arithmetic arithmetic = Arithmetic::F32;
  bool check_layouts = true;               // infer partial axes and compare with declared layouts
  std::function<void(ir::OpId)> after_op;  // called after each op that ran (progress reports)
};

// An argument's logical value is asked for once; each device gets its part
// per the argument's layout.
struct ArgumentRequest {
  std::string name;
  ir::ArgKind kind = ir::ArgKind::Param;
  ir::DType dtype = ir::DType::F32;
  std::vector<int64_t> logical_shape;
  ir::InputData data;     // Input arguments: how the IR says to make them up
  std::string data_name;  // data.data's text, or `name` when the IR gives none
};
// The logical value, or nullopt with `error` set.
using ArgumentSource = std::function<std::optional<HostTensor>(const ArgumentRequest&, std::string& error)>;

struct ExecutionProblem {
  enum Kind : uint8_t {
    PartialRead,     // an op reads a partial value where it needs the whole one
    LayoutMismatch,  // a result's declared layout disagrees with what the op computes
    Argument,        // an argument could not be provided
    Runtime,         // a kernel failed (e.g. a label outside the classes), or a malformed program
  };
  Kind kind = Runtime;
  ir::OpId op = ir::kNone;  // kNone: an argument
  ir::ValueId value = ir::kNone;
  std::string message;
};

class Execution {
 public:
  Execution(const ir::Module& module, const ir::Function& function);

  // The first problem; execution stopped there.
  std::optional<ExecutionProblem> problem;

  const ir::Module& module() const { return *module_; }
  const ir::Function& function() const { return *function_; }
  bool computed(ir::ValueId v) const { return computed_[v] != 0; }
  // A device's local value (nullptr when the value does not live there).
  const HostTensor* local(ir::ValueId v, ir::Rank r) const;
  // The logical tensor a computed value stands for, from its layout.
  GatheredTensor logical(ir::ValueId v) const;
  PartialAxes inferred_partial(ir::ValueId v) const { return partial_[v]; }
  // Ops executed, and the wall time of the run.
  size_t ops_run = 0;
  double seconds = 0;

 private:
  friend class ExecutorRun;
  const ir::Module* module_;
  const ir::Function* function_;
  std::vector<std::vector<HostTensor>> locals_;  // [value][member position in the value's device set]
  std::vector<uint8_t> computed_;
  std::vector<PartialAxes> partial_;
  std::vector<std::vector<int32_t>> positions_;  // [device set][rank] -> member position, or -1
  int32_t position(ir::DeviceSetId set, ir::Rank r) const { return positions_[set][static_cast<size_t>(r)]; }
};

Execution execute(const ir::Module& module, const ir::Function& function, const ArgumentSource& arguments,
                  const ExecutorOptions& options = {});

// An argument's logical value from `arguments`, checked against its shape
// and rounded to `arithmetic`; nullopt with `error` set.
std::optional<HostTensor> logical_argument(const ir::Module& module, const ir::Function& function, const ir::Arg& arg,
                                           const ArgumentSource& arguments, Arithmetic arithmetic, std::string& error);
// The part of an argument's logical value that rank r holds, per its layout.
HostTensor local_argument(const ir::Module& module, const ir::Function& function, ir::ValueId arg,
                          const HostTensor& logical, ir::Rank r);

// The logical shape of a value: its local shape with split dims multiplied
// by the extent of their mesh axes.
std::vector<int64_t> logical_shape(const ir::Module& module, const ir::Function& f, ir::ValueId v);

}  // namespace dstc::reference
