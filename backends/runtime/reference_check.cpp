#include "backends/runtime/reference_check.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "backends/reference/returned_values.h"

namespace dstc::runtime {

namespace {

// The largest element error of `actual` against `expected`.
double worst_error(std::span<const double> actual, std::span<const double> expected) {
  double squares = 0;
  for (double e : expected)
    if (!std::isnan(e)) squares += e * e;
  const double rms = expected.empty() ? 0 : std::sqrt(squares / static_cast<double>(expected.size()));
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i]) && std::isnan(actual[i])) continue;
    double error = std::abs(actual[i] - expected[i]) / (std::abs(expected[i]) + rms);
    if (std::isnan(error)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, error);
  }
  return worst;
}

bool lives_on(const ir::Module& m, const ir::Function& f, ir::ValueId v, ir::Rank r) {
  std::span<const ir::Rank> members = m.members(f.values[v].devices);
  return std::find(members.begin(), members.end(), r) != members.end();
}

// What the rank holds of a returned value, or NaNs of its shape.
reference::HostTensor held(const RankExecutor& executor, ir::ValueId v) {
  if (std::optional<reference::HostTensor> t = executor.returned(v)) return *t;
  reference::HostTensor missing(executor.module().value_type(executor.function(), v));
  std::fill(missing.data.begin(), missing.data.end(), std::numeric_limits<double>::quiet_NaN());
  return missing;
}

}  // namespace

ReferenceCheck check_against_reference(const RankExecutor& executor, Communicator& comm,
                                       const reference::ArgumentSource& arguments,
                                       const reference::ExecutorOptions& options, double tolerance) {
  const ir::Module& m = executor.module();
  const ir::Function& f = executor.function();
  const std::vector<ir::ValueId>& returns = f.returns;
  ReferenceCheck check;
  check.tolerance = tolerance;
  comm.barrier();
  if (comm.rank() != 0) {
    // Every value the rank should hold, NaN where it does not: rank 0
    // receives the same messages whatever the rank computed.
    for (size_t i = 0; i < returns.size(); ++i)
      if (lives_on(m, f, returns[i], comm.rank()))
        comm.send(held(executor, returns[i]).data, 0, static_cast<uint32_t>(i));
    comm.barrier();
    return check;
  }
  reference::Execution expected = reference::execute(m, f, arguments, options);
  const std::vector<ir::ValueId> updates = reference::next_step_arguments(m, f);
  check.passed = true;
  for (ir::Rank r = 0; r < comm.size(); ++r) {
    for (size_t i = 0; i < returns.size(); ++i) {
      ir::ValueId v = returns[i];
      if (!lives_on(m, f, v, r)) continue;
      reference::HostTensor actual(m.value_type(f, v));
      if (r == 0)
        actual = held(executor, v);
      else
        comm.recv(actual.data, r, static_cast<uint32_t>(i));
      if (expected.problem || !check.failure.empty()) continue;  // still receive every message
      const reference::HostTensor* e = expected.local(v, r);
      std::string name = updates[i] == ir::kNone ? m.value_name(f, v) : "updated " + m.value_name(f, updates[i]);
      double error = e ? worst_error(actual.data, e->data) : std::numeric_limits<double>::infinity();
      ++check.compared;
      if (error >= check.worst_error) {
        check.worst_error = error;
        check.worst_tensor = name;
        check.worst_rank = r;
      }
      if (!(error <= tolerance)) {
        check.passed = false;
        check.failure = fmt::format("{} on rank {} differs from the reference by {:.3g}", name, r, error);
      }
    }
  }
  if (expected.problem) {
    check.passed = false;
    check.failure = "the reference executor could not run the program: " + expected.problem->message;
  }
  comm.barrier();
  return check;
}

}  // namespace dstc::runtime
