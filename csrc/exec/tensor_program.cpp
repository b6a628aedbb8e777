#include "exec/tensor_program.h"

#include <ATen/EmptyTensor.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <tuple>

#include "exec/device_tensor.h"
#include "exec/state.h"
#include "exec/sync.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/views.h"
#include "runtime/counters.h"
#include "runtime/executable.h"

namespace torch_tpu {
namespace {

ViewSpec view_of(const at::Tensor& t) {
  return ViewSpec{t.sizes().vec(), t.strides().vec(), t.storage_offset()};
}

TensorType type_of(const at::Tensor& t) { return TensorType{element_type_of(t.scalar_type()), t.sizes().vec()}; }

// A tensor's conj and neg bits are part of its value: elements read through such a view are the stored ones
// conjugated / negated, and a write stores the inverse. Both maps are involutions, so one function serves both.
Value apply_bits(HloBuilder& b, const at::Tensor& t, Value v) {
  if (t.is_conj() && is_complex(v.type.dtype)) {
    TensorType part{v.type.dtype == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64, v.type.dims};
    Value re = b.op1("stablehlo.real", {v}, part);
    Value im = b.unary("stablehlo.negate", b.op1("stablehlo.imag", {v}, part));
    v = b.op1("stablehlo.complex", {re, im}, v.type);
  }
  if (t.is_neg()) v = b.unary("stablehlo.negate", v);
  return v;
}

}  // namespace

TensorProgram::StorageSlot& TensorProgram::slot(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "expected a tpu tensor, got one on ", t.device());
  TORCH_CHECK(t.device().index() == device_,
              "Expected all tensors to be on the same device, but found at least two devices, tpu:", device_,
              " and ", t.device(), "!");
  DeviceData* data = &device_data(t.storage());
  auto it = slots_.find(data);
  if (it != slots_.end()) return it->second;
  StorageSlot s;
  s.data = data;
  s.nbytes = static_cast<int64_t>(t.storage().nbytes());
  s.first_id = b_.next_id();
  if (open_graph_) data->set_membership(DeviceData::kRead);
  slot_order_.push_back(data);
  return slots_.emplace(data, std::move(s)).first->second;
}

TensorProgram::TensorProgram(int device, bool open_graph, std::optional<DotPrecision> precision)
    : device_(device), open_graph_(open_graph) {
  // The open graph's program is built under the graph's lock already.
  if (!open_graph_) device_lock_ = std::unique_lock<std::recursive_mutex>(device_mutex(device));
  b_.set_dot_precision(dot_precision_name(precision.value_or(current_dot_precision())));
  dumping_ = open_graph_ && backend_state().cache->dumping();
}

TensorProgram::~TensorProgram() { release_storages(); }

void TensorProgram::release_storages() {
  if (!open_graph_) return;
  for (auto& kv : slots_) kv.second.data->set_membership(DeviceData::kNone);
}

void TensorProgram::forget(const void* data) {
  slots_.erase(data);
  slot_order_.erase(std::remove(slot_order_.begin(), slot_order_.end(), data), slot_order_.end());
}

Value TensorProgram::add_check(const Value& bad, const std::string& message, bool index_error,
                               std::optional<Value> culprit) {
  Value any = bad;
  if (bad.type.rank() > 0) {
    std::vector<int64_t> all(static_cast<size_t>(bad.type.rank()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    any = b_.reduce(bad, b_.constant(0, ElementType::kPred), all, "stablehlo.or");
  }
  if (culprit) culprit = b_.convert(*culprit, ElementType::kS64);
  checks_.push_back(Check{any, message, index_error, culprit});
  return any;
}

Value TensorProgram::storage_value(StorageSlot& s, ElementType dtype) {
  int64_t itemsize = element_size(dtype);
  TORCH_CHECK(s.nbytes % itemsize == 0, "tpu storage of ", s.nbytes, " bytes cannot be viewed as elements of ",
              itemsize, " bytes");
  int64_t numel = s.nbytes / itemsize;
  if (!s.has_value) {
    // An open graph never waits on itself; a program of its own runs the open graph first if it writes this storage.
    s.buffer = open_graph_ ? s.data->raw_buffer() : s.data->buffer();
    if (s.buffer) {
      Value raw = b_.arg(TensorType{s.buffer->element_type(), {s.buffer->element_count()}});
      s.arg_index = static_cast<int>(args_.size());
      args_.push_back(s.buffer);
      ArgSource src;
      src.kind = ArgSource::kSlot;
      src.data = s.data;
      sources_.push_back(src);
      s.value = raw;
    } else {
      s.value = b_.constant(0, dtype, {numel});  // never written: reads as zeros
    }
    s.has_value = true;
    s.versions.push_back(s.value);
  }
  if (s.value.type.dtype != dtype) {
    s.value = reinterpret_storage(b_, s.value, dtype, numel);
    s.versions.push_back(s.value);
    s.reads.clear();
  }
  return s.value;
}

Value TensorProgram::external(std::shared_ptr<Buffer> buffer) {
  Value v = b_.arg(TensorType{buffer->element_type(), buffer->dims()});
  ArgSource src;
  src.fixed = buffer;
  sources_.push_back(std::move(src));
  args_.push_back(std::move(buffer));
  return v;
}

namespace {

// Device copies of recently used numbers (alpha = 1, eps, -inf, 1/sqrt(d), a learning rate held for many steps):
// reused instead of uploaded per op. Buffers are immutable program arguments (never donated), so sharing is safe.
// Bounded: the table is dropped when full (buffers in use live on in their programs).
class ScalarBuffers {
 public:
  // bits: 8 bytes (16 for a complex128 number).
  std::shared_ptr<Buffer> get(int pjrt_device, ElementType type, const void* bits) {
    Key key{pjrt_device, static_cast<int>(type), {0, 0}};
    std::memcpy(key.bits.data(), bits, type == ElementType::kC128 ? 16 : 8);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
    if (entries_.size() >= kLimit) entries_.clear();
    const BackendState& state = backend_state();
    auto buffer = state.client->buffer_from_host(bits, type, {}, {}, pjrt_device);
    entries_.emplace(key, buffer);
    runtime_counters().cached_scalars.store(static_cast<int64_t>(entries_.size()));
    return buffer;
  }

 private:
  static constexpr size_t kLimit = 512;
  struct Key {
    int device;
    int type;
    std::array<uint64_t, 2> bits;
    bool operator<(const Key& o) const { return std::tie(device, type, bits) < std::tie(o.device, o.type, o.bits); }
  };
  std::mutex mu_;
  std::map<Key, std::shared_ptr<Buffer>> entries_;
};

ScalarBuffers& scalar_buffers() {
  static ScalarBuffers* cache = new ScalarBuffers();  // never destroyed: no PJRT calls during static teardown
  return *cache;
}

}  // namespace

std::shared_ptr<Buffer> scalar_buffer(int device, const c10::Scalar& value) {
  const BackendState& state = backend_state();
  int pjrt = state.pjrt_index.at(device);
  uint64_t bits = 0;
  ElementType type = ElementType::kF64;
  if (value.isBoolean()) {
    bool v = value.toBool();
    std::memcpy(&bits, &v, sizeof(v));
    type = ElementType::kPred;
  } else if (value.isIntegral(false)) {
    int64_t v = value.toLong();
    std::memcpy(&bits, &v, sizeof(v));
    type = ElementType::kS64;
  } else if (value.isComplex()) {
    c10::complex<double> z = value.toComplexDouble();
    const double parts[2] = {z.real(), z.imag()};
    return scalar_buffers().get(pjrt, ElementType::kC128, parts);
  } else {
    double v = value.toDouble();
    std::memcpy(&bits, &v, sizeof(v));
  }
  return scalar_buffers().get(pjrt, type, &bits);
}

std::shared_ptr<Buffer> vector_buffer(int device, const std::vector<c10::Scalar>& values) {
  const BackendState& state = backend_state();
  std::vector<double> host;
  host.reserve(values.size());
  for (const c10::Scalar& v : values) host.push_back(v.toDouble());
  int64_t n = static_cast<int64_t>(host.size());
  return state.client->buffer_from_host(host.data(), ElementType::kF64, {n}, {}, state.pjrt_index.at(device));
}

Value TensorProgram::host_scalar(const c10::Scalar& value, ElementType dtype, const ArgSource& source) {
  Value v = external(scalar_buffer(device_, value));
  if (source.kind == ArgSource::kScalar) sources_.back() = source;
  return b_.convert(v, dtype);
}

Value TensorProgram::host_vector(const std::vector<c10::Scalar>& values, ElementType dtype, const ArgSource& source) {
  Value v = external(vector_buffer(device_, values));
  if (source.kind == ArgSource::kList) sources_.back() = source;
  return b_.convert(v, dtype);
}

Value TensorProgram::read(const at::Tensor& t, const ArgSource& source) {
  if (t.device().is_cpu()) {
    TORCH_CHECK(t.dim() == 0, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
                device_, " and cpu!");
    // A runtime argument, not a constant: CPU scalars (learning rates, step counts) change between calls.
    return host_scalar(cpu_scalar_value(t), element_type_of(t.scalar_type()), source);
  }
  ElementType dtype = element_type_of(t.scalar_type());
  StorageSlot& s = slot(t);
  ViewSpec view = view_of(t);
  Value v = read_view(b_, storage_value(s, dtype), view);
  s.reads.emplace_back(std::move(view), v);
  return apply_bits(b_, t, v);
}

void TensorProgram::write(const at::Tensor& target, const Value& value) {
  TensorType type = type_of(target);
  Value v = apply_bits(b_, target, b_.broadcast_to(b_.convert(value, type.dtype), type.dims));
  StorageSlot& s = slot(target);
  int64_t numel = s.nbytes / element_size(type.dtype);
  ViewSpec view = view_of(target);
  bool whole = view.offset == 0 && view.numel() == numel && target.is_contiguous();
  if (whole) {
    s.value = b_.reshape(v, {numel});
  } else {
    // The write rule: a partial write may update the storage in place (dynamic_update_slice, scatter) only when each
    // written element is computed from the storage at most at its own position, through elementwise ops from a read
    // of this very view. Otherwise (x[0] = x[0].flip(0), x[0].add_(x[0].roll(1))) an in-place update could read
    // elements it already overwrote (XLA-CPU does), so the new contents are chosen elementwise instead.
    Value base = storage_value(s, type.dtype);
    std::vector<Value> same_place;
    for (const auto& [seen, read] : s.reads) {
      if (seen == view && read.type == v.type) same_place.push_back(read);
    }
    bool apart = b_.reads_elsewhere(v, s.versions, same_place, s.first_id);
    if (apart) runtime_counters().writes_apart++;
    s.value = apart ? write_view_apart(b_, base, v, view) : write_view(b_, base, v, view);
  }
  s.versions.push_back(s.value);
  s.reads.clear();
  s.has_value = true;
  s.written = true;
  if (open_graph_) s.data->set_membership(DeviceData::kWritten);
}

at::Tensor TensorProgram::output(const Value& value, at::ScalarType dtype) {
  DeferredBooking deferred(open_graph_);
  at::Tensor t = new_device_tensor(device_, value.type.dims, dtype);
  write(t, value);
  return t;
}

std::shared_mutex& donation_mutex() {
  static std::shared_mutex mu;
  return mu;
}

void TensorProgram::run(ProgramPlan* plan, bool compile_only) {
  std::vector<StorageSlot*> targets;
  bool may_donate = false;
  for (const void* key : slot_order_) {
    StorageSlot& s = slots_.at(key);
    if (!s.written) continue;
    // A program of its own that overwrites a storage the open graph refers to runs that graph first.
    if (!open_graph_ && s.data->membership() != DeviceData::kNone) flush_device(device_);
    targets.push_back(&s);
    may_donate = may_donate || s.arg_index >= 0;
  }
  if (targets.empty() && checks_.empty()) {
    release_storages();
    return;
  }
  // Deciding to donate and swapping in the new buffers happen under the donation lock (see device_data.h).
  std::unique_lock<std::shared_mutex> donating(donation_mutex(), std::defer_lock);
  if (may_donate) donating.lock();
  std::vector<Value> results;
  std::vector<size_t> donated;
  for (StorageSlot* s : targets) {
    // Donate the old contents to the new when only this program still holds them (the storage, the slot and the
    // argument list): an in-place update then reuses the buffer instead of copying the storage.
    bool same_type = s->buffer && s->buffer->element_type() == s->value.type.dtype &&
                     s->buffer->dims() == s->value.type.dims;
    bool unshared = inplace_donation() && s->buffer.use_count() == 3 &&
                    (!donatable_ || donatable_->count(s->data) > 0);
    if (s->arg_index >= 0 && same_type && unshared) {
      b_.set_alias(static_cast<size_t>(s->arg_index), static_cast<int>(results.size()));
      donated.push_back(static_cast<size_t>(s->arg_index));
      if (!compile_only) runtime_counters().donations++;
    }
    results.push_back(s->value);
  }
  std::vector<CheckReport> reports;
  for (const auto& check : checks_) {
    results.push_back(check.bad);
    results.push_back(check.culprit ? *check.culprit : b_.constant(0, ElementType::kS64));
    reports.push_back(CheckReport{check.message, check.index_error});
  }
  const BackendState& state = backend_state();
  std::string text = b_.build(results);
  std::vector<const void*> target_data;
  for (StorageSlot* s : targets) target_data.push_back(s->data);
  if (compile_only) {
    state.cache->compile_in_background(text);
    if (donating.owns_lock()) donating.unlock();
    if (plan != nullptr) *plan = ProgramPlan{nullptr, sources_, target_data, reports, donated, text};
    release_storages();
    return;
  }
  std::shared_ptr<Executable> exe = state.cache->get_or_compile(text);
  if (!op_names_.empty()) {
    std::string listing;
    for (const std::string& op : op_names_) listing += op + '\n';
    state.cache->dump_companion(text, ".aten.txt", listing);
  }
  if (plan != nullptr) *plan = ProgramPlan{exe, sources_, target_data, reports, donated, text};
  execute_plan(device_, *exe, args_, donated, target_data, reports, donating, [this] { release_storages(); });
}

namespace {
std::atomic<bool> g_inplace_donation{true};
}  // namespace

void set_inplace_donation(bool on) { g_inplace_donation.store(on); }
bool inplace_donation() { return g_inplace_donation.load(); }

std::string TensorProgram::program_text() const {
  std::vector<Value> results;
  for (const void* key : slot_order_) {
    const StorageSlot& s = slots_.at(key);
    if (s.written) results.push_back(s.value);
  }
  for (const auto& check : checks_) results.push_back(check.bad);
  return b_.build(results);
}

void execute_plan(int device, Executable& exe, const std::vector<std::shared_ptr<Buffer>>& args,
                  const std::vector<size_t>& donated, const std::vector<const void*>& targets,
                  const std::vector<CheckReport>& checks, std::unique_lock<std::shared_mutex>& donating,
                  const std::function<void()>& outputs_placed, const std::vector<int64_t>& non_donatable) {
  std::vector<Buffer*> raw_args;
  raw_args.reserve(args.size());
  for (const auto& a : args) raw_args.push_back(a.get());
  ExecuteResult r = exe.execute(raw_args, pjrt_device(device), non_donatable);
  runtime_counters().graphs_run++;
  for (size_t i = 0; i < targets.size(); ++i) {
    static_cast<DeviceData*>(const_cast<void*>(targets[i]))->raw_set_buffer(r.outputs[i]);
  }
  if (donating.owns_lock()) donating.unlock();
  outputs_placed();
  std::vector<DeferredCheck> deferred;
  for (size_t i = 0; i < checks.size(); ++i) {
    deferred.push_back(DeferredCheck{r.outputs[targets.size() + 2 * i], r.outputs[targets.size() + 2 * i + 1],
                                     checks[i].message, checks[i].index_error});
  }
  if (eager_mode() == EagerMode::kDebug) {
    r.done.await();  // errors surface at the op that caused them
    if (!deferred.empty()) note_host_sync("device_check");
    for (const DeferredCheck& c : deferred) raise_check(c);
    return;
  }
  // Donated buffers stay referenced until the execution is known to have finished (see above), so a flush that
  // updates storages in place (each optimizer step) does not wait. Only they: a later op's donation decision
  // counts the references to the buffers of live storages. Host reads wait on the buffers themselves.
  std::shared_ptr<std::vector<std::shared_ptr<Buffer>>> keep;
  if (!donated.empty()) {
    keep = std::make_shared<std::vector<std::shared_ptr<Buffer>>>();
    for (size_t i : donated) keep->push_back(args.at(i));
  }
  track_pending(device, std::move(r.done), std::move(keep));
  // Checks are read at the device's next sync point (a host read or synchronize()), not waited for here.
  if (!deferred.empty()) defer_checks(device, std::move(deferred));
}

void copy_host_to_device(const at::Tensor& src, const at::Tensor& target) {
  TORCH_INTERNAL_ASSERT(src.is_cpu() && src.is_contiguous() && src.scalar_type() == target.scalar_type());
  int device = target.device().index();
  const BackendState& state = backend_state();
  ElementType dtype = element_type_of(src.scalar_type());
  DeviceData& data = device_data(target.storage());
  int64_t storage_numel = static_cast<int64_t>(target.storage().nbytes()) / element_size(dtype);
  auto buffer = state.client->buffer_from_host(src.data_ptr(), dtype, {src.numel()}, {}, state.pjrt_index[device]);
  bool whole = target.storage_offset() == 0 && target.is_contiguous() && target.numel() == storage_numel &&
               !target.is_conj() && !target.is_neg();
  if (whole) {
    data.set_buffer(std::move(buffer));
    return;
  }
  // Partial write: splice the uploaded elements into the storage on the device.
  TensorProgram p(device);
  Value uploaded = p.external(std::move(buffer));
  p.write(target, p.builder().reshape(uploaded, target.sizes().vec()));
  p.run();
}

at::Tensor copy_device_to_host(const at::Tensor& src) {
  at::Tensor out = at::detail::empty_cpu(src.sizes(), src.scalar_type(), false, std::nullopt);
  if (src.numel() == 0) return out;
  DeviceData& data = device_data(src.storage());
  std::shared_ptr<Buffer> buffer = data.buffer();
  ElementType dtype = element_type_of(src.scalar_type());
  int64_t storage_numel = static_cast<int64_t>(src.storage().nbytes()) / element_size(dtype);
  bool whole = src.storage_offset() == 0 && src.is_contiguous() && src.numel() == storage_numel &&
               !src.is_conj() && !src.is_neg();
  if (!buffer) {
    std::memset(out.data_ptr(), 0, out.nbytes());  // never written: zeros
    return out;
  }
  const auto elem = static_cast<int64_t>(element_size(dtype));
  const int64_t buffer_numel = static_cast<int64_t>(buffer->byte_size()) / elem;
  bool in_one_piece = src.is_contiguous() && !src.is_conj() && !src.is_neg() && buffer->element_type() == dtype &&
                      src.storage_offset() + src.numel() <= buffer_numel;
  if (!whole && in_one_piece && buffer_numel - src.numel() <= std::max<int64_t>(src.numel(), int64_t{1} << 16)) {
    // A contiguous piece of a storage not much larger than it (a prefix of a padded result): the whole storage
    // comes down and the piece is cut on the host, instead of a program per offset and length.
    std::vector<uint8_t> all(static_cast<size_t>(buffer->byte_size()));
    note_host_sync("to_cpu");
    buffer->to_host(all.data(), all.size());
    std::memcpy(out.data_ptr(), all.data() + src.storage_offset() * elem, static_cast<size_t>(out.nbytes()));
    release_finished(src.device().index());
    raise_deferred_checks(src.device().index());
    return out;
  }
  if (!(whole && buffer->element_type() == dtype)) {
    // Materialise the view (and reinterpret the storage's type) on the device first.
    TensorProgram p(src.device().index());
    at::Tensor dense = p.output(p.read(src), src.scalar_type());
    p.run();
    buffer = device_data(dense.storage()).buffer();
  }
  note_host_sync("to_cpu");
  buffer->to_host(out.data_ptr(), static_cast<size_t>(out.nbytes()));
  release_finished(src.device().index());
  raise_deferred_checks(src.device().index());  // a failed check of the programs before this read raises here
  return out;
}

}  // namespace torch_tpu
