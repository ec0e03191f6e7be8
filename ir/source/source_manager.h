// Source files held in memory, and the mapping from byte offsets to
// line:column. Every stage that reports on user text locates it here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dstc {

using FileId = uint32_t;
inline constexpr FileId kNoFile = 0;

// A half-open byte range [begin, end) in one file. `file == kNoFile` means
// "no location" (a command-line argument, a generated op).
struct SourceRange {
  FileId file = kNoFile;
  uint32_t begin = 0;
  uint32_t end = 0;

  bool valid() const { return file != kNoFile; }
  friend bool operator==(const SourceRange&, const SourceRange&) = default;
};

struct LineCol {
  uint32_t line = 0;    // 1-based
  uint32_t column = 0;  // 1-based, in bytes
};

struct SourceFile {
  std::string path;  // as the user named it; printed in diagnostics
  std::string text;
  std::vector<uint32_t> line_starts;  // byte offset of each line's first byte
};

// The largest file any stage reads (an IR file of a thousand-GPU program is
// hundreds of megabytes); offsets are 32-bit.
inline constexpr uint64_t kMaxSourceBytes = uint64_t{1} << 30;

class SourceManager {
 public:
  SourceManager() = default;
  SourceManager(const SourceManager&) = delete;
  SourceManager& operator=(const SourceManager&) = delete;

  // Adds text under a path; the path is what diagnostics print.
  FileId add(std::string path, std::string text);
  // Reads a regular file from disk of at most `max_bytes`; nullopt (and a
  // reason in `error`) when it is unreadable, not a regular file (a device,
  // a FIFO, a directory: never read or waited on) or larger, which is
  // known before anything is read.
  std::optional<FileId> load(const std::string& path, std::string& error, uint64_t max_bytes = kMaxSourceBytes);
  // The id of an already loaded path, if any.
  std::optional<FileId> find(std::string_view path) const;

  const SourceFile& file(FileId id) const { return files_.at(id - 1); }
  LineCol line_col(FileId id, uint32_t offset) const;
  // The text of the 1-based line, without its line terminator.
  std::string_view line_text(FileId id, uint32_t line) const;
  // A range from 1-based line/column and a length (clamped to the file).
  SourceRange range_at(FileId id, uint32_t line, uint32_t column, uint32_t length = 1) const;
  size_t file_count() const { return files_.size(); }

 private:
  std::vector<SourceFile> files_;
};

}  // namespace dstc
