// The HTAE simulator: executes an explicit-schedule IR function on a cluster
// and predicts its step time, throughput, memory and where time goes
// (docs/simulator.md).
//
// Every device has an in-order queue per stream (compute, feature and
// gradient communication, pipeline sends) holding its ops of that stream in
// program order, and one for its pipeline receives. An op
// starts when it heads its queue and its operands exist on the device;
// a collective or send/recv starts when every participant is at it, and its
// transfers then share the physical links max-min fairly in the flow engine.
// Compute runs on the SMs that gradient communication and expert
// all-to-alls in flight on the same device leave it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "htae/cluster_spec.h"
#include "htae/memory_tracker.h"
#include "htae/profile_database.h"
#include "ir/module.h"
#include "ir/queues.h"
#include "ir/source/diagnostics.h"

namespace dstc::htae {

enum class ExecutorKind {
  Htae,          // three concurrent streams per device (Proteus)
  ProgramOrder,  // one op at a time per device, every stream in program order (DistIR)
};
std::string_view executor_name(ExecutorKind kind);

// The htae executor's queues: one per IR stream, and one more for the
// receives of the pipeline stream. Megatron-LM posts a stage's send and
// receive as one batched isend/irecv, so neither waits for the other: a
// receive is posted when the program reaches it and holds up no send.

std::optional<ExecutorKind> parse_executor(std::string_view name);

struct SimOptions {
  std::string function;                      // empty: "train_step", else the module's first function
  std::optional<int64_t> global_batch;       // samples per step, for samples/s and tokens/s
  std::optional<int64_t> sequence_length;    // tokens per sample, for tokens/s
  const ProfileDatabase* profile = nullptr;  // measured op and collective times
  bool bandwidth_sharing = true;             // false: every transfer gets its route's full bandwidth
  bool overlap = true;                       // false: no comp-comm slowdown
  ExecutorKind executor = ExecutorKind::Htae;
  bool symmetry = true;       // simulate devices with identical programs once (docs/simulator.md)
  bool record_trace = false;  // keep op spans and memory samples for a Chrome trace
  int trace_all_up_to = 64;   // trace every device of meshes this small, else one per device class
};

// Where the critical device's step time went; the four add up to the step time.
struct SimBreakdown {
  double compute_s = 0;       // a compute op running
  double exposed_comm_s = 0;  // communication in flight, no compute running
  double bubble_s = 0;        // nothing running, waiting for data from another pipeline stage
  double idle_s = 0;          // nothing running otherwise
};

struct TraceSpan {
  uint32_t device_class = 0;
  ir::OpId op = 0;
  double start = 0;
  double end = 0;
};

struct TraceMemorySample {
  uint32_t device_class = 0;
  double time = 0;
  int64_t live_bytes = 0;
};

// What a Chrome trace shows: spans and memory per device class, and the
// traced ranks with the class each belongs to.
struct SimTrace {
  std::vector<ir::Rank> ranks;
  std::vector<uint32_t> rank_class;
  std::vector<TraceSpan> spans;
  std::vector<TraceMemorySample> memory;
};

struct SimReport {
  std::string function;
  std::string cluster;
  ExecutorKind executor = ExecutorKind::Htae;
  bool bandwidth_sharing = true;
  bool overlap = true;
  int64_t gpu_sms = 0;                    // the GPU's SMs (0: not given, no slowdown)
  int64_t collective_sms = 0;             // those an NCCL collective across nodes holds
  int64_t intra_node_collective_sms = 0;  // and one within a node
  std::string profile_gpu;                // the GPU a --profile was measured on; "" without one

  double step_time_s = 0;
  std::optional<double> samples_per_s;
  std::optional<double> tokens_per_s;
  double model_flops = 0;  // per step, over all devices, without recomputation
  ComputeDtype compute_dtype = ComputeDtype::Fp32;
  double peak_flops_per_gpu = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;

  std::vector<int64_t> peak_memory_bytes;  // per mesh rank
  ir::Rank fullest_rank = 0;               // the first with the highest peak
  MemoryBreakdown memory_at_peak{};        // what its peak held
  MemoryBreakdown memory_kind_peaks{};     // its peak of each kind, each at its own time
  int64_t memory_capacity_bytes = 0;
  bool oom = false;
  std::vector<ir::Rank> oom_devices;

  SimBreakdown breakdown;
  ir::Rank critical_device = 0;

  int64_t num_devices = 0;         // mesh ranks
  int64_t num_ops = 0;             // IR ops of the function
  int64_t num_device_ops = 0;      // op executions summed over devices
  int64_t num_classes = 0;         // device classes actually simulated
  int64_t num_flows = 0;           // point-to-point transfers in the flow engine
  int64_t num_mirrored_flows = 0;  // transfers of groups a simulated group mirrors, not simulated

  // Mixture of experts: the experts' slots whose load is the most uneven,
  // filled on the fullest rank (which every rank is priced as) and on
  // average; none without partly filled values.
  std::optional<ir::Fill> expert_slots;

  std::optional<SimTrace> trace;
};

// The function `simulate` runs: `name`, else "train_step", else the
// module's first; nullptr when there is none.
const ir::Function* find_function(const ir::Module& module, const std::string& name);

// Simulates one function of `module` on `cluster`. Reports to `diags` and
// returns nullopt when the module does not fit the cluster or its schedule
// cannot finish. The module should have passed ir::verify_module.
std::optional<SimReport> simulate(const ir::Module& module, const ClusterSpec& cluster, const SimOptions& options,
                                  DiagnosticEngine& diags);

}  // namespace dstc::htae
