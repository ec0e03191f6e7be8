// The op registry's shape rules and costs, against hand-computed values.
#include <gtest/gtest.h>

#include "ir/groups.h"
#include "ir/registry.h"

namespace dstc::ir {
namespace {

// Builds one op on a one-axis mesh of `devices` and returns its result types
// (or the shape rule's error).
class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { module_.set_mesh(Mesh("world", {{"dp", 4}})); }

  struct Result {
    std::vector<TensorType> types;
    OpCost cost;
    std::string error;
    const Function* function = nullptr;  // holding the op, when it was built
    OpId op = 0;
  };

  Result run(OpKind kind, std::vector<TensorType> operands, std::vector<AttrValue> attrs = {}, uint16_t axes = 0) {
    Function& f = module_.add_function("f" + std::to_string(module_.functions.size()));
    Builder b(module_, f);
    DeviceSetId all = module_.intern_devices(DeviceSet::whole(module_.mesh()));
    std::vector<ValueId> ids;
    for (const TensorType& t : operands)
      ids.push_back(b.add_arg("a" + std::to_string(ids.size()), ArgKind::Input, t, all));
    OpSpec spec;
    spec.kind = kind;
    spec.devices = all;
    spec.operands = ids;
    spec.attrs = attrs;
    spec.group_axes = axes;
    Result r;
    try {
      OpId op = b.append(spec);
      for (uint16_t i = 0; i < f.ops[op].result_count; ++i)
        r.types.push_back(module_.value_type(f, f.ops[op].first_result + i));
      r.cost = op_cost(module_, f, f.ops[op]);
      r.function = &f;
      r.op = op;
    } catch (const IrBuildError& e) {
      r.error = e.what();
    }
    return r;
  }

  // What result `result` of the op sums or maximizes away, by its registered rule.
  ReducedDims reduced(OpKind kind, std::vector<TensorType> operands, std::vector<AttrValue> attrs, size_t result = 0) {
    Result built = run(kind, operands, attrs);
    EXPECT_EQ(built.error, "");
    ReducedDims r;
    if (!built.function) return r;
    AttrReader reader(module_, *built.function, built.function->ops[built.op]);
    op_info(kind).reduced({operands, reader}, result, r);
    return r;
  }

  Module module_;
};

std::vector<std::pair<int, int>> dims_of(const std::vector<ReducedDims::Dim>& dims) {
  std::vector<std::pair<int, int>> out;
  for (const ReducedDims::Dim& d : dims) out.emplace_back(d.operand, d.dim);
  return out;
}

const TensorType F32(std::initializer_list<int64_t> shape) { return TensorType(DType::F32, shape); }

TEST_F(RegistryTest, EveryKindIsRegisteredUnderItsName) {
  for (int i = 0; i < kOpKindCount; ++i) {
    auto kind = static_cast<OpKind>(i);
    EXPECT_EQ(op_info(kind).kind, kind);
    EXPECT_EQ(find_op_kind(op_name(kind)), kind);
    EXPECT_NE(op_info(kind).cost, nullptr) << op_name(kind);
  }
  EXPECT_FALSE(find_op_kind("frobnicate").has_value());
}

TEST_F(RegistryTest, MatmulShapeAndFlops) {
  Result r = run(OpKind::Matmul, {F32({4, 16}), F32({16, 8})});
  ASSERT_EQ(r.types.size(), 1u);
  EXPECT_EQ(r.types[0], F32({4, 8}));
  EXPECT_DOUBLE_EQ(r.cost.flops, 2.0 * 4 * 8 * 16);               // 1024
  EXPECT_DOUBLE_EQ(r.cost.bytes, (4 * 16 + 16 * 8 + 4 * 8) * 4);  // 896
}

// FP8: quantize writes one byte an element and its fp32 scales, reading x
// twice for one scale (its amax first) and once for per-row or per-block
// scales; an einsum of fp8 operands names the float it writes.
TEST_F(RegistryTest, QuantizeAndFp8Einsum) {
  const TensorType x(DType::BF16, {16, 256});
  Result tensorwise = run(OpKind::Quantize, {x}, {AttrValue::string("dtype", "f8e4m3")});
  ASSERT_EQ(tensorwise.types.size(), 1u) << tensorwise.error;
  EXPECT_EQ(tensorwise.types[0], TensorType(DType::F8E4M3, {16, 256}));
  EXPECT_DOUBLE_EQ(tensorwise.cost.bytes, 16 * 256 * (2 + 2 + 1) + 4);
  Result rows = run(OpKind::Quantize, {x}, {AttrValue::string("dtype", "f8e4m3"), AttrValue::integer("block", -1)});
  EXPECT_DOUBLE_EQ(rows.cost.bytes, 16 * 256 * (2 + 1) + 16 * 4);
  Result blocks = run(OpKind::Quantize, {x}, {AttrValue::string("dtype", "f8e5m2"), AttrValue::integer("block", 128)});
  EXPECT_DOUBLE_EQ(blocks.cost.bytes, 16 * 256 * (2 + 1) + 16 * 2 * 4);
  EXPECT_NE(run(OpKind::Quantize, {x}, {AttrValue::string("dtype", "bf16")}).error.find("f8e4m3 or f8e5m2"),
            std::string::npos);
  EXPECT_NE(run(OpKind::Quantize, {x}, {AttrValue::string("dtype", "f8e4m3"), AttrValue::integer("block", 100)})
                .error.find("must divide the last dim (256)"),
            std::string::npos);
  EXPECT_NE(run(OpKind::Quantize, {x}, {AttrValue::string("dtype", "f8e4m3"), AttrValue::integer("block", -2)})
                .error.find("-1 for one a row"),
            std::string::npos);
  const TensorType a(DType::F8E5M2, {16, 256}), w(DType::F8E4M3, {64, 256});
  Result gemm =
      run(OpKind::Einsum, {a, w}, {AttrValue::string("spec", "ab,cb->ac"), AttrValue::string("dtype", "bf16")});
  ASSERT_EQ(gemm.types.size(), 1u) << gemm.error;
  EXPECT_EQ(gemm.types[0], TensorType(DType::BF16, {16, 64}));
  EXPECT_NE(run(OpKind::Einsum, {a, w}, {AttrValue::string("spec", "ab,cb->ac")}).error.find("names the dtype"),
            std::string::npos);
}

TEST_F(RegistryTest, MatmulTransposesAndBatches) {
  EXPECT_EQ(run(OpKind::Matmul, {F32({4, 16}), F32({8, 16})}, {AttrValue::boolean("transpose_b", true)}).types[0],
            F32({4, 8}));
  EXPECT_EQ(run(OpKind::Matmul, {F32({16, 4}), F32({16, 8})}, {AttrValue::boolean("transpose_a", true)}).types[0],
            F32({4, 8}));
  Result batched = run(OpKind::Matmul, {F32({2, 4, 16}), F32({16, 8})});
  EXPECT_EQ(batched.types[0], F32({2, 4, 8}));
  EXPECT_DOUBLE_EQ(batched.cost.flops, 2.0 * 2 * 4 * 8 * 16);
  EXPECT_NE(run(OpKind::Matmul, {F32({4, 16}), F32({4, 16})}).error.find("inner sizes 16 and 4"), std::string::npos);
}

TEST_F(RegistryTest, EinsumContraction) {
  Result r = run(OpKind::Einsum, {F32({2, 3, 4}), F32({5, 4})}, {AttrValue::string("spec", "bsh,oh->bso")});
  EXPECT_EQ(r.types[0], F32({2, 3, 5}));
  EXPECT_DOUBLE_EQ(r.cost.flops, 2.0 * 2 * 3 * 4 * 5);  // 240
  EXPECT_NE(run(OpKind::Einsum, {F32({2, 3, 4}), F32({5, 3})}, {AttrValue::string("spec", "bsh,oh->bso")})
                .error.find("dimension 'h' is 4"),
            std::string::npos);
  EXPECT_FALSE(run(OpKind::Einsum, {F32({2, 3})}, {AttrValue::string("spec", "ab->c")}).error.empty());
}

TEST_F(RegistryTest, ElementwiseBroadcastsTrailingDims) {
  Result r = run(OpKind::Add, {F32({4, 8}), F32({8})});
  EXPECT_EQ(r.types[0], F32({4, 8}));
  EXPECT_DOUBLE_EQ(r.cost.flops, 32);
  EXPECT_FALSE(run(OpKind::Add, {F32({4, 8}), F32({4})}).error.empty());
  EXPECT_DOUBLE_EQ(run(OpKind::Gelu, {F32({4, 8})}).cost.flops, 8.0 * 32);
}

TEST_F(RegistryTest, AttentionFlopsHalveWhenCausal) {
  TensorType qkv = F32({1, 2, 8, 4});
  Result full = run(OpKind::Attention, {qkv, qkv, qkv});
  EXPECT_EQ(full.types[0], qkv);
  EXPECT_DOUBLE_EQ(full.cost.flops, 2.0 * 1 * 2 * 8 * 8 * (4 + 4));  // 2048
  EXPECT_DOUBLE_EQ(run(OpKind::Attention, {qkv, qkv, qkv}, {AttrValue::boolean("causal", true)}).cost.flops, 1024);
  Result grad = run(OpKind::AttentionGrad, {qkv, qkv, qkv, qkv});
  EXPECT_EQ(grad.types.size(), 3u);
  EXPECT_DOUBLE_EQ(grad.cost.flops, 2.0 * 1 * 2 * 8 * 8 * (3 * 4 + 2 * 4));
}

TEST_F(RegistryTest, ConvolutionAndPooling) {
  std::vector<int64_t> one = {1, 1};
  Result conv = run(OpKind::Conv2d, {F32({1, 3, 8, 8}), F32({4, 3, 3, 3})}, {AttrValue::ints("padding", one)});
  EXPECT_EQ(conv.types[0], F32({1, 4, 8, 8}));
  EXPECT_DOUBLE_EQ(conv.cost.flops, 2.0 * (1 * 4 * 8 * 8) * (3 * 3 * 3));  // 13824
  std::vector<int64_t> two = {2, 2};
  EXPECT_EQ(run(OpKind::Conv2d, {F32({1, 3, 8, 8}), F32({4, 3, 3, 3})}, {AttrValue::ints("stride", two)}).types[0],
            F32({1, 4, 3, 3}));
  EXPECT_EQ(run(OpKind::MaxPool2d, {F32({1, 3, 8, 8})}, {AttrValue::ints("kernel", two)}).types[0], F32({1, 3, 4, 4}));
  Result dx = run(OpKind::Conv2dInputGrad, {F32({1, 4, 8, 8}), F32({1, 3, 8, 8}), F32({4, 3, 3, 3})},
                  {AttrValue::ints("padding", one)});
  EXPECT_EQ(dx.types[0], F32({1, 3, 8, 8}));
  EXPECT_EQ(op_info(OpKind::Conv2dInputGrad).shape_only_operands, 1u << 1);  // x: its shape only
}

TEST_F(RegistryTest, LayoutOps) {
  std::vector<int64_t> shape = {-1, 4};
  EXPECT_EQ(run(OpKind::Reshape, {F32({2, 3, 4})}, {AttrValue::ints("shape", shape)}).types[0], F32({6, 4}));
  std::vector<int64_t> perm = {2, 0, 1};
  EXPECT_EQ(run(OpKind::Transpose, {F32({2, 3, 4})}, {AttrValue::ints("perm", perm)}).types[0], F32({4, 2, 3}));
  std::vector<int64_t> dims = {0, -1};
  EXPECT_EQ(run(OpKind::Sum, {F32({2, 3, 4})}, {AttrValue::ints("dims", dims)}).types[0], F32({3}));
  EXPECT_EQ(
      run(OpKind::Sum, {F32({2, 3, 4})}, {AttrValue::ints("dims", dims), AttrValue::boolean("keepdim", true)}).types[0],
      F32({1, 3, 1}));
  EXPECT_EQ(run(OpKind::Concat, {F32({2, 3}), F32({2, 5})}, {AttrValue::integer("dim", 1)}).types[0], F32({2, 8}));
  EXPECT_EQ(run(OpKind::Slice, {F32({8, 3})},
                {AttrValue::integer("dim", 0), AttrValue::integer("start", 2), AttrValue::integer("end", 6)})
                .types[0],
            F32({4, 3}));
  EXPECT_EQ(run(OpKind::Cast, {F32({2})}, {AttrValue::string("dtype", "bf16")}).types[0], TensorType(DType::BF16, {2}));
}

TEST_F(RegistryTest, LossEmbeddingAndNorms) {
  EXPECT_EQ(run(OpKind::CrossEntropy, {F32({4, 10}), TensorType(DType::I32, {4})}).types[0], F32({}));
  EXPECT_EQ(run(OpKind::Embedding, {F32({100, 16}), TensorType(DType::I32, {2, 5})}).types[0], F32({2, 5, 16}));
  EXPECT_EQ(
      run(OpKind::EmbeddingGrad, {F32({2, 5, 16}), TensorType(DType::I32, {2, 5})}, {AttrValue::integer("vocab", 100)})
          .types[0],
      F32({100, 16}));
  EXPECT_EQ(run(OpKind::LayerNorm, {F32({4, 8}), F32({8}), F32({8})}).types[0], F32({4, 8}));
  EXPECT_FALSE(run(OpKind::LayerNorm, {F32({4, 8}), F32({4}), F32({8})}).error.empty());
  Result wg = run(OpKind::LayerNormWeightGrad, {F32({4, 8}), F32({4, 8})});
  EXPECT_EQ(wg.types, (std::vector<TensorType>{F32({8}), F32({8})}));
  Result drop = run(OpKind::Dropout, {F32({4, 8})}, {AttrValue::real("p", 0.1)});
  EXPECT_EQ(drop.types[1], TensorType(DType::U8, {4, 8}));
}

TEST_F(RegistryTest, AdamTakesFp32MasterWeightsWithLowPrecisionGradients) {
  Result r =
      run(OpKind::Adam, {F32({8}), TensorType(DType::BF16, {8}), F32({8}), F32({8})}, {AttrValue::real("lr", 1e-3)});
  ASSERT_EQ(r.types.size(), 3u) << r.error;
  EXPECT_EQ(r.types[0], F32({8}));
  EXPECT_DOUBLE_EQ(r.cost.flops, 14.0 * 8);
  EXPECT_FALSE(
      run(OpKind::Adam, {F32({8}), F32({8}), F32({4}), F32({8})}, {AttrValue::real("lr", 1e-3)}).error.empty());
}

TEST_F(RegistryTest, CollectivesUseTheGroupSize) {
  constexpr uint16_t kDp = 1;  // bit of axis dp: a group of 4
  Result gathered = run(OpKind::AllGather, {F32({2, 8})}, {}, kDp);
  EXPECT_EQ(gathered.types[0], F32({8, 8}));
  EXPECT_DOUBLE_EQ(gathered.cost.bytes, 3.0 * 2 * 8 * 4);  // (p-1) * N = 192
  Result reduced = run(OpKind::AllReduce, {F32({8})}, {}, kDp);
  EXPECT_DOUBLE_EQ(reduced.cost.bytes, 2.0 * 3 / 4 * 32);  // 2(p-1)/p * N = 48
  EXPECT_EQ(run(OpKind::ReduceScatter, {F32({8, 2})}, {}, kDp).types[0], F32({2, 2}));
  EXPECT_NE(run(OpKind::ReduceScatter, {F32({6, 2})}, {}, kDp).error.find("not divisible by the group size 4"),
            std::string::npos);
  EXPECT_EQ(run(OpKind::AllToAll, {F32({8, 2})}, {AttrValue::integer("concat_dim", 1)}, kDp).types[0], F32({2, 8}));
  EXPECT_FALSE(run(OpKind::Broadcast, {F32({8})}, {AttrValue::integer("root", 4)}, kDp).error.empty());
  EXPECT_FALSE(run(OpKind::AllReduce, {F32({8})}, {AttrValue::string("op", "mean")}, kDp).error.empty());
}

TEST_F(RegistryTest, UnknownAttributeIsABuildError) {
  EXPECT_NE(run(OpKind::Relu, {F32({4})}, {AttrValue::integer("dim", 1)}).error.find("no attribute 'dim'"),
            std::string::npos);
}

// How partial operands pass through an op is part of its one definition:
// the reference executor's partial tracking reads these.
TEST_F(RegistryTest, OpsDeclareTheirLinearityAndTheDimsTheySumAway) {
  EXPECT_EQ(op_info(OpKind::Add).linearity, Linearity::Sum);
  EXPECT_EQ(op_info(OpKind::Einsum).linearity, Linearity::Product);
  EXPECT_EQ(op_info(OpKind::Softmax).linearity, Linearity::None);
  EXPECT_EQ(op_info(OpKind::GeluGrad).linearity, Linearity::First);
  EXPECT_EQ(op_info(OpKind::BatchNormInputGrad).linearity, Linearity::Gradients);
  EXPECT_EQ(op_info(OpKind::Softmax).reduced, nullptr);

  using Dims = std::vector<std::pair<int, int>>;
  ReducedDims einsum =
      reduced(OpKind::Einsum, {F32({2, 3, 4}), F32({4, 5})}, {AttrValue::string("spec", "bsh,hf->bsf")});
  EXPECT_EQ(dims_of(einsum.summed), (Dims{{0, 2}, {1, 0}}));
  ReducedDims matmul = reduced(OpKind::Matmul, {F32({4, 3}), F32({4, 5})}, {AttrValue::boolean("transpose_a", true)});
  EXPECT_EQ(dims_of(matmul.summed), (Dims{{0, 0}, {1, 0}}));
  const int64_t last[] = {-1};
  ReducedDims max = reduced(OpKind::ReduceMax, {F32({2, 3})}, {AttrValue::ints("dims", last)});
  EXPECT_TRUE(max.summed.empty());
  EXPECT_EQ(dims_of(max.maxed), (Dims{{0, 1}}));
  // dk and dv sum over q's rows; dq does not.
  std::vector<TensorType> attention(4, F32({1, 2, 8, 4}));
  EXPECT_TRUE(reduced(OpKind::AttentionGrad, attention, {}, 0).summed.empty());
  EXPECT_EQ(dims_of(reduced(OpKind::AttentionGrad, attention, {}, 1).summed), (Dims{{1, 2}}));
  ReducedDims shard = reduced(OpKind::Embedding, {F32({16, 4}), TensorType(DType::I64, {2, 3})},
                              {AttrValue::integer("offset_axis", 0)});
  EXPECT_EQ(shard.partial_mesh_axes, 1u);
}

}  // namespace
}  // namespace dstc::ir
