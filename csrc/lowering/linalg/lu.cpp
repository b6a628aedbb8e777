// LU-based linear algebra on the device: linalg_lu_factor_ex, linalg_lu, lu_unpack, linalg_lu_solve,
// _linalg_solve_ex, linalg_inv_ex, _linalg_det, _linalg_slogdet, and _linalg_check_errors (the device-side error
// of the non-_ex ops). The factorisation is one while loop of rank-1 updates (matrices.cpp); where PyTorch
// factors A^T instead of A (contiguous real inputs of solve/det/slogdet, a layout optimisation its backward formulas
// rely on), so do these rules: LU and pivots mean what PyTorch's mean.
#include <algorithm>

#include "lowering/linalg/matrices.h"

namespace torch_tpu {
namespace {

using namespace linalg;  // NOLINT(build/namespaces): one area's helpers

// Output i with no elements (e.g. empty batches): zeros of PyTorch's type.
bool empty(OpContext& c, size_t i) { return c.out_defined(i) && c.out(i).numel() == 0; }

V zeros_for_all(OpContext& c) {
  V out;
  for (size_t i = 0; i < c.num_outputs(); ++i) out.push_back(zeros(c.b, c.out(i)));
  return out;
}

bool any_empty_input(OpContext& c, std::initializer_list<size_t> args) {
  for (size_t i : args) {
    if (c.is_tensor(i) && c.arg(i).toTensor().numel() == 0) return true;
  }
  return false;
}

Dims broadcast_dims(const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Dims with_matrix(Dims batch, int64_t m, int64_t n) {
  batch.push_back(m);
  batch.push_back(n);
  return batch;
}

// The LU factorisation of batched `a` ([..., m, n]), in flattened form.
Lu factor(HloBuilder& b, const Value& a, bool pivot = true) { return lu_factor(b, flatten_batch(b, a), pivot); }

Value reshape_to(HloBuilder& b, const Value& v, const TensorType& t) { return unflatten(b, b.convert(v, t.dtype), t.dims); }

// PyTorch's solve/det/slogdet factor A^T when A is contiguous and real (det(A^T) = det(A); solves use adjoint).
bool factors_transpose(OpContext& c, size_t i) {
  const at::Tensor& a = c.arg(i).toTensor();
  return a.is_contiguous() && !a.is_complex();
}

// linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info)
V lu_factor_ex_rule(OpContext& c) {
  if (any_empty_input(c, {0})) return zeros_for_all(c);
  Lu f = factor(c.b, c.tensor(0), c.flag(1));
  if (c.flag(2)) check_info(c, f.info, "torch.linalg.lu_factor_ex", c.arg(0).toTensor().dim() == 2);
  return {reshape_to(c.b, f.lu, c.out(0)), reshape_to(c.b, f.pivots, c.out(1)), reshape_to(c.b, f.info, c.out(2))};
}

// P (A = P L U) from a permutation: P[r, i] = (perm[i] == r).
Value permutation_matrix(HloBuilder& b, const Value& perm, ElementType t) {
  int64_t n = perm.type.dims[0], m = perm.type.dims[1];
  Dims d{n, m, m};
  Value hit = b.compare(CompareDirection::kEq, b.broadcast_in_dim(perm, d, {0, 2}), iota(b, d, 1));
  return b.select(hit, b.constant(1, t, d), b.constant(0, t, d));
}

// L (unit lower, m x k) and U (upper, k x n) from packed LU factors [N, m, n].
std::pair<Value, Value> unpack(HloBuilder& b, const Value& lu) {
  int64_t n = lu.type.dims[0], m = lu.type.dims[1], cols = lu.type.dims[2], k = std::min(m, cols);
  Value l = b.slice(lu, {0, 0, 0}, {n, m, k});
  l = b.binary("stablehlo.add", tril(b, l, -1), eye(b, lu.type.dtype, l.type.dims));
  Value u = triu(b, b.slice(lu, {0, 0, 0}, {n, k, cols}));
  return {l, u};
}

// linalg_lu(A, *, pivot) -> (P, L, U)
V linalg_lu_rule(OpContext& c) {
  if (any_empty_input(c, {0})) return zeros_for_all(c);
  Lu f = factor(c.b, c.tensor(0), c.flag(1));
  auto [l, u] = unpack(c.b, f.lu);
  Value p = empty(c, 0) ? zeros(c.b, c.out(0)) : reshape_to(c.b, permutation_matrix(c.b, f.perm, c.out(0).dtype), c.out(0));
  return {p, reshape_to(c.b, l, c.out(1)), reshape_to(c.b, u, c.out(2))};
}

// lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots) -> (P, L, U)
V lu_unpack_rule(OpContext& c) {
  if (any_empty_input(c, {0})) return zeros_for_all(c);
  Value lu = flatten_batch(c.b, c.tensor(0));
  V out = zeros_for_all(c);
  if (!empty(c, 0) && c.flag(3)) {
    int64_t m = lu.type.dims[1];
    Value piv = c.tensor(1);
    int64_t k = piv.type.dims.back();
    Value perm = pivots_to_perm(c.b, c.b.reshape(c.b.convert(piv, ElementType::kS32), {lu.type.dims[0], k}), m);
    out[0] = reshape_to(c.b, permutation_matrix(c.b, perm, c.out(0).dtype), c.out(0));
  }
  if (!empty(c, 1) && c.flag(2)) {
    auto [l, u] = unpack(c.b, lu);
    out[1] = reshape_to(c.b, l, c.out(1));
    out[2] = reshape_to(c.b, u, c.out(2));
  }
  return out;
}

// Solves with A's factors `lu`/`perm` (flattened, batch `n`), broadcast to the batch of rhs ([N, m, k] flattened).
// left: op(A) X = B; right: X op(A) = B, i.e. op(A)^H X^H = B^H. op(A) = A^H when `adj`.
Value solve_with(HloBuilder& b, const Value& lu, const Value& perm, const Value& rhs, bool left, bool adj) {
  if (left) return lu_solve(b, lu, perm, rhs, adj);
  return adjoint(b, lu_solve(b, lu, perm, adjoint(b, rhs), !adj));
}

// Broadcasts a matrix [..., m, n] and its pivots/perm [..., k] to the batch `batch`, flattened.
Value batch_flat(HloBuilder& b, const Value& x, const Dims& batch) {
  return flatten_batch(b, broadcast_batch(b, x, batch));
}

// linalg_lu_solve(LU, pivots, B, *, left, adjoint)
V lu_solve_rule(OpContext& c) {
  if (empty(c, 0)) return zeros_for_all(c);
  TensorType o = c.out(0);
  Dims batch = batch_of(o.dims);
  Value lu = batch_flat(c.b, c.tensor(0), batch);
  Value piv = c.b.convert(c.tensor(1), ElementType::kS32);
  Dims pd = batch;
  pd.push_back(piv.type.dims.back());
  int64_t n = lu.type.dims[0];
  piv = c.b.reshape(c.b.broadcast_to(piv, pd), {n, pd.back()});
  Value perm = pivots_to_perm(c.b, piv, lu.type.dims[1]);
  Value rhs = batch_flat(c.b, c.b.convert(c.tensor(2), o.dtype), batch);
  return {reshape_to(c.b, solve_with(c.b, c.b.convert(lu, o.dtype), perm, rhs, c.flag(3), c.flag(4)), o)};
}

// _linalg_solve_ex(A, B, *, left, check_errors) -> (result, LU, pivots, info)
V solve_ex_rule(OpContext& c) {
  Value a = c.tensor(0), rhs = c.tensor(1);
  bool left = c.flag(2);
  const Dims& ad = a.type.dims;
  Dims a_batch = batch_of(ad);
  bool vector = rhs.type.rank() == 1 || (rhs.type.rank() == a.type.rank() - 1 &&
                                         Dims(ad.begin(), ad.end() - 1) == rhs.type.dims);
  if (any_empty_input(c, {0, 1})) return zeros_for_all(c);
  if (vector) {
    Dims d = rhs.type.dims;
    d.insert(left ? d.end() : d.end() - 1, 1);
    rhs = c.b.reshape(rhs, d);
  }
  // LU has PyTorch's (meta) batch shape; the solve runs over the batch of A and B broadcast together.
  TensorType lu_type = c.out(1);
  Value a_b = c.b.broadcast_to(a, lu_type.dims);
  Lu f = factor(c.b, a_b);  // PyTorch's solve factors A itself (its det and slogdet factor A^T)
  if (c.flag(3)) check_info(c, f.info, "torch.linalg.solve_ex", ad.size() == 2);
  Dims batch = broadcast_dims(batch_of(lu_type.dims), batch_of(rhs.type.dims));
  Dims lu_batch = batch_of(lu_type.dims);
  int64_t m = lu_type.dims.back();
  Value lu = batch_flat(c.b, unflatten(c.b, f.lu, lu_type.dims), batch);
  Dims perm_dims = lu_batch;
  perm_dims.push_back(m);
  Dims perm_to = batch;
  perm_to.push_back(m);
  Value perm = c.b.broadcast_to(unflatten(c.b, f.perm, perm_dims), perm_to);
  perm = c.b.reshape(perm, {lu.type.dims[0], m});
  Value x = solve_with(c.b, lu, perm, batch_flat(c.b, rhs, batch), left, false);
  return {reshape_to(c.b, x, c.out(0)), reshape_to(c.b, f.lu, c.out(1)), reshape_to(c.b, f.pivots, c.out(2)),
          reshape_to(c.b, f.info, c.out(3))};
}

// linalg_inv_ex(A, *, check_errors) -> (inverse, info)
V inv_ex_rule(OpContext& c) {
  if (any_empty_input(c, {0})) return zeros_for_all(c);
  Value a = flatten_batch(c.b, c.tensor(0));
  Lu f = lu_factor(c.b, a);
  if (c.flag(1)) check_info(c, f.info, "linalg.inv_ex", c.arg(0).toTensor().dim() == 2);
  Value x = lu_solve(c.b, f.lu, f.perm, eye(c.b, a.type.dtype, a.type.dims), false);
  return {reshape_to(c.b, x, c.out(0)), reshape_to(c.b, f.info, c.out(1))};
}

// (-1)^(number of row swaps) as [N] of type t.
Value permutation_sign(HloBuilder& b, const Value& pivots, ElementType t) {
  int64_t n = pivots.type.dims[0], k = pivots.type.dims[1];
  Value pos = b.binary("stablehlo.add", iota(b, {n, k}, 1), b.constant(1, ElementType::kS64, {n, k}));
  Value swapped = b.compare(CompareDirection::kNe, b.convert(pivots, ElementType::kS64), pos);
  Value flips = b.select(swapped, b.constant(-1, t, {n, k}), b.constant(1, t, {n, k}));
  return b.reduce(flips, b.constant(1, t), {1}, "stablehlo.multiply");
}

Lu det_factor(OpContext& c) {
  Value a = c.tensor(0);
  return factor(c.b, factors_transpose(c, 0) ? transpose_last(c.b, a) : a);
}

// _linalg_det(A) -> (det, LU, pivots)
V det_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return zeros_for_all(c);
  if (any_empty_input(c, {0})) return {full(c.b, 1, o), zeros(c.b, c.out(1)), zeros(c.b, c.out(2))};  // det of 0x0
  Lu f = det_factor(c);
  Value d = c.b.reduce(diagonal(c.b, f.lu), c.b.constant(1, o.dtype), {1}, "stablehlo.multiply");
  d = c.b.binary("stablehlo.multiply", d, permutation_sign(c.b, f.pivots, o.dtype));
  return {reshape_to(c.b, d, o), reshape_to(c.b, f.lu, c.out(1)), reshape_to(c.b, f.pivots, c.out(2))};
}

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots)
V slogdet_rule(OpContext& c) {
  TensorType so = c.out(0), lo = c.out(1);
  if (so.numel() == 0) return zeros_for_all(c);
  if (any_empty_input(c, {0})) return {full(c.b, 1, so), zeros(c.b, lo), zeros(c.b, c.out(2)), zeros(c.b, c.out(3))};
  Lu f = det_factor(c);
  Value diag = diagonal(c.b, f.lu);
  TensorType rt{real_type(diag.type.dtype), diag.type.dims};
  Value mag = c.b.op1("stablehlo.abs", {diag}, rt);
  Value logabs = c.b.reduce(c.b.unary("stablehlo.log", mag), c.b.constant(0, rt.dtype), {1}, "stablehlo.add");
  Value unit;
  if (is_complex(diag.type.dtype)) {
    Value zero = c.b.compare(CompareDirection::kEq, mag, c.b.constant(0, rt.dtype, rt.dims));
    Value safe = c.b.select(zero, c.b.constant(1, rt.dtype, rt.dims), mag);
    Value z = c.b.op1("stablehlo.complex", {safe, c.b.constant(0, rt.dtype, rt.dims)}, diag.type);
    unit = c.b.select(zero, c.b.constant(0, diag.type.dtype, rt.dims), c.b.binary("stablehlo.divide", diag, z));
  } else {
    unit = c.b.unary("stablehlo.sign", diag);
  }
  Value sign = c.b.reduce(unit, c.b.constant(1, diag.type.dtype), {1}, "stablehlo.multiply");
  sign = c.b.binary("stablehlo.multiply", sign, permutation_sign(c.b, f.pivots, diag.type.dtype));
  return {reshape_to(c.b, sign, so), reshape_to(c.b, logabs, lo), reshape_to(c.b, f.lu, c.out(2)),
          reshape_to(c.b, f.pivots, c.out(3))};
}

// _linalg_check_errors(info, api_name, *, is_matrix): nothing to return; raises at the next sync.
V check_errors_rule(OpContext& c) {
  check_info(c, c.tensor(0), c.arg(1).toStringRef(), c.flag(2));
  return {};
}

}  // namespace

void add_linalg_decomp_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"linalg_lu_factor_ex", "linalg_lu_factor_ex.out"}, lu_factor_ex_rule});
  rows.push_back({{"linalg_lu", "linalg_lu.out"}, linalg_lu_rule});
  rows.push_back({{"lu_unpack", "lu_unpack.out"}, lu_unpack_rule});
  rows.push_back({{"linalg_lu_solve", "linalg_lu_solve.out"}, lu_solve_rule});
  rows.push_back({{"_linalg_solve_ex", "_linalg_solve_ex.result"}, solve_ex_rule});
  rows.push_back({{"linalg_inv_ex", "linalg_inv_ex.inverse"}, inv_ex_rule});
  rows.push_back({{"_linalg_det", "_linalg_det.result"}, det_rule});
  rows.push_back({{"_linalg_slogdet", "_linalg_slogdet.sign"}, slogdet_rule});
  rows.push_back({{"_linalg_check_errors"}, check_errors_rule});
}

}  // namespace torch_tpu
