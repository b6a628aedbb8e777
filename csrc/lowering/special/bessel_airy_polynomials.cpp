// torch.special's Bessel, Airy and orthogonal-polynomial functions, evaluated the way PyTorch's CPU kernels are
// (Cephes' rational and Chebyshev approximations, the three-term recurrences with their special cases), in float64 for
// float64 results and in float32 otherwise. Iterations whose count depends on the data (a polynomial's degree n, the
// Airy power series' convergence) run in a stablehlo.while that stops when no element still needs a step, so no
// value is read on the host.
#include <cmath>
#include <functional>
#include <vector>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"
#include "lowering/special/cephes.h"

namespace torch_tpu {

using namespace hm;  // NOLINT: formula spellings
using V = std::vector<Value>;

// ---- shared pieces ----

V masked_while(HloBuilder& b, const V& state, const Value& running, const MaskedStep& step) {
  std::vector<int64_t> dims = running.type.dims;
  int64_t numel = 1;
  for (int64_t d : dims) numel *= d;
  std::vector<int64_t> flat{numel};
  V init{b.constant(0, ElementType::kS64), b.reshape(running, flat)};
  for (const Value& v : state) init.push_back(b.reshape(v, flat));
  std::vector<TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  std::string cond = b.region(types, [&](HloBuilder& r, const V& a) {
    return V{r.reduce(a[1], r.constant(0, ElementType::kPred), {0}, "stablehlo.or")};
  });
  std::string body = b.region(types, [&](HloBuilder& r, const V& a) {
    V s(a.begin() + 2, a.end());
    Value run = a[1];
    auto [next, still] = step(r, a[0], s, run);
    V out{r.binary("stablehlo.add", a[0], r.constant(1, ElementType::kS64)), land(r, run, still)};
    for (size_t i = 0; i < s.size(); ++i) out.push_back(sel(r, run, next[i], s[i]));
    return out;
  });
  V res = b.op("stablehlo.while", init, types, "", {cond, body});
  V out;
  for (size_t i = 2; i < res.size(); ++i) out.push_back(b.reshape(res[i], dims));
  return out;
}

void require_f32_f64(OpContext& c, const char* name) {
  ElementType t = c.out(0).dtype;
  if (t == ElementType::kF32 || t == ElementType::kF64) return;
  c10::ScalarType st = c.inspect(0).isTensor() ? c.inspect(0).toTensor().scalar_type()
                                               : c.inspect(1).toTensor().scalar_type();
  if (t == ElementType::kBF16) st = c10::ScalarType::BFloat16;
  if (t == ElementType::kF16) st = c10::ScalarType::Half;
  TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", name, "\" not implemented for '", c10::toString(st), "'");
}

namespace {

// ---- orthogonal polynomials of an integer degree n given as a (floating) tensor ----

// The degree as the CPU kernels take it: static_cast<int64_t>(n), with NaN and out-of-range n (whose cast yields
// INT64_MIN on x86) as a negative degree.
Value degree(HloBuilder& b, const Value& n) {
  Value ok = land(b, eq(b, n, n), lt(b, abs(b, n), k(b, 9.2e18, n)));
  return sel(b, ok, b.convert(n, ElementType::kS64), b.constant(-1, ElementType::kS64, n.type.dims));
}

Value as_float(HloBuilder& b, const Value& i, const Value& like) { return b.convert(i, like.type.dtype); }
Value is_even(HloBuilder& b, const Value& n) {
  Value one = b.constant(1, ElementType::kS64, n.type.dims);
  return eq(b, b.binary("stablehlo.and", n, one), b.constant(0, ElementType::kS64, n.type.dims));
}
Value s64(HloBuilder& b, double v, const Value& like) { return b.constant(v, ElementType::kS64, like.type.dims); }

using Recur = std::function<Value(HloBuilder&, const Value& j, const Value& x, const Value& p, const Value& q)>;

// p_0 = p0, p_1 = q0 and p_{j+1} = step(j, x, p_{j-1}, p_j) for j = 1 .. n - 1 (elements where `use` holds and
// n >= 2); stops for an element once its p_j is NaN, as the CPU loops do. Returns p_n.
Value recurrence(HloBuilder& b, const Value& x, const Value& n, const Value& use, const Value& p0, const Value& q0,
                 const Recur& step) {
  Value run = land(b, use, ge(b, n, s64(b, 2, n)));
  V res = masked_while(b, {x, n, p0, q0}, run, [&](HloBuilder& r, const Value& it, const V& s, const Value&) {
    Value j = r.broadcast_to(r.binary("stablehlo.add", it, r.constant(1, ElementType::kS64)), s[1].type.dims);
    Value nxt = step(r, as_float(r, j, s[0]), s[0], s[2], s[3]);
    Value j1 = r.binary("stablehlo.add", j, s64(r, 1, j));
    Value more = land(r, lt(r, j1, s[1]), lnot(r, isnan(r, nxt)));
    return std::pair<V, Value>{V{s[0], s[1], s[3], nxt}, more};
  });
  return res[3];
}

// acosf near glibc's float32 result, so that n * acos(x) in the closed forms mostly gets the CPU's last bit, which
// matters near a zero of the polynomial for large n. Not always: glibc's acosf is not correctly rounded, and XLA-CPU
// contracts a * b + c into fused multiply-adds inside a program, which rounds once where C rounds twice.
Value acos_f32(HloBuilder& b, const Value& x) {
  auto c = [&](double v) { return k(b, v, x); };
  auto pq = [&](const Value& z) {
    Value p = add(b, c(7.9153501429e-04), mul(b, z, c(3.4793309169e-05)));
    p = add(b, c(-4.0055535734e-02), mul(b, z, p));
    p = add(b, c(2.0121252537e-01), mul(b, z, p));
    p = add(b, c(-3.2556581497e-01), mul(b, z, p));
    p = mul(b, z, add(b, c(1.6666667163e-01), mul(b, z, p)));
    Value q = add(b, c(-6.8828397989e-01), mul(b, z, c(7.7038154006e-02)));
    q = add(b, c(2.0209457874e+00), mul(b, z, q));
    q = add(b, c(-2.4033949375e+00), mul(b, z, q));
    q = add(b, c(1), mul(b, z, q));
    return div(b, p, q);
  };
  const double pio2_hi = 1.5707962513e+00, pio2_lo = 7.5497894159e-08;
  Value ax = abs(b, x);
  // |x| < 1/2 as fdlibm; outside, the correctly rounded value (float64, rounded once): fdlibm's float sqrt steps there,
  // under XLA-CPU's approximate float32 sqrt and fused multiply-adds, strayed further from glibc near x = -1.
  Value r0 = pq(mul(b, x, x));
  Value mid = sub(b, c(pio2_hi), sub(b, x, sub(b, c(pio2_lo), mul(b, x, r0))));
  mid = sel(b, le(b, ax, c(std::ldexp(1.0, -26))), add(b, c(pio2_hi), c(pio2_lo)), mid);
  Value outer = b.convert(chlo(b, "acos", {b.convert(x, ElementType::kF64)}), ElementType::kF32);
  Value r = sel(b, lt(b, ax, c(0.5)), mid, outer);
  return sel(b, gt(b, ax, c(1)), c(NAN), r);
}

// sin/cos of a float32 value through float64, rounded once (as glibc's sinf/cosf, correctly rounded in practice), for
// the large arguments n * acos(x) of the closed forms (XLA's float32 range reduction is coarser there); acos as acosf.
Value trig(HloBuilder& b, const char* name, const Value& v) {
  bool is_acos = std::string(name) == "acos";
  if (v.type.dtype == ElementType::kF32 && is_acos) return acos_f32(b, v);
  auto apply = [&](const Value& a) { return is_acos ? chlo(b, "acos", {a}) : b.unary(std::string("stablehlo.") + name, a); };
  if (v.type.dtype != ElementType::kF32) return apply(v);
  return b.convert(apply(b.convert(v, ElementType::kF64)), ElementType::kF32);
}

Value cheb_step(HloBuilder& r, const Value&, const Value& y, const Value& p, const Value& q) {
  return sub(r, mul(r, add(r, y, y), q), p);
}

// Chebyshev T, U, V, W (kind 0..3) at y; `shifted`: the shifted polynomials, y = 2x - 1.
Value chebyshev_poly(HloBuilder& b, const Value& x, const Value& nf, int kind, bool shifted) {
  Value n = degree(b, nf);
  Value one = k(b, 1, x);
  Value y = shifted ? sub(b, add(b, x, x), one) : x;
  Value fn = as_float(b, n, x);
  Value fn1 = as_float(b, b.binary("stablehlo.add", n, s64(b, 1, n)), x);
  Value f2n1 = as_float(b, b.binary("stablehlo.add", b.binary("stablehlo.add", n, n), s64(b, 1, n)), x);
  Value even = is_even(b, n);
  auto pm = [&](const Value& v) { return sel(b, even, v, neg(b, v)); };  // (-1)^n v
  // Values at y = 1 and y = -1 (x = 1 and x = 0 for the shifted ones).
  Value at_plus[] = {one, fn1, one, f2n1};
  Value at_minus[] = {pm(one), pm(fn1), pm(f2n1), pm(one)};
  Value plus = eq(b, x, one);
  Value minus = shifted ? eq(b, x, k(b, 0, x)) : eq(b, x, k(b, -1, x));
  // Closed forms for |y| < 1 above a degree threshold.
  int threshold = shifted ? (kind == 3 ? 4 : 6) : (kind == 0 ? 6 : 8);
  Value th = trig(b, "acos", y);
  Value closed;
  if (kind == 0) {
    closed = trig(b, "cosine", mul(b, fn, th));
  } else if (kind == 1) {
    Value s = trig(b, "sine", th);
    Value ratio = div(b, trig(b, "sine", mul(b, fn1, th)), s);
    Value alt = div(b, mul(b, fn1, trig(b, "cosine", mul(b, fn1, th))), y);
    closed = sel(b, ne(b, s, k(b, 0, s)), ratio, alt);
  } else if (kind == 2) {
    Value half = div(b, th, k(b, 2, th));
    Value ratio = div(b, trig(b, "cosine", mul(b, add(b, fn, k(b, 0.5, fn)), th)), trig(b, "cosine", half));
    closed = sel(b, ne(b, trig(b, "sine", half), one), ratio, pm(f2n1));
  } else {
    Value half = div(b, th, k(b, 2, th));
    Value ratio = div(b, trig(b, "sine", mul(b, add(b, fn, k(b, 0.5, fn)), th)), trig(b, "sine", half));
    // the unshifted kernel gives 2n + 1 for x > 0 here, the shifted one only (-1)^n
    Value edge = shifted ? pm(one) : sel(b, gt(b, x, k(b, 0, x)), f2n1, pm(one));
    closed = sel(b, ne(b, trig(b, "cosine", half), one), ratio, edge);
  }
  Value use_closed = land(b, gt(b, n, s64(b, threshold, n)), lt(b, abs(b, y), one));
  Value first[] = {y, add(b, y, y), sub(b, add(b, y, y), one), add(b, add(b, y, y), one)};
  Value q0 = first[kind];
  Value negative = lt(b, n, s64(b, 0, n));
  Value edge_pt = lor(b, plus, minus);
  Value use = lnot(b, lor(b, lor(b, negative, edge_pt), use_closed));
  Value r = recurrence(b, y, n, use, one, q0, cheb_step);
  r = sel(b, eq(b, n, s64(b, 0, n)), one, r);
  r = sel(b, use_closed, closed, r);
  r = sel(b, minus, at_minus[kind], r);
  r = sel(b, plus, at_plus[kind], r);
  return sel(b, negative, k(b, 0, x), r);
}

Value hermite(HloBuilder& b, const Value& x, const Value& nf, bool physicists) {
  Value n = degree(b, nf);
  Value one = k(b, 1, x);
  Value q0 = physicists ? add(b, x, x) : x;
  Value limit = s64(b, x.type.dtype == ElementType::kF64 ? 512 : 128, n);
  Value too_big = gt(b, n, limit);
  Value negative = lt(b, n, s64(b, 0, n));
  Value use = lnot(b, lor(b, negative, too_big));
  auto step = [physicists](HloBuilder& h, const Value& j, const Value& y, const Value& p, const Value& q) {
    if (physicists) return sub(h, mul(h, add(h, y, y), q), mul(h, add(h, j, j), p));  // k = 2j
    return sub(h, mul(h, y, q), mul(h, j, p));
  };
  Value r = recurrence(b, x, n, use, one, q0, step);
  r = sel(b, eq(b, n, s64(b, 0, n)), one, r);
  r = sel(b, too_big, k(b, NAN, x), r);
  return sel(b, negative, k(b, 0, x), r);
}

Value laguerre(HloBuilder& b, const Value& x, const Value& nf) {
  Value n = degree(b, nf);
  Value one = k(b, 1, x);
  Value negative = lt(b, n, s64(b, 0, n));
  Value zero_x = eq(b, abs(b, x), k(b, 0, x));
  Value use = lnot(b, lor(b, negative, zero_x));
  auto step = [](HloBuilder& h, const Value& j, const Value& y, const Value& p, const Value& q) {
    Value c = add(h, add(h, j, j), sub(h, k(h, 1, y), y));
    return div(h, sub(h, mul(h, c, q), mul(h, j, p)), add(h, j, k(h, 1, j)));
  };
  Value r = recurrence(b, x, n, use, one, sub(b, one, x), step);
  r = sel(b, eq(b, n, s64(b, 0, n)), one, r);
  r = sel(b, zero_x, one, r);
  return sel(b, negative, k(b, 0, x), r);
}

Value legendre(HloBuilder& b, const Value& x, const Value& nf) {
  Value n = degree(b, nf);
  Value one = k(b, 1, x);
  Value negative = lt(b, n, s64(b, 0, n));
  Value unit = eq(b, abs(b, x), one);
  Value use = lnot(b, lor(b, negative, unit));
  Value r = recurrence(b, x, n, use, one, x, [](HloBuilder& h, const Value& j, const Value& y, const Value& p,
                                               const Value& q) {
    Value c = add(h, add(h, j, j), k(h, 1, j));
    return div(h, sub(h, mul(h, mul(h, c, y), q), mul(h, j, p)), add(h, j, k(h, 1, j)));
  });
  r = sel(b, eq(b, n, s64(b, 0, n)), one, r);
  Value unit_val = sel(b, lor(b, gt(b, x, k(b, 0, x)), is_even(b, n)), one, neg(b, one));
  r = sel(b, unit, unit_val, r);
  return sel(b, negative, k(b, 0, x), r);
}

using PolyFn = std::function<Value(HloBuilder&, const Value& x, const Value& n)>;

LoweringRule poly_rule(const std::string& name, PolyFn fn) {
  return [name, fn](OpContext& c) -> V {
    require_f32_f64(c, name.c_str());
    TensorType o = c.out(0);
    Value x = c.operand(0, o.dtype, o.dims);
    Value n = c.operand(1, o.dtype, o.dims);
    return {fn(c.b, x, n)};
  };
}

std::vector<std::string> poly_names(const std::string& op) {
  return {op, op + ".out", op + ".x_scalar", op + ".x_scalar_out", op + ".n_scalar", op + ".n_scalar_out"};
}

}  // namespace

void add_polynomial_rules(std::vector<LoweringRow>& rows) {
  const char* kinds = "tuvw";
  for (int kind = 0; kind < 4; ++kind) {
    for (bool shifted : {false, true}) {
      std::string short_name = std::string(shifted ? "shifted_" : "") + "chebyshev_polynomial_" + kinds[kind];
      std::string base = "special_" + short_name;
      rows.push_back({poly_names(base), poly_rule(short_name, [kind, shifted](HloBuilder& b, const Value& x,
                                                                                     const Value& n) {
                        return chebyshev_poly(b, x, n, kind, shifted);
                      })});
    }
  }
  rows.push_back({poly_names("special_hermite_polynomial_h"),
                  poly_rule("hermite_polynomial_h", [](HloBuilder& b, const Value& x, const Value& n) {
                    return hermite(b, x, n, true);
                  })});
  rows.push_back({poly_names("special_hermite_polynomial_he"),
                  poly_rule("hermite_polynomial_he", [](HloBuilder& b, const Value& x, const Value& n) {
                    return hermite(b, x, n, false);
                  })});
  rows.push_back({poly_names("special_laguerre_polynomial_l"), poly_rule("laguerre_polynomial_l", laguerre)});
  rows.push_back({poly_names("special_legendre_polynomial_p"), poly_rule("legendre_polynomial_p", legendre)});
}

// ---- Airy Ai and the Bessel functions (Cephes' rational approximations) ----

namespace {

const std::vector<double> kAiryAN = {
    3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01, 1.68089224934630576269e+02,
    1.59756391350164413639e+02, 7.05360906840444183113e+01, 1.40264691163389668864e+01, 9.99999999999999995305e-01};
const std::vector<double> kAiryAD = {
    5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01, 1.77318088145400459522e+02,
    1.64234692871529701831e+02, 7.14778400825575695274e+01, 1.40959135607834029598e+01, 1.00000000000000000470e+00};
const std::vector<double> kAiryAFN = {
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
const std::vector<double> kAiryAFD = {
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01, 9.18707402907259625840e+00,
    1.47529146771666414581e+00, 1.15687173795188044134e-01, 4.40291641615211203805e-03, 7.54720348287414296618e-05,
    4.51850092970580378464e-07};
const std::vector<double> kAiryAGN = {
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00, 9.39169229816650230044e-01,
    3.51465656105547619242e-01, 6.33888919628925490927e-02, 5.85804113048388458567e-03, 2.82851600836737019778e-04,
    6.98793669997260967291e-06, 8.11789239554389293311e-08, 3.41551784765923618484e-10};
const std::vector<double> kAiryAGD = {
    9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01, 5.47686069422975497931e+00,
    9.54293611618961883998e-01, 8.64580826352392193095e-02, 4.12656523824222607191e-03, 1.01259085116509135510e-04,
    1.17166733214413521882e-06, 4.91834570062930015649e-09};
const std::vector<double> kJ0PP = {
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00, 5.44725003058768775090e+00,
    8.74716500199817011941e+00, 5.30324038235394892183e+00, 9.99999999999999997821e-01};
const std::vector<double> kJ0PQ = {
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00, 5.47097740330417105182e+00,
    8.76190883237069594232e+00, 5.30605288235394617618e+00, 1.00000000000000000218e+00};
const std::vector<double> kJ0QP = {
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00};
const std::vector<double> kJ0QQ = {
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03, 7.24046774195652478189e+03,
    5.93072701187316984827e+03, 2.06209331660327847417e+03, 2.42005740240291393179e+02};
const std::vector<double> kJ0RP = {
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14, 9.70862251047306323952e+15};
const std::vector<double> kJ0RQ = {
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07, 1.11855537045356834862e+10,
    2.11277520115489217587e+12, 3.10518229857422583814e+14, 3.18121955943204943306e+16, 1.71086294081043136091e+18};
const std::vector<double> kJ1PP = {
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00, 5.11207951146807644818e+00,
    8.42404590141772420927e+00, 5.21451598682361504063e+00, 1.00000000000000000254e+00};
const std::vector<double> kJ1PQ = {
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00, 5.07386386128601488557e+00,
    8.39985554327604159757e+00, 5.20982848682361821619e+00, 9.99999999999999997461e-01};
const std::vector<double> kJ1QP = {
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01, 3.66779609360150777800e+02,
    7.10856304998926107277e+02, 5.97489612400613639965e+02, 2.11688757100572135698e+02, 2.52070205858023719784e+01};
const std::vector<double> kJ1QQ = {
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03, 9.56231892404756170795e+03,
    7.99704160447350683650e+03, 2.82619278517639096600e+03, 3.36093607810698293419e+02};
const std::vector<double> kJ1RP = {
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13, 3.68295732863852883286e+15};
const std::vector<double> kJ1RQ = {
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07, 2.21511595479792499675e+10,
    4.74914122079991414898e+12, 7.84369607876235854894e+14, 8.95222336184627338078e+16, 5.32278620332680085395e+18};
const std::vector<double> kY0YP = {
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09, -9.82136065717911466409e+11,
    8.75906394395366999549e+13, -3.46628303384729719441e+15, 4.42733268572569800351e+16, -1.84950800436986690637e+16};
const std::vector<double> kY0YQ = {
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08, 8.64002487103935000337e+10,
    2.02979612750105546709e+13, 3.17157752842975028269e+15, 2.50596256172653059228e+17};
const std::vector<double> kY1YP = {
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14, -8.12770255501325109621e+15,
    2.02439475713594898196e+17, -7.78877196265950026825e+17};
const std::vector<double> kY1YQ = {
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07, 1.87601316108706159478e+10,
    3.88231277496238566008e+12, 6.20557727146953693363e+14, 6.87141087355300489866e+16, 3.97270608116560655612e+18};
const std::vector<double> kK0A = {
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11, 1.90451637722020886025e-09,
    2.53479107902614945675e-07, 2.28621210311945178607e-05, 1.26461541144692592338e-03, 3.59799365153615016266e-02,
    3.44289899924628486886e-01, -5.35327393233902768720e-01};
const std::vector<double> kK0B = {
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17, -1.67823109680541210385e-16,
    5.51205597852431940784e-16, -1.84859337734377901440e-15, 6.34007647740507060557e-15, -2.22751332699166985548e-14,
    8.03289077536357521100e-14, -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10, -1.69753450938905987466e-09,
    8.57403401741422608519e-09, -4.66048989768794782956e-08, 2.76681363944501510342e-07, -1.83175552271911948767e-06,
    1.39498137188764993662e-05, -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00};
const std::vector<double> kK1A = {
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00};
const std::vector<double> kK1B = {
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17, 1.83809354436663880070e-16,
    -6.05704724837331885336e-16, 2.03870316562433424052e-15, -7.01983709041831346144e-15, 2.47715442448130437068e-14,
    -8.97670518232499435011e-14, 3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10, 2.01504975519703286596e-09,
    -1.03457624656780970260e-08, 5.74108412545004946722e-08, -3.50196060308781257119e-07, 2.40648494783721712015e-06,
    -1.93619797416608296024e-05, 1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00};

constexpr double kPi4 = 0.785398163397448309615660845819875721;      // pi / 4
constexpr double k3Pi4 = 2.356194490192344928846982537459627163;     // 3 pi / 4
constexpr double kSqrt2Pi = 0.797884560802865355879892119868763737;  // sqrt(2 / pi)
constexpr double k2Pi = 0.636619772367581343075535053490057448;      // 2 / pi

double epsilon_of(const Value& x) {
  return x.type.dtype == ElementType::kF64 ? 2.220446049250313e-16 : 1.1920928955078125e-7;
}

Value airy_ai(HloBuilder& b, const Value& x) {
  Value one = k(b, 1, x);
  // x < -2.09: the oscillating asymptotic form.
  Value mx = neg(b, x);
  Value w = div(b, mul(b, mul(b, k(b, -2, x), x), sqrt(b, mx)), k(b, 3, x));
  Value z = div(b, one, w);
  Value zz = mul(b, z, z);
  Value afn = horner(b, zz, kAiryAFN), afd = horner(b, zz, kAiryAFD);
  Value agn = horner(b, zz, kAiryAGN), agd = horner(b, zz, kAiryAGD);
  Value t = add(b, w, k(b, 0.25 * M_PI, x));
  Value osc = sub(b, mul(b, b.unary("stablehlo.sine", t), add(b, one, div(b, mul(b, zz, afn), afd))),
                  mul(b, b.unary("stablehlo.cosine", t), div(b, mul(b, z, agn), agd)));
  osc = mul(b, div(b, k(b, 5.64189583547756286948e-01, x), sqrt(b, sqrt(b, mx))), osc);
  // x >= 2.09: the decaying asymptotic form.
  Value zeta = div(b, mul(b, mul(b, k(b, 2, x), x), sqrt(b, x)), k(b, 3, x));
  Value iz = div(b, one, zeta);
  Value an = horner(b, iz, kAiryAN), ad = horner(b, iz, kAiryAD);
  Value decay = div(b, mul(b, k(b, 5.64189583547756286948e-01, x), div(b, an, ad)),
                    mul(b, mul(b, k(b, 2, x), sqrt(b, sqrt(b, x))), exp(b, zeta)));
  // In between: the power series, summed until a term is below epsilon relative to f.
  Value in_series = land(b, ge(b, x, k(b, -2.09, x)), lt(b, x, k(b, 2.09, x)));
  double eps = epsilon_of(x);
  V st = masked_while(b, {mul(b, mul(b, x, x), x), one, x, one, one, x}, in_series,
                      [eps](HloBuilder& r, const Value&, const V& s, const Value&) {
                        const Value& z3 = s[0];
                        Value f = s[1], g = s[2], kk = s[3], m = s[4], n = s[5];
                        Value one_r = k(r, 1, z3);
                        m = mul(r, m, z3);
                        kk = add(r, kk, one_r);
                        m = div(r, m, kk);
                        n = mul(r, n, z3);
                        kk = add(r, kk, one_r);
                        n = div(r, n, kk);
                        m = div(r, m, kk);
                        f = add(r, f, m);
                        kk = add(r, kk, one_r);
                        n = div(r, n, kk);
                        g = add(r, g, n);
                        Value tt = abs(r, div(r, m, f));
                        return std::pair<V, Value>{V{z3, f, g, kk, m, n}, gt(r, tt, k(r, eps, tt))};
                      });
  Value series = sub(b, mul(b, k(b, 0.355028053887817239260, x), st[1]),
                     mul(b, k(b, 0.258819403792806798405, x), st[2]));
  Value r = sel(b, ge(b, x, k(b, 2.09, x)), decay, series);
  r = sel(b, lt(b, x, k(b, -2.09, x)), osc, r);
  r = sel(b, gt(b, x, k(b, 103.892, x)), k(b, 0, x), r);
  return sel(b, eq(b, abs(b, x), k(b, INFINITY, x)), k(b, NAN, x), r);
}

// The large-argument form shared by J0/Y0 (order 0) and J1/Y1 (order 1); `second`: Y (sin/cos swapped, +).
Value bessel_large(HloBuilder& b, const Value& x, int order, bool second) {
  Value w = order == 0 ? div(b, k(b, 25, x), mul(b, x, x)) : mul(b, div(b, k(b, 5, x), x), div(b, k(b, 5, x), x));
  Value pp = horner(b, w, order == 0 ? kJ0PP : kJ1PP), pq = horner(b, w, order == 0 ? kJ0PQ : kJ1PQ);
  Value qp = horner(b, w, order == 0 ? kJ0QP : kJ1QP), qq = horner(b, w, order == 0 ? kJ0QQ : kJ1QQ);
  Value arg = sub(b, x, k(b, order == 0 ? kPi4 : k3Pi4, x));
  Value c = b.unary("stablehlo.cosine", arg), s = b.unary("stablehlo.sine", arg);
  Value lead = mul(b, div(b, pp, pq), second ? s : c);
  Value tail = mul(b, mul(b, div(b, k(b, 5, x), x), div(b, qp, qq)), second ? c : s);
  Value sum = second ? add(b, lead, tail) : sub(b, lead, tail);
  return div(b, mul(b, sum, k(b, kSqrt2Pi, x)), sqrt(b, x));
}

Value bessel_j0(HloBuilder& b, const Value& x0) {
  Value x = abs(b, x0);
  Value xx = mul(b, x, x);
  Value tiny = sub(b, k(b, 1, x), div(b, xx, k(b, 4, x)));
  Value roots = mul(b, sub(b, xx, k(b, 5.78318596294678452118e+00, x)),  // squares of the first two zeros
                    sub(b, xx, k(b, 3.04712623436620863991e+01, x)));
  Value small = div(b, mul(b, roots, horner(b, xx, kJ0RP)), horner(b, xx, kJ0RQ));
  small = sel(b, lt(b, x, k(b, 1e-5, x)), tiny, small);
  return sel(b, le(b, x, k(b, 5, x)), small, bessel_large(b, x, 0, false));
}

Value bessel_j1_positive(HloBuilder& b, const Value& x) {
  Value xx = mul(b, x, x);
  Value small = mul(b, div(b, horner(b, xx, kJ1RP), horner(b, xx, kJ1RQ)), x);
  small = mul(b, mul(b, small, sub(b, xx, k(b, 1.46819706421238932572e+01, x))),
              sub(b, xx, k(b, 4.92184563216946036703e+01, x)));
  return sel(b, le(b, x, k(b, 5, x)), small, bessel_large(b, x, 1, false));
}

Value bessel_j1(HloBuilder& b, const Value& x) {
  Value r = bessel_j1_positive(b, abs(b, x));
  return sel(b, lt(b, x, k(b, 0, x)), neg(b, r), r);
}

Value bessel_y0(HloBuilder& b, const Value& x) {
  Value xx = mul(b, x, x);
  Value small = add(b, div(b, horner(b, xx, kY0YP), horner(b, xx, kY0YQ)),
                    mul(b, mul(b, k(b, k2Pi, x), log(b, x)), bessel_j0(b, x)));
  small = sel(b, lt(b, x, k(b, 0, x)), k(b, NAN, x), small);
  small = sel(b, eq(b, x, k(b, 0, x)), k(b, -INFINITY, x), small);
  return sel(b, le(b, x, k(b, 5, x)), small, bessel_large(b, x, 0, true));
}

Value bessel_y1(HloBuilder& b, const Value& x) {
  Value xx = mul(b, x, x);
  Value inner = sub(b, mul(b, bessel_j1(b, x), log(b, x)), div(b, k(b, 1, x), x));
  Value small = add(b, mul(b, x, div(b, horner(b, xx, kY1YP), horner(b, xx, kY1YQ))), mul(b, k(b, k2Pi, x), inner));
  small = sel(b, lt(b, x, k(b, 0, x)), k(b, NAN, x), small);
  small = sel(b, eq(b, x, k(b, 0, x)), k(b, -INFINITY, x), small);
  return sel(b, le(b, x, k(b, 5, x)), small, bessel_large(b, x, 1, true));
}

// I0 and I1 (not scaled): exp(|x|) times a Chebyshev series in |x| / 2 - 2 up to 8, in 32 / |x| - 2 beyond.
Value modified_i(HloBuilder& b, const Value& x, int order) {
  Value a = abs(b, x);
  Value e = exp(b, a);
  Value cs = clenshaw(b, sub(b, div(b, a, k(b, 2, a)), k(b, 2, a)), order == 0 ? kCephesI0Small : kCephesI1Small);
  Value cl = clenshaw(b, sub(b, div(b, k(b, 32, a), a), k(b, 2, a)), order == 0 ? kCephesI0Large : kCephesI1Large);
  Value small = order == 0 ? mul(b, e, cs) : mul(b, mul(b, cs, a), e);
  Value large = div(b, mul(b, e, cl), sqrt(b, a));
  Value r = sel(b, le(b, a, k(b, 8, a)), small, large);
  if (order == 1) r = sel(b, lt(b, x, k(b, 0, x)), neg(b, r), r);
  return r;
}

// K0 and K1, `scaled`: times exp(x). A series in x^2 - 2 with the I term up to 2, a Chebyshev series in 8 / x - 2
// beyond; +inf at 0, NaN below.
Value modified_k(HloBuilder& b, const Value& x, int order, bool scaled) {
  Value half = mul(b, k(b, 0.5, x), x);
  Value cs = clenshaw(b, sub(b, mul(b, x, x), k(b, 2, x)), order == 0 ? kK0A : kK1A);
  Value small;
  if (order == 0 && !scaled && x.type.dtype == ElementType::kF32) {
    // The CPU kernel takes log(0.5 * x) in double here (a double literal), so the expression rounds once to float.
    Value xd = b.convert(x, ElementType::kF64);
    Value lg = log(b, mul(b, k(b, 0.5, xd), xd));
    Value i0 = b.convert(modified_i(b, x, 0), ElementType::kF64);
    small = b.convert(sub(b, b.convert(cs, ElementType::kF64), mul(b, lg, i0)), ElementType::kF32);
  } else if (order == 0) {
    small = sub(b, cs, mul(b, log(b, half), modified_i(b, x, 0)));
  } else {
    small = add(b, mul(b, log(b, half), modified_i(b, x, 1)), div(b, cs, x));
  }
  if (scaled) small = mul(b, small, exp(b, x));
  Value cl = clenshaw(b, sub(b, div(b, k(b, 8, x), x), k(b, 2, x)), order == 0 ? kK0B : kK1B);
  Value large = scaled ? div(b, cl, sqrt(b, x)) : div(b, mul(b, exp(b, neg(b, x)), cl), sqrt(b, x));
  Value r = sel(b, le(b, x, k(b, 2, x)), small, large);
  r = sel(b, lt(b, x, k(b, 0, x)), k(b, NAN, x), r);
  return sel(b, eq(b, x, k(b, 0, x)), k(b, INFINITY, x), r);
}

Value spherical_j0(HloBuilder& b, const Value& x) {
  Value xx = mul(b, x, x);
  static const double kc[] = {-1.0 / 6.0,      1.0 / 120.0,        -1.0 / 5040.0,
                              1.0 / 362880.0, -1.0 / 39916800.0, 1.0 / 6227020800.0};
  Value acc = k(b, kc[5], x);
  for (int i = 4; i >= 0; --i) acc = add(b, k(b, kc[i], x), mul(b, xx, acc));
  Value small = add(b, k(b, 1, x), mul(b, xx, acc));
  Value r = sel(b, lt(b, abs(b, x), k(b, 0.5, x)), small, div(b, b.unary("stablehlo.sine", x), x));
  return sel(b, eq(b, abs(b, x), k(b, INFINITY, x)), k(b, 0, x), r);
}

using UnaryFn = std::function<Value(HloBuilder&, const Value&)>;

LoweringRule unary_rule(const std::string& name, UnaryFn fn) {
  return [name, fn](OpContext& c) -> V {
    require_f32_f64(c, name.c_str());
    TensorType o = c.out(0);
    return {fn(c.b, c.operand(0, o.dtype, o.dims))};
  };
}

}  // namespace

void add_bessel_rules(std::vector<LoweringRow>& rows) {
  auto add_unary = [&rows](const std::string& op, const std::string& name, UnaryFn fn) {
    rows.push_back({{op, op + ".out"}, unary_rule(name, std::move(fn))});
  };
  add_unary("special_airy_ai", "airy_ai", airy_ai);
  add_unary("special_bessel_j0", "bessel_j0", bessel_j0);
  add_unary("special_bessel_j1", "bessel_j1", bessel_j1);
  add_unary("special_bessel_y0", "bessel_y0", bessel_y0);
  add_unary("special_bessel_y1", "bessel_y1", bessel_y1);
  add_unary("special_modified_bessel_i0", "modified_bessel_i0",
            [](HloBuilder& b, const Value& x) { return modified_i(b, x, 0); });
  add_unary("special_modified_bessel_i1", "modified_bessel_i1",
            [](HloBuilder& b, const Value& x) { return modified_i(b, x, 1); });
  add_unary("special_modified_bessel_k0", "modified_bessel_k0",
            [](HloBuilder& b, const Value& x) { return modified_k(b, x, 0, false); });
  add_unary("special_modified_bessel_k1", "modified_bessel_k1",
            [](HloBuilder& b, const Value& x) { return modified_k(b, x, 1, false); });
  add_unary("special_scaled_modified_bessel_k0", "scaled_modified_bessel_k0",
            [](HloBuilder& b, const Value& x) { return modified_k(b, x, 0, true); });
  add_unary("special_scaled_modified_bessel_k1", "scaled_modified_bessel_k1",
            [](HloBuilder& b, const Value& x) { return modified_k(b, x, 1, true); });
  add_unary("special_spherical_bessel_j0", "spherical_bessel_j0", spherical_j0);
}

}  // namespace torch_tpu
