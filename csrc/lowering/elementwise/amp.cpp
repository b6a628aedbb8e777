// GradScaler's two device ops, each one program with no host read (GradScaler itself reads found_inf in step()):
//   _amp_foreach_non_finite_check_and_unscale_(grads[], found_inf, inv_scale): every grad *= inv_scale (computed in
//       float32 for reduced-precision grads, as CUDA's opmath); found_inf becomes 1.0 when any grad element is
//       inf or NaN, and keeps its value otherwise.
//   _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
//       found_inf != 0: scale *= backoff, tracker = 0; else tracker + 1 == interval: scale *= growth when that stays
//       finite, tracker = 0; else tracker += 1. The factors and the interval are runtime operands.
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using V = std::vector<Value>;

Value all_dims_any(HloBuilder& b, const Value& pred) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < pred.type.rank(); ++d) dims.push_back(d);
  if (dims.empty()) return pred;
  return b.reduce(pred, b.constant(0, ElementType::kPred), dims, "stablehlo.or");
}

Value scalar_of(HloBuilder& b, const Value& v) {  // a 1-element tensor as a 0-d value
  return v.type.rank() == 0 ? v : b.reshape(v, {});
}

V non_finite_check_and_unscale(OpContext& c) {
  HloBuilder& b = c.b;
  V grads = c.tensor_list(0);
  Value found = c.tensor(1);
  Value inv_scale = b.convert(scalar_of(b, c.tensor(2)), ElementType::kF32);
  Value any_bad = b.constant(0, ElementType::kPred);
  V out;
  for (const Value& g : grads) {
    ElementType t = g.type.dtype;
    bool reduced = t == ElementType::kF16 || t == ElementType::kBF16;
    ElementType math = reduced ? ElementType::kF32 : t;
    Value x = b.convert(g, math);
    if (g.type.numel() > 0) {
      Value finite = b.op1("stablehlo.is_finite", {x}, {ElementType::kPred, x.type.dims});
      Value bad = all_dims_any(b, b.unary("stablehlo.not", finite));
      any_bad = b.binary("stablehlo.or", any_bad, bad);
    }
    Value scaled = b.binary("stablehlo.multiply", x, b.broadcast_to(b.convert(inv_scale, math), x.type.dims));
    out.push_back(b.convert(scaled, t));
  }
  Value one = b.constant(1, found.type.dtype, found.type.dims);
  out.push_back(b.select(b.broadcast_to(any_bad, found.type.dims), one, found));
  return out;
}

V update_scale(OpContext& c) {
  HloBuilder& b = c.b;
  Value scale = c.tensor(0), tracker = c.tensor(1);
  Value s = b.convert(scalar_of(b, scale), ElementType::kF64);
  Value tr = scalar_of(b, tracker);
  ElementType tt = tr.type.dtype;
  Value found = b.convert(scalar_of(b, c.tensor(2)), ElementType::kF64);
  Value growth = c.runtime_scalar(c.arg(3).toScalar(), ElementType::kF64);
  Value backoff = c.runtime_scalar(c.arg(4).toScalar(), ElementType::kF64);
  Value interval = c.runtime_scalar(c.arg(5).toScalar(), tt);

  Value inf = b.compare(CompareDirection::kNe, found, b.constant(0, ElementType::kF64));
  Value successful = b.binary("stablehlo.add", tr, b.constant(1, tt));
  Value grow = b.compare(CompareDirection::kEq, successful, interval);
  // Products are formed in double and rounded to the scale's type once, as the CPU kernel's float * double.
  Value grown = b.convert(b.binary("stablehlo.multiply", s, growth), scale.type.dtype);
  Value grown_ok = b.op1("stablehlo.is_finite", {grown}, {ElementType::kPred, {}});
  Value old = scalar_of(b, scale);
  Value backed = b.convert(b.binary("stablehlo.multiply", s, backoff), scale.type.dtype);
  Value kept_or_grown = b.select(b.binary("stablehlo.and", grow, grown_ok), grown, old);
  Value new_scale = b.select(inf, backed, kept_or_grown);
  Value zero = b.constant(0, tt);
  Value new_tracker = b.select(inf, zero, b.select(grow, zero, successful));
  c.update_arg(1, b.reshape(new_tracker, tracker.type.dims));
  return {b.reshape(new_scale, scale.type.dims)};
}

}  // namespace

void add_amp_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"_amp_foreach_non_finite_check_and_unscale_"}, non_finite_check_and_unscale});
  rows.push_back({{"_amp_update_scale_"}, update_scale});
}

}  // namespace torch_tpu
