// Convolutions (forward, transposed, backward) and pooling (max with indices, average, adaptive average), for any
// number of spatial dims. Layouts are PyTorch's: input N, C, spatial...; weight O, I/groups, spatial...
//
// Convolutions are served at `convolution` (and `_convolution`) / `convolution_backward`, which have meta kernels;
// the `*_overrideable` forms PyTorch reaches through `_convolution`'s default kernel have none (their Meta kernel
// raises, so they would fall back), and their rows only serve direct calls once a meta kernel exists.
#include <cmath>
#include <string>

#include "lowering/lib/host_kernels.h"
#include "lowering/lib/op_context.h"
#include "lowering/conv/pooling.h"

namespace torch_tpu {

using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

// Flat position of each element within its spatial plane (h*W + w), as PyTorch's max pooling indices count.
Value spatial_positions(HloBuilder& b, const Ints& dims, size_t nd) {
  TensorType t{ElementType::kS64, dims};
  int64_t rank = static_cast<int64_t>(dims.size()), scale = 1;
  Value pos = zeros(b, t);
  for (int64_t d = rank - 1; d >= rank - static_cast<int64_t>(nd); --d) {
    Value term = b.binary("stablehlo.multiply", b.iota(t, d), b.constant(static_cast<double>(scale), t.dtype, dims));
    pos = b.binary("stablehlo.add", pos, term);
    scale *= dims[d];
  }
  return pos;
}

// (value, position) pairs combined as PyTorch's max pooling does: the larger value wins, NaN beats numbers, ties
// go to the lower position (the first in scan order), except between NaNs, where PyTorch's loop keeps the last.
std::string max_with_index_region(HloBuilder& b, ElementType t) {
  TensorType vs{t, {}}, is{ElementType::kS64, {}};
  return b.region({vs, is, vs, is}, [&](HloBuilder& r, const V& a) {
    Value gt = r.compare(CompareDirection::kGt, a[0], a[2]);
    Value eq = r.compare(CompareDirection::kEq, a[0], a[2]);
    if (is_floating(t)) {
      Value an = r.compare(CompareDirection::kNe, a[0], a[0]), bn = r.compare(CompareDirection::kNe, a[2], a[2]);
      Value b_num = r.unary("stablehlo.not", bn);
      gt = r.binary("stablehlo.or", gt, r.binary("stablehlo.and", an, b_num));
      eq = r.binary("stablehlo.or", eq, r.binary("stablehlo.and", an, bn));
    }
    // Ties go to the first position, except between NaNs: PyTorch's loop takes every NaN it meets, so the last.
    Value first = r.compare(CompareDirection::kLt, a[1], a[3]);
    if (is_floating(t)) {
      Value both_nan = r.binary("stablehlo.and", r.compare(CompareDirection::kNe, a[0], a[0]),
                                r.compare(CompareDirection::kNe, a[2], a[2]));
      first = r.select(both_nan, r.compare(CompareDirection::kGt, a[1], a[3]), first);
    }
    Value take_a = r.binary("stablehlo.or", gt, r.binary("stablehlo.and", eq, first));
    return V{r.select(take_a, a[0], a[2]), r.select(take_a, a[1], a[3])};
  });
}

// Each gradient of g (..., o...) added into a zero tensor shaped `x_dims` at the flat spatial position its index
// names (max pooling's backward; overlapping windows accumulate).
Value scatter_plane_grads(HloBuilder& b, const Value& g, const Value& indices, const Ints& x_dims, size_t nd) {
  Value idx = b.convert(indices, ElementType::kS64);
  int64_t rank = static_cast<int64_t>(x_dims.size()), lead = rank - static_cast<int64_t>(nd);
  int64_t planes = 1, plane = 1, windows = 1;
  for (int64_t d = 0; d < lead; ++d) planes *= x_dims[d];
  for (int64_t d = lead; d < rank; ++d) {
    plane *= x_dims[d];
    windows *= g.type.dims[d];
  }
  TensorType it{ElementType::kS64, {planes, windows}};
  Value base = b.binary("stablehlo.multiply", b.iota(it, 0), b.constant(static_cast<double>(plane), it.dtype, it.dims));
  Value flat = b.reshape(b.binary("stablehlo.add", base, b.reshape(idx, it.dims)), {planes * windows, 1});
  TensorType s{g.type.dtype, {}};
  std::string body = b.region({s, s}, [](HloBuilder& r, const V& a) { return V{r.binary("stablehlo.add", a[0], a[1])}; });
  Value into = zeros(b, {g.type.dtype, {planes * plane}});
  Value r = b.op1("stablehlo.scatter", {into, flat, b.reshape(g, {planes * windows})}, into.type,
                  "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [], inserted_window_dims = "
                  "[0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, "
                  "unique_indices = false",
                  {body});
  return b.reshape(r, x_dims);
}

namespace {

using Rows = std::vector<LoweringRow>;
// A per-spatial-dim parameter: PyTorch accepts one value for all dims, and empty for the default.
Ints expand(const Ints& v, size_t n, const Ints& fallback) {
  if (v.empty()) return fallback;
  if (v.size() == 1) return Ints(n, v[0]);
  TORCH_CHECK(v.size() == n, "expected ", n, " values per spatial dim, got ", v.size());
  return v;
}

Ints repeat(size_t n, int64_t value) { return Ints(n, value); }

// Half-precision convolutions and averages accumulate in f32, as PyTorch's CPU kernels do.
ElementType accumulation_type(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kBF16 ? ElementType::kF32 : t;
}

std::string padding_attr(const Ints& lo, const Ints& hi) {
  std::string s = "dense<[";
  for (size_t i = 0; i < lo.size(); ++i) {
    s += (i ? ", [" : "[") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  }
  return s + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>";
}

// ---------------------------------------------------------------------------------------------------------------
// Convolution.

struct Window {
  Ints stride, lo, hi, lhs_dilation, rhs_dilation;
};

// `[b, f, 0, 1]`-style layout of one operand.
std::string layout(const char* first, const char* second, size_t nd) {
  std::string s = std::string("[") + first + ", " + second;
  for (size_t i = 0; i < nd; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

// One stablehlo.convolution. `weight_grad` picks the layout used for weight gradients: the lhs batch (N) is the
// contracted feature dim, the rhs batch is its input feature, and the output is written as O, I, spatial.
Value emit_conv(HloBuilder& b, const Value& lhs, const Value& rhs, const TensorType& out, const Window& w,
                int64_t feature_groups, int64_t batch_groups, bool weight_grad) {
  size_t nd = w.stride.size();
  std::string dn = weight_grad ? layout("f", "b", nd) + "x" + layout("i", "o", nd) + "->" + layout("f", "b", nd)
                               : layout("b", "f", nd) + "x" + layout("o", "i", nd) + "->" + layout("b", "f", nd);
  std::string attrs = "window_strides = " + i64_array(w.stride) + ", padding = " + padding_attr(w.lo, w.hi) +
                      ", lhs_dilation = " + i64_array(w.lhs_dilation) + ", rhs_dilation = " +
                      i64_array(w.rhs_dilation) + ", dimension_numbers = #stablehlo.conv<" + dn +
                      ">, feature_group_count = " + std::to_string(feature_groups) +
                      " : i64, batch_group_count = " + std::to_string(batch_groups) + " : i64" + b.precision_attr();
  return b.op1("stablehlo.convolution", {lhs, rhs}, out, attrs);
}

struct ConvParams {
  Ints stride, padding, dilation;
  int64_t groups = 1;
};

int64_t extent(int64_t k, int64_t d) { return d * (k - 1) + 1; }  // span of a dilated kernel

// The plain (non-transposed) convolution: x (N, C, n...) with w (O, C/g, k...).
Value conv_forward(HloBuilder& b, const Value& x, const Value& w, const ConvParams& p) {
  size_t nd = p.stride.size();
  TensorType out{x.type.dtype, {x.type.dims[0], w.type.dims[0]}};
  for (size_t i = 0; i < nd; ++i) {
    int64_t n = x.type.dims[2 + i], k = w.type.dims[2 + i];
    out.dims.push_back((n + 2 * p.padding[i] - extent(k, p.dilation[i])) / p.stride[i] + 1);
  }
  Window win{p.stride, p.padding, p.padding, repeat(nd, 1), p.dilation};
  return emit_conv(b, x, w, out, win, p.groups, 1, false);
}

// The adjoint of conv_forward with weight w, mapping g (N, O, o...) to (N, C, n...) where `in_dims` = (N, C, n...):
// the gradient of a convolution's input, and the forward of a transposed convolution. It is a convolution of g
// dilated by the stride with the spatially flipped kernel whose in/out features are swapped within each group.
Value conv_adjoint(HloBuilder& b, const Value& g, const Value& w, const ConvParams& p, const Ints& in_dims) {
  size_t nd = p.stride.size();
  const Ints& wd = w.type.dims;  // (O, C/g, k...)
  int64_t groups = p.groups, o_per = wd[0] / groups, c_per = wd[1];
  Value k = w;
  if (groups > 1) {
    Ints split{groups, o_per, c_per};
    split.insert(split.end(), wd.begin() + 2, wd.end());
    Ints perm{0, 2, 1};
    for (size_t i = 0; i < nd; ++i) perm.push_back(3 + static_cast<int64_t>(i));
    k = b.transpose(b.reshape(k, split), perm);
    Ints merged{groups * c_per, o_per};
    merged.insert(merged.end(), wd.begin() + 2, wd.end());
    k = b.reshape(k, merged);
  } else {
    Ints perm{1, 0};
    for (size_t i = 0; i < nd; ++i) perm.push_back(2 + static_cast<int64_t>(i));
    k = b.transpose(k, perm);
  }
  Ints spatial;
  for (size_t i = 0; i < nd; ++i) spatial.push_back(2 + static_cast<int64_t>(i));
  k = b.op1("stablehlo.reverse", {k}, k.type, "dimensions = " + i64_array(spatial));

  Window win{repeat(nd, 1), {}, {}, p.stride, p.dilation};
  for (size_t i = 0; i < nd; ++i) {
    int64_t ext = extent(wd[2 + i], p.dilation[i]), o = g.type.dims[2 + i], n = in_dims[2 + i];
    win.lo.push_back(ext - 1 - p.padding[i]);
    // Whatever makes the result n long: output = lo + (o-1)*stride + 1 + hi - ext + 1.
    win.hi.push_back(n + p.padding[i] - 1 - (o - 1) * p.stride[i]);
  }
  return emit_conv(b, g, k, {g.type.dtype, in_dims}, win, groups, 1, false);
}

// The gradient of conv_forward's weight (shape `w_dims`) from its input x and output gradient g: a convolution
// over the batch, where the forward's dilation becomes the stride and its stride dilates g. batch_group_count
// keeps each group's input channels with that group's output channels.
Value conv_weight_grad(HloBuilder& b, const Value& x, const Value& g, const ConvParams& p, const Ints& w_dims) {
  size_t nd = p.stride.size();
  Window win{p.dilation, p.padding, {}, repeat(nd, 1), p.stride};
  for (size_t i = 0; i < nd; ++i) {
    int64_t n = x.type.dims[2 + i], o = g.type.dims[2 + i];
    // Sized so the output is exactly k long; negative when the forward never read the input's last rows.
    win.hi.push_back(extent(w_dims[2 + i], p.dilation[i]) + (o - 1) * p.stride[i] - n - p.padding[i]);
  }
  return emit_conv(b, x, g, {x.type.dtype, w_dims}, win, 1, p.groups, true);
}

ConvParams conv_params(OpContext& c, size_t first, size_t nd) {  // stride, padding, dilation, ..., groups
  ConvParams p;
  p.stride = expand(c.ints(first), nd, repeat(nd, 1));
  p.padding = expand(c.ints(first + 1), nd, repeat(nd, 0));
  p.dilation = expand(c.ints(first + 2), nd, repeat(nd, 1));
  p.groups = c.integer(first + 5);
  return p;
}

// On XLA-CPU a plain float32/float64 convolution and its gradients are torch's CPU kernels (lowering/host_kernels.h).
// Its size is the output's elements times the multiply-adds of one (C/groups x kernel): `out` and `w` dims.
bool on_host(ElementType t, bool transposed, const Ints& out, const Ints& w) {
  int64_t macs = 1;
  for (int64_t d : out) macs *= d;
  for (size_t i = 1; i < w.size(); ++i) macs *= w[i];
  return !transposed && host_kernel_fits(t, macs);
}

Value host_conv(HloBuilder& b, const char* target, const V& operands, const TensorType& out, const ConvParams& p) {
  std::string params;
  for (const Ints* part : {&p.stride, &p.padding, &p.dilation}) {
    for (int64_t v : *part) params += std::to_string(v) + ", ";
  }
  params += std::to_string(p.groups);
  return b.custom_call(target, operands, out, "params = array<i64: " + params + ">");
}

Value add_bias(HloBuilder& b, const Value& y, const Value& bias) {
  return b.binary("stablehlo.add", y, b.broadcast_in_dim(b.convert(bias, y.type.dtype), y.type.dims, {1}));
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
V convolution_rule(OpContext& c) {
  Value x = c.tensor(0), w = c.tensor(1);
  TensorType o = c.out(0);
  size_t nd = static_cast<size_t>(w.type.rank() - 2);
  TORCH_CHECK(x.type.rank() == w.type.rank(), "tpu convolution expects a batched input of rank ", w.type.rank());
  ConvParams p = conv_params(c, 3, nd);
  // Half types accumulate in float32 (bias included) and round once, as PyTorch's CPU kernels do.
  ElementType t = accumulation_type(o.dtype);
  x = c.b.convert(x, t);
  w = c.b.convert(w, t);
  Value y = on_host(t, c.flag(6), o.dims, w.type.dims) ? host_conv(c.b, "torch_tpu.conv", {x, w}, {t, o.dims}, p)
            : c.flag(6)           ? conv_adjoint(c.b, x, w, p, o.dims)
                                  : conv_forward(c.b, x, w, p);
  // An absent bias can arrive as an undefined tensor rather than None.
  bool has_bias = c.has(2) && (!c.is_tensor(2) || c.arg(2).toTensor().defined());
  if (has_bias) y = add_bias(c.b, y, c.tensor(2));
  return {c.b.convert(y, o.dtype)};
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation, transposed,
// output_padding, groups, output_mask) and the _overrideable form, which has no bias_sizes.
LoweringRule convolution_backward_rule(size_t shift) {
  return [shift](OpContext& c) -> V {
    Value g0 = c.tensor(0), x0 = c.tensor(1), w0 = c.tensor(2);
    ElementType t = accumulation_type(g0.type.dtype);
    Value g = c.b.convert(g0, t), x = c.b.convert(x0, t), w = c.b.convert(w0, t);
    size_t nd = static_cast<size_t>(w.type.rank() - 2);
    ConvParams p = conv_params(c, 4 - shift, nd);
    bool transposed = c.flag(7 - shift);
    std::vector<bool> mask = c.arg(10 - shift).toBoolList().vec();
    // Unrequested gradients are undefined outputs (no meta type); their slots hold a placeholder the kernel drops.
    V out(3, c.b.constant(0, g.type.dtype));
    bool host = on_host(t, transposed, g.type.dims, w.type.dims);
    if (mask[0] && host) {
      out[0] = host_conv(c.b, "torch_tpu.conv_input_grad", {g, x, w}, x.type, p);
    } else if (mask[0]) {
      if (transposed) {
        // output_padding may reach past the stride (it only has to stay below stride or dilation): the plain
        // convolution then yields extra trailing positions that no input element produced.
        Value gx = conv_forward(c.b, g, w, p);
        out[0] = gx.type.dims == x.type.dims ? gx : c.b.slice(gx, Ints(x.type.dims.size(), 0), x.type.dims);
      } else {
        out[0] = conv_adjoint(c.b, g, w, p, x.type.dims);
      }
    }
    if (mask[1] && host) {
      out[1] = host_conv(c.b, "torch_tpu.conv_weight_grad", {g, x, w}, w.type, p);
    } else if (mask[1]) {
      // A transposed convolution is the adjoint of a plain one mapping its output to its input.
      out[1] = transposed ? conv_weight_grad(c.b, g, x, p, w.type.dims) : conv_weight_grad(c.b, x, g, p, w.type.dims);
    }
    if (mask[2]) {
      Ints dims{0};
      for (int64_t d = 2; d < g.type.rank(); ++d) dims.push_back(d);
      out[2] = reduce_sum(c.b, g, dims);
    }
    for (size_t i = 0; i < 3; ++i) {
      if (mask[i]) out[i] = c.b.convert(out[i], c.out(i).dtype);
    }
    return out;
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Pooling. The last `nd` dims are spatial; any leading dims (N, C or just C) are carried through.

struct Pool {
  size_t nd = 2;
  Ints kernel, stride, padding, dilation;
};

Pool pool_params(OpContext& c, size_t first, size_t nd, bool with_dilation) {  // kernel, stride, padding[, dilation]
  Pool p;
  p.nd = nd;
  p.kernel = expand(c.ints(first), nd, {});
  p.stride = expand(c.ints(first + 1), nd, p.kernel);
  p.padding = expand(c.ints(first + 2), nd, repeat(nd, 0));
  p.dilation = with_dilation ? expand(c.ints(first + 3), nd, repeat(nd, 1)) : repeat(nd, 1);
  return p;
}

// Full-rank window attributes (1 on the leading dims).
Ints full_rank(const Ints& spatial, int64_t rank, int64_t fill) {
  Ints out(static_cast<size_t>(rank) - spatial.size(), fill);
  out.insert(out.end(), spatial.begin(), spatial.end());
  return out;
}

// Padding that lays the pooling windows over the input: `padding` before, and after it whatever makes exactly
// `out` windows (more than `padding` in ceil mode, possibly negative when trailing input is never read).
std::pair<Ints, Ints> pool_edges(const Pool& p, const Ints& in_dims, const Ints& out_dims) {
  int64_t rank = static_cast<int64_t>(in_dims.size()), lead = rank - static_cast<int64_t>(p.nd);
  Ints lo(rank, 0), hi(rank, 0);
  for (size_t i = 0; i < p.nd; ++i) {
    int64_t d = lead + static_cast<int64_t>(i);
    lo[d] = p.padding[i];
    hi[d] = (out_dims[d] - 1) * p.stride[i] + extent(p.kernel[i], p.dilation[i]) - in_dims[d] - p.padding[i];
  }
  return {lo, hi};
}

// reduce_window over already padded operands; `body` combines (accumulators..., elements...).
V reduce_window(HloBuilder& b, const V& operands, const V& inits, const Pool& p, const Ints& out_dims,
                const Ints& stride, const std::string& body) {
  int64_t rank = operands[0].type.rank();
  std::vector<TensorType> types;
  for (const auto& v : operands) types.push_back({v.type.dtype, out_dims});
  V all = operands;
  all.insert(all.end(), inits.begin(), inits.end());
  std::string attrs = "window_dimensions = " + i64_array(full_rank(p.kernel, rank, 1)) +
                      ", window_strides = " + i64_array(full_rank(stride, rank, 1)) +
                      ", window_dilations = " + i64_array(full_rank(p.dilation, rank, 1));
  return b.op("stablehlo.reduce_window", all, types, attrs, {body});
}

std::string add_region(HloBuilder& b, ElementType t) {
  TensorType s{t, {}};
  return b.region({s, s}, [](HloBuilder& r, const V& a) { return V{r.binary("stablehlo.add", a[0], a[1])}; });
}

Value window_sum(HloBuilder& b, const Value& padded, const Pool& p, const Ints& out_dims, const Ints& stride) {
  ElementType t = padded.type.dtype;
  return reduce_window(b, {padded}, {b.constant(0, t)}, p, out_dims, stride, add_region(b, t))[0];
}

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) -> (values, indices).
// One variadic reduce_window carries (value, position): the larger value wins, NaN beats numbers, and ties go to
// the lower position, which is the first in scan order as on the CPU.
LoweringRule max_pool_rule(size_t nd) {
  return [nd](OpContext& c) -> V {
    Value x = c.tensor(0);
    Pool p = pool_params(c, 1, nd, true);
    Ints out_dims = c.out(0).dims;
    auto [lo, hi] = pool_edges(p, x.type.dims, out_dims);
    Ints interior(lo.size(), 0);
    ElementType t = x.type.dtype;
    const double far = 4.611686018427387904e18;  // 2^62: a position no real element has
    Value low = c.b.constant(lowest(t), t), none = c.b.constant(far, ElementType::kS64);
    Value xv = c.b.pad(x, low, lo, hi, interior);
    Value xi = c.b.pad(spatial_positions(c.b, x.type.dims, nd), none, lo, hi, interior);
    std::string body = max_with_index_region(c.b, t);
    return reduce_window(c.b, {xv, xi}, {low, none}, p, out_dims, p.stride, body);
  };
}

// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
// indices): scatter-adds each gradient to the input position its index names (overlapping windows accumulate).
LoweringRule max_pool_backward_rule(size_t indices_arg) {
  return [indices_arg](OpContext& c) -> V {
    size_t nd = c.op_name().find("3d") != std::string::npos ? 3 : 2;
    return {scatter_plane_grads(c.b, c.tensor(0), c.tensor(indices_arg), c.arg(1).toTensor().sizes().vec(), nd)};
  };
}


// The divisor of each average-pooling window, over the spatial output dims only: the window's size clipped to the
// padded input (count_include_pad) or to the input itself.
Value avg_divisors(HloBuilder& b, const Pool& p, const Ints& in_spatial, const Ints& out_spatial, const Ints& hi_edge,
                   bool include_pad, ElementType t) {
  Ints core, lo, hi, interior(p.nd, 0);
  for (size_t i = 0; i < p.nd; ++i) {
    core.push_back(in_spatial[i] + (include_pad ? 2 * p.padding[i] : 0));
    lo.push_back(include_pad ? 0 : p.padding[i]);
    hi.push_back(include_pad ? hi_edge[i] - p.padding[i] : hi_edge[i]);
  }
  Value ones = b.pad(b.constant(1, t, core), b.constant(0, t), lo, hi, interior);
  return window_sum(b, ones, p, out_spatial, p.stride);
}

Ints tail(const Ints& v, size_t n) { return Ints(v.end() - static_cast<int64_t>(n), v.end()); }

Value broadcast_spatial(HloBuilder& b, const Value& v, const Ints& dims) {
  Ints map;
  for (size_t i = 0; i < static_cast<size_t>(v.type.rank()); ++i) {
    map.push_back(static_cast<int64_t>(dims.size() - v.type.dims.size() + i));
  }
  return b.broadcast_in_dim(v, dims, map);
}

// Divisors for avg_pool args (…, ceil_mode, count_include_pad, divisor_override) starting at `first`, broadcast to
// `out_dims`.
Value avg_pool_divisor(OpContext& c, const Pool& p, size_t first, const Ints& in_dims, const Ints& out_dims,
                       const Ints& hi, ElementType t) {
  if (c.has(first + 2)) return c.b.constant(static_cast<double>(c.integer(first + 2)), t, out_dims);
  Value d = avg_divisors(c.b, p, tail(in_dims, p.nd), tail(out_dims, p.nd), tail(hi, p.nd), c.flag(first + 1), t);
  return broadcast_spatial(c.b, d, out_dims);
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
LoweringRule avg_pool_rule(size_t nd) {
  return [nd](OpContext& c) -> V {
    TensorType o = c.out(0);
    ElementType t = accumulation_type(o.dtype);
    Value x = c.b.convert(c.tensor(0), t);
    Pool p = pool_params(c, 1, nd, false);
    auto [lo, hi] = pool_edges(p, x.type.dims, o.dims);
    Value padded = c.b.pad(x, c.b.constant(0, t), lo, hi, Ints(lo.size(), 0));
    Value sum = window_sum(c.b, padded, p, o.dims, p.stride);
    Value avg = c.b.binary("stablehlo.divide", sum, avg_pool_divisor(c, p, 4, x.type.dims, o.dims, hi, t));
    return {c.b.convert(avg, o.dtype)};
  };
}

// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override): each input element collects grad/divisor of every window covering it, i.e. a stride-1 window
// sum over the gradient dilated by the stride and padded by kernel-1-padding.
LoweringRule avg_pool_backward_rule(size_t nd) {
  return [nd](OpContext& c) -> V {
    Value x = c.tensor(1), g0 = c.tensor(0);
    Value g = c.b.convert(g0, accumulation_type(g0.type.dtype));
    Pool p = pool_params(c, 2, nd, false);
    auto [lo, hi] = pool_edges(p, x.type.dims, g.type.dims);
    Value divisor = avg_pool_divisor(c, p, 5, x.type.dims, g.type.dims, hi, g.type.dtype);
    Value scaled = c.b.binary("stablehlo.divide", g, divisor);
    int64_t rank = x.type.rank(), lead = rank - static_cast<int64_t>(nd);
    Ints blo(rank, 0), bhi(rank, 0), interior(rank, 0);
    for (size_t i = 0; i < nd; ++i) {
      int64_t d = lead + static_cast<int64_t>(i);
      blo[d] = p.kernel[i] - 1 - p.padding[i];
      bhi[d] = x.type.dims[d] + p.padding[i] - 1 - (g.type.dims[d] - 1) * p.stride[i];
      interior[d] = p.stride[i] - 1;
    }
    Value spread = c.b.pad(scaled, c.b.constant(0, g.type.dtype), blo, bhi, interior);
    return {c.b.convert(window_sum(c.b, spread, p, x.type.dims, repeat(nd, 1)), g0.type.dtype)};
  };
}

// (out, in) matrix averaging PyTorch's adaptive windows: row i spans [floor(i*in/out), ceil((i+1)*in/out)).
Value adaptive_matrix(HloBuilder& b, int64_t out, int64_t in, ElementType t) {
  TensorType it{ElementType::kS64, {out, in}};
  auto k = [&](double v) { return b.constant(v, ElementType::kS64, it.dims); };
  Value row = b.iota(it, 0), col = b.iota(it, 1);
  Value start = b.binary("stablehlo.divide", b.binary("stablehlo.multiply", row, k(in)), k(out));
  Value end = b.binary("stablehlo.add", b.binary("stablehlo.multiply", row, k(in)), k(in + out - 1));
  end = b.binary("stablehlo.divide", end, k(out));
  Value inside = b.binary("stablehlo.and", b.compare(CompareDirection::kGe, col, start),
                          b.compare(CompareDirection::kLt, col, end));
  Value weight = b.binary("stablehlo.divide", b.constant(1, t, it.dims),
                          b.convert(b.binary("stablehlo.subtract", end, start), t));
  return b.select(inside, weight, b.constant(0, t, it.dims));
}

// Applies one (out, in) or, with `transposed`, (in, out) averaging matrix to each spatial dim in turn. Each
// dot_general moves the contracted dim to the end, so after all of them the spatial dims are back in order.
Value adaptive_apply(HloBuilder& b, Value v, const Ints& small, const Ints& large, bool transposed) {
  size_t nd = small.size();
  int64_t first = v.type.rank() - static_cast<int64_t>(nd);
  for (size_t i = 0; i < nd; ++i) {
    Value m = adaptive_matrix(b, small[i], large[i], v.type.dtype);
    Ints dims;
    for (int64_t d = 0; d < v.type.rank(); ++d) {
      if (d != first) dims.push_back(v.type.dims[d]);
    }
    dims.push_back(transposed ? large[i] : small[i]);
    v = b.dot_general(v, m, {}, {}, {first}, {transposed ? 0 : 1}, {v.type.dtype, dims});
  }
  return v;
}

// _adaptive_avg_pool{2,3}d(self, output_size)
LoweringRule adaptive_avg_rule(size_t nd) {
  return [nd](OpContext& c) -> V {
    TensorType o = c.out(0);
    HloBuilder& b = c.b;
    Value x = b.convert(c.tensor(0), accumulation_type(o.dtype));
    if (!is_floating(x.type.dtype)) {
      return {b.convert(adaptive_apply(b, x, tail(o.dims, nd), tail(x.type.dims, nd), false), o.dtype)};
    }
    // The averaging matrices would multiply an inf by the zeros outside its windows (giving NaN everywhere):
    // average the finite part, and count infs and NaNs per window alongside (stacked on dim 0, one pass).
    auto k = [&](double v) { return b.constant(v, x.type.dtype, x.type.dims); };
    auto indicator = [&](const Value& p) { return b.select(p, k(1), k(0)); };
    Value is_nan = b.compare(CompareDirection::kNe, x, x);
    Value pos = b.compare(CompareDirection::kEq, x, k(INFINITY)), neg = b.compare(CompareDirection::kEq, x, k(-INFINITY));
    Value finite = b.op1("stablehlo.is_finite", {x}, {ElementType::kPred, x.type.dims});
    int64_t n = x.type.dims[0];
    Value stacked = b.concatenate({b.select(finite, x, k(0)), indicator(pos), indicator(neg), indicator(is_nan)}, 0);
    Value avg = adaptive_apply(b, stacked, tail(o.dims, nd), tail(x.type.dims, nd), false);
    Ints rdims = avg.type.dims;
    auto part = [&](int64_t i) {
      Ints start(rdims.size(), 0), limit = rdims;
      start[0] = i * n;
      limit[0] = (i + 1) * n;
      return b.slice(avg, start, limit);
    };
    Value mean = part(0), zero = b.constant(0, mean.type.dtype, mean.type.dims);
    Value has_pos = b.compare(CompareDirection::kGt, part(1), zero), has_neg = b.compare(CompareDirection::kGt, part(2), zero);
    Value has_nan = b.binary("stablehlo.or", b.compare(CompareDirection::kGt, part(3), zero),
                             b.binary("stablehlo.and", has_pos, has_neg));
    auto full_of = [&](double v) { return b.constant(v, mean.type.dtype, mean.type.dims); };
    Value r = b.select(has_pos, full_of(INFINITY), b.select(has_neg, full_of(-INFINITY), mean));
    r = b.select(has_nan, full_of(NAN), r);
    return {b.convert(r, o.dtype)};
  };
}

// _adaptive_avg_pool{2,3}d_backward(grad_output, self)
LoweringRule adaptive_avg_backward_rule(size_t nd) {
  return [nd](OpContext& c) -> V {
    Value g = c.tensor(0), x = c.tensor(1);
    Value acc = c.b.convert(g, accumulation_type(g.type.dtype));
    return {c.b.convert(adaptive_apply(c.b, acc, tail(g.type.dims, nd), tail(x.type.dims, nd), true), g.type.dtype)};
  };
}

// CPU's dtype checks of a convolution's operands, which the meta kernel leaves out; before recording, every call.
void check_conv_dtypes(std::vector<c10::IValue>& args) {
  at::ScalarType input = args.at(0).toTensor().scalar_type(), weight = args.at(1).toTensor().scalar_type();
  TORCH_CHECK(input == weight, "expected scalar type ", input, " but found ", weight);
  if (args.size() > 2 && args[2].isTensor() && args[2].toTensor().defined()) {
    at::ScalarType bias = args[2].toTensor().scalar_type();
    TORCH_CHECK(bias == input, "Input type (", c10::scalarTypeToTypeMeta(input).name(), ") and bias type (",
                c10::scalarTypeToTypeMeta(bias).name(), ") should be the same");
  }
}

}  // namespace

void add_conv_rules(Rows& rows) {
  // _convolution shares convolution's leading arguments (its extra backend flags do not matter here).
  rows.push_back({{"convolution", "convolution.out", "_convolution", "convolution_overrideable",
                   "convolution_overrideable.out"},
                  convolution_rule, check_conv_dtypes});
  rows.push_back({{"convolution_backward", "convolution_backward.out"}, convolution_backward_rule(0)});
  rows.push_back({{"convolution_backward_overrideable", "convolution_backward_overrideable.out"},
                  convolution_backward_rule(1)});
  rows.push_back({{"max_pool2d_with_indices", "max_pool2d_with_indices.out"}, max_pool_rule(2)});
  rows.push_back({{"max_pool3d_with_indices", "max_pool3d_with_indices.out"}, max_pool_rule(3)});
  rows.push_back({{"max_pool2d_with_indices_backward", "max_pool2d_with_indices_backward.grad_input",
                   "max_pool3d_with_indices_backward", "max_pool3d_with_indices_backward.grad_input"},
                  max_pool_backward_rule(7)});
  rows.push_back({{"adaptive_max_pool2d_backward", "adaptive_max_pool2d_backward.grad_input", "adaptive_max_pool3d_backward",
                   "adaptive_max_pool3d_backward.grad_input"},
                  max_pool_backward_rule(2)});
  rows.push_back({{"avg_pool2d", "avg_pool2d.out"}, avg_pool_rule(2)});
  rows.push_back({{"avg_pool3d", "avg_pool3d.out"}, avg_pool_rule(3)});
  rows.push_back({{"avg_pool2d_backward", "avg_pool2d_backward.grad_input"}, avg_pool_backward_rule(2)});
  rows.push_back({{"avg_pool3d_backward", "avg_pool3d_backward.grad_input"}, avg_pool_backward_rule(3)});
  rows.push_back({{"_adaptive_avg_pool2d", "_adaptive_avg_pool2d.out"}, adaptive_avg_rule(2)});
  rows.push_back({{"_adaptive_avg_pool3d", "_adaptive_avg_pool3d.out"}, adaptive_avg_rule(3)});
  rows.push_back({{"_adaptive_avg_pool2d_backward", "_adaptive_avg_pool2d_backward.out"},
                  adaptive_avg_backward_rule(2)});
  rows.push_back({{"_adaptive_avg_pool3d_backward", "_adaptive_avg_pool3d_backward.out"},
                  adaptive_avg_backward_rule(3)});
}

}  // namespace torch_tpu
