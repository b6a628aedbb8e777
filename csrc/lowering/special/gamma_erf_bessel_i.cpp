// Special functions: the gamma family (lgamma, digamma, polygamma), the erf family (erfc, erfinv), the modified
// Bessel functions i0/i0e/i1/i1e and torch.special's entr. Computed in float32 for float32/float16/bfloat16 results and in float64 for float64, with
// PyTorch's values at poles and edges.
#include <cmath>
#include <vector>

#include "lowering/hlo_math.h"
#include "lowering/math.h"
#include "lowering/numerics.h"
#include "lowering/op_context.h"
#include "lowering/rule_helpers.h"

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

const std::vector<double> kI0eSmall = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16, 1.71539128555513303061E-15,
    -1.16853328779934516808E-14, 7.67618549860493561688E-14, -4.85644678311192946090E-13, 2.95505266312963983461E-12,
    -1.72682629144155570723E-11, 9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7, 1.11738753912010371815E-6,
    -4.41673835845875056359E-6, 1.64484480707288970893E-5, -5.75419501008210370398E-5, 1.88502885095841655729E-4,
    -5.76375574538582365885E-4, 1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2, 1.71620901522208775349E-1,
    -3.04682672343198398683E-1, 6.76795274409476084995E-1};
const std::vector<double> kI0eLarge = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17, 3.46122286769746109310E-17,
    -2.82762398051658348494E-16, -3.42548561967721913462E-16, 1.77256013305652638360E-15, 3.81168066935262242075E-15,
    -9.55484669882830764870E-15, -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11, -3.14991652796324136454E-11,
    1.18891471078464383424E-11, 4.94060238822496958910E-10, 3.39623202570838634515E-9, 2.26666899049817806459E-8,
    2.04891858946906374183E-7, 2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1};
const std::vector<double> kI1eSmall = {
    2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16, -1.10559694773538630805E-15,
    7.60068429473540693410E-15, -5.04218550472791168711E-14, 3.22379336594557470981E-13, -1.98397439776494371520E-12,
    1.17361862988909016308E-11, -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7, -8.56872026469545474066E-7,
    3.47025130813767847674E-6, -1.32731636560394358279E-5, 4.78156510755005422638E-5, -1.61760815825896745588E-4,
    5.12285956168575772895E-4, -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
    2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1, -1.76416518357834055153E-1,
    2.52587186443633654823E-1};
const std::vector<double> kI1eLarge = {
    7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17, -3.20952592199342395980E-17,
    2.96262899764595013876E-16, 3.30820231092092828324E-16, -1.88035477551078244854E-15, -3.81440307243700780478E-15,
    1.04202769841288027642E-14, 4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11, 3.25260358301548823856E-11,
    -1.89749581235054123450E-11, -5.58974346219658380687E-10, -3.83538038596423702205E-9, -2.63146884688951950684E-8,
    -2.51223623787020892529E-7, -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
    7.78576235018280120474E-1};

// Clenshaw's recurrence for the Chebyshev series with `coeffs` (highest order first) at y.
Value chebyshev(HloBuilder& b, const Value& y, const std::vector<double>& coeffs) {
  Value b0 = k(b, coeffs[0], y), b1 = k(b, 0, y), b2 = k(b, 0, y);
  for (size_t i = 1; i < coeffs.size(); ++i) {
    b2 = b1;
    b1 = b0;
    b0 = add(b, sub(b, mul(b, y, b1), b2), k(b, coeffs[i], y));
  }
  return mul(b, k(b, 0.5, y), sub(b, b0, b2));
}

// order 0 or 1; `scaled`: times exp(-|x|).
Value bessel_i(HloBuilder& b, const Value& x, int order, bool scaled) {
  Value a = abs(b, x);
  const auto& small_c = order == 0 ? kI0eSmall : kI1eSmall;
  const auto& large_c = order == 0 ? kI0eLarge : kI1eLarge;
  Value small = chebyshev(b, sub(b, div(b, a, k(b, 2, a)), k(b, 2, a)), small_c);
  if (order == 1) small = mul(b, small, a);
  Value large = div(b, chebyshev(b, sub(b, div(b, k(b, 32, a), a), k(b, 2, a)), large_c), sqrt(b, a));
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
  rows.push_back({{"lgamma", "lgamma_", "lgamma.out"}, special_unary("lgamma", lgamma_value)});
  rows.push_back({{"digamma", "digamma_", "digamma.out"}, special_unary("digamma", digamma_value)});
  rows.push_back({{"polygamma", "polygamma.out"}, polygamma_rule});
  rows.push_back({{"erfinv", "erfinv_", "erfinv.out"}, special_unary("erfinv", erfinv_value)});
  rows.push_back({{"erfc", "erfc_", "erfc.out"}, special_unary("erfc", erfc_value)});
  rows.push_back({{"special_entr", "special_entr.out"}, special_unary("special_entr", entr_value)});
  rows.push_back({{"i0", "i0_", "i0.out"}, special_unary("i0", i0_value)});
  rows.push_back({{"special_i0e", "special_i0e.out"}, special_unary("special_i0e", i0e_value)});
  rows.push_back({{"special_i1", "special_i1.out"}, special_unary("special_i1", i1_value)});
  rows.push_back({{"special_i1e", "special_i1e.out"}, special_unary("special_i1e", i1e_value)});
}

}  // namespace torch_tpu
