#include "htae/simulator.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "htae/comm_buffers.h"
#include "htae/comm_layout.h"
#include "htae/device_classes.h"
#include "htae/flow_engine.h"
#include "htae/ir_op_pricing.h"
#include "htae/memory_tracker.h"
#include "htae/mirrored_groups.h"
#include "htae/op_estimator.h"
#include "htae/topology.h"
#include "ir/fp8_scales.h"
#include "ir/groups.h"
#include "ir/registry.h"
#include "ir/source/diagnostic_kinds.h"
#include "ir/source/spelling.h"
#include "ir/verifier.h"

namespace dstc::htae {

std::string_view executor_name(ExecutorKind kind) { return kind == ExecutorKind::Htae ? "htae" : "program-order"; }

std::optional<ExecutorKind> parse_executor(std::string_view name) {
  if (name == "htae") return ExecutorKind::Htae;
  if (name == "program-order") return ExecutorKind::ProgramOrder;
  return std::nullopt;
}

namespace {

// Communication whose kernels take SMs from the compute they overlap:
// gradient collectives and all-to-alls (the experts', which a schedule can
// run beside another micro-batch's compute, and boxing's). Other
// activation exchanges block their consumers instead or, pipelined
// (tensor-parallel overlap's userbuffers, ring attention's sends of a few
// CTAs, unmeasured), are not charged; neither are sends and receives.
bool slows_compute(const ir::Op& op) {
  if (op.kind == ir::OpKind::Send || op.kind == ir::OpKind::Recv) return false;
  return op.stream == ir::Stream::Grad || op.kind == ir::OpKind::AllToAll;
}

// The SMs such an op's kernels hold while it runs: DeepEP's for the
// deduplicated expert exchange (`copies`), else one per NCCL channel, of
// which NCCL builds more for a group inside one node.
int64_t sms_taken(const ir::Module& m, const ir::Function& f, const ir::Op& op, const CommComponent& comp,
                  const ClusterSpec& cluster) {
  if (!slows_compute(op)) return 0;
  if (is_deepep_exchange(m, f, op)) return kDeepepSms;
  auto spans_nodes = [&](const std::vector<int64_t>& group) {
    return std::any_of(group.begin(), group.end(),
                       [&](int64_t d) { return d / cluster.gpus_per_node != group[0] / cluster.gpus_per_node; });
  };
  bool across = std::any_of(comp.groups.begin(), comp.groups.end(), spans_nodes);
  return across ? cluster.runtime.collective_sms : cluster.runtime.intra_node_collective_sms;
}

// How many devices of an op's set compute the very same result: the sizes
// of the mesh axes it spans on which its result is broadcast (B). Model
// FLOPs count that work once, so MFU does not reward replication.
double replication(const ir::Module& m, const ir::Function& f, const ir::Op& op) {
  if (op.result_count == 0) return 1;
  const ir::Value& v = f.values[f.result(op)];
  const ir::DeviceSet& set = m.devices(op.devices);
  if (v.layout == ir::kNoLayout || !set.is_slice()) return 1;
  const ir::Layout& layout = m.layout(v.layout);
  double copies = 1;
  for (size_t a = 0; a < layout.size() && a < set.ranges.size(); ++a) {
    if (layout[a].kind == ir::Sbp::Broadcast) copies *= set.ranges[a].size();
  }
  return copies;
}

using ir::kNone;
using ir::OpId;
using ir::ValueId;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

enum class Activity : uint8_t { compute, comm, bubble, idle };

struct Queue {
  std::vector<OpId> ops;
  // The value slots each op waits for: those of ops[i] end at
  // operand_slots_end[i]. Queue heads are checked again and again while
  // they wait, and this keeps the check off the op and value tables.
  std::vector<uint32_t> operand_slots;
  std::vector<uint32_t> operand_slots_end;
  uint32_t pos = 0;
  bool busy = false;  // the head runs, or (communication) waits at its rendezvous
};

struct ClassState {
  std::array<Queue, ir::kQueueCount> queues;
  // The compute op in progress: its work (seconds at full speed) drains at `rate`.
  OpId computing = kNone;
  uint8_t computing_queue = 0;
  double work_left = 0;
  double since = 0;
  double rate = 1;
  double op_start = 0;
  uint32_t version = 0;
  uint32_t comm_in_flight = 0;
  int64_t comm_sms = 0;  // SMs the communication in flight holds (sms_taken)
  size_t ops_left = 0;
  double finish = 0;
  Activity activity = Activity::idle;
  double activity_since = 0;
  SimBreakdown time;
  bool traced = false;
};

struct Event {
  double time;
  uint32_t id;       // class (compute done) or instance (communication priced as a whole)
  uint32_t version;  // compute: the class's version when scheduled; kCommDone otherwise
  bool operator>(const Event& o) const { return time > o.time; }
};
constexpr uint32_t kCommDone = UINT32_MAX;
constexpr uint32_t kEarlyReady = UINT32_MAX - 1;  // id: into Executor::early_ready_

// Every group of one communication op's component, planned.
struct PlanSet {
  std::vector<GroupPlan> groups;
  std::vector<uint8_t> simulated;  // per group: 0 when a simulated group mirrors it (htae/mirrored_groups.h)
  int64_t mirrored_flows = 0;      // the transfers of the groups not simulated
};

// A rendezvous in progress: one component of a communication op.
struct Instance {
  OpId op = 0;       // the collective, or the send of a send/recv pair
  OpId partner = 0;  // the recv of a pair
  uint32_t layout = 0;
  uint32_t component = 0;
  const PlanSet* plans = nullptr;
  std::vector<uint32_t> phase;
  std::vector<uint32_t> outstanding;
  uint32_t groups_left = 0;
  double start = 0;
  double moved = 0;  // a pipelined scatter: when its transfers were done
  int64_t sms = 0;   // taken from its devices' compute (sms_taken)
};

// A collective pipelined with a GEMM in `chunks` pieces (the IR's `chunks`,
// Megatron-Core's --tp-comm-overlap; ring attention's exchanges, with
// attention or its gradient in the GEMM's place): an all-gather's results
// are ready to their GEMMs from the gather's start (the first piece is the
// rank's own), and a GEMM's finish waits for the last piece plus that
// piece's share of the GEMM; a reduce-scatter starts on its GEMM's first
// piece, and finishes no sooner than the GEMM plus the last piece's share
// of the scatter.
constexpr double kNever = std::numeric_limits<double>::infinity();

class Executor {
 public:
  Executor(const ir::Module& module, const ir::Function& f, const ClusterSpec& cluster, const SimOptions& options)
      : m_(module),
        f_(f),
        cluster_(cluster),
        options_(options),
        classes_(module, f, options.symmetry),
        topology_(cluster),
        flows_(topology_, options.bandwidth_sharing),
        estimator_(cluster.gpu, options.profile),
        memory_(static_cast<int64_t>(classes_.count()), cluster.gpu.memory_bytes, options.record_trace),
        state_(classes_.count()) {
    queue_count_ = options.executor == ExecutorKind::Htae ? ir::kQueueCount : 1;
  }

  void prepare();
  void classify_values();
  void gate_parameter_gathers();
  void run();
  void signature_of(const ir::Op& op, std::string& out) const;
  SimReport report();
  bool stuck(DiagnosticEngine& diags) const;

 private:
  uint8_t queue_of(const ir::Op& op) const { return queue_count_ == 1 ? 0 : static_cast<uint8_t>(ir::op_queue(op)); }
  uint32_t slot(ValueId v, uint32_t c) const {
    const std::vector<uint32_t>& in = classes_.in_set(f_.values[v].devices);
    auto it = std::lower_bound(in.begin(), in.end(), c);
    return it != in.end() && *it == c ? slot_begin_[v] + static_cast<uint32_t>(it - in.begin()) : kNone;
  }
  bool head_ready(const Queue& queue) const {
    uint32_t begin = queue.pos == 0 ? 0 : queue.operand_slots_end[queue.pos - 1];
    for (uint32_t i = begin; i < queue.operand_slots_end[queue.pos]; ++i) {
      if (!ready_[queue.operand_slots[i]]) return false;
    }
    return true;
  }
  bool is_comm(const ir::Op& op) const { return ir::op_info(op.kind).is_communication(); }

  void account(uint32_t c);
  Activity classify(uint32_t c) const;
  void try_start(uint32_t c);
  void start_compute(uint32_t c, uint8_t q, OpId op);
  void set_rate(uint32_t c);
  // The share of a device's SMs its compute has while communication holds
  // `comm_sms` of them (at least one SM's worth).
  double compute_rate(const ClassState& s) const {
    const int64_t sms = cluster_.gpu.sms;
    if (!options_.overlap || sms <= 0 || s.comm_sms <= 0) return 1;
    return static_cast<double>(std::max<int64_t>(sms - s.comm_sms, 1)) / static_cast<double>(sms);
  }
  void arrive(uint32_t c, OpId op);
  void start_instance(OpId rendezvous, uint32_t component);
  void start_phase(uint32_t instance, uint32_t group);
  void finish_instance(uint32_t instance);
  // Pipelined collectives (`chunks`): whether the op may finish now, else
  // when it will be looked at again.
  bool gemm_may_finish(uint32_t c, OpId op);
  bool scatter_may_finish(uint32_t instance);
  void piece_done(uint32_t sl, uint32_t c);
  void finish_op(uint32_t c, uint8_t q, OpId op, double start);
  void alloc_results(uint32_t c, const ir::Op& op);
  void release(ValueId v, uint32_t c);
  void push_event(Event e) {
    events_.push_back(e);
    std::push_heap(events_.begin(), events_.end(), std::greater<>());
  }
  struct Rendezvous;
  PlanSet& plan_set(const Rendezvous& r, uint32_t component);
  void mirror_groups();

  const ir::Module& m_;
  const ir::Function& f_;
  const ClusterSpec& cluster_;
  const SimOptions& options_;
  DeviceClasses classes_;
  Topology topology_;
  FlowEngine flows_;
  OpEstimator estimator_;
  MemoryTracker memory_;
  std::vector<ClassState> state_;
  // Per class, per position of its feature queue: the op its compute queue
  // must have reached before that op may start (kNone: no wait).
  std::vector<std::vector<OpId>> feature_gate_;
  int queue_count_ = ir::kQueueCount;
  double now_ = 0;

  // Per value: its first slot; a slot is (value, class) for each class of its set.
  std::vector<uint32_t> slot_begin_;
  std::vector<uint8_t> ready_;
  std::vector<uint32_t> uses_;
  std::vector<uint8_t> keep_;      // arguments and returned values live to the end
  std::vector<uint8_t> in_place_;  // optimizer results held in their argument's memory
  // Bytes of a value held in its operand's memory: an in-place all_gather's
  // local chunk (the distributed optimizer's parameter buffer).
  std::vector<int64_t> shared_bytes_;
  std::vector<MemoryKind> kind_;  // what each value's bytes count as

  // Per op.
  std::vector<double> duration_;  // compute ops: seconds at full speed
  std::vector<OpId> rendezvous_;  // communication: the collective itself, or a pair's send
  std::vector<OpId> partner_;     // send <-> recv
  // Rendezvous ops (a collective, or the send of a paired send/recv) are a
  // fraction of all ops: per op only an index into what they need.
  struct Rendezvous {
    uint32_t layout = 0;
    uint32_t arrive_base = 0;   // first counter of its components in arrived_
    double fixed_seconds = -1;  // a profiled time, or < 0
    CommSpec comm;              // what it moves
  };
  std::vector<uint32_t> chunks_;           // per op: a pipelined collective's pieces, else 0
  std::vector<OpId> pipelined_with_;       // per value: the pipelined collective it feeds or comes from
  std::vector<double> done_at_;            // per slot of such a value: when fully there
  std::vector<OpId> waiting_gemm_;         // per such slot: a GEMM that waits for the last piece
  std::vector<uint32_t> waiting_scatter_;  // per such slot: a scatter instance that waits for its GEMM
  std::vector<std::pair<uint32_t, uint32_t>> early_ready_;  // (slot, class) of kEarlyReady events
  std::vector<uint32_t> rendezvous_index_;                  // per op: into rendezvous_info_, or kNone
  std::vector<Rendezvous> rendezvous_info_;
  std::vector<uint32_t> arrived_;
  std::vector<CommLayout> layouts_;
  std::map<std::tuple<int, uint32_t, uint32_t, uint32_t>, uint32_t> layout_ids_;
  std::map<std::tuple<uint32_t, uint32_t, int, double, size_t, int64_t, int64_t, int64_t>, PlanSet> plans_;
  std::vector<const PlanSet*> plan_of_component_;  // indexed as arrived_; null for a profiled time

  std::vector<Instance> instances_;
  std::vector<uint32_t> free_instances_;
  std::vector<uint64_t> flow_owner_;  // FlowId -> instance << 32 | group
  std::vector<Event> events_;
  std::vector<uint32_t> worklist_;
  std::vector<uint32_t> batch_;
  std::vector<uint8_t> queued_;
  std::vector<DeliveredFlow> delivered_;
  std::vector<uint64_t> delivered_owners_;  // (instance << 32) | group of each delivered flow

  double model_flops_ = 0;
  std::array<double, kComputeDtypes.size()> flops_by_dtype_{};
  int64_t device_ops_ = 0;
  int64_t flow_count_ = 0;
  int64_t mirrored_flow_count_ = 0;
  std::vector<TraceSpan> spans_;
  std::vector<ir::Rank> traced_ranks_;
};

// What an op's price depends on: its signature (kind, operand types,
// attributes), its result types and how its fp8 operands are scaled.
void Executor::signature_of(const ir::Op& op, std::string& out) const {
  out.clear();
  f_.append_signature(op, out);
  for (ValueId v : f_.operands(op)) {
    if (!ir::is_fp8(m_.value_type(f_, v).dtype)) continue;
    const int64_t block = ir::fp8_scale_block(m_, f_, v).value_or(0);
    out.append(reinterpret_cast<const char*>(&block), sizeof block);
  }
  for (uint16_t r = 0; r < op.result_count; ++r) {
    const ir::Value& v = f_.values[op.first_result + r];
    out.append(reinterpret_cast<const char*>(&v.type), sizeof(ir::TypeId));
    out.append(reinterpret_cast<const char*>(&v.fill), sizeof(ir::Fill));
  }
}

void Executor::prepare() {
  const size_t ops = f_.ops.size();
  // Value slots, and the arguments alive from the start.
  slot_begin_.resize(f_.values.size());
  uint32_t slots = 0;
  for (ValueId v = 0; v < f_.values.size(); ++v) {
    slot_begin_[v] = slots;
    slots += static_cast<uint32_t>(classes_.in_set(f_.values[v].devices).size());
  }
  ready_.assign(slots, 0);
  uses_.assign(slots, 0);
  keep_.assign(f_.values.size(), 0);
  for (ValueId v : f_.returns) keep_[v] = 1;
  std::vector<uint8_t> is_arg(f_.values.size(), 0);
  classify_values();
  for (const ir::Arg& a : f_.args) {
    keep_[a.value] = 1;
    is_arg[a.value] = 1;
    auto bytes = m_.value_type(f_, a.value).bytes();
    for (uint32_t c : classes_.in_set(f_.values[a.value].devices)) {
      ready_[slot(a.value, c)] = 1;
      memory_.alloc(c, bytes, 0, kind_[a.value]);
    }
  }
  // What DeepEP and NCCL's point-to-point connections hold for the run.
  std::vector<int64_t> comm_buffers = comm_buffer_bytes(m_, f_, classes_, topology_, cluster_);
  for (uint32_t c = 0; c < comm_buffers.size(); ++c)
    if (comm_buffers[c] > 0) memory_.alloc(c, comm_buffers[c], 0, MemoryKind::CommBuffers);
  // An optimizer updates the parameters and states it is given in place
  // (torch.optim, Megatron's optimizer): each result takes the memory of
  // the first argument operand of its type not yet taken.
  in_place_.assign(f_.values.size(), 0);
  for (const ir::Op& op : f_.ops) {
    if (ir::op_info(op.kind).category != ir::OpCategory::Optimizer) continue;
    std::span<const ValueId> operands = f_.operands(op);
    std::vector<uint8_t> taken(operands.size(), 0);
    for (uint16_t r = 0; r < op.result_count; ++r) {
      ValueId v = op.first_result + r;
      for (size_t i = 0; i < operands.size(); ++i) {
        if (taken[i] || !is_arg[operands[i]] || f_.values[operands[i]].devices != f_.values[v].devices ||
            !(m_.value_type(f_, operands[i]) == m_.value_type(f_, v)))
          continue;
        taken[i] = 1;
        in_place_[v] = 1;
        break;
      }
    }
  }
  // The distributed optimizer's parameter buffer (an in-place gather's
  // result) holds the shard and lives as long as the weights: all step.
  shared_bytes_.assign(f_.values.size(), 0);
  for (const ir::Op& op : f_.ops) {
    if (int64_t held = ir::bytes_in_operand(m_, f_, op); held > 0) {
      shared_bytes_[op.first_result] = held;
      keep_[op.first_result] = 1;
    }
  }
  // Queues, uses, costs, rendezvous layouts.
  std::vector<OpId> pairs = ir::pair_channels(f_);
  duration_.assign(ops, 0);
  rendezvous_.assign(ops, kNone);
  partner_ = pairs;
  rendezvous_index_.assign(ops, kNone);
  struct Priced {
    double seconds = 0, flops = 0;
    bool matmul = false;
    ComputeDtype dtype{};
  };
  std::unordered_map<std::string, Priced> prices;
  std::string signature;
  for (OpId i = 0; i < ops; ++i) {
    const ir::Op& op = f_.ops[i];
    const std::vector<uint32_t>& in = classes_.in_set(op.devices);
    device_ops_ += static_cast<int64_t>(m_.members(op.devices).size());
    for (uint32_t c : in) {
      Queue& queue = state_[c].queues[queue_of(op)];
      queue.ops.push_back(i);
      ++state_[c].ops_left;
      for (ValueId v : f_.operands(op)) {
        if (uint32_t s = slot(v, c); s != kNone) ++uses_[s], queue.operand_slots.push_back(s);
      }
      queue.operand_slots_end.push_back(static_cast<uint32_t>(queue.operand_slots.size()));
    }
    const ir::OpInfo& info = ir::op_info(op.kind);
    if (!info.is_communication()) {
      // Ops repeat per micro-batch and layer with the same signature, so
      // each signature is priced once.
      signature_of(op, signature);
      auto [priced, fresh] = prices.try_emplace(signature);
      if (fresh) {
        ir::OpCost cost = ir::op_cost(m_, f_, op);
        OpCostQuery query = compute_query(m_, f_, op, cost);
        priced->second.seconds = estimator_.estimate(query).seconds;
        priced->second.flops = cost.flops;
        priced->second.matmul = query.op_class == OpClass::Matmul;
        priced->second.dtype = query.dtype;
      }
      const Priced& price = priced->second;
      duration_[i] = price.seconds;
      if (info.category == ir::OpCategory::Compute && op.phase != ir::Phase::Recompute) {
        // Priced on the fullest device; the devices' mean fill is the work done.
        const ir::Fill fill = ir::op_fill(f_, op);
        double total = price.flops * (fill.mean / fill.fullest) * static_cast<double>(m_.members(op.devices).size()) /
                       replication(m_, f_, op);
        model_flops_ += total;
        if (price.matmul) flops_by_dtype_[static_cast<size_t>(price.dtype)] += total;
      }
      continue;
    }
    // The send of a pair is its rendezvous; an unpaired send/recv cannot run (the verifier reports it).
    OpId rv = op.kind == ir::OpKind::Recv ? pairs[i] : i;
    rendezvous_[i] = rv;
    if (rv == kNone || op.kind == ir::OpKind::Recv) continue;
    std::tuple<int, uint32_t, uint32_t, uint32_t> key;
    if (op.kind == ir::OpKind::Send) {
      if (pairs[i] == kNone) continue;
      key = {1, op.devices, op.aux, f_.ops[pairs[i]].devices};
    } else {
      key = {0, op.devices, op.group_axes, op.aux};
    }
    auto [it, inserted] = layout_ids_.try_emplace(key, static_cast<uint32_t>(layouts_.size()));
    if (inserted) {
      layouts_.push_back(op.kind == ir::OpKind::Send ? p2p_layout(m_, op, f_.ops[pairs[i]], classes_)
                                                     : collective_layout(m_, op, classes_));
    }
    rendezvous_index_[i] = static_cast<uint32_t>(rendezvous_info_.size());
    Rendezvous& r = rendezvous_info_.emplace_back();
    r.layout = it->second;
    const CommLayout& layout = layouts_[it->second];
    r.arrive_base = static_cast<uint32_t>(arrived_.size());
    arrived_.resize(arrived_.size() + layout.components.size(), 0);
    r.comm = comm_spec(m_, f_, op);
    if (options_.profile && !layout.components.empty() && !layout.components[0].groups.empty() && r.comm.collective) {
      auto p = static_cast<int64_t>(layout.components[0].groups[0].size());
      if (std::optional<double> s = options_.profile->collective_seconds(*r.comm.collective, p, r.comm.bytes))
        r.fixed_seconds = *s;
    }
  }
  chunks_.assign(ops, 0);
  pipelined_with_.assign(f_.values.size(), kNone);
  for (OpId i = 0; i < ops; ++i) {
    const ir::Op& op = f_.ops[i];
    if (op.kind != ir::OpKind::AllGather && op.kind != ir::OpKind::ReduceScatter) continue;
    int64_t chunks = ir::AttrReader(m_, f_, op).integer("chunks");
    if (chunks < 2) continue;
    chunks_[i] = static_cast<uint32_t>(chunks);
    if (op.kind == ir::OpKind::AllGather) {
      for (uint16_t r = 0; r < op.result_count; ++r) pipelined_with_[op.first_result + r] = i;
    } else {
      for (ValueId v : f_.operands(op)) pipelined_with_[v] = i;
    }
  }
  done_at_.assign(slots, kNever);
  waiting_gemm_.assign(slots, kNone);
  waiting_scatter_.assign(slots, kNone);
  plan_of_component_.assign(arrived_.size(), nullptr);
  for (const Rendezvous& r : rendezvous_info_) {
    if (r.fixed_seconds >= 0) continue;
    for (uint32_t c = 0; c < layouts_[r.layout].components.size(); ++c)
      plan_of_component_[r.arrive_base + c] = &plan_set(r, c);
  }
  if (options_.symmetry) mirror_groups();
  // Which ranks a trace shows: all of a small mesh, else the first of each symmetric class.
  if (options_.record_trace) {
    if (m_.mesh().size() <= options_.trace_all_up_to) {
      for (ir::Rank r = 0; r < m_.mesh().size(); ++r) traced_ranks_.push_back(r);
    } else {
      DeviceClasses symmetric(m_, f_, true);
      for (uint32_t c = 0; c < symmetric.count(); ++c) traced_ranks_.push_back(symmetric.members(c)[0]);
    }
    for (ir::Rank r : traced_ranks_) state_[classes_.of_rank(r)].traced = true;
  }
  queued_.assign(classes_.count(), 0);
  if (queue_count_ > 1) gate_parameter_gathers();
}

// Parameter gathers run at most `prefetch_gathers` ahead of their use. A
// gather never waits past the first compute use of itself or of any
// feature op behind it in its queue, which computation must reach anyway:
// the wait cannot deadlock.
void Executor::gate_parameter_gathers() {
  const size_t ops = f_.ops.size();
  auto is_arg = [&](ValueId v) { return f_.values[v].def == kNone; };
  // A gather of a shard, or of its low-precision copy (a bf16 cast, or an
  // FP8 weight's quantize, which FSDP2 runs in the gather's copy-in).
  auto parameter_gather = [&](const ir::Op& op) {
    if (op.kind != ir::OpKind::AllGather || op.stream != ir::Stream::Feature || op.operand_count != 1) return false;
    ValueId v = f_.operands(op)[0];
    if (is_arg(v)) return true;
    const ir::Op& def = f_.ops[f_.values[v].def];
    bool copy = def.kind == ir::OpKind::Cast || def.kind == ir::OpKind::Quantize;
    return copy && def.operand_count == 1 && is_arg(f_.operands(def)[0]);
  };
  if (std::none_of(f_.ops.begin(), f_.ops.end(), parameter_gather)) return;
  // Per op: the first compute op that reads it, directly or through other
  // ops (consumers follow their operands in program order).
  std::vector<OpId> first_compute_use(ops, kNone);
  for (OpId i = static_cast<OpId>(ops); i-- > 0;) {
    const ir::Op& op = f_.ops[i];
    OpId reach = op.stream == ir::Stream::Compute && !is_comm(op) ? i : first_compute_use[i];
    if (reach == kNone) continue;
    for (ValueId v : f_.operands(op)) {
      OpId def = f_.values[v].def;
      if (def != kNone) first_compute_use[def] = std::min(first_compute_use[def], reach);
    }
  }
  const auto ahead = static_cast<size_t>(cluster_.runtime.prefetch_gathers);
  feature_gate_.resize(classes_.count());
  std::vector<OpId> use_before;  // per position: the earliest compute use of it or of an op behind it
  std::vector<OpId> gather_uses;
  for (uint32_t c = 0; c < classes_.count(); ++c) {
    const std::vector<OpId>& queue = state_[c].queues[static_cast<size_t>(ir::Stream::Feature)].ops;
    std::vector<OpId>& gate = feature_gate_[c];
    gate.assign(queue.size(), kNone);
    use_before.assign(queue.size(), kNone);
    OpId earliest = kNone;
    for (size_t pos = queue.size(); pos-- > 0;) {
      earliest = std::min(earliest, first_compute_use[queue[pos]]);
      use_before[pos] = earliest;
    }
    gather_uses.clear();
    for (size_t pos = 0; pos < queue.size(); ++pos) {
      if (!parameter_gather(f_.ops[queue[pos]])) continue;
      size_t n = gather_uses.size();
      gather_uses.push_back(first_compute_use[queue[pos]]);
      OpId bound = n >= ahead ? gather_uses[n - ahead] : kNone;
      if (bound == kNone) continue;
      gate[pos] = std::min(bound, use_before[pos]);
    }
  }
}

void Executor::account(uint32_t c) {
  ClassState& s = state_[c];
  double elapsed = now_ - s.activity_since;
  switch (s.activity) {
    case Activity::compute: s.time.compute_s += elapsed; break;
    case Activity::comm: s.time.exposed_comm_s += elapsed; break;
    case Activity::bubble: s.time.bubble_s += elapsed; break;
    case Activity::idle: s.time.idle_s += elapsed; break;
  }
  s.activity_since = now_;
}

// Nothing running and waiting for another pipeline stage: a queue heads a
// send whose receiver is not there yet (or a recv that blocks its stream),
// or an op that needs a value a recv has not delivered. A posted pipeline
// recv alone is not a wait: it blocks nothing behind it.
Activity Executor::classify(uint32_t c) const {
  const ClassState& s = state_[c];
  if (s.computing != kNone) return Activity::compute;
  if (s.comm_in_flight > 0) return Activity::comm;
  for (int q = 0; q < queue_count_; ++q) {
    const Queue& queue = s.queues[static_cast<size_t>(q)];
    if (queue.pos >= queue.ops.size()) continue;
    const ir::Op& head = f_.ops[queue.ops[queue.pos]];
    bool pipeline_recv = q == ir::kRecvQueue || q == ir::kGradRecvQueue;
    if (head.kind == ir::OpKind::Send || (head.kind == ir::OpKind::Recv && !pipeline_recv)) return Activity::bubble;
    for (ValueId v : f_.operands(head)) {
      uint32_t sl = slot(v, c);
      OpId def = f_.values[v].def;
      if (sl != kNone && !ready_[sl] && def != kNone && f_.ops[def].kind == ir::OpKind::Recv) return Activity::bubble;
    }
  }
  return Activity::idle;
}

void Executor::try_start(uint32_t c) {
  ClassState& s = state_[c];
  // The op at the head of queue q, if it may start now.
  auto startable = [&](uint8_t q) -> OpId {
    const Queue& queue = s.queues[q];
    if (queue.busy || queue.pos >= queue.ops.size() || !head_ready(queue)) return kNone;
    OpId id = queue.ops[queue.pos];
    if (q == static_cast<uint8_t>(ir::Stream::Feature) && !feature_gate_.empty()) {
      OpId gate = feature_gate_[c][queue.pos];
      const Queue& compute = s.queues[static_cast<size_t>(ir::Stream::Compute)];
      if (gate != kNone && compute.pos < compute.ops.size() && compute.ops[compute.pos] < gate) return kNone;
    }
    // One computation at a time on a device.
    if (!is_comm(f_.ops[id]) && s.computing != kNone) return kNone;
    return id;
  };
  // A kernel on a side queue (a weight's cast ahead of its gather) goes
  // before the compute queue's next one: it is short, and what it feeds
  // is what the compute will wait for.
  if (s.computing == kNone) {
    for (uint8_t q = 1; q < queue_count_; ++q) {
      OpId id = startable(q);
      if (id == kNone || is_comm(f_.ops[id])) continue;
      s.queues[q].busy = true;
      start_compute(c, q, id);
      break;
    }
  }
  for (uint8_t q = 0; q < queue_count_; ++q) {
    Queue& queue = s.queues[q];
    OpId id = startable(q);
    if (id == kNone) continue;
    queue.busy = true;
    if (is_comm(f_.ops[id])) {
      arrive(c, id);
    } else {
      start_compute(c, q, id);
    }
  }
}

void Executor::set_rate(uint32_t c) {
  ClassState& s = state_[c];
  double rate = compute_rate(s);
  if (s.computing == kNone || rate == s.rate) {
    s.rate = rate;
    return;
  }
  s.work_left = std::max(0.0, s.work_left - (now_ - s.since) * s.rate);
  s.since = now_;
  s.rate = rate;
  push_event({now_ + s.work_left / rate, c, ++s.version});
}

void Executor::start_compute(uint32_t c, uint8_t q, OpId id) {
  ClassState& s = state_[c];
  account(c);
  s.computing = id;
  s.computing_queue = q;
  s.work_left = duration_[id];
  s.since = s.op_start = now_;
  s.rate = compute_rate(s);
  alloc_results(c, f_.ops[id]);
  push_event({now_ + s.work_left / s.rate, c, ++s.version});
  // A pipelined reduce-scatter may start on this GEMM's first piece.
  const ir::Op& op = f_.ops[id];
  for (uint16_t r = 0; r < op.result_count; ++r) {
    OpId scatter = pipelined_with_[op.first_result + r];
    uint32_t sl = slot(op.first_result + r, c);
    if (scatter == kNone || sl == kNone || f_.ops[scatter].kind != ir::OpKind::ReduceScatter) continue;
    early_ready_.emplace_back(sl, c);
    push_event({now_ + duration_[id] / chunks_[scatter] / s.rate, static_cast<uint32_t>(early_ready_.size() - 1),
                kEarlyReady});
  }
}

bool Executor::gemm_may_finish(uint32_t c, OpId id) {
  for (ValueId v : f_.operands(f_.ops[id])) {
    OpId gather = pipelined_with_[v];
    uint32_t sl = slot(v, c);
    if (gather == kNone || sl == kNone || f_.ops[gather].kind != ir::OpKind::AllGather) continue;
    if (done_at_[sl] == kNever) {
      waiting_gemm_[sl] = id;
      return false;
    }
    double last = done_at_[sl] + duration_[id] / chunks_[gather];
    if (now_ < last) {
      push_event({last, c, ++state_[c].version});
      return false;
    }
  }
  return true;
}

bool Executor::scatter_may_finish(uint32_t id) {
  const Instance& inst = instances_[id];
  if (chunks_[inst.op] == 0 || f_.ops[inst.op].kind != ir::OpKind::ReduceScatter) return true;
  for (ValueId v : f_.operands(f_.ops[inst.op])) {
    for (uint32_t c : layouts_[inst.layout].components[inst.component].classes) {
      uint32_t sl = slot(v, c);
      if (sl == kNone || done_at_[sl] != kNever) continue;
      waiting_scatter_[sl] = id;
      instances_[id].moved = now_;
      return false;
    }
  }
  return true;
}

// The value of slot `sl` is complete on class c: a GEMM waiting for a
// gather's last piece, or a scatter waiting for its GEMM, finishes after
// that piece's share.
void Executor::piece_done(uint32_t sl, uint32_t c) {
  done_at_[sl] = now_;
  if (OpId gemm = waiting_gemm_[sl]; gemm != kNone) {
    waiting_gemm_[sl] = kNone;
    ClassState& s = state_[c];
    if (s.computing == gemm) push_event({now_, c, ++s.version});
  }
  if (uint32_t id = waiting_scatter_[sl]; id != kNone) {
    waiting_scatter_[sl] = kNone;
    const Instance& inst = instances_[id];
    push_event({now_ + (inst.moved - inst.start) / chunks_[inst.op], id, kCommDone});
  }
}

void Executor::arrive(uint32_t c, OpId id) {
  OpId rv = rendezvous_[id];
  if (rv == kNone || rendezvous_index_[rv] == kNone) return;  // unpaired: stays waiting, reported as stuck
  const Rendezvous& r = rendezvous_info_[rendezvous_index_[rv]];
  const CommLayout& layout = layouts_[r.layout];
  uint32_t component = layout.component_of_class[c];
  if (component == kNone) return;
  const CommComponent& comp = layout.components[component];
  uint32_t& count = arrived_[r.arrive_base + component];
  if (++count == comp.classes.size() + comp.receivers.size()) start_instance(rv, component);
}

PlanSet& Executor::plan_set(const Rendezvous& r, uint32_t component) {
  const CommSpec& spec = r.comm;
  auto key = std::make_tuple(r.layout, component, static_cast<int>(spec.kind), spec.bytes, spec.root, spec.copies,
                             spec.groups.count, spec.groups.kept);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  PlanSet plans;
  double efficiency = cluster_.runtime.efficiency(spec.efficiency_name);
  for (const std::vector<int64_t>& group : layouts_[r.layout].components[component].groups) {
    CollectivePlan plan = comm_plan(topology_, spec, group);
    GroupPlan g;
    for (const CollectivePhase& phase : plan.phases) {
      std::vector<FlowSpec> flows;
      for (const Transfer& t : phase.transfers) {
        flows.push_back({topology_.route(t.src, t.dst), t.bytes / efficiency, t.latency});
      }
      g.push_back(std::move(flows));
    }
    plans.groups.push_back(std::move(g));
  }
  plans.simulated.assign(plans.groups.size(), 1);
  return plans_.emplace(key, std::move(plans)).first->second;
}

// Symmetric groups on disjoint links are simulated once (docs/simulator.md).
void Executor::mirror_groups() {
  std::vector<PlanSet*> sets;
  std::vector<const std::vector<GroupPlan>*> groups;
  for (auto& [key, set] : plans_) sets.push_back(&set), groups.push_back(&set.groups);
  std::vector<std::vector<uint8_t>> simulated = simulated_groups(groups, topology_);
  for (size_t i = 0; i < sets.size(); ++i) {
    PlanSet& set = *sets[i];
    set.simulated = std::move(simulated[i]);
    for (size_t g = 0; g < set.groups.size(); ++g) {
      if (set.simulated[g]) continue;
      for (const auto& phase : set.groups[g]) set.mirrored_flows += static_cast<int64_t>(phase.size());
    }
  }
}

void Executor::start_instance(OpId rv, uint32_t component) {
  uint32_t id;
  if (free_instances_.empty()) {
    id = static_cast<uint32_t>(instances_.size());
    instances_.emplace_back();
  } else {
    id = free_instances_.back();
    free_instances_.pop_back();
  }
  Instance& inst = instances_[id];
  inst.op = rv;
  inst.partner = partner_[rv];
  const Rendezvous& r = rendezvous_info_[rendezvous_index_[rv]];
  inst.layout = r.layout;
  inst.component = component;
  inst.start = now_;
  const CommComponent& comp = layouts_[inst.layout].components[component];
  const ir::Op& op = f_.ops[rv];
  inst.sms = sms_taken(m_, f_, op, comp, cluster_);
  auto begin = [&](uint32_t c, const ir::Op& member_op) {
    account(c);
    if (!queued_[c]) queued_[c] = 1, worklist_.push_back(c);
    ClassState& s = state_[c];
    ++s.comm_in_flight;
    if (inst.sms > 0) s.comm_sms += inst.sms, set_rate(c);
    alloc_results(c, member_op);
  };
  for (uint32_t c : comp.classes) begin(c, op);
  for (uint32_t c : comp.receivers) begin(c, f_.ops[inst.partner]);
  if (chunks_[rv] > 0 && op.kind == ir::OpKind::AllGather) {
    for (uint32_t c : comp.classes)
      for (uint16_t k = 0; k < op.result_count; ++k)
        if (uint32_t sl = slot(op.first_result + k, c); sl != kNone) ready_[sl] = 1;
  }
  if (r.fixed_seconds >= 0) {
    inst.groups_left = 0;
    push_event({now_ + r.fixed_seconds, id, kCommDone});
    return;
  }
  const PlanSet* plans = plan_of_component_[r.arrive_base + component];
  inst.plans = plans;
  size_t groups = plans->groups.size();
  inst.phase.assign(groups, 0);
  inst.outstanding.assign(groups, 0);
  inst.groups_left = static_cast<uint32_t>(std::count(plans->simulated.begin(), plans->simulated.end(), 1));
  mirrored_flow_count_ += plans->mirrored_flows;
  for (uint32_t g = 0; g < groups; ++g) {
    if (plans->simulated[g]) start_phase(id, g);
  }
  if (instances_[id].groups_left == 0) push_event({now_, id, kCommDone});
}

// Starts the current phase of a group, skipping empty phases; a group with
// no phase left is done.
void Executor::start_phase(uint32_t id, uint32_t g) {
  Instance& inst = instances_[id];
  const GroupPlan& plan = inst.plans->groups[g];
  while (inst.phase[g] < plan.size() && plan[inst.phase[g]].empty()) ++inst.phase[g];
  if (inst.phase[g] >= plan.size()) {
    --inst.groups_left;
    return;
  }
  for (const FlowSpec& spec : plan[inst.phase[g]]) {
    FlowId flow = flows_.start_flow(spec.route, spec.bytes, now_, spec.latency);
    if (flow >= flow_owner_.size()) flow_owner_.resize(flow + 1);
    flow_owner_[flow] = (static_cast<uint64_t>(id) << 32) | g;
    ++inst.outstanding[g];
    ++flow_count_;
  }
}

void Executor::finish_instance(uint32_t id) {
  if (!scatter_may_finish(id)) return;
  Instance& inst = instances_[id];
  const CommComponent& comp = layouts_[inst.layout].components[inst.component];
  auto end = [&](uint32_t c, OpId op_id) {
    account(c);
    ClassState& s = state_[c];
    const ir::Op& op = f_.ops[op_id];
    --s.comm_in_flight;
    if (inst.sms > 0) s.comm_sms -= inst.sms, set_rate(c);
    finish_op(c, queue_of(op), op_id, inst.start);
  };
  for (uint32_t c : comp.classes) end(c, inst.op);
  for (uint32_t c : comp.receivers) end(c, inst.partner);
  free_instances_.push_back(id);
}

void Executor::classify_values() {
  kind_.assign(f_.values.size(), MemoryKind::Other);
  for (const ir::Arg& a : f_.args) {
    kind_[a.value] = a.kind == ir::ArgKind::Param   ? MemoryKind::Weights
                     : a.kind == ir::ArgKind::State ? MemoryKind::OptimizerState
                     : a.kind == ir::ArgKind::Cache ? MemoryKind::KvCache
                                                    : MemoryKind::Activations;
  }
  for (const ir::Op& op : f_.ops) {
    // A value moved, boxed or cast from one operand is what that operand
    // is (a gathered weight is a weight, a reduced gradient a gradient);
    // other results are what their phase computes.
    const ir::OpInfo& info = ir::op_info(op.kind);
    bool moves = op.operand_count == 1 &&
                 (info.is_communication() || op.kind == ir::OpKind::Cast || op.kind == ir::OpKind::Quantize ||
                  op.kind == ir::OpKind::Shard || op.kind == ir::OpKind::Unshard || op.kind == ir::OpKind::Partialize);
    bool forward = op.phase == ir::Phase::Forward || op.phase == ir::Phase::Recompute;
    MemoryKind by_phase = forward                             ? MemoryKind::Activations
                          : op.phase == ir::Phase::WeightGrad ? MemoryKind::Gradients
                          : op.phase == ir::Phase::Optimizer  ? MemoryKind::Weights
                                                              : MemoryKind::Other;
    MemoryKind kind = moves ? kind_[f_.operands(op)[0]] : by_phase;
    // A grouped collective's result r is its operand r moved.
    bool grouped = info.is_communication() && op.operand_count > 1 && op.operand_count == op.result_count;
    for (uint16_t r = 0; r < op.result_count; ++r)
      kind_[op.first_result + r] = grouped ? kind_[f_.operands(op)[r]] : kind;
  }
}

void Executor::alloc_results(uint32_t c, const ir::Op& op) {
  for (uint16_t r = 0; r < op.result_count; ++r) {
    ValueId v = op.first_result + r;
    if (slot(v, c) != kNone && !in_place_[v])
      memory_.alloc(c, m_.value_bytes(f_, v) - shared_bytes_[v], now_, kind_[v]);
  }
}

void Executor::release(ValueId v, uint32_t c) {
  if (!keep_[v] && !in_place_[v]) memory_.free(c, m_.value_bytes(f_, v) - shared_bytes_[v], now_, kind_[v]);
}

void Executor::finish_op(uint32_t c, uint8_t q, OpId id, double start) {
  ClassState& s = state_[c];
  Queue& queue = s.queues[q];
  ++queue.pos;
  queue.busy = false;
  --s.ops_left;
  s.finish = std::max(s.finish, now_);
  const ir::Op& op = f_.ops[id];
  for (uint16_t r = 0; r < op.result_count; ++r) {
    ValueId v = op.first_result + r;
    uint32_t sl = slot(v, c);
    if (sl == kNone) continue;
    ready_[sl] = 1;
    if (pipelined_with_[v] != kNone) piece_done(sl, c);
    if (uses_[sl] == 0) release(v, c);
  }
  for (ValueId v : f_.operands(op)) {
    uint32_t sl = slot(v, c);
    if (sl != kNone && --uses_[sl] == 0 && ready_[sl]) release(v, c);
  }
  if (s.traced) spans_.push_back({c, id, start, now_});
  if (!queued_[c]) queued_[c] = 1, worklist_.push_back(c);
}

void Executor::run() {
  for (uint32_t c = 0; c < classes_.count(); ++c) queued_[c] = 1, worklist_.push_back(c);
  for (;;) {
    while (!worklist_.empty()) {
      batch_.clear();
      batch_.swap(worklist_);
      for (uint32_t c : batch_) queued_[c] = 0;
      for (uint32_t c : batch_) try_start(c);
      for (uint32_t c : batch_) {
        account(c);
        state_[c].activity = classify(c);
      }
    }
    while (!events_.empty()) {
      const Event& e = events_.front();
      if (e.version == kCommDone || e.version == kEarlyReady || state_[e.id].version == e.version) break;
      std::pop_heap(events_.begin(), events_.end(), std::greater<>());
      events_.pop_back();
    }
    double t = std::min(events_.empty() ? kInfinity : events_.front().time, flows_.next_event_time());
    if (t == kInfinity) break;
    now_ = t;
    while (!events_.empty() && events_.front().time <= now_) {
      std::pop_heap(events_.begin(), events_.end(), std::greater<>());
      Event e = events_.back();
      events_.pop_back();
      if (e.version == kCommDone) {
        finish_instance(e.id);
        continue;
      }
      if (e.version == kEarlyReady) {
        auto [sl, c] = early_ready_[e.id];
        ready_[sl] = 1;
        if (!queued_[c]) queued_[c] = 1, worklist_.push_back(c);
        continue;
      }
      ClassState& s = state_[e.id];
      if (s.version != e.version || s.computing == kNone) continue;
      if (!gemm_may_finish(e.id, s.computing)) continue;
      account(e.id);
      OpId op = s.computing;
      s.computing = kNone;
      finish_op(e.id, s.computing_queue, op, s.op_start);
    }
    delivered_.clear();
    flows_.advance_to(now_, delivered_);
    // Owners first: a phase started below may reuse the id of a flow that
    // is later in this batch (ids are free once reported delivered).
    delivered_owners_.clear();
    for (const DeliveredFlow& d : delivered_) delivered_owners_.push_back(flow_owner_[d.id]);
    for (uint64_t owner : delivered_owners_) {
      auto id = static_cast<uint32_t>(owner >> 32);
      auto g = static_cast<uint32_t>(owner);
      Instance& inst = instances_[id];
      if (--inst.outstanding[g] > 0) continue;
      ++inst.phase[g];
      start_phase(id, g);
      if (instances_[id].groups_left == 0) finish_instance(id);
    }
  }
}

bool Executor::stuck(DiagnosticEngine& diags) const {
  for (uint32_t c = 0; c < classes_.count(); ++c) {
    const ClassState& s = state_[c];
    if (s.ops_left == 0) continue;
    for (int q = 0; q < queue_count_; ++q) {
      const Queue& queue = s.queues[static_cast<size_t>(q)];
      if (queue.pos >= queue.ops.size()) continue;
      OpId op = queue.ops[queue.pos];
      diags
          .error(diag::kSimStuck, f_.op_range(op),
                 fmt::format("the schedule cannot finish: rank {} waits forever at {}", classes_.members(c)[0],
                             ir::op_label(m_, f_, op)))
          .note("run `dstc ir verify` for the cycle of ops that wait for each other");
      return true;
    }
  }
  return false;
}

SimReport Executor::report() {
  SimReport r;
  r.function = f_.name;
  r.cluster = cluster_.name;
  r.executor = options_.executor;
  r.bandwidth_sharing = options_.bandwidth_sharing;
  r.overlap = options_.overlap;
  r.gpu_sms = cluster_.gpu.sms;
  r.collective_sms = cluster_.runtime.collective_sms;
  r.intra_node_collective_sms = cluster_.runtime.intra_node_collective_sms;
  if (options_.profile) r.profile_gpu = options_.profile->gpu;
  uint32_t critical = 0;
  for (uint32_t c = 0; c < classes_.count(); ++c) {
    if (state_[c].finish > state_[critical].finish) critical = c;
  }
  r.step_time_s = classes_.count() > 0 ? state_[critical].finish : 0;
  now_ = r.step_time_s;
  for (uint32_t c = 0; c < classes_.count(); ++c) account(c);
  if (classes_.count() > 0) {
    r.breakdown = state_[critical].time;
    r.critical_device = classes_.members(critical)[0];
  }
  if (r.step_time_s > 0 && options_.global_batch) {
    r.samples_per_s = static_cast<double>(*options_.global_batch) / r.step_time_s;
    if (options_.sequence_length) r.tokens_per_s = *r.samples_per_s * static_cast<double>(*options_.sequence_length);
  }
  r.num_devices = m_.mesh().size();
  for (const ir::Value& v : f_.values) {
    if (v.fill == ir::Fill{}) continue;
    auto unevenness = [](const ir::Fill& fill) { return fill.fullest / fill.mean; };
    if (!r.expert_slots || unevenness(v.fill) > unevenness(*r.expert_slots)) r.expert_slots = v.fill;
  }
  r.model_flops = model_flops_;
  auto dominant = std::max_element(flops_by_dtype_.begin(), flops_by_dtype_.end());
  r.compute_dtype = *dominant > 0 ? static_cast<ComputeDtype>(dominant - flops_by_dtype_.begin()) : ComputeDtype::Fp32;
  r.peak_flops_per_gpu = cluster_.gpu.peak(r.compute_dtype);
  if (r.step_time_s > 0 && r.num_devices > 0) {
    double per_gpu = model_flops_ / r.step_time_s / static_cast<double>(r.num_devices);
    r.tflops_per_gpu = per_gpu / 1e12;
    r.mfu = per_gpu / r.peak_flops_per_gpu;
  }
  r.memory_capacity_bytes = cluster_.gpu.memory_bytes;
  r.peak_memory_bytes.resize(static_cast<size_t>(r.num_devices));
  for (ir::Rank rank = 0; rank < r.num_devices; ++rank) {
    uint32_t c = classes_.of_rank(rank);
    r.peak_memory_bytes[static_cast<size_t>(rank)] = memory_.peak(c);
    if (memory_.oom(c)) r.oom_devices.push_back(rank);
  }
  if (r.num_devices > 0) {
    auto fullest = std::max_element(r.peak_memory_bytes.begin(), r.peak_memory_bytes.end());
    r.fullest_rank = static_cast<ir::Rank>(fullest - r.peak_memory_bytes.begin());
    r.memory_at_peak = memory_.at_peak(classes_.of_rank(r.fullest_rank));
    r.memory_kind_peaks = memory_.kind_peaks(classes_.of_rank(r.fullest_rank));
  }
  r.oom = !r.oom_devices.empty();
  r.num_ops = static_cast<int64_t>(f_.ops.size());
  r.num_device_ops = device_ops_;
  r.num_classes = static_cast<int64_t>(classes_.count());
  r.num_flows = flow_count_;
  r.num_mirrored_flows = mirrored_flow_count_;
  if (options_.record_trace) {
    SimTrace trace;
    trace.ranks = traced_ranks_;
    for (ir::Rank rank : traced_ranks_) trace.rank_class.push_back(classes_.of_rank(rank));
    trace.spans = std::move(spans_);
    for (uint32_t c = 0; c < classes_.count(); ++c) {
      if (!state_[c].traced) continue;
      for (const MemorySample& s : memory_.timeline(c)) trace.memory.push_back({c, s.time, s.live_bytes});
    }
    r.trace = std::move(trace);
  }
  return r;
}

// The module's ranks must map to distinct devices of the cluster.
bool fits(const ir::Module& module, const ClusterSpec& cluster, DiagnosticEngine& diags) {
  const ir::Mesh& mesh = module.mesh();
  if (mesh.size() > cluster.num_devices()) {
    diags
        .error(diag::kSimMeshTooLarge, module.mesh_range,
               fmt::format("the module's mesh {} has {} devices, the cluster '{}' only {}", mesh.name(), mesh.size(),
                           cluster.name, cluster.num_devices()))
        .note(fmt::format("the cluster file is {}; `--nodes N` scales it out", cluster.path));
    return false;
  }
  std::vector<ir::Rank> user(static_cast<size_t>(cluster.num_devices()), -1);
  for (ir::Rank r = 0; r < mesh.size(); ++r) {
    int32_t d = mesh.physical(r);
    if (d < 0 || d >= cluster.num_devices()) {
      diags.error(diag::kSimBadDeviceMap, module.mesh_range,
                  fmt::format("rank {} of mesh {} is placed on device {}, outside the cluster's {} devices", r,
                              mesh.name(), d, cluster.num_devices()));
      return false;
    }
    if (user[static_cast<size_t>(d)] >= 0) {
      diags.error(diag::kSimBadDeviceMap, module.mesh_range,
                  fmt::format("ranks {} and {} of mesh {} are both placed on device {}", user[static_cast<size_t>(d)],
                              r, mesh.name(), d));
      return false;
    }
    user[static_cast<size_t>(d)] = r;
  }
  return true;
}

// DeepEP's exchange runs only over the groups it has kernel configs for:
// a real run stops at the first other one.
bool deepep_groups_supported(const ir::Module& m, const ir::Function& f, DiagnosticEngine& diags) {
  for (OpId id = 0; id < f.ops.size(); ++id) {
    const ir::Op& op = f.ops[id];
    if (!is_deepep_exchange(m, f, op)) continue;
    const int64_t group = ir::group_size(m, op);
    if (std::find(kDeepepGroups.begin(), kDeepepGroups.end(), group) != kDeepepGroups.end()) continue;
    // Where the module came from a .dstrat, the op's loc is the layer that
    // exchanges; IR text has its own op ranges.
    SourceRange at = f.op_range(id);
    if (!at.valid() && op.loc != ir::kNoLoc) {
      const ir::SourceLoc& loc = m.loc(op.loc);
      if (std::optional<FileId> file = diags.sources().find(m.str(loc.file)))
        at = diags.sources().range_at(*file, loc.line, loc.column);
    }
    diags
        .error(diag::kSimDeepepGroup, at,
               fmt::format("DeepEP has no kernel config for an exchange over {} ranks ({})", group,
                           ir::op_label(m, f, id)))
        .note(fmt::format("Megatron-Core's DeepEP (moe_dispatcher = deepep) runs over {} ranks; lay the experts "
                          "over one of those, or use moe_dispatcher = alltoall",
                          fmt::join(kDeepepGroups, ", ")));
    return false;
  }
  return true;
}

}  // namespace

const ir::Function* find_function(const ir::Module& module, const std::string& name) {
  if (!name.empty()) return module.find_function(name);
  if (const ir::Function* f = module.find_function("train_step")) return f;
  return module.functions.empty() ? nullptr : &module.functions.front();
}

std::optional<SimReport> simulate(const ir::Module& module, const ClusterSpec& cluster, const SimOptions& options,
                                  DiagnosticEngine& diags) {
  const ir::Function* f = find_function(module, options.function);
  if (!f) {
    auto error =
        diags.error(diag::kSimNoFunction, module.mesh_range,
                    options.function.empty() ? std::string("the module has no function to simulate")
                                             : fmt::format("the module has no function '{}'", options.function));
    std::vector<std::string> names;
    for (const ir::Function& g : module.functions) names.push_back(g.name);
    if (std::optional<std::string> meant = closest_spelling(options.function, names))
      error.note(fmt::format("did you mean '{}'?", *meant));
    else if (!names.empty())
      error.note(fmt::format("its functions: {}", fmt::join(names, ", ")));
    return std::nullopt;
  }
  if (!fits(module, cluster, diags) || !deepep_groups_supported(module, *f, diags)) return std::nullopt;
  Executor executor(module, *f, cluster, options);
  executor.prepare();
  executor.run();
  if (executor.stuck(diags)) return std::nullopt;
  return executor.report();
}

}  // namespace dstc::htae
