// Non-blocking copies between pinned host memory and tpu (Tensor.to(..., non_blocking=True), copy_(non_blocking)).
// Host -> device: the upload starts and the op returns; the device buffer is usable at once (programs and host reads
// wait for its definition) and the pinned source is kept alive until the plugin is done with it.
// Device -> host: the download starts and the op returns; like CUDA, the host data may be read once a sync point
// (torch.tpu.synchronize(), an Event's synchronize/query, Stream.synchronize) has waited for it.
// Anything else (pageable memory, views, dtype changes) takes the ordinary synchronous path.
#include <ATen/ATen.h>

#include "backend/storage.h"
#include "exec/state.h"
#include "exec/sync.h"
#include "exec/tensor_program.h"
#include "lowering/lib/op_context.h"

namespace torch_tpu {
namespace {

// The tensor spans its whole storage, densely, from offset 0.
bool whole_storage(const at::Tensor& t) {
  return t.storage_offset() == 0 && t.is_contiguous() &&
         static_cast<size_t>(t.numel()) * t.element_size() == t.storage().nbytes();
}

bool upload(const at::Tensor& dst, const at::Tensor& src) {
  if (!src.is_pinned() || !src.is_contiguous() || src.scalar_type() != dst.scalar_type() ||
      src.sizes() != dst.sizes() || !whole_storage(dst) || src.is_conj() || src.is_neg()) {
    return false;
  }
  int device = dst.device().index();
  const BackendState& state = backend_state();
  ElementType dtype = element_type_of(src.scalar_type());
  Event done;
  auto buffer = state.client->buffer_from_host(src.data_ptr(), dtype, {src.numel()}, {}, state.pjrt_index[device],
                                               HostSemantics::kImmutableUntilTransferCompletes, &done);
  device_data(dst.storage()).set_buffer(std::move(buffer));
  // The plugin reads the pinned source until `done`: keep it alive that long (the callback owns a reference).
  std::move(done).on_ready([keep = src](const Error&) {});
  return true;
}

bool download(const at::Tensor& dst, const at::Tensor& src) {
  if (!dst.is_pinned() || !dst.is_contiguous() || dst.scalar_type() != src.scalar_type() ||
      dst.sizes() != src.sizes() || src.is_conj() || src.is_neg()) {
    return false;
  }
  int device = src.device().index();
  at::Tensor dense = src;
  std::shared_ptr<Buffer> buffer = device_data(src.storage()).buffer();
  if (!whole_storage(src) || !buffer || buffer->element_type() != element_type_of(src.scalar_type())) {
    TensorProgram p(device);  // materialise the view (or zeros) on the device first
    dense = p.output(p.read(src), src.scalar_type());
    p.run();
    buffer = device_data(dense.storage()).buffer();
  }
  Event done = buffer->to_host_async(dst.data_ptr(), static_cast<size_t>(dst.nbytes()));
  // The device buffer and the host destination stay alive until a sync point has seen the copy finish.
  auto keep = std::make_shared<std::pair<std::shared_ptr<Buffer>, at::Tensor>>(std::move(buffer), dst);
  track_pending(device, std::move(done), std::move(keep));
  return true;
}

}  // namespace

// True when a non-blocking copy was started; false leaves the copy to the synchronous path.
bool copy_non_blocking(const at::Tensor& self, const at::Tensor& src) {
  if (self.numel() == 0) return false;
  bool dst_tpu = self.device().type() == c10::DeviceType::PrivateUse1;
  bool src_tpu = src.device().type() == c10::DeviceType::PrivateUse1;
  if (dst_tpu && src.is_cpu()) return upload(self, src);
  if (src_tpu && self.is_cpu()) return download(self, src);
  return false;
}

}  // namespace torch_tpu
