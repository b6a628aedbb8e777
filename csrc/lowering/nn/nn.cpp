// Neural-network ops: softmax family, losses, layer norm, dropout backward (distances: distances.cpp; margin losses:
// margin_losses.cpp).
// Half-precision inputs are computed in f32 and converted back, as PyTorch's CPU kernels accumulate in float.
#include <algorithm>
#include <cmath>
#include <utility>

#include "lowering/nn/nn_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

using namespace nn_rules;  // NOLINT: the shared pieces read as local ones

// ---- softmax family ----

// Softmax or log-softmax of x along `dim`, shifted by the max for stability.
Value softmax_value(HloBuilder& b, const Value& x, int64_t dim, bool log) {
  const auto& dims = x.type.dims;
  Value mx = b.reduce(x, b.constant(lowest(x.type.dtype), x.type.dtype), {dim}, "stablehlo.maximum");
  Value shifted = sub(b, x, expand_back(b, mx, dims, {dim}));
  Value e = b.unary("stablehlo.exponential", shifted);
  Value s = expand_back(b, reduce_sum(b, e, {dim}), dims, {dim});
  return log ? sub(b, shifted, b.unary("stablehlo.log", s)) : div(b, e, s);
}

// A rank-0 tensor is treated as a single-element vector (the kernel reshapes the result back).
Value as_vector(HloBuilder& b, const Value& v) { return v.type.rank() == 0 ? b.reshape(v, {1}) : v; }

LoweringRule softmax_rule(bool log) {  // _softmax(self, dim, half_to_float)
  return [log](OpContext& c) -> V {
    ElementType t = c.out(0).dtype;
    at::ScalarType in = c.arg(0).toTensor().scalar_type();
    TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(in) || at::isComplexType(in), "\"", log ? "log_softmax" : "softmax",
                                "\" not implemented for '", c10::toString(in), "'");
    Value x = as_vector(c.b, c.b.convert(c.tensor(0), compute_type(t)));
    int64_t dim = c.dim(1, x.type.rank());
    return {c.b.convert(softmax_value(c.b, x, dim, log), t)};
  };
}

LoweringRule softmax_backward_rule(bool log) {  // (grad_output, output, dim, input_dtype)
  return [log](OpContext& c) -> V {
    ElementType t = c.out(0).dtype;
    ElementType ct = compute_type(t);
    HloBuilder& b = c.b;
    Value g = as_vector(b, b.convert(c.tensor(0), ct));
    Value y = as_vector(b, b.convert(c.tensor(1), ct));
    int64_t dim = c.dim(2, g.type.rank());
    Value r;
    if (log) {  // g - exp(y) * sum(g)
      Value s = expand_back(b, reduce_sum(b, g, {dim}), g.type.dims, {dim});
      r = sub(b, g, mul(b, b.unary("stablehlo.exponential", y), s));
    } else {  // y * (g - sum(g * y))
      Value s = expand_back(b, reduce_sum(b, mul(b, g, y), {dim}), g.type.dims, {dim});
      r = mul(b, y, sub(b, g, s));
    }
    return {b.convert(r, t)};
  };
}

// ---- nll_loss / nll_loss2d ----

// What forward and backward share: which class each target picks, whether it counts, and its weight.
struct NllParts {
  int64_t class_dim;
  Value hot;     // pred, input's shape: true at the target class
  Value valid;   // pred, target's shape: target != ignore_index
  Value weight;  // target's shape: the target's class weight, 0 where ignored
};

// Args: (.., self at `si`, target at si+1, weight at si+2, reduction, ignore_index at si+4).
NllParts nll_parts(OpContext& c, const TensorType& in, size_t si, ElementType t) {
  HloBuilder& b = c.b;
  NllParts p;
  p.class_dim = in.rank() == 1 ? 0 : 1;
  // An out-of-range target would silently pick nothing (PyTorch raises): check, ignore_index exempt.
  c.check_index_range(si + 1, 0, in.dims[p.class_dim], "Target is out of bounds.", c.integer(si + 4));
  Value target = b.convert(c.tensor(si + 1), ElementType::kS64);
  std::vector<int64_t> non_class = other_dims(in.rank(), {p.class_dim});
  Value classes = b.iota({ElementType::kS64, in.dims}, p.class_dim);
  p.hot = b.compare(CompareDirection::kEq, classes, b.broadcast_in_dim(target, in.dims, non_class));
  Value w = b.constant(1, t, in.dims);
  if (present(c, si + 2)) w = b.broadcast_in_dim(b.convert(c.tensor(si + 2), t), in.dims, {p.class_dim});
  Value picked = reduce_sum(b, b.select(p.hot, w, b.constant(0, t, in.dims)), {p.class_dim});
  Value ignore = b.constant(static_cast<double>(c.integer(si + 4)), ElementType::kS64, target.type.dims);
  p.valid = b.compare(CompareDirection::kNe, target, ignore);
  p.weight = b.select(p.valid, picked, k(b, 0, picked));
  return p;
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
V nll_forward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  ElementType t = compute_type(c.out(0).dtype);
  Value x = b.convert(c.tensor(0), t);
  NllParts p = nll_parts(c, x.type, 0, t);
  Value zero = b.constant(0, t, x.type.dims);
  Value xsel = reduce_sum(b, b.select(p.hot, x, zero), {p.class_dim});
  // select rather than multiply by 0 so ignored targets cannot turn -inf inputs into NaN.
  Value loss = b.select(p.valid, b.unary("stablehlo.negate", mul(b, xsel, p.weight)), k(b, 0, p.weight));
  Value total = reduce_sum(b, p.weight, all_dims(p.weight.type.rank()));
  int64_t reduction = c.integer(3);
  Value out = loss;
  if (reduction != kNone) {
    out = reduce_sum(b, loss, all_dims(loss.type.rank()));
    if (reduction == kMean) out = div(b, out, total);
  }
  return {b.convert(out, c.out(0).dtype), b.convert(total, c.out(1).dtype)};
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
V nll_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  TensorType in{t, arg_dims(c, 1)};
  NllParts p = nll_parts(c, in, 1, t);
  const auto& tdims = p.weight.type.dims;
  Value g = b.broadcast_to(b.convert(c.tensor(0), t), tdims);
  if (c.integer(4) == kMean) g = div(b, g, b.broadcast_to(b.convert(c.tensor(6), t), tdims));
  Value coef = b.unary("stablehlo.negate", mul(b, g, p.weight));
  coef = b.select(p.valid, coef, k(b, 0, coef));  // all-ignored mean divides by 0; keep those grads 0
  Value spread = b.broadcast_in_dim(coef, in.dims, other_dims(in.rank(), {p.class_dim}));
  return {b.convert(b.select(p.hot, spread, zeros(b, in)), o.dtype)};
}

// ---- pointwise losses ----

// (self, target) in the compute type, broadcast to their common shape.
std::pair<Value, Value> loss_inputs(OpContext& c, ElementType t, size_t si) {
  std::vector<int64_t> shape = broadcast_shape(arg_dims(c, si), arg_dims(c, si + 1));
  return {c.operand(si, t, shape), c.operand(si + 1, t, shape)};
}

// Backward inputs (grad_output, self, target) at the grad's shape, and the scale a mean reduction adds.
struct LossGrad {
  Value g, x, y;
  double norm;
};

LossGrad loss_grad_inputs(OpContext& c, ElementType t, size_t reduction_arg) {
  const auto& dims = c.out(0).dims;
  LossGrad r{c.operand(0, t, dims), c.operand(1, t, dims), c.operand(2, t, dims), 1.0};
  if (c.integer(reduction_arg) == kMean) r.norm = 1.0 / static_cast<double>(c.arg(1).toTensor().numel());
  return r;
}

V mse_rule(OpContext& c) {  // mse_loss(self, target, reduction)
  ElementType t = compute_type(c.out(0).dtype);
  auto [x, y] = loss_inputs(c, t, 0);
  Value d = sub(c.b, x, y);
  return {c.b.convert(apply_reduction(c.b, mul(c.b, d, d), c.integer(2), c.out(0).dtype), c.out(0).dtype)};
}

V mse_backward_rule(OpContext& c) {  // mse_loss_backward(grad_output, self, target, reduction)
  ElementType t = compute_type(c.out(0).dtype);
  HloBuilder& b = c.b;
  LossGrad r = loss_grad_inputs(c, t, 3);
  Value d = mul(b, sub(b, r.x, r.y), r.g);
  return {b.convert(mul(b, d, k(b, 2.0 * r.norm, d)), c.out(0).dtype)};
}

// smooth_l1 (beta) and huber (delta) share a shape: quadratic inside |d| < p, linear outside.
LoweringRule smooth_loss_rule(bool huber) {  // (self, target, reduction, beta|delta)
  return [huber](OpContext& c) -> V {
    ElementType t = compute_type(c.out(0).dtype);
    HloBuilder& b = c.b;
    auto [x, y] = loss_inputs(c, t, 0);
    double p = c.has(3) ? c.scalar(3) : 1.0;
    Value z = b.unary("stablehlo.abs", sub(b, x, y));
    Value loss;
    if (!huber && p == 0.0) {
      loss = z;  // smooth_l1 with beta 0 is l1
    } else {
      Value quad = mul(b, mul(b, z, z), k(b, huber ? 0.5 : 0.5 / p, z));
      Value lin = sub(b, z, k(b, 0.5 * p, z));
      if (huber) lin = mul(b, lin, k(b, p, z));
      loss = b.select(b.compare(CompareDirection::kLt, z, k(b, p, z)), quad, lin);
    }
    return {b.convert(apply_reduction(b, loss, c.integer(2), c.out(0).dtype), c.out(0).dtype)};
  };
}

LoweringRule smooth_loss_backward_rule(bool huber) {  // (grad_output, self, target, reduction, beta|delta)
  return [huber](OpContext& c) -> V {
    ElementType t = compute_type(c.out(0).dtype);
    HloBuilder& b = c.b;
    LossGrad r = loss_grad_inputs(c, t, 3);
    double p = c.scalar(4);
    Value d = sub(b, r.x, r.y);
    // Outside [-p, p] the slope is sign(d) (times delta for huber); inside it is d (over beta for smooth_l1).
    Value slope = b.unary("stablehlo.sign", d);
    if (huber) slope = mul(b, slope, k(b, p, d));
    if (huber || p != 0.0) {
      Value inner = huber ? d : div(b, d, k(b, p, d));
      Value in_range = b.binary("stablehlo.and", b.compare(CompareDirection::kGe, d, k(b, -p, d)),
                                b.compare(CompareDirection::kLe, d, k(b, p, d)));
      slope = b.select(in_range, inner, slope);
    }
    Value grad = mul(b, mul(b, slope, r.g), k(b, r.norm, d));
    return {b.convert(grad, c.out(0).dtype)};
  };
}

V bce_rule(OpContext& c) {  // binary_cross_entropy(self, target, weight?, reduction)
  ElementType t = compute_type(c.out(0).dtype);
  HloBuilder& b = c.b;
  auto [x, y] = loss_inputs(c, t, 0);
  // PyTorch clamps the logs at -100 so x = 0 or 1 gives a finite loss.
  Value log_x = b.binary("stablehlo.maximum", b.unary("stablehlo.log", x), k(b, -100, x));
  Value log_1mx = b.binary("stablehlo.maximum", b.unary("stablehlo.log_plus_one", b.unary("stablehlo.negate", x)),
                           k(b, -100, x));
  Value loss = sub(b, mul(b, sub(b, y, k(b, 1, y)), log_1mx), mul(b, y, log_x));
  if (present(c, 2)) loss = mul(b, loss, c.operand(2, t, loss.type.dims));
  return {b.convert(apply_reduction(b, loss, c.integer(3), c.out(0).dtype), c.out(0).dtype)};
}

V bce_backward_rule(OpContext& c) {  // binary_cross_entropy_backward(grad_output, self, target, weight?, reduction)
  ElementType t = compute_type(c.out(0).dtype);
  HloBuilder& b = c.b;
  LossGrad r = loss_grad_inputs(c, t, 4);
  Value denom = b.binary("stablehlo.maximum", mul(b, sub(b, k(b, 1, r.x), r.x), r.x), k(b, 1e-12, r.x));
  Value grad = mul(b, div(b, sub(b, r.x, r.y), denom), mul(b, r.g, k(b, r.norm, r.g)));
  if (present(c, 3)) grad = mul(b, grad, c.operand(3, t, grad.type.dims));
  return {b.convert(grad, c.out(0).dtype)};
}

// -log_sigmoid(x) = log1p(exp(-|x|)) + max(-x, 0), which cannot overflow.
Value neg_log_sigmoid(HloBuilder& b, const Value& x) {
  Value e = b.unary("stablehlo.exponential", b.unary("stablehlo.negate", b.unary("stablehlo.abs", x)));
  Value neg_part = b.binary("stablehlo.maximum", b.unary("stablehlo.negate", x), k(b, 0, x));
  return add(b, b.unary("stablehlo.log_plus_one", e), neg_part);
}

// log_sigmoid_forward(self) -> (output, buffer); the buffer is a CPU-kernel workspace our backward does not read.
V log_sigmoid_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x = b.convert(c.tensor(0), compute_type(c.out(0).dtype));
  Value buffer = b.unary("stablehlo.exponential", b.unary("stablehlo.negate", b.unary("stablehlo.abs", x)));
  Value out = b.unary("stablehlo.negate", neg_log_sigmoid(b, x));
  return {b.convert(out, c.out(0).dtype), b.convert(buffer, c.out(1).dtype)};
}

V log_sigmoid_backward_rule(OpContext& c) {  // (grad_output, self, buffer): grad * sigmoid(-x)
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  HloBuilder& b = c.b;
  Value g = c.operand(0, t, o.dims), x = c.operand(1, t, o.dims);
  return {b.convert(mul(b, g, b.unary("stablehlo.logistic", b.unary("stablehlo.negate", x))), o.dtype)};
}

// binary_cross_entropy_with_logits(self, target, weight?, pos_weight?, reduction)
V bce_logits_rule(OpContext& c) {
  ElementType t = compute_type(c.out(0).dtype);
  HloBuilder& b = c.b;
  auto [x, y] = loss_inputs(c, t, 0);
  Value neg_log_sig = neg_log_sigmoid(b, x);
  if (present(c, 3)) {  // weights the positive term: 1 + (pos_weight - 1) * target
    Value pw = c.operand(3, t, x.type.dims);
    neg_log_sig = mul(b, neg_log_sig, add(b, k(b, 1, x), mul(b, sub(b, pw, k(b, 1, x)), y)));
  }
  Value loss = add(b, mul(b, sub(b, k(b, 1, y), y), x), neg_log_sig);
  if (present(c, 2)) loss = mul(b, loss, c.operand(2, t, x.type.dims));
  return {b.convert(apply_reduction(b, loss, c.integer(4), c.out(0).dtype), c.out(0).dtype)};
}

// ---- layer norm ----

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
V layer_norm_rule(OpContext& c) {
  HloBuilder& b = c.b;
  ElementType t = compute_type(c.out(0).dtype);
  Value x = b.convert(c.tensor(0), t);
  const auto& dims = x.type.dims;
  int64_t axis = x.type.rank() - static_cast<int64_t>(c.ints(1).size());
  std::vector<int64_t> norm_dims = other_dims(x.type.rank(), all_dims(axis));
  double n = 1;
  for (int64_t d : norm_dims) n *= static_cast<double>(dims[d]);
  Value mean = reduce_sum(b, x, norm_dims);
  mean = div(b, mean, k(b, n, mean));
  Value xc = sub(b, x, expand_back(b, mean, dims, norm_dims));
  Value var = reduce_sum(b, mul(b, xc, xc), norm_dims);
  var = div(b, var, k(b, n, var));
  Value rstd = b.unary("stablehlo.rsqrt", add(b, var, k(b, c.scalar(4), var)));
  // A variance that overflows (rows holding 1e30 and 3e38) gives CPU's kernel a NaN rstd, not 0 (then -0.0 outputs).
  Value finite = b.op1("stablehlo.is_finite", {var}, {ElementType::kPred, var.type.dims});
  rstd = b.select(finite, rstd, k(b, NAN, rstd));
  Value y = mul(b, xc, expand_back(b, rstd, dims, norm_dims));
  if (present(c, 2)) y = mul(b, y, b.broadcast_in_dim(b.convert(c.tensor(2), t), dims, norm_dims));
  if (present(c, 3)) y = add(b, y, b.broadcast_in_dim(b.convert(c.tensor(3), t), dims, norm_dims));
  return {b.convert(y, c.out(0).dtype), b.convert(mean, c.out(1).dtype), b.convert(rstd, c.out(2).dtype)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask)
V layer_norm_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x = c.tensor(1);
  ElementType t = compute_type(x.type.dtype);  // not c.out(0): grad_input may be masked off
  x = b.convert(x, t);
  const auto& dims = x.type.dims;
  Value g = b.convert(c.tensor(0), t);
  int64_t axis = x.type.rank() - static_cast<int64_t>(c.ints(2).size());
  std::vector<int64_t> lead = all_dims(axis);
  std::vector<int64_t> norm_dims = other_dims(x.type.rank(), lead);
  double n = 1;
  for (int64_t d : norm_dims) n *= static_cast<double>(dims[d]);
  // mean/rstd keep size-1 normalized dims, so numpy-style broadcasting lines them up.
  Value mean = b.broadcast_to(b.convert(c.tensor(3), t), dims);
  Value rstd = b.broadcast_to(b.convert(c.tensor(4), t), dims);
  Value xhat = mul(b, sub(b, x, mean), rstd);
  // Outputs output_mask turns off are undefined: c.out must not be asked for them, and the kernel drops whatever
  // value stands in their place.
  Value unused = b.constant(0, t);
  V results{unused, unused, unused};
  if (c.out_defined(0)) {
    Value gw = present(c, 5) ? mul(b, g, b.broadcast_in_dim(b.convert(c.tensor(5), t), dims, norm_dims)) : g;
    Value s1 = expand_back(b, reduce_sum(b, gw, norm_dims), dims, norm_dims);
    Value s2 = expand_back(b, reduce_sum(b, mul(b, gw, xhat), norm_dims), dims, norm_dims);
    Value inner = sub(b, sub(b, mul(b, gw, k(b, n, gw)), s1), mul(b, xhat, s2));
    results[0] = b.convert(mul(b, mul(b, rstd, k(b, 1.0 / n, rstd)), inner), c.out(0).dtype);
  }
  if (c.out_defined(1)) results[1] = b.convert(reduce_sum(b, mul(b, g, xhat), lead), c.out(1).dtype);
  if (c.out_defined(2)) results[2] = b.convert(reduce_sum(b, g, lead), c.out(2).dtype);
  return results;
}

// ---- dropout ----

V dropout_backward_rule(OpContext& c) {  // native_dropout_backward(grad_output, mask, scale)
  TensorType o = c.out(0);
  HloBuilder& b = c.b;
  Value g = c.operand(0, o.dtype, o.dims);
  Value keep = b.broadcast_to(c.tensor(1), o.dims);
  if (keep.type.dtype != ElementType::kPred) keep = b.compare(CompareDirection::kNe, keep, zeros(b, keep.type));
  Value scaled = mul(b, g, b.constant(c.scalar(2), o.dtype, o.dims));
  return {b.select(keep, scaled, zeros(b, o))};
}

// ---- weight norm ----

// The dims of a weight-norm operand with every dim but `dim` reduced to 1 (the shape of g and of the norms).
std::vector<int64_t> kept_shape(const std::vector<int64_t>& dims, int64_t dim) {
  std::vector<int64_t> kept(dims.size(), 1);
  kept[dim] = dims[dim];
  return kept;
}

int64_t weight_norm_dim(OpContext& c, size_t i, int64_t rank) {
  int64_t dim = c.integer(i);
  return dim < 0 ? dim + rank : dim;
}

// _weight_norm_interface(v, g, dim) -> (w, norms): w = v * g / ||v||, the 2-norm over every dim but `dim`; norms
// has g's shape, in float for half-precision v as CPU keeps it.
V weight_norm_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  Value v = b.convert(c.tensor(0), t);
  int64_t rank = v.type.rank(), dim = weight_norm_dim(c, 2, rank);
  std::vector<int64_t> kept = kept_shape(o.dims, dim);
  Value norm = b.reshape(b.unary("stablehlo.sqrt", reduce_sum(b, mul(b, v, v), other_dims(rank, {dim}))), kept);
  Value scale = div(b, b.reshape(b.convert(c.tensor(1), t), kept), norm);
  Value w = mul(b, v, b.broadcast_to(scale, o.dims));
  return {b.convert(w, o.dtype), b.convert(b.reshape(norm, c.out(1).dims), c.out(1).dtype)};
}

// _weight_norm_interface_backward(grad_w, v, g, norms, dim) -> (grad_v, grad_g):
// grad_g = sum(grad_w * v) / n and grad_v = (g / n) * (grad_w - v * grad_g / n), per slice along `dim`.
V weight_norm_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  Value gw = b.convert(c.tensor(0), t), v = b.convert(c.tensor(1), t);
  int64_t rank = v.type.rank(), dim = weight_norm_dim(c, 4, rank);
  std::vector<int64_t> kept = kept_shape(o.dims, dim);
  Value g = b.reshape(b.convert(c.tensor(2), t), kept), n = b.reshape(b.convert(c.tensor(3), t), kept);
  Value grad_g = div(b, b.reshape(reduce_sum(b, mul(b, gw, v), other_dims(rank, {dim})), kept), n);
  Value inner = sub(b, gw, mul(b, v, b.broadcast_to(div(b, grad_g, n), o.dims)));
  Value grad_v = mul(b, b.broadcast_to(div(b, g, n), o.dims), inner);
  return {b.convert(grad_v, o.dtype), b.convert(b.reshape(grad_g, c.out(1).dims), c.out(1).dtype)};
}

}  // namespace

void add_nn_rules(Rows& rows) {
  rows.push_back({{"_softmax", "_softmax.out"}, softmax_rule(false)});
  rows.push_back({{"_log_softmax", "_log_softmax.out"}, softmax_rule(true)});
  rows.push_back({{"_softmax_backward_data", "_softmax_backward_data.out"}, softmax_backward_rule(false)});
  rows.push_back({{"_log_softmax_backward_data", "_log_softmax_backward_data.out"}, softmax_backward_rule(true)});
  rows.push_back({{"nll_loss_forward", "nll_loss_forward.output", "nll_loss2d_forward", "nll_loss2d_forward.output"},
                  nll_forward_rule});
  rows.push_back({{"nll_loss_backward", "nll_loss_backward.grad_input", "nll_loss2d_backward",
                   "nll_loss2d_backward.grad_input"},
                  nll_backward_rule});
  rows.push_back({{"mse_loss", "mse_loss.out"}, mse_rule});
  rows.push_back({{"mse_loss_backward", "mse_loss_backward.grad_input"}, mse_backward_rule});
  rows.push_back({{"smooth_l1_loss", "smooth_l1_loss.out"}, smooth_loss_rule(false)});
  rows.push_back({{"smooth_l1_loss_backward", "smooth_l1_loss_backward.grad_input"}, smooth_loss_backward_rule(false)});
  rows.push_back({{"huber_loss", "huber_loss.out"}, smooth_loss_rule(true)});
  rows.push_back({{"huber_loss_backward", "huber_loss_backward.out"}, smooth_loss_backward_rule(true)});
  rows.push_back({{"binary_cross_entropy", "binary_cross_entropy.out"}, bce_rule});
  rows.push_back({{"binary_cross_entropy_backward", "binary_cross_entropy_backward.grad_input"}, bce_backward_rule});
  rows.push_back({{"log_sigmoid_forward", "log_sigmoid_forward.output"}, log_sigmoid_rule});
  rows.push_back({{"log_sigmoid_backward", "log_sigmoid_backward.grad_input"}, log_sigmoid_backward_rule});
  rows.push_back({{"binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits.out"}, bce_logits_rule});
  rows.push_back({{"native_layer_norm", "native_layer_norm.out"}, layer_norm_rule});
  rows.push_back({{"native_layer_norm_backward", "native_layer_norm_backward.out"}, layer_norm_backward_rule});
  rows.push_back({{"native_dropout_backward", "native_dropout_backward.out"}, dropout_backward_rule});
  rows.push_back({{"_weight_norm_interface", "_weight_norm_interface.out"}, weight_norm_rule});
  rows.push_back({{"_weight_norm_interface_backward", "_weight_norm_interface_backward.out"}, weight_norm_backward_rule});
}

}  // namespace torch_tpu
