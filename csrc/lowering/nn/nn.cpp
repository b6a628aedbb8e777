// Neural-network ops: softmax family, losses, layer norm, dropout backward, cdist/pdist, multi_margin_loss,
// multilabel_margin_loss.
// Half-precision inputs are computed in f32 and converted back, as PyTorch's CPU kernels accumulate in float.
#include <algorithm>
#include <cmath>
#include <utility>

#include "lowering/op_context.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

ElementType compute_type(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16 ? ElementType::kF32 : t;
}

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < rank; ++i) d.push_back(i);
  return d;
}

// The dims of [0, rank) that are not in `dims` (sorted).
std::vector<int64_t> other_dims(int64_t rank, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    bool skip = false;
    for (int64_t d : dims) skip = skip || d == i;
    if (!skip) out.push_back(i);
  }
  return out;
}

// Broadcasts a reduction result (the reduced `dims` dropped) back to `full`.
Value expand_back(HloBuilder& b, const Value& reduced, const std::vector<int64_t>& full,
                  const std::vector<int64_t>& dims) {
  return b.broadcast_in_dim(reduced, full, other_dims(static_cast<int64_t>(full.size()), dims));
}

Value k(HloBuilder& b, double v, const Value& like) { return b.constant(v, like.type.dtype, like.type.dims); }
Value add(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.add", x, y); }
Value sub(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.subtract", x, y); }
Value mul(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.multiply", x, y); }
Value div(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.divide", x, y); }

std::vector<int64_t> broadcast_shape(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.size() < b.size()) std::swap(a, b);
  size_t off = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i) {
    if (a[off + i] == 1) a[off + i] = b[i];
  }
  return a;
}

// Optional tensor argument i is given. Autograd passes absent optionals as undefined tensors, not None.
bool present(OpContext& c, size_t i) { return c.has(i) && (!c.is_tensor(i) || c.arg(i).toTensor().defined()); }

std::vector<int64_t> arg_dims(OpContext& c, size_t i) { return c.arg(i).toTensor().sizes().vec(); }

// none: the elementwise loss; mean/sum: reduced over every element.
// PyTorch materializes the per-element loss in the input's dtype before reducing it (in float32 for half types):
// `element` rounds to that dtype first, so e.g. a float16 squared error that overflows stays inf.
Value apply_reduction(HloBuilder& b, Value loss, int64_t reduction, ElementType element) {
  if (reduction == kNone) return loss;
  if (element != loss.type.dtype) loss = b.convert(b.convert(loss, element), loss.type.dtype);
  Value s = reduce_sum(b, loss, all_dims(loss.type.rank()));
  if (reduction == kSum) return s;
  return div(b, s, b.constant(static_cast<double>(loss.type.numel()), s.type.dtype));
}

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

// ---- cdist ----

// x1 (B.., P, M) and x2 (B.., R, M) in the compute type, broadcast to (B.., P, R, M) and subtracted.
Value pairwise_diff(HloBuilder& b, const Value& x1, const Value& x2) {
  std::vector<int64_t> d1 = x1.type.dims, d2 = x2.type.dims;
  std::vector<int64_t> batch =
      broadcast_shape(std::vector<int64_t>(d1.begin(), d1.end() - 2), std::vector<int64_t>(d2.begin(), d2.end() - 2));
  int64_t nb = static_cast<int64_t>(batch.size()), p = d1[d1.size() - 2], r = d2[d2.size() - 2], m = d1.back();
  std::vector<int64_t> b1 = batch, b2 = batch, full = batch;
  b1.insert(b1.end(), {p, m});
  b2.insert(b2.end(), {r, m});
  full.insert(full.end(), {p, r, m});
  std::vector<int64_t> map1 = all_dims(nb), map2 = all_dims(nb);
  map1.insert(map1.end(), {nb, nb + 2});
  map2.insert(map2.end(), {nb + 1, nb + 2});
  Value a = b.broadcast_in_dim(b.broadcast_to(x1, b1), full, map1);
  Value c = b.broadcast_in_dim(b.broadcast_to(x2, b2), full, map2);
  return sub(b, a, c);
}

// The p-norm over the last dim of |differences| `d`, as PyTorch's CPU distance kernels compute it (p = 0 counts
// nonzero differences, p = inf takes the largest).
Value pnorm_last(HloBuilder& b, const Value& d, double p) {
  int64_t last = d.type.rank() - 1;
  if (p == 0) return reduce_sum(b, b.binary("stablehlo.minimum", b.unary("stablehlo.ceil", d), k(b, 1, d)), {last});
  if (std::isinf(p)) return b.reduce(d, b.constant(0, d.type.dtype), {last}, "stablehlo.maximum");
  if (p == 1) return reduce_sum(b, d, {last});
  if (p == 2) return b.unary("stablehlo.sqrt", reduce_sum(b, mul(b, d, d), {last}));
  Value s = reduce_sum(b, b.binary("stablehlo.power", d, k(b, p, d)), {last});
  return b.binary("stablehlo.power", s, k(b, 1.0 / p, s));
}

// PyTorch's per-norm derivative of a distance with respect to one difference, times its gradient g (g and dist
// broadcast to diff's shape); 0 where the distance is 0.
Value pnorm_grad(HloBuilder& b, const Value& diff, const Value& g, const Value& dist, double p) {
  Value zero = k(b, 0, diff);
  Value sign = b.unary("stablehlo.sign", diff);
  Value ad = b.unary("stablehlo.abs", diff);
  if (p == 0) return zero;
  if (p == 1) return mul(b, g, sign);
  if (std::isinf(p)) return b.select(b.compare(CompareDirection::kEq, ad, dist), mul(b, g, sign), zero);
  Value num = p == 2 ? diff
              : p < 2 ? mul(b, sign, b.binary("stablehlo.power", ad, k(b, p - 1, ad)))
                      : mul(b, diff, b.binary("stablehlo.power", ad, k(b, p - 2, ad)));
  Value den = p == 2 ? dist : b.binary("stablehlo.power", dist, k(b, p - 1, dist));
  Value r = b.select(b.compare(CompareDirection::kEq, dist, zero), zero, div(b, mul(b, num, g), den));
  if (p < 1) r = b.select(b.compare(CompareDirection::kEq, diff, zero), zero, r);
  return r;
}

// _cdist_forward(x1, x2, p, compute_mode): the p-norm of every row difference.
V cdist_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  double p = c.scalar(2);
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  Value d = b.unary("stablehlo.abs", pairwise_diff(b, b.convert(c.tensor(0), t), b.convert(c.tensor(1), t)));
  Value r = pnorm_last(b, d, p);
  return {b.convert(r, o.dtype)};
}

// _cdist_backward(grad, x1, x2, p, cdist): the gradient for x1, summed over x2's rows with PyTorch's per-norm
// derivative (0 where the distance is 0).
V cdist_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  double p = c.scalar(3);
  Value diff = pairwise_diff(b, b.convert(c.tensor(1), t), b.convert(c.tensor(2), t));
  const std::vector<int64_t>& full = diff.type.dims;
  int64_t rank = diff.type.rank();
  std::vector<int64_t> lead = all_dims(rank - 1);
  std::vector<int64_t> gdims(full.begin(), full.end() - 1);
  Value g = b.broadcast_in_dim(b.broadcast_to(b.convert(c.tensor(0), t), gdims), full, lead);
  Value dist = b.broadcast_in_dim(b.broadcast_to(b.convert(c.tensor(4), t), gdims), full, lead);
  Value r = pnorm_grad(b, diff, g, dist, p);
  Value s = reduce_sum(b, r, {rank - 2});  // (B.., P, M)
  // Batch dims x1 did not have (or had as 1) were broadcast: sum them away.
  std::vector<int64_t> reduce_dims;
  int64_t extra = s.type.rank() - o.rank();
  for (int64_t i = 0; i < s.type.rank(); ++i) {
    if (i < extra || (o.dims[i - extra] == 1 && s.type.dims[i] != 1)) reduce_dims.push_back(i);
  }
  if (!reduce_dims.empty()) s = b.reshape(reduce_sum(b, s, reduce_dims), o.dims);
  return {b.convert(s, o.dtype)};
}

// ---- multi_margin_loss ----

// A loss input of one sample (C) or a batch (N, C) as (N, C) in the compute type.
struct Rows2d {
  Value x;
  int64_t n, classes;
};
Rows2d as_rows(HloBuilder& b, const Value& input, ElementType t) {
  Value x = b.convert(input, t);
  int64_t classes = x.type.rank() == 0 ? 1 : x.type.dims.back();
  int64_t n = x.type.numel() / std::max<int64_t>(classes, 1);
  return {b.reshape(x, {n, classes}), n, classes};
}

// What forward and backward share: x as (N, C) in the compute type, the one-hot of each target, the margin terms
// z = margin - x[y] + x[i] (0 at the target itself, where PyTorch skips the class), and each sample's weight.
struct MarginParts : Rows2d {
  Value hot, z, w;
};

// Args from `si`: self, target, p, margin, weight?, reduction.
MarginParts margin_parts(OpContext& c, size_t si, ElementType t) {
  HloBuilder& b = c.b;
  MarginParts m;
  static_cast<Rows2d&>(m) = as_rows(b, c.tensor(si), t);
  c.check_index_range(si + 1, 0, m.classes, "target out of range");
  Value y = b.reshape(b.convert(c.tensor(si + 1), ElementType::kS64), {m.n});
  std::vector<int64_t> nc{m.n, m.classes};
  m.hot = b.compare(CompareDirection::kEq, b.iota({ElementType::kS64, nc}, 1), b.broadcast_in_dim(y, nc, {0}));
  Value xy = reduce_sum(b, b.select(m.hot, m.x, k(b, 0, m.x)), {1});
  m.z = add(b, sub(b, k(b, c.scalar(si + 3), m.x), b.broadcast_in_dim(xy, nc, {0})), m.x);
  m.z = b.select(m.hot, k(b, 0, m.z), m.z);
  m.w = k(b, 1, xy);
  if (present(c, si + 4)) {
    Value wv = b.broadcast_in_dim(b.convert(c.tensor(si + 4), t), nc, {1});
    m.w = reduce_sum(b, b.select(m.hot, wv, k(b, 0, m.x)), {1});
  }
  return m;
}

V multi_margin_rule(OpContext& c) {  // multi_margin_loss(self, target, p, margin, weight?, reduction)
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  int64_t p = c.integer(2);
  TORCH_CHECK(p == 1 || p == 2, "only p == 1 and p == 2 supported");
  MarginParts m = margin_parts(c, 0, t);
  Value pos = b.binary("stablehlo.maximum", m.z, k(b, 0, m.z));
  Value h = p == 1 ? pos : mul(b, pos, pos);
  Value loss = mul(b, reduce_sum(b, h, {1}), m.w);
  loss = div(b, loss, k(b, static_cast<double>(m.classes), loss));
  int64_t reduction = c.integer(5);
  if (reduction == kNone) return {b.convert(b.reshape(loss, o.dims), o.dtype)};
  Value s = reduce_sum(b, loss, {0});
  if (reduction == kMean) s = div(b, s, k(b, static_cast<double>(m.n), s));
  return {b.convert(s, o.dtype)};
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction)
V multi_margin_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  MarginParts m = margin_parts(c, 1, t);
  std::vector<int64_t> nc{m.n, m.classes};
  double scale = 1.0 / static_cast<double>(m.classes);
  int64_t reduction = c.integer(6);
  if (reduction == kMean) scale /= static_cast<double>(m.n);
  Value g = b.convert(c.tensor(0), t);
  g = reduction == kNone ? b.reshape(g, {m.n}) : b.broadcast_to(b.reshape(g, {}), {m.n});
  g = mul(b, mul(b, g, k(b, scale, g)), m.w);
  Value gb = b.broadcast_in_dim(g, nc, {0});
  Value h = c.integer(3) == 1 ? gb : mul(b, mul(b, gb, k(b, 2, gb)), m.z);
  h = b.select(b.compare(CompareDirection::kGt, m.z, k(b, 0, m.z)), h, k(b, 0, h));
  h = b.select(m.hot, k(b, 0, h), h);
  Value at_target = b.broadcast_in_dim(reduce_sum(b, h, {1}), nc, {0});
  Value grad = b.select(m.hot, b.unary("stablehlo.negate", at_target), h);
  return {b.convert(b.reshape(grad, o.dims), o.dtype)};
}

// ---- multilabel_margin_loss ----

// Each row's targets are its target entries before the first -1; a class listed twice counts twice, as in CPU's
// loops. `count` [N, C]: how often each class is listed; `hinge` [N, C, C]: max(0, 1 - x[c] + x[d]) for a listed c
// and an unlisted d (0 elsewhere).
struct MultilabelParts : Rows2d {
  Value count, listed, hinge_on;  // hinge_on: 1 - x[c] + x[d] > 0 where it counts
  Value z;                        // 1 - x[c] + x[d], [N, C, C]
};

// Args from `si`: self, target.
MultilabelParts multilabel_parts(OpContext& c, size_t si, ElementType t) {
  HloBuilder& b = c.b;
  MultilabelParts m;
  static_cast<Rows2d&>(m) = as_rows(b, c.tensor(si), t);
  c.check_range(c.tensor(si + 1), -1, m.classes, "argument #2 'target' is out of range", std::nullopt, false);
  const std::vector<int64_t> nc{m.n, m.classes}, ncc{m.n, m.classes, m.classes};
  Value y = b.reshape(b.convert(c.tensor(si + 1), ElementType::kS64), nc);
  Value stop = b.convert(b.compare(CompareDirection::kLt, y, b.constant(0, ElementType::kS64, nc)), ElementType::kS64);
  Value valid = b.compare(CompareDirection::kEq, prefix_reduce(b, stop, 1, "stablehlo.add", 0),
                          b.constant(0, ElementType::kS64, nc));
  // hot[n, j, c]: entry j of row n lists class c.
  Value hot = b.binary("stablehlo.and",
                       b.compare(CompareDirection::kEq, b.broadcast_in_dim(y, ncc, {0, 1}),
                                 b.iota({ElementType::kS64, ncc}, 2)),
                       b.broadcast_in_dim(valid, ncc, {0, 1}));
  m.count = reduce_sum(b, b.convert(hot, t), {1});
  m.listed = b.compare(CompareDirection::kGt, m.count, k(b, 0, m.count));
  // z[n, c, d] = 1 - x[c] + x[d], counted for listed c and unlisted d.
  m.z = add(b, sub(b, k(b, 1, b.broadcast_in_dim(m.x, ncc, {0, 1})), b.broadcast_in_dim(m.x, ncc, {0, 1})),
            b.broadcast_in_dim(m.x, ncc, {0, 2}));
  Value counts = b.binary("stablehlo.and", b.broadcast_in_dim(m.listed, ncc, {0, 1}),
                          b.unary("stablehlo.not", b.broadcast_in_dim(m.listed, ncc, {0, 2})));
  m.hinge_on = b.binary("stablehlo.and", counts, b.compare(CompareDirection::kGt, m.z, k(b, 0, m.z)));
  return m;
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
V multilabel_margin_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  MultilabelParts m = multilabel_parts(c, 0, t);
  const std::vector<int64_t> ncc{m.n, m.classes, m.classes};
  Value weighted = mul(b, b.select(m.hinge_on, m.z, k(b, 0, m.z)), b.broadcast_in_dim(m.count, ncc, {0, 1}));
  Value loss = reduce_sum(b, weighted, {1, 2});  // [N]
  loss = div(b, loss, k(b, static_cast<double>(m.classes), loss));
  int64_t reduction = c.integer(2);
  Value out;
  if (reduction == kNone) {
    out = b.reshape(loss, o.dims);
  } else {
    out = reduce_sum(b, loss, {0});
    if (reduction == kMean) out = div(b, out, k(b, static_cast<double>(m.n), out));
  }
  TensorType it = c.out(1);
  Value is_target = b.reshape(b.convert(m.listed, it.dtype), it.dims);
  return {b.convert(out, o.dtype), is_target};
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
V multilabel_margin_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  MultilabelParts m = multilabel_parts(c, 1, t);
  const std::vector<int64_t> nc{m.n, m.classes}, ncc{m.n, m.classes, m.classes};
  double scale = 1.0 / static_cast<double>(m.classes);
  int64_t reduction = c.integer(3);
  if (reduction == kMean) scale /= static_cast<double>(m.n);
  Value g = b.convert(c.tensor(0), t);
  g = reduction == kNone ? b.reshape(g, {m.n}) : b.broadcast_to(b.reshape(g, {}), {m.n});
  g = mul(b, g, k(b, scale, g));
  // Each counted pair (c, d) adds count[c] * g to d's gradient and takes it from c's.
  Value w = b.select(m.hinge_on, b.broadcast_in_dim(m.count, ncc, {0, 1}), k(b, 0, m.z));
  Value to_d = reduce_sum(b, w, {1});    // [N, C] over c
  Value from_c = reduce_sum(b, w, {2});  // [N, C] over d
  Value grad = mul(b, sub(b, to_d, from_c), b.broadcast_in_dim(g, nc, {0}));
  return {b.convert(b.reshape(grad, o.dims), o.dtype)};
}

// ---- pdist ----

// The condensed (upper-triangle, row by row) vector `v` of an n x n symmetric matrix with zero diagonal, expanded.
Value symmetric_from_condensed(HloBuilder& b, const Value& v, int64_t n) {
  std::vector<Value> rows;
  int64_t off = 0;
  Value zero = b.constant(0, v.type.dtype);
  for (int64_t i = 0; i < n; ++i) {
    int64_t len = n - 1 - i;
    Value row = len > 0 ? b.slice(v, {off}, {off + len}) : b.constant(0, v.type.dtype, {0});
    row = b.pad(row, zero, {i + 1}, {0}, {0});
    rows.push_back(b.reshape(row, {1, n}));
    off += len;
  }
  Value upper = rows.size() == 1 ? rows[0] : b.concatenate(rows, 0);
  return add(b, upper, b.transpose(upper, {1, 0}));
}

V pdist_rule(OpContext& c) {  // _pdist_forward(self, p): distances between rows i < j, row by row
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  double p = c.scalar(1);
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
  Value x = b.convert(c.tensor(0), t);
  int64_t n = x.type.dims[0];
  if (o.numel() == 0) return {zeros(b, o)};
  Value full = pnorm_last(b, b.unary("stablehlo.abs", pairwise_diff(b, x, x)), p);  // (n, n)
  std::vector<Value> parts;
  for (int64_t i = 0; i + 1 < n; ++i) parts.push_back(b.reshape(b.slice(full, {i, i + 1}, {i + 1, n}), {n - 1 - i}));
  Value r = parts.size() == 1 ? parts[0] : b.concatenate(parts, 0);
  return {b.convert(r, o.dtype)};
}

V pdist_backward_rule(OpContext& c) {  // _pdist_backward(grad, self, p, pdist)
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = compute_type(o.dtype);
  Value x = b.convert(c.tensor(1), t);
  int64_t n = x.type.dims[0];
  if (o.numel() == 0 || n < 2) return {zeros(b, o)};
  Value diff = pairwise_diff(b, x, x);  // (n, n, m)
  const auto& full = diff.type.dims;
  Value g = b.broadcast_in_dim(symmetric_from_condensed(b, b.convert(c.tensor(0), t), n), full, {0, 1});
  Value dist = b.broadcast_in_dim(symmetric_from_condensed(b, b.convert(c.tensor(3), t), n), full, {0, 1});
  return {b.convert(reduce_sum(b, pnorm_grad(b, diff, g, dist, c.scalar(2)), {1}), o.dtype)};
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
  rows.push_back({{"_cdist_forward", "_cdist_forward.out"}, cdist_rule});
  rows.push_back({{"_pdist_forward", "_pdist_forward.out"}, pdist_rule});
  rows.push_back({{"_pdist_backward", "_pdist_backward.out"}, pdist_backward_rule});
  rows.push_back({{"multi_margin_loss", "multi_margin_loss.out"}, multi_margin_rule});
  rows.push_back({{"multi_margin_loss_backward", "multi_margin_loss_backward.grad_input"}, multi_margin_backward_rule});
  rows.push_back({{"_cdist_backward", "_cdist_backward.out"}, cdist_backward_rule});
  // One sample (a 1-D input) with reduction='none': CPU returns a 0-d loss where PyTorch's decomposition, which
  // stands in for the meta kernel, says [1]; that call stays on the CPU so the shape is CPU's.
  ArgumentFilter batched_or_reduced = [](const std::vector<c10::IValue>& args) {
    return args.size() < 3 || !args[0].isTensor() || args[0].toTensor().dim() > 1 || args[2].toInt() != kNone;
  };
  rows.push_back({{"multilabel_margin_loss_forward", "multilabel_margin_loss_forward.output"}, multilabel_margin_rule,
                  nullptr, batched_or_reduced});
  rows.push_back({{"multilabel_margin_loss_backward", "multilabel_margin_loss_backward.grad_input"},
                  multilabel_margin_backward_rule});
}

}  // namespace torch_tpu
