// Activations and their backwards: relu/leaky_relu/hardtanh/threshold, gelu (exact and tanh), silu, softplus,
// logit, and the sigmoid/tanh backwards. Float16/bfloat16 compute in float32 (see rule_helpers.h); NaN inputs
// follow PyTorch's comparisons (a NaN passes its gradient through relu/hardtanh/threshold backwards).
#include <cmath>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

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


// ---- elu family, mish, hardswish/hardsigmoid, shrinks, glu, prelu ----

double scalar_or(OpContext& c, size_t i, double fallback) { return c.has(i) ? c.scalar(i) : fallback; }

V elu_rule(OpContext& c) {  // elu(self, alpha, scale, input_scale): x <= 0 ? expm1(x * in) * alpha * scale : x * scale
  require_floating(c, "elu");
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  Value x = opmath_operand(c, 0);
  double alpha = scalar_or(c, 1, 1.0), scale = scalar_or(c, 2, 1.0), in = scalar_or(c, 3, 1.0);
  Value neg_part = mul(b, expm1(b, mul(b, x, k(b, in, x))), k(b, alpha * scale, x));
  return {to_result(c, sel(b, le(b, x, k(b, 0, x)), neg_part, mul(b, x, k(b, scale, x))))};
}

V elu_backward_rule(OpContext& c) {  // (grad, alpha, scale, input_scale, is_result, self_or_result)
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), y = c.operand(5, o.dtype, o.dims);
  double alpha = c.scalar(1), scale = c.scalar(2), in = c.scalar(3);
  Value neg_part = c.flag(4) ? mul(b, mul(b, g, k(b, in, g)), add(b, y, k(b, alpha * scale, y)))
                             : mul(b, mul(b, g, k(b, in * alpha * scale, g)), exp(b, mul(b, y, k(b, in, y))));
  return {to_result(c, sel(b, le(b, y, k(b, 0, y)), neg_part, mul(b, g, k(b, scale, g))))};
}

Value mish_tanh_softplus(HloBuilder& b, const Value& x) {
  return b.unary("stablehlo.tanh", hm::log1p(b, hm::exp(b, x)));
}

V mish_rule(OpContext& c) {  // x * tanh(log1p(exp(x)))
  require_floating(c, "mish");
  Value x = opmath_operand(c, 0);
  return {to_result(c, hm::mul(c.b, x, mish_tanh_softplus(c.b, x)))};
}

V mish_backward_rule(OpContext& c) {  // g * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x))
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value t = mish_tanh_softplus(b, x);
  Value s = div(b, k(b, 1, x), add(b, k(b, 1, x), exp(b, neg(b, x))));
  Value d = add(b, t, mul(b, mul(b, x, s), sub(b, k(b, 1, t), mul(b, t, t))));
  return {to_result(c, mul(b, g, d))};
}

// min(max(x + 3, 0), 6) as std::min/std::max compute it: a NaN stays NaN.
Value relu6_of_shift(HloBuilder& b, const Value& x) {
  using namespace hm;  // NOLINT
  Value s = add(b, x, k(b, 3, x));
  Value r = sel(b, lt(b, s, k(b, 0, s)), k(b, 0, s), s);
  return sel(b, lt(b, k(b, 6, r), r), k(b, 6, r), r);
}

V hardswish_rule(OpContext& c) {  // x * min(max(x + 3, 0), 6) / 6
  Value x = opmath_operand(c, 0);
  return {to_result(c, hm::div(c.b, hm::mul(c.b, x, relu6_of_shift(c.b, x)), hm::k(c.b, 6, x)))};
}

V hardswish_backward_rule(OpContext& c) {  // x <= -3: 0; x < 3: g (x / 3 + 1/2); else g (as PyTorch's CPU kernel)
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value mid = mul(b, g, add(b, div(b, x, k(b, 3, x)), k(b, 0.5, x)));
  Value r = sel(b, lt(b, x, k(b, 3, x)), mid, g);
  return {to_result(c, sel(b, le(b, x, k(b, -3, x)), k(b, 0, x), r))};
}

V hardsigmoid_rule(OpContext& c) {  // min(max(x + 3, 0), 6) / 6
  Value x = opmath_operand(c, 0);
  return {to_result(c, hm::div(c.b, relu6_of_shift(c.b, x), hm::k(c.b, 6, x)))};
}

V hardsigmoid_backward_rule(OpContext& c) {  // -3 < x < 3 ? g / 6 : 0
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  Value inside = land(b, gt(b, x, k(b, -3, x)), lt(b, x, k(b, 3, x)));
  return {to_result(c, sel(b, inside, div(b, g, k(b, 6, g)), k(b, 0, g)))};
}

V softplus_backward_rule(OpContext& c) {  // (grad, self, beta, threshold): x beta > threshold ? g : g z / (z + 1)
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  double beta = scalar_or(c, 2, 1.0), threshold = scalar_or(c, 3, 20.0);
  Value bx = mul(b, x, k(b, beta, x));
  Value z = exp(b, bx);
  Value soft = div(b, mul(b, g, z), add(b, z, k(b, 1, z)));
  return {to_result(c, sel(b, gt(b, bx, k(b, threshold, bx)), g, soft))};
}

// |x| <= lambd (as -l <= x <= l), the band the shrinks zero.
Value in_band(HloBuilder& b, const Value& x, double l) {
  return hm::land(b, hm::ge(b, x, hm::k(b, -l, x)), hm::le(b, x, hm::k(b, l, x)));
}

V softshrink_rule(OpContext& c) {  // x > l ? x - l : x < -l ? x + l : x * 0
  using namespace hm;  // NOLINT
  require_floating(c, "softshrink");
  double l = scalar_or(c, 1, 0.5);
  TORCH_CHECK(l >= 0, "lambda must be greater or equal to 0, but found to be ", l, ".");
  HloBuilder& b = c.b;
  Value x = opmath_operand(c, 0);
  Value r = sel(b, lt(b, x, k(b, -l, x)), add(b, x, k(b, l, x)), mul(b, x, k(b, 0, x)));
  return {to_result(c, sel(b, gt(b, x, k(b, l, x)), sub(b, x, k(b, l, x)), r))};
}

V hardshrink_rule(OpContext& c) {  // -l <= x <= l ? 0 : x
  double l = scalar_or(c, 1, 0.5);
  Value x = opmath_operand(c, 0);
  return {to_result(c, c.b.select(in_band(c.b, x, l), hm::k(c.b, 0, x), x))};
}

V shrink_backward_rule(OpContext& c) {  // (grad, self, lambd): -l <= x <= l ? 0 : grad
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims);
  return {to_result(c, c.b.select(in_band(c.b, x, c.scalar(2)), hm::k(c.b, 0, g), g))};
}

// The two halves of `x` along `dim`.
std::pair<Value, Value> halves(HloBuilder& b, const Value& x, int64_t dim) {
  std::vector<int64_t> start(x.type.rank(), 0), mid = x.type.dims;
  int64_t h = x.type.dims[dim] / 2;
  mid[dim] = h;
  std::vector<int64_t> start2 = start;
  start2[dim] = h;
  return {b.slice(x, start, mid), b.slice(x, start2, x.type.dims)};
}

V glu_rule(OpContext& c) {  // glu(self, dim): a * sigmoid(b) over the halves of dim
  require_floating(c, "glu");
  Value self = c.tensor(0);
  TORCH_CHECK(self.type.rank() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = c.dim(1, self.type.rank());
  TORCH_CHECK(self.type.dims[d] % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ",
              self.type.dims[d]);
  Value x = c.b.convert(self, opmath_type(c.out(0).dtype));
  auto [a, g] = halves(c.b, x, d);
  return {to_result(c, hm::mul(c.b, a, sigmoid(c.b, g)))};
}

V glu_backward_rule(OpContext& c) {  // (grad, self, dim): [g s, g a s (1 - s)]
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  ElementType t = opmath_type(c.out(0).dtype);
  Value x = b.convert(c.tensor(1), t);
  int64_t d = c.dim(2, x.type.rank());
  auto [a, h] = halves(b, x, d);
  Value g = b.convert(c.tensor(0), t);
  Value s = sigmoid(b, h);
  Value ga = mul(b, g, s);
  Value gb = mul(b, mul(b, ga, a), sub(b, k(b, 1, s), s));
  return {to_result(c, b.concatenate({ga, gb}, d))};
}

V prelu_rule(OpContext& c) {  // _prelu_kernel(self, weight): x > 0 ? x : w x
  using namespace hm;  // NOLINT
  TensorType o = compute_out(c);
  Value x = c.operand(0, o.dtype, o.dims), w = c.operand(1, o.dtype, o.dims);
  return {to_result(c, sel(c.b, gt(c.b, x, k(c.b, 0, x)), x, mul(c.b, w, x)))};
}

V prelu_backward_rule(OpContext& c) {  // _prelu_kernel_backward(grad, self, weight) -> (x > 0 ? g : w g, x > 0 ? 0 : x g)
  using namespace hm;  // NOLINT
  HloBuilder& b = c.b;
  TensorType o = compute_out(c);
  Value g = c.operand(0, o.dtype, o.dims), x = c.operand(1, o.dtype, o.dims), w = c.operand(2, o.dtype, o.dims);
  Value pos = gt(b, x, k(b, 0, x));
  Value gi = sel(b, pos, g, mul(b, w, g));
  Value gw = sel(b, pos, k(b, 0, x), mul(b, x, g));
  return {b.convert(gi, c.out(0).dtype), b.convert(b.broadcast_to(gw, c.out(1).dims), c.out(1).dtype)};
}

}  // namespace

void add_activation_rules(Rows& rows) {
  rows.push_back({{"elu", "elu_", "elu.out"}, elu_rule});
  rows.push_back({{"elu_backward", "elu_backward.grad_input"}, elu_backward_rule});
  rows.push_back({{"mish", "mish_", "mish.out"}, mish_rule});
  rows.push_back({{"mish_backward"}, mish_backward_rule});
  rows.push_back({{"hardswish", "hardswish_", "hardswish.out"}, hardswish_rule});
  rows.push_back({{"hardswish_backward", "hardswish_backward.out"}, hardswish_backward_rule});
  rows.push_back({{"hardsigmoid", "hardsigmoid_", "hardsigmoid.out"}, hardsigmoid_rule});
  rows.push_back({{"hardsigmoid_backward", "hardsigmoid_backward.grad_input"}, hardsigmoid_backward_rule});
  rows.push_back({{"softplus_backward", "softplus_backward.grad_input"}, softplus_backward_rule});
  rows.push_back({{"softshrink", "softshrink.out"}, softshrink_rule});
  rows.push_back({{"softshrink_backward", "softshrink_backward.grad_input"}, shrink_backward_rule});
  rows.push_back({{"hardshrink", "hardshrink.out"}, hardshrink_rule});
  rows.push_back({{"hardshrink_backward", "hardshrink_backward.grad_input"}, shrink_backward_rule});
  rows.push_back({{"glu", "glu.out"}, glu_rule});
  rows.push_back({{"glu_backward", "glu_backward.grad_input"}, glu_backward_rule});
  rows.push_back({{"_prelu_kernel"}, prelu_rule});
  rows.push_back({{"_prelu_kernel_backward"}, prelu_backward_rule});
  rows.push_back(promoting({0}, {{"logit", "logit_", "logit.out"}, logit_rule}));
  rows.push_back({{"logit_backward", "logit_backward.grad_input"}, logit_backward_rule});
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
}

}  // namespace torch_tpu
