// segment_reduce (sum, mean, max, min, prod over consecutive segments given by lengths or offsets, with an optional
// initial value) and _segment_reduce_backward, as the CPU kernels compute them. The data is viewed as (B, N, R) around
// `axis`; the segment of every position comes from the lengths/offsets on the device (ones where a segment ends,
// prefix-summed), so nothing is read on the host. Half types compute in float32.
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
using Ints = std::vector<int64_t>;

Value s64(HloBuilder& b, double v, const Ints& dims) { return b.constant(v, ElementType::kS64, dims); }

struct Segments {
  int64_t b = 1, n = 0, r = 1, s = 0;  // batch, positions along axis, trailing elements, segments
  Value row;                            // s64 [B*N]: output row (b*S + segment) of each position; B*S when none
  Value length;                         // s64 [B*S]: elements per segment
};

// data (pre..., N, post...); lengths (pre..., S) or offsets (pre..., S + 1).
Segments segments_of(HloBuilder& b, const Ints& data_dims, int64_t axis, const Value& bounds, bool offsets) {
  Segments g;
  for (int64_t d = 0; d < axis; ++d) g.b *= data_dims[d];
  g.n = data_dims[axis];
  for (size_t d = static_cast<size_t>(axis) + 1; d < data_dims.size(); ++d) g.r *= data_dims[d];
  int64_t width = bounds.type.dims.back();
  g.s = offsets ? width - 1 : width;
  Value v = b.convert(b.reshape(bounds, {g.b, width}), ElementType::kS64);
  Value ends = offsets ? b.slice(v, {0, 1}, {g.b, width}) : prefix_reduce(b, v, 1, "stablehlo.add", 0);  // [B, S]
  Value starts = offsets ? b.slice(v, {0, 0}, {g.b, g.s}) : sub(b, ends, v);
  g.length = b.reshape(sub(b, ends, starts), {g.b * g.s});
  if (g.n == 0 || g.s == 0) {
    g.row = s64(b, 0, {g.b * g.n});
    return g;
  }
  // A 1 at every segment end (an end at N, or past it, is dropped); segment of n = number of ends <= n.
  Value batch = b.broadcast_in_dim(b.iota({ElementType::kS64, {g.b}}, 0), {g.b, g.s}, {0});
  Value inside = lt(b, ends, s64(b, static_cast<double>(g.n), {g.b, g.s}));
  Value at = add(b, mul(b, batch, s64(b, static_cast<double>(g.n), {g.b, g.s})), ends);
  at = sel(b, inside, at, s64(b, static_cast<double>(g.b * g.n), {g.b, g.s}));
  Value marks = scatter_rows(b, s64(b, 0, {g.b * g.n}), s64(b, 1, {g.b * g.s}), b.reshape(at, {g.b * g.s}),
                             "stablehlo.add");
  Value seg = prefix_reduce(b, b.reshape(marks, {g.b, g.n}), 1, "stablehlo.add", 0);
  // Positions before the first offset belong to no segment either.
  Value pos = b.iota({ElementType::kS64, {g.b, g.n}}, 1);
  Value first = b.broadcast_in_dim(b.reshape(b.slice(starts, {0, 0}, {g.b, 1}), {g.b}), {g.b, g.n}, {0});
  Value valid = land(b, lt(b, seg, s64(b, static_cast<double>(g.s), {g.b, g.n})), ge(b, pos, first));
  Value rowb = b.broadcast_in_dim(b.iota({ElementType::kS64, {g.b}}, 0), {g.b, g.n}, {0});
  Value row = add(b, mul(b, rowb, s64(b, static_cast<double>(g.s), {g.b, g.n})), seg);
  g.row = b.reshape(sel(b, valid, row, s64(b, static_cast<double>(g.b * g.s), {g.b, g.n})), {g.b * g.n});
  return g;
}

double identity_of(const std::string& reduce) {
  if (reduce == "max") return -std::numeric_limits<double>::infinity();
  if (reduce == "min") return std::numeric_limits<double>::infinity();
  if (reduce == "prod") return 1;
  return 0;
}

const char* combiner_of(const std::string& reduce) {
  if (reduce == "max") return "stablehlo.maximum";
  if (reduce == "min") return "stablehlo.minimum";
  if (reduce == "prod") return "stablehlo.multiply";
  return "stablehlo.add";
}

// segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe, initial)
V segment_reduce_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value data = c.tensor(0);
  std::string reduce = c.arg(1).toStringRef();
  bool offsets = !c.has(2) && c.has(4);
  int64_t axis = normalize_dim(c.integer(5), data.type.rank());
  bool has_initial = c.has(7);
  if (o.numel() == 0) return {zeros(b, o)};
  Segments g = segments_of(b, data.type.dims, axis, c.tensor(offsets ? 4 : 2), offsets);
  ElementType t = opmath_type(o.dtype);
  Value init = has_initial ? b.convert(c.operand(7, o.dtype, {g.b * g.s, g.r}), t)
                           : b.constant(identity_of(reduce), t, {g.b * g.s, g.r});
  Value acc = init;
  if (g.n > 0) {
    Value x = b.reshape(b.convert(data, t), {g.b * g.n, g.r});
    acc = scatter_rows(b, init, x, g.row, combiner_of(reduce));
    if (reduce == "max" || reduce == "min") {  // a NaN in the segment is the result (the scatter may skip it)
      Value nans = scatter_rows(b, b.constant(0, t, init.type.dims), b.convert(isnan(b, x), t), g.row, "stablehlo.add");
      acc = sel(b, gt(b, nans, k(b, 0, nans)), k(b, std::numeric_limits<double>::quiet_NaN(), acc), acc);
    }
  }
  if (reduce == "mean") {
    Value len = b.broadcast_in_dim(b.convert(g.length, t), {g.b * g.s, g.r}, {0});
    Value empty = eq(b, len, k(b, 0, len));
    Value none = has_initial ? acc : k(b, std::numeric_limits<double>::quiet_NaN(), acc);
    acc = sel(b, empty, none, div(b, acc, sel(b, empty, k(b, 1, len), len)));
  }
  return {b.reshape(b.convert(acc, o.dtype), o.dims)};
}

// _segment_reduce_backward(grad, output, data, reduce, *, lengths, offsets, axis, initial)
V segment_reduce_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value data = c.tensor(2);
  std::string reduce = c.arg(3).toStringRef();
  bool offsets = !c.has(4) && c.has(5);
  int64_t axis = normalize_dim(c.integer(6), data.type.rank());
  if (o.numel() == 0) return {zeros(b, o)};
  Segments g = segments_of(b, data.type.dims, axis, c.tensor(offsets ? 5 : 4), offsets);
  ElementType t = opmath_type(o.dtype);
  int64_t rows = g.b * g.n, segs = g.b * g.s;
  if (segs == 0) return {zeros(b, o)};
  Value x = b.reshape(b.convert(data, t), {rows, g.r});
  Value has = b.broadcast_in_dim(lt(b, g.row, s64(b, static_cast<double>(segs), {rows})), {rows, g.r}, {0});
  Value safe = sel(b, lt(b, g.row, s64(b, static_cast<double>(segs), {rows})), g.row, s64(b, 0, {rows}));
  auto per_position = [&](const Value& per_segment) {  // [segs, R] -> [rows, R], 0 where no segment
    Value v = gather_dim(b, per_segment, safe, 0);
    return sel(b, has, v, zeros(b, v.type));
  };
  Value grad = b.reshape(b.convert(c.tensor(0), t), {segs, g.r});
  Value out = b.reshape(b.convert(c.tensor(1), t), {segs, g.r});
  Value gpos = per_position(grad);
  Value result;
  if (reduce == "sum") {
    result = gpos;
  } else if (reduce == "mean") {
    Value len = b.broadcast_in_dim(b.convert(g.length, t), {segs, g.r}, {0});
    result = per_position(div(b, grad, sel(b, eq(b, len, k(b, 0, len)), k(b, 1, len), len)));
  } else if (reduce == "max" || reduce == "min") {
    // Every element equal to the result (or NaN) gets the gradient; with two or more, the positive ones are
    // divided by their number (as the CPU kernel does).
    Value hit = land(b, has, lor(b, isnan(b, x), eq(b, x, per_position(out))));
    Value g1 = sel(b, hit, gpos, zeros(b, gpos.type));
    Value count = scatter_rows(b, b.constant(0, t, {segs, g.r}), b.convert(hit, t), g.row, "stablehlo.add");
    Value cpos = per_position(count);
    Value split = land(b, ge(b, cpos, k(b, 2, cpos)), gt(b, g1, k(b, 0, g1)));
    result = sel(b, split, div(b, g1, sel(b, split, cpos, k(b, 1, cpos))), g1);
  } else {  // prod
    Value opos = per_position(out);
    Value regular = div(b, mul(b, gpos, opos), x);
    // Where the product is 0 or NaN: the product of the other elements, from counts of zeros and NaNs and the
    // product of the remaining elements (times the initial value).
    Value zero = eq(b, x, k(b, 0, x)), nan = isnan(b, x);
    Value special = lor(b, zero, nan);
    Value plain = scatter_rows(b, c.has(7) ? b.convert(c.operand(7, o.dtype, {segs, g.r}), t) : b.constant(1, t, {segs, g.r}),
                               sel(b, special, k(b, 1, x), x), g.row, "stablehlo.multiply");
    Value zeros_n = per_position(scatter_rows(b, b.constant(0, t, {segs, g.r}), b.convert(zero, t), g.row, "stablehlo.add"));
    Value nans_n = per_position(scatter_rows(b, b.constant(0, t, {segs, g.r}), b.convert(nan, t), g.row, "stablehlo.add"));
    Value others_zero = sub(b, zeros_n, b.convert(zero, t));
    Value others_nan = sub(b, nans_n, b.convert(nan, t));
    Value rest = per_position(plain);
    rest = sel(b, special, rest, div(b, rest, x));
    Value excl = sel(b, gt(b, others_nan, k(b, 0, x)), k(b, std::numeric_limits<double>::quiet_NaN(), x),
                     sel(b, gt(b, others_zero, k(b, 0, x)), k(b, 0, x), rest));
    Value out_special = lor(b, eq(b, opos, k(b, 0, opos)), isnan(b, opos));
    result = sel(b, out_special, mul(b, gpos, excl), regular);
    result = sel(b, has, result, zeros(b, result.type));
  }
  return {b.reshape(b.convert(result, o.dtype), o.dims)};
}

}  // namespace

Value scatter_rows(HloBuilder& b, const Value& into, const Value& updates, const Value& idx, const std::string& op) {
  int64_t n = idx.type.numel();
  TensorType s{into.type.dtype, {}};
  std::string body = b.region({s, s}, [&](HloBuilder& r, const V& a) {
    return op.empty() ? V{a[1]} : V{r.op1(op, {a[0], a[1]}, s)};
  });
  Ints window;
  for (int64_t d = 1; d < into.type.rank(); ++d) window.push_back(d);
  std::string attrs = "scatter_dimension_numbers = #stablehlo.scatter<" +
                      (window.empty() ? std::string() : "update_window_dims = " + i64_list(window) + ", ") +
                      "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
                      "indices_are_sorted = false, unique_indices = false";
  Value rows = b.reshape(b.convert(idx, ElementType::kS64), {n, 1});
  return b.op1("stablehlo.scatter", {into, rows, updates}, into.type, attrs, {body});
}

void add_segment_reduce_rules(Rows& rows) {
  rows.push_back({{"segment_reduce", "segment_reduce.out"}, segment_reduce_rule});
  rows.push_back({{"_segment_reduce_backward", "_segment_reduce_backward.out"}, segment_reduce_backward_rule});
}

}  // namespace torch_tpu
