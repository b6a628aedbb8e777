// Small ops with no better family: trace, eye, logspace, channel_shuffle, frexp, gcd/lcm.
#include <ATen/core/Tensor.h>

#include <cmath>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using namespace hm;  // NOLINT: formula spellings
using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;
using Dims = std::vector<int64_t>;

constexpr ElementType kI64 = ElementType::kS64;

Value s64c(HloBuilder& b, double v, const Dims& dims = {}) { return b.constant(v, kI64, dims); }

// PyTorch's "not implemented for 'Bool'" for ops whose CPU kernels skip bool.
void no_bool(bool is_bool, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(!is_bool, "\"", kernel, "\" not implemented for 'Bool'");
}

bool bool_arg(OpContext& c, size_t i) { return c.inspect(i).toTensor().scalar_type() == at::kBool; }

// ---- factories ----

V trace_rule(OpContext& c) {  // trace(self): the CPU accumulates float in double, bfloat16/half in float
  TensorType o = c.out(0);
  no_bool(bool_arg(c, 0), "trace");
  Value x = c.tensor(0);
  ElementType acc = o.dtype == ElementType::kF32 ? ElementType::kF64 : opmath_type(o.dtype);
  if (!is_floating(o.dtype) && !is_complex(o.dtype)) acc = kI64;
  Value xa = c.b.convert(x, acc);
  TensorType it{kI64, x.type.dims};
  Value diag = eq(c.b, c.b.iota(it, 0), c.b.iota(it, 1));
  Value kept = sel(c.b, diag, xa, zeros(c.b, xa.type));
  return {c.b.convert(reduce_sum(c.b, kept, {0, 1}), o.dtype)};
}

V eye_rule(OpContext& c) {  // eye.out(n, out) / eye.m_out(n, m, out): shape from the result
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  TensorType it{kI64, o.dims};
  Value diag = eq(c.b, c.b.iota(it, 0), c.b.iota(it, 1));
  return {sel(c.b, diag, full(c.b, 1, o), zeros(c.b, o))};
}

// logspace.out(start, end, steps, base, out) as the CPU computes it: start and end rounded to the result type,
// step = double(end - start) / (steps - 1) (the difference taken in the result type), base ** (start + step * i)
// in double for the first half and base ** (end - step * (steps - 1 - i)) for the rest, then converted.
V logspace_rule(OpContext& c) {
  TensorType o = c.out(0);
  no_bool(o.dtype == ElementType::kPred, "logspace_cpu");
  int64_t n = o.numel();
  if (n == 0) return {zeros(c.b, o)};
  HloBuilder& b = c.b;
  ElementType f = ElementType::kF64;
  double base = c.scalar(3);
  Value bs = b.constant(base, f, o.dims);
  if (n == 1) {
    Value s = c.b.convert(c.runtime_scalar(c.arg(0).toScalar(), f), f);
    return {b.convert(b.binary("stablehlo.power", bs, b.broadcast_to(s, o.dims)), o.dtype)};
  }
  Value start = c.runtime_scalar(c.arg(0).toScalar(), o.dtype), end = c.runtime_scalar(c.arg(1).toScalar(), o.dtype);
  Value diff = is_reduced_float(o.dtype)  // a bfloat16/half difference is taken in float and rounded back
                   ? b.convert(b.convert(sub(b, b.convert(end, ElementType::kF32), b.convert(start, ElementType::kF32)), o.dtype), f)
                   : b.convert(sub(b, end, start), f);
  Value step = div(b, diff, b.constant(static_cast<double>(n - 1), f));
  Value sd = b.broadcast_to(b.convert(start, f), o.dims), ed = b.broadcast_to(b.convert(end, f), o.dims);
  Value stepd = b.broadcast_to(step, o.dims);
  Value i = b.iota({f, o.dims}, 0);
  Value lo = add(b, sd, mul(b, stepd, i));
  Value hi = sub(b, ed, mul(b, stepd, sub(b, b.constant(static_cast<double>(n - 1), f, o.dims), i)));
  Value first = lt(b, b.iota({kI64, o.dims}, 0), s64c(b, static_cast<double>(n / 2), o.dims));
  Value e = sel(b, first, lo, hi);
  return {b.convert(b.binary("stablehlo.power", bs, e), o.dtype)};
}

V channel_shuffle_rule(OpContext& c) {  // channel_shuffle(self, groups): [N, g, C/g, *] -> [N, C/g, g, *]
  Value x = c.tensor(0);
  int64_t g = c.integer(1);
  const Dims& d = x.type.dims;
  TORCH_CHECK(x.type.rank() >= 3, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              c10::IntArrayRef(d));
  TORCH_CHECK(g > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", g);
  TORCH_CHECK(d[1] % g == 0, "Number of channels must be divisible by groups. Got ", d[1], " channels and ", g,
              " groups.");
  if (x.type.numel() == 0) return {x};
  Dims split{d[0], g, d[1] / g};
  split.insert(split.end(), d.begin() + 2, d.end());
  Dims perm{0, 2, 1};
  for (int64_t i = 3; i < static_cast<int64_t>(split.size()); ++i) perm.push_back(i);
  return {c.b.reshape(c.b.transpose(c.b.reshape(x, split), perm), d)};
}

// ---- frexp / gcd / lcm ----

// frexp.Tensor(self) -> (mantissa in [0.5, 1) with self's sign, int32 exponent); 0, inf and NaN keep themselves
// with exponent 0, as std::frexp. Worked out on the bits alone: XLA's CPU flushes subnormal operands of float
// arithmetic to zero, so subnormals are normalised through a count of leading zeros.
V frexp_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  TORCH_CHECK(is_floating(o.dtype), "torch.frexp() only supports floating-point dtypes");
  bool wide = o.dtype == ElementType::kF64;
  ElementType ft = wide ? ElementType::kF64 : ElementType::kF32, it = wide ? ElementType::kS64 : ElementType::kS32;
  int64_t mb = wide ? 52 : 23, bias = wide ? 1022 : 126, width = wide ? 64 : 32;
  Value input = c.tensor(0);
  const Dims& d = input.type.dims;
  auto k = [&](double v) { return b.constant(v, it, d); };
  Value bits;
  if (input.type.dtype == ElementType::kBF16) {  // bfloat16 is the top half of a float: move its bits there
    Value half = b.op1("stablehlo.bitcast_convert", {input}, {ElementType::kU16, d});
    bits = b.binary("stablehlo.shift_left", b.convert(half, it), k(16));
  } else {
    bits = b.op1("stablehlo.bitcast_convert", {b.convert(input, ft)}, {it, d});
  }
  Value abs_bits = b.binary("stablehlo.shift_right_logical", b.binary("stablehlo.shift_left", bits, k(1)), k(1));
  Value sign = sub(b, bits, abs_bits);
  Value field = b.binary("stablehlo.shift_right_logical", abs_bits, k(static_cast<double>(mb)));
  Value frac = sub(b, abs_bits, b.binary("stablehlo.shift_left", field, k(static_cast<double>(mb))));
  // Subnormal: the top set bit p of frac gives exponent p + 1 - (bias + mb) and the fraction shifted up past it.
  Value top = sub(b, k(static_cast<double>(width - 1)), b.unary("stablehlo.count_leading_zeros", frac));
  Value shifted = b.binary("stablehlo.shift_left", frac, sub(b, k(static_cast<double>(mb)), top));
  Value one = b.binary("stablehlo.shift_left", k(1), k(static_cast<double>(mb)));
  Value sub_frac = b.binary("stablehlo.and", shifted, sub(b, one, k(1)));
  Value sub_exp = sub(b, add(b, top, k(1)), k(static_cast<double>(bias + mb)));
  Value subnormal = eq(b, field, k(0));
  Value out_frac = sel(b, subnormal, sub_frac, frac);
  Value expo = sel(b, subnormal, sub_exp, sub(b, field, k(static_cast<double>(bias))));
  Value mbits = b.binary("stablehlo.or", b.binary("stablehlo.or", sign, b.binary("stablehlo.shift_left", k(static_cast<double>(bias)),
                                                                               k(static_cast<double>(mb)))),
                         out_frac);
  Value mant = b.op1("stablehlo.bitcast_convert", {mbits}, {ft, d});
  Value max_field = k(wide ? 2047 : 255);
  Value special = lor(b, eq(b, abs_bits, k(0)), eq(b, field, max_field));
  Value x = b.convert(input, ft);
  mant = sel(b, special, x, mant);
  expo = sel(b, special, k(0), expo);
  return {b.convert(mant, o.dtype), b.convert(expo, c.out(1).dtype)};
}

// The CPU's Euclid: a = |a|, b = |b|; while a != 0: (a, b) = (b % a, a); result b (wrapping like C++).
Value gcd_value(HloBuilder& b, Value x, Value y) {
  if (!is_unsigned_integer(x.type.dtype)) {
    x = abs(b, x);
    y = abs(b, y);
  }
  TensorType t = x.type;
  std::vector<TensorType> types{t, t};
  std::string cond = b.region(types, [&](HloBuilder& r, const V& a) -> V {
    Value nz = ne(r, a[0], zeros(r, t));
    return {r.reduce(nz, r.constant(0, ElementType::kPred), iota_dims(t.rank()), "stablehlo.or")};
  });
  std::string body = b.region(types, [&](HloBuilder& r, const V& a) -> V {
    Value nz = ne(r, a[0], zeros(r, t));
    Value safe = sel(r, nz, a[0], r.constant(1, t.dtype, t.dims));
    Value rem = r.binary("stablehlo.remainder", a[1], safe);
    return {sel(r, nz, rem, a[0]), sel(r, nz, a[0], a[1])};
  });
  return b.op("stablehlo.while", {x, y}, types, "", {cond, body})[1];
}

LoweringRule gcd_lcm_rule(bool lcm) {  // gcd(self, other) / lcm(self, other), integer types
  return [lcm](OpContext& c) -> V {
    TensorType o = c.out(0);
    TORCH_CHECK_NOT_IMPLEMENTED(!is_floating(o.dtype) && !is_complex(o.dtype) && o.dtype != ElementType::kPred, "\"",
                                lcm ? "lcm" : "gcd", "_cpu\" not implemented for '",
                                c10::toString(c.inspect(0).toTensor().scalar_type()), "'");
    if (o.numel() == 0) return {zeros(c.b, o)};
    Value x = c.operand(0, o.dtype, o.dims), y = c.operand(1, o.dtype, o.dims);
    Value g = gcd_value(c.b, x, y);
    if (!lcm) return {g};
    Value zero = eq(c.b, g, zeros(c.b, o));
    Value safe = sel(c.b, zero, full(c.b, 1, o), g);
    Value v = mul(c.b, div(c.b, x, safe), y);
    if (!is_unsigned_integer(o.dtype)) v = abs(c.b, v);
    return {sel(c.b, zero, zeros(c.b, o), v)};
  };
}

}  // namespace

void add_small_op_rules(Rows& rows) {
  rows.push_back({{"trace", "trace.out"}, trace_rule});
  rows.push_back({{"eye.out", "eye.m_out"}, eye_rule});
  rows.push_back({{"logspace.out"}, logspace_rule});
  rows.push_back({{"channel_shuffle", "channel_shuffle.out"}, channel_shuffle_rule});
  rows.push_back({{"frexp.Tensor", "frexp.Tensor_out"}, frexp_rule});
  rows.push_back({{"gcd", "gcd_", "gcd.out"}, gcd_lcm_rule(false)});
  rows.push_back({{"lcm", "lcm_", "lcm.out"}, gcd_lcm_rule(true)});
}

}  // namespace torch_tpu
