// What a strategy chooses about training that the front end reads from the
// file and the compiler acts on: one definition for both (the front end may
// include this header and nothing else of the middle end).
#pragma once

#include <cstdint>

namespace dstc::compiler {

enum class Optimizer : uint8_t { Sgd, Adam };

// A parameter read on pipeline stages that run on different devices (a tied
// input embedding and output projection) is either kept on its first stage
// and sent to the others each step, its gradients sent back (Transmit), or
// stored on each with its gradients summed across them before the update
// (Replicate): PiPPy's two modes for multi-use parameters.
enum class ParamSharing : uint8_t { Transmit, Replicate };

}  // namespace dstc::compiler
