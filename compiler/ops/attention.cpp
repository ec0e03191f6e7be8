// Attention: softmax(q kᵀ) v over [..., s, d].
#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult attention_dims(const DimsQuery& query, OpError& error) {
  const auto& q = query.inputs[0];
  const auto& k = query.inputs[1];
  const auto& v = query.inputs[2];
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size()) {
    return fail(error, "q, k and v must have the same number of dims, at least 2: [..., s, d]");
  }
  size_t n = q.size();
  for (size_t i = 0; i + 2 < n; ++i) {
    if (k[i] != v[i]) return fail(error, "k and v must share their leading dims", 2);
    // The heads dim (before s): k and v may have fewer, each shared by a
    // contiguous group of q's (grouped-query attention; one: multi-query).
    if (i + 3 == n && q[i] != k[i]) {
      if (k[i].size < 1 || q[i].size % k[i].size != 0)
        return fail(error,
                    fmt::format("k and v have {} heads ({}), which do not divide q's {} ({}) into equal groups",
                                k[i].size, k[i].name, q[i].size, q[i].name),
                    1);
      continue;
    }
    if (q[i] != k[i]) return fail(error, "q, k and v must share their leading dims but the heads", 1);
  }
  if (q[n - 1].size != k[n - 1].size) return fail(error, "q and k must have the same last dim size", 1);
  if (k[n - 2].size != v[n - 2].size) return fail(error, "k and v must have the same sequence dim size", 2);
  std::vector<Dim> out(q.begin(), q.end() - 1);
  out.push_back(v[n - 1]);
  return check_declared(out, query.declared, error);
}

LoweringRefusal attention_limit(const LoweringQuery& q) {
  if (q.rank() != 4) return "attention takes q, k and v as [batch, heads, seq, head_dim]";
  return std::nullopt;
}

}  // namespace dstc::ops
