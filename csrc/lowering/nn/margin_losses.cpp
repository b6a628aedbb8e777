// Margin losses: multi_margin_loss and multilabel_margin_loss, forward and backward.
#include <algorithm>
#include <cmath>
#include <utility>

#include "lowering/nn/nn_helpers.h"
#include "lowering/table.h"

namespace torch_tpu {
namespace {

using namespace nn_rules;  // NOLINT: the shared pieces read as local ones
using V = std::vector<Value>;

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

}  // namespace

void add_margin_loss_rules(Rows& rows) {
  rows.push_back({{"multi_margin_loss", "multi_margin_loss.out"}, multi_margin_rule});
  rows.push_back({{"multi_margin_loss_backward", "multi_margin_loss_backward.grad_input"}, multi_margin_backward_rule});
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
