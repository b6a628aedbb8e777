// Reductions: sum/mean/prod, amax/amin/max/min (with indices), argmax/argmin, var/std, all/any, vector norms.
// Rules reduce over the normalised dims; the kernel reshapes to PyTorch's (keepdim) result shape.
#include <cmath>

#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

// Overloads whose argument 1 is not a dim list: they reduce over every dim.
bool reduces_all(OpContext& c) {
  static const char* const kAll[] = {"sum", "mean", "prod", "all", "any", "all.all_out", "any.all_out",
                                     "sum.out", "prod.out", "max", "min"};
  for (const char* n : kAll) {
    if (c.op_name() == n) return true;
  }
  return false;
}

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  return dims;
}

// Input converted to `dtype` and the dims to reduce.
std::pair<Value, std::vector<int64_t>> reduce_input(OpContext& c, ElementType dtype) {
  Value x = c.b.convert(c.tensor(0), dtype);
  if (reduces_all(c) || c.num_args() < 2) return {x, all_dims(x.type.rank())};
  return {x, c.dims(1, x.type.rank())};
}

int64_t count_of(const Value& x, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.type.dims[d];
  return n;
}

// Sums and products accumulate float16/bfloat16 in float32 and round once, as PyTorch does.
V sum_rule(OpContext& c) {
  auto [x, dims] = reduce_input(c, opmath_type(c.out(0).dtype));
  return {c.b.convert(reduce_sum(c.b, x, dims), c.out(0).dtype)};
}

V mean_rule(OpContext& c) {
  ElementType t = opmath_type(c.out(0).dtype);
  auto [x, dims] = reduce_input(c, t);
  Value s = reduce_sum(c.b, x, dims);
  Value m = c.b.binary("stablehlo.divide", s, c.b.constant(static_cast<double>(count_of(x, dims)), t, s.type.dims));
  return {c.b.convert(m, c.out(0).dtype)};
}

// PyTorch's wording for integer inputs of mean() without a dtype (the meta kernel words it differently).
ArgumentPrep mean_dtype_check(size_t dtype_arg) {
  return [dtype_arg](std::vector<c10::IValue>& args) {
    if (args.empty() || !args[0].isTensor()) return;
    at::ScalarType in = args[0].toTensor().scalar_type();
    bool has_dtype = dtype_arg < args.size() && !args[dtype_arg].isNone();
    TORCH_CHECK(has_dtype || at::isFloatingType(in) || at::isComplexType(in),
                "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ",
                c10::toString(in));
  };
}

V prod_rule(OpContext& c) {
  auto [x, dims] = reduce_input(c, opmath_type(c.out(0).dtype));
  Value p = x.type.dtype == ElementType::kPred ? c.b.reduce(x, c.b.constant(1, x.type.dtype), dims, "stablehlo.and")
                                               : c.b.reduce(x, c.b.constant(1, x.type.dtype), dims, "stablehlo.multiply");
  return {c.b.convert(p, c.out(0).dtype)};
}

// PyTorch's errors for reductions without an identity (max/min/amax/amin/argmax/argmin) over nothing. They run as
// argument preparation, before the meta kernels (which word them differently).
void check_nonempty_all(const at::Tensor& x, const char* op, bool index_error) {
  if (x.numel() != 0) return;
  if (index_error) TORCH_CHECK_INDEX(false, op, "(): Expected reduction dim to be specified for input.numel() == 0.");
  TORCH_CHECK(false, op, "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
              "with the 'dim' argument.");
}

void check_nonempty_dim(const at::Tensor& x, int64_t dim, bool show_given, const char* op) {
  if (x.dim() == 0) return;
  int64_t d = normalize_dim(dim, x.dim());
  TORCH_CHECK_INDEX(x.size(d) != 0, op, "(): Expected reduction dim ", show_given ? dim : d, " to have non-zero size.");
}

enum class Extreme { kAll, kDim, kArg, kAmax };

ArgumentPrep check_extreme(Extreme kind, const char* op) {
  return [kind, op](std::vector<c10::IValue>& args) {
    if (args.empty() || !args[0].isTensor()) return;
    const at::Tensor& x = args[0].toTensor();
    bool has_dim = args.size() > 1 && !args[1].isNone();
    switch (kind) {
      case Extreme::kAll: check_nonempty_all(x, op, false); break;
      case Extreme::kDim:
        if (has_dim) check_nonempty_dim(x, args[1].toInt(), false, op);
        break;
      case Extreme::kArg:
        TORCH_CHECK(x.scalar_type() != at::kBool, op, "(): does not support bool input");
        if (has_dim) {
          check_nonempty_dim(x, args[1].toInt(), false, op);
        } else {
          check_nonempty_all(x, op, true);
        }
        break;
      case Extreme::kAmax: {
        std::vector<int64_t> dims = has_dim ? args[1].toIntVector() : std::vector<int64_t>{};
        if (dims.empty()) check_nonempty_all(x, op, false);
        for (int64_t d : dims) check_nonempty_dim(x, d, true, op);
        break;
      }
    }
  };
}

LoweringRule amax_amin(bool is_max) {  // amax(self, dim=[], keepdim)
  return [is_max](OpContext& c) -> V {
    auto [x, dims] = reduce_input(c, c.out(0).dtype);
    return {is_max ? reduce_nan_max(c.b, x, dims) : reduce_nan_min(c.b, x, dims)};
  };
}

// Index of the first extreme element along `dim`; NaN is the extreme (PyTorch returns the first NaN's index).
Value arg_extreme(HloBuilder& b, const Value& x, int64_t dim, bool is_max) {
  Value ext = is_max ? reduce_nan_max(b, x, {dim}) : reduce_nan_min(b, x, {dim});
  std::vector<int64_t> keep = x.type.dims;
  keep[dim] = 1;
  Value ext_b = b.broadcast_to(b.reshape(ext, keep), x.type.dims);
  Value hit = b.compare(CompareDirection::kEq, x, ext_b);
  if (is_floating(x.type.dtype)) hit = b.binary("stablehlo.or", hit, is_nan(b, x));
  TensorType idx_t{ElementType::kS64, x.type.dims};
  Value idx = b.select(hit, b.iota(idx_t, dim), b.constant(static_cast<double>(x.type.dims[dim]), ElementType::kS64, x.type.dims));
  return reduce_nan_min(b, idx, {dim});
}

LoweringRule extreme_with_indices(bool is_max) {  // max.dim / min.dim -> (values, indices)
  return [is_max](OpContext& c) -> V {
    Value x = c.tensor(0);
    if (x.type.rank() == 0) return {x, c.b.constant(0, ElementType::kS64)};
    int64_t d = c.dim(1, x.type.rank());
    return {is_max ? reduce_nan_max(c.b, x, {d}) : reduce_nan_min(c.b, x, {d}), arg_extreme(c.b, x, d, is_max)};
  };
}

LoweringRule extreme_all(bool is_max) {  // max() / min() over everything
  return [is_max](OpContext& c) -> V {
    Value x = c.tensor(0);
    std::vector<int64_t> dims = all_dims(x.type.rank());
    return {is_max ? reduce_nan_max(c.b, x, dims) : reduce_nan_min(c.b, x, dims)};
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
  at::ScalarType in = c.arg(0).toTensor().scalar_type();
  TORCH_CHECK(at::isFloatingType(in) || at::isComplexType(in), "std and var only support floating point and complex dtypes");
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

// float16/bfloat16 compute in float32 and round once.
V var_rule(OpContext& c) { return {c.b.convert(variance(c, opmath_type(c.out(0).dtype)).first, c.out(0).dtype)}; }
V std_rule(OpContext& c) {
  return {c.b.convert(c.b.unary("stablehlo.sqrt", variance(c, opmath_type(c.out(0).dtype)).first), c.out(0).dtype)};
}
V var_mean_rule(OpContext& c) {
  auto [v, m] = variance(c, opmath_type(c.out(0).dtype));
  return {c.b.convert(v, c.out(0).dtype), c.b.convert(m, c.out(1).dtype)};
}
V std_mean_rule(OpContext& c) {
  auto [v, m] = variance(c, opmath_type(c.out(0).dtype));
  return {c.b.convert(c.b.unary("stablehlo.sqrt", v), c.out(0).dtype), c.b.convert(m, c.out(1).dtype)};
}

LoweringRule bool_reduce(bool all) {
  return [all](OpContext& c) -> V {
    Value x = c.tensor(0);
    Value p = x.type.dtype == ElementType::kPred ? x : c.b.compare(CompareDirection::kNe, x, zeros(c.b, x.type));
    std::vector<int64_t> dims = reduces_all(c) || !c.has(1) ? all_dims(p.type.rank()) : c.dims(1, p.type.rank());
    Value r = c.b.reduce(p, c.b.constant(all ? 1 : 0, ElementType::kPred), dims, all ? "stablehlo.and" : "stablehlo.or");
    return {r};
  };
}

void vector_norm_check(std::vector<c10::IValue>& args) {
  if (args.empty() || !args[0].isTensor()) return;
  at::ScalarType in = args[0].toTensor().scalar_type();
  TORCH_CHECK(at::isFloatingType(in) || at::isComplexType(in),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", c10::toString(in));
}

// The `ord` vector norm of |x| (already taken) over `dims`, in x's type.
Value norm_of_abs(HloBuilder& b, const Value& x, double ord, const std::vector<int64_t>& dims) {
  ElementType t = x.type.dtype;
  if (std::isinf(ord)) return ord > 0 ? reduce_nan_max(b, x, dims) : reduce_nan_min(b, x, dims);
  if (ord == 1.0) return reduce_sum(b, x, dims);
  if (ord == 2.0) return b.unary("stablehlo.sqrt", reduce_sum(b, b.binary("stablehlo.multiply", x, x), dims));
  if (ord == 0.0) return reduce_sum(b, b.convert(b.compare(CompareDirection::kNe, x, zeros(b, x.type)), t), dims);
  Value s = reduce_sum(b, b.binary("stablehlo.power", x, b.constant(ord, t, x.type.dims)), dims);
  return b.binary("stablehlo.power", s, b.constant(1.0 / ord, t, s.type.dims));
}

V renorm_rule(OpContext& c) {  // renorm(self, p, dim, maxnorm): slices along dim with norm > maxnorm scaled to it
  HloBuilder& b = c.b;
  double p = c.scalar(1), maxnorm = c.scalar(3);
  TORCH_CHECK(p > 0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(maxnorm >= 0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm);
  TensorType o = c.out(0);
  ElementType t = opmath_type(o.dtype);
  Value x = b.convert(c.tensor(0), t);
  int64_t d = c.dim(2, x.type.rank());
  std::vector<int64_t> others;
  for (int64_t i = 0; i < x.type.rank(); ++i) {
    if (i != d) others.push_back(i);
  }
  Value norm = keep_dims(b, norm_of_abs(b, b.unary("stablehlo.abs", x), p, others), x.type.dims, others);
  Value mx = b.constant(maxnorm, t, norm.type.dims);
  Value factor = b.select(b.compare(CompareDirection::kGt, norm, mx),
                          b.binary("stablehlo.divide", mx, b.binary("stablehlo.add", norm, b.constant(1e-7, t, norm.type.dims))),
                          b.constant(1, t, norm.type.dims));
  return {b.convert(b.binary("stablehlo.multiply", x, b.broadcast_to(factor, x.type.dims)), o.dtype)};
}

V vector_norm_rule(OpContext& c) {  // linalg_vector_norm(self, ord, dim, keepdim, dtype)
  ElementType t = opmath_type(c.out(0).dtype);
  Value x = c.b.unary("stablehlo.abs", c.b.convert(c.tensor(0), t));
  std::vector<int64_t> dims = c.dims(2, x.type.rank());
  double ord = c.has(1) ? c.scalar(1) : 2.0;
  auto done = [&](const Value& v) -> V { return {c.b.convert(v, c.out(0).dtype)}; };
  if (std::isinf(ord)) return done(ord > 0 ? reduce_nan_max(c.b, x, dims) : reduce_nan_min(c.b, x, dims));
  if (ord == 1.0) return done(reduce_sum(c.b, x, dims));
  if (ord == 2.0) return done(c.b.unary("stablehlo.sqrt", reduce_sum(c.b, c.b.binary("stablehlo.multiply", x, x), dims)));
  if (ord == 0.0) {
    Value nz = c.b.convert(c.b.compare(CompareDirection::kNe, x, zeros(c.b, x.type)), t);
    return done(reduce_sum(c.b, nz, dims));
  }
  Value p = c.b.binary("stablehlo.power", x, c.b.constant(ord, t, x.type.dims));
  Value s = reduce_sum(c.b, p, dims);
  return done(c.b.binary("stablehlo.power", s, c.b.constant(1.0 / ord, t, s.type.dims)));
}

// histc(self, bins, min, max) as CUDA computes it, for floating and integer inputs: the result has the input's
// dtype; min == max takes the data's min and max (widened by 1 each way if they are equal too); elements outside
// [min, max] (and NaN) are ignored; bin = (x - min) * bins / (max - min), the max edge falling in the last bin.
// Integer inputs truncate the bounds and bin in integer arithmetic. Where CUDA raises because the data's range is
// not finite (a check that needs the data on the host), float results are NaN instead.
V histc_rule(OpContext& c) {
  TensorType o = c.out(0);
  HloBuilder& b = c.b;
  int64_t bins = c.has(1) ? c.integer(1) : 100;
  TORCH_CHECK_NOT_IMPLEMENTED(o.dtype != ElementType::kPred, "\"histc\" not implemented for 'Bool'");
  Value input = c.tensor(0);
  if (input.type.numel() == 0) return {zeros(b, o)};
  bool integral = !is_floating(o.dtype);
  ElementType t = integral ? ElementType::kS64 : opmath_type(o.dtype);
  Value x = b.reshape(b.convert(input, t), {input.type.numel()});
  int64_t n = x.type.numel();
  double lo_arg = c.has(2) ? c.scalar(2) : 0.0, hi_arg = c.has(3) ? c.scalar(3) : 0.0;
  if (integral) {
    lo_arg = static_cast<double>(static_cast<int64_t>(lo_arg));
    hi_arg = static_cast<double>(static_cast<int64_t>(hi_arg));
  }
  // Program arguments, not constants: XLA would fold (max - min) and divide by its reciprocal, moving bin edges.
  Value lo = c.runtime_scalar(c10::Scalar(lo_arg), t), hi = c.runtime_scalar(c10::Scalar(hi_arg), t);
  if (lo_arg == hi_arg) {
    lo = reduce_nan_min(b, x, {0});
    hi = reduce_nan_max(b, x, {0});
    Value same = b.compare(CompareDirection::kEq, lo, hi);
    lo = b.select(same, b.binary("stablehlo.subtract", lo, b.constant(1, t)), lo);
    hi = b.select(same, b.binary("stablehlo.add", hi, b.constant(1, t)), hi);
  }
  Value lo_n = b.broadcast_to(lo, {n}), hi_n = b.broadcast_to(hi, {n});
  Value inside = b.binary("stablehlo.and", b.compare(CompareDirection::kGe, x, lo_n), b.compare(CompareDirection::kLe, x, hi_n));
  Value pos = b.binary("stablehlo.divide",
                       b.binary("stablehlo.multiply", b.binary("stablehlo.subtract", x, lo_n), b.constant(static_cast<double>(bins), t, {n})),
                       b.binary("stablehlo.subtract", hi_n, lo_n));
  Value bin = b.convert(b.select(inside, pos, b.constant(0, t, {n})), ElementType::kS64);
  Value last = b.constant(static_cast<double>(bins - 1), ElementType::kS64, {n});
  bin = b.select(b.compare(CompareDirection::kGt, bin, last), last, bin);
  // Elements outside the range go to index `bins`, which the scatter drops as out of bounds.
  bin = b.select(inside, bin, b.constant(static_cast<double>(bins), ElementType::kS64, {n}));
  ElementType acc = integral ? ElementType::kS64 : ElementType::kF32;
  if (o.dtype == ElementType::kF64) acc = ElementType::kF64;
  TensorType scalar{acc, {}};
  std::string body = b.region({scalar, scalar}, [&](HloBuilder& rb, const V& args) -> V {
    return {rb.binary("stablehlo.add", args[0], args[1])};
  });
  Value counts = b.op1("stablehlo.scatter", {b.constant(0, acc, {bins}), b.reshape(bin, {n, 1}), b.constant(1, acc, {n})},
                       {acc, {bins}},
                       "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
                       "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, "
                       "unique_indices = false",
                       {body});
  Value r = b.convert(counts, o.dtype);
  if (!integral) {
    Value finite = b.binary("stablehlo.and", b.op1("stablehlo.is_finite", {lo}, {ElementType::kPred, {}}),
                            b.op1("stablehlo.is_finite", {hi}, {ElementType::kPred, {}}));
    r = b.select(b.broadcast_to(finite, {bins}), r, b.constant(NAN, o.dtype, {bins}));
  }
  return {r};
}

// hash_tensor(self, dim=[], keepdim=False, mode=0): the XOR of the elements' 64-bit patterns, as uint64 (floats as
// float64, signed integers sign-extended to int64, unsigned ones and bools zero-extended), as CPU PyTorch hashes.
V hash_tensor_rule(OpContext& c) {
  const int64_t mode = c.has(3) ? c.integer(3) : 0;
  TORCH_CHECK(mode == 0, "Unknown hash_tensor mode: ", mode);
  Value x = c.tensor(0);
  const ElementType t = x.type.dtype;
  TORCH_CHECK_NOT_IMPLEMENTED(!is_complex(t), "\"xor_sum\" not implemented for complex tensors on tpu");
  const bool reinterpret = is_floating(t) || is_signed_integer(t);  // widened to 64 bits first, then its bits
  Value bits = reinterpret ? c.b.op1("stablehlo.bitcast_convert",
                                     {c.b.convert(x, is_floating(t) ? ElementType::kF64 : ElementType::kS64)},
                                     {ElementType::kU64, x.type.dims})
                           : c.b.convert(x, ElementType::kU64);
  Value r = c.b.reduce(bits, c.b.constant(0, ElementType::kU64), c.dims(1, x.type.rank()), "stablehlo.xor");
  return {c.b.reshape(r, c.out(0).dims)};
}

}  // namespace

void add_reduction_rules(Rows& rows) {
  rows.push_back({{"sum", "sum.dim_IntList", "sum.IntList_out"}, sum_rule});
  rows.push_back({{"mean"}, mean_rule, mean_dtype_check(1)});
  rows.push_back({{"mean.dim", "mean.out"}, mean_rule, mean_dtype_check(3)});
  rows.push_back({{"prod", "prod.dim_int", "prod.int_out"}, prod_rule});
  rows.push_back({{"amax", "amax.out"}, amax_amin(true), check_extreme(Extreme::kAmax, "amax")});
  rows.push_back({{"amin", "amin.out"}, amax_amin(false), check_extreme(Extreme::kAmax, "amin")});
  rows.push_back({{"max.dim", "max.dim_max"}, extreme_with_indices(true), check_extreme(Extreme::kDim, "max")});
  rows.push_back({{"min.dim", "min.dim_min"}, extreme_with_indices(false), check_extreme(Extreme::kDim, "min")});
  rows.push_back({{"max", "max.unary_out"}, extreme_all(true), check_extreme(Extreme::kAll, "max")});
  rows.push_back({{"min", "min.unary_out"}, extreme_all(false), check_extreme(Extreme::kAll, "min")});
  rows.push_back({{"argmax", "argmax.out"}, arg_rule(true), check_extreme(Extreme::kArg, "argmax")});
  rows.push_back({{"argmin", "argmin.out"}, arg_rule(false), check_extreme(Extreme::kArg, "argmin")});
  rows.push_back({{"var.correction", "var.correction_out"}, var_rule});
  rows.push_back({{"std.correction", "std.correction_out"}, std_rule});
  rows.push_back({{"var_mean.correction"}, var_mean_rule});
  rows.push_back({{"std_mean.correction"}, std_mean_rule});
  rows.push_back({{"all", "all.dim", "all.dims", "all.out", "all.dims_out", "all.all_out"}, bool_reduce(true)});
  rows.push_back({{"any", "any.dim", "any.dims", "any.out", "any.dims_out", "any.all_out"}, bool_reduce(false)});
  rows.push_back({{"linalg_vector_norm", "linalg_vector_norm.out"}, vector_norm_rule, vector_norm_check});
  // norm(self, p?, dim, keepdim[, dtype]): the same arguments in the same places as linalg_vector_norm.
  rows.push_back({{"norm.ScalarOpt_dim", "norm.out", "norm.ScalarOpt_dim_dtype", "norm.dtype_out"}, vector_norm_rule});
  rows.push_back({{"histc", "histc.out"}, histc_rule});
  rows.push_back({{"hash_tensor", "hash_tensor.out"}, hash_tensor_rule});
  rows.push_back({{"renorm", "renorm_", "renorm.out"}, renorm_rule});
}

}  // namespace torch_tpu
