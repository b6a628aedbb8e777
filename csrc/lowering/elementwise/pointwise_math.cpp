// Pointwise math beyond the basics of elementwise.cpp: inverse and hyperbolic trigonometry, exp2/log2/log10,
// frac/signbit/angle/sinc, and the binary copysign/xlogy/hypot/logaddexp/nextafter/heaviside. Float16/bfloat16
// compute in float32 and round once; float64 computes in float64. Special functions (gamma family, erf family,
// Bessel) are in special/.
#include <cmath>

#include "lowering/lib/hlo_math.h"
#include "lowering/elementwise/pointwise_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {

using namespace hm;  // NOLINT: formula spellings

Value sign_bit(HloBuilder& b, const Value& x) {
  ElementType t = x.type.dtype;
  if (!is_floating(t)) {
    if (is_unsigned_integer(t) || t == ElementType::kPred) return b.constant(0, ElementType::kPred, x.type.dims);
    return lt(b, x, k(b, 0, x));
  }
  ElementType bits = element_size(t) == 8 ? ElementType::kS64 : element_size(t) == 4 ? ElementType::kS32 : ElementType::kS16;
  Value v = b.op1("stablehlo.bitcast_convert", {x}, {bits, x.type.dims});
  return lt(b, v, b.constant(0, bits, x.type.dims));
}

Value copysign_value(HloBuilder& b, const Value& mag, const Value& sign) {
  Value a = abs(b, mag);
  return sel(b, sign_bit(b, sign), neg(b, a), a);
}

namespace {

// The parts of a float32/float64 type's bit layout used to build and take apart powers of two.
struct FloatBits {
  ElementType int_type;
  int mantissa;
  int bias;
};

FloatBits float_bits(ElementType t) {
  if (t == ElementType::kF64) return {ElementType::kS64, 52, 1023};
  return {ElementType::kS32, 23, 127};
}

// 2^n for an integer-valued float n in [1 - bias, bias] (a normal power of two), built from its bits.
Value pow2_normal(HloBuilder& b, const Value& n) {
  FloatBits fb = float_bits(n.type.dtype);
  Value e = add(b, b.convert(n, fb.int_type), b.constant(fb.bias, fb.int_type, n.type.dims));
  Value bits = b.binary("stablehlo.shift_left", e, b.constant(fb.mantissa, fb.int_type, n.type.dims));
  return b.op1("stablehlo.bitcast_convert", {bits}, n.type);
}

// x * 2^n exactly (as ldexp), n an integer-valued float of any size: applied in three clamped steps, so results
// reach the subnormals and overflow to inf as the exact value would.
Value scale_pow2(HloBuilder& b, const Value& x, const Value& n) {
  FloatBits fb = float_bits(x.type.dtype);
  double lim = fb.bias - 1;
  Value rest = n;
  Value r = x;
  for (int i = 0; i < 3; ++i) {
    Value step = b.op1("stablehlo.clamp", {k(b, -lim, rest), rest, k(b, lim, rest)}, rest.type);
    r = mul(b, r, pow2_normal(b, step));
    rest = sub(b, rest, step);
  }
  return r;
}

// 2^x: 2^round(x) exactly times exp(f ln 2) for the remainder f in [-0.5, 0.5].
Value exp2_value(HloBuilder& b, const Value& x) {
  Value n = b.unary("stablehlo.round_nearest_even", x);
  Value f = sub(b, x, n);
  Value big = b.op1("stablehlo.clamp", {k(b, -2000, n), n, k(b, 2000, n)}, n.type);  // inf and nan stay out of the ints
  Value r = scale_pow2(b, exp(b, mul(b, f, k(b, M_LN2, f))), sel(b, b.op1("stablehlo.is_finite", {n}, {ElementType::kPred, n.type.dims}), big, k(b, 0, n)));
  r = sel(b, eq(b, x, k(b, INFINITY, x)), x, r);
  r = sel(b, eq(b, x, k(b, -INFINITY, x)), k(b, 0, x), r);
  return sel(b, isnan(b, x), x, r);
}

// log2(x) = e + log(m) / ln 2 for x = m 2^e with m in [sqrt(1/2), sqrt(2)): exact at powers of two.
Value log2_value(HloBuilder& b, const Value& x) {
  FloatBits fb = float_bits(x.type.dtype);
  const auto& dims = x.type.dims;
  // Subnormals are first scaled into the normal range.
  double tiny = fb.int_type == ElementType::kS64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  double up = fb.int_type == ElementType::kS64 ? 54 : 25;
  Value small = lt(b, abs(b, x), k(b, tiny, x));
  Value xs = sel(b, small, mul(b, x, k(b, std::ldexp(1.0, static_cast<int>(up)), x)), x);
  Value bits = b.op1("stablehlo.bitcast_convert", {xs}, {fb.int_type, dims});
  Value expo = b.binary("stablehlo.shift_right_logical", bits, b.constant(fb.mantissa, fb.int_type, dims));
  expo = b.binary("stablehlo.and", expo, b.constant((1 << (fb.int_type == ElementType::kS64 ? 11 : 8)) - 1, fb.int_type, dims));
  Value e = sub(b, b.convert(expo, x.type.dtype), k(b, fb.bias, x));
  Value m = scale_pow2(b, xs, neg(b, e));  // in [1, 2)
  Value big_m = gt(b, m, k(b, M_SQRT2, m));
  m = sel(b, big_m, mul(b, m, k(b, 0.5, m)), m);
  e = sel(b, big_m, add(b, e, k(b, 1, e)), e);
  e = sel(b, small, sub(b, e, k(b, up, e)), e);
  Value r = add(b, e, mul(b, log(b, m), k(b, 1 / M_LN2, m)));
  // Zero, negatives, inf and nan as log gives them.
  Value special = b.binary("stablehlo.or", le(b, x, k(b, 0, x)),
                           b.unary("stablehlo.not", b.op1("stablehlo.is_finite", {x}, {ElementType::kPred, dims})));
  Value lx = log(b, x);
  return sel(b, special, lx, r);
}

// sinh/cosh: for |x| >= 1 from h = exp(|x| / 2) as (h / 2) h -+ 1 / (2 h^2), so large arguments lose no digits to
// exp(|x| - ln 2) and overflow only where the result does; sinh of |x| < 1 from expm1 for small arguments.
Value hyperbolic(HloBuilder& b, const Value& x, bool is_sinh) {
  Value a = abs(b, x);
  Value h = exp(b, mul(b, a, k(b, 0.5, a)));
  Value big = mul(b, mul(b, h, k(b, 0.5, h)), h);
  Value small = div(b, k(b, 0.5, h), mul(b, h, h));
  if (!is_sinh) return add(b, big, small);
  Value r = sub(b, big, small);
  Value u = expm1(b, a);
  Value near0 = mul(b, k(b, 0.5, u), add(b, u, div(b, u, add(b, u, k(b, 1, u)))));
  r = sel(b, lt(b, a, k(b, 1, a)), near0, r);
  return copysign_value(b, r, x);
}

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;
using UnaryFn = std::function<Value(HloBuilder&, const Value&)>;

// A float function of one argument, computed in the opmath type of the (floating) result.
LoweringRule float_unary(const char* name, UnaryFn fn) {
  return [name, fn](OpContext& c) -> V {
    TORCH_CHECK_NOT_IMPLEMENTED(!is_complex(c.out(0).dtype), "\"", name, "\" is not lowered for complex tensors on tpu");
    require_floating(c, name);
    return {to_result(c, fn(c.b, opmath_operand(c, 0)))};
  };
}

UnaryFn chlo_fn(const std::string& op) {
  return [op](HloBuilder& b, const Value& x) { return chlo(b, op, {x}); };
}

V frac_rule(OpContext& c) {
  require_floating(c, "frac");
  Value x = opmath_operand(c, 0);
  return {to_result(c, sub(c.b, x, trunc_value(c.b, x)))};
}

V signbit_rule(OpContext& c) {
  return {sign_bit(c.b, c.tensor(0))};
}

V angle_rule(OpContext& c) {  // real inputs: pi for negatives, 0 otherwise, NaN stays NaN
  HloBuilder& b = c.b;
  Value in = c.tensor(0);
  if (is_complex(in.type.dtype)) {
    TensorType part = c.out(0);
    Value re = b.op1("stablehlo.real", {in}, part), im = b.op1("stablehlo.imag", {in}, part);
    return {b.binary("stablehlo.atan2", im, re)};
  }
  Value x = opmath_operand(c, 0);
  Value r = sel(b, lt(b, x, k(b, 0, x)), k(b, M_PI, x), k(b, 0, x));
  return {to_result(c, sel(b, isnan(b, x), x, r))};
}

V sinc_rule(OpContext& c) {  // sin(pi x) / (pi x), 1 at 0
  require_floating(c, "sinc");
  HloBuilder& b = c.b;
  Value x = opmath_operand(c, 0);
  Value px = mul(b, x, k(b, M_PI, x));
  Value r = div(b, b.unary("stablehlo.sine", px), px);
  return {to_result(c, sel(b, eq(b, x, k(b, 0, x)), k(b, 1, x), r))};
}

// Both operands of a binary float op in the opmath type of the result, broadcast (tensors or numbers).
std::pair<Value, Value> float_operands(OpContext& c) {
  return {opmath_operand(c, 0), opmath_operand(c, 1)};
}

V copysign_rule(OpContext& c) {
  auto [x, y] = float_operands(c);
  return {to_result(c, copysign_value(c.b, x, y))};
}

LoweringRule xlog_rule(bool one_plus) {  // x * log(y) (log1p), 0 where x == 0 unless y is NaN
  return [one_plus](OpContext& c) -> V {
    HloBuilder& b = c.b;
    auto [x, y] = float_operands(c);
    Value r = mul(b, x, one_plus ? log1p(b, y) : log(b, y));
    r = sel(b, eq(b, x, k(b, 0, x)), k(b, 0, x), r);
    return {to_result(c, sel(b, isnan(b, y), y, r))};
  };
}

V hypot_rule(OpContext& c) {  // max * sqrt(1 + (min / max)^2), without overflow; inf wins over NaN
  HloBuilder& b = c.b;
  auto [x, y] = float_operands(c);
  Value ax = abs(b, x), ay = abs(b, y);
  Value hi = b.binary("stablehlo.maximum", ax, ay), lo = b.binary("stablehlo.minimum", ax, ay);
  Value q = div(b, lo, hi);
  Value r = mul(b, hi, sqrt(b, add(b, k(b, 1, q), mul(b, q, q))));
  r = sel(b, eq(b, hi, k(b, 0, hi)), k(b, 0, hi), r);
  Value inf = k(b, INFINITY, x);
  r = sel(b, b.binary("stablehlo.or", isnan(b, x), isnan(b, y)), k(b, NAN, x), r);
  return {to_result(c, sel(b, b.binary("stablehlo.or", eq(b, ax, inf), eq(b, ay, inf)), inf, r))};
}

// logaddexp: max + log1p(exp(-|a - b|)); equal infinities give themselves. base2: with 2^ and log2.
LoweringRule logaddexp_rule(bool base2) {
  return [base2](OpContext& c) -> V {
    require_floating(c, base2 ? "logaddexp2_cpu" : "logaddexp_cpu");
    HloBuilder& b = c.b;
    auto [x, y] = float_operands(c);
    Value m = nan_max(b, x, y);
    Value d = neg(b, abs(b, sub(b, x, y)));
    Value tail = base2 ? mul(b, log1p(b, exp2_value(b, d)), k(b, 1 / M_LN2, d)) : log1p(b, exp(b, d));
    Value r = add(b, m, tail);
    Value same_inf = b.binary("stablehlo.and", eq(b, x, y), eq(b, abs(b, x), k(b, INFINITY, x)));
    r = sel(b, same_inf, x, r);
    return {to_result(c, sel(b, b.binary("stablehlo.or", isnan(b, x), isnan(b, y)), k(b, NAN, x), r))};
  };
}

V nextafter_rule(OpContext& c) {  // in the result's own dtype: the next representable value is the point
  require_floating(c, "nextafter");
  TensorType o = c.out(0);
  Value x = c.operand(0, o.dtype, o.dims), y = c.operand(1, o.dtype, o.dims);
  return {chlo(c.b, "next_after", {x, y})};
}

V heaviside_rule(OpContext& c) {  // x == 0 ? values : x > 0
  TensorType o = c.out(0);
  TORCH_CHECK_NOT_IMPLEMENTED(!is_complex(o.dtype), "heaviside is not yet implemented for complex tensors.");
  HloBuilder& b = c.b;
  Value x = c.operand(0, o.dtype, o.dims), v = c.operand(1, o.dtype, o.dims);
  if (o.dtype == ElementType::kPred) return {sel(b, lnot(b, x), v, x)};
  Value pos = b.convert(gt(b, x, zeros(b, o)), o.dtype);
  return {sel(b, eq(b, x, zeros(b, o)), v, pos)};
}

}  // namespace

Value exp2_of(HloBuilder& b, const Value& x) { return exp2_value(b, x); }
Value log2_of(HloBuilder& b, const Value& x) { return log2_value(b, x); }

// complex(real, imag) and polar(abs, angle): complex64 / complex128 results from float32 / float64 parts.
ElementType part_type(ElementType t) { return t == ElementType::kC128 ? ElementType::kF64 : ElementType::kF32; }

V complex_rule(OpContext& c) {
  TensorType o = c.out(0);
  ElementType p = part_type(o.dtype);
  return {c.b.op1("stablehlo.complex", {c.operand(0, p, o.dims), c.operand(1, p, o.dims)}, o)};
}

V polar_rule(OpContext& c) {  // abs * cos(angle) + i abs * sin(angle), as std::polar
  TensorType o = c.out(0);
  ElementType p = part_type(o.dtype);
  Value r = c.operand(0, p, o.dims), theta = c.operand(1, p, o.dims);
  Value re = mul(c.b, r, c.b.unary("stablehlo.cosine", theta));
  Value im = mul(c.b, r, c.b.unary("stablehlo.sine", theta));
  return {c.b.op1("stablehlo.complex", {re, im}, o)};
}

void add_math_rules(Rows& rows) {
  rows.push_back(promoting({0}, {{"acos", "acos_", "acos.out"}, float_unary("acos", chlo_fn("acos"))}));
  rows.push_back(promoting({0}, {{"asin", "asin_", "asin.out"}, float_unary("asin", chlo_fn("asin"))}));
  rows.push_back(promoting({0}, {{"atan", "atan_", "atan.out"},
                  float_unary("atan", [](HloBuilder& b, const Value& x) { return b.binary("stablehlo.atan2", x, k(b, 1, x)); })}));
  rows.push_back(promoting({0}, {{"acosh", "acosh_", "acosh.out"}, float_unary("acosh", chlo_fn("acosh"))}));
  rows.push_back(promoting({0}, {{"asinh", "asinh_", "asinh.out"}, float_unary("asinh", chlo_fn("asinh"))}));
  rows.push_back(promoting({0}, {{"atanh", "atanh_", "atanh.out"}, float_unary("atanh", chlo_fn("atanh"))}));
  rows.push_back(promoting({0}, {{"cosh", "cosh_", "cosh.out"}, float_unary("cosh", [](HloBuilder& b, const Value& x) { return hyperbolic(b, x, false); })}));
  rows.push_back(promoting({0}, {{"sinh", "sinh_", "sinh.out"}, float_unary("sinh", [](HloBuilder& b, const Value& x) { return hyperbolic(b, x, true); })}));
  rows.push_back(promoting({0}, {{"exp2", "exp2_", "exp2.out"}, float_unary("exp2", exp2_value)}));
  rows.push_back(promoting({0}, {{"log2", "log2_", "log2.out"}, float_unary("log2", log2_value)}));
  rows.push_back(promoting({0}, {{"log10", "log10_", "log10.out"}, float_unary("log10", [](HloBuilder& b, const Value& x) {
                    return mul(b, log(b, x), k(b, 1 / M_LN10, x));
                  })}));
  rows.push_back({{"frac", "frac_", "frac.out"}, frac_rule});
  rows.push_back({{"signbit", "signbit.out"}, signbit_rule});
  rows.push_back({{"angle", "angle.out"}, angle_rule});
  rows.push_back(promoting({0}, {{"sinc", "sinc_", "sinc.out"}, sinc_rule}));
  rows.push_back(promoting({0, 1}, {{"copysign.Tensor", "copysign_.Tensor", "copysign.out", "copysign.Scalar", "copysign_.Scalar",
                   "copysign.Scalar_out"},
                  copysign_rule}));
  rows.push_back(promoting({0, 1}, {{"xlogy.Tensor", "xlogy_.Tensor", "xlogy.OutTensor", "xlogy.Scalar_Other", "xlogy_.Scalar_Other",
                   "xlogy.OutScalar_Other", "xlogy.Scalar_Self", "xlogy.OutScalar_Self"},
                  xlog_rule(false)}));
  rows.push_back(promoting({0, 1}, {{"special_xlog1py", "special_xlog1py.out", "special_xlog1py.self_scalar",
                   "special_xlog1py.other_scalar", "special_xlog1py.self_scalar_out", "special_xlog1py.other_scalar_out"},
                  xlog_rule(true)}));
  rows.push_back(promoting({0, 1}, {{"hypot", "hypot_", "hypot.out"}, hypot_rule}));
  rows.push_back(promoting({0, 1}, {{"logaddexp", "logaddexp.out"}, logaddexp_rule(false)}));
  rows.push_back(promoting({0, 1}, {{"logaddexp2", "logaddexp2.out"}, logaddexp_rule(true)}));
  rows.push_back(promoting({0, 1}, {{"nextafter", "nextafter_", "nextafter.out"}, nextafter_rule}));
  rows.push_back(promoting({0, 1}, {{"heaviside", "heaviside_", "heaviside.out"}, heaviside_rule}));
  rows.push_back({{"complex", "complex.out"}, complex_rule});
  rows.push_back({{"polar", "polar.out"}, polar_rule});
}

}  // namespace torch_tpu
