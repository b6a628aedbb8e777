// Antialiased resizing (_upsample_bilinear2d_aa, _upsample_bicubic2d_aa and their backwards; torchvision's
// resize(antialias=True)). Each output pixel averages a window of input pixels whose width grows with the
// downscaling factor, so the taps are not the fixed 2 or 4 of plain interpolation. The weights depend only on the
// sizes, align_corners and the scales, so they are program constants: a [out, in] matrix per spatial dim, computed
// in float as PyTorch's CPU kernel computes its weights. The resize is then two contractions, width first as the CPU
// kernel does; the backward contracts with the transposed matrices.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lowering/lib/op_context.h"
#include "lowering/lib/rule_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

enum class Filter { kBilinear, kBicubic };

// The filters of PyTorch's antialiased kernels: a triangle (bilinear) and Keys' cubic with a = -0.5 (bicubic).
float aa_filter(Filter filter, float x) {
  x = std::fabs(x);
  if (filter == Filter::kBilinear) return x < 1.0f ? 1.0f - x : 0.0f;
  constexpr float a = -0.5f;
  if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
  if (x < 2.0f) return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
  return 0.0f;
}

// The [out, in] weight matrix along one dim, computed as the CPU kernel computes its float32 weights: the window of
// input pixels around each output pixel's centre (wider by the scale when downscaling), the filter evaluated at the
// distances (shrunk by the scale), normalised to sum 1.
std::vector<double> aa_weights(Filter filter, int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  float s;
  if (align_corners) {
    s = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  } else {
    s = scale && *scale > 0 ? static_cast<float>(1.0 / *scale) : static_cast<float>(in) / static_cast<float>(out);
  }
  const float half_taps = filter == Filter::kBilinear ? 1.0f : 2.0f;
  const float support = s >= 1.0f ? half_taps * s : half_taps;
  const float invscale = s >= 1.0f ? 1.0f / s : 1.0f;
  const int64_t max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  std::vector<double> w(static_cast<size_t>(out * in), 0.0);
  std::vector<float> taps;
  for (int64_t i = 0; i < out; ++i) {
    const float center = s * (static_cast<float>(i) + 0.5f);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5f), 0);
    const int64_t size = std::clamp<int64_t>(std::min<int64_t>(static_cast<int64_t>(center + support + 0.5f), in) - lo,
                                             0, max_taps);
    taps.assign(static_cast<size_t>(size), 0.0f);
    float total = 0.0f;
    for (int64_t j = 0; j < size; ++j) {
      taps[j] = aa_filter(filter, (static_cast<float>(j + lo) - center + 0.5f) * invscale);
      total += taps[j];
    }
    for (int64_t j = 0; j < size; ++j) {
      w[static_cast<size_t>(i * in + lo + j)] = total != 0.0f ? taps[j] / total : taps[j];
    }
  }
  return w;
}

// x [..., in] contracted with the [out, in] matrix along dim `d` (moved to the end of the result's dims, then back).
Value contract_dim(HloBuilder& b, const Value& x, const Value& w, int64_t d) {
  int64_t rank = x.type.rank();
  TensorType t{x.type.dtype, {}};
  for (int64_t i = 0; i < rank; ++i) {
    if (i != d) t.dims.push_back(x.type.dims[i]);
  }
  t.dims.push_back(w.type.dims[0]);
  Value y = b.dot_general(x, w, {}, {}, {d}, {1}, t);  // [... without d, out]
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank - 1; ++i) perm.push_back(i);
  perm.insert(perm.begin() + d, rank - 1);
  return b.transpose(y, perm);
}

struct AaArgs {
  std::vector<int64_t> in, out;  // full NCHW shapes of the forward's input and output
  bool align_corners = false;
  std::optional<double> scale_h, scale_w;
};

// Forward: (self, output_size, align_corners, scales_h?, scales_w?); backward: (grad_output, output_size,
// input_size, align_corners, scales_h?, scales_w?).
AaArgs aa_args(OpContext& c, bool backward) {
  AaArgs a;
  size_t next = backward ? 3 : 2;
  if (backward) {
    a.in = c.ints(2);
    a.out = c.tensor(0).type.dims;
  } else {
    a.in = c.tensor(0).type.dims;
    a.out = c.out(0).dims;
  }
  TORCH_CHECK(a.in.size() == 4 && a.out.size() == 4, "Expected 4D input for antialiased upsampling");
  a.align_corners = c.flag(next);
  if (c.has(next + 1)) a.scale_h = c.scalar(next + 1);
  if (c.has(next + 2)) a.scale_w = c.scalar(next + 2);
  return a;
}

std::pair<Value, Value> aa_matrices(OpContext& c, Filter filter, const AaArgs& a, ElementType t) {
  auto matrix = [&](int64_t in, int64_t out, std::optional<double> scale) {
    return c.b.reshape(c.b.constant_values(aa_weights(filter, in, out, a.align_corners, scale), t), {out, in});
  };
  return {matrix(a.in[2], a.out[2], a.scale_h), matrix(a.in[3], a.out[3], a.scale_w)};
}

// The forward contracts width then height with the matrices; the backward, height then width with their transposes.
LoweringRule aa_rule(Filter filter, bool backward) {
  return [filter, backward](OpContext& c) -> V {
    AaArgs a = aa_args(c, backward);
    ElementType t = opmath_type(c.out(0).dtype);
    auto [wh, ww] = aa_matrices(c, filter, a, t);
    Value x = c.b.convert(c.tensor(0), t);
    if (backward) return {to_result(c, contract_dim(c.b, contract_dim(c.b, x, c.b.transpose(wh, {1, 0}), 2),
                                                    c.b.transpose(ww, {1, 0}), 3))};
    return {to_result(c, contract_dim(c.b, contract_dim(c.b, x, ww, 3), wh, 2))};
  };
}

// uint8 images: the CPU resizes them in fixed point with its own rounding; those calls stay on the CPU fallback.
bool floating_input(const std::vector<c10::IValue>& args) {
  return args.empty() || !args[0].isTensor() || c10::isFloatingType(args[0].toTensor().scalar_type());
}

}  // namespace

void add_upsample_aa_rules(Rows& rows) {
  rows.push_back({{"_upsample_bilinear2d_aa", "_upsample_bilinear2d_aa.out"}, aa_rule(Filter::kBilinear, false), nullptr,
                  floating_input});
  rows.push_back({{"_upsample_bilinear2d_aa_backward", "_upsample_bilinear2d_aa_backward.grad_input"},
                  aa_rule(Filter::kBilinear, true)});
  rows.push_back({{"_upsample_bicubic2d_aa", "_upsample_bicubic2d_aa.out"}, aa_rule(Filter::kBicubic, false), nullptr,
                  floating_input});
  rows.push_back({{"_upsample_bicubic2d_aa_backward", "_upsample_bicubic2d_aa_backward.grad_input"},
                  aa_rule(Filter::kBicubic, true)});
}

}  // namespace torch_tpu
