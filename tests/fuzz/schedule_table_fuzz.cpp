// libFuzzer target for schedule tables: the first bytes choose the pipeline
// (ranks, chunks per rank, micro-batches), the rest is the CSV; reading and
// checking (completeness, deadlock) must not crash, hang or leak, and a
// table that passes the check runs to completion. Built with -DDSTC_FUZZ=ON
// (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "compiler/schedule/schedule_check.h"
#include "compiler/schedule/schedule_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  dstc::schedule::PipelineDims dims;
  dims.ranks = 1 + data[0] % 8;
  dims.virtual_stages = 1 + data[1] % 3;
  dims.micro_batches = 1 + data[2] % 16;
  dstc::SourceManager sources;
  dstc::DiagnosticEngine diags(sources);
  dstc::FileId file = sources.add("fuzz.csv", std::string(reinterpret_cast<const char*>(data) + 3, size - 3));
  std::optional<dstc::schedule::ScheduleTable> table = dstc::schedule::read_schedule_csv(file, dims, diags);
  if (!table) return 0;
  if (dstc::schedule::check_schedule(*table, {}, diags) && !dstc::schedule::run_unit_time(*table).complete) abort();
  return 0;
}
