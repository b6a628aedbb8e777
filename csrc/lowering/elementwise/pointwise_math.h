// Pieces of the pointwise math rules (pointwise_math.cpp) that other rule files reuse.
#pragma once

#include <vector>

#include "lowering/lib/op_context.h"

namespace torch_tpu {

// True where the sign bit of x is set (-0. and negative NaNs included); x < 0 for signed integers.
Value sign_bit(HloBuilder& b, const Value& x);
// |mag| with the sign bit of `sign`.
Value copysign_value(HloBuilder& b, const Value& mag, const Value& sign);
// 2^x and log2(x) for float32/float64 x, exact at integers and powers of two.
Value exp2_of(HloBuilder& b, const Value& x);
Value log2_of(HloBuilder& b, const Value& x);


}  // namespace torch_tpu
