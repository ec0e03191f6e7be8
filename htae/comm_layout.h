// Who takes part in one communication op, in device classes: its groups
// (collectives) or pairs (send/recv) as physical devices, and the connected
// components of classes they join. A component is one rendezvous: it starts
// when all its classes are at the op, and finishes when all its groups have.
#pragma once

#include <cstdint>
#include <vector>

#include "htae/device_classes.h"
#include "ir/module.h"

namespace dstc::htae {

struct CommComponent {
  std::vector<uint32_t> classes;             // collective members; send/recv: the senders
  std::vector<uint32_t> receivers;           // send/recv: the receivers
  std::vector<std::vector<int64_t>> groups;  // physical device ids in group order; send/recv: {src, dst}
};

struct CommLayout {
  std::vector<uint32_t> component_of_class;  // ir::kNone for classes not taking part
  std::vector<CommComponent> components;
};

// A collective's groups: over the op's group axes of its set, or its explicit group list.
CommLayout collective_layout(const ir::Module& module, const ir::Op& op, const DeviceClasses& classes);
// A send and its recv: the k-th member of the send's set sends to the k-th of its peer set.
CommLayout p2p_layout(const ir::Module& module, const ir::Op& send, const ir::Op& recv, const DeviceClasses& classes);

}  // namespace dstc::htae
