#include "htae/profile_database.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "htae/toml_reader.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::htae {
namespace {

constexpr int64_t kFormatVersion = 1;

// Linear in log-log between (x0, y0) and (x1, y1).
double interpolate(double x, double x0, double y0, double x1, double y1) {
  if (x0 == x1) return y0;
  double f = (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0));
  return std::exp(std::log(y0) + f * (std::log(y1) - std::log(y0)));
}

// Interpolates among the points (size, seconds) that `matches` selects.
template <typename Entries, typename Matches, typename Size>
std::optional<double> along_size(const Entries& entries, Matches matches, Size size_of, double size) {
  const auto* below = static_cast<decltype(&entries[0])>(nullptr);
  const auto* above = below;
  for (const auto& e : entries) {
    if (!matches(e)) continue;
    double s = size_of(e);
    if (s <= size && (!below || s > size_of(*below))) below = &e;
    if (s >= size && (!above || s < size_of(*above))) above = &e;
  }
  if (!below || !above || size <= 0) return std::nullopt;
  return interpolate(size, size_of(*below), below->seconds, size_of(*above), above->seconds);
}

double query_size(const OpCostQuery& q) { return q.flops > 0 ? q.flops : q.bytes(); }

}  // namespace

void ProfileDatabase::add(OpProfileEntry entry) {
  if (entry.kind == "matmul" && entry.shape.size() == 3 && entry.flops > 0 && entry.seconds > 0) {
    MatmulGrid& grid = matmul_grids_[static_cast<size_t>(entry.dtype)];
    for (size_t axis = 0; axis < 3; ++axis) grid.dims[axis].insert(entry.shape[axis]);
    grid.rates[{entry.shape[0], entry.shape[1], entry.shape[2]}] = entry.flops / entry.seconds;
  }
  measured_kinds_.emplace(entry.kind, entry.dtype);
  ops_.push_back(std::move(entry));
}
void ProfileDatabase::add(CollectiveProfileEntry entry) { collectives_.push_back(entry); }

std::optional<double> ProfileDatabase::exact_op_seconds(const OpCostQuery& query) const {
  for (const OpProfileEntry& e : ops_) {
    if (e.kind == query.kind && e.dtype == query.dtype && !e.shape.empty() && e.shape == query.shape) {
      return e.seconds;
    }
  }
  return std::nullopt;
}

std::optional<double> ProfileDatabase::matmul_rate(ComputeDtype dtype, const std::vector<int64_t>& mnk) const {
  const MatmulGrid& grid = matmul_grids_[static_cast<size_t>(dtype)];
  // A grid needs two dims along each axis; a few hand-made entries are
  // priced by the rules of op_seconds and nearest_op instead.
  if (mnk.size() != 3 || std::any_of(grid.dims.begin(), grid.dims.end(), [](const auto& d) { return d.size() < 2; })) {
    return std::nullopt;
  }
  // Per axis: the measured dims just below and above (both the nearest end
  // outside the range), and the query's position between them in log space.
  std::array<std::array<int64_t, 2>, 3> corner;
  std::array<double, 3> weight;
  for (size_t axis = 0; axis < 3; ++axis) {
    const std::set<int64_t>& dims = grid.dims[axis];
    int64_t x = std::clamp(mnk[axis], *dims.begin(), *dims.rbegin());
    auto above = dims.lower_bound(x);
    auto below = *above == x ? above : std::prev(above);
    corner[axis] = {*below, *above};
    weight[axis] =
        *below == *above ? 0 : std::log(double(x) / double(*below)) / std::log(double(*above) / double(*below));
  }
  double log_rate = 0;
  for (int c = 0; c < 8; ++c) {
    std::array<int64_t, 3> at;
    double w = 1;
    for (size_t axis = 0; axis < 3; ++axis) {
      int side = (c >> axis) & 1;
      at[axis] = corner[axis][side];
      w *= side ? weight[axis] : 1 - weight[axis];
    }
    auto it = grid.rates.find(at);
    if (it == grid.rates.end()) return std::nullopt;
    log_rate += w * std::log(it->second);
  }
  return std::exp(log_rate);
}

bool ProfileDatabase::rates_cover(OpClass op_class, const OpCostQuery& query) const {
  if (op_class == OpClass::Matmul) {
    // A kind measured on its own (fused attention) is priced by its entries.
    bool own_entries = query.kind != "matmul" && measured_kinds_.count({query.kind, query.dtype}) > 0;
    return !own_entries && matmul_rate(query.dtype, query.shape).has_value();
  }
  return op_class != OpClass::Free && memory_curve;
}

std::function<bool(const OpProfileEntry&)> ProfileDatabase::series_of(const OpCostQuery& query) const {
  auto same_kind = [&query](const OpProfileEntry& e) { return e.kind == query.kind && e.dtype == query.dtype; };
  // Attention's n is its head dim: its FLOPs compare only between entries
  // of one head dim, where there are any.
  bool same_width_measured = query.kind.starts_with("attention") && query.shape.size() >= 2 &&
                             std::any_of(ops_.begin(), ops_.end(), [&](const OpProfileEntry& e) {
                               return same_kind(e) && e.shape.size() >= 2 && e.shape[1] == query.shape[1];
                             });
  if (!same_width_measured) return same_kind;
  return [same_kind, n = query.shape[1]](const OpProfileEntry& e) {
    return same_kind(e) && e.shape.size() >= 2 && e.shape[1] == n;
  };
}

std::optional<double> ProfileDatabase::op_seconds(const OpCostQuery& query) const {
  if (std::optional<double> exact = exact_op_seconds(query)) return exact;
  return along_size(
      ops_, series_of(query), [](const OpProfileEntry& e) { return e.size(); }, query_size(query));
}

const OpProfileEntry* ProfileDatabase::nearest_op(const OpCostQuery& query) const {
  const OpProfileEntry* best = nullptr;
  double size = std::max(query_size(query), 1.0), best_distance = 0;
  std::function<bool(const OpProfileEntry&)> in_series = series_of(query);
  for (const OpProfileEntry& e : ops_) {
    if (!in_series(e) || e.size() <= 0) continue;
    double distance = std::abs(std::log(e.size() / size));
    if (!best || distance < best_distance) best = &e, best_distance = distance;
  }
  return best;
}

std::optional<double> ProfileDatabase::collective_seconds(CollectiveKind kind, int64_t group_size, double bytes) const {
  return along_size(
      collectives_, [&](const CollectiveProfileEntry& e) { return e.kind == kind && e.group_size == group_size; },
      [](const CollectiveProfileEntry& e) { return e.bytes; }, bytes);
}

std::string ProfileDatabase::to_toml() const {
  std::ostringstream out;
  out << "# dstc profile database: measured seconds per op and collective (docs/cost-model.md).\n";
  out << fmt::format("version = {}\ngpu = \"{}\"\n", kFormatVersion, gpu);
  if (launch_overhead) out << fmt::format("launch_overhead = {:.6g}\n", *launch_overhead);
  if (memory_curve) {
    out << fmt::format("\n[memory_curve]\nbytes_per_second = {:.6g}\nhalf_bytes = {:.6g}\n", memory_curve->max_rate,
                       memory_curve->half);
  }
  for (const OpProfileEntry& e : ops_) {
    out << fmt::format(
        "\n[[op]]\nkind = \"{}\"\ndtype = \"{}\"\nshape = [{}]\nflops = {:.17g}\nbytes = {:.17g}\n"
        "seconds = {:.17g}\n",
        e.kind, dtype_name(e.dtype), fmt::join(e.shape, ", "), e.flops, e.bytes, e.seconds);
  }
  for (const CollectiveProfileEntry& e : collectives_) {
    out << fmt::format("\n[[collective]]\nkind = \"{}\"\ngroup_size = {}\nbytes = {:.17g}\nseconds = {:.17g}\n",
                       collective_name(e.kind), e.group_size, e.bytes, e.seconds);
  }
  return out.str();
}

std::optional<ProfileDatabase> ProfileDatabase::load(SourceManager& sources, DiagnosticEngine& diags,
                                                     const std::string& path) {
  std::optional<TomlFile> toml = load_toml_file(sources, diags, path);
  if (!toml) return std::nullopt;
  size_t errors = diags.error_count();
  ProfileDatabase db;
  TableReader root(toml->root, "", toml->file, sources, diags);
  if (std::optional<int64_t> version = root.integer("version", true); version && *version != kFormatVersion) {
    diags.error(diag::kConfigBadValue, root.range(*toml->root.get("version")),
                fmt::format("profile format version {} is not supported; this dstc reads version {}", *version,
                            kFormatVersion));
  }
  db.gpu = root.string("gpu", true).value_or("");
  if (const toml::node* gpu = toml->root.get("gpu")) db.gpu_range = root.range(*gpu);
  db.launch_overhead = root.number("launch_overhead", false);
  if (const toml::table* t = root.table("memory_curve", false)) {
    TableReader r(*t, "memory_curve", toml->file, sources, diags);
    std::optional<double> rate = r.number("bytes_per_second", true), half = r.number("half_bytes", true);
    if (rate && half) db.memory_curve = RateCurve{*rate, *half};
    r.reject_unknown_keys();
  }
  auto each_table = [&](std::string_view key, auto read) {
    const toml::array* list = root.array(key, false);
    if (!list) return;
    for (size_t i = 0; i < list->size(); ++i) {
      const toml::table* t = list->get(i)->as_table();
      if (!t) {
        root.wrong_type(*list->get(i), key, fmt::format("an array of tables ([[{}]])", key));
        continue;
      }
      TableReader r(*t, fmt::format("{}[{}]", key, i), toml->file, sources, diags);
      read(r, *t);
      r.reject_unknown_keys();
    }
  };
  auto read_dtype = [&](TableReader& r, const toml::table& t) -> std::optional<ComputeDtype> {
    std::optional<std::string> dtype = r.string("dtype", true);
    if (!dtype) return std::nullopt;
    std::optional<ComputeDtype> d = parse_dtype(*dtype);
    if (!d) {
      diags.error(diag::kConfigBadValue, r.range(*t.get("dtype")), fmt::format("unknown dtype '{}'", *dtype))
          .note("the dtypes are fp32, tf32, fp16, bf16 and fp8");
    }
    return d;
  };
  each_table("op", [&](TableReader& r, const toml::table& t) {
    OpProfileEntry e;
    e.kind = r.string("kind", true).value_or("");
    e.dtype = read_dtype(r, t).value_or(ComputeDtype::Fp32);
    if (const toml::array* shape = r.array("shape", true)) {
      for (const toml::node& dim : *shape) {
        if (std::optional<int64_t> v = integer_element(r, dim, "shape")) e.shape.push_back(*v);
      }
    }
    e.flops = r.number("flops", true, 0, false).value_or(0);
    e.bytes = r.number("bytes", true, 0, false).value_or(0);
    e.seconds = r.number("seconds", true).value_or(0);
    db.add(std::move(e));
  });
  each_table("collective", [&](TableReader& r, const toml::table& t) {
    CollectiveProfileEntry e;
    if (std::optional<std::string> kind = r.string("kind", true)) {
      if (std::optional<CollectiveKind> k = parse_collective(*kind)) {
        e.kind = *k;
      } else {
        diags.error(diag::kConfigBadValue, r.range(*t.get("kind")), fmt::format("unknown collective '{}'", *kind))
            .note(fmt::format("the collectives are {}", collective_names()));
      }
    }
    e.group_size = r.integer("group_size", true, 2).value_or(2);
    e.bytes = r.number("bytes", true).value_or(0);
    e.seconds = r.number("seconds", true).value_or(0);
    db.add(e);
  });
  root.reject_unknown_keys();
  if (diags.error_count() > errors) return std::nullopt;
  return db;
}

namespace {

// "H100" in "NVIDIA H100 80GB HBM3" and "H100-SXM5-80GB": a letter or two
// and three digits; "" when there is none.
std::string gpu_model(std::string_view name) {
  static const std::regex model(R"(([A-Z]{1,2}[0-9]{3})([^0-9]|$))");
  std::match_results<std::string_view::const_iterator> m;
  return std::regex_search(name.begin(), name.end(), m, model) ? m[1].str() : std::string();
}

}  // namespace

void warn_if_profile_is_for_another_gpu(const ProfileDatabase& profile, const GpuSpec& gpu, DiagnosticEngine& diags) {
  std::string measured = gpu_model(profile.gpu), simulated = gpu_model(gpu.name);
  if (measured.empty() || simulated.empty() || measured == simulated) return;
  diags
      .warning(diag::kProfileOtherGpu, profile.gpu_range,
               fmt::format("this profile was measured on another GPU model: {} ('{}'), where the cluster has {} ('{}')",
                           measured, profile.gpu, simulated, gpu.name))
      .note(
          "its measured rates price every op as they are; measure the cluster's GPU with `dstc calibrate`, "
          "or leave out --profile for the data sheet's roofline");
}

}  // namespace dstc::htae
