// Factories and shape ops: arange, linspace, tril/triu, cumsum, flip, roll, repeat, sort/topk.
#include <algorithm>
#include <cmath>
#include <utility>

#include "lowering/lib/numerics.h"
#include "lowering/lib/rule_helpers.h"
#include "lowering/table.h"

namespace torch_tpu {
namespace {

using V = std::vector<Value>;
using Dims = std::vector<int64_t>;

bool contains(const Dims& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }
Value as_rank1(HloBuilder& b, const Value& v) { return v.type.rank() == 0 ? b.reshape(v, {1}) : v; }

// ---- factories and shape ops ----

V arange_rule(OpContext& c) {  // arange.start_out(start, end, step, out): start + i * step, in double as the CPU
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  double start = c.scalar(0), step = c.scalar(2);
  bool integral = !is_floating(o.dtype) && !is_complex(o.dtype) && start == std::floor(start) && step == std::floor(step);
  ElementType t = integral ? ElementType::kS64 : ElementType::kF64;
  Value i = c.b.iota({t, o.dims}, 0);
  Value v = c.b.binary("stablehlo.add", c.b.binary("stablehlo.multiply", i, c.operand(2, t, o.dims)), c.operand(0, t, o.dims));
  return {c.b.convert(v, o.dtype)};
}

V linspace_rule(OpContext& c) {  // linspace.out(start, end, steps, out): the CPU's formula, symmetric about the middle
  TensorType o = c.out(0);
  int64_t n = o.numel();
  if (n == 0) return {zeros(c.b, o)};
  ElementType t = is_floating(o.dtype) || is_complex(o.dtype) ? o.dtype : ElementType::kF64;
  Value start = c.operand(0, t, o.dims), end = c.operand(1, t, o.dims);
  if (n == 1) return {c.b.convert(start, o.dtype)};
  Value step = c.b.binary("stablehlo.divide", c.b.binary("stablehlo.subtract", end, start),
                          c.b.constant(static_cast<double>(n - 1), t, o.dims));
  Value i = c.b.iota({t, o.dims}, 0);
  Value lo = c.b.binary("stablehlo.add", start, c.b.binary("stablehlo.multiply", step, i));
  Value back = c.b.binary("stablehlo.subtract", c.b.constant(static_cast<double>(n - 1), t, o.dims), i);
  Value hi = c.b.binary("stablehlo.subtract", end, c.b.binary("stablehlo.multiply", step, back));
  Value first_half = c.b.compare(CompareDirection::kLt, c.b.iota({ElementType::kS64, o.dims}, 0),
                                 c.b.constant(static_cast<double>(n / 2), ElementType::kS64, o.dims));
  return {c.b.convert(c.b.select(first_half, lo, hi), o.dtype)};
}

LoweringRule triangle_rule(bool lower) {  // tril/triu(self, diagonal): keep col - row <= k (tril) or >= k (triu)
  return [lower](OpContext& c) -> V {
    Value x = c.tensor(0);
    int64_t r = x.type.rank();
    TORCH_CHECK(r >= 2, lower ? "tril" : "triu", ": input tensor must have at least 2 dimensions");
    int64_t k = c.has(1) ? c.integer(1) : 0;
    TensorType it{ElementType::kS64, x.type.dims};
    Value diff = c.b.binary("stablehlo.subtract", c.b.iota(it, r - 1), c.b.iota(it, r - 2));
    Value kk = c.b.constant(static_cast<double>(k), ElementType::kS64, x.type.dims);
    Value keep = c.b.compare(lower ? CompareDirection::kLe : CompareDirection::kGe, diff, kk);
    return {c.b.select(keep, x, zeros(c.b, x.type))};
  };
}

V cumsum_rule(OpContext& c) {  // cumsum(self, dim, dtype); float16/bfloat16 accumulate in float32, as PyTorch's do
  TensorType o = c.out(0);
  bool reduced = o.dtype == ElementType::kF16 || o.dtype == ElementType::kBF16;
  Value x = as_rank1(c.b, c.b.convert(c.tensor(0), reduced ? ElementType::kF32 : o.dtype));
  int64_t d = c.dim(1, x.type.rank());
  if (o.numel() == 0) return {zeros(c.b, o)};
  Value r = prefix_reduce(c.b, x, d, o.dtype == ElementType::kPred ? "stablehlo.or" : "stablehlo.add", 0.0);
  return {c.b.convert(r, o.dtype)};
}

Value reverse(HloBuilder& b, const Value& x, const Dims& dims) {
  if (dims.empty()) return x;
  return b.op1("stablehlo.reverse", {x}, x.type, "dimensions = " + i64_array(dims));
}

V flip_rule(OpContext& c) {  // flip(self, dims)
  Value x = c.tensor(0);
  Dims dims;
  for (int64_t d : c.ints(1)) {
    int64_t nd = normalize_dim(d, x.type.rank());
    TORCH_CHECK(!contains(dims, nd), "dims has duplicates, original flip dims size=", c.ints(1).size());
    if (x.type.rank() > 0) dims.push_back(nd);
  }
  std::sort(dims.begin(), dims.end());
  return {reverse(c.b, x, dims)};
}

Value roll_dim(HloBuilder& b, const Value& x, int64_t shift, int64_t d) {
  int64_t n = x.type.dims[d];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  Dims lo(x.type.rank(), 0), hi = x.type.dims;
  Dims mid_hi = hi, mid_lo = lo;
  mid_hi[d] = n - s;
  mid_lo[d] = n - s;
  return b.concatenate({b.slice(x, mid_lo, hi), b.slice(x, lo, mid_hi)}, d);
}

V roll_rule(OpContext& c) {  // roll(self, shifts, dims)
  Value x = c.tensor(0);
  Dims shifts = c.ints(1), dims = c.has(2) ? c.ints(2) : Dims{};
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:0");
    Value flat = c.b.reshape(x, {x.type.numel()});
    return {c.b.reshape(roll_dim(c.b, flat, shifts[0], 0), x.type.dims)};
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:",
              dims.size());
  for (size_t i = 0; i < dims.size(); ++i) x = roll_dim(c.b, x, shifts[i], normalize_dim(dims[i], x.type.rank()));
  return {x};
}

V repeat_rule(OpContext& c) {  // repeat(self, repeats): broadcast into interleaved [r0, d0, r1, d1, ..], then merge
  TensorType o = c.out(0);
  Value x = c.tensor(0);
  Dims reps = c.ints(1);
  if (o.numel() == 0) return {zeros(c.b, o)};
  Dims src(reps.size() - x.type.rank(), 1);
  src.insert(src.end(), x.type.dims.begin(), x.type.dims.end());
  Dims wide, map;
  for (size_t i = 0; i < reps.size(); ++i) {
    wide.push_back(reps[i]);
    wide.push_back(src[i]);
    map.push_back(static_cast<int64_t>(2 * i + 1));
  }
  return {c.b.reshape(c.b.broadcast_in_dim(c.b.reshape(x, src), wide, map), o.dims)};
}

// ---- sort / topk ----

// Stable sort along `dim` with the positions carried along. NaN sorts above everything, as in PyTorch.
std::pair<Value, Value> sort_values(HloBuilder& b, const Value& input, int64_t dim, bool descending) {
  Value x = input.type.dtype == ElementType::kPred ? b.convert(input, ElementType::kU8) : input;
  Value pos = b.iota({ElementType::kS64, x.type.dims}, dim);
  TensorType s{x.type.dtype, {}}, si{ElementType::kS64, {}};
  bool fp = is_floating(s.dtype);
  std::string cmp = b.region({s, s, si, si}, [&](HloBuilder& rb, const V& a) -> V {
    Value before = rb.compare(descending ? CompareDirection::kGt : CompareDirection::kLt, a[0], a[1]);
    if (fp) {
      Value nan0 = rb.compare(CompareDirection::kNe, a[0], a[0]), nan1 = rb.compare(CompareDirection::kNe, a[1], a[1]);
      Value nan_first = descending ? rb.binary("stablehlo.and", nan0, rb.unary("stablehlo.not", nan1))
                                   : rb.binary("stablehlo.and", nan1, rb.unary("stablehlo.not", nan0));
      before = rb.binary("stablehlo.or", before, nan_first);
    }
    return {before};
  });
  V r = b.op("stablehlo.sort", {x, pos}, {x.type, pos.type},
             "dimension = " + std::to_string(dim) + " : i64, is_stable = true", {cmp});
  return {b.convert(r[0], input.type.dtype), r[1]};
}

// sort(self, dim, descending) / sort.stable(self, stable, dim, descending); `first` is the dim argument.
LoweringRule sort_rule(size_t first) {
  return [first](OpContext& c) -> V {
    Value x = as_rank1(c.b, c.tensor(0));
    int64_t d = c.has(first) ? c.dim(first, x.type.rank()) : x.type.rank() - 1;
    bool descending = c.has(first + 1) && c.flag(first + 1);
    auto [values, indices] = sort_values(c.b, x, d, descending);
    return {values, indices};
  };
}

V topk_rule(OpContext& c) {  // topk(self, k, dim, largest, sorted)
  Value x = as_rank1(c.b, c.tensor(0));
  int64_t k = c.integer(1);
  int64_t d = c.has(2) ? c.dim(2, x.type.rank()) : x.type.rank() - 1;
  bool largest = !c.has(3) || c.flag(3);
  if (c.out(0).numel() == 0) return {zeros(c.b, c.out(0)), zeros(c.b, c.out(1))};
  auto [values, indices] = sort_values(c.b, x, d, largest);
  Dims lo(x.type.rank(), 0), hi = x.type.dims;
  hi[d] = k;
  return {c.b.slice(values, lo, hi), c.b.slice(indices, lo, hi)};
}

}  // namespace

void add_shape_rules(Rows& rows) {
  rows.push_back({{"arange.start_out"}, arange_rule});
  rows.push_back({{"linspace.out"}, linspace_rule});
  rows.push_back({{"tril", "tril_", "tril.out"}, triangle_rule(true)});
  rows.push_back({{"triu", "triu_", "triu.out"}, triangle_rule(false)});
  rows.push_back({{"cumsum", "cumsum_", "cumsum.out"}, cumsum_rule});
  rows.push_back({{"flip", "flip.out"}, flip_rule});
  rows.push_back({{"roll", "roll.out"}, roll_rule});
  rows.push_back({{"repeat", "repeat.out"}, repeat_rule});
  rows.push_back({{"sort", "sort.values"}, sort_rule(1)});
  rows.push_back({{"sort.stable", "sort.values_stable"}, sort_rule(2)});
  rows.push_back({{"topk", "topk.values"}, topk_rule});
}

}  // namespace torch_tpu
