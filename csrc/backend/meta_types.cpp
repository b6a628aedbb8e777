#include "backend/meta_types.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "backend/lowered_op.h"
#include "runtime/counters.h"

namespace torch_tpu {
namespace {

std::mutex g_meta_mu;
std::unordered_map<std::string, OutTypes> g_meta_cache;
constexpr size_t kMetaCacheLimit = 8192;

bool is_cpu_scalar(const at::Tensor& t) { return t.defined() && t.is_cpu() && t.dim() == 0; }

at::Tensor to_meta(const at::Tensor& t) {
  // CPU scalars stay as they are: meta kernels accept them beside meta tensors, as CUDA kernels do.
  if (!t.defined() || is_cpu_scalar(t)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

// The meta call again, every CPU scalar as a meta scalar; false (stack untouched) when there is none or it fails too.
bool retry_with_meta_scalars(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                             torch::jit::Stack& meta_stack) {
  bool any = false;
  auto all_meta = [&](const at::Tensor& t) {
    if (!is_cpu_scalar(t)) return to_meta(t);
    any = true;
    return at::empty({}, t.options().device(c10::kMeta));
  };
  torch::jit::Stack retry;
  for (const auto& a : args) retry.push_back(map_tensors(a, all_meta));
  if (!any) return false;
  try {
    op.callBoxed(&retry);
  } catch (const std::exception&) {
    return false;
  }
  meta_stack = std::move(retry);
  return true;
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

// A tensor's part of a meta key: its dtype, host or device, wrapped number, and sizes.
void append_meta_tensor(std::string& key, const at::Tensor& t) {
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
}

std::string meta_key(const std::string& name, const std::vector<MetaArgKind>& kinds, bool scalars_by_value,
                     const std::vector<c10::IValue>& args) {
  std::string key;
  key.reserve(128);
  key += name;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& a = args[i];
    if (kinds[i].scalar && !scalars_by_value && (a.isDouble() || a.isInt() || a.isBool())) {
      key += a.isDouble() ? "Nd;" : a.isInt() ? "Ni;" : "Nb;";
    } else if (kinds[i].scalar_list && a.isList()) {  // a ScalarList (per-parameter step sizes): kinds only
      key += "NL[";
      for (const c10::IValue& e : a.toListRef()) key += e.isDouble() ? 'd' : e.isInt() ? 'i' : e.isBool() ? 'b' : 'c';
      key += ']';
    } else {
      append_ivalue_key(key, a, append_meta_tensor);
    }
  }
  return key;
}

}  // namespace

OutTypes meta_out_types(const c10::OperatorHandle& op, const std::string& name, const std::vector<MetaArgKind>& kinds,
                        bool scalars_by_value, const std::vector<c10::IValue>& args,
                        const std::function<void()>& before_meta) {
  std::string key = meta_key(name, kinds, scalars_by_value, args);
  {
    std::lock_guard<std::mutex> lock(g_meta_mu);
    auto it = g_meta_cache.find(key);
    if (it != g_meta_cache.end()) return it->second;
  }
  runtime_counters().meta_calls++;
  before_meta();
  torch::jit::Stack meta_stack;
  for (const auto& a : args) meta_stack.push_back(map_tensors(a, to_meta));
  try {
    op.callBoxed(&meta_stack);
  } catch (const c10::NotImplementedError&) {
    // No meta kernel: the output types are unknown, unless the op only writes its arguments.
    if (!op.schema().returns().empty()) return nullptr;
  } catch (const std::exception&) {  // c10::Error, or a Python meta kernel's exception
    // Some meta kernels accept a CPU scalar only beside a named device type, and meta is not one (torch's
    // masked_fill reference): asked again with the CPU scalars as meta scalars, or the first error stands.
    if (!retry_with_meta_scalars(op, args, meta_stack)) throw;
  }
  auto outs = std::make_shared<const std::vector<OutType>>(out_types_of(meta_stack));
  std::lock_guard<std::mutex> lock(g_meta_mu);
  if (g_meta_cache.size() >= kMetaCacheLimit) g_meta_cache.clear();  // bounded, whatever the workload
  g_meta_cache.emplace(std::move(key), outs);
  return outs;
}

}  // namespace torch_tpu
