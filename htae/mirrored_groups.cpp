#include "htae/mirrored_groups.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

namespace dstc::htae {
namespace {

constexpr uint32_t kNoCluster = UINT32_MAX;
constexpr int kNoFamily = -1;

class LinkUnion {
 public:
  explicit LinkUnion(size_t links) : parent_(links) { std::iota(parent_.begin(), parent_.end(), LinkId{0}); }
  LinkId find(LinkId l) {
    while (parent_[l] != l) l = parent_[l] = parent_[parent_[l]];
    return l;
  }
  void unite(LinkId a, LinkId b) {
    a = find(a), b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<LinkId> parent_;
};

template <typename Visit>
void for_each_link(const GroupPlan& group, Visit visit) {
  for (const auto& phase : group) {
    for (const FlowSpec& flow : phase) {
      for (LinkId l : flow.route) visit(l);
    }
  }
}

// What a cluster's flows look like from the group of each op in `ops`
// that lies in it: phases, flows, bytes, latencies, and each link as the
// order it was first seen in with its capacity.
std::vector<double> cluster_signature(std::span<const std::vector<GroupPlan>* const> ops,
                                      const std::vector<size_t>& family_ops,
                                      const std::vector<std::vector<uint32_t>>& cluster_of, uint32_t cluster,
                                      const Topology& topology) {
  std::vector<double> signature;
  std::unordered_map<LinkId, double> seen;
  for (size_t i : family_ops) {
    const std::vector<uint32_t>& clusters = cluster_of[i];
    size_t g = static_cast<size_t>(std::find(clusters.begin(), clusters.end(), cluster) - clusters.begin());
    for (const auto& phase : (*ops[i])[g]) {
      signature.push_back(static_cast<double>(phase.size()));
      for (const FlowSpec& flow : phase) {
        signature.insert(signature.end(), {flow.bytes, flow.latency, static_cast<double>(flow.route.size())});
        for (LinkId l : flow.route) {
          auto [it, fresh] = seen.emplace(l, static_cast<double>(seen.size()));
          signature.insert(signature.end(), {it->second, topology.link(l).capacity});
        }
      }
    }
  }
  return signature;
}

}  // namespace

std::vector<std::vector<uint8_t>> simulated_groups(std::span<const std::vector<GroupPlan>* const> ops,
                                                   const Topology& topology) {
  std::vector<std::vector<uint8_t>> simulated(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) simulated[i].assign(ops[i]->size(), 1);

  LinkUnion links(topology.num_links());
  for (const std::vector<GroupPlan>* groups : ops) {
    for (const GroupPlan& group : *groups) {
      LinkId first = kNoCluster;
      for_each_link(group, [&](LinkId l) {
        if (first == kNoCluster) first = l;
        links.unite(first, l);
      });
    }
  }
  // Each group's cluster (kNoCluster: it moves nothing).
  std::vector<std::vector<uint32_t>> cluster_of(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const GroupPlan& group : *ops[i]) {
      uint32_t cluster = kNoCluster;
      for_each_link(group, [&](LinkId l) { cluster = l; });
      cluster_of[i].push_back(cluster == kNoCluster ? kNoCluster : links.find(cluster));
    }
  }
  // Families: the set of clusters of an op whose groups lie in distinct
  // clusters. A cluster touched by ops of two families, or by an op with
  // two groups in it, disqualifies the families involved.
  std::map<std::vector<uint32_t>, int> family_index;
  std::vector<std::vector<uint32_t>> families;
  std::vector<uint8_t> valid;
  std::vector<int> family_of_op(ops.size(), kNoFamily);
  std::unordered_map<uint32_t, int> family_of_cluster;
  auto invalidate = [&](int family) {
    if (family != kNoFamily) valid[static_cast<size_t>(family)] = 0;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    std::vector<uint32_t> clusters;
    for (uint32_t c : cluster_of[i]) {
      if (c != kNoCluster) clusters.push_back(c);
    }
    std::sort(clusters.begin(), clusters.end());
    int family = kNoFamily;
    if (std::adjacent_find(clusters.begin(), clusters.end()) == clusters.end()) {
      auto [it, fresh] = family_index.emplace(clusters, static_cast<int>(families.size()));
      if (fresh) families.push_back(clusters), valid.push_back(clusters.size() > 1);
      family = it->second;
    }
    family_of_op[i] = family;
    for (uint32_t c : clusters) {
      auto [it, fresh] = family_of_cluster.emplace(c, family);
      if (!fresh && it->second != family) invalidate(it->second), invalidate(family);
      if (family == kNoFamily) invalidate(it->second);
    }
  }
  std::vector<std::vector<size_t>> ops_of_family(families.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (family_of_op[i] != kNoFamily) ops_of_family[static_cast<size_t>(family_of_op[i])].push_back(i);
  }
  for (size_t f = 0; f < families.size(); ++f) {
    if (!valid[f]) continue;
    const std::vector<size_t>& family_ops = ops_of_family[f];
    const std::vector<uint32_t>& clusters = families[f];
    std::vector<double> first = cluster_signature(ops, family_ops, cluster_of, clusters[0], topology);
    bool isomorphic = std::all_of(clusters.begin() + 1, clusters.end(), [&](uint32_t c) {
      return cluster_signature(ops, family_ops, cluster_of, c, topology) == first;
    });
    if (!isomorphic) continue;
    for (size_t i : family_ops) {
      for (size_t g = 0; g < cluster_of[i].size(); ++g) {
        if (cluster_of[i][g] != kNoCluster && cluster_of[i][g] != clusters[0]) simulated[i][g] = 0;
      }
    }
  }
  return simulated;
}

}  // namespace dstc::htae
