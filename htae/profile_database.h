// Measured op and collective times (written by `dstc calibrate` on a real
// GPU, TOML, docs/cost-model.md) that override the roofline where they have
// an entry: an exact match, or interpolation along size between the two
// nearest entries of the same op kind and dtype (collective kind and group
// size), linear in log(size)-log(seconds). Where the measurements cover
// more (a grid of matmul shapes, a streaming bandwidth curve, the launch
// gap), they replace the roofline's assumed efficiencies for every op.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "htae/collective_kind.h"
#include "htae/op_cost.h"
#include "htae/rate_curve.h"

namespace dstc::htae {

struct OpProfileEntry {
  std::string kind;
  ComputeDtype dtype = ComputeDtype::Fp32;
  std::vector<int64_t> shape;
  double flops = 0;
  double bytes = 0;
  double seconds = 0;

  // What interpolation runs along: FLOPs, or bytes for ops without FLOPs.
  double size() const { return flops > 0 ? flops : bytes; }
};

struct CollectiveProfileEntry {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t group_size = 2;
  double bytes = 0;
  double seconds = 0;
};

class ProfileDatabase {
 public:
  // Reads a profile file; nullopt after reporting its errors (config-* kinds).
  static std::optional<ProfileDatabase> load(SourceManager& sources, DiagnosticEngine& diags, const std::string& path);

  void add(OpProfileEntry entry);
  void add(CollectiveProfileEntry entry);

  // Exact (kind, dtype, shape) match, else interpolation between the nearest
  // smaller and larger entries of the kind and dtype; nullopt outside them.
  std::optional<double> op_seconds(const OpCostQuery& query) const;
  std::optional<double> exact_op_seconds(const OpCostQuery& query) const;
  // FLOP/s of an [m, n, k] matmul in `dtype`, interpolated in
  // log(m), log(n), log(k) between the eight measured "matmul" entries
  // around it (each dim clamped to the measured range); nullopt unless all
  // eight were measured and each axis has two dims at least.
  std::optional<double> matmul_rate(ComputeDtype dtype, const std::vector<int64_t>& mnk) const;
  // Whether measured rates price the op (a matmul the grid covers, unless
  // its kind has entries of its own, as fused attention may; a memory-bound
  // op under a measured bandwidth curve): then only an exact entry overrides
  // them, since interpolating along FLOPs between ops of other shapes is
  // what the rates do better.
  bool rates_cover(OpClass op_class, const OpCostQuery& query) const;
  // The entry of the kind and dtype nearest in size, for scaling the
  // roofline outside the measured range; null when there is none.
  const OpProfileEntry* nearest_op(const OpCostQuery& query) const;
  std::optional<double> collective_seconds(CollectiveKind kind, int64_t group_size, double bytes) const;

  // The TOML text `load` reads back.
  std::string to_toml() const;

  std::string gpu;        // the GPU the entries were measured on
  SourceRange gpu_range;  // where the file says so, for diagnostics
  // Fitted to streaming measurements: bytes/s over the bytes an op moves;
  // and the time per kernel of back-to-back launches.
  std::optional<RateCurve> memory_curve;
  std::optional<double> launch_overhead;

  const std::vector<OpProfileEntry>& ops() const { return ops_; }
  const std::vector<CollectiveProfileEntry>& collectives() const { return collectives_; }

 private:
  std::vector<OpProfileEntry> ops_;
  std::vector<CollectiveProfileEntry> collectives_;
  // Which entries interpolate for a query: its kind and dtype, and for
  // attention its head dim (n) where entries of it exist.
  std::function<bool(const OpProfileEntry&)> series_of(const OpCostQuery& query) const;
  // The "matmul" entries per dtype as a grid: the measured dims along each
  // axis, and FLOP/s by [m, n, k].
  struct MatmulGrid {
    std::array<std::set<int64_t>, 3> dims;
    std::map<std::array<int64_t, 3>, double> rates;
  };
  std::array<MatmulGrid, kComputeDtypes.size()> matmul_grids_;
  // The (kind, dtype) pairs with entries: asked once per op priced.
  std::set<std::pair<std::string, ComputeDtype>> measured_kinds_;
};

// Warns (profile-other-gpu) when the profile names another GPU model than
// the cluster's ("H200" against "H100-SXM5-80GB"): its rates would price a
// different chip. Names without a recognisable model are let through.
void warn_if_profile_is_for_another_gpu(const ProfileDatabase& profile, const GpuSpec& gpu, DiagnosticEngine& diags);

}  // namespace dstc::htae
