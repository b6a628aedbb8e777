// PyTorch's rules for arguments that share memory, applied to tpu ops before they are recorded: the overlap errors
// CPU raises (a written tensor partly overlapping an input, or writing one element through two of its positions),
// and the in-order semantics of in-place foreach ops whose list entries overlap.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <vector>

namespace torch_tpu {

// Raises CPU's overlap error when the op, run on the CPU with arguments that share memory as these do, would. Cheap
// when nothing overlaps (the usual case): the CPU is consulted only when a written tensor overlaps itself or
// partly overlaps another argument. `writes[i]` marks the arguments the op writes.
void check_overlaps_as_cpu(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                           const std::vector<bool>& writes);

// For an in-place foreach op (`_foreach_*_`) whose list entries overlap (`[x[:3], x[::2]]`, `[a, a]`): runs it as one
// call per entry, in order, as CPU does, and returns true. Returns false (nothing run) otherwise.
bool run_foreach_in_order(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torch_tpu
