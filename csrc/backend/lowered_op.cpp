#include "backend/lowered_op.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/TypeProperties.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>
#include <unordered_map>

#include "backend/generator.h"
#include "exec/graph.h"
#include "exec/tensor_program.h"
#include "lowering/op_context.h"

namespace torch_tpu {
namespace {

std::mutex g_counts_mu;
std::map<std::string, int64_t> g_fallbacks;
std::map<std::string, int64_t> g_lowered;
std::map<std::string, int64_t> g_host_ops;

void count(std::map<std::string, int64_t>& m, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  m[name]++;
}

template <class Fn>
void for_each_tensor(const c10::IValue& v, const Fn& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) fn(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) fn(e.toTensor());  // Python indexing passes undefined for `:`
    }
  }
}

at::Tensor to_meta(const at::Tensor& t) {
  // CPU scalars stay as they are: meta kernels accept them beside meta tensors, as CUDA kernels do.
  if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

// What PyTorch's meta kernel says an op returns: per output tensor, its dtype and sizes (or undefined/None).
struct OutType {
  bool defined = false;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : sizes) n *= d;
    return n;
  }
};

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
    key += std::to_string(static_cast<int>(t.scalar_type()));
    key += t.is_cpu() ? 'c' : 'd';
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) key += 'w';
    for (int64_t d : t.sizes()) key += "," + std::to_string(d);
    key += ';';
  } else if (v.isTensorList() || v.isList()) {
    key += '[';
    for (const c10::IValue& e : v.toListRef()) append_key(key, e);
    key += ']';
  } else if (v.isNone()) {
    key += "N;";
  } else if (v.isInt()) {
    key += "i" + std::to_string(v.toInt()) + ";";
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
std::unordered_map<std::string, std::vector<OutType>> g_meta_cache;
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

class OpProgram final : public OpContext {
 public:
  OpProgram(TensorProgram& program, const std::string& name, const std::vector<c10::IValue>& args,
            const std::vector<OutType>& outs)
      : OpContext(program.builder()), program_(program), name_(name), args_(args), outs_(outs) {}

  const std::string& op_name() const override { return name_; }
  size_t num_args() const override { return args_.size(); }
  const c10::IValue& arg(size_t i) const override { return args_.at(i); }
  Value tensor(size_t i) override { return program_.read(args_.at(i).toTensor()); }
  std::vector<Value> tensor_list(size_t i) override {
    std::vector<Value> out;
    for_each_tensor(args_.at(i), [&](const at::Tensor& t) { out.push_back(program_.read(t)); });
    return out;
  }
  TensorType out(size_t i) const override {
    const OutType& o = outs_.at(i);
    TORCH_INTERNAL_ASSERT(o.defined, name_, ": output ", i, " is not produced");
    return TensorType{element_type_of(o.dtype), o.sizes};
  }
  bool out_defined(size_t i) const override { return outs_.at(i).defined; }
  size_t num_outputs() const override { return outs_.size(); }
  ElementType promoted(const std::vector<size_t>& indices) const override { return result_type_of(*this, indices); }
  Value runtime_scalar(const c10::Scalar& value, ElementType dtype) override {
    return program_.host_scalar(value, dtype);
  }
  Value runtime_vector(const std::vector<c10::Scalar>& values, ElementType dtype) override {
    return program_.host_vector(values, dtype);
  }
  void check(const Value& bad, const std::string& message, bool index_error, std::optional<Value> culprit) override {
    program_.add_check(bad, message, index_error, culprit);
  }
  void update_arg(size_t i, const Value& value) override { program_.write(args_.at(i).toTensor(), value); }

 private:
  TensorProgram& program_;
  const std::string& name_;
  const std::vector<c10::IValue>& args_;
  const std::vector<OutType>& outs_;
};

std::string op_label(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

}  // namespace

c10::IValue map_tensors(const c10::IValue& v, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(fn(t));
    return out;
  }
  // Any tensor element, not only the first: index lists may start with None.
  if (v.isList() && std::any_of(v.toListRef().begin(), v.toListRef().end(),
                                [](const c10::IValue& e) { return e.isTensor(); })) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef()) {
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(fn(e.toTensor())) : std::nullopt);
    }
    return out;
  }
  return v;
}

int first_tpu_device(const std::vector<c10::IValue>& args) {
  int device = -1;
  for (const auto& v : args) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && device < 0) device = t.device().index();
    });
  }
  return device;
}

void count_fallback(const c10::OperatorHandle& op) { count(g_fallbacks, op_label(op)); }

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  return g_fallbacks;
}

std::map<std::string, int64_t> lowered_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  return g_lowered;
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
  g_lowered.clear();
}

void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  std::string name = op_label(op);
  const LoweringRow* row = find_row(name);
  TORCH_INTERNAL_ASSERT(row != nullptr, "no lowering rule for ", name);
  size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  if (row->prepare) row->prepare(args);
  int device = op_device(args);

  // Output shapes and dtypes (and PyTorch's own argument errors) come from the meta kernels.
  std::string key = name;
  // A Scalar argument (a number the program takes at run time) contributes its kind, not its value, so changing
  // learning rates or step sizes reuse the entry; except where a Scalar sets the result's shape (arange, linspace).
  bool shape_from_scalars = name.find("arange") != std::string::npos || name.find("linspace") != std::string::npos;
  for (size_t i = 0; i < n; ++i) {
    const c10::TypePtr& type = schema.arguments()[i].type();
    bool number = type->kind() == c10::TypeKind::NumberType ||
                  (type->kind() == c10::TypeKind::OptionalType &&
                   type->containedType(0)->kind() == c10::TypeKind::NumberType);
    if (number && !shape_from_scalars && (args[i].isDouble() || args[i].isInt() || args[i].isBool())) {
      key += args[i].isDouble() ? "Nd;" : args[i].isInt() ? "Ni;" : "Nb;";
    } else {
      append_key(key, args[i]);
    }
  }
  std::vector<OutType> outs;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_meta_mu);
    auto it = g_meta_cache.find(key);
    if (it != g_meta_cache.end()) {
      outs = it->second;
      cached = true;
    }
  }
  if (!cached) {
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
    outs = out_types_of(meta_stack);
    std::lock_guard<std::mutex> lock(g_meta_mu);
    if (g_meta_cache.size() >= kMetaCacheLimit) g_meta_cache.clear();  // bounded, whatever the workload
    g_meta_cache.emplace(key, outs);
  }

  // Inplace and out= overloads write into their mutable arguments; functional ones create outputs.
  std::vector<at::Tensor> targets;
  for (size_t i = 0; i < n; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      for_each_tensor(args[i], [&](const at::Tensor& t) { targets.push_back(t); });
    }
  }
  // Ops that return nothing (in-place _foreach_ ops, fused optimizers) produce their written arguments' new values.
  if (schema.returns().empty()) {
    outs.clear();
    for (const at::Tensor& t : targets) {
      OutType o;
      o.defined = true;
      o.dtype = t.scalar_type();
      o.sizes = t.sizes().vec();
      outs.push_back(std::move(o));
    }
  }
  for (size_t i = 0; i < targets.size() && i < outs.size(); ++i) {
    if (outs[i].defined && targets[i].sizes() != c10::IntArrayRef(outs[i].sizes)) targets[i].resize_(outs[i].sizes);
    // As on the CPU: a write through a tensor whose elements share memory (an expand) has no defined result.
    at::assert_no_internal_overlap(targets[i]);
  }

  std::vector<at::Tensor> outputs;
  std::string short_name = name.substr(name.rfind(':') + 1);
  with_program(device, [&](TensorProgram& program) {
    OpProgram ctx(program, short_name, args, outs);
    std::vector<Value> results = row->rule(ctx);
    TORCH_INTERNAL_ASSERT(results.size() == outs.size(), name, ": rule returned ", results.size(), " values for ",
                          outs.size(), " outputs");
    for (size_t i = 0; i < results.size(); ++i) {
      if (!outs[i].defined) {
        outputs.emplace_back();
        continue;
      }
      Value v = results[i];
      if (v.type.dims != outs[i].sizes) {
        TORCH_INTERNAL_ASSERT(v.type.numel() == outs[i].numel(), name, ": rule produced ", v.type.str(),
                              " but PyTorch expects ", c10::IntArrayRef(outs[i].sizes));
        v = ctx.b.reshape(v, outs[i].sizes);
      }
      if (!targets.empty()) {
        program.write(targets.at(i), v);
        outputs.push_back(targets[i]);
      } else {
        outputs.push_back(program.output(v, outs[i].dtype));
      }
    }
  });
  count(g_lowered, name);

  torch::jit::drop(*stack, n);
  if (schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType) {
    torch::jit::push(*stack, outputs);
    return;
  }
  size_t k = 0;
  for (const auto& ret : schema.returns()) {
    (void)ret;
    torch::jit::push(*stack, outputs.at(k++));
  }
}

}  // namespace torch_tpu
