// Measured op and collective times (written by `dstc calibrate` on a real
// GPU, TOML, docs/cost-model.md) that override the roofline where they have
// an entry: an exact match, or interpolation along size between the two
// nearest entries of the same op kind and dtype (collective kind and group
// size), linear in log(size)-log(seconds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "htae/collective_kind.h"
#include "htae/op_cost.h"

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
  // The entry of the kind and dtype nearest in size, for scaling the
  // roofline outside the measured range; null when there is none.
  const OpProfileEntry* nearest_op(const OpCostQuery& query) const;
  std::optional<double> collective_seconds(CollectiveKind kind, int64_t group_size, double bytes) const;

  // The TOML text `load` reads back.
  std::string to_toml() const;

  std::string gpu;  // the GPU the entries were measured on
  const std::vector<OpProfileEntry>& ops() const { return ops_; }
  const std::vector<CollectiveProfileEntry>& collectives() const { return collectives_; }

 private:
  std::vector<OpProfileEntry> ops_;
  std::vector<CollectiveProfileEntry> collectives_;
};

}  // namespace dstc::htae
