// Batch and group normalisation. Batch norm: forward (training statistics or running statistics) and backward. In training mode the
// forward also updates running_mean / running_var in place — ATen's native_batch_norm does so without marking the
// arguments written in its schema, so the rule writes them explicitly (OpContext::update_arg).
#include <c10/core/ScalarType.h>

#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using V = std::vector<Value>;

// Statistics are computed in float32 for reduced-precision inputs (PyTorch's opmath), in float64 for float64.
ElementType stats_type(ElementType t) { return t == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32; }

struct Layout {
  std::vector<int64_t> dims;     // input dims
  std::vector<int64_t> reduced;  // every dim but the channel dim (1)
  double count = 1;              // elements per channel
};

Layout layout_of(const Value& x) {
  Layout l;
  l.dims = x.type.dims;
  for (int64_t d = 0; d < x.type.rank(); ++d) {
    if (d == 1) continue;
    l.reduced.push_back(d);
    l.count *= static_cast<double>(l.dims[d]);
  }
  return l;
}

Value k(HloBuilder& b, double v, const Value& like) { return b.constant(v, like.type.dtype, like.type.dims); }
Value add(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.add", x, y); }
Value sub(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.subtract", x, y); }
Value mul(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.multiply", x, y); }

// A per-channel vector laid along dim 1 of `l.dims`.
Value per_channel(HloBuilder& b, const Value& v, const Layout& l) { return b.broadcast_in_dim(v, l.dims, {1}); }

// Per-channel mean and biased variance of x (already in the statistics type).
std::pair<Value, Value> batch_stats(HloBuilder& b, const Value& x, const Layout& l) {
  Value mean = reduce_sum(b, x, l.reduced);
  mean = mul(b, mean, k(b, 1.0 / l.count, mean));
  Value xc = sub(b, x, per_channel(b, mean, l));
  Value var = reduce_sum(b, mul(b, xc, xc), l.reduced);
  var = mul(b, var, k(b, 1.0 / l.count, var));
  return {mean, var};
}

Value inv_std(HloBuilder& b, const Value& var, double eps) { return b.unary("stablehlo.rsqrt", add(b, var, k(b, eps, var))); }

// A result PyTorch wants empty (e.g. save_mean in evaluation mode) or of the given per-channel value.
Value shaped(HloBuilder& b, OpContext& c, size_t i, const Value& v) {
  TensorType o = c.out(i);
  if (o.numel() == 0) return zeros(b, o);
  return b.convert(v, o.dtype);
}

// Where the batch norm forward overloads keep their arguments: input, weight and bias are 0, 1 and 2 everywhere.
struct BatchNormArgs {
  int running = 3;       // running_mean (running_var follows); -1: the overload has none
  int training = 5;      // the training flag; -1: fixed by the overload
  bool fixed_training = false;
  int momentum = 6, eps = 7;
};

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
//   -> (out, save_mean, save_invstd), and the overloads laid out by `a`.
V batch_norm_forward(OpContext& c, const BatchNormArgs& a) {
  HloBuilder& b = c.b;
  Value x0 = c.tensor(0);
  ElementType t = stats_type(x0.type.dtype);
  Value x = b.convert(x0, t);
  Layout l = layout_of(x);
  size_t rm_i = static_cast<size_t>(a.running), rv_i = rm_i + 1;
  bool has_running = a.running >= 0 && c.has(rm_i) && c.has(rv_i);
  bool training = a.training >= 0 ? c.flag(static_cast<size_t>(a.training)) : a.fixed_training || !has_running;
  double eps = c.scalar(static_cast<size_t>(a.eps));
  TORCH_CHECK(training || has_running, "running_mean and running_var must be defined in evaluation mode");
  Value mean, var;
  if (training) {
    std::tie(mean, var) = batch_stats(b, x, l);
    if (has_running) {
      // running = (1 - momentum) * running + momentum * batch statistic (variance unbiased), in the running dtype.
      Value m = c.runtime_scalar(c.arg(static_cast<size_t>(a.momentum)).toScalar(), t);
      Value rm = b.convert(c.tensor(rm_i), t);
      Value rv = b.convert(c.tensor(rv_i), t);
      Value mv = b.broadcast_to(m, rm.type.dims);
      Value keep = sub(b, k(b, 1.0, mv), mv);
      double unbias = l.count > 1 ? l.count / (l.count - 1) : 1.0;
      c.update_arg(rm_i, add(b, mul(b, keep, rm), mul(b, mv, mean)));
      c.update_arg(rv_i, add(b, mul(b, keep, rv), mul(b, mv, mul(b, var, k(b, unbias, var)))));
    }
  } else {
    mean = b.convert(c.tensor(rm_i), t);
    var = b.convert(c.tensor(rv_i), t);
  }
  Value invstd = inv_std(b, var, eps);
  Value scale = invstd;
  if (c.has(1)) scale = mul(b, scale, b.convert(c.tensor(1), t));
  Value y = mul(b, sub(b, x, per_channel(b, mean, l)), per_channel(b, scale, l));
  if (c.has(2)) y = add(b, y, per_channel(b, b.convert(c.tensor(2), t), l));
  V results{b.convert(y, c.out(0).dtype), shaped(b, c, 1, mean), shaped(b, c, 2, invstd)};
  if (c.num_outputs() == 4) results.push_back(zeros(b, c.out(3)));  // the (empty) reserve of the _batch_norm_* ops
  return results;
}

V batch_norm_rule(OpContext& c) { return batch_norm_forward(c, {}); }

// _native_batch_norm_legit(input, weight?, bias?, running_mean!, running_var!, training, momentum, eps) shares
// native_batch_norm's layout; its .no_stats overload has no running statistics.
V batch_norm_no_stats_rule(OpContext& c) { return batch_norm_forward(c, {-1, 3, false, 4, 5}); }

// _batch_norm_with_update(input, weight?, bias?, running_mean!, running_var!, momentum, eps)
//   -> (out, save_mean, save_invstd, reserve): training statistics, running statistics updated.
V batch_norm_with_update_rule(OpContext& c) { return batch_norm_forward(c, {3, -1, true, 5, 6}); }

// _batch_norm_no_update(input, weight?, bias?, running_mean?, running_var?, momentum, eps): the running statistics
// when given (evaluation), else the batch's.
V batch_norm_no_update_rule(OpContext& c) { return batch_norm_forward(c, {3, -1, false, 5, 6}); }

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?, save_invstd?,
//                            train, eps, output_mask) -> (grad_input, grad_weight, grad_bias)
V batch_norm_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x0 = c.tensor(1);
  ElementType t = stats_type(x0.type.dtype);
  Value x = b.convert(x0, t);
  Value g = b.convert(c.tensor(0), t);
  Layout l = layout_of(x);
  bool train = c.flag(7);
  Value mean, invstd;
  if (train) {
    mean = b.convert(c.tensor(5), t);
    invstd = b.convert(c.tensor(6), t);
  } else {
    mean = b.convert(c.tensor(3), t);
    invstd = inv_std(b, b.convert(c.tensor(4), t), c.scalar(8));
  }
  Value xhat = mul(b, sub(b, x, per_channel(b, mean, l)), per_channel(b, invstd, l));
  Value sum_g = reduce_sum(b, g, l.reduced);
  Value sum_gx = reduce_sum(b, mul(b, g, xhat), l.reduced);
  Value unused = b.constant(0, t);
  V results{unused, unused, unused};
  if (c.out_defined(0)) {
    Value scale = invstd;
    if (c.has(2)) scale = mul(b, scale, b.convert(c.tensor(2), t));
    Value dx = g;
    if (train) {
      Value centred_g = sub(b, g, per_channel(b, mul(b, sum_g, k(b, 1.0 / l.count, sum_g)), l));
      Value proj = mul(b, xhat, per_channel(b, mul(b, sum_gx, k(b, 1.0 / l.count, sum_gx)), l));
      dx = sub(b, centred_g, proj);
    }
    results[0] = b.convert(mul(b, dx, per_channel(b, scale, l)), c.out(0).dtype);
  }
  if (c.out_defined(1)) results[1] = b.convert(sum_gx, c.out(1).dtype);
  if (c.out_defined(2)) results[2] = b.convert(sum_g, c.out(2).dtype);
  return results;
}

// ---- group norm ----

// x (N, C, *) viewed as (N, G, C/G, HxW), in the statistics type.
struct Groups {
  int64_t n, c, hw, g;
  std::vector<int64_t> grouped() const { return {n, g, c / g, hw}; }
  double count() const { return static_cast<double>(c / g * hw); }
};

Groups groups_of(OpContext& c, size_t first) {  // N, C, HxW, group
  return {c.integer(first), c.integer(first + 1), c.integer(first + 2), c.integer(first + 3)};
}

// (N, G) statistics broadcast over the grouped view.
Value per_group(HloBuilder& b, const Value& v, const Groups& gr) {
  return b.broadcast_in_dim(b.reshape(v, {gr.n, gr.g}), gr.grouped(), {0, 1});
}

// (C,) parameters broadcast over the grouped view.
Value per_group_channel(HloBuilder& b, const Value& v, const Groups& gr) {
  return b.broadcast_in_dim(b.reshape(v, {gr.g, gr.c / gr.g}), gr.grouped(), {1, 2});
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd); mean/rstd are (N, group).
V group_norm_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x0 = c.tensor(0);
  ElementType t = stats_type(x0.type.dtype);
  Groups gr = groups_of(c, 3);
  Value x = b.reshape(b.convert(x0, t), gr.grouped());
  Value mean = reduce_sum(b, x, {2, 3});
  mean = mul(b, mean, k(b, 1.0 / gr.count(), mean));
  Value xc = sub(b, x, per_group(b, mean, gr));
  Value var = reduce_sum(b, mul(b, xc, xc), {2, 3});
  var = mul(b, var, k(b, 1.0 / gr.count(), var));
  Value rstd = inv_std(b, var, c.scalar(7));
  Value y = mul(b, xc, per_group(b, rstd, gr));
  if (c.has(1)) y = mul(b, y, per_group_channel(b, b.convert(c.tensor(1), t), gr));
  if (c.has(2)) y = add(b, y, per_group_channel(b, b.convert(c.tensor(2), t), gr));
  return {b.convert(b.reshape(y, x0.type.dims), c.out(0).dtype), b.convert(mean, c.out(1).dtype),
          b.convert(rstd, c.out(2).dtype)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
//   -> (grad_input, grad_weight, grad_bias)
V group_norm_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x0 = c.tensor(1);
  ElementType t = stats_type(x0.type.dtype);
  Groups gr = groups_of(c, 5);
  Value x = b.reshape(b.convert(x0, t), gr.grouped());
  Value g = b.reshape(b.convert(c.tensor(0), t), gr.grouped());
  Value rstd = per_group(b, b.convert(c.tensor(3), t), gr);
  Value xhat = mul(b, sub(b, x, per_group(b, b.convert(c.tensor(2), t), gr)), rstd);
  Value unused = b.constant(0, t);
  V results{unused, unused, unused};
  if (c.out_defined(0)) {
    Value gx = c.has(4) ? mul(b, g, per_group_channel(b, b.convert(c.tensor(4), t), gr)) : g;
    double inv = 1.0 / gr.count();
    Value m1 = reduce_sum(b, gx, {2, 3});
    Value m2 = reduce_sum(b, mul(b, gx, xhat), {2, 3});
    m1 = b.broadcast_in_dim(mul(b, m1, k(b, inv, m1)), gr.grouped(), {0, 1});
    m2 = b.broadcast_in_dim(mul(b, m2, k(b, inv, m2)), gr.grouped(), {0, 1});
    Value dx = mul(b, sub(b, sub(b, gx, m1), mul(b, xhat, m2)), rstd);
    results[0] = b.convert(b.reshape(dx, x0.type.dims), c.out(0).dtype);
  }
  auto per_channel_sum = [&](const Value& v) { return b.reshape(reduce_sum(b, v, {0, 3}), {gr.c}); };
  if (c.out_defined(1)) results[1] = b.convert(per_channel_sum(mul(b, g, xhat)), c.out(1).dtype);
  if (c.out_defined(2)) results[2] = b.convert(per_channel_sum(g), c.out(2).dtype);
  return results;
}

}  // namespace

void add_batch_norm_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"native_batch_norm", "_native_batch_norm_legit"}, batch_norm_rule});
  rows.push_back({{"_native_batch_norm_legit.no_stats"}, batch_norm_no_stats_rule});
  // float16/bfloat16 inputs: CPU's kernels return the saved statistics in the input dtype where the meta kernels (and
  // CUDA) say float32; those calls stay on the CPU so the dtypes are CPU's.
  ArgumentFilter full_precision = [](const std::vector<c10::IValue>& args) {
    return args.empty() || !args[0].isTensor() || !c10::isReducedFloatingType(args[0].toTensor().scalar_type());
  };
  rows.push_back({{"_batch_norm_with_update"}, batch_norm_with_update_rule, nullptr, full_precision});
  rows.push_back({{"_batch_norm_no_update"}, batch_norm_no_update_rule, nullptr, full_precision});
  // batch_norm_backward(..., update, eps, output_mask, reserve): native_batch_norm_backward's layout (save_var holds
  // the saved inverse standard deviation) plus the unused reserve.
  rows.push_back({{"native_batch_norm_backward", "batch_norm_backward"}, batch_norm_backward_rule});
  rows.push_back({{"native_group_norm", "native_group_norm.out"}, group_norm_rule});
  rows.push_back({{"native_group_norm_backward", "native_group_norm_backward.out"}, group_norm_backward_rule});
}

}  // namespace torch_tpu
