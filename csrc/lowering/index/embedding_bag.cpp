// nn.EmbeddingBag: _embedding_bag / _embedding_bag_forward_only (sum, mean, max; per-sample weights; padding_idx;
// include_last_offset) and the dense backward with the per-sample-weights gradient. The bag of every index position
// comes from the offsets on the device (ones at offsets[1:], prefix-summed), so nothing is read on the host. Sums in
// float32 for half types. Sparse gradients (sparse=True) and scale_grad_by_freq with max stay on the CPU fallback.
#include <limits>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/scatter_rows.h"

namespace torch_tpu {
namespace {

using namespace hm;  // NOLINT: formula spellings
using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

Value s64(HloBuilder& b, double v, const std::vector<int64_t>& dims) { return b.constant(v, ElementType::kS64, dims); }

// The pieces every embedding_bag op needs: indices (s64 [n]), the bag of each position, which positions count.
struct Bags {
  int64_t n = 0, bags = 0;
  Value indices, bag, counted;  // counted: not padding_idx (pred [n])
};

// offsets: [bags] or [bags + 1] with include_last_offset (then the last bag runs to the end of indices, as on CPU).
Bags bags_of(HloBuilder& b, const Value& indices, const Value& offsets, int64_t bags, int64_t padding_idx) {
  Bags g;
  g.n = indices.type.numel();
  g.bags = bags;
  g.indices = b.convert(b.reshape(indices, {g.n}), ElementType::kS64);
  Value starts = b.convert(b.reshape(offsets, {offsets.type.numel()}), ElementType::kS64);
  Value marks = s64(b, 0, {g.n});
  if (bags > 1) {  // a 1 where each later bag starts (an empty bag adds another 1 at the same place)
    Value later = b.slice(starts, {1}, {bags});
    marks = scatter_rows(b, marks, s64(b, 1, {bags - 1}), later, "stablehlo.add");
  }
  g.bag = prefix_reduce(b, marks, 0, "stablehlo.add", 0);
  g.counted = b.constant(1, ElementType::kPred, {g.n});
  if (padding_idx >= 0) g.counted = ne(b, g.indices, s64(b, static_cast<double>(padding_idx), {g.n}));
  return g;
}

// _embedding_bag / _embedding_bag_forward_only(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
//   per_sample_weights, include_last_offset, padding_idx) -> (output, offset2bag, bag_size, max_indices)
V embedding_bag_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value weight = c.tensor(0);
  int64_t mode = c.integer(4), width = weight.type.dims[1];
  int64_t bags = o.dims[0];
  int64_t padding = c.has(8) ? c.integer(8) : -1;
  Bags g = bags_of(b, c.tensor(1), c.tensor(2), bags, padding);
  ElementType t = opmath_type(o.dtype);
  V results{zeros(b, o), zeros(b, c.out(1)), zeros(b, c.out(2)), zeros(b, c.out(3))};
  if (c.out(1).numel() == g.n && g.n > 0) results[1] = b.convert(g.bag, c.out(1).dtype);
  if (g.n == 0 || bags == 0) return results;
  Value rows = b.convert(gather_dim(b, weight, g.indices, 0), t);  // [n, width]
  if (c.has(6)) rows = mul(b, rows, b.broadcast_in_dim(b.convert(c.tensor(6), t), {g.n, width}, {0}));
  Value keep = b.broadcast_in_dim(g.counted, {g.n, width}, {0});
  Value size = scatter_rows(b, s64(b, 0, {bags}), b.convert(g.counted, ElementType::kS64), g.bag, "stablehlo.add");
  Value out;
  if (mode == kMax) {
    Value lowest = b.constant(-std::numeric_limits<double>::infinity(), t, {g.n, width});
    Value top = scatter_rows(b, b.constant(-std::numeric_limits<double>::infinity(), t, {bags, width}),
                             sel(b, keep, rows, lowest), g.bag, "stablehlo.maximum");
    // The first position holding each bag's maximum (the CPU kernel keeps the first on ties).
    Value pos = b.broadcast_in_dim(b.iota({ElementType::kS64, {g.n}}, 0), {g.n, width}, {0});
    Value hits = land(b, keep, eq(b, rows, gather_dim(b, top, g.bag, 0)));
    Value first = scatter_rows(b, s64(b, static_cast<double>(g.n), {bags, width}),
                               sel(b, hits, pos, s64(b, static_cast<double>(g.n), {g.n, width})), g.bag,
                               "stablehlo.minimum");
    Value found = lt(b, first, s64(b, static_cast<double>(g.n), {bags, width}));
    out = sel(b, found, top, b.constant(0, t, {bags, width}));
    if (c.out(3).dims == std::vector<int64_t>{bags, width}) {
      Value safe = sel(b, found, first, s64(b, 0, {bags, width}));
      Value which = b.reshape(gather_dim(b, g.indices, b.reshape(safe, {bags * width}), 0), {bags, width});
      results[3] = sel(b, found, which, s64(b, 0, {bags, width}));
    }
  } else {
    out = scatter_rows(b, b.constant(0, t, {bags, width}), sel(b, keep, rows, zeros(b, rows.type)), g.bag,
                       "stablehlo.add");
    if (mode == kMean) {
      Value count = b.convert(size, t);
      Value denom = sel(b, gt(b, count, k(b, 0, count)), count, k(b, 1, count));
      out = div(b, out, b.broadcast_in_dim(denom, {bags, width}, {0}));
    }
  }
  results[0] = b.convert(out, o.dtype);
  if (mode != kSum && c.out(2).numel() >= bags) {
    Value padded = c.out(2).numel() == bags ? size : b.concatenate({size, s64(b, 0, {c.out(2).numel() - bags})}, 0);
    results[2] = b.reshape(padded, c.out(2).dims);
  }
  return results;
}

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
//   scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx) -> dense grad of weight
V embedding_bag_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value grad = c.tensor(0);
  int64_t bags = grad.type.dims[0], width = grad.type.dims[1];
  int64_t mode = c.integer(8), padding = c.has(11) ? c.integer(11) : -1;
  ElementType t = opmath_type(o.dtype);
  Value into = b.constant(0, t, o.dims);
  Value gt_ = b.convert(grad, t);
  if (mode == kMax) {
    Value which = b.convert(b.reshape(c.tensor(5), {bags * width}), ElementType::kS64);
    Value size = b.convert(b.slice(b.reshape(c.tensor(4), {c.tensor(4).type.numel()}), {0}, {bags}), ElementType::kS64);
    Value nonempty = b.broadcast_in_dim(gt(b, size, s64(b, 0, {bags})), {bags, width}, {0});
    Value g = sel(b, nonempty, gt_, zeros(b, gt_.type));
    // grad[b, d] goes to weight[maximum_indices[b, d], d]: scatter into the flattened weight at row * width + d.
    Value col = b.broadcast_in_dim(b.iota({ElementType::kS64, {width}}, 0), {bags, width}, {1});
    Value flat = b.binary("stablehlo.add", b.binary("stablehlo.multiply", b.reshape(which, {bags, width}),
                                                    s64(b, static_cast<double>(width), {bags, width})),
                          col);
    Value r = scatter_rows(b, b.reshape(into, {o.numel()}), b.reshape(g, {bags * width}),
                           b.reshape(flat, {bags * width}), "stablehlo.add");
    return {b.convert(b.reshape(r, o.dims), o.dtype)};
  }
  Value indices = c.tensor(1);
  int64_t n = indices.type.numel();
  if (n == 0 || bags == 0) return {zeros(b, o)};
  Bags g = bags_of(b, indices, c.tensor(2), bags, padding);
  Value rows = gather_dim(b, gt_, sel(b, lt(b, g.bag, s64(b, static_cast<double>(bags), {n})), g.bag, s64(b, 0, {n})), 0);
  Value scale = b.convert(g.counted, t);  // 0 for padding positions
  if (mode == kMean) {
    Value size = b.convert(scatter_rows(b, s64(b, 0, {bags}), b.convert(g.counted, ElementType::kS64), g.bag,
                                        "stablehlo.add"),
                           t);
    Value per = gather_dim(b, sel(b, gt(b, size, k(b, 0, size)), size, k(b, 1, size)), g.bag, 0);
    scale = div(b, scale, per);
  }
  if (c.has(10)) scale = mul(b, scale, b.convert(b.reshape(c.tensor(10), {n}), t));
  if (c.flag(7)) {  // scale_grad_by_freq: divided by how often each index occurs
    Value counts = scatter_rows(b, b.constant(0, t, {o.dims[0]}), b.constant(1, t, {n}), g.indices, "stablehlo.add");
    scale = div(b, scale, gather_dim(b, counts, g.indices, 0));
  }
  rows = mul(b, rows, b.broadcast_in_dim(scale, {n, width}, {0}));
  return {b.convert(scatter_rows(b, into, rows, g.indices, "stablehlo.add"), o.dtype)};
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx):
// the dot product of each position's output gradient with its weight row (0 at padding positions).
V per_sample_weights_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value grad = c.tensor(0), weight = c.tensor(1);
  int64_t bags = grad.type.dims[0];
  int64_t padding = c.has(6) ? c.integer(6) : -1;
  int64_t n = c.tensor(2).type.numel();
  if (n == 0) return {zeros(b, o)};
  Bags g = bags_of(b, c.tensor(2), c.tensor(3), bags, padding);
  ElementType t = opmath_type(o.dtype);
  Value in_range = lt(b, g.bag, s64(b, static_cast<double>(bags), {n}));
  Value rows = gather_dim(b, b.convert(grad, t), sel(b, in_range, g.bag, s64(b, 0, {n})), 0);
  Value w = b.convert(gather_dim(b, weight, g.indices, 0), t);
  Value dot = reduce_sum(b, mul(b, rows, w), {1});
  Value keep = land(b, g.counted, in_range);
  return {b.convert(sel(b, keep, dot, b.constant(0, t, {n})), o.dtype)};
}

bool dense_backward(const std::vector<c10::IValue>& args) {  // sparse grads, and max with scale_grad_by_freq: CPU
  if (args.size() < 10 || !args[9].isBool() || args[9].toBool()) return false;
  return !(args[8].isInt() && args[8].toInt() == kMax && args[7].isBool() && args[7].toBool());
}

}  // namespace

void add_embedding_bag_rules(Rows& rows) {
  rows.push_back({{"_embedding_bag", "_embedding_bag.out", "_embedding_bag_forward_only",
                   "_embedding_bag_forward_only.out"},
                  embedding_bag_rule});
  rows.push_back({{"_embedding_bag_backward"}, embedding_bag_backward_rule, nullptr, dense_backward});
  rows.push_back({{"_embedding_bag_per_sample_weights_backward", "_embedding_bag_per_sample_weights_backward.out"},
                  per_sample_weights_backward_rule});
}

}  // namespace torch_tpu
