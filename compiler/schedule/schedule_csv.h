// Schedule tables from CSV files in the format of PyTorch's
// torch.distributed.pipelining: one row per pipeline rank, one action per
// cell (`0F0`, `1I2`, `1W2`, `0B1`), empty cells for idle slots. The
// communication actions PyTorch may list (SEND_F, RECV_F, SEND_B, RECV_B,
// UNSHARD, RESHARD) are accepted and skipped: dstc infers communication.
// Lines starting with '#' are comments.
#pragma once

#include <optional>

#include "compiler/schedule/schedule_table.h"
#include "ir/source/diagnostics.h"

namespace dstc::schedule {

struct PipelineDims {
  int32_t ranks = 1;
  int32_t virtual_stages = 1;
  int32_t micro_batches = 1;
};

// Reads the table in `file`, which must have one row per rank. Cells keep
// their source ranges so later checks point at them.
std::optional<ScheduleTable> read_schedule_csv(FileId file, const PipelineDims& dims, DiagnosticEngine& diags);

// The table in the same CSV format.
std::string write_schedule_csv(const ScheduleTable& table);

}  // namespace dstc::schedule
