// The backward kernels are the derivatives of the forward ones (checked by
// central differences), and logical layouts place and gather blocks as the
// nesting convention says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "backends/reference/arithmetic.h"
#include "backends/reference/kernels.h"
#include "backends/reference/logical_layout.h"
#include "ir/registry.h"

namespace dstc::reference {
namespace {

HostTensor random_tensor(std::vector<int64_t> shape, uint32_t seed) {
  HostTensor t(ir::DType::F64, shape);
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = std::sin(1.7 * static_cast<double>(i + seed) + seed);
  return t;
}

// d/dx of sum(w * f(x)) by central differences, against `analytic`.
void expect_gradient(const std::function<HostTensor(const HostTensor&)>& f, HostTensor x, const HostTensor& w,
                     const HostTensor& analytic, std::string_view what) {
  for (size_t i = 0; i < x.data.size(); ++i) {
    const double h = 1e-6, keep = x.data[i];
    auto loss = [&](double v) {
      x.data[i] = v;
      HostTensor y = f(x);
      double s = 0;
      for (size_t j = 0; j < y.data.size(); ++j) s += w.data[j] * y.data[j];
      return s;
    };
    double numeric = (loss(keep + h) - loss(keep - h)) / (2 * h);
    x.data[i] = keep;
    EXPECT_NEAR(analytic.data[i], numeric, 1e-6 * (1 + std::abs(numeric))) << what << " element " << i;
  }
}

// FP8 rounding (OCP formats): e4m3 has 3 mantissa bits, normals from
// 2^-6, 448 the largest; e5m2 2 bits, from 2^-14, 57344. Ties go to even.
TEST(Kernels, Fp8RoundsToNearestEvenInItsFormatAndSaturates) {
  EXPECT_EQ(round_to_fp8(1.0625, ir::DType::F8E4M3), 1.0);   // a tie between 1 and 1.125
  EXPECT_EQ(round_to_fp8(1.1875, ir::DType::F8E4M3), 1.25);  // a tie between 1.125 and 1.25
  EXPECT_EQ(round_to_fp8(300, ir::DType::F8E4M3), 288);      // spacing 32 in [256, 512)
  EXPECT_EQ(round_to_fp8(1000, ir::DType::F8E4M3), 448);
  EXPECT_EQ(round_to_fp8(-1e6, ir::DType::F8E5M2), -57344);
  EXPECT_EQ(round_to_fp8(1.1, ir::DType::F8E5M2), 1.0);             // spacing 0.25 in [1, 2)
  EXPECT_EQ(round_to_fp8(0.0013, ir::DType::F8E4M3), 0.001953125);  // the smallest subnormal, 2^-9
}

// quantize scales each block so its largest magnitude is 448 (e4m3),
// rounds, and scales back: [3, 4] * 112 = [336, 448]; 336 is a tie between
// 320 and 352, and goes to 320.
TEST(Kernels, QuantizeScalesEachBlockToTheFormatsRange) {
  HostTensor x(ir::DType::F32, std::vector<int64_t>{1, 4});
  x.data = {1, 2, 3, 4};
  HostTensor blocks(ir::DType::F8E4M3, std::vector<int64_t>{1, 4});
  kernels::quantize(x, 2, blocks);
  EXPECT_EQ(blocks.data, (std::vector<double>{1, 2, 320.0 / 112, 4}));
  HostTensor whole(ir::DType::F8E4M3, std::vector<int64_t>{1, 4});
  kernels::quantize(x, 0, whole);  // one scale, 112: 1 -> 112 rounds to 112 exactly
  EXPECT_EQ(whole.data, (std::vector<double>{1, 2, 320.0 / 112, 4}));
  x.data = {0.01, 1, 0, -4};
  kernels::quantize(x, 0, whole);  // 0.01 * 112 = 1.12 -> 1.125
  EXPECT_DOUBLE_EQ(whole.data[0], 1.125 / 112);
  EXPECT_EQ(whole.data[2], 0);
  EXPECT_EQ(whole.data[3], -4);
}

// Rowwise (block -1): each row of the last dim its own scale. Row 0's
// largest is 4 (scale 112: 3 -> 336 -> 320), row 1's 1 (scale 448: 0.75 ->
// 336 -> 320, 0.5 -> 224 exactly).
TEST(Kernels, QuantizeRowwiseScalesEachRowByItsOwnLargest) {
  HostTensor x(ir::DType::F32, std::vector<int64_t>{2, 2});
  x.data = {3, 4, 0.75, 1};
  HostTensor rows(ir::DType::F8E4M3, std::vector<int64_t>{2, 2});
  kernels::quantize(x, ir::kRowwiseBlock, rows);
  EXPECT_EQ(rows.data, (std::vector<double>{320.0 / 112, 4, 320.0 / 448, 1}));
  x.data = {3, 4, 0.5, 1};
  kernels::quantize(x, ir::kRowwiseBlock, rows);
  EXPECT_EQ(rows.data, (std::vector<double>{320.0 / 112, 4, 0.5, 1}));
}

// The vocabulary-parallel loss: the logits cut into two class shards, each
// shard's parts (against the rows' whole maxima) summed, give the whole
// cross-entropy and, shard by shard, its gradient.
TEST(Kernels, VocabParallelCrossEntropyPartsAddUpToTheWholeLossAndGradient) {
  const int64_t rows = 3, classes = 6, half = 3;
  HostTensor x = random_tensor({rows, classes}, 5);
  HostTensor labels(ir::DType::I32, std::vector<int64_t>{rows});
  labels.data = {0, 4, 2};
  HostTensor whole(ir::DType::F64, std::vector<int64_t>{});
  ASSERT_TRUE(kernels::cross_entropy(x, labels, false, whole));
  HostTensor dloss(ir::DType::F64, std::vector<int64_t>{});
  dloss.data = {0.7};
  HostTensor dwhole(ir::DType::F64, std::vector<int64_t>{rows, classes});
  ASSERT_TRUE(kernels::cross_entropy_grad(dloss, x, labels, false, dwhole));
  HostTensor m(ir::DType::F64, std::vector<int64_t>{rows});
  for (int64_t r = 0; r < rows; ++r)
    m.data[r] = *std::max_element(x.data.begin() + r * classes, x.data.begin() + (r + 1) * classes);
  HostTensor s(ir::DType::F64, std::vector<int64_t>{rows}), p(ir::DType::F64, std::vector<int64_t>{rows});
  std::vector<HostTensor> shards;
  for (int64_t k = 0; k < 2; ++k) {
    HostTensor shard(ir::DType::F64, std::vector<int64_t>{rows, half});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < half; ++c) shard.data[r * half + c] = x.data[r * classes + k * half + c];
    HostTensor ps(ir::DType::F64, std::vector<int64_t>{rows}), pp(ir::DType::F64, std::vector<int64_t>{rows});
    kernels::cross_entropy_parts(shard, m, labels, k * half, ps, pp);
    for (int64_t r = 0; r < rows; ++r) s.data[r] += ps.data[r], p.data[r] += pp.data[r];
    shards.push_back(shard);
  }
  HostTensor total(ir::DType::F64, std::vector<int64_t>{});
  kernels::cross_entropy_total(s, p, total);
  EXPECT_NEAR(total.data[0], whole.data[0], 1e-12);
  for (int64_t k = 0; k < 2; ++k) {
    HostTensor dshard(ir::DType::F64, std::vector<int64_t>{rows, half});
    kernels::cross_entropy_parts_grad(dloss, shards[k], m, s, labels, k * half, dshard);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < half; ++c)
        EXPECT_NEAR(dshard.data[r * half + c], dwhole.data[r * classes + k * half + c], 1e-12) << r << "," << c;
  }
}

TEST(Kernels, ActivationSoftmaxLayerNormGradientsAreDerivatives) {
  HostTensor x = random_tensor({3, 5}, 1), w = random_tensor({3, 5}, 2), dx(ir::DType::F64, x.shape);
  for (const ir::PointwiseOp& op : ir::pointwise_ops()) {
    auto forward = [&op](const HostTensor& in) {
      HostTensor y(in.dtype, in.shape);
      kernels::pointwise(op, in, y);
      return y;
    };
    kernels::pointwise_grad(op, w, op.grad_reads == ir::GradReads::Input ? x : forward(x), dx);
    expect_gradient(forward, x, w, dx, ir::op_name(op.kind));
  }
  for (int dim : {0, 1}) {
    auto softmax = [dim](const HostTensor& in) {
      HostTensor y(in.dtype, in.shape);
      kernels::softmax(in, dim, y);
      return y;
    };
    kernels::softmax_grad(w, softmax(x), dim, dx);
    expect_gradient(softmax, x, w, dx, "softmax");
  }
  HostTensor gamma = random_tensor({5}, 3), beta = random_tensor({5}, 4);
  HostTensor dgamma(ir::DType::F64, gamma.shape), dbeta(ir::DType::F64, beta.shape);
  auto ln = [&](const HostTensor& in) {
    HostTensor y(in.dtype, in.shape);
    kernels::layernorm(in, gamma, beta, 1e-5, y);
    return y;
  };
  kernels::layernorm_grad(w, x, gamma, 1e-5, dx);
  expect_gradient(ln, x, w, dx, "layernorm dx");
  kernels::layernorm_weight_grad(w, x, 1e-5, dgamma, dbeta);
  expect_gradient(
      [&](const HostTensor& g) {
        HostTensor y(x.dtype, x.shape);
        kernels::layernorm(x, g, beta, 1e-5, y);
        return y;
      },
      gamma, w, dgamma, "layernorm dgamma");
}

TEST(Kernels, AttentionGradientIsItsDerivative) {
  // Equal heads, grouped-query (4 q heads on 2 k/v heads) and multi-query
  // (one): a shared k/v head's gradient sums its group's.
  for (auto [causal, kv_heads] : {std::pair{false, 4}, std::pair{true, 4}, std::pair{true, 2}, std::pair{false, 1}}) {
    HostTensor q = random_tensor({2, 4, 3, 4}, 5), k = random_tensor({2, kv_heads, 3, 4}, 6),
               v = random_tensor({2, kv_heads, 3, 4}, 7);
    HostTensor w = random_tensor({2, 4, 3, 4}, 8);
    HostTensor dq(ir::DType::F64, q.shape), dk(ir::DType::F64, k.shape), dv(ir::DType::F64, v.shape);
    kernels::attention_grad(w, q, k, v, causal, 0, 0, dq, dk, dv);
    auto run = [&](const HostTensor& a, const HostTensor& b, const HostTensor& c) {
      HostTensor y(a.dtype, a.shape);
      kernels::attention(a, b, c, causal, 0, 0, y);
      return y;
    };
    expect_gradient([&](const HostTensor& x) { return run(x, k, v); }, q, w, dq, "attention dq");
    expect_gradient([&](const HostTensor& x) { return run(q, x, v); }, k, w, dk, "attention dk");
    expect_gradient([&](const HostTensor& x) { return run(q, k, x); }, v, w, dv, "attention dv");
  }
}

// Grouped-query attention is attention with each k/v head repeated for
// its group of q heads (q head i reads k/v head i / group).
TEST(Kernels, GroupedQueryAttentionRepeatsEachKeyValueHeadForItsGroup) {
  HostTensor q = random_tensor({1, 4, 3, 2}, 11), k = random_tensor({1, 2, 3, 2}, 12),
             v = random_tensor({1, 2, 3, 2}, 13);
  HostTensor k4(k.dtype, std::vector<int64_t>{1, 4, 3, 2}), v4(v.dtype, std::vector<int64_t>{1, 4, 3, 2});
  for (size_t h = 0; h < 4; ++h)
    for (size_t i = 0; i < 6; ++i) {
      k4.data[h * 6 + i] = k.data[(h / 2) * 6 + i];
      v4.data[h * 6 + i] = v.data[(h / 2) * 6 + i];
    }
  HostTensor grouped(q.dtype, q.shape), repeated(q.dtype, q.shape);
  kernels::attention(q, k, v, true, 0, 0, grouped);
  kernels::attention(q, k4, v4, true, 0, 0, repeated);
  EXPECT_EQ(grouped.data, repeated.data);
}

// Positions [first, first + count) of x [b, h, t, d]; past t, `fill`.
HostTensor positions(const HostTensor& x, int64_t first, int64_t count, double fill) {
  HostTensor out(x.dtype, std::vector<int64_t>{x.dim(0), x.dim(1), count, x.dim(3)});
  std::fill(out.data.begin(), out.data.end(), fill);
  const int64_t t = x.dim(2), d = x.dim(3);
  for (int64_t r = 0; r < x.dim(0) * x.dim(1); ++r)
    for (int64_t i = first; i < std::min(first + count, t); ++i)
      std::copy_n(x.data.begin() + (r * t + i) * d, d, out.data.begin() + (r * count + i - first) * d);
  return out;
}

// A KV cache of `capacity` positions holding x's first `context`, garbage after.
HostTensor cache_of(const HostTensor& x, int64_t context, int64_t capacity) {
  HostTensor c = positions(x, 0, capacity, 1e6);
  for (int64_t r = 0; r < x.dim(0) * x.dim(1); ++r)
    std::fill_n(c.data.begin() + (r * capacity + context) * x.dim(3), (capacity - context) * x.dim(3), 1e6);
  return c;
}

// A step over a KV cache (attention's fourth and fifth operands): its 2
// queries, after 3 cached positions, see what the last 2 rows of the whole
// 5-position sequence's causal attention see; the cache's room past them
// is never read.
TEST(Kernels, AttentionOverACacheIsTheLastRowsOfTheWholeSequence) {
  const int64_t context = 3, step = 2, room = 2;
  HostTensor q = random_tensor({2, 4, context + step, 3}, 21), k = random_tensor({2, 2, context + step, 3}, 22),
             v = random_tensor({2, 2, context + step, 3}, 23);
  HostTensor whole(q.dtype, q.shape);
  kernels::attention(q, k, v, true, 0, 0, whole);
  HostTensor keys =
      kernels::held_positions(cache_of(k, context, context + step + room), 0, context, positions(k, context, step, 0));
  HostTensor values =
      kernels::held_positions(cache_of(v, context, context + step + room), 0, context, positions(v, context, step, 0));
  EXPECT_EQ(keys.data, k.data);
  EXPECT_EQ(values.data, v.data);
  HostTensor q_step = positions(q, context, step, 0), out(q.dtype, q_step.shape);
  kernels::attention(q_step, keys, values, true, context, 0, out);
  HostTensor expected = positions(whole, context, step, 0);
  for (size_t i = 0; i < out.data.size(); ++i) EXPECT_NEAR(out.data[i], expected.data[i], 1e-12) << i;
}

// Decode context parallelism: a cache of 9 positions split in 3 shards of
// 3, after 2 cached positions and a step of 2. The second shard holds only
// the step's second position (the first query sees nothing there), the
// third nothing. Each shard's attention with its log-sum-exp, merged, is
// the whole attention.
TEST(Kernels, ShardsOfASplitCacheMergeIntoTheWholeAttention) {
  const int64_t context = 2, step = 2, shards = 3, held = 3;
  HostTensor q = random_tensor({2, 4, context + step, 3}, 31), k = random_tensor({2, 2, context + step, 3}, 32),
             v = random_tensor({2, 2, context + step, 3}, 33);
  HostTensor whole(q.dtype, q.shape);
  kernels::attention(q, k, v, true, 0, 0, whole);
  HostTensor q_step = positions(q, context, step, 0), k_step = positions(k, context, step, 0),
             v_step = positions(v, context, step, 0);
  HostTensor kc = cache_of(k, context, shards * held), vc = cache_of(v, context, shards * held);
  HostTensor o(q.dtype, std::vector<int64_t>{shards, 2, 4, step, 3}),
      lse(q.dtype, std::vector<int64_t>{shards, 2, 4, step});
  const int64_t part = 2 * 4 * step;
  for (int64_t i = 0; i < shards; ++i) {
    HostTensor keys = kernels::held_positions(positions(kc, i * held, held, 0), i * held, context, k_step);
    HostTensor values = kernels::held_positions(positions(vc, i * held, held, 0), i * held, context, v_step);
    EXPECT_EQ(keys.dim(2), std::clamp<int64_t>(context + step - i * held, 0, held));
    HostTensor oi(q.dtype, q_step.shape), lsei(q.dtype, std::vector<int64_t>{2, 4, step});
    kernels::attention(q_step, keys, values, true, context - i * held, 0, oi, &lsei);
    std::copy(oi.data.begin(), oi.data.end(), o.data.begin() + i * part * 3);
    std::copy(lsei.data.begin(), lsei.data.end(), lse.data.begin() + i * part);
  }
  const double none_seen = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(lse.data[part], none_seen);
  EXPECT_NE(lse.data[part + 1], none_seen);
  EXPECT_EQ(o.data[part * 3], 0);
  for (int64_t r = 0; r < part; ++r) EXPECT_EQ(lse.data[static_cast<size_t>(2 * part + r)], none_seen);
  HostTensor merged(q.dtype, q_step.shape);
  kernels::attention_merge(o, lse, merged);
  HostTensor expected = positions(whole, context, step, 0);
  for (size_t i = 0; i < merged.data.size(); ++i) EXPECT_NEAR(merged.data[i], expected.data[i], 1e-12) << i;
  // Rows no shard saw stay 0.
  std::fill(lse.data.begin(), lse.data.end(), none_seen);
  HostTensor none(q.dtype, q_step.shape);
  kernels::attention_merge(o, lse, none);
  for (double x : none.data) EXPECT_EQ(x, 0);
}

// Rotary embedding: a rotation of each pair (i, i + d/2) by position ·
// base^(-2i/d), positions along dim 1 counted from the shard's first; its
// inverse is its gradient.
TEST(Kernels, RopeRotatesPairsByPositionAndItsInverseIsItsGradient) {
  HostTensor x = random_tensor({2, 3, 2, 4}, 14), y(x.dtype, x.shape), back(x.dtype, x.shape);
  kernels::rope(x, 1, 100.0, false, 5, y);
  // Element [0, 1, 0, 0] and its pair [0, 1, 0, 2]: position 5 + 1, angle 6 · 100^0.
  const double a = x.data[8], b = x.data[10];
  EXPECT_NEAR(y.data[8], a * std::cos(6.0) - b * std::sin(6.0), 1e-12);
  EXPECT_NEAR(y.data[10], b * std::cos(6.0) + a * std::sin(6.0), 1e-12);
  // Element [0, 1, 0, 1]: angle 6 · 100^(-1/2).
  EXPECT_NEAR(y.data[9], x.data[9] * std::cos(0.6) - x.data[11] * std::sin(0.6), 1e-12);
  kernels::rope(y, 1, 100.0, true, 5, back);
  for (size_t i = 0; i < x.data.size(); ++i) EXPECT_NEAR(back.data[i], x.data[i], 1e-12);
  HostTensor w = random_tensor({2, 3, 2, 4}, 15), dx(x.dtype, x.shape);
  kernels::rope(w, 1, 100.0, true, 5, dx);
  expect_gradient(
      [&](const HostTensor& in) {
        HostTensor out(in.dtype, in.shape);
        kernels::rope(in, 1, 100.0, false, 5, out);
        return out;
      },
      x, w, dx, "rope dx");
}

TEST(Kernels, TopKKeepsTheLargestAlongItsDimAndPassesTheirGradient) {
  HostTensor x(ir::DType::F64, std::vector<int64_t>{2, 4}), y(x.dtype, x.shape);
  x.data = {0.1, 0.7, 0.3, 0.7, -1, -3, -2, 5};
  kernels::top_k(x, 1, 2, {}, y);
  // Ties go to the lower index; negative entries are kept like any other.
  EXPECT_EQ(y.data, (std::vector<double>{0, 0.7, 0, 0.7, -1, 0, 0, 5}));
  kernels::top_k(x, 0, 1, {}, y);
  EXPECT_EQ(y.data, (std::vector<double>{0.1, 0.7, 0.3, 0, 0, 0, 0, 5}));
  HostTensor r = random_tensor({3, 5}, 16), w = random_tensor({3, 5}, 17), dr(r.dtype, r.shape);
  kernels::top_k_grad(w, r, 1, 3, {}, dr);
  expect_gradient(
      [](const HostTensor& in) {
        HostTensor out(in.dtype, in.shape);
        kernels::top_k(in, 1, 3, {}, out);
        return out;
      },
      r, w, dr, "top_k dx");
}

// Node-limited routing: 8 entries in 4 groups of 2, top 4 from the best 2
// groups, each group scored by the sum of its 4 / 2 = 2 largest. Group 3
// holds the single largest entry (0.9) but scores 0.9 + 0 = 0.9, below
// groups 0 (1.0) and 1 (1.1): the plain top 4 would take 0.9, this does not.
TEST(Kernels, GroupLimitedTopKKeepsOnlyTheBestGroupsEntries) {
  HostTensor x(ir::DType::F64, std::vector<int64_t>{1, 8}), y(x.dtype, x.shape), plain(x.dtype, x.shape);
  x.data = {0.5, 0.5, 0.6, 0.5, 0.4, 0.3, 0.9, 0.0};
  kernels::top_k(x, 1, 4, {4, 2}, y);
  EXPECT_EQ(y.data, (std::vector<double>{0.5, 0.5, 0.6, 0.5, 0, 0, 0, 0}));
  kernels::top_k(x, 1, 4, {}, plain);
  EXPECT_EQ(plain.data, (std::vector<double>{0.5, 0.5, 0.6, 0, 0, 0, 0.9, 0}));
  HostTensor r = random_tensor({3, 8}, 18), w = random_tensor({3, 8}, 19), dr(r.dtype, r.shape);
  kernels::top_k_grad(w, r, 1, 3, {4, 2}, dr);
  expect_gradient(
      [](const HostTensor& in) {
        HostTensor out(in.dtype, in.shape);
        kernels::top_k(in, 1, 3, {4, 2}, out);
        return out;
      },
      r, w, dr, "group-limited top_k dx");
}

TEST(Kernels, DispatchFillsSlotsInTokenOrderAndCombineIsItsAdjoint) {
  // One group of 4 tokens, 2 experts, capacity 2: expert 0 takes tokens 0,
  // 2 (token 3 is past its capacity), expert 1 tokens 1, 3.
  HostTensor x(ir::DType::F64, std::vector<int64_t>{1, 4, 1}), gates(ir::DType::F64, std::vector<int64_t>{1, 4, 2});
  x.data = {10, 20, 30, 40};
  gates.data = {0.5, 0, 0, 1, 0.25, 0, 0.5, 0.5};
  HostTensor slots(ir::DType::F64, std::vector<int64_t>{1, 2, 2, 1});
  kernels::dispatch(x, gates, false, slots);
  EXPECT_EQ(slots.data, (std::vector<double>{10, 30, 20, 40}));
  kernels::dispatch(x, gates, true, slots);
  EXPECT_EQ(slots.data, (std::vector<double>{5, 7.5, 20, 20}));
  HostTensor back(ir::DType::F64, x.shape);
  kernels::combine(slots, gates, false, back);
  EXPECT_EQ(back.data, (std::vector<double>{5, 20, 7.5, 20}));  // token 3 keeps expert 1's share only

  // Gradients, with every gate nonzero so that a small change keeps the
  // routing: 2 groups of 5 tokens, 3 experts of capacity 3 (some dropped).
  HostTensor t = random_tensor({2, 5, 4}, 18), g = random_tensor({2, 5, 3}, 19);
  for (double& v : g.data) v = std::abs(v) + 0.1;
  HostTensor y = random_tensor({2, 3, 3, 4}, 20);
  HostTensor w_slots = random_tensor({2, 3, 3, 4}, 21), w_tokens = random_tensor({2, 5, 4}, 22);
  auto dispatched = [&](const HostTensor& in, bool weighted) {
    HostTensor out(in.dtype, y.shape);
    kernels::dispatch(in, g, weighted, out);
    return out;
  };
  auto combined = [&](const HostTensor& in, const HostTensor& gate) {
    HostTensor out(in.dtype, t.shape);
    kernels::combine(in, gate, true, out);
    return out;
  };
  HostTensor dt(t.dtype, t.shape), dy(y.dtype, y.shape), dg(g.dtype, g.shape);
  kernels::combine(w_slots, g, false, dt);
  expect_gradient([&](const HostTensor& in) { return dispatched(in, false); }, t, w_slots, dt, "dispatch dx");
  kernels::dispatch(w_tokens, g, true, dy);
  expect_gradient([&](const HostTensor& in) { return combined(in, g); }, y, w_tokens, dy, "combine dy");
  kernels::combine_gate_grad(w_tokens, y, g, dg);
  expect_gradient([&](const HostTensor& in) { return combined(y, in); }, g, w_tokens, dg, "combine dgates");
}

TEST(Kernels, CrossEntropyConvPoolAndBatchNormGradientsAreDerivatives) {
  HostTensor logits = random_tensor({4, 3}, 9), labels(ir::DType::I32, std::vector<int64_t>{4});
  labels.data = {0, 2, 1, 2};
  HostTensor one(ir::DType::F64, std::vector<int64_t>{}), dlogits(ir::DType::F64, logits.shape);
  one.data[0] = 1;
  kernels::cross_entropy_grad(one, logits, labels, true, dlogits);
  expect_gradient(
      [&](const HostTensor& x) {
        HostTensor y(x.dtype, std::vector<int64_t>{});
        kernels::cross_entropy(x, labels, true, y);
        return y;
      },
      logits, one, dlogits, "cross_entropy");

  kernels::Conv2dParams p;
  p.stride[0] = 2;
  p.padding[1] = 1;
  HostTensor x = random_tensor({2, 2, 5, 4}, 10), wt = random_tensor({3, 2, 3, 2}, 11);
  auto conv = [&](const HostTensor& a, const HostTensor& b) {
    HostTensor y(a.dtype, std::vector<int64_t>{2, 3, 2, 5});
    kernels::conv2d(a, b, p, y);
    return y;
  };
  HostTensor w = random_tensor({2, 3, 2, 5}, 12), dx(ir::DType::F64, x.shape), dw(ir::DType::F64, wt.shape);
  kernels::conv2d_input_grad(w, wt, p, dx);
  kernels::conv2d_weight_grad(w, x, p, dw);
  expect_gradient([&](const HostTensor& a) { return conv(a, wt); }, x, w, dx, "conv2d dx");
  expect_gradient([&](const HostTensor& b) { return conv(x, b); }, wt, w, dw, "conv2d dw");

  kernels::PoolParams pool;
  pool.kernel[0] = pool.kernel[1] = 2;
  pool.stride[0] = pool.stride[1] = 2;
  HostTensor wp = random_tensor({2, 2, 2, 2}, 13), dpool(ir::DType::F64, x.shape);
  auto pooled = [&](bool max) {
    return [&, max](const HostTensor& a) {
      HostTensor y(a.dtype, std::vector<int64_t>{2, 2, 2, 2});
      max ? kernels::max_pool2d(a, pool, y) : kernels::avg_pool2d(a, pool, y);
      return y;
    };
  };
  kernels::max_pool2d_grad(wp, x, pool, dpool);
  expect_gradient(pooled(true), x, wp, dpool, "max_pool2d");
  dpool = HostTensor(ir::DType::F64, x.shape);
  kernels::avg_pool2d_grad(wp, pool, dpool);
  expect_gradient(pooled(false), x, wp, dpool, "avg_pool2d");

  HostTensor gamma = random_tensor({2}, 14), beta = random_tensor({2}, 15);
  HostTensor wb = random_tensor(x.shape, 16), dbx(ir::DType::F64, x.shape), dg(ir::DType::F64, gamma.shape),
             db(ir::DType::F64, beta.shape);
  kernels::batchnorm_grad(wb, x, gamma, 1e-5, dbx, dg, db);
  expect_gradient(
      [&](const HostTensor& a) {
        HostTensor y(a.dtype, a.shape);
        kernels::batchnorm(a, gamma, beta, 1e-5, y);
        return y;
      },
      x, wb, dbx, "batchnorm dx");
}

HostTensor apply_unary(kernels::Unary op, const HostTensor& x) {
  HostTensor y(x.dtype, x.shape);
  kernels::unary(op, x, y);
  return y;
}

TEST(Kernels, PointwiseKernelsAndTheirGradients) {
  HostTensor x = random_tensor({3, 4}, 20), w = random_tensor({3, 4}, 21), dx(ir::DType::F64, x.shape);
  HostTensor e = apply_unary(kernels::Unary::Exp, x);
  HostTensor positive = e, r = apply_unary(kernels::Unary::Sqrt, positive);
  for (size_t i = 0; i < x.data.size(); ++i) {
    EXPECT_DOUBLE_EQ(e.data[i], std::exp(x.data[i]));
    EXPECT_DOUBLE_EQ(r.data[i], std::sqrt(positive.data[i]));
  }

  // b broadcast over a's leading dim; the values never tie.
  HostTensor b = random_tensor({4}, 22), quotient(ir::DType::F64, x.shape);
  kernels::binary(kernels::Binary::Div, x, b, quotient);
  EXPECT_DOUBLE_EQ(quotient.data[5], x.data[5] / b.data[1]);
  auto maximum = [](const HostTensor& a, const HostTensor& c) {
    HostTensor y(a.dtype, a.shape);
    kernels::binary(kernels::Binary::Max, a, c, y);
    return y;
  };
  EXPECT_DOUBLE_EQ(maximum(x, b).data[6], std::max(x.data[6], b.data[2]));
  HostTensor da(ir::DType::F64, x.shape), db_unreduced(ir::DType::F64, x.shape), db(ir::DType::F64, b.shape);
  kernels::maximum_grad(w, x, b, da, db_unreduced);
  const std::vector<int64_t> leading{0};
  kernels::sum(db_unreduced, leading, db);
  expect_gradient([&](const HostTensor& a) { return maximum(a, b); }, x, w, da, "maximum da");
  expect_gradient([&](const HostTensor& c) { return maximum(x, c); }, b, w, db, "maximum db");
  // A tie goes to a.
  HostTensor tied = x;
  tied.data[0] = b.data[0];
  kernels::maximum_grad(w, tied, b, da, db_unreduced);
  EXPECT_EQ(da.data[0], w.data[0]);
  EXPECT_EQ(db_unreduced.data[0], 0.0);
}

TEST(Kernels, LogSoftmaxAndRmsNormGradientsAreDerivatives) {
  HostTensor x = random_tensor({3, 5}, 23), w = random_tensor({3, 5}, 24), dx(ir::DType::F64, x.shape);
  for (int dim : {0, 1}) {
    auto log_softmax = [dim](const HostTensor& in) {
      HostTensor y(in.dtype, in.shape);
      kernels::log_softmax(in, dim, y);
      return y;
    };
    HostTensor y = log_softmax(x), p(ir::DType::F64, x.shape);
    kernels::softmax(x, dim, p);
    EXPECT_NEAR(y.data[7], std::log(p.data[7]), 1e-12);
    kernels::log_softmax_grad(w, y, dim, dx);
    expect_gradient(log_softmax, x, w, dx, "log_softmax");
  }
  HostTensor gamma = random_tensor({5}, 25), dgamma(ir::DType::F64, gamma.shape);
  for (const HostTensor* g : {static_cast<const HostTensor*>(&gamma), static_cast<const HostTensor*>(nullptr)}) {
    auto rms = [&](const HostTensor& in) {
      HostTensor y(in.dtype, in.shape);
      kernels::rms_norm(in, g, 1e-5, y);
      return y;
    };
    kernels::rms_norm_grad(w, x, g, 1e-5, dx);
    expect_gradient(rms, x, w, dx, g ? "rms_norm dx" : "rms_norm dx (no gamma)");
  }
  kernels::rms_norm_weight_grad(w, x, 1e-5, dgamma);
  expect_gradient(
      [&](const HostTensor& g) {
        HostTensor y(x.dtype, x.shape);
        kernels::rms_norm(x, &g, 1e-5, y);
        return y;
      },
      gamma, w, dgamma, "rms_norm dgamma");
}

TEST(Kernels, ReduceMaxGradientIsItsDerivativeAndExpandIsTheAdjointOfSum) {
  HostTensor x = random_tensor({2, 3, 4}, 26), dx(ir::DType::F64, x.shape);
  const std::vector<int64_t> dims{0, 2};
  HostTensor w = random_tensor({3}, 27), y(ir::DType::F64, std::vector<int64_t>{3});
  kernels::reduce_max(x, dims, y);
  for (int64_t j = 0; j < 3; ++j) {
    double m = -1e300;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c) m = std::max(m, x.data[static_cast<size_t>((a * 3 + j) * 4 + c)]);
    EXPECT_EQ(y.data[static_cast<size_t>(j)], m);
  }
  kernels::reduce_max_grad(w, x, y, dims, dx);
  auto reduce_max = [&](const HostTensor& in) {
    HostTensor out(in.dtype, std::vector<int64_t>{3});
    kernels::reduce_max(in, dims, out);
    return out;
  };
  expect_gradient(reduce_max, x, w, dx, "reduce_max");
  // Tied maxima all get dy.
  HostTensor tied(ir::DType::F64, std::vector<int64_t>{2, 2});
  tied.data = {1, 1, 0, 2};
  HostTensor tied_max(ir::DType::F64, std::vector<int64_t>{2, 1}), dy(ir::DType::F64, std::vector<int64_t>{2, 1});
  dy.data = {3, 5};
  const std::vector<int64_t> last{1};
  kernels::reduce_max(tied, last, tied_max);
  HostTensor dtied(ir::DType::F64, tied.shape);
  kernels::reduce_max_grad(dy, tied, tied_max, last, dtied);
  EXPECT_EQ(dtied.data, (std::vector<double>{3, 3, 0, 5}));

  // d/dz sum(v * expand(z)) = sum(v) over the new dims.
  HostTensor z = random_tensor({3}, 28), v = random_tensor(x.shape, 29), dz(ir::DType::F64, z.shape);
  kernels::sum(v, dims, dz);
  expect_gradient(
      [&](const HostTensor& in) {
        HostTensor out(in.dtype, x.shape);
        kernels::expand(in, dims, out);
        return out;
      },
      z, v, dz, "expand");
}

TEST(Kernels, BatchNormFromStatisticsMatchesBatchNormAndItsGradients) {
  HostTensor x = random_tensor({2, 3, 2, 2}, 30), w = random_tensor(x.shape, 31);
  HostTensor gamma = random_tensor({3}, 32), beta = random_tensor({3}, 33);
  auto from_stats = [&](const HostTensor& in, const HostTensor& g, const HostTensor& b) {
    HostTensor sum(ir::DType::F64, g.shape), sumsq(ir::DType::F64, g.shape), y(in.dtype, in.shape);
    kernels::batchnorm_stats(in, sum, sumsq);
    kernels::batchnorm_apply(in, {sum, sumsq, 8.0, 1e-5}, g, b, y);
    return y;
  };
  HostTensor direct(ir::DType::F64, x.shape), split = from_stats(x, gamma, beta);
  kernels::batchnorm(x, gamma, beta, 1e-5, direct);
  for (size_t i = 0; i < x.data.size(); ++i) EXPECT_NEAR(split.data[i], direct.data[i], 1e-12);

  HostTensor sum(ir::DType::F64, gamma.shape), sumsq(ir::DType::F64, gamma.shape);
  kernels::batchnorm_stats(x, sum, sumsq);
  const kernels::BatchStats stats{sum, sumsq, 8.0, 1e-5};
  HostTensor dgamma(ir::DType::F64, gamma.shape), dbeta(ir::DType::F64, beta.shape), dx(ir::DType::F64, x.shape);
  kernels::batchnorm_weight_grad(w, x, stats, dgamma, dbeta);
  kernels::batchnorm_input_grad(w, x, stats, gamma, dgamma, dbeta, dx);
  expect_gradient([&](const HostTensor& in) { return from_stats(in, gamma, beta); }, x, w, dx, "batchnorm dx");
  expect_gradient([&](const HostTensor& g) { return from_stats(x, g, beta); }, gamma, w, dgamma, "batchnorm dgamma");
  expect_gradient([&](const HostTensor& b) { return from_stats(x, gamma, b); }, beta, w, dbeta, "batchnorm dbeta");
}

TEST(LogicalLayout, EarlierMeshAxesChunkOutermostAndPartialsSum) {
  ir::Module m;
  m.set_mesh(ir::Mesh("world", {{"dp", 2}, {"tp", 2}}));
  ir::DeviceSetId all = m.intern_devices(ir::DeviceSet::whole(m.mesh()));
  ir::Layout both{{ir::Sbp::Split, 0}, {ir::Sbp::Split, 0}};
  // Rank (dp=1, tp=0) holds chunk 2 of 4: dp picks the outer half, tp the quarter in it.
  EXPECT_EQ(place_on_device(m, all, both, std::vector<int64_t>{2}, 2).offset[0], 4);
  EXPECT_EQ(place_on_device(m, all, both, std::vector<int64_t>{2}, 1).offset[0], 2);
  HostTensor logical(ir::DType::F32, std::vector<int64_t>{8});
  for (size_t i = 0; i < 8; ++i) logical.data[i] = static_cast<double>(i);
  std::vector<HostTensor> locals;
  for (ir::Rank r : m.members(all))
    locals.push_back(
        local_part(logical, place_on_device(m, all, both, std::vector<int64_t>{2}, r), std::vector<int64_t>{2}));
  std::vector<const HostTensor*> parts;
  for (const HostTensor& t : locals) parts.push_back(&t);
  EXPECT_EQ(gather_logical(m, all, both, parts).logical.data, logical.data);
  // Partial on tp, split on dp: the gathered value sums the tp parts.
  ir::Layout partial{{ir::Sbp::Split, 0}, {ir::Sbp::PartialSum, 0}};
  GatheredTensor g = gather_logical(m, all, partial, parts);
  // (ranks 0 and 1 hold [0, 1] and [2, 3] as tp's quarters of dp's first half)
  EXPECT_EQ(g.logical.data, (std::vector<double>{0 + 2, 1 + 3, 4 + 6, 5 + 7}));
  // Broadcast on tp: the copies differ, which gathering reports.
  ir::Layout replicated{{ir::Sbp::Split, 0}, {ir::Sbp::Broadcast, 0}};
  EXPECT_GT(gather_logical(m, all, replicated, parts).replica_difference, 0);
}

// S(flat) over dp of a [3, 4] tensor split over tp on dim 1: each tp block
// [3, 2] has 6 elements, in dp chunks of 4; the last chunk holds 2 and
// padding.
TEST(LogicalLayout, FlatChunksCoverTheBlockInOrderAndPad) {
  ir::Module m;
  m.set_mesh(ir::Mesh("world", {{"dp", 2}, {"tp", 2}}));
  ir::DeviceSetId all = m.intern_devices(ir::DeviceSet::whole(m.mesh()));
  ir::Layout layout{{ir::Sbp::Flat, 0}, {ir::Sbp::Split, 1}};
  const std::vector<int64_t> shape{3, 4}, chunk{4};
  HostTensor logical(ir::DType::F32, shape);
  for (size_t i = 0; i < 12; ++i) logical.data[i] = static_cast<double>(i + 1);
  std::vector<HostTensor> locals;
  for (ir::Rank r : m.members(all))
    locals.push_back(local_part(logical, place_on_device(m, all, layout, chunk, r, shape), chunk));
  // Rank 1 is (dp=0, tp=1): block columns 2..3, its first 4 elements.
  EXPECT_EQ(locals[1].data, (std::vector<double>{3, 4, 7, 8}));
  // Rank 3 is (dp=1, tp=1): the block's last 2 elements, then padding.
  EXPECT_EQ(locals[3].data, (std::vector<double>{11, 12, 0, 0}));
  std::vector<const HostTensor*> parts;
  for (const HostTensor& t : locals) parts.push_back(&t);
  GatheredTensor g = gather_logical(m, all, layout, parts, shape);
  EXPECT_EQ(g.logical.data, logical.data);
  EXPECT_EQ(g.replica_difference, 0);
}

}  // namespace
}  // namespace dstc::reference
