#include "htae/cluster_spec.h"

namespace dstc::htae {

std::string_view dtype_name(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::Fp32: return "fp32";
    case ComputeDtype::Tf32: return "tf32";
    case ComputeDtype::Fp16: return "fp16";
    case ComputeDtype::Bf16: return "bf16";
    case ComputeDtype::Fp8: return "fp8";
  }
  return "fp32";
}

std::optional<ComputeDtype> parse_dtype(std::string_view name) {
  if (name == "fp32" || name == "f32" || name == "float32") return ComputeDtype::Fp32;
  if (name == "tf32") return ComputeDtype::Tf32;
  if (name == "fp16" || name == "f16" || name == "float16" || name == "half") return ComputeDtype::Fp16;
  if (name == "bf16" || name == "bfloat16") return ComputeDtype::Bf16;
  if (name == "fp8" || name == "e4m3" || name == "e5m2") return ComputeDtype::Fp8;
  return std::nullopt;
}

double GpuSpec::peak(ComputeDtype dtype) const {
  const std::optional<double>& rate = peak_flops[static_cast<size_t>(dtype)];
  return rate ? *rate : peak_flops[static_cast<size_t>(ComputeDtype::Fp32)].value_or(0.0);
}

std::string_view intra_node_kind_name(IntraNodeKind kind) {
  switch (kind) {
    case IntraNodeKind::NvSwitch: return "nvswitch";
    case IntraNodeKind::NvLinkMesh: return "nvlink_mesh";
    case IntraNodeKind::Pcie: return "pcie";
  }
  return "nvswitch";
}

double RuntimeSpec::efficiency(std::string_view collective) const {
  auto it = collective_efficiency.find(collective);
  return it == collective_efficiency.end() ? 1.0 : it->second;
}

int ClusterSpec::nic_of_gpu(int local_gpu) const {
  for (size_t n = 0; n < network.nics.size(); ++n) {
    for (int g : network.nics[n].gpus) {
      if (g == local_gpu) return static_cast<int>(n);
    }
  }
  return -1;
}

}  // namespace dstc::htae
