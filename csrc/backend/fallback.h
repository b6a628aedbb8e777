// What runs on the CPU instead of the device: the fallback for ops with no lowering (governed by a policy and
// counted per op), and the host run it and the host ops (backend/host_ops.h) share.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu {

// "aten::add.Tensor" for an operator handle.
std::string op_label(const c10::OperatorHandle& op);

// The boxed fallback kernel: the policy (error / warn once per op / silent), a count, then run_on_host.
void run_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Runs the op through its CPU kernel: tpu arguments copied to the host (conj/neg resolved), every written argument
// copied back, new results moved to the op's device; tpu generators swapped for their host engines.
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack);

enum class FallbackPolicy { kError = 0, kWarn = 1, kSilent = 2 };
void set_fallback_policy(FallbackPolicy policy);
FallbackPolicy fallback_policy();

// Calls that fell back, per op; cleared by clear_fallback_counts.
std::map<std::string, int64_t> fallback_counts();
void clear_fallback_counts();

}  // namespace torch_tpu
