// How dstc run reads its launcher from the environment.
#include <gtest/gtest.h>

#include <map>

#include "backends/runtime/launch.h"

namespace dstc::runtime {
namespace {

std::optional<LaunchEnvironment> launch_with(const std::map<std::string, std::string>& vars, std::string& error) {
  return detect_launch(
      [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      error);
}

TEST(Launch, NoLauncherMeansDstcRunStartsTheRanks) {
  std::string error;
  auto env = launch_with({{"HOME", "/root"}, {"RANK", "3"}}, error);  // RANK alone is not torchrun
  ASSERT_TRUE(env);
  EXPECT_EQ(env->launcher, Launcher::Itself);
  EXPECT_EQ(env->rank, 0);
}

TEST(Launch, MpirunGivesRankSizeAndLocalRank) {
  std::string error;
  auto env = launch_with(
      {{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}, error);
  ASSERT_TRUE(env) << error;
  EXPECT_EQ(env->launcher, Launcher::Mpirun);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->local_rank, 1);
}

TEST(Launch, TorchrunGivesRankSizeAndTheRendezvous) {
  std::string error;
  auto env = launch_with(
      {{"WORLD_SIZE", "4"}, {"RANK", "3"}, {"LOCAL_RANK", "3"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}},
      error);
  ASSERT_TRUE(env) << error;
  EXPECT_EQ(env->launcher, Launcher::Torchrun);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->master_addr, "10.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->rendezvous_port, 29500);
}

// torchrun's agent keeps its own store on MASTER_PORT for the whole job.
TEST(Launch, UnderTorchrunsAgentStoreTheRendezvousIsTheNextPort) {
  std::map<std::string, std::string> vars{{"WORLD_SIZE", "2"},      {"RANK", "1"},
                                          {"LOCAL_RANK", "1"},      {"MASTER_ADDR", "h0"},
                                          {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  std::string error;
  auto env = launch_with(vars, error);
  ASSERT_TRUE(env) << error;
  EXPECT_EQ(env->rendezvous_port, 29501);
  vars["DSTC_RENDEZVOUS_PORT"] = "40000";
  env = launch_with(vars, error);
  ASSERT_TRUE(env) << error;
  EXPECT_EQ(env->rendezvous_port, 40000);
  vars.erase("DSTC_RENDEZVOUS_PORT");
  vars["MASTER_PORT"] = "65535";
  EXPECT_FALSE(launch_with(vars, error));
  EXPECT_EQ(error, "MASTER_PORT=65535 leaves no port above it for dstc's rendezvous; set DSTC_RENDEZVOUS_PORT");
}

TEST(Launch, MalformedOrIncompleteVariablesAreNamed) {
  std::string error;
  EXPECT_FALSE(launch_with({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "4"}}, error));
  EXPECT_EQ(error, "OMPI_COMM_WORLD_RANK=4 is not a number in [0, 4)");
  EXPECT_FALSE(launch_with({{"OMPI_COMM_WORLD_SIZE", "two"}}, error));
  EXPECT_EQ(error, "OMPI_COMM_WORLD_SIZE=two is not a number in [0, 16777217)");
  EXPECT_FALSE(launch_with({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"MASTER_PORT", "29500"}}, error));
  EXPECT_EQ(error, "MASTER_ADDR is not set");
  EXPECT_FALSE(launch_with({{"WORLD_SIZE", "2"}}, error));
  EXPECT_EQ(error, "RANK is not set");
}

}  // namespace
}  // namespace dstc::runtime
