// Transfers in flight sharing the physical links max-min fairly.
//
// Each flow crosses a route of directed links. Whenever flows start or
// finish, the rates of the flows that share links with them (transitively:
// their connected component in the flow-link graph) are recomputed by
// progressive filling: the link with the smallest fair share saturates
// first, its flows are frozen at that share, and the rest fill on. Flows
// outside that component keep their rates, so an event costs time in the
// size of its component, not of the whole cluster; a change that moves no
// other flow (rate_alone, leaves_others_alone) costs its route's length.
// Starts are applied lazily, so a collective's flows started together cost
// one recomputation.
//
// A flow's data drains at its rate; it is delivered `latency` seconds after
// its last byte leaves (the route's propagation and per-step latencies),
// during which it no longer holds bandwidth.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "htae/topology.h"

namespace dstc::htae {

// Valid until the flow is reported delivered; then it may be reused.
using FlowId = uint32_t;

struct DeliveredFlow {
  FlowId id;
  double time;  // seconds
};

class FlowEngine {
 public:
  // `sharing` false gives every flow its route's narrowest capacity
  // regardless of the others (the --no-bandwidth-sharing ablation).
  explicit FlowEngine(std::vector<double> link_capacity, bool sharing = true);
  explicit FlowEngine(const Topology& topology, bool sharing = true);

  // Starts `bytes` over `route` at time `now` (>= the engine's time).
  FlowId start_flow(std::span<const LinkId> route, double bytes, double now, double latency = 0);

  // The time of the next delivery or rate change; infinity when idle.
  double next_event_time();
  // Advances the clock to `t`, appending each flow delivered at or before t
  // (in time order) to `delivered`.
  void advance_to(double t, std::vector<DeliveredFlow>& delivered);

  double now() const { return now_; }
  // Current rate (bytes/s) of an active flow; 0 once its data has drained.
  double rate(FlowId id);
  size_t active_flows() const { return active_count_; }
  // Flows started but not yet delivered.
  size_t pending_flows() const { return pending_count_; }
  // Rate recomputations and flows re-rated so far (for benchmarks).
  uint64_t recomputations() const { return recomputations_; }

 private:
  // A link of a flow's route, and the flow's index in that link's flows.
  struct Hop {
    LinkId link;
    uint32_t slot;
  };
  struct Flow {
    // The route lives in the flow itself up to kInlineHops links (every
    // route of the built-in node shapes): walking a link's flows and their
    // routes is the engine's inner loop, and a separate allocation per
    // route made each step of it a cache miss.
    static constexpr uint32_t kInlineHops = 8;
    std::array<Hop, kInlineHops> inline_hops;
    std::vector<Hop> spilled_hops;  // routes longer than kInlineHops
    uint32_t hop_count = 0;
    std::span<Hop> hops() { return {hop_count <= kInlineHops ? inline_hops.data() : spilled_hops.data(), hop_count}; }
    double remaining = 0;  // bytes left at time `since`
    double since = 0;
    double rate = 0;
    double previous_rate = 0;  // before the current recomputation
    double latency = 0;
    uint32_t version = 0;
    uint32_t stamp = 0;
    bool active = false;          // holds bandwidth
    bool frozen = false;          // during progressive filling
    double private_capacity = 0;  // the narrowest link only it uses, during filling
  };
  struct LinkState {
    double capacity;
    std::vector<FlowId> flows;
    double residual;  // capacity less its flows' rates, as last computed
    uint32_t unfrozen = 0;
    uint32_t stamp = 0;
  };
  // What an event acts on: a flow's data drained (if `version` is still
  // the flow's) or, with kDelivery, its delivery.
  struct Entry {
    FlowId flow;
    uint32_t version;
  };
  // Flows that drain or deliver at one instant share one heap entry: a
  // collective's symmetric flows do, so the heap holds a few events per
  // rate change instead of one per flow.
  struct Event {
    double time;
    uint32_t batch;  // index in batches_
    bool operator>(const Event& o) const { return time > o.time; }
  };
  struct Batch {
    std::vector<Entry> entries;
    size_t first_live = 0;  // entries before it are stale
  };
  static constexpr uint32_t kDelivery = UINT32_MAX;

  void settle(Flow& f) {
    f.remaining = std::max(0.0, f.remaining - f.rate * (now_ - f.since));
    f.since = now_;
  }
  double drain_time(const Flow& f) const { return f.since + f.remaining / f.rate; }
  // Pushes the entries as events, one per distinct time.
  void push_batches(std::span<const std::pair<double, Entry>> timed);
  void push_one(double time, Entry entry);
  // An empty batch at `time`, pushed on the heap; returns its index.
  uint32_t new_batch(double time);
  void remove_from_links(FlowId id);
  // Max-min fairness without a recomputation, where the change moves no
  // other flow: a flow that crosses no saturated link takes the least
  // residual capacity on its route (rate_alone, which sets its rate and the
  // residuals, or says no), and a flow that crossed no saturated link
  // shared with another leaves every other rate as it was. Residuals of
  // links outside a pending recomputation stay exact; a link inside one is
  // recomputed with the flows it then holds.
  bool rate_alone(Flow& f);
  bool leaves_others_alone(Flow& f) const;
  bool saturated(const LinkState& l) const;
  static constexpr double kSaturated = 1e-9;  // of a link's capacity
  // Over the components of dirty_links_, after pushing started_'s drains.
  void recompute();
  void pop_stale();
  bool is_stale(const Entry& e) const {
    return e.version != kDelivery && (!flows_[e.flow].active || flows_[e.flow].version != e.version);
  }
  // Whether every entry of the batch is stale (moving its cursor past them).
  bool all_stale(Batch& b) const;
  Event pop_event();
  void free_batch(uint32_t batch);

  std::vector<LinkState> links_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  std::vector<LinkId> dirty_links_;
  std::vector<Event> events_;  // a min-heap on time, with stale entries dropped lazily
  std::vector<Batch> batches_;
  std::vector<uint32_t> free_batches_;
  bool sharing_;
  double now_ = 0;
  uint32_t stamp_ = 0;
  size_t active_count_ = 0;
  size_t pending_count_ = 0;
  uint64_t recomputations_ = 0;
  // Scratch for recompute(), kept to avoid allocation.
  std::vector<LinkId> component_links_;
  std::vector<FlowId> component_flows_;
  // Progressive filling's heap: a link's fair share, or (kFlowEntry | flow)
  // a flow's private capacity.
  static constexpr uint32_t kFlowEntry = 1u << 31;
  std::vector<std::pair<double, uint32_t>> heap_;
  std::vector<std::pair<double, Entry>> timed_;
  std::vector<std::pair<double, Entry>> started_;  // drains of flows rated alone, not yet pushed
};

}  // namespace dstc::htae
