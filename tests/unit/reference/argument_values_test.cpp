// The values verification feeds a program come from what the IR says about
// each argument, nothing else.
#include <gtest/gtest.h>

#include "backends/reference/argument_values.h"

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

}  // namespace
}  // namespace dstc::reference
