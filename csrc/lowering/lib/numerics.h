// Numerically careful building blocks shared by the elementwise and reduction rules: PyTorch's "opmath" (reduced
// precision floats computed in float32 and rounded once), NaN-propagating max/min, a saturating erf and integer
// pow that wraps like C++ integer arithmetic.
#pragma once

#include <vector>

#include "hlo/builder.h"

namespace torch_tpu {

// The type PyTorch computes `t` in: float32 for float16/bfloat16, `t` itself otherwise.
ElementType opmath_type(ElementType t);
bool is_reduced_float(ElementType t);

Value is_nan(HloBuilder& b, const Value& x);  // i1; false for non-floating types
// max/min where a NaN in either operand gives NaN (torch.maximum/minimum/clamp).
Value nan_max(HloBuilder& b, const Value& x, const Value& y);
Value nan_min(HloBuilder& b, const Value& x, const Value& y);
// max/min that ignore a NaN operand unless both are NaN (torch.fmax/fmin).
Value fmax_value(HloBuilder& b, const Value& x, const Value& y);
Value fmin_value(HloBuilder& b, const Value& x, const Value& y);
// Reduction to the max/min over `dims`; any NaN in a reduced slice gives NaN.
Value reduce_nan_max(HloBuilder& b, const Value& x, const std::vector<int64_t>& dims);
Value reduce_nan_min(HloBuilder& b, const Value& x, const std::vector<int64_t>& dims);

// erf that reaches exactly +-1 where the true value rounds to it (XLA's polynomial stops short of 1).
Value erf_value(HloBuilder& b, const Value& x);
// sign(x) as PyTorch defines it: (x > 0) - (x < 0), so sign(NaN) = 0 and sign(-0.) = 0.
Value sign_value(HloBuilder& b, const Value& x);
// Truncation toward zero for floats (identity for integers).
Value trunc_value(HloBuilder& b, const Value& x);

// base ** exponent for integer types by repeated squaring, wrapping in the type; negative exponents give 1 for base
// 1, +-1 for base -1 and 0 otherwise, as PyTorch's integer pow does. Both operands already have the result type.
Value integer_pow(HloBuilder& b, const Value& base, const Value& exponent);
// base ** exponent for a known non-negative exponent (the multiplications are unrolled at build time).
Value integer_pow_const(HloBuilder& b, const Value& base, uint64_t exponent);

}  // namespace torch_tpu
