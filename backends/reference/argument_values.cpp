#include "backends/reference/argument_values.h"

#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "backends/reference/kernels.h"
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

// Element i of the uniform [0, 1) stream `stream` (stream_of, hashed once
// per tensor: hashing the name per element was most of a large run's set-up).
double uniform_at(uint64_t stream, uint64_t i) { return static_cast<double>(splitmix64(stream + i) >> 11) * 0x1.0p-53; }

// The whole-batch tensor `name` of `shape`: floats uniform in ±1, integers
// uniform in [0, values). A KV cache's elements are drawn by position
// (`positions`, its position dim), so a cache rounded up to more room for
// a split holds the same earlier positions as the single device's.
HostTensor data_tensor(std::string_view name, ir::DType dtype, std::vector<int64_t> shape, int64_t values,
                       uint64_t seed, int positions = -1) {
  HostTensor out(dtype, std::move(shape));
  const bool integer = !ir::is_float(dtype);
  const double range = static_cast<double>(values > 0 ? values : 2);
  uint64_t stream = stream_of(seed, name);
  const int64_t length = positions >= 0 ? out.dim(positions) : 1;
  const int64_t inner = positions >= 0 ? extent(out.shape, positions + 1, out.rank()) : 1;
  for (size_t i = 0; i < out.data.size(); ++i) {
    uint64_t index = i;
    if (positions >= 0) {
      const auto flat = static_cast<int64_t>(i), row = flat / (length * inner), rest = flat % (length * inner);
      index =
          ((static_cast<uint64_t>(row) << 32) + static_cast<uint64_t>(rest / inner)) * static_cast<uint64_t>(inner) +
          static_cast<uint64_t>(rest % inner);
    }
    const double u = uniform_at(stream, index);
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
  return uniform_at(stream_of(seed, name), i);
}

ArgumentSource make_argument_source(uint64_t seed) {
  return [seed](const ArgumentRequest& request, std::string& error) -> std::optional<HostTensor> {
    HostTensor out(request.dtype, request.logical_shape);
    // A parameter's replicas on other pipeline stages start equal to it.
    const std::string logical = ir::logical_name(request.name);
    auto fill = [&](double lo, double hi) {
      const uint64_t stream = stream_of(seed, logical);
      for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = lo + (hi - lo) * uniform_at(stream, i);
    };
    auto ends_with = [&](std::string_view suffix) {
      return request.name.size() >= suffix.size() &&
             request.name.compare(request.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    // A parameter's fp32 master copy starts equal to it.
    const std::string param = request.kind == ir::ArgKind::Param ? logical : ir::master_of(logical);
    if (!param.empty()) {
      int64_t fan_in =
          request.logical_shape.size() >= 2 ? numel_of(request.logical_shape) / request.logical_shape[0] : 0;
      double a = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.5;
      const uint64_t stream = stream_of(seed, param);
      for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = -a + 2 * a * uniform_at(stream, i);
      // A weight stored in fp8 (served quantized) is rounded once, whole,
      // in blocks of 128 of its rows (fewer where rows are shorter), so
      // every shard holds what one device holds.
      if (ir::is_fp8(request.dtype)) {
        HostTensor rounded(request.dtype, request.logical_shape);
        const int64_t row = request.logical_shape.empty() ? 1 : request.logical_shape.back();
        kernels::quantize(out, std::gcd<int64_t>(128, row), rounded);
        return rounded;
      }
      return out;
    }
    switch (request.kind) {
      case ir::ArgKind::Param: return out;  // named above
      case ir::ArgKind::State:
        if (ends_with(".adam_v")) {
          fill(1e-4, 2e-4);
        } else {
          fill(-1e-3, 1e-3);
        }
        return out;
      case ir::ArgKind::Input:
      case ir::ArgKind::Cache: {  // a KV cache's earlier positions are data of the batch's sequences
        const ir::InputData& data = request.data;
        const std::string& name = request.data_name;
        const int positions =
            request.kind == ir::ArgKind::Cache ? static_cast<int>(request.logical_shape.size()) - 2 : -1;
        if (data.micro_batch < 0)
          return data_tensor(name, request.dtype, request.logical_shape, data.values, seed, positions);
        const int axis = data.batch_axis;
        if (axis < 0 || axis >= static_cast<int>(request.logical_shape.size())) {
          error = fmt::format("input '{}' is split into micro-batches but has no batch axis", request.name);
          return std::nullopt;
        }
        if (data.micro_batch >= data.micro_batches) {
          error = fmt::format("micro-batch {} of '{}' lies outside its {} micro-batches", data.micro_batch, name,
                              data.micro_batches);
          return std::nullopt;
        }
        std::vector<int64_t> whole = request.logical_shape;
        const int64_t n = whole[static_cast<size_t>(axis)];
        whole[static_cast<size_t>(axis)] = n * data.micro_batches;
        HostTensor full = data_tensor(name, request.dtype, std::move(whole), data.values, seed, positions);
        return micro_batch_rows(full, axis, n, data.micro_batch);
      }
    }
    return out;
  };
}

}  // namespace dstc::reference
