// Jacobi methods on the device: _linalg_eigh (cyclic two-sided Jacobi on the Hermitian matrix) and _linalg_svd
// (one-sided Jacobi, Hestenes, on the columns of A, or of A^H when A is wide). XLA-CPU has no LAPACK calls.
//
// One round rotates m/2 disjoint index pairs at once (the circle method of a round-robin tournament: m - 1 rounds
// make a sweep in which every pair meets once); sweeps run in a while loop until the off-diagonal part is negligible
// or kMaxSweeps. A round is one rotation J built from the pairs' entries of a Hermitian "pair matrix" H (A itself for
// eigh, G^H G for svd), applied by gathering each index's partner row/column (O(n^2) a round): A <- J^H A J,
// G <- G J, V <- V J. float32 computes in float64 (complex64 in
// complex128) and rounds once; matrices are scaled by their largest magnitude first, so squares cannot overflow.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lowering/linalg/matrices.h"

namespace torch_tpu {
namespace {

using namespace linalg;  // NOLINT(build/namespaces): one area's helpers

constexpr int64_t kMaxSweeps = 30;
constexpr double kEps = std::numeric_limits<double>::epsilon();

V zeros_for_all(OpContext& c) {
  V out;
  for (size_t i = 0; i < c.num_outputs(); ++i) out.push_back(zeros(c.b, c.out(i)));
  return out;
}

ElementType compute_type(ElementType t) { return is_complex(t) ? ElementType::kC128 : ElementType::kF64; }

Value real_part(HloBuilder& b, const Value& x) {
  if (!is_complex(x.type.dtype)) return x;
  return b.op1("stablehlo.real", {x}, {real_type(x.type.dtype), x.type.dims});
}

Value magnitude(HloBuilder& b, const Value& x) {
  return b.op1("stablehlo.abs", {x}, {real_type(x.type.dtype), x.type.dims});
}

// A real value as type t (zero imaginary part for complex t).
Value as_type(HloBuilder& b, const Value& x, ElementType t) {
  if (!is_complex(t)) return x;
  return b.op1("stablehlo.complex", {x, b.constant(0, x.type.dtype, x.type.dims)}, {t, x.type.dims});
}

Value squared_magnitude(HloBuilder& b, const Value& x) {
  if (!is_complex(x.type.dtype)) return b.binary("stablehlo.multiply", x, x);
  TensorType rt{real_type(x.type.dtype), x.type.dims};
  Value re = b.op1("stablehlo.real", {x}, rt), im = b.op1("stablehlo.imag", {x}, rt);
  return b.binary("stablehlo.add", b.binary("stablehlo.multiply", re, re), b.binary("stablehlo.multiply", im, im));
}

Value any_of(HloBuilder& b, const Value& pred, const Dims& dims) {
  Value s = b.convert(pred, ElementType::kS32);
  Value m = b.reduce(s, b.constant(0, ElementType::kS32), dims, "stablehlo.maximum");
  return b.compare(CompareDirection::kNe, m, b.constant(0, ElementType::kS32, m.type.dims));
}

Value is_nan(HloBuilder& b, const Value& x) {
  if (!is_complex(x.type.dtype)) return b.compare(CompareDirection::kNe, x, x);
  TensorType rt{real_type(x.type.dtype), x.type.dims};
  Value re = b.op1("stablehlo.real", {x}, rt), im = b.op1("stablehlo.imag", {x}, rt);
  return b.binary("stablehlo.or", b.compare(CompareDirection::kNe, re, re), b.compare(CompareDirection::kNe, im, im));
}

Value not_finite(HloBuilder& b, const Value& x) {
  TensorType pt{ElementType::kPred, x.type.dims};
  if (!is_complex(x.type.dtype)) return b.unary("stablehlo.not", b.op1("stablehlo.is_finite", {x}, pt));
  TensorType rt{real_type(x.type.dtype), x.type.dims};
  Value re = b.op1("stablehlo.is_finite", {b.op1("stablehlo.real", {x}, rt)}, pt);
  Value im = b.op1("stablehlo.is_finite", {b.op1("stablehlo.imag", {x}, rt)}, pt);
  return b.unary("stablehlo.not", b.binary("stablehlo.and", re, im));
}

// Per matrix of x [N, r, k]: its largest magnitude, 1 where that is 0 or not finite ([N], real).
Value matrix_scale(HloBuilder& b, const Value& x) {
  ElementType rt = real_type(x.type.dtype);
  int64_t n = x.type.dims[0];
  Value big = b.reduce(magnitude(b, x), b.constant(0, rt), {1, 2}, "stablehlo.maximum");
  Value ok = b.binary("stablehlo.and", b.compare(CompareDirection::kGt, big, b.constant(0, rt, {n})),
                      b.op1("stablehlo.is_finite", {big}, {ElementType::kPred, {n}}));
  return b.select(ok, big, b.constant(1, rt, {n}));
}

Value divide_matrices(HloBuilder& b, const Value& x, const Value& scale) {
  return b.binary("stablehlo.divide", x, b.broadcast_in_dim(as_type(b, scale, x.type.dtype), x.type.dims, {0}));
}

// x [N, r, k] with `extra` zero columns (and rows, if `square`) appended.
Value pad_zeros(HloBuilder& b, const Value& x, int64_t extra, bool square) {
  if (extra == 0) return x;
  const Dims& d = x.type.dims;
  Value y = b.concatenate({x, b.constant(0, x.type.dtype, {d[0], d[1], extra})}, 2);
  if (!square) return y;
  return b.concatenate({y, b.constant(0, x.type.dtype, {d[0], extra, d[2] + extra})}, 1);
}

// The partner of each of m (even) indices in round `round` (0-d s64) of the circle method: index m - 1 stays put,
// the others turn around it, i pairs with (2 round - i) mod (m - 1) and `round` pairs with m - 1.
Value partners(HloBuilder& b, const Value& round, int64_t m) {
  int64_t last = m - 1;
  auto k = [&](int64_t v) { return b.constant(static_cast<double>(v), ElementType::kS64, {m}); };
  Value i = iota(b, {m}, 0);
  Value r = b.broadcast_to(round, {m});
  Value circ = b.binary("stablehlo.subtract", b.binary("stablehlo.add", r, r), i);
  circ = b.binary("stablehlo.remainder", b.binary("stablehlo.add", circ, k(2 * last)), k(last));
  Value p = b.select(b.compare(CompareDirection::kEq, i, r), k(last), circ);
  return b.select(b.compare(CompareDirection::kEq, i, k(last)), r, p);
}

// x[..., partner(i), ...] along `dim` (1 or 2) of x [N, r, k]: a gather with the round's partners [k] (s64).
Value by_partner(HloBuilder& b, const Value& x, const Value& partner, int64_t dim) {
  const Dims& d = x.type.dims;
  int64_t k = partner.type.dims[0];
  Dims sizes = d;
  sizes[static_cast<size_t>(dim)] = 1;
  std::string attrs = "dimension_numbers = #stablehlo.gather<offset_dims = [0, 1], collapsed_slice_dims = [" + std::to_string(dim) + "], start_index_map = [" +
                      std::to_string(dim) + "], index_vector_dim = 1>, slice_sizes = " + i64_array(sizes) +
                      ", indices_are_sorted = false";
  Dims out = d;
  out[static_cast<size_t>(dim)] = k;
  Value g = b.op1("stablehlo.gather", {x, b.reshape(partner, {k, 1})}, {x.type.dtype, {d[0], dim == 1 ? d[2] : d[1], k}},
                  attrs);
  // The gathered (batch) dimension comes last: move it back to `dim`.
  return dim == 1 ? b.transpose(g, {0, 2, 1}) : g;
}

// One round's rotation J, kept as two vectors: J_ii = c_i and J_{i, partner(i)} = w_i (every other entry is 0).
struct Rotation {
  Value partner;  // [m] s64
  Value c;        // [N, m] of the matrix type
  Value w;        // [N, m]
};

// The rotation of one round from the pair matrix's diagonal d [N, m] (real) and off-diagonal entries off_i =
// h[i, partner(i)] [N, m]: for each pair p < q, J_pp = J_qq = c, J_pq = s u, J_qp = -s conj(u) with u = h_pq / |h_pq|,
// so that (J^H h J)_pq = 0 (Golub and Van Loan's symmetric Schur step on |h_pq|, the smaller of the two angles).
// c and s u are computed on p's side and copied to q, so both halves of J belong to one exact rotation. A pair stays
// (J = I there) when h_pq = 0 or, with skip_rel > 0, when |h_pq| <= skip_rel sqrt(|h_pp h_qq|).
Rotation rotation(HloBuilder& b, const Value& d, const Value& off, const Value& partner, double skip_rel) {
  int64_t n = d.type.dims[0], m = d.type.dims[1];
  ElementType t = off.type.dtype, rt = real_type(t);
  Dims vd{n, m};
  Value is_p = b.broadcast_in_dim(b.compare(CompareDirection::kLt, iota(b, {m}, 0), partner), vd, {1});
  auto at_partner = [&](const Value& x) { return b.reshape(by_partner(b, b.reshape(x, {n, 1, m}), partner, 2), vd); };
  auto rc = [&](double v) { return b.constant(v, rt, vd); };
  Value dq = at_partner(d);
  Value mag = magnitude(b, off);
  Value rotate = b.compare(CompareDirection::kGt, mag, rc(0));
  if (skip_rel > 0) {
    Value bound = b.binary("stablehlo.multiply", rc(skip_rel),
                           b.unary("stablehlo.sqrt", b.unary("stablehlo.abs", b.binary("stablehlo.multiply", d, dq))));
    rotate = b.binary("stablehlo.and", rotate, b.compare(CompareDirection::kGt, mag, bound));
  }
  Value safe = b.select(rotate, mag, rc(1));
  Value tau = b.binary("stablehlo.divide", b.binary("stablehlo.subtract", dq, d), b.binary("stablehlo.multiply", rc(2), safe));
  Value root = b.unary("stablehlo.sqrt", b.binary("stablehlo.add", rc(1), b.binary("stablehlo.multiply", tau, tau)));
  Value tt = b.binary("stablehlo.divide", rc(1), b.binary("stablehlo.add", b.unary("stablehlo.abs", tau), root));
  tt = b.select(b.compare(CompareDirection::kLt, tau, rc(0)), b.unary("stablehlo.negate", tt), tt);
  Value cs = b.unary("stablehlo.rsqrt", b.binary("stablehlo.add", rc(1), b.binary("stablehlo.multiply", tt, tt)));
  Value sn = b.binary("stablehlo.multiply", tt, cs);
  cs = b.select(rotate, cs, rc(1));
  sn = b.select(rotate, sn, rc(0));
  Value u;
  if (is_complex(t)) {
    u = b.binary("stablehlo.divide", off, as_type(b, safe, t));
  } else {
    u = b.select(b.compare(CompareDirection::kLt, off, rc(0)), rc(-1), rc(1));
  }
  Value su = b.binary("stablehlo.multiply", as_type(b, sn, t), u);
  cs = b.select(is_p, cs, at_partner(cs));
  su = b.select(is_p, su, b.unary("stablehlo.negate", conj(b, at_partner(su))));
  return {partner, as_type(b, cs, t), su};
}

// x J for x [N, r, m]: column j is c_j x[:, j] + J_{partner(j), j} x[:, partner(j)].
Value times_rotation(HloBuilder& b, const Value& x, const Rotation& j) {
  int64_t n = x.type.dims[0], m = x.type.dims[2];
  Value w_in = b.reshape(by_partner(b, b.reshape(j.w, {n, 1, m}), j.partner, 2), {n, m});  // J_{partner(j), j}
  const Dims& d = x.type.dims;
  Value own = b.binary("stablehlo.multiply", x, b.broadcast_in_dim(j.c, d, {0, 2}));
  Value other = b.binary("stablehlo.multiply", by_partner(b, x, j.partner, 2), b.broadcast_in_dim(w_in, d, {0, 2}));
  return b.binary("stablehlo.add", own, other);
}

// J^H x for x [N, m, k]: (x^H J)^H.
Value rotation_adjoint_times(HloBuilder& b, const Value& x, const Rotation& j) {
  return adjoint(b, times_rotation(b, adjoint(b, x), j));
}

// Per matrix ([N] predicate) of a loop state: not yet converged.
using Unconverged = std::function<Value(HloBuilder&, const V& state)>;
// One round (0-d s64 `round`) applied to the loop state.
using Round = std::function<V(HloBuilder&, const Value& round, const V& state)>;

// Sweeps of m - 1 rounds while `unconverged` holds, at most kMaxSweeps. A NaN makes every test false: the loop ends.
V sweeps(HloBuilder& b, int64_t m, const V& init, const Unconverged& unconverged, const Round& round) {
  V all{s64(b, 0)};
  all.insert(all.end(), init.begin(), init.end());
  std::vector<TensorType> types;
  for (const Value& v : all) types.push_back(v.type);
  std::string cond = b.region(types, [&](HloBuilder& r, const V& a) {
    Value more = r.compare(CompareDirection::kLt, a[0], s64(r, kMaxSweeps));
    return V{r.binary("stablehlo.and", more, any_of(r, unconverged(r, V(a.begin() + 1, a.end())), {0}))};
  });
  std::string body = b.region(types, [&](HloBuilder& r, const V& a) {
    V out = fori_loop(r, m - 1, V(a.begin() + 1, a.end()),
                      [&](HloBuilder& q, const Value& k, const V& s) { return round(q, k, s); });
    out.insert(out.begin(), r.binary("stablehlo.add", a[0], s64(r, 1)));
    return out;
  });
  V res = b.op("stablehlo.while", all, types, "", {cond, body});
  return V(res.begin() + 1, res.end());
}

// Sorts each row of x [N, k] (real) with its positions: (values, positions s64).
std::pair<Value, Value> sort_rows(HloBuilder& b, const Value& x, bool descending) {
  Value pos = iota(b, x.type.dims, 1);
  TensorType s{x.type.dtype, {}}, si{ElementType::kS64, {}};
  std::string cmp = b.region({s, s, si, si}, [&](HloBuilder& r, const V& a) {
    return V{r.compare(descending ? CompareDirection::kGt : CompareDirection::kLt, a[0], a[1])};
  });
  V res = b.op("stablehlo.sort", {x, pos}, {x.type, pos.type}, "dimension = 1 : i64, is_stable = true", {cmp});
  return {res[0], res[1]};
}

// The columns of x [N, r, k] in the order idx [N, k].
Value take_columns(HloBuilder& b, const Value& x, const Value& idx) {
  return transpose_last(b, take_rows(b, transpose_last(b, x), idx));
}

Value to_out(HloBuilder& b, const Value& v, const TensorType& t) { return b.reshape(b.convert(v, t.dtype), t.dims); }

// "(Batch element i): " as PyTorch's _linalg_check_errors writes it for batched inputs.
std::string batch_prefix(const std::string& api, bool is_matrix) {
  return api + ": " + (is_matrix ? std::string() : "(Batch element {value}): ");
}

// The first batch element (0-d s64) for which bad [N] holds.
Value first_bad(HloBuilder& b, const Value& bad) {
  int64_t n = bad.type.dims[0];
  return b.reduce(b.select(bad, iota(b, {n}, 0), b.constant(static_cast<double>(n), ElementType::kS64, {n})),
                  s64(b, n), {0}, "stablehlo.minimum");
}

// Still unconverged after kMaxSweeps (not seen with finite inputs): raise rather than return a rough answer. The
// error code (LAPACK's count of unconverged elements) is not known here: it reads k.
void check_converged(OpContext& c, const Value& unconverged, const std::string& api, const std::string& what, int64_t k) {
  c.check(unconverged,
          batch_prefix(api, c.inspect(0).toTensor().dim() == 2) +
              "The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated " +
              what + " (error code: " + std::to_string(k) + ").",
          false, first_bad(c.b, unconverged));
}

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors): ascending eigenvalues, eigenvectors as columns
// (an empty tensor when not compute_v). Only the UPLO triangle is read, the diagonal's imaginary part is ignored.
V eigh_rule(OpContext& c) {
  TensorType wo = c.out(0), vo = c.out(1);
  if (wo.numel() == 0) return zeros_for_all(c);
  HloBuilder& b = c.b;
  const std::string& uplo = c.arg(1).toStringRef();
  bool upper = uplo == "U" || uplo == "u";
  bool want_v = c.flag(2) && vo.numel() > 0;
  ElementType t = compute_type(vo.numel() > 0 ? vo.dtype : element_type_of(c.inspect(0).toTensor().scalar_type()));
  Value a = flatten_batch(b, b.convert(c.tensor(0), t));
  int64_t n = a.type.dims[0], k = a.type.dims[1], m = k + k % 2;
  Value low = upper ? adjoint(b, a) : a;
  Value strict = tril(b, low, -1);
  Value on_diag = index_mask(b, low.type.dims, 1, 2, CompareDirection::kEq);
  Value h = b.binary("stablehlo.add", strict, adjoint(b, strict));
  h = b.binary("stablehlo.add", h, b.select(on_diag, as_type(b, real_part(b, low), t), b.constant(0, t, low.type.dims)));
  // LAPACK (syevd/heevd) fails on a NaN for n >= 3 with info n - 1 (n - 2 without vectors); infinities give NaNs.
  Value nan_in = any_of(b, is_nan(b, h), {1, 2});
  if (k >= 3) {
    c.check(nan_in,
            batch_prefix("linalg.eigh", c.inspect(0).toTensor().dim() == 2) +
                "The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
                "repeated eigenvalues (error code: " +
                std::to_string(c.flag(2) ? k - 1 : k - 2) + ").",
            false, first_bad(b, nan_in));
  }
  Value broken = b.binary("stablehlo.or", nan_in, any_of(b, not_finite(b, h), {1, 2}));
  Value scale = matrix_scale(b, h);
  h = pad_zeros(b, divide_matrices(b, h, scale), m - k, true);
  ElementType rt = real_type(t);
  double tol = kEps * static_cast<double>(m);
  Unconverged unconverged = [&](HloBuilder& r, const V& s) {
    Value sq = squared_magnitude(r, s[0]);
    Dims full{n, m, m};
    Value off = r.select(index_mask(r, full, 1, 2, CompareDirection::kEq), r.constant(0, rt, full), sq);
    Value off_sum = r.reduce(off, r.constant(0, rt), {1, 2}, "stablehlo.add");
    Value total = r.reduce(sq, r.constant(0, rt), {1, 2}, "stablehlo.add");
    Value bound = r.binary("stablehlo.multiply", total, r.constant(tol * tol, rt, {n}));
    return r.compare(CompareDirection::kGt, off_sum, bound);
  };
  Round step = [&](HloBuilder& r, const Value& round, const V& s) {
    Value partner = partners(r, round, m);
    Value off = r.reshape(by_partner(r, s[0], partner, 2), {n, m, m});  // [.., i, j] = a[i, partner(j)]
    Value pairs = r.broadcast_in_dim(index_mask(r, {m, m}, 0, 1, CompareDirection::kEq), {n, m, m}, {1, 2});
    off = r.reduce(r.select(pairs, off, r.constant(0, t, {n, m, m})), r.constant(0, t), {2}, "stablehlo.add");
    Rotation j = rotation(r, real_part(r, diagonal(r, s[0])), off, partner, 0);
    V out{rotation_adjoint_times(r, times_rotation(r, s[0], j), j)};
    if (want_v) out.push_back(times_rotation(r, s[1], j));
    return out;
  };
  V init{h};
  if (want_v) init.push_back(eye(b, t, {n, m, m}));
  V res = sweeps(b, m, init, unconverged, step);
  check_converged(c, unconverged(b, res), "linalg.eigh", "eigenvalues", k);
  Value w = b.slice(real_part(b, diagonal(b, res[0])), {0, 0}, {n, k});
  w = b.binary("stablehlo.multiply", w, b.broadcast_in_dim(scale, {n, k}, {0}));
  w = b.select(b.broadcast_in_dim(broken, {n, k}, {0}), b.constant(NAN, rt, {n, k}), w);
  auto [sorted, idx] = sort_rows(b, w, false);
  if (!want_v) return {to_out(b, sorted, wo), zeros(b, vo)};
  Value vecs = take_columns(b, b.slice(res[1], {0, 0, 0}, {n, k, k}), idx);
  vecs = b.select(b.broadcast_in_dim(broken, {n, k, k}, {0}), b.constant(NAN, t, {n, k, k}), vecs);
  return {to_out(b, sorted, wo), to_out(b, vecs, vo)};
}

// _linalg_svd(A, full_matrices, compute_uv, *, driver) -> (U, S, Vh): singular values descending; U and Vh empty
// when not compute_uv; the driver is ignored. With G = A (or A^H when A is wide, r x k, r >= k), rotations from the
// right make G's columns orthogonal: G V = U S. S is the column norms, V the accumulated rotations, and U comes from a
// Householder QR of the sorted columns (Q with the phases of R's diagonal), which also completes U when columns are
// zero (rank-deficient A) or full_matrices asks for all r columns.
V svd_rule(OpContext& c) {
  TensorType uo = c.out(0), so = c.out(1), vo = c.out(2);
  HloBuilder& b = c.b;
  const at::Tensor& input = c.inspect(0).toTensor();
  if (input.numel() == 0) {
    // No singular values; U (m x m) or Vh (n x n) of full_matrices is the identity.
    V out = zeros_for_all(c);
    if (uo.numel() > 0) out[0] = eye(b, uo.dtype, uo.dims);
    if (vo.numel() > 0) out[2] = eye(b, vo.dtype, vo.dims);
    return out;
  }
  bool full = c.flag(1), uv = c.flag(2);
  ElementType t = compute_type(element_type_of(input.scalar_type()));
  ElementType rt = real_type(t);
  Value a = flatten_batch(b, b.convert(c.tensor(0), t));
  int64_t n = a.type.dims[0];
  bool wide = a.type.dims[1] < a.type.dims[2];
  if (wide) a = adjoint(b, a);
  int64_t rows = a.type.dims[1], k = a.type.dims[2], m = k + k % 2;
  // LAPACK (gesdd) fails on a NaN; infinities give NaNs.
  Value nan_in = any_of(b, is_nan(b, a), {1, 2});
  c.check(nan_in,
          batch_prefix("linalg.svd", input.dim() == 2) +
              "The algorithm failed to converge because the input matrix contained non-finite values.",
          false, first_bad(b, nan_in));
  Value broken = any_of(b, not_finite(b, a), {1, 2});
  auto nan_where_broken = [&](const Value& x) {
    return b.select(b.broadcast_in_dim(broken, x.type.dims, {0}), b.constant(NAN, x.type.dtype, x.type.dims), x);
  };
  Value scale = matrix_scale(b, a);
  Value g0 = pad_zeros(b, divide_matrices(b, a, scale), m - k, false);
  double tol = kEps * static_cast<double>(std::max<int64_t>(rows, 1));
  Dims full_m{n, m, m};
  Unconverged unconverged = [&](HloBuilder& r, const V& s) {
    Value gram = matmul(r, adjoint(r, s[0]), s[0]);
    Value sq = squared_magnitude(r, gram);
    Value d = real_part(r, diagonal(r, gram));
    Value dd = r.binary("stablehlo.multiply", r.broadcast_in_dim(d, full_m, {0, 1}), r.broadcast_in_dim(d, full_m, {0, 2}));
    Value bad = r.compare(CompareDirection::kGt, sq, r.binary("stablehlo.multiply", dd, r.constant(tol * tol, rt, full_m)));
    bad = r.binary("stablehlo.and", bad, r.unary("stablehlo.not", index_mask(r, full_m, 1, 2, CompareDirection::kEq)));
    return any_of(r, bad, {1, 2});
  };
  Round step = [&](HloBuilder& r, const Value& round, const V& s) {
    Value partner = partners(r, round, m);
    Value g = s[0];
    Value gp = by_partner(r, g, partner, 2);
    Value d = r.reduce(squared_magnitude(r, g), r.constant(0, rt), {1}, "stablehlo.add");
    Value off = r.reduce(r.binary("stablehlo.multiply", conj(r, g), gp), r.constant(0, t), {1}, "stablehlo.add");
    Rotation j = rotation(r, d, off, partner, tol);
    V out{times_rotation(r, g, j)};
    if (uv) out.push_back(times_rotation(r, s[1], j));
    return out;
  };
  V init{g0};
  if (uv) init.push_back(eye(b, t, full_m));
  V res = sweeps(b, m, init, unconverged, step);
  check_converged(c, unconverged(b, res), "linalg.svd", "singular values", k);
  Value g = b.slice(res[0], {0, 0, 0}, {n, rows, k});
  Value norms = b.unary("stablehlo.sqrt", b.reduce(squared_magnitude(b, g), b.constant(0, rt), {1}, "stablehlo.add"));
  auto [sigma, idx] = sort_rows(b, norms, true);
  Value s_out = to_out(b, nan_where_broken(b.binary("stablehlo.multiply", sigma, b.broadcast_in_dim(scale, {n, k}, {0}))), so);
  if (!uv) return {zeros(b, uo), s_out, zeros(b, vo)};
  Value gs = take_columns(b, g, idx);
  Value vs = take_columns(b, b.slice(res[1], {0, 0, 0}, {n, k, k}), idx);
  auto [q, rr] = householder_qr(b, gs);
  Value dr = diagonal(b, rr);  // [n, k]
  Value mag = magnitude(b, dr);
  Value zero = b.compare(CompareDirection::kEq, mag, b.constant(0, rt, {n, k}));
  Value phase = b.binary("stablehlo.divide", dr, as_type(b, b.select(zero, b.constant(1, rt, {n, k}), mag), t));
  phase = b.select(zero, b.constant(1, t, {n, k}), phase);
  Value uk = b.binary("stablehlo.multiply", b.slice(q, {0, 0, 0}, {n, rows, k}), b.broadcast_in_dim(phase, {n, rows, k}, {0, 2}));
  Value uw = full && rows > k ? b.concatenate({uk, b.slice(q, {0, 0, k}, {n, rows, rows})}, 2) : uk;
  Value u = wide ? vs : uw;
  Value vh = adjoint(b, wide ? uw : vs);
  return {to_out(b, nan_where_broken(u), uo), s_out, to_out(b, nan_where_broken(vh), vo)};
}

}  // namespace

void add_linalg_jacobi_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"_linalg_eigh", "_linalg_eigh.eigenvalues"}, eigh_rule});
  rows.push_back({{"_linalg_svd", "_linalg_svd.U"}, svd_rule});
}

}  // namespace torch_tpu
