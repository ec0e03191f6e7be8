#include "ir/ids.h"

#include <array>

namespace dstc::ir {

namespace {
constexpr std::array<std::string_view, kStreamCount> kStreams = {"compute", "feature", "grad", "pipeline"};
constexpr std::array<std::string_view, 6> kPhases = {"none",        "forward",   "input_grad",
                                                     "weight_grad", "recompute", "optimizer"};
constexpr std::array<std::string_view, 4> kArgKinds = {"param", "state", "input", "cache"};

template <typename E, size_t N>
std::optional<E> parse_name(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}
}  // namespace

std::string_view stream_name(Stream s) { return kStreams[static_cast<size_t>(s)]; }
std::string_view phase_name(Phase p) { return kPhases[static_cast<size_t>(p)]; }
std::string_view arg_kind_name(ArgKind k) { return kArgKinds[static_cast<size_t>(k)]; }
std::optional<Stream> parse_stream(std::string_view s) { return parse_name<Stream>(kStreams, s); }
std::optional<Phase> parse_phase(std::string_view s) { return parse_name<Phase>(kPhases, s); }
std::optional<ArgKind> parse_arg_kind(std::string_view s) { return parse_name<ArgKind>(kArgKinds, s); }

}  // namespace dstc::ir
