// Pooling-like ops beyond conv.cpp's: adaptive max pooling, max unpooling, im2col/col2im (nn.Unfold/Fold) and the
// backward of Tensor.unfold.
#include <algorithm>
#include <string>

#include "lowering/conv/pooling.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

Value kconst(HloBuilder& b, double v, const TensorType& t) { return b.constant(v, t.dtype, t.dims); }

// ---- adaptive max pooling ----

// Every candidate of every adaptive window along dim d of x: dim d (size n) becomes (m, K), where window o spans
// [floor(o*n/m), ceil((o+1)*n/m)) and K is the widest window. Narrower windows repeat their last element, which
// changes neither their max nor the position that wins.
Value adaptive_candidates(HloBuilder& b, const Value& x, int64_t d, int64_t m) {
  int64_t n = x.type.dims[d], widest = 1;
  for (int64_t o = 0; o < m; ++o) widest = std::max(widest, ((o + 1) * n + m - 1) / m - o * n / m);
  TensorType it{ElementType::kS64, {m, widest}};
  Value o = b.iota(it, 0), k = b.iota(it, 1);
  Value start = b.binary("stablehlo.divide", b.binary("stablehlo.multiply", o, kconst(b, static_cast<double>(n), it)),
                         kconst(b, static_cast<double>(m), it));
  Value end = b.binary("stablehlo.add", b.binary("stablehlo.multiply", o, kconst(b, static_cast<double>(n), it)),
                       kconst(b, static_cast<double>(n + m - 1), it));
  end = b.binary("stablehlo.divide", end, kconst(b, static_cast<double>(m), it));
  Value idx = b.binary("stablehlo.minimum", b.binary("stablehlo.add", start, k),
                       b.binary("stablehlo.subtract", end, kconst(b, 1, it)));
  int64_t count = m * widest;
  Ints slice = x.type.dims, out = x.type.dims;
  slice[d] = 1;
  out[d] = count;
  Ints offs;
  for (int64_t i = 0; i < x.type.rank(); ++i) {
    if (i != d) offs.push_back(i);
  }
  std::string attrs = "dimension_numbers = #stablehlo.gather<offset_dims = " + i64_list(offs) +
                      ", collapsed_slice_dims = [" + std::to_string(d) + "], start_index_map = [" + std::to_string(d) +
                      "], index_vector_dim = 1>, slice_sizes = " + i64_array(slice) + ", indices_are_sorted = false";
  Value g = b.op1("stablehlo.gather", {x, b.reshape(idx, {count, 1})}, {x.type.dtype, out}, attrs);
  Ints split = x.type.dims;
  split[d] = widest;
  split.insert(split.begin() + d, m);
  return b.reshape(g, split);
}

// adaptive_max_pool{2,3}d(self, output_size) -> (values, indices)
LoweringRule adaptive_max_rule(size_t nd) {
  return [nd](OpContext& c) -> V {
    HloBuilder& b = c.b;
    Value x = c.tensor(0);
    TensorType o = c.out(0);
    int64_t rank = x.type.rank(), lead = rank - static_cast<int64_t>(nd);
    Value v = x, pos = spatial_positions(b, x.type.dims, nd);
    Ints window_dims;
    for (int64_t i = 0; i < static_cast<int64_t>(nd); ++i) {
      int64_t d = lead + 2 * i;  // earlier spatial dims have each become two
      v = adaptive_candidates(b, v, d, o.dims[lead + i]);
      pos = adaptive_candidates(b, pos, d, o.dims[lead + i]);
      window_dims.push_back(d + 1);
    }
    ElementType t = x.type.dtype;
    Value low = b.constant(lowest(t), t), none = b.constant(4.611686018427387904e18, ElementType::kS64);
    V r = b.op("stablehlo.reduce", {v, pos, low, none}, {{t, o.dims}, {ElementType::kS64, o.dims}},
               "dimensions = " + i64_array(window_dims), {max_with_index_region(b, t)});
    return {r[0], b.convert(r[1], c.out(1).dtype)};
  };
}

// ---- max unpooling ----

// max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices, output_size, stride, padding): each
// value written at the flat position its index names within its (N, C) plane of the output, zeros elsewhere.
LoweringRule max_unpool_rule(size_t nd) {
  return [nd](OpContext& c) -> V {
    HloBuilder& b = c.b;
    TensorType o = c.out(0);
    Value x = c.tensor(0);
    Value idx = b.convert(c.tensor(1), ElementType::kS64);
    TORCH_CHECK(idx.type.dims == x.type.dims, "Expected shape of indices to be same as that of the input tensor (",
                c.arg(1).toTensor().sizes(), ") but got ", c.arg(0).toTensor().sizes());
    int64_t rank = o.rank(), lead = rank - static_cast<int64_t>(nd);
    int64_t planes = 1, plane = 1, values = 1;
    std::string sizes;
    for (int64_t d = 0; d < lead; ++d) planes *= o.dims[d];
    for (int64_t d = lead; d < rank; ++d) {
      plane *= o.dims[d];
      values *= x.type.dims[d];
      sizes += (d > lead ? "x" : "") + std::to_string(o.dims[d]);
    }
    c.check_range(idx, 0, plane, "Found an invalid max index: {value} (output volumes are of size " + sizes + ")",
                  std::nullopt, false);
    if (o.numel() == 0 || x.type.numel() == 0) return {zeros(b, o)};
    TensorType it{ElementType::kS64, {planes, values}};
    Value base = b.binary("stablehlo.multiply", b.iota(it, 0), kconst(b, static_cast<double>(plane), it));
    Value flat = b.reshape(b.binary("stablehlo.add", base, b.reshape(idx, it.dims)), {planes * values, 1});
    TensorType s{o.dtype, {}};
    std::string body = b.region({s, s}, [](HloBuilder&, const V& a) { return V{a[1]}; });
    Value into = zeros(b, {o.dtype, {planes * plane}});
    Value r = b.op1("stablehlo.scatter", {into, flat, b.reshape(b.convert(x, o.dtype), {planes * values})}, into.type,
                    "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [], inserted_window_dims = "
                    "[0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, "
                    "unique_indices = false",
                    {body});
    return {b.reshape(r, o.dims)};
  };
}

// ---- im2col / col2im ----

struct Patches {
  Ints kernel, dilation, padding, stride;
  int64_t blocks(size_t i, int64_t size) const {
    return (size + 2 * padding[i] - (dilation[i] * (kernel[i] - 1) + 1)) / stride[i] + 1;
  }
};

Patches patches(OpContext& c, size_t first) {  // kernel_size, dilation, padding, stride
  return {c.ints(first), c.ints(first + 1), c.ints(first + 2), c.ints(first + 3)};
}

// im2col(self, kernel_size, dilation, padding, stride): (N, C, H, W) -> (N, C*kh*kw, L), one strided slice of the
// padded input per kernel offset (exact: no arithmetic).
V im2col_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  Value x = c.tensor(0);
  bool batched = x.type.rank() == 4;
  if (!batched) x = b.reshape(x, {1, x.type.dims[0], x.type.dims[1], x.type.dims[2]});
  Patches p = patches(c, 1);
  int64_t n = x.type.dims[0], ch = x.type.dims[1], h = x.type.dims[2], w = x.type.dims[3];
  int64_t oh = p.blocks(0, h), ow = p.blocks(1, w);
  if (o.numel() == 0 || oh <= 0 || ow <= 0) return {zeros(b, o)};
  Value xp = b.pad(x, b.constant(0, x.type.dtype), {0, 0, p.padding[0], p.padding[1]},
                    {0, 0, p.padding[0], p.padding[1]}, {0, 0, 0, 0});
  V parts;
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      int64_t y0 = i * p.dilation[0], x0 = j * p.dilation[1];
      Value s = b.slice(xp, {0, 0, y0, x0}, {n, ch, y0 + (oh - 1) * p.stride[0] + 1, x0 + (ow - 1) * p.stride[1] + 1},
                        {1, 1, p.stride[0], p.stride[1]});
      parts.push_back(b.reshape(s, {n, ch, 1, oh * ow}));
    }
  }
  Value cols = parts.size() == 1 ? parts[0] : b.concatenate(parts, 2);
  return {b.reshape(cols, o.dims)};
}

// col2im(self, output_size, kernel_size, dilation, padding, stride): the adjoint of im2col, each column entry added
// back at the image position it was read from. Like the CPU kernel, it sums in the tensor's own dtype, kernel
// offset by kernel offset, so half types round the same way.
V col2im_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  ElementType t = o.dtype;
  Value cols = b.convert(c.tensor(0), t);
  bool batched = cols.type.rank() == 3;
  if (!batched) cols = b.reshape(cols, {1, cols.type.dims[0], cols.type.dims[1]});
  Ints size = c.ints(1);
  Patches p = patches(c, 2);
  int64_t n = cols.type.dims[0], kk = p.kernel[0] * p.kernel[1], ch = cols.type.dims[1] / kk;
  int64_t oh = p.blocks(0, size[0]), ow = p.blocks(1, size[1]);
  int64_t hp = size[0] + 2 * p.padding[0], wp = size[1] + 2 * p.padding[1];
  if (o.numel() == 0 || oh <= 0 || ow <= 0) return {zeros(b, o)};
  Value blocks = b.reshape(cols, {n, ch, kk, oh, ow});
  Value acc = b.constant(0, t, {n, ch, hp, wp});
  Value zero = b.constant(0, t);
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      int64_t k = i * p.kernel[1] + j, y0 = i * p.dilation[0], x0 = j * p.dilation[1];
      Value piece = b.reshape(b.slice(blocks, {0, 0, k, 0, 0}, {n, ch, k + 1, oh, ow}), {n, ch, oh, ow});
      int64_t hy = hp - (y0 + (oh - 1) * p.stride[0] + 1), hx = wp - (x0 + (ow - 1) * p.stride[1] + 1);
      Value spread = b.pad(piece, zero, {0, 0, y0, x0}, {0, 0, hy, hx}, {0, 0, p.stride[0] - 1, p.stride[1] - 1});
      acc = b.binary("stablehlo.add", acc, spread);
    }
  }
  Value img = b.slice(acc, {0, 0, p.padding[0], p.padding[1]}, {n, ch, p.padding[0] + size[0], p.padding[1] + size[1]});
  return {b.reshape(img, o.dims)};
}

// unfold_backward(grad_in, input_sizes, dim, size, step): the adjoint of Tensor.unfold. grad_in is the input's shape
// with `dim` turned into the window count, plus a trailing window axis of `size`; window offset j of every window
// lands at j, j + step, j + 2 step, ... of `dim`, which is one interior-padded copy per offset. Sums in float32 for
// half types and rounds once.
V unfold_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(b, o)};
  Value g = b.convert(c.tensor(0), opmath_type(o.dtype));
  Ints in = c.ints(1);
  if (in.empty()) return {to_result(c, b.reshape(g, {}))};
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t d = c.dim(2, rank), size = c.integer(3), step = c.integer(4);
  Ints windows = in;
  windows[d] = g.type.dims[d];
  int64_t nw = windows[d];
  Value acc = b.constant(0, g.type.dtype, in);
  Value zero = b.constant(0, g.type.dtype);
  for (int64_t j = 0; j < size && nw > 0; ++j) {
    Ints lo(rank + 1, 0), hi = g.type.dims;
    lo[rank] = j;
    hi[rank] = j + 1;
    Value piece = b.reshape(b.slice(g, lo, hi), windows);
    Ints low(rank, 0), high(rank, 0), interior(rank, 0);
    low[d] = j;
    interior[d] = step - 1;
    high[d] = in[d] - (j + (nw - 1) * step + 1);
    acc = b.binary("stablehlo.add", acc, b.pad(piece, zero, low, high, interior));
  }
  return {to_result(c, acc)};
}

}  // namespace

void add_pooling_rules(Rows& rows) {
  rows.push_back({{"adaptive_max_pool2d", "adaptive_max_pool2d.out"}, adaptive_max_rule(2)});
  rows.push_back({{"adaptive_max_pool3d", "adaptive_max_pool3d.out"}, adaptive_max_rule(3)});
  rows.push_back({{"max_unpool2d", "max_unpool2d.out"}, max_unpool_rule(2)});
  rows.push_back({{"max_unpool3d", "max_unpool3d.out"}, max_unpool_rule(3)});
  rows.push_back({{"im2col", "im2col.out"}, im2col_rule});
  rows.push_back({{"col2im", "col2im.out"}, col2im_rule});
  rows.push_back({{"unfold_backward", "unfold_backward.out"}, unfold_backward_rule});
}

}  // namespace torch_tpu
