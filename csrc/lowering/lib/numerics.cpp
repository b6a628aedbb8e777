#include "lowering/lib/numerics.h"

#include <cmath>
#include <string>

#include "runtime/element_type.h"

namespace torch_tpu {
namespace {

Value k(HloBuilder& b, double value, const Value& like) { return b.constant(value, like.type.dtype, like.type.dims); }

Value reduce_with(HloBuilder& b, const Value& x, const Value& init, const std::vector<int64_t>& dims,
                  Value (*combine)(HloBuilder&, const Value&, const Value&)) {
  TensorType scalar{x.type.dtype, {}};
  std::string body = b.region({scalar, scalar}, [&](HloBuilder& rb, const std::vector<Value>& args) {
    return std::vector<Value>{combine(rb, args[0], args[1])};
  });
  std::vector<int64_t> out_dims;
  for (int64_t i = 0; i < x.type.rank(); ++i) {
    bool reduced = false;
    for (int64_t d : dims) reduced = reduced || d == i;
    if (!reduced) out_dims.push_back(x.type.dims[i]);
  }
  return b.op1("stablehlo.reduce", {x, init}, {x.type.dtype, out_dims}, "dimensions = " + i64_array(dims), {body});
}

double lowest_of(ElementType t) {
  switch (t) {
    case ElementType::kPred: return 0;
    case ElementType::kS8: return -128.0;
    case ElementType::kS16: return -32768.0;
    case ElementType::kS32: return -2147483648.0;
    case ElementType::kS64: return -9223372036854775808.0;
    default: break;
  }
  if (is_unsigned_integer(t)) return 0;
  return -INFINITY;
}

double highest_of(ElementType t) {
  switch (t) {
    case ElementType::kPred: return 1;
    case ElementType::kS8: return 127.0;
    case ElementType::kS16: return 32767.0;
    case ElementType::kS32: return 2147483647.0;
    case ElementType::kU8: return 255.0;
    case ElementType::kU16: return 65535.0;
    case ElementType::kU32: return 4294967295.0;
    default: break;
  }
  return INFINITY;  // s64/u64: see reduce_nan_min
}

}  // namespace

bool is_reduced_float(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16 || is_float8(t);
}

ElementType opmath_type(ElementType t) { return is_reduced_float(t) ? ElementType::kF32 : t; }

Value is_nan(HloBuilder& b, const Value& x) {
  if (!is_floating(x.type.dtype)) return b.constant(0, ElementType::kPred, x.type.dims);
  return b.compare(CompareDirection::kNe, x, x);
}

// Floats: x > y ? x : y, so ties (0. vs -0.) give y as PyTorch's vectorized CPU kernels do; then NaN wins.
Value nan_max(HloBuilder& b, const Value& x, const Value& y) {
  if (!is_floating(x.type.dtype)) return b.binary("stablehlo.maximum", x, y);
  Value m = b.select(b.compare(CompareDirection::kGt, x, y), x, y);
  return b.select(is_nan(b, x), x, m);
}

Value nan_min(HloBuilder& b, const Value& x, const Value& y) {
  if (!is_floating(x.type.dtype)) return b.binary("stablehlo.minimum", x, y);
  Value m = b.select(b.compare(CompareDirection::kLt, x, y), x, y);
  return b.select(is_nan(b, x), x, m);
}

Value fmax_value(HloBuilder& b, const Value& x, const Value& y) {
  Value m = b.binary("stablehlo.maximum", x, y);
  if (!is_floating(x.type.dtype)) return m;
  return b.select(is_nan(b, x), y, b.select(is_nan(b, y), x, m));
}

Value fmin_value(HloBuilder& b, const Value& x, const Value& y) {
  Value m = b.binary("stablehlo.minimum", x, y);
  if (!is_floating(x.type.dtype)) return m;
  return b.select(is_nan(b, x), y, b.select(is_nan(b, y), x, m));
}

Value reduce_nan_max(HloBuilder& b, const Value& x, const std::vector<int64_t>& dims) {
  return reduce_with(b, x, b.constant(lowest_of(x.type.dtype), x.type.dtype), dims, nan_max);
}

Value reduce_nan_min(HloBuilder& b, const Value& x, const std::vector<int64_t>& dims) {
  ElementType t = x.type.dtype;
  Value init;
  if (t == ElementType::kS64 || t == ElementType::kU64) {  // the largest value is not a double: all ones (bitwise)
    init = b.unary("stablehlo.not", b.constant(0, t));
    if (t == ElementType::kS64) init = b.binary("stablehlo.shift_right_logical", init, b.constant(1, t));
  } else {
    init = b.constant(highest_of(t), t);
  }
  return reduce_with(b, x, init, dims, nan_min);
}

Value erf_value(HloBuilder& b, const Value& x) {
  ElementType t = x.type.dtype;
  Value xc = b.convert(x, opmath_type(t));
  Value e = b.unary("chlo.erf", xc);
  // Beyond these points erf(x) rounds to +-1 in the type (erfc(3.92) < 2^-25, erfc(6) < 2^-54).
  double limit = xc.type.dtype == ElementType::kF64 ? 6.0 : 3.92;
  Value big = b.compare(CompareDirection::kGt, b.unary("stablehlo.abs", xc), k(b, limit, xc));
  Value unit = b.select(b.compare(CompareDirection::kLt, xc, k(b, 0, xc)), k(b, -1, xc), k(b, 1, xc));
  return b.convert(b.select(big, unit, e), t);
}

Value sign_value(HloBuilder& b, const Value& x) {
  ElementType t = x.type.dtype;
  if (t == ElementType::kPred) return x;
  Value zero = k(b, 0, x);
  Value pos = b.convert(b.compare(CompareDirection::kGt, x, zero), t);
  if (is_unsigned_integer(t)) return pos;
  Value neg = b.convert(b.compare(CompareDirection::kLt, x, zero), t);
  return b.binary("stablehlo.subtract", pos, neg);
}

Value trunc_value(HloBuilder& b, const Value& x) {
  if (!is_floating(x.type.dtype)) return x;
  Value negative = b.compare(CompareDirection::kLt, x, k(b, 0, x));
  return b.select(negative, b.unary("stablehlo.ceil", x), b.unary("stablehlo.floor", x));
}

Value integer_pow(HloBuilder& b, const Value& base, const Value& exponent) {
  ElementType t = base.type.dtype;
  int64_t bits = element_size(t) * 8;
  Value one = k(b, 1, base);
  Value result = one, a = base;
  // Bit i of the exponent multiplies in base^(2^i); the top bit of a signed exponent is its sign (handled below).
  int64_t steps = is_unsigned_integer(t) ? bits : bits - 1;
  for (int64_t i = 0; i < steps; ++i) {
    Value bit = b.binary("stablehlo.and", b.binary("stablehlo.shift_right_logical", exponent, k(b, i, base)), one);
    result = b.select(b.compare(CompareDirection::kNe, bit, k(b, 0, base)), b.binary("stablehlo.multiply", result, a),
                      result);
    if (i + 1 < steps) a = b.binary("stablehlo.multiply", a, a);
  }
  if (is_unsigned_integer(t)) return result;
  Value zero = k(b, 0, base), minus_one = k(b, -1, base);
  // Negative exponent: 1 for base 1, (-1)^e for base -1, 0 otherwise.
  Value odd = b.compare(CompareDirection::kNe, b.binary("stablehlo.and", exponent, one), zero);
  Value neg_result = b.select(b.compare(CompareDirection::kEq, base, one), one,
                              b.select(b.compare(CompareDirection::kEq, base, minus_one),
                                       b.select(odd, minus_one, one), zero));
  return b.select(b.compare(CompareDirection::kLt, exponent, zero), neg_result, result);
}

Value integer_pow_const(HloBuilder& b, const Value& base, uint64_t exponent) {
  Value result = k(b, 1, base);
  bool first = true;
  Value a = base;
  while (exponent != 0) {
    if (exponent & 1U) {
      result = first ? a : b.binary("stablehlo.multiply", result, a);
      first = false;
    }
    exponent >>= 1U;
    if (exponent != 0) a = b.binary("stablehlo.multiply", a, a);
  }
  return result;
}

}  // namespace torch_tpu
