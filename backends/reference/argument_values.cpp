#include "backends/reference/argument_values.h"

#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "ir/replica_names.h"

namespace dstc::reference {

namespace {

uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t stream_of(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return splitmix64(h ^ splitmix64(seed));
}

struct DataTensor {
  int32_t tensor = -1;
  int micro_batch = -1;  // -1: the whole batch
};

// "x" or "x.mb3" -> the graph tensor and micro-batch.
DataTensor find_data_tensor(const compiler::LogicalGraph& graph, const std::string& name) {
  for (int32_t t = 0; t < static_cast<int32_t>(graph.tensors.size()); ++t) {
    const std::string& base = graph.tensors[t].name;
    if (name == base) return {t, -1};
    if (name.size() > base.size() + 3 && name.compare(0, base.size(), base) == 0 &&
        name.compare(base.size(), 3, ".mb") == 0) {
      std::string digits = name.substr(base.size() + 3);
      if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos) return {t, std::stoi(digits)};
    }
  }
  return {};
}

// How many distinct values an integer input takes: the rows of the
// embedding it indexes or the classes of the cross-entropy it labels.
int64_t integer_range(const compiler::LogicalGraph& graph, int32_t tensor) {
  for (const compiler::LogicalOp& op : graph.ops) {
    if (op.inputs.size() < 2 || op.inputs[1].tensor != tensor) continue;
    const compiler::Tensor& first = graph.tensors[op.inputs[0].tensor];
    if (op.type == compiler::OpType::Embedding && !first.dims.empty()) return first.dims[0].size;
    if (op.type == compiler::OpType::CrossEntropy && !first.dims.empty()) return first.dims.back().size;
  }
  return 2;
}

HostTensor data_tensor(const compiler::LogicalGraph& graph, int32_t t, uint64_t seed) {
  const compiler::Tensor& tensor = graph.tensors[t];
  std::vector<int64_t> shape;
  for (const compiler::Dim& d : tensor.dims) shape.push_back(d.size);
  HostTensor out(tensor.dtype, shape);
  const bool integer = !ir::is_float(tensor.dtype);
  const double range = static_cast<double>(integer_range(graph, t));
  uint64_t stream = stream_of(seed, tensor.name);
  for (size_t i = 0; i < out.data.size(); ++i) {
    double u = static_cast<double>(splitmix64(stream + i) >> 11) * 0x1.0p-53;
    out.data[i] = integer ? std::floor(u * range) : 2 * u - 1;
  }
  return out;
}

// Rows [k·n, (k+1)·n) of `full` along `axis`.
HostTensor micro_batch_rows(const HostTensor& full, int axis, int64_t n, int k) {
  std::vector<int64_t> shape = full.shape;
  shape[static_cast<size_t>(axis)] = n;
  HostTensor out(full.dtype, shape);
  const int64_t outer = extent(full.shape, 0, axis), inner = extent(full.shape, axis + 1, full.rank());
  const int64_t rows = full.dim(axis);
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(full.data.begin() + (o * rows + k * n) * inner, n * inner, out.data.begin() + o * n * inner);
  return out;
}

}  // namespace

double uniform_element(uint64_t seed, std::string_view name, uint64_t i) {
  return static_cast<double>(splitmix64(stream_of(seed, name) + i) >> 11) * 0x1.0p-53;
}

ArgumentSource make_argument_source(const compiler::LogicalGraph& graph, uint64_t seed) {
  return [&graph, seed](const ArgumentRequest& request, std::string& error) -> std::optional<HostTensor> {
    HostTensor out(request.dtype, request.logical_shape);
    // A parameter's replicas on other pipeline stages start equal to it.
    const std::string logical = ir::logical_name(request.name);
    auto fill = [&](double lo, double hi) {
      for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = lo + (hi - lo) * uniform_element(seed, logical, i);
    };
    auto ends_with = [&](std::string_view suffix) {
      return request.name.size() >= suffix.size() &&
             request.name.compare(request.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    switch (request.kind) {
      case ir::ArgKind::Param: {
        int64_t fan_in =
            request.logical_shape.size() >= 2 ? numel_of(request.logical_shape) / request.logical_shape[0] : 0;
        double a = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.5;
        fill(-a, a);
        return out;
      }
      case ir::ArgKind::State:
        if (ends_with(".adam_v")) {
          fill(1e-4, 2e-4);
        } else {
          fill(-1e-3, 1e-3);
        }
        return out;
      case ir::ArgKind::Input: {
        DataTensor data = find_data_tensor(graph, request.name);
        if (data.tensor < 0) {
          error = fmt::format("the model has no input named '{}'", request.name);
          return std::nullopt;
        }
        HostTensor full = data_tensor(graph, data.tensor, seed);
        full.dtype = request.dtype;
        if (data.micro_batch < 0) return full;
        int axis = graph.tensors[data.tensor].batch_axis;
        if (axis < 0 || axis >= full.rank() || request.logical_shape.size() != full.shape.size()) {
          error = fmt::format("input '{}' is split into micro-batches but has no batch axis", request.name);
          return std::nullopt;
        }
        int64_t n = request.logical_shape[static_cast<size_t>(axis)];
        if ((data.micro_batch + 1) * n > full.dim(axis)) {
          error = fmt::format("micro-batch {} of '{}' lies outside its batch of {}", data.micro_batch,
                              graph.tensors[data.tensor].name, full.dim(axis));
          return std::nullopt;
        }
        return micro_batch_rows(full, axis, n, data.micro_batch);
      }
    }
    return out;
  };
}

}  // namespace dstc::reference
