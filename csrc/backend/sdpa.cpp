// Scaled dot-product attention on tpu. torch.nn.functional.scaled_dot_product_attention asks the device's
// _fused_sdp_choice_stub which backend to run (reading only metadata: no tensor leaves the device); tpu answers
// "overrideable" for the shapes its fused kernels handle, and those run attention as one program forward and one
// backward (lowering/attention.h). Everything else (dropout, grouped-query attention, other ranks) takes PyTorch's
// math path, op by op.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <cmath>

#include "exec/tensor_program.h"
#include "lowering/attention.h"
#include "lowering/op_context.h"

namespace torch_tpu {
namespace {

bool fused_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}

int64_t tpu_fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                             std::optional<double> scale, bool enable_gqa) {
  const auto math = static_cast<int64_t>(at::SDPBackend::math);
  if (!at::globalContext().userEnabledOverrideableSDP()) return math;
  // (B, H, L, E) or (H, L, E), as PyTorch's meta kernel for the overrideable op expects.
  bool fits = dropout_p == 0.0 && (q.dim() == 4 || q.dim() == 3) && k.dim() == q.dim() && v.dim() == q.dim() &&
              !q.is_nested() && q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type() &&
              fused_dtype(q.scalar_type()) && q.sym_size(-1) == k.sym_size(-1) && k.sym_size(-2) == v.sym_size(-2);
  for (int64_t d = 0; fits && d < q.dim() - 2; ++d) {
    bool heads = d == q.dim() - 3;
    fits = k.sym_size(d) == v.sym_size(d) && (heads || q.sym_size(d) == k.sym_size(d));
  }
  // Grouped-query attention (enable_gqa, fewer key/value heads): the kernels repeat the shared heads themselves.
  if (fits && q.sym_size(-3) != k.sym_size(-3)) {
    fits = q.dim() == 4 && enable_gqa && k.size(1) > 0 && q.size(1) % k.size(1) == 0;
  }
  if (fits && mask.has_value() && mask->defined()) {
    fits = mask->dim() <= 4 && (mask->scalar_type() == at::kBool || fused_dtype(mask->scalar_type()));
  }
  if (!fits && at::globalContext().userEnabledMathSDP()) return math;
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

// Grouped-query attention: key/value heads (B, Hk, L, E) shared by groups of `heads / Hk` query heads, repeated
// inside the program (never in memory) to (B, heads, L, E), as repeat_interleave does on the math path.
Value repeat_heads(HloBuilder& b, const Value& x, int64_t heads) {
  const auto& d = x.type.dims;
  if (d.size() != 4 || d[1] == heads) return x;
  int64_t group = heads / d[1];
  Value wide = b.broadcast_in_dim(x, {d[0], d[1], group, d[2], d[3]}, {0, 1, 3, 4});
  return b.reshape(wide, {d[0], heads, d[2], d[3]});
}

// The gradient of repeat_heads: sums each group back onto its shared head.
Value sum_heads(HloBuilder& b, const Value& g, int64_t kv_heads) {
  const auto& d = g.type.dims;
  if (d.size() != 4 || d[1] == kv_heads) return g;
  Value grouped = b.reshape(g, {d[0], kv_heads, d[1] / kv_heads, d[2], d[3]});
  return reduce_sum(b, grouped, {2});
}

AttentionShape shape_of(const at::Tensor& q, bool is_causal, std::optional<double> scale) {
  return {scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1))), is_causal};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
tpu_sdpa_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>& bias, double dropout_p, bool is_causal, bool return_debug_mask,
                 std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "tpu's fused attention has no dropout; SDPA takes the math path when dropout_p > 0");
  TORCH_CHECK(q.dim() == k.dim() && q.dim() == v.dim() && q.dim() >= 2,
              "scaled_dot_product_attention: query, key and value must have the same rank (>= 2)");
  TensorProgram p(q.device().index());
  HloBuilder& b = p.builder();
  std::optional<Value> bias_value;
  if (bias.has_value() && bias->defined()) {
    // A boolean mask (True = attend) becomes the additive 0 / -inf bias the math path uses.
    Value m = p.read(*bias);
    if (bias->scalar_type() == at::kBool) {
      m = b.select(m, b.constant(0, ElementType::kF32, m.type.dims),
                   b.constant(-std::numeric_limits<double>::infinity(), ElementType::kF32, m.type.dims));
    }
    bias_value = m;
  }
  int64_t heads = q.dim() == 4 ? q.size(1) : 0;
  AttentionForward f = attention_forward(b, p.read(q), repeat_heads(b, p.read(k), heads),
                                         repeat_heads(b, p.read(v), heads), bias_value, shape_of(q, is_causal, scale));
  at::Tensor out = p.output(f.out, q.scalar_type());
  // logsumexp is (B, H, Lq); 3-D inputs count as B = 1 (PyTorch's meta kernel for this op).
  Value lse_value = q.dim() == 3 ? b.reshape(f.logsumexp, {1, q.size(0), q.size(1)}) : f.logsumexp;
  at::Tensor lse = p.output(lse_value, at::kFloat);
  p.run();
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(q.size(-2)), c10::SymInt(k.size(-2)), at::Tensor(),
          at::Tensor(), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tpu_sdpa_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& bias, std::array<bool, 4> mask, const at::Tensor& out, const at::Tensor& lse,
    const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, int64_t max_q, int64_t max_k, double dropout_p,
    bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset, std::optional<double> scale) {
  TensorProgram p(q.device().index());
  HloBuilder& b = p.builder();
  std::optional<Value> bias_value;
  if (bias.defined()) bias_value = p.read(bias);
  bool want_dbias = mask[3] && bias.defined() && bias.scalar_type() != at::kBool;
  int64_t heads = q.dim() == 4 ? q.size(1) : 0;
  AttentionGrads g = attention_backward(b, p.read(grad_out), p.read(q), repeat_heads(b, p.read(k), heads),
                                        repeat_heads(b, p.read(v), heads), bias_value, p.read(out),
                                        q.dim() == 3 ? b.reshape(p.read(lse), {q.size(0), q.size(1)}) : p.read(lse),
                                        shape_of(q, is_causal, scale), want_dbias);
  if (heads != 0) {
    g.dk = sum_heads(b, g.dk, k.size(1));
    g.dv = sum_heads(b, g.dv, v.size(1));
  }
  at::Tensor dq = mask[0] ? p.output(g.dq, q.scalar_type()) : at::Tensor();
  at::Tensor dk = mask[1] ? p.output(g.dk, k.scalar_type()) : at::Tensor();
  at::Tensor dv = mask[2] ? p.output(g.dv, v.scalar_type()) : at::Tensor();
  at::Tensor dbias = want_dbias ? p.output(*g.dbias, bias.scalar_type()) : at::Tensor();
  p.run();
  return {dq, dk, dv, dbias};
}

int64_t tpu_fused_sdp_choice_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                                std::optional<double> scale, bool enable_gqa) {
  return tpu_fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace
}  // namespace torch_tpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::tpu_fused_sdp_choice)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(torch_tpu::tpu_fused_sdp_choice_op));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(torch_tpu::tpu_sdpa_forward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(torch_tpu::tpu_sdpa_backward));
}
