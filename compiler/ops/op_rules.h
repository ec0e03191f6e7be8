// The output-dims rules op_kinds.def names, one per group of ops that
// share it, defined in the family's file.
#pragma once

#include "compiler/ops/op_table.h"

namespace dstc::ops {

using DimsResult = std::optional<std::vector<Dim>>;

// contraction.cpp
DimsResult contraction_dims(const DimsQuery& q, OpError& error);
// elementwise.cpp
DimsResult broadcast_dims(const DimsQuery& q, OpError& error);
DimsResult same_dims(const DimsQuery& q, OpError& error);
DimsResult rope_dims(const DimsQuery& q, OpError& error);
// normalization.cpp
DimsResult along_dim_dims(const DimsQuery& q, OpError& error);
DimsResult normalized_dims(const DimsQuery& q, OpError& error);
// reduction.cpp
DimsResult reduced_dims(const DimsQuery& q, OpError& error);
// embedding.cpp
DimsResult embedding_dims(const DimsQuery& q, OpError& error);
// loss.cpp
DimsResult cross_entropy_dims(const DimsQuery& q, OpError& error);
DimsResult mse_loss_dims(const DimsQuery& q, OpError& error);
// attention.cpp
DimsResult attention_dims(const DimsQuery& q, OpError& error);
// convolution.cpp
DimsResult conv2d_dims(const DimsQuery& q, OpError& error);
DimsResult pool2d_dims(const DimsQuery& q, OpError& error);
DimsResult global_pool_dims(const DimsQuery& q, OpError& error);
// shape.cpp
DimsResult concat_dims(const DimsQuery& q, OpError& error);
DimsResult select_dims(const DimsQuery& q, OpError& error);
DimsResult slice_dims(const DimsQuery& q, OpError& error);
DimsResult reshape_dims(const DimsQuery& q, OpError& error);
// routing.cpp
DimsResult top_k_dims(const DimsQuery& q, OpError& error);
DimsResult dispatch_dims(const DimsQuery& q, OpError& error);
DimsResult combine_dims(const DimsQuery& q, OpError& error);

}  // namespace dstc::ops
