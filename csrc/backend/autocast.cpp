// Autocast on tpu (torch.autocast("tpu")): kernels at the AutocastPrivateUse1 dispatch key with CUDA's per-op
// policy, taken from the op lists PyTorch exports for other backends (ATen/autocast_mode.h):
//   lower_precision_fp  matmuls, convolutions, linear, prelu, RNN cells, SDPA    -> the autocast dtype
//   fp32                exp/log/pow, norms, losses, upsampling, ...               -> float32
//   fp32_set_opt_dtype  softmax, log_softmax, sum, prod, cumsum, vector norms     -> float32 via dtype=
//   promote             addcmul, addcdiv, dot, index_put, scatter_add, ...        -> the widest input type
// cat, stack and index_copy also promote (as CPU autocast does: index_copy would otherwise reject mixed inputs).
// binary_cross_entropy is banned as on CUDA (unsafe to autocast); every other op falls through unchanged.
// The casting itself is PyTorch's (at::autocast::WrapFunction, with its weight cache), so cache_enabled and
// nesting behave as on CUDA.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

}  // namespace

// Every op without a policy below runs as if autocast were off (core registers no such fallthrough for
// PrivateUse1: without it every op under torch.autocast("tpu") fails to dispatch).
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TPU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  using at::Scalar;
  using at::ScalarType;
  using at::Tensor;
  using c10::IntArrayRef;
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER_PRECISION_FP)
  // The fused attention SDPA picks on tpu (its inputs must share one dtype, as the lower-precision cast ensures).
  KERNEL_PRIVATEUSEONE(_scaled_dot_product_fused_attention_overrideable, lower_precision_fp)
  AT_FORALL_FP32(TPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(TPU_PROMOTE)
  KERNEL_PRIVATEUSEONE(cat, promote)
  KERNEL_PRIVATEUSEONE(stack, promote)
  KERNEL_PRIVATEUSEONE(index_copy, promote)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
#undef TPU_LOWER_PRECISION_FP
#undef TPU_FP32
#undef TPU_FP32_SET_OPT_DTYPE
#undef TPU_PROMOTE
}

}  // namespace torch_tpu
