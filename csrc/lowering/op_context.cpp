#include "lowering/op_context.h"

#include <ATen/native/TypeProperties.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "lowering/common_dtype.h"
#include "runtime/error.h"

namespace torch_tpu {

ElementType element_type_of(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool: return ElementType::kPred;
    case c10::ScalarType::Char: return ElementType::kS8;
    case c10::ScalarType::Short: return ElementType::kS16;
    case c10::ScalarType::Int: return ElementType::kS32;
    case c10::ScalarType::Long: return ElementType::kS64;
    case c10::ScalarType::Byte: return ElementType::kU8;
    case c10::ScalarType::UInt16: return ElementType::kU16;
    case c10::ScalarType::UInt32: return ElementType::kU32;
    case c10::ScalarType::UInt64: return ElementType::kU64;
    case c10::ScalarType::Half: return ElementType::kF16;
    case c10::ScalarType::Float: return ElementType::kF32;
    case c10::ScalarType::Double: return ElementType::kF64;
    case c10::ScalarType::BFloat16: return ElementType::kBF16;
    case c10::ScalarType::ComplexFloat: return ElementType::kC64;
    case c10::ScalarType::ComplexDouble: return ElementType::kC128;
    default: break;
  }
  TORCH_CHECK_TYPE(false, "tpu does not support dtype ", type);
}

c10::ScalarType result_type_of(const std::vector<const c10::IValue*>& values) {
  at::native::ResultTypeState state = {};
  for (const c10::IValue* v : values) {
    if (v->isTensor() && v->toTensor().defined()) {
      state = at::native::update_result_type_state(v->toTensor(), state);
    } else if (v->isScalar()) {
      state = at::native::update_result_type_state(v->toScalar(), state);
    }
  }
  return at::native::result_type(state);
}

ElementType result_type_of(const OpContext& c, const std::vector<size_t>& indices) {
  std::vector<const c10::IValue*> values;
  for (size_t i : indices) values.push_back(&c.inspect(i));
  return element_type_of(result_type_of(values));
}

double OpContext::scalar(size_t i) const {
  const c10::IValue& v = arg(i);
  if (v.isTensor()) return v.toTensor().item<double>();
  return v.toScalar().toDouble();
}

int64_t OpContext::integer(size_t i) const {
  const c10::IValue& v = arg(i);
  if (v.isTensor()) return v.toTensor().item<int64_t>();
  return v.toScalar().toLong();
}

std::vector<c10::Scalar> OpContext::number_list(size_t i) const {
  const c10::IValue& v = inspect(i);
  std::vector<c10::Scalar> out;
  if (v.isDoubleList()) {
    for (double d : v.toDoubleList()) out.emplace_back(d);
  } else if (v.isIntList()) {
    for (int64_t d : v.toIntList()) out.emplace_back(d);
  } else if (v.isBoolList()) {
    for (bool d : v.toBoolList()) out.emplace_back(d);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) out.push_back(e.toScalar());
  }
  return out;
}

std::vector<int64_t> OpContext::ints(size_t i) const {
  const c10::IValue& v = arg(i);
  if (v.isNone()) return {};
  if (v.isInt()) return {v.toInt()};
  return v.toIntVector();
}

void OpContext::check_range(const Value& idx, int64_t lo, int64_t hi, const std::string& message,
                             std::optional<int64_t> ignore, bool index_error) {
  if (idx.type.numel() == 0) return;
  std::vector<int64_t> all(static_cast<size_t>(idx.type.rank()));
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
  Value v = b.convert(idx, ElementType::kS64);
  auto k = [&](double x) { return b.constant(x, ElementType::kS64, v.type.dims); };
  Value over = b.compare(CompareDirection::kGe, v, k(static_cast<double>(hi)));
  Value under = b.compare(CompareDirection::kLt, v, k(static_cast<double>(lo)));
  if (ignore) {
    Value counted = b.compare(CompareDirection::kNe, v, k(static_cast<double>(*ignore)));
    over = b.binary("stablehlo.and", over, counted);
    under = b.binary("stablehlo.and", under, counted);
  }
  Value bad = b.binary("stablehlo.or", over, under);
  // The culprit: the largest index past the end if there is one, else the smallest below the start.
  double min64 = static_cast<double>(std::numeric_limits<int64_t>::min());
  double max64 = 9.2233720368547748e18;
  Value big = b.reduce(b.select(over, v, k(min64)), b.constant(min64, ElementType::kS64), all, "stablehlo.maximum");
  Value small = b.reduce(b.select(under, v, k(max64)), b.constant(max64, ElementType::kS64), all, "stablehlo.minimum");
  Value any_over = b.reduce(over, b.constant(0, ElementType::kPred), all, "stablehlo.or");
  check(bad, message, index_error, b.select(any_over, big, small));
}

Value OpContext::operand(size_t i, ElementType dtype, const std::vector<int64_t>& dims) {
  if (is_tensor(i)) return b.broadcast_to(b.convert(tensor(i), dtype), dims);
  if (inspect(i).isComplexDouble()) {
    // A complex number (z * 1j): a program constant, so its value is part of the structural key.
    TORCH_CHECK(is_complex(dtype), op_name(), ": a complex number cannot be used with a ", element_type_name(dtype), " result");
    c10::complex<double> z = arg(i).toComplexDouble();
    ElementType part = dtype == ElementType::kC128 ? ElementType::kF64 : ElementType::kF32;
    return b.op1("stablehlo.complex", {b.constant(z.real(), part, dims), b.constant(z.imag(), part, dims)},
                 {dtype, dims});
  }
  return runtime_operand(i, dtype, dims);
}

int64_t normalize_dim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  TORCH_CHECK_INDEX(dim >= -r && dim < r, "Dimension out of range (expected to be in range of [", -r, ", ", r - 1,
                    "], but got ", dim, ")");
  return dim < 0 ? dim + r : dim;
}

int64_t OpContext::dim(size_t i, int64_t rank) const { return normalize_dim(integer(i), rank); }

std::vector<int64_t> OpContext::dims(size_t i, int64_t rank) const {
  std::vector<int64_t> out;
  for (int64_t d : ints(i)) {
    if (rank == 0) continue;  // reducing a scalar over dim 0/-1 reduces nothing
    out.push_back(normalize_dim(d, rank));
  }
  if (out.empty() && rank > 0 && (!has(i) || ints(i).empty())) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Value zeros(HloBuilder& b, const TensorType& type) { return b.constant(0, type.dtype, type.dims); }
Value full(HloBuilder& b, double value, const TensorType& type) { return b.constant(value, type.dtype, type.dims); }

namespace {

// Float sums of more than this many terms are taken in stages (see reduce_sum).
constexpr int64_t kPlainSumLimit = 64;
// Terms per partial sum of the first stage.
constexpr int64_t kStageTerms = 32;

Value plain_sum(HloBuilder& b, const Value& v, const std::vector<int64_t>& dims) {
  return b.reduce(v, b.constant(0, v.type.dtype), dims, "stablehlo.add");
}

// The divisor of n closest to `want` within [want / 2, 2 want], or 0.
int64_t divisor_near(int64_t n, int64_t want) {
  for (int64_t delta = 0; delta <= want; ++delta) {
    for (int64_t f : {want - delta, want + delta}) {
      if (f >= std::max<int64_t>(2, want / 2) && f <= 2 * want && f < n && n % f == 0) return f;
    }
  }
  return 0;
}

// Sum over the first `leading` dimensions of `x` (a float tensor with at least one dimension after them) by halving:
// rows [0, k/2) are added to rows [k/2, k) (a zero row pads an odd k) until one row is left. Each step is an
// elementwise add over whole contiguous rows, which XLA-CPU vectorizes along the row; its reduce emitter would
// instead loop over the reduced dimension innermost, one strided load per term (measured 1.6-2.5x slower for
// 1024x256 and 16384x64). The summation tree also makes the rounding error grow with log2(k), not k.
Value sum_leading_by_halving(HloBuilder& b, const Value& x, int64_t leading) {
  const std::vector<int64_t>& dims = x.type.dims;
  std::vector<int64_t> kept(dims.begin() + leading, dims.end());
  int64_t k = 1;
  for (int64_t i = 0; i < leading; ++i) k *= dims[static_cast<size_t>(i)];
  int64_t m = 1;
  for (int64_t d : kept) m *= d;
  if (k == 0) return b.constant(0, x.type.dtype, kept);  // an empty sum
  Value rows = b.reshape(x, {k, m});
  while (k > 1) {
    if (k % 2 != 0) {
      rows = b.pad(rows, b.constant(0, x.type.dtype), {0, 0}, {1, 0}, {0, 0});
      ++k;
    }
    const int64_t half = k / 2;
    rows = b.binary("stablehlo.add", b.slice(rows, {0, 0}, {half, m}), b.slice(rows, {half, 0}, {k, m}));
    k = half;
  }
  return b.reshape(rows, kept);
}

}  // namespace

// XLA-CPU adds the terms of a reduction one after another, so the rounding error of a float32 sum grows with the
// number of terms (measured: 29-33x CPU PyTorch's over several dims of 16k-18k terms). PyTorch's CPU kernels sum in a
// cascade. Large float sums are therefore taken in stages: about kStageTerms terms of the innermost reduced dimensions
// (splitting one of them, zero-padded if it has no suitable divisor) first, then the rest, which recurses.
Value reduce_sum(HloBuilder& b, const Value& v, const std::vector<int64_t>& dims) {
  const ElementType t = v.type.dtype;
  if (!is_floating(t) || is_complex(t)) return plain_sum(b, v, dims);
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  // Leading reduced dimensions with kept ones after them: the rest first, then those by halving.
  size_t leading = 0;
  while (leading < sorted.size() && sorted[leading] == static_cast<int64_t>(leading)) ++leading;
  if (leading > 0 && leading < v.type.dims.size()) {
    Value x = v;
    if (leading < sorted.size()) {
      std::vector<int64_t> rest(sorted.begin() + static_cast<std::ptrdiff_t>(leading), sorted.end());
      x = reduce_sum(b, v, rest);
    }
    return sum_leading_by_halving(b, x, static_cast<int64_t>(leading));
  }
  int64_t terms = 1;
  for (int64_t d : dims) terms *= v.type.dims[d];
  if (terms <= kPlainSumLimit) return plain_sum(b, v, dims);
  // Walk the reduced dimensions from the innermost, moving them to the first stage while it stays near kStageTerms.
  std::vector<int64_t> first_stage;  // dimensions of `x` (after any split) reduced in the first stage
  std::vector<int64_t> second_stage;  // dimensions of `x` reduced in the second
  Value x = v;
  int64_t inner = 1;
  size_t i = sorted.size();
  while (i > 0) {
    const int64_t d = sorted[i - 1];
    const int64_t size = x.type.dims[d];
    if (inner * size <= 2 * kStageTerms) {
      first_stage.push_back(d);
      inner *= size;
      --i;
      continue;
    }
    const int64_t want = std::max<int64_t>(kStageTerms / inner, 1);
    if (want >= 2) {  // split `d` into (size / f, f): the f part joins the first stage
      int64_t f = divisor_near(size, want);
      int64_t padded = size;
      if (f == 0) {
        f = want;
        padded = (size + f - 1) / f * f;
        std::vector<int64_t> zero(x.type.dims.size(), 0), high(x.type.dims.size(), 0);
        high[d] = padded - size;
        x = b.pad(x, b.constant(0, t), zero, high, zero);
      }
      std::vector<int64_t> shape = x.type.dims;
      shape[d] = padded / f;
      shape.insert(shape.begin() + d + 1, f);
      x = b.reshape(x, shape);
      for (int64_t& s : first_stage) ++s;  // dimensions after d moved one to the right
      first_stage.push_back(d + 1);
      second_stage.push_back(d);
      --i;
    }
    break;
  }
  for (size_t j = 0; j < i; ++j) second_stage.push_back(sorted[j]);
  if (second_stage.empty()) return plain_sum(b, x, first_stage);
  std::sort(first_stage.begin(), first_stage.end());
  // The barrier keeps XLA's simplifier from merging the two stages back into one reduction.
  Value partial = plain_sum(b, x, first_stage);
  partial = b.op1("stablehlo.optimization_barrier", {partial}, partial.type);
  // Positions of the second-stage dimensions once the first-stage ones are gone.
  std::vector<int64_t> rest;
  for (int64_t d : second_stage) {
    int64_t removed = 0;
    for (int64_t f : first_stage) removed += f < d ? 1 : 0;
    rest.push_back(d - removed);
  }
  std::sort(rest.begin(), rest.end());
  return reduce_sum(b, partial, rest);
}

Value keep_dims(HloBuilder& b, const Value& reduced, const std::vector<int64_t>& in_dims,
                const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape = in_dims;
  for (int64_t d : dims) shape[d] = 1;
  return b.reshape(reduced, shape);
}

double lowest(ElementType t) {
  switch (t) {
    case ElementType::kPred: return 0;
    case ElementType::kS8: return std::numeric_limits<int8_t>::min();
    case ElementType::kS16: return std::numeric_limits<int16_t>::min();
    case ElementType::kS32: return std::numeric_limits<int32_t>::min();
    case ElementType::kS64: return static_cast<double>(std::numeric_limits<int64_t>::min());
    default: break;
  }
  if (is_unsigned_integer(t)) return 0;
  return -std::numeric_limits<double>::infinity();
}

double highest(ElementType t) {
  switch (t) {
    case ElementType::kPred: return 1;
    case ElementType::kS8: return std::numeric_limits<int8_t>::max();
    case ElementType::kS16: return std::numeric_limits<int16_t>::max();
    case ElementType::kS32: return std::numeric_limits<int32_t>::max();
    case ElementType::kS64: return 9.2233720368547748e18;  // nearest double below 2^63 is not exact; clamp
    case ElementType::kU8: return std::numeric_limits<uint8_t>::max();
    case ElementType::kU16: return std::numeric_limits<uint16_t>::max();
    case ElementType::kU32: return std::numeric_limits<uint32_t>::max();
    default: break;
  }
  return std::numeric_limits<double>::infinity();
}

const std::vector<LoweringRow>& lowering_table() {
  static const std::vector<LoweringRow> table = [] {
    std::vector<LoweringRow> rows;
    add_elementwise_rules(rows);
    add_reduction_rules(rows);
    add_linalg_rules(rows);
    add_linalg_decomp_rules(rows);
    add_fft_rules(rows);
    add_nn_rules(rows);
    add_indexing_rules(rows);
    add_conv_rules(rows);
    add_batch_norm_rules(rows);
    add_amp_rules(rows);
    add_rnn_rules(rows);
    add_spatial_rules(rows);
    add_upsample_aa_rules(rows);
    add_pooling_rules(rows);
    add_grid_sample_rules(rows);
    add_embedding_bag_rules(rows);
    add_segment_reduce_rules(rows);
    add_selection_rules(rows);
    add_flat_index_rules(rows);
    add_special_more_rules(rows);
    compute_in_common_dtype(rows);
    add_foreach_rules(rows);  // last: its rules look up the elementwise rows
    return rows;
  }();
  return table;
}

const LoweringRow* find_row(const std::string& name) {
  static const std::unordered_map<std::string, const LoweringRow*> index = [] {
    std::unordered_map<std::string, const LoweringRow*> m;
    for (const auto& row : lowering_table()) {
      for (const auto& n : row.names) m["aten::" + n] = &row;
    }
    return m;
  }();
  std::string key = name.rfind("aten::", 0) == 0 ? name : "aten::" + name;
  auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

}  // namespace torch_tpu
