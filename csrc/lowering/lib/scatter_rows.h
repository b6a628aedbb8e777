// Row scatter shared by segment_reduce, embedding_bag and the flat-index ops (put_, nonzero_static, masked_scatter).
// Defined in segment_reduce.cpp.
#pragma once

#include <string>

#include "lowering/lib/op_context.h"

namespace torch_tpu {

// Rows of `into` ([m, ...]) combined with `updates` ([n, ...]) at the integer rows idx (n elements) by the binary
// StableHLO op `op` ("stablehlo.add", "stablehlo.maximum", ...), or replaced by them when `op` is empty;
// out-of-range rows are dropped.
Value scatter_rows(HloBuilder& b, const Value& into, const Value& updates, const Value& idx, const std::string& op);

}  // namespace torch_tpu
