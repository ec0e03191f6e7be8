// The output-dims rules and lowering limits op_kinds.def names, one per
// group of ops that share it, defined in the family's file.
#pragma once

#include "compiler/ops/op_table.h"

namespace dstc::ops {

using DimsResult = std::optional<std::vector<Dim>>;
using LoweringRefusal = std::optional<std::string>;

// contraction.cpp
DimsResult contraction_dims(const DimsQuery& q, OpError& error);
// elementwise.cpp
DimsResult broadcast_dims(const DimsQuery& q, OpError& error);
DimsResult same_dims(const DimsQuery& q, OpError& error);
DimsResult rope_dims(const DimsQuery& q, OpError& error);
LoweringRefusal binary_limit(const LoweringQuery& q);
LoweringRefusal rope_limit(const LoweringQuery& q);
// normalization.cpp
DimsResult along_dim_dims(const DimsQuery& q, OpError& error);
DimsResult normalized_dims(const DimsQuery& q, OpError& error);
LoweringRefusal layernorm_limit(const LoweringQuery& q);
LoweringRefusal rmsnorm_limit(const LoweringQuery& q);
LoweringRefusal batchnorm_limit(const LoweringQuery& q);
// reduction.cpp
DimsResult reduced_dims(const DimsQuery& q, OpError& error);
// embedding.cpp
DimsResult embedding_dims(const DimsQuery& q, OpError& error);
// loss.cpp
DimsResult cross_entropy_dims(const DimsQuery& q, OpError& error);
DimsResult mse_loss_dims(const DimsQuery& q, OpError& error);
LoweringRefusal cross_entropy_limit(const LoweringQuery& q);
// attention.cpp
DimsResult attention_dims(const DimsQuery& q, OpError& error);
LoweringRefusal attention_limit(const LoweringQuery& q);
// convolution.cpp
DimsResult conv2d_dims(const DimsQuery& q, OpError& error);
DimsResult pool2d_dims(const DimsQuery& q, OpError& error);
DimsResult global_pool_dims(const DimsQuery& q, OpError& error);
LoweringRefusal conv2d_limit(const LoweringQuery& q);
LoweringRefusal pool2d_limit(const LoweringQuery& q);
// shape.cpp
DimsResult concat_dims(const DimsQuery& q, OpError& error);
DimsResult select_dims(const DimsQuery& q, OpError& error);
DimsResult slice_dims(const DimsQuery& q, OpError& error);
DimsResult reshape_dims(const DimsQuery& q, OpError& error);
LoweringRefusal slice_limit(const LoweringQuery& q);
// routing.cpp
DimsResult top_k_dims(const DimsQuery& q, OpError& error);
DimsResult dispatch_dims(const DimsQuery& q, OpError& error);
DimsResult combine_dims(const DimsQuery& q, OpError& error);
LoweringRefusal routing_limit(const LoweringQuery& q);

}  // namespace dstc::ops
