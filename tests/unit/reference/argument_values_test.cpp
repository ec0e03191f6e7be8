// The values verification feeds a program come from what the IR says about
// each argument, nothing else.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/reference/argument_values.h"
#include "backends/reference/kernels.h"

namespace dstc::reference {
namespace {

ArgumentRequest data_request(std::string data_name, ir::DType dtype, std::vector<int64_t> shape, ir::InputData data) {
  ArgumentRequest r;
  r.name = data_name;
  r.kind = ir::ArgKind::Input;
  r.dtype = dtype;
  r.logical_shape = std::move(shape);
  r.data = data;
  r.data_name = std::move(data_name);
  return r;
}

HostTensor values_of(const ArgumentRequest& request) {
  std::string error;
  std::optional<HostTensor> t = make_argument_source(7)(request, error);
  EXPECT_TRUE(t.has_value()) << error;
  return t ? *t : HostTensor{};
}

TEST(ArgumentValues, MicroBatchesAreRowsOfTheWholeBatch) {
  ir::InputData whole;
  whole.batch_axis = 1;
  HostTensor all = values_of(data_request("x", ir::DType::F32, {2, 6, 3}, whole));
  for (int k = 0; k < 3; ++k) {
    ir::InputData part = whole;
    part.micro_batch = k;
    part.micro_batches = 3;
    HostTensor rows = values_of(data_request("x", ir::DType::F32, {2, 2, 3}, part));
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 3; ++i)
          EXPECT_EQ(rows.data[static_cast<size_t>((o * 2 + b) * 3 + i)],
                    all.data[static_cast<size_t>((o * 6 + k * 2 + b) * 3 + i)]);
  }
}

TEST(ArgumentValues, IntegersTakeTheValuesTheIrGives) {
  ir::InputData data;
  data.values = 5;
  HostTensor ids = values_of(data_request("ids", ir::DType::I32, {1000}, data));
  double low = 99, high = -1;
  for (double v : ids.data) {
    EXPECT_EQ(v, static_cast<double>(static_cast<int64_t>(v)));
    low = std::min(low, v);
    high = std::max(high, v);
  }
  EXPECT_EQ(low, 0);
  EXPECT_EQ(high, 4);
}

TEST(ArgumentValues, AMicroBatchWithoutBatchAxisIsAnError) {
  ir::InputData data;
  data.micro_batch = 0;
  data.micro_batches = 2;
  std::string error;
  EXPECT_FALSE(make_argument_source(7)(data_request("x", ir::DType::F32, {2, 3}, data), error));
  EXPECT_NE(error.find("no batch axis"), std::string::npos) << error;
}

// A weight served in fp8 is the bf16 weight rounded to e4m3 with one scale
// per 128 elements of its rows: each block's values are a multiple of its
// scale on the e4m3 grid, and within an e4m3 step of the unrounded weight.
TEST(ArgumentValues, AnFp8WeightIsTheWeightRoundedInBlocksOf128) {
  ArgumentRequest request;
  request.name = "w";
  request.kind = ir::ArgKind::Param;
  request.dtype = ir::DType::BF16;
  request.logical_shape = {4, 256};
  HostTensor weight = values_of(request);
  request.dtype = ir::DType::F8E4M3;
  HostTensor served = values_of(request);
  HostTensor again(ir::DType::F8E4M3, request.logical_shape);
  kernels::quantize(served, 128, again);
  EXPECT_EQ(again.data, served.data);  // already on the grid
  size_t moved = 0;
  for (size_t i = 0; i < served.data.size(); ++i) {
    EXPECT_NEAR(served.data[i], weight.data[i], std::abs(weight.data[i]) / 8 + 1e-3) << i;
    moved += served.data[i] != weight.data[i];
  }
  EXPECT_GT(moved, served.data.size() / 2);
}

}  // namespace
}  // namespace dstc::reference
