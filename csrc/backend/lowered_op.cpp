#include "backend/lowered_op.h"
#include "backend/aliasing.h"
#include "backend/prep.h"
#include "backend/registry.h"
#include "exec/device_tensor.h"
#include "exec/op_program.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/TypeProperties.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "backend/generator.h"
#include "exec/device_data.h"
#include "exec/graph.h"
#include "exec/sync.h"
#include "exec/tensor_program.h"
#include "lowering/lib/common_dtype.h"
#include "lowering/lib/op_context.h"
#include "runtime/counters.h"

namespace torch_tpu {
namespace {

std::mutex g_counts_mu;
std::map<std::string, int64_t> g_fallbacks;
std::map<std::string, int64_t> g_host_ops;

void count(std::map<std::string, int64_t>& m, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  m[name]++;
}

// Appends the decimal digits of `v` (no temporary strings: keys are built for every op).
void append_int(std::string& s, int64_t v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  s.append(buf, res.ptr);
}

// Appends ",d0,d1,..." for a tensor's sizes or strides.
void append_dims(std::string& s, c10::IntArrayRef dims) {
  for (int64_t d : dims) {
    s += ',';
    append_int(s, d);
  }
}

at::Tensor to_meta(const at::Tensor& t) {
  // CPU scalars stay as they are: meta kernels accept them beside meta tensors, as CUDA kernels do.
  if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

std::vector<OutType> out_types_of(const torch::jit::Stack& returned) {
  std::vector<OutType> out;
  auto add = [&](const at::Tensor& t) {
    OutType o;
    o.defined = t.defined();
    if (o.defined) {
      o.dtype = t.scalar_type();
      o.sizes = t.sizes().vec();
    }
    out.push_back(std::move(o));
  };
  for (const auto& v : returned) {
    if (v.isNone()) {
      out.emplace_back();
    } else {
      for_each_tensor(v, add);
    }
  }
  return out;
}

// Meta results depend only on dtypes, shapes and non-tensor arguments: cache them, since a meta call (often a
// Python meta kernel) costs more than the rest of an op's dispatch.
void append_key(std::string& key, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      key += "U;";
      return;
    }
    key += 'T';
    append_int(key, static_cast<int>(t.scalar_type()));
    key += t.is_cpu() ? 'c' : 'd';
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) key += 'w';
    append_dims(key, t.sizes());
    key += ';';
  } else if (v.isTensorList() || v.isList()) {
    key += '[';
    for (const c10::IValue& e : v.toListRef()) append_key(key, e);
    key += ']';
  } else if (v.isNone()) {
    key += "N;";
  } else if (v.isInt()) {
    key += 'i';
    append_int(key, v.toInt());
    key += ';';
  } else if (v.isDouble()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "d%a;", v.toDouble());
    key += buf;
  } else if (v.isBool()) {
    key += v.toBool() ? "t;" : "f;";
  } else if (v.isString()) {
    key += "s" + v.toStringRef() + ";";
  } else if (v.isDevice()) {
    key += "D" + v.toDevice().str() + ";";
  } else if (v.isGenerator()) {
    key += "G;";
  } else {
    key += "?" + v.tagKind() + ";";
  }
}

std::mutex g_meta_mu;
using OutTypes = std::shared_ptr<const std::vector<OutType>>;  // shared by the cache and the ops recorded with it
std::unordered_map<std::string, OutTypes> g_meta_cache;
constexpr size_t kMetaCacheLimit = 8192;

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


// A view of `t`'s storage with its sizes, strides and offset as they are now (later metadata changes to `t`, such
// as resize_ or .data assignment, do not reach a recorded op); CPU scalars are copied (their values may change).
at::Tensor snapshot(const at::Tensor& t) {
  if (!t.defined()) return t;
  if (t.is_cpu()) {
    at::Tensor copy = t.clone();
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) copy.unsafeGetTensorImpl()->set_wrapped_number(true);
    return copy;
  }
  // Plain tpu keys (no autograd, Python or functionalization keys of the original): lowering only reads metadata.
  c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  if (t.is_conj()) keys = keys.add(c10::DispatchKey::Conjugate);
  if (t.is_neg()) keys = keys.add(c10::DispatchKey::Negative);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(t.storage()), keys, t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
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

// A tensor's part of an op's structure: what the lowering of a read or write through it depends on.
void append_tensor_structure(std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    key += "U;";
    return;
  }
  key += 'T';
  append_int(key, static_cast<int>(t.scalar_type()));
  if (t.is_cpu()) {
    key += t.unsafeGetTensorImpl()->is_wrapped_number() ? "cw" : "c";
  } else {
    key += 'd';
    append_dims(key, t.sizes());
    key += '/';
    append_dims(key, t.strides());
    key += '@';
    append_int(key, t.storage_offset());
    key += '^';
    append_int(key, static_cast<int64_t>(t.storage().nbytes()));
    if (t.is_conj()) key += 'j';
    if (t.is_neg()) key += 'n';
  }
  key += ';';
}

std::string op_label(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// What run_lowered needs to know about an operator, worked out from its schema once rather than on every call.
struct ArgInfo {
  bool meta_number = false;       // a Scalar: the meta key holds its kind, not its value
  bool meta_number_list = false;  // a ScalarList: kinds only
  bool number = false;            // a number type (Scalar, float, optional of either): taken at run time
  bool number_list = false;       // a list of those
  bool writes = false;            // an inplace/out= argument
};

struct OpInfo {
  explicit OpInfo(c10::OperatorName n) : op_name(std::move(n)) {}
  c10::OperatorName op_name;
  std::string name;        // "aten::add.Tensor"
  std::string short_name;  // "add.Tensor"
  const LoweringRow* row = nullptr;
  const HostPrep* host_prep = nullptr;
  bool shape_from_scalars = false;  // a Scalar sets the result's shape (arange, linspace): its value is in the key
  bool fresh_results = false;       // returns new tensors even if it writes arguments (_batch_norm_with_update)
  std::vector<ArgInfo> args;
  std::vector<bool> writes;  // per argument: ArgInfo::writes
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
    ArgInfo k;
    k.meta_number = type->kind() == c10::TypeKind::NumberType ||
                    (type->kind() == c10::TypeKind::OptionalType &&
                     type->containedType(0)->kind() == c10::TypeKind::NumberType);
    k.meta_number_list =
        type->kind() == c10::TypeKind::ListType && type->containedType(0)->kind() == c10::TypeKind::NumberType;
    k.number = is_number_type(type);
    k.number_list = is_number_list_type(type);
    k.writes = a.alias_info() != nullptr && a.alias_info()->isWrite();
    info->args.push_back(k);
    info->writes.push_back(k.writes);
    info->writes_any = info->writes_any || k.writes;
    info->writes_list = info->writes_list || (k.writes && type->kind() == c10::TypeKind::ListType);
  }
  if (slot) g_retired.push_back(std::move(slot));  // a schema now gone, another registered at its address
  slot = std::move(info);
  return *slot;
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

void record_custom_op(int device, std::string structure, const std::vector<at::Tensor>& reads,
                      const std::vector<at::Tensor>& writes, CustomLowering lower) {
  RecordedOp rec;
  rec.structure = std::move(structure);
  rec.structure += '(';
  for (const at::Tensor& t : reads) append_tensor_structure(rec.structure, t);
  rec.structure += "->";
  for (const at::Tensor& t : writes) append_tensor_structure(rec.structure, t);
  rec.structure += ')';
  size_t n_reads = 0;
  for (const at::Tensor& t : reads) {
    if (!t.defined()) continue;
    rec.tensors.push_back(snapshot(t));
    rec.written.push_back(false);
    ++n_reads;
  }
  for (const at::Tensor& t : writes) {
    if (!t.defined()) continue;
    rec.tensors.push_back(snapshot(t));
    rec.written.push_back(true);
  }
  rec.args.assign(rec.tensors.begin(), rec.tensors.end());
  rec.lower = [lower = std::move(lower), n_reads](TensorProgram& program, const RecordedOp& op, int, OpFacts&) {
    std::vector<at::Tensor> in(op.tensors.begin(), op.tensors.begin() + static_cast<std::ptrdiff_t>(n_reads));
    std::vector<at::Tensor> out(op.tensors.begin() + static_cast<std::ptrdiff_t>(n_reads), op.tensors.end());
    lower(program, in, out);
  };
  record_op(device, std::move(rec));
}

at::Tensor new_output(int device, c10::IntArrayRef sizes, at::ScalarType dtype) {
  DeferredBooking deferred(eager_mode() == EagerMode::kFused);
  return new_device_tensor(device, sizes, dtype);
}

void record_same_device_copy(const at::Tensor& self, const at::Tensor& src) {
  record_custom_op(self.device().index(), "copy_", {src}, {self},
                   [](TensorProgram& p, const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& out) {
                     p.write(out[0], p.read(in[0]));
                   });
}

void count_fallback(const c10::OperatorHandle& op) { count(g_fallbacks, op_label(op)); }

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  return g_fallbacks;
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

void count_host_op(const c10::OperatorHandle& op) { count(g_host_ops, op_label(op)); }

std::map<std::string, int64_t> host_op_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  return g_host_ops;
}

void reset_op_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  g_host_ops.clear();
  g_fallbacks.clear();
  std::lock_guard<std::mutex> info_lock(g_info_mu);
  for (const auto& [schema, info] : g_infos) info->lowered.store(0, std::memory_order_relaxed);
}

namespace {

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
  std::string key;
  key.reserve(128);
  key += info.name;
  // A Scalar argument (a number the program takes at run time) contributes its kind, not its value, so changing
  // learning rates or step sizes reuse the entry; except where a Scalar sets the result's shape (arange, linspace).
  for (size_t i = 0; i < n; ++i) {
    const ArgInfo& k = info.args[i];
    if (k.meta_number && !info.shape_from_scalars && (args[i].isDouble() || args[i].isInt() || args[i].isBool())) {
      key += args[i].isDouble() ? "Nd;" : args[i].isInt() ? "Ni;" : "Nb;";
    } else if (k.meta_number_list && args[i].isList()) {  // a ScalarList (per-parameter step sizes): kinds only
      key += "NL[";
      for (const c10::IValue& e : args[i].toListRef()) {
        key += e.isDouble() ? 'd' : e.isInt() ? 'i' : e.isBool() ? 'b' : 'c';
      }
      key += ']';
    } else {
      append_key(key, args[i]);
    }
  }
  OutTypes outs;
  {
    std::lock_guard<std::mutex> lock(g_meta_mu);
    auto it = g_meta_cache.find(key);
    if (it != g_meta_cache.end()) outs = it->second;
  }
  if (!outs) {
    runtime_counters().meta_calls++;
    check_safe_cast_to_outputs(*row, schema, args);  // depends only on what the key holds: checked before caching
    torch::jit::Stack meta_stack;
    for (const auto& a : args) meta_stack.push_back(map_tensors(a, to_meta));
    try {
      op.callBoxed(&meta_stack);
    } catch (const c10::NotImplementedError&) {
      // No meta kernel: the output types are unknown here, unless the op only writes its arguments.
      if (!schema.returns().empty()) {
        run_fallback(op, stack);
        return;
      }
    }
    outs = std::make_shared<const std::vector<OutType>>(out_types_of(meta_stack));
    std::lock_guard<std::mutex> lock(g_meta_mu);
    if (g_meta_cache.size() >= kMetaCacheLimit) g_meta_cache.clear();  // bounded, whatever the workload
    g_meta_cache.emplace(std::move(key), outs);
  }

  // Inplace and out= overloads write into their mutable arguments; functional ones create outputs. Ops that write
  // arguments but return new tensors (_batch_norm_with_update's running statistics) have fresh results: the rule
  // updates the written arguments itself (OpContext::update_arg).
  std::vector<at::Tensor> targets;
  for (size_t i = 0; i < n && !info.fresh_results; ++i) {
    if (info.args[i].writes) for_each_tensor(args[i], [&](const at::Tensor& t) { targets.push_back(t); });
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

  // The op as the structural cache records it (exec/graph.h): structure, snapshots of its tensors, its results.
  RecordedOp rec;
  rec.structure.reserve(key.capacity() + 64);
  rec.structure = info.name;
  rec.structure += '(';
  for (size_t i = 0; i < n; ++i) {
    const ArgInfo& k = info.args[i];
    const c10::IValue& a = args[i];
    bool cpu_scalar = a.isTensor() && a.toTensor().defined() && a.toTensor().is_cpu();
    bool number = (k.number && (a.isDouble() || a.isInt() || a.isBool() || a.isComplexDouble())) ||
                  (k.number_list && a.isList()) || cpu_scalar;
    if (number) rec.number_args.push_back(static_cast<int>(i));
    if (cpu_scalar) {
      append_tensor_structure(rec.structure, a.toTensor());
    } else if (number) {
      if (a.isList()) {
        rec.structure += 'L';
        append_int(rec.structure, static_cast<int64_t>(a.toListRef().size()));
      } else {
        rec.structure += 'S';
        rec.structure += a.tagKind();
      }
      rec.structure += ';';
    } else if (a.isTensor()) {
      append_tensor_structure(rec.structure, a.toTensor());
    } else if (a.isTensorList() || (a.isList() && std::any_of(a.toListRef().begin(), a.toListRef().end(),
                                                              [](const c10::IValue& e) { return e.isTensor(); }))) {
      rec.structure += '[';
      for (const c10::IValue& e : a.toListRef()) {
        if (e.isTensor()) {
          append_tensor_structure(rec.structure, e.toTensor());
        } else {
          rec.structure += "N;";
        }
      }
      rec.structure += ']';
    } else {
      append_key(rec.structure, a);
    }
  }
  rec.structure += ')';
  std::vector<int> target_index;  // per target: its position among rec.tensors
  target_index.reserve(targets.size());
  rec.args.reserve(n);
  rec.tensors.reserve(n + out_types.size());
  rec.written.reserve(n + out_types.size());
  for (size_t i = 0; i < n; ++i) {
    bool writes = info.args[i].writes;
    rec.args.push_back(map_tensors(args[i], [&](const at::Tensor& t) {
      at::Tensor snap = snapshot(t);
      if (snap.defined() && !snap.is_cpu()) {
        if (writes) target_index.push_back(static_cast<int>(rec.tensors.size()));
        rec.tensors.push_back(snap);
        rec.written.push_back(writes);
      }
      return snap;
    }));
  }
  // Results: the op's targets, or new tensors (created now, holding their values once the graph runs).
  std::vector<at::Tensor> outputs;
  std::vector<int> result_index;
  outputs.reserve(out_types.size());
  result_index.reserve(out_types.size());
  for (size_t i = 0; i < out_types.size(); ++i) {
    if (!out_types[i].defined) {
      outputs.emplace_back();
      result_index.push_back(-1);
      continue;
    }
    if (!targets.empty()) {
      outputs.push_back(targets.at(i));
      result_index.push_back(target_index.at(i));
      continue;
    }
    at::Tensor t = new_output(device, out_types[i].sizes, out_types[i].dtype);
    result_index.push_back(static_cast<int>(rec.tensors.size()));
    rec.tensors.push_back(snapshot(t));
    rec.written.push_back(true);
    outputs.push_back(std::move(t));
  }
  const OpInfo* about = &info;  // lives as long as the process (in g_infos or g_retired)
  std::vector<bool> fresh(result_index.size(), targets.empty());  // per result: a new tensor, not an argument
  rec.lower = [about, outs, result_index = std::move(result_index), fresh = std::move(fresh)](
                  TensorProgram& program, const RecordedOp& op, int node, OpFacts& facts) {
    const std::string& name = about->short_name;
    const std::vector<OutType>& types = *outs;
    OpProgram ctx(program, name, op.args, types, node, facts);
    std::vector<Value> results = about->row->rule(ctx);
    TORCH_INTERNAL_ASSERT(results.size() == types.size(), name, ": rule returned ", results.size(), " values for ",
                          types.size(), " outputs");
    for (size_t i = 0; i < results.size(); ++i) {
      if (!types[i].defined) continue;
      Value v = results[i];
      if (v.type.dims != types[i].sizes) {
        TORCH_INTERNAL_ASSERT(v.type.numel() == types[i].numel(), name, ": rule produced ", v.type.str(),
                              " but PyTorch expects ", c10::IntArrayRef(types[i].sizes));
        v = ctx.b.reshape(v, types[i].sizes);
      }
      const at::Tensor& target = op.tensors.at(static_cast<size_t>(result_index[i]));
      if (ctx.failed() && !fresh.at(i)) {
        // An op whose check fails leaves its in-place/out= targets as they were (the error is raised later, at
        // the next sync), as the CPU, which raises before writing, does.
        Value before = program.read(target);
        v = ctx.b.select(ctx.b.broadcast_to(*ctx.failed(), before.type.dims), before,
                         ctx.b.convert(v, before.type.dtype));
      }
      program.write(target, v);
    }
  };
  record_op(device, std::move(rec));
  info.lowered.fetch_add(1, std::memory_order_relaxed);

  torch::jit::drop(*stack, n);
  if (schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType) {
    torch::jit::push(*stack, std::move(outputs));
    return;
  }
  for (size_t k = 0; k < schema.returns().size(); ++k) torch::jit::push(*stack, std::move(outputs.at(k)));
}

}  // namespace torch_tpu
