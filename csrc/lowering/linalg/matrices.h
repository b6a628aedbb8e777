// Pieces the decompositions share (linalg_decomp.cpp, linalg_solvers.cpp): batched matrices as [N, m, n] values,
// masks, a counted while loop, row gathers, triangular solves, LU with partial pivoting and device-side error checks
// with PyTorch's wording.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace linalg {

using V = std::vector<Value>;
using Dims = std::vector<int64_t>;

ElementType real_type(ElementType t);  // f32 for c64, f64 for c128, itself otherwise

// [..., m, n] <-> [N, m, n].
Value flatten_batch(HloBuilder& b, const Value& x);
Value unflatten(HloBuilder& b, const Value& x, const Dims& dims);
// Broadcasts the batch dims of x ([..., m, n]) to `batch`.
Value broadcast_batch(HloBuilder& b, const Value& x, const Dims& batch);
Dims batch_of(const Dims& dims, int64_t matrix_rank = 2);

Value s64(HloBuilder& b, int64_t v);
Value iota(HloBuilder& b, const Dims& dims, int64_t dim);  // s64
// Elementwise compare of iota(dim0) and iota(dim1) over `dims` plus `offset`: row + offset <dir> col.
Value index_mask(HloBuilder& b, const Dims& dims, int64_t row_dim, int64_t col_dim, CompareDirection dir,
                 int64_t offset = 0);
Value tril(HloBuilder& b, const Value& x, int64_t diagonal = 0);  // zero above the diagonal (last two dims)
Value triu(HloBuilder& b, const Value& x, int64_t diagonal = 0);
Value eye(HloBuilder& b, ElementType t, const Dims& dims);  // batched identity (last two dims)
Value diagonal(HloBuilder& b, const Value& x);               // [N, m, n] -> [N, min(m, n)]
Value matmul(HloBuilder& b, const Value& x, const Value& y);  // [N, m, k] x [N, k, n]
Value adjoint(HloBuilder& b, const Value& x);                // conjugate transpose of the last two dims
Value transpose_last(HloBuilder& b, const Value& x);
Value conj(HloBuilder& b, const Value& x);
Value dynamic_slice(HloBuilder& b, const Value& x, const V& starts, const Dims& sizes);
// rows[n, i, :] = x[n, idx[n, i], :] for x [N, m, k] and idx [N, r] (s64).
Value take_rows(HloBuilder& b, const Value& x, const Value& idx);

// for k in [0, trips): vals = body(k, vals). k is a 0-d s64. Loop bodies only see their loop values.
using LoopBody = std::function<V(HloBuilder&, const Value& k, const V& vals)>;
V fori_loop(HloBuilder& b, int64_t trips, const V& init, const LoopBody& body);

// op(A) X = B (left) or X op(A) = B, A triangular: [N, m, m], B [N, m, k] or [N, k, m]. op: 0 none, 1 transpose,
// 2 conjugate transpose.
Value triangular_solve(HloBuilder& b, const Value& a, const Value& rhs, bool left, bool lower, bool unit, int op);

struct Lu {
  Value lu;      // [N, m, n]
  Value pivots;  // [N, min(m, n)] s32, 1-based (LAPACK's ipiv)
  Value perm;    // [N, m] s64: row i of P^T A is row perm[i] of A
  Value info;    // [N] s32: first zero pivot, 1-based, 0 if none
};
// LU factorisation with partial pivoting as LAPACK's getrf computes it (the first largest |a_ik| is the pivot; a
// zero pivot sets info and the elimination goes on).
Lu lu_factor(HloBuilder& b, const Value& a, bool pivot = true);
// The permutation (as perm above) that LAPACK-style 1-based sequential row swaps `pivots` [N, k] make of m rows.
Value pivots_to_perm(HloBuilder& b, const Value& pivots, int64_t m);
// Solves A X = B (adjoint: A^H X = B) from A's LU factors; all [N, ...].
Value lu_solve(HloBuilder& b, const Value& lu, const Value& perm, const Value& rhs, bool adjoint);

// PyTorch's _linalg_check_errors, on the device: raises at the next sync with PyTorch's message for the first batch
// element whose info is non-zero. `info` [N] integer.
void check_info(OpContext& c, const Value& info, const std::string& api_name, bool is_matrix);

}  // namespace linalg

// linalg_solvers.cpp: Cholesky, triangular solves, cross products (added by add_linalg_decomp_rules).
// linalg_jacobi.cpp: _linalg_eigh, _linalg_svd (added by add_linalg_decomp_rules).

namespace linalg {

// Householder QR of [N, m, n] as LAPACK's geqrf + orgqr: (Q [N, m, m], R [N, m, n]); linalg_solvers.cpp.
std::pair<Value, Value> householder_qr(HloBuilder& b, const Value& a);

}  // namespace linalg
}  // namespace torch_tpu
