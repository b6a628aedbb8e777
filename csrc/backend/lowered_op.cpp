// The boxed kernel of the lowering table's overloads (see lowered_op.h): per operator, what its schema says is
// worked out once (OpInfo); per call, the arguments are checked and prepared, the meta kernels give the output
// types, and exec/ records the call.
#include "backend/lowered_op.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/aliasing.h"
#include "backend/host_ops.h"
#include "backend/meta_types.h"
#include "backend/prep.h"
#include "backend/registry.h"
#include "exec/op_program.h"
#include "lowering/lib/common_dtype.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

// The tpu device the op runs on; checks every other tensor is on it (CPU scalars excepted, as on CUDA).
int op_device(const std::vector<c10::IValue>& args) {
  int device = first_tpu_device(args);
  TORCH_INTERNAL_ASSERT(device >= 0, "tpu kernel called without a tpu tensor");
  for (const auto& v : args) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (!t.defined()) return;
      bool ok = t.device().type() == c10::DeviceType::PrivateUse1 ? t.device().index() == device
                                                                    : (t.device().is_cpu() && t.dim() == 0);
      TORCH_CHECK(ok, "Expected all tensors to be on the same device, but found at least two devices, tpu:", device,
                  " and ", t.device(), "!");
    });
  }
  return device;
}

bool is_number_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) return is_number_type(type->containedType(0));
  return type->kind() == c10::TypeKind::NumberType || type->kind() == c10::TypeKind::FloatType;
}

bool is_number_list_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::OptionalType) return is_number_list_type(type->containedType(0));
  return type->kind() == c10::TypeKind::ListType &&
         (type->containedType(0)->kind() == c10::TypeKind::NumberType ||
          type->containedType(0)->kind() == c10::TypeKind::FloatType);
}

// What run_lowered needs to know about an operator, worked out from its schema once rather than on every call.
struct OpInfo {
  explicit OpInfo(c10::OperatorName n) : op_name(std::move(n)) {}
  c10::OperatorName op_name;
  std::string name;        // "aten::add.Tensor"
  std::string short_name;  // "add.Tensor"
  const LoweringRow* row = nullptr;
  const HostPrep* host_prep = nullptr;
  bool shape_from_scalars = false;  // a Scalar sets the result's shape (arange, linspace): its value is in the key
  bool fresh_results = false;       // returns new tensors even if it writes arguments (_batch_norm_with_update)
  std::vector<ArgRole> roles;       // per argument: how it enters the recorded node
  std::vector<MetaArgKind> kinds;  // per argument: how it enters the meta key
  std::vector<bool> writes;        // per argument: ArgRole::writes
  bool writes_any = false;
  bool writes_list = false;  // writes a tensor list (in-place foreach ops)
  std::atomic<int64_t> lowered{0};  // calls run through the rule
};

std::mutex g_info_mu;
std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpInfo>> g_infos;
std::vector<std::unique_ptr<OpInfo>> g_retired;  // replaced entries: recorded ops may still point at them

OpInfo& op_info(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  std::lock_guard<std::mutex> lock(g_info_mu);
  std::unique_ptr<OpInfo>& slot = g_infos[&schema];
  if (slot && slot->op_name == schema.operator_name()) return *slot;
  auto info = std::make_unique<OpInfo>(schema.operator_name());
  info->name = op_label(op);
  info->short_name = info->name.substr(info->name.rfind(':') + 1);
  info->row = registered_row(info->name);
  info->host_prep = host_prep_for(info->name);
  if (info->host_prep == nullptr) info->host_prep = host_prep_for(functional_name(info->name));
  info->shape_from_scalars =
      info->name.find("arange") != std::string::npos || info->name.find("linspace") != std::string::npos;
  info->fresh_results = !schema.returns().empty() &&
                        std::none_of(schema.returns().begin(), schema.returns().end(),
                                     [](const c10::Argument& r) { return r.alias_info() != nullptr; });
  for (const c10::Argument& a : schema.arguments()) {
    const c10::TypePtr& type = a.type();
    MetaArgKind m;
    m.scalar = type->kind() == c10::TypeKind::NumberType ||
               (type->kind() == c10::TypeKind::OptionalType &&
                type->containedType(0)->kind() == c10::TypeKind::NumberType);
    m.scalar_list =
        type->kind() == c10::TypeKind::ListType && type->containedType(0)->kind() == c10::TypeKind::NumberType;
    ArgRole k;
    k.number = is_number_type(type);
    k.number_list = is_number_list_type(type);
    k.writes = a.alias_info() != nullptr && a.alias_info()->isWrite();
    info->kinds.push_back(m);
    info->roles.push_back(k);
    info->writes.push_back(k.writes);
    info->writes_any = info->writes_any || k.writes;
    info->writes_list = info->writes_list || (k.writes && type->kind() == c10::TypeKind::ListType);
  }
  if (slot) g_retired.push_back(std::move(slot));  // a schema now gone, another registered at its address
  slot = std::move(info);
  return *slot;
}

// TensorIterator refuses to write a pointwise result into a tensor its common dtype cannot be cast to
// (long.mul_(float), an out= of bool for float operands); some of PyTorch's meta kernels (mul_, addcmul_,
// addcdiv_) skip that check, so it is made here, with CPU's message.
void check_safe_cast_to_outputs(const LoweringRow& row, const c10::FunctionSchema& schema,
                                const std::vector<c10::IValue>& args) {
  const std::vector<size_t>* operands = promoting_operands_of(row);
  if (operands == nullptr) return;
  std::vector<const c10::IValue*> promoting;
  for (size_t i : *operands) {
    if (i < args.size()) promoting.push_back(&args[i]);
  }
  const c10::ScalarType common = result_type_of(promoting);
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || !args[i].isTensor()) continue;
    const c10::ScalarType out = args[i].toTensor().scalar_type();
    TORCH_CHECK(c10::canCast(common, out), "result type ", common, " can't be cast to the desired output type ", out);
  }
}

}  // namespace

int first_tpu_device(const std::vector<c10::IValue>& args) {
  int device = -1;
  for (const auto& v : args) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && device < 0) device = t.device().index();
    });
  }
  return device;
}

std::map<std::string, int64_t> lowered_counts() {
  std::map<std::string, int64_t> out;
  std::lock_guard<std::mutex> lock(g_info_mu);
  for (const auto& [schema, info] : g_infos) {
    int64_t calls = info->lowered.load(std::memory_order_relaxed);
    if (calls > 0) out[info->name] += calls;
  }
  return out;
}

void reset_op_counts() {
  clear_fallback_counts();
  clear_host_op_counts();
  std::lock_guard<std::mutex> info_lock(g_info_mu);
  for (const auto& [schema, info] : g_infos) info->lowered.store(0, std::memory_order_relaxed);
}

void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  OpInfo& info = op_info(op);
  const LoweringRow* row = info.row;
  TORCH_INTERNAL_ASSERT(row != nullptr, "no lowering rule for ", info.name);
  size_t n = schema.arguments().size();
  if (info.writes_list && run_foreach_in_order(op, stack)) return;
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  if (info.writes_any) check_overlaps_as_cpu(op, args, info.writes);
  if (info.host_prep) (*info.host_prep)(args);
  if (row->prepare) row->prepare(args);
  if (row->applies && !row->applies(args)) {
    run_fallback(op, stack);
    return;
  }
  int device = op_device(args);

  // Output shapes and dtypes (and PyTorch's own argument errors) come from the meta kernels.
  OutTypes outs = meta_out_types(op, info.name, info.kinds, info.shape_from_scalars, args,
                                 [&] { check_safe_cast_to_outputs(*row, schema, args); });
  if (!outs) {
    run_fallback(op, stack);
    return;
  }

  // Inplace and out= overloads write into their mutable arguments; functional ones create outputs. Ops that write
  // arguments but return new tensors (_batch_norm_with_update's running statistics) have fresh results: the rule
  // updates the written arguments itself (OpContext::update_arg).
  std::vector<at::Tensor> targets;
  for (size_t i = 0; i < n && !info.fresh_results; ++i) {
    if (info.roles[i].writes) for_each_tensor(args[i], [&](const at::Tensor& t) { targets.push_back(t); });
  }
  // Ops that return nothing (in-place _foreach_ ops, fused optimizers) produce their written arguments' new values.
  if (schema.returns().empty()) {
    std::vector<OutType> written;
    written.reserve(targets.size());
    for (const at::Tensor& t : targets) {
      OutType o;
      o.defined = true;
      o.dtype = t.scalar_type();
      o.sizes = t.sizes().vec();
      written.push_back(std::move(o));
    }
    outs = std::make_shared<const std::vector<OutType>>(std::move(written));
  }
  const std::vector<OutType>& out_types = *outs;
  for (size_t i = 0; i < targets.size() && i < out_types.size(); ++i) {
    if (out_types[i].defined && targets[i].sizes() != c10::IntArrayRef(out_types[i].sizes)) {
      targets[i].resize_(out_types[i].sizes);
    }
  }

  LoweredCall call;
  call.row = row;
  call.name = &info.name;  // OpInfo lives as long as the process (in g_infos or g_retired)
  call.short_name = &info.short_name;
  call.roles = &info.roles;
  call.args = std::move(args);
  call.outs = std::move(outs);
  call.targets = std::move(targets);
  std::vector<at::Tensor> outputs = record_lowered_op(device, std::move(call));
  info.lowered.fetch_add(1, std::memory_order_relaxed);

  torch::jit::drop(*stack, n);
  if (schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType) {
    torch::jit::push(*stack, std::move(outputs));
    return;
  }
  for (size_t k = 0; k < schema.returns().size(); ++k) torch::jit::push(*stack, std::move(outputs.at(k)));
}

}  // namespace torch_tpu
