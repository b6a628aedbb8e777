#include "lowering/lib/views.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "runtime/error.h"

namespace torch_tpu {
namespace {

struct DenseLayout {
  std::vector<int64_t> kept;   // view dims that matter (size > 1, stride != 0), in view order
  std::vector<int64_t> order;  // `kept` sorted outermost (largest stride) first
  int64_t step = 1;            // the innermost stride
  bool dense = false;          // the kept dims tile [offset, offset + span) with stride `step`
};

DenseLayout analyse(const ViewSpec& v) {
  DenseLayout d;
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] > 1 && v.strides[i] != 0) d.kept.push_back(static_cast<int64_t>(i));
  }
  d.order = d.kept;
  std::stable_sort(d.order.begin(), d.order.end(), [&](int64_t a, int64_t b) { return v.strides[a] > v.strides[b]; });
  if (d.order.empty()) {
    d.dense = true;
    return d;
  }
  d.step = v.strides[d.order.back()];
  if (d.step <= 0) return d;
  for (size_t k = 0; k + 1 < d.order.size(); ++k) {
    int64_t outer = v.strides[d.order[k]];
    int64_t inner = v.strides[d.order[k + 1]] * v.sizes[d.order[k + 1]];
    if (outer != inner) return d;
  }
  d.dense = true;
  return d;
}

// Flat storage indices of every view element, shaped view.sizes (s64).
Value element_indices(HloBuilder& b, const ViewSpec& v) {
  TensorType t{ElementType::kS64, v.sizes};
  Value idx = b.constant(static_cast<double>(v.offset), ElementType::kS64, v.sizes);
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] <= 1 || v.strides[i] == 0) continue;
    Value term = b.binary("stablehlo.multiply", b.iota(t, static_cast<int64_t>(i)),
                          b.constant(static_cast<double>(v.strides[i]), ElementType::kS64, v.sizes));
    idx = b.binary("stablehlo.add", idx, term);
  }
  return idx;
}

// A view whose kept strides, outermost first, each divide the next-outer one with room for its size (t_i % t_(i+1)
// == 0 and t_i >= t_(i+1) s_(i+1)) is a box within the storage: from the offset, the storage reshaped to
// [s_0, t_0 / t_1, ..., t_(k-2) / t_(k-1), t_(k-1)] holds the view as the sub-box [0, s_i) x ... x [0, 1). q/k/v
// split off one projection and transposed per head are such views.
struct Box {
  std::vector<int64_t> dims;     // the reshaped storage segment
  std::vector<int64_t> picked;   // the view's sub-box: its kept sizes, outermost first (then the trailing 1)
  int64_t length = 0;            // elements of the segment: dims[0] * the outermost stride
};

std::optional<Box> box_of(const ViewSpec& v, const DenseLayout& d, int64_t storage_size) {
  const size_t k = d.order.size();
  if (k == 0 || v.offset < 0) return std::nullopt;
  int64_t last = v.offset;  // the view's last element must lie in the storage (else the gather path reports it)
  for (int64_t dim : d.kept) last += (v.sizes[dim] - 1) * v.strides[dim];
  if (last >= storage_size) return std::nullopt;
  Box box;
  box.dims.push_back(v.sizes[d.order[0]]);
  for (size_t i = 0; i + 1 < k; ++i) {
    const int64_t outer = v.strides[d.order[i]], inner = v.strides[d.order[i + 1]];
    if (inner <= 0 || outer % inner != 0 || outer / inner < v.sizes[d.order[i + 1]]) return std::nullopt;
    box.dims.push_back(outer / inner);
  }
  const int64_t innermost = v.strides[d.order[k - 1]];
  if (innermost <= 0) return std::nullopt;
  box.dims.push_back(innermost);
  for (int64_t dim : d.order) box.picked.push_back(v.sizes[dim]);
  box.picked.push_back(1);
  box.length = box.dims[0] * v.strides[d.order[0]];
  return box;
}

// Where the box is cut from the storage: the segment [base, base + length) reshaped to box.dims, the view's sub-box at
// `start` within it, and the zero padding past the storage's end the segment needs (none when it can be avoided).
struct BoxPlacement {
  int64_t base = 0;
  std::vector<int64_t> start;
  int64_t padding = 0;
};

// A segment [offset, offset + length) that runs past the storage's end is moved back by the overrun when the overrun,
// read as box coordinates, still leaves room for the view's sub-box (k and v split off a fused qkv projection: the
// segment of k starts one head later and ends one head's width past the storage). Otherwise it is zero-padded; XLA-CPU
// runs a 1-D pad of the whole storage as a scalar loop with a bounds check per element.
BoxPlacement place_box(const ViewSpec& v, const Box& box, int64_t storage_size) {
  BoxPlacement p;
  p.base = v.offset;
  p.start.assign(box.dims.size(), 0);
  const int64_t overrun = v.offset + box.length - storage_size;
  if (overrun <= 0) return p;
  std::vector<int64_t> coords(box.dims.size(), 0);
  int64_t rest = overrun;
  for (size_t i = box.dims.size(); i-- > 0;) {
    coords[i] = rest % box.dims[i];
    rest /= box.dims[i];
  }
  bool fits = rest == 0 && overrun <= v.offset;
  for (size_t i = 0; fits && i < coords.size(); ++i) fits = coords[i] + box.picked[i] <= box.dims[i];
  if (!fits) {
    p.padding = overrun;
    return p;
  }
  p.base = v.offset - overrun;
  p.start = coords;
  return p;
}

// The segment of `p` reshaped to the box (the padding, if any, is never selected).
Value box_segment(HloBuilder& b, const Value& storage, const Box& box, const BoxPlacement& p) {
  Value padded = p.padding > 0 ? b.pad(storage, b.constant(0, storage.type.dtype), {0}, {p.padding}, {0}) : storage;
  return b.reshape(b.slice(padded, {p.base}, {p.base + box.length}), box.dims);
}

// Permutation from the outermost-first order of the kept dims to their view order, and back.
std::vector<int64_t> to_view_order(const DenseLayout& d) {
  std::vector<int64_t> perm;
  for (int64_t dim : d.kept) perm.push_back(std::find(d.order.begin(), d.order.end(), dim) - d.order.begin());
  return perm;
}
std::vector<int64_t> to_storage_order(const DenseLayout& d) {
  std::vector<int64_t> perm;
  for (int64_t dim : d.order) perm.push_back(std::find(d.kept.begin(), d.kept.end(), dim) - d.kept.begin());
  return perm;
}

Value read_box(HloBuilder& b, const Value& storage, const ViewSpec& v, const DenseLayout& d, const Box& box) {
  std::vector<int64_t> kept_sizes(box.picked.begin(), box.picked.end() - 1);
  const BoxPlacement p = place_box(v, box, storage.type.dims[0]);
  std::vector<int64_t> limit = p.start;
  for (size_t i = 0; i < limit.size(); ++i) limit[i] += box.picked[i];
  Value picked = b.slice(box_segment(b, storage, box, p), p.start, limit);
  return b.broadcast_in_dim(b.transpose(b.reshape(picked, kept_sizes), to_view_order(d)), v.sizes, d.kept);
}

// `update` (shaped v.sizes, no broadcast dims) written into the box, and the segment spliced back into the storage.
Value write_box(HloBuilder& b, const Value& storage, const Value& update, const ViewSpec& v, const DenseLayout& d,
                const Box& box) {
  std::vector<int64_t> kept_sizes;
  for (int64_t dim : d.kept) kept_sizes.push_back(v.sizes[dim]);
  Value u = b.reshape(b.transpose(b.reshape(update, kept_sizes), to_storage_order(d)), box.picked);
  const BoxPlacement p = place_box(v, box, storage.type.dims[0]);
  std::vector<Value> starts;
  for (int64_t c : p.start) starts.push_back(b.constant(static_cast<double>(c), ElementType::kS64));
  Value boxed = b.dynamic_update_slice(box_segment(b, storage, box, p), u, starts);
  const int64_t kept_length = box.length - p.padding;  // drop any padding
  Value flat = b.reshape(boxed, {box.length});
  if (kept_length < box.length) flat = b.slice(flat, {0}, {kept_length});
  return b.dynamic_update_slice(storage, flat, {b.constant(static_cast<double>(p.base), ElementType::kS64)});
}

// `into` (1-D) with the element at each flat index of view `v` replaced by the matching one of `values` ([numel]).
Value scatter_elements(HloBuilder& b, const Value& into, const ViewSpec& v, const Value& values) {
  Value idx = b.reshape(element_indices(b, v), {v.numel(), 1});
  TensorType scalar{into.type.dtype, {}};
  std::string body = b.region({scalar, scalar}, [](HloBuilder&, const std::vector<Value>& args) {
    return std::vector<Value>{args[1]};
  });
  return b.op1("stablehlo.scatter", {into, idx, values}, into.type,
               "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
               "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, "
               "unique_indices = false",
               {body});
}

// A view with a broadcast dim names some storage elements at several positions (x.expand(2, 3)). As on the CPU, a
// position the update leaves as it was does not overwrite one it changed (index_put_ into one row of an expanded
// tensor changes every row); among positions that change one element differently, any may win, as on the CPU.
// One scatter of (value, changed) pairs whose combiner keeps a changed value.
Value write_broadcast_view(HloBuilder& b, const Value& storage, const Value& update, const ViewSpec& v) {
  const int64_t n = v.numel();
  const TensorType flags{ElementType::kPred, storage.type.dims};
  Value upd = b.reshape(update, {n});
  Value changed = b.compare(CompareDirection::kNe, upd, b.reshape(read_view(b, storage, v), {n}));
  Value idx = b.reshape(element_indices(b, v), {n, 1});
  const TensorType value{storage.type.dtype, {}}, flag{ElementType::kPred, {}};
  std::string body = b.region({value, flag, value, flag}, [](HloBuilder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.select(a[3], a[2], a[0]), r.binary("stablehlo.or", a[1], a[3])};
  });
  return b.op("stablehlo.scatter", {storage, b.constant(0, ElementType::kPred, flags.dims), idx, upd, changed},
              {storage.type, flags},
              "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
              "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, "
              "unique_indices = false",
              {body})[0];
}

std::string gather_dims() {
  return "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
         "index_vector_dim = 1>, slice_sizes = array<i64: 1>, indices_are_sorted = false";
}

}  // namespace

int64_t ViewSpec::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Value read_view(HloBuilder& b, const Value& storage, const ViewSpec& v) {
  int64_t n = v.numel();
  ElementType dtype = storage.type.dtype;
  if (n == 0) return b.constant(0, dtype, v.sizes);
  DenseLayout d = analyse(v);
  if (d.dense) {
    int64_t span = 1;
    for (int64_t i : d.kept) span += (v.sizes[i] - 1) * v.strides[i];
    if (v.offset < 0 || v.offset + span > storage.type.dims[0]) {
      fail(ErrorCode::kOutOfRange, "read_view",
           "view (sizes " + i64_list(v.sizes) + ", strides " + i64_list(v.strides) + ", offset " +
               std::to_string(v.offset) + ") reaches outside its storage of " + std::to_string(storage.type.dims[0]) +
               " elements");
    }
    Value flat = b.slice(storage, {v.offset}, {v.offset + span}, {d.step});  // Π kept sizes elements
    std::vector<int64_t> sorted_sizes;
    for (int64_t i : d.order) sorted_sizes.push_back(v.sizes[i]);
    Value sorted = b.reshape(flat, sorted_sizes);
    Value kept = b.transpose(sorted, to_view_order(d));
    return b.broadcast_in_dim(kept, v.sizes, d.kept);
  }
  if (std::optional<Box> box = box_of(v, d, storage.type.dims[0])) return read_box(b, storage, v, d, *box);
  Value idx = b.reshape(element_indices(b, v), {n, 1});
  Value gathered = b.op1("stablehlo.gather", {storage, idx}, {dtype, {n}}, gather_dims());
  return b.reshape(gathered, v.sizes);
}

Value write_view(HloBuilder& b, const Value& storage, const Value& update, const ViewSpec& v) {
  int64_t n = v.numel();
  int64_t total = storage.type.dims[0];
  if (n == 0) return storage;
  DenseLayout d = analyse(v);
  bool broadcast = false;
  for (size_t i = 0; i < v.sizes.size(); ++i) broadcast = broadcast || (v.sizes[i] > 1 && v.strides[i] == 0);
  if (d.dense && d.step == 1 && !broadcast) {
    // Dense target: lay the update out in storage order, then splice it in.
    std::vector<int64_t> kept_sizes;
    for (int64_t i : d.kept) kept_sizes.push_back(v.sizes[i]);
    Value u = b.reshape(update, kept_sizes);
    if (d.order != d.kept) u = b.transpose(u, to_storage_order(d));
    Value flat = b.reshape(u, {n});
    if (v.offset == 0 && n == total) return flat;
    Value start = b.constant(static_cast<double>(v.offset), ElementType::kS64);
    return b.dynamic_update_slice(storage, flat, {start});
  }
  if (broadcast) return write_broadcast_view(b, storage, update, v);
  if (std::optional<Box> box = box_of(v, d, total)) return write_box(b, storage, update, v, d, *box);
  // Anything else: scatter every element to its flat index.
  return scatter_elements(b, storage, v, b.reshape(update, {n}));
}

Value write_view_apart(HloBuilder& b, const Value& storage, const Value& update, const ViewSpec& v) {
  const int64_t n = v.numel();
  const int64_t total = storage.type.dims[0];
  if (n == 0) return storage;
  const ElementType dtype = storage.type.dtype;
  DenseLayout d = analyse(v);
  bool broadcast = false;
  for (size_t i = 0; i < v.sizes.size(); ++i) broadcast = broadcast || (v.sizes[i] > 1 && v.strides[i] == 0);
  if (broadcast) return write_broadcast_view(b, storage, update, v);
  Value placed, mask;
  if (d.dense && d.step > 0) {
    // The update in storage order, spread `step` apart from the offset: a pad, no scatter.
    std::vector<int64_t> kept_sizes;
    for (int64_t i : d.kept) kept_sizes.push_back(v.sizes[i]);
    Value u = b.reshape(update, kept_sizes);
    if (d.order != d.kept) u = b.transpose(u, to_storage_order(d));
    const int64_t span = (n - 1) * d.step + 1;
    const std::vector<int64_t> low{v.offset}, high{total - v.offset - span}, interior{d.step - 1};
    placed = b.pad(b.reshape(u, {n}), b.constant(0, dtype), low, high, interior);
    mask = b.pad(b.constant(1, ElementType::kPred, {n}), b.constant(0, ElementType::kPred), low, high, interior);
  } else {
    placed = scatter_elements(b, b.constant(0, dtype, {total}), v, b.reshape(update, {n}));
    mask = scatter_elements(b, b.constant(0, ElementType::kPred, {total}), v, b.constant(1, ElementType::kPred, {n}));
  }
  return b.select(mask, placed, storage);
}

Value reinterpret_storage(HloBuilder& b, const Value& raw, ElementType dtype, int64_t numel) {
  ElementType from = raw.type.dtype;
  if (from == dtype) return b.reshape(raw, {numel});
  // Complex elements are (real, imaginary) pairs of their part type; bitcasts do not take complex types.
  if (is_complex(from)) {
    ElementType part = from == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64;
    int64_t n = raw.type.dims[0];
    Value re = b.reshape(b.op1("stablehlo.real", {raw}, {part, {n}}), {n, 1});
    Value im = b.reshape(b.op1("stablehlo.imag", {raw}, {part, {n}}), {n, 1});
    Value pairs = b.reshape(b.concatenate({re, im}, 1), {2 * n});
    return reinterpret_storage(b, pairs, dtype, numel);
  }
  if (is_complex(dtype)) {
    ElementType part = dtype == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64;
    Value pairs = b.reshape(reinterpret_storage(b, raw, part, 2 * numel), {numel, 2});
    Value re = b.reshape(b.slice(pairs, {0, 0}, {numel, 1}), {numel});
    Value im = b.reshape(b.slice(pairs, {0, 1}, {numel, 2}), {numel});
    return b.op1("stablehlo.complex", {re, im}, {dtype, {numel}});
  }
  if (from == ElementType::kPred) return reinterpret_storage(b, b.convert(raw, ElementType::kU8), dtype, numel);
  if (dtype == ElementType::kPred) {
    Value bytes = reinterpret_storage(b, raw, ElementType::kU8, numel);
    return b.compare(CompareDirection::kNe, bytes, b.constant(0, ElementType::kU8, {numel}));
  }
  int64_t a = element_size(from);
  int64_t c = element_size(dtype);
  int64_t raw_n = raw.type.dims[0];
  if (raw_n * a != numel * c) {
    fail(ErrorCode::kInvalidArgument, "reinterpret_storage",
         "storage of " + std::to_string(raw_n * a) + " bytes cannot hold " + std::to_string(numel) + " x " +
             mlir_name(dtype));
  }
  if (a == c) return b.op1("stablehlo.bitcast_convert", {raw}, {dtype, {numel}});
  if (a > c) {  // one wide element becomes a/c narrow ones
    Value parts = b.op1("stablehlo.bitcast_convert", {raw}, {dtype, {raw_n, a / c}});
    return b.reshape(parts, {numel});
  }
  Value grouped = b.reshape(raw, {numel, c / a});
  return b.op1("stablehlo.bitcast_convert", {grouped}, {dtype, {numel}});
}

}  // namespace torch_tpu
