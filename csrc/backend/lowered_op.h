// Runs one ATen op on tpu tensors through its lowering rule: output types from PyTorch's meta kernels (cached by
// schema and argument types), the op recorded as a node of the device's graph (exec/graph.h), results written into
// new tensors or the op's inplace/out= targets.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

namespace torch_tpu {

// Boxed kernel registered for every overload the lowering table names. Falls back to the CPU fallback when the
// op has no meta kernel (its output types are then unknown).
void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Boxed CPU fallback: copies tpu arguments to the CPU, runs the op there, copies results back. Counted per op and
// governed by the fallback policy. Generators of tpu ops are swapped for their host engines.
void run_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Runs the op through its CPU kernel (tensors copied to the host and back), with tpu generators swapped for
// their host engines. run_fallback = policy + counting + this; random ops use it directly.
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// self.copy_(src) between tensors of one tpu device, recorded for the structural cache like a lowered op.
void record_same_device_copy(const at::Tensor& self, const at::Tensor& src);

// An op outside the lowering table (SDPA, copy_) recorded for the structural cache. `structure` names everything
// `lower` bakes in besides the tensors' types and views; `lower` reads `reads` and writes every tensor of `writes`
// (snapshots of the caller's tensors, in order; undefined ones are left out).
class TensorProgram;
using CustomLowering = std::function<void(TensorProgram& program, const std::vector<at::Tensor>& reads,
                                          const std::vector<at::Tensor>& writes)>;
void record_custom_op(int device, std::string structure, const std::vector<at::Tensor>& reads,
                      const std::vector<at::Tensor>& writes, CustomLowering lower);
// A new tpu tensor for a recorded op's result (its device memory booked only once it holds a value).
at::Tensor new_output(int device, c10::IntArrayRef sizes, at::ScalarType dtype);

// `v` with every tensor in it (a tensor, a tensor list, an optional-tensor list) replaced by fn(tensor). A template,
// not a std::function: it runs for every argument of every op.
template <class Fn>
c10::IValue map_tensors(const c10::IValue& v, const Fn& fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    out.reserve(v.toListRef().size());
    for (const c10::IValue& e : v.toListRef()) out.push_back(fn(e.toTensor()));
    return out;
  }
  // Any tensor element, not only the first: index lists may start with None.
  if (v.isList() && std::any_of(v.toListRef().begin(), v.toListRef().end(),
                                [](const c10::IValue& e) { return e.isTensor(); })) {
    c10::List<std::optional<at::Tensor>> out;
    out.reserve(v.toListRef().size());
    for (const c10::IValue& e : v.toListRef()) {
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(fn(e.toTensor())) : std::nullopt);
    }
    return out;
  }
  return v;
}
// The device index of the first tpu tensor among `args`, or -1.
int first_tpu_device(const std::vector<c10::IValue>& args);

void count_host_op(const c10::OperatorHandle& op);
void count_fallback(const c10::OperatorHandle& op);
std::map<std::string, int64_t> host_op_counts();

enum class FallbackPolicy { kError = 0, kWarn = 1, kSilent = 2 };
void set_fallback_policy(FallbackPolicy policy);
FallbackPolicy fallback_policy();
std::map<std::string, int64_t> fallback_counts();
std::map<std::string, int64_t> lowered_counts();
void reset_op_counts();

}  // namespace torch_tpu
