// Cholesky (a column-step loop, for LAPACK's info) and triangular solves (stablehlo.triangular_solve) and the
// cross product: linalg_cholesky_ex, cholesky, _cholesky_solve_helper, cholesky_inverse, triangular_solve,
// linalg_solve_triangular, linalg_cross; and Householder QR (linalg_qr).
#include <algorithm>
#include <cmath>

#include "lowering/linalg/matrices.h"

namespace torch_tpu {
namespace {

using namespace linalg;  // NOLINT(build/namespaces): one area's helpers

V zeros_for_all(OpContext& c) {
  V out;
  for (size_t i = 0; i < c.num_outputs(); ++i) out.push_back(zeros(c.b, c.out(i)));
  return out;
}

// Per row of `bad` ([n, k] predicate): the 1-based position of the first true element, 0 if none (LAPACK's info).
Value first_position(HloBuilder& b, const Value& bad) {
  int64_t n = bad.type.dims[0], k = bad.type.dims[1];
  Value pos = b.binary("stablehlo.add", iota(b, {n, k}, 1), b.constant(1, ElementType::kS64, {n, k}));
  Value none = b.constant(static_cast<double>(k + 1), ElementType::kS64, {n, k});
  Value first = b.reduce(b.select(bad, pos, none), s64(b, k + 1), {1}, "stablehlo.minimum");
  Value found = b.compare(CompareDirection::kLe, first, b.constant(static_cast<double>(k), ElementType::kS64, {n}));
  return b.convert(b.select(found, first, b.constant(0, ElementType::kS64, {n})), ElementType::kS32);
}

// Lower (or upper) Cholesky factor of flattened `a` (reading only that triangle) and LAPACK's info: the order of
// the first leading minor that is not positive-definite. One right-looking column step per loop iteration, as potf2:
// XLA's own cholesky turns a whole failing matrix into NaN, which would lose info.
std::pair<Value, Value> cholesky(HloBuilder& b, const Value& a, bool upper) {
  int64_t n = a.type.dims[0], m = a.type.dims[1];
  ElementType t = a.type.dtype, rt = real_type(t);
  bool cplx = is_complex(t);
  Value low = upper ? adjoint(b, a) : a;  // U^H U = A reads A's upper triangle: the lower one of A^H
  Value h = b.binary("stablehlo.add", tril(b, low), adjoint(b, tril(b, low, -1)));
  Dims full{n, m, m};
  V out = fori_loop(b, m, {h, b.constant(0, t, full), b.constant(0, ElementType::kS32, {n})},
                    [&](HloBuilder& r, const Value& j, const V& s) -> V {
    Value A = s[0], L = s[1], info = s[2];
    Value zero = s64(r, 0);
    Value d = r.reshape(dynamic_slice(r, A, {zero, j, j}, {n, 1, 1}), {n});
    if (cplx) d = r.op1("stablehlo.real", {d}, {rt, {n}});
    Value bad = r.unary("stablehlo.not", r.compare(CompareDirection::kGt, d, r.constant(0, rt, {n})));
    Value first = r.binary("stablehlo.and", bad, r.compare(CompareDirection::kEq, info, r.constant(0, ElementType::kS32, {n})));
    Value j1 = r.convert(r.binary("stablehlo.add", r.broadcast_to(j, {n}), r.constant(1, ElementType::kS64, {n})),
                         ElementType::kS32);
    info = r.select(first, j1, info);
    Value ljj = r.unary("stablehlo.sqrt", d);
    Value ljj_t = cplx ? r.op1("stablehlo.complex", {ljj, r.constant(0, rt, {n})}, {t, {n}}) : ljj;
    Value col = r.reshape(dynamic_slice(r, A, {zero, zero, j}, {n, m, 1}), {n, m});
    Value rows = iota(r, {n, m}, 1);
    Value jb = r.broadcast_to(j, {n, m});
    Value l = r.select(r.compare(CompareDirection::kGt, rows, jb),
                       r.binary("stablehlo.divide", col, r.broadcast_in_dim(ljj_t, {n, m}, {0})), r.constant(0, t, {n, m}));
    Value lcol = r.select(r.compare(CompareDirection::kEq, rows, jb), r.broadcast_in_dim(ljj_t, {n, m}, {0}), l);
    Value cols3 = iota(r, full, 2);
    L = r.select(r.compare(CompareDirection::kEq, cols3, r.broadcast_to(j, full)), r.broadcast_in_dim(lcol, full, {0, 1}), L);
    Value update = r.binary("stablehlo.multiply", r.broadcast_in_dim(l, full, {0, 1}),
                            r.broadcast_in_dim(conj(r, l), full, {0, 2}));
    A = r.binary("stablehlo.subtract", A, update);  // l is zero outside the trailing block
    return {A, L, info};
  });
  Value l = out[1];
  return {upper ? adjoint(b, l) : l, out[2]};
}

// linalg_cholesky_ex(A, *, upper, check_errors) -> (L, info)
V cholesky_ex_rule(OpContext& c) {
  if (c.out(0).numel() == 0) return zeros_for_all(c);
  auto [l, info] = cholesky(c.b, flatten_batch(c.b, c.tensor(0)), c.flag(1));
  if (c.flag(2)) check_info(c, info, "linalg.cholesky_ex", c.arg(0).toTensor().dim() == 2);
  return {c.b.reshape(l, c.out(0).dims), c.b.reshape(info, c.out(1).dims)};
}

// cholesky(A, upper): the deprecated spelling, which raises on failure.
V cholesky_rule(OpContext& c) {
  if (c.out(0).numel() == 0) return zeros_for_all(c);
  auto [l, info] = cholesky(c.b, flatten_batch(c.b, c.tensor(0)), c.flag(1));
  check_info(c, info, "cholesky", c.arg(0).toTensor().dim() == 2);
  return {c.b.reshape(l, c.out(0).dims)};
}

Value batch_flat(HloBuilder& b, const Value& x, const Dims& batch) {
  return flatten_batch(b, broadcast_batch(b, x, batch));
}

// Solves (L L^H) X = B, or (U^H U) X = B when upper, for flattened factors and right-hand sides.
Value cholesky_solve(HloBuilder& b, const Value& l, const Value& rhs, bool upper) {
  Value y = triangular_solve(b, l, rhs, true, !upper, false, upper ? 2 : 0);
  return triangular_solve(b, l, y, true, !upper, false, upper ? 0 : 2);
}

// _cholesky_solve_helper(B, L, upper): its caller (cholesky_solve) has broadcast the batches.
V cholesky_solve_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return zeros_for_all(c);
  Dims batch = batch_of(o.dims);
  Value rhs = batch_flat(c.b, c.b.convert(c.tensor(0), o.dtype), batch);
  Value l = batch_flat(c.b, c.b.convert(c.tensor(1), o.dtype), batch);
  return {c.b.reshape(cholesky_solve(c.b, l, rhs, c.flag(2)), o.dims)};
}

// cholesky_inverse(L, upper): (L L^H)^-1; a zero on L's diagonal raises as the CPU's does.
V cholesky_inverse_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return zeros_for_all(c);
  Value l = flatten_batch(c.b, c.tensor(0));
  Value d = diagonal(c.b, l);
  Value info = first_position(c.b, c.b.compare(CompareDirection::kEq, d, c.b.constant(0, d.type.dtype, d.type.dims)));
  check_info(c, info, "cholesky_inverse", c.arg(0).toTensor().dim() == 2);
  Value x = cholesky_solve(c.b, l, eye(c.b, l.type.dtype, l.type.dims), c.flag(1));
  return {c.b.reshape(x, o.dims)};
}

// triangular_solve(B, A, upper, transpose, unitriangular) -> (solution, cloned_coefficient): op(A) X = B with
// op(A) = A^T (not conjugated) when transpose.
V triangular_solve_rule(OpContext& c) {
  TensorType xo = c.out(0), ao = c.out(1);
  if (xo.numel() == 0 || ao.numel() == 0) {
    return {zeros(c.b, xo), ao.numel() == 0 ? zeros(c.b, ao) : c.b.broadcast_to(c.b.convert(c.tensor(1), ao.dtype), ao.dims)};
  }
  Value a = c.b.broadcast_to(c.b.convert(c.tensor(1), ao.dtype), ao.dims);
  Value rhs = c.b.broadcast_to(c.b.convert(c.tensor(0), xo.dtype), xo.dims);
  Value x = triangular_solve(c.b, flatten_batch(c.b, a), flatten_batch(c.b, rhs), true, !c.flag(2), c.flag(4),
                             c.flag(3) ? 1 : 0);
  return {c.b.reshape(x, xo.dims), a};
}

// linalg_solve_triangular(A, B, *, upper, left, unitriangular)
V solve_triangular_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0 || c.arg(0).toTensor().numel() == 0) return zeros_for_all(c);
  Dims batch = batch_of(o.dims);
  Value a = batch_flat(c.b, c.b.convert(c.tensor(0), o.dtype), batch);
  Value rhs = batch_flat(c.b, c.b.convert(c.tensor(1), o.dtype), batch);
  Value x = triangular_solve(c.b, a, rhs, c.flag(3), !c.flag(2), c.flag(4), 0);
  return {c.b.reshape(x, o.dims)};
}

// linalg_cross(self, other, *, dim): broadcast, then the usual three differences of products.
V cross_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return zeros_for_all(c);
  int64_t d = c.dim(2, o.rank());
  Value x = c.operand(0, o.dtype, o.dims), y = c.operand(1, o.dtype, o.dims);
  auto part = [&](const Value& v, int64_t i) {
    Dims start(o.dims.size(), 0), limit = o.dims;
    start[static_cast<size_t>(d)] = i;
    limit[static_cast<size_t>(d)] = i + 1;
    return c.b.slice(v, start, limit);
  };
  V parts;
  for (int64_t i = 0; i < 3; ++i) {
    int64_t j = (i + 1) % 3, k = (i + 2) % 3;
    parts.push_back(c.b.binary("stablehlo.subtract", c.b.binary("stablehlo.multiply", part(x, j), part(y, k)),
                               c.b.binary("stablehlo.multiply", part(x, k), part(y, j))));
  }
  return {c.b.concatenate(parts, d)};
}

// Householder QR as LAPACK's geqrf + orgqr compute it (dlarfg's reflector: beta = -sign(re alpha) * norm, so R's
// diagonal has LAPACK's signs), one reflector per loop step, applied to A from the left and accumulated into Q.
std::pair<Value, Value> householder_qr(HloBuilder& b, const Value& a) {
  int64_t n = a.type.dims[0], m = a.type.dims[1], cols = a.type.dims[2], k = std::min(m, cols);
  ElementType t = a.type.dtype, rt = real_type(t);
  bool cplx = is_complex(t);
  V out = fori_loop(b, k, {a, eye(b, t, {n, m, m})}, [&](HloBuilder& r, const Value& j, const V& s) -> V {
    Value A = s[0], Q = s[1];
    Value zero = s64(r, 0);
    auto re = [&](const Value& v) { return cplx ? r.op1("stablehlo.real", {v}, {rt, v.type.dims}) : v; };
    auto im = [&](const Value& v) {
      return cplx ? r.op1("stablehlo.imag", {v}, {rt, v.type.dims}) : r.constant(0, rt, v.type.dims);
    };
    auto mk = [&](const Value& x, const Value& y) { return cplx ? r.op1("stablehlo.complex", {x, y}, {t, x.type.dims}) : x; };
    Value col = r.reshape(dynamic_slice(r, A, {zero, zero, j}, {n, m, 1}), {n, m});
    Value rows = iota(r, {n, m}, 1);
    Value jb = r.broadcast_to(j, {n, m});
    Value below = r.compare(CompareDirection::kGt, rows, jb);
    Value x = r.select(below, col, r.constant(0, t, {n, m}));
    Value alpha = r.reshape(dynamic_slice(r, col, {zero, j}, {n, 1}), {n});
    Value sq = cplx ? r.binary("stablehlo.add", r.binary("stablehlo.multiply", re(x), re(x)),
                               r.binary("stablehlo.multiply", im(x), im(x)))
                    : r.binary("stablehlo.multiply", x, x);
    Value xnorm2 = r.reduce(sq, r.constant(0, rt), {1}, "stablehlo.add");
    Value ar = re(alpha), ai = im(alpha);
    Value norm = r.unary("stablehlo.sqrt", r.binary("stablehlo.add", xnorm2,
                                                     r.binary("stablehlo.add", r.binary("stablehlo.multiply", ar, ar),
                                                              r.binary("stablehlo.multiply", ai, ai))));
    Value zr = r.constant(0, rt, {n});
    Value skip = r.binary("stablehlo.and", r.compare(CompareDirection::kEq, xnorm2, zr),
                          r.compare(CompareDirection::kEq, ai, zr));
    Value neg = r.compare(CompareDirection::kGe, ar, zr);  // beta = -sign(alpha_r) * norm (sign(0) = +)
    Value beta = r.select(neg, r.unary("stablehlo.negate", norm), norm);
    Value safe_beta = r.select(skip, r.constant(1, rt, {n}), beta);
    Value tau = mk(r.binary("stablehlo.divide", r.binary("stablehlo.subtract", safe_beta, ar), safe_beta),
                   r.binary("stablehlo.divide", r.unary("stablehlo.negate", ai), safe_beta));
    tau = r.select(skip, r.constant(0, t, {n}), tau);
    Value denom = r.binary("stablehlo.subtract", alpha, mk(safe_beta, zr));
    denom = r.select(skip, r.constant(1, t, {n}), denom);
    Value v = r.binary("stablehlo.divide", x, r.broadcast_in_dim(denom, {n, m}, {0}));
    Value at_j = r.compare(CompareDirection::kEq, rows, jb);
    v = r.select(at_j, r.constant(1, t, {n, m}), v);
    Value above = r.compare(CompareDirection::kLt, rows, jb);
    v = r.select(above, r.constant(0, t, {n, m}), v);
    Value v3 = r.reshape(v, {n, m, 1});
    // A <- H^H A = A - conj(tau) v (v^H A); Q <- Q H = Q - tau (Q v) v^H.
    Value vh = adjoint(r, v3);  // [n, 1, m]
    Value w = matmul(r, vh, A);  // [n, 1, cols]
    Value ct = r.broadcast_in_dim(conj(r, tau), {n, m, cols}, {0});
    A = r.binary("stablehlo.subtract", A, r.binary("stablehlo.multiply", ct, matmul(r, v3, w)));
    Value qv = matmul(r, Q, v3);  // [n, m, 1]
    Value tq = r.broadcast_in_dim(tau, {n, m, m}, {0});
    Q = r.binary("stablehlo.subtract", Q, r.binary("stablehlo.multiply", tq, matmul(r, qv, vh)));
    return {A, Q};
  });
  return {out[1], triu(b, out[0])};
}

// linalg_qr(A, mode) -> (Q, R): reduced (Q m x k, R k x n), complete (m x m, m x n) or r (Q empty).
V qr_rule(OpContext& c) {
  TensorType qo = c.out(0), ro = c.out(1);
  if (ro.numel() == 0 || c.arg(0).toTensor().numel() == 0) {
    V out = zeros_for_all(c);
    // An m x 0 input still has Q = I in complete mode.
    if (qo.numel() != 0) out[0] = c.b.reshape(eye(c.b, qo.dtype, qo.dims), qo.dims);
    return out;
  }
  Value a = flatten_batch(c.b, c.tensor(0));
  auto [q, rr] = householder_qr(c.b, a);
  int64_t n = a.type.dims[0], m = a.type.dims[1];
  Value qv = qo.numel() == 0 ? zeros(c.b, qo) : c.b.reshape(c.b.slice(q, {0, 0, 0}, {n, m, qo.dims.back()}), qo.dims);
  Value rv = c.b.reshape(c.b.slice(rr, {0, 0, 0}, {n, ro.dims[ro.dims.size() - 2], ro.dims.back()}), ro.dims);
  return {qv, rv};
}

// linalg_matrix_exp(A): scaling and squaring around a degree-18 Taylor polynomial (Horner). Each matrix is scaled by
// 2^-s so that its 1-norm is at most 1/2 (s computed on the device), then squared back s times in a loop that runs
// for the batch's largest s and leaves the others as they are. float32 and narrower compute in float64 (complex64 in
// complex128) and round once: the squarings multiply the polynomial's rounding error by up to 2^s, which in float32
// is hundreds of ulps on inputs of norm ~10 (PyTorch's CPU answer is off by tens of ulps, its bf16 one is NaN).
V matrix_exp_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return zeros_for_all(c);
  const ElementType wide = is_complex(o.dtype) ? ElementType::kC128 : ElementType::kF64;
  Value a = flatten_batch(c.b, c.b.convert(c.tensor(0), wide));
  HloBuilder& b = c.b;
  int64_t n = a.type.dims[0], m = a.type.dims[1];
  ElementType t = a.type.dtype, rt = real_type(t);
  Dims full{n, m, m};
  Value mag = is_complex(t) ? b.op1("stablehlo.abs", {a}, {rt, full}) : b.unary("stablehlo.abs", a);
  Value norm = b.reduce(b.reduce(mag, b.constant(0, rt), {1}, "stablehlo.add"), b.constant(0, rt), {1}, "stablehlo.maximum");
  // s = max(0, ceil(log2(norm / 0.5))), capped so a non-finite norm still ends the loop.
  Value lg = b.unary("stablehlo.ceil", b.binary("stablehlo.divide",
                                                b.unary("stablehlo.log", b.binary("stablehlo.multiply", norm, b.constant(2, rt, {n}))),
                                                b.constant(std::log(2.0), rt, {n})));
  lg = b.binary("stablehlo.maximum", b.constant(0, rt, {n}), b.binary("stablehlo.minimum", lg, b.constant(64, rt, {n})));
  lg = b.select(b.compare(CompareDirection::kEq, lg, lg), lg, b.constant(0, rt, {n}));  // NaN norm: no scaling
  Value steps = b.convert(lg, ElementType::kS64);
  Value scale = b.unary("stablehlo.exponential", b.binary("stablehlo.multiply", lg, b.constant(-std::log(2.0), rt, {n})));
  Value scale_t = is_complex(t) ? b.op1("stablehlo.complex", {scale, b.constant(0, rt, {n})}, {t, {n}}) : scale;
  Value x = b.binary("stablehlo.multiply", a, b.broadcast_in_dim(scale_t, full, {0}));
  Value id = eye(b, t, full);
  Value p = id;
  for (int k = 18; k >= 1; --k) {  // p = I + x p / k
    p = b.binary("stablehlo.add", id, b.binary("stablehlo.multiply", matmul(b, x, p), b.constant(1.0 / k, t, full)));
  }
  Value most = b.reduce(steps, s64(b, 0), {0}, "stablehlo.maximum");
  V init{s64(b, 0), p, steps, most};
  std::vector<TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  std::string cond = b.region(types, [&](HloBuilder& r, const V& s) { return V{r.compare(CompareDirection::kLt, s[0], s[3])}; });
  std::string body = b.region(types, [&](HloBuilder& r, const V& s) {
    Value go = r.compare(CompareDirection::kLt, r.broadcast_to(s[0], {n}), s[2]);
    Value sq = matmul(r, s[1], s[1]);
    Value e = r.select(r.broadcast_in_dim(go, full, {0}), sq, s[1]);
    return V{r.binary("stablehlo.add", s[0], s64(r, 1)), e, s[2], s[3]};
  });
  V res = b.op("stablehlo.while", init, types, "", {cond, body});
  return {b.reshape(b.convert(res[1], o.dtype), o.dims)};
}

// linalg_householder_product(A, tau): the first n columns of H_0 ... H_{k-1}, H_i = I - tau_i v_i v_i^H with v_i the
// unit-headed column i of A below the diagonal (LAPACK's orgqr/ungqr).
V householder_product_rule(OpContext& c) {
  TensorType o = c.out(0);
  if (o.numel() == 0) return zeros_for_all(c);
  HloBuilder& b = c.b;
  Value a = flatten_batch(b, c.b.convert(c.tensor(0), o.dtype));
  int64_t n = a.type.dims[0], m = a.type.dims[1], cols = a.type.dims[2];
  Value tau = c.b.convert(c.tensor(1), o.dtype);
  int64_t k = tau.type.dims.back();
  tau = b.reshape(tau, {n, k});
  ElementType t = o.dtype;
  if (k == 0) return {b.reshape(b.slice(eye(b, t, {n, m, m}), {0, 0, 0}, {n, m, cols}), o.dims)};
  V out = fori_loop(b, k, {eye(b, t, {n, m, m}), a, tau}, [&](HloBuilder& r, const Value& j, const V& s) -> V {
    Value zero = s64(r, 0);
    Value col = r.reshape(dynamic_slice(r, s[1], {zero, zero, j}, {n, m, 1}), {n, m});
    Value rows = iota(r, {n, m}, 1);
    Value jb = r.broadcast_to(j, {n, m});
    Value v = r.select(r.compare(CompareDirection::kGt, rows, jb), col, r.constant(0, t, {n, m}));
    v = r.select(r.compare(CompareDirection::kEq, rows, jb), r.constant(1, t, {n, m}), v);
    Value v3 = r.reshape(v, {n, m, 1});
    Value tj = r.reshape(dynamic_slice(r, s[2], {zero, j}, {n, 1}), {n});
    Value qv = matmul(r, s[0], v3);
    Value q = r.binary("stablehlo.subtract", s[0], r.binary("stablehlo.multiply", r.broadcast_in_dim(tj, {n, m, m}, {0}),
                                                             matmul(r, qv, adjoint(r, v3))));
    return {q, s[1], s[2]};
  });
  return {b.reshape(b.slice(out[0], {0, 0, 0}, {n, m, cols}), o.dims)};
}

}  // namespace

std::pair<Value, Value> linalg::householder_qr(HloBuilder& b, const Value& a) { return torch_tpu::householder_qr(b, a); }

void add_linalg_solver_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"linalg_cholesky_ex", "linalg_cholesky_ex.L"}, cholesky_ex_rule});
  rows.push_back({{"cholesky", "cholesky.out"}, cholesky_rule});
  rows.push_back({{"_cholesky_solve_helper", "_cholesky_solve_helper.out"}, cholesky_solve_rule});
  rows.push_back({{"cholesky_inverse", "cholesky_inverse.out"}, cholesky_inverse_rule});
  rows.push_back({{"triangular_solve", "triangular_solve.X"}, triangular_solve_rule});
  rows.push_back({{"linalg_solve_triangular", "linalg_solve_triangular.out"}, solve_triangular_rule});
  rows.push_back({{"linalg_cross", "linalg_cross.out"}, cross_rule});
  rows.push_back({{"linalg_qr", "linalg_qr.out"}, qr_rule});
  rows.push_back({{"linalg_matrix_exp"}, matrix_exp_rule});
  rows.push_back({{"linalg_householder_product", "linalg_householder_product.out"}, householder_product_rule});
}

}  // namespace torch_tpu
