// Small pieces the elementwise and activation rules share: dtype checks with PyTorch's wording and PyTorch's
// "opmath" (float16/bfloat16 results computed in float32, rounded once).
#pragma once

#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {

// CPU's checked conversion of a number to dtype `t` ("value cannot be converted to type float without overflow"):
// fill_, masked_fill, index_fill, clamp, where, pow's exponent, alpha. Defined in elementwise.cpp.
void check_fits(const c10::Scalar& v, at::ScalarType t);

// PyTorch's "not implemented for 'Int'" error for rules that only exist for floating types.
inline void require_floating(OpContext& c, const char* op) {
  if (is_floating(c.out(0).dtype) || is_complex(c.out(0).dtype)) return;
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", op, "\" not implemented for '", c10::toString(c.arg(0).toTensor().scalar_type()),
                              "'");
}

inline void reject_bool(OpContext& c, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(c.out(0).dtype != ElementType::kPred, "\"", op, "\" not implemented for 'Bool'");
}

// Argument i in the type the op computes in (float32 for float16/bfloat16 results), broadcast to the result.
inline Value opmath_operand(OpContext& c, size_t i) {
  return c.b.convert(c.operand(i, c.out(0).dtype, c.out(0).dims), opmath_type(c.out(0).dtype));
}

inline Value to_result(OpContext& c, const Value& v) { return c.b.convert(v, c.out(0).dtype); }

// The result type with the dtype the op computes in.
inline TensorType compute_out(OpContext& c) { return {opmath_type(c.out(0).dtype), c.out(0).dims}; }

}  // namespace torch_tpu
