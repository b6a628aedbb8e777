// Shared pieces of the matrix decompositions; see matrices.h.
#include "lowering/linalg/matrices.h"

#include <algorithm>

namespace torch_tpu {
namespace linalg {

ElementType real_type(ElementType t) {
  if (t == ElementType::kC64) return ElementType::kF32;
  if (t == ElementType::kC128) return ElementType::kF64;
  return t;
}

Dims batch_of(const Dims& dims, int64_t matrix_rank) {
  return Dims(dims.begin(), dims.end() - std::min<int64_t>(matrix_rank, static_cast<int64_t>(dims.size())));
}

Value flatten_batch(HloBuilder& b, const Value& x) {
  const Dims& d = x.type.dims;
  int64_t n = 1;
  for (size_t i = 0; i + 2 < d.size(); ++i) n *= d[i];
  return b.reshape(x, {n, d[d.size() - 2], d[d.size() - 1]});
}

Value unflatten(HloBuilder& b, const Value& x, const Dims& dims) {
  return x.type.dims == dims ? x : b.reshape(x, dims);
}

Value broadcast_batch(HloBuilder& b, const Value& x, const Dims& batch) {
  Dims want = batch;
  want.push_back(x.type.dims[x.type.dims.size() - 2]);
  want.push_back(x.type.dims.back());
  return x.type.dims == want ? x : b.broadcast_to(x, want);
}

Value s64(HloBuilder& b, int64_t v) { return b.constant(static_cast<double>(v), ElementType::kS64); }

Value iota(HloBuilder& b, const Dims& dims, int64_t dim) { return b.iota({ElementType::kS64, dims}, dim); }

Value index_mask(HloBuilder& b, const Dims& dims, int64_t row_dim, int64_t col_dim, CompareDirection dir,
                 int64_t offset) {
  Value r = iota(b, dims, row_dim);
  if (offset != 0) r = b.binary("stablehlo.add", r, b.constant(static_cast<double>(offset), ElementType::kS64, dims));
  return b.compare(dir, r, iota(b, dims, col_dim));
}

Value tril(HloBuilder& b, const Value& x, int64_t diagonal) {
  int64_t r = x.type.rank();
  // keep col <= row + diagonal
  Value keep = index_mask(b, x.type.dims, r - 2, r - 1, CompareDirection::kGe, diagonal);
  return b.select(keep, x, b.constant(0, x.type.dtype, x.type.dims));
}

Value triu(HloBuilder& b, const Value& x, int64_t diagonal) {
  int64_t r = x.type.rank();
  // keep col >= row + diagonal
  Value keep = index_mask(b, x.type.dims, r - 2, r - 1, CompareDirection::kLe, diagonal);
  return b.select(keep, x, b.constant(0, x.type.dtype, x.type.dims));
}

Value eye(HloBuilder& b, ElementType t, const Dims& dims) {
  int64_t r = static_cast<int64_t>(dims.size());
  Value on = index_mask(b, dims, r - 2, r - 1, CompareDirection::kEq);
  return b.select(on, b.constant(1, t, dims), b.constant(0, t, dims));
}

Value diagonal(HloBuilder& b, const Value& x) {
  int64_t n = x.type.dims[0], m = x.type.dims[1], k = std::min(m, x.type.dims[2]);
  Value sq = b.slice(x, {0, 0, 0}, {n, k, k});
  Value on = index_mask(b, sq.type.dims, 1, 2, CompareDirection::kEq);
  return b.reduce(b.select(on, sq, b.constant(0, x.type.dtype, sq.type.dims)), b.constant(0, x.type.dtype), {2},
                  "stablehlo.add");
}

Value matmul(HloBuilder& b, const Value& x, const Value& y) {
  return b.dot_general(x, y, {0}, {0}, {2}, {1}, {x.type.dtype, {x.type.dims[0], x.type.dims[1], y.type.dims[2]}});
}

Value transpose_last(HloBuilder& b, const Value& x) {
  Dims perm;
  for (int64_t i = 0; i < x.type.rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return b.transpose(x, perm);
}

Value conj(HloBuilder& b, const Value& x) {
  if (!is_complex(x.type.dtype)) return x;
  TensorType rt{real_type(x.type.dtype), x.type.dims};
  Value re = b.op1("stablehlo.real", {x}, rt);
  Value im = b.unary("stablehlo.negate", b.op1("stablehlo.imag", {x}, rt));
  return b.op1("stablehlo.complex", {re, im}, x.type);
}

Value adjoint(HloBuilder& b, const Value& x) { return conj(b, transpose_last(b, x)); }

Value dynamic_slice(HloBuilder& b, const Value& x, const V& starts, const Dims& sizes) {
  V operands{x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return b.op1("stablehlo.dynamic_slice", operands, {x.type.dtype, sizes}, "slice_sizes = " + i64_array(sizes));
}

Value take_rows(HloBuilder& b, const Value& x, const Value& idx) {
  int64_t n = x.type.dims[0], r = idx.type.dims[1], k = x.type.dims[2];
  Dims pd{n, r, 1};
  Value points = b.concatenate({b.reshape(iota(b, {n, r}, 0), pd), b.reshape(b.convert(idx, ElementType::kS64), pd)}, 2);
  std::string attrs =
      "dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0, 1], start_index_map = [0, "
      "1], index_vector_dim = 2>, slice_sizes = " +
      i64_array({1, 1, k}) + ", indices_are_sorted = false";
  return b.op1("stablehlo.gather", {x, points}, {x.type.dtype, {n, r, k}}, attrs);
}

V fori_loop(HloBuilder& b, int64_t trips, const V& init, const LoopBody& body) {
  V all{s64(b, 0)};
  all.insert(all.end(), init.begin(), init.end());
  std::vector<TensorType> types;
  for (const Value& v : all) types.push_back(v.type);
  std::string cond = b.region(types, [&](HloBuilder& r, const V& a) {
    return V{r.compare(CompareDirection::kLt, a[0], s64(r, trips))};
  });
  std::string step = b.region(types, [&](HloBuilder& r, const V& a) {
    V out = body(r, a[0], V(a.begin() + 1, a.end()));
    out.insert(out.begin(), r.binary("stablehlo.add", a[0], s64(r, 1)));
    return out;
  });
  V res = b.op("stablehlo.while", all, types, "", {cond, step});
  return V(res.begin() + 1, res.end());
}

Value triangular_solve(HloBuilder& b, const Value& a, const Value& rhs, bool left, bool lower, bool unit, int op) {
  if (op == 2 && !is_complex(a.type.dtype)) op = 1;
  const char* names[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  std::string attrs = std::string("left_side = ") + (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
                      ", transpose_a = #stablehlo<transpose " + names[op] +
                      ">, unit_diagonal = " + (unit ? "true" : "false");
  return b.op1("stablehlo.triangular_solve", {a, rhs}, rhs.type, attrs);
}

namespace {

// |x| as LAPACK's i?amax measures it: |re| + |im| for complex.
Value pivot_magnitude(HloBuilder& b, const Value& x) {
  if (!is_complex(x.type.dtype)) return b.unary("stablehlo.abs", x);
  TensorType rt{real_type(x.type.dtype), x.type.dims};
  Value re = b.unary("stablehlo.abs", b.op1("stablehlo.real", {x}, rt));
  Value im = b.unary("stablehlo.abs", b.op1("stablehlo.imag", {x}, rt));
  return b.binary("stablehlo.add", re, im);
}

Value bcast(HloBuilder& b, const Value& v, const Dims& dims, const Dims& mapping) {
  return b.broadcast_in_dim(v, dims, mapping);
}

}  // namespace

Lu lu_factor(HloBuilder& b, const Value& a, bool pivot) {
  int64_t n = a.type.dims[0], m = a.type.dims[1], cols = a.type.dims[2], k = std::min(m, cols);
  ElementType t = a.type.dtype;
  Value perm0 = iota(b, {n, m}, 1);
  Value piv0 = b.constant(0, ElementType::kS32, {n, k});
  Value info0 = b.constant(0, ElementType::kS32, {n});
  V out = fori_loop(b, k, {a, perm0, piv0, info0}, [&](HloBuilder& r, const Value& j, const V& s) -> V {
    Value A = s[0], perm = s[1], piv = s[2], info = s[3];
    Dims full{n, m, cols};
    Value zero = s64(r, 0);
    Value rows = iota(r, {n, m}, 1);
    Value jb = r.broadcast_to(j, {n, m});
    Value p;
    if (pivot) {
      // The first row at or below j whose |a_ij| is largest.
      Value col = r.reshape(dynamic_slice(r, A, {zero, zero, j}, {n, m, 1}), {n, m});
      Value mag = pivot_magnitude(r, col);
      ElementType rt = mag.type.dtype;
      Value below = r.compare(CompareDirection::kGe, rows, jb);
      mag = r.select(below, mag, r.constant(-1, rt, {n, m}));
      Value best = r.reduce(mag, r.constant(-1, rt), {1}, "stablehlo.maximum");
      Value is_best = r.binary("stablehlo.and", below, r.compare(CompareDirection::kEq, mag, bcast(r, best, {n, m}, {0})));
      p = r.reduce(r.select(is_best, rows, r.constant(static_cast<double>(m), ElementType::kS64, {n, m})),
                   s64(r, m), {1}, "stablehlo.minimum");
      // No candidate compares equal when the column holds a NaN: keep row j then.
      p = r.select(r.compare(CompareDirection::kGe, p, r.constant(static_cast<double>(m), ElementType::kS64, {n})),
                   r.broadcast_to(j, {n}), p);
      // Swap rows j and p of A and of the permutation.
      Value row_j = r.reshape(dynamic_slice(r, A, {zero, j, zero}, {n, 1, cols}), {n, 1, cols});
      Value row_p = take_rows(r, A, r.reshape(p, {n, 1}));
      Value rows3 = iota(r, full, 1);
      Value is_j = r.compare(CompareDirection::kEq, rows3, r.broadcast_to(j, full));
      Value is_p = r.compare(CompareDirection::kEq, rows3, bcast(r, p, full, {0}));
      A = r.select(is_j, bcast(r, r.reshape(row_p, {n, cols}), full, {0, 2}),
                   r.select(is_p, bcast(r, r.reshape(row_j, {n, cols}), full, {0, 2}), A));
      Value perm_j = r.reshape(dynamic_slice(r, perm, {zero, j}, {n, 1}), {n});
      Value perm_p = r.reshape(take_rows(r, r.reshape(perm, {n, m, 1}), r.reshape(p, {n, 1})), {n});
      Value pj = r.compare(CompareDirection::kEq, rows, jb);
      Value pp = r.compare(CompareDirection::kEq, rows, bcast(r, p, {n, m}, {0}));
      perm = r.select(pj, bcast(r, perm_p, {n, m}, {0}), r.select(pp, bcast(r, perm_j, {n, m}, {0}), perm));
    } else {
      p = r.broadcast_to(j, {n});
    }
    Value kcols = iota(r, {n, k}, 1);
    Value at_j = r.compare(CompareDirection::kEq, kcols, r.broadcast_to(j, {n, k}));
    Value p1 = r.convert(r.binary("stablehlo.add", p, r.constant(1, ElementType::kS64, {n})), ElementType::kS32);
    piv = r.select(at_j, bcast(r, p1, {n, k}, {0}), piv);
    // The pivot; a zero one records info (the first only) and leaves its column unscaled.
    Value d = r.reshape(dynamic_slice(r, A, {zero, j, j}, {n, 1, 1}), {n});
    Value is_zero = r.compare(CompareDirection::kEq, d, r.constant(0, t, {n}));
    Value j1 = r.convert(r.binary("stablehlo.add", r.broadcast_to(j, {n}), r.constant(1, ElementType::kS64, {n})),
                         ElementType::kS32);
    Value first = r.binary("stablehlo.and", is_zero, r.compare(CompareDirection::kEq, info, r.constant(0, ElementType::kS32, {n})));
    info = r.select(first, j1, info);
    Value divisor = r.select(is_zero, r.constant(1, t, {n}), d);
    Value col = r.reshape(dynamic_slice(r, A, {zero, zero, j}, {n, m, 1}), {n, m});
    Value under = r.compare(CompareDirection::kGt, rows, jb);
    Value l = r.select(under, r.binary("stablehlo.divide", col, bcast(r, divisor, {n, m}, {0})), r.constant(0, t, {n, m}));
    Value urow = r.reshape(dynamic_slice(r, A, {zero, j, zero}, {n, 1, cols}), {n, cols});
    Value ccols = iota(r, {n, cols}, 1);
    Value right = r.compare(CompareDirection::kGt, ccols, r.broadcast_to(j, {n, cols}));
    Value u = r.select(right, urow, r.constant(0, t, {n, cols}));
    Value rows3 = iota(r, full, 1), cols3 = iota(r, full, 2);
    Value jf = r.broadcast_to(j, full);
    Value below3 = r.compare(CompareDirection::kGt, rows3, jf);
    Value right3 = r.compare(CompareDirection::kGt, cols3, jf);
    Value lf = bcast(r, l, full, {0, 1});
    Value update = r.binary("stablehlo.multiply", lf, bcast(r, u, full, {0, 2}));
    Value trailing = r.binary("stablehlo.and", below3, right3);
    A = r.select(trailing, r.binary("stablehlo.subtract", A, update), A);
    Value lcol = r.binary("stablehlo.and", below3, r.compare(CompareDirection::kEq, cols3, jf));
    A = r.select(lcol, lf, A);
    return {A, perm, piv, info};
  });
  return {out[0], out[2], out[1], out[3]};
}

Value pivots_to_perm(HloBuilder& b, const Value& pivots, int64_t m) {
  int64_t n = pivots.type.dims[0], k = pivots.type.dims[1];
  Value perm0 = iota(b, {n, m}, 1);
  V out = fori_loop(b, k, {perm0, pivots}, [&](HloBuilder& r, const Value& j, const V& s) -> V {
    Value perm = s[0];
    Value zero = s64(r, 0);
    Value p = r.binary("stablehlo.subtract",
                       r.convert(r.reshape(dynamic_slice(r, s[1], {zero, j}, {n, 1}), {n}), ElementType::kS64),
                       r.constant(1, ElementType::kS64, {n}));
    Value rows = iota(r, {n, m}, 1);
    Value perm_j = r.reshape(dynamic_slice(r, perm, {zero, j}, {n, 1}), {n});
    Value perm_p = r.reshape(take_rows(r, r.reshape(perm, {n, m, 1}), r.reshape(p, {n, 1})), {n});
    Value pj = r.compare(CompareDirection::kEq, rows, r.broadcast_to(j, {n, m}));
    Value pp = r.compare(CompareDirection::kEq, rows, r.broadcast_in_dim(p, {n, m}, {0}));
    perm = r.select(pj, r.broadcast_in_dim(perm_p, {n, m}, {0}),
                    r.select(pp, r.broadcast_in_dim(perm_j, {n, m}, {0}), perm));
    return {perm, s[1]};
  });
  return out[0];
}

// inverse[perm[i]] = i
Value invert_perm(HloBuilder& b, const Value& perm) {
  int64_t n = perm.type.dims[0], m = perm.type.dims[1];
  Dims d{n, m, m};
  Value hit = b.compare(CompareDirection::kEq, b.broadcast_in_dim(perm, d, {0, 2}), iota(b, d, 1));  // [n, r, i]
  Value idx = b.select(hit, iota(b, d, 2), b.constant(0, ElementType::kS64, d));
  return b.reduce(idx, s64(b, 0), {2}, "stablehlo.add");
}

Value lu_solve(HloBuilder& b, const Value& lu, const Value& perm, const Value& rhs, bool adjoint) {
  if (!adjoint) {
    // A = P L U: X = U^-1 L^-1 P^T B.
    Value y = take_rows(b, rhs, perm);
    y = triangular_solve(b, lu, y, true, true, true, 0);
    return triangular_solve(b, lu, y, true, false, false, 0);
  }
  // A^H = U^H L^H P^T: X = P L^-H U^-H B.
  Value y = triangular_solve(b, lu, rhs, true, false, false, 2);
  y = triangular_solve(b, lu, y, true, true, true, 2);
  return take_rows(b, y, invert_perm(b, perm));
}

namespace {

// PyTorch's wording per API (the body after "<api>: [(Batch element i): ]"); `info` as text.
std::string info_message(const std::string& api, const std::string& info) {
  auto has = [&](const char* s) { return api.find(s) != std::string::npos; };
  if (has("inv")) {
    return "The diagonal element " + info +
           " is zero, the inversion could not be completed because the input matrix is singular.";
  }
  if (has("solve")) return "The solver failed because the input matrix is singular.";
  if (has("cholesky")) {
    return "The factorization could not be completed because the input is not positive-definite (the leading minor "
           "of order " +
           info + " is not positive-definite).";
  }
  if (has("eig")) {
    return "The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated "
           "eigenvalues (error code: " +
           info + ").";
  }
  if (has("svd")) {
    return "The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated "
           "singular values (error code: " +
           info + ").";
  }
  if (has("lstsq")) {
    return "The least squares solution could not be computed because the input matrix does not have full rank (error "
           "code: " +
           info + ").";
  }
  if (has("lu_factor")) {
    return "U[" + info + "," + info + "] is zero and using it on lu_solve would result in a division by zero. If you "
           "still want to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, "
           "pivot)";
  }
  return "Unknown error code: " + info + ".";
}

}  // namespace

void check_info(OpContext& c, const Value& info, const std::string& api, bool is_matrix) {
  HloBuilder& b = c.b;
  int64_t n = info.type.numel();
  if (n == 0) return;
  Value flat = b.convert(b.reshape(info, {n}), ElementType::kS64);
  auto prefix = [&](const std::string& i) { return api + ": " + (is_matrix ? std::string() : "(Batch element " + i + "): "); };
  // lu_factor's message names info twice (one "{value}" is filled in): small values get a check each.
  bool twice = info_message(api, "{value}").find("{value}") != info_message(api, "{value}").rfind("{value}");
  constexpr int64_t kMaxElements = 16, kMaxSpelled = 8;
  if (n <= kMaxElements) {
    // One check per batch element, in order: the first failing one raises, as on the CPU.
    for (int64_t i = 0; i < n; ++i) {
      Value v = b.reshape(b.slice(flat, {i}, {i + 1}), {});
      std::string at = prefix(std::to_string(i));
      if (twice) {
        for (int64_t k = 1; k <= (n <= 2 ? kMaxSpelled : 0); ++k) {
          c.check(b.compare(CompareDirection::kEq, v, s64(b, k)), at + info_message(api, std::to_string(k)), false);
        }
        c.check(b.compare(CompareDirection::kNe, v, s64(b, 0)),
                at + "U[k,k] is zero for k = {value}, and using it on lu_solve would result in a division by zero.",
                false, v);
      } else {
        c.check(b.compare(CompareDirection::kNe, v, s64(b, 0)), at + info_message(api, "{value}"), false, v);
      }
    }
    return;
  }
  // Many batch elements: one check naming the first failing element (its info is in the _ex variant's result).
  Value bad = b.compare(CompareDirection::kNe, flat, b.constant(0, ElementType::kS64, {n}));
  Value first = b.reduce(b.select(bad, iota(b, {n}, 0), b.constant(static_cast<double>(n), ElementType::kS64, {n})),
                         s64(b, n), {0}, "stablehlo.minimum");
  c.check(bad, prefix("{value}") + info_message(api, "k"), false, first);
}

}  // namespace linalg
}  // namespace torch_tpu
