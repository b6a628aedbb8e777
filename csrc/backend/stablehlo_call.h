// Functions written elsewhere in StableHLO (a JAX or Pallas kernel exported by torch.tpu.pallas.jax_op) called from
// torch_tpu's programs: one node of the graph, a func.call the compiler inlines, so it fuses with its neighbours.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace torch_tpu {

// Records a call of @`callee` (defined in `functions`, MLIR text whose symbols are unique to it) on `inputs`, tpu
// tensors of one device (at least one), and returns its results: new tensors of `sizes` and `dtypes`.
std::vector<at::Tensor> record_stablehlo_call(const std::string& callee, const std::string& functions,
                                              const std::vector<at::Tensor>& inputs,
                                              const std::vector<std::vector<int64_t>>& sizes,
                                              const std::vector<at::ScalarType>& dtypes);

}  // namespace torch_tpu
