// Special functions: the gamma family (lgamma, digamma, polygamma), the erf family (erfc, erfinv), the modified
// Bessel functions i0/i0e/i1/i1e and torch.special's entr. Computed in float32 for float32/float16/bfloat16 results and in float64 for float64, with
// PyTorch's values at poles and edges.
#include <cmath>
#include <vector>

#include "lowering/lib/hlo_math.h"
#include "lowering/elementwise/pointwise_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"
#include "lowering/special/cephes.h"

namespace torch_tpu {
namespace {

using namespace hm;  // NOLINT: formula spellings
using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

Value is_int_valued(HloBuilder& b, const Value& x) { return eq(b, x, b.unary("stablehlo.floor", x)); }

// digamma as PyTorch computes it: negatives by reflection, digamma(1 - x) - pi / tan(pi frac(x)); then the recurrence
// digamma(x) = digamma(x + 1) - 1 / x up to x >= 10 and the asymptotic series log x - 1 / 2x - sum B_2k / (2k x^2k).
// Edges: -inf at +0, +inf at -0, NaN at negative integers and -inf.
Value digamma_value(HloBuilder& b, const Value& x) {
  Value negative = lt(b, x, k(b, 0, x));
  // pi / tan(pi r) in float64, as PyTorch computes it for float32.
  Value r = b.convert(sub(b, x, trunc_value(b, x)), ElementType::kF64);
  Value mirror = b.convert(div(b, k(b, M_PI, r), b.unary("stablehlo.tan", mul(b, r, k(b, M_PI, r)))), x.type.dtype);
  Value y = sel(b, negative, sub(b, k(b, 1, x), x), x);
  Value acc = k(b, 0, x);
  for (int i = 0; i < 10; ++i) {
    Value small = lt(b, y, k(b, 10, y));
    acc = sel(b, small, sub(b, acc, div(b, k(b, 1, y), y)), acc);
    y = sel(b, small, add(b, y, k(b, 1, y)), y);
  }
  static const double kB2k[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6};
  Value z = div(b, k(b, 1, y), mul(b, y, y));
  Value poly = k(b, 0, y);
  for (int i = 6; i >= 0; --i) poly = mul(b, add(b, poly, k(b, kB2k[i] / (2.0 * (i + 1)), y)), z);
  poly = sel(b, lt(b, y, k(b, 1e17, y)), poly, k(b, 0, y));
  Value d = add(b, acc, sub(b, sub(b, log(b, y), div(b, k(b, 0.5, y), y)), poly));
  d = sel(b, negative, sub(b, d, mirror), d);
  Value zero = eq(b, x, k(b, 0, x));
  d = sel(b, zero, copysign_value(b, k(b, INFINITY, x), neg(b, x)), d);
  d = sel(b, land(b, negative, is_int_valued(b, x)), k(b, NAN, x), d);
  return sel(b, eq(b, x, k(b, INFINITY, x)), x, d);
}

// lgamma: +inf at the poles (0 and negative integers) and at +-inf.
Value lgamma_value(HloBuilder& b, const Value& x) {
  Value r = chlo(b, "lgamma", {x});
  Value pole = land(b, le(b, x, k(b, 0, x)), is_int_valued(b, x));
  r = sel(b, lor(b, pole, eq(b, abs(b, x), k(b, INFINITY, x))), k(b, INFINITY, x), r);
  return r;
}

// x - round(x), exact: sin(pi x)^2 and cot(pi x) have period 1, and pi times the small remainder keeps its digits.
Value unit_remainder(HloBuilder& b, const Value& x) { return sub(b, x, b.unary("stablehlo.round_nearest_even", x)); }

// trigamma: below 1/2 by reflection, pi^2 / sin^2(pi x) - trigamma(1 - x); then six steps of the recurrence
// trigamma(x) = 1 / x^2 + trigamma(x + 1) and the asymptotic series in 1 / x.
Value trigamma_value(HloBuilder& b, const Value& x) {
  Value reflect = lt(b, x, k(b, 0.5, x));
  Value s = b.unary("stablehlo.sine", mul(b, x, k(b, M_PI, x)));  // as PyTorch computes it, unreduced
  Value mirror = div(b, k(b, M_PI * M_PI, x), mul(b, s, s));
  Value y = sel(b, reflect, sub(b, k(b, 1, x), x), x);
  Value acc = k(b, 0, x);
  for (int i = 0; i < 6; ++i) {
    acc = add(b, acc, div(b, k(b, 1, y), mul(b, y, y)));
    y = add(b, y, k(b, 1, y));
  }
  Value iyy = div(b, k(b, 1, y), mul(b, y, y));
  Value series = sub(b, k(b, 1.0 / 30, y), mul(b, iyy, k(b, 1.0 / 42, y)));
  series = sub(b, k(b, 1.0 / 6, y), mul(b, iyy, series));
  series = add(b, add(b, k(b, 1, y), div(b, k(b, 0.5, y), y)), mul(b, iyy, series));
  Value t = add(b, acc, div(b, series, y));
  return sel(b, reflect, sub(b, mirror, t), t);
}

// Hurwitz zeta(s, q) for an integer s >= 2 and q > 0: nine terms of the sum, then Euler-Maclaurin at a = q + 9.
Value hurwitz_zeta_positive(HloBuilder& b, int64_t s, const Value& q) {
  static const double kB2j[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
                                -3617.0 / 510, 43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730};
  Value sum = k(b, 0, q);
  Value a = q;
  for (int i = 0; i < 9; ++i) {
    sum = add(b, sum, integer_pow_const(b, div(b, k(b, 1, a), a), static_cast<uint64_t>(s)));
    a = add(b, a, k(b, 1, a));
  }
  Value ia = div(b, k(b, 1, a), a);
  Value a_s = integer_pow_const(b, ia, static_cast<uint64_t>(s));  // a^-s
  sum = add(b, sum, div(b, mul(b, a_s, a), k(b, static_cast<double>(s - 1), a)));
  sum = add(b, sum, mul(b, a_s, k(b, 0.5, a)));
  // Term j: B_2j / (2j)! * s (s + 1) ... (s + 2j - 2) * a^-(s + 2j - 1).
  Value power = mul(b, a_s, ia);  // a^-(s+1)
  double coef = 1, fact = 1;
  double rising = static_cast<double>(s);
  for (int j = 1; j <= 12; ++j) {
    fact *= (2.0 * j - 1) * (2.0 * j);
    if (j > 1) rising *= static_cast<double>(s + 2 * j - 3) * static_cast<double>(s + 2 * j - 2);
    coef = kB2j[j - 1] / fact * rising;
    sum = add(b, sum, mul(b, power, k(b, coef, a)));
    power = mul(b, power, mul(b, ia, ia));
  }
  return sum;
}

// polygamma(n, x): digamma, trigamma, and for n >= 2 (-1)^(n+1) n! zeta(n + 1, x); below 1/2 by the reflection
// psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)), P_0(c) = c, P_k+1(c) = -(1 + c^2) P_k'(c); +-inf at the poles.
Value polygamma_value(HloBuilder& b, int64_t n, const Value& x) {
  if (n == 0) return digamma_value(b, x);
  if (n == 1) return trigamma_value(b, x);
  double fact = 1;
  for (int64_t i = 2; i <= n; ++i) fact *= static_cast<double>(i);
  double sign = n % 2 == 1 ? 1.0 : -1.0;  // (-1)^(n+1)
  auto psi_positive = [&](const Value& y) { return mul(b, hurwitz_zeta_positive(b, n + 1, y), k(b, sign * fact, y)); };
  Value reflect = lt(b, x, k(b, 0.5, x));
  Value y = sel(b, reflect, sub(b, k(b, 1, x), x), x);
  Value direct = psi_positive(y);
  std::vector<double> p = {0, 1};
  for (int64_t step = 0; step < n; ++step) {
    std::vector<double> d(p.size() > 1 ? p.size() - 1 : 1, 0.0);
    for (size_t i = 1; i < p.size(); ++i) d[i - 1] = static_cast<double>(i) * p[i];
    std::vector<double> next(d.size() + 2, 0.0);
    for (size_t i = 0; i < d.size(); ++i) {
      next[i] -= d[i];
      next[i + 2] -= d[i];
    }
    p = next;
  }
  Value r = unit_remainder(b, x);
  // cot(pi r) as cos/sin near 0 and as +-tan(pi (1/2 - |r|)) near +-1/2, where it is exactly 0 at half-integers.
  Value pr = mul(b, r, k(b, M_PI, r));
  Value ar = abs(b, r);
  Value near_half = mul(b, copysign_value(b, b.unary("stablehlo.tan", mul(b, sub(b, k(b, 0.5, ar), ar), k(b, M_PI, ar))), r),
                        k(b, 1, r));
  Value cot = sel(b, lt(b, ar, k(b, 0.25, ar)), div(b, b.unary("stablehlo.cosine", pr), b.unary("stablehlo.sine", pr)),
                  near_half);
  Value poly = k(b, 0, x);
  for (size_t i = p.size(); i-- > 0;) poly = add(b, mul(b, poly, cot), k(b, p[i], x));
  Value mirrored = sub(b, mul(b, direct, k(b, n % 2 == 0 ? 1.0 : -1.0, x)), mul(b, poly, k(b, std::pow(M_PI, n + 1), x)));
  Value out = sel(b, reflect, mirrored, direct);
  Value pole = land(b, le(b, x, k(b, 0, x)), is_int_valued(b, x));
  out = sel(b, pole, k(b, sign * INFINITY, x), out);
  return sel(b, eq(b, x, k(b, INFINITY, x)), k(b, NAN, x), out);  // as the CPU kernel gives
}

LoweringRule special_unary(const char* name, Value (*fn)(HloBuilder&, const Value&)) {
  return [name, fn](OpContext& c) -> V {
    TORCH_CHECK_NOT_IMPLEMENTED(!is_complex(c.out(0).dtype), "\"", name, "\" is not lowered for complex tensors on tpu");
    require_floating(c, name);
    return {to_result(c, fn(c.b, opmath_operand(c, 0)))};
  };
}

V polygamma_rule(OpContext& c) {  // polygamma(n, self)
  int64_t n = c.integer(0);
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  TensorType o = c.out(0);
  require_floating(c, "polygamma");
  Value x = c.b.convert(c.operand(1, o.dtype, o.dims), opmath_type(o.dtype));
  return {to_result(c, polygamma_value(c.b, n, x))};
}

// XLA's float32 erf_inv is tens of ulps off near +-1, where erf is flat; CPU's float32 answer is within half an ulp.
// float32 is therefore evaluated in float64 and rounded once.
Value erfinv_value(HloBuilder& b, const Value& x_in) {
  const ElementType dtype = x_in.type.dtype;
  const Value x = dtype == ElementType::kF32 ? b.convert(x_in, ElementType::kF64) : x_in;
  Value r = chlo(b, "erf_inv", {x});
  Value one = k(b, 1, x);
  r = sel(b, eq(b, x, one), k(b, INFINITY, x), r);
  r = sel(b, eq(b, x, neg(b, one)), k(b, -INFINITY, x), r);
  r = sel(b, gt(b, abs(b, x), one), k(b, NAN, x), r);
  return dtype == r.type.dtype ? r : b.convert(r, dtype);
}

Value erfc_value(HloBuilder& b, const Value& x) { return chlo(b, "erfc", {x}); }

Value entr_value(HloBuilder& b, const Value& x) {  // -x log x; 0 at 0, -inf below 0
  Value r = neg(b, mul(b, x, log(b, x)));
  r = sel(b, eq(b, x, k(b, 0, x)), k(b, 0, x), r);
  return sel(b, lt(b, x, k(b, 0, x)), k(b, -INFINITY, x), r);
}


// ---- modified Bessel functions I0, I1 and their exponentially scaled forms (Cephes' Chebyshev expansions, as
// PyTorch evaluates them: one series on [0, 8] in x / 2 - 2, one on (8, inf) in 32 / x - 2) ----

// order 0 or 1; `scaled`: times exp(-|x|).
Value bessel_i(HloBuilder& b, const Value& x, int order, bool scaled) {
  Value a = abs(b, x);
  const auto& small_c = order == 0 ? kCephesI0Small : kCephesI1Small;
  const auto& large_c = order == 0 ? kCephesI0Large : kCephesI1Large;
  Value small = clenshaw(b, sub(b, div(b, a, k(b, 2, a)), k(b, 2, a)), small_c);
  if (order == 1) small = mul(b, small, a);
  Value large = div(b, clenshaw(b, sub(b, div(b, k(b, 32, a), a), k(b, 2, a)), large_c), sqrt(b, a));
  Value r = sel(b, le(b, a, k(b, 8, a)), small, large);
  if (!scaled) r = mul(b, exp(b, a), r);
  if (order == 1) r = sel(b, lt(b, x, k(b, 0, x)), neg(b, r), r);
  return r;
}

Value i0_value(HloBuilder& b, const Value& x) { return bessel_i(b, x, 0, false); }
Value i0e_value(HloBuilder& b, const Value& x) { return bessel_i(b, x, 0, true); }
Value i1_value(HloBuilder& b, const Value& x) { return bessel_i(b, x, 1, false); }
Value i1e_value(HloBuilder& b, const Value& x) { return bessel_i(b, x, 1, true); }

}  // namespace

void add_special_rules(Rows& rows) {
  rows.push_back(promoting({0}, {{"lgamma", "lgamma_", "lgamma.out"}, special_unary("lgamma", lgamma_value)}));
  rows.push_back(promoting({0}, {{"digamma", "digamma_", "digamma.out"}, special_unary("digamma", digamma_value)}));
  rows.push_back(promoting({1}, {{"polygamma", "polygamma.out"}, polygamma_rule}));
  rows.push_back(promoting({0}, {{"erfinv", "erfinv_", "erfinv.out"}, special_unary("erfinv", erfinv_value)}));
  rows.push_back(promoting({0}, {{"erfc", "erfc_", "erfc.out"}, special_unary("erfc", erfc_value)}));
  rows.push_back(promoting({0}, {{"special_entr", "special_entr.out"}, special_unary("special_entr", entr_value)}));
  rows.push_back(promoting({0}, {{"i0", "i0_", "i0.out"}, special_unary("i0", i0_value)}));
  rows.push_back(promoting({0}, {{"special_i0e", "special_i0e.out"}, special_unary("special_i0e", i0e_value)}));
  rows.push_back(promoting({0}, {{"special_i1", "special_i1.out"}, special_unary("special_i1", i1_value)}));
  rows.push_back(promoting({0}, {{"special_i1e", "special_i1e.out"}, special_unary("special_i1e", i1e_value)}));
}

}  // namespace torch_tpu
