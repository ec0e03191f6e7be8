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
    links_.push_back(LinkState{c, {}});
  }
}

FlowEngine::FlowEngine(const Topology& topology, bool sharing) : FlowEngine(capacities(topology), sharing) {}

FlowId FlowEngine::start_flow(std::span<const LinkId> route, double bytes, double now, double latency) {
  if (now < now_) throw std::logic_error(fmt::format("FlowEngine: start at {} before the clock {}", now, now_));
  now_ = now;
  FlowId id;
  if (free_ids_.empty()) {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
  }
  Flow& f = flows_[id];
  f.links.assign(route.begin(), route.end());
  f.remaining = std::max(0.0, bytes);
  f.since = now;
  f.rate = 0;
  f.latency = latency;
  f.version += 1;
  ++pending_count_;
  if (f.links.empty() || f.remaining == 0) {
    f.active = false;
    push_event({now + latency, id, kDelivery});
    return id;
  }
  f.active = true;
  ++active_count_;
  f.slot_in_link.resize(f.links.size());
  for (size_t i = 0; i < f.links.size(); ++i) {
    LinkState& l = links_.at(f.links[i]);
    f.slot_in_link[i] = static_cast<uint32_t>(l.flows.size());
    l.flows.push_back(id);
  }
  if (sharing_) {
    dirty_links_.insert(dirty_links_.end(), f.links.begin(), f.links.end());
  } else {
    double narrowest = kInfinity;
    for (LinkId l : f.links) narrowest = std::min(narrowest, links_[l].capacity);
    f.rate = narrowest;
    schedule_drain(id);
  }
  return id;
}

void FlowEngine::schedule_drain(FlowId id) {
  Flow& f = flows_[id];
  f.version += 1;
  push_event({f.since + f.remaining / f.rate, id, f.version});
}

void FlowEngine::remove_from_links(FlowId id) {
  Flow& f = flows_[id];
  for (size_t i = 0; i < f.links.size(); ++i) {
    LinkState& l = links_[f.links[i]];
    uint32_t slot = f.slot_in_link[i];
    FlowId moved = l.flows.back();
    l.flows[slot] = moved;
    l.flows.pop_back();
    if (moved != id) {
      Flow& m = flows_[moved];
      for (size_t k = 0; k < m.links.size(); ++k) {
        if (m.links[k] == f.links[i]) {
          m.slot_in_link[k] = slot;
          break;
        }
      }
    }
  }
  f.active = false;
  --active_count_;
}

void FlowEngine::recompute() {
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
      for (LinkId l : f.links) {
        if (links_[l].stamp != stamp_) links_[l].stamp = stamp_, component_links_.push_back(l);
      }
    }
  }
  heap_.clear();
  for (LinkId id : component_links_) {
    LinkState& l = links_[id];
    l.residual = l.capacity;
    l.unfrozen = static_cast<uint32_t>(l.flows.size());
    if (l.unfrozen > 0) heap_.push_back({l.residual / l.unfrozen, id});
  }
  for (FlowId id : component_flows_) {
    Flow& f = flows_[id];
    settle(f);
    f.frozen = false;
    f.previous_rate = f.rate;
  }
  // Progressive filling. A link's fair share only grows as flows elsewhere
  // freeze below it, so a popped entry whose share has grown is re-pushed.
  auto cmp = [](const std::pair<double, LinkId>& a, const std::pair<double, LinkId>& b) { return a.first > b.first; };
  std::make_heap(heap_.begin(), heap_.end(), cmp);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    auto [share, id] = heap_.back();
    heap_.pop_back();
    LinkState& l = links_[id];
    if (l.unfrozen == 0) continue;
    double current = std::max(0.0, l.residual) / l.unfrozen;
    if (current > share * (1 + 1e-12)) {
      heap_.push_back({current, id});
      std::push_heap(heap_.begin(), heap_.end(), cmp);
      continue;
    }
    for (FlowId fid : l.flows) {
      Flow& f = flows_[fid];
      if (f.frozen) continue;
      f.frozen = true;
      f.rate = current;
      for (LinkId other : f.links) {
        LinkState& o = links_[other];
        o.residual -= current;
        o.unfrozen -= 1;
      }
    }
  }
  // A flow whose rate did not change keeps its drain event.
  for (FlowId id : component_flows_) {
    if (flows_[id].rate != flows_[id].previous_rate) schedule_drain(id);
  }
  // Drop stale events once they dominate the heap.
  if (events_.size() > 4 * pending_count_ + 1024) {
    std::erase_if(events_, [&](const Event& e) { return is_stale(e); });
    std::make_heap(events_.begin(), events_.end(), std::greater<>());
  }
}

void FlowEngine::push_event(Event e) {
  events_.push_back(e);
  std::push_heap(events_.begin(), events_.end(), std::greater<>());
}

FlowEngine::Event FlowEngine::pop_event() {
  std::pop_heap(events_.begin(), events_.end(), std::greater<>());
  Event e = events_.back();
  events_.pop_back();
  return e;
}

void FlowEngine::pop_stale() {
  while (!events_.empty() && is_stale(events_.front())) pop_event();
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
    while (!events_.empty() && events_.front().time <= at) {
      Event e = pop_event();
      Flow& f = flows_[e.flow];
      if (e.version == kDelivery) {
        delivered.push_back({e.flow, e.time});
        --pending_count_;
        f.links.clear();
        free_ids_.push_back(e.flow);
      } else if (f.active && f.version == e.version) {
        f.remaining = 0;
        f.since = now_;
        remove_from_links(e.flow);
        if (sharing_) dirty_links_.insert(dirty_links_.end(), f.links.begin(), f.links.end());
        push_event({now_ + f.latency, e.flow, kDelivery});
      }
    }
  }
  now_ = std::max(now_, t);
}

}  // namespace dstc::htae
