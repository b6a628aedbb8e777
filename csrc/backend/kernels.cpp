// The hand-written tpu kernels: factories, views, copies between devices, scalar reads, resizing, and the
// registration of every lowered op (one boxed kernel serves the whole lowering table) and the CPU fallback.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <torch/library.h>

#include "backend/storage.h"
#include "exec/state.h"
#include "backend/lowered_op.h"
#include "exec/device_data.h"
#include "exec/graph.h"
#include "exec/sync.h"
#include "exec/tensor_program.h"
#include "lowering/lib/op_context.h"
#include "lowering/lib/views.h"

namespace torch_tpu {

bool copy_non_blocking(const at::Tensor& self, const at::Tensor& src);  // backend/async_copy.cpp

namespace {

c10::Device tpu_device_of(std::optional<c10::Device> device) {
  c10::Device d = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  if (!d.has_index()) d = c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(current_device()));
  check_device_index(d.index());
  return d;
}

at::Tensor tpu_empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                     std::optional<at::Device> device, std::optional<bool> pin_memory,
                     std::optional<at::MemoryFormat> memory_format) {
  c10::Device d = tpu_device_of(device);
  c10::DeviceGuard guard(d);
  at::ScalarType t = dtype.value_or(at::get_default_dtype_as_scalartype());
  element_type_of(t);  // unsupported dtypes fail here, with a TypeError
  return at::detail::empty_generic(size, &tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t,
                                   memory_format);
}

at::Tensor tpu_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                             std::optional<at::Layout> layout, std::optional<at::Device> device,
                             std::optional<bool> pin_memory) {
  c10::Device d = tpu_device_of(device);
  c10::DeviceGuard guard(d);
  at::ScalarType t = dtype.value_or(at::get_default_dtype_as_scalartype());
  element_type_of(t);
  return at::detail::empty_strided_generic(size, stride, &tpu_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t);
}

// Grows or shrinks a storage's bytes, keeping the common prefix (new bytes read as zeros).
void resize_storage_bytes(c10::Storage storage, size_t new_nbytes) {
  DeviceData& old = device_data(storage);
  int device = old.device();
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  // The open graph's ops hold this storage and find its contents through its DataPtr: they run before it changes.
  if (old.membership() != DeviceData::kNone) flush_device(device);
  c10::DataPtr fresh = tpu_allocator().allocate(new_nbytes);
  std::shared_ptr<Buffer> old_buffer = old.buffer();
  int64_t old_nbytes = static_cast<int64_t>(storage.nbytes());
  storage.set_data_ptr_noswap(std::move(fresh));
  storage.set_nbytes(new_nbytes);
  if (!old_buffer || old_nbytes == 0 || new_nbytes == 0) return;
  // Copy the kept prefix as bytes on the device.
  TensorProgram p(device);
  HloBuilder& b = p.builder();
  Value raw = p.external(old_buffer);
  Value bytes = reinterpret_storage(b, raw, ElementType::kU8, old_nbytes);
  int64_t keep = std::min<int64_t>(old_nbytes, static_cast<int64_t>(new_nbytes));
  Value prefix = b.slice(bytes, {0}, {keep});
  Value grown = keep < static_cast<int64_t>(new_nbytes)
                    ? b.pad(prefix, b.constant(0, ElementType::kU8), {0},
                            {static_cast<int64_t>(new_nbytes) - keep}, {0})
                    : prefix;
  at::Tensor view = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device));
  view.unsafeGetTensorImpl()->set_storage_keep_dtype(storage);
  view.unsafeGetTensorImpl()->set_sizes_contiguous({static_cast<int64_t>(new_nbytes)});
  p.write(view, grown);
  p.run();
}

const at::Tensor& tpu_resize_(const at::Tensor& self, c10::IntArrayRef size,
                              std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  int64_t itemsize = static_cast<int64_t>(self.element_size());
  int64_t needed = static_cast<int64_t>(
      at::detail::computeStorageNbytesContiguous(size, itemsize, self.storage_offset()));
  if (needed > static_cast<int64_t>(self.storage().nbytes())) resize_storage_bytes(self.storage(), needed);
  impl->set_sizes_contiguous(size);
  if (memory_format && *memory_format != at::MemoryFormat::Preserve) impl->empty_tensor_restride(*memory_format);
  return self;
}

at::Tensor& tpu_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(self.defined() && src.defined(), "copy_: both tensors must be defined");
  if (self.numel() == 0) return self;
  at::assert_no_internal_overlap(self);
  if (src.device() == self.device()) at::assert_no_partial_overlap(self, src);  // as CPU's copy_
  if (non_blocking && copy_non_blocking(self, src)) return self;  // pinned host memory <-> tpu (async_copy.cpp)
  bool dst_tpu = self.device().type() == c10::DeviceType::PrivateUse1;
  bool src_tpu = src.device().type() == c10::DeviceType::PrivateUse1;
  if (dst_tpu && src_tpu && self.device() == src.device()) {
    record_same_device_copy(self, src);
    return self;
  }
  if (dst_tpu && src_tpu) {  // between tpu devices: through the host
    at::Tensor host = copy_device_to_host(src);
    return tpu_copy_(self, host, non_blocking);
  }
  if (dst_tpu) {
    TORCH_CHECK(src.is_cpu(), "copy_ to tpu from ", src.device(), " is not supported; copy through the CPU");
    at::Tensor host = src.resolve_conj().resolve_neg().to(self.scalar_type()).expand(self.sizes()).contiguous();
    copy_host_to_device(host, self);
    return self;
  }
  TORCH_CHECK(self.is_cpu(), "copy_ from tpu to ", self.device(), " is not supported; copy through the CPU");
  at::Tensor host = copy_device_to_host(src);
  self.copy_(host);
  return self;
}

at::Tensor tpu_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  tpu_copy_(out, self, non_blocking);
  return dst;
}

at::Tensor tpu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::Tensor out = dst;
  if (out.sizes() != self.sizes()) out.resize_(self.sizes());
  tpu_copy_(out, self, false);
  return dst;
}

at::Scalar tpu_local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  return at::_local_scalar_dense(copy_device_to_host(self));
}

// As on the CPU: an omitted stride means contiguous, the storage grows when the view reaches past its end.
at::Tensor& tpu_set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                            c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, offset, size, stride, /*check_offset_in_bounds=*/false);
  auto* impl = self.unsafeGetTensorImpl();
  int64_t itemsize = static_cast<int64_t>(self.element_size());
  bool contiguous = stride.empty() && !size.empty();
  size_t needed = contiguous ? at::detail::computeStorageNbytesContiguous(size, itemsize, offset)
                             : at::detail::computeStorageNbytes(size, stride, itemsize, offset);
  if (needed > self.storage().nbytes() && c10::multiply_integers(size) > 0) {
    TORCH_CHECK(self.storage().resizable(), "setStorage: sizes ", size, ", strides ", stride, ", storage offset ",
                offset, " need ", needed, " bytes, more than the ", self.storage().nbytes(),
                " bytes of a storage that is not resizable");
    resize_storage_bytes(self.storage(), needed);
  }
  impl->set_storage_offset(offset);
  if (contiguous) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  return self;
}

at::Tensor& tpu_set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  return tpu_set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& tpu_set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return tpu_set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

// nn.Module._apply and Tensor.data assignment keep the Parameter object (and so tied weights and optimizers built
// before .to("tpu")) only when this says the CPU and tpu tensor types may be swapped under one TensorImpl, as CPU
// and CUDA may. tpu tensors are plain TensorImpls, so they may.
bool tpu_has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided &&
           (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1) &&
           !t.is_quantized() && !t.unsafeGetTensorImpl()->is_python_dispatch();
  };
  if (!dense(self) || !dense(from)) {
    return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
  }
  return true;
}

// Autograd asks for "efficient" zero tensors (sgn's gradient for real inputs); on tpu they are plain zeros, filled
// on the device, so nothing reaches the CPU fallback.
at::Tensor tpu_efficientzerotensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                   std::optional<at::Layout> layout, std::optional<at::Device> device,
                                   std::optional<bool> pin_memory) {
  (void)layout;
  (void)pin_memory;
  return at::zeros(size, at::TensorOptions().dtype(dtype).device(device));
}

// PyTorch's own clone (an empty_like and a copy_), except that in fused mode the result is booked only once the
// graph gives it contents, as every op's result is: a copy made for a reshape that dies inside the graph never
// counts towards memory_allocated() or its peak.
at::Tensor tpu_clone(const at::Tensor& self, std::optional<c10::MemoryFormat> memory_format) {
  DeferredBooking deferred(eager_mode() == EagerMode::kFused);
  return at::native::clone(self, memory_format);
}


}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(tpu_empty));
  m.impl("empty_strided", TORCH_FN(tpu_empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  // Views, never copies: a fallback would return a copy that later writes to either side do not reach.
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("resize_", TORCH_FN(tpu_resize_));
  m.impl("copy_", TORCH_FN(tpu_copy_));
  m.impl("clone", TORCH_FN(tpu_clone));
  m.impl("_copy_from", TORCH_FN(tpu_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(tpu_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(tpu_local_scalar_dense));
  m.impl("set_.source_Storage", TORCH_FN(tpu_set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(tpu_set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(tpu_set_source_tensor));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(tpu_has_compatible_shallow_copy_type));
  m.impl("_efficientzerotensor", TORCH_FN(tpu_efficientzerotensor));
  // The lowered ops register themselves: backend/registry.cpp.
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&run_fallback>());
}

// Storage-level resize (torch.UntypedStorage.resize_) goes through the hooks; they call this.
void resize_tpu_storage(const c10::Storage& storage, size_t nbytes) { resize_storage_bytes(storage, nbytes); }

}  // namespace torch_tpu
