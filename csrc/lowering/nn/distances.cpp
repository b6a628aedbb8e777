// Pairwise distances: cdist (forward, backward) and pdist (forward, backward).
#include <algorithm>
#include <cmath>
#include <utility>

#include "lowering/nn/nn_helpers.h"
#include "lowering/table.h"

namespace torch_tpu {
namespace {

using namespace nn_rules;  // NOLINT: the shared pieces read as local ones
using V = std::vector<Value>;

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

void add_distance_rules(Rows& rows) {
  rows.push_back({{"_cdist_forward", "_cdist_forward.out"}, cdist_rule});
  rows.push_back({{"_pdist_forward", "_pdist_forward.out"}, pdist_rule});
  rows.push_back({{"_pdist_backward", "_pdist_backward.out"}, pdist_backward_rule});
  rows.push_back({{"_cdist_backward", "_cdist_backward.out"}, cdist_backward_rule});
}

}  // namespace torch_tpu
