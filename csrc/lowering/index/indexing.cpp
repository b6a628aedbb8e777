// Indexing, joining and shape ops: cat, index_select, gather, scatter/scatter_add/scatter_reduce,
// index_add/copy/fill, embedding backward, advanced indexing (index / index_put, bool masks in index_put). Factories
// and shape ops (arange, tril, flip, roll, sort, ...): shape_ops.cpp.
//
// Everything that reads or writes at user indices becomes one stablehlo.gather or stablehlo.scatter over "points":
// an s64 tensor of shape B + [k] whose last dim holds coordinates into k operand dims (ascending); the other dims
// are taken whole. XLA clamps out-of-range gather starts and drops out-of-range scatter updates where PyTorch
// raises, so each rule checks its indices on the host first (min and max: two small programs and syncs).
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;
using Dims = std::vector<int64_t>;

bool contains(const Dims& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

Dims range(int64_t lo, int64_t hi) {
  Dims out;
  for (int64_t i = lo; i < hi; ++i) out.push_back(i);
  return out;
}

// `name = [..], ` or nothing: the XLA parser accepts missing fields more reliably than empty lists.
std::string field(const char* name, const Dims& v) { return v.empty() ? "" : std::string(name) + " = " + i64_list(v) + ", "; }

// The range check for indices that do not travel as a plain tensor argument (Tensor?[] lists) or whose error
// must be a RuntimeError (gather/scatter/index_add on the CPU raise those). Two host syncs.
// Index values must lie in [lo, hi) along `dim`, checked on the device (see OpContext::check).
void check_points(OpContext& c, const Value& idx, int64_t lo, int64_t hi, int64_t dim, bool index_error) {
  c.check_range(idx, lo, hi,
                "index {value} is out of bounds for dimension " + std::to_string(dim) + " with size " +
                    std::to_string(hi),
                std::nullopt, index_error);
}

// Where the kept (non-indexed) operand dims land in the result of indexing `rank` dims at `pos` with `batch_rank`
// index dims: NumPy puts the index dims in place of adjacent indexed dims, otherwise in front.
Dims window_dims(int64_t rank, const Dims& pos, int64_t batch_rank) {
  bool adjacent = pos.back() - pos.front() + 1 == static_cast<int64_t>(pos.size());
  Dims out;
  int64_t next = adjacent ? 0 : batch_rank;
  for (int64_t d = 0; d < rank; ++d) {
    if (contains(pos, d)) {
      if (adjacent && d == pos.front()) next += batch_rank;
      continue;
    }
    out.push_back(next++);
  }
  return out;
}

// Shape of self[points]: the batch dims B of `points` plus the kept dims of `self`.
Dims indexed_dims(const Dims& self, const Dims& pos, const Dims& batch) {
  int64_t rank = static_cast<int64_t>(self.size());
  Dims win = window_dims(rank, pos, static_cast<int64_t>(batch.size()));
  Dims out(batch.size() + self.size() - pos.size(), 0);
  size_t w = 0, bi = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (!contains(pos, d)) out[win[w++]] = self[d];
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!contains(win, static_cast<int64_t>(i))) out[i] = batch[bi++];
  }
  return out;
}

Dims batch_of(const Value& points) { return Dims(points.type.dims.begin(), points.type.dims.end() - 1); }

Value gather_points(HloBuilder& b, const Value& self, const Dims& pos, const Value& points) {
  Dims batch = batch_of(points);
  int64_t rank = self.type.rank();
  Dims sizes = self.type.dims;
  for (int64_t p : pos) sizes[p] = 1;
  std::string attrs = "dimension_numbers = #stablehlo.gather<" + field("offset_dims", window_dims(rank, pos, batch.size())) +
                      field("collapsed_slice_dims", pos) + field("start_index_map", pos) +
                      "index_vector_dim = " + std::to_string(batch.size()) + ">, slice_sizes = " + i64_array(sizes) +
                      ", indices_are_sorted = false";
  return b.op1("stablehlo.gather", {self, points}, {self.type.dtype, indexed_dims(self.type.dims, pos, batch)}, attrs);
}

// Scatters `updates` (shaped self[points]) into self; `combiner` empty means replace.
Value scatter_points(HloBuilder& b, const Value& self, const Dims& pos, const Value& points, const Value& updates,
                     std::string combiner) {
  Dims batch = batch_of(points);
  TensorType scalar{self.type.dtype, {}};
  if (combiner == "stablehlo.add" && scalar.dtype == ElementType::kPred) combiner = "stablehlo.or";
  if (combiner == "stablehlo.multiply" && scalar.dtype == ElementType::kPred) combiner = "stablehlo.and";
  std::string body = b.region({scalar, scalar}, [&](HloBuilder& rb, const V& args) -> V {
    if (combiner.empty()) return {args[1]};
    return {rb.op1(combiner, {args[0], args[1]}, scalar)};
  });
  std::string attrs = "scatter_dimension_numbers = #stablehlo.scatter<" +
                      field("update_window_dims", window_dims(self.type.rank(), pos, batch.size())) +
                      field("inserted_window_dims", pos) + field("scatter_dims_to_operand_dims", pos) +
                      "index_vector_dim = " + std::to_string(batch.size()) +
                      ">, indices_are_sorted = false, unique_indices = false";
  return b.op1("stablehlo.scatter", {self, points, updates}, self.type, attrs, {body});
}

// scatter_points for an in-place op with bounds checks, writing nothing when one of them failed without touching
// the rest of `s` (OpContext::keep_target_on_failure): the points are clamped into range and a failed op writes
// back what is there (replace) or adds zero. XLA then scatters into the donated buffer in place; a select over the
// whole target would make it copy the buffer on every update (a KV cache, an embedding table).
Value guarded_scatter(OpContext& c, const Value& s, const Dims& pos, const Value& points, Value updates,
                      const std::string& combiner) {
  if (!c.failed()) return scatter_points(c.b, s, pos, points, updates, combiner);
  HloBuilder& b = c.b;
  Dims column = points.type.dims;
  column.back() = 1;
  std::vector<Value> highest;
  for (int64_t p : pos) highest.push_back(b.constant(static_cast<double>(s.type.dims[p] - 1), ElementType::kS64, column));
  Value top = highest.size() == 1 ? highest[0] : b.concatenate(highest, points.type.rank() - 1);
  Value clamped = b.binary("stablehlo.minimum", b.binary("stablehlo.maximum", points, zeros(b, points.type)), top);
  Value kept = combiner.empty() ? gather_points(b, s, pos, clamped) : zeros(b, updates.type);
  updates = b.select(b.broadcast_to(*c.failed(), updates.type.dims), kept, updates);
  c.keep_target_on_failure();
  return scatter_points(b, s, pos, clamped, updates, combiner);
}

// A 1-D index (or 0-d) as points into one dim: shape [n, 1].
Value column_points(HloBuilder& b, const Value& index) {
  return b.reshape(b.convert(index, ElementType::kS64), {index.type.numel(), 1});
}

// Points naming every coordinate: index along `dim`, the position itself along the others (gather/scatter).
Value full_points(HloBuilder& b, const Value& index, int64_t dim, int64_t rank) {
  Dims shape = index.type.dims;
  Dims col = shape;
  col.push_back(1);
  std::vector<Value> parts;
  for (int64_t d = 0; d < rank; ++d) {
    Value v = d == dim ? b.convert(index, ElementType::kS64) : b.iota({ElementType::kS64, shape}, d);
    parts.push_back(b.reshape(v, col));
  }
  return parts.size() == 1 ? parts[0] : b.concatenate(parts, static_cast<int64_t>(shape.size()));
}

Value as_rank1(HloBuilder& b, const Value& v) { return v.type.rank() == 0 ? b.reshape(v, {1}) : v; }

}  // namespace

namespace {

// ---- cat ----

V cat_rule(OpContext& c) {  // cat(tensors, dim)
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  std::vector<Value> parts;
  for (const Value& v : c.tensor_list(0)) {
    if (v.type.numel() == 0) continue;  // contributes nothing (legacy [0]-shaped inputs included)
    parts.push_back(c.b.convert(v, o.dtype));
  }
  int64_t d = c.dim(1, o.rank());
  return {parts.size() == 1 ? parts[0] : c.b.concatenate(parts, d)};
}

// ---- index_select / gather / scatter / index_add ----

V index_select_rule(OpContext& c) {  // index_select(self, dim, index)
  Value self = as_rank1(c.b, c.tensor(0));
  int64_t d = c.dim(1, self.type.rank());
  int64_t n = c.arg(2).toTensor().numel();
  TORCH_CHECK_INDEX(c.arg(0).toTensor().dim() > 0 || n == 1, "index_select(): Index to scalar can have only 1 value, got ",
                    n, " value(s)");
  c.check_index_range(2, 0, self.type.dims[d], "index out of range in self");
  if (c.out(0).numel() == 0) return {zeros(c.b, c.out(0))};
  return {gather_points(c.b, self, {d}, column_points(c.b, c.tensor(2)))};
}

V gather_rule(OpContext& c) {  // gather(self, dim, index, sparse_grad)
  Value self = as_rank1(c.b, c.tensor(0));
  int64_t r = self.type.rank(), d = c.dim(1, r);
  check_points(c, c.tensor(2), 0, self.type.dims[d], d, false);
  if (c.out(0).numel() == 0) return {zeros(c.b, c.out(0))};
  Value index = c.tensor(2);
  if (index.type.rank() == 0) index = c.b.reshape(index, Dims(r, 1));
  return {gather_points(c.b, self, range(0, r), full_points(c.b, index, d, r))};
}

// scatter(self, dim, index, src|value[, reduce]) and scatter_add: updates are src cut to index's shape.
// The operands of the scatter-along-a-dim rules, args (self, dim, index, ...): self (and at least rank 1), the dim,
// and the bounds-checked index at self's rank. `empty` when there is nothing to scatter.
struct DimScatter {
  Value self, s, index;
  int64_t r = 0, d = 0;
  bool empty = false;
};

DimScatter dim_scatter_operands(OpContext& c) {
  DimScatter o;
  o.self = c.tensor(0);
  o.s = as_rank1(c.b, o.self);
  o.r = o.s.type.rank();
  o.d = c.dim(1, o.r);
  check_points(c, c.tensor(2), 0, o.s.type.dims[o.d], o.d, false);
  o.index = c.tensor(2);
  o.empty = o.index.type.numel() == 0;
  if (o.index.type.rank() == 0) o.index = c.b.reshape(o.index, Dims(o.r, 1));
  return o;
}

LoweringRule scatter_rule(const std::string& fixed_combiner) {
  return [fixed_combiner](OpContext& c) -> V {
    DimScatter o = dim_scatter_operands(c);
    if (o.empty) return {o.self};
    const Value &self = o.self, &s = o.s, &index = o.index;
    int64_t r = o.r, d = o.d;
    Value upd;
    if (c.is_tensor(3)) {
      upd = as_rank1(c.b, c.b.convert(c.tensor(3), s.type.dtype));
      upd = c.b.slice(upd, Dims(r, 0), index.type.dims);
    } else {
      upd = c.operand(3, s.type.dtype, index.type.dims);  // a runtime scalar: new fill values reuse the program
    }
    std::string combiner = fixed_combiner;
    if (c.has(4) && c.arg(4).isString()) {
      const std::string& mode = c.arg(4).toStringRef();
      TORCH_CHECK(mode == "add" || mode == "multiply", "reduce argument must be either add or multiply, got ", mode);
      combiner = mode == "add" ? "stablehlo.add" : "stablehlo.multiply";
    }
    // CPU's scatter_add/scatter(reduce=) accumulate float16/bfloat16 in float32 and round once.
    ElementType t = s.type.dtype, acc = combiner.empty() ? t : opmath_type(t);
    Value out = scatter_points(c.b, c.b.convert(s, acc), range(0, r), full_points(c.b, index, d, r),
                               c.b.convert(upd, acc), combiner);
    return {c.b.reshape(c.b.convert(out, t), self.type.dims)};
  };
}

Value wrap_negative(HloBuilder& b, const Value& v, int64_t size) {
  Value negative = b.compare(CompareDirection::kLt, v, zeros(b, v.type));
  return b.select(negative, b.binary("stablehlo.add", v, b.constant(static_cast<double>(size), v.type.dtype, v.type.dims)), v);
}

// Scatters along one dim: index_add(self, dim, index, source, alpha), index_copy(self, dim, index, source),
// index_fill(self, dim, index, value; negative indices wrap).
enum class Along { kAdd, kCopy, kFill };

LoweringRule index_along_rule(Along kind) {
  return [kind](OpContext& c) -> V {
    Value self = c.tensor(0);
    Value s = as_rank1(c.b, self);
    int64_t d = c.dim(1, s.type.rank()), size = s.type.dims[d];
    check_points(c, c.tensor(2), kind == Along::kFill ? -size : 0, size, d, kind != Along::kAdd);
    Value index = c.tensor(2);
    if (index.type.numel() == 0) return {self};
    Dims upd_dims = s.type.dims;
    upd_dims[d] = index.type.numel();
    Value points = column_points(c.b, index);
    Value upd;
    if (kind == Along::kFill) {
      points = wrap_negative(c.b, points, size);
      upd = c.operand(3, s.type.dtype, upd_dims);
    } else {
      upd = c.b.reshape(c.b.convert(c.tensor(3), s.type.dtype), upd_dims);
      if (kind == Along::kAdd && c.has(4) && !c.is_unit(4)) {
        upd = c.b.binary("stablehlo.multiply", upd, c.operand(4, s.type.dtype, upd_dims));
      }
    }
    Value out = guarded_scatter(c, s, {d}, points, upd, kind == Along::kAdd ? "stablehlo.add" : "");
    return {c.b.reshape(out, self.type.dims)};
  };
}

// Reduces src into s at `points` (full coordinates, shaped src + [rank]) with scatter_reduce's modes: without
// include_self the hit positions start from the reduction's identity; mean divides by the number of contributions
// (floor division for integers). scatter_reduce and index_reduce share it. `stored_as`: the type the result is
// stored in when s is a wider accumulator (mean rounds sum and count to it before dividing).
Value reduce_into(OpContext& c, const Value& s, const Value& points, const Value& src, const std::string& mode,
                  bool include_self, std::optional<ElementType> stored_as = std::nullopt) {
  ElementType t = s.type.dtype, stored = stored_as.value_or(t);
  const Dims& src_dims = src.type.dims;
  int64_t r = s.type.rank();
  TORCH_CHECK(mode == "sum" || mode == "mean" || mode == "prod" || mode == "amax" || mode == "amin",
              "reduce argument must be either sum, prod, mean, amax or amin, got ", mode);
  std::string op = mode == "prod" ? "stablehlo.multiply"
                   : mode == "amax" ? "stablehlo.maximum"
                   : mode == "amin" ? "stablehlo.minimum"
                                    : "stablehlo.add";
  double identity = mode == "prod" ? 1.0 : mode == "amax" ? lowest(t) : mode == "amin" ? highest(t) : 0.0;
  Dims all = range(0, r);
  Value base = include_self ? s : scatter_points(c.b, s, all, points, c.b.constant(identity, t, src_dims), "");
  Value out = scatter_points(c.b, base, all, points, src, op);
  if ((mode == "amax" || mode == "amin") && is_floating(t)) {  // XLA's max/min may drop a NaN; PyTorch keeps it
    Value src_nan = c.b.compare(CompareDirection::kNe, src, src);
    Value hit_nan = scatter_points(c.b, c.b.constant(0, ElementType::kPred, s.type.dims), all, points, src_nan, "stablehlo.add");
    hit_nan = c.b.binary("stablehlo.or", hit_nan, c.b.compare(CompareDirection::kNe, base, base));
    out = c.b.select(hit_nan, c.b.constant(NAN, t, s.type.dims), out);
  }
  if (mode == "mean") {
    Value count = scatter_points(c.b, c.b.constant(include_self ? 1 : 0, t, s.type.dims), all, points,
                                 c.b.constant(1, t, src_dims), "stablehlo.add");
    if (stored != t) {  // sum and count are rounded to the tensor's type before the division, as on CPU
      out = c.b.convert(c.b.convert(out, stored), t);
      count = c.b.convert(c.b.convert(count, stored), t);
    }
    count = c.b.binary("stablehlo.maximum", count, c.b.constant(1, t, s.type.dims));
    Value q = c.b.binary("stablehlo.divide", out, count);
    if (!is_floating(t) && !is_complex(t)) {  // integer divide truncates; PyTorch floors negative sums
      Value rem = c.b.binary("stablehlo.remainder", out, count);
      Value fix = c.b.binary("stablehlo.and", c.b.compare(CompareDirection::kNe, rem, zeros(c.b, rem.type)),
                             c.b.compare(CompareDirection::kLt, out, zeros(c.b, out.type)));
      q = c.b.select(fix, c.b.binary("stablehlo.subtract", q, c.b.constant(1, t, s.type.dims)), q);
    }
    out = q;
  }
  return out;
}

// scatter_reduce.two(self, dim, index, src, reduce, include_self)
V scatter_reduce_rule(OpContext& c) {
  DimScatter o = dim_scatter_operands(c);
  if (o.empty) return {o.self};
  const Value &self = o.self, &s = o.s, &index = o.index;
  int64_t r = o.r, d = o.d;
  Value src = c.b.slice(as_rank1(c.b, c.b.convert(c.tensor(3), s.type.dtype)), Dims(r, 0), index.type.dims);
  bool include_self = !c.has(5) || c.flag(5);
  // CPU's scatter_reduce accumulates float16/bfloat16 in float32 (sum, mean and prod; max/min are exact anyway) and
  // rounds once; index_reduce (below) accumulates in the tensor's own type, as CPU's does.
  ElementType t = s.type.dtype, acc = opmath_type(t);
  Value out = reduce_into(c, c.b.convert(s, acc), full_points(c.b, index, d, r), c.b.convert(src, acc),
                          c.arg(4).toStringRef(), include_self, t);
  return {c.b.reshape(c.b.convert(out, t), self.type.dims)};
}

// index_reduce(self, dim, index, source, reduce, include_self): source's slices along dim reduced into the slices
// of self that index names.
V index_reduce_rule(OpContext& c) {
  Value self = c.tensor(0);
  Value s = as_rank1(c.b, self);
  int64_t r = s.type.rank(), d = c.dim(1, r), size = s.type.dims[d];
  Value index = as_rank1(c.b, c.tensor(2));
  c.check_range(index, 0, size, "index out of range in self");
  if (index.type.numel() == 0) return {self};
  Dims src_dims = s.type.dims;
  src_dims[d] = index.type.numel();
  Value src = c.b.reshape(c.b.convert(c.tensor(3), s.type.dtype), src_dims);
  Value idx = c.b.broadcast_in_dim(c.b.convert(c.b.reshape(index, {index.type.numel()}), ElementType::kS64), src_dims, {d});
  bool include_self = !c.has(5) || c.flag(5);
  Value out = reduce_into(c, s, full_points(c.b, idx, d, r), src, c.arg(4).toStringRef(), include_self);
  return {c.b.reshape(out, self.type.dims)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq): the rows of
// grad_output summed into the rows their indices name. The forward's index_select already checked the indices
// (and XLA drops out-of-range scatter updates), so no host sync here.
V embedding_backward_rule(OpContext& c) {
  TensorType o = c.out(0);
  Value idx_t = c.tensor(1);
  int64_t n = idx_t.type.numel(), width = o.dims[1];
  if (n == 0 || o.numel() == 0) return {zeros(c.b, o)};
  Value grad = c.b.reshape(c.b.convert(c.tensor(0), o.dtype), {n, width});
  Value flat = c.b.convert(c.b.reshape(idx_t, {n}), ElementType::kS64);
  Value points = c.b.reshape(flat, {n, 1});
  int64_t padding = c.integer(3);
  if (padding >= 0) {  // the padding row's grad stays zero
    Value hit = c.b.compare(CompareDirection::kEq, flat, c.b.constant(static_cast<double>(padding), ElementType::kS64, {n}));
    grad = c.b.select(c.b.broadcast_in_dim(hit, {n, width}, {0}), zeros(c.b, grad.type), grad);
  }
  if (c.flag(4)) {  // divide each contribution by how often its index occurs
    Value counts = scatter_points(c.b, c.b.constant(0, o.dtype, {o.dims[0]}), {0}, points,
                                  c.b.constant(1, o.dtype, {n}), "stablehlo.add");
    Value per = gather_points(c.b, counts, {0}, points);
    grad = c.b.binary("stablehlo.divide", grad, c.b.broadcast_in_dim(per, {n, width}, {0}));
  }
  return {scatter_points(c.b, zeros(c.b, o), {0}, points, grad, "stablehlo.add")};
}

// embedding_renorm_(self, indices, max_norm, norm_type): every row named by `indices` whose norm exceeds max_norm is
// scaled by max_norm / (norm + 1e-7), as the CPU kernel does (norm rounded to the weight's dtype, scale in double).
V embedding_renorm_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value w = c.tensor(0);
  TensorType o = c.out(0);
  Value idx_t = c.tensor(1);
  int64_t n = idx_t.type.numel();
  if (n == 0 || o.numel() == 0 || w.type.rank() != 2) return {w};
  int64_t rows = w.type.dims[0], width = w.type.dims[1];
  ElementType t = opmath_type(w.type.dtype);
  Value x = b.convert(w, t);
  double p = c.scalar(3), max_norm = c.scalar(2);
  Value a = b.unary("stablehlo.abs", x);
  Value norm;
  if (std::isinf(p)) {
    norm = b.reduce(a, b.constant(0, t), {1}, "stablehlo.maximum");
  } else if (p == 1) {
    norm = reduce_sum(b, a, {1});
  } else if (p == 2) {
    norm = b.unary("stablehlo.sqrt", reduce_sum(b, b.binary("stablehlo.multiply", x, x), {1}));
  } else {
    Value powed = b.binary("stablehlo.power", a, b.constant(p, t, a.type.dims));
    norm = b.binary("stablehlo.power", reduce_sum(b, powed, {1}), b.constant(1.0 / p, t, {rows}));
  }
  norm = b.convert(b.convert(norm, w.type.dtype), ElementType::kF64);
  Value points = b.reshape(b.convert(b.reshape(idx_t, {n}), ElementType::kS64), {n, 1});
  Value named = scatter_points(b, b.constant(0, ElementType::kF64, {rows}), {0}, points,
                               b.constant(1, ElementType::kF64, {n}), "stablehlo.maximum");
  Value over = b.binary("stablehlo.and", b.compare(CompareDirection::kGt, named, b.constant(0, ElementType::kF64, {rows})),
                        b.compare(CompareDirection::kGt, norm, b.constant(max_norm, ElementType::kF64, {rows})));
  Value scale = b.binary("stablehlo.divide", b.constant(max_norm, ElementType::kF64, {rows}),
                         b.binary("stablehlo.add", norm, b.constant(1e-7, ElementType::kF64, {rows})));
  scale = b.convert(b.select(over, scale, b.constant(1, ElementType::kF64, {rows})), t);
  Value y = b.binary("stablehlo.multiply", x, b.broadcast_in_dim(scale, {rows, width}, {0}));
  return {b.convert(y, o.dtype)};
}

// ---- advanced indexing: index.Tensor / index_put ----

struct Points {
  Dims pos;           // indexed dims, ascending
  Value points;       // B + [k] s64 (absent when there are none)
  bool empty = true;  // no index tensor at all
  int64_t mask = -1;  // position of a bool mask index, when that is the (only) index
  at::Tensor mask_tensor;
  Value mask_value;
};

bool is_mask(const at::Tensor& t) { return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte; }

Dims broadcast_shapes(const std::vector<Dims>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Dims out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      TORCH_CHECK_INDEX(o == 1 || s[i] == 1 || o == s[i], "shape mismatch: indexing tensors could not be broadcast together");
      if (s[i] != 1) o = s[i];
    }
  }
  return out;
}

// The Tensor?[] argument `arg` against a tensor of shape `dims`: broadcast, negative indices wrapped.
Points index_points(OpContext& c, size_t arg, const Dims& dims, bool check) {
  Points p;
  std::vector<Value> values = c.tensor_list(arg);
  std::vector<Value> used;
  std::vector<Dims> shapes;
  size_t j = 0;
  int64_t position = 0;
  for (const c10::IValue& e : c.arg(arg).toListRef()) {
    if (e.isTensor() && e.toTensor().defined()) {
      const at::Tensor& t = e.toTensor();
      Value v = values.at(j++);
      if (is_mask(t)) {
        TORCH_CHECK_NOT_IMPLEMENTED(t.dim() > 0 && p.mask < 0, "tpu indexing with a 0-d or a second bool mask");
        p.mask = position;
        p.mask_tensor = t;
        p.mask_value = v;
        position += t.dim();
        continue;
      }
      TORCH_CHECK(position < static_cast<int64_t>(dims.size()), "too many indices for tensor of dimension ", dims.size());
      if (check) check_points(c, v, -dims[position], dims[position], position, true);
      p.pos.push_back(position);
      used.push_back(v);
      shapes.push_back(v.type.dims);
    }
    ++position;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(p.mask < 0 || used.empty(), "tpu indexing mixing bool masks with integer indices");
  if (used.empty()) return p;
  p.empty = false;
  Dims batch = broadcast_shapes(shapes);
  Dims col = batch;
  col.push_back(1);
  std::vector<Value> parts;
  for (size_t i = 0; i < used.size(); ++i) {
    Value v = c.b.broadcast_to(c.b.convert(used[i], ElementType::kS64), batch);
    parts.push_back(c.b.reshape(wrap_negative(c.b, v, dims[p.pos[i]]), col));
  }
  p.points = parts.size() == 1 ? parts[0] : c.b.concatenate(parts, static_cast<int64_t>(batch.size()));
  return p;
}

V index_rule(OpContext& c) {  // index.Tensor(self, indices)
  Value self = c.tensor(0);
  Points p = index_points(c, 1, self.type.dims, true);
  TORCH_CHECK_NOT_IMPLEMENTED(p.mask < 0, "tpu index.Tensor with a bool mask");  // meta can't shape it anyway
  if (p.empty) return {self};
  if (c.out(0).numel() == 0) return {zeros(c.b, c.out(0))};
  return {gather_points(c.b, self, p.pos, p.points)};
}

// Values may carry extra leading size-1 dims beyond the indexing result's rank (PyTorch drops them).
Value fit_rank(HloBuilder& b, const Value& v, size_t rank) {
  if (v.type.rank() <= static_cast<int64_t>(rank)) return v;
  return b.reshape(v, Dims(v.type.dims.end() - rank, v.type.dims.end()));
}

// self[mask] = values (or +=) for one bool mask at dims [at, at + mask rank). Values of one element broadcast;
// otherwise the i-th true element takes values[i], found through a prefix count of the mask.
Value mask_put(OpContext& c, const Value& self, const Points& p, const Value& values, bool accumulate) {
  HloBuilder& b = c.b;
  Value mask = p.mask_value;
  if (mask.type.dtype != ElementType::kPred) mask = b.compare(CompareDirection::kNe, mask, zeros(b, mask.type));
  int64_t at = p.mask, k = mask.type.rank();
  Dims dims = self.type.dims;
  TORCH_CHECK_INDEX(at + k <= self.type.rank(), "too many indices for tensor of dimension ", self.type.rank());
  for (int64_t i = 0; i < k; ++i) {
    TORCH_CHECK_INDEX(mask.type.dims[i] == dims[at + i], "The shape of the mask ", c10::IntArrayRef(mask.type.dims),
                      " at index ", i, " does not match the shape of the indexed tensor ", c10::IntArrayRef(dims),
                      " at index ", at + i);
  }
  Dims head(dims.begin(), dims.begin() + at), tail(dims.begin() + at + k, dims.end());
  Dims result = head;  // shape of self[mask] with the count left open
  result.push_back(1);
  result.insert(result.end(), tail.begin(), tail.end());
  Value vals = fit_rank(b, values, result.size());
  int64_t vk = 1, off = static_cast<int64_t>(result.size()) - vals.type.rank();
  if (at - off >= 0 && at - off < vals.type.rank()) vk = vals.type.dims[at - off];
  Value upd;
  if (vk == 1) {
    Dims ones = head;
    ones.insert(ones.end(), k, 1);
    ones.insert(ones.end(), tail.begin(), tail.end());
    upd = b.broadcast_to(b.reshape(b.broadcast_to(vals, result), ones), dims);
  } else {
    // The number of true elements must equal the number of values: checked on the device, not by waiting for it.
    std::vector<int64_t> all = range(0, mask.type.rank());
    Value count = b.reduce(b.convert(mask, ElementType::kS64), b.constant(0, ElementType::kS64), all, "stablehlo.add");
    Value bad = b.compare(CompareDirection::kNe, count, b.constant(static_cast<double>(vk), ElementType::kS64));
    c.check(bad,
            "shape mismatch: value tensor of shape " + i64_list(vals.type.dims) +
                " cannot be broadcast to indexing result of shape [{value}]",
            false, count);
    if (vk == 0) return self;  // no true element (checked above) and nothing to gather from: nothing is written
    result[at] = vk;
    Value full = b.broadcast_to(vals, result);
    int64_t n = mask.type.numel();
    Value ranks = prefix_reduce(b, b.convert(b.reshape(mask, {n}), ElementType::kS64), 0, "stablehlo.add", 0);
    ranks = b.binary("stablehlo.maximum", b.binary("stablehlo.subtract", ranks, b.constant(1, ElementType::kS64, {n})),
                     b.constant(0, ElementType::kS64, {n}));
    upd = b.reshape(gather_points(b, full, {at}, b.reshape(ranks, {n, 1})), dims);
  }
  if (accumulate) upd = b.binary(self.type.dtype == ElementType::kPred ? "stablehlo.or" : "stablehlo.add", self, upd);
  Dims map = range(at, at + k);
  return b.select(b.broadcast_in_dim(mask, dims, map), upd, self);
}

// _index_put_impl_(self, indices, values, accumulate, unsafe) and index_put(self, indices, values, accumulate).
V index_put_rule(OpContext& c) {
  Value self = c.tensor(0);
  bool accumulate = c.has(3) && c.flag(3);
  bool unsafe = c.has(4) && c.flag(4);  // autograd's index backward: indices were checked by the forward
  Points p = index_points(c, 1, self.type.dims, !unsafe);
  Value values = c.b.convert(c.tensor(2), self.type.dtype);
  if (p.mask >= 0) return {mask_put(c, self, p, values, accumulate)};
  if (p.empty) return {accumulate ? c.b.binary("stablehlo.add", self, c.b.broadcast_to(values, self.type.dims))
                                  : c.b.broadcast_to(values, self.type.dims)};
  Dims upd_dims = indexed_dims(self.type.dims, p.pos, batch_of(p.points));
  if (TensorType{ElementType::kS64, upd_dims}.numel() == 0) return {self};
  Value upd = c.b.broadcast_to(fit_rank(c.b, values, upd_dims.size()), upd_dims);
  return {guarded_scatter(c, self, p.pos, p.points, upd, accumulate ? "stablehlo.add" : "")};
}

}  // namespace

void add_indexing_rules(Rows& rows) {
  rows.push_back({{"cat", "cat.out"}, cat_rule});
  rows.push_back({{"index_select", "index_select.out"}, index_select_rule});
  rows.push_back({{"gather", "gather.out"}, gather_rule});
  rows.push_back({{"scatter.src", "scatter_.src", "scatter.src_out", "scatter.value", "scatter_.value",
                   "scatter.value_out", "scatter.reduce", "scatter_.reduce", "scatter.reduce_out",
                   "scatter.value_reduce", "scatter_.value_reduce", "scatter.value_reduce_out"},
                  scatter_rule("")});
  rows.push_back({{"scatter_add", "scatter_add_", "scatter_add.out"}, scatter_rule("stablehlo.add")});
  rows.push_back({{"scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out"}, scatter_reduce_rule});
  rows.push_back({{"index_add", "index_add_", "index_add.out"}, index_along_rule(Along::kAdd)});
  rows.push_back({{"index_reduce", "index_reduce_", "index_reduce.out"}, index_reduce_rule});
  rows.push_back({{"index_copy", "index_copy_", "index_copy.out"}, index_along_rule(Along::kCopy)});
  rows.push_back({{"index_fill.int_Scalar", "index_fill_.int_Scalar", "index_fill.int_Tensor", "index_fill_.int_Tensor"},
                  index_along_rule(Along::kFill), [](std::vector<c10::IValue>& args) {
                    if (args.size() > 3 && args[3].isScalar()) {
                      check_fits(args[3].toScalar(), args[0].toTensor().scalar_type());
                    }
                  }});
  rows.push_back({{"embedding_dense_backward", "embedding_dense_backward.out"}, embedding_backward_rule});
  rows.push_back({{"embedding_renorm_"}, embedding_renorm_rule});
  rows.push_back({{"index.Tensor", "index.Tensor_out"}, index_rule});
  rows.push_back({{"_index_put_impl_", "index_put", "index_put_"}, index_put_rule});
}

}  // namespace torch_tpu
