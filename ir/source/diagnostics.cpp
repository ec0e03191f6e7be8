#include "ir/source/diagnostics.h"

#include <algorithm>
#include <cstdint>
#include <ostream>

#include <fmt/format.h>

namespace dstc {
namespace {

constexpr std::string_view kBold = "\x1b[1m";
constexpr std::string_view kRed = "\x1b[1;31m";
constexpr std::string_view kMagenta = "\x1b[1;35m";
constexpr std::string_view kCyan = "\x1b[1;36m";
constexpr std::string_view kGreen = "\x1b[1;32m";
constexpr std::string_view kReset = "\x1b[0m";

// Longest stretch of a source line shown; longer lines are windowed around
// the caret (binary garbage can have megabyte-long lines).
constexpr uint32_t kMaxShownColumns = 160;

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid.
size_t utf8_length(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

// One displayed cell of a source line: the bytes [begin, begin+len) shown as
// `shown` (a tab stays a tab so the caret line can mirror it).
struct Cell {
  uint32_t begin;
  uint32_t len;
  std::string shown;
};

std::vector<Cell> display_cells(std::string_view line) {
  std::vector<Cell> cells;
  for (size_t i = 0; i < line.size();) {
    size_t n = utf8_length(line, i);
    auto c = static_cast<unsigned char>(line[i]);
    if (n == 0) {
      cells.push_back({static_cast<uint32_t>(i), 1, "?"});
      i += 1;
    } else if (n == 1 && c != '\t' && (c < 0x20 || c == 0x7F)) {
      cells.push_back({static_cast<uint32_t>(i), 1, "?"});
      i += 1;
    } else {
      cells.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(n), std::string(line.substr(i, n))});
      i += n;
    }
  }
  return cells;
}

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

std::string_view severity_color(Severity s) {
  switch (s) {
    case Severity::Error: return kRed;
    case Severity::Warning: return kMagenta;
    case Severity::Note: return kCyan;
  }
  return kRed;
}

}  // namespace

DiagnosticEngine::Builder& DiagnosticEngine::Builder::note(SourceRange range, std::string message) {
  if (index_ != SIZE_MAX) engine_->diagnostics_[index_].notes.push_back({range, std::move(message)});
  return *this;
}

void DiagnosticEngine::note_other_files_since(size_t first, SourceRange at, const std::string& message) {
  for (size_t i = first; i < diagnostics_.size(); ++i) {
    Diagnostic& d = diagnostics_[i];
    if (d.range.valid() && d.range.file != at.file) d.notes.push_back({at, message});
  }
}

void DiagnosticEngine::note_since(size_t first, SourceRange at, const std::string& message) {
  for (size_t i = first; i < diagnostics_.size(); ++i) diagnostics_[i].notes.push_back({at, message});
}

DiagnosticEngine::Builder DiagnosticEngine::error(DiagKind kind, SourceRange range, std::string message) {
  return report(Severity::Error, kind, range, std::move(message));
}

DiagnosticEngine::Builder DiagnosticEngine::warning(DiagKind kind, SourceRange range, std::string message) {
  return report(Severity::Warning, kind, range, std::move(message));
}

DiagnosticEngine::Builder DiagnosticEngine::report(Severity severity, DiagKind kind, SourceRange range,
                                                   std::string message) {
  if (severity == Severity::Error) {
    if (error_count_++ >= max_errors_) {
      ++dropped_;
      return Builder(this, SIZE_MAX);
    }
  }
  diagnostics_.push_back({severity, kind, range, std::move(message), {}});
  return Builder(this, diagnostics_.size() - 1);
}

std::string DiagnosticEngine::location(SourceRange range) const {
  if (!range.valid()) return {};
  LineCol lc = sources_.line_col(range.file, range.begin);
  return fmt::format("{}:{}:{}", sources_.file(range.file).path, lc.line, lc.column);
}

std::string DiagnosticEngine::render(const Diagnostic& d, bool color) const {
  auto paint = [color](std::string_view code, std::string_view text) {
    return color ? fmt::format("{}{}{}", code, text, kReset) : std::string(text);
  };
  std::string out;
  auto header = [&](Severity sev, SourceRange range, std::string_view message, std::string_view kind) {
    std::string loc = range.valid() ? location(range) : std::string("dstc");
    out += paint(kBold, loc + ":");
    out += " ";
    out += paint(severity_color(sev), std::string(severity_name(sev)) + ":");
    out += " ";
    out += paint(kBold, message);
    if (!kind.empty()) out += fmt::format(" [{}]", kind);
    out += "\n";
  };
  auto snippet = [&](SourceRange range) {
    if (!range.valid()) return;
    LineCol lc = sources_.line_col(range.file, range.begin);
    std::string_view line = sources_.line_text(range.file, lc.line);
    std::vector<Cell> cells = display_cells(line);
    uint32_t caret_byte = lc.column - 1;
    LineCol end_lc = sources_.line_col(range.file, std::max(range.end, range.begin));
    uint32_t end_byte = end_lc.line == lc.line ? end_lc.column - 1 : static_cast<uint32_t>(line.size());
    end_byte = std::max(end_byte, caret_byte + 1);

    size_t first = 0;
    while (first < cells.size() && cells[first].begin + cells[first].len <= caret_byte &&
           caret_byte - cells[first].begin > kMaxShownColumns / 2)
      ++first;
    size_t last = std::min(cells.size(), first + kMaxShownColumns);

    std::string gutter = fmt::format("{:>5} | ", lc.line);
    std::string text = first > 0 ? "..." : "";
    std::string marks = first > 0 ? "   " : "";
    for (size_t i = first; i < last; ++i) {
      const Cell& c = cells[i];
      text += c.shown;
      bool under = c.begin + c.len > caret_byte && c.begin < end_byte;
      char fill = c.shown == "\t" ? '\t' : ' ';
      marks += !under ? fill : (c.begin <= caret_byte ? '^' : '~');
    }
    if (last < cells.size()) text += "...";
    if (caret_byte >= line.size()) marks += '^';  // end of line: point past it
    while (!marks.empty() && (marks.back() == ' ' || marks.back() == '\t')) marks.pop_back();
    out += gutter + text + "\n";
    out += "      | " + paint(kGreen, marks) + "\n";
  };

  header(d.severity, d.range, d.message, d.kind.name);
  snippet(d.range);
  for (const DiagNote& n : d.notes) {
    header(Severity::Note, n.range, n.message, {});
    snippet(n.range);
  }
  return out;
}

void DiagnosticEngine::render(std::ostream& out, bool color) const {
  std::vector<const Diagnostic*> order;
  order.reserve(diagnostics_.size());
  for (const Diagnostic& d : diagnostics_) order.push_back(&d);
  std::stable_sort(order.begin(), order.end(), [](const Diagnostic* a, const Diagnostic* b) {
    // Located diagnostics in file then offset order; unlocated ones first.
    if (a->range.file != b->range.file) return a->range.file < b->range.file;
    return a->range.begin < b->range.begin;
  });
  for (const Diagnostic* d : order) out << render(*d, color);
  if (dropped_ > 0) {
    out << fmt::format("dstc: note: {} more error{} not shown (stopped after {})\n", dropped_, dropped_ == 1 ? "" : "s",
                       max_errors_);
  }
}

}  // namespace dstc
