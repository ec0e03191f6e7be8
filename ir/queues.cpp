#include "ir/queues.h"

namespace dstc::ir {

int op_queue(const Op& op) {
  if (op.stream != Stream::Pipeline || (op.kind != OpKind::Send && op.kind != OpKind::Recv))
    return static_cast<int>(op.stream);
  bool backward = op.phase == Phase::InputGrad || op.phase == Phase::WeightGrad;
  if (op.kind == OpKind::Recv) return backward ? kGradRecvQueue : kRecvQueue;
  return backward ? kGradSendQueue : static_cast<int>(op.stream);
}

std::string_view queue_name(int queue) {
  switch (queue) {
    case kRecvQueue: return "pipeline recv";
    case kGradRecvQueue: return "pipeline grad recv";
    case kGradSendQueue: return "pipeline grad send";
    default: return stream_name(static_cast<Stream>(queue));
  }
}

}  // namespace dstc::ir
