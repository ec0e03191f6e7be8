#include "ir/source/source_manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <fmt/format.h>

namespace dstc {

FileId SourceManager::add(std::string path, std::string text) {
  SourceFile f;
  f.path = std::move(path);
  f.text = std::move(text);
  f.line_starts.push_back(0);
  for (uint32_t i = 0; i < f.text.size(); ++i) {
    if (f.text[i] == '\n') f.line_starts.push_back(i + 1);
  }
  files_.push_back(std::move(f));
  return static_cast<FileId>(files_.size());
}

std::optional<FileId> SourceManager::load(const std::string& path, std::string& error, uint64_t max_bytes) {
  auto reason = [](int e) { return std::error_code(e, std::generic_category()).message(); };
  error.clear();
  // Non-blocking, so that opening a FIFO does not wait for a writer.
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = reason(errno);
    return std::nullopt;
  }
  struct stat info {};
  std::string text;
  if (fstat(fd, &info) != 0) {
    error = reason(errno);
  } else if (S_ISDIR(info.st_mode)) {
    error = "it is a directory";
  } else if (!S_ISREG(info.st_mode)) {
    error = S_ISFIFO(info.st_mode) ? "it is a pipe, not a regular file" : "it is a device, not a regular file";
  } else if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    error = fmt::format("it has {} bytes, more than the {} dstc reads", info.st_size, max_bytes);
  } else {
    text.resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        error = reason(errno);
        break;
      }
      if (n == 0) break;  // the file shrank while being read
      done += static_cast<size_t>(n);
    }
    text.resize(done);
  }
  close(fd);
  if (!error.empty()) return std::nullopt;
  return add(path, std::move(text));
}

std::optional<FileId> SourceManager::find(std::string_view path) const {
  for (size_t i = 0; i < files_.size(); ++i) {
    if (files_[i].path == path) return static_cast<FileId>(i + 1);
  }
  return std::nullopt;
}

LineCol SourceManager::line_col(FileId id, uint32_t offset) const {
  const SourceFile& f = file(id);
  offset = std::min<uint32_t>(offset, static_cast<uint32_t>(f.text.size()));
  auto it = std::upper_bound(f.line_starts.begin(), f.line_starts.end(), offset);
  uint32_t line = static_cast<uint32_t>(it - f.line_starts.begin());
  return {line, offset - f.line_starts[line - 1] + 1};
}

std::string_view SourceManager::line_text(FileId id, uint32_t line) const {
  const SourceFile& f = file(id);
  if (line == 0 || line > f.line_starts.size()) return {};
  uint32_t begin = f.line_starts[line - 1];
  uint32_t end = line < f.line_starts.size() ? f.line_starts[line] : static_cast<uint32_t>(f.text.size());
  std::string_view text(f.text.data() + begin, end - begin);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

SourceRange SourceManager::range_at(FileId id, uint32_t line, uint32_t column, uint32_t length) const {
  const SourceFile& f = file(id);
  if (line == 0) line = 1;
  line = std::min<uint32_t>(line, static_cast<uint32_t>(f.line_starts.size()));
  uint32_t begin = f.line_starts[line - 1] + (column > 0 ? column - 1 : 0);
  begin = std::min<uint32_t>(begin, static_cast<uint32_t>(f.text.size()));
  uint32_t end = std::min<uint32_t>(begin + length, static_cast<uint32_t>(f.text.size()));
  return {id, begin, end};
}

}  // namespace dstc
