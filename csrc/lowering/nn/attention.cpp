#include "lowering/nn/attention.h"

#include <limits>

#include "lowering/lib/host_kernels.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

ElementType compute_type_of(ElementType t) {
  return (t == ElementType::kBF16 || t == ElementType::kF16) ? ElementType::kF32 : t;
}

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < n; ++i) r.push_back(i);
  return r;
}

// dims with the last `drop` entries replaced by `tail`.
std::vector<int64_t> with_tail(const std::vector<int64_t>& dims, size_t drop, const std::vector<int64_t>& tail) {
  std::vector<int64_t> out(dims.begin(), dims.end() - static_cast<std::ptrdiff_t>(drop));
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

// a·b over the shared leading (batch) dims, contracting a's dim `ca` with b's dim `cb` (both among the last two).
Value batched_dot(HloBuilder& b, const Value& x, const Value& y, int64_t cx, int64_t cy) {
  int64_t n = x.type.rank();
  std::vector<int64_t> batch = range(n - 2);
  std::vector<int64_t> dims(x.type.dims.begin(), x.type.dims.end() - 2);
  dims.push_back(x.type.dims[cx == n - 1 ? n - 2 : n - 1]);
  dims.push_back(y.type.dims[cy == n - 1 ? n - 2 : n - 1]);
  int64_t macs = x.type.dims[cx];
  for (int64_t d : dims) macs *= d;
  if (host_kernel_fits(x.type.dtype, macs)) return host_matmul(b, x, y, cx == n - 2, cy == n - 1);
  return b.dot_general(x, y, batch, batch, {cx}, {cy}, {x.type.dtype, dims});
}

// Broadcasts a reduced (..., L) back over a trailing dim of size `n`.
Value expand_last(HloBuilder& b, const Value& v, int64_t n) {
  std::vector<int64_t> dims = v.type.dims;
  dims.push_back(n);
  return b.broadcast_in_dim(v, dims, range(v.type.rank()));
}

// Scaled scores with bias and causal mask: (..., Lq, Lk) in the compute type.
Value scores(HloBuilder& b, const Value& q, const Value& k, const std::optional<Value>& bias,
             const AttentionShape& shape) {
  int64_t n = q.type.rank();
  Value s = batched_dot(b, q, k, n - 1, n - 1);
  ElementType ct = s.type.dtype;
  s = b.binary("stablehlo.multiply", s, b.constant(shape.scale, ct, s.type.dims));
  if (bias) s = b.binary("stablehlo.add", s, b.broadcast_to(b.convert(*bias, ct), s.type.dims));
  if (shape.causal) {  // keep column <= row (the mask is top-left aligned, as torch's math path builds it)
    TensorType idx{ElementType::kS64, s.type.dims};
    Value keep = b.compare(CompareDirection::kLe, b.iota(idx, n - 1), b.iota(idx, n - 2));
    s = b.select(keep, s, b.constant(-std::numeric_limits<double>::infinity(), ct, s.type.dims));
  }
  return s;
}

}  // namespace

AttentionForward attention_forward(HloBuilder& b, const Value& q_in, const Value& k_in, const Value& v_in,
                                   const std::optional<Value>& bias, const AttentionShape& shape) {
  ElementType t = q_in.type.dtype;
  ElementType ct = compute_type_of(t);
  Value q = b.convert(q_in, ct), k = b.convert(k_in, ct), v = b.convert(v_in, ct);
  int64_t n = q.type.rank();
  Value s = scores(b, q, k, bias, shape);
  int64_t lk = s.type.dims.back();
  Value m = b.reduce(s, b.constant(-std::numeric_limits<double>::infinity(), ct), {n - 1}, "stablehlo.maximum");
  Value e = b.unary("stablehlo.exponential", b.binary("stablehlo.subtract", s, expand_last(b, m, lk)));
  Value sum = reduce_sum(b, e, {n - 1});
  Value p = b.binary("stablehlo.divide", e, expand_last(b, sum, lk));
  Value out = batched_dot(b, p, v, n - 1, n - 2);
  Value lse = b.binary("stablehlo.add", m, b.unary("stablehlo.log", sum));
  return {b.convert(out, t), b.convert(lse, ElementType::kF32)};
}

AttentionGrads attention_backward(HloBuilder& b, const Value& grad_out, const Value& q_in, const Value& k_in,
                                  const Value& v_in, const std::optional<Value>& bias, const Value& out,
                                  const Value& logsumexp, const AttentionShape& shape, bool want_dbias) {
  ElementType t = q_in.type.dtype;
  ElementType ct = compute_type_of(t);
  Value q = b.convert(q_in, ct), k = b.convert(k_in, ct), v = b.convert(v_in, ct);
  Value dout = b.convert(grad_out, ct), o = b.convert(out, ct);
  int64_t n = q.type.rank();
  Value s = scores(b, q, k, bias, shape);
  int64_t lk = s.type.dims.back();
  Value p = b.unary("stablehlo.exponential",
                    b.binary("stablehlo.subtract", s, expand_last(b, b.convert(logsumexp, ct), lk)));
  Value dv = batched_dot(b, p, dout, n - 2, n - 2);                 // Pᵀ·dO
  Value dp = batched_dot(b, dout, v, n - 1, n - 1);                 // dO·Vᵀ
  Value d = reduce_sum(b, b.binary("stablehlo.multiply", dout, o), {n - 1});  // rowsum(dO∘O)
  Value ds = b.binary("stablehlo.multiply", p, b.binary("stablehlo.subtract", dp, expand_last(b, d, lk)));
  Value scale = b.constant(shape.scale, ct, q.type.dims);
  Value dq = b.binary("stablehlo.multiply", batched_dot(b, ds, k, n - 1, n - 2), scale);
  Value dk = b.binary("stablehlo.multiply", batched_dot(b, ds, q, n - 2, n - 2),
                      b.constant(shape.scale, ct, k.type.dims));
  AttentionGrads g{b.convert(dq, t), b.convert(dk, t), b.convert(dv, t), std::nullopt};
  if (want_dbias && bias) {
    // Sum dS over the dims the bias was broadcast along (leading ones it lacks, and its size-1 dims).
    const auto& bd = bias->type.dims;
    int64_t offset = n - static_cast<int64_t>(bd.size());
    std::vector<int64_t> reduce;
    for (int64_t i = 0; i < n; ++i) {
      if (i < offset || (bd[i - offset] == 1 && ds.type.dims[i] != 1)) reduce.push_back(i);
    }
    Value db = reduce.empty() ? ds : reduce_sum(b, ds, reduce);
    g.dbias = b.convert(b.reshape(db, bd), bias->type.dtype);
  }
  return g;
}

}  // namespace torch_tpu
