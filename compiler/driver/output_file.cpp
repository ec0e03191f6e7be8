#include "compiler/driver/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace dstc {
namespace {

namespace fs = std::filesystem;

// The temporary file being written, for the signal handler to remove.
char pending_temporary[4096];
std::atomic<bool> has_pending_temporary{false};

extern "C" void remove_pending_temporary(int signal) {
  if (has_pending_temporary.load()) unlink(pending_temporary);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// Installs the handlers once, leaving alone any the embedding program set.
void install_interrupt_cleanup() {
  static bool installed = [] {
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction current {};
      if (sigaction(s, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
        std::signal(s, remove_pending_temporary);
    }
    return true;
  }();
  (void)installed;
}

std::string reason(int error) { return std::strerror(error); }

std::string write_directly(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::ofstream file(path, std::ios::binary);
  if (!file) return reason(errno);
  write(file);
  file.flush();
  if (!file) return reason(errno);
  return "";
}

}  // namespace

std::string write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path.empty()) return "the path is empty";
  struct stat existing {};
  bool exists = stat(path.c_str(), &existing) == 0;
  if (exists && S_ISDIR(existing.st_mode)) return "it is a directory";
  if (exists && !S_ISREG(existing.st_mode)) return write_directly(path, write);

  fs::path target(path);
  std::string temporary = (target.parent_path() / ("." + target.filename().string() + ".dstc-XXXXXX")).string();
  if (temporary.size() >= sizeof pending_temporary) return "the path is too long";
  install_interrupt_cleanup();
  std::memcpy(pending_temporary, temporary.c_str(), temporary.size() + 1);
  int fd = mkstemp(pending_temporary);
  if (fd < 0) return reason(errno);
  has_pending_temporary.store(true);
  temporary = pending_temporary;
  auto fail = [&](int error) {
    unlink(temporary.c_str());
    has_pending_temporary.store(false);
    return reason(error);
  };
  mode_t mode = 0666;
  if (exists) {
    mode = existing.st_mode & 07777;
  } else {
    mode_t mask = umask(0);
    umask(mask);
    mode &= ~mask;
  }
  if (fchmod(fd, mode) != 0) {
    int error = errno;
    close(fd);
    return fail(error);
  }
  close(fd);
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return fail(errno);
    write(file);
    file.flush();
    if (!file) return fail(errno ? errno : EIO);
    file.close();
    if (!file) return fail(errno ? errno : EIO);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) return fail(errno);
  has_pending_temporary.store(false);
  return "";
}

}  // namespace dstc
