// The CPU fallback: an op with no lowering runs on the CPU. Every tpu argument (plain, optional, lists, optional
// lists) is copied to the host with its conj/neg bits resolved, the op runs through its CPU kernel, then every
// argument the op writes is copied back into the original tpu tensor — including writes PyTorch's schema leaves
// unannotated (native_batch_norm's running statistics) — and new results are moved to the op's tpu device.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <set>

#include "backend/aliasing.h"
#include "backend/generator.h"
#include "backend/fallback.h"
#include "backend/lowered_op.h"
#include "exec/state.h"
#include "exec/tensor_program.h"

namespace torch_tpu {
namespace {

bool is_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

at::Tensor to_host(const at::Tensor& t) { return is_tpu(t) ? copy_device_to_host(t) : t; }

std::vector<at::Tensor> tensors_of(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    out = v.toTensorVector();
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) out.push_back(e.isTensor() ? e.toTensor() : at::Tensor());
  }
  return out;
}

// Copies the host result of a written argument back into the tpu tensor the caller passed.
void write_back(const at::Tensor& original, const at::Tensor& host) {
  if (!is_tpu(original) || !host.defined()) return;
  at::Tensor target = original;
  if (target.sizes() != host.sizes()) target.resize_(host.sizes());
  target.copy_(host);
}

// Arguments that ATen kernels update in place although the schema does not mark them written.
const std::set<size_t>* unannotated_writes(const std::string& name) {
  static const std::set<size_t> batch_norm_stats = {3, 4};
  if (name == "aten::native_batch_norm" || name == "aten::native_batch_norm.out") return &batch_norm_stats;
  return nullptr;
}

bool is_generator_argument(const c10::Argument& a) {
  const c10::TypePtr& type = a.type();
  return type->kind() == c10::TypeKind::GeneratorType ||
         (type->kind() == c10::TypeKind::OptionalType && type->containedType(0)->kind() == c10::TypeKind::GeneratorType);
}

std::mutex g_warn_mu;
std::set<std::string> g_warned;
std::map<std::string, int64_t> g_fallbacks;  // guarded by g_warn_mu
std::atomic<int> g_policy{static_cast<int>(FallbackPolicy::kWarn)};

}  // namespace

std::string op_label(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_warn_mu);
  return g_fallbacks;
}

void clear_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_warn_mu);
  g_fallbacks.clear();
}

void set_fallback_policy(FallbackPolicy policy) { g_policy = static_cast<int>(policy); }
FallbackPolicy fallback_policy() { return static_cast<FallbackPolicy>(g_policy.load()); }

void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& arguments = schema.arguments();
  size_t n = arguments.size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  int device = first_tpu_device(args);
  if (device < 0) {  // a factory (triu_indices, ...): the device it was asked for
    for (const c10::IValue& a : args) {
      if (a.isDevice() && a.toDevice().type() == c10::DeviceType::PrivateUse1) {
        device = a.toDevice().has_index() ? a.toDevice().index() : current_device();
        break;
      }
    }
  }
  c10::DeviceIndex index = static_cast<c10::DeviceIndex>(std::max(device, 0));

  torch::jit::Stack host_stack;
  for (size_t i = 0; i < n; ++i) {
    if (is_generator_argument(arguments[i])) {
      // Random ops draw from the tpu generator's host engine, so seeding governs them as on the device.
      std::optional<at::Generator> gen =
          args[i].isNone() ? std::nullopt : std::optional<at::Generator>(args[i].toGenerator());
      host_stack.push_back(host_generator_for(gen, index));
    } else {
      host_stack.push_back(map_tensors(args[i], to_host));
    }
  }
  std::vector<c10::IValue> host_args(host_stack.begin(), host_stack.end());
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &host_stack);

  // Mutated arguments: copy the host results back into the caller's tpu tensors.
  const std::set<size_t>* extra = unannotated_writes(op_label(op));
  for (size_t i = 0; i < n; ++i) {
    const c10::AliasInfo* alias = arguments[i].alias_info();
    bool written = (alias != nullptr && alias->isWrite()) || (extra != nullptr && extra->count(i) > 0);
    if (!written) continue;
    std::vector<at::Tensor> originals = tensors_of(args[i]);
    std::vector<at::Tensor> hosts = tensors_of(host_args[i]);
    for (size_t k = 0; k < originals.size() && k < hosts.size(); ++k) {
      if (originals[k].defined()) write_back(originals[k], hosts[k]);
    }
  }

  // Results: a result that aliases a written argument is that argument; anything else moves to the device.
  c10::Device target(c10::DeviceType::PrivateUse1, index);
  auto to_device = [&](const at::Tensor& t) { return t.defined() && device >= 0 ? t.to(target) : t; };
  const auto& returns = schema.returns();
  std::vector<c10::IValue> results(host_stack.begin(), host_stack.end());
  torch::jit::drop(*stack, n);
  for (size_t r = 0; r < results.size(); ++r) {
    const c10::AliasInfo* alias = r < returns.size() ? returns[r].alias_info() : nullptr;
    if (alias != nullptr && alias->isWrite()) {
      bool found = false;
      for (size_t i = 0; i < n && !found; ++i) {
        const c10::AliasInfo* a = arguments[i].alias_info();
        if (a != nullptr && a->isWrite() && a->beforeSets() == alias->beforeSets()) {
          torch::jit::push(*stack, args[i]);
          found = true;
        }
      }
      if (found) continue;
    }
    const c10::IValue& v = results[r];
    if (v.isTensor()) {
      torch::jit::push(*stack, to_device(v.toTensor()));
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> moved;
      for (const at::Tensor& t : v.toTensorVector()) moved.push_back(to_device(t));
      torch::jit::push(*stack, moved);
    } else {
      torch::jit::push(*stack, v);
    }
  }
}

void run_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = op_label(op);
  auto policy = static_cast<FallbackPolicy>(g_policy.load());
  TORCH_CHECK_NOT_IMPLEMENTED(policy != FallbackPolicy::kError, "The operator '", name,
                              "' has no tpu lowering, and TORCH_TPU_FALLBACK=error forbids running it on the CPU.");
  {
    // The host copies of overlapping arguments no longer overlap: CPU's overlap errors are checked first.
    const auto& arguments = op.schema().arguments();
    std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(arguments.size()), stack->end());
    std::vector<bool> writes;
    for (const c10::Argument& a : arguments) writes.push_back(a.alias_info() != nullptr && a.alias_info()->isWrite());
    check_overlaps_as_cpu(op, args, writes);
  }
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_warn_mu);
    g_fallbacks[name]++;
    first = g_warned.insert(name).second;
  }
  if (policy == FallbackPolicy::kWarn) {
    if (first) {
      TORCH_WARN("The operator '", name,
                 "' has no tpu lowering yet and runs on the CPU (copying its tensors); set TORCH_TPU_FALLBACK=silent "
                 "to hide this warning or =error to forbid it.");
    }
  }
  run_on_host(op, stack);
}

}  // namespace torch_tpu
