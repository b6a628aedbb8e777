// Runs one ATen op on tpu tensors through its lowering rule: output types from PyTorch's meta kernels (cached by
// schema and argument types), the op recorded as a node of the device's graph (exec/graph.h), results written into
// new tensors or the op's inplace/out= targets.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "backend/fallback.h"
#include "exec/op_record.h"

namespace torch_tpu {

// Boxed kernel registered for every overload the lowering table names: arguments checked and prepared, output
// types from the meta kernels (backend/meta_types.h), the call recorded by exec/op_record.h. Falls back to the CPU
// when the row does not apply to the arguments or the op has no meta kernel (its output types are then unknown).
void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The device index of the first tpu tensor among `args`, or -1.
int first_tpu_device(const std::vector<c10::IValue>& args);

// Calls run through their rules, per op; reset_op_counts clears these, the fallback and the host-op counts.
std::map<std::string, int64_t> lowered_counts();
void reset_op_counts();

}  // namespace torch_tpu
