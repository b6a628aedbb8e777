// Elementwise ops: arithmetic, unary math, comparisons, logic, where/clamp/fill (activations: activations.cpp).
// Every rule computes in the result dtype PyTorch's meta kernel chose and broadcasts operands to the result shape.
#include <ATen/native/TypeProperties.h>

#include <cmath>
#include <limits>

#include "lowering/elementwise/pointwise_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

// ---- PyTorch's checks on number arguments, which the meta kernels skip ----

const char* c_type_name(at::ScalarType t) {
  switch (t) {
    case at::kByte: return "uint8_t";
    case at::kChar: return "int8_t";
    case at::kShort: return "int16_t";
    case at::kInt: return "int";
    case at::kLong: return "int64_t";
    case at::kHalf: return "c10::Half";
    case at::kBFloat16: return "c10::BFloat16";
    case at::kFloat8_e5m2: return "c10::Float8_e5m2";
    case at::kFloat8_e4m3fn: return "c10::Float8_e4m3fn";
    case at::kFloat8_e5m2fnuz: return "c10::Float8_e5m2fnuz";
    case at::kFloat8_e4m3fnuz: return "c10::Float8_e4m3fnuz";
    case at::kFloat: return "float";
    case at::kDouble: return "double";
    case at::kBool: return "bool";
    default: return "scalar_t";
  }
}


// Number argument i converted to the result's dtype.
void check_number_arg(OpContext& c, size_t i) {
  if (!c.has(i) || c.is_tensor(i) || !c.inspect(i).isScalar()) return;
  at::ScalarType t = at::kFloat;
  switch (c.out(0).dtype) {
    case ElementType::kPred: t = at::kBool; break;
    case ElementType::kS8: t = at::kChar; break;
    case ElementType::kS16: t = at::kShort; break;
    case ElementType::kS32: t = at::kInt; break;
    case ElementType::kS64: t = at::kLong; break;
    case ElementType::kU8: t = at::kByte; break;
    case ElementType::kF16: t = at::kHalf; break;
    case ElementType::kBF16: t = at::kBFloat16; break;
    case ElementType::kF64: t = at::kDouble; break;
    case ElementType::kF32: t = at::kFloat; break;
    default: return;
  }
  check_fits(c.arg(i).toScalar(), t);
}

bool is_bool_arg(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor().scalar_type() == at::kBool : v.isBool();
}

// add/sub/rsub: PyTorch's sub_check and alpha_check, before the meta kernel (which words them differently).
ArgumentPrep add_checks(bool subtract) {
  return [subtract](std::vector<c10::IValue>& args) {
    if (args.size() < 2) return;
    if (subtract) {
      TORCH_CHECK(!(is_bool_arg(args[0]) && is_bool_arg(args[1])),
                  "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
                  "operator instead.");
      TORCH_CHECK(!is_bool_arg(args[0]) && !is_bool_arg(args[1]),
                  "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
                  "mask, use the `~` or `logical_not()` operator instead.");
    }
    if (args.size() < 3 || !args[2].isScalar()) return;
    c10::Scalar alpha = args[2].toScalar();
    at::ScalarType t = result_type_of({&args[0], &args[1]});
    TORCH_CHECK(!alpha.isBoolean() || t == at::kBool, "Boolean alpha only supported for Boolean results.");
    TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t) || alpha.isIntegral(true),
                "For integral input tensors, argument alpha must not be a floating point number.");
    check_fits(alpha, t);
  };
}

// Both operands (tensor or scalar) in dtype `t`, broadcast to result 0's shape.
std::pair<Value, Value> operands(OpContext& c, ElementType t, size_t i = 0, size_t j = 1) {
  const auto& dims = c.out(0).dims;
  return {c.operand(i, t, dims), c.operand(j, t, dims)};
}

// Operands i and j cast to the result dtype (as PyTorch casts tensors and wrapped numbers to the common dtype,
// so e.g. 1e10 becomes inf for a float16 result), then to the compute type `t`.
std::pair<Value, Value> cast_operands(OpContext& c, ElementType t, size_t i = 0, size_t j = 1) {
  auto [a, b] = operands(c, c.out(0).dtype, i, j);
  return {c.b.convert(a, t), c.b.convert(b, t)};
}

// A Python number or a 0-d CPU tensor.
bool cpu_scalar(OpContext& c, size_t i) {
  if (!c.is_tensor(i)) return true;
  const at::Tensor& t = c.inspect(i).toTensor();
  return t.is_cpu() && t.dim() == 0;
}

// mul/div: as cast_operands, except that a CPU scalar second operand keeps its full value in the compute type
// (PyTorch's CPU mul/div kernels read it as their opmath type: float16 x * 0.1 uses 0.1f, not 0.1 rounded).
std::pair<Value, Value> scaled_operands(OpContext& c, ElementType t) {
  auto [a, b] = cast_operands(c, t);
  if (cpu_scalar(c, 1) && !cpu_scalar(c, 0)) b = c.operand(1, t, c.out(0).dims);
  return {a, b};
}

LoweringRule binary(const std::string& op) {
  return [op](OpContext& c) -> V {
    auto [a, b] = operands(c, c.out(0).dtype);
    return {c.b.binary(op, a, b)};
  };
}

LoweringRule unary(const std::string& op) {
  return [op](OpContext& c) -> V { return {to_result(c, c.b.unary(op, opmath_operand(c, 0)))}; };
}

// floor/ceil/round: integers are returned unchanged (PyTorch does the same); bool has no kernel.
LoweringRule rounding(const std::string& op, const char* name) {
  return [op, name](OpContext& c) -> V {
    reject_bool(c, name);
    Value x = c.operand(0, c.out(0).dtype, c.out(0).dims);
    return {is_floating(x.type.dtype) ? c.b.unary(op, x) : x};
  };
}

V round_decimals_rule(OpContext& c) {  // round(self, *, decimals): nearbyint(x * 10^d) / 10^d (d < 0: x / 10^-d)
  require_floating(c, "round");
  TensorType o = c.out(0);
  Value x = opmath_operand(c, 0);
  int64_t d = c.has(1) ? c.integer(1) : 0;
  Value p = c.b.constant(std::pow(10.0, static_cast<double>(d < 0 ? -d : d)), x.type.dtype, o.dims);
  if (d == 0) return {to_result(c, c.b.unary("stablehlo.round_nearest_even", x))};
  Value r = d > 0 ? c.b.binary("stablehlo.divide", c.b.unary("stablehlo.round_nearest_even", c.b.binary("stablehlo.multiply", x, p)), p)
                  : c.b.binary("stablehlo.multiply", c.b.unary("stablehlo.round_nearest_even", c.b.binary("stablehlo.divide", x, p)), p);
  return {to_result(c, r)};
}

V abs_rule(OpContext& c) {
  reject_bool(c, "abs");
  Value in = c.tensor(0);
  if (is_complex(in.type.dtype)) {  // |z| is real: take it before converting to the (real) result type
    TensorType part{in.type.dtype == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64, in.type.dims};
    return {c.b.convert(c.b.op1("stablehlo.abs", {in}, part), c.out(0).dtype)};
  }
  Value x = c.operand(0, c.out(0).dtype, c.out(0).dims);
  return {is_unsigned_integer(x.type.dtype) ? x : c.b.unary("stablehlo.abs", x)};
}

V sign_rule(OpContext& c) {
  Value x = c.operand(0, c.out(0).dtype, c.out(0).dims);
  if (!is_complex(x.type.dtype)) return {sign_value(c.b, x)};
  // sgn(z) = z / |z|, and 0 at 0.
  TensorType part{x.type.dtype == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64, x.type.dims};
  Value mag = c.b.op1("stablehlo.abs", {x}, part);
  Value zero = c.b.constant(0, part.dtype, part.dims);
  Value is_zero = c.b.compare(CompareDirection::kEq, mag, zero);
  Value safe = c.b.select(is_zero, c.b.constant(1, part.dtype, part.dims), mag);
  Value unit = c.b.binary("stablehlo.divide", x, c.b.op1("stablehlo.complex", {safe, zero}, x.type));
  return {c.b.select(is_zero, c.b.constant(0, x.type.dtype, x.type.dims), unit)};
}

// Binary rule on NaN-aware helpers (maximum/minimum/fmax/fmin).
LoweringRule binary_fn(Value (*fn)(HloBuilder&, const Value&, const Value&)) {
  return [fn](OpContext& c) -> V {
    auto [a, b] = operands(c, c.out(0).dtype);
    return {fn(c.b, a, b)};
  };
}

// Number argument i rounded to the result dtype first (PyTorch casts alpha/value to the tensor's dtype), then
// converted to the compute type `t` and broadcast to the result shape.
Value scalar_in_result_type(OpContext& c, size_t i, ElementType t) {
  return c.b.convert(c.operand(i, c.out(0).dtype, c.out(0).dims), t);
}

// a + alpha * b (alpha is argument 2 when present).
LoweringRule add_like(const std::string& op) {
  return [op](OpContext& c) -> V {
    TensorType o = c.out(0);
    ElementType t = opmath_type(o.dtype);
    auto [a, b] = cast_operands(c, t);
    if (c.has(2) && !c.is_unit(2)) b = c.b.binary("stablehlo.multiply", b, scalar_in_result_type(c, 2, t));
    return {to_result(c, c.b.binary(op, a, b))};
  };
}

LoweringRule compare(CompareDirection dir) {
  return [dir](OpContext& c) -> V {
    auto [a, b] = operands(c, c.promoted({0, 1}));
    return {c.b.compare(dir, a, b)};
  };
}

Value as_pred(OpContext& c, size_t i) {
  const auto& dims = c.out(0).dims;
  if (c.is_tensor(i)) {
    Value v = c.b.broadcast_to(c.tensor(i), dims);
    if (v.type.dtype == ElementType::kPred) return v;
    return c.b.compare(CompareDirection::kNe, v, c.b.constant(0, v.type.dtype, dims));
  }
  return c.b.constant(c.scalar(i) != 0 ? 1 : 0, ElementType::kPred, dims);
}

LoweringRule bitwise(const std::string& op, const char* name) {
  return [op, name](OpContext& c) -> V {
    TensorType o = c.out(0);
    TORCH_CHECK_NOT_IMPLEMENTED(!is_floating(o.dtype) && !is_complex(o.dtype), "\"", name, "\" not implemented for '",
                                c10::toString(c.arg(0).toTensor().scalar_type()), "'");
    auto [a, b] = operands(c, o.dtype);
    return {c.b.binary(op, a, b)};
  };
}

// bitwise_left_shift / bitwise_right_shift (and << >>): a shift by the bit width or more, or by a negative amount,
// gives 0 (right shifts of negative signed values: -1), as XLA's shifts and PyTorch's kernels define it.
LoweringRule shift(bool left, const char* name) {
  return [left, name](OpContext& c) -> V {
    TensorType o = c.out(0);
    TORCH_CHECK_NOT_IMPLEMENTED(!is_floating(o.dtype) && !is_complex(o.dtype) && o.dtype != ElementType::kPred, "\"",
                                name, "\" not implemented for '", c10::toString(c.arg(0).toTensor().scalar_type()),
                                "'");
    auto [a, b] = operands(c, o.dtype);
    const char* op = left                            ? "stablehlo.shift_left"
                     : is_unsigned_integer(o.dtype)  ? "stablehlo.shift_right_logical"
                                                     : "stablehlo.shift_right_arithmetic";
    return {c.b.binary(op, a, b)};
  };
}

LoweringRule logical(const std::string& op) {
  return [op](OpContext& c) -> V { return {c.b.binary(op, as_pred(c, 0), as_pred(c, 1))}; };
}

// Integer division, fmod and remainder by zero: CPU PyTorch raises (the device check reports it at the next sync).
void check_integer_divisor(OpContext& c, const Value& divisor) {
  ElementType t = divisor.type.dtype;
  if (is_floating(t) || is_complex(t) || t == ElementType::kPred) return;
  c.check(c.b.compare(CompareDirection::kEq, divisor, c.b.constant(0, t, divisor.type.dims)), "ZeroDivisionError",
          false);
}

// Python-style modulo: the result takes the divisor's sign.
Value python_mod(HloBuilder& b, const Value& x, const Value& y) {
  Value r = b.binary("stablehlo.remainder", x, y);
  Value zero = b.constant(0, x.type.dtype, x.type.dims);
  Value nonzero = b.compare(CompareDirection::kNe, r, zero);
  Value signs_differ = b.compare(CompareDirection::kNe, b.compare(CompareDirection::kLt, r, zero),
                                 b.compare(CompareDirection::kLt, y, zero));
  Value fix = b.binary("stablehlo.and", nonzero, signs_differ);
  return b.select(fix, b.binary("stablehlo.add", r, y), r);
}

// PyTorch's floor division of floats: (a - fmod(a, b)) / b, corrected toward the floor, so that e.g.
// -0.5 // inf is -1 and the quotient's zero keeps a / b's sign.
Value floor_divide_float(HloBuilder& b, const Value& x, const Value& y) {
  auto k = [&](double v) { return b.constant(v, x.type.dtype, x.type.dims); };
  Value q = b.binary("stablehlo.divide", x, y);
  Value mod = b.binary("stablehlo.remainder", x, y);
  Value div = b.binary("stablehlo.divide", b.binary("stablehlo.subtract", x, mod), y);
  Value adjust = b.binary("stablehlo.and", b.compare(CompareDirection::kNe, mod, k(0)),
                          b.compare(CompareDirection::kNe, b.compare(CompareDirection::kLt, y, k(0)),
                                    b.compare(CompareDirection::kLt, mod, k(0))));
  div = b.select(adjust, b.binary("stablehlo.subtract", div, k(1)), div);
  Value fl = b.unary("stablehlo.floor", div);
  fl = b.select(b.compare(CompareDirection::kGt, b.binary("stablehlo.subtract", div, fl), k(0.5)),
                b.binary("stablehlo.add", fl, k(1)), fl);
  // copysign(0, q): the sign bit of q, read through its bits.
  ElementType bits = element_size(x.type.dtype) == 8 ? ElementType::kS64
                     : element_size(x.type.dtype) == 4 ? ElementType::kS32
                                                        : ElementType::kS16;
  Value q_bits = b.op1("stablehlo.bitcast_convert", {q}, {bits, x.type.dims});
  Value q_negative = b.compare(CompareDirection::kLt, q_bits, b.constant(0, bits, x.type.dims));
  Value signed_zero = b.select(q_negative, b.unary("stablehlo.negate", k(0)), k(0));
  Value r = b.select(b.compare(CompareDirection::kNe, div, k(0)), fl, signed_zero);
  return b.select(b.compare(CompareDirection::kEq, y, k(0)), q, r);
}

V divide(OpContext& c, const std::string& mode) {
  TensorType o = c.out(0);
  if (!mode.empty()) TORCH_CHECK_NOT_IMPLEMENTED(o.dtype != ElementType::kPred, "\"div_", mode, "\" not implemented for 'Bool'");
  if (is_floating(o.dtype) || is_complex(o.dtype)) {
    auto [a, b] = scaled_operands(c, opmath_type(o.dtype));
    Value q = mode == "floor" ? floor_divide_float(c.b, a, b) : c.b.binary("stablehlo.divide", a, b);
    if (mode == "trunc") q = trunc_value(c.b, q);
    return {to_result(c, q)};
  }
  auto [a, b] = operands(c, o.dtype);
  check_integer_divisor(c, b);
  Value q = c.b.binary("stablehlo.divide", a, b);  // integer division truncates
  if (mode == "floor") {
    Value r = c.b.binary("stablehlo.remainder", a, b);
    Value zero = c.b.constant(0, o.dtype, o.dims);
    Value adjust = c.b.binary("stablehlo.and", c.b.compare(CompareDirection::kNe, r, zero),
                              c.b.compare(CompareDirection::kNe, c.b.compare(CompareDirection::kLt, a, zero),
                                          c.b.compare(CompareDirection::kLt, b, zero)));
    q = c.b.select(adjust, c.b.binary("stablehlo.subtract", q, c.b.constant(1, o.dtype, o.dims)), q);
  }
  return {q};
}

// Floor and trunc division of bools: PyTorch has no kernel (raised before the meta kernel's own wording).
ArgumentPrep reject_bool_division(bool always_floor) {
  return [always_floor](std::vector<c10::IValue>& args) {
    if (args.size() < 2) return;
    bool rounding = always_floor || (args.size() > 2 && args[2].isString());
    if (!rounding) return;
    for (size_t i = 0; i < 2; ++i) {
      const c10::IValue& v = args[i];
      bool is_bool = v.isTensor() ? v.toTensor().scalar_type() == at::kBool : v.isBool();
      if (!is_bool) return;
    }
    std::string mode = always_floor ? "floor" : args[2].toStringRef();
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"div_", mode, "\" not implemented for 'Bool'");
  };
}

V div_rule(OpContext& c) {
  // div.out keeps its out tensor at position 2, where the _mode overloads have rounding_mode.
  return divide(c, c.has(2) && c.arg(2).isString() ? c.arg(2).toStringRef() : "");
}

V pow_rule(OpContext& c) {
  TensorType o = c.out(0);
  HloBuilder& b = c.b;
  bool all_bool = o.dtype == ElementType::kPred || (is_bool_arg(c.inspect(0)) && is_bool_arg(c.inspect(1)));
  TORCH_CHECK_NOT_IMPLEMENTED(!all_bool, "\"pow\" not implemented for 'Bool'");
  bool integral = !is_floating(o.dtype) && !is_complex(o.dtype);
  if (c.is_tensor(0) && !c.is_tensor(1)) check_number_arg(c, 1);  // PyTorch converts the exponent to the dtype
  if (integral) {
    if (!c.is_tensor(1)) {
      TORCH_CHECK(c.integer(1) >= 0, "Integers to negative integer powers are not allowed.");
      return {integer_pow_const(b, c.operand(0, o.dtype, o.dims), static_cast<uint64_t>(c.integer(1)))};
    }
    auto [x, e] = operands(c, o.dtype);
    return {integer_pow(b, x, e)};
  }
  ElementType t = opmath_type(o.dtype);
  if (!c.is_tensor(1)) {
    double e = c.scalar(1);
    Value x = opmath_operand(c, 0);
    Value one = b.constant(1, t, o.dims);
    if (e == 1.0) return {to_result(c, x)};
    if (e == 2.0) return {to_result(c, b.binary("stablehlo.multiply", x, x))};
    if (e == 3.0 || e == -2.0) {
      // bfloat16: x * x is rounded before the second step, as PyTorch's vectorized bfloat16 kernel does (its
      // float16 kernel computes both steps in float).
      Value sq = b.binary("stablehlo.multiply", x, x);
      if (o.dtype == ElementType::kBF16) sq = b.convert(to_result(c, sq), t);
      return {to_result(c, e == 3.0 ? b.binary("stablehlo.multiply", sq, x) : b.binary("stablehlo.divide", one, sq))};
    }
    // PyTorch takes the sqrt/rsqrt/reciprocal kernels for these exponents except for float16 (pow(-inf, .5) = inf).
    if (o.dtype != ElementType::kF16) {
      if (e == 0.5) return {to_result(c, b.unary("stablehlo.sqrt", x))};
      if (e == -0.5) return {to_result(c, b.unary("stablehlo.rsqrt", x))};
      if (e == -1.0) return {to_result(c, b.binary("stablehlo.divide", one, x))};
    }
  }
  auto [x, e] = cast_operands(c, t);
  return {to_result(c, b.binary("stablehlo.power", x, e))};
}

V clamp_rule(OpContext& c) {  // a NaN input or bound gives NaN
  reject_bool(c, "clamp");
  check_number_arg(c, 1);
  check_number_arg(c, 2);
  TensorType o = c.out(0);
  Value x = c.operand(0, o.dtype, o.dims);
  if (c.has(1)) x = nan_max(c.b, x, c.operand(1, o.dtype, o.dims));
  if (c.has(2)) x = nan_min(c.b, x, c.operand(2, o.dtype, o.dims));
  return {x};
}

V where_rule(OpContext& c) {
  TensorType o = c.out(0);
  Value cond = c.b.broadcast_to(c.tensor(0), o.dims);
  if (cond.type.dtype != ElementType::kPred) cond = c.b.compare(CompareDirection::kNe, cond, zeros(c.b, cond.type));
  return {c.b.select(cond, c.operand(1, o.dtype, o.dims), c.operand(2, o.dtype, o.dims))};
}

V masked_fill_rule(OpContext& c) {
  check_number_arg(c, 2);
  TensorType o = c.out(0);
  Value mask = c.b.broadcast_to(c.tensor(1), o.dims);
  return {c.b.select(mask, c.operand(2, o.dtype, o.dims), c.operand(0, o.dtype, o.dims))};
}

V fill_rule(OpContext& c) { return {c.operand(1, c.out(0).dtype, c.out(0).dims)}; }

// fill_ (and full, new_full, full_like, which fill) converts its number as CPU's kernel does: checked against the
// tensor's dtype, except for a one-element float16/bfloat16 tensor (CPU's fast path converts without a check).
void check_fill_value(std::vector<c10::IValue>& args) {
  if (args.size() < 2 || !args[0].isTensor() || !args[1].isScalar()) return;
  const at::Tensor& self = args[0].toTensor();
  at::ScalarType t = self.scalar_type();
  if (self.numel() == 1 && (t == at::kHalf || t == at::kBFloat16)) return;
  check_fits(args[1].toScalar(), t);
}
V zero_rule(OpContext& c) { return {zeros(c.b, c.out(0))}; }

V lerp_rule(OpContext& c) {  // as PyTorch: |w| < 0.5 ? self + w (end - self) : end - (end - self) (1 - w)
  require_floating(c, "lerp");
  TensorType o = compute_out(c);
  HloBuilder& b = c.b;
  Value s = c.operand(0, o.dtype, o.dims), e = c.operand(1, o.dtype, o.dims), w = c.operand(2, o.dtype, o.dims);
  Value diff = b.binary("stablehlo.subtract", e, s);
  Value low = b.binary("stablehlo.add", s, b.binary("stablehlo.multiply", w, diff));
  Value high = b.binary("stablehlo.subtract", e,
                        b.binary("stablehlo.multiply", diff, b.binary("stablehlo.subtract", b.constant(1, o.dtype, o.dims), w)));
  Value small = b.compare(CompareDirection::kLt, b.unary("stablehlo.abs", w), b.constant(0.5, o.dtype, o.dims));
  return {to_result(c, b.select(small, low, high))};
}

LoweringRule addc(const std::string& op) {  // self + value * (t1 op t2)
  return [op](OpContext& c) -> V {
    reject_bool(c, op == "stablehlo.multiply" ? "addcmul" : "addcdiv");
    TensorType o = compute_out(c);
    Value s = c.operand(0, o.dtype, o.dims), t1 = c.operand(1, o.dtype, o.dims), t2 = c.operand(2, o.dtype, o.dims);
    Value prod = c.b.binary(op, t1, t2);
    // `value` keeps its full precision in the compute type (PyTorch's CPU kernels read it as their opmath type).
    if (c.has(3) && !c.is_unit(3)) prod = c.b.binary("stablehlo.multiply", prod, c.runtime_operand(3, o.dtype, o.dims));
    return {to_result(c, c.b.binary("stablehlo.add", s, prod))};
  };
}

V trunc_rule(OpContext& c) {
  reject_bool(c, "trunc");
  return {trunc_value(c.b, c.operand(0, c.out(0).dtype, c.out(0).dims))};
}

V reciprocal_rule(OpContext& c) {
  TensorType o = c.out(0);
  return {c.b.binary("stablehlo.divide", c.b.constant(1, o.dtype, o.dims), c.operand(0, o.dtype, o.dims))};
}

V remainder_rule(OpContext& c) {
  reject_bool(c, "remainder");
  auto [a, b] = operands(c, c.out(0).dtype);
  check_integer_divisor(c, b);
  return {python_mod(c.b, a, b)};
}

V logical_not_rule(OpContext& c) { return {c.b.unary("stablehlo.not", as_pred(c, 0))}; }

V bitwise_not_rule(OpContext& c) {
  TensorType o = c.out(0);
  TORCH_CHECK_NOT_IMPLEMENTED(!is_floating(o.dtype) && !is_complex(o.dtype), "\"bitwise_not\" not implemented for '",
                              c10::toString(c.arg(0).toTensor().scalar_type()), "'");
  return {c.b.unary("stablehlo.not", c.operand(0, o.dtype, o.dims))};
}

V isnan_rule(OpContext& c) {
  Value x = c.tensor(0);
  if (!is_floating(x.type.dtype)) return {c.b.constant(0, ElementType::kPred, x.type.dims)};
  return {c.b.compare(CompareDirection::kNe, x, x)};
}

V isinf_rule(OpContext& c) {
  Value x = c.tensor(0);
  if (!is_floating(x.type.dtype)) return {c.b.constant(0, ElementType::kPred, x.type.dims)};
  Value a = c.b.unary("stablehlo.abs", x);
  return {c.b.compare(CompareDirection::kEq, a, c.b.constant(INFINITY, x.type.dtype, x.type.dims))};
}

V isfinite_rule(OpContext& c) {
  Value x = c.tensor(0);
  if (!is_floating(x.type.dtype)) return {c.b.constant(1, ElementType::kPred, x.type.dims)};
  return {c.b.op1("stablehlo.is_finite", {x}, {ElementType::kPred, x.type.dims})};
}

// isposinf / isneginf: equal to +inf / -inf (never true for integers); `sign` picks which.
LoweringRule signed_inf_rule(double sign) {
  return [sign](OpContext& c) -> V {
    Value x = c.tensor(0);
    if (!is_floating(x.type.dtype)) return {c.b.constant(0, ElementType::kPred, x.type.dims)};
    return {c.b.compare(CompareDirection::kEq, x, c.b.constant(sign * INFINITY, x.type.dtype, x.type.dims))};
  };
}

V nan_to_num_rule(OpContext& c) {
  TensorType o = c.out(0);
  Value x = c.operand(0, o.dtype, o.dims);
  if (!is_floating(o.dtype)) return {x};
  double big = o.dtype == ElementType::kF64 ? 1.7976931348623157e308
               : o.dtype == ElementType::kF16 ? 65504.0
               : o.dtype == ElementType::kBF16 ? 3.3895313892515355e38
                                                : 3.4028234663852886e38;
  double nan_v = c.has(1) ? c.scalar(1) : 0.0;
  double pos = c.has(2) ? c.scalar(2) : big;
  double neg = c.has(3) ? c.scalar(3) : -big;
  HloBuilder& b = c.b;
  Value is_nan = b.compare(CompareDirection::kNe, x, x);
  Value r = b.select(is_nan, b.constant(nan_v, o.dtype, o.dims), x);
  r = b.select(b.compare(CompareDirection::kEq, r, b.constant(INFINITY, o.dtype, o.dims)), b.constant(pos, o.dtype, o.dims), r);
  r = b.select(b.compare(CompareDirection::kEq, r, b.constant(-INFINITY, o.dtype, o.dims)), b.constant(neg, o.dtype, o.dims), r);
  return {r};
}

}  // namespace

void add_elementwise_rules(Rows& rows) {
  rows.push_back(promoting({0, 1}, {{"add.Tensor", "add_.Tensor", "add.out", "add.Scalar", "add_.Scalar"}, add_like("stablehlo.add"), add_checks(false)}));
  rows.push_back(promoting({0, 1}, {{"sub.Tensor", "sub_.Tensor", "sub.out", "sub.Scalar", "sub_.Scalar"}, add_like("stablehlo.subtract"), add_checks(true)}));
  rows.push_back({{"rsub.Tensor", "rsub.Scalar"}, [](OpContext& c) -> V {  // other - alpha * self
                    TensorType o = c.out(0);
                    ElementType t = opmath_type(o.dtype);
                    auto [a, b] = cast_operands(c, t);
                    if (c.has(2) && !c.is_unit(2)) a = c.b.binary("stablehlo.multiply", a, scalar_in_result_type(c, 2, t));
                    return {to_result(c, c.b.binary("stablehlo.subtract", b, a))};
                  }, add_checks(true)});
  rows.push_back(promoting({0, 1}, {{"mul.Tensor", "mul_.Tensor", "mul.out", "mul.Scalar", "mul_.Scalar"}, [](OpContext& c) -> V {
                    auto [a, b] = scaled_operands(c, opmath_type(c.out(0).dtype));
                    return {to_result(c, c.b.binary("stablehlo.multiply", a, b))};
                  }}));
  rows.push_back(promoting({0, 1}, {{"div.Tensor", "div_.Tensor", "div.out", "div.Scalar", "div_.Scalar", "div.Tensor_mode",
                   "div_.Tensor_mode", "div.out_mode", "div.Scalar_mode", "div_.Scalar_mode"},
                  div_rule, reject_bool_division(false)}));
  rows.push_back(promoting({0, 1}, {{"maximum", "maximum.out"}, binary_fn(nan_max)}));  // max.other/max.out are composites of these
  rows.push_back(promoting({0, 1}, {{"minimum", "minimum.out"}, binary_fn(nan_min)}));
  rows.push_back(promoting({0, 1}, {{"fmax", "fmax.out"}, binary_fn(fmax_value)}));
  rows.push_back(promoting({0, 1}, {{"fmin", "fmin.out"}, binary_fn(fmin_value)}));
  rows.push_back(promoting({0, 1}, {{"floor_divide", "floor_divide_.Tensor", "floor_divide.out", "floor_divide.Scalar", "floor_divide_.Scalar"},
                  [](OpContext& c) -> V { return divide(c, "floor"); }, reject_bool_division(true)}));
  rows.push_back(promoting({0, 1}, {{"fmod.Tensor", "fmod_.Tensor", "fmod.Scalar", "fmod_.Scalar", "fmod.Tensor_out", "fmod.Scalar_out"},
                  [](OpContext& c) -> V {
                    reject_bool(c, "fmod");
                    auto [a, b] = operands(c, c.out(0).dtype);
                    check_integer_divisor(c, b);
                    return {c.b.binary("stablehlo.remainder", a, b)};
                  }}));
  rows.push_back(promoting({0, 1}, {{"remainder.Tensor", "remainder_.Tensor", "remainder.Scalar", "remainder_.Scalar",
                   "remainder.Tensor_out", "remainder.Scalar_out"},
                  remainder_rule}));
  rows.push_back(promoting({0, 1}, {{"pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out", "pow.Tensor_Tensor", "pow_.Tensor",
                   "pow.Tensor_Tensor_out", "pow.Scalar", "pow.Scalar_out"},
                  pow_rule}));
  rows.push_back(promoting({0, 1}, {{"atan2", "atan2_", "atan2.out"}, binary("stablehlo.atan2")}));

  rows.push_back({{"neg", "neg_", "neg.out"}, unary("stablehlo.negate")});
  rows.push_back({{"abs", "abs_", "abs.out"}, abs_rule});
  rows.push_back({{"sign", "sign_", "sign.out", "sgn", "sgn_", "sgn.out"}, sign_rule});
  rows.push_back(promoting({0}, {{"exp", "exp_", "exp.out"}, unary("stablehlo.exponential")}));
  rows.push_back(promoting({0}, {{"expm1", "expm1_", "expm1.out"}, unary("stablehlo.exponential_minus_one")}));
  rows.push_back(promoting({0}, {{"log", "log_", "log.out"}, unary("stablehlo.log")}));
  rows.push_back(promoting({0}, {{"log1p", "log1p_", "log1p.out"}, unary("stablehlo.log_plus_one")}));
  rows.push_back(promoting({0}, {{"sqrt", "sqrt_", "sqrt.out"}, unary("stablehlo.sqrt")}));
  rows.push_back(promoting({0}, {{"rsqrt", "rsqrt_", "rsqrt.out"}, unary("stablehlo.rsqrt")}));
  rows.push_back(promoting({0}, {{"sin", "sin_", "sin.out"}, unary("stablehlo.sine")}));
  rows.push_back(promoting({0}, {{"cos", "cos_", "cos.out"}, unary("stablehlo.cosine")}));
  rows.push_back(promoting({0}, {{"tan", "tan_", "tan.out"}, unary("stablehlo.tan")}));
  rows.push_back(promoting({0}, {{"tanh", "tanh_", "tanh.out"}, unary("stablehlo.tanh")}));
  rows.push_back(promoting({0}, {{"sigmoid", "sigmoid_", "sigmoid.out"}, unary("stablehlo.logistic")}));
  rows.push_back(promoting({0}, {{"erf", "erf_", "erf.out"}, [](OpContext& c) -> V { return {erf_value(c.b, c.operand(0, c.out(0).dtype, c.out(0).dims))}; }}));
  rows.push_back({{"floor", "floor_", "floor.out"}, rounding("stablehlo.floor", "floor")});
  rows.push_back({{"ceil", "ceil_", "ceil.out"}, rounding("stablehlo.ceil", "ceil")});
  rows.push_back({{"round", "round_", "round.out"}, rounding("stablehlo.round_nearest_even", "round")});
  rows.push_back({{"round.decimals", "round_.decimals", "round.decimals_out"}, round_decimals_rule});
  rows.push_back({{"trunc", "trunc_", "trunc.out"}, trunc_rule});
  rows.push_back(promoting({0}, {{"reciprocal", "reciprocal_", "reciprocal.out"}, reciprocal_rule}));

  rows.push_back({{"eq.Tensor", "eq_.Tensor", "eq.Tensor_out", "eq.Scalar", "eq_.Scalar", "eq.Scalar_out"}, compare(CompareDirection::kEq)});
  rows.push_back({{"ne.Tensor", "ne_.Tensor", "ne.Tensor_out", "ne.Scalar", "ne_.Scalar", "ne.Scalar_out"}, compare(CompareDirection::kNe)});
  rows.push_back({{"lt.Tensor", "lt_.Tensor", "lt.Tensor_out", "lt.Scalar", "lt_.Scalar", "lt.Scalar_out"}, compare(CompareDirection::kLt)});
  rows.push_back({{"le.Tensor", "le_.Tensor", "le.Tensor_out", "le.Scalar", "le_.Scalar", "le.Scalar_out"}, compare(CompareDirection::kLe)});
  rows.push_back({{"gt.Tensor", "gt_.Tensor", "gt.Tensor_out", "gt.Scalar", "gt_.Scalar", "gt.Scalar_out"}, compare(CompareDirection::kGt)});
  rows.push_back({{"ge.Tensor", "ge_.Tensor", "ge.Tensor_out", "ge.Scalar", "ge_.Scalar", "ge.Scalar_out"}, compare(CompareDirection::kGe)});
  rows.push_back({{"logical_and", "logical_and_", "logical_and.out"}, logical("stablehlo.and")});
  rows.push_back({{"logical_or", "logical_or_", "logical_or.out"}, logical("stablehlo.or")});
  rows.push_back({{"logical_xor", "logical_xor_", "logical_xor.out"}, logical("stablehlo.xor")});
  rows.push_back({{"logical_not", "logical_not_", "logical_not.out"}, logical_not_rule});
  rows.push_back({{"bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out", "bitwise_and.Scalar",
                   "bitwise_and_.Scalar"},
                  bitwise("stablehlo.and", "bitwise_and")});
  rows.push_back({{"bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out", "bitwise_or.Scalar",
                   "bitwise_or_.Scalar"},
                  bitwise("stablehlo.or", "bitwise_or")});
  rows.push_back({{"bitwise_left_shift.Tensor", "bitwise_left_shift.Tensor_Scalar", "bitwise_left_shift.Scalar_Tensor"},
                  shift(true, "lshift_cpu")});
  rows.push_back({{"bitwise_right_shift.Tensor", "bitwise_right_shift.Tensor_Scalar",
                   "bitwise_right_shift.Scalar_Tensor"},
                  shift(false, "rshift_cpu")});
  rows.push_back({{"__lshift__.Tensor", "__lshift__.Scalar", "__ilshift__.Tensor", "__ilshift__.Scalar"},
                  shift(true, "lshift_cpu")});
  rows.push_back({{"__rshift__.Tensor", "__rshift__.Scalar", "__irshift__.Tensor", "__irshift__.Scalar"},
                  shift(false, "rshift_cpu")});
  rows.push_back({{"bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out", "bitwise_xor.Scalar",
                   "bitwise_xor_.Scalar"},
                  bitwise("stablehlo.xor", "bitwise_xor")});
  rows.push_back({{"bitwise_not", "bitwise_not_", "bitwise_not.out"}, bitwise_not_rule});
  rows.push_back({{"isnan"}, isnan_rule});
  rows.push_back({{"isinf"}, isinf_rule});
  rows.push_back({{"isfinite"}, isfinite_rule});
  rows.push_back({{"isposinf", "isposinf.out"}, signed_inf_rule(1.0)});
  rows.push_back({{"isneginf", "isneginf.out"}, signed_inf_rule(-1.0)});
  rows.push_back({{"nan_to_num", "nan_to_num_", "nan_to_num.out"}, nan_to_num_rule});

  rows.push_back(promoting({1, 2}, {{"where.self", "where.self_out"}, where_rule}));
  rows.push_back(promoting({0, 1, 2}, {{"clamp", "clamp_", "clamp.out", "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out"}, clamp_rule}));
  rows.push_back({{"clamp_min", "clamp_min_", "clamp_min.out", "clamp_min.Tensor", "clamp_min_.Tensor"}, [](OpContext& c) -> V {
                    if (!c.is_tensor(1)) reject_bool(c, "clamp_min");  // CPU: bool tensors with a tensor bound only
                    check_number_arg(c, 1);
                    return binary_fn(nan_max)(c);
                  }});
  rows.push_back({{"clamp_max", "clamp_max_", "clamp_max.out", "clamp_max.Tensor", "clamp_max_.Tensor"}, [](OpContext& c) -> V {
                    if (!c.is_tensor(1)) reject_bool(c, "clamp_max");
                    check_number_arg(c, 1);
                    return binary_fn(nan_min)(c);
                  }});
  rows.push_back({{"masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Tensor", "masked_fill_.Tensor"}, masked_fill_rule});
  rows.push_back({{"fill_.Scalar", "fill_.Tensor", "fill.Scalar", "fill.Tensor"}, fill_rule, check_fill_value});
  rows.push_back({{"zero_"}, zero_rule});
  rows.push_back(promoting({0, 1}, {{"lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out", "lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out"}, lerp_rule}));
  rows.push_back(promoting({0, 1, 2}, {{"addcmul", "addcmul_", "addcmul.out"}, addc("stablehlo.multiply")}));
  rows.push_back(promoting({0, 1, 2}, {{"addcdiv", "addcdiv_", "addcdiv.out"}, addc("stablehlo.divide")}));
}

void check_fits(const c10::Scalar& v, at::ScalarType t) {
  if (v.isComplex() || t == at::kBool || at::isComplexType(t)) return;
  double d = v.toDouble();
  bool overflow = false;
  if (at::isFloatingType(t)) {
    double max = t == at::kHalf ? 65504.0 : t == at::kBFloat16 ? 3.3895313892515355e38
                 : t == at::kFloat ? 3.4028234663852886e38 : t == at::kFloat8_e4m3fn ? 448.0
                 : t == at::kFloat8_e4m3fnuz ? 240.0
                 : (t == at::kFloat8_e5m2 || t == at::kFloat8_e5m2fnuz) ? 57344.0 : std::numeric_limits<double>::max();
    // Only e5m2 of the float8 types has infinities: CPU refuses an infinite number for the others.
    bool has_inf = t != at::kFloat8_e4m3fn && t != at::kFloat8_e4m3fnuz && t != at::kFloat8_e5m2fnuz;
    overflow = std::isfinite(d) ? std::fabs(d) > max : std::isinf(d) && !has_inf;
  } else if (v.isIntegral(false)) {
    int64_t i = v.toLong();
    switch (t) {
      case at::kByte: overflow = i < -255 || i > 255; break;  // negative numbers may wrap (c10::overflows)
      case at::kChar: overflow = i < -128 || i > 127; break;
      case at::kShort: overflow = i < -32768 || i > 32767; break;
      case at::kInt: overflow = i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max(); break;
      default: break;
    }
  } else if (v.isFloatingPoint()) {
    double lo = t == at::kByte ? 0.0 : t == at::kChar ? -128.0 : t == at::kShort ? -32768.0
                : t == at::kInt ? -2147483648.0 : -9223372036854775808.0;
    double hi = t == at::kByte ? 255.0 : t == at::kChar ? 127.0 : t == at::kShort ? 32767.0
                : t == at::kInt ? 2147483647.0 : 9223372036854775807.0;
    overflow = !(d >= lo && d <= hi);  // NaN and infinities included
  }
  TORCH_CHECK(!overflow, "value cannot be converted to type ", c_type_name(t), " without overflow");
}

}  // namespace torch_tpu
