// Ops that address a tensor as its flat sequence of elements: take/put_ (flat indices, range-checked on the
// device), nonzero_static and masked_scatter with its backward (ranks of the true elements of a mask from a prefix
// count). Nothing waits for device values: out-of-range indices and short sources are OpContext checks.
#include <ATen/core/Tensor.h>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/scatter_rows.h"

namespace torch_tpu {
namespace {

using namespace hm;  // NOLINT: formula spellings
using V = std::vector<Value>;

constexpr ElementType kI64 = ElementType::kS64;

Value s64c(HloBuilder& b, double v, const std::vector<int64_t>& dims = {}) { return b.constant(v, kI64, dims); }

// put_(accumulate=True) adds; a bool tensor accumulates with "or", as the CPU's kernel does.
std::string accumulator(ElementType t) { return t == ElementType::kPred ? "stablehlo.or" : "stablehlo.add"; }

// ---- take / put_ ----

std::string take_message(int64_t n) {
  return "out of range: tried to access index {value} on a tensor of " + std::to_string(n) + " elements.";
}

// Flat indices into `n` elements: range-checked on the device, negatives wrapped.
Value flat_index(OpContext& c, size_t arg, int64_t n) {
  Value idx = c.b.convert(c.tensor(arg), kI64);
  c.check_range(idx, -n, n, take_message(n));
  Value flat = c.b.reshape(idx, {idx.type.numel()});
  Value neg = lt(c.b, flat, s64c(c.b, 0, flat.type.dims));
  return sel(c.b, neg, add(c.b, flat, s64c(c.b, static_cast<double>(n), flat.type.dims)), flat);
}

V take_rule(OpContext& c) {  // take(self, index)
  TensorType o = c.out(0);
  Value x = c.tensor(0);
  int64_t n = x.type.numel();
  if (o.numel() == 0) return {zeros(c.b, o)};
  Value idx = flat_index(c, 1, n);
  if (n == 0) return {zeros(c.b, o)};  // the check above reports it
  Value flat = c.b.reshape(x, {n});
  return {c.b.reshape(gather_dim(c.b, flat, idx, 0), o.dims)};
}

V put_rule(OpContext& c) {  // put_(self, index, source, accumulate)
  Value x = c.tensor(0);
  int64_t n = x.type.numel();
  int64_t k = c.inspect(1).toTensor().numel();
  TORCH_CHECK_INDEX(c.inspect(2).toTensor().numel() == k, "put_(): Expected source and index to have the same number "
                    "of elements, but got source.numel() = ", c.inspect(2).toTensor().numel(), ", index.numel() = ", k);
  TORCH_CHECK_INDEX(n > 0 || k == 0, "put_(): Tried to put elements into an empty tensor");
  if (k == 0) return {x};
  Value idx = flat_index(c, 1, n);
  if (n == 0) return {x};
  Value src = c.b.reshape(c.b.convert(c.tensor(2), x.type.dtype), {k});
  bool accumulate = c.has(3) && c.flag(3);
  Value put = scatter_rows(c.b, c.b.reshape(x, {n}), src, idx, accumulate ? accumulator(x.type.dtype) : "");
  return {c.b.reshape(put, x.type.dims)};
}

// ---- nonzero_static / masked_scatter ----

// The rank of each true element of a flat mask among the true ones (0-based; garbage where false).
Value true_ranks(HloBuilder& b, const Value& mask_flat) {
  Value counts = prefix_reduce(b, b.convert(mask_flat, kI64), 0, "stablehlo.add", 0);
  return sub(b, counts, s64c(b, 1, counts.type.dims));
}

V nonzero_static_rule(OpContext& c) {  // nonzero_static(self, size, fill_value) -> [size, rank]
  TensorType o = c.out(0);
  Value x = c.tensor(0);
  int64_t r = x.type.rank(), n = x.type.numel(), size = o.dims[0];
  if (o.numel() == 0) return {zeros(c.b, o)};
  Value fill = c.operand(2, kI64, o.dims);
  if (n == 0) return {fill};
  Value nz = x.type.dtype == ElementType::kPred ? x : ne(c.b, x, zeros(c.b, x.type));
  Value mask = c.b.reshape(nz, {n});
  Value ranks = true_ranks(c.b, mask);
  Value dest = sel(c.b, mask, ranks, s64c(c.b, static_cast<double>(size), {n}));  // past the end: dropped
  V coords;
  for (int64_t d = 0; d < r; ++d) coords.push_back(c.b.reshape(c.b.iota({kI64, x.type.dims}, d), {n, 1}));
  Value rows = coords.size() == 1 ? coords[0] : c.b.concatenate(coords, 1);
  return {scatter_rows(c.b, fill, rows, dest, "")};
}

// masked_scatter_(self, mask, source): the i-th true element of the mask (broadcast to self) takes source's i-th
// element. Too few source elements is the CPU's RuntimeError, found on the device.
V masked_scatter_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x = c.tensor(0);
  int64_t n = x.type.numel();
  if (n == 0) return {x};
  Value mask = b.broadcast_to(b.convert(c.tensor(1), ElementType::kPred), x.type.dims);
  Value mflat = b.reshape(mask, {n});
  Value src = c.tensor(2);
  int64_t m = src.type.numel();
  Value count = b.reduce(b.convert(mflat, kI64), s64c(b, 0), {0}, "stablehlo.add");
  c.check(gt(b, count, s64c(b, static_cast<double>(m))), "Number of elements of source < number of ones in mask",
          false);
  if (m == 0) return {x};
  Value sflat = b.reshape(b.convert(src, x.type.dtype), {m});
  Value at = b.binary("stablehlo.minimum", b.binary("stablehlo.maximum", true_ranks(b, mflat), s64c(b, 0, {n})),
                      s64c(b, static_cast<double>(m - 1), {n}));
  Value picked = gather_dim(b, sflat, at, 0);
  return {b.reshape(sel(b, mflat, picked, b.reshape(x, {n})), x.type.dims)};
}

// masked_scatter_backward(grad_output, mask, sizes): source's gradient, grad_output's masked elements in order,
// zeros past them.
V masked_scatter_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value g = c.tensor(0);
  int64_t n = g.type.numel(), m = o.numel();
  if (m == 0 || n == 0) return {zeros(b, o)};
  Value mask = b.reshape(b.broadcast_to(b.convert(c.tensor(1), ElementType::kPred), g.type.dims), {n});
  Value dest = sel(b, mask, true_ranks(b, mask), s64c(b, static_cast<double>(m), {n}));
  Value out = scatter_rows(b, zeros(b, {o.dtype, {m}}), b.reshape(b.convert(g, o.dtype), {n}), dest, "");
  return {b.reshape(out, o.dims)};
}

}  // namespace

void add_flat_index_rules(std::vector<LoweringRow>& rows) {
  rows.push_back({{"take", "take.out"}, take_rule});
  rows.push_back({{"put_"}, put_rule});
  rows.push_back({{"nonzero_static", "nonzero_static.out"}, nonzero_static_rule, [](std::vector<c10::IValue>& args) {
                    TORCH_CHECK(args.size() < 2 || !args[1].isInt() || args[1].toInt() >= 0,
                                "nonzero_static: 'size' must be an non-negative integer");
                  }});
  rows.push_back({{"masked_scatter_"}, masked_scatter_rule});
  rows.push_back({{"masked_scatter_backward"}, masked_scatter_backward_rule});
}

}  // namespace torch_tpu
