// Helpers the forward lowering and the backward rules of several op
// families share (autodiff.cpp, backward_*.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/lowering/lowering_state.h"

namespace dstc::compiler {

// The loss is the mean over every label (target element) of the global
// batch, so micro-batch and data-parallel parts sum to it.
double loss_normalizer(const LogicalGraph& graph, const LogicalOp& op);
// Elements a Mean averages: the global sizes of its reduced dims (a mean
// over the batch divides by the global batch, as the losses do).
double mean_count(const LogicalGraph& graph, const LogicalOp& op);
std::vector<int64_t> to_ints(const std::vector<int32_t>& v);
// A top_k's node-limited routing (its groups and group_k) onto an IR op's
// attributes; nothing where its routing is not node-limited.
void append_expert_groups(const LogicalOp& top_k, std::vector<ir::AttrValue>& attrs);
// Positions of the output's dims that a binary op's operand i lacks (those
// it broadcasts over).
std::vector<int32_t> dims_input_lacks(const LogicalOp& lop, size_t i);
// The layout of a product of two values laid out `a` and `b` (a partial
// factor makes the product partial; otherwise they split alike).
ir::Layout product_layout(const ir::Layout& a, const ir::Layout& b);
// `layout` without `dims`, what a reduction over them leaves: a split of
// one of them becomes a partial sum, a split of another dim is re-indexed.
ir::Layout reduced_layout(ir::Layout layout, const std::vector<int64_t>& dims);
// Batchnorm's per-channel statistics on each mesh axis, given x's layout
// and rank (x reduced over every dim but the channels, dim 1). Local
// statistics keep each batch shard's apart: on an axis splitting the batch
// (dim 0) they are the shards' statistics side by side, split S(0).
ir::Layout stats_layout(const ir::Layout& x, int rank, bool local = false);
// The same statistics summed over the axes where x is split along another
// dim than the channels (what SyncBN all-reduces), but for the batch where
// statistics are local; partial axes stay.
ir::Layout synced_stats_layout(const ir::Layout& x, const ir::Layout& stats, bool local = false);
std::vector<int64_t> pair(int64_t v);
// Elements per channel that batchnorm's statistics cover: the whole
// micro-batch over every device (SyncBN).
int64_t batchnorm_count(const Lowering& l, int32_t op);
// The batch shards local statistics keep apart: the devices of the mesh
// axes that split x's batch (dim 0).
int64_t batch_shards(const Lowering& l, const ir::Layout& x);

}  // namespace dstc::compiler
