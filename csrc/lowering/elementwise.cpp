// Elementwise ops: arithmetic, unary math, comparisons, logic, where/clamp/fill, activations and their backwards.
// Every rule computes in the result dtype PyTorch's meta kernel chose and broadcasts operands to the result shape.
#include <cmath>

#include "lowering/numerics.h"
#include "lowering/op_context.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

// Both operands (tensor or scalar) in dtype `t`, broadcast to result 0's shape.
std::pair<Value, Value> operands(OpContext& c, ElementType t, size_t i = 0, size_t j = 1) {
  const auto& dims = c.out(0).dims;
  return {c.operand(i, t, dims), c.operand(j, t, dims)};
}

LoweringRule binary(const std::string& op) {
  return [op](OpContext& c) -> V {
    auto [a, b] = operands(c, c.out(0).dtype);
    return {c.b.binary(op, a, b)};
  };
}

// PyTorch's "not implemented for 'Int'" error for rules that only exist for floating types.
void require_floating(OpContext& c, const char* op) {
  if (is_floating(c.out(0).dtype) || is_complex(c.out(0).dtype)) return;
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", op, "\" not implemented for '", c10::toString(c.arg(0).toTensor().scalar_type()),
                              "'");
}

void reject_bool(OpContext& c, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(c.out(0).dtype != ElementType::kPred, "\"", op, "\" not implemented for 'Bool'");
}

// Argument i in the type the op computes in (float32 for float16/bfloat16 results), broadcast to the result.
Value opmath_operand(OpContext& c, size_t i) {
  return c.operand(i, opmath_type(c.out(0).dtype), c.out(0).dims);
}

Value to_result(OpContext& c, const Value& v) { return c.b.convert(v, c.out(0).dtype); }

// The result type with the dtype the op computes in.
TensorType compute_out(OpContext& c) { return {opmath_type(c.out(0).dtype), c.out(0).dims}; }

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
  return c.b.convert(c.runtime_operand(i, c.out(0).dtype, c.out(0).dims), t);
}

// a + alpha * b (alpha is argument 2 when present).
LoweringRule add_like(const std::string& op) {
  return [op](OpContext& c) -> V {
    TensorType o = c.out(0);
    if (c.has(2) && !is_floating(o.dtype) && !is_complex(o.dtype)) {
      TORCH_CHECK(!c.arg(2).toScalar().isFloatingPoint(),
                  "For integral input tensors, argument alpha must not be a floating point number.");
    }
    ElementType t = opmath_type(o.dtype);
    auto [a, b] = operands(c, t);
    if (c.has(2) && c.scalar(2) != 1.0) b = c.b.binary("stablehlo.multiply", b, scalar_in_result_type(c, 2, t));
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

LoweringRule logical(const std::string& op) {
  return [op](OpContext& c) -> V { return {c.b.binary(op, as_pred(c, 0), as_pred(c, 1))}; };
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
    auto [a, b] = operands(c, opmath_type(o.dtype));
    Value q = mode == "floor" ? floor_divide_float(c.b, a, b) : c.b.binary("stablehlo.divide", a, b);
    if (mode == "trunc") q = trunc_value(c.b, q);
    return {to_result(c, q)};
  }
  auto [a, b] = operands(c, o.dtype);
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
  bool all_bool = o.dtype == ElementType::kPred;
  for (size_t i = 0; i < 2; ++i) all_bool = all_bool || (c.is_tensor(i) && c.arg(i).toTensor().scalar_type() == at::kBool && c.is_tensor(1 - i) && c.arg(1 - i).toTensor().scalar_type() == at::kBool);
  TORCH_CHECK_NOT_IMPLEMENTED(!all_bool, "\"pow\" not implemented for 'Bool'");
  bool integral = !is_floating(o.dtype) && !is_complex(o.dtype);
  if (integral) {
    if (!c.is_tensor(1)) {
      TORCH_CHECK(c.integer(1) >= 0, "Integers to negative integer powers are not allowed.");
      // PyTorch converts the exponent to the tensor's dtype first.
      at::ScalarType st = c.arg(0).toTensor().scalar_type();
      double e = c.scalar(1);
      TORCH_CHECK(o.dtype == ElementType::kS64 || (e >= lowest(o.dtype) && e <= highest(o.dtype)),
                  "value cannot be converted to type ", st == at::kByte ? "uint8_t" : st == at::kChar ? "int8_t"
                  : st == at::kShort ? "int16_t" : "int32_t", " without overflow");
      return {integer_pow_const(b, c.operand(0, o.dtype, o.dims), static_cast<uint64_t>(c.integer(1)))};
    }
    auto [x, e] = operands(c, o.dtype);
    return {integer_pow(b, x, e)};
  }
  ElementType t = opmath_type(o.dtype);
  if (!c.is_tensor(1)) {
    double e = c.scalar(1);
    Value x = c.operand(0, t, o.dims);
    Value one = b.constant(1, t, o.dims);
    if (e == 1.0) return {to_result(c, x)};
    if (e == 2.0) return {to_result(c, b.binary("stablehlo.multiply", x, x))};
    if (e == 3.0) return {to_result(c, b.binary("stablehlo.multiply", b.binary("stablehlo.multiply", x, x), x))};
    if (e == -2.0) return {to_result(c, b.binary("stablehlo.divide", one, b.binary("stablehlo.multiply", x, x)))};
    // PyTorch takes the sqrt/rsqrt/reciprocal kernels for these exponents except for float16 (pow(-inf, .5) = inf).
    if (o.dtype != ElementType::kF16) {
      if (e == 0.5) return {to_result(c, b.unary("stablehlo.sqrt", x))};
      if (e == -0.5) return {to_result(c, b.unary("stablehlo.rsqrt", x))};
      if (e == -1.0) return {to_result(c, b.binary("stablehlo.divide", one, x))};
    }
  }
  auto [x, e] = operands(c, t);
  return {to_result(c, b.binary("stablehlo.power", x, e))};
}

V clamp_rule(OpContext& c) {  // a NaN input or bound gives NaN
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
  TensorType o = c.out(0);
  Value mask = c.b.broadcast_to(c.tensor(1), o.dims);
  return {c.b.select(mask, c.operand(2, o.dtype, o.dims), c.operand(0, o.dtype, o.dims))};
}

V fill_rule(OpContext& c) { return {c.operand(1, c.out(0).dtype, c.out(0).dims)}; }
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
    if (c.has(3) && c.scalar(3) != 1.0) prod = c.b.binary("stablehlo.multiply", prod, scalar_in_result_type(c, 3, o.dtype));
    return {to_result(c, c.b.binary("stablehlo.add", s, prod))};
  };
}

Value sigmoid(HloBuilder& b, const Value& x) { return b.unary("stablehlo.logistic", x); }

Value gelu_value(HloBuilder& b, const Value& x, bool tanh_approx) {
  const TensorType& t = x.type;
  Value half = b.constant(0.5, t.dtype, t.dims);
  Value one = b.constant(1, t.dtype, t.dims);
  Value inner;
  if (tanh_approx) {
    Value x3 = b.binary("stablehlo.multiply", b.binary("stablehlo.multiply", x, x), x);
    Value poly = b.binary("stablehlo.add", x, b.binary("stablehlo.multiply", b.constant(0.044715, t.dtype, t.dims), x3));
    inner = b.unary("stablehlo.tanh", b.binary("stablehlo.multiply", b.constant(std::sqrt(2.0 / M_PI), t.dtype, t.dims), poly));
  } else {
    inner = erf_value(b, b.binary("stablehlo.multiply", x, b.constant(M_SQRT1_2, t.dtype, t.dims)));
  }
  return b.binary("stablehlo.multiply", b.binary("stablehlo.multiply", half, x), b.binary("stablehlo.add", one, inner));
}

bool gelu_tanh(OpContext& c, size_t i) { return c.has(i) && c.arg(i).toStringRef() == "tanh"; }

V gelu_rule(OpContext& c) {
  require_floating(c, "gelu");
  return {to_result(c, gelu_value(c.b, opmath_operand(c, 0), gelu_tanh(c, 1)))};
}

V gelu_backward_rule(OpContext& c) {  // gelu_backward(grad, self, approximate)
  require_floating(c, "gelu_backward");
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  HloBuilder& b = c.b;
  auto k = [&](double v) { return b.constant(v, o.dtype, o.dims); };
  Value d;
  if (gelu_tanh(c, 2)) {
    Value x2 = b.binary("stablehlo.multiply", x, x);
    Value inner = b.binary("stablehlo.multiply", k(std::sqrt(2.0 / M_PI)),
                           b.binary("stablehlo.add", x, b.binary("stablehlo.multiply", k(0.044715), b.binary("stablehlo.multiply", x2, x))));
    Value t = b.unary("stablehlo.tanh", inner);
    Value dinner = b.binary("stablehlo.multiply", k(std::sqrt(2.0 / M_PI)),
                            b.binary("stablehlo.add", k(1), b.binary("stablehlo.multiply", k(3 * 0.044715), x2)));
    Value sech2 = b.binary("stablehlo.subtract", k(1), b.binary("stablehlo.multiply", t, t));
    d = b.binary("stablehlo.add", b.binary("stablehlo.multiply", k(0.5), b.binary("stablehlo.add", k(1), t)),
                 b.binary("stablehlo.multiply", b.binary("stablehlo.multiply", k(0.5), x), b.binary("stablehlo.multiply", sech2, dinner)));
  } else {
    Value cdf = b.binary("stablehlo.multiply", k(0.5),
                         b.binary("stablehlo.add", k(1), erf_value(b, b.binary("stablehlo.multiply", x, k(M_SQRT1_2)))));
    Value pdf = b.binary("stablehlo.multiply", k(0.5 * M_2_SQRTPI * M_SQRT1_2),
                         b.unary("stablehlo.exponential", b.binary("stablehlo.multiply", k(-0.5), b.binary("stablehlo.multiply", x, x))));
    d = b.binary("stablehlo.add", cdf, b.binary("stablehlo.multiply", x, pdf));
  }
  return {to_result(c, b.binary("stablehlo.multiply", g, d))};
}

V silu_rule(OpContext& c) {
  require_floating(c, "silu");
  Value x = opmath_operand(c, 0);
  return {to_result(c, c.b.binary("stablehlo.multiply", x, sigmoid(c.b, x)))};
}

V silu_backward_rule(OpContext& c) {  // g * s * (1 + x * (1 - s))
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value s = sigmoid(c.b, x);
  Value one = c.b.constant(1, o.dtype, o.dims);
  Value d = c.b.binary("stablehlo.multiply", s,
                       c.b.binary("stablehlo.add", one, c.b.binary("stablehlo.multiply", x, c.b.binary("stablehlo.subtract", one, s))));
  return {to_result(c, c.b.binary("stablehlo.multiply", g, d))};
}

V sigmoid_backward_rule(OpContext& c) {  // g * y * (1 - y), y = sigmoid output
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), y = c.operand(1, o.dtype, o.dims);
  Value one_minus = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), y);
  return {to_result(c, c.b.binary("stablehlo.multiply", g, c.b.binary("stablehlo.multiply", y, one_minus)))};
}

V tanh_backward_rule(OpContext& c) {  // g * (1 - y^2)
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), y = c.operand(1, o.dtype, o.dims);
  Value d = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), c.b.binary("stablehlo.multiply", y, y));
  return {to_result(c, c.b.binary("stablehlo.multiply", g, d))};
}

V threshold_backward_rule(OpContext& c) {  // grad where self > threshold else 0
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  // As PyTorch: x <= threshold ? 0 : grad, so a NaN input passes its gradient through.
  Value drop = c.b.compare(CompareDirection::kLe, x, c.operand(2, o.dtype, o.dims));
  return {c.b.select(drop, zeros(c.b, o), g)};
}

V relu_rule(OpContext& c) {
  TensorType o = c.out(0);
  TORCH_CHECK(o.dtype != ElementType::kPred, "Boolean inputs not supported for relu");
  return {nan_max(c.b, c.operand(0, o.dtype, o.dims), zeros(c.b, o))};
}

V leaky_relu_rule(OpContext& c) {
  require_floating(c, "leaky_relu");
  TensorType o = c.out(0);
  Value x = c.operand(0, o.dtype, o.dims);
  double slope = c.has(1) ? c.scalar(1) : 0.01;
  Value pos = c.b.compare(CompareDirection::kGt, x, zeros(c.b, o));
  return {c.b.select(pos, x, c.b.binary("stablehlo.multiply", x, c.b.constant(slope, o.dtype, o.dims)))};
}

V leaky_relu_backward_rule(OpContext& c) {  // (grad, self, negative_slope, self_is_result)
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value pos = c.b.compare(CompareDirection::kGt, x, zeros(c.b, o));
  return {c.b.select(pos, g, c.b.binary("stablehlo.multiply", g, c.b.constant(c.scalar(2), o.dtype, o.dims)))};
}

V hardtanh_backward_rule(OpContext& c) {  // (grad, self, min_val, max_val)
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  // As PyTorch: x <= min || x >= max ? 0 : grad (NaN passes the gradient through).
  Value outside = c.b.binary("stablehlo.or", c.b.compare(CompareDirection::kLe, x, c.operand(2, o.dtype, o.dims)),
                             c.b.compare(CompareDirection::kGe, x, c.operand(3, o.dtype, o.dims)));
  return {c.b.select(outside, zeros(c.b, o), g)};
}

V logit_rule(OpContext& c) {  // log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given
  TensorType o = compute_out(c);
  Value x = c.operand(0, o.dtype, o.dims);
  if (c.has(1)) {
    double eps = c.scalar(1);
    x = c.b.binary("stablehlo.maximum", x, c.b.constant(eps, o.dtype, o.dims));
    x = c.b.binary("stablehlo.minimum", x, c.b.constant(1 - eps, o.dtype, o.dims));
  }
  Value one_minus = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), x);
  return {to_result(c, c.b.unary("stablehlo.log", c.b.binary("stablehlo.divide", x, one_minus)))};
}

V logit_backward_rule(OpContext& c) {  // (grad, self, eps?): grad / (x (1 - x)), 0 outside [eps, 1 - eps]
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value one_minus = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), x);
  Value d = c.b.binary("stablehlo.divide", g, c.b.binary("stablehlo.multiply", x, one_minus));
  // Outside [lo, hi] PyTorch gives 0 with eps and NaN without (where lo, hi = 0, 1); a NaN x stays NaN.
  double eps = c.has(2) ? c.scalar(2) : 0.0;
  Value outside = c.b.binary("stablehlo.or", c.b.compare(CompareDirection::kLt, x, c.b.constant(eps, o.dtype, o.dims)),
                             c.b.compare(CompareDirection::kGt, x, c.b.constant(1 - eps, o.dtype, o.dims)));
  if (!c.has(2)) {  // at 0 and 1 (-0. included) PyTorch gives grad * inf
    Value edge = c.b.binary("stablehlo.or", c.b.compare(CompareDirection::kEq, x, zeros(c.b, o)),
                            c.b.compare(CompareDirection::kEq, x, c.b.constant(1, o.dtype, o.dims)));
    d = c.b.select(edge, c.b.binary("stablehlo.multiply", g, c.b.constant(INFINITY, o.dtype, o.dims)), d);
  }
  return {to_result(c, c.b.select(outside, c.has(2) ? zeros(c.b, o) : c.b.constant(NAN, o.dtype, o.dims), d))};
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

V hardtanh_rule(OpContext& c) {
  TensorType o = c.out(0);
  Value x = c.operand(0, o.dtype, o.dims);
  x = nan_max(c.b, x, c.b.constant(c.has(1) ? c.scalar(1) : -1.0, o.dtype, o.dims));
  return {nan_min(c.b, x, c.b.constant(c.has(2) ? c.scalar(2) : 1.0, o.dtype, o.dims))};
}

V softplus_rule(OpContext& c) {  // log1p(exp(beta x)) / beta, linear above threshold
  require_floating(c, "softplus");
  TensorType o = compute_out(c);
  HloBuilder& b = c.b;
  Value x = c.operand(0, o.dtype, o.dims);
  double beta = c.has(1) ? c.scalar(1) : 1.0, threshold = c.has(2) ? c.scalar(2) : 20.0;
  Value bx = b.binary("stablehlo.multiply", x, b.constant(beta, o.dtype, o.dims));
  Value soft = b.binary("stablehlo.divide", b.unary("stablehlo.log_plus_one", b.unary("stablehlo.exponential", bx)),
                        b.constant(beta, o.dtype, o.dims));
  return {to_result(c, b.select(b.compare(CompareDirection::kGt, bx, b.constant(threshold, o.dtype, o.dims)), x, soft))};
}

}  // namespace

void add_elementwise_rules(Rows& rows) {
  rows.push_back({{"add.Tensor", "add_.Tensor", "add.out", "add.Scalar", "add_.Scalar"}, add_like("stablehlo.add")});
  rows.push_back({{"sub.Tensor", "sub_.Tensor", "sub.out", "sub.Scalar", "sub_.Scalar"}, add_like("stablehlo.subtract")});
  rows.push_back({{"rsub.Tensor", "rsub.Scalar"}, [](OpContext& c) -> V {
                    TensorType o = c.out(0);
                    auto [a, b] = operands(c, o.dtype);
                    if (c.has(2) && c.scalar(2) != 1.0) a = c.b.binary("stablehlo.multiply", a, c.runtime_operand(2, o.dtype, o.dims));
                    return {c.b.binary("stablehlo.subtract", b, a)};
                  }});
  rows.push_back({{"mul.Tensor", "mul_.Tensor", "mul.out", "mul.Scalar", "mul_.Scalar"}, binary("stablehlo.multiply")});
  rows.push_back({{"div.Tensor", "div_.Tensor", "div.out", "div.Scalar", "div_.Scalar", "div.Tensor_mode",
                   "div_.Tensor_mode", "div.out_mode", "div.Scalar_mode", "div_.Scalar_mode"},
                  div_rule, reject_bool_division(false)});
  rows.push_back({{"maximum", "maximum.out", "max.other", "max.out"}, binary_fn(nan_max)});
  rows.push_back({{"minimum", "minimum.out", "min.other", "min.out"}, binary_fn(nan_min)});
  rows.push_back({{"fmax", "fmax.out"}, binary_fn(fmax_value)});
  rows.push_back({{"fmin", "fmin.out"}, binary_fn(fmin_value)});
  rows.push_back({{"floor_divide", "floor_divide_.Tensor", "floor_divide.out", "floor_divide.Scalar", "floor_divide_.Scalar"},
                  [](OpContext& c) -> V { return divide(c, "floor"); }, reject_bool_division(true)});
  rows.push_back({{"fmod.Tensor", "fmod_.Tensor", "fmod.Scalar", "fmod_.Scalar", "fmod.Tensor_out", "fmod.Scalar_out"},
                  [](OpContext& c) -> V {
                    reject_bool(c, "fmod");
                    auto [a, b] = operands(c, c.out(0).dtype);
                    return {c.b.binary("stablehlo.remainder", a, b)};
                  }});
  rows.push_back({{"remainder.Tensor", "remainder_.Tensor", "remainder.Scalar", "remainder_.Scalar",
                   "remainder.Tensor_out", "remainder.Scalar_out"},
                  remainder_rule});
  rows.push_back({{"pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out", "pow.Tensor_Tensor", "pow_.Tensor",
                   "pow.Tensor_Tensor_out", "pow.Scalar", "pow.Scalar_out"},
                  pow_rule});
  rows.push_back({{"atan2", "atan2_", "atan2.out"}, binary("stablehlo.atan2")});

  rows.push_back({{"neg", "neg_", "neg.out"}, unary("stablehlo.negate")});
  rows.push_back({{"abs", "abs_", "abs.out"}, abs_rule});
  rows.push_back({{"sign", "sign_", "sign.out", "sgn", "sgn_", "sgn.out"}, sign_rule});
  rows.push_back({{"exp", "exp_", "exp.out"}, unary("stablehlo.exponential")});
  rows.push_back({{"expm1", "expm1_", "expm1.out"}, unary("stablehlo.exponential_minus_one")});
  rows.push_back({{"log", "log_", "log.out"}, unary("stablehlo.log")});
  rows.push_back({{"log1p", "log1p_", "log1p.out"}, unary("stablehlo.log_plus_one")});
  rows.push_back({{"sqrt", "sqrt_", "sqrt.out"}, unary("stablehlo.sqrt")});
  rows.push_back({{"rsqrt", "rsqrt_", "rsqrt.out"}, unary("stablehlo.rsqrt")});
  rows.push_back({{"sin", "sin_", "sin.out"}, unary("stablehlo.sine")});
  rows.push_back({{"cos", "cos_", "cos.out"}, unary("stablehlo.cosine")});
  rows.push_back({{"tan", "tan_", "tan.out"}, unary("stablehlo.tan")});
  rows.push_back({{"tanh", "tanh_", "tanh.out"}, unary("stablehlo.tanh")});
  rows.push_back({{"sigmoid", "sigmoid_", "sigmoid.out"}, unary("stablehlo.logistic")});
  rows.push_back({{"erf", "erf_", "erf.out"}, [](OpContext& c) -> V { return {erf_value(c.b, c.operand(0, c.out(0).dtype, c.out(0).dims))}; }});
  rows.push_back({{"logit", "logit_", "logit.out"}, logit_rule});
  rows.push_back({{"logit_backward", "logit_backward.grad_input"}, logit_backward_rule});
  rows.push_back({{"floor", "floor_", "floor.out"}, rounding("stablehlo.floor", "floor")});
  rows.push_back({{"ceil", "ceil_", "ceil.out"}, rounding("stablehlo.ceil", "ceil")});
  rows.push_back({{"round", "round_", "round.out"}, rounding("stablehlo.round_nearest_even", "round")});
  rows.push_back({{"round.decimals", "round_.decimals", "round.decimals_out"}, round_decimals_rule});
  rows.push_back({{"trunc", "trunc_", "trunc.out"}, trunc_rule});
  rows.push_back({{"reciprocal", "reciprocal_", "reciprocal.out"}, reciprocal_rule});
  rows.push_back({{"relu", "relu_"}, relu_rule});
  rows.push_back({{"leaky_relu", "leaky_relu_", "leaky_relu.out"}, leaky_relu_rule});
  rows.push_back({{"leaky_relu_backward", "leaky_relu_backward.grad_input"}, leaky_relu_backward_rule});
  rows.push_back({{"hardtanh", "hardtanh_", "hardtanh.out"}, hardtanh_rule});
  rows.push_back({{"hardtanh_backward", "hardtanh_backward.grad_input"}, hardtanh_backward_rule});
  rows.push_back({{"softplus", "softplus.out"}, softplus_rule});
  rows.push_back({{"gelu", "gelu_", "gelu.out"}, gelu_rule});
  rows.push_back({{"gelu_backward", "gelu_backward.grad_input"}, gelu_backward_rule});
  rows.push_back({{"silu", "silu_", "silu.out"}, silu_rule});
  rows.push_back({{"silu_backward", "silu_backward.grad_input"}, silu_backward_rule});
  rows.push_back({{"sigmoid_backward", "sigmoid_backward.grad_input"}, sigmoid_backward_rule});
  rows.push_back({{"tanh_backward", "tanh_backward.grad_input"}, tanh_backward_rule});
  rows.push_back({{"threshold_backward", "threshold_backward.grad_input"}, threshold_backward_rule});
  rows.push_back({{"threshold", "threshold_", "threshold.out"}, [](OpContext& c) -> V {  // x <= threshold ? value : x
                    TensorType o = c.out(0);
                    Value x = c.operand(0, o.dtype, o.dims);
                    Value drop = c.b.compare(CompareDirection::kLe, x, c.operand(1, o.dtype, o.dims));
                    return {c.b.select(drop, c.operand(2, o.dtype, o.dims), x)};
                  }});

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

  rows.push_back({{"where.self", "where.self_out"}, where_rule});
  rows.push_back({{"clamp", "clamp_", "clamp.out", "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out"}, clamp_rule});
  rows.push_back({{"clamp_min", "clamp_min_", "clamp_min.out", "clamp_min.Tensor", "clamp_min_.Tensor"}, binary_fn(nan_max)});
  rows.push_back({{"clamp_max", "clamp_max_", "clamp_max.out", "clamp_max.Tensor", "clamp_max_.Tensor"}, binary_fn(nan_min)});
  rows.push_back({{"masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Tensor", "masked_fill_.Tensor"}, masked_fill_rule});
  rows.push_back({{"fill_.Scalar", "fill_.Tensor", "fill.Scalar", "fill.Tensor"}, fill_rule});
  rows.push_back({{"zero_"}, zero_rule});
  rows.push_back({{"lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out", "lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out"}, lerp_rule});
  rows.push_back({{"addcmul", "addcmul_", "addcmul.out"}, addc("stablehlo.multiply")});
  rows.push_back({{"addcdiv", "addcdiv_", "addcdiv.out"}, addc("stablehlo.divide")});
}

}  // namespace torch_tpu
