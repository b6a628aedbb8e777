// Row scatter shared by the rules that reduce positions into groups (segment_reduce, embedding_bag).
#pragma once

#include <string>

#include "lowering/op_context.h"

namespace torch_tpu {

// Rows of `into` ([m, ...]) combined with `updates` ([n, ...]) at the integer rows idx (n elements) by the binary
// StableHLO op `op` ("stablehlo.add", "stablehlo.maximum", ...), or replaced by them when `op` is empty;
// out-of-range rows are dropped.
Value scatter_rows(HloBuilder& b, const Value& into, const Value& updates, const Value& idx, const std::string& op);

}  // namespace torch_tpu
