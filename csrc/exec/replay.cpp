#include "exec/replay.h"
#include "exec/device_tensor.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "exec/recording.h"
#include "runtime/counters.h"

namespace torch_tpu {
namespace {

// None, or an undefined tensor (how an optional tensor argument arrives).
bool is_none(const c10::IValue& v) { return v.isNone() || (v.isTensor() && !v.toTensor().defined()); }

bool on_device(const at::Tensor& t, int device) {
  return t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device;
}

// Numbers compare by kind and value (an int 3 and a float 3.0 lower differently).
bool same_number(const c10::IValue& a, const c10::IValue& b) {
  if (a.isNone() || b.isNone()) return a.isNone() && b.isNone();
  if (a.isBool() || b.isBool()) return a.isBool() && b.isBool() && a.toBool() == b.toBool();
  if (a.isInt() || b.isInt()) return a.isInt() && b.isInt() && a.toInt() == b.toInt();
  if (a.isDouble() && b.isDouble()) {
    double x = a.toDouble(), y = b.toDouble();
    return x == y || (x != x && y != y);
  }
  return false;
}

std::string input_kind(const c10::IValue& v) {
  if (v.isTensor()) return "a tensor on " + v.toTensor().device().str();
  if (v.isString()) return "a " + v.toStringRef();
  return "a " + v.tagKind();
}

at::Tensor tensor_on(const c10::Storage& storage, at::ScalarType dtype, const std::vector<int64_t>& sizes,
                     const std::vector<int64_t>& strides, int64_t offset) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                          c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return t;
}

}  // namespace

std::shared_ptr<CapturedGraph> CapturedGraph::capture(int device, Recording& rec,
                                                      const std::vector<c10::IValue>& inputs,
                                                      const std::vector<c10::IValue>& outputs, std::string* why,
                                                      bool compile_only) {
  std::shared_ptr<CapturedGraph> g(new CapturedGraph());
  g->device_ = device;
  std::string reason;
  auto refuse = [&](const std::string& r) {
    if (reason.empty()) reason = r;
  };

  // Inputs: what a replay compares, and which storage each stands for.
  std::unordered_map<const DeviceData*, int> input_of;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    Input in;
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      if (!on_device(t, device)) {
        refuse("input " + std::to_string(i) + " is " + input_kind(v));
        g->inputs_.push_back(in);
        continue;
      }
      in.tensor = true;
      in.dtype = t.scalar_type();
      in.sizes = t.sizes().vec();
      in.strides = t.strides().vec();
      in.offset = t.storage_offset();
      in.storage_nbytes = static_cast<int64_t>(t.storage().nbytes());
      in.conj = t.is_conj();
      in.neg = t.is_neg();
      DeviceData* data = &device_data(t.storage());
      in.group = input_of.emplace(data, static_cast<int>(i)).first->second;
      // The contents before the call (a storage the call writes is pending, its buffer still the old one).
      std::shared_ptr<Buffer> buffer = data->raw_buffer();
      in.has_buffer = buffer != nullptr;
      if (buffer) {
        in.element_type = buffer->element_type();
        in.element_count = buffer->element_count();
      }
    } else if (is_none(v) || v.isInt() || v.isDouble() || v.isBool()) {
      in.number = v.isTensor() ? c10::IValue() : v;
    } else {
      refuse("input " + std::to_string(i) + " is " + input_kind(v));
    }
    g->inputs_.push_back(std::move(in));
  }

  // Outputs: an input returned as is, a view of a storage the call made, or nothing.
  std::unordered_map<const DeviceData*, int> fresh_of;
  auto fresh_index = [&](const DeviceData* data, int64_t nbytes) {
    auto it = fresh_of.find(data);
    if (it != fresh_of.end()) return it->second;
    int index = static_cast<int>(g->fresh_nbytes_.size());
    g->fresh_nbytes_.push_back(nbytes);
    fresh_of.emplace(data, index);
    return index;
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const c10::IValue& v = outputs[i];
    Output out;
    if (is_none(v)) {
      g->outputs_.push_back(out);
      continue;
    }
    if (!v.isTensor() || !on_device(v.toTensor(), device)) {
      refuse("output " + std::to_string(i) + " is " + input_kind(v));
      continue;
    }
    const at::Tensor& t = v.toTensor();
    out.dtype = t.scalar_type();
    out.sizes = t.sizes().vec();
    out.strides = t.strides().vec();
    out.offset = t.storage_offset();
    DeviceData* data = &device_data(t.storage());
    for (size_t k = 0; k < inputs.size() && out.kind == Output::kNone; ++k) {
      if (inputs[k].isTensor() && inputs[k].toTensor().unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        out.kind = Output::kInput;
        out.index = static_cast<int>(k);
      }
    }
    if (out.kind == Output::kNone) {
      if (t.is_conj() || t.is_neg()) {
        refuse("output " + std::to_string(i) + " has conj/neg bits");
      } else if (input_of.count(data) > 0) {
        // A view of an input (a transposed weight saved for the backward): made again with as_strided on an input
        // of the same storage and dtype, as autograd sees such views.
        for (size_t k = 0; k < inputs.size() && out.kind == Output::kNone; ++k) {
          const c10::IValue& in = inputs[k];
          if (in.isTensor() && in.toTensor().defined() && on_device(in.toTensor(), device) &&
              &device_data(in.toTensor().storage()) == data && in.toTensor().scalar_type() == t.scalar_type()) {
            out.kind = Output::kInputView;
            out.index = static_cast<int>(k);
          }
        }
        if (out.kind == Output::kNone) refuse("output " + std::to_string(i) + " views an input as another dtype");
      } else if (rec.slot_of.count(data) == 0 && (data->raw_buffer() || data->membership() != DeviceData::kNone)) {
        refuse("output " + std::to_string(i) + " was not made by the recorded ops");
      } else if (t.requires_grad()) {
        refuse("output " + std::to_string(i) + " requires grad");
      } else {
        out.kind = Output::kFresh;
        out.index = fresh_index(data, static_cast<int64_t>(t.storage().nbytes()));
      }
    }
    g->outputs_.push_back(std::move(out));
  }

  // Every storage the ops touch is an input, or made by the call (no contents before it) and then either an
  // output or dead by now.
  std::vector<bool> keep(rec.slots.size(), false);
  for (size_t k = 0; k < rec.slots.size(); ++k) {
    const Slot& s = rec.slots[k];
    if (s.data == nullptr) {
      refuse("a storage's memory was replaced during the call");
      continue;
    }
    if (input_of.count(s.data) > 0) {
      keep[k] = true;
      continue;
    }
    if (!s.written || s.data->raw_buffer()) {
      refuse("the call read a storage that is not among its inputs");
      continue;
    }
    keep[k] = fresh_of.count(s.data) > 0;
    bool alive = static_cast<int>(s.snapshot->storage().use_count()) > s.snapshots;
    if (alive && !keep[k]) refuse("a value the call made is held outside its outputs");
  }

  if (!reason.empty()) {
    *why = reason;
    run_recording(device, rec);  // the call's own results, as if never captured
    return nullptr;
  }

  ProgramPlan plan;
  {
    TensorProgram program(device, /*open_graph=*/true, rec.precision);
    // Only inputs can be donated (a call reads no other storage it does not make); a replay decides again.
    std::set<const void*> donatable;
    for (const auto& [data, index] : input_of) donatable.insert(data);
    program.set_donatable(std::move(donatable));
    for (size_t i = 0; i < rec.ops.size(); ++i) lower_op(program, rec.ops[i], static_cast<int>(i));
    for (size_t k = 0; k < rec.slots.size(); ++k) {
      if (!keep[k]) program.forget(rec.slots[k].data);
    }
    program.run(&plan, compile_only);
  }

  g->exe_ = plan.exe;
  g->compiling_ = compile_only && !plan.text.empty();
  g->text_ = std::move(plan.text);
  g->checks_ = plan.checks;
  g->precision_ = rec.precision;
  g->options_ = backend_state().cache->options_fingerprint();
  for (const ArgSource& src : plan.sources) {
    int input = -1;
    std::shared_ptr<Buffer> fixed;
    switch (src.kind) {
      case ArgSource::kSlot: {
        auto it = input_of.find(static_cast<const DeviceData*>(src.data));
        if (it == input_of.end()) {
          *why = "the program reads a storage that is not an input";
          return nullptr;
        }
        input = it->second;
        break;
      }
      case ArgSource::kScalar:
      case ArgSource::kList:
        fixed = number_source_buffer(device, rec.ops, src);  // the graph's numbers are constants of the capture
        break;
      case ArgSource::kFixed:
        fixed = src.fixed;
        break;
    }
    g->arg_inputs_.push_back(input);
    g->fixed_args_.push_back(std::move(fixed));
  }
  for (const void* t : plan.targets) {
    Target target;
    auto in = input_of.find(static_cast<const DeviceData*>(t));
    auto fr = fresh_of.find(static_cast<const DeviceData*>(t));
    if (in != input_of.end()) {
      target.input = in->second;
      Input& updated = g->inputs_[static_cast<size_t>(in->second)];
      if (!updated.updated) {
        updated.updated = true;
        g->updated_inputs_.push_back(in->second);
      }
    } else if (fr != fresh_of.end()) {
      target.fresh = fr->second;
    } else {
      *why = "the program writes a storage that is neither an input nor an output";
      return nullptr;
    }
    g->targets_.push_back(target);
  }
  g->donated_ = plan.donated;
  return g;
}

std::shared_ptr<Executable> CapturedGraph::executable() const {
  std::lock_guard<std::mutex> lock(exe_mu_);
  if (!exe_ && compiling_) exe_ = backend_state().cache->get_or_compile(text_);  // waits for the background
  return exe_;
}

CapturedGraph::Program CapturedGraph::program() const {
  Program p{text_, arg_inputs_, fixed_args_, {}, checks_.size()};
  for (const Target& t : targets_) p.results.emplace_back(t.input, t.fresh);
  return p;
}

std::vector<CapturedGraph::OutputView> CapturedGraph::output_views() const {
  std::vector<OutputView> views;
  for (const Output& o : outputs_) {
    OutputView v;
    v.none = o.kind == Output::kNone;
    v.fresh = o.kind == Output::kFresh;
    v.index = o.index;
    v.dtype = o.dtype;
    v.sizes = o.sizes;
    v.strides = o.strides;
    v.offset = o.offset;
    views.push_back(std::move(v));
  }
  return views;
}

std::optional<std::vector<c10::IValue>> CapturedGraph::replay(const std::vector<c10::IValue>& inputs) const {
  if (inputs.size() != inputs_.size()) return std::nullopt;
  if (current_dot_precision() != precision_ || backend_state().cache->options_fingerprint() != options_) {
    return std::nullopt;
  }
  std::lock_guard<std::recursive_mutex> writing(device_mutex(device_));  // its updates of inputs are atomic too
  std::vector<DeviceData*> data(inputs.size(), nullptr);
  std::unordered_set<const DeviceData*> storages;
  bool pending = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs_[i];
    const c10::IValue& v = inputs[i];
    if (!in.tensor) {
      if (is_none(v) ? !in.number.isNone() : !same_number(in.number, v)) return std::nullopt;
      continue;
    }
    if (!v.isTensor()) return std::nullopt;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !on_device(t, device_) || t.scalar_type() != in.dtype || t.sizes() != in.sizes ||
        t.strides() != in.strides || t.storage_offset() != in.offset || t.is_conj() != in.conj ||
        t.is_neg() != in.neg || static_cast<int64_t>(t.storage().nbytes()) != in.storage_nbytes) {
      return std::nullopt;
    }
    DeviceData* d = &device_data(t.storage());
    data[i] = d;
    if (in.group != static_cast<int>(i)) {
      if (data[static_cast<size_t>(in.group)] != d) return std::nullopt;  // no longer one storage
      continue;
    }
    if (!storages.insert(d).second) return std::nullopt;  // one storage now, two when captured
    int membership = d->membership();
    pending = pending || membership == DeviceData::kWritten || (in.updated && membership != DeviceData::kNone);
  }
  // The open graph writes an input, or reads one the program updates: it runs first (its writes are in, its reads
  // see the old contents).
  if (pending) flush_device(device_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs_[i];
    if (!in.tensor || in.group != static_cast<int>(i)) continue;
    std::shared_ptr<Buffer> buffer = data[i]->raw_buffer();
    if ((buffer != nullptr) != in.has_buffer) return std::nullopt;
    if (buffer && (buffer->element_type() != in.element_type || buffer->element_count() != in.element_count)) {
      return std::nullopt;
    }
  }

  std::vector<c10::Storage> fresh;
  fresh.reserve(fresh_nbytes_.size());
  {
    OnDevice on(device_);
    c10::Allocator* allocator = &device_allocator();
    for (int64_t nbytes : fresh_nbytes_) {
      fresh.emplace_back(c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes), allocator, /*resizable=*/true);
    }
  }
  if (std::shared_ptr<Executable> exe = executable()) {
    // Donation is decided and the new buffers put in place under the donation lock (see device_data.h).
    std::unique_lock<std::shared_mutex> donating(donation_mutex(), std::defer_lock);
    if (!donated_.empty()) donating.lock();
    std::vector<std::shared_ptr<Buffer>> args;
    args.reserve(arg_inputs_.size());
    for (size_t a = 0; a < arg_inputs_.size(); ++a) {
      int input = arg_inputs_[a];
      if (input < 0) {
        args.push_back(fixed_args_[a]);
        continue;
      }
      const DeviceData* d = data[static_cast<size_t>(input)];
      args.push_back(donating.owns_lock() ? d->raw_buffer_donating() : d->raw_buffer());
    }
    std::vector<size_t> donated;
    std::vector<int64_t> kept;
    for (size_t a : donated_) {
      // Donated when only the storage and this argument list hold the buffer.
      if (inplace_donation() && args[a].use_count() == 2) {
        donated.push_back(a);
      } else {
        kept.push_back(static_cast<int64_t>(a));
      }
    }
    runtime_counters().donations += static_cast<int64_t>(donated.size());
    std::vector<const void*> targets;
    targets.reserve(targets_.size());
    for (const Target& t : targets_) {
      targets.push_back(t.input >= 0 ? static_cast<const void*>(data[static_cast<size_t>(t.input)])
                                     : static_cast<const void*>(&device_data(fresh[static_cast<size_t>(t.fresh)])));
    }
    execute_plan(device_, *exe, args, donated, targets, checks_, donating, [] {}, kept);
  }
  for (int i : updated_inputs_) inputs[static_cast<size_t>(i)].toTensor().unsafeGetTensorImpl()->bump_version();
  runtime_counters().graph_replays++;

  std::vector<c10::IValue> outs;
  outs.reserve(outputs_.size());
  for (const Output& o : outputs_) {
    switch (o.kind) {
      case Output::kNone:
        outs.emplace_back();
        break;
      case Output::kInput:
        outs.push_back(inputs[static_cast<size_t>(o.index)]);
        break;
      case Output::kInputView:
        outs.emplace_back(inputs[static_cast<size_t>(o.index)].toTensor().as_strided(o.sizes, o.strides, o.offset));
        break;
      case Output::kFresh:
        outs.emplace_back(tensor_on(fresh[static_cast<size_t>(o.index)], o.dtype, o.sizes, o.strides, o.offset));
        break;
    }
  }
  return outs;
}

}  // namespace torch_tpu
