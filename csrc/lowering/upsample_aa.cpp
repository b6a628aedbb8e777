// Antialiased resizing (_upsample_bilinear2d_aa, _upsample_bicubic2d_aa and their backwards; torchvision's
// resize(antialias=True)). Each output pixel averages a window of input pixels whose width grows with the
// downscaling factor, so the taps are not the fixed 2 or 4 of plain interpolation. The weights depend only on the
// sizes, align_corners and the scales, so they are program constants: a [out, in] matrix per spatial dim, taken from
// PyTorch's own CPU kernel applied to unit impulses (the exact float weights it uses). The resize is then two
// contractions, width first as the CPU kernel does; the backward contracts with the transposed matrices.
#include <ATen/ATen.h>

#include <optional>

#include "lowering/op_context.h"
#include "lowering/rule_helpers.h"

namespace torch_tpu {
namespace {

using Rows = std::vector<LoweringRow>;
using V = std::vector<Value>;

enum class Filter { kBilinear, kBicubic };

// The [out, in] weight matrix along one dim (H when `height`) for the kernel's float32 weights.
std::vector<double> aa_weights(Filter filter, int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                               bool height) {
  // The other spatial dim is 2 -> 2, an identity resize (a size of 1 there trips the CPU kernel's separable path).
  at::Tensor eye = at::eye(in, at::kFloat);  // row c: a unit impulse at c
  at::Tensor impulses = height ? eye.reshape({in, 1, in, 1}).expand({in, 1, in, 2}).contiguous()
                               : eye.reshape({in, 1, 1, in}).expand({in, 1, 2, in}).contiguous();
  std::vector<int64_t> size = height ? std::vector<int64_t>{out, 2} : std::vector<int64_t>{2, out};
  std::optional<double> sh = height ? scale : std::nullopt, sw = height ? std::nullopt : scale;
  at::Tensor response = filter == Filter::kBilinear
                            ? at::_upsample_bilinear2d_aa(impulses, size, align_corners, sh, sw)
                            : at::_upsample_bicubic2d_aa(impulses, size, align_corners, sh, sw);
  at::Tensor taps = height ? response.select(3, 0) : response.select(2, 0);  // [in, 1, out]
  at::Tensor w = taps.reshape({in, out}).t().contiguous().to(at::kDouble);   // [out, in]
  const double* p = w.const_data_ptr<double>();
  return std::vector<double>(p, p + w.numel());
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
  auto matrix = [&](int64_t in, int64_t out, std::optional<double> scale, bool height) {
    return c.b.reshape(c.b.constant_values(aa_weights(filter, in, out, a.align_corners, scale, height), t), {out, in});
  };
  return {matrix(a.in[2], a.out[2], a.scale_h, true), matrix(a.in[3], a.out[3], a.scale_w, false)};
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
  return args.empty() || !args[0].isTensor() || at::isFloatingType(args[0].toTensor().scalar_type());
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
