// The values a verification run feeds both programs: every parameter,
// optimizer state and data input is a logical tensor drawn from
// (seed, tensor name), so the distributed and the single-device program
// start from the same weights and see the same batch; each device then
// takes its part per the argument's layout (executor.h).
#pragma once

#include <cstdint>

#include "backends/reference/executor.h"

namespace dstc::reference {

// Element i of the tensor named `name` is uniform in [0, 1), a function of
// (seed, name, i) only.
double uniform_element(uint64_t seed, std::string_view name, uint64_t i);

// Parameters: uniform in ±1/sqrt(fan in) (fan in: all dims but the first;
// ±0.5 for vectors). Adam's m: uniform in ±1e-3; v: uniform in [1e-4, 2e-4)
// (non-zero states keep the first update away from sign(g)). Data, as the
// IR describes it (ir::InputData): the whole batch of its model input,
// floats uniform in ±1, integers uniform in [0, values); micro-batch k of
// size b is rows [k·b, (k+1)·b) of it along the batch axis.
ArgumentSource make_argument_source(uint64_t seed);

}  // namespace dstc::reference
