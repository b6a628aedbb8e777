// In-place and out= calls of pointwise ops whose result dtype is not their operands' common dtype (a bfloat16
// tensor updated with a float32 one, a float32 out= of bfloat16 operands): PyTorch's TensorIterator computes in the
// common dtype and converts once into the result. The rules are written for results of the common dtype, so the
// rows of those ops are wrapped to see that dtype and convert at the end.
#pragma once

#include <vector>

#include "lowering/lib/op_context.h"

namespace torch_tpu {

// Wraps the rule of every row with LoweringRow::promotes set.
void compute_in_common_dtype(std::vector<LoweringRow>& rows);

// The arguments that take part in type promotion for the overloads of `row` (its `promotes`); nullptr when none do.
const std::vector<size_t>* promoting_operands_of(const LoweringRow& row);

}  // namespace torch_tpu
