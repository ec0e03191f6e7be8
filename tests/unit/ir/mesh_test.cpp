// Meshes, device sets as slices, and collective groups and send/recv peers
// implied by them.
#include <gtest/gtest.h>

#include "ir/groups.h"
#include "ir/module.h"
#include "ir/printer.h"

namespace dstc::ir {
namespace {

class MeshTest : public ::testing::Test {
 protected:
  void SetUp() override { m_.set_mesh(Mesh("world", {{"pp", 2}, {"dp", 4}, {"tp", 8}})); }

  DeviceSetId slice(std::vector<AxisRange> ranges) { return m_.intern_devices(DeviceSet{std::move(ranges), {}}); }

  Op collective(DeviceSetId devices, uint16_t axes) {
    Op op;
    op.kind = OpKind::AllReduce;
    op.devices = devices;
    op.group_axes = axes;
    return op;
  }

  Module m_;
};

TEST_F(MeshTest, RanksAreRowMajor) {
  const Mesh& mesh = m_.mesh();
  EXPECT_EQ(mesh.size(), 64);
  EXPECT_EQ(mesh.stride(0), 32);
  EXPECT_EQ(mesh.stride(2), 1);
  EXPECT_EQ(mesh.coord(45, 0), 1);  // 45 = 1*32 + 1*8 + 5
  EXPECT_EQ(mesh.coord(45, 1), 1);
  EXPECT_EQ(mesh.coord(45, 2), 5);
  EXPECT_EQ(print_rank_coords(mesh, 45), "world[pp=1, dp=1, tp=5]");
}

TEST_F(MeshTest, SliceMembersAndPrinting) {
  DeviceSetId s = slice({{1, 2}, {0, 2}, {0, 8}});  // world[pp=1, dp=0..2]
  std::span<const Rank> members = m_.members(s);
  ASSERT_EQ(members.size(), 16u);
  EXPECT_EQ(members.front(), 32);
  EXPECT_EQ(members.back(), 47);
  EXPECT_TRUE(m_.contains(s, 40));
  EXPECT_FALSE(m_.contains(s, 48));
  EXPECT_EQ(print_devices(m_, s), "world[pp=1, dp=0..2]");
  EXPECT_EQ(print_devices(m_, m_.intern_devices(DeviceSet::whole(m_.mesh()))), "world");
  EXPECT_EQ(print_devices(m_, m_.intern_devices(DeviceSet::single(m_.mesh(), 45))), "world[pp=1, dp=1, tp=5]");
  EXPECT_EQ(slice({{1, 2}, {0, 2}, {0, 8}}), s);  // interned once
  EXPECT_TRUE(m_.includes(slice({{1, 2}, {0, 4}, {0, 8}}), s));
  EXPECT_FALSE(m_.includes(s, slice({{1, 2}, {0, 4}, {0, 8}})));
  EXPECT_THROW(slice({{0, 3}, {0, 4}, {0, 8}}), std::invalid_argument);
}

TEST_F(MeshTest, ExplicitListsKeepTheirOrder) {
  DeviceSetId s = m_.intern_devices(DeviceSet::list({9, 3, 60}));
  EXPECT_EQ(std::vector<Rank>(m_.members(s).begin(), m_.members(s).end()), (std::vector<Rank>{9, 3, 60}));
  EXPECT_EQ(print_devices(m_, s), "world{9, 3, 60}");
  EXPECT_THROW(m_.intern_devices(DeviceSet::list({1, 1})), std::invalid_argument);
}

TEST_F(MeshTest, AllReduceOverTpOnAStageHasOneGroupPerDpRow) {
  Op op = collective(slice({{0, 1}, {0, 4}, {0, 8}}), 1u << 2);  // world[pp=0] over [tp]
  EXPECT_EQ(group_size(m_, op), 8);
  EXPECT_EQ(group_count(m_, op), 4);
  EXPECT_EQ(group_of(m_, op, 9), (std::vector<Rank>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_TRUE(group_of(m_, op, 40).empty());  // not on the op's devices
  std::vector<std::vector<Rank>> groups = groups_of(m_, op);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[3].front(), 24);
}

TEST_F(MeshTest, GroupsOverSeveralAxes) {
  Op dp = collective(slice({{0, 1}, {0, 4}, {0, 8}}), 1u << 1);  // over [dp]
  EXPECT_EQ(group_of(m_, dp, 3), (std::vector<Rank>{3, 11, 19, 27}));
  Op dp_tp = collective(m_.intern_devices(DeviceSet::whole(m_.mesh())), (1u << 1) | (1u << 2));
  EXPECT_EQ(group_size(m_, dp_tp), 32);
  EXPECT_EQ(group_count(m_, dp_tp), 2);
  Op partial = collective(slice({{1, 2}, {0, 2}, {0, 8}}), 1u << 1);  // world[pp=1, dp=0..2] over [dp]
  EXPECT_EQ(group_of(m_, partial, 33), (std::vector<Rank>{33, 41}));
}

TEST_F(MeshTest, ExplicitGroups) {
  Op op = collective(m_.intern_devices(DeviceSet::list({0, 1, 2, 3})), 0);
  op.aux = m_.add_groups({{0, 2}, {1, 3}});
  EXPECT_EQ(group_size(m_, op), 2);
  EXPECT_EQ(group_of(m_, op, 3), (std::vector<Rank>{1, 3}));
}

TEST_F(MeshTest, SendPairsMatchingCoordinatesOfTheOtherAxes) {
  Op send;
  send.kind = OpKind::Send;
  send.devices = slice({{0, 1}, {0, 4}, {0, 8}});  // world[pp=0]
  send.aux = slice({{1, 2}, {0, 4}, {0, 8}});      // to world[pp=1]
  EXPECT_EQ(p2p_peer(m_, send, 5), 37);
  EXPECT_EQ(p2p_peer(m_, send, 31), 63);
  EXPECT_FALSE(p2p_peer(m_, send, 40).has_value());
}

TEST_F(MeshTest, PhysicalDeviceMap) {
  Mesh mesh("world", {{"dp", 2}});
  EXPECT_EQ(mesh.physical(1), 1);
  mesh.set_physical({4, 6});
  EXPECT_EQ(mesh.physical(1), 6);
}

}  // namespace
}  // namespace dstc::ir
