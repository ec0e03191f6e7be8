// The in-order queues a rank runs an op on: one per stream, except that
// pipeline transfers queue by direction, as runtimes post them (batched
// isend/irecv per peer): forward sends on the pipeline stream's queue,
// forward receives, backward sends and backward receives on one each. A
// send whose receiver is not there yet holds up only its own queue. The
// simulator runs these queues and the deadlock check proves they finish.
#pragma once

#include <string_view>

#include "ir/module.h"

namespace dstc::ir {

inline constexpr int kRecvQueue = kStreamCount;
inline constexpr int kGradRecvQueue = kStreamCount + 1;
inline constexpr int kGradSendQueue = kStreamCount + 2;
inline constexpr int kQueueCount = kStreamCount + 3;

int op_queue(const Op& op);
std::string_view queue_name(int queue);  // "compute", ..., "pipeline recv", "pipeline grad recv", ...

}  // namespace dstc::ir
