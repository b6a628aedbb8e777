// Ops that run on the host by design, not as a fallback:
// - random ops draw from the tpu generator's CPU engine and copy the values to the device, so seeding
//   (torch.manual_seed, torch.tpu.manual_seed, generators) reproduces them exactly and matches CPU draws
//   (device-side rng_bit_generator is the later fast path);
// - ops whose result shape depends on the data (nonzero, masked_select, unique) need the values on the host anyway.
// Each run is counted in metrics()["host_ops"].
#include <ATen/ATen.h>
#include <torch/library.h>

#include "exec/lowered_op.h"

namespace torch_tpu {
namespace {

void run_host_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  count_host_op(op);
  run_on_host(op, stack);
}

std::tuple<at::Tensor, at::Tensor> tpu_native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (!train.value_or(true) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1) return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool)).bernoulli_(1 - p);
  at::Tensor out = input * mask * (1.0 / (1 - p));
  return {out, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"uniform_", "normal_", "normal.Tensor_float", "normal.float_Tensor", "normal.Tensor_Tensor",
        "normal.Tensor_float_out", "normal.float_Tensor_out", "normal.Tensor_Tensor_out", "bernoulli_.float",
        "bernoulli_.Tensor", "bernoulli", "bernoulli.p", "bernoulli.out", "random_", "random_.from", "random_.to",
        "exponential_", "geometric_", "log_normal_", "cauchy_", "multinomial", "multinomial.out",
        "randperm.generator_out", "nonzero", "nonzero.out", "masked_select", "masked_select.out", "_unique2",
        "unique_consecutive", "unique_dim"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_host_op>());
  }
  m.impl("native_dropout", TORCH_FN(tpu_native_dropout));
}

}  // namespace torch_tpu
