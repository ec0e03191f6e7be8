// How `dstc run` was started, read from the environment the launchers
// set: mpirun (OpenMPI's OMPI_COMM_WORLD_*), torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or neither (dstc run starts the
// ranks itself). Read before anything starts, so a run with the wrong
// number of ranks is refused before any rank initialises a transport.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dstc::runtime {

enum class Launcher : uint8_t { Itself, Mpirun, Torchrun };

struct LaunchEnvironment {
  Launcher launcher = Launcher::Itself;
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t local_rank = 0;
  std::string master_addr;  // torchrun
  int32_t master_port = 0;  // torchrun
  // Where rank 0 listens for the other ranks: DSTC_RENDEZVOUS_PORT if set;
  // else MASTER_PORT + 1 under torchrun's agent, whose own store holds
  // MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True); else MASTER_PORT.
  int32_t rendezvous_port = 0;
};

// nullopt with `error` set when a launcher's variables are malformed or
// incomplete. `getenv` is std::getenv outside tests.
std::optional<LaunchEnvironment> detect_launch(const std::function<const char*(const char*)>& getenv,
                                               std::string& error);

// "mpirun", "torchrun", or "dstc run".
const char* launcher_name(Launcher l);

}  // namespace dstc::runtime
