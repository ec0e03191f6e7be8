// Which kinds of parallelism a strategy uses, for comparing a search's
// configurations with its best pure data, tensor and pipeline parallel ones.
#pragma once

#include <cstdint>

#include "compiler/frontend/strategy.h"
#include "compiler/search/result.h"

namespace dstc::search {

// ParallelismBits of the mesh axes larger than 1: the pipeline axis is
// pipeline parallel; an axis on which some leaf splits a dim other than the
// model's batch dim is tensor parallel; any other axis is data parallel.
uint8_t parallelism_of(const frontend::Strategy& strategy);

}  // namespace dstc::search
