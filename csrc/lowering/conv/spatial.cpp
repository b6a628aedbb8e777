// Resampling ops over the trailing spatial dims: constant, reflection and replication padding and upsampling
// (nearest, nearest-exact, linear, bilinear, bicubic, trilinear), forward and backward.
//
// Each one reads, for every output position along one spatial dim, a few input positions ("taps") with weights, and
// the dims are separable: the forward applies one dim at a time (innermost first, as PyTorch's kernels nest their
// loops) as gathers along that dim; the backward scatter-adds each weighted gradient back to its tap. Tap indices and
// weights are computed on the device from iotas with PyTorch's formulas in float32 (its opmath), so they are the
// same numbers the CPU kernels use. Half types compute in float32 and round once.
#include <cmath>
#include <optional>
#include <string>

#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

std::string list(const Ints& v) { return i64_list(v); }

Ints tail(const Ints& v, size_t n) { return Ints(v.end() - static_cast<int64_t>(n), v.end()); }

Ints others(int64_t rank, int64_t d) {
  Ints out;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != d) out.push_back(i);
  }
  return out;
}

}  // namespace

namespace {


// The taps of one dim: index j of every output position and, except for single-tap maps, its f32 weight.
struct Taps {
  int64_t in = 0, out = 0;
  V index;   // s64 [out] each
  V weight;  // f32 [out] each; empty: one tap of weight 1
};

Value weighted(HloBuilder& b, const Value& v, const Value& w, int64_t d) {
  Value wb = b.broadcast_in_dim(b.convert(w, v.type.dtype), v.type.dims, {d});
  return b.binary("stablehlo.multiply", v, wb);
}

// Forward along dim d: sum_j w_j * x[idx_j], accumulated in tap order as PyTorch's interpolation does.
Value apply_taps(HloBuilder& b, const Value& x, const Taps& t, int64_t d) {
  if (t.weight.empty()) return gather_dim(b, x, t.index[0], d);
  Value acc = weighted(b, gather_dim(b, x, t.index[0], d), t.weight[0], d);
  for (size_t j = 1; j < t.index.size(); ++j) {
    acc = b.binary("stablehlo.add", acc, weighted(b, gather_dim(b, x, t.index[j], d), t.weight[j], d));
  }
  return acc;
}

// Backward along dim d: each output gradient goes back to its taps, weighted.
Value apply_taps_backward(HloBuilder& b, const Value& g, const Taps& t, int64_t d) {
  Ints dims = g.type.dims;
  dims[d] = t.in;
  Value acc = zeros(b, {g.type.dtype, dims});
  for (size_t j = 0; j < t.index.size(); ++j) {
    Value upd = t.weight.empty() ? g : weighted(b, g, t.weight[j], d);
    acc = scatter_add_dim(b, acc, upd, t.index[j], d);
  }
  return acc;
}

// ---- index maps ----

struct Iota {
  HloBuilder& b;
  int64_t n;
  Value i64() const { return b.iota({ElementType::kS64, {n}}, 0); }
  Value f32() const { return b.iota({ElementType::kF32, {n}}, 0); }
  Value k64(double v) const { return b.constant(v, ElementType::kS64, {n}); }
  Value kf(double v) const { return b.constant(v, ElementType::kF32, {n}); }
};

Value clamp64(const Iota& io, const Value& v, int64_t lo, int64_t hi) {
  HloBuilder& b = io.b;
  return b.binary("stablehlo.minimum", b.binary("stablehlo.maximum", v, io.k64(static_cast<double>(lo))),
                  io.k64(static_cast<double>(hi)));
}

// Padding: output position o reads input position o - lo, reflected or clamped into [0, in).
Taps pad_taps(HloBuilder& b, int64_t in, int64_t out, int64_t lo, bool reflect) {
  Iota io{b, out};
  Value j = b.binary("stablehlo.subtract", io.i64(), io.k64(static_cast<double>(lo)));
  if (reflect) {
    j = b.unary("stablehlo.abs", j);  // -j below 0
    Value past = b.compare(CompareDirection::kGe, j, io.k64(static_cast<double>(in)));
    j = b.select(past, b.binary("stablehlo.subtract", io.k64(static_cast<double>(2 * (in - 1))), j), j);
  } else {
    j = clamp64(io, j, 0, in - 1);
  }
  return {in, out, {j}, {}};
}

// PyTorch's scale for a dim: an explicit scale factor s gives 1/s, else in/out (align_corners: (in-1)/(out-1)),
// computed in float as its opmath does.
float area_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  if (scale && *scale > 0) return static_cast<float>(1.0 / *scale);
  return static_cast<float>(in) / static_cast<float>(out);
}

Taps nearest_taps(HloBuilder& b, int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  Iota io{b, out};
  Value i = io.i64();
  if (!exact && out == in) return {in, out, {i}, {}};
  if (!exact && out == 2 * in) return {in, out, {b.binary("stablehlo.shift_right_arithmetic", i, io.k64(1))}, {}};
  float s = area_scale(in, out, false, scale);
  Value pos = io.f32();
  if (exact) pos = b.binary("stablehlo.add", pos, io.kf(0.5));
  pos = b.unary("stablehlo.floor", b.binary("stablehlo.multiply", pos, io.kf(s)));
  Value idx = b.binary("stablehlo.minimum", b.convert(pos, ElementType::kS64), io.k64(static_cast<double>(in - 1)));
  return {in, out, {idx}, {}};
}

// The real source position of each output position (area_pixel_compute_source_index).
Value source_index(const Iota& io, float s, bool align_corners, bool cubic) {
  HloBuilder& b = io.b;
  Value o = io.f32();
  if (align_corners) return b.binary("stablehlo.multiply", io.kf(s), o);
  Value src = b.binary("stablehlo.subtract", b.binary("stablehlo.multiply", io.kf(s), b.binary("stablehlo.add", o, io.kf(0.5))),
                       io.kf(0.5));
  if (!cubic) src = b.binary("stablehlo.maximum", src, io.kf(0));
  return src;
}

// floor(src) capped at in-1, and the fraction src - index clamped to [0, 1] (guard_index_and_lambda).
std::pair<Value, Value> index_and_lambda(const Iota& io, const Value& src, int64_t in) {
  HloBuilder& b = io.b;
  Value idx = b.binary("stablehlo.minimum", b.convert(b.unary("stablehlo.floor", src), ElementType::kS64),
                       io.k64(static_cast<double>(in - 1)));
  Value lambda = b.binary("stablehlo.subtract", src, b.convert(idx, ElementType::kF32));
  lambda = b.binary("stablehlo.minimum", b.binary("stablehlo.maximum", lambda, io.kf(0)), io.kf(1));
  return {idx, lambda};
}

// Weights rounded to `wt` first: PyTorch's CPU kernels store them in the input's dtype.
Value round_to(HloBuilder& b, const Value& w, ElementType wt) {
  return wt == ElementType::kF32 ? w : b.convert(b.convert(w, wt), ElementType::kF32);
}

Taps linear_taps(HloBuilder& b, int64_t in, int64_t out, bool align_corners, std::optional<double> scale, ElementType wt) {
  Iota io{b, out};
  if (in == out) return {in, out, {io.i64(), io.i64()}, {io.kf(1), io.kf(0)}};
  Value src = source_index(io, area_scale(in, out, align_corners, scale), align_corners, false);
  auto [i0, l1] = index_and_lambda(io, src, in);
  Value step = b.select(b.compare(CompareDirection::kLt, i0, io.k64(static_cast<double>(in - 1))), io.k64(1), io.k64(0));
  Value i1 = b.binary("stablehlo.add", i0, step);
  // lambda1 is stored in the input's dtype first and lambda0 computed from that stored value (as the CPU does).
  l1 = round_to(b, l1, wt);
  Value l0 = round_to(b, b.binary("stablehlo.subtract", io.kf(1), l1), wt);
  return {in, out, {i0, i1}, {l0, l1}};
}

// Keys' cubic convolution with A = -0.75, as PyTorch evaluates it.
Value cubic1(const Iota& io, const Value& x) {  // ((A + 2) x - (A + 3)) x x + 1
  HloBuilder& b = io.b;
  const double A = -0.75;
  Value v = b.binary("stablehlo.subtract", b.binary("stablehlo.multiply", io.kf(A + 2), x), io.kf(A + 3));
  v = b.binary("stablehlo.multiply", b.binary("stablehlo.multiply", v, x), x);
  return b.binary("stablehlo.add", v, io.kf(1));
}

Value cubic2(const Iota& io, const Value& x) {  // ((A x - 5A) x + 8A) x - 4A
  HloBuilder& b = io.b;
  const double A = -0.75;
  Value v = b.binary("stablehlo.subtract", b.binary("stablehlo.multiply", io.kf(A), x), io.kf(5 * A));
  v = b.binary("stablehlo.add", b.binary("stablehlo.multiply", v, x), io.kf(8 * A));
  return b.binary("stablehlo.subtract", b.binary("stablehlo.multiply", v, x), io.kf(4 * A));
}

Taps cubic_taps(HloBuilder& b, int64_t in, int64_t out, bool align_corners, std::optional<double> scale, ElementType wt) {
  Iota io{b, out};
  Value src = source_index(io, area_scale(in, out, align_corners, scale), align_corners, true);
  auto [i, t] = index_and_lambda(io, src, in);
  Value t2 = b.binary("stablehlo.subtract", io.kf(1), t);
  Taps taps{in, out, {}, {}};
  V w{cubic2(io, b.binary("stablehlo.add", t, io.kf(1))), cubic1(io, t), cubic1(io, t2),
      cubic2(io, b.binary("stablehlo.add", t2, io.kf(1)))};
  for (int64_t j = 0; j < 4; ++j) {
    taps.index.push_back(clamp64(io, b.binary("stablehlo.add", i, io.k64(static_cast<double>(j - 1))), 0, in - 1));
    taps.weight.push_back(round_to(b, w[static_cast<size_t>(j)], wt));
  }
  return taps;
}

// ---- rules ----

// Applies per-dim taps (taps[i] for spatial dim i of `nd`) to x, innermost dim first.
Value resample(HloBuilder& b, Value x, const std::vector<Taps>& taps) {
  int64_t lead = x.type.rank() - static_cast<int64_t>(taps.size());
  for (int64_t i = static_cast<int64_t>(taps.size()) - 1; i >= 0; --i) x = apply_taps(b, x, taps[i], lead + i);
  return x;
}

Value resample_backward(HloBuilder& b, Value g, const std::vector<Taps>& taps) {
  int64_t lead = g.type.rank() - static_cast<int64_t>(taps.size());
  for (int64_t i = 0; i < static_cast<int64_t>(taps.size()); ++i) g = apply_taps_backward(b, g, taps[i], lead + i);
  return g;
}

// padding lists run from the last dim backwards: (left, right, top, bottom, front, back).
std::vector<Taps> padding_taps(OpContext& c, const Ints& in_dims, const Ints& out_dims, size_t nd, bool reflect) {
  Ints pad = c.ints(1 + (c.op_name().find("backward") != std::string::npos ? 1 : 0));
  std::vector<Taps> taps;
  size_t rank = in_dims.size();
  for (size_t i = 0; i < nd; ++i) {
    size_t d = rank - nd + i, k = nd - 1 - i;
    taps.push_back(pad_taps(c.b, in_dims[d], out_dims[d], pad[2 * k], reflect));
  }
  return taps;
}

// constant_pad_nd(self, pad, value): pad[2k] and pad[2k+1] elements before and after dim rank-1-k; a negative entry
// crops instead. One stablehlo.pad (its edge padding may be negative); the value is a runtime number.
V constant_pad_rule(OpContext& c) {
  Value x = c.tensor(0);
  TensorType o = c.out(0);
  Ints pad = c.ints(1);
  size_t rank = x.type.dims.size();
  Ints low(rank, 0), high(rank, 0), interior(rank, 0);
  for (size_t k = 0; 2 * k + 1 < pad.size() && k < rank; ++k) {
    low[rank - 1 - k] = pad[2 * k];
    high[rank - 1 - k] = pad[2 * k + 1];
  }
  Value fill = c.runtime_operand(2, o.dtype, {});
  if (o.numel() == 0 || x.type.numel() == 0) return {c.b.broadcast_to(fill, o.dims)};
  return {c.b.pad(c.b.convert(x, o.dtype), fill, low, high, interior)};
}

LoweringRule pad_rule(size_t nd, bool reflect) {  // reflection_padNd / replication_padNd(self, padding)
  return [nd, reflect](OpContext& c) -> V {
    Value x = c.tensor(0);
    return {resample(c.b, x, padding_taps(c, x.type.dims, c.out(0).dims, nd, reflect))};
  };
}

// (grad_output, self, padding): every output gradient added to the input position it was read from, in the
// tensor's own dtype and in output scan order (one scatter over flat plane positions), as PyTorch's CPU kernel
// accumulates, so half types round the same way.
LoweringRule pad_backward_rule(size_t nd, bool reflect) {
  return [nd, reflect](OpContext& c) -> V {
    HloBuilder& b = c.b;
    Value g = c.tensor(0);
    TensorType o = c.out(0);
    std::vector<Taps> taps = padding_taps(c, o.dims, g.type.dims, nd, reflect);
    int64_t rank = o.rank(), lead = rank - static_cast<int64_t>(nd);
    int64_t planes = 1, in_plane = 1, out_plane = 1;
    for (int64_t d = 0; d < lead; ++d) planes *= o.dims[d];
    Ints out_sp = tail(g.type.dims, nd);
    TensorType it{ElementType::kS64, out_sp};
    Value flat = b.constant(0, it.dtype, it.dims);
    for (int64_t i = static_cast<int64_t>(nd) - 1; i >= 0; --i) {
      Value idx = b.broadcast_in_dim(taps[static_cast<size_t>(i)].index[0], out_sp, {i});
      idx = b.binary("stablehlo.multiply", idx, b.constant(static_cast<double>(in_plane), it.dtype, it.dims));
      flat = b.binary("stablehlo.add", flat, idx);
      in_plane *= o.dims[lead + i];
      out_plane *= out_sp[static_cast<size_t>(i)];
    }
    if (o.numel() == 0 || g.type.numel() == 0) return {zeros(b, o)};
    TensorType pt{ElementType::kS64, {planes, out_plane}};
    Value base = b.binary("stablehlo.multiply", b.iota(pt, 0), b.constant(static_cast<double>(in_plane), pt.dtype, pt.dims));
    Value points = b.binary("stablehlo.add", base, b.broadcast_in_dim(b.reshape(flat, {out_plane}), pt.dims, {1}));
    Value into = zeros(b, {o.dtype, {planes * in_plane}});
    Value upd = b.convert(b.reshape(g, {planes * out_plane}), o.dtype);
    Value r = scatter_add_dim(b, into, upd, b.reshape(points, {planes * out_plane}), 0);
    return {b.reshape(r, o.dims)};
  };
}

enum class Mode { kNearest, kNearestExact, kLinear, kCubic };

std::optional<double> opt_scale(OpContext& c, size_t i) {
  if (!c.has(i)) return std::nullopt;
  return c.scalar(i);
}

// Forward args: (self, output_size, [align_corners], scales...); backward: (grad, output_size, input_size,
// [align_corners], scales...). `in`/`out` are the full shapes of the forward's input and output.
std::vector<Taps> upsample_taps(OpContext& c, Mode mode, size_t nd, const Ints& in, const Ints& out, bool backward,
                                ElementType wt) {
  size_t next = backward ? 3 : 2;
  bool align = false;
  if (mode == Mode::kLinear || mode == Mode::kCubic) align = c.flag(next++);
  std::vector<Taps> taps;
  for (size_t i = 0; i < nd; ++i) {
    int64_t n = in[in.size() - nd + i], m = out[out.size() - nd + i];
    std::optional<double> s = opt_scale(c, next + i);
    switch (mode) {
      case Mode::kNearest: taps.push_back(nearest_taps(c.b, n, m, s, false)); break;
      case Mode::kNearestExact: taps.push_back(nearest_taps(c.b, n, m, s, true)); break;
      // The CPU's 2-D bilinear kernel keeps its weights in float (the 1-D and 3-D ones store them in the input dtype).
      case Mode::kLinear: taps.push_back(linear_taps(c.b, n, m, align, s, nd == 2 ? ElementType::kF32 : wt)); break;
      case Mode::kCubic: taps.push_back(cubic_taps(c.b, n, m, align, s, wt)); break;
    }
  }
  return taps;
}

LoweringRule upsample_rule(Mode mode, size_t nd) {
  return [mode, nd](OpContext& c) -> V {
    TensorType o = c.out(0);
    Value x = c.tensor(0);
    TORCH_CHECK(x.type.rank() == static_cast<int64_t>(nd) + 2, "Expected ", nd + 2, "D input, got ", x.type.rank(), "D");
    if (mode == Mode::kNearest || mode == Mode::kNearestExact) {
      return {resample(c.b, x, upsample_taps(c, mode, nd, x.type.dims, o.dims, false, o.dtype))};
    }
    Value acc = c.b.convert(x, opmath_type(o.dtype));
    return {to_result(c, resample(c.b, acc, upsample_taps(c, mode, nd, x.type.dims, o.dims, false, o.dtype)))};
  };
}

LoweringRule upsample_backward_rule(Mode mode, size_t nd) {
  return [mode, nd](OpContext& c) -> V {
    TensorType o = c.out(0);
    Value g = c.b.convert(c.tensor(0), opmath_type(o.dtype));
    // The CPU's backward kernels keep every weight in float32 and accumulate in a float32 buffer.
    auto taps = upsample_taps(c, mode, nd, o.dims, g.type.dims, true, ElementType::kF32);
    return {to_result(c, resample_backward(c.b, g, taps))};
  };
}

// uint8 images: the CPU interpolates them in fixed point with its own rounding, which a float computation does not
// reproduce value for value; those calls stay on the CPU fallback (nearest modes only copy, and are lowered).
bool floating_input(const std::vector<c10::IValue>& args) {
  return args.empty() || !args[0].isTensor() || at::isFloatingType(args[0].toTensor().scalar_type());
}

void add_upsample(Rows& rows, const std::string& name, Mode mode, size_t nd) {
  bool copies = mode == Mode::kNearest || mode == Mode::kNearestExact;
  rows.push_back({{name, name + ".out"}, upsample_rule(mode, nd), nullptr, copies ? ArgumentFilter() : floating_input});
  rows.push_back({{name + "_backward", name + "_backward.grad_input"}, upsample_backward_rule(mode, nd)});
}

}  // namespace

void add_spatial_rules(Rows& rows) {
  rows.push_back({{"constant_pad_nd", "constant_pad_nd.out"}, constant_pad_rule});
  for (size_t nd = 1; nd <= 3; ++nd) {
    std::string n = std::to_string(nd) + "d";
    for (bool reflect : {true, false}) {
      std::string base = (reflect ? "reflection_pad" : "replication_pad") + n;
      rows.push_back({{base, base + ".out"}, pad_rule(nd, reflect)});
      rows.push_back({{base + "_backward", base + "_backward.grad_input"}, pad_backward_rule(nd, reflect)});
    }
    add_upsample(rows, "upsample_nearest" + n, Mode::kNearest, nd);
    add_upsample(rows, "_upsample_nearest_exact" + n, Mode::kNearestExact, nd);
  }
  add_upsample(rows, "upsample_linear1d", Mode::kLinear, 1);
  add_upsample(rows, "upsample_bilinear2d", Mode::kLinear, 2);
  add_upsample(rows, "upsample_trilinear3d", Mode::kLinear, 3);
  add_upsample(rows, "upsample_bicubic2d", Mode::kCubic, 2);
}

}  // namespace torch_tpu
