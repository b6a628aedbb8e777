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
#include <cstdio>
#include <limits>

#include "backend/lowered_op.h"
#include "exec/graph.h"
#include "exec/tensor_program.h"
#include "lowering/nn/attention.h"
#include "lowering/lib/op_context.h"

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
  int device = q.device().index();
  bool has_bias = bias.has_value() && bias->defined();
  bool bool_bias = has_bias && bias->scalar_type() == at::kBool;
  std::vector<int64_t> out_sizes = q.sizes().vec();
  out_sizes.back() = v.size(-1);
  std::vector<int64_t> lse_sizes = q.dim() == 3 ? std::vector<int64_t>{1, q.size(0), q.size(1)}
                                                : std::vector<int64_t>{q.size(0), q.size(1), q.size(2)};
  at::Tensor out = new_output(device, out_sizes, q.scalar_type());
  at::Tensor lse = new_output(device, lse_sizes, at::kFloat);
  AttentionShape shape = shape_of(q, is_causal, scale);
  char key[96];
  std::snprintf(key, sizeof(key), "sdpa_fwd:%d:%a", is_causal ? 1 : 0, shape.scale);
  std::vector<at::Tensor> reads = {q, k, v};
  if (has_bias) reads.push_back(*bias);
  record_custom_op(device, key, reads, {out, lse},
                   [has_bias, bool_bias, shape](TensorProgram& p, const std::vector<at::Tensor>& in,
                                                const std::vector<at::Tensor>& outs) {
    HloBuilder& b = p.builder();
    const at::Tensor& tq = in[0];
    std::optional<Value> bias_value;
    if (has_bias) {
      // A boolean mask (True = attend) becomes the additive 0 / -inf bias the math path uses.
      Value m = p.read(in[3]);
      if (bool_bias) {
        m = b.select(m, b.constant(0, ElementType::kF32, m.type.dims),
                     b.constant(-std::numeric_limits<double>::infinity(), ElementType::kF32, m.type.dims));
      }
      bias_value = m;
    }
    int64_t heads = tq.dim() == 4 ? tq.size(1) : 0;
    AttentionForward f = attention_forward(b, p.read(tq), repeat_heads(b, p.read(in[1]), heads),
                                           repeat_heads(b, p.read(in[2]), heads), bias_value, shape);
    p.write(outs[0], f.out);
    // logsumexp is (B, H, Lq); 3-D inputs count as B = 1 (PyTorch's meta kernel for this op).
    p.write(outs[1], tq.dim() == 3 ? b.reshape(f.logsumexp, {1, tq.size(0), tq.size(1)}) : f.logsumexp);
  });
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(q.size(-2)), c10::SymInt(k.size(-2)), at::Tensor(),
          at::Tensor(), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tpu_sdpa_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& bias, std::array<bool, 4> mask, const at::Tensor& out, const at::Tensor& lse,
    const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, int64_t max_q, int64_t max_k, double dropout_p,
    bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset, std::optional<double> scale) {
  int device = q.device().index();
  bool has_bias = bias.defined();
  bool want_dbias = mask[3] && has_bias && bias.scalar_type() != at::kBool;
  at::Tensor dq = mask[0] ? new_output(device, q.sizes(), q.scalar_type()) : at::Tensor();
  at::Tensor dk = mask[1] ? new_output(device, k.sizes(), k.scalar_type()) : at::Tensor();
  at::Tensor dv = mask[2] ? new_output(device, v.sizes(), v.scalar_type()) : at::Tensor();
  at::Tensor dbias = want_dbias ? new_output(device, bias.sizes(), bias.scalar_type()) : at::Tensor();
  AttentionShape shape = shape_of(q, is_causal, scale);
  char key[96];
  std::snprintf(key, sizeof(key), "sdpa_bwd:%d:%a:%d%d%d%d", is_causal ? 1 : 0, shape.scale, mask[0] ? 1 : 0,
                mask[1] ? 1 : 0, mask[2] ? 1 : 0, want_dbias ? 1 : 0);
  std::vector<at::Tensor> reads = {grad_out, q, k, v, out, lse};
  if (has_bias) reads.push_back(bias);
  record_custom_op(device, key, reads, {dq, dk, dv, dbias},
                   [has_bias, want_dbias, mask, shape](TensorProgram& p, const std::vector<at::Tensor>& in,
                                                       const std::vector<at::Tensor>& outs) {
    HloBuilder& b = p.builder();
    const at::Tensor &tq = in[1], &tk = in[2], &tv = in[3];
    std::optional<Value> bias_value;
    if (has_bias) bias_value = p.read(in[6]);
    int64_t heads = tq.dim() == 4 ? tq.size(1) : 0;
    AttentionGrads g = attention_backward(b, p.read(in[0]), p.read(tq), repeat_heads(b, p.read(tk), heads),
                                          repeat_heads(b, p.read(tv), heads), bias_value, p.read(in[4]),
                                          tq.dim() == 3 ? b.reshape(p.read(in[5]), {tq.size(0), tq.size(1)})
                                                        : p.read(in[5]),
                                          shape, want_dbias);
    if (heads != 0) {
      g.dk = sum_heads(b, g.dk, tk.size(1));
      g.dv = sum_heads(b, g.dv, tv.size(1));
    }
    size_t o = 0;
    if (mask[0]) p.write(outs[o++], g.dq);
    if (mask[1]) p.write(outs[o++], g.dk);
    if (mask[2]) p.write(outs[o++], g.dv);
    if (want_dbias) p.write(outs[o++], *g.dbias);
  });
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
