#include "lowering/lib/op_context.h"

#include <ATen/Dispatch_v2.h>

#include <ATen/native/TypeProperties.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "lowering/lib/common_dtype.h"
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
    case c10::ScalarType::Float8_e5m2: return ElementType::kF8E5M2;
    case c10::ScalarType::Float8_e4m3fn: return ElementType::kF8E4M3FN;
    case c10::ScalarType::Float8_e5m2fnuz: return ElementType::kF8E5M2FNUZ;
    case c10::ScalarType::Float8_e4m3fnuz: return ElementType::kF8E4M3FNUZ;
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

c10::Scalar cpu_scalar_value(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu() && t.numel() == 1, "expected a one-element CPU tensor, got ", t.numel(),
              " elements on ", t.device());
  return AT_DISPATCH_V2(t.scalar_type(), "cpu_scalar_value", AT_WRAP([&] {
                          return c10::Scalar(*static_cast<const scalar_t*>(t.const_data_ptr()));
                        }),
                        AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool);
}

double OpContext::scalar(size_t i) const {
  const c10::IValue& v = arg(i);
  if (v.isTensor()) return cpu_scalar_value(v.toTensor()).toDouble();
  return v.toScalar().toDouble();
}

int64_t OpContext::integer(size_t i) const {
  const c10::IValue& v = arg(i);
  if (v.isTensor()) return cpu_scalar_value(v.toTensor()).toLong();
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

// A float sum of at most this many terms is one reduce; larger ones are halved first (see reduce_sum).
constexpr int64_t kPlainSumLimit = 64;

Value plain_sum(HloBuilder& b, const Value& v, const std::vector<int64_t>& dims) {
  return b.reduce(v, b.constant(0, v.type.dtype), dims, "stablehlo.add");
}

// `x` with dimension `d` halved: its upper half (a zero slice pads an odd size) added to its lower half.
Value halve(HloBuilder& b, Value x, int64_t d) {
  const size_t rank = x.type.dims.size();
  const auto dim = static_cast<size_t>(d);
  if (x.type.dims[dim] % 2 != 0) {
    std::vector<int64_t> zero(rank, 0), high(rank, 0);
    high[dim] = 1;
    x = b.pad(x, b.constant(0, x.type.dtype), zero, high, zero);
  }
  const int64_t half = x.type.dims[dim] / 2;
  std::vector<int64_t> start(rank, 0), mid = x.type.dims, limit = x.type.dims;
  mid[dim] = half;
  start[dim] = half;
  return b.binary("stablehlo.add", b.slice(x, std::vector<int64_t>(rank, 0), mid), b.slice(x, start, limit));
}

// Up to this many halvings are taken in one step: the 2^levels blocks are read directly and added as the halvings
// would add them, so every intermediate has one use and XLA fuses the step into one loop.
constexpr int kFoldLevels = 4;

// How many halvings of dimension `d` (an even size, `terms` terms in all) one fold takes: while the size stays even,
// at most kFoldLevels, and none past `limit` terms.
int fold_levels(int64_t size, int64_t terms, int64_t limit) {
  int levels = 0;
  while (levels < kFoldLevels && size > 1 && size % 2 == 0 && terms > limit) {
    size /= 2;
    terms /= 2;
    ++levels;
  }
  return levels;
}

// `x` with dimension `d` halved `levels` times, in the pairing of that many halve() calls (the size stays even): the
// blocks b_0..b_{2^levels - 1} along d are paired as halving pairs them, b_j with b_{j + half}, level by level.
Value fold(HloBuilder& b, const Value& x, int64_t d, int levels) {
  const size_t rank = x.type.dims.size();
  const auto dim = static_cast<size_t>(d);
  const int64_t blocks = int64_t{1} << levels, width = x.type.dims[dim] / blocks;
  std::vector<Value> parts;
  for (int64_t j = 0; j < blocks; ++j) {
    std::vector<int64_t> start(rank, 0), limit = x.type.dims;
    start[dim] = j * width;
    limit[dim] = (j + 1) * width;
    parts.push_back(b.slice(x, start, limit));
  }
  while (parts.size() > 1) {
    const size_t half = parts.size() / 2;
    std::vector<Value> next;
    for (size_t j = 0; j < half; ++j) next.push_back(b.binary("stablehlo.add", parts[j], parts[j + half]));
    parts = std::move(next);
  }
  return parts[0];
}

// One or more halvings of dimension `d`, as many as fold_levels allows (one, with a zero pad, for an odd size).
Value halve_some(HloBuilder& b, const Value& x, int64_t d, int64_t terms, int64_t limit) {
  const int levels = fold_levels(x.type.dims[static_cast<size_t>(d)], terms, limit);
  return levels == 0 ? halve(b, x, d) : fold(b, x, d, levels);
}

// Sum over the first `leading` dimensions of `x` (a float tensor with at least one dimension after them): with the
// rows flattened to [k, m], the upper half of the rows is added to the lower half until one row is left.
Value sum_leading_by_halving(HloBuilder& b, const Value& x, int64_t leading) {
  const std::vector<int64_t>& dims = x.type.dims;
  std::vector<int64_t> kept(dims.begin() + leading, dims.end());
  int64_t k = 1;
  for (int64_t i = 0; i < leading; ++i) k *= dims[static_cast<size_t>(i)];
  int64_t m = 1;
  for (int64_t d : kept) m *= d;
  if (k == 0) return b.constant(0, x.type.dtype, kept);  // an empty sum
  Value rows = b.reshape(x, {k, m});
  while (rows.type.dims[0] > 1) rows = halve_some(b, rows, 0, rows.type.dims[0], 1);
  return b.reshape(rows, kept);
}

}  // namespace

// Float sums are taken by halving: a reduced dimension's upper half is added to its lower half, elementwise, until few
// terms are left. Two reasons:
// - Speed. XLA-CPU's reduce keeps the reduced loop innermost: over a leading (major) dimension that is one strided
//   load per term, with the fused producer chain (a GELU or LayerNorm backward) recomputed inside that gather loop;
//   over a long trailing one, a chain of dependent scalar adds. Halving steps are elementwise adds over contiguous
//   blocks, which XLA-CPU vectorizes. Measured alone: 1024x256 sum(0) 470-610 -> 224-248 us, 16384x64 sum(0)
//   1940-2250 -> 650-760 us.
// - Accuracy. XLA-CPU adds a reduction's terms one after another, so the rounding error of a long float32 sum grows
//   with the number of terms (measured: 29-33x CPU PyTorch's cascade sum over several dims of 16k-18k terms). A
//   halving tree's grows with log2 of it; the error is now at or below CPU's.
// Leading reduced dimensions (bias, LayerNorm-weight and BatchNorm gradients) are halved down to one row, after the
// other reduced dimensions are summed; other sums are halved from their outermost reduced dimension inwards until
// at most kPlainSumLimit terms are left for one reduce, which then reads contiguous memory.
Value reduce_sum(HloBuilder& b, const Value& v, const std::vector<int64_t>& dims) {
  const ElementType t = v.type.dtype;
  if (!is_floating(t) || is_complex(t)) return plain_sum(b, v, dims);
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
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
  for (int64_t d : sorted) terms *= v.type.dims[static_cast<size_t>(d)];
  Value x = v;
  for (int64_t d : sorted) {
    while (terms > kPlainSumLimit && x.type.dims[static_cast<size_t>(d)] > 1) {
      const int64_t before = x.type.dims[static_cast<size_t>(d)];
      x = halve_some(b, x, d, terms, kPlainSumLimit);
      terms = terms / before * x.type.dims[static_cast<size_t>(d)];
    }
  }
  return plain_sum(b, x, sorted);
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

}  // namespace torch_tpu
