// Which einsums are one batched GEMM (ir/einsum_gemm.h), checked by
// computing each planned product as the GEMM a device would run and
// comparing it with the reference einsum.
#include "ir/einsum_gemm.h"

#include <gtest/gtest.h>

#include "backends/reference/kernels.h"

namespace dstc::reference {
namespace {

HostTensor counting(std::vector<int64_t> shape, double from) {
  HostTensor t(ir::DType::F32, shape);
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = from + 0.25 * static_cast<double>(i % 13) - 0.5 * (i % 3);
  return t;
}

// y[b][i][j] = sum_l op(L)[b][i][l] · op(R)[b][l][j], row-major, as a
// GEMM library is asked to compute it.
std::vector<double> run_gemm(const ir::GemmPlan& p, const HostTensor& first, const HostTensor& second) {
  const HostTensor& l = p.swapped ? second : first;
  const HostTensor& r = p.swapped ? first : second;
  std::vector<double> y(static_cast<size_t>(p.batch * p.m * p.n), 0.0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          double lv = l.data[static_cast<size_t>(b * p.m * p.k + (p.transpose_l ? q * p.m + i : i * p.k + q))];
          double rv = r.data[static_cast<size_t>(b * p.k * p.n + (p.transpose_r ? j * p.k + q : q * p.n + j))];
          sum += lv * rv;
        }
        y[static_cast<size_t>((b * p.m + i) * p.n + j)] = sum;
      }
  return y;
}

void expect_gemm(const char* spec, std::vector<int64_t> a_shape, std::vector<int64_t> b_shape,
                 std::vector<int64_t> y_shape, ir::GemmPlan expected) {
  HostTensor a = counting(a_shape, -1), b = counting(b_shape, 0.5), y(ir::DType::F32, y_shape);
  std::optional<ir::GemmPlan> plan = ir::plan_gemm(spec, a.shape, b.shape);
  ASSERT_TRUE(plan) << spec;
  EXPECT_EQ(plan->batch, expected.batch) << spec;
  EXPECT_EQ(plan->m, expected.m) << spec;
  EXPECT_EQ(plan->n, expected.n) << spec;
  EXPECT_EQ(plan->k, expected.k) << spec;
  EXPECT_EQ(plan->swapped, expected.swapped) << spec;
  EXPECT_EQ(plan->transpose_l, expected.transpose_l) << spec;
  EXPECT_EQ(plan->transpose_r, expected.transpose_r) << spec;
  std::vector<const HostTensor*> in{&a, &b};
  kernels::einsum(spec, in, y);
  std::vector<double> got = run_gemm(*plan, a, b);
  ASSERT_EQ(got.size(), y.data.size()) << spec;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], y.data[i]) << spec << " element " << i;
}

TEST(EinsumGemm, LinearLayersAndTheirGradientsAreGemms) {
  expect_gemm("bsh,hf->bsf", {2, 3, 4}, {4, 5}, {2, 3, 5}, {1, 6, 5, 4, false, false, false});
  expect_gemm("bsf,hf->bsh", {2, 3, 5}, {4, 5}, {2, 3, 4}, {1, 6, 4, 5, false, false, true});
  expect_gemm("bsh,bsf->hf", {2, 3, 4}, {2, 3, 5}, {4, 5}, {1, 4, 5, 6, false, true, false});
  expect_gemm("bsf,bsh->hf", {2, 3, 5}, {2, 3, 4}, {4, 5}, {1, 4, 5, 6, true, true, false});
  expect_gemm("ij,jk->ki", {3, 4}, {4, 5}, {5, 3}, {1, 5, 3, 4, true, true, true});
}

TEST(EinsumGemm, AttentionsProductsAreBatchedGemms) {
  expect_gemm("bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 4, 6}, {6, 4, 6, 5, false, false, true});
  expect_gemm("bhqk,bhkd->bhqd", {2, 3, 4, 6}, {2, 3, 6, 5}, {2, 3, 4, 5}, {6, 4, 5, 6, false, false, false});
}

TEST(EinsumGemm, OthersAreLeftToTheDevicesOwnKernel) {
  const std::vector<int64_t> m{3, 4}, n{4, 5};
  EXPECT_FALSE(ir::plan_gemm("ij,jk->ik", m, std::vector<int64_t>{5, 5}));  // sizes disagree
  EXPECT_FALSE(ir::plan_gemm("ij,jk->i", m, n));                            // k summed over one operand
  EXPECT_FALSE(ir::plan_gemm("ii,ik->k", std::vector<int64_t>{4, 4}, n));   // a diagonal
  EXPECT_FALSE(ir::plan_gemm("bij,bjk->ikb", std::vector<int64_t>{2, 3, 4},
                             std::vector<int64_t>{2, 4, 5}));  // batch not leading
  EXPECT_FALSE(ir::plan_gemm("ij->ji", m, n));                 // one operand
}

}  // namespace
}  // namespace dstc::reference
