#include "backends/runtime/launch.h"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

namespace dstc::runtime {

namespace {

// A variable's value as a non-negative integer below `limit`.
std::optional<int32_t> read_count(const std::function<const char*(const char*)>& getenv, const char* name,
                                  int64_t limit, std::string& error) {
  const char* text = getenv(name);
  if (!text) {
    error = fmt::format("{} is not set", name);
    return std::nullopt;
  }
  std::string_view s(text);
  int64_t value = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc{} || end != s.data() + s.size() || value < 0 || value >= limit) {
    error = fmt::format("{}={} is not a number in [0, {})", name, s, limit);
    return std::nullopt;
  }
  return static_cast<int32_t>(value);
}

constexpr int64_t kMaxRanks = int64_t{1} << 24;

}  // namespace

std::optional<LaunchEnvironment> detect_launch(const std::function<const char*(const char*)>& getenv,
                                               std::string& error) {
  LaunchEnvironment env;
  if (getenv("OMPI_COMM_WORLD_SIZE")) {
    env.launcher = Launcher::Mpirun;
    auto size = read_count(getenv, "OMPI_COMM_WORLD_SIZE", kMaxRanks + 1, error);
    if (!size) return std::nullopt;
    auto rank = read_count(getenv, "OMPI_COMM_WORLD_RANK", *size, error);
    if (!rank) return std::nullopt;
    env.world_size = *size;
    env.rank = *rank;
    if (getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
      auto local = read_count(getenv, "OMPI_COMM_WORLD_LOCAL_RANK", *size, error);
      if (!local) return std::nullopt;
      env.local_rank = *local;
    }
    return env;
  }
  // RANK alone is too common a name to mean torchrun.
  if (getenv("WORLD_SIZE")) {
    env.launcher = Launcher::Torchrun;
    auto size = read_count(getenv, "WORLD_SIZE", kMaxRanks + 1, error);
    if (!size) return std::nullopt;
    auto rank = read_count(getenv, "RANK", *size, error);
    if (!rank) return std::nullopt;
    auto local = read_count(getenv, "LOCAL_RANK", *size, error);
    if (!local) return std::nullopt;
    auto port = read_count(getenv, "MASTER_PORT", 65536, error);
    if (!port) return std::nullopt;
    const char* addr = getenv("MASTER_ADDR");
    if (!addr || !*addr) {
      error = "MASTER_ADDR is not set";
      return std::nullopt;
    }
    env.world_size = *size;
    env.rank = *rank;
    env.local_rank = *local;
    env.master_port = *port;
    env.master_addr = addr;
    const char* agent_store = getenv("TORCHELASTIC_USE_AGENT_STORE");
    env.rendezvous_port = agent_store && std::string_view(agent_store) == "True" ? *port + 1 : *port;
    if (getenv("DSTC_RENDEZVOUS_PORT")) {
      auto own = read_count(getenv, "DSTC_RENDEZVOUS_PORT", 65536, error);
      if (!own) return std::nullopt;
      env.rendezvous_port = *own;
    }
    if (env.rendezvous_port > 65535) {
      error =
          fmt::format("MASTER_PORT={} leaves no port above it for dstc's rendezvous; set DSTC_RENDEZVOUS_PORT", *port);
      return std::nullopt;
    }
    return env;
  }
  return env;
}

const char* launcher_name(Launcher l) {
  switch (l) {
    case Launcher::Mpirun: return "mpirun";
    case Launcher::Torchrun: return "torchrun";
    case Launcher::Itself: break;
  }
  return "dstc run";
}

}  // namespace dstc::runtime
