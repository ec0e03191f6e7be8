#include "backends/reference/verify.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <ostream>

#include <fmt/format.h>

#include "backends/reference/argument_values.h"
#include "backends/reference/kernels.h"
#include "backends/reference/returned_values.h"
#include "ir/printer.h"
#include "ir/registry.h"
#include "ir/replica_names.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::reference {

namespace {

// The tensors of one program that verification compares, by logical name.
struct Catalog {
  std::vector<ir::ValueId> losses;
  std::vector<std::pair<std::string, ir::ValueId>> tensors;  // gradients first, then updates
  const ir::Function* function = nullptr;

  // Every copy of a logical tensor: a parameter replicated across pipeline
  // stages has one per replica.
  std::vector<ir::ValueId> find(const std::string& name) const {
    std::vector<ir::ValueId> found;
    for (const auto& [n, v] : tensors)
      if (n == name) found.push_back(v);
    return found;
  }
};

Catalog catalog(const ir::Module& m, const ir::Function& f) {
  Catalog c;
  c.function = &f;
  // The parameter an optimizer op updates (through its master copy).
  auto param_of = [&](const ir::Op& opt) {
    ValueSource s = trace_source(m, f, f.operands(opt)[0]);
    std::string name =
        ir::logical_name(s.arg != ir::kNone ? m.value_name(f, s.arg) : m.value_name(f, f.operands(opt)[0]));
    std::string master_of = ir::master_of(name);
    return master_of.empty() ? name : master_of;
  };
  for (const ir::Op& op : f.ops)
    if (ir::op_info(op.kind).category == ir::OpCategory::Optimizer)
      c.tensors.emplace_back("gradient of " + param_of(op), f.operands(op)[1]);
  for (ir::ValueId r : f.returns) {
    ValueSource s = trace_source(m, f, r);
    if (!s.optimizer) {
      c.losses.push_back(r);
      continue;
    }
    std::string what =
        s.result == 0 ? param_of(*s.optimizer)
                      : ir::logical_name(m.value_name(f, f.operands(*s.optimizer)[static_cast<size_t>(s.result) + 1]));
    if (s.cast) what += fmt::format(" ({} copy)", ir::dtype_name(*s.cast));
    c.tensors.emplace_back("updated " + what, r);
  }
  return c;
}

ProgramPlace place_of(const ir::Module& m, const ir::Function& f, ir::OpId op) {
  ProgramPlace p;
  if (op == ir::kNone || op >= f.ops.size()) return p;
  p.op = op;
  p.op_text = ir::print_op(m, f, f.ops[op]);
  if (f.ops[op].loc != ir::kNoLoc) {
    const ir::SourceLoc& loc = m.loc(f.ops[op].loc);
    p.file = m.str(loc.file);
    p.line = loc.line;
    p.column = loc.column;
    p.location = fmt::format("{}:{}:{}", p.file, loc.line, loc.column);
  }
  return p;
}

std::vector<int64_t> unflatten(size_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = static_cast<int64_t>(i) % std::max<int64_t>(shape[d], 1);
    i /= static_cast<size_t>(std::max<int64_t>(shape[d], 1));
  }
  return idx;
}

double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0 : std::sqrt(s / static_cast<double>(v.size()));
}

// The worst element of `actual` against `expected`.
TensorDifference worst_difference(const std::string& name, const HostTensor& expected,
                                  const std::vector<double>& actual) {
  TensorDifference d;
  d.tensor = name;
  const double scale = rms(expected.data);
  size_t worst = 0;
  double worst_error = -1;
  for (size_t i = 0; i < expected.data.size(); ++i) {
    double diff = std::abs(actual[i] - expected.data[i]);
    double err = std::isnan(diff) ? std::numeric_limits<double>::infinity()
                 : diff == 0      ? 0
                                  : diff / (std::abs(expected.data[i]) + scale);
    if (err > worst_error) {
      worst_error = err;
      worst = i;
    }
  }
  d.error = std::max(worst_error, 0.0);
  d.index = unflatten(worst, expected.shape);
  d.expected = expected.data.empty() ? 0 : expected.data[worst];
  d.actual = actual.empty() ? 0 : actual[worst];
  return d;
}

// The whole batch's output from each micro-batch's: added up when they
// have its shape (a loss), else joined along the one dim they cut (`cut`).
std::optional<HostTensor> joined_micro_batches(const std::vector<HostTensor>& parts, const std::vector<int64_t>& whole,
                                               int& cut) {
  HostTensor out(parts.front().dtype, whole);
  cut = -1;
  if (parts.front().shape == whole) {
    for (const HostTensor& p : parts) {
      if (p.shape != whole) return std::nullopt;
      for (size_t i = 0; i < out.data.size(); ++i) out.data[i] += p.data[i];
    }
    return out;
  }
  for (size_t d = 0; d < whole.size(); ++d) {
    if (parts.front().shape.size() != whole.size()) return std::nullopt;
    if (parts.front().shape[d] == whole[d]) continue;
    if (cut >= 0 || parts.front().shape[d] * static_cast<int64_t>(parts.size()) != whole[d]) return std::nullopt;
    cut = static_cast<int>(d);
  }
  std::vector<const HostTensor*> pointers;
  for (const HostTensor& p : parts) {
    if (p.shape != parts.front().shape) return std::nullopt;
    pointers.push_back(&p);
  }
  kernels::concat(pointers, cut, out);
  return out;
}

}  // namespace

double default_tolerance(Arithmetic a) {
  switch (a) {
    case Arithmetic::F32: return 1e-4;
    case Arithmetic::F64: return 1e-9;
    case Arithmetic::Native: return 5e-2;
  }
  return 1e-4;
}

int32_t reference_micro_batches(const ir::Module& strategy, int32_t strategy_micro_batches) {
  for (const ir::Function& f : strategy.functions) {
    for (const ir::Op& op : f.ops) {
      // Statistics over each micro-batch: batch norm's (over each of its
      // `groups` batch shards where they are local), and the token counts
      // of a load-balancing loss over all of its tokens (one count an
      // expert; counts per sequence keep the batch dims, and so do not
      // depend on how the batch is cut).
      if (op.kind == ir::OpKind::BatchNormStats)
        return strategy_micro_batches * static_cast<int32_t>(ir::AttrReader(strategy, f, op).integer("groups"));
      if (op.kind == ir::OpKind::BatchNorm) return strategy_micro_batches;
      if (op.kind == ir::OpKind::CountNonzero && strategy.value_type(f, f.result(op)).rank == 1)
        return strategy_micro_batches;
    }
  }
  return 1;
}

const ir::Function* step_function(const ir::Module& module) {
  const ir::Function* f = module.find_function("train_step");
  return f ? f : module.find_function("forward");
}

VerifyResult compare_programs(const ir::Module& distributed, const ir::Module& single_device,
                              const VerifyOptions& options) {
  VerifyResult r;
  r.tolerance = options.tolerance > 0 ? options.tolerance : default_tolerance(options.arithmetic);
  const ir::Function* fd = step_function(distributed);
  const ir::Function* fs = step_function(single_device);
  if (!fd || !fs || fd->name != fs->name) {
    r.missing = "the step function (train_step or forward)";
    return r;
  }
  r.training = fd->name == "train_step";
  ExecutorOptions exec{options.arithmetic, options.check_layouts, {}};
  auto observe = [&](VerifiedProgram program) {
    if (options.after_op) exec.after_op = [&options, program](ir::OpId op) { options.after_op(program, op); };
  };
  ArgumentSource args = make_argument_source(options.seed);
  observe(VerifiedProgram::SingleDevice);
  Execution single = execute(single_device, *fs, args, exec);
  r.reference_ops = single.ops_run;
  r.reference_seconds = single.seconds;
  if (single.problem) {
    r.reference_problem = single.problem;
    return r;
  }
  observe(VerifiedProgram::Strategy);
  Execution dist = execute(distributed, *fd, args, exec);
  r.devices = static_cast<size_t>(distributed.mesh().size());
  r.ops = dist.ops_run;
  r.seconds = dist.seconds;
  if (dist.problem) {
    r.problem = dist.problem;
    r.at = place_of(distributed, *fd, dist.problem->op);
    return r;
  }

  Catalog cs = catalog(single_device, *fs), cd = catalog(distributed, *fd);
  auto fail_with = [&](TensorDifference d, ir::ValueId v) {
    d.producer = place_of(distributed, *fd, fd->values[v].def);
    r.difference = std::move(d);
    return r;
  };
  auto note = [&](const TensorDifference& d) {
    ++r.tensors_compared;
    if (d.error >= r.worst_error) {
      r.worst_error = d.error;
      r.worst_tensor = d.tensor;
    }
  };
  // Compares one logical tensor; false when it differs (r.difference set).
  auto compare = [&](const std::string& name, const HostTensor& expected, ir::ValueId v) {
    GatheredTensor got = dist.logical(v);
    if (got.logical.shape != expected.shape) {
      r.missing = fmt::format("{} (logical shape [{}] on the strategy, [{}] on one device)", name,
                              fmt::join(got.logical.shape, ", "), fmt::join(expected.shape, ", "));
      return false;
    }
    TensorDifference d = worst_difference(name, expected, got.logical.data);
    note(d);
    if (!(d.error <= r.tolerance)) {
      fail_with(d, v);
      return false;
    }
    double scale = rms(expected.data) + std::numeric_limits<double>::min();
    if (got.replica_difference / scale > r.tolerance) {
      TensorDifference rep;
      rep.tensor = "replicas of " + name;
      rep.error = got.replica_difference / scale;
      rep.rank = got.differing_rank;
      fail_with(rep, v);
      return false;
    }
    return true;
  };

  if (!r.training) {
    // The output of each micro-batch, in micro-batch order; the strategy's
    // are put together as the single device's to compare.
    auto outputs = [](const Execution& run, const ir::Function& f) {
      std::vector<ir::ValueId> values(f.returns.begin(), f.returns.end());
      auto micro_batch = [&](ir::ValueId v) {
        return f.values[v].def == ir::kNone ? -1 : f.ops[f.values[v].def].micro_batch;
      };
      std::stable_sort(values.begin(), values.end(),
                       [&](ir::ValueId a, ir::ValueId b) { return micro_batch(a) < micro_batch(b); });
      std::vector<HostTensor> out;
      for (ir::ValueId v : values) out.push_back(run.logical(v).logical);
      return std::pair{values, out};
    };
    auto [single_values, expected] = outputs(single, *fs);
    auto [dist_values, actual] = outputs(dist, *fd);
    if (expected.empty() || actual.empty()) {
      r.missing = "the model's output";
      return r;
    }
    if (expected.size() == actual.size()) {
      for (size_t i = 0; i < expected.size(); ++i) {
        std::string name = expected.size() == 1 ? "output" : fmt::format("output of micro-batch {}", i);
        if (!compare(name, expected[i], dist_values[i])) return r;
      }
    } else if (expected.size() == 1) {
      int cut = -1;
      if (std::optional<HostTensor> whole = joined_micro_batches(actual, expected[0].shape, cut)) {
        TensorDifference d = worst_difference("output", expected[0], whole->data);
        note(d);
        // The micro-batch whose output holds the worst element.
        size_t part = cut < 0 ? 0 : static_cast<size_t>(d.index[static_cast<size_t>(cut)] / actual[0].dim(cut));
        if (!(d.error <= r.tolerance)) return fail_with(d, dist_values[part]);
      } else {
        r.missing = fmt::format(
            "the model's output (shape [{}] on one device, {} micro-batches of [{}] with the "
            "strategy)",
            fmt::join(expected[0].shape, ", "), actual.size(), fmt::join(actual[0].shape, ", "));
        return r;
      }
    } else {
      r.missing = "the model's output (micro-batched differently)";
      return r;
    }
    r.passed = true;
    return r;
  }

  HostTensor loss(ir::DType::F32, std::span<const int64_t>{});
  for (ir::ValueId v : cs.losses) loss.data[0] += single.logical(v).logical.data[0];
  double dist_loss = 0;
  for (ir::ValueId v : cd.losses) dist_loss += dist.logical(v).logical.data[0];
  r.loss = dist_loss;
  r.reference_loss = loss.data[0];
  if (!cs.losses.empty()) {
    if (cd.losses.empty()) {
      r.missing = "the loss";
      return r;
    }
    TensorDifference d = worst_difference("loss", loss, {dist_loss});
    note(d);
    if (!(d.error <= r.tolerance)) return fail_with(d, cd.losses.front());
  }
  for (const auto& [name, v] : cs.tensors) {
    std::vector<ir::ValueId> copies = cd.find(name);
    if (copies.empty()) {
      r.missing = name;
      return r;
    }
    for (ir::ValueId dv : copies)
      if (!compare(name, single.logical(v).logical, dv)) return r;
  }
  r.passed = true;
  return r;
}

void print_verify_result(std::ostream& out, const VerifyResult& r) {
  auto place = [&](const ProgramPlace& p) {
    if (!p.op_text.empty()) out << fmt::format("  op: {}\n", p.op_text);
    if (!p.location.empty()) out << fmt::format("  at: {}\n", p.location);
  };
  if (r.reference_problem) {
    out << fmt::format("verify: the single-device program failed: {}\n", r.reference_problem->message);
    return;
  }
  if (r.problem) {
    out << fmt::format("verify: FAIL: {}\n", r.problem->message);
    place(r.at);
    return;
  }
  if (!r.missing.empty()) {
    out << fmt::format("verify: FAIL: {} is not comparable between the strategy and the single-device model\n",
                       r.missing);
    return;
  }
  if (r.difference) {
    const TensorDifference& d = *r.difference;
    out << fmt::format("verify: FAIL: {} differs from the single-device model\n", d.tensor);
    if (d.rank >= 0) {
      out << fmt::format(
          "  rank {} holds a copy that differs from the first by {:.3g} of the tensor's rms "
          "(tolerance {:.3g})\n",
          d.rank, d.error, r.tolerance);
    } else {
      out << fmt::format(
          "  worst element [{}]: {:.9g} with the strategy, {:.9g} on one device (error {:.3g}, "
          "tolerance {:.3g})\n",
          fmt::join(d.index, ", "), d.actual, d.expected, d.error, r.tolerance);
    }
    place(d.producer);
    return;
  }
  if (!r.training) {
    out << fmt::format("verify: PASS: the model's output matches the single-device model\n");
    out << fmt::format("  {} tensors compared; worst error {:.3g} ({}); tolerance {:.3g}\n", r.tensors_compared,
                       r.worst_error, r.worst_tensor, r.tolerance);
    return;
  }
  out << fmt::format("verify: PASS: loss, gradients and updated weights match the single-device model\n");
  out << fmt::format("  {} tensors compared; worst error {:.3g} ({}); tolerance {:.3g}\n", r.tensors_compared,
                     r.worst_error, r.worst_tensor, r.tolerance);
  out << fmt::format("  loss {:.9g} (single device {:.9g})\n", r.loss, r.reference_loss);
}

}  // namespace dstc::reference

namespace dstc::reference {

void report_verify_failure(const VerifyResult& r, DiagnosticEngine& diags) {
  if (r.passed || r.reference_problem) return;
  auto range_of = [&](const ProgramPlace& p) {
    std::optional<FileId> file = p.file.empty() ? std::nullopt : diags.sources().find(p.file);
    return file ? diags.sources().range_at(*file, p.line, p.column) : SourceRange{};
  };
  auto with_op = [&](DiagnosticEngine::Builder b, const ProgramPlace& p) {
    if (!p.op_text.empty()) b.note(fmt::format("in the compiled program: {}", p.op_text));
  };
  if (r.problem) {
    DiagKind kind = r.problem->kind == ExecutionProblem::PartialRead      ? diag::kVerifyPartialRead
                    : r.problem->kind == ExecutionProblem::LayoutMismatch ? diag::kVerifyLayoutMismatch
                                                                          : diag::kVerifyMismatch;
    with_op(diags.error(kind, range_of(r.at), r.problem->message), r.at);
    return;
  }
  if (r.difference) {
    const TensorDifference& d = *r.difference;
    std::string message =
        d.rank >= 0 ? fmt::format("the copies of {} on different devices disagree (rank {} differs by {:.3g})",
                                  d.tensor, d.rank, d.error)
                    : fmt::format("{} differs from the single-device model: element [{}] is {:.9g}, expected {:.9g}",
                                  d.tensor, fmt::join(d.index, ", "), d.actual, d.expected);
    with_op(diags.error(diag::kVerifyMismatch, range_of(d.producer), message), d.producer);
    return;
  }
  if (!r.missing.empty())
    diags.error(diag::kVerifyMismatch, {},
                fmt::format("{} is not comparable between the strategy and the single-device model", r.missing));
}

}  // namespace dstc::reference
