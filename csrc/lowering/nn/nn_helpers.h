// Pieces the neural-network rule files share (nn.cpp, distances.cpp, margin_losses.cpp): loss reductions, the dims
// a reduction keeps, optional arguments.
#pragma once

#include <utility>
#include <vector>

#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace nn_rules {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

inline ElementType compute_type(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16 ? ElementType::kF32 : t;
}

inline std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < rank; ++i) d.push_back(i);
  return d;
}

// The dims of [0, rank) that are not in `dims` (sorted).
inline std::vector<int64_t> other_dims(int64_t rank, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    bool skip = false;
    for (int64_t d : dims) skip = skip || d == i;
    if (!skip) out.push_back(i);
  }
  return out;
}

// Broadcasts a reduction result (the reduced `dims` dropped) back to `full`.
inline Value expand_back(HloBuilder& b, const Value& reduced, const std::vector<int64_t>& full,
                  const std::vector<int64_t>& dims) {
  return b.broadcast_in_dim(reduced, full, other_dims(static_cast<int64_t>(full.size()), dims));
}

inline Value k(HloBuilder& b, double v, const Value& like) { return b.constant(v, like.type.dtype, like.type.dims); }
inline Value add(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.add", x, y); }
inline Value sub(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.subtract", x, y); }
inline Value mul(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.multiply", x, y); }
inline Value div(HloBuilder& b, const Value& x, const Value& y) { return b.binary("stablehlo.divide", x, y); }

inline std::vector<int64_t> broadcast_shape(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.size() < b.size()) std::swap(a, b);
  size_t off = a.size() - b.size();
  for (size_t i = 0; i < b.size(); ++i) {
    if (a[off + i] == 1) a[off + i] = b[i];
  }
  return a;
}

// Optional tensor argument i is given. Autograd passes absent optionals as undefined tensors, not None.
inline bool present(OpContext& c, size_t i) { return c.has(i) && (!c.is_tensor(i) || c.arg(i).toTensor().defined()); }

inline std::vector<int64_t> arg_dims(OpContext& c, size_t i) { return c.arg(i).toTensor().sizes().vec(); }

// none: the elementwise loss; mean/sum: reduced over every element.
// PyTorch materializes the per-element loss in the input's dtype before reducing it (in float32 for half types):
// `element` rounds to that dtype first, so e.g. a float16 squared error that overflows stays inf.
inline Value apply_reduction(HloBuilder& b, Value loss, int64_t reduction, ElementType element) {
  if (reduction == kNone) return loss;
  if (element != loss.type.dtype) loss = b.convert(b.convert(loss, element), loss.type.dtype);
  Value s = reduce_sum(b, loss, all_dims(loss.type.rank()));
  if (reduction == kSum) return s;
  return div(b, s, b.constant(static_cast<double>(loss.type.numel()), s.type.dtype));
}

}  // namespace nn_rules
}  // namespace torch_tpu
