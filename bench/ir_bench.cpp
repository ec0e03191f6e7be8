// The explicit-schedule IR at scale: building, printing, parsing and
// verifying modules of 10^5 and 10^6 ops, and their memory per op.
//
// The module is a forward pipeline over world[pp=4, dp=2, tp=2]: for each
// micro-batch, each stage runs a chain of tensor-parallel ops (einsum, gelu,
// all-reduce over tp, add) and sends its activation to the next stage.
#include <benchmark/benchmark.h>

#include <string>

#include "ir/module.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace {

using namespace dstc::ir;

Module build_pipeline(int64_t target_ops) {
  constexpr int kStages = 4;
  constexpr int kOpsPerStage = 8;  // 2 x (einsum, gelu, all_reduce, add)
  Module m;
  m.set_mesh(Mesh("world", {{"pp", kStages}, {"dp", 2}, {"tp", 2}}));
  Function& f = m.add_function("step");
  Builder b(m, f);
  DeviceSetId stage[kStages];
  ValueId weight[kStages];
  for (int s = 0; s < kStages; ++s) {
    stage[s] = m.intern_devices(DeviceSet{{{s, s + 1}, {0, 2}, {0, 2}}, {}});
    weight[s] = b.add_arg("w" + std::to_string(s), ArgKind::Param, TensorType(DType::BF16, {256, 1024}), stage[s]);
  }
  ValueId input = b.add_arg("x", ArgKind::Input, TensorType(DType::BF16, {4, 128, 1024}), stage[0]);
  const AttrValue spec_attr[] = {AttrValue::string("spec", "bsh,oh->bso")};
  const AttrValue spec_back[] = {AttrValue::string("spec", "bso,oh->bsh")};
  uint32_t channel = 0;
  for (int mb = 0; static_cast<int64_t>(f.ops.size()) < target_ops; ++mb) {
    ValueId x = input;
    for (int s = 0; s < kStages; ++s) {
      OpSpec op;
      op.devices = stage[s];
      op.meta = {Stream::Compute, Phase::Forward, static_cast<int16_t>(s), mb, kNoLoc};
      for (int layer = 0; layer < kOpsPerStage / 4; ++layer) {
        ValueId in2[] = {x, weight[s]};
        op.kind = OpKind::Einsum;
        op.operands = in2;
        op.attrs = spec_attr;
        ValueId h = b.append_value(op);
        ValueId in1[] = {h};
        op.kind = OpKind::Gelu;
        op.operands = in1;
        op.attrs = {};
        ValueId a = b.append_value(op);
        ValueId back[] = {a, weight[s]};
        op.kind = OpKind::Einsum;
        op.operands = back;
        op.attrs = spec_back;
        ValueId partial = b.append_value(op);
        ValueId red[] = {partial};
        op.kind = OpKind::AllReduce;
        op.operands = red;
        op.attrs = {};
        op.group_axes = 1u << 2;  // over [tp]
        op.meta.stream = Stream::Feature;
        ValueId y = b.append_value(op);
        op.group_axes = 0;
        op.meta.stream = Stream::Compute;
        x = y;
      }
      if (s + 1 < kStages) {
        ValueId sent[] = {x};
        OpSpec send = op;
        send.kind = OpKind::Send;
        send.operands = sent;
        send.peer = stage[s + 1];
        send.channel = ++channel;
        b.append(send);
        OpSpec recv = send;
        recv.kind = OpKind::Recv;
        recv.devices = stage[s + 1];
        recv.peer = stage[s];
        recv.operands = {};
        TypeId type[] = {f.values[x].type};
        recv.result_types = type;
        x = b.append_value(recv);
      }
    }
  }
  return m;
}

size_t op_count(const Module& m) { return m.functions[0].ops.size(); }

void BM_IrBuild(benchmark::State& state) {
  size_t ops = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    Module m = build_pipeline(state.range(0));
    ops = op_count(m);
    bytes = m.memory_bytes();
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ops));
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["bytes_per_op"] = static_cast<double>(bytes) / static_cast<double>(ops);
}

void BM_IrPrint(benchmark::State& state) {
  Module m = build_pipeline(state.range(0));
  size_t text_bytes = 0;
  for (auto _ : state) {
    std::string text = print_module(m);
    text_bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * op_count(m)));
  state.counters["text_bytes_per_op"] = static_cast<double>(text_bytes) / static_cast<double>(op_count(m));
}

void BM_IrParse(benchmark::State& state) {
  Module built = build_pipeline(state.range(0));
  std::string text = print_module(built);
  size_t bytes = 0;
  for (auto _ : state) {
    dstc::SourceManager sm;
    dstc::DiagnosticEngine diags(sm);
    std::optional<Module> m = parse_module(sm.add("bench.ir", text), diags);
    if (!m) state.SkipWithError("parse failed");
    else bytes = m->memory_bytes();
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * op_count(built)));
  // A parsed module also records each op's and value's source range.
  state.counters["bytes_per_op"] = static_cast<double>(bytes) / static_cast<double>(op_count(built));
}

void BM_IrVerify(benchmark::State& state) {
  Module m = build_pipeline(state.range(0));
  for (auto _ : state) {
    dstc::SourceManager sm;
    dstc::DiagnosticEngine diags(sm);
    if (!verify_module(m, diags)) state.SkipWithError("verification failed");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * op_count(m)));
}

BENCHMARK(BM_IrBuild)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IrPrint)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IrParse)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IrVerify)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);

}  // namespace
