// libFuzzer target for cluster files: any bytes as a cluster TOML go
// through loading and validation; nothing may crash, hang or leak, and a
// cluster that loads has a positive device count and memory. Built with
// -DDSTC_FUZZ=ON (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "htae/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  sources.add("fuzz.toml", std::string(reinterpret_cast<const char*>(data), size));
  std::optional<dstc::htae::ClusterSpec> cluster = dstc::htae::load_cluster(sources, diags, "fuzz.toml");
  if (cluster && (cluster->num_devices() <= 0 || cluster->gpu.memory_bytes <= 0)) abort();
  if (!cluster && !diags.has_errors()) abort();  // a refusal always says why
  return 0;
}
