// Reductions: sum/mean/prod, amax/amin/max/min (with indices), argmax/argmin, var/std, all/any, vector norms.
// Rules reduce over the normalised dims; the kernel reshapes to PyTorch's (keepdim) result shape.
#include <cmath>

#include "lowering/op_context.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

bool has_dim_arg(OpContext& c) {
  const std::string& n = c.op_name();
  return n.find(".dim") != std::string::npos || n.find("IntList") != std::string::npos ||
         n.find(".correction") != std::string::npos || n.find(".out") != std::string::npos ||
         n == "amax" || n == "amin" || n == "amax.out" || n == "amin.out";
}

// Input converted to `dtype` and the dims to reduce.
std::pair<Value, std::vector<int64_t>> reduce_input(OpContext& c, ElementType dtype) {
  Value x = c.b.convert(c.tensor(0), dtype);
  std::vector<int64_t> dims;
  if (has_dim_arg(c) && c.num_args() > 1) {
    dims = c.dims(1, x.type.rank());
  } else {
    for (int64_t d = 0; d < x.type.rank(); ++d) dims.push_back(d);
  }
  return {x, dims};
}

int64_t count_of(const Value& x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.type.dims[d];
  return n;
}

V sum_rule(OpContext& c) {
  auto [x, dims] = reduce_input(c, c.out(0).dtype);
  return {reduce_sum(c.b, x, dims)};
}

V mean_rule(OpContext& c) {
  ElementType t = c.out(0).dtype;
  auto [x, dims] = reduce_input(c, t);
  Value s = reduce_sum(c.b, x, dims);
  return {c.b.binary("stablehlo.divide", s, c.b.constant(static_cast<double>(count_of(x, dims)), t, s.type.dims))};
}

V prod_rule(OpContext& c) {
  auto [x, dims] = reduce_input(c, c.out(0).dtype);
  return {c.b.reduce(x, c.b.constant(1, x.type.dtype), dims, "stablehlo.multiply")};
}

Value reduce_max(HloBuilder& b, const Value& x, const std::vector<int64_t>& dims) {
  return b.reduce(x, b.constant(lowest(x.type.dtype), x.type.dtype), dims, "stablehlo.maximum");
}

Value reduce_min(HloBuilder& b, const Value& x, const std::vector<int64_t>& dims) {
  return b.reduce(x, b.constant(highest(x.type.dtype), x.type.dtype), dims, "stablehlo.minimum");
}

V amax_rule(OpContext& c) {
  auto [x, dims] = reduce_input(c, c.out(0).dtype);
  return {reduce_max(c.b, x, dims)};
}

V amin_rule(OpContext& c) {
  auto [x, dims] = reduce_input(c, c.out(0).dtype);
  return {reduce_min(c.b, x, dims)};
}

// Index of the first extreme element along `dim` (NaN counts as the extreme, as in PyTorch).
Value arg_extreme(HloBuilder& b, const Value& x, int64_t dim, bool is_max) {
  Value ext = is_max ? reduce_max(b, x, {dim}) : reduce_min(b, x, {dim});
  std::vector<int64_t> keep = x.type.dims;
  keep[dim] = 1;
  Value ext_b = b.broadcast_to(b.reshape(ext, keep), x.type.dims);
  Value hit = b.compare(CompareDirection::kEq, x, ext_b);
  if (is_floating(x.type.dtype)) hit = b.binary("stablehlo.or", hit, b.compare(CompareDirection::kNe, x, x));
  TensorType idx_t{ElementType::kS64, x.type.dims};
  Value idx = b.select(hit, b.iota(idx_t, dim), b.constant(static_cast<double>(x.type.dims[dim]), ElementType::kS64, x.type.dims));
  return reduce_min(b, idx, {dim});
}

// Extreme values with NaN propagation, as PyTorch's max/min do.
Value extreme_values(HloBuilder& b, const Value& x, const std::vector<int64_t>& dims, bool is_max) {
  return is_max ? reduce_max(b, x, dims) : reduce_min(b, x, dims);
}

LoweringRule extreme_with_indices(bool is_max) {  // max.dim / min.dim -> (values, indices)
  return [is_max](OpContext& c) -> V {
    Value x = c.tensor(0);
    if (x.type.rank() == 0) return {x, c.b.constant(0, ElementType::kS64)};
    int64_t d = c.dim(1, x.type.rank());
    return {extreme_values(c.b, x, {d}, is_max), arg_extreme(c.b, x, d, is_max)};
  };
}

LoweringRule extreme_all(bool is_max) {  // max() / min() over everything
  return [is_max](OpContext& c) -> V {
    Value x = c.tensor(0);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.type.rank(); ++d) dims.push_back(d);
    return {extreme_values(c.b, x, dims, is_max)};
  };
}

LoweringRule arg_rule(bool is_max) {  // argmax(self, dim?, keepdim)
  return [is_max](OpContext& c) -> V {
    Value x = c.tensor(0);
    if (!c.has(1) || x.type.rank() == 0) {
      x = c.b.reshape(x, {x.type.numel()});
      return {arg_extreme(c.b, x, 0, is_max)};
    }
    return {arg_extreme(c.b, x, c.dim(1, x.type.rank()), is_max)};
  };
}

// var/std with `correction` (arg 2; default 1), over dims (arg 1).
std::pair<Value, Value> variance(OpContext& c, ElementType t) {
  Value x = c.b.convert(c.tensor(0), t);
  std::vector<int64_t> dims = c.dims(1, x.type.rank());
  double correction = c.has(2) ? c.scalar(2) : 1.0;
  double n = static_cast<double>(count_of(x, dims));
  Value s = reduce_sum(c.b, x, dims);
  Value mean = c.b.binary("stablehlo.divide", s, c.b.constant(n, t, s.type.dims));
  std::vector<int64_t> keep = x.type.dims;
  for (int64_t d : dims) keep[d] = 1;
  Value centered = c.b.binary("stablehlo.subtract", x, c.b.broadcast_to(c.b.reshape(mean, keep), x.type.dims));
  Value ss = reduce_sum(c.b, c.b.binary("stablehlo.multiply", centered, centered), dims);
  Value var = c.b.binary("stablehlo.divide", ss, c.b.constant(std::max(n - correction, 0.0), t, ss.type.dims));
  return {var, mean};
}

V var_rule(OpContext& c) { return {variance(c, c.out(0).dtype).first}; }
V std_rule(OpContext& c) { return {c.b.unary("stablehlo.sqrt", variance(c, c.out(0).dtype).first)}; }
V var_mean_rule(OpContext& c) {
  auto [v, m] = variance(c, c.out(0).dtype);
  return {v, m};
}
V std_mean_rule(OpContext& c) {
  auto [v, m] = variance(c, c.out(0).dtype);
  return {c.b.unary("stablehlo.sqrt", v), m};
}

LoweringRule bool_reduce(bool all) {
  return [all](OpContext& c) -> V {
    Value x = c.tensor(0);
    Value p = x.type.dtype == ElementType::kPred ? x : c.b.compare(CompareDirection::kNe, x, zeros(c.b, x.type));
    std::vector<int64_t> dims;
    bool with_dims = c.op_name().find(".dim") != std::string::npos || c.op_name().find(".dims") != std::string::npos;
    if (with_dims && c.has(1)) {
      dims = c.dims(1, p.type.rank());
    } else {
      for (int64_t d = 0; d < p.type.rank(); ++d) dims.push_back(d);
    }
    Value r = c.b.reduce(p, c.b.constant(all ? 1 : 0, ElementType::kPred), dims, all ? "stablehlo.and" : "stablehlo.or");
    return {r};
  };
}

V vector_norm_rule(OpContext& c) {  // linalg_vector_norm(self, ord, dim, keepdim, dtype)
  ElementType t = c.out(0).dtype;
  Value x = c.b.unary("stablehlo.abs", c.b.convert(c.tensor(0), t));
  std::vector<int64_t> dims = c.dims(2, x.type.rank());
  double ord = c.has(1) ? c.scalar(1) : 2.0;
  if (std::isinf(ord)) return {ord > 0 ? reduce_max(c.b, x, dims) : reduce_min(c.b, x, dims)};
  if (ord == 1.0) return {reduce_sum(c.b, x, dims)};
  if (ord == 2.0) return {c.b.unary("stablehlo.sqrt", reduce_sum(c.b, c.b.binary("stablehlo.multiply", x, x), dims))};
  if (ord == 0.0) {
    Value nz = c.b.convert(c.b.compare(CompareDirection::kNe, x, zeros(c.b, x.type)), t);
    return {reduce_sum(c.b, nz, dims)};
  }
  Value p = c.b.binary("stablehlo.power", x, c.b.constant(ord, t, x.type.dims));
  Value s = reduce_sum(c.b, p, dims);
  return {c.b.binary("stablehlo.power", s, c.b.constant(1.0 / ord, t, s.type.dims))};
}

}  // namespace

void add_reduction_rules(Rows& rows) {
  rows.push_back({{"sum", "sum.dim_IntList", "sum.IntList_out"}, sum_rule});
  rows.push_back({{"mean", "mean.dim", "mean.out"}, mean_rule});
  rows.push_back({{"prod", "prod.dim_int", "prod.int_out"}, prod_rule});
  rows.push_back({{"amax", "amax.out"}, amax_rule});
  rows.push_back({{"amin", "amin.out"}, amin_rule});
  rows.push_back({{"max.dim", "max.dim_max"}, extreme_with_indices(true)});
  rows.push_back({{"min.dim", "min.dim_min"}, extreme_with_indices(false)});
  rows.push_back({{"max"}, extreme_all(true)});
  rows.push_back({{"min"}, extreme_all(false)});
  rows.push_back({{"argmax", "argmax.out"}, arg_rule(true)});
  rows.push_back({{"argmin", "argmin.out"}, arg_rule(false)});
  rows.push_back({{"var.correction", "var.correction_out"}, var_rule});
  rows.push_back({{"std.correction", "std.correction_out"}, std_rule});
  rows.push_back({{"var_mean.correction"}, var_mean_rule});
  rows.push_back({{"std_mean.correction"}, std_mean_rule});
  rows.push_back({{"all", "all.dim", "all.dims", "all.out", "all.all_out"}, bool_reduce(true)});
  rows.push_back({{"any", "any.dim", "any.dims", "any.out", "any.all_out"}, bool_reduce(false)});
  rows.push_back({{"linalg_vector_norm", "linalg_vector_norm.out"}, vector_norm_rule});
}

}  // namespace torch_tpu
