// Scaled dot-product attention as one program each way (forward, backward): scores, masking and the softmax stay in
// registers of one program; the causal mask is built from iotas, never materialised as a tensor.
#pragma once

#include <optional>

#include "hlo/builder.h"

namespace torch_tpu {

struct AttentionShape {
  double scale = 1.0;
  bool causal = false;
};

struct AttentionForward {
  Value out;        // (..., Lq, Ev), in the query's dtype
  Value logsumexp;  // (..., Lq), f32
};

// q (..., Lq, E), k (..., Lk, E), v (..., Lk, Ev) with equal leading dims; bias broadcastable to (..., Lq, Lk).
AttentionForward attention_forward(HloBuilder& b, const Value& q, const Value& k, const Value& v,
                                   const std::optional<Value>& bias, const AttentionShape& shape);

struct AttentionGrads {
  Value dq, dk, dv;
  std::optional<Value> dbias;  // reduced to the bias's shape, when asked for
};

AttentionGrads attention_backward(HloBuilder& b, const Value& grad_out, const Value& q, const Value& k,
                                  const Value& v, const std::optional<Value>& bias, const Value& out,
                                  const Value& logsumexp, const AttentionShape& shape, bool want_dbias);

}  // namespace torch_tpu
