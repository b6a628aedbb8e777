// Scans and set-like reductions: cumprod, logcumsumexp, cummax/cummin (values and indices), isin,
// count_nonzero, nansum and aminmax. Float16/bfloat16 accumulate in float32 and round once.
#include <cmath>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using namespace hm;  // NOLINT: formula spellings
using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

Value as_rank1(HloBuilder& b, const Value& v) { return v.type.rank() == 0 ? b.reshape(v, {1}) : v; }

// Inclusive scan along `dim`: a reduce_window whose window reaches back over the whole dim, combining two scalars
// with `combine`.
Value scan(HloBuilder& b, const Value& x, int64_t dim, double init,
           const std::function<Value(HloBuilder&, const Value&, const Value&)>& combine) {
  int64_t rank = x.type.rank(), n = x.type.dims[dim];
  if (n <= 1) return x;
  std::vector<int64_t> window(rank, 1), strides(rank, 1);
  window[dim] = n;
  std::string pad = "dense<[";
  for (int64_t d = 0; d < rank; ++d) {
    pad += std::string(d ? ", " : "") + (d == dim ? "[" + std::to_string(n - 1) + ", 0]" : "[0, 0]");
  }
  pad += "]> : tensor<" + std::to_string(rank) + "x2xi64>";
  TensorType scalar{x.type.dtype, {}};
  std::string body = b.region({scalar, scalar}, [&](HloBuilder& rb, const V& args) -> V {
    return {combine(rb, args[0], args[1])};
  });
  return b.op1("stablehlo.reduce_window", {x, b.constant(init, x.type.dtype)}, x.type,
               "window_dimensions = " + i64_array(window) + ", window_strides = " + i64_array(strides) +
                   ", padding = " + pad,
               {body});
}

V cumprod_rule(OpContext& c) {  // cumprod(self, dim, dtype)
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  ElementType t = o.dtype == ElementType::kPred ? ElementType::kS64 : opmath_type(o.dtype);
  Value x = as_rank1(c.b, c.b.convert(c.tensor(0), t));
  int64_t d = c.dim(1, x.type.rank());
  Value r = scan(c.b, x, d, 1.0, [](HloBuilder& b, const Value& p, const Value& q) { return mul(b, p, q); });
  return {c.b.reshape(c.b.convert(r, o.dtype), o.dims)};
}

// log(exp(p) + exp(q)) without overflow; equal infinities give themselves, NaN propagates.
Value logaddexp_scalar(HloBuilder& b, const Value& p, const Value& q) {
  Value m = nan_max(b, p, q);
  Value lo = nan_min(b, p, q);
  Value r = add(b, m, log1p(b, exp(b, sub(b, lo, m))));
  Value same_inf = land(b, eq(b, p, q), eq(b, abs(b, p), k(b, INFINITY, p)));
  return sel(b, same_inf, p, sel(b, eq(b, lo, k(b, -INFINITY, lo)), m, r));
}

V logcumsumexp_rule(OpContext& c) {  // _logcumsumexp(self, dim)
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(c.b, o)};
  Value x = as_rank1(c.b, c.b.convert(c.tensor(0), opmath_type(o.dtype)));
  int64_t d = c.dim(1, x.type.rank());
  Value r = scan(c.b, x, d, -INFINITY, logaddexp_scalar);
  return {c.b.reshape(c.b.convert(r, o.dtype), o.dims)};
}

// _cummax_helper / _cummin_helper(self, values, indices, dim): the new contents of values and indices: the running extreme and the index of the last
// element that set or tied it. A NaN is the extreme from its position on (its index: the last NaN so far).
LoweringRule cum_extreme(bool is_max) {
  return [is_max](OpContext& c) -> V {
    HloBuilder& b = c.b;
    Value self = c.tensor(0);
    if (self.type.numel() == 0) return {zeros(b, c.out(0)), zeros(b, c.out(1))};
    Value x = as_rank1(b, self);
    bool boolean = x.type.dtype == ElementType::kPred;
    if (boolean) x = b.convert(x, ElementType::kU8);
    int64_t d = c.dim(3, x.type.rank());
    double init = is_max ? lowest(x.type.dtype) : highest(x.type.dtype);
    if (x.type.dtype == ElementType::kS64 || x.type.dtype == ElementType::kU64) init = is_max ? lowest(x.type.dtype) : 0;
    Value m;
    if (!is_max && (x.type.dtype == ElementType::kS64 || x.type.dtype == ElementType::kU64)) {
      // The largest 64-bit integer is not a double: run the scan on the negated (or complemented) values instead.
      Value flipped = b.unary("stablehlo.not", x);
      m = b.unary("stablehlo.not", scan(b, flipped, d, x.type.dtype == ElementType::kS64 ? lowest(x.type.dtype) : 0,
                                         [](HloBuilder& rb, const Value& p, const Value& q) { return nan_max(rb, p, q); }));
    } else {
      m = scan(b, x, d, init, [is_max](HloBuilder& rb, const Value& p, const Value& q) {
        return is_max ? nan_max(rb, p, q) : nan_min(rb, p, q);
      });
    }
    // A position is a record when its element is the running extreme there (NaN: when it is a NaN itself).
    Value record = eq(b, x, m);
    if (is_floating(x.type.dtype)) record = sel(b, isnan(b, m), isnan(b, x), record);
    TensorType idx_t{ElementType::kS64, x.type.dims};
    Value pos = sel(b, record, b.iota(idx_t, d), b.constant(-1, ElementType::kS64, x.type.dims));
    Value idx = scan(b, pos, d, -1, [](HloBuilder& rb, const Value& p, const Value& q) {
      return rb.binary("stablehlo.maximum", p, q);
    });
    if (boolean) m = b.convert(m, ElementType::kPred);
    return {b.reshape(m, c.out(0).dims), b.convert(b.reshape(idx, c.out(1).dims), c.out(1).dtype)};
  };
}

V isin_rule(OpContext& c) {  // isin(elements, test_elements, assume_unique, invert)
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = c.promoted({0, 1});
  auto flat = [&](size_t i) -> Value {
    if (c.is_tensor(i)) {
      Value v = b.convert(c.tensor(i), t);
      return b.reshape(v, {v.type.numel()});
    }
    return b.reshape(c.runtime_operand(i, t, {}), {1});
  };
  Value e = flat(0), s = flat(1);
  int64_t n = e.type.numel(), m = s.type.numel();
  bool invert = c.has(3) && c.flag(3);
  if (n == 0) return {zeros(b, o)};
  if (m == 0) return {b.constant(invert ? 1 : 0, ElementType::kPred, o.dims)};
  Value hit = eq(b, b.broadcast_in_dim(e, {n, m}, {0}), b.broadcast_in_dim(s, {n, m}, {1}));
  Value any = b.reduce(hit, b.constant(0, ElementType::kPred), {1}, "stablehlo.or");
  if (invert) any = lnot(b, any);
  return {b.reshape(any, o.dims)};
}

std::vector<int64_t> all_dims_of(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  return dims;
}

V count_nonzero_rule(OpContext& c) {  // count_nonzero(self, dim?) / .dim_IntList(self, dims)
  HloBuilder& b = c.b;
  Value x = c.tensor(0);
  Value nz = x.type.dtype == ElementType::kPred ? x : ne(b, x, zeros(b, x.type));
  std::vector<int64_t> dims = c.has(1) ? c.dims(1, x.type.rank()) : all_dims_of(x.type.rank());
  if (c.has(1) && c.ints(1).empty()) dims = all_dims_of(x.type.rank());
  return {b.reshape(reduce_sum(b, b.convert(nz, ElementType::kS64), dims), c.out(0).dims)};
}

V nansum_rule(OpContext& c) {  // nansum(self, dim?, keepdim, dtype): NaNs count as 0
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value x = b.convert(c.tensor(0), opmath_type(o.dtype));
  if (is_floating(x.type.dtype)) x = sel(b, isnan(b, x), zeros(b, x.type), x);
  std::vector<int64_t> dims = c.dims(1, x.type.rank());
  return {b.reshape(b.convert(reduce_sum(b, x, dims), o.dtype), o.dims)};
}

V aminmax_rule(OpContext& c) {  // aminmax(self, dim?, keepdim) -> (min, max)
  HloBuilder& b = c.b;
  Value x = c.tensor(0);
  std::vector<int64_t> dims = c.has(1) && x.type.rank() > 0 ? std::vector<int64_t>{c.dim(1, x.type.rank())}
                                                             : all_dims_of(x.type.rank());
  return {b.reshape(reduce_nan_min(b, x, dims), c.out(0).dims), b.reshape(reduce_nan_max(b, x, dims), c.out(1).dims)};
}

ArgumentPrep aminmax_check() {
  return [](std::vector<c10::IValue>& args) {
    if (args.empty() || !args[0].isTensor()) return;
    const at::Tensor& x = args[0].toTensor();
    bool has_dim = args.size() > 1 && !args[1].isNone();
    if (!has_dim) {
      TORCH_CHECK(x.numel() > 0, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                  "identity.");
    } else if (x.dim() > 0) {
      int64_t d = normalize_dim(args[1].toInt(), x.dim());
      TORCH_CHECK(x.size(d) > 0, "aminmax(): Expected reduction dim ", d, " to have non-zero size.");
    }
  };
}

}  // namespace

void add_scan_rules(Rows& rows) {
  rows.push_back({{"cumprod", "cumprod_", "cumprod.out"}, cumprod_rule});
  rows.push_back({{"_logcumsumexp", "_logcumsumexp.out"}, logcumsumexp_rule});
  rows.push_back({{"_cummax_helper"}, cum_extreme(true)});
  rows.push_back({{"_cummin_helper"}, cum_extreme(false)});
  rows.push_back({{"isin.Tensor_Tensor", "isin.Tensor_Tensor_out", "isin.Tensor_Scalar", "isin.Tensor_Scalar_out",
                   "isin.Scalar_Tensor", "isin.Scalar_Tensor_out"},
                  isin_rule});
  rows.push_back({{"count_nonzero", "count_nonzero.out", "count_nonzero.dim_IntList", "count_nonzero.dim_IntList_out"},
                  count_nonzero_rule});
  rows.push_back({{"nansum", "nansum.out"}, nansum_rule});
  rows.push_back({{"aminmax", "aminmax.out"}, aminmax_rule, aminmax_check()});
}

}  // namespace torch_tpu
