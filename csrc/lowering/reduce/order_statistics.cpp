// Order statistics and search: median/nanmedian (values and indices), kthvalue, mode, searchsorted/bucketize.
// Everything stays on the device: data-dependent positions come from sorts, prefix counts and unrolled binary
// searches, and data-dependent errors go through OpContext::check.
#include <ATen/core/Tensor.h>

#include <cmath>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using namespace hm;  // NOLINT: formula spellings
using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;
using Dims = std::vector<int64_t>;

constexpr ElementType kI64 = ElementType::kS64;

Value s64c(HloBuilder& b, double v, const Dims& dims = {}) { return b.constant(v, kI64, dims); }

// out[p] = x[p with coordinate `dim` replaced by idx[p]]: idx has x's rank and x's sizes except along `dim`.
Value take_along(HloBuilder& b, const Value& x, const Value& idx, int64_t dim) {
  int64_t r = x.type.rank();
  Dims col = idx.type.dims;
  col.push_back(1);
  V parts;
  for (int64_t d = 0; d < r; ++d) {
    Value v = d == dim ? b.convert(idx, kI64) : b.iota({kI64, idx.type.dims}, d);
    parts.push_back(b.reshape(v, col));
  }
  Value points = parts.size() == 1 ? parts[0] : b.concatenate(parts, r);
  std::string all = i64_list(iota_dims(r));
  std::string attrs = "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = " + all + ", start_index_map = " +
                      all + ", index_vector_dim = " + std::to_string(r) + ">, slice_sizes = " + i64_array(Dims(r, 1)) +
                      ", indices_are_sorted = false";
  return b.op1("stablehlo.gather", {x, points}, {x.type.dtype, idx.type.dims}, attrs);
}

// Stable ascending sort along `dim` with the original positions; NaN sorts above everything (as torch.sort).
std::pair<Value, Value> sort_with_positions(HloBuilder& b, const Value& x, int64_t dim) {
  Value pos = b.iota({kI64, x.type.dims}, dim);
  TensorType s{x.type.dtype, {}}, si{kI64, {}};
  bool fp = is_floating(s.dtype);
  std::string cmp = b.region({s, s, si, si}, [&](HloBuilder& rb, const V& a) -> V {
    Value before = lt(rb, a[0], a[1]);
    if (fp) before = lor(rb, before, land(rb, isnan(rb, a[1]), lnot(rb, isnan(rb, a[0]))));
    return {before};
  });
  V r = b.op("stablehlo.sort", {x, pos}, {x.type, pos.type}, "dimension = " + std::to_string(dim) + " : i64, is_stable = true",
             {cmp});
  return {r[0], r[1]};
}

// PyTorch's "not implemented for 'Bool'" for ops whose CPU kernels skip bool.
void no_bool(bool is_bool, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(!is_bool, "\"", kernel, "\" not implemented for 'Bool'");
}

bool bool_arg(OpContext& c, size_t i) { return c.inspect(i).toTensor().scalar_type() == at::kBool; }

// ---- median / nanmedian ----

// Where libstdc++'s std::nth_element (introselect) leaves the original position 0..n-1 at position 0 when no
// element orders before another (nanmedian's all-NaN rows). Such a run compares nothing, so the answer depends on
// n alone: replay its swaps here.
int64_t all_equal_nth_first(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  int64_t first = 0, last = n, depth = 0;
  for (int64_t m = n; m > 1; m >>= 1) ++depth;
  depth *= 2;
  while (last - first > 3 && depth-- > 0) {
    std::swap(v[first], v[first + (last - first) / 2]);  // median of three: nothing compares, the middle moves
    int64_t lo = first + 1, hi = last;
    while (true) {  // unguarded partition: no element is less than the pivot or greater than it
      --hi;
      if (!(lo < hi)) break;
      std::swap(v[lo], v[hi]);
      ++lo;
    }
    last = lo;  // the cut lies past position 0
  }
  return n > 0 ? v[0] : 0;
}

// The CPU picks, along `dim`, the element at position k of a stable sort: k = (n - 1) / 2 for median (a row with a
// NaN gives its first NaN), k = (non-NaN count - 1) / 2 for nanmedian (an all-NaN row gives its first NaN).
std::pair<Value, Value> median_along(HloBuilder& b, const Value& x, int64_t dim, bool ignore_nan) {
  int64_t n = x.type.dims[dim];
  Dims keep = x.type.dims;
  keep[dim] = 1;
  auto [sorted, pos] = sort_with_positions(b, x, dim);
  Value k = s64c(b, static_cast<double>((n - 1) / 2), keep);
  if (is_floating(x.type.dtype)) {
    Value count = b.reduce(b.convert(lnot(b, isnan(b, x)), kI64), s64c(b, 0), {dim}, "stablehlo.add");
    count = b.reshape(count, keep);
    if (ignore_nan) {
      k = b.binary("stablehlo.divide", b.binary("stablehlo.maximum", sub(b, count, s64c(b, 1, keep)), s64c(b, 0, keep)),
                   s64c(b, 2, keep));
    } else {
      k = sel(b, lt(b, count, s64c(b, static_cast<double>(n), keep)), count, k);
    }
  }
  Value index = take_along(b, pos, k, dim);
  if (ignore_nan && is_floating(x.type.dtype)) {
    Value count = b.reduce(b.convert(lnot(b, isnan(b, x)), kI64), s64c(b, 0), {dim}, "stablehlo.add");
    Value all_nan = eq(b, b.reshape(count, keep), s64c(b, 0, keep));
    index = sel(b, all_nan, s64c(b, static_cast<double>(all_equal_nth_first(n)), keep), index);
  }
  return {take_along(b, sorted, k, dim), index};
}

LoweringRule median_dim_rule(bool ignore_nan) {  // median.dim(self, dim, keepdim) -> (values, indices)
  return [ignore_nan](OpContext& c) -> V {
    no_bool(bool_arg(c, 0), "median_out");
    Value x = c.tensor(0);
    if (x.type.rank() == 0) return {x, s64c(c.b, 0)};
    int64_t d = c.dim(1, x.type.rank());
    if (c.out(0).numel() == 0) return {zeros(c.b, c.out(0)), zeros(c.b, c.out(1))};
    auto [v, i] = median_along(c.b, x, d, ignore_nan);
    return {c.b.reshape(v, c.out(0).dims), c.b.reshape(i, c.out(1).dims)};
  };
}

LoweringRule median_all_rule(bool ignore_nan) {  // median(self): the value only, over every element
  return [ignore_nan](OpContext& c) -> V {
    no_bool(bool_arg(c, 0), "median_cpu");
    Value x = c.tensor(0);
    int64_t n = x.type.numel();
    if (n == 0) return {full(c.b, NAN, c.out(0))};
    auto [v, i] = median_along(c.b, c.b.reshape(x, {n}), 0, ignore_nan);
    return {c.b.reshape(v, {})};
  };
}

// kthvalue and mode replay the CPU's sequential algorithms one step per loop iteration: exact, but every step
// touches the whole row, so rows longer than kReplayLimit are left to the CPU fallback (milliseconds there, seconds
// here).
constexpr int64_t kReplayLimit = 1024;

ArgumentFilter short_rows(size_t dim_arg) {
  return [dim_arg](const std::vector<c10::IValue>& args) {
    if (args.empty() || !args[0].isTensor()) return true;
    const at::Tensor& t = args[0].toTensor();
    if (t.dim() == 0) return true;
    int64_t d = args.size() > dim_arg && args[dim_arg].isInt() ? args[dim_arg].toInt() : -1;
    if (d < 0) d += t.dim();
    return d < 0 || d >= t.dim() || t.size(d) <= kReplayLimit;
  };
}

// ---- kthvalue ----

// kthvalue(self, k, dim, keepdim): the CPU runs Sedgewick's quickselect on each row (median-of-three pivot,
// NaN above everything) and reports the element that lands at k - 1 and its original position, so with ties the
// index depends on the exact swaps. This replays that algorithm on the device, one step of a per-row state machine
// per loop trip for all rows at once:
//   0: a new round: 1 element left: done; 2: order them, done; else swap(P, L + 1)        -> 5
//   5, 6, 7: the three compare-swaps of the median of three; 7 also sets i, j and piv    -> 1
//   1: i++ while piv > a[i] (NaN-aware)  2: j-- while a[j] > piv  3: j < i ? place the pivot, narrow [L, R] -> 0
//      : swap(i, j) -> 1                 4: done
Value row_get(HloBuilder& b, const Value& arr, const Value& pos) {
  int64_t rows = arr.type.dims[0], n = arr.type.dims[1];
  Value at = b.binary("stablehlo.minimum", b.binary("stablehlo.maximum", pos, s64c(b, 0, {rows})), s64c(b, static_cast<double>(n - 1), {rows}));
  return b.reshape(take_along(b, arr, b.reshape(at, {rows, 1}), 1), {rows});
}

// Swaps arr[r, p[r]] and arr[r, q[r]] in the rows where `go` holds.
Value row_swap(HloBuilder& b, const Value& arr, const Value& p, const Value& q, const Value& go) {
  int64_t rows = arr.type.dims[0];
  Value vp = row_get(b, arr, p), vq = row_get(b, arr, q);
  Value at_p = sel(b, go, vq, vp), at_q = sel(b, go, vp, vq);
  Value row = b.reshape(b.iota({kI64, {rows}}, 0), {rows, 1, 1});
  Value pos = b.concatenate({b.reshape(p, {rows, 1, 1}), b.reshape(q, {rows, 1, 1})}, 1);
  Value points = b.concatenate({b.concatenate({row, row}, 1), pos}, 2);  // [rows, 2, 2]
  Value upd = b.concatenate({b.reshape(at_p, {rows, 1}), b.reshape(at_q, {rows, 1})}, 1);
  TensorType scalar{arr.type.dtype, {}};
  std::string body = b.region({scalar, scalar}, [&](HloBuilder&, const V& a) -> V { return {a[1]}; });
  return b.op1("stablehlo.scatter", {arr, points, upd}, arr.type,
               "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1], "
               "scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 2>, indices_are_sorted = false, "
               "unique_indices = false",
               {body});
}

// gt_or_nan(x, y): x > y, or x is NaN and y is not.
Value gt_or_nan(HloBuilder& b, const Value& x, const Value& y) {
  Value r = gt(b, x, y);
  if (is_floating(x.type.dtype)) r = lor(b, r, land(b, isnan(b, x), lnot(b, isnan(b, y))));
  return r;
}

V kthvalue_rule(OpContext& c) {
  no_bool(bool_arg(c, 0), "kthvalue_cpu");
  HloBuilder& b = c.b;
  Value x = c.tensor(0);
  int64_t k = c.integer(1);
  if (x.type.rank() == 0) return {x, s64c(b, 0)};
  int64_t r = x.type.rank(), d = c.dim(2, r), n = x.type.dims[d];
  TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", d);
  if (c.out(0).numel() == 0) return {zeros(b, c.out(0)), zeros(b, c.out(1))};
  Dims perm;
  for (int64_t i = 0; i < r; ++i) {
    if (i != d) perm.push_back(i);
  }
  perm.push_back(d);
  int64_t rows = x.type.numel() / n;
  Value a = b.reshape(b.transpose(x, perm), {rows, n});
  Value ix = b.iota({kI64, {rows, n}}, 1);
  Dims rd{rows};
  auto num = [&](HloBuilder& rb, double v) { return s64c(rb, v, rd); };
  V init{a, ix, num(b, 0), num(b, static_cast<double>(n - 1)), num(b, 0), num(b, 0), b.constant(0, a.type.dtype, rd), num(b, 0)};
  std::vector<TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  std::string cond = b.region(types, [&](HloBuilder& rb, const V& s) -> V {
    return {rb.reduce(ne(rb, s[7], num(rb, 4)), rb.constant(0, ElementType::kPred), {0}, "stablehlo.or")};
  });
  std::string body = b.region(types, [&](HloBuilder& rb, const V& s) -> V {
    const Value &A = s[0], &I = s[1], &L = s[2], &R = s[3], &i = s[4], &j = s[5], &piv = s[6], &ph = s[7];
    auto is = [&](double p) { return eq(rb, ph, num(rb, p)); };
    auto pick = [&](const std::vector<std::pair<Value, Value>>& cases, const Value& otherwise) {
      Value out = otherwise;
      for (auto it = cases.rbegin(); it != cases.rend(); ++it) out = sel(rb, it->first, it->second, out);
      return out;
    };
    Value one = num(rb, 1);
    Value L1 = add(rb, L, one), P = rb.binary("stablehlo.shift_right_arithmetic", add(rb, L, R), one);
    Value aL = row_get(rb, A, L), aR = row_get(rb, A, R), aL1 = row_get(rb, A, L1);
    Value i1 = add(rb, i, one), j1 = sub(rb, j, one);
    Value ai1 = row_get(rb, A, i1), aj1 = row_get(rb, A, j1);
    Value two = eq(rb, R, L1), more = gt(rb, R, L1);
    Value crossed = lt(rb, j, i);
    // The one swap of this step: (p, q) and whether it happens.
    Value p = pick({{is(0), sel(rb, two, L, P)}, {is(5), L1}, {is(6), L}, {is(7), L1}, {is(3), sel(rb, crossed, L, i)}}, L);
    Value q = pick({{is(0), sel(rb, two, R, L1)}, {is(5), R}, {is(6), R}, {is(7), L}, {is(3), j}}, L);
    Value go = pick({{is(0), lor(rb, land(rb, two, gt_or_nan(rb, aL, aR)), more)},
                     {is(5), gt_or_nan(rb, aL1, aR)},
                     {is(6), gt_or_nan(rb, aL, aR)},
                     {is(7), gt_or_nan(rb, aL1, aL)},
                     {is(3), rb.constant(1, ElementType::kPred, rd)}},
                    rb.constant(0, ElementType::kPred, rd));
    Value A2 = row_swap(rb, A, p, q, go), I2 = row_swap(rb, I, p, q, go);
    // Scalars of the state machine.
    Value kk = num(rb, static_cast<double>(k - 1));
    Value next_i = pick({{is(7), L1}, {is(1), i1}}, i);
    Value next_j = pick({{is(7), R}, {is(2), j1}}, j);
    Value next_piv = sel(rb, is(7), sel(rb, go, aL1, aL), piv);
    Value next_L = sel(rb, land(rb, is(3), land(rb, crossed, le(rb, j, kk))), i, L);
    Value next_R = sel(rb, land(rb, is(3), land(rb, crossed, ge(rb, j, kk))), j1, R);
    Value ph0 = sel(rb, more, num(rb, 5), num(rb, 4));
    Value ph1 = sel(rb, gt_or_nan(rb, piv, ai1), num(rb, 1), num(rb, 2));
    Value ph2 = sel(rb, gt_or_nan(rb, aj1, piv), num(rb, 2), num(rb, 3));
    Value ph3 = sel(rb, crossed, num(rb, 0), num(rb, 1));
    Value next_ph = pick({{is(0), ph0}, {is(5), num(rb, 6)}, {is(6), num(rb, 7)}, {is(7), num(rb, 1)}, {is(1), ph1},
                          {is(2), ph2}, {is(3), ph3}},
                         ph);
    return {A2, I2, next_L, next_R, next_i, next_j, next_piv, next_ph};
  });
  V res = b.op("stablehlo.while", init, types, "", {cond, body});
  Value kcol = s64c(b, static_cast<double>(k - 1), {rows, 1});
  return {b.reshape(take_along(b, res[0], kcol, 1), c.out(0).dims), b.reshape(take_along(b, res[1], kcol, 1), c.out(1).dims)};
}

// ---- mode ----

// mode(self, dim, keepdim): the CPU sorts (value, position) pairs by value with std::sort and reports the smallest
// most frequent value and the position of the last of its copies in that sorted order, which for ties depends on
// libstdc++'s introsort. Both of its phases are replayed here step for step: the partitioning (rows over 16
// elements) and the final insertion sort, so ties and even NaN (which `<` does not order) come out as on the CPU.
// Ranges left by the depth limit go to a heapsort that is not replayed: such rows raise instead.
//   0: range > 16: median of three to the front -> 1; else pop a range (none left: 4)
//   1: lo++ while a[lo] < pivot, then hi-- -> 2   2: hi-- while pivot < a[hi] -> 3
//   3: lo < hi ? swap, lo++ -> 1 : push [lo, last), continue with [first, lo) -> 0
std::pair<Value, Value> introsort_partitions(OpContext& c, const Value& a0, Value& bad) {
  HloBuilder& b = c.b;
  int64_t rows = a0.type.dims[0], n = a0.type.dims[1];
  int64_t depth0 = 0;
  for (int64_t m = n; m > 1; m >>= 1) ++depth0;
  depth0 *= 2;
  int64_t stack = depth0 + 1;
  Dims rd{rows}, sd{rows, stack};
  auto num = [&](HloBuilder& rb, double v) { return s64c(rb, v, rd); };
  V init{a0, b.iota({kI64, {rows, n}}, 1), s64c(b, 0, sd), s64c(b, 0, sd), s64c(b, 0, sd), num(b, 0), num(b, 0),
         num(b, static_cast<double>(n)), num(b, static_cast<double>(depth0)), num(b, 0), num(b, 0), num(b, 0),
         b.constant(0, ElementType::kPred, rd)};
  std::vector<TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  std::string cond = b.region(types, [&](HloBuilder& rb, const V& s) -> V {
    return {rb.reduce(ne(rb, s[11], num(rb, 4)), rb.constant(0, ElementType::kPred), {0}, "stablehlo.or")};
  });
  std::string body = b.region(types, [&](HloBuilder& rb, const V& s) -> V {
    const Value &A = s[0], &I = s[1], &SF = s[2], &SL = s[3], &SD = s[4], &sp = s[5], &first = s[6], &last = s[7],
                &depth = s[8], &lo = s[9], &hi = s[10], &ph = s[11], &stuck = s[12];
    auto is = [&](double p) { return eq(rb, ph, num(rb, p)); };
    Value one = num(rb, 1);
    Value big = gt(rb, sub(rb, last, first), num(rb, 16));
    Value exhausted = land(rb, is(0), land(rb, big, eq(rb, depth, num(rb, 0))));
    Value split = land(rb, is(0), land(rb, big, lnot(rb, exhausted)));
    Value pop = land(rb, is(0), lnot(rb, split));
    // Median of three of a[first + 1], a[mid], a[last - 1], moved to the front.
    Value pa = add(rb, first, one), pb = add(rb, first, rb.binary("stablehlo.shift_right_arithmetic", sub(rb, last, first), one)),
          pc = sub(rb, last, one);
    Value va = row_get(rb, A, pa), vb = row_get(rb, A, pb), vc = row_get(rb, A, pc);
    Value ab = lt(rb, va, vb), bc = lt(rb, vb, vc), ac = lt(rb, va, vc);
    Value med = sel(rb, ab, sel(rb, bc, pb, sel(rb, ac, pc, pa)), sel(rb, ac, pa, sel(rb, bc, pc, pb)));
    Value piv = row_get(rb, A, first), alo = row_get(rb, A, lo), ahi = row_get(rb, A, hi);
    Value lo_less = lt(rb, alo, piv), hi_more = lt(rb, piv, ahi), open = lt(rb, lo, hi);
    Value swap3 = land(rb, is(3), open), cut = land(rb, is(3), lnot(rb, open));
    Value p = sel(rb, split, first, lo), q = sel(rb, split, med, hi);
    Value go = lor(rb, split, swap3);
    Value A2 = row_swap(rb, A, p, q, go), I2 = row_swap(rb, I, p, q, go);
    // The range stack: push [lo, last) at a cut, pop at a small range.
    Value slot = rb.iota({kI64, sd}, 1);
    Value at_sp = land(rb, eq(rb, slot, rb.broadcast_in_dim(sp, sd, {0})), rb.broadcast_in_dim(cut, sd, {0}));
    Value new_depth = sel(rb, split, sub(rb, depth, one), depth);
    Value SF2 = sel(rb, at_sp, rb.broadcast_in_dim(lo, sd, {0}), SF);
    Value SL2 = sel(rb, at_sp, rb.broadcast_in_dim(last, sd, {0}), SL);
    Value SD2 = sel(rb, at_sp, rb.broadcast_in_dim(depth, sd, {0}), SD);
    Value empty = eq(rb, sp, num(rb, 0));
    Value top = rb.binary("stablehlo.maximum", sub(rb, sp, one), num(rb, 0));
    auto peek = [&](const Value& st) { return rb.reshape(take_along(rb, st, rb.reshape(top, {rows, 1}), 1), rd); };
    Value popping = land(rb, pop, lnot(rb, empty));
    Value next_first = sel(rb, popping, peek(SF), first);
    Value next_last = sel(rb, popping, peek(SL), sel(rb, cut, lo, last));
    Value next_depth = sel(rb, popping, peek(SD), new_depth);
    Value next_sp = sel(rb, popping, sub(rb, sp, one), sel(rb, cut, add(rb, sp, one), sp));
    Value next_lo = sel(rb, split, add(rb, first, one),
                        sel(rb, land(rb, is(1), lo_less), add(rb, lo, one), sel(rb, swap3, add(rb, lo, one), lo)));
    Value next_hi = sel(rb, split, last,
                        sel(rb, land(rb, is(1), lnot(rb, lo_less)), sub(rb, hi, one),
                            sel(rb, land(rb, is(2), hi_more), sub(rb, hi, one), hi)));
    Value next_ph = sel(rb, split, num(rb, 1),
                        sel(rb, pop, sel(rb, empty, num(rb, 4), num(rb, 0)),
                            sel(rb, exhausted, num(rb, 4),
                                sel(rb, is(1), sel(rb, lo_less, num(rb, 1), num(rb, 2)),
                                    sel(rb, is(2), sel(rb, hi_more, num(rb, 2), num(rb, 3)),
                                        sel(rb, is(3), sel(rb, open, num(rb, 1), num(rb, 0)), ph))))));
    return {A2, I2, SF2, SL2, SD2, next_sp, next_first, next_last, next_depth, next_lo, next_hi, next_ph,
            lor(rb, stuck, exhausted)};
  });
  V res = b.op("stablehlo.while", init, types, "", {cond, body});
  bad = res[12];
  return {res[0], res[1]};
}

// libstdc++'s final insertion sort, replayed one move per loop trip: positions 1..15 (1..n-1 for n <= 16) go to
// the front in one rotation when less than the first element, otherwise (and for every later position) the element
// walks left while it is less than its left neighbour. Replaying it (rather than sorting) keeps the CPU's answer
// even for NaN, which `<` does not order.
std::pair<Value, Value> final_insertion_sort(HloBuilder& b, const Value& a0, const Value& i0) {
  int64_t rows = a0.type.dims[0], n = a0.type.dims[1], m = std::min<int64_t>(16, n);
  Dims rd{rows};
  auto num = [&](HloBuilder& rb, double v) { return s64c(rb, v, rd); };
  V init{a0, i0, num(b, 1), num(b, 1), num(b, 0)};  // A, I, i (next to insert), j (where it is now), phase
  std::vector<TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  std::string cond = b.region(types, [&](HloBuilder& rb, const V& s) -> V {
    return {rb.reduce(lt(rb, s[2], num(rb, static_cast<double>(n))), rb.constant(0, ElementType::kPred), {0}, "stablehlo.or")};
  });
  std::string body = b.region(types, [&](HloBuilder& rb, const V& s) -> V {
    const Value &A = s[0], &I = s[1], &i = s[2], &j = s[3], &ph = s[4];
    Value one = num(rb, 1), zero = num(rb, 0);
    Value live = lt(rb, i, num(rb, static_cast<double>(n)));
    Value start = land(rb, live, eq(rb, ph, zero)), walk = land(rb, live, eq(rb, ph, one));
    Value ai = row_get(rb, A, i), a0v = row_get(rb, A, zero);
    Value guarded = lt(rb, i, num(rb, static_cast<double>(std::min<int64_t>(16, n))));
    Value to_front = land(rb, start, land(rb, guarded, lt(rb, ai, a0v)));
    // Rotation of [0, i] one to the right for the rows that move their element to the front; i < 16, so only the
    // first m columns change (updated in place: a whole-row gather per trip made long rows quadratic).
    Dims hd{rows, m};
    Value k = rb.iota({kI64, hd}, 1), ib = rb.broadcast_in_dim(i, hd, {0});
    Value src = sel(rb, eq(rb, k, s64c(rb, 0, hd)), ib, sel(rb, le(rb, k, ib), sub(rb, k, s64c(rb, 1, hd)), k));
    src = sel(rb, rb.broadcast_in_dim(to_front, hd, {0}), src, k);
    Value zero0 = s64c(rb, 0);
    auto rotate = [&](const Value& X) {
      Value head = take_along(rb, rb.slice(X, {0, 0}, {rows, m}), src, 1);
      return rb.dynamic_update_slice(X, head, {zero0, zero0});
    };
    Value A1 = rotate(A), I1 = rotate(I);
    // One step left for the walking rows.
    Value jm = rb.binary("stablehlo.maximum", sub(rb, j, one), zero);
    Value step = land(rb, walk, land(rb, gt(rb, j, zero), lt(rb, row_get(rb, A1, j), row_get(rb, A1, jm))));
    Value A2 = row_swap(rb, A1, jm, j, step), I2 = row_swap(rb, I1, jm, j, step);
    Value finished = lor(rb, to_front, land(rb, walk, lnot(rb, step)));
    Value next_i = sel(rb, finished, add(rb, i, one), i);
    Value next_j = sel(rb, finished, add(rb, i, one), sel(rb, step, jm, sel(rb, start, i, j)));
    Value next_ph = sel(rb, finished, zero, sel(rb, start, one, ph));
    return {A2, I2, next_i, next_j, next_ph};
  });
  V res = b.op("stablehlo.while", init, types, "", {cond, body});
  return {res[0], res[1]};
}

V mode_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x = c.tensor(0);
  if (x.type.rank() == 0) return {x, s64c(b, 0)};
  int64_t r = x.type.rank(), d = c.dim(1, r), n = x.type.dims[d];
  if (c.out(0).numel() == 0) return {zeros(b, c.out(0)), zeros(b, c.out(1))};
  Dims perm;
  for (int64_t i = 0; i < r; ++i) {
    if (i != d) perm.push_back(i);
  }
  perm.push_back(d);
  int64_t rows = x.type.numel() / n;
  Value a = b.reshape(b.transpose(x, perm), {rows, n});
  bool boolean = a.type.dtype == ElementType::kPred;
  if (boolean) a = b.convert(a, ElementType::kU8);
  Value ix = b.iota({kI64, {rows, n}}, 1);
  if (n > 16) {
    Value stuck;
    std::tie(a, ix) = introsort_partitions(c, a, stuck);
    c.check(stuck, "mode(): this input sends the CPU's introsort into its heapsort fallback, which tpu does not replay",
            false);
  }
  Value sv = a, si_ = ix;
  if (n > 1) std::tie(sv, si_) = final_insertion_sort(b, a, ix);
  Dims sd{rows, n};
  Value pos = b.iota({kI64, sd}, 1);
  // Runs of equal values: a run starts where the value changes; its length is known at its last element.
  Value prev = b.concatenate({b.slice(sv, {0, 0}, {rows, 1}), b.slice(sv, {0, 0}, {rows, n - 1})}, 1);
  Value next = b.concatenate({b.slice(sv, {0, 1}, {rows, n}), b.slice(sv, {0, n - 1}, {rows, n})}, 1);
  Value starts = lor(b, eq(b, pos, s64c(b, 0, sd)), ne(b, sv, prev));
  Value ends = lor(b, eq(b, pos, s64c(b, static_cast<double>(n - 1), sd)), ne(b, sv, next));
  TensorType it{kI64, {}};
  std::string mx = b.region({it, it}, [&](HloBuilder& rb, const V& v) -> V { return {rb.binary("stablehlo.maximum", v[0], v[1])}; });
  Value start_pos = b.op1("stablehlo.reduce_window", {sel(b, starts, pos, s64c(b, 0, sd)), s64c(b, 0)}, {kI64, sd},
                          "window_dimensions = array<i64: 1, " + std::to_string(n) + ">, window_strides = array<i64: 1, 1>, "
                          "padding = dense<[[0, 0], [" + std::to_string(n - 1) + ", 0]]> : tensor<2x2xi64>",
                          {mx});
  Value len = sel(b, ends, add(b, sub(b, pos, start_pos), s64c(b, 1, sd)), s64c(b, 0, sd));
  Value best = b.reduce(len, s64c(b, 0), {1}, "stablehlo.maximum");
  Value hit = eq(b, len, b.broadcast_in_dim(best, sd, {0}));
  Value first_hit = b.reduce(sel(b, hit, pos, s64c(b, static_cast<double>(n), sd)), s64c(b, static_cast<double>(n)), {1},
                             "stablehlo.minimum");
  Value col = b.reshape(first_hit, {rows, 1});
  Value value = b.reshape(take_along(b, sv, col, 1), c.out(0).dims);
  if (boolean) value = b.convert(value, ElementType::kPred);
  return {value, b.reshape(take_along(b, si_, col, 1), c.out(1).dims)};
}

// ---- searchsorted / bucketize ----

// The CPU's binary search, step for step (so unsorted boundaries and NaNs give its answers): per value, while
// lo < hi: mid = lo + (hi - lo) / 2; go right when !(bd[mid] >= v) (left) or !(bd[mid] > v) (right).
// `bd` is [B..., n] and `v` [B..., m] (same B) or `bd` is 1-D and `v` anything; `sorter` like `bd` or absent.
Value binary_search(OpContext& c, const Value& bd, const Value& v, const std::optional<Value>& sorter, bool right) {
  HloBuilder& b = c.b;
  int64_t n = bd.type.dims.back();
  const Dims& dims = v.type.dims;
  Value lo = s64c(b, 0, dims), hi = s64c(b, static_cast<double>(n), dims);
  int64_t steps = 0;
  for (int64_t span = n; span > 0; span >>= 1) ++steps;
  bool flat = bd.type.rank() == 1;
  Value vv = flat ? b.reshape(v, {v.type.numel()}) : v;
  Value lo_f = flat ? b.reshape(lo, vv.type.dims) : lo, hi_f = flat ? b.reshape(hi, vv.type.dims) : hi;
  Dims fdims = vv.type.dims;
  int64_t last = static_cast<int64_t>(fdims.size()) - 1;
  auto fetch = [&](const Value& table, const Value& at) -> Value {
    if (flat) {
      Value t = b.broadcast_in_dim(table, {fdims[0], n}, {1});
      return b.reshape(take_along(b, t, b.reshape(at, {fdims[0], 1}), 1), fdims);
    }
    return take_along(b, table, at, last);
  };
  for (int64_t s = 0; s < steps; ++s) {
    Value active = lt(b, lo_f, hi_f);
    Value mid = add(b, lo_f, b.binary("stablehlo.shift_right_arithmetic", sub(b, hi_f, lo_f), s64c(b, 1, fdims)));
    Value at = b.binary("stablehlo.minimum", mid, s64c(b, static_cast<double>(n - 1), fdims));
    if (sorter) at = fetch(*sorter, at);
    Value mv = fetch(bd, at);
    Value go_right = lnot(b, right ? gt(b, mv, vv) : ge(b, mv, vv));
    lo_f = sel(b, land(b, active, go_right), add(b, mid, s64c(b, 1, fdims)), lo_f);
    hi_f = sel(b, land(b, active, lnot(b, go_right)), mid, hi_f);
  }
  return b.reshape(lo_f, dims);
}

// searchsorted.Tensor(sorted_sequence, self, out_int32, right, side, sorter)
V searchsorted_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  ElementType t = c.promoted({0, 1});
  no_bool(t == ElementType::kPred, "searchsorted_out_cpu");
  Value bd = c.b.convert(c.tensor(0), t), v = c.b.convert(c.tensor(1), t);
  int64_t n = bd.type.dims.back();
  if (n == 0) return {zeros(c.b, o)};
  bool right = c.has(3) && c.flag(3);
  if (c.has(4)) {
    const std::string& side = c.arg(4).toStringRef();
    TORCH_CHECK(side == "left" || side == "right", "torch.searchsorted(): side can only be 'left' or 'right' but got ",
                side);
    TORCH_CHECK(!right || side == "right", "torch.searchsorted(): side and right can't be set to opposites, got side "
                "of ", side, " while right was True");
    right = side == "right";
  }
  std::optional<Value> sorter;
  if (c.has(5)) {
    sorter = c.b.convert(c.tensor(5), kI64);
    c.check_range(*sorter, 0, n, "torch.searchsorted(): sorter index out of range", std::nullopt, false);
  }
  return {c.b.convert(binary_search(c, bd, v, sorter, right), o.dtype)};
}

// bucketize.Tensor(self, boundaries, out_int32, right) / bucketize.Scalar(self, boundaries, ...)
V bucketize_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  ElementType t = c.promoted({0, 1});
  no_bool(t == ElementType::kPred, "searchsorted_out_cpu");
  Value bd = c.b.convert(c.tensor(1), t);
  if (bd.type.dims.back() == 0) return {zeros(c.b, o)};
  Value v = c.is_tensor(0) ? c.b.convert(c.tensor(0), t) : c.runtime_operand(0, t, {});
  return {c.b.convert(binary_search(c, bd, v, std::nullopt, c.has(3) && c.flag(3)), o.dtype)};
}

// PyTorch's IndexError for a reduction over an empty dim (before the meta kernels, which word it differently).
ArgumentPrep nonempty_dim(size_t dim_arg, const char* op) {
  return [dim_arg, op](std::vector<c10::IValue>& args) {
    if (args.size() <= dim_arg || !args[0].isTensor() || !args[dim_arg].isInt()) return;
    const at::Tensor& x = args[0].toTensor();
    if (x.dim() == 0) return;
    int64_t d = normalize_dim(args[dim_arg].toInt(), x.dim());
    TORCH_CHECK_INDEX(x.size(d) != 0, op, "(): Expected reduction dim ", d, " to have non-zero size.");
  };
}

}  // namespace

void add_selection_rules(Rows& rows) {
  rows.push_back({{"median.dim", "median.dim_values"}, median_dim_rule(false), nonempty_dim(1, "median")});
  rows.push_back({{"nanmedian.dim", "nanmedian.dim_values"}, median_dim_rule(true), nonempty_dim(1, "nanmedian")});
  rows.push_back({{"median", "median.out"}, median_all_rule(false)});
  rows.push_back({{"nanmedian", "nanmedian.out"}, median_all_rule(true)});
  rows.push_back({{"kthvalue", "kthvalue.values"}, kthvalue_rule, nonempty_dim(2, "kthvalue"), short_rows(2)});
  rows.push_back({{"mode", "mode.values"}, mode_rule, nonempty_dim(1, "mode"), short_rows(1)});
  rows.push_back({{"searchsorted.Tensor", "searchsorted.Tensor_out"}, searchsorted_rule});
  rows.push_back({{"bucketize.Tensor", "bucketize.Tensor_out", "bucketize.Scalar", "bucketize.Scalar_out"}, bucketize_rule});
}

}  // namespace torch_tpu
