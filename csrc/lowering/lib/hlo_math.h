// Short spellings of StableHLO arithmetic for the math rules (pointwise math, special functions, activations, scans), so that a
// formula reads like one: add(b, x, mul(b, y, z)). Every helper works elementwise on operands of equal type.
#pragma once

#include <string>

#include "hlo/builder.h"

namespace torch_tpu {
namespace hm {

inline Value k(HloBuilder& b, double v, const Value& like) { return b.constant(v, like.type.dtype, like.type.dims); }
inline Value add(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.add", x, y); }
inline Value sub(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.subtract", x, y); }
inline Value mul(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.multiply", x, y); }
inline Value div(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.divide", x, y); }
inline Value neg(HloBuilder& b, const Value& x) { return b.unary("stablehlo.negate", x); }
inline Value abs(HloBuilder& b, const Value& x) { return b.unary("stablehlo.abs", x); }
inline Value exp(HloBuilder& b, const Value& x) { return b.unary("stablehlo.exponential", x); }
inline Value expm1(HloBuilder& b, const Value& x) { return b.unary("stablehlo.exponential_minus_one", x); }
inline Value log(HloBuilder& b, const Value& x) { return b.unary("stablehlo.log", x); }
inline Value log1p(HloBuilder& b, const Value& x) { return b.unary("stablehlo.log_plus_one", x); }
inline Value sqrt(HloBuilder& b, const Value& x) { return b.unary("stablehlo.sqrt", x); }
inline Value floor(HloBuilder& b, const Value& x) { return b.unary("stablehlo.floor", x); }
inline Value sel(HloBuilder& b, const Value& p, const Value& x, const Value& y) { return b.select(p, x, y); }
inline Value lt(HloBuilder& b, const Value& x, const Value& y) { return b.compare(CompareDirection::kLt, x, y); }
inline Value le(HloBuilder& b, const Value& x, const Value& y) { return b.compare(CompareDirection::kLe, x, y); }
inline Value gt(HloBuilder& b, const Value& x, const Value& y) { return b.compare(CompareDirection::kGt, x, y); }
inline Value ge(HloBuilder& b, const Value& x, const Value& y) { return b.compare(CompareDirection::kGe, x, y); }
inline Value eq(HloBuilder& b, const Value& x, const Value& y) { return b.compare(CompareDirection::kEq, x, y); }
inline Value ne(HloBuilder& b, const Value& x, const Value& y) { return b.compare(CompareDirection::kNe, x, y); }
inline Value land(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.and", x, y); }
inline Value lor(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.or", x, y); }
inline Value lnot(HloBuilder& b, const Value& x) { return b.unary("stablehlo.not", x); }
inline Value isnan(HloBuilder& b, const Value& x) { return ne(b, x, x); }
// A chlo op with one result of `x`'s type.
inline Value chlo(HloBuilder& b, const std::string& name, const std::vector<Value>& args) {
  return b.op1("chlo." + name, args, args[0].type);
}

}  // namespace hm
}  // namespace torch_tpu
