// Quantized tpu tensors: per-tensor and per-channel affine qint8 / quint8 / qint32 storage (a QTensorImpl over a tpu
// storage of the integer values), quantize and dequantize as device programs, the quantizer queries, copies between
// cpu and tpu, and torch_tpu::int8_weight_only_linear (an int8 weight, dequantized inside the matmul's program).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <torch/library.h>

#include "exec/tensor_program.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

at::ScalarType int_type_of(at::ScalarType q) {
  switch (q) {
    case at::kQInt8: return at::kChar;
    case at::kQUInt8: return at::kByte;
    case at::kQInt32: return at::kInt;
    default: TORCH_CHECK(false, "tpu quantized tensors hold qint8, quint8 or qint32, not ", q);
  }
}

std::pair<double, double> int_range(at::ScalarType q) {
  switch (q) {
    case at::kQInt8: return {-128, 127};
    case at::kQUInt8: return {0, 255};
    default: return {-2147483648.0, 2147483647.0};
  }
}

// A plain integer tensor over the quantized tensor's storage, with its sizes, strides and offset.
at::Tensor int_alias(const at::Tensor& q) {
  at::ScalarType t = int_type_of(q.scalar_type());
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(q.storage()),
                                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                   c10::scalarTypeToTypeMeta(t));
  impl->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  return at::Tensor(std::move(impl));
}

at::Tensor new_tpu_qtensor(c10::IntArrayRef sizes, const at::Tensor& like_device, at::QuantizerPtr quantizer) {
  c10::DeviceGuard guard(like_device.device());
  auto options = at::TensorOptions().device(like_device.device()).dtype(quantizer->scalar_type());
  return at::new_qtensor(sizes, options, std::move(quantizer));
}

// Shape of per-channel parameters broadcast along `axis` of a tensor of `rank` dims.
Value along_axis(HloBuilder& b, const Value& per_channel, const std::vector<int64_t>& dims, int64_t axis) {
  return b.broadcast_in_dim(per_channel, dims, {axis});
}

// round-half-even(x * inv_scale) + zero_point, clamped to the integer type: PyTorch's quantize_val.
Value quantize_value(HloBuilder& b, const Value& x, const Value& inv_scale, const Value& zero_point,
                     at::ScalarType qtype) {
  Value scaled = b.unary("stablehlo.round_nearest_even", b.binary("stablehlo.multiply", x, inv_scale));
  Value shifted = b.binary("stablehlo.add", scaled, zero_point);
  auto [lo, hi] = int_range(qtype);
  const auto& dims = shifted.type.dims;
  Value clamped = b.binary("stablehlo.minimum", b.binary("stablehlo.maximum", shifted, b.constant(lo, ElementType::kF32, dims)),
                           b.constant(hi, ElementType::kF32, dims));
  return b.convert(clamped, element_type_of(int_type_of(qtype)));
}

at::Tensor tpu_quantize_per_tensor(const at::Tensor& self, double scale, int64_t zero_point, at::ScalarType dtype) {
  TORCH_CHECK(self.scalar_type() == at::kFloat || self.scalar_type() == at::kBFloat16 || self.scalar_type() == at::kHalf,
              "quantize_per_tensor expects a floating point tensor, got ", self.scalar_type());
  at::Tensor q = new_tpu_qtensor(self.sizes(), self, at::make_per_tensor_affine_quantizer(scale, zero_point, dtype));
  TensorProgram p(self.device().index());
  HloBuilder& b = p.builder();
  Value x = b.convert(p.read(self), ElementType::kF32);
  const auto& dims = x.type.dims;
  float inv = 1.0f / static_cast<float>(scale);
  p.write(int_alias(q), quantize_value(b, x, b.constant(inv, ElementType::kF32, dims),
                                       b.constant(static_cast<double>(zero_point), ElementType::kF32, dims), dtype));
  p.run();
  return q;
}

at::Tensor tpu_quantize_per_channel(const at::Tensor& self, const at::Tensor& scales, const at::Tensor& zero_points,
                                    int64_t axis, at::ScalarType dtype) {
  TORCH_CHECK(axis >= 0 && axis < self.dim(), "quantize_per_channel: axis ", axis, " is out of range for a ",
              self.dim(), "-d tensor");
  TORCH_CHECK(scales.numel() == self.size(axis) && zero_points.numel() == self.size(axis),
              "quantize_per_channel: expected ", self.size(axis), " scales and zero points along axis ", axis);
  at::Tensor q = new_tpu_qtensor(self.sizes(), self,
                                 at::make_per_channel_affine_quantizer(scales, zero_points, axis, dtype));
  // 1 / float(scale), as PyTorch's per-channel quantize computes it, then uploaded as program inputs.
  at::Tensor inv = (1.0f / scales.to(at::kFloat).cpu()).to(self.device());
  at::Tensor zps = zero_points.to(at::kFloat).to(self.device());
  TensorProgram p(self.device().index());
  HloBuilder& b = p.builder();
  Value x = b.convert(p.read(self), ElementType::kF32);
  const auto& dims = x.type.dims;
  p.write(int_alias(q), quantize_value(b, x, along_axis(b, p.read(inv), dims, axis),
                                       along_axis(b, p.read(zps), dims, axis), dtype));
  p.run();
  return q;
}

// (int - zero_point) * scale in float32, as PyTorch's dequantize_val.
at::Tensor tpu_dequantize(const at::Tensor& self) {
  TensorProgram p(self.device().index());
  HloBuilder& b = p.builder();
  Value v = b.convert(p.read(int_alias(self)), ElementType::kF32);
  const auto& dims = v.type.dims;
  Value scale, zp;
  at::Tensor s, z;  // per-channel parameters: alive until the program ran (its slots are keyed by storage)
  at::QScheme scheme = self.qscheme();
  if (scheme == at::kPerTensorAffine) {
    scale = b.constant(static_cast<float>(self.q_scale()), ElementType::kF32, dims);
    zp = b.constant(static_cast<double>(self.q_zero_point()), ElementType::kF32, dims);
  } else {
    TORCH_CHECK(scheme == at::kPerChannelAffine || scheme == at::kPerChannelAffineFloatQParams,
                "tpu dequantize supports per-tensor and per-channel affine tensors, not ", scheme);
    int64_t axis = self.q_per_channel_axis();
    s = self.q_per_channel_scales().to(at::kFloat).to(self.device());
    z = self.q_per_channel_zero_points().to(at::kFloat).to(self.device());
    scale = along_axis(b, p.read(s), dims, axis);
    zp = along_axis(b, p.read(z), dims, axis);
  }
  at::Tensor out = p.output(b.binary("stablehlo.multiply", b.binary("stablehlo.subtract", v, zp), scale), at::kFloat);
  p.run();
  return out;
}

at::Tensor tpu_int_repr(const at::Tensor& self) {
  TensorProgram p(self.device().index());
  at::Tensor out = p.output(p.read(int_alias(self)), int_type_of(self.scalar_type()));
  p.run();
  return out;
}

at::Tensor tpu_empty_affine_quantized(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                      std::optional<at::Layout> layout, std::optional<at::Device> device,
                                      std::optional<bool> pin_memory, double scale, int64_t zero_point,
                                      std::optional<at::MemoryFormat> memory_format) {
  at::Tensor like = at::empty({0}, at::TensorOptions().device(device.value_or(at::Device(c10::kPrivateUse1))));
  return new_tpu_qtensor(size, like, at::make_per_tensor_affine_quantizer(scale, zero_point,
                                                                           dtype.value_or(at::kQUInt8)));
}

at::Tensor tpu_empty_per_channel_affine_quantized(c10::IntArrayRef size, const at::Tensor& scales,
                                                  const at::Tensor& zero_points, int64_t axis,
                                                  std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                                  std::optional<at::Device> device, std::optional<bool> pin_memory,
                                                  std::optional<at::MemoryFormat> memory_format) {
  at::Tensor like = at::empty({0}, at::TensorOptions().device(device.value_or(at::Device(c10::kPrivateUse1))));
  return new_tpu_qtensor(size, like, at::make_per_channel_affine_quantizer(scales, zero_points, axis,
                                                                            dtype.value_or(at::kQUInt8)));
}

// The same quantized tensor on `device`: the integer values move, the quantizer is rebuilt around them.
at::Tensor requantized_on(const at::Tensor& self, at::Device device) {
  at::Tensor values = self.int_repr().to(device);
  if (self.qscheme() == at::kPerTensorAffine) {
    return at::_make_per_tensor_quantized_tensor(values, self.q_scale(), self.q_zero_point());
  }
  return at::_make_per_channel_quantized_tensor(values, self.q_per_channel_scales(), self.q_per_channel_zero_points(),
                                                self.q_per_channel_axis());
}

at::Tensor tpu_q_to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                         std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!dtype.has_value() || *dtype == self.scalar_type(),
              "a quantized tensor changes dtype through dequantize() or torch.quantize_per_*, not .to(dtype)");
  return requantized_on(self, device.value_or(self.device()));
}

at::Tensor tpu_make_per_tensor_quantized(const at::Tensor& self, double scale, int64_t zero_point) {
  at::ScalarType q = self.scalar_type() == at::kChar ? at::kQInt8
                     : self.scalar_type() == at::kByte ? at::kQUInt8
                                                       : at::kQInt32;
  TORCH_CHECK(self.scalar_type() == int_type_of(q), "_make_per_tensor_quantized_tensor expects int8, uint8 or int32");
  at::Tensor out = new_tpu_qtensor(self.sizes(), self, at::make_per_tensor_affine_quantizer(scale, zero_point, q));
  TensorProgram p(self.device().index());
  p.write(int_alias(out), p.read(self));
  p.run();
  return out;
}

at::Tensor tpu_make_per_channel_quantized(const at::Tensor& self, const at::Tensor& scales,
                                          const at::Tensor& zero_points, int64_t axis) {
  at::ScalarType q = self.scalar_type() == at::kChar ? at::kQInt8
                     : self.scalar_type() == at::kByte ? at::kQUInt8
                                                       : at::kQInt32;
  TORCH_CHECK(self.scalar_type() == int_type_of(q), "_make_per_channel_quantized_tensor expects int8, uint8 or int32");
  at::Tensor out = new_tpu_qtensor(self.sizes(), self,
                                   at::make_per_channel_affine_quantizer(scales, zero_points, axis, q));
  TensorProgram p(self.device().index());
  p.write(int_alias(out), p.read(self));
  p.run();
  return out;
}

// copy_ into a quantized tpu tensor from a quantized tensor (any device): values and quantizer, as on the CPU.
at::Tensor& tpu_q_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(src.is_quantized() && self.is_quantized(),
              "copy_ between quantized and float tensors on tpu: use torch.quantize_per_* or dequantize()");
  TORCH_CHECK(self.device().type() == c10::kPrivateUse1,
              "copy_ to a quantized ", self.device(), " tensor from tpu: use .to(device) instead");
  TORCH_CHECK(self.scalar_type() == src.scalar_type(), "Quantized copy only works between tensors of one dtype");
  auto* impl = static_cast<at::QTensorImpl*>(self.unsafeGetTensorImpl());
  impl->set_quantizer_(src.quantizer());
  at::Tensor values = src.int_repr();
  if (values.device() != self.device()) values = values.to(self.device());
  TensorProgram p(self.device().index());
  p.write(int_alias(self), p.read(values));
  p.run();
  return self;
}

// ---- int8 weight-only linear: y = x @ (w_int8 * scales[:, None]).T + bias, one program ----

at::Tensor tpu_int8_weight_only_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scales,
                                       const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(w.scalar_type() == at::kChar && w.dim() == 2, "int8_weight_only_linear: weight must be 2-d int8");
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == w.size(0), "int8_weight_only_linear: one scale per output row");
  TORCH_CHECK(x.size(-1) == w.size(1), "int8_weight_only_linear: input features ", x.size(-1), " != weight's ",
              w.size(1));
  at::ScalarType t = x.scalar_type();
  ElementType ct = (t == at::kBFloat16 || t == at::kHalf) ? ElementType::kF32 : element_type_of(t);
  TensorProgram p(x.device().index());
  HloBuilder& b = p.builder();
  Value xv = b.convert(p.read(x), ct);
  Value wv = b.convert(p.read(w), ct);
  Value sv = b.convert(p.read(scales), ct);
  Value wf = b.binary("stablehlo.multiply", wv, b.broadcast_in_dim(sv, wv.type.dims, {0}));
  std::vector<int64_t> out_dims = xv.type.dims;
  out_dims.back() = w.size(0);
  int64_t n = xv.type.rank();
  Value y = b.dot_general(xv, wf, {}, {}, {n - 1}, {1}, {ct, out_dims});
  if (bias.has_value() && bias->defined()) y = b.binary("stablehlo.add", y, b.broadcast_to(b.convert(p.read(*bias), ct), out_dims));
  at::Tensor out = p.output(y, t);
  p.run();
  return out;
}

at::Tensor cpu_int8_weight_only_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scales,
                                       const std::optional<at::Tensor>& bias) {
  at::Tensor wf = w.to(x.scalar_type()) * scales.to(x.scalar_type()).unsqueeze(1);
  return at::linear(x, wf, bias);
}

}  // namespace
}  // namespace torch_tpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", TORCH_FN(torch_tpu::tpu_quantize_per_tensor));
  m.impl("quantize_per_channel", TORCH_FN(torch_tpu::tpu_quantize_per_channel));
  m.impl("_make_per_tensor_quantized_tensor", TORCH_FN(torch_tpu::tpu_make_per_tensor_quantized));
  m.impl("_make_per_channel_quantized_tensor", TORCH_FN(torch_tpu::tpu_make_per_channel_quantized));
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("dequantize.self", TORCH_FN(torch_tpu::tpu_dequantize));
  m.impl("int_repr", TORCH_FN(torch_tpu::tpu_int_repr));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("_empty_affine_quantized", TORCH_FN(torch_tpu::tpu_empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(torch_tpu::tpu_empty_per_channel_affine_quantized));
  m.impl("_to_copy", TORCH_FN(torch_tpu::tpu_q_to_copy));
  m.impl("copy_", TORCH_FN(torch_tpu::tpu_q_copy_));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
}

TORCH_LIBRARY_FRAGMENT(torch_tpu, m) {
  m.def("int8_weight_only_linear(Tensor input, Tensor weight_int8, Tensor scales, Tensor? bias=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(torch_tpu, PrivateUse1, m) {
  m.impl("int8_weight_only_linear", TORCH_FN(torch_tpu::tpu_int8_weight_only_linear));
}

TORCH_LIBRARY_IMPL(torch_tpu, CPU, m) {
  m.impl("int8_weight_only_linear", TORCH_FN(torch_tpu::cpu_int8_weight_only_linear));
}
