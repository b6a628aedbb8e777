// grid_sampler_2d / grid_sampler_3d (F.grid_sample) and their backward, with PyTorch's coordinate rules: grid values
// in [-1, 1] unnormalized to pixel positions (align_corners or not), padding by zeros, border clipping or reflection,
// bilinear / nearest (2-D and 3-D) and bicubic (2-D) interpolation. Every output position reads a few input
// positions ("taps"); the input is viewed as rows (N * spatial, C) and each tap is one row gather, its backward one
// row scatter-add. Coordinates and weights are computed in float32 for half types (float64 for float64) with the
// CPU kernel's formulas and summation order. The backward of bicubic sampling stays on the CPU fallback.
#include <cmath>

#include "lowering/lib/hlo_math.h"
#include "lowering/lib/numerics.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using namespace hm;  // NOLINT: formula spellings
using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

enum Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

// The geometry of one call: input (N, C, *in), grid (N, *out, nd), R = N * prod(out) sample points.
struct Geometry {
  int64_t n = 0, c = 0, nd = 0, points = 0, plane = 1;  // plane: prod(in)
  Ints in, out;
  int64_t rows() const { return n * points; }
};

Geometry geometry_of(const Value& x, const Value& grid) {
  Geometry g;
  g.n = x.type.dims[0];
  g.c = x.type.dims[1];
  g.nd = x.type.rank() - 2;
  g.in.assign(x.type.dims.begin() + 2, x.type.dims.end());
  g.out.assign(grid.type.dims.begin() + 1, grid.type.dims.end() - 1);
  g.points = 1;
  for (int64_t s : g.out) g.points *= s;
  for (int64_t s : g.in) g.plane *= s;
  return g;
}

// Coordinate k of the grid's last dim (x, y[, z]) as R values; it indexes spatial dim nd - 1 - k.
Value grid_coordinate(HloBuilder& b, const Value& grid, const Geometry& g, int64_t k, ElementType t) {
  Ints lo(grid.type.rank(), 0), hi = grid.type.dims;
  lo.back() = k;
  hi.back() = k + 1;
  return b.reshape(b.convert(b.slice(grid, lo, hi), t), {g.rows()});
}

Value unnormalize(HloBuilder& b, const Value& v, int64_t size, bool align) {
  if (align) return mul(b, div(b, add(b, v, k(b, 1, v)), k(b, 2, v)), k(b, static_cast<double>(size - 1), v));
  return div(b, sub(b, mul(b, add(b, v, k(b, 1, v)), k(b, static_cast<double>(size), v)), k(b, 1, v)), k(b, 2, v));
}

// min(size - 1, max(v, 0)) as std::min/std::max evaluate it (a NaN coordinate clips to size - 1).
Value clip(HloBuilder& b, const Value& v, int64_t size) {
  Value lo = sel(b, lt(b, v, k(b, 0, v)), k(b, 0, v), v);
  Value top = k(b, static_cast<double>(size - 1), v);
  return sel(b, lt(b, lo, top), lo, top);
}

// Reflects v into [twice_low / 2, twice_high / 2]; also returns d(result)/dv (+1 or -1).
std::pair<Value, Value> reflect(HloBuilder& b, const Value& v, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return {k(b, 0, v), k(b, 0, v)};
  double lo = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
  Value d = sub(b, v, k(b, lo, v));
  Value sign = sel(b, lt(b, d, k(b, 0, v)), k(b, -1, v), k(b, 1, v));
  d = abs(b, d);
  Value extra = b.binary("stablehlo.remainder", d, k(b, span, v));
  Value flips = floor(b, div(b, d, k(b, span, v)));
  Value even = eq(b, b.binary("stablehlo.remainder", flips, k(b, 2, v)), k(b, 0, v));
  Value r = sel(b, even, add(b, extra, k(b, lo, v)), add(b, sub(b, k(b, span, v), extra), k(b, lo, v)));
  return {r, sel(b, even, sign, neg(b, sign))};
}

// Padding applied to an unnormalized coordinate; `grad` (if given) gets d(result)/d(unnormalized).
Value apply_padding(HloBuilder& b, const Value& v, int64_t size, int64_t padding, bool align, Value* grad) {
  if (padding == kZeros) {
    if (grad) *grad = k(b, 1, v);
    return v;
  }
  Value r = v, gr = k(b, 1, v);
  if (padding == kReflection) {
    std::tie(r, gr) = align ? reflect(b, v, 0, 2 * (size - 1)) : reflect(b, v, -1, 2 * size - 1);
  }
  Value clipped = clip(b, r, size);
  if (grad) {  // the clip's own gradient: 0 at and beyond both borders
    Value inside = land(b, gt(b, r, k(b, 0, r)), lt(b, r, k(b, static_cast<double>(size - 1), r)));
    *grad = sel(b, inside, gr, k(b, 0, r));
  }
  return clipped;
}

// One tap: per spatial dim an integer position (as float values), and the tap's weight.
struct Tap {
  V pos;  // per spatial dim (index d of `in`), R float values
  Value weight;
};

// Row of each tap position in the input viewed as rows (N * plane, C); positions are clipped (and NaN made 0) so
// the index is always in range, and `valid` says which positions really lie inside the input.
Value flat_index(HloBuilder& b, const Geometry& g, const V& pos, Value* valid) {
  int64_t r = g.rows();
  Value flat = b.reshape(b.broadcast_in_dim(b.iota({ElementType::kS64, {g.n}}, 0), {g.n, g.points}, {0}), {r});
  flat = b.binary("stablehlo.multiply", flat, b.constant(static_cast<double>(g.plane), ElementType::kS64, {r}));
  *valid = b.constant(1, ElementType::kPred, {r});
  int64_t stride = 1;
  for (int64_t d = g.nd - 1; d >= 0; --d) {
    const Value& p = pos[static_cast<size_t>(d)];
    *valid = land(b, *valid, land(b, ge(b, p, k(b, 0, p)), lt(b, p, k(b, static_cast<double>(g.in[d]), p))));
    Value idx = b.convert(clip(b, sel(b, isnan(b, p), k(b, 0, p), p), g.in[d]), ElementType::kS64);
    flat = b.binary("stablehlo.add", flat,
                    b.binary("stablehlo.multiply", idx, b.constant(static_cast<double>(stride), ElementType::kS64, {r})));
    stride *= g.in[d];
  }
  return flat;
}

// The input rows read at a tap: zeros where the position is outside the input (or NaN).
Value read_tap(HloBuilder& b, const Value& rows, const Geometry& g, const V& pos) {
  Value valid;
  Value v = gather_dim(b, rows, flat_index(b, g, pos, &valid), 0);
  return sel(b, b.broadcast_in_dim(valid, {g.rows(), g.c}, {0}), v, zeros(b, v.type));
}

// Source coordinates per spatial dim d (R values), padded; `mult` gets their derivative w.r.t. the grid values.
V source_coordinates(HloBuilder& b, const Value& grid, const Geometry& g, ElementType t, int64_t padding, bool align,
                     bool pad, V* mult) {
  V coords(static_cast<size_t>(g.nd));
  if (mult) mult->assign(static_cast<size_t>(g.nd), Value());
  for (int64_t kk = 0; kk < g.nd; ++kk) {
    int64_t d = g.nd - 1 - kk;
    Value v = unnormalize(b, grid_coordinate(b, grid, g, kk, t), g.in[d], align);
    Value grad;
    if (pad) v = apply_padding(b, v, g.in[d], padding, align, mult ? &grad : nullptr);
    if (mult) {
      double scale = align ? static_cast<double>(g.in[d] - 1) / 2 : static_cast<double>(g.in[d]) / 2;
      (*mult)[static_cast<size_t>(d)] = mul(b, pad ? grad : k(b, 1, v), k(b, scale, v));
    }
    coords[static_cast<size_t>(d)] = v;
  }
  return coords;
}

// Bilinear taps in the CPU kernel's order (outermost dim slowest: for 2-D nw, ne, sw, se), weights multiplied
// innermost dim first; `dweights[t][d]` gets d(weight of tap t)/d(coordinate d).
std::vector<Tap> linear_taps(HloBuilder& b, const V& coords, std::vector<V>* dweights) {
  int64_t nd = static_cast<int64_t>(coords.size());
  V lo, hi;
  for (const Value& v : coords) {
    lo.push_back(floor(b, v));
    hi.push_back(add(b, lo.back(), k(b, 1, v)));
  }
  std::vector<Tap> taps;
  for (int64_t m = 0; m < (int64_t{1} << nd); ++m) {
    Tap tap;
    V factors(static_cast<size_t>(nd)), signs(static_cast<size_t>(nd));
    for (int64_t d = 0; d < nd; ++d) {
      bool upper = (m >> (nd - 1 - d)) & 1;
      size_t i = static_cast<size_t>(d);
      tap.pos.push_back(upper ? hi[i] : lo[i]);
      factors[i] = upper ? sub(b, coords[i], lo[i]) : sub(b, hi[i], coords[i]);
      signs[i] = k(b, upper ? 1 : -1, coords[i]);
    }
    tap.weight = factors[static_cast<size_t>(nd - 1)];
    for (int64_t d = nd - 2; d >= 0; --d) tap.weight = mul(b, tap.weight, factors[static_cast<size_t>(d)]);
    if (dweights) {
      V dw;
      for (int64_t d = 0; d < nd; ++d) {
        Value w = signs[static_cast<size_t>(d)];
        for (int64_t e = nd - 1; e >= 0; --e) {
          if (e != d) w = mul(b, w, factors[static_cast<size_t>(e)]);
        }
        dw.push_back(w);
      }
      dweights->push_back(dw);
    }
    taps.push_back(tap);
  }
  return taps;
}

Tap nearest_tap(HloBuilder& b, const V& coords) {
  Tap tap;
  for (const Value& v : coords) tap.pos.push_back(b.unary("stablehlo.round_nearest_even", v));
  tap.weight = k(b, 1, coords[0]);
  return tap;
}

// Cubic convolution weights of the 4 taps at floor(v) - 1 .. floor(v) + 2 (A = -0.75, as PyTorch).
V cubic_weights(HloBuilder& b, const Value& t) {
  const double a = -0.75;
  auto near = [&](const Value& x) {  // ((A + 2) x - (A + 3)) x x + 1
    return add(b, mul(b, mul(b, sub(b, mul(b, k(b, a + 2, x), x), k(b, a + 3, x)), x), x), k(b, 1, x));
  };
  auto far = [&](const Value& x) {  // ((A x - 5 A) x + 8 A) x - 4 A
    return sub(b, mul(b, add(b, mul(b, sub(b, mul(b, k(b, a, x), x), k(b, 5 * a, x)), x), k(b, 8 * a, x)), x),
               k(b, 4 * a, x));
  };
  return {far(add(b, t, k(b, 1, t))), near(t), near(sub(b, k(b, 1, t), t)), far(sub(b, k(b, 2, t), t))};
}

// grid_sampler_2d/3d(input, grid, interpolation_mode, padding_mode, align_corners)
V grid_sample_rule(OpContext& c) {
  HloBuilder& b = c.b;
  TensorType o = c.out(0);
  if (o.numel() == 0) return {zeros(b, o)};
  Value x = c.tensor(0), grid = c.tensor(1);
  Geometry g = geometry_of(x, grid);
  ElementType t = opmath_type(o.dtype);
  int64_t mode = c.integer(2), padding = c.integer(3);
  bool align = c.flag(4);
  Ints perm{0};
  for (int64_t d = 0; d < g.nd; ++d) perm.push_back(d + 2);
  perm.push_back(1);
  Value rows = b.reshape(b.transpose(b.convert(x, t), perm), {g.n * g.plane, g.c});
  Value acc;
  if (mode == kBicubic) {
    V coords = source_coordinates(b, grid, g, t, padding, align, false, nullptr);  // unpadded; taps padded below
    const Value& cx = coords[1];
    const Value& cy = coords[0];
    Value x0 = floor(b, cx), y0 = floor(b, cy);
    V wx = cubic_weights(b, sub(b, cx, x0)), wy = cubic_weights(b, sub(b, cy, y0));
    for (int i = 0; i < 4; ++i) {
      Value py = apply_padding(b, add(b, y0, k(b, i - 1, y0)), g.in[0], padding, align, nullptr);
      Value row;
      for (int j = 0; j < 4; ++j) {
        Value px = apply_padding(b, add(b, x0, k(b, j - 1, x0)), g.in[1], padding, align, nullptr);
        Value v = read_tap(b, rows, g, {py, px});
        Value term = mul(b, v, b.broadcast_in_dim(wx[static_cast<size_t>(j)], {g.rows(), g.c}, {0}));
        row = j == 0 ? term : add(b, row, term);
      }
      Value term = mul(b, row, b.broadcast_in_dim(wy[static_cast<size_t>(i)], {g.rows(), g.c}, {0}));
      acc = i == 0 ? term : add(b, acc, term);
    }
  } else {
    V coords = source_coordinates(b, grid, g, t, padding, align, true, nullptr);
    std::vector<Tap> taps = mode == kNearest ? std::vector<Tap>{nearest_tap(b, coords)} : linear_taps(b, coords, nullptr);
    for (size_t i = 0; i < taps.size(); ++i) {
      Value v = read_tap(b, rows, g, taps[i].pos);
      Value term = mode == kNearest ? v : mul(b, v, b.broadcast_in_dim(taps[i].weight, {g.rows(), g.c}, {0}));
      acc = i == 0 ? term : add(b, acc, term);
    }
  }
  Ints back{0, static_cast<int64_t>(g.nd) + 1};
  for (int64_t d = 0; d < g.nd; ++d) back.push_back(d + 1);
  Ints shaped{g.n};
  shaped.insert(shaped.end(), g.out.begin(), g.out.end());
  shaped.push_back(g.c);
  return {to_result(c, b.transpose(b.reshape(acc, shaped), back))};
}

// grid_sampler_2d/3d_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask)
//   -> (grad_input, grad_grid); bilinear and nearest only (see grid_sample_applies).
V grid_sample_backward_rule(OpContext& c) {
  HloBuilder& b = c.b;
  Value x = c.tensor(1), grid = c.tensor(2);
  Geometry g = geometry_of(x, grid);
  ElementType t = opmath_type(x.type.dtype);
  int64_t mode = c.integer(3), padding = c.integer(4);
  bool align = c.flag(5);
  V results{zeros(b, c.out(0)), zeros(b, c.out(1))};
  if (g.rows() == 0 || g.c == 0 || g.plane == 0) return results;
  Ints perm{0};
  for (int64_t d = 0; d < g.nd; ++d) perm.push_back(d + 2);
  perm.push_back(1);
  Value gout = b.reshape(b.transpose(b.convert(c.tensor(0), t), perm), {g.rows(), g.c});
  Value rows = b.reshape(b.transpose(b.convert(x, t), perm), {g.n * g.plane, g.c});
  V coords = source_coordinates(b, grid, g, t, padding, align, true, nullptr);
  std::vector<Tap> taps = mode == kNearest ? std::vector<Tap>{nearest_tap(b, coords)} : linear_taps(b, coords, nullptr);
  if (c.out_defined(0)) {
    Value into = b.constant(0, t, {g.n * g.plane, g.c});
    for (const Tap& tap : taps) {
      Value valid;
      Value flat = flat_index(b, g, tap.pos, &valid);
      Value w = sel(b, valid, tap.weight, k(b, 0, tap.weight));
      into = scatter_add_dim(b, into, mul(b, gout, b.broadcast_in_dim(w, {g.rows(), g.c}, {0})), flat, 0);
    }
    Ints shaped{g.n};
    shaped.insert(shaped.end(), g.in.begin(), g.in.end());
    shaped.push_back(g.c);
    Ints back{0, static_cast<int64_t>(g.nd) + 1};
    for (int64_t d = 0; d < g.nd; ++d) back.push_back(d + 1);
    results[0] = b.convert(b.transpose(b.reshape(into, shaped), back), c.out(0).dtype);
  }
  if (c.out_defined(1) && mode != kNearest) {
    // In float64 (coordinates, weights and the sums over channels and taps), rounded once: the terms cancel, and
    // the CPU kernel's float32 steps in another order would otherwise differ by more than float32's tolerance.
    const ElementType wide = ElementType::kF64;
    Value wide_rows = b.convert(rows, wide), wide_gout = b.convert(gout, wide);
    V wide_mult;
    V wide_coords = source_coordinates(b, grid, g, wide, padding, align, true, &wide_mult);
    std::vector<V> wide_dw;
    std::vector<Tap> wide_taps = linear_taps(b, wide_coords, &wide_dw);
    V dots;
    for (const Tap& tap : wide_taps) dots.push_back(reduce_sum(b, mul(b, read_tap(b, wide_rows, g, tap.pos), wide_gout), {1}));
    V parts;
    for (int64_t kk = 0; kk < g.nd; ++kk) {  // grid component kk (x, y, z) is spatial dim nd - 1 - kk
      size_t d = static_cast<size_t>(g.nd - 1 - kk);
      Value total;
      for (size_t i = 0; i < wide_taps.size(); ++i) {
        Value term = mul(b, dots[i], wide_dw[i][d]);
        total = i == 0 ? term : add(b, total, term);
      }
      parts.push_back(b.reshape(b.convert(mul(b, total, wide_mult[d]), t), {g.rows(), 1}));
    }
    Value gg = b.concatenate(parts, 1);
    results[1] = b.convert(b.reshape(gg, c.out(1).dims), c.out(1).dtype);
  }
  return results;
}

bool grid_sample_applies(const std::vector<c10::IValue>& args) {  // the bicubic backward stays on the CPU
  return args.size() > 3 && args[3].isInt() && args[3].toInt() != kBicubic;
}

}  // namespace

void add_grid_sample_rules(Rows& rows) {
  rows.push_back({{"grid_sampler_2d", "grid_sampler_2d.out", "grid_sampler_3d", "grid_sampler_3d.out"},
                  grid_sample_rule});
  rows.push_back({{"grid_sampler_2d_backward", "grid_sampler_2d_backward.out", "grid_sampler_3d_backward",
                   "grid_sampler_3d_backward.out"},
                  grid_sample_backward_rule, nullptr, grid_sample_applies});
}

}  // namespace torch_tpu
