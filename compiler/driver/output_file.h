// Files dstc writes (-o, --trace, --csv, --json, --plot, fmt -i) appear
// whole or not at all: a failed or interrupted write never leaves a partial
// file in place of the old one.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

namespace dstc {

// Writes `path` through `write`: into a temporary file in the same folder,
// renamed over `path` once written, flushed and closed. An existing file
// keeps its permissions; a path that is not a regular file (/dev/null, a
// FIFO) is written directly. Returns "" on success, else why it failed, and
// then `path` is as it was. Ctrl-C or SIGTERM during the write removes the
// temporary file.
std::string write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace dstc
