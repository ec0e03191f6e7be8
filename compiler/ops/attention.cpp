// Attention: softmax(q kᵀ) v over [..., s, d].
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
    if (q[i] != k[i] || q[i] != v[i]) return fail(error, "q, k and v must share their leading dims", 1);
  }
  if (q[n - 1].size != k[n - 1].size) return fail(error, "q and k must have the same last dim size", 1);
  if (k[n - 2].size != v[n - 2].size) return fail(error, "k and v must have the same sequence dim size", 2);
  std::vector<Dim> out(q.begin(), q.end() - 1);
  out.push_back(v[n - 1]);
  return check_declared(out, query.declared, error);
}

}  // namespace dstc::ops
