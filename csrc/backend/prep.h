// Argument preparation that needs the host or the dispatcher, run by the boxed kernel before an op's meta kernel and
// its recording (the lowering rows' own checks are pure: lowering/op_context.h). Also the meta kernels PyTorch lacks
// for ops the lowering table serves.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <vector>

namespace torch_tpu {

using HostPrep = std::function<void(std::vector<c10::IValue>& args)>;

// The host preparation of op `name` ("aten::index.Tensor"), or nullptr when it needs none.
const HostPrep* host_prep_for(const std::string& name);

}  // namespace torch_tpu
