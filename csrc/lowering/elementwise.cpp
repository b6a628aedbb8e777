// Elementwise ops: arithmetic, unary math, comparisons, logic, where/clamp/fill, activations and their backwards.
// Every rule computes in the result dtype PyTorch's meta kernel chose and broadcasts operands to the result shape.
#include <cmath>

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

LoweringRule unary(const std::string& op) {
  return [op](OpContext& c) -> V { return {c.b.unary(op, c.operand(0, c.out(0).dtype, c.out(0).dims))}; };
}

// a + alpha * b (alpha is argument 2 when present).
LoweringRule add_like(const std::string& op) {
  return [op](OpContext& c) -> V {
    TensorType o = c.out(0);
    auto [a, b] = operands(c, o.dtype);
    if (c.has(2) && c.scalar(2) != 1.0) b = c.b.binary("stablehlo.multiply", b, c.runtime_operand(2, o.dtype, o.dims));
    return {c.b.binary(op, a, b)};
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

LoweringRule logical(const std::string& op) {
  return [op](OpContext& c) -> V { return {c.b.binary(op, as_pred(c, 0), as_pred(c, 1))}; };
}

Value floor_value(HloBuilder& b, const Value& v) {
  return is_floating(v.type.dtype) ? b.unary("stablehlo.floor", v) : v;
}

Value trunc_value(HloBuilder& b, const Value& v) {
  if (!is_floating(v.type.dtype)) return v;
  return b.binary("stablehlo.multiply", b.unary("stablehlo.sign", v), b.unary("stablehlo.floor", b.unary("stablehlo.abs", v)));
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

V div_rule(OpContext& c) {
  TensorType o = c.out(0);
  std::string mode = c.has(2) ? c.arg(2).toStringRef() : "";
  auto [a, b] = operands(c, o.dtype);
  if (mode.empty() || is_floating(o.dtype)) {
    Value q = c.b.binary("stablehlo.divide", a, b);
    if (mode == "trunc") q = trunc_value(c.b, q);
    if (mode == "floor") q = floor_value(c.b, q);
    return {q};
  }
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

V pow_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (!c.is_tensor(1)) {
    double e = c.scalar(1);
    Value x = c.operand(0, o.dtype, o.dims);
    if (e == 1.0) return {x};
    if (e == 2.0) return {c.b.binary("stablehlo.multiply", x, x)};
    if (e == 0.5 && is_floating(o.dtype)) return {c.b.unary("stablehlo.sqrt", x)};
    if (e == -1.0 && is_floating(o.dtype)) return {c.b.binary("stablehlo.divide", c.b.constant(1, o.dtype, o.dims), x)};
  }
  auto [a, b] = operands(c, o.dtype);
  return {c.b.binary("stablehlo.power", a, b)};
}

V clamp_rule(OpContext& c) {
  TensorType o = c.out(0);
  Value x = c.operand(0, o.dtype, o.dims);
  if (c.has(1)) x = c.b.binary("stablehlo.maximum", x, c.operand(1, o.dtype, o.dims));
  if (c.has(2)) x = c.b.binary("stablehlo.minimum", x, c.operand(2, o.dtype, o.dims));
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

V lerp_rule(OpContext& c) {  // self + weight * (end - self)
  TensorType o = c.out(0);
  Value s = c.operand(0, o.dtype, o.dims), e = c.operand(1, o.dtype, o.dims), w = c.operand(2, o.dtype, o.dims);
  return {c.b.binary("stablehlo.add", s, c.b.binary("stablehlo.multiply", w, c.b.binary("stablehlo.subtract", e, s)))};
}

LoweringRule addc(const std::string& op) {  // self + value * (t1 op t2)
  return [op](OpContext& c) -> V {
    TensorType o = c.out(0);
    Value s = c.operand(0, o.dtype, o.dims), t1 = c.operand(1, o.dtype, o.dims), t2 = c.operand(2, o.dtype, o.dims);
    Value prod = c.b.binary(op, t1, t2);
    if (c.has(3) && c.scalar(3) != 1.0) prod = c.b.binary("stablehlo.multiply", prod, c.runtime_operand(3, o.dtype, o.dims));
    return {c.b.binary("stablehlo.add", s, prod)};
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
    inner = b.unary("chlo.erf", b.binary("stablehlo.multiply", x, b.constant(M_SQRT1_2, t.dtype, t.dims)));
  }
  return b.binary("stablehlo.multiply", b.binary("stablehlo.multiply", half, x), b.binary("stablehlo.add", one, inner));
}

bool gelu_tanh(OpContext& c, size_t i) { return c.has(i) && c.arg(i).toStringRef() == "tanh"; }

V gelu_rule(OpContext& c) { return {gelu_value(c.b, c.operand(0, c.out(0).dtype, c.out(0).dims), gelu_tanh(c, 1))}; }

V gelu_backward_rule(OpContext& c) {  // gelu_backward(grad, self, approximate)
  TensorType o = c.out(0);
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
                         b.binary("stablehlo.add", k(1), b.unary("chlo.erf", b.binary("stablehlo.multiply", x, k(M_SQRT1_2)))));
    Value pdf = b.binary("stablehlo.multiply", k(0.5 * M_2_SQRTPI * M_SQRT1_2),
                         b.unary("stablehlo.exponential", b.binary("stablehlo.multiply", k(-0.5), b.binary("stablehlo.multiply", x, x))));
    d = b.binary("stablehlo.add", cdf, b.binary("stablehlo.multiply", x, pdf));
  }
  return {b.binary("stablehlo.multiply", g, d)};
}

V silu_rule(OpContext& c) {
  Value x = c.operand(0, c.out(0).dtype, c.out(0).dims);
  return {c.b.binary("stablehlo.multiply", x, sigmoid(c.b, x))};
}

V silu_backward_rule(OpContext& c) {  // g * s * (1 + x * (1 - s))
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value s = sigmoid(c.b, x);
  Value one = c.b.constant(1, o.dtype, o.dims);
  Value d = c.b.binary("stablehlo.multiply", s,
                       c.b.binary("stablehlo.add", one, c.b.binary("stablehlo.multiply", x, c.b.binary("stablehlo.subtract", one, s))));
  return {c.b.binary("stablehlo.multiply", g, d)};
}

V sigmoid_backward_rule(OpContext& c) {  // g * y * (1 - y), y = sigmoid output
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), y = c.operand(1, o.dtype, o.dims);
  Value one_minus = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), y);
  return {c.b.binary("stablehlo.multiply", g, c.b.binary("stablehlo.multiply", y, one_minus))};
}

V tanh_backward_rule(OpContext& c) {  // g * (1 - y^2)
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), y = c.operand(1, o.dtype, o.dims);
  Value d = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), c.b.binary("stablehlo.multiply", y, y));
  return {c.b.binary("stablehlo.multiply", g, d)};
}

V threshold_backward_rule(OpContext& c) {  // grad where self > threshold else 0
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value keep = c.b.compare(CompareDirection::kGt, x, c.operand(2, o.dtype, o.dims));
  return {c.b.select(keep, g, zeros(c.b, o))};
}

V relu_rule(OpContext& c) {
  TensorType o = c.out(0);
  return {c.b.binary("stablehlo.maximum", c.operand(0, o.dtype, o.dims), zeros(c.b, o))};
}

V leaky_relu_rule(OpContext& c) {
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
  Value inside = c.b.binary("stablehlo.and", c.b.compare(CompareDirection::kGt, x, c.operand(2, o.dtype, o.dims)),
                            c.b.compare(CompareDirection::kLt, x, c.operand(3, o.dtype, o.dims)));
  return {c.b.select(inside, g, zeros(c.b, o))};
}

V logit_rule(OpContext& c) {  // log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given
  TensorType o = c.out(0);
  Value x = c.operand(0, o.dtype, o.dims);
  if (c.has(1)) {
    double eps = c.scalar(1);
    x = c.b.binary("stablehlo.maximum", x, c.b.constant(eps, o.dtype, o.dims));
    x = c.b.binary("stablehlo.minimum", x, c.b.constant(1 - eps, o.dtype, o.dims));
  }
  Value one_minus = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), x);
  return {c.b.unary("stablehlo.log", c.b.binary("stablehlo.divide", x, one_minus))};
}

V logit_backward_rule(OpContext& c) {  // (grad, self, eps?): grad / (x (1 - x)), 0 outside [eps, 1 - eps]
  TensorType o = c.out(0);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value one_minus = c.b.binary("stablehlo.subtract", c.b.constant(1, o.dtype, o.dims), x);
  Value d = c.b.binary("stablehlo.divide", g, c.b.binary("stablehlo.multiply", x, one_minus));
  if (!c.has(2)) return {d};
  double eps = c.scalar(2);
  Value inside = c.b.binary("stablehlo.and", c.b.compare(CompareDirection::kGe, x, c.b.constant(eps, o.dtype, o.dims)),
                            c.b.compare(CompareDirection::kLe, x, c.b.constant(1 - eps, o.dtype, o.dims)));
  return {c.b.select(inside, d, zeros(c.b, o))};
}

V trunc_rule(OpContext& c) { return {trunc_value(c.b, c.operand(0, c.out(0).dtype, c.out(0).dims))}; }

V reciprocal_rule(OpContext& c) {
  TensorType o = c.out(0);
  return {c.b.binary("stablehlo.divide", c.b.constant(1, o.dtype, o.dims), c.operand(0, o.dtype, o.dims))};
}

V remainder_rule(OpContext& c) {
  auto [a, b] = operands(c, c.out(0).dtype);
  return {python_mod(c.b, a, b)};
}

V logical_not_rule(OpContext& c) { return {c.b.unary("stablehlo.not", as_pred(c, 0))}; }

V bitwise_not_rule(OpContext& c) { return {c.b.unary("stablehlo.not", c.operand(0, c.out(0).dtype, c.out(0).dims))}; }

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
  x = c.b.binary("stablehlo.maximum", x, c.b.constant(c.has(1) ? c.scalar(1) : -1.0, o.dtype, o.dims));
  return {c.b.binary("stablehlo.minimum", x, c.b.constant(c.has(2) ? c.scalar(2) : 1.0, o.dtype, o.dims))};
}

V softplus_rule(OpContext& c) {  // log1p(exp(beta x)) / beta, linear above threshold
  TensorType o = c.out(0);
  HloBuilder& b = c.b;
  Value x = c.operand(0, o.dtype, o.dims);
  double beta = c.has(1) ? c.scalar(1) : 1.0, threshold = c.has(2) ? c.scalar(2) : 20.0;
  Value bx = b.binary("stablehlo.multiply", x, b.constant(beta, o.dtype, o.dims));
  Value soft = b.binary("stablehlo.divide", b.unary("stablehlo.log_plus_one", b.unary("stablehlo.exponential", bx)),
                        b.constant(beta, o.dtype, o.dims));
  return {b.select(b.compare(CompareDirection::kGt, bx, b.constant(threshold, o.dtype, o.dims)), x, soft)};
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
                  div_rule});
  rows.push_back({{"maximum", "maximum.out"}, binary("stablehlo.maximum")});
  rows.push_back({{"minimum", "minimum.out"}, binary("stablehlo.minimum")});
  rows.push_back({{"fmod.Tensor", "fmod_.Tensor", "fmod.Scalar", "fmod_.Scalar", "fmod.Tensor_out", "fmod.Scalar_out"},
                  binary("stablehlo.remainder")});
  rows.push_back({{"remainder.Tensor", "remainder_.Tensor", "remainder.Scalar", "remainder_.Scalar",
                   "remainder.Tensor_out", "remainder.Scalar_out"},
                  remainder_rule});
  rows.push_back({{"pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out", "pow.Tensor_Tensor", "pow_.Tensor",
                   "pow.Tensor_Tensor_out", "pow.Scalar", "pow.Scalar_out"},
                  pow_rule});
  rows.push_back({{"atan2", "atan2_", "atan2.out"}, binary("stablehlo.atan2")});

  rows.push_back({{"neg", "neg_", "neg.out"}, unary("stablehlo.negate")});
  rows.push_back({{"abs", "abs_", "abs.out"}, unary("stablehlo.abs")});
  rows.push_back({{"sign", "sign_", "sign.out", "sgn", "sgn_"}, unary("stablehlo.sign")});
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
  rows.push_back({{"erf", "erf_", "erf.out"}, unary("chlo.erf")});
  rows.push_back({{"logit", "logit_", "logit.out"}, logit_rule});
  rows.push_back({{"logit_backward", "logit_backward.grad_input"}, logit_backward_rule});
  rows.push_back({{"floor", "floor_", "floor.out"}, unary("stablehlo.floor")});
  rows.push_back({{"ceil", "ceil_", "ceil.out"}, unary("stablehlo.ceil")});
  rows.push_back({{"round", "round_", "round.out"}, unary("stablehlo.round_nearest_even")});
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
                  binary("stablehlo.and")});
  rows.push_back({{"bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out", "bitwise_or.Scalar",
                   "bitwise_or_.Scalar"},
                  binary("stablehlo.or")});
  rows.push_back({{"bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out", "bitwise_xor.Scalar",
                   "bitwise_xor_.Scalar"},
                  binary("stablehlo.xor")});
  rows.push_back({{"bitwise_not", "bitwise_not_", "bitwise_not.out"}, bitwise_not_rule});
  rows.push_back({{"isnan"}, isnan_rule});
  rows.push_back({{"isinf"}, isinf_rule});
  rows.push_back({{"isfinite"}, isfinite_rule});
  rows.push_back({{"isposinf", "isposinf.out"}, signed_inf_rule(1.0)});
  rows.push_back({{"isneginf", "isneginf.out"}, signed_inf_rule(-1.0)});
  rows.push_back({{"nan_to_num", "nan_to_num_", "nan_to_num.out"}, nan_to_num_rule});

  rows.push_back({{"where.self", "where.self_out"}, where_rule});
  rows.push_back({{"clamp", "clamp_", "clamp.out", "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out"}, clamp_rule});
  rows.push_back({{"clamp_min", "clamp_min_", "clamp_min.out", "clamp_min.Tensor", "clamp_min_.Tensor"}, binary("stablehlo.maximum")});
  rows.push_back({{"clamp_max", "clamp_max_", "clamp_max.out", "clamp_max.Tensor", "clamp_max_.Tensor"}, binary("stablehlo.minimum")});
  rows.push_back({{"masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Tensor", "masked_fill_.Tensor"}, masked_fill_rule});
  rows.push_back({{"fill_.Scalar", "fill_.Tensor", "fill.Scalar", "fill.Tensor"}, fill_rule});
  rows.push_back({{"zero_"}, zero_rule});
  rows.push_back({{"lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out", "lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out"}, lerp_rule});
  rows.push_back({{"addcmul", "addcmul_", "addcmul.out"}, addc("stablehlo.multiply")});
  rows.push_back({{"addcdiv", "addcdiv_", "addcdiv.out"}, addc("stablehlo.divide")});
}

}  // namespace torch_tpu
