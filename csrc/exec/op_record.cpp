#include "exec/op_record.h"

#include <ATen/EmptyTensor.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

#include "exec/device_data.h"
#include "exec/device_tensor.h"
#include "exec/graph.h"
#include "exec/state.h"
#include "exec/sync.h"
#include "exec/tensor_program.h"

namespace torch_tpu {

void append_ivalue_key(std::string& key, const c10::IValue& v, TensorKeyFn tensor) {
  if (v.isTensor()) {
    tensor(key, v.toTensor());
  } else if (v.isList()) {
    key += '[';
    for (const c10::IValue& e : v.toListRef()) append_ivalue_key(key, e, tensor);
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

namespace {

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

// The structure of a lowering-table call: its name, then per argument its tensors' types and views, the kind of
// each number it takes at run time, and other values as they are. Also notes which arguments are numbers.
std::string call_structure(const LoweredCall& call, std::vector<int>& number_args) {
  std::string s;
  s.reserve(192);
  s = *call.name;
  s += '(';
  for (size_t i = 0; i < call.args.size(); ++i) {
    const ArgRole& role = call.roles->at(i);
    const c10::IValue& a = call.args[i];
    const bool cpu_scalar = a.isTensor() && a.toTensor().defined() && a.toTensor().is_cpu();
    const bool number = (role.number && (a.isDouble() || a.isInt() || a.isBool() || a.isComplexDouble())) ||
                        (role.number_list && a.isList()) || cpu_scalar;
    if (number) number_args.push_back(static_cast<int>(i));
    if (number && !cpu_scalar) {
      if (a.isList()) {
        s += 'L';
        append_int(s, static_cast<int64_t>(a.toListRef().size()));
      } else {
        s += 'S';
        s += a.tagKind();
      }
      s += ';';
    } else if (a.isTensor()) {
      append_tensor_structure(s, a.toTensor());
    } else if (a.isList() && std::any_of(a.toListRef().begin(), a.toListRef().end(),
                                         [](const c10::IValue& e) { return e.isTensor(); })) {
      s += '[';
      for (const c10::IValue& e : a.toListRef()) {
        if (e.isTensor()) {
          append_tensor_structure(s, e.toTensor());
        } else {
          s += "N;";
        }
      }
      s += ']';
    } else {
      append_ivalue_key(s, a, append_tensor_structure);
    }
  }
  s += ')';
  return s;
}

}  // namespace

void append_int(std::string& s, int64_t v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  s.append(buf, res.ptr);
}

void append_dims(std::string& s, c10::IntArrayRef dims) {
  for (int64_t d : dims) {
    s += ',';
    append_int(s, d);
  }
}

at::Tensor snapshot(const at::Tensor& t) {
  if (!t.defined()) return t;
  if (t.is_cpu()) {  // a CPU scalar: its bytes copied without the dispatcher
    TORCH_INTERNAL_ASSERT(t.is_contiguous(), "a recorded op read a strided CPU tensor");
    at::Tensor copy = at::detail::empty_cpu(t.sizes(), t.scalar_type(), false, std::nullopt);
    std::memcpy(copy.data_ptr(), t.const_data_ptr(), t.nbytes());
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

std::vector<at::Tensor> record_lowered_op(int device, LoweredCall call) {
  const std::vector<OutType>& out_types = *call.outs;
  RecordedOp rec;
  rec.structure = call_structure(call, rec.number_args);
  std::vector<int> target_index;  // per target: its position among rec.tensors
  target_index.reserve(call.targets.size());
  const size_t n = call.args.size();
  rec.args.reserve(n);
  rec.tensors.reserve(n + out_types.size());
  rec.written.reserve(n + out_types.size());
  for (size_t i = 0; i < n; ++i) {
    const bool writes = call.roles->at(i).writes;
    rec.args.push_back(map_tensors(call.args[i], [&](const at::Tensor& t) {
      at::Tensor snap = snapshot(t);
      if (snap.defined() && !snap.is_cpu()) {
        if (writes) target_index.push_back(static_cast<int>(rec.tensors.size()));
        rec.tensors.push_back(snap);
        rec.written.push_back(writes);
      }
      return snap;
    }));
  }
  // Results: the targets, or new tensors (created now, holding their values once the graph runs).
  std::vector<at::Tensor> outputs;
  std::vector<int> result_index;
  outputs.reserve(out_types.size());
  result_index.reserve(out_types.size());
  for (size_t i = 0; i < out_types.size(); ++i) {
    if (!out_types[i].defined) {
      outputs.emplace_back();
      result_index.push_back(-1);
    } else if (!call.targets.empty()) {
      outputs.push_back(call.targets.at(i));
      result_index.push_back(target_index.at(i));
    } else {
      at::Tensor t = new_output(device, out_types[i].sizes, out_types[i].dtype);
      result_index.push_back(static_cast<int>(rec.tensors.size()));
      rec.tensors.push_back(snapshot(t));
      rec.written.push_back(true);
      outputs.push_back(std::move(t));
    }
  }
  const bool fresh = call.targets.empty();  // the results are new tensors, not arguments
  rec.lower = [row = call.row, name = call.short_name, outs = call.outs, result_index = std::move(result_index),
               fresh](TensorProgram& program, const RecordedOp& op, int node, OpFacts& facts) {
    const std::vector<OutType>& types = *outs;
    OpProgram ctx(program, *name, op.args, types, node, facts);
    std::vector<Value> results = row->rule(ctx);
    TORCH_INTERNAL_ASSERT(results.size() == types.size(), *name, ": rule returned ", results.size(), " values for ",
                          types.size(), " outputs");
    for (size_t i = 0; i < results.size(); ++i) {
      if (!types[i].defined) continue;
      Value v = results[i];
      if (v.type.dims != types[i].sizes) {
        TORCH_INTERNAL_ASSERT(v.type.numel() == types[i].numel(), *name, ": rule produced ", v.type.str(),
                              " but PyTorch expects ", c10::IntArrayRef(types[i].sizes));
        v = ctx.b.reshape(v, types[i].sizes);
      }
      const at::Tensor& target = op.tensors.at(static_cast<size_t>(result_index[i]));
      if (ctx.failed() && !fresh && !ctx.keeps_target_on_failure()) {
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
  return outputs;
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

void record_same_device_copy(const at::Tensor& self, const at::Tensor& src) {
  record_custom_op(self.device().index(), "copy_", {src}, {self},
                   [](TensorProgram& p, const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& out) {
                     p.write(out[0], p.read(in[0]));
                   });
}

at::Tensor new_output(int device, c10::IntArrayRef sizes, at::ScalarType dtype) {
  DeferredBooking deferred(eager_mode() == EagerMode::kFused);
  return new_device_tensor(device, sizes, dtype);
}

}  // namespace torch_tpu
