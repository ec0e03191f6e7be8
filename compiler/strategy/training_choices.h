// What a strategy chooses about training that the front end reads from the
// file and the compiler acts on: one definition for both (the front end may
// include this header and nothing else of the middle end).
#pragma once

#include <cstdint>

namespace dstc::compiler {

enum class Optimizer : uint8_t { Sgd, Adam };

// FP8 matmuls, Transformer Engine's hybrid format (e4m3 activations and
// weights, e5m2 gradients): None keeps every matmul in the compute
// precision; Tensorwise scales each quantized tensor by one factor (TE's
// delayed and current scaling); Rowwise by one per row of the last dim
// (torchao's `rowwise` recipe, as torchtitan trains); Blockwise by one per
// 128 consecutive elements of a row (DeepSeek-V3's 1x128 tiles, TE's
// Float8BlockScaling).
enum class Fp8Recipe : uint8_t { None, Tensorwise, Rowwise, Blockwise };

// How a mixture of experts' tokens travel between expert-parallel ranks:
// AllToAll sends one copy per (token, expert) (Megatron-Core's `alltoall`
// dispatcher); Deduplicated one per destination node over the network and
// one per destination GPU over NVLink, combining within the node before
// the network on the way back (DeepEP's normal kernels, Megatron-Core's
// `flex` dispatcher with DeepEP or HybridEP).
enum class MoeDispatcher : uint8_t { AllToAll, Deduplicated };

// How context parallelism moves attention's keys and values between the
// ranks holding the sequence's shards: AllGather gathers them whole before
// attention, exposed (Llama 3's, Megatron-Core's `--cp-comm-type
// all_gather`); Ring passes them shard by shard around the ring while
// attention computes on the shards already there, and their gradients
// back the same way (ring attention: Megatron-Core's default `p2p`,
// Transformer Engine's AttnFuncWithCPAndKVP2P).
enum class ContextParallelExchange : uint8_t { AllGather, Ring };

// Whose rows batch norm's statistics are over where the batch is split:
// Sync normalises with the whole micro-batch's, its per-channel sums
// all-reduced over the devices (SyncBN, torch.nn.SyncBatchNorm); Local
// with each device's own rows (torch.nn.BatchNorm under DDP, its default).
enum class BatchNormStatistics : uint8_t { Sync, Local };

// A parameter read on pipeline stages that run on different devices (a tied
// input embedding and output projection) is either kept on its first stage
// and sent to the others each step, its gradients sent back (Transmit), or
// stored on each with its gradients summed across them before the update
// (Replicate): PiPPy's two modes for multi-use parameters.
enum class ParamSharing : uint8_t { Transmit, Replicate };

}  // namespace dstc::compiler
