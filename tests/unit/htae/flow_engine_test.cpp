#include "htae/flow_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace dstc::htae {
namespace {

std::vector<DeliveredFlow> run_all(FlowEngine& engine) {
  std::vector<DeliveredFlow> delivered;
  for (double t; (t = engine.next_event_time()) < std::numeric_limits<double>::infinity();) {
    engine.advance_to(t, delivered);
  }
  return delivered;
}

double delivery_time(const std::vector<DeliveredFlow>& delivered, FlowId id) {
  for (const DeliveredFlow& d : delivered) {
    if (d.id == id) return d.time;
  }
  ADD_FAILURE() << "flow " << id << " was not delivered";
  return -1;
}

TEST(FlowEngine, TwoFlowsOnOneLinkEachGetHalf) {
  FlowEngine engine({100.0});
  LinkId route[] = {0};
  FlowId a = engine.start_flow(route, 100, 0);
  FlowId b = engine.start_flow(route, 100, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 50);
  EXPECT_DOUBLE_EQ(engine.rate(b), 50);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 2.0);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 2.0);
}

TEST(FlowEngine, FourFlowsOnOneLinkEachGetAQuarter) {
  FlowEngine engine({100.0});
  LinkId route[] = {0};
  std::vector<FlowId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(engine.start_flow(route, 100, 0));
  for (FlowId id : ids) EXPECT_DOUBLE_EQ(engine.rate(id), 25);
  auto delivered = run_all(engine);
  for (FlowId id : ids) EXPECT_DOUBLE_EQ(delivery_time(delivered, id), 4.0);
}

TEST(FlowEngine, FlowsOnDisjointLinksGetFullRate) {
  FlowEngine engine({100.0, 30.0});
  LinkId r0[] = {0}, r1[] = {1};
  FlowId a = engine.start_flow(r0, 100, 0);
  FlowId b = engine.start_flow(r1, 60, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 100);
  EXPECT_DOUBLE_EQ(engine.rate(b), 30);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 1.0);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 2.0);
}

TEST(FlowEngine, FlowOnTwoLinksIsLimitedByTheNarrower) {
  FlowEngine engine({100.0, 40.0});
  LinkId route[] = {0, 1};
  FlowId a = engine.start_flow(route, 80, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 40);
  EXPECT_DOUBLE_EQ(delivery_time(run_all(engine), a), 2.0);
}

// Links 1 (capacity 10) and 2 (capacity 4). A crosses both, B only link 1,
// C only link 2. Link 2 saturates first at 4/2 = 2 each for A and C; B then
// takes what A leaves of link 1: 10 - 2 = 8.
TEST(FlowEngine, MaxMinFairWithUnbalancedLinks) {
  FlowEngine engine({10.0, 4.0});
  LinkId both[] = {0, 1}, first[] = {0}, second[] = {1};
  FlowId a = engine.start_flow(both, 100, 0);
  FlowId b = engine.start_flow(first, 100, 0);
  FlowId c = engine.start_flow(second, 100, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 2);
  EXPECT_DOUBLE_EQ(engine.rate(b), 8);
  EXPECT_DOUBLE_EQ(engine.rate(c), 2);
}

// A link only A uses (capacity 30, then one of 50) holds A below its share
// of the shared link 0 (100): A 30, B and C split the other 70. When C
// finishes, B takes 70 and A stays at its own link's 30.
TEST(FlowEngine, ALinkOfItsOwnHoldsAFlowBelowItsShare) {
  FlowEngine engine({100.0, 50.0, 30.0});
  LinkId own[] = {1, 0, 2}, shared[] = {0};
  FlowId a = engine.start_flow(own, 300, 0);
  FlowId b = engine.start_flow(shared, 350, 0);
  FlowId c = engine.start_flow(shared, 70, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 30);
  EXPECT_DOUBLE_EQ(engine.rate(b), 35);
  EXPECT_DOUBLE_EQ(engine.rate(c), 35);
  std::vector<DeliveredFlow> delivered;
  engine.advance_to(2.0, delivered);
  EXPECT_DOUBLE_EQ(engine.rate(a), 30);
  EXPECT_DOUBLE_EQ(engine.rate(b), 70);
}

// A (100 B) and B (300 B) share a 100 B/s link: 50 each until A finishes at
// t = 2 with B at 200 B left, which then drains alone at 100: t = 4.
TEST(FlowEngine, RemainingFlowSpeedsUpWhenOneFinishes) {
  FlowEngine engine({100.0});
  LinkId route[] = {0};
  FlowId a = engine.start_flow(route, 100, 0);
  FlowId b = engine.start_flow(route, 300, 0);
  std::vector<DeliveredFlow> delivered;
  engine.advance_to(2.0, delivered);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].id, a);
  EXPECT_DOUBLE_EQ(delivered[0].time, 2.0);
  EXPECT_DOUBLE_EQ(engine.rate(b), 100);
  EXPECT_DOUBLE_EQ(engine.next_event_time(), 4.0);
  engine.advance_to(10.0, delivered);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 4.0);
  EXPECT_EQ(engine.pending_flows(), 0u);
}

// A (200 B) alone at 100 B/s until B (100 B) starts at t = 1 with A at 100 B
// left: both at 50, both finish at t = 3.
TEST(FlowEngine, LateStartSlowsTheFlowInFlight) {
  FlowEngine engine({100.0});
  LinkId route[] = {0};
  FlowId a = engine.start_flow(route, 200, 0);
  std::vector<DeliveredFlow> delivered;
  engine.advance_to(1.0, delivered);
  EXPECT_TRUE(delivered.empty());
  FlowId b = engine.start_flow(route, 100, 1.0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 50);
  delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 3.0);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 3.0);
}

TEST(FlowEngine, LatencyDelaysDeliveryButNotTheLink) {
  FlowEngine engine({100.0});
  LinkId route[] = {0};
  FlowId a = engine.start_flow(route, 100, 0, 0.5);
  FlowId b = engine.start_flow(route, 300, 0, 0.5);
  auto delivered = run_all(engine);
  // Data of A drains at t = 2; B then has the link alone: drains at 4.
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 2.5);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 4.5);
}

TEST(FlowEngine, EmptyRouteOrZeroBytesDeliverAfterLatencyOnly) {
  FlowEngine engine({100.0});
  LinkId route[] = {0};
  FlowId local = engine.start_flow({}, 1000, 1.0);
  FlowId empty = engine.start_flow(route, 0, 1.0, 0.25);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, local), 1.0);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, empty), 1.25);
}

TEST(FlowEngine, WithoutSharingEveryFlowGetsItsNarrowestLink) {
  FlowEngine engine({100.0, 40.0}, /*sharing=*/false);
  LinkId route[] = {0, 1};
  FlowId a = engine.start_flow(route, 80, 0);
  FlowId b = engine.start_flow(route, 80, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 40);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 2.0);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 2.0);
}

TEST(FlowEngine, IndependentComponentsKeepTheirRates) {
  // A and B share link 0; C alone on link 1 is not re-rated when B starts.
  FlowEngine engine({100.0, 100.0});
  LinkId r0[] = {0}, r1[] = {1};
  FlowId a = engine.start_flow(r0, 100, 0);
  FlowId c = engine.start_flow(r1, 100, 0);
  EXPECT_DOUBLE_EQ(engine.rate(c), 100);
  FlowId b = engine.start_flow(r0, 100, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 50);
  EXPECT_DOUBLE_EQ(engine.rate(b), 50);
  EXPECT_DOUBLE_EQ(engine.rate(c), 100);
}

// Link 0 and 1 are two NICs, link 2 the fabric they share, wide enough for
// both: each flow is held by its own NIC, so neither start nor finish moves
// the other, and the engine rates them without a recomputation.
TEST(FlowEngine, AFlowThroughUnsaturatedSharedLinksNeedsNoRecomputation) {
  FlowEngine engine({10.0, 20.0, 100.0});
  LinkId r0[] = {0, 2}, r1[] = {1, 2};
  FlowId a = engine.start_flow(r0, 10, 0);
  FlowId b = engine.start_flow(r1, 40, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 10);
  EXPECT_DOUBLE_EQ(engine.rate(b), 20);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 1.0);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 2.0);
  EXPECT_EQ(engine.recomputations(), 0u);
}

// A new flow whose least residual link carries a faster flow must not
// simply take what is left: the faster flow gives bandwidth up (link 0, 30
// wide, shared; flow a alone could run at 25 through link 1).
TEST(FlowEngine, ANewFlowTakesItsFairShareFromAFasterOne) {
  FlowEngine engine({30.0, 25.0});
  LinkId ra[] = {0, 1}, rb[] = {0};
  FlowId a = engine.start_flow(ra, 1000, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 25);
  FlowId b = engine.start_flow(rb, 1000, 0);
  EXPECT_DOUBLE_EQ(engine.rate(a), 15);
  EXPECT_DOUBLE_EQ(engine.rate(b), 15);
}

// A flow that held a saturated shared link frees bandwidth when it
// finishes: the one it shared with speeds up.
TEST(FlowEngine, AFinishedFlowOnASaturatedLinkSpeedsTheOthersUp) {
  FlowEngine engine({30.0, 100.0});
  LinkId ra[] = {0}, rb[] = {0, 1};
  FlowId a = engine.start_flow(ra, 15, 0);
  FlowId b = engine.start_flow(rb, 45, 0);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 1.0);  // 15 each until a is done
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 2.0);  // then b alone at 30
}

// Max-min fair rates by progressive filling from scratch, for checking.
std::vector<double> max_min_rates(const std::vector<double>& capacity, const std::vector<std::vector<LinkId>>& routes) {
  std::vector<double> rate(routes.size(), 0), residual = capacity;
  std::vector<bool> frozen(routes.size(), false);
  for (size_t left = routes.size(); left > 0;) {
    double share = std::numeric_limits<double>::infinity();
    LinkId narrowest = 0;
    for (LinkId l = 0; l < capacity.size(); ++l) {
      int users = 0;
      for (size_t f = 0; f < routes.size(); ++f)
        if (!frozen[f] && std::count(routes[f].begin(), routes[f].end(), l)) ++users;
      if (users > 0 && residual[l] / users < share) share = residual[l] / users, narrowest = l;
    }
    for (size_t f = 0; f < routes.size(); ++f) {
      if (frozen[f] || !std::count(routes[f].begin(), routes[f].end(), narrowest)) continue;
      frozen[f] = true;
      rate[f] = share;
      --left;
      for (LinkId l : routes[f]) residual[l] -= share;
    }
  }
  return rate;
}

// Flows started one by one on random routes, then drained event by event:
// after every change each flow in flight has its max-min fair rate,
// whichever way the engine reached it.
TEST(FlowEngine, RatesStayMaxMinFairThroughStartsAndFinishes) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> capacity(6);
    for (double& c : capacity) c = 10.0 * (1 + random() % 10);
    FlowEngine engine(capacity);
    std::vector<std::vector<LinkId>> routes;
    std::vector<FlowId> ids;
    auto check = [&](const std::vector<size_t>& live) {
      std::vector<std::vector<LinkId>> live_routes;
      for (size_t f : live) live_routes.push_back(routes[f]);
      std::vector<double> expected = max_min_rates(capacity, live_routes);
      for (size_t i = 0; i < live.size(); ++i)
        EXPECT_NEAR(engine.rate(ids[live[i]]), expected[i], 1e-9 * expected[i]) << "trial " << trial;
    };
    std::vector<size_t> live;
    for (int f = 0; f < 8; ++f) {
      std::vector<LinkId> route;
      for (LinkId l = 0; l < capacity.size(); ++l)
        if (random() % 3 == 0) route.push_back(l);
      if (route.empty()) route.push_back(static_cast<LinkId>(random() % capacity.size()));
      routes.push_back(route);
      ids.push_back(engine.start_flow(route, 10.0 * (1 + random() % 20), 0));
      live.push_back(routes.size() - 1);
      check(live);
    }
    std::vector<DeliveredFlow> delivered;
    for (double t; (t = engine.next_event_time()) < std::numeric_limits<double>::infinity();) {
      engine.advance_to(t, delivered);
      std::erase_if(live, [&](size_t f) { return engine.rate(ids[f]) == 0; });
      check(live);
    }
  }
}

TEST(FlowEngine, DeliveredIdsAreReused) {
  FlowEngine engine({100.0});
  LinkId route[] = {0};
  FlowId a = engine.start_flow(route, 100, 0);
  run_all(engine);
  EXPECT_EQ(engine.start_flow(route, 100, engine.now()), a);
}

// A route longer than a flow holds inline (11 links) shares link 0 with two
// one-link flows: 100/3 each until S1 (50 B) drains at 1.5, then 50 each:
// L (50 B left) at 2.5, S2 (250 B left, then 200 alone) at 4.5. Removing
// S1 and L moves the others within link 0's list, whose slots must follow.
TEST(FlowEngine, LongRoutesShareAndLeaveLinksLikeShortOnes) {
  std::vector<double> capacity(11, 1000.0);
  capacity[0] = 100;
  FlowEngine engine(capacity);
  LinkId long_route[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0};
  LinkId short_route[] = {0};
  FlowId l = engine.start_flow(long_route, 100, 0);
  FlowId s1 = engine.start_flow(short_route, 50, 0);
  FlowId s2 = engine.start_flow(short_route, 300, 0);
  EXPECT_DOUBLE_EQ(engine.rate(l), 100.0 / 3);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, s1), 1.5);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, l), 2.5);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, s2), 4.5);
  // The long flow's id, reused for a short route, holds only that link.
  FlowId again = engine.start_flow(short_route, 100, engine.now());
  FlowId other = engine.start_flow(long_route, 100, engine.now());
  EXPECT_DOUBLE_EQ(engine.rate(again), 50);
  EXPECT_DOUBLE_EQ(engine.rate(other), 50);
}

// Flows that drain at one instant are delivered at that instant, each after
// its own latency.
TEST(FlowEngine, FlowsDrainingTogetherDeliverAfterTheirOwnLatencies) {
  FlowEngine engine({100.0, 100.0});
  LinkId r0[] = {0}, r1[] = {1};
  FlowId a = engine.start_flow(r0, 100, 0, 0.5);
  FlowId b = engine.start_flow(r1, 100, 0, 0.25);
  FlowId c = engine.start_flow(r1, 100, 0, 0.5);
  auto delivered = run_all(engine);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, a), 1.5);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, b), 2.25);
  EXPECT_DOUBLE_EQ(delivery_time(delivered, c), 2.5);
}

}  // namespace
}  // namespace dstc::htae
