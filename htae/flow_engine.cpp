#include "htae/flow_engine.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace dstc::htae {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::vector<double> capacities(const Topology& topology) {
  std::vector<double> result(topology.num_links());
  for (LinkId id = 0; id < result.size(); ++id) result[id] = topology.link(id).capacity;
  return result;
}

}  // namespace

FlowEngine::FlowEngine(std::vector<double> link_capacity, bool sharing) : sharing_(sharing) {
  links_.reserve(link_capacity.size());
  for (double c : link_capacity) {
    if (!(c > 0)) throw std::invalid_argument("FlowEngine: link capacities must be positive");
    links_.push_back(LinkState{c, {}, c});
  }
  if (links_.size() >= kFlowEntry) throw std::length_error("FlowEngine: more than 2^31 links");
}

FlowEngine::FlowEngine(const Topology& topology, bool sharing) : FlowEngine(capacities(topology), sharing) {}

FlowId FlowEngine::start_flow(std::span<const LinkId> route, double bytes, double now, double latency) {
  if (now < now_) throw std::logic_error(fmt::format("FlowEngine: start at {} before the clock {}", now, now_));
  now_ = now;
  FlowId id;
  if (free_ids_.empty()) {
    // The filling heap tags flow entries with kFlowEntry: ids stay below it.
    if (flows_.size() >= kFlowEntry) throw std::length_error("FlowEngine: more than 2^31 flows in flight");
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
  }
  Flow& f = flows_[id];
  f.hop_count = static_cast<uint32_t>(route.size());
  if (f.hop_count > Flow::kInlineHops) f.spilled_hops.resize(route.size());
  std::span<Hop> hops = f.hops();
  for (size_t i = 0; i < route.size(); ++i) hops[i].link = route[i];
  f.remaining = std::max(0.0, bytes);
  f.since = now;
  f.rate = 0;
  f.latency = latency;
  f.version += 1;
  ++pending_count_;
  if (hops.empty() || f.remaining == 0) {
    f.active = false;
    push_one(now + latency, {id, kDelivery});
    return id;
  }
  f.active = true;
  ++active_count_;
  for (Hop& hop : hops) {
    LinkState& l = links_.at(hop.link);
    hop.slot = static_cast<uint32_t>(l.flows.size());
    l.flows.push_back(id);
  }
  if (sharing_) {
    if (!rate_alone(f)) {
      for (const Hop& hop : hops) dirty_links_.push_back(hop.link);
    } else {
      // Pushed with the other flows started before the next event, so a
      // collective's flows that drain together share one heap entry.
      f.version += 1;
      started_.push_back({drain_time(f), {id, f.version}});
    }
  } else {
    double narrowest = kInfinity;
    for (const Hop& hop : hops) narrowest = std::min(narrowest, links_[hop.link].capacity);
    f.rate = narrowest;
    f.version += 1;
    push_one(drain_time(f), {id, f.version});
  }
  return id;
}

bool FlowEngine::saturated(const LinkState& l) const { return l.residual <= kSaturated * l.capacity; }

bool FlowEngine::rate_alone(Flow& f) {
  // The fair share the new flow would get without moving another flow: the
  // least residual capacity on its route (a link it is alone on has all of
  // its capacity).
  double share = kInfinity, narrowest = kInfinity;
  for (const Hop& hop : f.hops()) {
    const LinkState& l = links_[hop.link];
    share = std::min(share, l.flows.size() == 1 ? l.capacity : l.residual);
    narrowest = std::min(narrowest, l.capacity);
  }
  if (share <= kSaturated * narrowest) return false;  // a saturated link: the others must make room
  // Max-min fair only if no flow on a link the new one saturates runs
  // faster than it (else that flow must give bandwidth up).
  for (const Hop& hop : f.hops()) {
    const LinkState& l = links_[hop.link];
    if (l.flows.size() == 1 || l.residual - share > kSaturated * l.capacity) continue;
    for (FlowId other : l.flows) {
      if (&flows_[other] != &f && flows_[other].rate > share * (1 + kSaturated)) return false;
    }
  }
  f.rate = share;
  for (const Hop& hop : f.hops()) {
    LinkState& l = links_[hop.link];
    l.residual = l.flows.size() == 1 ? l.capacity - share : l.residual - share;
  }
  return true;
}

bool FlowEngine::leaves_others_alone(Flow& f) const {
  for (const Hop& hop : f.hops()) {
    const LinkState& l = links_[hop.link];
    if (l.flows.size() > 1 && saturated(l)) return false;
  }
  return true;
}

void FlowEngine::remove_from_links(FlowId id) {
  Flow& f = flows_[id];
  for (const Hop& hop : f.hops()) {
    LinkState& l = links_[hop.link];
    FlowId moved = l.flows.back();
    l.flows[hop.slot] = moved;
    l.flows.pop_back();
    if (moved != id) {
      for (Hop& other : flows_[moved].hops()) {
        if (other.link == hop.link) {
          other.slot = hop.slot;
          break;
        }
      }
    }
  }
  f.active = false;
  --active_count_;
}

void FlowEngine::recompute() {
  if (!started_.empty()) {
    push_batches(started_);
    started_.clear();
  }
  if (dirty_links_.empty()) return;
  ++recomputations_;
  ++stamp_;
  component_links_.clear();
  component_flows_.clear();
  for (LinkId l : dirty_links_) {
    if (links_[l].stamp != stamp_) links_[l].stamp = stamp_, component_links_.push_back(l);
  }
  dirty_links_.clear();
  // The connected component(s) of the flow-link graph around the change.
  for (size_t i = 0; i < component_links_.size(); ++i) {
    for (FlowId id : links_[component_links_[i]].flows) {
      Flow& f = flows_[id];
      if (f.stamp == stamp_) continue;
      f.stamp = stamp_;
      component_flows_.push_back(id);
      for (const Hop& hop : f.hops()) {
        if (links_[hop.link].stamp != stamp_) links_[hop.link].stamp = stamp_, component_links_.push_back(hop.link);
      }
    }
  }
  for (FlowId id : component_flows_) {
    Flow& f = flows_[id];
    settle(f);
    f.frozen = false;
    f.previous_rate = f.rate;
    f.private_capacity = kInfinity;
  }
  // A link only one flow uses freezes that flow at its capacity when the
  // filling reaches it; the narrowest such link of a flow stands for all of
  // them as one heap entry. Most links of a route are a GPU's or a NIC's
  // own, so the heap holds a fraction of the component's links.
  heap_.clear();
  for (LinkId id : component_links_) {
    LinkState& l = links_[id];
    l.residual = l.capacity;
    l.unfrozen = static_cast<uint32_t>(l.flows.size());
    if (l.unfrozen == 1) {
      Flow& f = flows_[l.flows[0]];
      f.private_capacity = std::min(f.private_capacity, l.capacity);
    } else if (l.unfrozen > 1) {
      heap_.push_back({l.residual / l.unfrozen, id});
    }
  }
  for (FlowId id : component_flows_) {
    if (flows_[id].private_capacity < kInfinity) heap_.push_back({flows_[id].private_capacity, kFlowEntry | id});
  }
  auto freeze = [&](Flow& f, double rate) {
    f.frozen = true;
    f.rate = rate;
    for (const Hop& hop : f.hops()) {
      LinkState& o = links_[hop.link];
      o.residual -= rate;
      o.unfrozen -= 1;
    }
  };
  // Progressive filling. A link's fair share only grows as flows elsewhere
  // freeze below it, so a popped entry whose share has grown is re-pushed.
  auto cmp = [](const std::pair<double, uint32_t>& a, const std::pair<double, uint32_t>& b) {
    return a.first > b.first;
  };
  std::make_heap(heap_.begin(), heap_.end(), cmp);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    auto [share, id] = heap_.back();
    heap_.pop_back();
    if (id & kFlowEntry) {
      Flow& f = flows_[id & ~kFlowEntry];
      if (!f.frozen) freeze(f, share);
      continue;
    }
    LinkState& l = links_[id];
    if (l.unfrozen == 0) continue;
    double current = std::max(0.0, l.residual) / l.unfrozen;
    if (current > share * (1 + 1e-12)) {
      heap_.push_back({current, id});
      std::push_heap(heap_.begin(), heap_.end(), cmp);
      continue;
    }
    for (FlowId fid : l.flows) {
      if (!flows_[fid].frozen) freeze(flows_[fid], current);
    }
  }
  // A flow whose rate did not change keeps its drain event.
  timed_.clear();
  for (FlowId id : component_flows_) {
    Flow& f = flows_[id];
    if (f.rate == f.previous_rate) continue;
    f.version += 1;
    timed_.push_back({drain_time(f), {id, f.version}});
  }
  push_batches(timed_);
  // Drop stale events once they dominate the heap.
  if (events_.size() > 4 * pending_count_ + 1024) {
    std::erase_if(events_, [&](const Event& e) {
      if (!all_stale(batches_[e.batch])) return false;
      free_batch(e.batch);
      return true;
    });
    std::make_heap(events_.begin(), events_.end(), std::greater<>());
  }
}

uint32_t FlowEngine::new_batch(double time) {
  uint32_t batch;
  if (free_batches_.empty()) {
    batch = static_cast<uint32_t>(batches_.size());
    batches_.emplace_back();
  } else {
    batch = free_batches_.back();
    free_batches_.pop_back();
  }
  batches_[batch].entries.clear();
  batches_[batch].first_live = 0;
  events_.push_back({time, batch});
  std::push_heap(events_.begin(), events_.end(), std::greater<>());
  return batch;
}

void FlowEngine::push_batches(std::span<const std::pair<double, Entry>> timed) {
  // The times are few (a collective's flows drain together), so each entry
  // looks for its time among the last batches opened here; past
  // kOpen distinct times a time may get a second batch, which is harmless.
  constexpr size_t kOpen = 8;
  std::pair<double, uint32_t> open[kOpen];
  size_t opened = 0;
  for (const auto& [time, entry] : timed) {
    uint32_t batch = UINT32_MAX;
    for (size_t k = std::min(opened, kOpen); k-- > 0;) {
      if (open[k].first == time) {
        batch = open[k].second;
        break;
      }
    }
    if (batch == UINT32_MAX) {
      batch = new_batch(time);
      open[opened % kOpen] = {time, batch};
      ++opened;
    }
    batches_[batch].entries.push_back(entry);
  }
}

void FlowEngine::push_one(double time, Entry entry) { batches_[new_batch(time)].entries.push_back(entry); }

bool FlowEngine::all_stale(Batch& b) const {
  while (b.first_live < b.entries.size() && is_stale(b.entries[b.first_live])) ++b.first_live;
  return b.first_live == b.entries.size();
}

void FlowEngine::free_batch(uint32_t batch) { free_batches_.push_back(batch); }

FlowEngine::Event FlowEngine::pop_event() {
  std::pop_heap(events_.begin(), events_.end(), std::greater<>());
  Event e = events_.back();
  events_.pop_back();
  return e;
}

void FlowEngine::pop_stale() {
  while (!events_.empty() && all_stale(batches_[events_.front().batch])) free_batch(pop_event().batch);
}

double FlowEngine::next_event_time() {
  recompute();
  pop_stale();
  return events_.empty() ? kInfinity : events_.front().time;
}

double FlowEngine::rate(FlowId id) {
  recompute();
  return flows_.at(id).active ? flows_[id].rate : 0.0;
}

void FlowEngine::advance_to(double t, std::vector<DeliveredFlow>& delivered) {
  for (;;) {
    recompute();
    pop_stale();
    if (events_.empty() || events_.front().time > t) break;
    // Every event at this instant, then one recomputation for all of them.
    double at = events_.front().time;
    now_ = std::max(now_, at);
    timed_.clear();
    while (!events_.empty() && events_.front().time <= at) {
      Event e = pop_event();
      Batch& b = batches_[e.batch];
      for (size_t i = b.first_live; i < b.entries.size(); ++i) {
        Entry entry = b.entries[i];
        Flow& f = flows_[entry.flow];
        if (entry.version == kDelivery) {
          delivered.push_back({entry.flow, e.time});
          --pending_count_;
          f.hop_count = 0;
          free_ids_.push_back(entry.flow);
        } else if (f.active && f.version == entry.version) {
          f.remaining = 0;
          f.since = now_;
          // A flow that crossed no saturated link shared with another was
          // no other flow's bottleneck: its leaving changes no other rate.
          const bool alone = leaves_others_alone(f);
          remove_from_links(entry.flow);
          for (const Hop& hop : f.hops()) {
            if (!sharing_) continue;
            if (alone)
              links_[hop.link].residual += f.rate;
            else
              dirty_links_.push_back(hop.link);
          }
          timed_.push_back({now_ + f.latency, {entry.flow, kDelivery}});
        }
      }
      free_batch(e.batch);
    }
    push_batches(timed_);
  }
  now_ = std::max(now_, t);
}

}  // namespace dstc::htae
