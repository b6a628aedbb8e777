#include "distributed/staging.h"

#include <cstring>

#include "exec/device_data.h"
#include "exec/state.h"
#include "runtime/pjrt.h"

namespace torch_tpu {

// On the XLA-CPU plugin a device buffer is host memory: its address once it is computed, or null when the plugin is
// another one or cannot say where the buffer lives.
void* host_address(const Buffer& buffer) {
  const BackendState& state = backend_state();
  if (state.client->platform_name() != "cpu") return nullptr;
  const PJRT_Api* api = state.client->api();
  if (api->struct_size <= offsetof(PJRT_Api, PJRT_Buffer_UnsafePointer) || !api->PJRT_Buffer_UnsafePointer) {
    return nullptr;
  }
  buffer.await_ready();  // computed (and the producer's error, if any, raised here)
  TPU_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args, args);
  args.buffer = buffer.raw();
  if (PJRT_Error* err = api->PJRT_Buffer_UnsafePointer(&args)) {
    pjrt_take_error(api, err, "PJRT_Buffer_UnsafePointer");  // not supported: use the plugin's transfer
    return nullptr;
  }
  return reinterpret_cast<void*>(args.buffer_pointer);
}

// Reads a device buffer with one memcpy (XLA-CPU), instead of the plugin's transfer (which hands copies above
// ~100 KB to a worker thread: about a millisecond per op on a busy host). False when that does not apply.
bool read_host_visible(const Buffer& buffer, void* dst, size_t nbytes) {
  if (static_cast<int64_t>(nbytes) > buffer.byte_size()) return false;
  void* src = host_address(buffer);
  if (src == nullptr) return false;
  std::memcpy(dst, src, nbytes);
  return true;
}

bool whole_storage(const at::Tensor& t) {
  const int64_t storage_numel = static_cast<int64_t>(t.storage().nbytes()) / static_cast<int64_t>(t.element_size());
  return t.storage_offset() == 0 && t.is_contiguous() && t.numel() == storage_numel && !t.is_conj() && !t.is_neg();
}

// The copy back of a result that fills a whole tpu storage, on the XLA-CPU plugin: the host buffer becomes the
// storage's device buffer without a copy (zero-copy host semantics). The pool gets the host buffer back when PJRT is
// done with it (the device buffer was freed or replaced). False when this does not apply; then copy_ does the work.
bool adopt_as_device_buffer(const at::Tensor& dst, const at::Tensor& host, const std::shared_ptr<HostPool>& pool) {
  const BackendState& state = backend_state();
  if (state.client->platform_name() != "cpu" || !on_tpu(dst) || !host.is_cpu() || dst.numel() == 0) return false;
  if (!whole_storage(dst) || host.scalar_type() != dst.scalar_type() || !host.is_contiguous() ||
      host.numel() != dst.numel() ||
      reinterpret_cast<uintptr_t>(host.data_ptr()) % 64 != 0) {
    return false;
  }
  Event done;
  auto buffer = state.client->buffer_from_host(host.data_ptr(), element_type_of(dst.scalar_type()), {dst.numel()}, {},
                                               state.pjrt_index.at(dst.device().index()),
                                               HostSemantics::kImmutableZeroCopy, &done);
  device_data(dst.storage()).set_buffer(std::move(buffer));
  std::move(done).on_ready([host, pool](const Error&) { pool->release(host); });
  return true;
}

at::Tensor HostPool::acquire(const at::Tensor& like) {
  const size_t nbytes = static_cast<size_t>(like.numel()) * like.element_size();
  at::Tensor bytes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(nbytes);
    if (it != free_.end()) {
      bytes = std::move(it->second);
      free_.erase(it);
      free_bytes_ -= nbytes;
    }
  }
  if (!bytes.defined()) bytes = at::empty({static_cast<int64_t>(nbytes)}, at::TensorOptions().dtype(at::kByte));
  return bytes.view(like.scalar_type()).view(like.sizes());
}

void HostPool::release(const at::Tensor& t) {
  const size_t nbytes = t.nbytes();
  at::Tensor bytes = t.view({-1}).view(at::kByte);
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_bytes_ + nbytes > kMaxFreeBytes) return;
  free_.emplace(nbytes, std::move(bytes));
  free_bytes_ += nbytes;
}

}  // namespace torch_tpu
